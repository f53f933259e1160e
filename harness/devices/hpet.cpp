#include "harness/devices/hpet.h"

#include <algorithm>

namespace vmxsim {

namespace {
constexpr uint64_t kTimerWritable = Hpet::kLevel | Hpet::kIntEnable | Hpet::kPeriodic |
                                    Hpet::kValSet | Hpet::kMode32 | uint64_t(0x1f) << 9;
unsigned routeOf(uint64_t Config) { return unsigned(Config >> 9) & 0x1f; }
} // namespace

uint64_t Hpet::counterAt(uint64_t Tc) const {
  if (!enabled() || Tc <= RefCycle)
    return CounterBase;
  return CounterBase + (Tc - RefCycle) / kCyclesPerCount;
}

uint64_t Hpet::cycleOfCount(uint64_t Count) const {
  if (Count <= CounterBase)
    return RefCycle;
  const uint64_t Counts = Count - CounterBase;
  if (Counts > (kNoTimerEvent - 1 - RefCycle) / kCyclesPerCount)
    return kNoTimerEvent; // beyond the end of virtual time
  return RefCycle + Counts * kCyclesPerCount;
}

// The first counter value >= From at which timer I's comparator matches ("Timer
// Operation": 64-bit comparators compare the whole counter, 32-bit ones its low half).
void Hpet::recompute(unsigned I, uint64_t From) {
  Timer &X = T[I];
  if (X.Config & kMode32) {
    const uint32_t Delta = uint32_t(X.Comparator) - uint32_t(From);
    X.Match = From + Delta;
  } else {
    X.Match = X.Comparator >= From ? X.Comparator : kNoMatch;
  }
}

void Hpet::route(unsigned I, bool &Legacy, unsigned &Line, bool &Routed) const {
  // "Legacy Replacement Option": timer 0 to IRQ0 / pin 2, timer 1 to IRQ8 / pin 8.
  if (legacyReplacement() && I < 2) {
    Legacy = true;
    Line = I == 0 ? 0 : 8;
    Routed = true;
    return;
  }
  Legacy = false;
  Line = routeOf(T[I].Config);
  Routed = (kRouteCap >> Line) & 1;
}

void Hpet::driveLine(unsigned I) {
  Timer &X = T[I];
  bool Legacy, Routed;
  unsigned Line;
  route(I, Legacy, Line, Routed);
  const bool Want = enabled() && Routed && (X.Config & kLevel) && (X.Config & kIntEnable) &&
                    ((Status >> I) & 1);
  if (Want == X.Line)
    return;
  X.Line = Want;
  if (SetLine)
    SetLine(Legacy, Line, Want);
}

void Hpet::fire(unsigned I) {
  Timer &X = T[I];
  if (X.Config & kLevel) {
    Status |= uint64_t(1) << I; // set even while the interrupt is disabled
    driveLine(I);
    return;
  }
  bool Legacy, Routed;
  unsigned Line;
  route(I, Legacy, Line, Routed);
  if (enabled() && Routed && (X.Config & kIntEnable) && SetLine) {
    SetLine(Legacy, Line, true);
    SetLine(Legacy, Line, false);
  }
}

uint64_t Hpet::nextTimerEvent() const {
  if (!enabled())
    return kNoTimerEvent;
  uint64_t Ev = kNoTimerEvent;
  for (const Timer &X : T)
    if ((X.Config & kIntEnable) && X.Match != kNoMatch)
      Ev = std::min(Ev, cycleOfCount(X.Match));
  return Ev;
}

bool Hpet::canWake() const {
  if (!enabled())
    return false;
  for (unsigned I = 0; I < kTimers; ++I) {
    bool Legacy, Routed;
    unsigned Line;
    route(I, Legacy, Line, Routed);
    if ((T[I].Config & kIntEnable) && T[I].Match != kNoMatch && Routed &&
        (!LineObserved || LineObserved(Legacy, Line)))
      return true;
  }
  return false;
}

void Hpet::advanceTo(uint64_t Tc) {
  if (!enabled())
    return;
  const uint64_t C = counterAt(Tc);
  for (unsigned I = 0; I < kTimers; ++I) {
    Timer &X = T[I];
    if (X.Match == kNoMatch || X.Match > C)
      continue;
    const bool Mode32 = X.Config & kMode32;
    const uint64_t Period = Mode32 ? uint32_t(X.Period) : X.Period;
    if ((X.Config & kPeriodic) && Period) {
      // "Periodic Mode": the comparator advances by the period at each match; missed
      // periods go in one step.
      const uint64_t Step = ((C - X.Match) / Period + 1) * Period;
      X.Comparator += Step;
      if (Mode32)
        X.Comparator = uint32_t(X.Comparator);
      X.Match += Step;
    } else {
      recompute(I, X.Match + 1); // one-shot: next match after the counter wraps
    }
    fire(I);
  }
}

void Hpet::setCounterConfig(uint64_t New) {
  const uint64_t Tc = now();
  advanceTo(Tc);
  CounterBase = counterAt(Tc);
  RefCycle = Tc;
  for (Timer &X : T)
    if (X.Line) { // lines are re-driven below with the new routing
      bool Legacy, Routed;
      unsigned Line;
      route(unsigned(&X - T), Legacy, Line, Routed);
      X.Line = false;
      if (SetLine)
        SetLine(Legacy, Line, false);
    }
  const bool LegacyBefore = legacyReplacement();
  Config = New & (kEnable | kLegacy);
  if (legacyReplacement() != LegacyBefore && LegacyChanged)
    LegacyChanged(legacyReplacement());
  for (unsigned I = 0; I < kTimers; ++I) {
    recompute(I, CounterBase);
    driveLine(I);
  }
  advanceTo(Tc); // comparators equal to the counter match at once
}

void Hpet::writeTimerConfig(unsigned I, uint64_t V) {
  Timer &X = T[I];
  const uint64_t Tc = now();
  if (X.Line) {
    bool Legacy, Routed;
    unsigned Line;
    route(I, Legacy, Line, Routed);
    X.Line = false;
    if (SetLine)
      SetLine(Legacy, Line, false);
  }
  if (!((kRouteCap >> routeOf(V)) & 1))
    V = (V & ~(uint64_t(0x1f) << 9)) | (X.Config & (uint64_t(0x1f) << 9));
  const uint64_t Old = X.Config;
  X.Config = (X.Config & ~kTimerWritable) | (V & kTimerWritable);
  if ((X.Config & kMode32) && !(Old & kMode32)) {
    X.Comparator = uint32_t(X.Comparator);
    X.Period = uint32_t(X.Period);
  }
  if (!(X.Config & kLevel))
    Status &= ~(uint64_t(1) << I); // edge-triggered timers have no status
  if ((X.Config ^ Old) & (kMode32 | kPeriodic))
    recompute(I, counterAt(Tc));
  driveLine(I);
}

void Hpet::writeComparator(unsigned I, uint64_t V, uint64_t Mask, bool LastHalf) {
  Timer &X = T[I];
  const uint64_t Tc = now();
  const bool Mode32 = X.Config & kMode32;
  if (Mode32)
    Mask &= 0xffffffffu; // a 32-bit comparator has no upper half
  X.Period = (X.Period & ~Mask) | (V & Mask);
  if (!(X.Config & kPeriodic) || (X.Config & kValSet)) {
    X.Comparator = (X.Comparator & ~Mask) | (V & Mask);
    recompute(I, counterAt(Tc));
  }
  if (LastHalf)
    X.Config &= ~kValSet;
  advanceTo(Tc); // a comparator equal to the counter matches at once
}

uint32_t Hpet::readDword(uint64_t Off) {
  const uint64_t Tc = now();
  advanceTo(Tc);
  const unsigned Shift = (Off & 4) ? 32 : 0;
  const uint64_t Reg = Off & ~uint64_t(7);
  uint64_t V = 0;
  if (Reg == Capabilities) {
    V = kCapabilities;
  } else if (Reg == Configuration) {
    V = Config;
  } else if (Reg == InterruptStatus) {
    V = Status;
  } else if (Reg == MainCounter) {
    V = counterAt(Tc);
  } else if (Reg >= TimerBase && Reg < TimerBase + kTimers * TimerStride) {
    const Timer &X = T[(Reg - TimerBase) / TimerStride];
    switch ((Reg - TimerBase) % TimerStride) {
    case 0x00:
      V = X.Config;
      break;
    case 0x08:
      V = (X.Config & kMode32) ? uint32_t(X.Comparator) : X.Comparator;
      break;
    default: // FSB interrupt route: no FSB delivery
      break;
    }
  }
  return uint32_t(V >> Shift);
}

void Hpet::writeDword(uint64_t Off, uint32_t Value, bool LastHalf) {
  const uint64_t Tc = now();
  advanceTo(Tc);
  const unsigned Shift = (Off & 4) ? 32 : 0;
  const uint64_t Reg = Off & ~uint64_t(7);
  const uint64_t V = uint64_t(Value) << Shift, Mask = uint64_t(0xffffffffu) << Shift;
  if (Reg == Configuration) {
    if (!Shift)
      setCounterConfig(V);
  } else if (Reg == InterruptStatus) {
    if (!Shift) {
      Status &= ~(V & ((1u << kTimers) - 1)); // write 1 to clear
      for (unsigned I = 0; I < kTimers; ++I)
        driveLine(I);
    }
  } else if (Reg == MainCounter) {
    CounterBase = (counterAt(Tc) & ~Mask) | V;
    RefCycle = Tc;
    for (unsigned I = 0; I < kTimers; ++I)
      recompute(I, CounterBase);
    advanceTo(Tc);
  } else if (Reg >= TimerBase && Reg < TimerBase + kTimers * TimerStride) {
    const unsigned I = unsigned((Reg - TimerBase) / TimerStride);
    switch ((Reg - TimerBase) % TimerStride) {
    case 0x00:
      if (!Shift)
        writeTimerConfig(I, (T[I].Config & ~Mask) | V);
      break;
    case 0x08:
      writeComparator(I, V, Mask, LastHalf);
      break;
    default:
      break;
    }
  }
}

uint64_t Hpet::mmioRead(uint64_t Offset, unsigned SizeBytes) {
  if (SizeBytes == 8 && !(Offset & 7))
    return readDword(Offset) | uint64_t(readDword(Offset + 4)) << 32;
  // Narrower (or unaligned) accesses: the bytes of the dwords they touch.
  uint64_t V = 0;
  for (unsigned I = 0; I < SizeBytes; ++I) {
    const uint64_t B = Offset + I;
    V |= uint64_t(uint8_t(readDword(B & ~uint64_t(3)) >> (8 * (B & 3)))) << (8 * I);
  }
  return V;
}

void Hpet::mmioWrite(uint64_t Offset, unsigned SizeBytes, uint64_t Value) {
  writeSized(Offset, SizeBytes, Value);
  rearmed();
}

void Hpet::writeSized(uint64_t Offset, unsigned SizeBytes, uint64_t Value) {
  if (SizeBytes == 8 && !(Offset & 7)) {
    writeDword(Offset, uint32_t(Value), false);
    writeDword(Offset + 4, uint32_t(Value >> 32), true);
    return;
  }
  if (SizeBytes == 4 && !(Offset & 3)) {
    writeDword(Offset, uint32_t(Value), true);
    return;
  }
  // 8- and 16-bit writes: merged into their dword, which is then written.
  for (unsigned I = 0; I < SizeBytes; ++I) {
    const uint64_t B = Offset + I, D = B & ~uint64_t(3);
    const unsigned Sh = unsigned(8 * (B & 3));
    uint32_t Old = readDword(D);
    if ((D & ~uint64_t(7)) == InterruptStatus)
      Old = 0; // write-1-to-clear: only the bits written are cleared
    const uint32_t New = (Old & ~(0xffu << Sh)) | uint32_t(uint8_t(Value >> (8 * I))) << Sh;
    writeDword(D, New, true);
  }
}

} // namespace vmxsim
