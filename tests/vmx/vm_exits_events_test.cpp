// VM exits caused by events and the event side of VMX non-root operation (SDM Vol. 3C,
// "VMX Non-Root Operation" > "Other Causes of VM Exits", "Changes to Event Blocking",
// "Features of VMX Non-Root Operation"; "VM Exits" > "Information for VM Exits Due to
// Vectored Events" and "Information for VM Exits That Occur During Event Delivery").
//
// Every test launches the known-good 64-bit guest at kGuestCode from the host at
// kCodeBase; the host resumes at kHostCode, where a HLT stops the run after a VM exit.
#include "cpu/cost_model.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmx_events.h"
#include "tests/support/vmx_test_machine.h"

#include <gtest/gtest.h>

namespace vmxsim::test {
namespace {

using F = VmcsField;

/// An interrupt controller with one interrupt line, for external-interrupt tests.
class TestInterruptSource : public InterruptSource {
public:
  bool intrPending() override { return Pending; }
  uint8_t acknowledge() override {
    Pending = false;
    ++Acks;
    return Vector;
  }
  bool Pending = false;
  uint8_t Vector = 0x20;
  unsigned Acks = 0;
};

constexpr uint64_t kHandler = 0x150000;   ///< guest IDT handlers point here
constexpr uint64_t kUnmapped = 0x100000000; ///< above the 4 GiB identity map: #PF

class EventsMachine : public VmxTestMachine {
public:
  EventsMachine() {
    const uint8_t Hlt = 0xf4;
    write(kHostCode, &Hlt, 1);
    write(kHandler, &Hlt, 1);
    vmcs().set(F::GuestIdtrLimit, 0xfff);
    Cpu_.Intr = &Intr;
  }
  void guest(const std::vector<uint8_t> &Code) { write(kGuestCode, Code.data(), Code.size()); }
  void handler(const std::vector<uint8_t> &Code) { write(kHandler, Code.data(), Code.size()); }
  /// A 64-bit interrupt gate for Vector to Target.
  void gate(uint8_t Vector, uint64_t Target = kHandler) {
    uint64_t Lo = (Target & 0xffff) | (uint64_t(kSelCode64) << 16) | (uint64_t(0x8e) << 40) |
                  (((Target >> 16) & 0xffff) << 48);
    uint64_t Hi = Target >> 32;
    write(kIdtBase + 16 * Vector, &Lo, 8);
    write(kIdtBase + 16 * Vector + 8, &Hi, 8);
  }
  void setControl(F Word, VmxControl Ctl, bool On = true) {
    uint64_t V = vmcs().get(Word);
    vmcs().set(Word, On ? V | controlBit(Ctl) : V & ~uint64_t(controlBit(Ctl)));
  }
  void pin(VmxControl Ctl, bool On = true) { setControl(F::PinBasedVmExecutionControls, Ctl, On); }
  void proc(VmxControl Ctl, bool On = true) {
    setControl(F::PrimaryProcessorBasedVmExecutionControls, Ctl, On);
  }
  void exitCtl(VmxControl Ctl, bool On = true) { setControl(F::PrimaryVmExitControls, Ctl, On); }
  StopReason launch() { return exec(enc::Vmlaunch, 10000).Why; }
  /// The host halted after the previous exit: wake it to execute VMRESUME.
  StopReason resume() {
    Cpu_.Activity = ActivityState::Active;
    return exec(enc::Vmresume, 10000).Why;
  }
  /// An NMI arriving while the host blocks NMIs, so that it reaches the guest: VM entry
  /// loads the guest's NMI blocking (none) from the interruptibility-state field.
  void nmiForGuest() {
    Cpu_.NmiPending = true;
    Cpu_.NmiBlocked = true;
  }
  uint64_t get(F Field) { return vmcs().get(Field); }
  uint32_t reason() { return uint32_t(get(F::ExitReason)); }
  /// After a VM exit the host is at kHostCode + 1, halted.
  bool exitedToHost() { return !Cpu_.NonRoot && S.Rip == kHostCode + 1; }

  TestInterruptSource Intr;
};

constexpr uint32_t kUd2 = 0x0b0f;

// --- Exceptions (SDM Vol. 3C, "Exceptions" in "Other Causes of VM Exits") -------------

TEST(VmExits, UdInExceptionBitmapExitsWithHardwareExceptionInformation) {
  EventsMachine M;
  M.guest({0x90, 0x0f, 0x0b}); // nop; ud2
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::UD);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 0u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000306u);
  EXPECT_EQ(M.get(F::ExitQualification), 0u);
  EXPECT_EQ(M.get(F::IdtVectoringInformation), 0u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 1); // fault-like: RIP of the UD2
}

TEST(VmExits, ExceptionBitmapOnlyTheVectorsOwnBitCausesExit) {
  for (unsigned Bit = 0; Bit < 32; ++Bit) {
    EventsMachine M;
    M.guest({0x0f, 0x0b});
    M.gate(vec::UD);
    M.vmcs().set(F::ExceptionBitmap, 1u << Bit);
    M.vmcs().set(F::PageFaultErrorCodeMatch, 0xffffffff); // #PF bit alone never matters
    EXPECT_EQ(M.launch(), StopReason::Halted) << Bit;
    if (Bit == vec::UD) {
      EXPECT_TRUE(M.exitedToHost()) << Bit;
      EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000306u) << Bit;
    } else {
      // Delivered through the guest IDT to the handler's HLT.
      EXPECT_TRUE(M.Cpu_.NonRoot) << Bit;
      EXPECT_EQ(M.S.Rip, kHandler + 1) << Bit;
    }
  }
}

// SDM Vol. 3C: "If PFEC & PFEC_MASK = PFEC_MATCH, the page fault causes a VM exit if
// bit 14 in the exception bitmap is 1 ... If PFEC & PFEC_MASK != PFEC_MATCH, the page
// fault causes a VM exit if bit 14 in the exception bitmap is 0."
TEST(VmExits, PageFaultErrorCodeMaskMatchTruthTable) {
  struct Row {
    uint32_t Mask, Match;
    bool Bit14, Exits;
  } Rows[] = {
      {0, 0, true, true},     {0, 0, false, false},   // always equal
      {2, 2, true, true},     {2, 2, false, false},   // write fault: PFEC & 2 == 2
      {2, 0, true, false},    {2, 0, false, true},    // not equal
      {1, 1, true, false},    {1, 1, false, true},    // not-present fault: P = 0
      {0, 4, true, false},    {0, 4, false, true},    // match outside the mask
  };
  for (const Row &R : Rows) {
    EventsMachine M;
    // mov rbx, kUnmapped; mov [rbx], rax  (#PF, error code 2: write, not present)
    M.guest({0x48, 0xbb, 0, 0, 0, 0, 1, 0, 0, 0, 0x48, 0x89, 0x03});
    M.gate(vec::PF);
    M.vmcs().set(F::ExceptionBitmap, R.Bit14 ? 1u << vec::PF : 0);
    M.vmcs().set(F::PageFaultErrorCodeMask, R.Mask);
    M.vmcs().set(F::PageFaultErrorCodeMatch, R.Match);
    EXPECT_EQ(M.launch(), StopReason::Halted);
    std::string Where = "mask " + std::to_string(R.Mask) + " match " +
                        std::to_string(R.Match) + " bit14 " + std::to_string(R.Bit14);
    EXPECT_EQ(M.exitedToHost(), R.Exits) << Where;
    if (!R.Exits) {
      EXPECT_EQ(M.S.Cr2, kUnmapped) << Where; // delivered normally: CR2 loaded
    }
  }
}

TEST(VmExits, PageFaultExitQualificationIsLinearAddressAndCr2IsNotWritten) {
  EventsMachine M;
  M.guest({0x48, 0xbb, 0x08, 0, 0, 0, 1, 0, 0, 0, 0x48, 0x89, 0x03});
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::PF);
  M.S.Cr2 = 0x1234;
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 0u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000b0eu); // error code valid
  EXPECT_EQ(M.get(F::VmExitInterruptionErrorCode), 2u);
  EXPECT_EQ(M.get(F::ExitQualification), kUnmapped + 8);
  EXPECT_EQ(M.S.Cr2, 0x1234u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 10);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 0u);
}

TEST(VmExits, GeneralProtectionExitRecordsErrorCode) {
  EventsMachine M;
  M.guest({0x66, 0xb8, 0x50, 0x00, 0x8e, 0xd8}); // mov ax, 0x50; mov ds, ax (beyond GDT)
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::GP);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000b0du);
  EXPECT_EQ(M.get(F::VmExitInterruptionErrorCode), 0x50u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 4);
}

TEST(VmExits, Int3ExitIsSoftwareExceptionWithInstructionLength) {
  EventsMachine M;
  M.guest({0x90, 0xcc});
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::BP);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 0u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000603u);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 1u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 1);
}

TEST(VmExits, IntNWithVector3NeverCausesExceptionExit) {
  EventsMachine M;
  M.guest({0xcd, 0x03}); // INT 3 (the two-byte form is a software interrupt)
  M.gate(vec::BP);
  M.vmcs().set(F::ExceptionBitmap, 0xffffffff);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  EXPECT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.S.Rip, kHandler + 1);
}

TEST(VmExits, Int1ExitIsPrivilegedSoftwareException) {
  EventsMachine M;
  M.guest({0xf1});
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::DB);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000501u);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 1u);
  EXPECT_EQ(M.get(F::ExitQualification), 0u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
}

TEST(VmExits, SingleStepDebugExitReportsBsAndLeavesDr6) {
  EventsMachine M;
  M.guest({0x90, 0x90});
  M.vmcs().set(F::GuestRflags, 0x102); // TF
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::DB);
  const uint64_t Dr6 = M.S.Dr[6];
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000301u);
  EXPECT_EQ(M.get(F::ExitQualification), 0x4000u); // BS
  EXPECT_EQ(M.S.Dr[6], Dr6);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 1); // trap-like
  EXPECT_EQ(M.get(F::GuestPendingDebugExceptions), 0u);
}

// --- NMIs -----------------------------------------------------------------------------

TEST(VmExits, NmiExitingNmiCausesExitWithNmiInformation) {
  EventsMachine M;
  M.guest({0x90});
  M.pin(VmxControl::NmiExiting);
  M.nmiForGuest();
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 0u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000202u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
  EXPECT_FALSE(M.Cpu_.NmiPending);
  EXPECT_TRUE(M.Cpu_.NmiBlocked); // an NMI VM exit blocks NMIs in the host
}

TEST(VmxNonRootOperation, NmiWithoutNmiExitingIsDeliveredThroughGuestIdt) {
  EventsMachine M;
  M.guest({0x90});
  M.gate(vec::NMI);
  M.nmiForGuest();
  EXPECT_EQ(M.launch(), StopReason::Halted);
  EXPECT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.S.Rip, kHandler + 1);
  EXPECT_TRUE(M.Cpu_.NmiBlocked);
}

// --- External interrupts --------------------------------------------------------------

TEST(VmExits, ExternalInterruptExitWithAcknowledgeRecordsVector) {
  EventsMachine M;
  M.guest({0x90});
  M.pin(VmxControl::ExternalInterruptExiting);
  M.exitCtl(VmxControl::AcknowledgeInterruptOnExit);
  M.Intr.Pending = true;
  M.Intr.Vector = 0x31;
  EXPECT_EQ(M.launch(), StopReason::Halted); // RFLAGS.IF = 0 in the guest
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 1u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000031u);
  EXPECT_EQ(M.Intr.Acks, 1u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
}

TEST(VmExits, ExternalInterruptExitWithoutAcknowledgeLeavesInformationInvalid) {
  EventsMachine M;
  M.guest({0x90});
  M.pin(VmxControl::ExternalInterruptExiting);
  M.Intr.Pending = true;
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 1u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0u);
  EXPECT_EQ(M.Intr.Acks, 0u);
  EXPECT_TRUE(M.Intr.Pending);
}

TEST(VmxNonRootOperation, ExternalInterruptWithoutExitingIsDeliveredWhenIfIsSet) {
  EventsMachine M;
  M.guest({0x90, 0xfb, 0x90, 0x90}); // nop; sti; nop; nop
  M.gate(0x20);
  M.Intr.Pending = true;
  EXPECT_EQ(M.launch(), StopReason::Halted);
  EXPECT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.S.Rip, kHandler + 1);
  EXPECT_EQ(M.Intr.Acks, 1u);
  // Delivered after the instruction in the STI shadow: the return RIP is kGuestCode + 3.
  EXPECT_EQ(M.read64(M.S.Gpr[RSP]), kGuestCode + 3);
}

// --- Event delivery: IDT-vectoring, double and triple faults --------------------------

TEST(VmExits, PageFaultDuringInterruptDeliveryRecordsIdtVectoring) {
  EventsMachine M;
  M.guest({0x90});
  M.gate(0x20);
  M.vmcs().set(F::GuestRflags, 0x202);
  M.vmcs().set(F::GuestRsp, kUnmapped + 0x1000); // the first push faults
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::PF);
  M.Intr.Pending = true;
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 0u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000b0eu);
  EXPECT_EQ(M.get(F::VmExitInterruptionErrorCode), 2u);
  EXPECT_EQ(M.get(F::ExitQualification), kUnmapped + 0xff8);
  EXPECT_EQ(M.get(F::IdtVectoringInformation), 0x80000020u); // external interrupt 0x20
  EXPECT_EQ(M.get(F::IdtVectoringErrorCode), 0u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
  EXPECT_EQ(M.Intr.Acks, 1u); // acknowledged before the delivery faulted
}

TEST(VmExits, GpDuringSoftwareExceptionDeliveryRecordsVectoringAndLength) {
  EventsMachine M;
  M.guest({0xcc}); // INT3 through an IDT whose limit excludes vector 3
  M.vmcs().set(F::GuestIdtrLimit, 0x2f);
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::GP);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000b0du);
  EXPECT_EQ(M.get(F::VmExitInterruptionErrorCode), 3u * 8 + 2); // IDT, vector 3, EXT 0
  EXPECT_EQ(M.get(F::IdtVectoringInformation), 0x80000603u);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 1u);
}

TEST(VmExits, GpDuringUdDeliveryExitsWithUdAsIdtVectoring) {
  EventsMachine M;
  M.guest({0x0f, 0x0b});
  M.vmcs().set(F::GuestIdtrLimit, 0);
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::GP);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000b0du);
  EXPECT_EQ(M.get(F::VmExitInterruptionErrorCode), 6u * 8 + 2 + 1); // IDT, EXT
  EXPECT_EQ(M.get(F::IdtVectoringInformation), 0x80000306u);
}

TEST(VmExits, DoubleFaultInBitmapExitsDirectlyWithoutIdtVectoring) {
  EventsMachine M;
  M.guest({0x66, 0xb8, 0x50, 0x00, 0x8e, 0xd8}); // #GP, whose delivery faults with #GP
  M.vmcs().set(F::GuestIdtrLimit, 0);
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::DF);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000b08u);
  EXPECT_EQ(M.get(F::VmExitInterruptionErrorCode), 0u);
  EXPECT_EQ(M.get(F::IdtVectoringInformation), 0u);
}

TEST(VmExits, PageFaultWithBrokenIdtEscalatesToTripleFaultExit) {
  EventsMachine M;
  // #PF whose delivery raises #GP (IDT limit): #DF, whose delivery raises #GP again.
  M.guest({0x48, 0xbb, 0, 0, 0, 0, 1, 0, 0, 0, 0x48, 0x89, 0x03});
  M.vmcs().set(F::GuestIdtrLimit, 0);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 2u); // triple fault
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0u);
  EXPECT_EQ(M.get(F::IdtVectoringInformation), 0u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 10);
  EXPECT_EQ(M.S.Cr2, kUnmapped); // the #PF was being delivered: CR2 was loaded
  EXPECT_FALSE(M.Cpu_.shutDown());
}

TEST(VmExits, GpDuringDoubleFaultDeliveryRecordsDoubleFaultAsIdtVectoring) {
  EventsMachine M;
  // mov rbx, kUnmapped; mov rax, [rbx]: #PF, whose delivery pushes to an unmapped stack:
  // #PF again, so #DF, whose IDT entry is empty: #GP, which is in the bitmap.
  M.guest({0x48, 0xbb, 0, 0, 0, 0, 1, 0, 0, 0, 0x48, 0x8b, 0x03});
  M.gate(vec::PF);
  M.vmcs().set(F::GuestRsp, kUnmapped + 0x1000);
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::GP);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 0u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000b0du);
  EXPECT_EQ(M.get(F::VmExitInterruptionErrorCode), 8u * 8 + 2 + 1); // IDT, EXT
  EXPECT_EQ(M.get(F::IdtVectoringInformation), 0x80000b08u);
  EXPECT_EQ(M.get(F::IdtVectoringErrorCode), 0u);
}

TEST(VmExits, TripleFaultCausesExitReasonTwoNotShutdown) {
  EventsMachine M;
  M.guest({0x66, 0xb8, 0x50, 0x00, 0x8e, 0xd8});
  M.vmcs().set(F::GuestIdtrLimit, 0);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 2u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 4);
  EXPECT_FALSE(M.Cpu_.shutDown());
}

TEST(VmExits, FaultingIretThatEndedVirtualNmiBlockingSetsNmiUnblockingBit) {
  EventsMachine M;
  // mov rax, rsp; push 0x10; push rax; pushfq; push 0 (null CS); push 0; iretq: #GP(0)
  M.guest({0x48, 0x89, 0xe0, 0x6a, 0x10, 0x50, 0x9c, 0x6a, 0x00, 0x6a, 0x00, 0x48, 0xcf});
  M.pin(VmxControl::NmiExiting);
  M.pin(VmxControl::VirtualNmis);
  M.vmcs().set(F::GuestInterruptibilityState, interruptibility::BlockingByNmi);
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::GP);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80001b0du); // bit 12 set
  EXPECT_EQ(M.get(F::VmExitInterruptionErrorCode), 0u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 11);
  // Virtual-NMI blocking was cleared before the exit.
  EXPECT_EQ(M.get(F::GuestInterruptibilityState), 0u);
}

TEST(VmExits, FaultNotOnIretLeavesNmiUnblockingBitClear) {
  EventsMachine M;
  M.guest({0x0f, 0x0b});
  M.pin(VmxControl::NmiExiting);
  M.pin(VmxControl::VirtualNmis);
  M.vmcs().set(F::GuestInterruptibilityState, interruptibility::BlockingByNmi);
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::UD);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000306u);
  EXPECT_EQ(M.get(F::GuestInterruptibilityState), interruptibility::BlockingByNmi);
}

// --- Task switches (SDM Vol. 3C, "Task Switches"): a 32-bit protected-mode guest -----

constexpr uint64_t kGuestPd = 0x310000;   ///< 32-bit page directory, 4 MiB pages
constexpr uint16_t kSelTargetTss = 0x48;  ///< an available 32-bit TSS at 0x5000

class TaskSwitchMachine : public EventsMachine {
public:
  TaskSwitchMachine() {
    for (uint64_t K = 0; K < 16; ++K) {
      uint32_t Pde = uint32_t(K << 22) | 0x83; // present, writable, 4 MiB
      write(kGuestPd + 4 * K, &Pde, 4);
    }
    uint64_t Tss = 0x67 | (uint64_t(0x5000) << 16) | (uint64_t(0x89) << 40);
    write(kGdtBase + kSelTargetTss, &Tss, 8);
    setControl(F::VmEntryControls, VmxControl::Ia32eModeGuest, false);
    vmcs().set(F::GuestCr3, kGuestPd);
    vmcs().set(F::GuestCr4, 0x2610); // VMXE OSXMMEXCPT OSFXSR PSE
    vmcs().set(F::GuestCsSelector, kSelCode32);
    vmcs().set(F::GuestCsAccessRights, 0xc09b);
    vmcs().set(F::GuestIdtrLimit, 0x7ff);
  }
};

TEST(VmExits, FarJmpToTssExitsWithSelectorAndJmpSource) {
  TaskSwitchMachine M;
  M.guest({0xea, 0, 0, 0, 0, kSelTargetTss, 0});
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 9u);
  EXPECT_EQ(M.get(F::ExitQualification), 0x80000000u | kSelTargetTss);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 7u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
}

TEST(VmExits, FarCallToTssExitsWithCallSource) {
  TaskSwitchMachine M;
  M.guest({0x9a, 0, 0, 0, 0, kSelTargetTss, 0});
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 9u);
  EXPECT_EQ(M.get(F::ExitQualification), uint64_t(kSelTargetTss));
}

TEST(VmExits, IretWithNestedTaskExitsWithBackLinkAndIretSource) {
  TaskSwitchMachine M;
  uint16_t Link = kSelTargetTss;
  M.write(M.Layout.TrBase, &Link, 2);
  M.guest({0xcf});
  M.vmcs().set(F::GuestRflags, 0x4002); // NT
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 9u);
  EXPECT_EQ(M.get(F::ExitQualification), 0x40000000u | kSelTargetTss);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 1u);
}

TEST(VmExits, IdtTaskGateExitsWithIdtVectoringInformation) {
  TaskSwitchMachine M;
  uint64_t TaskGate = (uint64_t(kSelTargetTss) << 16) | (uint64_t(0x85) << 40);
  M.write(kIdtBase + 8 * vec::UD, &TaskGate, 8);
  M.guest({0x0f, 0x0b});
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 9u);
  EXPECT_EQ(M.get(F::ExitQualification), 0xc0000000u | kSelTargetTss);
  EXPECT_EQ(M.get(F::IdtVectoringInformation), 0x80000306u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
}

TEST(VmExits, FarJmpToNotPresentTssFaultsBeforeTheExit) {
  TaskSwitchMachine M;
  uint64_t Tss = 0x67 | (uint64_t(0x5000) << 16) | (uint64_t(0x09) << 40); // P = 0
  M.write(kGdtBase + kSelTargetTss, &Tss, 8);
  M.guest({0xea, 0, 0, 0, 0, kSelTargetTss, 0});
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::NP);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 0u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000b0bu);
  EXPECT_EQ(M.get(F::VmExitInterruptionErrorCode), uint64_t(kSelTargetTss));
}

// --- Windows, MTF, priorities ---------------------------------------------------------

TEST(VmxNonRootOperation, InterruptWindowExitWaitsForIfAndTheStiShadow) {
  EventsMachine M;
  M.guest({0x90, 0xfb, 0x90, 0x90, 0x90}); // nop; sti; nop (shadow); nop
  M.proc(VmxControl::InterruptWindowExiting);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 7u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 3);
  EXPECT_EQ(M.get(F::GuestInterruptibilityState), 0u);
}

TEST(VmxNonRootOperation, InterruptWindowExitsBeforeFirstInstructionWhenOpen) {
  EventsMachine M;
  M.guest({0x90});
  M.vmcs().set(F::GuestRflags, 0x202);
  M.proc(VmxControl::InterruptWindowExiting);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 7u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
}

TEST(VmxNonRootOperation, NmiWindowExitFollowsIretThatEndsVirtualNmiBlocking) {
  EventsMachine M;
  // mov rax, rsp; push 0x10; push rax; pushfq; push 0x08; push target; iretq; target: nop
  const uint32_t Target = uint32_t(kGuestCode + 16);
  M.guest({0x48, 0x89, 0xe0, 0x6a, 0x10, 0x50, 0x9c, 0x6a, 0x08, 0x68, uint8_t(Target),
           uint8_t(Target >> 8), uint8_t(Target >> 16), uint8_t(Target >> 24), 0x48, 0xcf,
           0x90});
  M.pin(VmxControl::NmiExiting);
  M.pin(VmxControl::VirtualNmis);
  M.proc(VmxControl::NmiWindowExiting);
  M.vmcs().set(F::GuestInterruptibilityState, interruptibility::BlockingByNmi);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 8u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 16);
  EXPECT_EQ(M.get(F::GuestInterruptibilityState), 0u);
}

TEST(VmxNonRootOperation, MonitorTrapFlagStepsThreeInstructions) {
  EventsMachine M;
  M.guest({0x90, 0x48, 0x89, 0xc3, 0x90}); // nop; mov rbx, rax; nop
  M.proc(VmxControl::MonitorTrapFlag);
  const uint64_t Rips[] = {kGuestCode + 1, kGuestCode + 4, kGuestCode + 5};
  for (unsigned K = 0; K < 3; ++K) {
    EXPECT_EQ(K == 0 ? M.launch() : M.resume(), StopReason::Halted) << K;
    ASSERT_TRUE(M.exitedToHost()) << K;
    EXPECT_EQ(M.reason(), 37u) << K;
    EXPECT_EQ(M.get(F::GuestRip), Rips[K]) << K;
  }
}

TEST(VmxNonRootOperation, PendingMtfInjectionExitsBeforeFirstInstruction) {
  EventsMachine M;
  M.guest({0x90});
  M.vmcs().set(F::VmEntryInterruptionInformation, intinfo::Valid | (7u << 8)); // MTF off
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 37u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
}

TEST(VmxNonRootOperation, MtfAfterInjectedEventDeliveryStopsAtHandler) {
  EventsMachine M;
  M.guest({0x90});
  M.gate(0x40);
  M.proc(VmxControl::MonitorTrapFlag);
  M.vmcs().set(F::GuestRflags, 0x202); // injecting an external interrupt requires IF = 1
  M.vmcs().set(F::VmEntryInterruptionInformation, intinfo::Valid | 0x40); // ext int 0x40
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 37u);
  EXPECT_EQ(M.get(F::GuestRip), kHandler);
}

// SDM order at an instruction boundary: MTF > debug traps > VMX-preemption timer > NMI
// window > NMI > interrupt window > external interrupt. Each step removes the winner.
TEST(VmxNonRootOperation, EventPriorityMtfThenDebugTrapThenTimerThenNmiWindow) {
  EventsMachine M;
  M.guest({0x90, 0x90, 0x90});
  M.vmcs().set(F::GuestRflags, 0x102); // TF: a single-step trap after the first NOP
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::DB);
  M.proc(VmxControl::MonitorTrapFlag);
  ASSERT_EQ(M.launch(), StopReason::Halted);
  EXPECT_EQ(M.reason(), 37u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 1);
  EXPECT_EQ(M.get(F::GuestPendingDebugExceptions), 0x4000u); // BS still pending

  M.proc(VmxControl::MonitorTrapFlag, false);
  M.pin(VmxControl::ActivateVmxPreemptionTimer);
  M.vmcs().set(F::VmxPreemptionTimerValue, 0);
  M.proc(VmxControl::NmiWindowExiting);
  M.pin(VmxControl::NmiExiting);
  M.pin(VmxControl::VirtualNmis);
  M.vmcs().set(F::GuestRflags, 0x2);
  ASSERT_EQ(M.resume(), StopReason::Halted);
  EXPECT_EQ(M.reason(), 0u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000301u);
  EXPECT_EQ(M.get(F::ExitQualification), 0x4000u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 1);

  ASSERT_EQ(M.resume(), StopReason::Halted);
  EXPECT_EQ(M.reason(), 52u);
  M.pin(VmxControl::ActivateVmxPreemptionTimer, false);
  ASSERT_EQ(M.resume(), StopReason::Halted);
  EXPECT_EQ(M.reason(), 8u);
}

TEST(VmxNonRootOperation, EventPriorityNmiWindowBeforeNmi) {
  EventsMachine M;
  M.guest({0x90});
  M.gate(vec::NMI); // the host (sharing the IDT) takes the NMI after the exit
  M.pin(VmxControl::NmiExiting);
  M.pin(VmxControl::VirtualNmis); // required by NMI-window exiting
  M.proc(VmxControl::NmiWindowExiting);
  M.nmiForGuest();
  ASSERT_EQ(M.launch(), StopReason::Halted);
  EXPECT_FALSE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.reason(), 8u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
}

TEST(VmxNonRootOperation, EventPriorityNmiThenInterruptWindowThenInterrupt) {
  EventsMachine M;
  M.guest({0x90});
  M.vmcs().set(F::GuestRflags, 0x202);
  M.pin(VmxControl::NmiExiting);
  M.pin(VmxControl::ExternalInterruptExiting);
  M.exitCtl(VmxControl::AcknowledgeInterruptOnExit);
  M.proc(VmxControl::InterruptWindowExiting);
  M.nmiForGuest();
  M.Intr.Pending = true;
  ASSERT_EQ(M.launch(), StopReason::Halted);
  EXPECT_EQ(M.reason(), 0u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000202u);
  ASSERT_EQ(M.resume(), StopReason::Halted);
  EXPECT_EQ(M.reason(), 7u);
  M.proc(VmxControl::InterruptWindowExiting, false);
  ASSERT_EQ(M.resume(), StopReason::Halted);
  EXPECT_EQ(M.reason(), 1u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000020u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
}

// --- VMX-preemption timer -------------------------------------------------------------

// vmxsim's alignment: the timer counts down each time TSC bit R (R = IA32_VMX_MISC[4:0],
// 5 in the full profile) changes, i.e. at every multiple of 2^R cycles, starting from the
// TSC at VM entry (after the VM-entry cost). The exit happens at the first instruction
// boundary at or after the V-th such change.
struct TimerRun {
  uint64_t EntryTsc;  ///< TSC when the timer was loaded
  uint64_t ExitTsc;   ///< TSC at the VM exit (before the exit's own cost)
  uint64_t GuestNops; ///< one-cycle NOPs the guest retired
};

TimerRun runTimer(uint32_t Value, uint64_t EntryTsc, bool Hlt = false) {
  EventsMachine M;
  std::vector<uint8_t> Sled(8192, 0x90);
  if (Hlt)
    Sled[0] = 0xf4;
  M.guest(Sled);
  M.pin(VmxControl::ActivateVmxPreemptionTimer);
  M.exitCtl(VmxControl::SaveVmxPreemptionTimerValue);
  M.vmcs().set(F::VmxPreemptionTimerValue, Value);
  // VMLAUNCH runs at EntryTsc - VM-entry cost, so the timer is loaded at EntryTsc.
  M.Cpu_.Cycles = EntryTsc - costOf(CostClass::VmTransition);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  EXPECT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 52u);
  EXPECT_EQ(M.get(F::VmxPreemptionTimerValue), 0u);
  EXPECT_EQ(M.get(F::GuestActivityState), Hlt ? 1u : 0u);
  TimerRun R;
  R.EntryTsc = EntryTsc;
  // After the exit: the exit cost, then the host's HLT.
  R.ExitTsc = M.Cpu_.Cycles - costOf(CostClass::VmTransition) - costOf(CostClass::Halt);
  R.GuestNops = M.get(F::GuestRip) - kGuestCode;
  return R;
}

TEST(VmxNonRootOperation, PreemptionTimerExpiresAfterExactlyValueShiftedByRate) {
  const unsigned Rate = VmxProfile::full().PreemptionTimerRate;
  ASSERT_EQ(Rate, 5u);
  const uint64_t LaunchCost = costOf(CostClass::System);
  for (uint32_t V : {1u, 2u, 3u, 7u, 100u}) {
    TimerRun R = runTimer(V, 1ull << 20); // a multiple of 2^Rate
    EXPECT_EQ(R.ExitTsc - R.EntryTsc, uint64_t(V) << Rate) << V;
    // The guest starts after VMLAUNCH's own cost and retires one-cycle NOPs until then.
    EXPECT_EQ(R.GuestNops, (uint64_t(V) << Rate) - LaunchCost) << V;
  }
}

TEST(VmxNonRootOperation, PreemptionTimerValueZeroExitsBeforeFirstInstruction) {
  TimerRun R = runTimer(0, 1ull << 20);
  EXPECT_EQ(R.GuestNops, 0u);
}

TEST(VmxNonRootOperation, PreemptionTimerCountsRateBoundariesFromAnUnalignedEntry) {
  // Loaded 7 cycles past a boundary: the first decrement comes 25 cycles later.
  TimerRun R = runTimer(4, (1ull << 20) + 7);
  EXPECT_EQ(R.ExitTsc, (1ull << 20) + (4ull << 5));
}

TEST(VmxNonRootOperation, PreemptionTimerCountsInHltActivityAndWakesIt) {
  TimerRun R = runTimer(10, 1ull << 20, /*Hlt=*/true);
  EXPECT_EQ(R.ExitTsc - R.EntryTsc, 10ull << 5);
  EXPECT_EQ(R.GuestNops, 1u); // RIP after the HLT
}

// MWAIT's wait in VMX non-root operation (cpu/monitor.h) is woken by what wakes HLT
// there: the preemption timer's exit saves the activity state "active" (the field never
// shows MWAIT's inactive state, SDM Vol. 3C, Table "Format of the Activity State") and
// the RIP after MWAIT.
TEST(VmxNonRootOperation, PreemptionTimerWakesMwaitAndTheExitSavesActive) {
  EventsMachine M;
  M.guest({0x0f, 0x01, 0xc8, 0x0f, 0x01, 0xc9, 0x90, 0xf4}); // monitor; mwait; nop; hlt
  M.S.Gpr[RAX] = kGuestCode + 0x100;
  M.S.Gpr[RCX] = M.S.Gpr[RDX] = 0;
  M.pin(VmxControl::ActivateVmxPreemptionTimer);
  M.vmcs().set(F::VmxPreemptionTimerValue, 10);
  ASSERT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 52u);
  EXPECT_EQ(M.get(F::GuestActivityState), 0u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 6);
  EXPECT_FALSE(mwaitWaiting(M.Cpu_));
}

// An interrupt the guest's RFLAGS.IF masks (no external-interrupt exiting) ends MWAIT's
// wait only with ECX[0] = 1; the guest then runs on after MWAIT (CPUID exits).
TEST(VmxNonRootOperation, MaskedInterruptWakesGuestMwaitOnlyWithEcxBitZero) {
  for (const bool Break : {false, true}) {
    SCOPED_TRACE(Break);
    EventsMachine M;
    // monitor; mov ecx, Break; mwait; cpuid
    M.guest({0x0f, 0x01, 0xc8, 0xb9, uint8_t(Break), 0, 0, 0, 0x0f, 0x01, 0xc9, 0x0f, 0xa2});
    M.S.Gpr[RAX] = kGuestCode + 0x100;
    M.S.Gpr[RCX] = M.S.Gpr[RDX] = 0;
    M.vmcs().set(F::GuestRflags, 0x2);
    M.Intr.Pending = true;
    ASSERT_EQ(M.launch(), StopReason::Halted);
    if (Break) {
      ASSERT_TRUE(M.exitedToHost());
      EXPECT_EQ(M.reason(), 10u);
      EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 11);
    } else {
      EXPECT_TRUE(M.Cpu_.NonRoot);
      EXPECT_TRUE(mwaitWaiting(M.Cpu_));
      EXPECT_EQ(M.S.Rip, kGuestCode + 11);
    }
    EXPECT_EQ(M.Intr.Acks, 0u);
  }
}

// --- Activity states ------------------------------------------------------------------

TEST(VmxNonRootOperation, HltActivityWakesOnInterruptThroughGuestIdt) {
  EventsMachine M;
  M.guest({0xf4});
  M.vmcs().set(F::GuestRflags, 0x202);
  M.gate(0x20);
  M.handler({0x0f, 0x0b}); // ud2, in the exception bitmap: shows where the guest is
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::UD);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  EXPECT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.Cpu_.Activity, ActivityState::Hlt);
  M.Intr.Pending = true;
  EXPECT_EQ(M.Cpu_.run(100), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 0u);
  EXPECT_EQ(M.get(F::GuestActivityState), 0u); // woken by the delivery
  EXPECT_EQ(M.get(F::GuestRip), kHandler);
}

TEST(VmxNonRootOperation, HltActivityExternalInterruptExitSavesHltState) {
  EventsMachine M;
  M.guest({0xf4});
  M.pin(VmxControl::ExternalInterruptExiting);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  EXPECT_TRUE(M.Cpu_.NonRoot);
  M.Intr.Pending = true;
  EXPECT_EQ(M.Cpu_.run(100), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 1u);
  EXPECT_EQ(M.get(F::GuestActivityState), 1u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 1);
}

TEST(VmxNonRootOperation, HltActivityFromVmEntryExitsOnInterruptWindow) {
  EventsMachine M;
  M.guest({0x90});
  M.vmcs().set(F::GuestActivityState, 1);
  M.vmcs().set(F::GuestRflags, 0x202);
  M.proc(VmxControl::InterruptWindowExiting);
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 7u);
  EXPECT_EQ(M.get(F::GuestActivityState), 1u);
}

TEST(VmxNonRootOperation, WaitForSipiBlocksInterruptsAndInitAndExitsOnSipi) {
  EventsMachine M;
  M.guest({0x90});
  M.vmcs().set(F::GuestActivityState, 3);
  M.pin(VmxControl::ExternalInterruptExiting);
  M.pin(VmxControl::NmiExiting);
  M.Intr.Pending = true;
  M.nmiForGuest();
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(vmxInitSignal(M.Cpu_), Status::Ok); // blocked
  EXPECT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(vmxStartupIpi(M.Cpu_, 0x9a), Status::VmExit);
  EXPECT_FALSE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.reason(), 4u);
  EXPECT_EQ(M.get(F::ExitQualification), 0x9au);
  EXPECT_EQ(M.get(F::GuestActivityState), 3u);
}

TEST(VmxNonRootOperation, InitSignalInActiveStateExitsAndSipiIsDiscarded) {
  EventsMachine M;
  M.guest({0xf4});
  EXPECT_EQ(M.launch(), StopReason::Halted);
  ASSERT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(vmxStartupIpi(M.Cpu_, 0x9a), Status::Ok); // discarded outside wait-for-SIPI
  EXPECT_EQ(vmxInitSignal(M.Cpu_), Status::VmExit);
  EXPECT_EQ(M.reason(), 3u);
}

} // namespace
} // namespace vmxsim::test
