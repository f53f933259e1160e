/* Exceptions and NMIs (exit reason 0). An exception whose bit is set in the exception
 * bitmap exits instead of being delivered (SDM Vol. 3C, "Exception Bitmap"); the core
 * reflects it: the same vector is injected with the next VM entry (SDM Vol. 3C, "Event
 * Injection"), with its error code when the exit reported one, and for a software
 * exception (INT3, INTO) with the instruction length the exit reported, so the guest's
 * handler sees the exception as it would have without the hypervisor. For #PF the
 * faulting address goes into CR2 first: VM entries and exits leave CR2 alone (SDM Vol.
 * 3C, "VM Exits Due to Exceptions": a #PF exit does not load CR2; the qualification has
 * the address). An NMI exit, or an exit during the delivery of another event, stops.
 */
#include "vmx/exit.h"
#include "vmx/insn.h"

enum ExitAction handleException(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  uint32_t Info = Cpu->Exit.InterruptionInfo;
  uint32_t Vector = INTR_INFO_VECTOR(Info);
  uint32_t ErrorCode =
      (Info & INTR_INFO_ERROR_CODE) ? (uint32_t)vmread(Vmcs_VmExitInterruptionErrorCode) : 0;
  /* As Xen 3.0.3: vector, then error code and qualification (for #PF: the address). */
  TRACE_VMEXIT(1, Vector);
  TRACE_VMEXIT(3, ErrorCode);
  TRACE_VMEXIT(4, Cpu->Exit.Qualification);
  uint32_t Type = Info & (7u << 8);
  if ((Type != INTR_INFO_TYPE_HW_EXCEPTION && Type != INTR_INFO_TYPE_SW_EXCEPTION) ||
      Cpu->Exit.IdtVectoringInfo) {
    exitNote(Cpu, "exception or NMI not reflected: interruption info 0x%x, IDT vectoring 0x%x",
             Info, Cpu->Exit.IdtVectoringInfo);
    return Action_Stop;
  }
  if (Vector == 14)
    __asm__ volatile("mov %0, %%cr2" : : "r"(Cpu->Exit.Qualification) : "memory");
  /* A real-mode guest (unrestricted, CR0.PE = 0) takes no error code: "deliver error
     code" must then be 0 (SDM Vol. 3C, "Checks on VM-Entry Control Fields"). */
  if (!(vmread(Vmcs_GuestCr0) & CR0_PE))
    Info &= ~INTR_INFO_ERROR_CODE;
  /* SDM Vol. 3C, "Checks on VM-Entry Control Fields": "deliver error code" only for the
     vectors that push one; a software exception needs the instruction length. */
  vmwrite(Vmcs_VmEntryInterruptionInformation,
          Vector | Type | (Info & INTR_INFO_ERROR_CODE) | INTR_INFO_VALID);
  if (Info & INTR_INFO_ERROR_CODE)
    vmwrite(Vmcs_VmEntryExceptionErrorCode, ErrorCode);
  if (Type == INTR_INFO_TYPE_SW_EXCEPTION)
    vmwrite(Vmcs_VmEntryInstructionLength, Cpu->Exit.InstructionLength);
  ++Cpu->Reflected;
  return Action_Inject;
}
