/* loop: a fixed amount of guest work for the speed benchmarks. Takes "iters=N" from the
   Multiboot command line (default 100000000), runs loopRun (loop.S, 5N + 7
   instructions), prints the result and exits with 0. With "out=1" it runs loopOutRun
   instead: the same count, one body instruction a port write (the port-write loop of
   scripts/bench-peers.sh); with "mem=1" loopMemRun: 5N + 8 instructions, a load and a
   store in each iteration (docs/PERFORMANCE.md's memory-access profile). With "touch=M"
   it writes every quadword of M MiB of RAM from 64 MiB up and reads them back instead
   (the resident-memory benchmark, benchmarks/memory_bench.cpp: a large guest that
   touches little must cost the host little); M MiB above 64 MiB must be RAM. */
#include <stdint.h>

#include "boot/boot.h"
#include "lib/exit.h"
#include "lib/multiboot.h"
#include "lib/printf.h"

#define LOOP_DEFAULT_ITERS 100000000ull

uint64_t loopRun(uint64_t Iters);
uint64_t loopOutRun(uint64_t Iters);
uint64_t loopMemRun(uint64_t Iters);

#define TOUCH_BASE (64ull << 20)

/* Writes a pattern to every quadword of MiB mebibytes from TOUCH_BASE, then returns the
   sum of what it reads back: MiB << 17 quadwords each way. */
static uint64_t touchRun(uint64_t MiB) {
  volatile uint64_t *P = (volatile uint64_t *)(uintptr_t)TOUCH_BASE;
  const uint64_t N = MiB << 17;
  for (uint64_t I = 0; I < N; ++I)
    P[I] = I * 0x9e3779b97f4a7c15ull;
  uint64_t Sum = 0;
  for (uint64_t I = 0; I < N; ++I)
    Sum += P[I] ^ I;
  return Sum;
}

void kmain(uint32_t Magic, uint32_t MbiAddr) {
  (void)Magic;
  const char *Cmdline = multibootCmdline(multibootInfo(MbiAddr));
  const struct MultibootInfo *Mbi = multibootInfo(MbiAddr);
  uint64_t Iters = LOOP_DEFAULT_ITERS, Out = 0, Mem = 0, Touch = 0;
  if (cmdlineGetU64(Cmdline, "iters", &Iters) < 0 || cmdlineGetU64(Cmdline, "out", &Out) < 0 ||
      cmdlineGetU64(Cmdline, "mem", &Mem) < 0 || cmdlineGetU64(Cmdline, "touch", &Touch) < 0 ||
      Out + Mem > 1 || (Touch && Out + Mem)) {
    printf("loop: bad iters=, out=, mem= or touch= in command line \"%s\"\n", Cmdline);
    hvmExit(HVM_EXIT_FAILURE);
  }
  if (Touch) {
    /* mem_upper: KiB of RAM from 1 MiB up to the first hole (Multiboot 0.6.96, 3.3). */
    const uint64_t RamEnd =
        (Mbi->flags & MULTIBOOT_INFO_MEMORY) ? (1ull << 20) + ((uint64_t)Mbi->mem_upper << 10) : 0;
    if (Touch > (1ull << 20) || TOUCH_BASE + (Touch << 20) > RamEnd) {
      printf("loop: touch=%llu MiB from 64 MiB passes the end of RAM (0x%llx)\n",
             (unsigned long long)Touch, (unsigned long long)RamEnd);
      hvmExit(HVM_EXIT_FAILURE);
    }
    printf("loop: start touch=%llu MiB\n", (unsigned long long)Touch);
    printf("loop: done touch=%llu result=0x%016llx\n", (unsigned long long)Touch,
           (unsigned long long)touchRun(Touch));
    hvmExit(HVM_EXIT_SUCCESS);
  }
  printf("loop: start iters=%llu%s\n", (unsigned long long)Iters,
         Out ? " out=1" : Mem ? " mem=1" : "");
  uint64_t Result = Out ? loopOutRun(Iters) : Mem ? loopMemRun(Iters) : loopRun(Iters);
  printf("loop: done iters=%llu result=0x%016llx\n", (unsigned long long)Iters,
         (unsigned long long)Result);
  if (Mem)
    printf("loop: loop instructions=%llu (5*iters+8)\n", (unsigned long long)(5 * Iters + 8));
  else
    printf("loop: loop instructions=%llu (5*iters+7)\n", (unsigned long long)(5 * Iters + 7));
  hvmExit(HVM_EXIT_SUCCESS);
}
