// The High Precision Event Timer at 0xfed00000 (IA-PC HPET Specification 1.0a, "Register
// Definitions", "Timer Operation", "Interrupt Mapping"), one block of three comparators.
//
// General Capabilities and ID (0x000, read-only): REV_ID 1, NUM_TIM_CAP 2 (three
// timers), COUNT_SIZE_CAP 1 (64-bit counter), LEG_RT_CAP 1, VENDOR_ID 0x8086,
// COUNTER_CLK_PERIOD 10 000 000 fs: the counter runs at 100 MHz, one count per 10 virtual
// cycles (the virtual clock's 1 GHz), so count k after the counter was enabled with value
// B at cycle S is reached at exactly cycle S + 10 (k - B). General Configuration (0x010):
// ENABLE_CNF (bit 0) runs the counter and the comparators, LEG_RT_CNF (bit 1) selects the
// legacy replacement route; other bits reserved (read 0). General Interrupt Status
// (0x020): Tn_INT_STS, set by a level-triggered timer's match (also while its interrupt is
// disabled), cleared by writing 1; always 0 for edge-triggered timers. Main Counter
// (0x0f0): reads the counter now; a write sets it (the specification asks software to
// halt the counter first; a write while running re-bases it all the same).
//
// Timers n = 0-2 at 0x100 + 0x20 n: configuration and capabilities (Tn_INT_TYPE_CNF bit 1
// level, Tn_INT_ENB_CNF bit 2, Tn_TYPE_CNF bit 3 periodic, Tn_PER_INT_CAP bit 4 = 1,
// Tn_SIZE_CAP bit 5 = 1, Tn_VAL_SET_CNF bit 6, Tn_32MODE_CNF bit 8, Tn_INT_ROUTE_CNF bits
// 13:9, Tn_FSB_EN_CNF bit 14 and Tn_FSB_INT_DEL_CAP bit 15 = 0: no FSB (MSI) delivery,
// Tn_INT_ROUTE_CAP bits 63:32 = kRouteCap, I/O APIC pins 20-23), comparator (+0x08), FSB
// route (+0x10, reads 0). A route write that names a pin outside Tn_INT_ROUTE_CAP is not
// taken (the field keeps its value, which the specification's read-back check detects),
// and a timer whose route is not in the capability raises no interrupt.
//
// Comparators: a timer matches when the counter (its low 32 bits in 32-bit mode, where the
// comparator is 32 bits and its upper half reads 0) equals the comparator. One-shot: the
// comparator stays; the next match is after the counter wraps (2^32 counts in 32-bit mode,
// never in 64-bit mode). Periodic: each match adds the last value written to the
// comparator (the period) to it; a write while Tn_VAL_SET_CNF is set also sets the
// comparator itself and clears Tn_VAL_SET_CNF (a 64-bit write, or the first 32-bit
// half); other writes set only the period. A comparator written equal to the counter's
// current value matches at once. Periods the processor did not see (counter far past the
// comparator when it is next examined) are skipped in one step with one interrupt, as
// an edge-triggered input latches one.
//
// Interrupts: edge-triggered timers send one edge per match; level-triggered ones hold
// their line while Tn_INT_STS is set and Tn_INT_ENB_CNF is 1. With LEG_RT_CNF, timer 0
// drives ISA IRQ0 (8259 IR0, I/O APIC pin 2) and timer 1 ISA IRQ8 (slave IR0, pin 8),
// and the 8254's and the RTC's interrupts are disconnected (the machine wires that, and
// gives IRQ8 back to the RTC's level when LEG_RT_CNF is cleared);
// timer 2 and, without LEG_RT_CNF, every timer, drive their Tn_INT_ROUTE_CNF I/O APIC pin.
// Matches are TimerEventSource events, so interrupts happen at exact virtual cycles.
//
// Accesses: 32- and 64-bit (a 64-bit one is the low then the high dword); 8- and 16-bit
// accesses read the bytes of their dword and write them into it. Offsets with no register
// read 0 and ignore writes. Not modelled: the one-shot 32-bit wrap interrupt some
// implementations raise at the counter's 32-bit overflow.
#pragma once
#include "harness/timer_event.h"
#include "mmu/phys_mem.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <functional>

namespace vmxsim {

class Hpet : public MmioDevice, public TimerEventSource {
public:
  static constexpr uint64_t kBase = 0xfed00000, kSize = 0x400;
  static constexpr unsigned kTimers = 3;
  static constexpr uint64_t kPeriodFs = 10000000, kCyclesPerCount = 10;
  static constexpr uint32_t kRouteCap = 0x00f00000; ///< I/O APIC pins 20-23
  enum Offset : uint64_t {
    Capabilities = 0x000, Configuration = 0x010, InterruptStatus = 0x020,
    MainCounter = 0x0f0, TimerBase = 0x100, TimerStride = 0x20,
  };
  // General configuration and timer configuration bits.
  static constexpr uint64_t kEnable = 1, kLegacy = 2;
  static constexpr uint64_t kLevel = 1u << 1, kIntEnable = 1u << 2, kPeriodic = 1u << 3,
                            kPeriodicCap = 1u << 4, kSize64Cap = 1u << 5,
                            kValSet = 1u << 6, kMode32 = 1u << 8;
  static constexpr uint64_t kCapabilities =
      kPeriodFs << 32 | uint64_t(0x8086) << 16 | 1u << 15 | 1u << 13 | (kTimers - 1) << 8 | 1;

  /// The current virtual time (the executing vCPU's Cpu::Cycles); 0 if unset.
  std::function<uint64_t()> Now;
  /// Drives an interrupt line: Legacy = an ISA IRQ (0 or 8), else an I/O APIC pin.
  std::function<void(bool Legacy, unsigned Line, bool Level)> SetLine;
  /// Whether that line can reach a processor (unset: always).
  std::function<bool(bool Legacy, unsigned Line)> LineObserved;
  /// Called when LEG_RT_CNF changes (with its new value), after the HPET's own legacy
  /// lines were lowered and before they are driven again: the machine hands IRQ8 back to
  /// the RTC (or takes it away) here.
  std::function<void(bool Legacy)> LegacyChanged;

  uint64_t mmioRead(uint64_t Offset, unsigned SizeBytes) override;
  void mmioWrite(uint64_t Offset, unsigned SizeBytes, uint64_t Value) override;

  uint64_t nextTimerEvent() const override;
  void advanceTo(uint64_t Now) override;
  bool canWake() const override;

  bool legacyReplacement() const { return Config & kLegacy; }
  bool enabled() const { return Config & kEnable; }
  /// The main counter at virtual cycle T.
  uint64_t counterAt(uint64_t T) const;

private:
  struct Timer {
    uint64_t Config = kPeriodicCap | kSize64Cap | uint64_t(kRouteCap) << 32;
    uint64_t Comparator = ~uint64_t(0), Period = 0;
    uint64_t Match = kNoMatch; ///< counter value of the next match
    bool Line = false;         ///< the level this timer drives now
  };
  static constexpr uint64_t kNoMatch = ~uint64_t(0);

  uint64_t now() const { return Now ? Now() : 0; }
  uint32_t readDword(uint64_t Offset);
  void writeDword(uint64_t Offset, uint32_t Value, bool LastHalf);
  void writeSized(uint64_t Offset, unsigned SizeBytes, uint64_t Value);
  void writeTimerConfig(unsigned I, uint64_t V);
  void writeComparator(unsigned I, uint64_t V, uint64_t Mask, bool LastHalf);
  uint64_t cycleOfCount(uint64_t Count) const;
  void recompute(unsigned I, uint64_t From);
  void fire(unsigned I);
  void route(unsigned I, bool &Legacy, unsigned &Line, bool &Routed) const;
  void driveLine(unsigned I);
  void setCounterConfig(uint64_t NewConfig);

  uint64_t Config = 0, Status = 0;
  uint64_t CounterBase = 0, RefCycle = 0; ///< counter = CounterBase + (T - RefCycle) / 10
  Timer T[kTimers];
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Config, S.Status, S.CounterBase, S.RefCycle);
    for (auto &T : S.T)
      A.all(T.Config, T.Comparator, T.Period, T.Match, T.Line);
  }
};

} // namespace vmxsim
