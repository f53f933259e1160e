// Model-specific registers (table: cpu/msrs.def).
#pragma once
#include "cpu/status.h"
#include <cstdint>

namespace vmxsim {

class Cpu;
struct CpuModel;

/// Storage for the MSRs that are not part of CpuState.
struct MsrState {
  uint64_t Star = 0, Lstar = 0, Cstar = 0, Sfmask = 0, KernelGsBase = 0, TscAux = 0;
  uint64_t SysenterCs = 0, SysenterEsp = 0, SysenterEip = 0;
  uint64_t ApicBase = 0xfee00900; // BSP, xAPIC enabled
  uint64_t Pat = 0x0007040600070406ull;
  uint64_t FeatureControl = 0;
  uint64_t MiscEnable = 1; // fast strings
  uint64_t TscAdjust = 0;
  uint64_t MtrrDefType = 0;
  uint64_t MtrrFixed[11] = {};
  uint64_t MtrrVar[16] = {};
};

void resetMsrs(Cpu &C);
/// CPUID.1:EAX (family/model/stepping), also EDX after reset.
uint32_t cpuidSignature(const CpuModel &M);
/// RDMSR/WRMSR semantics; unknown MSRs and reserved bits raise #GP(0).
Status readMsr(Cpu &C, uint32_t Index, uint64_t &Value);
Status writeMsr(Cpu &C, uint32_t Index, uint64_t Value);

} // namespace vmxsim
