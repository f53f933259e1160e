// The hypervisor core (hvm/vmx) on vmxsim: the vmx_e2e image enters VMX operation,
// launches a guest and handles CPUID, I/O, HLT, RDMSR/WRMSR (with a #GP injected), CR
// accesses and VMCALL exits, logging one line per exit. The log must equal, line for
// line, what the same image prints on Bochs 2.7's software VMX
// (hvm/images/vmx_e2e/expected_bochs.log, recorded with scripts/peers/run-bochs.sh;
// hvm/images/vmx_e2e/README.md argues each line against the SDM), under every VMX
// profile, and be deterministic.
#include "harness/machine.h"
#include "tests/support/files.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

using namespace vmxsim;

using vmxsim::test::readFile;

namespace {

struct GuestRun {
  RunResult Result;
  std::string Serial;
};

GuestRun runE2e(const VmxProfile &Profile, const std::string &Append = "") {
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/vmx_e2e.elf";
  Cfg.Append = Append;
  Cfg.Vmx = &Profile;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.MaxInsns = 100'000'000;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  if (!M)
    return {};
  return {M->run(), M->serialOutput()};
}

const std::string &expectedLog() {
  static const std::string Log =
      readFile(std::string(VMXSIM_SOURCE_DIR) + "/hvm/images/vmx_e2e/expected_bochs.log");
  return Log;
}

} // namespace

TEST(VmxEndToEnd, ExitLogEqualsBochsLineForLineUnderFullProfile) {
  ASSERT_FALSE(expectedLog().empty());
  GuestRun R = runE2e(VmxProfile::full());
  EXPECT_EQ(R.Serial, expectedLog());
  EXPECT_EQ(R.Result.Reason, RunReason::GuestExit) << R.Result.describe();
  EXPECT_EQ(R.Result.ExitStatus, 1);
}

TEST(VmxEndToEnd, ExitLogIsTheSameUnderKvmNestedAndMinimalProfiles) {
  // The hypervisor uses VPID where offered (full, kvm-nested) and not otherwise
  // (minimal): the exits it sees must not change.
  EXPECT_EQ(runE2e(VmxProfile::kvmNested()).Serial, expectedLog());
  EXPECT_EQ(runE2e(VmxProfile::minimal()).Serial, expectedLog());
}

TEST(VmxEndToEnd, TwoRunsAreByteIdenticalWithIdenticalClocks) {
  GuestRun A = runE2e(VmxProfile::full()), B = runE2e(VmxProfile::full());
  EXPECT_EQ(A.Serial, B.Serial);
  EXPECT_EQ(A.Result.Retired, B.Result.Retired);
  EXPECT_EQ(A.Result.Cycles, B.Result.Cycles);
}

TEST(VmxEndToEnd, LogHasFortyExitsAndEndsInPass) {
  GuestRun R = runE2e(VmxProfile::full());
  EXPECT_NE(R.Serial.find("vmx_e2e: 40 exits, PASS\n"), std::string::npos) << R.Serial;
  // Every basic exit reason the issue names appears: CPUID (10), I/O (30), HLT (12),
  // RDMSR (31), WRMSR (32), CR access (28), VMCALL (18).
  for (const char *Reason : {"reason=10 ", "reason=30 ", "reason=12 ", "reason=31 ",
                             "reason=32 ", "reason=28 ", "reason=18 "})
    EXPECT_NE(R.Serial.find(Reason), std::string::npos) << Reason;
}

TEST(VmxEndToEnd, BenchImageCountsEveryRoundTrip) {
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/vmx_bench.elf";
  Cfg.Append = "iters=1000";
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::discard();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::GuestExit);
  EXPECT_NE(M->serialOutput().find("vmx_bench: done iters=1000 exits=3001 (expected 3001)"),
            std::string::npos)
      << M->serialOutput();
}
