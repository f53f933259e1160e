/* VMCALL (hypercalls) and HLT exits. VMCALL exits unconditionally in VMX non-root
 * operation (SDM Vol. 3C, "Instructions That Cause VM Exits Unconditionally"); HLT
 * exits with "HLT exiting" = 1.
 *
 * Hypercall ABI: RAX = number, RBX = argument, result in RAX.
 *   0  print RBX (recorded in Cpu->Reported for the image to check); returns 0
 *   1  end the guest with status RBX
 *   2  set the vCPU's virtual timer: it fires RBX TSC cycles from now; returns the
 *      deadline as the guest's TSC reads it (the machine's virtual TSC plus the TSC
 *      offset), or -1 when the VMX-preemption timer is not in use (HLT would then end
 *      the guest: exit_timer.c)
 *   3  yield the pcpu; returns 0 (with one vCPU per pcpu the same vCPU runs on)
 *   4  RDTSC exiting on (RBX = 1) or off (RBX = 0): with it on, the core emulates
 *      RDTSC (exit_timer.c); returns 0, or -1 without the system exits
 *   5  the guest's virtual timer interrupt (vector 0x30) fires RBX[63:32] times,
 *      RBX[31:0] TSC cycles apart (exit_intr.c); returns 0; stops the image if already
 *      armed or without the system exits
 *   6  one virtual NMI, through the NMI window (exit_intr.c); returns 0
 *   8  with APIC virtualization: posts vector RBX to the next vCPU and notifies it
 *      (exit_apic.c); returns 0; stops the image without it or for a vector below 16
 *   any other number returns -1 (all ones).
 */
#include "vmx/exit.h"
#include "vmx/insn.h"
#include "vmx/tracebuf.h"

#define HYPERCALL_PRINT 0
#define HYPERCALL_EXIT 1
#define HYPERCALL_SET_TIMER 2
#define HYPERCALL_YIELD 3
#define HYPERCALL_RDTSC_EXITING 4
#define HYPERCALL_START_VIRQS 5
#define HYPERCALL_NMI 6
#define HYPERCALL_POST 8

enum ExitAction handleVmcall(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  uint64_t Number = Regs->Rax, Arg = Regs->Rbx;
  TRACE_VMEXIT(1, Number);
  TRACE_VMEXIT(2, Arg);
  switch (Number) {
  case HYPERCALL_PRINT:
    if (Cpu->ReportedCount < sizeof(Cpu->Reported) / sizeof(Cpu->Reported[0]))
      Cpu->Reported[Cpu->ReportedCount++] = Arg;
    exitNote(Cpu, "guest print: 0x%lx", Arg);
    Regs->Rax = 0;
    return Action_Advance;
  case HYPERCALL_EXIT:
    Cpu->GuestResult = Arg;
    return Action_GuestDone;
  case HYPERCALL_SET_TIMER:
    if (!Cpu->PreemptionTimer) {
      Regs->Rax = ~0ull;
      return Action_Advance;
    }
    Cpu->TimerDeadline = rdtsc() + Arg;
    Regs->Rax = Cpu->TimerDeadline + Cpu->TscOffset;
    return Action_Advance;
  case HYPERCALL_YIELD:
    Regs->Rax = 0;
    return Action_Advance;
  case HYPERCALL_RDTSC_EXITING: {
    if (!Cpu->SystemExits) {
      Regs->Rax = ~0ull;
      return Action_Advance;
    }
    /* SDM Vol. 3C, "Primary Processor-Based VM-Execution Controls": RDTSC exiting,
       bit 12, which every processor with VMX allows either way. */
    uint64_t Proc = vmread(Vmcs_PrimaryProcessorBasedVmExecutionControls);
    Cpu->RdtscExiting = Arg & 1;
    Proc = Cpu->RdtscExiting ? Proc | VMX_CTL(Proc_RdtscExiting)
                             : Proc & ~VMX_CTL(Proc_RdtscExiting);
    vmwrite(Vmcs_PrimaryProcessorBasedVmExecutionControls, Proc);
    Regs->Rax = 0;
    return Action_Advance;
  }
  case HYPERCALL_START_VIRQS:
    Regs->Rax = 0;
    if (vmxStartVirqs(Cpu, Arg) == Action_Stop) {
      exitNote(Cpu, "hypercall 5 (0x%lx): the virtual timer is armed already, or there "
                    "are no system exits", Arg);
      return Action_Stop;
    }
    return Action_Advance;
  case HYPERCALL_NMI:
    Regs->Rax = 0;
    if (vmxQueueNmi(Cpu) == Action_Stop) {
      exitNote(Cpu, "hypercall 6: no system exits");
      return Action_Stop;
    }
    return Action_Advance;
  case HYPERCALL_POST:
    Regs->Rax = 0;
    if (vmxPostInterrupt(Cpu, Arg) == Action_Stop) {
      exitNote(Cpu, "hypercall 8 (0x%lx): no APIC virtualization, or not a vector", Arg);
      return Action_Stop;
    }
    return Action_Advance;
  default:
    Regs->Rax = ~0ull;
    return Action_Advance;
  }
}

enum ExitAction handleHlt(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  /* With IF = 1 and its virtual interrupt source armed (exit_intr.c), the vCPU waits in
     the HLT activity state for the next interrupt (vmxIntrAssist injects it, which ends
     the HLT state). Otherwise only its virtual timer can wake it (exit_timer.c); without
     one, HLT ends it. */
  if ((Cpu->VirqsLeft || Cpu->VirqPending) && (vmread(Vmcs_GuestRflags) & RFLAGS_IF)) {
    vmwrite(Vmcs_GuestActivityState, 1); /* HLT */
    return Action_Advance;
  }
  Cpu->GuestResult = 0;
  return vcpuBlock(Cpu);
}
