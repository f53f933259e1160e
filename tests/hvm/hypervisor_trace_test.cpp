// The hypervisor core's own XenTrace (hvm/vmx/trace.c into per-CPU rings,
// hvm/vmx/tracebuf.c; drained by the machine, harness/devices/trace_buffers.h) checked
// against vmxsim's ground truth of the same run (trace/check.h): every exit and entry
// paired, reasons and RIPs equal, every hypervisor TSC on the right side of the
// processor's, rings that wrap many times without a lost record, and byte-identical
// traces run after run.
#include "harness/machine.h"
#include "tests/support/files.h"
#include "tests/trace/trace_test_util.h"
#include "trace/check.h"
#include "trace/reader.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace vmxsim;
using namespace vmxsim::trace;

using vmxsim::test::readFile;

namespace {

std::string tempPath(const std::string &Name) {
  const char *Dir = std::getenv("TMPDIR");
  return std::string(Dir ? Dir : "/tmp") + "/vmxsim-hvtrace-" + std::to_string(getpid()) +
         "-" + Name;
}

struct TracedRun {
  RunResult Result;
  std::string Hv, Gt; ///< file paths
  std::vector<std::string> Problems;
};

TracedRun runTraced(const std::string &Image, const std::string &Append,
                    const std::string &Tag) {
  TracedRun T;
  T.Hv = tempPath(Tag + ".hv.xt");
  T.Gt = tempPath(Tag + ".gt.xt");
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/" + Image;
  Cfg.Append = Append;
  Cfg.Serial = OutputSpec::discard();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.MaxInsns = 200'000'000;
  Cfg.XentraceFile = T.Hv;
  Cfg.GroundTruthFile = T.Gt;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  if (!M)
    return T;
  T.Result = M->run();
  T.Problems = M->traceBuffers()->problems();
  return T;
}

CheckResult checkFiles(const TracedRun &T) {
  TraceReader Hv, Gt;
  std::string Why;
  EXPECT_TRUE(Hv.open(T.Hv, Why)) << Why;
  EXPECT_TRUE(Gt.open(T.Gt, Why)) << Why;
  return checkAgainstGroundTruth(Hv, Gt);
}

/// The basic exit reasons of expected_bochs.log, in order.
std::vector<uint32_t> bochsExitReasons() {
  std::istringstream In(readFile(std::string(VMXSIM_SOURCE_DIR) +
                                 "/hvm/images/vmx_e2e/expected_bochs.log"));
  std::vector<uint32_t> Reasons;
  std::string L;
  while (std::getline(In, L))
    if (L.rfind("exit n=", 0) == 0)
      Reasons.push_back(uint32_t(std::stoul(L.substr(L.find(" reason=") + 8))));
  return Reasons;
}

void removeFiles(const TracedRun &T) {
  std::remove(T.Hv.c_str());
  std::remove(T.Gt.c_str());
}

} // namespace

TEST(HypervisorTrace, VmxE2eTraceAgreesWithGroundTruthExitByExit) {
  TracedRun T = runTraced("vmx_e2e.elf", "", "e2e");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  EXPECT_TRUE(T.Problems.empty());
  const CheckResult R = checkFiles(T);
  ASSERT_TRUE(R.Ok) << R.Problem;
  ASSERT_EQ(R.Cpus.size(), 1u);
  const std::vector<uint32_t> Bochs = bochsExitReasons();
  ASSERT_EQ(Bochs.size(), 40u);
  EXPECT_EQ(R.Cpus[0].Exits, 40u);
  // The launch, then one per exit but the last (the guest ends there).
  EXPECT_EQ(R.Cpus[0].Entries, 40u);
  // 12 I/O exits and 2 CR exits carry a record the qualification can confirm.
  EXPECT_EQ(R.Cpus[0].HandlerRecords, 19u);
  // Every exit reaches the hypervisor's RDTSC through the same instructions: one lag.
  EXPECT_EQ(R.Cpus[0].ExitLag.Min, R.Cpus[0].ExitLag.Max);
  EXPECT_GT(R.Cpus[0].ExitLag.Min, 0u);

  // The hypervisor's VMX_EXIT64 records name the exits of Bochs' log, in order.
  std::vector<uint32_t> Reasons;
  for (const TraceRecord &Rec : vmxsim::trace::testing::readAllFile(T.Hv))
    if (Rec.Event == XT_EV_VmxExit64)
      Reasons.push_back(Rec.Words[0] & 0xffff);
  EXPECT_EQ(Reasons, Bochs);
  removeFiles(T);
}

TEST(HypervisorTrace, RingsThatWrapLoseNothingAndMatchGroundTruth) {
  // 6,001 exits of about 48 bytes of records each: the 64 KiB ring wraps four times and
  // is drained at every half-full notification.
  TracedRun T = runTraced("vmx_bench.elf", "iters=2000 trace=1", "wrap");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  EXPECT_EQ(T.Result.ExitValue, 0u);
  EXPECT_TRUE(T.Problems.empty());
  const CheckResult R = checkFiles(T);
  ASSERT_TRUE(R.Ok) << R.Problem;
  ASSERT_EQ(R.Cpus.size(), 1u);
  EXPECT_EQ(R.Cpus[0].Exits, 6001u);
  EXPECT_EQ(R.Cpus[0].Entries, 6001u);
  EXPECT_EQ(R.Cpus[0].HandlerRecords, 2000u);
  EXPECT_EQ(R.Cpus[0].ExitLag.Min, R.Cpus[0].ExitLag.Max);
  EXPECT_GT(readFile(T.Hv).size(), 4u * 65536u);
  uint64_t Windows = 0;
  {
    TraceReader F(ReadOrder::File);
    std::string Why;
    ASSERT_TRUE(F.open(T.Hv, Why));
    TraceRecord Rec;
    while (F.next(Rec)) {
      Windows += Rec.Event == XT_EV_TraceCpuChange;
      EXPECT_NE(Rec.Event, uint32_t(XT_EV_LostRecords));
    }
  }
  EXPECT_GE(Windows, 8u);
  removeFiles(T);
}

TEST(HypervisorTrace, TwoRunsWriteByteIdenticalTraces) {
  TracedRun A = runTraced("vmx_bench.elf", "iters=500 trace=1", "det-a");
  TracedRun B = runTraced("vmx_bench.elf", "iters=500 trace=1", "det-b");
  const std::string HvA = readFile(A.Hv), HvB = readFile(B.Hv);
  EXPECT_GT(HvA.size(), 0u);
  EXPECT_TRUE(HvA == HvB);
  EXPECT_TRUE(readFile(A.Gt) == readFile(B.Gt));
  removeFiles(A);
  removeFiles(B);
}
