// The hv image's trace leaving the machine through its serial console (tstream=uart: the
// UART stream of trace/tbuf.h, what it does with tstream=auto on Bochs, QEMU/KVM or
// hardware), rebuilt by `trace import CAPTURE` (trace/stream_import.h) and checked against
// vmxsim's ground truth of the same run: in both trace flavours, on 2 CPUs. Then the
// capture damaged: a changed character, a lost line, a cut line, no frames at all.
#include "harness/machine.h"
#include "tests/support/traced_run.h"
#include "trace/check.h"
#include "trace/diff.h"
#include "trace/summary.h"
#include "trace/reader.h"
#include "trace/stream_import.h"
#include "trace/tbuf.h"
#include "trace/writer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>

using namespace vmxsim;
using namespace vmxsim::trace;

namespace {

std::string writeTemp(const std::string &Name, const std::vector<uint8_t> &Bytes) {
  const std::string Path = vmxsim::test::tracedTempPath("stream", Name);
  std::ofstream(Path, std::ios::binary)
      .write(reinterpret_cast<const char *>(Bytes.data()), std::streamsize(Bytes.size()));
  return Path;
}

/// Imports Capture and checks the result against the ground truth file Gt.
CheckResult importAndCheck(const std::string &Capture, const std::string &Gt,
                           StreamImportResult &R) {
  MemoryOutput Out;
  R = importStream(Capture, Out);
  const std::string Hv = writeTemp("imported.xt", Out.Bytes);
  TraceReader H, G;
  std::string Why;
  EXPECT_TRUE(H.open(Hv, Why)) << Why;
  EXPECT_TRUE(G.open(Gt, Why)) << Why;
  CheckResult C = checkAgainstGroundTruth(H, G);
  std::remove(Hv.c_str());
  return C;
}

size_t countFrames(const std::string &S) {
  size_t N = 0;
  for (size_t P = S.find(XT_STREAM_MAGIC); P != std::string::npos;
       P = S.find(XT_STREAM_MAGIC, P + 1))
    ++N;
  return N;
}

} // namespace

TEST(HvTraceStream, MixedStreamedThroughTheUartIsImportedAndMatchesTheGroundTruth) {
  for (const char *Flavour : {"modern", "xen-3.0"}) {
    SCOPED_TRACE(Flavour);
    vmxsim::test::TracedRun T = vmxsim::test::runTraced(
        "hv.elf", std::string("scenario=mixed tstream=uart trace=") + Flavour, 2, 50'000'000,
        std::string("stream-") + Flavour);
    ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
    EXPECT_EQ(T.Result.ExitValue, 0u) << T.Serial;
    EXPECT_NE(T.Serial.find("hv: PASS\n"), std::string::npos);
    StreamImportResult R;
    const CheckResult C = importAndCheck(T.Serial, T.Gt, R);
    EXPECT_EQ(R.Status, 0);
    EXPECT_TRUE(R.Problems.empty()) << R.Problems.front();
    EXPECT_EQ(R.Cpus, 2u);
    EXPECT_EQ(R.Frames, countFrames(T.Serial));
    EXPECT_TRUE(C.Ok) << C.Problem;
    ASSERT_EQ(C.Cpus.size(), 2u);
    for (const CpuCheck &P : C.Cpus) {
      EXPECT_EQ(P.Exits, 173u);
      EXPECT_EQ(P.Entries, 173u);
    }
    vmxsim::test::removeTraceFiles(T);
  }
}

TEST(HvTraceStream, DamagedCapturesKeepEveryGoodFrameAndSayWhereTheyWereDamaged) {
  vmxsim::test::TracedRun T = vmxsim::test::runTraced(
      "hv.elf", "scenario=mixed tstream=uart", 2, 50'000'000, "stream-damage");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  const std::string Good = T.Serial;
  const size_t Frames = countFrames(Good);
  ASSERT_GT(Frames, 10u);
  // The fifth frame: one payload character changed.
  size_t Fifth = 0;
  for (int I = 0; I < 5; ++I)
    Fifth = Good.find(XT_STREAM_MAGIC, I ? Fifth + 1 : 0);
  const size_t EndOfFifth = Good.find('\n', Fifth);
  {
    std::string Bad = Good;
    const size_t At = Fifth + 20;
    Bad[At] = Bad[At] == '0' ? '1' : '0';
    StreamImportResult R;
    const CheckResult C = importAndCheck(Bad, T.Gt, R);
    EXPECT_EQ(R.Status, 2);
    EXPECT_EQ(R.Frames, Frames - 1);
    ASSERT_EQ(R.Problems.size(), 2u);
    EXPECT_EQ(R.Problems[0].rfind(fmt::format("offset {:#x}: damaged frame: its checksum is ",
                                              Fifth), 0), 0u) << R.Problems[0];
    EXPECT_NE(R.Problems[1].find("are missing"), std::string::npos) << R.Problems[1];
    EXPECT_FALSE(C.Ok); // the records of that frame are gone: the check says so
  }
  {
    // The fifth frame's line lost.
    std::string Bad = Good;
    Bad.erase(Fifth, EndOfFifth + 1 - Fifth);
    StreamImportResult R;
    importAndCheck(Bad, T.Gt, R);
    EXPECT_EQ(R.Status, 2);
    EXPECT_EQ(R.Frames, Frames - 1);
    ASSERT_EQ(R.Problems.size(), 1u);
    EXPECT_NE(R.Problems[0].find("are missing"), std::string::npos) << R.Problems[0];
  }
  {
    // The capture cut in the middle of the last frame.
    const size_t Last = Good.rfind(XT_STREAM_MAGIC);
    StreamImportResult R;
    importAndCheck(Good.substr(0, Last + 40), T.Gt, R);
    EXPECT_EQ(R.Status, 2);
    EXPECT_EQ(R.Frames, Frames - 1);
    ASSERT_EQ(R.Problems.size(), 1u);
    EXPECT_EQ(R.Problems[0].rfind(fmt::format("offset {:#x}: damaged frame: ", Last), 0), 0u)
        << R.Problems[0];
  }
  {
    MemoryOutput Out;
    const StreamImportResult R = importStream("hv: PASS\n", Out);
    EXPECT_EQ(R.Status, 2);
    EXPECT_EQ(R.Frames, 0u);
    EXPECT_TRUE(Out.Bytes.empty());
  }
  vmxsim::test::removeTraceFiles(T);
}

// Random damage, seeded: whatever a serial line does to a capture, the import answers
// 0 or 2, never crashes, and keeps at most the frames the capture had.
TEST(HvTraceStream, RandomlyDamagedCapturesNeverCrashTheImport) {
  vmxsim::test::TracedRun T = vmxsim::test::runTraced("hv.elf", "scenario=io tstream=uart", 2,
                                                      50'000'000, "stream-fuzz");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  const std::string Good = T.Serial;
  const size_t Frames = countFrames(Good);
  uint64_t Seed = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    Seed ^= Seed << 13;
    Seed ^= Seed >> 7;
    Seed ^= Seed << 17;
    return Seed;
  };
  unsigned Clean = 0;
  for (int I = 0; I < 2000; ++I) {
    std::string Bad = Good;
    for (int K = 0, N = int(next() % 4) + 1; K < N; ++K) {
      const size_t At = next() % Bad.size();
      switch (next() % 3) {
      case 0:
        Bad[At] = char(next());
        break;
      case 1:
        Bad.erase(At, next() % 64);
        break;
      default:
        Bad.insert(At, std::string(next() % 8, char(next())));
      }
    }
    MemoryOutput Out;
    const StreamImportResult R = importStream(Bad, Out);
    ASSERT_TRUE(R.Status == 0 || R.Status == 2);
    ASSERT_LE(R.Frames, Frames);
    Clean += R.Status == 0;
  }
  // Some damage falls outside the frames (the console's text): those imports are clean.
  EXPECT_GT(Clean, 0u);
  EXPECT_LT(Clean, 2000u);
  vmxsim::test::removeTraceFiles(T);
}

// A capture of Bochs 2.7 running the same image (tests/hvm/golden/bochs_hv_mixed_2cpu.txt,
// tstream=auto: Bochs has no drain): imported cleanly, every CPU passes with the exit mix
// vmxsim's run has, except the exits that depend on how time passes on each machine:
// time slices (52) and the interrupt window (7: on Bochs the interrupt armed 3,000 cycles
// ahead arrives after the IF = 0 loop, when it can be injected at once).
TEST(HvTraceStream, BochsCaptureOfMixedImportsWithVmxsimsExitMix) {
  const std::string Path =
      std::string(VMXSIM_SOURCE_DIR) + "/tests/hvm/golden/bochs_hv_mixed_2cpu.txt";
  std::ifstream F(Path, std::ios::binary);
  ASSERT_TRUE(F) << Path;
  const std::string Capture((std::istreambuf_iterator<char>(F)), std::istreambuf_iterator<char>());
  EXPECT_NE(Capture.find("hv: PASS\n"), std::string::npos);
  MemoryOutput Out;
  const StreamImportResult R = importStream(Capture, Out);
  EXPECT_EQ(R.Status, 0);
  EXPECT_EQ(R.Cpus, 2u);
  EXPECT_EQ(R.Frames, 102u);
  const std::string Bochs = writeTemp("bochs.xt", Out.Bytes);
  vmxsim::test::TracedRun T =
      vmxsim::test::runTraced("hv.elf", "scenario=mixed", 2, 50'000'000, "stream-vs-bochs");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  TraceReader A, B;
  std::string Why;
  ASSERT_TRUE(A.open(T.Hv, Why)) << Why;
  ASSERT_TRUE(B.open(Bochs, Why)) << Why;
  const TraceSummary SA = summarizeTrace(A), SB = summarizeTrace(B);
  std::vector<std::string> Differences;
  for (const DistributionDifference &D : diffDistributions(SA, SB, DiffOptions{}))
    if (D.Reason != 52 && D.Reason != 7)
      Differences.push_back(fmt::format("{} reason {}: {} vs {}", D.Scope, D.Reason, D.A, D.B));
  EXPECT_TRUE(Differences.empty()) << Differences.front();
  ASSERT_EQ(SB.Cpus.size(), 2u);
  for (const ScopeSummary &S : SB.Cpus)
    EXPECT_EQ(S.Exits, 170u) << S.Name;
  // trace diff --cycles: a row per scope and reason, Bochs' mean beside vmxsim's.
  std::FILE *Tmp = std::tmpfile();
  ASSERT_NE(Tmp, nullptr);
  printCyclesView(SA, SB, Tmp);
  std::rewind(Tmp);
  std::string View;
  for (int C; (C = std::fgetc(Tmp)) != EOF;)
    View += char(C);
  std::fclose(Tmp);
  EXPECT_NE(View.find("  cpu0   48 EptViolation                          72       72 "),
            std::string::npos)
      << View;
  EXPECT_NE(View.find("  cpu1   7 InterruptWindow                         1        0 "),
            std::string::npos)
      << View;
  std::remove(Bochs.c_str());
  vmxsim::test::removeTraceFiles(T);
}

// A tstream= value the image does not know: one line and status 1, nothing run.
TEST(HvTraceStream, UnknownStreamModePrintsOneLineAndFails) {
  vmxsim::test::TracedRun T =
      vmxsim::test::runTraced("hv.elf", "tstream=serial", 1, 50'000'000, "stream-bogus");
  ASSERT_EQ(T.Result.Reason, RunReason::GuestExit) << T.Result.describe();
  EXPECT_EQ(T.Result.ExitValue, 1u);
  // The Multiboot command line starts with the image's path, as QEMU's does.
  EXPECT_EQ(T.Serial, std::string("hv: bad tstream= in command line \"") + VMXSIM_IMAGE_DIR +
                          "/hv.elf tstream=serial\" (off, auto or uart)\n");
  vmxsim::test::removeTraceFiles(T);
}
