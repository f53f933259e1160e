/* Control-register-access exits (SDM Vol. 3C, "Instructions That Cause VM Exits
 * Conditionally" > MOV to CR0, MOV to CR3, MOV from CR8, MOV to CR8; exit qualification
 * per Table "Exit Qualification for Control-Register Accesses").
 *
 * - MOV to CR0 exits when it would change a bit owned through the CR0 guest/host mask
 *   relative to the read shadow. The guest may change CD and NW: it reads back its own
 *   value from the shadow, while the real CR0 keeps caching on. Changing PE, PG or NE
 *   is not supported (a 64-bit guest has no reason to).
 * - MOV to CR3 exits always (CR3-target count 0): the value becomes the guest CR3.
 * - MOV from CR3 exits only on processors whose CR3-store exiting cannot be turned off
 *   (no TRUE_ controls): the guest CR3 is returned.
 * - MOV to/from CR8 exits (CR8-load/store exiting; "use TPR shadow" is 0): a virtual
 *   TPR is kept per CPU.
 */
#include "vmx/exit.h"
#include "vmx/insn.h"

static enum ExitAction movToCr0(struct PerCpu *Cpu, uint64_t Value) {
  uint64_t Mask = Cpu->Cr0Mask;
  uint64_t Changed = (Value ^ Cpu->Cr0Shadow) & Mask;
  if (Changed & ~(CR0_CD | CR0_NW)) {
    exitNote(Cpu, "MOV to CR0 changing owned bits 0x%lx is not supported",
             (uint64_t)(Changed & ~(CR0_CD | CR0_NW)));
    return Action_Stop;
  }
  /* SDM Vol. 2A, MOV (control registers): #GP(0) for NW = 1 with CD = 0, or for a 1
     in bits 63:32. */
  if (((Value & CR0_NW) && !(Value & CR0_CD)) || (Value >> 32))
    return injectHardwareException(VECTOR_GP, 0);
  Cpu->Cr0Shadow = (Cpu->Cr0Shadow & ~Mask) | (Value & Mask);
  uint64_t Real = vmread(Vmcs_GuestCr0);
  Real = (Real & Mask) | (Value & ~Mask);
  vmwrite(Vmcs_Cr0ReadShadow, Cpu->Cr0Shadow);
  vmwrite(Vmcs_GuestCr0, (Real | Cpu->Cr0Fixed0) & Cpu->Cr0Fixed1);
  return Action_Advance;
}

enum ExitAction handleCrAccess(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  uint64_t Q = Cpu->Exit.Qualification;
  uint32_t Type = EXIT_QUAL(Q, cr_access, AccessType);
  uint32_t Cr = EXIT_QUAL(Q, cr_access, CrNumber);
  uint32_t Gpr = EXIT_QUAL(Q, cr_access, GeneralPurposeRegister);
  /* Xen 3.0.3's slots for CR accesses: the kind of access, the CR number, the general
     register, then the exit qualification. */
  TRACE_VMEXIT(1, Type);
  TRACE_VMEXIT(2, Cr);
  TRACE_VMEXIT(3, Gpr);
  TRACE_VMEXIT(4, Q);
  if (Type == CrAccess_MovToCr) {
    uint64_t Value = readGuestGpr(Regs, Gpr);
    switch (Cr) {
    case 0:
      return movToCr0(Cpu, Value);
    case 3:
      /* The guest runs on the host's identity map, and so on any CR3 it loads. */
      vmwrite(Vmcs_GuestCr3, Value);
      return Action_Advance;
    case 8:
      /* SDM Vol. 2A, MOV (control registers): bits 63:4 of CR8 are reserved. */
      if (Value & ~0xfull)
        return injectHardwareException(VECTOR_GP, 0);
      Cpu->GuestTpr = Value;
      return Action_Advance;
    }
  } else if (Type == CrAccess_MovFromCr) {
    switch (Cr) {
    case 3:
      writeGuestGpr(Regs, Gpr, vmread(Vmcs_GuestCr3));
      return Action_Advance;
    case 8:
      writeGuestGpr(Regs, Gpr, Cpu->GuestTpr);
      return Action_Advance;
    }
  }
  exitNote(Cpu, "control-register access type %u to CR%u is not emulated", Type, Cr);
  return Action_Stop;
}
