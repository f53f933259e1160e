// Boots a hypervisor image on vmxsim with both traces on, and asserts on its VM exits:
// what a hypervisor's own unit tests look like when they run with no VT-x. The image is
// vmxsim's bundled core running its `io` scenario on one CPU (22 port writes, each a VM
// exit the core handles and traces, and the final VMCALL).
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

TEST(HypervisorOnVmxsim, IoScenarioExitsAreTracedAndChecked) {
  Traces T;
  vmxsim::MachineConfig Cfg;
  Cfg.Kernel = HV_IMAGE;
  Cfg.Append = "scenario=io";
  Cfg.Serial = vmxsim::OutputSpec::capture();
  Cfg.Debugcon = vmxsim::OutputSpec::discard();
  Cfg.XentraceFile = T.Hypervisor;
  Cfg.GroundTruthFile = T.GroundTruth;
  Cfg.MaxInsns = 50'000'000;
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

} // namespace
