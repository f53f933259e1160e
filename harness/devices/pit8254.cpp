#include "harness/devices/pit8254.h"

namespace vmxsim {

uint64_t Pit8254::cycleOfTick(uint64_t Start, uint64_t K) {
  unsigned __int128 Num = (unsigned __int128)K * kVirtualHz;
  return Start + uint64_t((Num + kPitHz - 1) / kPitHz);
}

uint64_t Pit8254::ticksBetween(uint64_t Start, uint64_t T) {
  return uint64_t((unsigned __int128)(T - Start) * kPitHz / kVirtualHz);
}

uint64_t Pit8254::nextTimerEvent() const {
  const Channel &C = Ch[0];
  if (!C.Counting || !C.NextTick)
    return kNoTimerEvent;
  return cycleOfTick(C.Start, C.NextTick);
}

void Pit8254::advanceTo(uint64_t T) {
  Channel &C = Ch[0];
  if (!C.Counting || !C.NextTick || T < C.Start || cycleOfTick(C.Start, C.NextTick) > T)
    return;
  if (C.Mode == 2 || C.Mode == 3) {
    // Rate generator / square wave: one edge per period; the next is the first period
    // boundary after T (missed periods collapse into this edge, see the header).
    C.NextTick = (ticksBetween(C.Start, T) / C.Count + 1) * C.Count;
  } else {
    C.NextTick = 0; // mode 0/4: OUT stays high until the channel is reprogrammed
  }
  if (Irq0)
    Irq0();
}

uint16_t Pit8254::currentCount(const Channel &C, uint64_t T) const {
  if (!C.Counting || T < C.Start)
    return uint16_t(C.Count);
  const uint64_t Ticks = ticksBetween(C.Start, T);
  if (C.Mode == 2 || C.Mode == 3)
    return uint16_t(C.Count - Ticks % C.Count); // 1..Count (65536 reads 0)
  // Modes 0, 1, 4, 5 count down and wrap through 0xffff (82C54 data sheet, mode 0).
  return uint16_t(C.Count - Ticks);
}

void Pit8254::load(unsigned Idx, uint32_t Count) {
  Channel &C = Ch[Idx];
  advanceTo(now());
  C.Count = Count ? Count : 0x10000;
  C.Start = now();
  // Modes 1 and 5 wait for a gate edge; channel 0's gate is tied high (never an edge).
  C.Counting = C.Mode != 1 && C.Mode != 5;
  C.NextTick = (Idx == 0 && C.Counting) ? C.Count : 0;
}

void Pit8254::writeControl(uint8_t V) {
  const unsigned Sel = V >> 6;
  if (Sel == 3)
    return; // read-back command: not modelled (ignored)
  Channel &C = Ch[Sel];
  const uint8_t Access = (V >> 4) & 3;
  if (Access == 0) {
    // Counter latch command: freezes the count until it is read (once latched, further
    // latch commands are ignored until the latch is read).
    if (!C.Latched) {
      C.Latched = true;
      C.LatchValue = currentCount(C, now());
      C.LatchHigh = false;
    }
    return;
  }
  advanceTo(now());
  // A control word stops the channel until a new count is written (data sheet).
  C.Access = Access;
  C.Mode = (V >> 1) & 7;
  if (C.Mode >= 6)
    C.Mode = uint8_t(C.Mode - 4); // X10 = 2, X11 = 3
  C.Bcd = V & 1;
  C.Counting = false;
  C.NextTick = 0;
  C.WriteHigh = C.ReadHigh = C.Latched = false;
}

uint8_t Pit8254::readByte(uint16_t Offset) {
  if (Offset == 3)
    return 0xff; // the control register is write-only
  Channel &C = Ch[Offset];
  uint16_t V;
  bool High;
  if (C.Latched) {
    V = C.LatchValue;
    if (C.Access == 3) {
      High = C.LatchHigh;
      C.LatchHigh = !C.LatchHigh;
      C.Latched = !High; // the latch is released once both bytes are read
    } else {
      High = C.Access == 2;
      C.Latched = false;
    }
  } else {
    advanceTo(now());
    V = currentCount(C, now());
    if (C.Access == 3) {
      High = C.ReadHigh;
      C.ReadHigh = !C.ReadHigh;
    } else {
      High = C.Access == 2;
    }
  }
  return uint8_t(High ? V >> 8 : V);
}

void Pit8254::writeByte(uint16_t Offset, uint8_t V) {
  if (Offset == 3) {
    writeControl(V);
    return;
  }
  Channel &C = Ch[Offset];
  switch (C.Access) {
  case 1:
    load(Offset, V);
    return;
  case 2:
    load(Offset, uint32_t(V) << 8);
    return;
  default:
    if (!C.WriteHigh) {
      C.LowByte = V;
      C.WriteHigh = true;
      // Mode 0: writing the first byte stops the count (82C54 data sheet, mode 0).
      if (C.Mode == 0) {
        advanceTo(now());
        C.Counting = false;
        C.NextTick = 0;
      }
      return;
    }
    C.WriteHigh = false;
    load(Offset, uint32_t(C.LowByte) | uint32_t(V) << 8);
    return;
  }
}

} // namespace vmxsim
