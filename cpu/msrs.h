// Model-specific registers (table: cpu/msrs.def).
#pragma once
#include "cpu/status.h"
#include <cstdint>

namespace vmxsim {

class Cpu;
struct CpuModel;

/// MSR addresses, SDM spelling (STYLE 2.5), generated from cpu/msrs.def.
namespace msr {
enum : uint32_t {
#define MSR(Name, Address, Reset, Reserved, Write) Name = Address,
#include "cpu/msrs.def"
#undef MSR
};
} // namespace msr

/// Storage slot of each table row.
enum class MsrSlot : uint16_t {
#define MSR(Name, Address, Reset, Reserved, Write) Name,
#include "cpu/msrs.def"
#undef MSR
  NumSlots
};
inline constexpr unsigned kNumMsrs = unsigned(MsrSlot::NumSlots);

/// How WRMSR treats a row (the Write column of cpu/msrs.def).
enum class MsrWrite : uint8_t {
  Plain,          ///< reserved-bit check, then store
  ReadOnly,       ///< WRMSR raises #GP(0)
  Canonical,      ///< the value is a linear address and must be canonical
  Efer,           ///< CpuState::Efer: LMA is read-only; LME cannot change while paging
  FsBase,         ///< CpuState FS.base (canonical)
  GsBase,         ///< CpuState GS.base (canonical)
  Tsc,            ///< the TSC: adjusts the offset from the virtual clock
  TscAdjust,      ///< IA32_TSC_ADJUST: moves the TSC by the change
  ApicBase,       ///< base bits up to MAXPHYADDR
  FeatureControl, ///< #GP once the lock bit is set
  MiscEnable,     ///< read-only bits keep their value
  Pat,            ///< every PAn must be a valid PAT memory type
  MtrrDefType,    ///< default type must be a valid MTRR memory type
  MtrrFixed,      ///< every byte must be a valid MTRR memory type
  MtrrPhysBase,   ///< valid type, base bits up to MAXPHYADDR
  MtrrPhysMask,   ///< mask bits up to MAXPHYADDR
  VmxCapability,  ///< IA32_VMX_*: computed from the VMX profile; WRMSR raises #GP(0)
  Apic,           ///< forwarded to Cpu::Apic (plain storage when the CPU has none)
  Debugctl,       ///< IA32_DEBUGCTL: LBR, BTF stored; other defined bits unimplemented
  Command,        ///< write-only command (IBPB, L1D flush): RDMSR raises #GP(0)
  PerfMon,        ///< a performance-monitoring MSR, kept by Cpu::Pmu (cpu/perfmon.h)
};

struct MsrInfo {
  const char *Name;
  uint32_t Address;
  uint64_t Reset;
  uint64_t Reserved;
  MsrWrite Write;
};
/// The table rows, in table order (index = MsrSlot).
extern const MsrInfo kMsrTable[kNumMsrs];
/// The row of an address, or nullptr.
const MsrInfo *findMsr(uint32_t Address);

/// Storage for the table MSRs that are not part of CpuState, indexed by MsrSlot.
struct MsrState {
  uint64_t Value[kNumMsrs] = {};
  /// TSC = Cpu::Cycles + TscOffset (SDM Vol. 3A, Time-Stamp Counter).
  uint64_t TscOffset = 0;

  uint64_t &operator[](MsrSlot S) { return Value[unsigned(S)]; }
  uint64_t operator[](MsrSlot S) const { return Value[unsigned(S)]; }
};

/// What a run stopped by IA32_DEBUGCTL bits vmxsim does not model (WRMSR, or a VM entry
/// that loads the debug controls) reports as unimplemented: branch trace messages and
/// stores (TR, BTS, BTINT, BTS_OFF_OS/USR: bits 10:6) and ENABLE_UNCORE_PMI (13). LBR
/// and BTF are modelled (cpu/debug.h); the freeze bits 11, 12 and 14 and RTM_DEBUG (15)
/// are reserved in this model (cpu/msrs.def).
inline constexpr const char *kDebugctlUnimplemented =
    "IA32_DEBUGCTL features (branch trace, uncore PMI)";

void resetMsrs(Cpu &C);
/// CPUID.1:EAX (family/model/stepping), also EDX after reset.
uint32_t cpuidSignature(const CpuModel &M);
/// The processor's time-stamp counter (before any VMX TSC offsetting).
uint64_t readTsc(const Cpu &C);
/// RDMSR/WRMSR semantics; unknown MSRs and reserved bits raise #GP(0).
Status readMsr(Cpu &C, uint32_t Index, uint64_t &Value);
Status writeMsr(Cpu &C, uint32_t Index, uint64_t Value);

} // namespace vmxsim
