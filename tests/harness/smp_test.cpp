// The 4-CPU guest image hvm/images/smp: INIT-SIPI-SIPI bring-up, a spin-locked counter
// and LAPIC timer interrupts on every CPU, under the deterministic scheduler.
#include "harness/machine.h"

#include <gtest/gtest.h>

using namespace vmxsim;

namespace {
struct SmpRun {
  RunResult R;
  std::string Serial;
  std::vector<uint64_t> Clocks;
};
SmpRun runSmp(unsigned Cpus) {
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/smp.elf";
  Cfg.NumCpus = Cpus;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Cfg.MaxInsns = 200000000;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_FALSE(Err) << Err.str();
  SmpRun Out;
  if (!M)
    return Out;
  Out.R = M->run();
  Out.Serial = M->serialOutput();
  for (unsigned I = 0; I < Cpus; ++I)
    Out.Clocks.push_back(M->cpu(I).Cycles);
  return Out;
}
} // namespace

TEST(MultipleProcessorManagement, FourCpusCountUnderLockAndTakeTimerInterrupts) {
  SmpRun A = runSmp(4);
  EXPECT_EQ(A.R.Reason, RunReason::GuestExit) << A.R.describe() << "\n" << A.Serial;
  EXPECT_EQ(A.R.ExitValue, 0u);
  EXPECT_NE(A.Serial.find("smp: 4 CPUs in the MADT\n"), std::string::npos) << A.Serial;
  for (unsigned I = 0; I < 4; ++I)
    EXPECT_NE(A.Serial.find("smp: cpu " + std::to_string(I) + " counted, 3 timer ticks\n"),
              std::string::npos)
        << A.Serial;
  EXPECT_NE(A.Serial.find("smp: counter 4000, expected 4000\n"), std::string::npos) << A.Serial;
}

TEST(MultipleProcessorManagement, TwoRunsGiveIdenticalOutputAndClocks) {
  SmpRun A = runSmp(4), B = runSmp(4);
  EXPECT_EQ(A.Serial, B.Serial);
  EXPECT_EQ(A.Clocks, B.Clocks);
  EXPECT_EQ(A.R.Retired, B.R.Retired);
}

TEST(MultipleProcessorManagement, OneCpuRunsTheImageAlone) {
  SmpRun A = runSmp(1);
  EXPECT_EQ(A.R.Reason, RunReason::GuestExit) << A.R.describe() << "\n" << A.Serial;
  EXPECT_NE(A.Serial.find("smp: counter 1000, expected 1000\n"), std::string::npos) << A.Serial;
}
