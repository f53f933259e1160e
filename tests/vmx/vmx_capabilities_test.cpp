// SDM Vol. 3D, Appendix A "VMX Capability Reporting Facility": the value of each
// IA32_VMX_* MSR for each profile, as RDMSR will return it (readVmxCapabilityMsr). The
// expected constants are computed by hand from the SDM's bit definitions.
#include "tests/support/vmx_test_machine.h"

#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vmx_instructions.h"

#include <gtest/gtest.h>

namespace vmxsim::test {
namespace {

std::optional<uint64_t> cap(const VmxProfile &P, uint32_t Msr) {
  VmxTestMachine M(P, false);
  return readVmxCapabilityMsr(M.Cpu_, Msr);
}

TEST(VmxCapabilities, BasicReportsRevisionSizeWritebackInsOutsAndTrueControls) {
  // Revision 0xe1, 4096-byte region (44:32), WB (53:50 = 6), bit 54, bit 55.
  for (const VmxProfile *P : {&VmxProfile::full(), &VmxProfile::kvmNested(),
                              &VmxProfile::minimal()})
    EXPECT_EQ(cap(*P, 0x480), 0x00d81000000000e1ull);
}

TEST(VmxCapabilities, FullProfileControlMsrs) {
  const VmxProfile &P = VmxProfile::full();
  // Pin: default1 bits 1, 2, 4; allowed 0, 3, 5, 6, 7 (process posted interrupts).
  EXPECT_EQ(cap(P, 0x481), 0x000000ff00000016ull);
  EXPECT_EQ(cap(P, 0x48d), 0x000000ff00000016ull);
  // Primary processor-based: default1 1, 4-6, 8, 13-16, 26 (15, 16 clearable in TRUE);
  // everything except 0, 17, 18 allowed.
  EXPECT_EQ(cap(P, 0x482), 0xfff9fffe0401e172ull);
  EXPECT_EQ(cap(P, 0x48e), 0xfff9fffe04006172ull);
  // Exit: default1 0-8, 10, 11, 13, 14, 16, 17 (2 clearable in TRUE); allowed up to 22
  // (12: load IA32_PERF_GLOBAL_CTRL).
  EXPECT_EQ(cap(P, 0x483), 0x007fffff00036dffull);
  EXPECT_EQ(cap(P, 0x48f), 0x007fffff00036dfbull);
  // Entry: default1 0-8, 12 (2 clearable in TRUE); allowed 9, 13 (load
  // IA32_PERF_GLOBAL_CTRL), 14, 15.
  EXPECT_EQ(cap(P, 0x484), 0x0000f3ff000011ffull);
  EXPECT_EQ(cap(P, 0x490), 0x0000f3ff000011fbull);
  // Secondary: virtualize APIC accesses, EPT, descriptor tables, RDTSCP, virtualize
  // x2APIC mode, VPID, WBINVD, unrestricted guest, APIC-register virtualization,
  // virtual-interrupt delivery, PLE, RDRAND, INVPCID, VM functions, VMCS shadowing,
  // RDSEED, PML, EPT-violation #VE, mode-based execute control, TSC scaling.
  EXPECT_EQ(cap(P, 0x48b), 0x02477fff00000000ull);
  EXPECT_EQ(cap(P, 0x492), std::nullopt);
  EXPECT_EQ(cap(P, 0x491), 1u); // EPTP switching
}

TEST(VmxCapabilities, FullProfileMiscFixedBitsEnumAndEpt) {
  const VmxProfile &P = VmxProfile::full();
  // Rate 5, LMA store, HLT/shutdown/SIPI, 4 CR3 targets, VMWRITE any field, length 0.
  EXPECT_EQ(cap(P, 0x485), 0x600401e5ull);
  EXPECT_EQ(cap(P, 0x486), 0x80000021ull);
  EXPECT_EQ(cap(P, 0x487), 0xffffffffull);
  EXPECT_EQ(cap(P, 0x488), 0x2000ull);
  // The default model's CR4 bits: 0-11, VMXE, FSGSBASE, PCIDE, OSXSAVE, SMEP, SMAP.
  EXPECT_EQ(cap(P, 0x489), 0x372fffull);
  // Highest index: TSC multiplier (0x2032 -> index 0x19).
  EXPECT_EQ(cap(P, 0x48a), 0x32ull);
  // X-only, 4-level and 5-level, UC, WB, 2M, 1G, INVEPT, A/D, advanced EPT-violation
  // information, single/all-context INVEPT; INVVPID with all four types.
  EXPECT_EQ(cap(P, 0x48c), 0x00000f01067341c1ull);
}

TEST(VmxCapabilities, MinimalProfileMsrs) {
  const VmxProfile &P = VmxProfile::minimal();
  EXPECT_EQ(cap(P, 0x481), 0x0000003f00000016ull);
  EXPECT_EQ(cap(P, 0x482), 0x67d9fffe0401e172ull);
  EXPECT_EQ(cap(P, 0x48e), 0x67d9fffe04006172ull);
  EXPECT_EQ(cap(P, 0x483), 0x0003efff00036dffull);
  EXPECT_EQ(cap(P, 0x48f), 0x0003efff00036dfbull);
  EXPECT_EQ(cap(P, 0x484), 0x000013ff000011ffull);
  EXPECT_EQ(cap(P, 0x490), 0x000013ff000011fbull);
  EXPECT_EQ(cap(P, 0x485), 0x400401e0ull);
  EXPECT_EQ(cap(P, 0x48a), 0x2aull); // guest IA32_SYSENTER_CS (0x482a -> index 0x15)
  // No secondary controls, no EPT/VPID, no VM functions: the MSRs do not exist.
  EXPECT_EQ(cap(P, 0x48b), std::nullopt);
  EXPECT_EQ(cap(P, 0x48c), std::nullopt);
  EXPECT_EQ(cap(P, 0x491), std::nullopt);
}

TEST(VmxCapabilities, KvmNestedProfileLacksPauseLoopExiting) {
  const VmxProfile &P = VmxProfile::kvmNested();
  // The full profile's secondary controls without PLE (bit 10), #VE (bit 18) and
  // mode-based execute control (bit 22).
  EXPECT_EQ(cap(P, 0x48b), 0x02037bff00000000ull);
  EXPECT_EQ(cap(P, 0x485), 0x600401e5ull);
}

TEST(VmxCapabilities, ModelWithoutVmxHasNoCapabilityMsrs) {
  CpuModel NoVmx = CpuModel::defaultModel();
  NoVmx.Vmx = nullptr;
  TestMachine T(64ull << 20, NoVmx);
  for (uint32_t Msr = 0x480; Msr <= 0x492; ++Msr)
    EXPECT_EQ(readVmxCapabilityMsr(T.Cpu_, Msr), std::nullopt);
}

} // namespace
} // namespace vmxsim::test
