// RDMSR/WRMSR over the MSR table (cpu/msrs.def; SDM Vol. 4, Model-Specific Registers;
// Vol. 2B, RDMSR and WRMSR).
#include "cpu/msrs.h"

#include "cpu/vmx/vmx_instructions.h"

#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "cpu/memory.h"
#include "cpu/perfmon.h"

namespace vmxsim {

const MsrInfo kMsrTable[kNumMsrs] = {
#define MSR(Name, Address, Reset, Reserved, Write)                                       \
  {#Name, Address, uint64_t(Reset), uint64_t(Reserved), MsrWrite::Write},
#include "cpu/msrs.def"
#undef MSR
};

namespace {
constexpr uint32_t kAddresses[] = {
#define MSR(Name, Address, Reset, Reserved, Write) Address,
#include "cpu/msrs.def"
#undef MSR
};
constexpr bool tableHasNoDuplicates() {
  for (unsigned I = 0; I < kNumMsrs; ++I)
    for (unsigned J = I + 1; J < kNumMsrs; ++J)
      if (kAddresses[I] == kAddresses[J])
        return false;
  return true;
}
static_assert(sizeof(kAddresses) / sizeof(kAddresses[0]) == kNumMsrs);

// Memory types (SDM Vol. 3A, Memory Types: UC 0, WC 1, WT 4, WP 5, WB 6; PAT adds UC- 7).
bool validMtrrType(uint64_t T) { return T == 0 || T == 1 || T == 4 || T == 5 || T == 6; }
bool validPatType(uint64_t T) { return validMtrrType(T) || T == 7; }

/// Canonical with respect to the processor's linear-address width: WRMSR checks the
/// address the MSR will later supply, whatever CR4.LA57 is now (SDM Vol. 2B, WRMSR).
bool canonicalForModel(const Cpu &C, uint64_t V) {
  unsigned Bits = C.Model.La57 ? 57 : C.Model.MaxLinearAddrBits;
  return uint64_t(int64_t(V << (64 - Bits)) >> (64 - Bits)) == V;
}
uint64_t aboveMaxPhys(const Cpu &C) { return ~((uint64_t(1) << C.Model.MaxPhysAddrBits) - 1); }

constexpr uint64_t kApicEn = 1u << 11, kApicExtd = 1u << 10;
/// The x2APIC register MSRs (SDM Vol. 3A, x2APIC Register Address Space): reachable only
/// in x2APIC mode, else #GP (SDM Vol. 3A, x2APIC Register Availability).
bool x2apicRegister(uint32_t Index) { return Index >= 0x800 && Index <= 0x8ff; }
bool x2apicUsable(const Cpu &C) {
  const uint64_t Base = (*C.Msrs)[MsrSlot::IA32_APIC_BASE];
  return C.Apic && (Base & kApicEn) && (Base & kApicExtd);
}
} // namespace

const MsrInfo *findMsr(uint32_t Address) {
  for (const MsrInfo &M : kMsrTable)
    if (M.Address == Address)
      return &M;
  return nullptr;
}

uint32_t cpuidSignature(const CpuModel &M) {
  for (const CpuidLeaf &L : M.Cpuid)
    if (L.Leaf == 1)
      return L.Eax;
  return 0x000806f8;
}

uint64_t readTsc(const Cpu &C) { return C.Cycles + C.Msrs->TscOffset; }

void resetMsrs(Cpu &C) {
  MsrState &M = *C.Msrs;
  for (unsigned I = 0; I < kNumMsrs; ++I)
    M.Value[I] = kMsrTable[I].Reset;
  // Only the bootstrap processor has IA32_APIC_BASE.BSP set (SDM Vol. 3A, Local APIC
  // Status and Location).
  if (C.Id != 0)
    M[MsrSlot::IA32_APIC_BASE] &= ~uint64_t(1u << 8);
  // RESET clears the TSC (SDM Vol. 3A, Time-Stamp Counter).
  M.TscOffset = uint64_t(0) - C.Cycles;
}

Status readMsr(Cpu &C, uint32_t Index, uint64_t &Value) {
  const MsrInfo *Row = findMsr(Index);
  if (!Row)
    return C.raiseGp(0);
  const MsrState &M = *C.Msrs;
  switch (Row->Write) {
  case MsrWrite::Efer:
    Value = C.S.Efer;
    break;
  case MsrWrite::FsBase:
    Value = C.S.seg(SegReg::FS).Base;
    break;
  case MsrWrite::GsBase:
    Value = C.S.seg(SegReg::GS).Base;
    break;
  case MsrWrite::Tsc:
    Value = readTsc(C);
    break;
  case MsrWrite::Apic:
    if (x2apicRegister(Index) && !x2apicUsable(C))
      return C.raiseGp(0);
    if (C.Apic)
      return C.Apic->readMsr(C, Index, Value);
    Value = M.Value[Row - kMsrTable];
    break;
  case MsrWrite::Command:
    return C.raiseGp(0);
  case MsrWrite::PerfMon:
    return C.Pmu->readMsr(C, Index, Value);
  case MsrWrite::VmxCapability: {
    std::optional<uint64_t> V = readVmxCapabilityMsr(C, Index);
    if (!V)
      return C.raiseGp(0);
    Value = *V;
    break;
  }
  default:
    Value = M.Value[Row - kMsrTable];
    break;
  }
  return Status::Ok;
}

Status writeMsr(Cpu &C, uint32_t Index, uint64_t Value) {
  const MsrInfo *Row = findMsr(Index);
  if (!Row)
    return C.raiseGp(0);
  MsrState &M = *C.Msrs;
  uint64_t &Slot = M.Value[Row - kMsrTable];
  if (Value & Row->Reserved)
    return C.raiseGp(0);
  switch (Row->Write) {
  case MsrWrite::Plain:
    break;
  case MsrWrite::ReadOnly:
  case MsrWrite::VmxCapability:
    return C.raiseGp(0);
  case MsrWrite::Apic:
    if (x2apicRegister(Index) && !x2apicUsable(C))
      return C.raiseGp(0);
    if (C.Apic)
      return C.Apic->writeMsr(C, Index, Value);
    break;
  case MsrWrite::Canonical:
    if (!canonicalForModel(C, Value))
      return C.raiseGp(0);
    break;
  case MsrWrite::FsBase:
  case MsrWrite::GsBase:
    if (!canonicalForModel(C, Value))
      return C.raiseGp(0);
    C.S.seg(Row->Write == MsrWrite::FsBase ? SegReg::FS : SegReg::GS).Base = Value;
    return Status::Ok;
  case MsrWrite::Efer: {
    // SDM Vol. 3A, IA32_EFER: NXE needs XD support; LME cannot change while CR0.PG=1
    // (SDM Vol. 3A, Initializing IA-32e Mode); LMA is read-only and keeps its value.
    if ((Value & efer::NXE) && !C.Model.Nx)
      return C.raiseGp(0);
    if ((C.S.Cr0 & cr0::PG) && ((Value ^ C.S.Efer) & efer::LME))
      return C.raiseGp(0);
    uint64_t Old = C.S.Efer;
    C.S.Efer = (Value & ~efer::LMA) | (Old & efer::LMA);
    if ((Old ^ C.S.Efer) & efer::NXE)
      C.Mmu.flushTlb(); // XD bits change meaning
    C.modeChanged();
    return Status::Ok;
  }
  case MsrWrite::Tsc: {
    // Writing the TSC moves IA32_TSC_ADJUST by the same amount (SDM Vol. 3A, Time-Stamp
    // Counter Adjustment).
    uint64_t Old = readTsc(C);
    M.TscOffset = Value - C.Cycles;
    M[MsrSlot::IA32_TSC_ADJUST] += Value - Old;
    return Status::Ok;
  }
  case MsrWrite::TscAdjust:
    M.TscOffset += Value - Slot;
    break;
  case MsrWrite::ApicBase: {
    if (Value & aboveMaxPhys(C))
      return C.raiseGp(0);
    // SDM Vol. 3A, x2APIC State Transitions: EXTD without EN is invalid; x2APIC mode is
    // entered only from xAPIC mode and left only to the disabled state.
    const bool NewEn = Value & kApicEn, NewExtd = Value & kApicExtd;
    const bool OldEn = Slot & kApicEn, OldExtd = Slot & kApicExtd;
    if (NewExtd && !NewEn)
      return C.raiseGp(0);
    if (OldExtd && NewEn && !NewExtd)
      return C.raiseGp(0); // x2APIC -> xAPIC
    if (!OldEn && NewExtd)
      return C.raiseGp(0); // disabled -> x2APIC
    break;
  }
  case MsrWrite::FeatureControl:
    // SDM Vol. 3C, Enabling and Entering VMX Operation: once bit 0 (lock) is set, WRMSR
    // to IA32_FEATURE_CONTROL raises #GP until reset.
    if (Slot & 1)
      return C.raiseGp(0);
    break;
  case MsrWrite::Debugctl:
    // BTF (single-step on branches) is modelled by the run loop (cpu/cpu.cpp); LBR is
    // stored, with no last-branch-record MSRs to fill (vmxsim has none: they raise #GP
    // as unknown MSRs). Branch trace messages and stores and the uncore PMI are not
    // modelled, so enabling any of them stops the run rather than being silently ignored
    // (the freeze bits and RTM debugging are reserved in this model: cpu/msrs.def).
    if (Value & ~debugctl::Modelled)
      return C.unimplemented(kDebugctlUnimplemented);
    break;
  case MsrWrite::MiscEnable: {
    constexpr uint64_t ReadOnlyBits = 0x80 | 0x1800;
    Value = (Value & ~ReadOnlyBits) | (Slot & ReadOnlyBits);
    break;
  }
  case MsrWrite::Pat:
    for (unsigned K = 0; K < 8; ++K)
      if (!validPatType((Value >> (8 * K)) & 0xff))
        return C.raiseGp(0);
    break;
  case MsrWrite::MtrrFixed:
    for (unsigned K = 0; K < 8; ++K)
      if (!validMtrrType((Value >> (8 * K)) & 0xff))
        return C.raiseGp(0);
    break;
  case MsrWrite::MtrrDefType:
    if (!validMtrrType(Value & 0xff))
      return C.raiseGp(0);
    break;
  case MsrWrite::MtrrPhysBase:
    if ((Value & aboveMaxPhys(C)) || !validMtrrType(Value & 0xff))
      return C.raiseGp(0);
    break;
  case MsrWrite::MtrrPhysMask:
    if (Value & aboveMaxPhys(C))
      return C.raiseGp(0);
    break;
  case MsrWrite::Command:
    // IBPB and L1D_FLUSH: barriers for predictors and caches vmxsim does not have
    // (cpu/msrs.def); the command completes and nothing is stored.
    return Status::Ok;
  case MsrWrite::PerfMon:
    return C.Pmu->writeMsr(C, Index, Value);
  }
  Slot = Value;
  return Status::Ok;
}

static_assert(tableHasNoDuplicates(), "an MSR address is listed twice in cpu/msrs.def");

} // namespace vmxsim
