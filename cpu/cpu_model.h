// The modelled processor: what CPUID reports and which optional features exist.
// Guest-visible and part of the machine's inputs, so it is plain data.
#pragma once
#include <cstdint>
#include <vector>

namespace vmxsim {

struct VmxProfile;

struct CpuidLeaf {
  uint32_t Leaf, Subleaf;
  bool HasSubleaves;
  uint32_t Eax, Ebx, Ecx, Edx;
};

struct CpuModel {
  const char *Name = "vmxsim-default";
  uint8_t MaxPhysAddrBits = 46;
  uint8_t MaxLinearAddrBits = 48;
  bool La57 = false;    ///< 5-level paging
  bool Pcid = true;
  bool Smep = true, Smap = true;
  bool Nx = true;
  bool Page1G = true;
  /// CPUID table; leaves not listed return the highest basic leaf's data as Intel
  /// processors do for out-of-range basic leaves (SDM Vol. 2A, CPUID).
  std::vector<CpuidLeaf> Cpuid;
  /// VMX features and capability-MSR values (`--vmx-profile`); null = no VMX (CPUID.1:
  /// ECX.VMX reads 0 and VMX instructions are #UD).
  const VmxProfile *Vmx = nullptr;
  /// Seed of the RDRAND/RDSEED streams (cpu/exec_random.cpp): part of the machine's
  /// inputs, so "random" numbers repeat from run to run (DESIGN.md, Determinism).
  uint64_t RandomSeed = 0x766d7873696d0001;

  /// The default: a modern Intel core with VMX (see cpu/cpuid.cpp).
  static const CpuModel &defaultModel();
};

} // namespace vmxsim
