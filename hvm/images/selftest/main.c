/* selftest: the C runtime and the code gcc -O2 emits for ordinary kernel code, checked
   against constants computed off-line. The default image of the Quick start.
   With "rounds=N" on the Multiboot command line (default 1) the tests run N - 1 times
   silently (a failure is still printed and counted) before the round that prints: the
   compiled-C workload of scripts/bench-peers.sh, long enough to time on a peer.
   Exit: 0 when every test passes (QEMU status 1), 1 otherwise (status 3). */
#include "boot/boot.h"
#include "images/selftest/selftest.h"
#include "lib/exit.h"
#include "lib/multiboot.h"
#include "lib/printf.h"

char TestDetail[192];

enum TestResult testFailed(int Line, const char *Expr, uint64_t Got, uint64_t Want) {
  snprintf(TestDetail, sizeof(TestDetail), "line %d: %s = 0x%llx, want 0x%llx", Line,
           Expr, (unsigned long long)Got, (unsigned long long)Want);
  return TestFail;
}

enum TestResult testSkipped(const char *Why) {
  snprintf(TestDetail, sizeof(TestDetail), "%s", Why);
  return TestSkip;
}

struct Test {
  const char *Name;
  enum TestResult (*Run)(void);
};

#define TEST_ENTRY(Name) {#Name, test_##Name},
static const struct Test Tests[] = {SELFTEST_TESTS(TEST_ENTRY)};
#undef TEST_ENTRY

void kmain(uint32_t Magic, uint32_t MbiAddr) {
  (void)Magic; /* boot.S checked it */
  printf("vmxsim selftest\n");
  multibootPrintInfo(multibootInfo(MbiAddr));
  uint64_t Rounds = 1;
  if (cmdlineGetU64(multibootCmdline(multibootInfo(MbiAddr)), "rounds", &Rounds) < 0 ||
      Rounds == 0) {
    printf("selftest: bad rounds= in the command line\n");
    hvmExit(HVM_EXIT_FAILURE);
  }
  unsigned Passed = 0, Failed = 0, Skipped = 0;
  for (uint64_t Round = 1; Round < Rounds; ++Round)
    for (size_t I = 0; I < sizeof(Tests) / sizeof(Tests[0]); ++I) {
      TestDetail[0] = '\0';
      if (Tests[I].Run() == TestFail) {
        printf("FAIL %s (round %llu) %s\n", Tests[I].Name, (unsigned long long)Round,
               TestDetail);
        ++Failed;
      }
    }
  for (size_t I = 0; I < sizeof(Tests) / sizeof(Tests[0]); ++I) {
    TestDetail[0] = '\0';
    switch (Tests[I].Run()) {
    case TestPass:
      printf("PASS %s\n", Tests[I].Name);
      ++Passed;
      break;
    case TestFail:
      printf("FAIL %s %s\n", Tests[I].Name, TestDetail);
      ++Failed;
      break;
    case TestSkip:
      printf("SKIP %s %s\n", Tests[I].Name, TestDetail);
      ++Skipped;
      break;
    }
  }
  printf("selftest: %u passed, %u failed", Passed, Failed);
  if (Skipped)
    printf(", %u skipped", Skipped);
  printf("\n");
  hvmExit(Failed ? HVM_EXIT_FAILURE : HVM_EXIT_SUCCESS);
}
