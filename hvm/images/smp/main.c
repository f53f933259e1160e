/* smp: several processors on one machine. The BSP finds the CPUs in the ACPI MADT,
   starts each AP with INIT-SIPI-SIPI (SDM Vol. 3A, MP Initialization > "Typical AP
   Initialization Sequence" style, without the delays vmxsim does not need), then every
   CPU increments a shared counter under a spin-lock SMP_ITERS times, takes
   SMP_TICKS one-shot LAPIC timer interrupts while halted, and reports under a UART lock.
   The BSP checks the totals and exits 0 when they are right. */
#include <stdint.h>

#include "boot/boot.h"
#include "lib/smp.h"
#include "lib/exit.h"
#include "lib/idt.h"
#include "lib/printf.h"
#include "lib/string.h"

#define SMP_ITERS 1000
#define SMP_TICKS 3
#define TIMER_VECTOR 0x40
#define SPURIOUS_VECTOR 0xff
extern void timerStub(void), spuriousStub(void);

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
static volatile uint32_t CpusDone;

static struct IdtGate64 Idt[256] __attribute__((aligned(16)));
static struct __attribute__((packed)) {
  uint16_t Limit;
  uint64_t Base;
} IdtPtr;

static void setGate(unsigned V, void (*Fn)(void)) {
  uint64_t A = (uint64_t)(uintptr_t)Fn;
  Idt[V] = idtInterruptGate(A, BOOT_CS64);
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
  smpApStarted();
  work();
  for (;;)
    __asm__ volatile("cli; hlt");
}

void kmain(uint32_t Magic, uint32_t MbiAddr) {
  (void)Magic;
  (void)MbiAddr;
  uint8_t Ids[SMP_MAX_CPUS];
  unsigned N = smpFindCpus(Ids);
  printf("smp: %u CPUs in the MADT\n", N);
  if (N == 0)
    hvmExit(HVM_EXIT_FAILURE);
  idtSetup();
  __asm__ volatile("lidt %0" : : "m"(IdtPtr));
  *lapic(LAPIC_SVR) = 0x100 | SPURIOUS_VECTOR;

  smpStartAps(Ids, N, apEntry);
  work();
  while (CpusDone != N)
    __builtin_ia32_pause();
  uint64_t Expected = (uint64_t)N * SMP_ITERS;
  printf("smp: counter %llu, expected %llu\n", (unsigned long long)Counter,
         (unsigned long long)Expected);
  hvmExit(Counter == Expected ? HVM_EXIT_SUCCESS : HVM_EXIT_FAILURE);
}
