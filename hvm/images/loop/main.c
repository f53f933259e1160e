/* loop: a fixed amount of guest work for the speed benchmarks. Takes "iters=N" from the
   Multiboot command line (default 100000000), runs loopRun (loop.S, 5N + 7
   instructions), prints the result and exits with 0. With "out=1" it runs loopOutRun
   instead: the same count, one body instruction a port write (the port-write loop of
   scripts/bench-peers.sh); with "mem=1" loopMemRun: 5N + 8 instructions, a load and a
   store in each iteration (docs/PERFORMANCE.md's memory-access profile). */
#include <stdint.h>

#include "boot/boot.h"
#include "lib/exit.h"
#include "lib/multiboot.h"
#include "lib/printf.h"

#define LOOP_DEFAULT_ITERS 100000000ull

uint64_t loopRun(uint64_t Iters);
uint64_t loopOutRun(uint64_t Iters);
uint64_t loopMemRun(uint64_t Iters);

void kmain(uint32_t Magic, uint32_t MbiAddr) {
  (void)Magic;
  const char *Cmdline = multibootCmdline(multibootInfo(MbiAddr));
  uint64_t Iters = LOOP_DEFAULT_ITERS, Out = 0, Mem = 0;
  if (cmdlineGetU64(Cmdline, "iters", &Iters) < 0 || cmdlineGetU64(Cmdline, "out", &Out) < 0 ||
      cmdlineGetU64(Cmdline, "mem", &Mem) < 0 || Out + Mem > 1) {
    printf("loop: bad iters=, out= or mem= in command line \"%s\"\n", Cmdline);
    hvmExit(HVM_EXIT_FAILURE);
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
