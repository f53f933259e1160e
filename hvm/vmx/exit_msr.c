/* RDMSR and WRMSR exits (no MSR bitmaps: every RDMSR/WRMSR exits; SDM Vol. 3C,
 * "Instructions That Cause VM Exits Conditionally" > RDMSR, WRMSR).
 *
 * The guest has a small emulated MSR set; any other index gets #GP(0) injected, as a
 * processor does for an MSR it does not implement (SDM Vol. 2B, RDMSR: "#GP(0) if the
 * value in ECX specifies a reserved or unimplemented MSR address").
 */
#include "vmx/exit.h"

enum ExitAction handleRdmsr(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  uint32_t Index = (uint32_t)Regs->Rcx;
  TRACE_VMEXIT(1, Index);
  uint64_t Value;
  switch (Index) {
  case MSR_IA32_TSC_AUX:
    Value = Cpu->GuestTscAux;
    break;
  default:
    TRACE_VMEXIT(4, VECTOR_GP);
    return injectHardwareException(VECTOR_GP, 0);
  }
  /* EDX:EAX; in 64-bit mode the high halves of RAX and RDX are cleared. */
  Regs->Rax = (uint32_t)Value;
  Regs->Rdx = Value >> 32;
  TRACE_VMEXIT(2, (uint32_t)Value);
  TRACE_VMEXIT(3, Value >> 32);
  return Action_Advance;
}

enum ExitAction handleWrmsr(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  uint32_t Index = (uint32_t)Regs->Rcx;
  uint64_t Value = ((Regs->Rdx & 0xffffffffull) << 32) | (Regs->Rax & 0xffffffffull);
  TRACE_VMEXIT(1, Index);
  TRACE_VMEXIT(2, (uint32_t)Value);
  TRACE_VMEXIT(3, Value >> 32);
  switch (Index) {
  case MSR_IA32_TSC_AUX:
    /* SDM Vol. 4, IA32_TSC_AUX: bits 63:32 are reserved; writing 1s there is #GP. */
    if (Value >> 32)
      break;
    Cpu->GuestTscAux = Value;
    return Action_Advance;
  default:
    break;
  }
  TRACE_VMEXIT(4, VECTOR_GP);
  return injectHardwareException(VECTOR_GP, 0);
}
