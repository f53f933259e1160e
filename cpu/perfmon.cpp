// Architectural performance monitoring version 2 (cpu/perfmon.h says what is counted
// and why).
#include "cpu/perfmon.h"

#include "cpu/cpu.h"
#include "cpu/msrs.h"

#include <algorithm>
#include <cstdio>

namespace vmxsim {

namespace {

using namespace perfmon;

/// The events vmxsim counts exactly (SDM Vol. 3B, table "UMask and Event Select
/// Encodings for Pre-Defined Architectural Performance Events"), by event select bits
/// 15:0.
constexpr uint64_t kUnhaltedCoreCycles = 0x003c, kInstructionsRetired = 0x00c0,
                   kUnhaltedReferenceCycles = 0x013c;

/// IA32_PMCx writes: "bits 31:0 are written, bits 47:32 are the sign extension of bit
/// 31" (SDM Vol. 3B, "Architectural Performance Monitoring Version 1": full-width
/// writes need IA32_PERF_CAPABILITIES.FW_WRITE, which this model does not report).
uint64_t legacyCounterWrite(uint64_t V) {
  return uint64_t(int64_t(int32_t(uint32_t(V)))) & kCounterMask;
}

} // namespace

void PerfMon::reset(Cpu &C) {
  *this = PerfMon{};
  GlobalCtrl = (uint64_t(1) << kNumGp) - 1;
  AnchorRetired = C.Retired;
  AnchorUnhalted = C.Cycles - C.HaltedCycles;
  configure(C);
}

void PerfMon::configure(Cpu &C) {
  bool Enabled = false;
  Running = 0;
  const bool Os = C.S.cpl() == 0;
  for (unsigned I = 0; I < kNumCounters; ++I) {
    Src[I] = Source::None;
    if (I < kNumGp) {
      const uint64_t E = EventSelect[I];
      // writeMsr refused every enabled event select it cannot count (status 10).
      if (E & evtsel::En) {
        const uint64_t Code = E & (evtsel::EventMask | evtsel::UmaskMask);
        Src[I] = Code == kInstructionsRetired ? Source::Instructions : Source::Cycles;
      }
      CountOs[I] = E & evtsel::Os;
      CountUser[I] = E & evtsel::Usr;
      Pmi[I] = E & evtsel::Int;
    } else {
      const unsigned F = I - kNumGp;
      const uint64_t Field = (FixedCtrl >> (4 * F)) & 0xf;
      Src[I] = F == 0 ? Source::Instructions : Source::Cycles;
      CountOs[I] = Field & 1;
      CountUser[I] = Field & 2;
      Pmi[I] = Field & 8;
    }
    const bool On = Src[I] != Source::None && (GlobalCtrl & globalBit(I)) &&
                    (CountOs[I] || CountUser[I]);
    Enabled |= On;
    if (On && (Os ? CountOs[I] : CountUser[I]))
      Running |= uint8_t(1u << I);
  }
  C.PmuActive = Enabled;
}

void PerfMon::update(Cpu &C) {
  const uint64_t Unhalted = C.Cycles - C.HaltedCycles;
  const uint64_t Insns = C.Retired - AnchorRetired, Cycles = Unhalted - AnchorUnhalted;
  AnchorRetired = C.Retired;
  AnchorUnhalted = Unhalted;
  bool RaisePmi = false;
  for (unsigned I = 0; I < kNumCounters; ++I) {
    if (!(Running & (1u << I)))
      continue;
    const uint64_t New = Counter[I] + (Src[I] == Source::Instructions ? Insns : Cycles);
    // SDM Vol. 3B, "Architectural Performance Monitoring Version 2": an overflow sets
    // the counter's bit in IA32_PERF_GLOBAL_STATUS; with its PMI bit it interrupts.
    if (New > kCounterMask) {
      GlobalStatus |= globalBit(I);
      RaisePmi |= Pmi[I];
    }
    Counter[I] = New & kCounterMask;
  }
  configure(C); // the CPL may have changed
  if (RaisePmi && C.Apic)
    C.Apic->performanceMonitoringInterrupt();
}

uint64_t PerfMon::overflowDue(const Cpu &C) const {
  const uint64_t Unhalted = C.Cycles - C.HaltedCycles;
  uint64_t Due = ~uint64_t(0);
  for (unsigned I = 0; I < kNumCounters; ++I) {
    if (!(Running & (1u << I)))
      continue;
    const uint64_t Now = Counter[I] + (Src[I] == Source::Instructions
                                           ? C.Retired - AnchorRetired
                                           : Unhalted - AnchorUnhalted);
    // Cycles run with the clock; instructions cost at least one cycle each, so after
    // Left more cycles at least Left more instructions... or fewer: the window then
    // opens early, finds no overflow, and is due again.
    const uint64_t Left = Now > kCounterMask ? 0 : kCounterMask + 1 - Now;
    Due = std::min(Due, C.Cycles + Left);
  }
  return Due;
}

Status PerfMon::readMsr(Cpu &C, uint32_t Index, uint64_t &Value) {
  update(C);
  if (Index >= msr::IA32_PMC0 && Index < msr::IA32_PMC0 + kNumGp)
    Value = Counter[Index - msr::IA32_PMC0];
  else if (Index >= msr::IA32_PERFEVTSEL0 && Index < msr::IA32_PERFEVTSEL0 + kNumGp)
    Value = EventSelect[Index - msr::IA32_PERFEVTSEL0];
  else if (Index >= msr::IA32_FIXED_CTR0 && Index < msr::IA32_FIXED_CTR0 + kNumFixed)
    Value = Counter[kNumGp + Index - msr::IA32_FIXED_CTR0];
  else if (Index == msr::IA32_FIXED_CTR_CTRL)
    Value = FixedCtrl;
  else if (Index == msr::IA32_PERF_GLOBAL_STATUS)
    Value = GlobalStatus;
  else if (Index == msr::IA32_PERF_GLOBAL_CTRL)
    Value = GlobalCtrl;
  else // IA32_PERF_GLOBAL_OVF_CTRL: its bits are commands; it reads 0
    Value = 0;
  return Status::Ok;
}

Status PerfMon::writeMsr(Cpu &C, uint32_t Index, uint64_t Value) {
  if (Index >= msr::IA32_PERFEVTSEL0 && Index < msr::IA32_PERFEVTSEL0 + kNumGp &&
      (Value & evtsel::En)) {
    const uint64_t Code = Value & (evtsel::EventMask | evtsel::UmaskMask);
    const bool Exact =
        (Code == kUnhaltedCoreCycles || Code == kInstructionsRetired ||
         Code == kUnhaltedReferenceCycles) &&
        !(Value & (evtsel::Edge | evtsel::Inv | evtsel::CmaskMask));
    if (!Exact) {
      std::snprintf(Refused, sizeof(Refused),
                    "performance-monitoring event select %#llx (IA32_PERFEVTSEL%u)",
                    static_cast<unsigned long long>(Value),
                    unsigned(Index - msr::IA32_PERFEVTSEL0));
      return C.unimplemented(Refused);
    }
  }
  if (Index == msr::IA32_PERF_GLOBAL_STATUS)
    return C.raiseGp(0); // read-only
  update(C);
  if (Index >= msr::IA32_PMC0 && Index < msr::IA32_PMC0 + kNumGp)
    Counter[Index - msr::IA32_PMC0] = legacyCounterWrite(Value);
  else if (Index >= msr::IA32_PERFEVTSEL0 && Index < msr::IA32_PERFEVTSEL0 + kNumGp)
    EventSelect[Index - msr::IA32_PERFEVTSEL0] = Value;
  else if (Index >= msr::IA32_FIXED_CTR0 && Index < msr::IA32_FIXED_CTR0 + kNumFixed)
    // Fixed counters take the written value's low 48 bits (the counter width).
    Counter[kNumGp + Index - msr::IA32_FIXED_CTR0] = Value & kCounterMask;
  else if (Index == msr::IA32_FIXED_CTR_CTRL)
    FixedCtrl = Value;
  else if (Index == msr::IA32_PERF_GLOBAL_CTRL)
    GlobalCtrl = Value;
  else // IA32_PERF_GLOBAL_OVF_CTRL: a 1 clears the bit of IA32_PERF_GLOBAL_STATUS
    GlobalStatus &= ~Value;
  configure(C);
  return Status::Ok;
}

bool PerfMon::readCounter(Cpu &C, uint32_t Ecx, uint64_t &Value) {
  // SDM Vol. 2B, RDPMC: ECX[30] = 1 selects fixed counter ECX[29:0], else
  // general-purpose counter ECX[29:0]; any other bit set, or an index beyond the
  // counters CPUID.0AH reports, is #GP(0).
  const bool Fixed = Ecx & (1u << 30);
  const uint32_t N = Ecx & ~(1u << 30);
  if (N >= (Fixed ? kNumFixed : kNumGp))
    return false;
  update(C);
  Value = Counter[Fixed ? kNumGp + N : N];
  return true;
}

void PerfMon::loadGlobalCtrl(Cpu &C, uint64_t Value) {
  update(C);
  GlobalCtrl = Value;
  configure(C);
}

} // namespace vmxsim

namespace vmxsim {

void PerfMon::save(SnapshotWriter &W) const {
  W.all(Counter, EventSelect, FixedCtrl, GlobalCtrl, GlobalStatus, AnchorRetired,
        AnchorUnhalted);
}

void PerfMon::load(Cpu &C, SnapshotReader &R) {
  R.all(Counter, EventSelect, FixedCtrl, GlobalCtrl, GlobalStatus, AnchorRetired,
        AnchorUnhalted);
  Refused[0] = 0;
  const uint64_t Retired = AnchorRetired, Unhalted = AnchorUnhalted;
  configure(C);
  AnchorRetired = Retired;
  AnchorUnhalted = Unhalted;
}

} // namespace vmxsim
