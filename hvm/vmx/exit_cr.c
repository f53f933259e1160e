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
 * - MOV to CR4 exits when it would change an owned bit (VMXE; OSXSAVE with the system
 *   exits): see movToCr4.
 * - MOV to/from CR8 exits (CR8-load/store exiting; "use TPR shadow" is 0): a virtual
 *   TPR is kept per CPU.
 */
#include "lib/cpu.h"
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

/* SDM Vol. 3A, "Control Registers": CR4 bits. */
#define CR4_PSE (1ull << 4)
#define CR4_PAE (1ull << 5)
#define CR4_PGE (1ull << 7)
#define CR4_PCIDE (1ull << 17)
#define CR4_OSXSAVE (1ull << 18)
#define CR4_SMEP (1ull << 20)
#define CPUID1_ECX_XSAVE (1u << 26)

/* MOV to CR4 with the system exits: it exits when it would change CR4.OSXSAVE (or
   VMXE) relative to the shadow. The whole value is checked as the processor would (SDM
   Vol. 2A, MOV (control registers): #GP(0) for a reserved bit, for clearing PAE in IA-32e
   mode, for a feature the processor lacks), then becomes the guest's CR4 with VMXE kept
   1 in the real register and 0 in the shadow. A change of a paging bit flushes the
   guest's translations, as the instruction would have (SDM Vol. 3A, "Invalidation of TLBs
   and Paging-Structure Caches"). */
static enum ExitAction movToCr4(struct PerCpu *Cpu, uint64_t Value) {
  uint64_t Mask = Cpu->Cr4Mask;
  bool Xsave = (cpuid(1, 0).Ecx & CPUID1_ECX_XSAVE) != 0;
  if ((Value & CR4_VMXE) || (Value & ~(Cpu->Cr4Fixed1 | CR4_VMXE)) || !(Value & CR4_PAE) ||
      ((Value & CR4_OSXSAVE) && !Xsave))
    return injectHardwareException(VECTOR_GP, 0);
  uint64_t Old = vmread(Vmcs_GuestCr4);
  uint64_t Real = ((Value & ~Mask) | (Old & Mask) | Cpu->Cr4Fixed0 | CR4_VMXE) & ~CR4_OSXSAVE;
  Real |= Value & CR4_OSXSAVE;
  Cpu->Cr4Shadow = (Cpu->Cr4Shadow & ~Mask) | (Value & Mask);
  vmwrite(Vmcs_Cr4ReadShadow, Cpu->Cr4Shadow);
  vmwrite(Vmcs_GuestCr4, Real);
  if ((Real ^ Old) & (CR4_PSE | CR4_PAE | CR4_PGE | CR4_PCIDE | CR4_SMEP)) {
    uint8_t Types = Cpu->InvvpidTypes;
    if (Types & (1u << 1))
      invvpid(1, (uint16_t)(Cpu->CpuNumber + 1), 0);
    else if (Types & (1u << 2))
      invvpid(2, 0, 0);
  }
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
    case 4:
      return movToCr4(Cpu, Value);
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
