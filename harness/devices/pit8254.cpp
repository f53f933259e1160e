#include "harness/devices/pit8254.h"

namespace vmxsim {

namespace {

uint32_t bcdToBinary(uint32_t V) {
  return (V & 0xf) + ((V >> 4) & 0xf) * 10 + ((V >> 8) & 0xf) * 100 + ((V >> 12) & 0xf) * 1000;
}

uint16_t binaryToBcd(uint32_t V) {
  return uint16_t((V % 10) | (V / 10 % 10) << 4 | (V / 100 % 10) << 8 | (V / 1000 % 10) << 12);
}

} // namespace

uint64_t Pit8254::cycleOfTick(uint64_t Start, uint64_t K) {
  unsigned __int128 Num = (unsigned __int128)K * kVirtualHz;
  return Start + uint64_t((Num + kPitHz - 1) / kPitHz);
}

uint64_t Pit8254::ticksBetween(uint64_t Start, uint64_t T) {
  return uint64_t((unsigned __int128)(T - Start) * kPitHz / kVirtualHz);
}

// Modes 0, 2, 3 and 4 count only while GATE is high; modes 1 and 5 use GATE only as a
// trigger (82C54 data sheet, "Gate Pin Operations Summary").
bool Pit8254::running(const Channel &C) const {
  return C.Triggered && (C.Mode == 1 || C.Mode == 5 || C.Gate);
}

uint64_t Pit8254::ticksAt(const Channel &C, uint64_t T) const {
  if (!C.Triggered)
    return 0;
  return C.TicksAtRef + (running(C) && T >= C.Ref ? ticksBetween(C.Ref, T) : 0);
}

bool Pit8254::outputAt(const Channel &C, uint64_t T) const {
  if (!C.Triggered)
    return C.Mode != 0; // mode 0: OUT low after the control word; the others: high
  if ((C.Mode == 2 || C.Mode == 3) && !C.Gate)
    return true; // GATE low forces OUT high
  const uint64_t K = ticksAt(C, T), N = C.Count;
  switch (C.Mode) {
  case 0:
  case 1:
    return K >= N;
  case 2:
    return N == 1 || K % N != N - 1; // low for the one count at which the counter is 1
  case 3:
    return K % N < (N + 1) / 2;
  default: // 4, 5: a one-count strobe
    return K != N;
  }
}

uint16_t Pit8254::currentCount(const Channel &C, uint64_t T) const {
  const uint32_t Modulus = C.Bcd ? 10000 : 0x10000;
  uint64_t V;
  if (!C.Triggered) {
    V = C.Count;
  } else {
    const uint64_t K = ticksAt(C, T), N = C.Count;
    if (C.Mode == 2) {
      V = N - K % N; // 1..N
    } else if (C.Mode == 3) {
      // Two counts per CLK, from N at the start of each half period.
      const uint64_t P = K % N, Half = (N + 1) / 2;
      V = N - 2 * (P < Half ? P : P - Half);
    } else {
      V = (N + Modulus - K % Modulus) % Modulus; // down through 0 and around
    }
  }
  V %= Modulus; // 65536 reads 0x0000, 10000 reads 0000
  return C.Bcd ? binaryToBcd(uint32_t(V)) : uint16_t(V);
}

void Pit8254::trigger(Channel &C, uint64_t T) {
  C.Triggered = true;
  C.NullCount = false;
  C.TicksAtRef = 0;
  C.Ref = T;
}

void Pit8254::fold(Channel &C, uint64_t T) {
  C.TicksAtRef = ticksAt(C, T);
  C.Ref = T;
}

// The tick (in K) of channel Idx's next rising OUT edge, which for channel 0 is IRQ0.
void Pit8254::scheduleEdge(unsigned Idx, uint64_t T) {
  Channel &C = Ch[Idx];
  C.NextEdge = 0;
  if (!running(C))
    return;
  const uint64_t K = ticksAt(C, T), N = C.Count;
  switch (C.Mode) {
  case 0:
  case 1:
    C.NextEdge = K < N ? N : 0;
    return;
  case 2:
  case 3:
    C.NextEdge = (K / N + 1) * N;
    return;
  default:
    C.NextEdge = K < N + 1 ? N + 1 : 0;
    return;
  }
}

uint64_t Pit8254::nextTimerEvent() const {
  const Channel &C = Ch[0];
  if (!running(C) || !C.NextEdge)
    return kNoTimerEvent;
  return cycleOfTick(C.Ref, C.NextEdge - C.TicksAtRef);
}

void Pit8254::advanceTo(uint64_t T) {
  Channel &C = Ch[0];
  if (!running(C) || !C.NextEdge || T < C.Ref ||
      cycleOfTick(C.Ref, C.NextEdge - C.TicksAtRef) > T)
    return;
  if (C.Mode == 2 || C.Mode == 3) {
    // One edge per period; the next is the first period boundary after T (missed periods
    // collapse into this edge, see the header).
    C.NextEdge = (ticksAt(C, T) / C.Count + 1) * C.Count;
  } else {
    C.NextEdge = 0; // one-shot: OUT stays high until the channel is reprogrammed
  }
  if (Irq0)
    Irq0();
}

void Pit8254::setGate(unsigned Idx, bool Level) {
  Channel &C = Ch[Idx];
  const uint64_t T = now();
  advanceTo(T);
  if (C.Gate == Level)
    return;
  fold(C, T); // the count so far, measured with the old GATE
  C.Gate = Level;
  // A rising edge triggers modes 1 and 5 and reloads modes 2 and 3 (data sheet, "Gate
  // Pin Operations Summary"); in modes 0 and 4 GATE only enables counting.
  if (Level && C.Loaded && C.Mode != 0 && C.Mode != 4)
    trigger(C, T);
  scheduleEdge(Idx, T);
}

bool Pit8254::output(unsigned Idx) {
  const uint64_t T = now();
  advanceTo(T);
  return outputAt(Ch[Idx], T);
}

void Pit8254::load(unsigned Idx, uint32_t Count) {
  Channel &C = Ch[Idx];
  const uint64_t T = now();
  advanceTo(T);
  if (C.Bcd)
    Count = bcdToBinary(Count);
  C.Count = Count ? Count : (C.Bcd ? 10000 : 0x10000);
  C.Loaded = true;
  // Modes 1 and 5 wait for a GATE rising edge (channels 0 and 1: never, GATE is tied
  // high); the others start counting now (while GATE is high).
  if (C.Mode != 1 && C.Mode != 5)
    trigger(C, T);
  scheduleEdge(Idx, T);
}

void Pit8254::writeControl(uint8_t V) {
  const unsigned Sel = V >> 6;
  if (Sel == 3) {
    readBack(V);
    return;
  }
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
  // A control word stops the channel until a new count is written (data sheet,
  // "Write Operations").
  C.Access = Access;
  C.ControlBits = V & 0x3f;
  C.Mode = (V >> 1) & 7;
  if (C.Mode >= 6)
    C.Mode = uint8_t(C.Mode - 4); // X10 = 2, X11 = 3
  C.Bcd = V & 1;
  C.Loaded = C.Triggered = false;
  C.NullCount = true;
  C.NextEdge = 0;
  C.WriteHigh = C.ReadHigh = C.Latched = false;
}

// Read-back command (82C54 data sheet, "Read-Back Command"): bit 5 clear latches the
// count, bit 4 clear latches the status of each counter selected by bits 3-1.
void Pit8254::readBack(uint8_t V) {
  const uint64_t T = now();
  advanceTo(T);
  for (unsigned I = 0; I < 3; ++I) {
    if (!(V & (2u << I)))
      continue;
    Channel &C = Ch[I];
    if (!(V & 0x20) && !C.Latched) {
      C.Latched = true;
      C.LatchValue = currentCount(C, T);
      C.LatchHigh = false;
    }
    if (!(V & 0x10) && !C.StatusLatched) {
      C.StatusLatched = true;
      C.StatusValue = uint8_t(outputAt(C, T) << 7 | C.NullCount << 6 | C.ControlBits);
    }
  }
}

uint8_t Pit8254::readByte(uint16_t Offset) {
  if (Offset == 3)
    return 0xff; // the control register is write-only
  Channel &C = Ch[Offset];
  if (C.StatusLatched) {
    C.StatusLatched = false; // the status byte comes first when both are latched
    return C.StatusValue;
  }
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
  writeRegister(Offset, V);
  rearmed();
}

void Pit8254::writeRegister(uint16_t Offset, uint8_t V) {
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
      // Mode 0: writing the first byte stops the count and sets OUT low (data sheet,
      // mode 0).
      if (C.Mode == 0) {
        advanceTo(now());
        C.Triggered = false;
        C.NextEdge = 0;
      }
      return;
    }
    C.WriteHigh = false;
    load(Offset, uint32_t(C.LowByte) | uint32_t(V) << 8);
    return;
  }
}

} // namespace vmxsim
