/* The guest scenarios of the hv image (README.md): one bit each in the mask the guest
   gets in RDI. */
#pragma once

#define HV_SC_IO (1u << 0)
#define HV_SC_CPUID (1u << 1)
#define HV_SC_MSR (1u << 2)
#define HV_SC_CR (1u << 3)
#define HV_SC_HLT_TIMER (1u << 4)
#define HV_SC_EPT (1u << 5)
#define HV_SC_EXCEPTIONS (1u << 6)
#define HV_SC_MMIO (1u << 7)
/* system: INVLPG, MOV DR, IA32_PAT, CR4.OSXSAVE and XSETBV, WBINVD, PAUSE, emulated
   RDTSC, yield (bit 10: bits 8 and 9 are the scenarios that run on their own). */
#define HV_SC_SYSTEM (1u << 10)
/* irq: the virtual timer interrupt taken in HLT and through the interrupt window, and a
   virtual NMI through the NMI window (with the system exits). */
#define HV_SC_IRQ (1u << 11)
#define HV_SC_ALL (((1u << 8) - 1) | HV_SC_SYSTEM | HV_SC_IRQ)
/* apicv: APIC virtualization and posted interrupts (vmx/exit_apic.c), run on its own (it
   needs what only some processors offer, and CR8 no longer exits with it). */
#define HV_SC_APICV (1u << 12)
/* The guest's vectors: the virtual timer interrupt (vmx/exit.h HV_GUEST_TIMER_VECTOR);
   apicv's self-IPI and posted interrupt (vmx/exit.h HV_APICV_SELF_VECTOR and
   HV_APICV_POSTED_VECTOR). */
#define HV_VIRQ_VECTOR 0x30
#define HV_APICV_SELF 0x31
#define HV_APICV_POSTED 0x32
/* A failure case, not part of mixed: the guest triple-faults (exit 2), which stops the
   image with status 1. */
#define HV_SC_TRIPLE_FAULT (1u << 8)
/* An unrestricted guest in real mode (realmode.S), run on its own: its vCPUs start in
   real mode, the others' in 64-bit mode, so it is not part of mixed. */
#define HV_SC_REALMODE (1u << 9)
/* The scenarios that need EPT. */
#define HV_SC_NEED_EPT (HV_SC_EPT | HV_SC_MMIO | HV_SC_REALMODE)

/* The lazily mapped region (vmx/ept.h): 2 MiB of guest-physical memory at 128 MiB, a
   slice of HV_EPT_SLICE bytes per vCPU. The machine needs 130 MiB of RAM or more. */
#define HV_LAZY_BASE (128ull << 20)
#define HV_EPT_SLICE (256u << 10)

/* A guest-linear address the boot page tables leave unmapped (PML4 entry 32). */
#define HV_UNMAPPED 0x100000000000ull
/* The exceptions that exit and are reflected: #BP, #UD, #GP, #PF. */
#define HV_EXCEPTION_BITMAP ((1u << 3) | (1u << 6) | (1u << 13) | (1u << 14))

/* Time slices: TSC cycles of each (the VMX-preemption timer). */
#define HV_SLICE_CYCLES 100000u

#ifndef __ASSEMBLER__
#include <stdint.h>
/// The guest: runs the scenarios of Mask in order on vCPU Vcpu, then ends with
/// hypercall 1 and a status: 0, or the bits of the scenarios that went wrong.
__attribute__((noreturn)) void hvGuest(uint64_t Mask, uint64_t Vcpu);
/// traps.S: the guest's handlers for exceptions without and with an error code.
void hvTrapNoError(void), hvTrapError(void);
/// traps.S: the irq scenario's interrupt and NMI handlers.
void hvVirq(void), hvNmi(void);
/// traps.S: the apicv scenario's handlers of the self-IPI and of the posted interrupt.
void hvApicvSelf(void), hvApicvPosted(void);
/// realmode.S: the real-mode guest.
void hvRealModeGuest(void);
#endif
