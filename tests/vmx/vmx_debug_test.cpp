// The debug registers and debug exceptions in VMX operation (SDM Vol. 3C): the "load/save
// debug controls" (DR7 and IA32_DEBUGCTL), DR7 = 400H and IA32_DEBUGCTL = 0 after every
// VM exit, #DB VM exits through the exception bitmap with the DR6-style qualification
// and DR6/DR7 untouched ("Exit Qualification for Debug Exceptions"), the pending debug
// exceptions saved at VM exit ("Saving Non-Register State") and delivered after VM entry
// ("Delivery of Pending Debug Exceptions after VM Entry"), and RFLAGS.RF as VM exits
// save it. The root-mode model is tested in tests/cpu/debug_features_test.cpp.
#include "tests/support/vmx_test_machine.h"

#include "cpu/debug.h"
#include "cpu/msrs.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_exit.h"

#include <gtest/gtest.h>

#include <vector>

namespace vmxsim::test {
namespace {

using F = VmcsField;
using Bytes = std::vector<uint8_t>;

constexpr uint64_t kDr6Clear = 0xffff0ff0;
constexpr uint64_t kDbExceptionInfo = 0x80000000u | (3u << 8) | 1u; // valid, hardware, #DB

void orField(VmxTestMachine &M, F Field, uint64_t Bits) {
  M.vmcs().set(Field, M.vmcs().get(Field) | Bits);
}
void debugControls(VmxTestMachine &M, uint64_t GuestDr7, uint64_t GuestDebugctl = 0) {
  orField(M, F::VmEntryControls, controlBit(VmxControl::LoadDebugControls));
  orField(M, F::PrimaryVmExitControls, controlBit(VmxControl::SaveDebugControls));
  M.vmcs().set(F::GuestDr7, GuestDr7);
  M.vmcs().set(F::GuestIa32Debugctl, GuestDebugctl);
}
StepResult launch(VmxTestMachine &M, const Bytes &Guest, uint64_t MaxInsns = 10) {
  const uint8_t Hlt = 0xf4;
  M.write(kGuestCode, Guest.data(), Guest.size());
  M.write(kHostCode, &Hlt, 1);
  return M.exec(enc::Vmlaunch, MaxInsns);
}
// After every VM exit: the host runs with DR7 = 400H, IA32_DEBUGCTL = 0, nothing armed.
void expectHostDebugState(VmxTestMachine &M) {
  EXPECT_FALSE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.S.Dr[7], 0x400u);
  EXPECT_EQ((*M.Cpu_.Msrs)[MsrSlot::IA32_DEBUGCTL], 0u);
  EXPECT_FALSE(M.Cpu_.Debug.InsnArmed || M.Cpu_.Debug.DataArmed || M.Cpu_.Debug.IoArmed);
}

// The debug controls load DR7 (any breakpoint enabled) and IA32_DEBUGCTL (LBR, BTF) on
// VM entry and save them on VM exit (SDM Vol. 3C, "Loading Guest Control Registers,
// Debug Registers, and MSRs", "Saving Control Registers, Debug Registers, and MSRs");
// the exit then loads DR7 = 400H and IA32_DEBUGCTL = 0 ("Loading Host Control
// Registers, Debug Registers, MSRs").
TEST(VmExits, DebugControlsLoadAndSaveDr7AndDebugctl) {
  VmxTestMachine M;
  M.S.Dr[0] = kDataBase + 0x100; // not touched by the guest
  debugControls(M, 0x10402, debugctl::LBR | debugctl::BTF); // G0: write breakpoint
  StepResult R = launch(M, {0x0f, 0x01, 0xc1}); // vmcall
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.vmcs().get(F::GuestDr7), 0x10402u);
  EXPECT_EQ(M.vmcs().get(F::GuestIa32Debugctl), 3u);
  expectHostDebugState(M);
}

// An IA32_DEBUGCTL bit vmxsim does not model stops the VM entry as WRMSR would.
TEST(VmEntries, GuestDebugctlBranchTraceStopsTheEntryAsUnimplemented) {
  VmxTestMachine M;
  debugControls(M, 0x400, 1u << 6); // TR
  StepResult R = launch(M, {0x0f, 0x01, 0xc1});
  EXPECT_EQ(R.Why, StopReason::Unimplemented);
  EXPECT_STREQ(M.Cpu_.StopWhat, kDebugctlUnimplemented);
  EXPECT_FALSE(M.Cpu_.NonRoot);
}

// An instruction breakpoint in the guest with bit 1 of the exception bitmap: exit reason
// 0, hardware exception #DB, qualification B0, guest RIP at the instruction; DR6 is not
// written (SDM Vol. 3C, "Exit Qualification for Debug Exceptions").
TEST(VmExits, InstructionBreakpointDbExitHasB0QualificationAndLeavesDr6) {
  VmxTestMachine M;
  M.S.Dr[0] = kGuestCode + 1;
  debugControls(M, 0x401);
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::DB);
  StepResult R = launch(M, {0x90, 0x90, 0xf4}); // nop ; nop ; hlt
  EXPECT_EQ(R.Why, StopReason::Halted);
  const VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::ExceptionOrNmi));
  EXPECT_EQ(V.get(F::VmExitInterruptionInformation), kDbExceptionInfo);
  EXPECT_EQ(V.get(F::ExitQualification), 1u);
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode + 1);
  EXPECT_EQ(V.get(F::GuestPendingDebugExceptions), 0u);
  EXPECT_EQ(V.get(F::GuestDr7), 0x401u);
  EXPECT_EQ(M.S.Dr[6], kDr6Clear);
  expectHostDebugState(M);
}

// DR7.GD in the guest: the #DB fault exits with BD in the qualification, and neither
// DR6.BD is set nor DR7.GD cleared (that happens only on delivery through the IDT).
TEST(VmExits, GeneralDetectDbExitLeavesDr6AndGd) {
  VmxTestMachine M;
  debugControls(M, 0x2400);
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::DB);
  StepResult R = launch(M, {0x0f, 0x21, 0xf0}); // mov rax, dr6
  EXPECT_EQ(R.Why, StopReason::Halted);
  const VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::ExceptionOrNmi));
  EXPECT_EQ(V.get(F::VmExitInterruptionInformation), kDbExceptionInfo);
  EXPECT_EQ(V.get(F::ExitQualification), uint64_t(dr6::BD));
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode);
  EXPECT_EQ(V.get(F::GuestDr7), 0x2400u);
  EXPECT_EQ(M.S.Dr[6], kDr6Clear);
}

// A data breakpoint matched by the instruction before an MTF VM exit is a pending debug
// exception: the exit saves B0 and "enabled breakpoint" (bit 12; SDM Vol. 3C, "Saving
// Non-Register State"); VMRESUME delivers it, here as a #DB VM exit with B0.
TEST(VmExits, DataBreakpointTrapPendingAtAnMtfExitIsSavedAndDeliveredAfterEntry) {
  VmxTestMachine M;
  M.S.Dr[0] = kDataBase;
  M.S.Gpr[RSI] = kDataBase;
  debugControls(M, 0x10401); // L0: write, 1 byte
  orField(M, F::PrimaryProcessorBasedVmExecutionControls,
          controlBit(VmxControl::MonitorTrapFlag));
  StepResult R = launch(M, {0x88, 0x06, 0xf4}); // mov [rsi], al ; hlt
  EXPECT_EQ(R.Why, StopReason::Halted);
  VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::MonitorTrapFlag));
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode + 2);
  EXPECT_EQ(V.get(F::GuestPendingDebugExceptions), 0x1001u);
  expectHostDebugState(M);

  V.set(F::PrimaryProcessorBasedVmExecutionControls,
        V.get(F::PrimaryProcessorBasedVmExecutionControls) &
            ~uint64_t(controlBit(VmxControl::MonitorTrapFlag)));
  V.set(F::ExceptionBitmap, 1u << vec::DB);
  M.Cpu_.Activity = ActivityState::Active; // the host's HLT
  R = M.exec(enc::Vmresume, 10);
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::ExceptionOrNmi));
  EXPECT_EQ(V.get(F::VmExitInterruptionInformation), kDbExceptionInfo);
  EXPECT_EQ(V.get(F::ExitQualification), 1u);
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode + 2);
  EXPECT_EQ(V.get(F::GuestPendingDebugExceptions), 0u);
  EXPECT_EQ(M.S.Dr[6], kDr6Clear);
}

// "There are valid pending debug exceptions if either the BS bit (bit 14) or the
// enable-breakpoint bit (bit 12) is 1": B0 alone delivers nothing.
TEST(VmEntries, PendingDebugExceptionsNeedBsOrEnabledBreakpoint) {
  for (uint64_t Pending : {uint64_t(0x1), uint64_t(0x1001)}) {
    VmxTestMachine M;
    M.vmcs().set(F::ExceptionBitmap, 1u << vec::DB);
    M.vmcs().set(F::GuestPendingDebugExceptions, Pending);
    StepResult R = launch(M, {0xf4});
    EXPECT_EQ(R.Why, StopReason::Halted);
    if (Pending == 1) {
      EXPECT_TRUE(M.Cpu_.NonRoot);
      EXPECT_EQ(M.S.Rip, kGuestCode + 1);
      continue;
    }
    EXPECT_FALSE(M.Cpu_.NonRoot);
    EXPECT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::ExceptionOrNmi));
    EXPECT_EQ(M.vmcs().get(F::ExitQualification), 1u);
    EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode);
  }
}

// A single-step trap held by MOV SS blocking when the next instruction exits: the exit
// saves BS as a pending debug exception with the blocking (SDM Vol. 3C, "Saving
// Non-Register State": "VM exits that are not caused by debug exceptions and that occur
// while there is MOV-SS blocking of debug exceptions").
TEST(VmExits, SingleStepHeldByMovSsIsSavedAtTheNextInstructionsExit) {
  VmxTestMachine M;
  M.vmcs().set(F::GuestRflags, 0x2 | rflags::TF);
  M.S.Gpr[RAX] = M.vmcs().get(F::GuestSsSelector);
  StepResult R = launch(M, {0x8e, 0xd0, 0x0f, 0xa2}); // mov ss, ax ; cpuid
  EXPECT_EQ(R.Why, StopReason::Halted);
  const VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::Cpuid));
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode + 2);
  EXPECT_EQ(V.get(F::GuestPendingDebugExceptions), uint64_t(dr6::BS));
  EXPECT_EQ(V.get(F::GuestInterruptibilityState), 2u); // blocking by MOV SS
}

// RFLAGS.RF as saved: an instruction that began with RF = 1 and exits has not completed
// (RF saved as 1); an instruction that completed cleared it.
TEST(VmExits, ResumeFlagIsSavedAsItWasBeforeTheExitingInstruction) {
  for (bool NopFirst : {false, true}) {
    VmxTestMachine M;
    M.vmcs().set(F::GuestRflags, 0x2 | rflags::RF);
    StepResult R = NopFirst ? launch(M, {0x90, 0x0f, 0xa2}) : launch(M, {0x0f, 0xa2});
    EXPECT_EQ(R.Why, StopReason::Halted);
    EXPECT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Cpuid));
    EXPECT_EQ(M.vmcs().get(F::GuestRflags), NopFirst ? 0x2u : 0x2u | rflags::RF);
  }
}

// A fault-class exception that exits through the exception bitmap saves RF = 1, as the
// RFLAGS image of its delivery would have it; the instruction-breakpoint #DB does not.
TEST(VmExits, FaultExceptionExitSavesResumeFlagAsItsImageWould) {
  VmxTestMachine M;
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::UD);
  StepResult R = launch(M, {0x0f, 0x0b}); // ud2
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::ExceptionOrNmi));
  EXPECT_EQ(M.vmcs().get(F::VmExitInterruptionInformation), 0x80000306u);
  EXPECT_EQ(M.vmcs().get(F::GuestRflags), 0x2u | rflags::RF);

  VmxTestMachine N;
  N.S.Dr[0] = kGuestCode;
  debugControls(N, 0x401);
  N.vmcs().set(F::ExceptionBitmap, 1u << vec::DB);
  R = launch(N, {0x90, 0xf4});
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_EQ(N.vmcs().get(F::ExitQualification), 1u);
  EXPECT_EQ(N.vmcs().get(F::GuestRflags), 0x2u);
}

} // namespace
} // namespace vmxsim::test
