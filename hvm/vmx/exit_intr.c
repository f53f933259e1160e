/* Interrupts for the guest (with the system exits): external-interrupt exiting with
 * "acknowledge interrupt on exit", virtual NMIs, and the interrupt and NMI windows (SDM
 * Vol. 3C, "Pin-Based VM-Execution Controls", "Primary Processor-Based VM-Execution
 * Controls", "VM-Exit Controls"; "Event Injection").
 *
 * The guest's only interrupt source is a virtual timer the core drives from the host's
 * local APIC timer (TSC-deadline mode, host vector HV_HOST_TIMER_VECTOR): hypercall 5
 * arms it for N interrupts P cycles apart. Each time it fires the guest exits (reason 1,
 * the vector in the exit's interruption information: the interrupt is acknowledged by
 * the exit), the core EOIs the APIC and makes the guest's interrupt
 * HV_GUEST_TIMER_VECTOR pending. Before every VM entry vmxIntrAssist injects a pending
 * interrupt when the guest can take it (RFLAGS.IF = 1, no blocking by STI or MOV SS,
 * nothing else being injected), else opens the interrupt window, whose exit (7) comes
 * as soon as it can. Hypercall 6 asks for a virtual NMI: the NMI window opens, its exit
 * (8) comes when the guest does not block NMIs, and the NMI is injected. An injected
 * event also ends the HLT activity state (the vCPU wakes to take it).
 */
#include "lib/cpu.h"
#include "lib/smp.h"
#include "vmx/exit.h"
#include "vmx/insn.h"

/* SDM Vol. 3A, "Local Vector Table" and "TSC-Deadline Mode": LVT timer bits 18:17 = 10b
   select TSC-deadline mode; the timer fires when the TSC reaches IA32_TSC_DEADLINE. */
#define LVT_TIMER_TSC_DEADLINE (2u << 17)
#define LAPIC_SVR_ENABLE (1u << 8)
#define HOST_SPURIOUS_VECTOR 0xff

static void setProcControl(uint64_t Bit, bool On) {
  uint64_t Proc = vmread(Vmcs_PrimaryProcessorBasedVmExecutionControls);
  vmwrite(Vmcs_PrimaryProcessorBasedVmExecutionControls, On ? Proc | Bit : Proc & ~Bit);
}

static void armHostTimer(struct PerCpu *Cpu) {
  wrmsr(MSR_IA32_TSC_DEADLINE, rdtsc() + Cpu->VirqPeriod);
}

enum ExitAction vmxStartVirqs(struct PerCpu *Cpu, uint64_t Arg) {
  uint32_t Count = (uint32_t)(Arg >> 32), Period = (uint32_t)Arg;
  if (!Cpu->SystemExits || !Count || !Period || Cpu->VirqsLeft)
    return Action_Stop;
  Cpu->VirqsLeft = Count;
  Cpu->VirqPeriod = Period;
  *lapic(LAPIC_SVR) = LAPIC_SVR_ENABLE | HOST_SPURIOUS_VECTOR;
  *lapic(LAPIC_LVT_TIMER) = LVT_TIMER_TSC_DEADLINE | HV_HOST_TIMER_VECTOR;
  armHostTimer(Cpu);
  return Action_Advance;
}

enum ExitAction vmxQueueNmi(struct PerCpu *Cpu) {
  if (!Cpu->SystemExits)
    return Action_Stop;
  Cpu->NmiPending = 1;
  return Action_Advance;
}

enum ExitAction handleExternalInterrupt(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  /* "Acknowledge interrupt on exit": the vector is in the VM-exit interruption
     information, valid, type external interrupt (SDM Vol. 3C, "Information for VM Exits
     Due to Vectored Events"). */
  uint32_t Vector = INTR_INFO_VECTOR(Cpu->Exit.InterruptionInfo);
  TRACE_VMEXIT(1, Vector);
  if (!(Cpu->Exit.InterruptionInfo & INTR_INFO_VALID) || Vector != HV_HOST_TIMER_VECTOR ||
      !Cpu->VirqsLeft) {
    exitNote(Cpu, "unexpected external interrupt, information 0x%x",
             Cpu->Exit.InterruptionInfo);
    return Action_Stop;
  }
  *lapic(LAPIC_EOI) = 0;
  Cpu->VirqPending = 1;
  if (--Cpu->VirqsLeft)
    armHostTimer(Cpu);
  return Action_Resume;
}

enum ExitAction handleInterruptWindow(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Cpu;
  (void)Regs;
  /* vmxIntrAssist injects what waited for it. */
  setProcControl(VMX_CTL(Proc_InterruptWindowExiting), false);
  return Action_Resume;
}

enum ExitAction handleNmiWindow(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Cpu;
  (void)Regs;
  setProcControl(VMX_CTL(Proc_NmiWindowExiting), false);
  return Action_Resume;
}

void vmxIntrAssist(struct PerCpu *Cpu) {
  Cpu->IntrWindowOpened = 0;
  if (!Cpu->VirqPending && !Cpu->NmiPending)
    return;
  /* One event per VM entry: an exception being reflected or injected goes first. */
  uint32_t Injecting = (uint32_t)vmread(Vmcs_VmEntryInterruptionInformation);
  uint32_t Blocking = (uint32_t)vmread(Vmcs_GuestInterruptibilityState);
  if (Cpu->NmiPending) {
    /* SDM Vol. 3C, "NMI-Window Exiting": with virtual NMIs the exit comes before the
       first instruction at which there is no virtual-NMI blocking (nor blocking by MOV
       SS; Intel processors also wait for the end of blocking by STI). Opened here, it is
       taken at once when nothing blocks. */
    if (!(Injecting & INTR_INFO_VALID) && EXIT_REASON_BASIC(Cpu->Exit.Reason) == Reason_NmiWindow &&
        !(Blocking & (INTERRUPTIBILITY_NMI | INTERRUPTIBILITY_MOV_SS | INTERRUPTIBILITY_STI))) {
      vmwrite(Vmcs_VmEntryInterruptionInformation,
              VECTOR_NMI | INTR_INFO_TYPE_NMI | INTR_INFO_VALID);
      vmwrite(Vmcs_GuestActivityState, 0);
      Cpu->NmiPending = 0;
      ++Cpu->NmisInjected;
      Injecting = (uint32_t)vmread(Vmcs_VmEntryInterruptionInformation);
    } else {
      setProcControl(VMX_CTL(Proc_NmiWindowExiting), true);
    }
  }
  if (!Cpu->VirqPending)
    return;
  uint64_t Rflags = vmread(Vmcs_GuestRflags);
  if (!(Injecting & INTR_INFO_VALID) && (Rflags & RFLAGS_IF) &&
      !(Blocking & (INTERRUPTIBILITY_STI | INTERRUPTIBILITY_MOV_SS))) {
    vmwrite(Vmcs_VmEntryInterruptionInformation,
            HV_GUEST_TIMER_VECTOR | INTR_INFO_TYPE_EXTERNAL | INTR_INFO_VALID);
    /* A HLT the guest is blocked in is over: it takes the interrupt. */
    vmwrite(Vmcs_GuestActivityState, 0);
    Cpu->VirqPending = 0;
    ++Cpu->VirqsInjected;
    return;
  }
  /* SDM Vol. 3C, "Interrupt-Window Exiting": the exit comes before the first
     instruction at which RFLAGS.IF = 1 and there is no blocking by STI or MOV SS. */
  setProcControl(VMX_CTL(Proc_InterruptWindowExiting), true);
  Cpu->IntrWindowOpened = 1;
}
