// Architectural performance monitoring, version 2 (SDM Vol. 3B, "Performance
// Monitoring" > "Architectural Performance Monitoring" > "Architectural Performance
// Monitoring Version 1" and "Version 2"): what CPUID leaf 0AH reports, the counters and
// their MSRs, RDPMC, and the performance-monitoring interrupt (PMI) on overflow.
//
// What is counted, and why only that. vmxsim has a virtual clock and no caches,
// predictors or pipeline, so only events it can count exactly are offered:
//   - instructions retired (fixed counter 0; event C0H umask 00H): Cpu::Retired, the
//     instructions that complete. An instruction that faults or causes a VM exit is not
//     counted; a VMLAUNCH/VMRESUME that enters the guest completes there, so it counts
//     under the guest's IA32_PERF_GLOBAL_CTRL and CPL; a REP string instruction counts
//     once each time it stops for the event window (it resumes with RFLAGS.RF, as after
//     an interrupt);
//   - unhalted core cycles (fixed counter 1; event 3CH umask 00H): the virtual clock
//     (Cpu::Cycles) less the time spent waiting in HLT, shutdown or wait-for-SIPI
//     (Cpu::HaltedCycles);
//   - unhalted reference cycles (fixed counter 2; event 3CH umask 01H): the same, as the
//     reference clock is the TSC and the TSC is the virtual clock.
// CPUID.0AH:EBX marks the other architectural events unavailable: LLC references and
// misses (no caches), branch instructions retired (which instructions count as branches
// is not defined exactly enough: far transfers, interrupts, VM transitions) and branch
// mispredicts (no predictor: a count of 0 would be a disguised gap). An event select
// enabled (EN = 1) for any other event, or with edge detect, invert or a counter mask,
// stops the run with status 10 naming it.
//
// Counting. A counter counts while its bit in IA32_PERF_GLOBAL_CTRL and its own enable
// (EN and USR/OS of IA32_PERFEVTSELx; the OS/USR field of IA32_FIXED_CTR_CTRL) are set
// and the CPL matches (OS: CPL 0; USR: CPL > 0). An instruction is counted under the CPL
// it leaves in effect (that of its retirement); the cycles it costs likewise. Counters
// are updated lazily: the counts since the last update are folded in whenever the CPL
// changes (Cpu::modeChanged), a counter MSR is read or written, at each event window,
// and at VM entry/exit when they load IA32_PERF_GLOBAL_CTRL. Counters are 48 bits wide.
//
// Overflow. When a counter wraps from 2^48 - 1 to 0 its bit in IA32_PERF_GLOBAL_STATUS
// is set and, if its PMI bit (INT of IA32_PERFEVTSELx, bit 3 of its IA32_FIXED_CTR_CTRL
// field) is set, the local APIC delivers the interrupt of its LVT performance-counter
// entry (ApicHook::performanceMonitoringInterrupt) at the next instruction boundary: the
// run loop opens the event window no later than the instruction or cycle at which the
// first running counter wraps (every instruction costs at least one cycle).
#pragma once
#include "cpu/status.h"
#include "state/snapshot_io.h"

#include <cstdint>

namespace vmxsim {

class Cpu;

namespace perfmon {
inline constexpr unsigned kVersion = 2, kNumGp = 4, kNumFixed = 3, kWidth = 48;
inline constexpr uint64_t kCounterMask = (uint64_t(1) << kWidth) - 1;
/// Architectural events CPUID.0AH:EBX lists, in bit order (SDM Vol. 3B, table
/// "UMask and Event Select Encodings for Pre-Defined Architectural Performance Events").
inline constexpr unsigned kNumArchEvents = 7;
/// EBX bits: 1 = not available: LLC reference (3), LLC misses (4), branch instructions
/// retired (5), branch mispredicts retired (6).
inline constexpr uint32_t kUnavailableEvents = 0x78;
/// CPUID.0AH:EAX (version, GP counters, their width, EBX length) and EDX (fixed
/// counters, their width).
inline constexpr uint32_t kCpuidEax =
    kVersion | (kNumGp << 8) | (kWidth << 16) | (kNumArchEvents << 24);
inline constexpr uint32_t kCpuidEdx = kNumFixed | (kWidth << 5);
/// The bits of IA32_PERF_GLOBAL_CTRL / _STATUS / _OVF_CTRL that name counters: PMC0-3
/// (bits 3:0) and FIXED_CTR0-2 (bits 34:32). Everything else in IA32_PERF_GLOBAL_CTRL is
/// reserved (SDM Vol. 3B, figure "IA32_PERF_GLOBAL_CTRL MSR"); the VM-entry checks of
/// the "load IA32_PERF_GLOBAL_CTRL" controls use this too.
inline constexpr uint64_t kCounterBits = 0xf | (uint64_t(7) << 32);
/// IA32_PERF_GLOBAL_STATUS / _OVF_CTRL bits 62 (OvfBuffer, DS area; never set here) and
/// 63 (CondChgd).
inline constexpr uint64_t kStatusExtraBits = uint64_t(3) << 62;
/// IA32_PERFEVTSELx fields (SDM Vol. 3B, figure "Layout of IA32_PERFEVTSELx MSRs").
namespace evtsel {
inline constexpr uint64_t EventMask = 0xff, UmaskMask = 0xff00, Usr = 1u << 16,
                          Os = 1u << 17, Edge = 1u << 18, PinControl = 1u << 19,
                          Int = 1u << 20, AnyThread = 1u << 21, En = 1u << 22,
                          Inv = 1u << 23, CmaskMask = 0xffu << 24;
}
/// IA32_FIXED_CTR_CTRL: 4 bits per counter: OS (0), USR (1), AnyThread (2, version 3
/// and later: reserved here), PMI (3).
inline constexpr uint64_t kFixedCtrlValid = 0xbbb;
} // namespace perfmon

class PerfMon {
public:
  /// Power-up/RESET: counters and event selects 0; IA32_PERF_GLOBAL_CTRL "sets bits n-1:0
  /// and clears the upper bits", n the number of general-purpose counters (SDM Vol. 3A,
  /// table "IA-32 and Intel 64 Processor States Following Power-up, Reset, or INIT"), so
  /// software written for version 1 keeps working.
  void reset(Cpu &C);
  /// Snapshot: the counters, their controls and the update anchors; load() derives the
  /// rest (configure) for C's current CPL.
  void save(SnapshotWriter &W) const;
  void load(Cpu &C, SnapshotReader &R);

  /// RDMSR/WRMSR of the rows of cpu/msrs.def whose Write kind is PerfMon (the reserved
  /// bits of the row are checked by the caller).
  Status readMsr(Cpu &C, uint32_t Index, uint64_t &Value);
  Status writeMsr(Cpu &C, uint32_t Index, uint64_t Value);
  /// RDPMC's counter read (SDM Vol. 2B, RDPMC): ECX[30] selects the fixed counters;
  /// false for an invalid index (#GP(0)).
  bool readCounter(Cpu &C, uint32_t Ecx, uint64_t &Value);

  /// IA32_PERF_GLOBAL_CTRL as VM entry or VM exit loads it (the "load
  /// IA32_PERF_GLOBAL_CTRL" controls; the VM-entry checks have refused reserved bits).
  void loadGlobalCtrl(Cpu &C, uint64_t Value);
  uint64_t globalCtrl() const { return GlobalCtrl; }

  /// Folds the counts since the last update into the counters (raising overflow status
  /// and PMIs) and starts or stops each counter for the current CPL. Called at CPL
  /// changes and at every event window while a counter is enabled.
  void update(Cpu &C);
  /// The cycle by which the event window must open so that the first running counter's
  /// overflow is seen at the boundary after it (~0 when nothing runs).
  uint64_t overflowDue(const Cpu &C) const;

private:
  enum class Source : uint8_t { None, Instructions, Cycles };
  static constexpr unsigned kNumCounters = perfmon::kNumGp + perfmon::kNumFixed;
  /// Counter I's bit in the global MSRs (GP counters 0-3, fixed counters 32-34).
  static uint64_t globalBit(unsigned I) {
    return I < perfmon::kNumGp ? uint64_t(1) << I : uint64_t(1) << (32 + I - perfmon::kNumGp);
  }
  /// Recomputes what each counter counts and whether it runs at the current CPL.
  void configure(Cpu &C);

  uint64_t Counter[kNumCounters] = {}; ///< GP counters 0-3, then fixed counters 0-2
  uint64_t EventSelect[perfmon::kNumGp] = {};
  uint64_t FixedCtrl = 0, GlobalCtrl = 0, GlobalStatus = 0;
  // Derived by configure():
  Source Src[kNumCounters] = {};
  bool CountOs[kNumCounters] = {}, CountUser[kNumCounters] = {}, Pmi[kNumCounters] = {};
  uint8_t Running = 0; ///< bit I: counter I counts at the current CPL
  /// The instruction and unhalted-cycle counts at the last update.
  uint64_t AnchorRetired = 0, AnchorUnhalted = 0;
  /// StopWhat of a refused event select (status 10 names it).
  char Refused[80] = {};
};

} // namespace vmxsim
