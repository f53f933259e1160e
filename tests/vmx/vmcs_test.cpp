// SDM Vol. 3C, "Virtual Machine Control Structures", table-driven from vmcs_fields.def:
// VMWRITE/VMREAD round trips with width truncation and high-half access, read-only and
// unsupported fields, and the VMCS region written by VMCLEAR and read by VMPTRLD.
#include "tests/support/vmx_test_machine.h"

#include <gtest/gtest.h>

namespace vmxsim::test {
namespace {

constexpr uint64_t kPattern = 0xfedcba9876543210ull;

uint64_t truncated(VmcsWidth W, uint64_t V) {
  switch (W) {
  case VmcsWidth::W16:
    return V & 0xffff;
  case VmcsWidth::W32:
    return V & 0xffffffff;
  default:
    return V;
  }
}

struct Outcome {
  uint64_t Flags;
  uint64_t Value;
  uint32_t Error;
};

Outcome vmwrite(VmxTestMachine &M, uint64_t Encoding, uint64_t Value) {
  M.S.Gpr[RAX] = Encoding;
  M.S.Gpr[RBX] = Value;
  M.exec(enc::VmwriteRaxRbx);
  return {M.arith(), 0, uint32_t(M.vmcs().get(VmcsField::VmInstructionError))};
}
Outcome vmread(VmxTestMachine &M, uint64_t Encoding) {
  M.S.Gpr[RAX] = Encoding;
  M.S.Gpr[RBX] = 0xdeadbeef;
  M.exec(enc::VmreadRbxRax);
  return {M.arith(), M.S.Gpr[RBX], uint32_t(M.vmcs().get(VmcsField::VmInstructionError))};
}

TEST(VirtualMachineControlStructures, EverySupportedFieldRoundTripsWithWidthTruncation) {
  VmxTestMachine M(VmxProfile::full());
  unsigned Checked = 0;
  for (const VmcsFieldInfo &F : kVmcsFields) {
    if (!VmxProfile::full().has(F.Feature))
      continue;
    SCOPED_TRACE(F.Name);
    Outcome W = vmwrite(M, F.Encoding, kPattern);
    EXPECT_EQ(W.Flags, 0u);
    Outcome R = vmread(M, F.Encoding);
    EXPECT_EQ(R.Flags, 0u);
    EXPECT_EQ(R.Value, truncated(F.Width, kPattern));
    ++Checked;
  }
  // The fields the full profile has (no XSS-exiting bitmap: no XSAVES), with the
  // VMREAD/VMWRITE-bitmap addresses, the PML address and index, the
  // virtualization-exception information address and the EPTP index, and the 8 of APIC
  // virtualization: APIC-access address, posted-interrupt notification vector and
  // descriptor address, EOI-exit bitmaps 0-3, guest interrupt status, and the guest and
  // host IA32_PERF_GLOBAL_CTRL.
  EXPECT_EQ(Checked, 152u);
}

TEST(VirtualMachineControlStructures, HighAccessOfSixtyFourBitFieldsReadsAndWritesBits63To32) {
  VmxTestMachine M(VmxProfile::full());
  for (const VmcsFieldInfo &F : kVmcsFields) {
    if (F.Width != VmcsWidth::W64 || !VmxProfile::full().has(F.Feature))
      continue;
    SCOPED_TRACE(F.Name);
    vmwrite(M, F.Encoding, 0x1111111122222222ull);
    EXPECT_EQ(vmwrite(M, F.Encoding | 1, 0xaaaaaaaa33333333ull).Flags, 0u);
    EXPECT_EQ(vmread(M, F.Encoding).Value, 0x3333333322222222ull);
    EXPECT_EQ(vmread(M, F.Encoding | 1).Value, 0x33333333u);
  }
}

TEST(VirtualMachineControlStructures, HighAccessOfOtherWidthsFailsWithError12) {
  VmxTestMachine M(VmxProfile::full());
  for (const VmcsFieldInfo &F : kVmcsFields) {
    if (F.Width == VmcsWidth::W64 || !VmxProfile::full().has(F.Feature))
      continue;
    SCOPED_TRACE(F.Name);
    Outcome R = vmread(M, F.Encoding | 1);
    EXPECT_EQ(R.Flags, rflags::ZF);
    EXPECT_EQ(R.Error, 12u);
  }
}

TEST(VirtualMachineControlStructures, ReadOnlyFieldsFailWithError13WithoutVmwriteAnyField) {
  VmxTestMachine M(VmxProfile::minimal());
  unsigned Checked = 0;
  for (const VmcsFieldInfo &F : kVmcsFields) {
    if (F.Type != VmcsType::ExitInfo || !VmxProfile::minimal().has(F.Feature))
      continue;
    SCOPED_TRACE(F.Name);
    uint64_t Before = vmread(M, F.Encoding).Value;
    Outcome W = vmwrite(M, F.Encoding, kPattern);
    EXPECT_EQ(W.Flags, rflags::ZF);
    EXPECT_EQ(W.Error, 13u);
    if (F.Encoding != 0x4400) { // the VM-instruction error field itself now reads 13
      EXPECT_EQ(vmread(M, F.Encoding).Value, Before);
    }
    ++Checked;
  }
  EXPECT_EQ(Checked, 14u);
}

TEST(VirtualMachineControlStructures, UnsupportedFieldsFailWithError12) {
  for (const VmxProfile *P : {&VmxProfile::minimal(), &VmxProfile::full()}) {
    VmxTestMachine M(*P);
    for (const VmcsFieldInfo &F : kVmcsFields) {
      if (P->has(F.Feature))
        continue;
      SCOPED_TRACE(std::string(P->Name) + " " + F.Name);
      Outcome R = vmread(M, F.Encoding);
      EXPECT_EQ(R.Flags, rflags::ZF);
      EXPECT_EQ(R.Error, 12u);
      EXPECT_EQ(R.Value, 0xdeadbeefu);
      Outcome W = vmwrite(M, F.Encoding, 1);
      EXPECT_EQ(W.Flags, rflags::ZF);
      EXPECT_EQ(W.Error, 12u);
    }
  }
}

TEST(VirtualMachineControlStructures, EncodingsNamingNoFieldFailWithError12) {
  VmxTestMachine M(VmxProfile::full());
  for (uint64_t Enc : {0x0001ull, 0x7000ull, 0x8000ull, 0x681full, 0x1000ull | 0x681e}) {
    SCOPED_TRACE(Enc);
    Outcome R = vmread(M, Enc);
    EXPECT_EQ(R.Flags, rflags::ZF);
    EXPECT_EQ(R.Error, 12u);
  }
}

TEST(VirtualMachineControlStructures, VmclearWritesRegionAndVmptrldOfCopyReadsItBack) {
  VmxTestMachine M(VmxProfile::full());
  vmwrite(M, 0x681e, 0x123456789abcull);      // guest RIP
  vmwrite(M, 0x4002, 0x8401e172);             // primary processor-based controls
  M.execWithPointer(enc::VmclearRax, kVmcsRegion);
  EXPECT_EQ(M.arith(), 0u);
  EXPECT_EQ(M.read64(kVmcsRegion + vmcs_layout::fieldOffset(VmcsField::GuestRip)),
            0x123456789abcull);
  EXPECT_EQ(M.read64(kVmcsRegion +
                     vmcs_layout::fieldOffset(VmcsField::PrimaryProcessorBasedVmExecutionControls)),
            0x8401e172u);
  EXPECT_EQ(M.read64(kVmcsRegion + vmcs_layout::LaunchStateOffset) & 0xffffffff, 0u);
  // Copy the whole region to a second region and make that one current.
  std::vector<uint8_t> Page(4096);
  M.Mem.copyOut(Hpa(kVmcsRegion), Page.data(), Page.size());
  M.write(kVmcsRegion2, Page.data(), Page.size());
  M.execWithPointer(enc::VmptrldRax, kVmcsRegion2);
  EXPECT_EQ(M.arith(), 0u);
  EXPECT_EQ(M.vmx().CurrentVmcsPointer, kVmcsRegion2);
  EXPECT_EQ(vmread(M, 0x681e).Value, 0x123456789abcull);
  EXPECT_EQ(vmread(M, 0x4002).Value, 0x8401e172u);
}

TEST(VirtualMachineControlStructures, VmptrldOfAnotherVmcsWritesBackTheCurrentOne) {
  VmxTestMachine M(VmxProfile::full());
  vmwrite(M, 0x681c, 0xabcdef);               // guest RSP in the first VMCS
  M.execWithPointer(enc::VmclearRax, kVmcsRegion2);
  M.execWithPointer(enc::VmptrldRax, kVmcsRegion2);
  EXPECT_EQ(M.read64(kVmcsRegion + vmcs_layout::fieldOffset(VmcsField::GuestRsp)), 0xabcdefu);
  M.execWithPointer(enc::VmptrldRax, kVmcsRegion);
  EXPECT_EQ(vmread(M, 0x681c).Value, 0xabcdefu);
}

} // namespace
} // namespace vmxsim::test
