// The main-job image (hvm/images/hv): every guest scenario on 1 and 2 CPUs (mixed also
// on 4), each run's hypervisor trace checked against vmxsim's ground truth of the same
// run (trace/check.h) and its exit mix (VMX_EXIT64 records per CPU and basic exit
// reason) compared with tests/hvm/golden/hv_exit_counts.txt (regenerate with
// VMXSIM_UPDATE_GOLDEN=1 and review the diff); two runs of mixed on 4 CPUs writing
// byte-identical files (mixed is the default: no command line); mixed in the xen-3.0
// trace flavour; an unknown scenario
// name; and a guest that triple-faults on every CPU (status 1, both traces valid up to
// the exit).
#include "harness/machine.h"
#include "tests/support/files.h"
#include "tests/support/traced_run.h"
#include "tests/trace/trace_test_util.h"
#include "trace/check.h"
#include "trace/reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

using namespace vmxsim;
using namespace vmxsim::trace;

using vmxsim::test::readFile;

namespace {

using vmxsim::test::TracedRun;

TracedRun runHv(const std::string &Append, unsigned Cpus, const std::string &Tag) {
  return vmxsim::test::runTraced("hv.elf", Append, Cpus, 50'000'000, "hv-" + Tag);
}

void removeFiles(const TracedRun &T) { vmxsim::test::removeTraceFiles(T); }

/// "scenario cpus=N cpuC: reason=count ..." lines, one per CPU, from the VMX_EXIT64
/// records of the hypervisor's trace.
std::string exitCounts(const std::string &Scenario, unsigned Cpus, const std::string &Path) {
  std::map<unsigned, std::map<unsigned, uint64_t>> Counts;
  for (const TraceRecord &Rec : vmxsim::trace::testing::readAllFile(Path))
    if (Rec.Event == XT_EV_VmxExit64)
      ++Counts[Rec.Cpu][Rec.Words[0] & 0xffff];
  std::ostringstream Out;
  for (const auto &[Cpu, ByReason] : Counts) {
    Out << Scenario << " cpus=" << Cpus << " cpu" << Cpu << ":";
    for (const auto &[Reason, N] : ByReason)
      Out << " " << Reason << "=" << N;
    Out << "\n";
  }
  return Out.str();
}

/// The golden file's lines for Scenario on Cpus CPUs.
std::string goldenCounts(const std::string &Text, const std::string &Scenario, unsigned Cpus) {
  const std::string Prefix = Scenario + " cpus=" + std::to_string(Cpus) + " ";
  std::istringstream In(Text);
  std::string L, Out;
  while (std::getline(In, L))
    if (L.rfind(Prefix, 0) == 0)
      Out += L + "\n";
  return Out;
}

const std::string &goldenPath() {
  static const std::string P =
      std::string(VMXSIM_SOURCE_DIR) + "/tests/hvm/golden/hv_exit_counts.txt";
  return P;
}

struct Case {
  const char *Scenario;
  unsigned Cpus;
};

const Case kCases[] = {
    {"io", 1},        {"io", 2},        {"cpuid", 1}, {"cpuid", 2}, {"msr", 1},
    {"msr", 2},       {"cr", 1},        {"cr", 2},    {"hlt-timer", 1},
    {"hlt-timer", 2}, {"ept", 1},       {"ept", 2},   {"exceptions", 1},
    {"exceptions", 2}, {"mmio", 1},     {"mmio", 2},  {"system", 1},
    {"system", 2},    {"irq", 1},       {"irq", 2},   {"mixed", 1},
    {"mixed", 2},     {"mixed", 4},     {"realmode", 1}, {"realmode", 2},
    {"apicv", 1},     {"apicv", 2},     {"apicv", 4},
};

} // namespace

TEST(HvScenarios, EveryScenarioPassesTraceCheckWithTheGoldenExitMix) {
  std::string All;
  const std::string Golden = std::getenv("VMXSIM_UPDATE_GOLDEN") ? "" : readFile(goldenPath());
  for (const Case &C : kCases) {
    SCOPED_TRACE(std::string(C.Scenario) + " on " + std::to_string(C.Cpus) + " CPUs");
    TracedRun T = runHv(std::string("scenario=") + C.Scenario, C.Cpus,
                    std::string(C.Scenario) + std::to_string(C.Cpus));
    ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe() << "\n" << T.Serial;
    EXPECT_EQ(T.Result.ExitValue, 0u) << T.Serial;
    EXPECT_NE(T.Serial.find("hv: PASS\n"), std::string::npos) << T.Serial;
    EXPECT_TRUE(T.Problems.empty());
    TraceReader Hv, Gt;
    std::string Why;
    ASSERT_TRUE(Hv.open(T.Hv, Why)) << Why;
    ASSERT_TRUE(Gt.open(T.Gt, Why)) << Why;
    const CheckResult R = checkAgainstGroundTruth(Hv, Gt);
    EXPECT_TRUE(R.Ok) << R.Problem;
    EXPECT_EQ(R.Cpus.size(), C.Cpus);
    for (const CpuCheck &P : R.Cpus) {
      // One entry per exit: the launch's, then one after every exit but the last.
      EXPECT_EQ(P.Entries, P.Exits) << "cpu" << P.Cpu;
      EXPECT_EQ(P.ExitLag.Min, P.ExitLag.Max) << "cpu" << P.Cpu;
    }
    const std::string Counts = exitCounts(C.Scenario, C.Cpus, T.Hv);
    All += Counts;
    if (!Golden.empty()) {
      EXPECT_EQ(Counts, goldenCounts(Golden, C.Scenario, C.Cpus)) << "golden file " << goldenPath();
    }
    removeFiles(T);
  }
  if (std::getenv("VMXSIM_UPDATE_GOLDEN"))
    std::ofstream(goldenPath(), std::ios::binary) << All;
}

TEST(HvScenarios, MixedOnFourCpusTwiceWritesByteIdenticalFiles) {
  TracedRun A = runHv("", 4, "det-a"), B = runHv("", 4, "det-b");
  ASSERT_EQ(A.Result.Reason, RunReason::GuestExit) << A.Result.describe();
  ASSERT_EQ(B.Result.Reason, RunReason::GuestExit) << B.Result.describe();
  const std::string HvA = readFile(A.Hv), GtA = readFile(A.Gt);
  EXPECT_GT(HvA.size(), 0u);
  EXPECT_TRUE(HvA == readFile(B.Hv));
  EXPECT_TRUE(GtA == readFile(B.Gt));
  EXPECT_EQ(A.Serial, B.Serial);
  removeFiles(A);
  removeFiles(B);
}

// apicv on 4 CPUs: each vCPU's core posts an interrupt to the next one's processor
// through a real IPI; two runs give the same bytes.
TEST(HvScenarios, ApicvOnFourCpusTwiceWritesByteIdenticalFiles) {
  TracedRun A = runHv("scenario=apicv", 4, "apicv-a"), B = runHv("scenario=apicv", 4, "apicv-b");
  ASSERT_EQ(A.Result.Reason, RunReason::GuestExit) << A.Result.describe();
  ASSERT_EQ(B.Result.Reason, RunReason::GuestExit) << B.Result.describe();
  EXPECT_NE(A.Serial.find("hv: PASS\n"), std::string::npos) << A.Serial;
  const std::string HvA = readFile(A.Hv);
  EXPECT_GT(HvA.size(), 0u);
  EXPECT_TRUE(HvA == readFile(B.Hv));
  EXPECT_TRUE(readFile(A.Gt) == readFile(B.Gt));
  EXPECT_EQ(A.Serial, B.Serial);
  removeFiles(A);
  removeFiles(B);
}

// A processor without APIC virtualization (the minimal profile): the core says which
// control it lacks and the image fails.
TEST(HvScenarios, ApicvWithoutApicVirtualizationSaysWhyAndFails) {
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/hv.elf";
  Cfg.Append = "scenario=apicv";
  Cfg.Vmx = &VmxProfile::minimal();
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.MaxInsns = 50'000'000;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  const RunResult R = M->run();
  ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  EXPECT_EQ(R.ExitValue, 1u);
  EXPECT_EQ(M->serialOutput(),
            "hv: 1 CPUs, scenarios 0x1000, EPT off, preemption timer off\n"
            "vmx: pin-based controls 0x80 not supported (allowed-1 0x3f)\n"
            "hv: cpu 0: VMCS setup failed\n");
}

TEST(HvScenarios, UnknownScenarioPrintsOneLineAndFails) {
  TracedRun T = runHv("scenario=bogus", 2, "bogus");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  EXPECT_EQ(T.Result.ExitValue, 1u);
  EXPECT_EQ(T.Serial,
            "hv: unknown scenario \"bogus\" (io, cpuid, msr, cr, hlt-timer, ept, exceptions, "
            "mmio, system, irq, mixed, realmode, triple-fault or apicv)\n");
  removeFiles(T);
}

TEST(HvScenarios, TripleFaultStopsWithBothTracesValidUpToTheExit) {
  TracedRun T = runHv("scenario=triple-fault", 2, "triple");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  EXPECT_EQ(T.Result.ExitValue, 1u);
  // The first CPU to reach its handler's stop ends the machine: three lines (the RIP
  // follows the image's layout, so only its form is checked).
  const std::string Head = "hv: 2 CPUs, scenarios 0x100, EPT on, preemption timer on\n"
                           "  guest triple fault at rip 0x";
  const std::string Tail = "\nvmx: stopping at exit 1\n";
  EXPECT_EQ(T.Serial.rfind(Head, 0), 0u) << T.Serial;
  ASSERT_GE(T.Serial.size(), Head.size() + Tail.size()) << T.Serial;
  EXPECT_EQ(T.Serial.substr(T.Serial.size() - Tail.size()), Tail) << T.Serial;
  EXPECT_EQ(std::count(T.Serial.begin(), T.Serial.end(), '\n'), 3) << T.Serial;
  TraceReader Hv, Gt;
  std::string Why;
  ASSERT_TRUE(Hv.open(T.Hv, Why)) << Why;
  ASSERT_TRUE(Gt.open(T.Gt, Why)) << Why;
  const CheckResult R = checkAgainstGroundTruth(Hv, Gt);
  EXPECT_TRUE(R.Ok) << R.Problem;
  ASSERT_EQ(R.Cpus.size(), 2u);
  EXPECT_EQ(exitCounts("triple-fault", 2, T.Hv),
            "triple-fault cpus=2 cpu0: 2=1\ntriple-fault cpus=2 cpu1: 2=1\n");
  removeFiles(T);
}

TEST(HvScenarios, MixedInTheXen30FlavourPassesTraceCheckOnTwoCpus) {
  TracedRun T = runHv("scenario=mixed trace=xen-3.0", 2, "xen30");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  EXPECT_EQ(T.Result.ExitValue, 0u) << T.Serial;
  EXPECT_TRUE(T.Problems.empty());
  TraceReader Hv, Gt;
  std::string Why;
  ASSERT_TRUE(Hv.open(T.Hv, Why)) << Why;
  ASSERT_TRUE(Gt.open(T.Gt, Why)) << Why;
  const CheckResult R = checkAgainstGroundTruth(Hv, Gt);
  EXPECT_TRUE(R.Ok) << R.Problem;
  ASSERT_EQ(R.Cpus.size(), 2u);
  for (const CpuCheck &P : R.Cpus) {
    EXPECT_EQ(P.Exits, 173u) << "cpu" << P.Cpu;
    EXPECT_EQ(P.Entries, 173u) << "cpu" << P.Cpu;
  }
  // One TRC_VMX_VMEXIT and one TRC_VMX_VMENTRY per exit, the launch's entry included
  // and the last exit's left out: 2 * 173 fixed-size records per CPU.
  EXPECT_EQ(readFile(T.Hv).size(), 2u * 2u * 173u * XT30_FILE_RECORD_BYTES);
  removeFiles(T);
}
