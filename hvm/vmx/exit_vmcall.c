/* VMCALL (hypercalls) and HLT exits. VMCALL exits unconditionally in VMX non-root
 * operation (SDM Vol. 3C, "Instructions That Cause VM Exits Unconditionally"); HLT
 * exits with "HLT exiting" = 1.
 *
 * Hypercall ABI: RAX = number, RBX = argument, result in RAX.
 *   0  print RBX (recorded in Cpu->Reported for the image to check); returns 0
 *   1  end the guest with status RBX
 *   2  set the vCPU's virtual timer: it fires RBX TSC cycles from now; returns the
 *      deadline (virtual TSC), or -1 when the VMX-preemption timer is not in use (HLT
 *      would then end the guest: exit_timer.c)
 *   any other number returns -1 (all ones).
 */
#include "vmx/exit.h"
#include "vmx/tracebuf.h"

#define HYPERCALL_PRINT 0
#define HYPERCALL_EXIT 1
#define HYPERCALL_SET_TIMER 2

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
    Regs->Rax = Cpu->TimerDeadline;
    return Action_Advance;
  default:
    Regs->Rax = ~0ull;
    return Action_Advance;
  }
}

enum ExitAction handleHlt(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  /* The guest runs with IF = 0: only its virtual timer can wake it (exit_timer.c);
     without one, HLT ends it. */
  Cpu->GuestResult = 0;
  return vcpuBlock(Cpu);
}
