/* RDMSR and WRMSR exits (SDM Vol. 3C, "Instructions That Cause VM Exits Conditionally"
 * > RDMSR, WRMSR): every RDMSR/WRMSR exits, except, with the system exits and MSR
 * bitmaps, those of IA32_PAT, which the guest does itself (setup.c).
 *
 * The guest has a small emulated MSR set; any other index gets #GP(0) injected, as a
 * processor does for an MSR it does not implement (SDM Vol. 2B, RDMSR: "#GP(0) if the
 * value in ECX specifies a reserved or unimplemented MSR address").
 */
#include "vmx/exit.h"
#include "vmx/insn.h"

/* IA32_PAT of the guest (with the system exits): in the VMCS when the PAT controls
   switch it, else kept here (then it does not reach the processor's memory types: the
   guest runs on write-back memory throughout). */
static uint64_t guestPat(const struct PerCpu *Cpu) {
  return Cpu->PatInVmcs ? vmread(Vmcs_GuestIa32Pat) : Cpu->GuestPat;
}

/* SDM Vol. 3A, "Programming the PAT": each entry's type is 0, 1, 4, 5, 6 or 7 in bits
   2:0 with bits 7:3 zero; anything else is #GP(0) on WRMSR. */
static bool validPat(uint64_t Value) {
  for (unsigned I = 0; I < 8; ++I) {
    uint8_t E = (uint8_t)(Value >> (8 * I));
    if (E > 7 || E == 2 || E == 3)
      return false;
  }
  return true;
}

enum ExitAction handleRdmsr(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  uint32_t Index = (uint32_t)Regs->Rcx;
  TRACE_VMEXIT(1, Index);
  uint64_t Value;
  switch (Index) {
  case MSR_IA32_TSC_AUX:
    Value = Cpu->GuestTscAux;
    break;
  case MSR_IA32_PAT:
    if (!Cpu->SystemExits)
      goto unimplemented;
    Value = guestPat(Cpu);
    break;
  default:
  unimplemented:
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
  case MSR_IA32_PAT:
    if (!Cpu->SystemExits || !validPat(Value))
      break;
    if (Cpu->PatInVmcs)
      vmwrite(Vmcs_GuestIa32Pat, Value);
    else
      Cpu->GuestPat = Value;
    return Action_Advance;
  default:
    break;
  }
  TRACE_VMEXIT(4, VECTOR_GP);
  return injectHardwareException(VECTOR_GP, 0);
}
