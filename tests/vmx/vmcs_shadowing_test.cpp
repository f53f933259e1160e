// VMCS shadowing: SDM Vol. 3C, "VMCS Types: Ordinary and Shadow", "VMCS Shadowing
// Bitmap Addresses" (VM-execution controls), "Basic VM-Entry Checks", and the VMREAD /
// VMWRITE pseudo-code (Vol. 3C, "VMX Instruction Reference"). A guest in VMX non-root
// operation with "VMCS shadowing" = 1 executes VMREAD/VMWRITE; the bitmaps decide between
// the VM exit (reasons 23 and 25) and an access to the shadow VMCS the VMCS link pointer
// references. (The VM-entry checks on the bitmap addresses and the link pointer are rows
// of vm_entry_checks.def, tested by tests/vmx/vm_entries_test.cpp.)
#include "tests/support/vmx_test_machine.h"

#include "cpu/msrs.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_exit.h"

#include <gtest/gtest.h>

#include <vector>

namespace vmxsim::test {
namespace {

using F = VmcsField;
using Bytes = std::vector<uint8_t>;

constexpr uint64_t kShadowVmcs = 0x304000;
constexpr uint64_t kVmreadBitmap = 0x305000, kVmwriteBitmap = 0x306000;
constexpr uint64_t kCf = rflags::CF, kZf = rflags::ZF;

constexpr uint64_t kGuestRipEncoding = 0x681e;        // a natural-width guest-state field
constexpr uint64_t kTscOffsetEncoding = 0x2010;       // a 64-bit control field
constexpr uint64_t kExitQualificationEncoding = 0x6400; // a read-only data field

/// vmread rbx, rax; vmcall
const Bytes kGuestVmread{0x0f, 0x78, 0xc3, 0x0f, 0x01, 0xc1};
/// vmwrite rax, rbx; vmcall
const Bytes kGuestVmwrite{0x0f, 0x79, 0xc3, 0x0f, 0x01, 0xc1};

/// A machine whose current (ordinary) VMCS runs the known-good guest with "VMCS
/// shadowing" = 1, all-zero VMREAD/VMWRITE bitmaps and a shadow VMCS at kShadowVmcs as the
/// VMCS link pointer. Setting the shadow VMCS's fields goes through the instructions a
/// hypervisor uses: VMPTRLD of the shadow VMCS, VMWRITE, VMPTRLD of the ordinary one.
struct ShadowingMachine : VmxTestMachine {
  explicit ShadowingMachine(const VmxProfile &P = VmxProfile::full()) : VmxTestMachine(P) {
    const uint32_t ShadowRevision = kVmcsRevisionId | 0x80000000u;
    write(kShadowVmcs, &ShadowRevision, 4);
    const std::vector<uint8_t> Zero(4096, 0);
    write(kVmreadBitmap, Zero.data(), Zero.size());
    write(kVmwriteBitmap, Zero.data(), Zero.size());
    VmcsData &V = vmcs();
    V.set(F::PrimaryProcessorBasedVmExecutionControls,
          V.get(F::PrimaryProcessorBasedVmExecutionControls) |
              controlBit(VmxControl::ActivateSecondaryControls));
    V.set(F::SecondaryProcessorBasedVmExecutionControls,
          controlBit(VmxControl::VmcsShadowing));
    V.set(F::VmreadBitmapAddress, kVmreadBitmap);
    V.set(F::VmwriteBitmapAddress, kVmwriteBitmap);
    V.set(F::VmcsLinkPointer, kShadowVmcs);
    const uint8_t Hlt = 0xf4;
    write(kHostCode, &Hlt, 1);
  }

  /// VMWRITE of Value to the shadow VMCS's field Encoding from VMX root operation.
  void setShadowField(uint64_t Encoding, uint64_t Value) {
    execWithPointer(enc::VmptrldRax, kShadowVmcs);
    ASSERT_EQ(arith(), 0u);
    S.Gpr[RAX] = Encoding;
    S.Gpr[RBX] = Value;
    exec(enc::VmwriteRaxRbx);
    ASSERT_EQ(arith(), 0u);
    execWithPointer(enc::VmptrldRax, kVmcsRegion);
    ASSERT_EQ(arith(), 0u);
  }
  /// VMREAD of the shadow VMCS's field Encoding from VMX root operation (the ordinary
  /// VMCS is current again afterwards).
  uint64_t shadowField(uint64_t Encoding) {
    Cpu_.Activity = ActivityState::Active; // the host halted after the guest's VM exit
    execWithPointer(enc::VmptrldRax, kShadowVmcs);
    S.Gpr[RAX] = Encoding;
    exec(enc::VmreadRbxRax);
    uint64_t V = S.Gpr[RBX];
    execWithPointer(enc::VmptrldRax, kVmcsRegion);
    return V;
  }
  void setBitmapBit(uint64_t Bitmap, uint64_t Encoding) {
    uint8_t B = uint8_t(Mem.read(Hpa(Bitmap + (Encoding & 0x7fff) / 8), 1)) |
                uint8_t(1u << (Encoding % 8));
    write(Bitmap + (Encoding & 0x7fff) / 8, &B, 1);
  }
  /// Runs Guest (an instruction then VMCALL) with RAX and RBX as given, until the host
  /// halts after the guest's VM exit.
  void runGuest(const Bytes &Guest, uint64_t Rax, uint64_t Rbx) {
    write(kGuestCode, Guest.data(), Guest.size());
    S.Gpr[RAX] = Rax;
    S.Gpr[RBX] = Rbx;
    StepResult R = exec(enc::Vmlaunch, 20);
    ASSERT_FALSE(R.Faulted) << "vector " << unsigned(R.Vector);
    ASSERT_EQ(R.Why, StopReason::Halted);
    ASSERT_FALSE(Cpu_.NonRoot);
  }
  uint64_t guestArith() { return vmcs().get(F::GuestRflags) & rflags::Arith; }
};

/// The guest's instruction passed without a VM exit: the guest went on to its VMCALL.
void expectNoExitThenVmcall(ShadowingMachine &M) {
  EXPECT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode + 3);
}

// --- "VMCS Types: Ordinary and Shadow" and "Basic VM-Entry Checks" --------------------

TEST(VmxInstructions, VmptrldOfShadowVmcsSucceedsWithVmcsShadowing) {
  ShadowingMachine M;
  M.execWithPointer(enc::VmptrldRax, kShadowVmcs);
  EXPECT_EQ(M.arith(), 0u);
  EXPECT_EQ(M.vmx().CurrentVmcsPointer, kShadowVmcs);
  EXPECT_TRUE(M.vmx().CurrentIsShadow);
  // VMX root operation reads and writes either type of VMCS.
  M.S.Gpr[RAX] = kTscOffsetEncoding;
  M.S.Gpr[RBX] = 0x1122334455667788ull;
  M.exec(enc::VmwriteRaxRbx);
  EXPECT_EQ(M.arith(), 0u);
  M.S.Gpr[RBX] = 0;
  M.exec(enc::VmreadRbxRax);
  EXPECT_EQ(M.arith(), 0u);
  EXPECT_EQ(M.S.Gpr[RBX], 0x1122334455667788ull);
}

TEST(VmEntries, VmlaunchAndVmresumeWithShadowCurrentVmcsFailInvalid) {
  ShadowingMachine M;
  M.execWithPointer(enc::VmptrldRax, kShadowVmcs);
  M.exec(enc::Vmlaunch);
  EXPECT_EQ(M.arith(), kCf);
  EXPECT_FALSE(M.Cpu_.NonRoot);
  M.exec(enc::Vmresume);
  EXPECT_EQ(M.arith(), kCf);
  // The VM-instruction error field of the shadow VMCS is untouched (VMfailInvalid).
  M.S.Gpr[RAX] = 0x4400;
  M.exec(enc::VmreadRbxRax);
  EXPECT_EQ(M.S.Gpr[RBX], 0u);
}

TEST(VmEntries, OrdinaryVmcsAfterShadowOneLaunches) {
  // The indicator belongs to the VMCS: making the ordinary VMCS current again lets VM
  // entry proceed.
  ShadowingMachine M;
  M.execWithPointer(enc::VmptrldRax, kShadowVmcs);
  M.execWithPointer(enc::VmptrldRax, kVmcsRegion);
  EXPECT_FALSE(M.vmx().CurrentIsShadow);
  M.runGuest(kGuestVmread, kGuestRipEncoding, 0);
  expectNoExitThenVmcall(M);
}

// --- VMREAD in VMX non-root operation --------------------------------------------------

TEST(VmxNonRootOperation, VmreadWithClearBitmapBitReadsTheShadowVmcs) {
  ShadowingMachine M;
  M.setShadowField(kGuestRipEncoding, 0xfedcba9876543210ull);
  M.runGuest(kGuestVmread, kGuestRipEncoding, 0);
  expectNoExitThenVmcall(M);
  EXPECT_EQ(M.S.Gpr[RBX], 0xfedcba9876543210ull);
  EXPECT_EQ(M.guestArith(), 0u); // VMsucceed
}

TEST(VmxNonRootOperation, VmreadHighAccessReadsBits63To32OfTheShadowField) {
  ShadowingMachine M;
  M.setShadowField(kTscOffsetEncoding, 0x8877665544332211ull);
  M.runGuest(kGuestVmread, kTscOffsetEncoding | 1, 0);
  expectNoExitThenVmcall(M);
  EXPECT_EQ(M.S.Gpr[RBX], 0x88776655u);
}

TEST(VmxNonRootOperation, VmreadWithSetBitmapBitExitsWithReason23) {
  ShadowingMachine M;
  M.setBitmapBit(kVmreadBitmap, kGuestRipEncoding);
  M.runGuest(kGuestVmread, kGuestRipEncoding, 0x5555);
  const VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::Vmread));
  EXPECT_EQ(V.get(F::ExitQualification), 0u);
  EXPECT_EQ(V.get(F::VmExitInstructionLength), 3u);
  // Reg1 = RBX (3 << 3), address size 64 (2 << 7), register operand (1 << 10), Reg2 = RAX.
  EXPECT_EQ(V.get(F::VmExitInstructionInformation), (3u << 3) | (2u << 7) | (1u << 10));
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode);
  EXPECT_EQ(M.S.Gpr[RBX], 0x5555u);
}

TEST(VmxNonRootOperation, VmreadBitmapBitIsEncodingBits14To0) {
  // The bit of another field (the neighbouring encoding's byte) does not matter; the
  // high-access encoding has its own bit.
  ShadowingMachine M;
  M.setBitmapBit(kVmreadBitmap, kTscOffsetEncoding | 1);
  M.setShadowField(kTscOffsetEncoding, 0x1234);
  M.runGuest(kGuestVmread, kTscOffsetEncoding, 0);
  expectNoExitThenVmcall(M);
  EXPECT_EQ(M.S.Gpr[RBX], 0x1234u);
  ShadowingMachine M2;
  M2.setBitmapBit(kVmreadBitmap, kTscOffsetEncoding | 1);
  M2.runGuest(kGuestVmread, kTscOffsetEncoding | 1, 0);
  EXPECT_EQ(M2.vmcs().get(F::ExitReason), uint64_t(ExitReason::Vmread));
}

TEST(VmxNonRootOperation, VmreadOfEncodingAboveBit14ExitsWhateverTheBitmap) {
  ShadowingMachine M;
  M.runGuest(kGuestVmread, 0x8000 | kGuestRipEncoding, 0);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Vmread));
  ShadowingMachine M2;
  M2.runGuest(kGuestVmread, (uint64_t(1) << 32) | kGuestRipEncoding, 0);
  EXPECT_EQ(M2.vmcs().get(F::ExitReason), uint64_t(ExitReason::Vmread));
}

TEST(VmxNonRootOperation, VmreadWithoutVmcsShadowingExitsWhateverTheBitmap) {
  ShadowingMachine M;
  M.vmcs().set(F::SecondaryProcessorBasedVmExecutionControls, 0);
  M.vmcs().set(F::VmcsLinkPointer, kInvalidVmcsPointer);
  M.runGuest(kGuestVmread, kGuestRipEncoding, 0);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Vmread));
}

TEST(VmxNonRootOperation, VmreadWithInvalidLinkPointerFailsInvalid) {
  ShadowingMachine M;
  M.vmcs().set(F::VmcsLinkPointer, kInvalidVmcsPointer);
  M.runGuest(kGuestVmread, kGuestRipEncoding, 0x5555);
  expectNoExitThenVmcall(M);
  EXPECT_EQ(M.guestArith(), kCf);
  EXPECT_EQ(M.S.Gpr[RBX], 0x5555u);
}

TEST(VmxNonRootOperation, VmreadOfUnsupportedFieldFailsValidInTheCurrentVmcs) {
  ShadowingMachine M;
  M.runGuest(kGuestVmread, 0x0006, 0x5555); // HLAT prefix size: not modelled
  expectNoExitThenVmcall(M);
  EXPECT_EQ(M.guestArith(), kZf);
  EXPECT_EQ(M.S.Gpr[RBX], 0x5555u);
  // VMfailValid wrote the error into the current VMCS; the VM exit that followed (VMCALL)
  // does not change the VM-instruction error field.
  EXPECT_EQ(M.vmcs().get(F::VmInstructionError), 12u);
  EXPECT_EQ(M.shadowField(0x4400), 0u);
}

// --- VMWRITE in VMX non-root operation -------------------------------------------------

TEST(VmxNonRootOperation, VmwriteWithClearBitmapBitWritesTheShadowVmcs) {
  ShadowingMachine M;
  const uint64_t OrdinaryTscOffset = M.vmcs().get(F::TscOffset);
  M.runGuest(kGuestVmwrite, kTscOffsetEncoding, 0x0123456789abcdefull);
  expectNoExitThenVmcall(M);
  EXPECT_EQ(M.guestArith(), 0u);
  EXPECT_EQ(M.vmcs().get(F::TscOffset), OrdinaryTscOffset);
  EXPECT_EQ(M.shadowField(kTscOffsetEncoding), 0x0123456789abcdefull);
}

TEST(VmxNonRootOperation, VmwriteTruncatesToTheShadowFieldWidth) {
  ShadowingMachine M;
  M.setShadowField(kTscOffsetEncoding, 0x1111111122222222ull);
  M.runGuest(kGuestVmwrite, kTscOffsetEncoding | 1, 0xaaaaaaaabbbbbbbbull); // high access
  expectNoExitThenVmcall(M);
  EXPECT_EQ(M.shadowField(kTscOffsetEncoding), 0xbbbbbbbb22222222ull);
  ShadowingMachine M2;
  M2.runGuest(kGuestVmwrite, 0x4004, 0xffffffff12345678ull); // exception bitmap, 32 bits
  EXPECT_EQ(M2.shadowField(0x4004), 0x12345678u);
}

TEST(VmxNonRootOperation, VmwriteWithSetBitmapBitExitsWithReason25) {
  ShadowingMachine M;
  M.setBitmapBit(kVmwriteBitmap, kTscOffsetEncoding);
  M.runGuest(kGuestVmwrite, kTscOffsetEncoding, 0x77);
  const VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::Vmwrite));
  EXPECT_EQ(V.get(F::ExitQualification), 0u);
  EXPECT_EQ(V.get(F::VmExitInstructionLength), 3u);
  // Reg1 = RBX (the source), register operand, Reg2 = RAX (the encoding).
  EXPECT_EQ(V.get(F::VmExitInstructionInformation), (3u << 3) | (2u << 7) | (1u << 10));
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode);
  EXPECT_EQ(M.shadowField(kTscOffsetEncoding), 0u);
}

TEST(VmxNonRootOperation, VmwriteUsesTheVmwriteBitmapNotTheVmreadBitmap) {
  ShadowingMachine M;
  M.setBitmapBit(kVmreadBitmap, kTscOffsetEncoding);
  M.runGuest(kGuestVmwrite, kTscOffsetEncoding, 0x77);
  expectNoExitThenVmcall(M);
  EXPECT_EQ(M.shadowField(kTscOffsetEncoding), 0x77u);
  ShadowingMachine M2;
  M2.setBitmapBit(kVmwriteBitmap, kTscOffsetEncoding);
  M2.setShadowField(kTscOffsetEncoding, 0x99);
  M2.runGuest(kGuestVmread, kTscOffsetEncoding, 0);
  expectNoExitThenVmcall(M2);
  EXPECT_EQ(M2.S.Gpr[RBX], 0x99u);
}

TEST(VmxNonRootOperation, VmwriteWithInvalidLinkPointerFailsInvalid) {
  ShadowingMachine M;
  M.vmcs().set(F::VmcsLinkPointer, kInvalidVmcsPointer);
  M.runGuest(kGuestVmwrite, kTscOffsetEncoding, 0x77);
  expectNoExitThenVmcall(M);
  EXPECT_EQ(M.guestArith(), kCf);
}

TEST(VmxNonRootOperation, VmwriteOfReadOnlyShadowFieldFollowsVmxMiscBit29) {
  // IA32_VMX_MISC[29] = 1 (full): the exit qualification of the shadow VMCS is written.
  ShadowingMachine M;
  M.runGuest(kGuestVmwrite, kExitQualificationEncoding, 0x42);
  expectNoExitThenVmcall(M);
  EXPECT_EQ(M.guestArith(), 0u);
  EXPECT_EQ(M.shadowField(kExitQualificationEncoding), 0x42u);
  // A processor with VMCS shadowing but without bit 29: error 13 in the current VMCS.
  static const VmxProfile NoAnyField = [] {
    VmxProfile P = VmxProfile::full();
    P.VmwriteAnyField = false;
    return P;
  }();
  ASSERT_FALSE(vmxCapabilityMsr(NoAnyField, msr::IA32_VMX_MISC, 0).value_or(0) & (1u << 29));
  ShadowingMachine M2(NoAnyField);
  M2.runGuest(kGuestVmwrite, kExitQualificationEncoding, 0x42);
  expectNoExitThenVmcall(M2);
  EXPECT_EQ(M2.guestArith(), kZf);
  EXPECT_EQ(M2.vmcs().get(F::VmInstructionError), 13u);
  EXPECT_EQ(M2.shadowField(kExitQualificationEncoding), 0u);
}

// --- Capability reporting ------------------------------------------------------------

TEST(VmxCapabilities, VmcsShadowingComesWithVmwriteToAnyField) {
  // Every profile that allows "VMCS shadowing" also reports IA32_VMX_MISC[29], so that
  // a hypervisor may shadow the read-only exit-information fields (Linux's
  // cpu_has_vmx_shadow_vmcs requires both).
  for (const VmxProfile *P : {&VmxProfile::full(), &VmxProfile::kvmNested(),
                              &VmxProfile::minimal()}) {
    SCOPED_TRACE(P->Name);
    const uint64_t Ctls2 =
        vmxCapabilityMsr(*P, msr::IA32_VMX_PROCBASED_CTLS2, 0).value_or(0);
    const bool Shadowing = (Ctls2 >> 32) & controlBit(VmxControl::VmcsShadowing);
    EXPECT_EQ(Shadowing, P->has(VmxFeature::VmcsShadowing));
    if (Shadowing) {
      EXPECT_TRUE(vmxCapabilityMsr(*P, msr::IA32_VMX_MISC, 0).value_or(0) & (1u << 29));
    }
  }
  EXPECT_TRUE(VmxProfile::full().has(VmxFeature::VmcsShadowing));
}

} // namespace
} // namespace vmxsim::test
