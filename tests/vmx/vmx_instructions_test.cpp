// SDM Vol. 3C, "VMX Instruction Reference": the fault/fail matrix of each VMX
// instruction — #UD, #GP, memory-operand faults, VMfailInvalid and VMfailValid(n) with
// the exact RFLAGS of each outcome.
#include "tests/support/vmx_test_machine.h"

#include "cpu/msrs.h"
#include "cpu/vmx/vmx_instructions.h"

#include <gtest/gtest.h>

namespace vmxsim::test {
namespace {

constexpr uint64_t kCf = rflags::CF, kZf = rflags::ZF;

void enterCpl3(VmxTestMachine &M) {
  M.S.seg(SegReg::CS) = Segment{kSelUserCode64, 0, 0xffffffff, 0xfb | Segment::L | Segment::G};
  M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
  M.Cpu_.modeChanged();
}

void enterCompatibilityMode(VmxTestMachine &M) {
  M.S.seg(SegReg::CS) = Segment{kSelCode32, 0, 0xffffffff, 0x9b | Segment::DB | Segment::G};
  M.Cpu_.modeChanged();
}

void expectSucceed(VmxTestMachine &M) {
  EXPECT_EQ(M.arith(), 0u);
}
void expectFailInvalid(VmxTestMachine &M) { EXPECT_EQ(M.arith(), kCf); }
void expectFailValid(VmxTestMachine &M, uint32_t Error) {
  EXPECT_EQ(M.arith(), kZf);
  EXPECT_EQ(M.vmcs().get(VmcsField::VmInstructionError), Error);
}

// --- VMXON ------------------------------------------------------------------------------

TEST(VmxInstructions, VmxonSucceedsAndClearsFlags) {
  VmxTestMachine M(VmxProfile::full(), false);
  M.S.Rflags |= rflags::Arith;
  StepResult R = M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  EXPECT_FALSE(R.Faulted);
  expectSucceed(M);
  EXPECT_TRUE(M.vmx().InVmxOperation);
  EXPECT_EQ(M.vmx().VmxonPointer, kVmxonRegion);
  EXPECT_EQ(M.vmx().CurrentVmcsPointer, kInvalidVmcsPointer);
  EXPECT_EQ(M.S.Rip, kCodeBase + 4);
}

TEST(VmxInstructions, VmxonWithCr4VmxeClearRaisesUd) {
  VmxTestMachine M(VmxProfile::full(), false);
  M.S.Cr4 &= ~cr4::VMXE;
  StepResult R = M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  EXPECT_TRUE(R.Faulted);
  EXPECT_EQ(R.Vector, vec::UD);
  EXPECT_FALSE(M.vmx().InVmxOperation);
}

TEST(VmxInstructions, VmxonWithoutVmxModelRaisesUd) {
  CpuModel NoVmx = CpuModel::defaultModel();
  NoVmx.Vmx = nullptr;
  TestMachine T(64ull << 20, NoVmx);
  T.setupLongMode();
  T.S.Cr4 |= cr4::VMXE;
  uint64_t Ptr = kVmxonRegion;
  T.write(kPointerSlot, &Ptr, 8);
  T.S.Gpr[RAX] = kPointerSlot;
  T.loadCode(enc::VmxonRax);
  ExceptionRecorder Rec;
  T.Cpu_.Observer = &Rec;
  T.run(1);
  EXPECT_FALSE(T.Cpu_.Vmx->InVmxOperation);
  EXPECT_TRUE(Rec.Seen);
  EXPECT_EQ(Rec.Event.Vector, vec::UD);
}

TEST(VmxInstructions, VmxonInRealModeRaisesUd) {
  VmxTestMachine M(VmxProfile::full(), false);
  M.setupReal();
  M.S.Cr4 |= cr4::VMXE;
  StepResult R = M.exec(enc::VmxonRax);
  EXPECT_TRUE(R.Faulted);
  EXPECT_EQ(R.Vector, vec::UD);
}

TEST(VmxInstructions, VmxonInCompatibilityModeRaisesUd) {
  VmxTestMachine M(VmxProfile::full(), false);
  enterCompatibilityMode(M);
  StepResult R = M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  EXPECT_TRUE(R.Faulted);
  EXPECT_EQ(R.Vector, vec::UD);
}

TEST(VmxInstructions, VmxonInVirtual8086ModeRaisesUd) {
  VmxTestMachine M(VmxProfile::full(), false);
  M.setupProtected32();
  M.S.Cr4 |= cr4::VMXE;
  M.S.Rflags |= rflags::VM;
  M.Cpu_.modeChanged();
  StepResult R = M.exec(enc::VmxonRax);
  EXPECT_TRUE(R.Faulted);
  EXPECT_EQ(R.Vector, vec::UD);
}

TEST(VmxInstructions, VmxonAtCpl3RaisesGp) {
  VmxTestMachine M(VmxProfile::full(), false);
  enterCpl3(M);
  StepResult R = M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  EXPECT_TRUE(R.Faulted);
  EXPECT_EQ(R.Vector, vec::GP);
  EXPECT_EQ(R.ErrorCode, 0u);
}

TEST(VmxInstructions, VmxonWithFeatureControlUnlockedRaisesGp) {
  VmxTestMachine M(VmxProfile::full(), false);
  (*M.Cpu_.Msrs)[MsrSlot::IA32_FEATURE_CONTROL] = 0x4;
  StepResult R = M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  EXPECT_EQ(R.Vector, vec::GP);
  EXPECT_FALSE(M.vmx().InVmxOperation);
}

TEST(VmxInstructions, VmxonWithVmxonOutsideSmxDisabledRaisesGp) {
  VmxTestMachine M(VmxProfile::full(), false);
  (*M.Cpu_.Msrs)[MsrSlot::IA32_FEATURE_CONTROL] = 0x1;
  StepResult R = M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  EXPECT_EQ(R.Vector, vec::GP);
}

TEST(VmxInstructions, VmxonWithCr0NeClearRaisesGp) {
  VmxTestMachine M(VmxProfile::full(), false);
  M.S.Cr0 &= ~cr0::NE;
  StepResult R = M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  EXPECT_EQ(R.Vector, vec::GP);
}

TEST(VmxInstructions, VmxonNonCanonicalOperandRaisesGp) {
  VmxTestMachine M(VmxProfile::full(), false);
  M.S.Gpr[RAX] = 0x0000800000000000ull;
  StepResult R = M.exec(enc::VmxonRax);
  EXPECT_EQ(R.Vector, vec::GP);
  EXPECT_EQ(R.ErrorCode, 0u);
}

TEST(VmxInstructions, VmxonUnmappedOperandRaisesPf) {
  VmxTestMachine M(VmxProfile::full(), false);
  M.S.Gpr[RAX] = 0x100000000ull; // beyond the identity-mapped 4 GiB
  StepResult R = M.exec(enc::VmxonRax);
  EXPECT_EQ(R.Vector, vec::PF);
  EXPECT_EQ(R.ErrorCode, 0u); // not present, read, supervisor
  EXPECT_FALSE(M.vmx().InVmxOperation);
}

TEST(VmxInstructions, VmxonMisalignedPointerFailsInvalid) {
  VmxTestMachine M(VmxProfile::full(), false);
  M.S.Rflags |= rflags::Arith;
  M.execWithPointer(enc::VmxonRax, kVmxonRegion + 8);
  expectFailInvalid(M);
  EXPECT_FALSE(M.vmx().InVmxOperation);
}

TEST(VmxInstructions, VmxonPointerBeyondPhysicalWidthFailsInvalid) {
  VmxTestMachine M(VmxProfile::full(), false);
  M.execWithPointer(enc::VmxonRax, uint64_t(1) << 46);
  expectFailInvalid(M);
}

TEST(VmxInstructions, VmxonWrongRevisionFailsInvalid) {
  VmxTestMachine M(VmxProfile::full(), false);
  uint32_t Bad = kVmcsRevisionId + 1;
  M.write(kVmxonRegion, &Bad, 4);
  M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  expectFailInvalid(M);
  uint32_t Shadow = kVmcsRevisionId | 0x80000000u;
  M.write(kVmxonRegion, &Shadow, 4);
  M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  expectFailInvalid(M);
  EXPECT_FALSE(M.vmx().InVmxOperation);
}

TEST(VmxInstructions, VmxonTwiceFailsWithError15) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  expectFailValid(M, 15);
}

TEST(VmxInstructions, VmxonTwiceWithoutCurrentVmcsFailsInvalid) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmclearRax, kVmcsRegion);
  M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  expectFailInvalid(M);
}

TEST(VmxInstructions, VmxonTwiceAtCpl3RaisesGp) {
  VmxTestMachine M;
  enterCpl3(M);
  StepResult R = M.execWithPointer(enc::VmxonRax, kVmxonRegion);
  EXPECT_EQ(R.Vector, vec::GP);
}

// --- VMXOFF -----------------------------------------------------------------------------

TEST(VmxInstructions, VmxoffLeavesVmxOperation) {
  VmxTestMachine M;
  M.S.Rflags |= rflags::Arith;
  M.exec(enc::Vmxoff);
  expectSucceed(M);
  EXPECT_FALSE(M.vmx().InVmxOperation);
  StepResult R = M.exec(enc::Vmxoff);
  EXPECT_EQ(R.Vector, vec::UD);
}

TEST(VmxInstructions, VmxoffAtCpl3RaisesGp) {
  VmxTestMachine M;
  enterCpl3(M);
  EXPECT_EQ(M.exec(enc::Vmxoff).Vector, vec::GP);
  EXPECT_TRUE(M.vmx().InVmxOperation);
}

TEST(VmxInstructions, VmxoffInCompatibilityModeRaisesUd) {
  VmxTestMachine M;
  enterCompatibilityMode(M);
  EXPECT_EQ(M.exec(enc::Vmxoff).Vector, vec::UD);
}

// --- VMCLEAR / VMPTRLD / VMPTRST ------------------------------------------------------

TEST(VmxInstructions, VmclearNotInVmxOperationRaisesUd) {
  VmxTestMachine M(VmxProfile::full(), false);
  EXPECT_EQ(M.execWithPointer(enc::VmclearRax, kVmcsRegion).Vector, vec::UD);
  EXPECT_EQ(M.execWithPointer(enc::VmptrldRax, kVmcsRegion).Vector, vec::UD);
  EXPECT_EQ(M.execWithPointer(enc::VmptrstRax, 0).Vector, vec::UD);
  EXPECT_EQ(M.exec(enc::VmreadRbxRax).Vector, vec::UD);
  EXPECT_EQ(M.exec(enc::VmwriteRaxRbx).Vector, vec::UD);
  EXPECT_EQ(M.exec(enc::Vmlaunch).Vector, vec::UD);
  EXPECT_EQ(M.exec(enc::Vmresume).Vector, vec::UD);
  EXPECT_EQ(M.exec(enc::Vmcall).Vector, vec::UD);
}

TEST(VmxInstructions, VmclearMisalignedFailsWithError2) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmclearRax, kVmcsRegion2 + 0x10);
  expectFailValid(M, 2);
  M.execWithPointer(enc::VmclearRax, uint64_t(1) << 50);
  expectFailValid(M, 2);
}

TEST(VmxInstructions, VmclearVmxonPointerFailsWithError3) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmclearRax, kVmxonRegion);
  expectFailValid(M, 3);
}

TEST(VmxInstructions, VmclearOfCurrentVmcsInvalidatesPointer) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmclearRax, kVmcsRegion);
  expectSucceed(M);
  EXPECT_EQ(M.vmx().CurrentVmcsPointer, kInvalidVmcsPointer);
  // With no current VMCS, VMfail is VMfailInvalid.
  M.execWithPointer(enc::VmclearRax, kVmxonRegion);
  expectFailInvalid(M);
}

TEST(VmxInstructions, VmptrldMisalignedFailsWithError9) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmptrldRax, kVmcsRegion2 + 1);
  expectFailValid(M, 9);
}

TEST(VmxInstructions, VmptrldVmxonPointerFailsWithError10) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmptrldRax, kVmxonRegion);
  expectFailValid(M, 10);
}

TEST(VmxInstructions, VmptrldWrongRevisionFailsWithError11) {
  VmxTestMachine M;
  uint32_t Bad = 0x12345;
  M.write(kVmcsRegion2, &Bad, 4);
  M.execWithPointer(enc::VmptrldRax, kVmcsRegion2);
  expectFailValid(M, 11);
  EXPECT_EQ(M.vmx().CurrentVmcsPointer, kVmcsRegion);
}

TEST(VmxInstructions, VmptrldShadowIndicatorWithoutShadowingFailsWithError11) {
  VmxTestMachine M(VmxProfile::minimal()); // no VMCS shadowing
  uint32_t Shadow = kVmcsRevisionId | 0x80000000u;
  M.write(kVmcsRegion2, &Shadow, 4);
  M.execWithPointer(enc::VmptrldRax, kVmcsRegion2);
  expectFailValid(M, 11);
}

TEST(VmxInstructions, VmptrldWithoutCurrentVmcsFailsInvalid) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmclearRax, kVmcsRegion);
  M.execWithPointer(enc::VmptrldRax, kVmxonRegion);
  expectFailInvalid(M);
}

TEST(VmxInstructions, VmptrstStoresCurrentPointer) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmptrstRax, 0);
  expectSucceed(M);
  EXPECT_EQ(M.read64(kPointerSlot), kVmcsRegion);
}

TEST(VmxInstructions, VmptrstWithoutCurrentVmcsStoresAllOnes) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmclearRax, kVmcsRegion);
  M.execWithPointer(enc::VmptrstRax, 0);
  expectSucceed(M);
  EXPECT_EQ(M.read64(kPointerSlot), ~uint64_t(0));
}

TEST(VmxInstructions, VmptrstAtCpl3RaisesGp) {
  VmxTestMachine M;
  enterCpl3(M);
  EXPECT_EQ(M.execWithPointer(enc::VmptrstRax, 0).Vector, vec::GP);
}

// --- VMREAD / VMWRITE ----------------------------------------------------------------

TEST(VmxInstructions, VmreadWithoutCurrentVmcsFailsInvalid) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmclearRax, kVmcsRegion);
  M.S.Gpr[RAX] = 0x681e;
  M.exec(enc::VmreadRbxRax);
  expectFailInvalid(M);
  M.exec(enc::VmwriteRaxRbx);
  expectFailInvalid(M);
}

TEST(VmxInstructions, VmreadUnsupportedFieldFailsWithError12) {
  VmxTestMachine M;
  M.S.Gpr[RBX] = 0x5555;
  M.S.Gpr[RAX] = 0x0006; // HLAT prefix size: not modelled
  M.exec(enc::VmreadRbxRax);
  expectFailValid(M, 12);
  EXPECT_EQ(M.S.Gpr[RBX], 0x5555u);
  M.S.Gpr[RAX] = 0x100000000ull | 0x681e; // bits 63:32 set name no field
  M.exec(enc::VmreadRbxRax);
  expectFailValid(M, 12);
}

TEST(VmxInstructions, VmwriteReadOnlyFieldFailsWithError13) {
  VmxTestMachine M(VmxProfile::minimal());
  M.S.Gpr[RAX] = 0x4402; // exit reason
  M.S.Gpr[RBX] = 7;
  M.exec(enc::VmwriteRaxRbx);
  expectFailValid(M, 13);
}

TEST(VmxInstructions, VmwriteReadOnlyFieldSucceedsWithVmwriteAnyField) {
  VmxTestMachine M(VmxProfile::full());
  M.S.Gpr[RAX] = 0x4402;
  M.S.Gpr[RBX] = 7;
  M.exec(enc::VmwriteRaxRbx);
  expectSucceed(M);
  EXPECT_EQ(M.vmcs().get(VmcsField::ExitReason), 7u);
}

TEST(VmxInstructions, VmreadAtCpl3RaisesGp) {
  VmxTestMachine M;
  enterCpl3(M);
  M.S.Gpr[RAX] = 0x681e;
  EXPECT_EQ(M.exec(enc::VmreadRbxRax).Vector, vec::GP);
  EXPECT_EQ(M.exec(enc::VmwriteRaxRbx).Vector, vec::GP);
}

TEST(VmxInstructions, VmreadToMemoryWritesEightBytes) {
  VmxTestMachine M;
  M.vmcs().set(VmcsField::GuestRip, 0x1122334455667788ull);
  M.S.Gpr[RBX] = 0x681e;
  M.S.Gpr[RAX] = kPointerSlot;
  M.exec(enc::VmreadMemRbx);
  expectSucceed(M);
  EXPECT_EQ(M.read64(kPointerSlot), 0x1122334455667788ull);
}

TEST(VmxInstructions, VmwriteFromUnmappedMemoryRaisesPf) {
  VmxTestMachine M;
  M.S.Gpr[RBX] = 0x681e;
  M.S.Gpr[RAX] = 0x100000000ull;
  StepResult R = M.exec(enc::VmwriteRbxMem);
  EXPECT_EQ(R.Vector, vec::PF);
}

TEST(VmxInstructions, VmreadIn32BitModeUsesThirtyTwoBitOperands) {
  // Compatibility mode is #UD, so use legacy protected mode with paging off (CR0.PG=0 is
  // not checked by VMREAD once in VMX operation).
  VmxTestMachine M;
  M.vmcs().set(VmcsField::GuestRip, 0x1122334455667788ull);
  M.S.Efer = 0;
  M.S.Cr0 &= ~cr0::PG;
  M.S.seg(SegReg::CS) = Segment{kSelCode32, 0, 0xffffffff, 0x9b | Segment::DB | Segment::G};
  M.Cpu_.Mmu.flushTlb();
  M.Cpu_.modeChanged();
  M.S.Gpr[RAX] = 0xffffffff0000681eull; // only the low 32 bits name the field
  M.S.Gpr[RBX] = 0xaaaaaaaaaaaaaaaaull;
  M.exec(enc::VmreadRbxRax);
  expectSucceed(M);
  EXPECT_EQ(M.S.Gpr[RBX], 0x55667788u);
}

// --- VMLAUNCH / VMRESUME -------------------------------------------------------------

TEST(VmxInstructions, VmlaunchWithoutCurrentVmcsFailsInvalid) {
  VmxTestMachine M;
  M.execWithPointer(enc::VmclearRax, kVmcsRegion);
  M.exec(enc::Vmlaunch);
  expectFailInvalid(M);
  M.exec(enc::Vmresume);
  expectFailInvalid(M);
}

TEST(VmxInstructions, VmlaunchNonClearVmcsFailsWithError4) {
  VmxTestMachine M;
  M.vmx().CurrentLaunch = LaunchState::Launched;
  M.exec(enc::Vmlaunch);
  expectFailValid(M, 4);
  EXPECT_EQ(M.S.Rip, kCodeBase + 3);
  EXPECT_FALSE(M.Cpu_.NonRoot);
}

TEST(VmxInstructions, VmresumeClearVmcsFailsWithError5) {
  VmxTestMachine M;
  M.exec(enc::Vmresume);
  expectFailValid(M, 5);
}

TEST(VmxInstructions, VmlaunchBlockedByMovSsFailsWithError26) {
  VmxTestMachine M;
  M.Cpu_.ShadowUntil = M.Cpu_.Retired + 1;
  M.Cpu_.ShadowIsMovSs = true;
  M.exec(enc::Vmlaunch);
  expectFailValid(M, 26);
}

TEST(VmxInstructions, VmlaunchAtCpl3RaisesGp) {
  VmxTestMachine M;
  enterCpl3(M);
  EXPECT_EQ(M.exec(enc::Vmlaunch).Vector, vec::GP);
}

// --- VMCALL, INVEPT, INVVPID, VMFUNC ------------------------------------------------

TEST(VmxInstructions, VmcallInRootOperationFailsWithError1) {
  VmxTestMachine M;
  M.exec(enc::Vmcall);
  expectFailValid(M, 1);
}

TEST(VmxInstructions, VmcallAtCpl3RaisesGp) {
  VmxTestMachine M;
  enterCpl3(M);
  EXPECT_EQ(M.exec(enc::Vmcall).Vector, vec::GP);
}

/// The full profile plus EPT: INVEPT's operand checks exist before EPT translation does.
const VmxProfile &withEpt() {
  static const VmxProfile P = [] {
    VmxProfile Q = VmxProfile::full();
    Q.Features |= uint64_t(1) << unsigned(VmxFeature::Ept);
    return Q;
  }();
  return P;
}

TEST(VmxInstructions, InveptUnsupportedTypeFailsWithError28) {
  VmxTestMachine M(withEpt());
  M.S.Gpr[RBX] = 3;
  M.S.Gpr[RAX] = kPointerSlot;
  M.exec(enc::InveptRbxRax);
  expectFailValid(M, 28);
}

TEST(VmxInstructions, InveptSingleContextInvalidEptpFailsWithError28) {
  VmxTestMachine M(withEpt());
  uint64_t Desc[2] = {0x5000 | 0x1e | 0x1, 0}; // memory type 1 (WC): not allowed
  M.write(kPointerSlot, Desc, 16);
  M.S.Gpr[RBX] = 1;
  M.S.Gpr[RAX] = kPointerSlot;
  M.exec(enc::InveptRbxRax);
  expectFailValid(M, 28);
  Desc[0] = 0x5000 | 0x1e; // WB, 4-level walk
  M.write(kPointerSlot, Desc, 16);
  M.exec(enc::InveptRbxRax);
  expectSucceed(M);
}

TEST(VmxInstructions, InveptWithoutEptRaisesUd) {
  VmxTestMachine M(VmxProfile::minimal());
  M.S.Gpr[RBX] = 2;
  M.S.Gpr[RAX] = kPointerSlot;
  EXPECT_EQ(M.exec(enc::InveptRbxRax).Vector, vec::UD);
  EXPECT_EQ(M.exec(enc::InvvpidRbxRax).Vector, vec::UD);
}

TEST(VmxInstructions, InvvpidZeroVpidFailsWithError28) {
  VmxTestMachine M;
  uint64_t Desc[2] = {0, 0x1000};
  M.write(kPointerSlot, Desc, 16);
  M.S.Gpr[RBX] = 1;
  M.S.Gpr[RAX] = kPointerSlot;
  M.exec(enc::InvvpidRbxRax);
  expectFailValid(M, 28);
  M.S.Gpr[RBX] = 2; // all-context ignores the VPID
  M.exec(enc::InvvpidRbxRax);
  expectSucceed(M);
}

TEST(VmxInstructions, InvvpidNonCanonicalAddressFailsWithError28) {
  VmxTestMachine M;
  uint64_t Desc[2] = {1, 0x0000800000000000ull};
  M.write(kPointerSlot, Desc, 16);
  M.S.Gpr[RBX] = 0;
  M.S.Gpr[RAX] = kPointerSlot;
  M.exec(enc::InvvpidRbxRax);
  expectFailValid(M, 28);
}

TEST(VmxInstructions, VmfuncInRootOperationRaisesUd) {
  VmxTestMachine M;
  EXPECT_EQ(M.exec(enc::Vmfunc).Vector, vec::UD);
}

} // namespace
} // namespace vmxsim::test
