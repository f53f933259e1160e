// The xen-3.0 trace flavour (docs/trace-flavours.md) on the reading side: the reader
// recognises it by the first word and decodes every item, merges CPUs by TSC, and stops
// at the first damaged record with its offset; summary, diff and the commands on it.
// The hypervisor core's own xen-3.0 traces are in tests/hvm/hypervisor_trace_test.cpp.
#include "trace_test_util.h"

#include "tests/support/files.h"
#include "trace/diff.h"
#include "trace/dump.h"
#include "trace/summary.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <utility>

using namespace vmxsim::trace;
using namespace vmxsim::trace::testing;

using vmxsim::test::readFile;

namespace {

std::vector<std::pair<unsigned, uint64_t>> cpuTscs(const std::vector<TraceRecord> &Recs) {
  std::vector<std::pair<unsigned, uint64_t>> V;
  for (const TraceRecord &R : Recs)
    V.emplace_back(R.Cpu, R.Tsc);
  return V;
}

std::string writeTemp(const std::string &Name, const std::vector<uint8_t> &Bytes) {
  const std::string Path = std::string(VMXSIM_BINARY_DIR) + "/tests/" + Name;
  std::ofstream Out(Path, std::ios::binary);
  Out.write(reinterpret_cast<const char *>(Bytes.data()), std::streamsize(Bytes.size()));
  return Path;
}

struct CommandResult {
  int Status = -1;
  std::string Out, Err;
};

CommandResult runVmxsim(const std::string &Args) {
  // One pair of output files per test: CTest runs the tests of this file in parallel.
  const std::string Base = std::string(VMXSIM_BINARY_DIR) + "/tests/trace_xen30_" +
                           ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const std::string Cmd = std::string(VMXSIM_BINARY_DIR) + "/vmxsim " + Args + " >" + Base +
                          ".out 2>" + Base + ".err";
  CommandResult R;
  const int Status = std::system(Cmd.c_str());
  if (WIFEXITED(Status))
    R.Status = WEXITSTATUS(Status);
  R.Out = readFile(Base + ".out");
  R.Err = readFile(Base + ".err");
  return R;
}

const ReasonRow *row(const ScopeSummary &S, uint32_t Reason) {
  for (const ReasonRow &R : S.Reasons)
    if (R.Reason == Reason)
      return &R;
  return nullptr;
}

} // namespace

TEST(TraceFlavours, Xen30FileIsRecognisedAndEveryItemDecoded) {
  const std::vector<uint8_t> File = xen30Trace();
  ASSERT_EQ(File.size(), 15u * XT30_FILE_RECORD_BYTES);
  TraceReader R(ReadOrder::File, 4096);
  R.openMemory(File.data(), File.size());
  std::vector<TraceRecord> Recs;
  TraceRecord Rec;
  while (R.next(Rec))
    Recs.push_back(Rec);
  ASSERT_FALSE(R.failed()) << R.error().str();
  EXPECT_EQ(R.flavour(), TraceFlavour::Xen30);
  ASSERT_EQ(Recs.size(), 15u);
  // The OUT's entry record: third in the file, at 2 * 60.
  const TraceRecord &Out = Recs[2];
  EXPECT_EQ(Out.Flavour, TraceFlavour::Xen30);
  EXPECT_EQ(Out.Offset, 120u);
  EXPECT_EQ(Out.Cpu, 0u);
  EXPECT_EQ(Out.Tsc, 1350u);
  EXPECT_TRUE(Out.HasTsc);
  EXPECT_EQ(Out.Event, 0x00081002u);
  EXPECT_EQ(Out.NumWords, 0u);
  const uint64_t Items[XT30_ITEMS] = {30, 0x3f8, 0, 1, 0x41};
  for (unsigned I = 0; I < XT30_ITEMS; ++I)
    EXPECT_EQ(Out.Items[I], Items[I]) << I;
  EXPECT_EQ(Recs[11].Items[4], 9u);
  EXPECT_EQ(Recs[9].Items[4], 0xffffffffffffffffull);
  EXPECT_EQ(R.lostRecords(), 2u);
  // File order is the order of the records in the file.
  EXPECT_EQ(cpuTscs(Recs), (std::vector<std::pair<unsigned, uint64_t>>{
                               {0, 1000}, {0, 1100}, {0, 1350}, {1, 1050}, {1, 1120},
                               {1, 1400}, {1, 1410}, {1, 1450}, {3, 1200}, {3, 1250},
                               {3, 1250}, {3, 1260}, {0, 1500}, {0, 1600}, {1, 1700}}));
}

TEST(TraceFlavours, Xen30CpusAreMergedByTsc) {
  const auto Recs = readAll(xen30Trace(), ReadOrder::Merged);
  EXPECT_EQ(cpuTscs(Recs), (std::vector<std::pair<unsigned, uint64_t>>{
                               {0, 1000}, {1, 1050}, {0, 1100}, {1, 1120}, {3, 1200},
                               {3, 1250}, {3, 1250}, {3, 1260}, {0, 1350}, {1, 1400},
                               {1, 1410}, {1, 1450}, {0, 1500}, {0, 1600}, {1, 1700}}));
  ASSERT_EQ(Recs.size(), 15u);
  EXPECT_EQ(Recs[5].Event, 0x00084567u); // same TSC, same CPU: file order
}

TEST(TraceFlavours, Xen30SummaryTakesReasonsAndPortsFromTheEntryRecord) {
  const std::vector<uint8_t> File = xen30Trace();
  TraceReader R;
  R.openMemory(File.data(), File.size());
  const TraceSummary S = summarizeTrace(R);
  EXPECT_FALSE(S.Failed);
  EXPECT_EQ(S.Flavour, TraceFlavour::Xen30);
  EXPECT_EQ(S.Kind, TraceKind::Hypervisor);
  EXPECT_EQ(S.Records, 15u);
  EXPECT_EQ(S.LostRecords, 2u);
  ASSERT_EQ(S.Cpus.size(), 3u);
  const ScopeSummary &C0 = S.Cpus[0], &C1 = S.Cpus[1], &C3 = S.Cpus[2];
  EXPECT_EQ(C0.Exits, 2u);
  ASSERT_TRUE(row(C0, 30) && row(C0, 10));
  EXPECT_EQ(row(C0, 30)->Cycles.Total, 250u); // 1350 - 1100
  EXPECT_EQ(row(C0, 10)->Cycles.Total, 100u); // 1600 - 1500
  EXPECT_EQ(C0.GuestCycles, (1100u - 1000u) + (1500u - 1350u));
  ASSERT_EQ(C0.Ports.size(), 1u);
  EXPECT_EQ(C0.Ports[0].Key, 0x3f8u);
  EXPECT_EQ(C0.Ports[0].Writes, 1u);
  EXPECT_EQ(C0.Ports[0].Reads, 0u);
  EXPECT_EQ(C0.Ports[0].Cycles, 250u);
  ASSERT_TRUE(row(C1, 28) && row(C1, 33));
  EXPECT_EQ(row(C1, 28)->Cycles.Total, 280u);
  EXPECT_EQ(row(C1, 33)->Cycles.Total, 250u); // entry failure 0x80000021: basic 33
  EXPECT_EQ(C3.Exits, 2u);
  ASSERT_TRUE(row(C3, kUnknownExitReason) && row(C3, 31));
  EXPECT_EQ(row(C3, kUnknownExitReason)->Exits, 1u);
  EXPECT_EQ(row(C3, kUnknownExitReason)->Cycles.Count, 0u);
  EXPECT_EQ(row(C3, 31)->Cycles.Total, 10u);
  ASSERT_EQ(C3.Msrs.size(), 1u);
  EXPECT_EQ(C3.Msrs[0].Key, 0xc0000103u);
  EXPECT_EQ(C3.Msrs[0].Reads, 1u);
  ASSERT_EQ(S.Vcpus.size(), 3u);
  EXPECT_EQ(S.Vcpus[0].Name, "d?v0");
}

TEST(TraceFlavours, Xen30SummaryTextEqualsGolden) {
  const std::string Path = writeTemp("trace_xen30_summary.xt", xen30Trace());
  const CommandResult R = runVmxsim("trace summary " + Path);
  EXPECT_EQ(R.Status, 0) << R.Err;
  EXPECT_EQ(R.Err, "");
  const std::string Golden = std::string(VMXSIM_SOURCE_DIR) + "/tests/trace/golden/xen30_summary.txt";
  if (std::getenv("VMXSIM_UPDATE_GOLDEN"))
    std::ofstream(Golden, std::ios::binary) << R.Out;
  else
    EXPECT_EQ(R.Out, readFile(Golden)) << "golden file " << Golden;
}

TEST(TraceFlavours, Xen30TruncatedFileEndsAtTheCutRecord) {
  std::vector<uint8_t> File = xen30Trace();
  File.resize(2 * XT30_FILE_RECORD_BYTES + 30);
  TraceError E;
  bool Failed = false;
  const auto Recs = readAll(File, ReadOrder::File, &E, &Failed);
  EXPECT_EQ(Recs.size(), 2u);
  ASSERT_TRUE(Failed);
  EXPECT_EQ(E.str(), "offset 0x78: file ends inside a xen-3.0 record (30 of 60 bytes present)");
}

TEST(TraceFlavours, Xen30RecordWithABadPcpuEndsTheTrace) {
  std::vector<uint8_t> File = xen30Trace();
  File[3 * XT30_FILE_RECORD_BYTES + 1] = 1; // pcpu 1 -> 0x101
  TraceError E;
  bool Failed = false;
  const auto Recs = readAll(File, ReadOrder::File, &E, &Failed);
  EXPECT_EQ(Recs.size(), 3u);
  ASSERT_TRUE(Failed);
  EXPECT_EQ(E.str(), "offset 0xb4: pcpu number 0x101 of a xen-3.0 record is outside 0..255");
}

TEST(TraceFlavours, Xen30RecordWithAWideIdOrAnEarlierTscEndsTheTrace) {
  std::vector<uint8_t> Wide = xen30Trace();
  Wide[XT30_FILE_RECORD_BYTES + 12 + 3] = 0x10; // id bit 28
  TraceError E;
  bool Failed = false;
  EXPECT_EQ(readAll(Wide, ReadOrder::File, &E, &Failed).size(), 1u);
  ASSERT_TRUE(Failed);
  EXPECT_EQ(E.str(), "offset 0x48: event id 0x10081001 of a xen-3.0 record of CPU 0 has bits "
                     "above 27 set");
  std::vector<uint8_t> Back;
  appendXen30(Back, 2, 500, XT30_EV_VmxVmexit, {0, 0, 0, 0, 0});
  appendXen30(Back, 2, 499, XT30_EV_VmxVmentry, {12, 9, 9, 9, 9});
  EXPECT_EQ(readAll(Back, ReadOrder::Merged, &E, &Failed).size(), 1u);
  ASSERT_TRUE(Failed);
  EXPECT_EQ(E.str(), "offset 0x40: TSC 0x1f3 of CPU 2 is lower than its previous TSC 0x1f4");
}

TEST(TraceFlavours, FileOfNeitherFlavourIsAnErrorAtOffsetZero) {
  std::vector<uint8_t> File = xen30Trace();
  File[0] = 0x00;
  File[1] = 0x01; // 0x100: one above the highest pcpu
  TraceError E;
  bool Failed = false;
  EXPECT_TRUE(readAll(File, ReadOrder::Merged, &E, &Failed).empty());
  ASSERT_TRUE(Failed);
  EXPECT_EQ(E.str(), "offset 0x0: neither trace flavour: the first word 0x00000100 is not a "
                     "TRACE_CPU_CHANGE header (0x2001f003, modern) nor a pcpu number below 256 "
                     "(xen-3.0)");
  // A modern file is never taken for xen-3.0, and the other way round.
  TraceReader M;
  const std::vector<uint8_t> Modern = everyShapeTrace();
  M.openMemory(Modern.data(), Modern.size());
  TraceRecord R;
  ASSERT_TRUE(M.next(R));
  EXPECT_EQ(M.flavour(), TraceFlavour::Modern);
  EXPECT_EQ(R.Flavour, TraceFlavour::Modern);
}

TEST(TraceFlavours, CommandsRefuseADamagedXen30FileWithOneLineAndStatus2) {
  std::vector<uint8_t> File = xen30Trace();
  File.resize(XT30_FILE_RECORD_BYTES + 59);
  const std::string Cut = writeTemp("trace_xen30_cut.xt", File);
  CommandResult R = runVmxsim("trace dump " + Cut);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Out, "CPU0 1000 +0 VMX_VMENTRY reason=0(ExceptionOrNmi) v1=0x0 v2=0x0 v3=0x0 "
                   "v4=0x0\n");
  EXPECT_EQ(R.Err, "vmxsim: error: " + Cut +
                       ": offset 0x3c: file ends inside a xen-3.0 record (59 of 60 bytes "
                       "present)\n");
  std::vector<uint8_t> Neither = xen30Trace();
  Neither[3] = 0x7f;
  const std::string Bad = writeTemp("trace_xen30_neither.xt", Neither);
  for (const char *Cmd : {"trace summary ", "trace dump ", "trace report -o /dev/null "}) {
    R = runVmxsim(Cmd + Bad);
    EXPECT_EQ(R.Status, 2) << Cmd;
    EXPECT_EQ(R.Err, "vmxsim: error: " + Bad +
                         ": offset 0x0: neither trace flavour: the first word 0x7f000000 is "
                         "not a TRACE_CPU_CHANGE header (0x2001f003, modern) nor a pcpu number "
                         "below 256 (xen-3.0)\n")
        << Cmd;
  }
}

TEST(TraceFlavours, DiffOfTwoFlavoursDivergesAtTheFirstRecord) {
  const std::vector<uint8_t> X = xen30Trace();
  std::vector<uint8_t> Modern;
  {
    MemoryOutput Out;
    TraceWriter W(Out, 1);
    W.recordTsc(0, XT_EV_VmEntry, 1000, nullptr, 0); // same id, TSC and (no) words
    W.flush();
    Modern = Out.Bytes;
  }
  DiffOptions O;
  TraceReader A, B;
  A.openMemory(Modern.data(), Modern.size());
  B.openMemory(X.data(), X.size());
  const RecordDiff D = diffRecords(A, B, O);
  EXPECT_TRUE(D.Diverged);
  EXPECT_EQ(D.First.Cpu, 0u);
  EXPECT_EQ(D.First.Index, 0u);
  // Itself: identical; one item changed: diverges there.
  std::vector<uint8_t> Y = X;
  Y[13 * XT30_FILE_RECORD_BYTES + 4 + 16 + 8] ^= 1; // CPU 0's CPUID entry, slot 1
  TraceReader C, E, F, G;
  C.openMemory(X.data(), X.size());
  E.openMemory(X.data(), X.size());
  EXPECT_FALSE(diffRecords(C, E, O).Diverged);
  F.openMemory(X.data(), X.size());
  G.openMemory(Y.data(), Y.size());
  const RecordDiff D2 = diffRecords(F, G, O);
  EXPECT_TRUE(D2.Diverged);
  EXPECT_EQ(D2.First.Cpu, 0u);
  EXPECT_EQ(D2.First.Index, 4u);
  EXPECT_EQ(D2.First.B.Rec.Items[1], 0u);
}

TEST(TraceFlavours, CheckRefusesAXen30FileAsGroundTruth) {
  const std::string Path = writeTemp("trace_xen30_as_gt.xt", xen30Trace());
  const CommandResult R = runVmxsim("trace check " + Path + " " + Path);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: the ground-truth file holds a hypervisor record "
                   "(CPU0 1000 +0 VMX_VMENTRY reason=0(ExceptionOrNmi) v1=0x0 v2=0x0 v3=0x0 "
                   "v4=0x0 at offset 0x0): it is a hypervisor's trace, not vmxsim's ground "
                   "truth (the order is: trace check HV GT)\n");
}
