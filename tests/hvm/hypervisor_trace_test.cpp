// The hypervisor core's own XenTrace (hvm/vmx/trace.c into per-CPU rings,
// hvm/vmx/tracebuf.c; drained by the machine, harness/devices/trace_buffers.h) checked
// against vmxsim's ground truth of the same run (trace/check.h): every exit and entry
// paired, reasons and RIPs equal, every hypervisor TSC on the right side of the
// processor's, rings that wrap many times without a lost record, and byte-identical
// traces run after run; the same for the xen-3.0 flavour (trace=xen-3.0), whose check
// also compares slot 0 and the qualification's slots, and a flavour name the image does
// not know.
#include "harness/machine.h"
#include "tests/support/files.h"
#include "tests/support/traced_run.h"
#include "tests/trace/trace_test_util.h"
#include "trace/check.h"
#include "trace/reader.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

using namespace vmxsim;
using namespace vmxsim::trace;

using vmxsim::test::readFile;

namespace {

using vmxsim::test::TracedRun;

TracedRun runTraced(const std::string &Image, const std::string &Append,
                    const std::string &Tag) {
  return vmxsim::test::runTraced(Image, Append, 1, 200'000'000, "hvtrace-" + Tag);
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

void removeFiles(const TracedRun &T) { vmxsim::test::removeTraceFiles(T); }

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
  // The image publishes its trace slots, so every handler record is proven against them
  // and the exit's sources: one per exit (40) and the two INJ_EXC (#GP for an
  // unimplemented MSR).
  EXPECT_EQ(R.Cpus[0].HandlerRecords, 42u);
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
  // Every exit's record (CPUID, IOPORT_WRITE, VMMCALL), proven against the slots.
  EXPECT_EQ(R.Cpus[0].HandlerRecords, 6001u);
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

// --- The xen-3.0 flavour (docs/trace-flavours.md): trace=xen-3.0 on the command line.

namespace {

/// The hypervisor's records of a xen-3.0 file, in file order.
std::vector<TraceRecord> xen30Records(const std::string &Path) {
  std::vector<TraceRecord> V = vmxsim::trace::testing::readAllFile(Path);
  for (const TraceRecord &R : V) {
    EXPECT_EQ(R.Flavour, TraceFlavour::Xen30);
  }
  return V;
}

/// The file with the 8-byte item Slot of the N-th VMX_VMENTRY record replaced by Value.
std::string withSlot(const std::string &Path, unsigned N, unsigned Slot, uint64_t Value) {
  std::string Bytes = readFile(Path);
  unsigned Seen = 0;
  for (size_t Off = 0; Off + XT30_FILE_RECORD_BYTES <= Bytes.size();
       Off += XT30_FILE_RECORD_BYTES) {
    uint32_t Event;
    std::memcpy(&Event, &Bytes[Off + 12], 4);
    if (Event == XT30_EV_VmxVmentry && Seen++ == N) {
      std::memcpy(&Bytes[Off + 20 + 8 * Slot], &Value, 8);
      break;
    }
  }
  const std::string Out = Path + ".mutated";
  std::ofstream(Out, std::ios::binary) << Bytes;
  return Out;
}

CheckResult checkPaths(const std::string &Hv, const std::string &Gt) {
  TraceReader H, G;
  std::string Why;
  EXPECT_TRUE(H.open(Hv, Why)) << Why;
  EXPECT_TRUE(G.open(Gt, Why)) << Why;
  return checkAgainstGroundTruth(H, G);
}

} // namespace

TEST(HypervisorTrace, VmxE2eXen30TraceAgreesWithGroundTruthExitByExit) {
  TracedRun T = runTraced("vmx_e2e.elf", "trace=xen-3.0", "e2e30");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  EXPECT_EQ(T.Result.ExitValue, 0u);
  EXPECT_TRUE(T.Problems.empty());
  // The launch's entry, then an exit record and an entry record per exit but the last.
  EXPECT_EQ(readFile(T.Hv).size(), 80u * XT30_FILE_RECORD_BYTES);
  const CheckResult R = checkFiles(T);
  ASSERT_TRUE(R.Ok) << R.Problem;
  ASSERT_EQ(R.Cpus.size(), 1u);
  EXPECT_EQ(R.Cpus[0].Exits, 40u);
  EXPECT_EQ(R.Cpus[0].Entries, 40u);
  // Every entry record after an exit (39: the guest ends at the 40th): its five items
  // against the slots and the slots against the exit's sources.
  EXPECT_EQ(R.Cpus[0].HandlerRecords, 39u);
  EXPECT_EQ(R.Cpus[0].ExitLag.Min, R.Cpus[0].ExitLag.Max);
  EXPECT_GT(R.Cpus[0].ExitLag.Min, 0u);

  // Slot 0 of every entry record after an exit: the exits of Bochs' log, in order, but
  // the last (the guest ends there: no entry record). The first entry carries the slots
  // as boot left them; every later one 9 where its exit wrote nothing.
  const std::vector<TraceRecord> Recs = xen30Records(T.Hv);
  ASSERT_EQ(Recs.size(), 80u);
  std::vector<uint32_t> Reasons;
  for (size_t I = 0; I < Recs.size(); ++I) {
    const TraceRecord &Rec = Recs[I];
    EXPECT_EQ(Rec.Event, I % 2 ? uint32_t(XT30_EV_VmxVmexit) : uint32_t(XT30_EV_VmxVmentry)) << I;
    if (Rec.Event == XT30_EV_VmxVmexit) {
      for (uint64_t Item : Rec.Items) {
        EXPECT_EQ(Item, 0u);
      }
    }
    if (Rec.Event == XT30_EV_VmxVmentry && I > 0)
      Reasons.push_back(uint32_t(Rec.Items[0]));
  }
  for (uint64_t Item : Recs[0].Items) {
    EXPECT_EQ(Item, 0u);
  }
  std::vector<uint32_t> Bochs = bochsExitReasons();
  Bochs.pop_back();
  EXPECT_EQ(Reasons, Bochs);
  // Exit 1 is CPUID 0x40000000 (vmx/README.md: 10, leaf, sub-leaf; 3 and 4 unwritten).
  const uint64_t Cpuid[XT30_ITEMS] = {10, 0x40000000, 0, XT30_SLOT_MARKER, XT30_SLOT_MARKER};
  for (unsigned I = 0; I < XT30_ITEMS; ++I)
    EXPECT_EQ(Recs[2].Items[I], Cpuid[I]) << I;
  removeFiles(T);
}

TEST(HypervisorTrace, Xen30CheckFindsAWrongReasonOrQualificationSlot) {
  TracedRun T = runTraced("vmx_e2e.elf", "trace=xen-3.0", "e2e30bad");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  // Entry record 1 closes exit 1 (CPUID); find the first I/O exit's entry record.
  const std::vector<TraceRecord> Recs = xen30Records(T.Hv);
  unsigned IoEntry = 0, Entries = 0;
  for (const TraceRecord &Rec : Recs)
    if (Rec.Event == XT30_EV_VmxVmentry) {
      if (Rec.Items[0] == 30) {
        IoEntry = Entries;
        break;
      }
      ++Entries;
    }
  ASSERT_GT(IoEntry, 0u);
  // Every item of an entry record is what the handler stored in its slot (the ground
  // truth recorded the stores): a changed reason, qualification slot or data is caught
  // at the item, naming what the slots held.
  const std::string WrongReason = withSlot(T.Hv, 1, 0, 12);
  CheckResult R = checkPaths(WrongReason, T.Gt);
  EXPECT_FALSE(R.Ok);
  EXPECT_FALSE(R.ReadError);
  EXPECT_NE(R.Problem.find("entry 2: "), std::string::npos) << R.Problem;
  EXPECT_NE(R.Problem.find("item 0 is 0xc, the trace slots held [0xa, "), std::string::npos)
      << R.Problem;
  for (unsigned Slot : {1u, 2u, 3u, 4u}) {
    const std::string WrongSlot = withSlot(T.Hv, IoEntry, Slot, 0x1234);
    R = checkPaths(WrongSlot, T.Gt);
    EXPECT_FALSE(R.Ok) << Slot;
    EXPECT_NE(R.Problem.find(fmt::format("item {} is 0x1234, the trace slots held [0x1e, ",
                                         Slot)),
              std::string::npos)
        << R.Problem;
    std::remove(WrongSlot.c_str());
  }
  std::remove(WrongReason.c_str());
  removeFiles(T);
}

TEST(HypervisorTrace, Xen30RingsThatWrapLoseNothingAndMatchGroundTruth) {
  // 6,001 exits of 112 bytes of records each: the 65,520-byte ring wraps ten times.
  TracedRun T = runTraced("vmx_bench.elf", "iters=2000 trace=xen-3.0", "wrap30");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  EXPECT_EQ(T.Result.ExitValue, 0u);
  EXPECT_TRUE(T.Problems.empty());
  const CheckResult R = checkFiles(T);
  ASSERT_TRUE(R.Ok) << R.Problem;
  ASSERT_EQ(R.Cpus.size(), 1u);
  EXPECT_EQ(R.Cpus[0].Exits, 6001u);
  EXPECT_EQ(R.Cpus[0].Entries, 6001u);
  EXPECT_EQ(R.Cpus[0].HandlerRecords, 6000u); // every entry record after an exit
  EXPECT_EQ(readFile(T.Hv).size(), (1u + 2u * 6000u + 1u) * XT30_FILE_RECORD_BYTES);
  for (const TraceRecord &Rec : xen30Records(T.Hv)) {
    EXPECT_NE(Rec.Event, uint32_t(XT30_EV_LostRecords));
  }
  removeFiles(T);
}

TEST(HypervisorTrace, Xen30TwoRunsWriteByteIdenticalTraces) {
  TracedRun A = runTraced("vmx_e2e.elf", "trace=xen-3.0", "det30-a");
  TracedRun B = runTraced("vmx_e2e.elf", "trace=xen-3.0", "det30-b");
  const std::string HvA = readFile(A.Hv), HvB = readFile(B.Hv);
  EXPECT_EQ(HvA.size(), 80u * XT30_FILE_RECORD_BYTES);
  EXPECT_TRUE(HvA == HvB);
  EXPECT_TRUE(readFile(A.Gt) == readFile(B.Gt));
  removeFiles(A);
  removeFiles(B);
}

TEST(HypervisorTrace, ModernByNameIsTheDefaultBarTheTimeToReadTheOption) {
  // "trace=modern" reads 12 more command-line bytes than no option: the same records,
  // every TSC shifted alike.
  TracedRun A = runTraced("vmx_e2e.elf", "", "modern-a");
  TracedRun B = runTraced("vmx_e2e.elf", "trace=modern", "modern-b");
  const std::vector<TraceRecord> Ra = vmxsim::trace::testing::readAllFile(A.Hv);
  const std::vector<TraceRecord> Rb = vmxsim::trace::testing::readAllFile(B.Hv);
  ASSERT_EQ(Ra.size(), 124u);
  ASSERT_EQ(Rb.size(), Ra.size());
  const int64_t Shift = int64_t(Rb[0].Tsc - Ra[0].Tsc);
  EXPECT_GT(Shift, 0);
  for (size_t I = 0; I < Ra.size(); ++I) {
    TraceRecord X = Rb[I];
    EXPECT_EQ(int64_t(X.Tsc - Ra[I].Tsc), Shift) << I;
    X.Tsc = Ra[I].Tsc;
    EXPECT_TRUE(X == Ra[I]) << I;
  }
  removeFiles(A);
  removeFiles(B);
}

TEST(HypervisorTrace, UnknownTraceFlavourStopsTheImageWithOneLine) {
  for (const char *Image : {"vmx_e2e.elf", "vmx_bench.elf"}) {
    MachineConfig Cfg;
    Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/" + Image;
    Cfg.Append = "iters=10 trace=xen-3.1";
    Cfg.Serial = OutputSpec::capture();
    Cfg.Debugcon = OutputSpec::discard();
    Cfg.MaxInsns = 10'000'000;
    Error Err;
    auto M = Machine::create(Cfg, Err);
    ASSERT_TRUE(M) << Err.str();
    const RunResult R = M->run();
    EXPECT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
    EXPECT_EQ(R.ExitValue, 1u); // HVM_EXIT_FAILURE
    EXPECT_EQ(R.ExitStatus, 3);
    const std::string Serial = M->serialOutput();
    const std::string Name = std::string(Image).substr(0, std::string(Image).find('.'));
    const std::string Line = Name + ": bad " + (Name == "vmx_bench" ? "iters= or " : "") +
                             "trace= in command line \"" + Cfg.Kernel + " " + Cfg.Append +
                             "\"";
    EXPECT_NE(Serial.find(Line), std::string::npos) << Serial;
    EXPECT_EQ(Serial.find("VMLAUNCH"), std::string::npos) << Serial;
  }
}
