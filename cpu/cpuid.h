// CPUID (SDM Vol. 2A, CPUID—CPU Identification): the model's leaf table plus the fields
// that reflect the processor's current state (APIC ID, OSXSAVE, XSAVE area size).
#pragma once
#include <cstdint>

namespace vmxsim {

class Cpu;

struct CpuidResult {
  uint32_t Eax = 0, Ebx = 0, Ecx = 0, Edx = 0;
};

/// Feature bits vmxsim reports (SDM Vol. 2A, CPUID, "Feature Information" tables).
namespace cpuidbit {
// Leaf 1 ECX.
inline constexpr uint32_t Sse3 = 1u << 0, Pclmulqdq = 1u << 1, Ssse3 = 1u << 9,
                          Sse41 = 1u << 19, Sse42 = 1u << 20, Aes = 1u << 25, Vmx = 1u << 5, Cx16 = 1u << 13, Pcid = 1u << 17,
                          Movbe = 1u << 22, Popcnt = 1u << 23, Xsave = 1u << 26,
                          Osxsave = 1u << 27, Hypervisor = 1u << 31, Monitor = 1u << 3,
                          Rdrand = 1u << 30, X2apic = 1u << 21, TscDeadline = 1u << 24;
// Leaf 1 EDX.
inline constexpr uint32_t Fpu = 1u << 0, De = 1u << 2, Pse = 1u << 3, Tsc = 1u << 4,
                          Msr = 1u << 5, Pae = 1u << 6, Mce = 1u << 7, Cx8 = 1u << 8, Apic = 1u << 9,
                          Sep = 1u << 11, Mtrr = 1u << 12, Pge = 1u << 13, Mca = 1u << 14, Cmov = 1u << 15,
                          Pat = 1u << 16, Pse36 = 1u << 17, Clfsh = 1u << 19,
                          Mmx = 1u << 23, Fxsr = 1u << 24, Sse = 1u << 25, Sse2 = 1u << 26;
// Leaf 7 subleaf 0 EBX / ECX.
inline constexpr uint32_t Fsgsbase = 1u << 0, Bmi1 = 1u << 3, Smep = 1u << 7,
                          Bmi2 = 1u << 8, Invpcid = 1u << 10, Adx = 1u << 19,
                          Smap = 1u << 20, Clflushopt = 1u << 23,
                          Rdseed = 1u << 18, FpuCsDsDeprecated = 1u << 13;
inline constexpr uint32_t Umip = 1u << 2, La57 = 1u << 16;
// Leaf 7 subleaf 0 EDX: the speculation controls (cpu/msrs.def, IA32_SPEC_CTRL).
inline constexpr uint32_t IbrsIbpb = 1u << 26, Stibp = 1u << 27, L1dFlush = 1u << 28,
                          ArchCapabilities = 1u << 29, Ssbd = 1u << 31;
// Leaf 0x80000001 ECX / EDX.
inline constexpr uint32_t LahfLm = 1u << 0, Abm = 1u << 5;
inline constexpr uint32_t Syscall = 1u << 11, Nx = 1u << 20, Page1Gb = 1u << 26,
                          Rdtscp = 1u << 27, Lm = 1u << 29;
} // namespace cpuidbit

/// XCR0 bits the model supports (x87 and SSE state: SDM Vol. 1, XSAVE-Supported Features).
inline constexpr uint64_t kSupportedXcr0 = 0x3;

/// What CPUID returns on this processor for EAX=Leaf, ECX=Subleaf.
CpuidResult cpuidQuery(const Cpu &C, uint32_t Leaf, uint32_t Subleaf);

/// Whether the model reports a feature: CPUID.(Leaf,0).Reg & Bit, Reg 0..3 = EAX..EDX.
bool modelHas(const Cpu &C, uint32_t Leaf, unsigned Reg, uint32_t Bit);

} // namespace vmxsim
