/* The system exits (GuestSetup.SystemExits): INVLPG, WBINVD, PAUSE and XSETBV. Each is
 * a fault-like exit before the instruction executes (SDM Vol. 3C, "Instructions That
 * Cause VM Exits Conditionally" > INVLPG, PAUSE, WBINVD; "... Unconditionally" >
 * XSETBV); the core does what the instruction would have done, as seen by the guest.
 */
#include "lib/cpu.h"
#include "vmx/exit.h"
#include "vmx/insn.h"

/* IA32_VMX_EPT_VPID_CAP bits 40-43, as Cpu->InvvpidTypes holds them. */
#define INVVPID_INDIVIDUAL_ADDRESS 0
#define INVVPID_SINGLE_CONTEXT 1
#define INVVPID_ALL_CONTEXT 2

/* SDM Vol. 2C, XSETBV and Vol. 1, "XSAVE-Supported Features and State-Component
   Bitmaps": XCR0 bit 0 (x87) must be 1, AVX (bit 2) needs SSE (bit 1), and only the
   components CPUID.(EAX=0DH,ECX=0):EDX:EAX reports may be set. */
#define XCR0_X87 (1ull << 0)
#define XCR0_SSE (1ull << 1)
#define XCR0_AVX (1ull << 2)

static bool canonical(uint64_t Va) { return (uint64_t)(((int64_t)Va << 16) >> 16) == Va; }

enum ExitAction handleInvlpg(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  /* SDM Vol. 3C, "Exit Qualification for ... INVLPG": the linear-address operand. */
  uint64_t Va = Cpu->Exit.Qualification;
  TRACE_VMEXIT(1, Va);
  /* The guest's translations are tagged with its VPID (setup.c); the ones INVLPG would
     have removed go with INVVPID. INVLPG of a non-canonical address is a no-op (SDM
     Vol. 2A, INVLPG), and INVVPID would fail on it. Without VPID every VM entry and
     exit flushes the guest's translations already (SDM Vol. 3C, "VPID and TLB"). */
  uint16_t Vpid = (uint16_t)(Cpu->CpuNumber + 1);
  uint8_t Types = Cpu->InvvpidTypes;
  enum VmxStatus S = VmSucceed;
  if (Types & (1u << INVVPID_INDIVIDUAL_ADDRESS)) {
    if (canonical(Va))
      S = invvpid(INVVPID_INDIVIDUAL_ADDRESS, Vpid, Va);
  } else if (Types & (1u << INVVPID_SINGLE_CONTEXT)) {
    S = invvpid(INVVPID_SINGLE_CONTEXT, Vpid, 0);
  } else if (Types & (1u << INVVPID_ALL_CONTEXT)) {
    S = invvpid(INVVPID_ALL_CONTEXT, 0, 0);
  }
  if (S != VmSucceed) {
    exitNote(Cpu, "INVVPID for INVLPG 0x%lx failed (status %d)", Va, (int)S);
    return Action_Stop;
  }
  return Action_Advance;
}

enum ExitAction handleWbinvd(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Cpu;
  (void)Regs;
  /* The guest owns no device that could see memory around the caches: nothing to
     write back for it (as Xen does for a domain without passed-through devices). */
  return Action_Advance;
}

enum ExitAction handlePause(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Cpu;
  (void)Regs;
  /* A spinning vCPU would yield its pcpu here; with one vCPU per pcpu there is nobody
     to yield to, and the PAUSE is done. */
  return Action_Advance;
}

enum ExitAction handleXsetbv(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  uint32_t Index = (uint32_t)Regs->Rcx;
  uint64_t Value = ((Regs->Rdx & 0xffffffffull) << 32) | (Regs->Rax & 0xffffffffull);
  TRACE_VMEXIT(1, Index);
  TRACE_VMEXIT(2, (uint32_t)Value);
  TRACE_VMEXIT(3, Value >> 32);
  /* The guest's CR4.OSXSAVE = 0 or CPL > 0 would have raised #UD / #GP before the exit
     (SDM Vol. 3C, "Relative Priority of Faults and VM Exits"); the operand checks are
     the instruction's own, after it: #GP(0). */
  struct CpuidRegs Xs = cpuid(0xd, 0);
  uint64_t Supported = ((uint64_t)Xs.Edx << 32) | Xs.Eax;
  if (Index != 0 || !(Value & XCR0_X87) || (Value & ~Supported) ||
      ((Value & XCR0_AVX) && !(Value & XCR0_SSE))) {
    TRACE_VMEXIT(4, VECTOR_GP);
    return injectHardwareException(VECTOR_GP, 0);
  }
  __asm__ volatile("xsetbv" : : "c"(0), "a"((uint32_t)Value), "d"((uint32_t)(Value >> 32)));
  Cpu->GuestXcr0 = Value;
  return Action_Advance;
}
