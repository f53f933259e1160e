// The project's own Multiboot guest images (hvm/images) run on vmxsim exactly: the
// compiled-C self-check suite passes with the exact expected output, the integer loop
// computes the exact result in the exact number of instructions, and every run is
// deterministic (same inputs -> byte-identical output and identical virtual clocks).
#include "harness/machine.h"

#include <gtest/gtest.h>

#include <string>

using namespace vmxsim;

namespace {

struct GuestRun {
  RunResult Result;
  std::string Serial;
};

GuestRun runImage(const std::string &Name, const std::string &Append,
                  uint64_t RamBytes = 128ull << 20) {
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/" + Name + ".elf";
  Cfg.Append = Append;
  Cfg.RamBytes = RamBytes;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.MaxInsns = 2'000'000'000;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  if (!M)
    return {};
  GuestRun R{M->run(), M->serialOutput()};
  return R;
}

// The selftest's expected output on a 128 MiB machine. The first line after the banner
// is the Multiboot command line, which (as under QEMU) starts with the image path.
std::string expectedSelftest(const std::string &Path) {
  return "vmxsim selftest\n"
         "cmdline: " + Path + " determinism check\n"
         "mem_lower=639KiB mem_upper=130048KiB\n"
         "mmap entries=3\n"
         "mmap[0] base=0x0000000000000000 length=0x000000000009fc00 type=1\n"
         "mmap[1] base=0x000000000009fc00 length=0x0000000000060400 type=2\n"
         "mmap[2] base=0x0000000000100000 length=0x0000000007f00000 type=1\n"
         "PASS sort\n"
         "PASS hash\n"
         "PASS recursion\n"
         "PASS muldiv64\n"
         "PASS int128\n"
         "PASS bits\n"
         "PASS bmi\n"
         "PASS float\n"
         "PASS string\n"
         "PASS printf\n"
         "PASS struct_copy\n"
         "PASS switch_table\n"
         "PASS funcptr\n"
         "PASS varargs\n"
         "PASS volatile\n"
         "PASS atomics\n"
         "PASS rep_string\n"
         "PASS smc\n"
         "PASS exceptions\n"
         "selftest: 19 passed, 0 failed\n";
}

} // namespace

TEST(GuestImages, SelftestCompiledCSuitePassesWithExactOutput) {
  const std::string Path = std::string(VMXSIM_IMAGE_DIR) + "/selftest.elf";
  GuestRun R = runImage("selftest", "determinism check");
  EXPECT_EQ(R.Serial, expectedSelftest(Path));
  EXPECT_EQ(R.Result.Reason, RunReason::GuestExit) << R.Result.describe();
  EXPECT_EQ(R.Result.ExitValue, 0u);
  EXPECT_EQ(R.Result.ExitStatus, 1);
}

TEST(GuestImages, SelftestTwoRunsAreByteIdenticalWithIdenticalClocks) {
  GuestRun A = runImage("selftest", "determinism check");
  GuestRun B = runImage("selftest", "determinism check");
  EXPECT_EQ(A.Serial, B.Serial);
  EXPECT_EQ(A.Result.Retired, B.Result.Retired);
  EXPECT_EQ(A.Result.Cycles, B.Result.Cycles);
  EXPECT_EQ(A.Result.ExitStatus, B.Result.ExitStatus);
  EXPECT_GT(A.Result.Retired, 1'000'000u);
}

TEST(GuestImages, IntegerLoopRetiresExactlyFiveInstructionsPerIteration) {
  // hvm/images/loop: loopRun retires 5 * iters + 7 instructions; the rest of the image
  // (boot, command-line parsing, printing) depends only on the digits printed, and these
  // iteration counts print with identical instruction counts (the C printf's work
  // depends on the digit values: 1999 would not do), so the difference of two runs is
  // exactly 5 * (difference in iterations).
  GuestRun Small = runImage("loop", "iters=1000");
  GuestRun Large = runImage("loop", "iters=1500");
  ASSERT_EQ(Small.Result.Reason, RunReason::GuestExit) << Small.Serial;
  ASSERT_EQ(Large.Result.Reason, RunReason::GuestExit) << Large.Serial;
  EXPECT_EQ(Large.Result.Retired - Small.Result.Retired, 5u * 500u);
  EXPECT_NE(Small.Serial.find("loop: done iters=1000 result=0x"), std::string::npos)
      << Small.Serial;
  EXPECT_NE(Small.Serial.find("loop: loop instructions=5007 (5*iters+7)"), std::string::npos)
      << Small.Serial;
}

TEST(GuestImages, TouchWritesAndReadsBackEveryQuadwordOfTheRangeItNames) {
  // loop.elf touch=M (benchmarks/memory_bench.cpp): every quadword of M MiB from 64 MiB
  // written with I * 0x9e3779b97f4a7c15 and read back; the result is the sum of
  // (value ^ I) over the range, mod 2^64 (computed independently of the image).
  GuestRun One = runImage("loop", "touch=1");
  ASSERT_EQ(One.Result.Reason, RunReason::GuestExit) << One.Serial;
  EXPECT_EQ(One.Result.ExitValue, 0u);
  EXPECT_NE(One.Serial.find("loop: done touch=1 result=0x84db78df83ac0000\n"), std::string::npos)
      << One.Serial;
  // 4 GiB of RAM: 3 GiB below the PCI hole, 1 GiB above 4 GiB; the range is low.
  GuestRun Big = runImage("loop", "touch=64", 4096ull << 20);
  ASSERT_EQ(Big.Result.Reason, RunReason::GuestExit) << Big.Serial;
  EXPECT_EQ(Big.Result.ExitValue, 0u);
  EXPECT_NE(Big.Serial.find("loop: done touch=64 result=0xe122cd60ee000000\n"),
            std::string::npos)
      << Big.Serial;
}

TEST(GuestImages, TouchPastTheEndOfRamOrWithAnotherModeIsRefused) {
  GuestRun Past = runImage("loop", "touch=65"); // 64 + 65 MiB > 128 MiB of RAM
  ASSERT_EQ(Past.Result.Reason, RunReason::GuestExit) << Past.Serial;
  EXPECT_EQ(Past.Result.ExitValue, 1u);
  EXPECT_NE(Past.Serial.find("loop: touch=65 MiB from 64 MiB passes the end of RAM (0x8000000)\n"),
            std::string::npos)
      << Past.Serial;
  GuestRun Both = runImage("loop", "touch=1 out=1");
  ASSERT_EQ(Both.Result.Reason, RunReason::GuestExit) << Both.Serial;
  EXPECT_EQ(Both.Result.ExitValue, 1u);
  EXPECT_NE(Both.Serial.find("loop: bad iters=, out=, mem= or touch="), std::string::npos)
      << Both.Serial;
}

TEST(GuestImages, IntegerLoopResultMatchesQemuReference) {
  // The value QEMU 7.2 TCG prints for the same image and command line
  // (scripts/peers/run-qemu.sh build/hvm/loop.elf -append iters=1000000).
  GuestRun R = runImage("loop", "iters=1000000");
  ASSERT_EQ(R.Result.Reason, RunReason::GuestExit) << R.Serial;
  EXPECT_NE(R.Serial.find("loop: done iters=1000000 result=0xf7cb78c329a7992e\n"),
            std::string::npos)
      << R.Serial;
}
