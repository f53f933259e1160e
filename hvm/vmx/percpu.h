/* Per-CPU data of the hypervisor core: the guest's general registers while an exit is
 * handled, the exit stack, the VMXON region and VMCS, and the trace_values slots.
 *
 * One struct PerCpu per logical processor. Its address is the host GS base (loaded by
 * every VM exit from the VMCS host-state area), so thisCpu() is one GS-relative load,
 * as Xen's this_cpu() is a per-CPU offset.
 *
 * The exit stack sits directly below Regs and the VMCS host RSP points just past Regs:
 * the exit stub (entry.S) pushes the guest registers into Regs and calls the handler
 * with RSP = &Regs, so the handler's frames grow down into ExitStack. Offsets used by
 * entry.S are defined here and checked with _Static_assert.
 */
#ifndef HVM_VMX_PERCPU_H
#define HVM_VMX_PERCPU_H

#define PERCPU_EXIT_STACK_SIZE 0x4000
#define PERCPU_REGS_OFFSET PERCPU_EXIT_STACK_SIZE
#define GUEST_REGS_SIZE 128
/* Relative to PerCpu, right after Regs. */
#define PERCPU_EXIT_HANDLER_OFFSET (PERCPU_REGS_OFFSET + GUEST_REGS_SIZE)
#define PERCPU_LAUNCHER_RSP_OFFSET (PERCPU_EXIT_HANDLER_OFFSET + 8)

/* Logical processors the core runs on (struct PerCpu and a trace ring each). */
#define HVM_MAX_CPUS 8

/* Number of trace_values slots, as in Xen 3.0.3. */
#define HVM_TRACE_VALUES 5

#ifndef __ASSEMBLER__
#include <stddef.h>
#include <stdint.h>

#include "vmx/tracebuf.h"

/// The guest's general registers other than RSP (which the VMCS holds), in the order
/// entry.S pushes them: the lowest address is the last push.
struct GuestRegs {
  uint64_t R15, R14, R13, R12, R11, R10, R9, R8;
  uint64_t Rdi, Rsi, Rbp, Rbx, Rdx, Rcx, Rax;
  uint64_t Pad; /* keeps RSP 16-byte aligned at the handler call */
};
_Static_assert(sizeof(struct GuestRegs) == GUEST_REGS_SIZE, "entry.S frame size");

/// The general register numbering of exit qualifications and instruction information
/// (SDM Vol. 3C, e.g. Table "Exit Qualification for Control-Register Accesses":
/// 0 = RAX, 1 = RCX, 2 = RDX, 3 = RBX, 4 = RSP, 5 = RBP, ... 15 = R15). RSP is not in
/// GuestRegs: the caller reads it from the VMCS.
uint64_t *guestGpr(struct GuestRegs *Regs, unsigned Number);

struct PerCpu;
/// Called by the exit stub with RSP = Regs; returning resumes the guest (VMRESUME).
typedef void (*ExitHandlerFn)(struct GuestRegs *Regs);

/// What the current exit is about, read once at the start of the handler.
struct ExitInfo {
  uint32_t Reason; /* the full exit-reason field */
  uint32_t InstructionLength;
  uint64_t Qualification;
  uint64_t GuestRip;
  uint32_t InterruptionInfo; /* VM-exit interruption information, 0 unless valid */
  uint32_t IdtVectoringInfo; /* IDT-vectoring information, 0 unless valid */
};

/// A 4 KiB VMX region (VMXON region or VMCS): revision identifier first (SDM Vol. 3C,
/// "Format of the VMCS Region").
struct VmxRegion {
  uint32_t RevisionId;
  uint32_t AbortIndicator;
  uint8_t Data[4096 - 8];
} __attribute__((aligned(4096)));

struct PerCpu {
  uint8_t ExitStack[PERCPU_EXIT_STACK_SIZE] __attribute__((aligned(16)));
  struct GuestRegs Regs;
  ExitHandlerFn ExitHandler;
  uint64_t LauncherRsp; /* vmxRunGuest's stack, for vmxGuestDone */
  struct PerCpu *Self;
  uint32_t CpuNumber;

  /* This CPU's XenTrace buffer (vmx/tracebuf.h), written by the trace hooks. */
  struct TraceBuffer Trace;
  /* Exits handled since the launch; the number of the current one, from 1. */
  uint64_t ExitCount;
  struct ExitInfo Exit;
  /* Print one line per exit (vmx_e2e); off for the benchmark. */
  uint8_t LogExits;
  /* A line the handler wants printed after the exit's own line ("  guest uart: ..."):
     the exit line comes first, so the log reads in order. */
  char Note[192];
  /* Guest UART output collected up to '\n'. */
  char UartLine[80];
  uint32_t UartLineLen;

  /* Emulated guest state. */
  uint64_t GuestTscAux;
  uint64_t GuestTpr; /* CR8, bits 3:0 */
  uint64_t Cr0Mask;  /* the CR0 guest/host mask in the VMCS */
  uint64_t Cr0Shadow;
  uint64_t Cr4Mask; /* the CR4 guest/host mask in the VMCS */
  uint64_t Cr4Shadow;
  /* With the system exits (GuestSetup.SystemExits; exit_system.c, exit_dr.c): the
     guest's IA32_PAT when the MSR bitmaps cannot pass it through, its XCR0, and its
     debug registers (DR0-DR3 live in the processor's: the core itself never uses them). */
  uint64_t GuestPat;
  uint64_t GuestXcr0;
  uint64_t GuestDr6, GuestDr7;
  /* The guest's TSC is the processor's plus this (the VMCS TSC offset); with RdtscExiting
     the core emulates RDTSC with the same offset (exit_timer.c, hypercall 4). */
  uint64_t TscOffset;
  uint8_t RdtscExiting;
  uint8_t SystemExits;
  /* IA32_PAT is switched by the VMCS (the PAT load/save controls), so GuestPat is in
     the guest-state area, not here. */
  uint8_t PatInVmcs;
  /* INVVPID types the processor offers (IA32_VMX_EPT_VPID_CAP bits 40-43), 0 = none or
     no VPID. */
  uint8_t InvvpidTypes;
  /* The guest's virtual interrupt source (exit_intr.c, hypercall 5): the host's local
     APIC timer fires VirqsLeft more times, Period TSC cycles apart; each becomes the
     virtual interrupt HV_GUEST_TIMER_VECTOR, pending in VirqPending until the guest can
     take it. NmiPending: a virtual NMI asked for with hypercall 6. IntrWindowOpened: the
     entry being prepared waits for an interrupt window (INTR_WINDOW is written). */
  uint32_t VirqsLeft;
  uint64_t VirqPeriod;
  uint8_t VirqPending;
  uint8_t NmiPending;
  uint8_t IntrWindowOpened;
  uint64_t VirqsInjected, NmisInjected;
  /* APIC virtualization (exit_apic.c): on for this vCPU; posts it sent (hypercall 8),
     virtualized EOIs and APIC writes it served. */
  uint8_t Apicv;
  uint64_t PostsSent, VirtualEois, ApicWrites;
  /* Values the guest reported with hypercall 0, for the image to check. */
  uint64_t Reported[32];
  uint32_t ReportedCount;
  uint64_t GuestResult; /* set when the guest ends */
  /* Exit lines print guest RIPs relative to this (struct GuestSetup). */
  uint64_t RipBase;

  /* The vCPU's virtual timer (exit_vmcall.c, exit_timer.c): the virtual TSC at which
     it fires, 0 = not armed; Blocked while the vCPU waits for it in HLT. */
  uint64_t TimerDeadline;
  uint8_t Blocked;
  /* The VMX-preemption timer (0 = not in use): its rate (IA32_VMX_MISC[4:0], the timer
     counts down once every 2^rate TSC cycles) and the value a time slice reloads at
     every VM entry (~0u: no time slices, the timer only wakes a blocked vCPU). */
  uint8_t PreemptionTimer;
  uint8_t PreemptionRate;
  uint32_t SliceTicks;
  /* Exits of each kind the handlers served without stopping (exit_timer.c, exit_ept.c,
     exit_exception.c). */
  uint64_t SliceEnds, TimerWakeups, LazyMaps, Reflected, MmioAccesses;
  /* The vCPU's registers of the emulated MMIO page (vmx/ept.h). */
  uint64_t MmioScratch, MmioCounter;

  /* Capabilities read at setup. */
  uint64_t VmxBasic;
  uint64_t Cr0Fixed0, Cr0Fixed1, Cr4Fixed0, Cr4Fixed1;

  struct VmxRegion VmxonRegion;
  struct VmxRegion Vmcs;

  /* Xen's per-CPU trace_values: filled by TRACE_VMEXIT while an exit is handled,
     emitted and reset by vmxTraceVmentry just before the next VM entry. On a page of their own, published (trace_layout.c) for vmxsim's ground truth, which
     watches stores to them page by page: a store to a watched page takes the emulator's
     slow path, so nothing else the handler writes (the exit frame, Regs) shares it. */
  uint64_t TraceValues[HVM_TRACE_VALUES] __attribute__((aligned(4096)));
  uint8_t TraceValuesPage[4096 - 8 * HVM_TRACE_VALUES];
};
_Static_assert(offsetof(struct PerCpu, Regs) == PERCPU_REGS_OFFSET, "entry.S offset");
_Static_assert(offsetof(struct PerCpu, ExitHandler) == PERCPU_EXIT_HANDLER_OFFSET,
               "entry.S offset");
_Static_assert(offsetof(struct PerCpu, LauncherRsp) == PERCPU_LAUNCHER_RSP_OFFSET,
               "entry.S offset");

/// The current CPU's data: the host GS base points at it (see perCpuInit).
static inline struct PerCpu *thisCpu(void) {
  struct PerCpu *P;
  __asm__ volatile("movq %%gs:%c1, %0" : "=r"(P) : "i"(offsetof(struct PerCpu, Self)));
  return P;
}

static inline struct PerCpu *perCpuFromRegs(struct GuestRegs *Regs) {
  return (struct PerCpu *)((char *)Regs - offsetof(struct PerCpu, Regs));
}

/// Sets up the data of CPU CpuNumber (0 = the BSP; below HVM_MAX_CPUS) on the CPU that
/// calls it: its trace ring (announced to the machine), its own GDT and TSS, and
/// IA32_GS_BASE so thisCpu() works. Every CPU, BSP and AP, is set up here and only here.
struct PerCpu *perCpuInit(uint32_t CpuNumber);

#endif
#endif
