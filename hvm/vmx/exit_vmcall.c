/* VMCALL (hypercalls) and HLT exits. VMCALL exits unconditionally in VMX non-root
 * operation (SDM Vol. 3C, "Instructions That Cause VM Exits Unconditionally"); HLT
 * exits with "HLT exiting" = 1.
 *
 * Hypercall ABI: RAX = number, RBX = argument, result in RAX.
 *   0  print RBX (recorded in Cpu->Reported for the image to check); returns 0
 *   1  end the guest with status RBX
 *   any other number returns -1 (all ones).
 */
#include "vmx/exit.h"

#define HYPERCALL_PRINT 0
#define HYPERCALL_EXIT 1

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
  default:
    Regs->Rax = ~0ull;
    return Action_Advance;
  }
}

enum ExitAction handleHlt(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  /* The guest runs with IF = 0 and nothing would wake it: HLT ends it. */
  Cpu->GuestResult = 0;
  return Action_GuestDone;
}
