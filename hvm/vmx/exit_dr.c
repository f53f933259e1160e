/* MOV DR exits ("MOV-DR exiting" with the system exits; SDM Vol. 3C, "Instructions That
 * Cause VM Exits Conditionally" > MOV DR; exit qualification per Table "Exit
 * Qualification for MOV DR").
 *
 * DR0-DR3 are the processor's own (the core never uses them, and each pcpu runs one
 * vCPU); DR6 and DR7 are the vCPU's, kept here. A DR7 that enables a breakpoint (or
 * GD) would need the guest's DR7 loaded at VM entry and #DB handling the core does not
 * have: it stops the image, saying so, rather than ignoring the breakpoint.
 *
 * The checks that come before the exit are the processor's: #GP at CPL > 0, #UD for
 * DR4/DR5 with CR4.DE = 1, #DB for DR7.GD (SDM Vol. 3C, "Relative Priority of Faults
 * and VM Exits"); DR4/DR5 reaching here are DR6/DR7 (SDM Vol. 3B, "Debug Registers
 * DR4 and DR5").
 */
#include "vmx/exit.h"

/* SDM Vol. 3B, "Debug Status Register (DR6)" and "Debug Control Register (DR7)": DR6
   bits 4-11 and 16-31 read 1 and bit 12 reads 0 (no RTM: bit 16 is 1); DR7 bit 10 reads
   1 and bits 11, 12, 14 and 15 read 0. */
#define DR6_WRITABLE 0xe00full
#define DR6_FIXED1 0xffff0ff0ull
#define DR7_WRITABLE 0xffff23ffull
#define DR7_FIXED1 0x400ull
#define DR7_ENABLES 0x20ffull /* L0-L3, G0-G3 and GD */

static uint64_t readDr(unsigned N) {
  uint64_t V = 0;
  switch (N) {
  case 0:
    __asm__ volatile("mov %%dr0, %0" : "=r"(V));
    break;
  case 1:
    __asm__ volatile("mov %%dr1, %0" : "=r"(V));
    break;
  case 2:
    __asm__ volatile("mov %%dr2, %0" : "=r"(V));
    break;
  case 3:
    __asm__ volatile("mov %%dr3, %0" : "=r"(V));
    break;
  }
  return V;
}

static void writeDr(unsigned N, uint64_t V) {
  switch (N) {
  case 0:
    __asm__ volatile("mov %0, %%dr0" : : "r"(V));
    break;
  case 1:
    __asm__ volatile("mov %0, %%dr1" : : "r"(V));
    break;
  case 2:
    __asm__ volatile("mov %0, %%dr2" : : "r"(V));
    break;
  case 3:
    __asm__ volatile("mov %0, %%dr3" : : "r"(V));
    break;
  }
}

enum ExitAction handleDrAccess(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  uint64_t Q = Cpu->Exit.Qualification;
  unsigned Dr = EXIT_QUAL(Q, mov_dr, DrNumber);
  unsigned FromDr = EXIT_QUAL(Q, mov_dr, Direction);
  unsigned Gpr = EXIT_QUAL(Q, mov_dr, GeneralPurposeRegister);
  /* The slots of a CR access, for a DR access: register number, direction, general
     register, qualification. */
  TRACE_VMEXIT(1, Dr);
  TRACE_VMEXIT(2, FromDr);
  TRACE_VMEXIT(3, Gpr);
  TRACE_VMEXIT(4, Q);
  if (Dr == 4 || Dr == 5)
    Dr += 2;
  if (FromDr) {
    uint64_t V = Dr < 4 ? readDr(Dr) : Dr == 6 ? Cpu->GuestDr6 : Cpu->GuestDr7;
    writeGuestGpr(Regs, Gpr, V);
    return Action_Advance;
  }
  uint64_t V = readGuestGpr(Regs, Gpr);
  if (Dr < 4) {
    writeDr(Dr, V);
    return Action_Advance;
  }
  /* SDM Vol. 2A, MOV (debug registers): in 64-bit mode a 1 in bits 63:32 of DR6 or DR7
     is #GP(0). */
  if (V >> 32)
    return injectHardwareException(VECTOR_GP, 0);
  if (Dr == 6) {
    Cpu->GuestDr6 = (V & DR6_WRITABLE) | DR6_FIXED1;
    return Action_Advance;
  }
  if (V & DR7_ENABLES) {
    exitNote(Cpu, "guest DR7 0x%lx enables a breakpoint: not supported by this core", V);
    return Action_Stop;
  }
  Cpu->GuestDr7 = (V & DR7_WRITABLE) | DR7_FIXED1;
  return Action_Advance;
}
