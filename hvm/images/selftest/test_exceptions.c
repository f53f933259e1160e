/* Exception delivery and IRETQ: each case arms the handler for one vector, raises it,
   and checks the vector, error code, saved RIP (fault: the instruction; trap: the one
   after) and CR2. SDM Vol. 3A, Exception and Interrupt Reference. */
#include "boot/exceptions.h"
#include "images/selftest/selftest.h"

#define ARM(Vec)                                                                 \
  do {                                                                           \
    ExcRecovery.Vector = (Vec);                                                  \
    ExcRecovery.SeenVector = ~0ull;                                              \
    ExcRecovery.Armed = 1;                                                       \
  } while (0)

/* Runs Insn with RCX = Arg; Start receives the address of Insn. Resumes after it. */
#define RAISE(Insn, Arg, Start)                                                  \
  __asm__ volatile("leaq 1f(%%rip), %%rax\n\t"                                   \
                   "movq %%rax, %0\n\t"                                          \
                   "leaq 2f(%%rip), %%rax\n\t"                                   \
                   "movq %%rax, %1\n\t"                                          \
                   "xorl %%edx, %%edx\n"                                         \
                   "2: " Insn "\n"                                               \
                   "1:"                                                          \
                   : "=m"(ExcRecovery.ResumeRip), "=m"(Start)                    \
                   : "c"(Arg)                                                    \
                   : "rax", "rdx", "memory", "cc")

static enum TestResult check(unsigned Vec, uint64_t Err, uint64_t Rip) {
  EXPECT_EQ(ExcRecovery.Armed, 0);
  EXPECT_EQ(ExcRecovery.SeenVector, Vec);
  EXPECT_EQ(ExcRecovery.SeenErrorCode, Err);
  EXPECT_EQ(ExcRecovery.SeenRip, Rip);
  return TestPass;
}

#define CHECK(Vec, Err, Rip)                                                     \
  do {                                                                           \
    enum TestResult R_ = check(Vec, Err, Rip);                                   \
    if (R_ != TestPass)                                                          \
      return R_;                                                                 \
  } while (0)

enum TestResult test_exceptions(void) {
  uint64_t At;
  ARM(6); /* #UD, fault */
  RAISE("ud2", 0ull, At);
  CHECK(6, 0, At);

  ARM(3); /* #BP, trap: RIP after the one-byte INT3 */
  RAISE("int3", 0ull, At);
  CHECK(3, 0, At + 1);

  ARM(0); /* #DE: RDX:RAX / 0 */
  RAISE("divq %%rcx", 0ull, At);
  CHECK(0, 0, At);

  ARM(14); /* #PF, read of an unmapped page (PML4[0] -> PDPT[4] not present) */
  RAISE("movq (%%rcx), %%rax", 0x100000000ull, At);
  CHECK(14, 0, At);
  EXPECT_EQ(ExcRecovery.SeenCr2, 0x100000000ull);

  ARM(14); /* #PF, write: error code W/R = 1 */
  RAISE("movb %%dl, 5(%%rcx)", 0x100000000ull, At);
  CHECK(14, 2, At);
  EXPECT_EQ(ExcRecovery.SeenCr2, 0x100000005ull);

  ARM(13); /* #GP(0), non-canonical address */
  RAISE("movq (%%rcx), %%rax", 0x8000000000000000ull, At);
  CHECK(13, 0, At);
  return TestPass;
}
