/* Exits that end the guest for good: a triple fault (SDM Vol. 3C, "Triple Fault"), and
 * VM-entry failures during or after loading guest state, reasons 33 and 34 with bit 31
 * of the exit reason set (SDM Vol. 3C, "VM-Entry Failures During or After Loading Guest
 * State"). Both print what happened and stop the image with a failure; the trace up to
 * this exit stays valid (the handler record, then RUNSTATE_RUNNING_TO_OFFLINE).
 */
#include "vmx/exit.h"
#include "vmx/insn.h"
#include "vmx/vmx.h"

enum ExitAction handleTripleFault(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  exitNote(Cpu, "guest triple fault at rip 0x%lx", Cpu->Exit.GuestRip);
  return Action_Stop;
}

/* What the exit qualification of an entry failure says about the check that failed
   (SDM Vol. 3C, "VM-Entry Failures During or After Loading Guest State"). */
static const char *entryFailureCheck(uint32_t Basic, uint64_t Qualification) {
  if (Basic == Reason_VmEntryFailureMsrLoading)
    return "loading the VM-entry MSR-load area (the qualification is the failing entry, from 1)";
  switch (Qualification) {
  case 2: return "loading the PDPTEs";
  case 3: return "injecting an NMI into a guest blocking events by STI";
  case 4: return "the VMCS link pointer";
  default: return "a check on the guest-state area (\"Checks on the Guest State Area\")";
  }
}

enum ExitAction handleEntryFailure(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  uint32_t Basic = EXIT_REASON_BASIC(Cpu->Exit.Reason);
  exitNote(Cpu, "VM entry failed: %s (reason %u), qualification %lu: %s",
           exitReasonName(Basic), Basic, Cpu->Exit.Qualification,
           entryFailureCheck(Basic, Cpu->Exit.Qualification));
  return Action_Stop;
}
