// Boots a hypervisor image on vmxsim with both traces on, and asserts on its VM exits:
// what a hypervisor's own unit tests look like when they run with no VT-x. The image is
// vmxsim's bundled core running its `io` scenario on one CPU (22 port writes, each a VM
// exit the core handles and traces, and the final VMCALL).
#include "harness/gtest/vmxsim_gtest.h"
#include "harness/machine.h"
#include "trace/check.h"
#include "trace/reader.h"
#include "trace/summary.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>

namespace {

struct Traces {
  std::string Hypervisor = testing::TempDir() + "hv_exits_test.hv.xt";
  std::string GroundTruth = testing::TempDir() + "hv_exits_test.gt.xt";
  ~Traces() {
    std::remove(Hypervisor.c_str());
    std::remove(GroundTruth.c_str());
  }
};

/// Exits per basic exit reason on CPU 0 of a trace (either kind), from vmxsim's summary.
std::map<uint32_t, uint64_t> exitsPerReason(const std::string &Path) {
  vmxsim::trace::TraceReader R;
  std::string Err;
  EXPECT_TRUE(R.open(Path, Err)) << Err;
  vmxsim::trace::TraceSummary S = vmxsim::trace::summarizeTrace(R);
  EXPECT_FALSE(S.Failed) << S.Error.Message;
  std::map<uint32_t, uint64_t> Counts;
  if (!S.Cpus.empty())
    for (const vmxsim::trace::ReasonRow &Row : S.Cpus[0].Reasons)
      Counts[Row.Reason] = Row.Exits;
  return Counts;
}

/// The hypervisor image's io scenario on one CPU, COM1 captured, vmxsim's ground truth
/// (and, with Hypervisor set, the hypervisor's own trace) written to T's files.
vmxsim::MachineConfig ioScenario(const Traces &T, bool Hypervisor) {
  vmxsim::MachineConfig Cfg;
  Cfg.Kernel = HV_IMAGE;
  Cfg.Append = "scenario=io";
  Cfg.Serial = vmxsim::OutputSpec::capture();
  Cfg.Debugcon = vmxsim::OutputSpec::discard();
  if (Hypervisor)
    Cfg.XentraceFile = T.Hypervisor;
  Cfg.GroundTruthFile = T.GroundTruth;
  Cfg.MaxInsns = 50'000'000;
  return Cfg;
}

TEST(HypervisorOnVmxsim, IoScenarioExitsAreTracedAndChecked) {
  Traces T;
  const vmxsim::MachineConfig Cfg = ioScenario(T, true);
  vmxsim::Error Err;
  auto M = vmxsim::Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();

  vmxsim::RunResult R = M->run();
  EXPECT_EQ(R.Reason, vmxsim::RunReason::GuestExit) << R.describe();
  EXPECT_EQ(R.ExitStatus, 1) << M->serialOutput();
  EXPECT_NE(M->serialOutput().find("hv: PASS\n"), std::string::npos) << M->serialOutput();

  // What the processor did: 22 I/O-instruction exits (30) and the closing VMCALL (18).
  const std::map<uint32_t, uint64_t> Want{{18, 1}, {30, 22}};
  EXPECT_EQ(exitsPerReason(T.GroundTruth), Want);
  // What the hypervisor says it did.
  EXPECT_EQ(exitsPerReason(T.Hypervisor), Want);

  // And every record of the hypervisor's trace agrees with the processor's ground truth.
  vmxsim::trace::TraceReader Hv, Gt;
  std::string OpenErr;
  ASSERT_TRUE(Hv.open(T.Hypervisor, OpenErr)) << OpenErr;
  ASSERT_TRUE(Gt.open(T.GroundTruth, OpenErr)) << OpenErr;
  vmxsim::trace::CheckResult C = vmxsim::trace::checkAgainstGroundTruth(Hv, Gt);
  EXPECT_TRUE(C.Ok) << C.Problem;
  ASSERT_EQ(C.Cpus.size(), 1u);
  EXPECT_EQ(C.Cpus[0].Exits, 23u);
  EXPECT_EQ(C.Cpus[0].Entries, 23u);
}

// The same run stopped at its 5th VM exit, looked at, continued to the end, and its exits
// matched with vmxsim's GoogleTest helpers.
TEST(HypervisorOnVmxsim, StopAtAnExitAndMatchTheExits) {
  Traces T;
  const vmxsim::MachineConfig Cfg = ioScenario(T, false);
  vmxsim::Error Err;
  auto M = vmxsim::Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();

  auto Stop = M->runUntil({vmxsim::StopWhen::vmExit().nth(5)});
  ASSERT_TRUE(Stop) << Stop.error().str();
  EXPECT_EQ(Stop->Reason, vmxsim::RunReason::Stopped) << Stop->describe();
  // The guest's UART driver: IN from the line-status register, then OUT to 0x3f8.
  auto Reason = M->readVmcs(0, "ExitReason");
  ASSERT_TRUE(Reason) << Reason.error().str();
  EXPECT_EQ(*Reason, 30u);
  EXPECT_EQ(M->readVmcs(0, "NoSuchField").error().str().empty(), false);

  EXPECT_EQ(M->run().Reason, vmxsim::RunReason::GuestExit);
  auto Gt = vmxsim::testing::GroundTruth::read(*M);
  ASSERT_TRUE(Gt) << Gt.error().str();
  using vmxsim::ExitReason;
  using vmxsim::testing::ExitedWith;
  EXPECT_THAT(Gt->exits(0), ::testing::Contains(ExitedWith(ExitReason::IoInstruction)
                                                    .port(0x3f8)
                                                    .write()));
  EXPECT_THAT(Gt->exits(0), vmxsim::testing::ExitCountsAre({{ExitReason::IoInstruction, 22},
                                                            {ExitReason::Vmcall, 1}}));
  EXPECT_THAT(*Gt, vmxsim::testing::HandlerCycles(ExitReason::IoInstruction) <= 100'000);
}

} // namespace
