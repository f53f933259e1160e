/* loop: a fixed amount of guest work for the speed benchmarks. Takes "iters=N" from the
   Multiboot command line (default 100000000), runs loopRun (loop.S, 5N + 7
   instructions), prints the result and exits with 0. */
#include <stdint.h>

#include "boot/boot.h"
#include "lib/exit.h"
#include "lib/multiboot.h"
#include "lib/printf.h"

#define LOOP_DEFAULT_ITERS 100000000ull

uint64_t loopRun(uint64_t Iters);

void kmain(uint32_t Magic, uint32_t MbiAddr) {
  (void)Magic;
  const char *Cmdline = multibootCmdline(multibootInfo(MbiAddr));
  uint64_t Iters = LOOP_DEFAULT_ITERS;
  if (cmdlineGetU64(Cmdline, "iters", &Iters) < 0) {
    printf("loop: bad iters= in command line \"%s\"\n", Cmdline);
    hvmExit(HVM_EXIT_FAILURE);
  }
  printf("loop: start iters=%llu\n", (unsigned long long)Iters);
  uint64_t Result = loopRun(Iters);
  printf("loop: done iters=%llu result=0x%016llx\n", (unsigned long long)Iters,
         (unsigned long long)Result);
  printf("loop: loop instructions=%llu (5*iters+7)\n",
         (unsigned long long)(5 * Iters + 7));
  hvmExit(HVM_EXIT_SUCCESS);
}
