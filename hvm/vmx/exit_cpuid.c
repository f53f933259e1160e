/* CPUID exits (unconditional in VMX non-root operation: SDM Vol. 3C, "Instructions That
 * Cause VM Exits Unconditionally"). The guest sees the processor's CPUID with VMX
 * hidden and the hypervisor present, plus the hypervisor leaves at 0x40000000.
 */
#include "lib/cpu.h"
#include "lib/string.h"
#include "vmx/exit.h"

#define HV_LEAF_BASE 0x40000000u
#define HV_LEAF_LAST 0x4fffffffu

#define CPUID1_ECX_OSXSAVE (1u << 27)
#define CR4_OSXSAVE_BIT (1ull << 18)

enum ExitAction handleCpuid(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  uint32_t Leaf = (uint32_t)Regs->Rax, Subleaf = (uint32_t)Regs->Rcx;
  TRACE_VMEXIT(1, Leaf);
  TRACE_VMEXIT(2, Subleaf);
  struct CpuidRegs R;
  if (Leaf >= HV_LEAF_BASE && Leaf <= HV_LEAF_LAST) {
    /* The de-facto hypervisor range: 0x40000000 returns the highest hypervisor leaf
       in EAX and a 12-byte signature in EBX, ECX, EDX ("vmxsimHVM\0\0\0"); leaves
       above it return zeros. */
    R = (struct CpuidRegs){0, 0, 0, 0};
    if (Leaf == HV_LEAF_BASE) {
      static const char Sig[12] = "vmxsimHVM";
      uint32_t W[3];
      memcpy(W, Sig, sizeof(W));
      R = (struct CpuidRegs){HV_LEAF_BASE, W[0], W[1], W[2]};
    }
  } else {
    R = cpuid(Leaf, Subleaf);
    if (Leaf == 1) {
      /* Nested VMX is not offered: CPUID.1:ECX.VMX = 0 (the guest's CR4.VMXE reads 0
         too, through the CR4 read shadow). */
      R.Ecx = (R.Ecx & ~CPUID1_ECX_VMX) | CPUID1_ECX_HYPERVISOR;
      /* OSXSAVE (bit 27) mirrors CR4.OSXSAVE: the guest's, from the shadow, not the
         host's that executed this CPUID (SDM Vol. 2A, CPUID, Table "Feature
         Information Returned in the ECX Register"). */
      R.Ecx = (R.Ecx & ~CPUID1_ECX_OSXSAVE) |
              ((Cpu->Cr4Shadow & CR4_OSXSAVE_BIT) ? CPUID1_ECX_OSXSAVE : 0);
    }
  }
  /* SDM Vol. 2A, CPUID: in 64-bit mode the high 32 bits of RAX, RBX, RCX and RDX are
     cleared. */
  Regs->Rax = R.Eax;
  Regs->Rbx = R.Ebx;
  Regs->Rcx = R.Ecx;
  Regs->Rdx = R.Edx;
  return Action_Advance;
}
