/* smp: several processors on one machine. The BSP finds the CPUs in the ACPI MADT,
   starts each AP with INIT-SIPI-SIPI (SDM Vol. 3A, MP Initialization > "Typical AP
   Initialization Sequence" style, without the delays vmxsim does not need), then every
   CPU increments a shared counter under a spin-lock SMP_ITERS times, takes
   SMP_TICKS one-shot LAPIC timer interrupts while halted, and reports under a UART lock.
   The BSP checks the totals and exits 0 when they are right. */
#include <stdint.h>

#include "boot/boot.h"
#include "lib/exit.h"
#include "lib/printf.h"
#include "lib/string.h"

#define SMP_MAX_CPUS 64
#define SMP_ITERS 1000
#define SMP_TICKS 3
#define TIMER_VECTOR 0x40
#define SPURIOUS_VECTOR 0xff
#define AP_STACK_BYTES 8192
#define TRAMP_ADDR 0x8000

/* SDM Vol. 3A, Local APIC Register Address Map. */
#define LAPIC_BASE 0xfee00000ull
#define LAPIC_ID 0x20
#define LAPIC_EOI 0xb0
#define LAPIC_SVR 0xf0
#define LAPIC_ICR_LO 0x300
#define LAPIC_ICR_HI 0x310
#define LAPIC_LVT_TIMER 0x320
#define LAPIC_TIMER_INIT 0x380
#define LAPIC_TIMER_DIV 0x3e0

extern const uint8_t smpTrampoline[], smpTrampolineEnd[], smpTrampParams[];
extern void timerStub(void), spuriousStub(void);

static volatile uint32_t *lapic(uint32_t Reg) {
  return (volatile uint32_t *)(uintptr_t)(LAPIC_BASE + Reg);
}
static uint32_t apicId(void) { return *lapic(LAPIC_ID) >> 24; }

/* Test-and-test-and-set lock with XCHG (SDM Vol. 3A, Locked Atomic Operations). */
static void lock(volatile uint32_t *L) {
  while (__atomic_exchange_n(L, 1, __ATOMIC_ACQUIRE))
    while (*L)
      __builtin_ia32_pause();
}
static void unlock(volatile uint32_t *L) { __atomic_store_n(L, 0, __ATOMIC_RELEASE); }

static volatile uint32_t CounterLock, UartLock;
static volatile uint64_t Counter;
static volatile uint32_t Ticks[SMP_MAX_CPUS];
static volatile uint32_t ApsStarted, CpusDone;
static uint8_t ApStacks[SMP_MAX_CPUS][AP_STACK_BYTES] __attribute__((aligned(16)));

struct IdtGate {
  uint16_t OffsetLow, Selector;
  uint8_t Ist, TypeAttr;
  uint16_t OffsetMid;
  uint32_t OffsetHigh, Reserved;
};
static struct IdtGate Idt[256] __attribute__((aligned(16)));
static struct __attribute__((packed)) {
  uint16_t Limit;
  uint64_t Base;
} IdtPtr;

static void setGate(unsigned V, void (*Fn)(void)) {
  uint64_t A = (uint64_t)(uintptr_t)Fn;
  Idt[V] = (struct IdtGate){(uint16_t)A, BOOT_CS64, 0, 0x8e, (uint16_t)(A >> 16),
                            (uint32_t)(A >> 32), 0};
}

/* A 256-entry IDT: the runtime's 32 exception gates plus the timer and spurious ones. */
static void idtSetup(void) {
  struct __attribute__((packed)) {
    uint16_t Limit;
    uint64_t Base;
  } Old;
  __asm__ volatile("sidt %0" : "=m"(Old));
  memcpy(Idt, (const void *)(uintptr_t)Old.Base, Old.Limit + 1u);
  setGate(TIMER_VECTOR, timerStub);
  setGate(SPURIOUS_VECTOR, spuriousStub);
  IdtPtr.Limit = sizeof(Idt) - 1;
  IdtPtr.Base = (uint64_t)(uintptr_t)Idt;
}

void timerInterrupt(void) {
  ++Ticks[apicId()];
  *lapic(LAPIC_EOI) = 0;
}

/* Finds the processors in the MADT through the ACPI 1.0 RSDP in 0xe0000-0xfffff (ACPI
   6.5, "Finding the RSDP on IA-PC Systems"). Returns the APIC IDs of enabled CPUs. */
static unsigned findCpus(uint8_t *Ids) {
  const uint8_t *Rsdp = 0;
  for (uintptr_t A = 0xe0000; A < 0x100000; A += 16)
    if (memcmp((const void *)A, "RSD PTR ", 8) == 0) {
      Rsdp = (const uint8_t *)A;
      break;
    }
  if (!Rsdp)
    return 0;
  const uint8_t *Rsdt = (const uint8_t *)(uintptr_t)*(const uint32_t *)(Rsdp + 16);
  uint32_t RsdtLen = *(const uint32_t *)(Rsdt + 4);
  unsigned N = 0;
  for (uint32_t E = 36; E + 4 <= RsdtLen; E += 4) {
    const uint8_t *T = (const uint8_t *)(uintptr_t)*(const uint32_t *)(Rsdt + E);
    if (memcmp(T, "APIC", 4) != 0)
      continue;
    uint32_t Len = *(const uint32_t *)(T + 4);
    for (uint32_t Off = 44; Off + 2 <= Len && T[Off + 1]; Off += T[Off + 1])
      if (T[Off] == 0 && (T[Off + 4] & 1) && N < SMP_MAX_CPUS)
        Ids[N++] = T[Off + 3];
  }
  return N;
}

static void sendIpi(uint8_t Dest, uint32_t Lo) {
  *lapic(LAPIC_ICR_HI) = (uint32_t)Dest << 24;
  *lapic(LAPIC_ICR_LO) = Lo;
}

/* Each CPU's share: the locked counter, then SMP_TICKS timer interrupts, then a report. */
static void work(void) {
  uint32_t Id = apicId();
  for (unsigned I = 0; I < SMP_ITERS; ++I) {
    lock(&CounterLock);
    Counter = Counter + 1;
    unlock(&CounterLock);
  }
  *lapic(LAPIC_SVR) = 0x100 | SPURIOUS_VECTOR;
  *lapic(LAPIC_TIMER_DIV) = 0xb; /* divide by 1 */
  *lapic(LAPIC_LVT_TIMER) = TIMER_VECTOR; /* one-shot, unmasked */
  while (Ticks[Id] < SMP_TICKS) {
    uint32_t Seen = Ticks[Id];
    *lapic(LAPIC_TIMER_INIT) = 2000 + 100 * Id;
    while (Ticks[Id] == Seen)
      __asm__ volatile("sti; hlt; cli");
  }
  lock(&UartLock);
  printf("smp: cpu %u counted, %u timer ticks\n", Id, Ticks[Id]);
  unlock(&UartLock);
  __atomic_add_fetch(&CpusDone, 1, __ATOMIC_SEQ_CST);
}

void apEntry(void) {
  __asm__ volatile("lidt %0" : : "m"(IdtPtr));
  __atomic_add_fetch(&ApsStarted, 1, __ATOMIC_SEQ_CST);
  work();
  for (;;)
    __asm__ volatile("cli; hlt");
}

void kmain(uint32_t Magic, uint32_t MbiAddr) {
  (void)Magic;
  (void)MbiAddr;
  uint8_t Ids[SMP_MAX_CPUS];
  unsigned N = findCpus(Ids);
  printf("smp: %u CPUs in the MADT\n", N);
  if (N == 0)
    hvmExit(HVM_EXIT_FAILURE);
  idtSetup();
  __asm__ volatile("lidt %0" : : "m"(IdtPtr));
  *lapic(LAPIC_SVR) = 0x100 | SPURIOUS_VECTOR;

  /* The trampoline and its parameters: CR3, EFER and the 64-bit entry are the BSP's. */
  uint32_t Size = (uint32_t)(smpTrampolineEnd - smpTrampoline);
  memcpy((void *)TRAMP_ADDR, smpTrampoline, Size);
  volatile uint64_t *P = (volatile uint64_t *)(TRAMP_ADDR + (smpTrampParams - smpTrampoline));
  uint64_t Cr3, EferLo, EferHi;
  __asm__ volatile("mov %%cr3, %0" : "=r"(Cr3));
  __asm__ volatile("rdmsr" : "=a"(EferLo), "=d"(EferHi) : "c"(0xC0000080));
  P[0] = Cr3;
  P[1] = EferLo & ~(1ull << 10); /* LMA is set by the processor */
  P[3] = (uint64_t)(uintptr_t)apEntry;

  uint32_t Self = apicId();
  unsigned Started = 0;
  for (unsigned I = 0; I < N; ++I) {
    if (Ids[I] == Self)
      continue;
    P[2] = (uint64_t)(uintptr_t)&ApStacks[Ids[I]][AP_STACK_BYTES];
    sendIpi(Ids[I], 0x4500);                   /* INIT, level assert */
    sendIpi(Ids[I], 0x8500);                   /* INIT level de-assert */
    sendIpi(Ids[I], 0x4600 | (TRAMP_ADDR >> 12)); /* start-up, twice */
    sendIpi(Ids[I], 0x4600 | (TRAMP_ADDR >> 12));
    ++Started;
    while (ApsStarted != Started) /* one AP at a time: they share the parameters */
      __builtin_ia32_pause();
  }
  work();
  while (CpusDone != N)
    __builtin_ia32_pause();
  uint64_t Expected = (uint64_t)N * SMP_ITERS;
  printf("smp: counter %llu, expected %llu\n", (unsigned long long)Counter,
         (unsigned long long)Expected);
  hvmExit(Counter == Expected ? HVM_EXIT_SUCCESS : HVM_EXIT_FAILURE);
}
