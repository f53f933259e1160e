// The progress display (harness/progress.h) and the run slicing behind it
// (Scheduler::setProgress): a run observed every few hundred instructions must be the
// same run — same output, same clocks, byte-identical ground truth — on one CPU (where
// the run is cut at exact instruction counts), on four (where progress is reported
// between quanta) and in VMX non-root operation. The line itself is exact text, drawn
// only on a terminal.
#include "harness/machine.h"
#include "harness/progress.h"
#include "tests/support/files.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace vmxsim;

using vmxsim::test::readFile;

namespace {

struct Observed {
  RunResult Result;
  std::string Serial, GroundTruth;
  uint64_t Calls = 0;
  std::vector<uint64_t> Cycles;
};

Observed runImage(const std::string &Image, unsigned Cpus, uint64_t Every,
                  const std::string &Tag) {
  Observed O;
  const std::string Gt = "/tmp/vmxsim-progress-" + std::to_string(getpid()) + "-" + Tag + ".xt";
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/" + Image;
  Cfg.NumCpus = Cpus;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.MaxInsns = 300'000'000;
  Cfg.GroundTruthFile = Gt;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  if (!M)
    return O;
  uint64_t Last = 0;
  O.Result = Every ? M->run(
                         [&](uint64_t N) {
                           EXPECT_GE(N, Last + Every);
                           Last = N;
                           ++O.Calls;
                         },
                         Every)
                   : M->run();
  O.Serial = M->serialOutput();
  for (unsigned I = 0; I < M->numCpus(); ++I)
    O.Cycles.push_back(M->cpu(I).Cycles);
  M.reset();
  O.GroundTruth = readFile(Gt);
  std::remove(Gt.c_str());
  return O;
}

void expectSameRun(const std::string &Image, unsigned Cpus, uint64_t Every) {
  const Observed Plain = runImage(Image, Cpus, 0, "plain");
  const Observed Sliced = runImage(Image, Cpus, Every, "sliced");
  EXPECT_EQ(Plain.Calls, 0u);
  EXPECT_GT(Sliced.Calls, 10u) << "the run was not sliced";
  EXPECT_EQ(Sliced.Result.Reason, Plain.Result.Reason);
  EXPECT_EQ(Sliced.Result.ExitStatus, Plain.Result.ExitStatus);
  EXPECT_EQ(Sliced.Result.Retired, Plain.Result.Retired);
  EXPECT_EQ(Sliced.Cycles, Plain.Cycles);
  EXPECT_EQ(Sliced.Serial, Plain.Serial);
  EXPECT_TRUE(Sliced.GroundTruth == Plain.GroundTruth);
}

} // namespace

TEST(ProgressDisplay, SlicedSingleCpuRunIsTheSameRun) {
  expectSameRun("selftest.elf", 1, 997);
}

TEST(ProgressDisplay, SlicedVmxRunIsTheSameRunWithTheSameGroundTruth) {
  const Observed O = runImage("vmx_e2e.elf", 1, 0, "gt-size");
  EXPECT_GT(O.GroundTruth.size(), 1000u);
  expectSameRun("vmx_e2e.elf", 1, 101);
}

TEST(ProgressDisplay, SlicedFourCpuRunIsTheSameRun) {
  expectSameRun("smp.elf", 4, 1009);
}

TEST(ProgressDisplay, LineTextIsExact) {
  EXPECT_EQ(ProgressLine::runText(1'234'000'000, 4.0),
            "vmxsim: 1.23 G instructions, 308 MIPS, 4.0 s");
  EXPECT_EQ(ProgressLine::runText(0, 0), "vmxsim: 0 instructions, 0 MIPS, 0.0 s");
  EXPECT_EQ(ProgressLine::bytesText("reading trace", 50'000'000, 200'000'000, 0.25),
            "vmxsim: reading trace 25% of 200.0 MB, 200.0 MB/s");
}

TEST(ProgressDisplay, DrawsOnlyOnATerminalAndErasesItself) {
  std::FILE *F = std::tmpfile();
  ASSERT_TRUE(F);
  {
    ProgressLine NotTerminal(F); // a file is not a terminal: nothing is drawn
    EXPECT_FALSE(NotTerminal.enabled());
    NotTerminal.show("x", true);
  }
  EXPECT_EQ(std::ftell(F), 0L);
  {
    ProgressLine Forced(F, true, true);
    Forced.show("abcd", true);
    Forced.show("ab", true); // shorter: padded over the old text
    Forced.show("zzzz");     // within 250 ms of the last: not drawn
  }
  std::rewind(F);
  char Buf[64] = {};
  const size_t N = std::fread(Buf, 1, sizeof(Buf), F);
  EXPECT_EQ(std::string(Buf, N), "\rabcd\rab  \r  \r");
  std::fclose(F);
}
