/* The VM-exit handler: reads the exit information, records trace values, dispatches to
 * the family handler of the basic exit reason, then resumes, ends the guest, or stops.
 * Modelled on Xen 3.0.3's vmx_vmexit_handler (TRACE_VMEXIT(0, exit_reason), then a
 * switch on the reason), with a dispatch table indexed by exit-reason enumerator.
 */
#include "vmx/exit.h"

#include <stdarg.h>

#include "lib/cpu.h"
#include "lib/exit.h"
#include "lib/printf.h"
#include "lib/spinlock.h"
#include "vmx/insn.h"
#include "vmx/vmx.h"

/* SDM Vol. 3D, Appendix C: only the reasons the VMCS set up in setup.c can produce and
   that the core emulates have a handler; every other one stops the image. */
static const ExitFamilyFn ExitFamilies[Reason_Count] = {
    [Reason_ExceptionOrNmi] = handleException,
    [Reason_Cpuid] = handleCpuid,
    [Reason_Hlt] = handleHlt,
    [Reason_Vmcall] = handleVmcall,
    [Reason_ControlRegisterAccesses] = handleCrAccess,
    [Reason_IoInstruction] = handleIo,
    [Reason_Rdmsr] = handleRdmsr,
    [Reason_Wrmsr] = handleWrmsr,
    [Reason_TripleFault] = handleTripleFault,
    [Reason_EptViolation] = handleEptViolation,
    [Reason_EptMisconfiguration] = handleEptMisconfig,
    [Reason_VmxPreemptionTimerExpired] = handlePreemptionTimer,
    [Reason_Invlpg] = handleInvlpg,
    [Reason_Rdtsc] = handleRdtsc,
    [Reason_MovDr] = handleDrAccess,
    [Reason_Pause] = handlePause,
    [Reason_WbinvdOrWbnoinvd] = handleWbinvd,
    [Reason_Xsetbv] = handleXsetbv,
    [Reason_ExternalInterrupt] = handleExternalInterrupt,
    [Reason_InterruptWindow] = handleInterruptWindow,
    [Reason_NmiWindow] = handleNmiWindow,
    [Reason_VirtualizedEoi] = handleVirtualizedEoi,
    [Reason_ApicWrite] = handleApicWrite,
};

uint64_t readGuestGpr(struct GuestRegs *Regs, unsigned Number) {
  uint64_t *P = guestGpr(Regs, Number);
  return P ? *P : vmread(Vmcs_GuestRsp);
}

void writeGuestGpr(struct GuestRegs *Regs, unsigned Number, uint64_t Value) {
  uint64_t *P = guestGpr(Regs, Number);
  if (P)
    *P = Value;
  else
    vmwrite(Vmcs_GuestRsp, Value);
}

void exitNote(struct PerCpu *Cpu, const char *Fmt, ...) {
  va_list Ap;
  va_start(Ap, Fmt);
  vsnprintf(Cpu->Note, sizeof(Cpu->Note), Fmt, Ap);
  va_end(Ap);
}

enum ExitAction injectHardwareException(uint32_t Vector, uint32_t ErrorCode) {
  /* SDM Vol. 3C, "Checks on VM-Entry Control Fields": for a hardware exception that
     pushes an error code (#GP does) in protected mode, "deliver error code" must be 1. */
  vmwrite(Vmcs_VmEntryInterruptionInformation,
          Vector | INTR_INFO_TYPE_HW_EXCEPTION | INTR_INFO_ERROR_CODE | INTR_INFO_VALID);
  vmwrite(Vmcs_VmEntryExceptionErrorCode, ErrorCode);
  return Action_Inject;
}

static void readExitInfo(struct PerCpu *Cpu) {
  /* SDM Vol. 3C, "VM Exits" > "Recording VM-Exit Information": the interruption and
     IDT-vectoring fields are undefined apart from bit 31 when bit 31 is 0, so they are
     kept only when valid (the log must not show undefined bits). */
  struct ExitInfo *E = &Cpu->Exit;
  E->Reason = (uint32_t)vmread(Vmcs_ExitReason);
  E->Qualification = vmread(Vmcs_ExitQualification);
  E->GuestRip = vmread(Vmcs_GuestRip);
  E->InstructionLength = (uint32_t)vmread(Vmcs_VmExitInstructionLength);
  uint32_t Intr = (uint32_t)vmread(Vmcs_VmExitInterruptionInformation);
  E->InterruptionInfo = (Intr & INTR_INFO_VALID) ? Intr : 0;
  uint32_t Idtv = (uint32_t)vmread(Vmcs_IdtVectoringInformation);
  E->IdtVectoringInfo = (Idtv & INTR_INFO_VALID) ? Idtv : 0;
}

/* The handler of both trace flavours: Xen30 is a constant in each caller, so each
   handler calls its flavour's hooks directly and the modern one runs exactly the
   instructions it ran before the xen-3.0 flavour existed (its cycles per exit are
   unchanged). */
static inline __attribute__((always_inline)) void handleExit(struct GuestRegs *Regs,
                                                             bool Xen30) {
  struct PerCpu *Cpu = perCpuFromRegs(Regs);
  ++Cpu->ExitCount;
  readExitInfo(Cpu);
  if (Xen30)
    vmxTrace30Vmexit(Cpu);
  else
    vmxTraceVmexit(Cpu);
  TRACE_VMEXIT(0, Cpu->Exit.Reason);

  enum ExitAction Action;
  uint32_t Basic = EXIT_REASON_BASIC(Cpu->Exit.Reason);
  if (Cpu->Exit.Reason & EXIT_REASON_ENTRY_FAILURE) {
    Action = handleEntryFailure(Cpu, Regs);
  } else if (Basic < Reason_Count && ExitFamilies[Basic]) {
    Action = ExitFamilies[Basic](Cpu, Regs);
  } else {
    exitNote(Cpu, "unexpected exit reason %u (%s)", Basic, exitReasonName(Basic));
    Action = Action_Stop;
  }

  switch (Action) {
  case Action_Advance: {
    vmwrite(Vmcs_GuestRip, Cpu->Exit.GuestRip + Cpu->Exit.InstructionLength);
    /* SDM Vol. 3C, "Guest Non-Register State": blocking by STI or by MOV SS covers only
       the instruction after STI/MOV SS; once we have emulated that instruction, it is
       over, as it would be on hardware. */
    uint64_t Blocking = vmread(Vmcs_GuestInterruptibilityState);
    if (Blocking & 3)
      vmwrite(Vmcs_GuestInterruptibilityState, Blocking & ~3ull);
    break;
  }
  case Action_Inject:
  case Action_Resume:
    break;
  case Action_GuestDone:
    /* The guest's virtual timer must not fire into the next guest or VMXOFF. */
    if (Cpu->VirqsLeft) {
      wrmsr(MSR_IA32_TSC_DEADLINE, 0);
      Cpu->VirqsLeft = 0;
    }
    if (Xen30)
      vmxTrace30GuestEnd(Cpu);
    else
      vmxTraceGuestEnd(Cpu);
    vmxGuestDone(Cpu);
  case Action_Stop:
    if (Xen30)
      vmxTrace30GuestEnd(Cpu);
    else
      vmxTraceGuestEnd(Cpu);
    /* Kept: no other CPU's line may cut into this one before the machine stops. */
    spinLock(&VmxConsoleLock);
    printf("vmx: stopping at exit %lu\n", Cpu->ExitCount);
    hvmExit(HVM_EXIT_FAILURE);
  }
  if (Cpu->SystemExits)
    vmxIntrAssist(Cpu);
  if (Xen30)
    vmxTrace30Vmentry(Cpu);
  else
    vmxTraceVmentry(Cpu);
}

void vmxExitHandler(struct GuestRegs *Regs) { handleExit(Regs, false); }

void vmxExitHandlerXen30(struct GuestRegs *Regs) { handleExit(Regs, true); }

void vmxResumeFailed(struct GuestRegs *Regs, uint64_t Rflags) {
  struct PerCpu *Cpu = perCpuFromRegs(Regs);
  /* CF = VMfailInvalid, ZF = VMfailValid (SDM Vol. 3C, VMX instruction conventions). */
  printf("vmx: after exit %lu: ", Cpu->ExitCount);
  vmxPrintVmFail("VMRESUME", (Rflags & 1) ? -VmFailInvalid : -VmFailValid);
  hvmExit(HVM_EXIT_FAILURE);
}
