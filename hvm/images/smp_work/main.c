/* smp_work: the same guest work on every processor, for the scheduling-overhead
   benchmark (benchmarks/smp_bench.cpp). The BSP finds the CPUs in the ACPI MADT, starts
   each AP with INIT-SIPI-SIPI (the smp image's trampoline), then every CPU runs loopRun
   (images/loop/loop.S: 5 * iters + 7 instructions) with "iters=N" from the command line,
   exactly the work of one run of the loop image. The BSP waits for all and exits 0. */
#include <stdint.h>

#include "boot/boot.h"
#include "lib/exit.h"
#include "lib/multiboot.h"
#include "lib/printf.h"
#include "lib/string.h"

#define WORK_MAX_CPUS 64
#define AP_STACK_BYTES 8192
#define TRAMP_ADDR 0x8000
#define LAPIC_BASE 0xfee00000ull
#define LAPIC_ID 0x20
#define LAPIC_ICR_LO 0x300
#define LAPIC_ICR_HI 0x310

extern const uint8_t smpTrampoline[], smpTrampolineEnd[], smpTrampParams[];
uint64_t loopRun(uint64_t Iters);

static volatile uint32_t ApsStarted, CpusDone;
static volatile uint64_t Iters = 100000000ull;
static volatile uint64_t Results[WORK_MAX_CPUS];
static uint8_t ApStacks[WORK_MAX_CPUS][AP_STACK_BYTES] __attribute__((aligned(16)));

static volatile uint32_t *lapic(uint32_t Reg) {
  return (volatile uint32_t *)(uintptr_t)(LAPIC_BASE + Reg);
}
static uint32_t apicId(void) { return *lapic(LAPIC_ID) >> 24; }

/* The trampoline's timer stub calls this; this image takes no interrupts. */
void timerInterrupt(void) {}

/* The MADT's enabled processors (ACPI 6.5, "Finding the RSDP on IA-PC Systems"). */
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
      if (T[Off] == 0 && (T[Off + 4] & 1) && N < WORK_MAX_CPUS)
        Ids[N++] = T[Off + 3];
  }
  return N;
}

static void sendIpi(uint8_t Dest, uint32_t Lo) {
  *lapic(LAPIC_ICR_HI) = (uint32_t)Dest << 24;
  *lapic(LAPIC_ICR_LO) = Lo;
}

static void work(void) {
  Results[apicId() % WORK_MAX_CPUS] = loopRun(Iters);
  __atomic_add_fetch(&CpusDone, 1, __ATOMIC_SEQ_CST);
}

void apEntry(void) {
  __atomic_add_fetch(&ApsStarted, 1, __ATOMIC_SEQ_CST);
  work();
  for (;;)
    __asm__ volatile("cli; hlt");
}

void kmain(uint32_t Magic, uint32_t MbiAddr) {
  (void)Magic;
  const char *Cmdline = multibootCmdline(multibootInfo(MbiAddr));
  uint64_t N64 = Iters;
  if (cmdlineGetU64(Cmdline, "iters", &N64) < 0) {
    printf("smp_work: bad iters= in command line \"%s\"\n", Cmdline);
    hvmExit(HVM_EXIT_FAILURE);
  }
  Iters = N64;
  uint8_t Ids[WORK_MAX_CPUS];
  unsigned N = findCpus(Ids);
  if (N == 0)
    hvmExit(HVM_EXIT_FAILURE);

  uint32_t Size = (uint32_t)(smpTrampolineEnd - smpTrampoline);
  memcpy((void *)TRAMP_ADDR, smpTrampoline, Size);
  volatile uint64_t *P = (volatile uint64_t *)(TRAMP_ADDR + (smpTrampParams - smpTrampoline));
  uint64_t Cr3, EferLo, EferHi;
  __asm__ volatile("mov %%cr3, %0" : "=r"(Cr3));
  __asm__ volatile("rdmsr" : "=a"(EferLo), "=d"(EferHi) : "c"(0xC0000080));
  P[0] = Cr3;
  P[1] = EferLo & ~(1ull << 10);
  P[3] = (uint64_t)(uintptr_t)apEntry;

  uint32_t Self = apicId();
  unsigned Started = 0;
  for (unsigned I = 0; I < N; ++I) {
    if (Ids[I] == Self)
      continue;
    P[2] = (uint64_t)(uintptr_t)&ApStacks[Ids[I]][AP_STACK_BYTES];
    sendIpi(Ids[I], 0x4500);
    sendIpi(Ids[I], 0x8500);
    sendIpi(Ids[I], 0x4600 | (TRAMP_ADDR >> 12));
    sendIpi(Ids[I], 0x4600 | (TRAMP_ADDR >> 12));
    ++Started;
    while (ApsStarted != Started)
      __builtin_ia32_pause();
  }
  work();
  while (CpusDone != N)
    __asm__ volatile("pause");
  for (unsigned I = 1; I < N; ++I)
    if (Results[Ids[I] % WORK_MAX_CPUS] != Results[Ids[0] % WORK_MAX_CPUS])
      hvmExit(HVM_EXIT_FAILURE);
  printf("smp_work: %u CPUs x iters=%llu done\n", N, (unsigned long long)Iters);
  hvmExit(HVM_EXIT_SUCCESS);
}
