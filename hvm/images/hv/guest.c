/* The hv image's guest: 64-bit code at CPL 0 with IF = 0 in VMX non-root operation,
 * sharing the image (the hypervisor's identity map, through an identity EPT when the
 * processor offers EPT). Each scenario does a fixed amount of work that exits in a
 * known way (README.md has the mix) and checks what the hypervisor emulated; the
 * status of hypercall 1 has a bit set for each scenario that saw something wrong.
 *
 * Built with -mgeneral-regs-only: the exit path saves only general registers.
 */
#include <stdint.h>

#include "images/hv/scenarios.h"
#include "lib/io.h"
#include "vmx/ept.h"

#define UART_THR 0x3f8
#define UART_LSR 0x3fd
#define UART_LSR_THRE 0x20
#define UNCLAIMED_PORT 0x1234
#define MSR_IA32_TSC_AUX 0xc0000103u
#define HYPERCALL_EXIT 1
#define HYPERCALL_SET_TIMER 2
#define HYPERCALL_YIELD 3
#define HYPERCALL_RDTSC_EXITING 4
#define HYPERCALL_START_VIRQS 5
#define HYPERCALL_NMI 6
#define HYPERCALL_POST 8
#define CR0_CD (1ull << 30)
#define CR4_OSXSAVE (1ull << 18)
#define MSR_IA32_PAT 0x277u

static inline uint64_t hypercall(uint64_t Number, uint64_t Arg) {
  uint64_t R;
  __asm__ volatile("vmcall" : "=a"(R) : "a"(Number), "b"(Arg) : "memory");
  return R;
}

static inline void gcpuid(uint32_t Leaf, uint32_t *A, uint32_t *B, uint32_t *C, uint32_t *D) {
  __asm__ volatile("cpuid" : "=a"(*A), "=b"(*B), "=c"(*C), "=d"(*D) : "a"(Leaf), "c"(0));
}

static inline void goutl(uint16_t Port, uint32_t V) {
  __asm__ volatile("outl %0, %1" : : "a"(V), "Nd"(Port));
}

static inline uint64_t grdtsc(void) {
  uint32_t Lo, Hi;
  __asm__ volatile("rdtsc" : "=a"(Lo), "=d"(Hi));
  return ((uint64_t)Hi << 32) | Lo;
}

/* A polling UART driver: wait for THRE, send. */
static void putChar(char C) {
  while (!(inb(UART_LSR) & UART_LSR_THRE))
    ;
  outb(UART_THR, (uint8_t)C);
}

/* io: "hv: vN io\n" through the UART (IN + OUT per character: 20 exits), then a 16-bit
   IN from an unclaimed port (all ones) and a 32-bit OUT to it (dropped). */
static int scenarioIo(uint64_t Vcpu) {
  static const char Text[] = "hv: v_ io\n";
  for (const char *P = Text; *P; ++P)
    putChar(*P == '_' ? (char)('0' + Vcpu % 10) : *P);
  int Bad = inw(UNCLAIMED_PORT) != 0xffff;
  goutl(UNCLAIMED_PORT, 0xdeadbeef);
  return Bad;
}

/* cpuid: four rounds of leaves 0x40000000 (the signature "vmxsimHVM"), 1 (VMX hidden,
   hypervisor bit set) and 0: 12 exits. */
static int scenarioCpuid(void) {
  int Bad = 0;
  for (unsigned I = 0; I < 4; ++I) {
    uint32_t A, B, C, D;
    gcpuid(0x40000000, &A, &B, &C, &D);
    Bad |= B != 0x73786d76 || C != 0x56486d69 || D != 0x4d;
    gcpuid(1, &A, &B, &C, &D);
    Bad |= (C & (1u << 5)) != 0 || !(C & (1u << 31));
    gcpuid(0, &A, &B, &C, &D);
  }
  return Bad;
}

/* msr: IA32_TSC_AUX written and read back twice, with this vCPU's own values: 4 exits. */
static int scenarioMsr(uint64_t Vcpu) {
  int Bad = 0;
  for (uint32_t I = 0; I < 2; ++I) {
    uint32_t Want = 0x100 * (I + 1) + (uint32_t)Vcpu, Lo, Hi;
    __asm__ volatile("wrmsr" : : "c"(MSR_IA32_TSC_AUX), "a"(Want), "d"(0));
    __asm__ volatile("rdmsr" : "=a"(Lo), "=d"(Hi) : "c"(MSR_IA32_TSC_AUX));
    Bad |= Lo != Want || Hi != 0;
  }
  return Bad;
}

/* cr: CR0.CD set and cleared (2 exits; MOV from CR0 reads the shadow without exiting),
   CR3 reloaded (1), CR8 written, read and cleared (3): 6 exits. */
static int scenarioCr(uint64_t Vcpu) {
  uint64_t Cr0, Cr3, Cr8, Seen;
  int Bad = 0;
  __asm__ volatile("mov %%cr0, %0" : "=r"(Cr0));
  __asm__ volatile("mov %0, %%cr0" : : "r"(Cr0 | CR0_CD));
  __asm__ volatile("mov %%cr0, %0" : "=r"(Seen));
  Bad |= !(Seen & CR0_CD);
  __asm__ volatile("mov %0, %%cr0" : : "r"(Cr0 & ~CR0_CD));
  __asm__ volatile("mov %%cr3, %0" : "=r"(Cr3));
  __asm__ volatile("mov %0, %%cr3" : : "r"(Cr3) : "memory");
  Cr8 = 1 + Vcpu % 15;
  __asm__ volatile("mov %0, %%cr8" : : "r"(Cr8));
  __asm__ volatile("mov %%cr8, %0" : "=r"(Seen));
  Bad |= Seen != Cr8;
  __asm__ volatile("mov %0, %%cr8" : : "r"(0ull));
  return Bad;
}

/* hlt-timer: three rounds of "set the timer, HLT" (2 exits each, plus the timer's exit
   that wakes the vCPU), each checking the TSC has reached the deadline; then a loop
   of plain computation long enough for several time slices to end (exit 52). */
static int scenarioHltTimer(uint64_t Vcpu) {
  int Bad = 0;
  for (uint64_t I = 0; I < 3; ++I) {
    uint64_t Deadline = hypercall(HYPERCALL_SET_TIMER, 20000 * (I + 1) + 1000 * Vcpu);
    if (Deadline == ~0ull)
      return 1; /* no VMX-preemption timer: HLT would end the guest */
    __asm__ volatile("hlt");
    Bad |= grdtsc() < Deadline;
  }
  uint64_t X = Vcpu + 1;
  for (unsigned I = 0; I < 100000; ++I)
    __asm__ volatile("imul $3, %0, %0\n\taddq $1, %0" : "+r"(X));
  return Bad | (X == 0);
}

/* ept: one write to each 4 KiB page of this vCPU's slice of the lazy region (64 EPT
   violations, each mapping the page), then the slice read back. */
static int scenarioEpt(uint64_t Vcpu) {
  volatile uint64_t *Base =
      (volatile uint64_t *)(uintptr_t)(HV_LAZY_BASE + Vcpu * HV_EPT_SLICE);
  const unsigned Pages = HV_EPT_SLICE / 4096, Stride = 4096 / sizeof(uint64_t);
  for (unsigned I = 0; I < Pages; ++I)
    Base[I * Stride + I % Stride] = (Vcpu << 32) | I;
  int Bad = 0;
  for (unsigned I = 0; I < Pages; ++I)
    Bad |= Base[I * Stride + I % Stride] != ((Vcpu << 32) | I);
  return Bad;
}

/* exceptions: UD2 (#UD), INT3 (#BP), a load from a non-canonical address (#GP(0)) and
   one from an unmapped address (#PF, error code 0, CR2 = the address), twice each: each
   exits (the exception bitmap), the hypervisor reflects it, traps.S handles it and
   resumes at R15: 8 exits. */
static int scenarioExceptions(void) {
  register uint64_t Count __asm__("r14") = 0;
  register uint64_t Error __asm__("r13") = ~0ull;
  int Bad = 0;
  for (int I = 0; I < 2; ++I) {
    __asm__ volatile("leaq 1f(%%rip), %%r15\n\tud2\n1:" : "+r"(Count), "+r"(Error) : : "r15", "memory");
    __asm__ volatile("leaq 1f(%%rip), %%r15\n\tint3\n1:" : "+r"(Count), "+r"(Error) : : "r15", "memory");
    Error = ~0ull;
    __asm__ volatile("leaq 1f(%%rip), %%r15\n\tmovq (%2), %%rax\n1:"
                     : "+r"(Count), "+r"(Error)
                     : "r"(0x8000000000000000ull)
                     : "r15", "rax", "memory");
    Bad |= Error != 0;
    Error = ~0ull;
    __asm__ volatile("leaq 1f(%%rip), %%r15\n\tmovq (%2), %%rax\n1:"
                     : "+r"(Count), "+r"(Error)
                     : "r"(HV_UNMAPPED)
                     : "r15", "rax", "memory");
    uint64_t Cr2;
    __asm__ volatile("mov %%cr2, %0" : "=r"(Cr2));
    Bad |= Error != 0 || Cr2 != HV_UNMAPPED;
  }
  return Bad | (Count != 8);
}

/* mmio: the emulated MMIO page (vmx/ept.h): the ID register (32-bit load), the scratch
   register written (64-bit store of a register) and read back, written with a 32-bit
   immediate (C7) and read back, the counter read three times (0, 1, 2). Every access is
   an EPT violation the hypervisor emulates: 8 exits. */
static int scenarioMmio(uint64_t Vcpu) {
  volatile uint32_t *Id = (volatile uint32_t *)(uintptr_t)(EPT_MMIO_BASE + EPT_MMIO_ID);
  volatile uint64_t *Scratch =
      (volatile uint64_t *)(uintptr_t)(EPT_MMIO_BASE + EPT_MMIO_SCRATCH);
  volatile uint64_t *Counter =
      (volatile uint64_t *)(uintptr_t)(EPT_MMIO_BASE + EPT_MMIO_COUNTER);
  int Bad = *Id != EPT_MMIO_ID_VALUE;
  uint64_t Want = 0x1234567800000000ull | Vcpu;
  *Scratch = Want;
  Bad |= *Scratch != Want;
  *(volatile uint32_t *)Scratch = 0x55;
  Bad |= *Scratch != 0x55;
  for (uint64_t I = 0; I < 3; ++I)
    Bad |= *Counter != I;
  return Bad;
}

static inline uint64_t grdmsr(uint32_t Msr) {
  uint32_t Lo, Hi;
  __asm__ volatile("rdmsr" : "=a"(Lo), "=d"(Hi) : "c"(Msr));
  return ((uint64_t)Hi << 32) | Lo;
}

static inline void gwrmsr(uint32_t Msr, uint64_t V) {
  __asm__ volatile("wrmsr" : : "c"(Msr), "a"((uint32_t)V), "d"((uint32_t)(V >> 32)));
}

/* system (with the system exits, README.md):
   - INVLPG of a mapped and of an unmapped address: 2 exits (14);
   - DR0 written and read back, DR7 read (0x400), DR6 written with BS and read back
     (0xffff4ff0): 5 exits (29);
   - IA32_PAT written, read back and restored: no exit when the MSR bitmaps pass it
     through (the processor has them and the PAT controls), 3 exits (32, 31, 32) else;
   - when CPUID.1 (1 exit) says XSAVE: CR4.OSXSAVE set (1 exit, 28), seen in CR4's shadow
     and in CPUID.1:ECX.OSXSAVE (1 exit), XSETBV of XCR0 = x87|SSE (1 exit, 55), read back
     with XGETBV (no exit), XSETBV of 0 (1 exit, #GP(0) injected and handled by traps.S),
     CR4.OSXSAVE cleared (1 exit);
   - WBINVD (1 exit, 54), PAUSE twice (2 exits, 40);
   - RDTSC exiting on (hypercall 4: 1 exit), RDTSC twice (2 exits, 16), off again (1
     exit), RDTSC (no exit): the three values increase;
   - yield (hypercall 3: 1 exit).
   21 exits with XSAVE and MSR bitmaps. */
static int scenarioSystem(uint64_t Vcpu) {
  volatile uint64_t Probe = Vcpu; /* on this vCPU's stack */
  int Bad = 0;
  __asm__ volatile("invlpg (%0)" : : "r"(&Probe) : "memory");
  __asm__ volatile("invlpg (%0)" : : "r"(HV_UNMAPPED) : "memory");
  Bad |= Probe != Vcpu;

  uint64_t Dr0 = 0x1000 + Vcpu * 8, Seen;
  __asm__ volatile("mov %0, %%dr0" : : "r"(Dr0));
  __asm__ volatile("mov %%dr0, %0" : "=r"(Seen));
  Bad |= Seen != Dr0;
  __asm__ volatile("mov %%dr7, %0" : "=r"(Seen));
  Bad |= Seen != 0x400;
  __asm__ volatile("mov %0, %%dr6" : : "r"(0x4000ull));
  __asm__ volatile("mov %%dr6, %0" : "=r"(Seen));
  Bad |= Seen != 0xffff4ff0ull;

  /* Entry 2 of the PAT made write-combining (1), then the old value back. */
  uint64_t Pat = 0x0007010600070406ull;
  gwrmsr(MSR_IA32_PAT, Pat);
  Bad |= grdmsr(MSR_IA32_PAT) != Pat;
  gwrmsr(MSR_IA32_PAT, 0x0007040600070406ull);

  uint32_t A, B, C, D;
  gcpuid(1, &A, &B, &C, &D);
  if (C & (1u << 26)) {
    uint64_t Cr4;
    __asm__ volatile("mov %%cr4, %0" : "=r"(Cr4));
    __asm__ volatile("mov %0, %%cr4" : : "r"(Cr4 | CR4_OSXSAVE));
    __asm__ volatile("mov %%cr4, %0" : "=r"(Seen));
    Bad |= !(Seen & CR4_OSXSAVE);
    gcpuid(1, &A, &B, &C, &D);
    Bad |= !(C & (1u << 27));
    __asm__ volatile("xsetbv" : : "c"(0), "a"(3), "d"(0));
    uint32_t Lo, Hi;
    __asm__ volatile("xgetbv" : "=a"(Lo), "=d"(Hi) : "c"(0));
    Bad |= Lo != 3 || Hi != 0;
    register uint64_t Count __asm__("r14") = 0;
    register uint64_t Error __asm__("r13") = ~0ull;
    __asm__ volatile("leaq 1f(%%rip), %%r15\n\txsetbv\n1:"
                     : "+r"(Count), "+r"(Error)
                     : "c"(0), "a"(0), "d"(0)
                     : "r15", "memory");
    Bad |= Count != 1 || Error != 0;
    __asm__ volatile("mov %0, %%cr4" : : "r"(Cr4 & ~CR4_OSXSAVE));
  }

  __asm__ volatile("wbinvd" : : : "memory");
  __asm__ volatile("pause");
  __asm__ volatile("pause");

  Bad |= hypercall(HYPERCALL_RDTSC_EXITING, 1) != 0;
  uint64_t T0 = grdtsc(), T1 = grdtsc();
  Bad |= hypercall(HYPERCALL_RDTSC_EXITING, 0) != 0;
  uint64_t T2 = grdtsc();
  Bad |= !(T0 < T1 && T1 < T2);
  Bad |= hypercall(HYPERCALL_YIELD, 0) != 0;
  return Bad;
}

/* irq (with the system exits; IF is 0 outside the asm blocks, so the handlers' R12 is
   only live inside them):
   - the virtual timer armed for 3 interrupts 20,000 cycles apart (hypercall 5: 1 exit);
     the vCPU waits for each with STI; HLT (12, blocking in the HLT activity state) and
     takes it when the host's APIC timer exits (1) and the core injects it: 6 exits;
   - armed for 1 interrupt 3,000 cycles ahead (1 exit); it comes (1) during a loop run
     with IF = 0, so the core opens the interrupt window; STI; NOP: the window's exit (7)
     comes after the NOP, and the interrupt is taken: 2 exits;
   - a virtual NMI (hypercall 6: 1 exit) through the NMI window (8: 1 exit), taken right
     after the VMCALL.
   12 exits, plus the time slices that end during them. */
static int scenarioIrq(void) {
  register uint64_t Events __asm__("r12") = 0;
  int Bad = hypercall(HYPERCALL_START_VIRQS, (3ull << 32) | 20000) != 0;
  __asm__ volatile("1:\tcli\n\tcmpq $3, %%r12\n\tjae 2f\n\tsti\n\thlt\n\tjmp 1b\n2:"
                   : "+r"(Events)
                   :
                   : "memory", "cc");
  Bad |= hypercall(HYPERCALL_START_VIRQS, (1ull << 32) | 3000) != 0;
  __asm__ volatile("movl $20000, %%ecx\n1:\tdecl %%ecx\n\tjnz 1b\n\tsti\n\tnop\n\tcli"
                   : "+r"(Events)
                   :
                   : "rcx", "memory", "cc");
  uint64_t R;
  __asm__ volatile("vmcall\n\tnop" : "=a"(R), "+r"(Events) : "a"(HYPERCALL_NMI), "b"(0)
                   : "memory");
  return Bad | (R != 0) | (Events != 0x10004);
}

/* apicv (with APIC virtualization: vmx/exit_apic.c), the guest's local APIC at
   0xfee00000 is the APIC-access page:
   - reads its ID (the vCPU number) and version (0x50014) and writes and reads back its
     TPR: all virtualized, no exit;
   - sends itself vector 0x31 through ICR low (shorthand self): self-IPI virtualization;
     STI; NOP: the virtual interrupt is delivered, its handler's EOI is virtualized;
   - writes the LVT timer register (masked): done to the virtual-APIC page, then the
     APIC-write exit (56), and reads it back;
   - hypercall 8 (1 exit): the core posts vector 0x32 to the next vCPU (itself on one CPU)
     and notifies its processor, which processes the posted interrupt in non-root
     operation; it waits with STI; NOP; CLI for the one posted to it, whose EOI exits
     (virtualized EOI, 45).
   3 exits, plus the time slices that end while it waits. */
#define APIC_REG(Offset) ((volatile uint32_t *)(uintptr_t)(0xfee00000ull + (Offset)))
static int scenarioApicv(uint64_t Vcpu) {
  register uint64_t Events __asm__("r12") = 0;
  int Bad = *APIC_REG(0x20) != (uint32_t)(Vcpu << 24);
  Bad |= *APIC_REG(0x30) != 0x00050014u;
  *APIC_REG(0x80) = 0x20;
  Bad |= *APIC_REG(0x80) != 0x20;
  *APIC_REG(0x80) = 0;
  /* ICR low: vector, fixed delivery, destination shorthand self (bits 19:18 = 01). */
  *APIC_REG(0x300) = (1u << 18) | HV_APICV_SELF;
  __asm__ volatile("sti\n\tnop\n\tcli" : "+r"(Events) : : "memory");
  /* The previous vCPU's post may have come already: it is taken in the same window. */
  Bad |= (Events & 0xff) != 1;
  *APIC_REG(0x320) = 0x10000;
  Bad |= *APIC_REG(0x320) != 0x10000;
  Bad |= hypercall(HYPERCALL_POST, HV_APICV_POSTED) != 0;
  __asm__ volatile("1:\tcmpq $0x101, %%r12\n\tje 2f\n\tsti\n\tnop\n\tcli\n\tjmp 1b\n2:"
                   : "+r"(Events)
                   :
                   : "memory", "cc");
  return Bad | (Events != 0x101);
}

/* triple-fault: an IDT with limit 0, then UD2: #UD cannot be delivered (#GP), nor can
   the #GP (#DF), nor the #DF: a triple fault (SDM Vol. 3A, "Interrupt 8—Double Fault
   Exception"), which exits (reason 2). The exception bitmap is 0 in this scenario, so
   none of the three exits before. Does not return. */
static void scenarioTripleFault(void) {
  static const struct __attribute__((packed)) {
    uint16_t Limit;
    uint64_t Base;
  } Empty = {0, 0};
  __asm__ volatile("lidt %0\n\tud2" : : "m"(Empty));
}

void hvGuest(uint64_t Mask, uint64_t Vcpu) {
  uint64_t Status = 0;
  if (Mask & HV_SC_TRIPLE_FAULT)
    scenarioTripleFault();
  if ((Mask & HV_SC_IO) && scenarioIo(Vcpu))
    Status |= HV_SC_IO;
  if ((Mask & HV_SC_CPUID) && scenarioCpuid())
    Status |= HV_SC_CPUID;
  if ((Mask & HV_SC_MSR) && scenarioMsr(Vcpu))
    Status |= HV_SC_MSR;
  if ((Mask & HV_SC_CR) && scenarioCr(Vcpu))
    Status |= HV_SC_CR;
  if ((Mask & HV_SC_HLT_TIMER) && scenarioHltTimer(Vcpu))
    Status |= HV_SC_HLT_TIMER;
  if ((Mask & HV_SC_EPT) && scenarioEpt(Vcpu))
    Status |= HV_SC_EPT;
  if ((Mask & HV_SC_EXCEPTIONS) && scenarioExceptions())
    Status |= HV_SC_EXCEPTIONS;
  if ((Mask & HV_SC_MMIO) && scenarioMmio(Vcpu))
    Status |= HV_SC_MMIO;
  if ((Mask & HV_SC_SYSTEM) && scenarioSystem(Vcpu))
    Status |= HV_SC_SYSTEM;
  if ((Mask & HV_SC_IRQ) && scenarioIrq())
    Status |= HV_SC_IRQ;
  if ((Mask & HV_SC_APICV) && scenarioApicv(Vcpu))
    Status |= HV_SC_APICV;
  hypercall(HYPERCALL_EXIT, Status);
  for (;;)
    __asm__ volatile("hlt");
}
