/* smp_work: the same guest work on every processor, for the scheduling-overhead
   benchmark (benchmarks/smp_bench.cpp). The BSP finds the CPUs in the ACPI MADT, starts
   each AP with INIT-SIPI-SIPI (the smp image's trampoline), then every CPU runs loopRun
   (images/loop/loop.S: 5 * iters + 7 instructions) with "iters=N" from the command line,
   exactly the work of one run of the loop image. The BSP waits for all and exits 0. */
#include <stdint.h>

#include "boot/boot.h"
#include "lib/smp.h"
#include "lib/exit.h"
#include "lib/multiboot.h"
#include "lib/printf.h"
#include "lib/string.h"

#define WORK_MAX_CPUS SMP_MAX_CPUS

uint64_t loopRun(uint64_t Iters);

static volatile uint32_t CpusDone;
static volatile uint64_t Iters = 100000000ull;
static volatile uint64_t Results[WORK_MAX_CPUS];

/* The trampoline's timer stub calls this; this image takes no interrupts. */
void timerInterrupt(void) {}

static void work(void) {
  Results[apicId() % WORK_MAX_CPUS] = loopRun(Iters);
  __atomic_add_fetch(&CpusDone, 1, __ATOMIC_SEQ_CST);
}

void apEntry(void) {
  smpApStarted();
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
  unsigned N = smpFindCpus(Ids);
  if (N == 0)
    hvmExit(HVM_EXIT_FAILURE);

  smpStartAps(Ids, N, apEntry);
  work();
  while (CpusDone != N)
    __asm__ volatile("pause");
  for (unsigned I = 1; I < N; ++I)
    if (Results[Ids[I] % WORK_MAX_CPUS] != Results[Ids[0] % WORK_MAX_CPUS])
      hvmExit(HVM_EXIT_FAILURE);
  printf("smp_work: %u CPUs x iters=%llu done\n", N, (unsigned long long)Iters);
  hvmExit(HVM_EXIT_SUCCESS);
}
