// `vmxsim trace diff` (trace/diff.h): the exact first divergence (CPU, index on that CPU,
// offsets in both files) of traces that differ in one record, in one TSC, in the order
// of two records on one CPU and in length; --ignore-tsc; distribution mode; statuses.
#include "trace_test_util.h"

#include "trace/diff.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

using namespace vmxsim::trace;
using namespace vmxsim::trace::testing;

namespace {

struct Rec {
  uint32_t Event;
  bool Timed;
  uint64_t Tsc;
  std::vector<uint32_t> Words;
};

/// One window per CPU, CPU 0 first.
std::vector<uint8_t> build(const std::vector<Rec> &Cpu0, const std::vector<Rec> &Cpu1) {
  MemoryOutput Out;
  {
    TraceWriter W(Out, 2);
    for (unsigned Cpu = 0; Cpu < 2; ++Cpu)
      for (const Rec &R : Cpu ? Cpu1 : Cpu0) {
        if (R.Timed)
          W.recordTsc(Cpu, R.Event, R.Tsc, R.Words.data(), unsigned(R.Words.size()));
        else
          W.record(Cpu, R.Event, R.Words.data(), unsigned(R.Words.size()));
      }
  }
  return Out.Bytes;
}

// Offsets: CPU 0's window header at 0, records at 12 24 48 76 88 112 124; CPU 1's header
// at 136, records at 148 160 184 192 204 228 256.
std::vector<Rec> baseCpu0() {
  return {{XT_EV_VmEntry, true, 100, {}},
          {XT_EV_VmxExit64, true, 200, {10, 0x1000, 0}},
          {XT_EV_Cpuid, false, 0, {1, 0, 2, 3, 4, 5}},
          {XT_EV_VmEntry, true, 260, {}},
          {XT_EV_VmxExit64, true, 300, {30, 0x1010, 0}},
          {XT_EV_IoportWrite, false, 0, {0x3f8, 0x41}},
          {XT_EV_VmEntry, true, 350, {}}};
}
std::vector<Rec> baseCpu1() {
  return {{XT_EV_VmEntry, true, 105, {}},
          {XT_EV_VmxExit64, true, 205, {12, 0x2000, 0}},
          {XT_EV_Hlt, false, 0, {0}},
          {XT_EV_VmEntry, true, 400, {}},
          {XT_EV_VmxExit64, true, 410, {10, 0x2010, 0}},
          {XT_EV_Cpuid, false, 0, {7, 0, 2, 3, 4, 5}},
          {XT_EV_VmEntry, true, 420, {}}};
}

RecordDiff diff(const std::vector<uint8_t> &A, const std::vector<uint8_t> &B,
                DiffOptions O = {}) {
  TraceReader RA, RB;
  RA.openMemory(A.data(), A.size());
  RB.openMemory(B.data(), B.size());
  return diffRecords(RA, RB, O);
}

void expectAt(const RecordDiff &D, uint16_t Cpu, uint64_t Index, int64_t OffA, int64_t OffB) {
  ASSERT_TRUE(D.Diverged);
  EXPECT_EQ(D.First.Cpu, Cpu);
  EXPECT_EQ(D.First.Index, Index);
  EXPECT_EQ(D.First.HaveA, OffA >= 0);
  EXPECT_EQ(D.First.HaveB, OffB >= 0);
  if (OffA >= 0) {
    EXPECT_EQ(D.First.A.Rec.Offset, uint64_t(OffA));
  }
  if (OffB >= 0) {
    EXPECT_EQ(D.First.B.Rec.Offset, uint64_t(OffB));
  }
}

std::string printed(const RecordDiff &D) {
  char *Buf = nullptr;
  size_t Len = 0;
  std::FILE *Out = open_memstream(&Buf, &Len);
  printRecordDiff(D, Out);
  std::fclose(Out);
  std::string Text(Buf, Len);
  std::free(Buf);
  return Text;
}

} // namespace

TEST(TraceDiff, IdenticalTracesAreIdentical) {
  const auto A = build(baseCpu0(), baseCpu1());
  const RecordDiff D = diff(A, A);
  EXPECT_FALSE(D.Diverged);
  EXPECT_EQ(D.RecordsA, 14u);
  EXPECT_EQ(printed(D), "identical (14 records)\n");
}

TEST(TraceDiff, OneDifferentRecordIsFoundWithItsContext) {
  auto Cpu1 = baseCpu1();
  Cpu1[5].Words[0] = 8; // CPUID leaf
  const RecordDiff D = diff(build(baseCpu0(), baseCpu1()), build(baseCpu0(), Cpu1));
  expectAt(D, 1, 5, 228, 228);
  ASSERT_EQ(D.First.ContextA.size(), 3u);
  EXPECT_EQ(D.First.ContextA[0].Rec.Offset, 184u);
  EXPECT_EQ(D.First.ContextA[2].Rec.Offset, 204u);
  EXPECT_EQ(D.First.ContextB[1].Rec.Offset, 192u);
  EXPECT_EQ(printed(D),
            "first divergence: CPU 1, record 5 of that CPU (A offset 0xe4, B offset 0xe4)\n"
            "the 3 equal records of CPU 1 before it:\n"
            "  A 0xb8: CPU1 205 - HLT pending=0\n"
            "  B 0xb8: CPU1 205 - HLT pending=0\n"
            "  A 0xc0: CPU1 400 +195 VMENTRY\n"
            "  B 0xc0: CPU1 400 +195 VMENTRY\n"
            "  A 0xcc: CPU1 410 +10 VMX_EXIT64 reason=10(Cpuid) rip=0x2010\n"
            "  B 0xcc: CPU1 410 +10 VMX_EXIT64 reason=10(Cpuid) rip=0x2010\n"
            "the records that differ:\n"
            "  A 0xe4: CPU1 410 - CPUID leaf=0x7 subleaf=0x0 eax=0x2 ebx=0x3 ecx=0x4 edx=0x5\n"
            "  B 0xe4: CPU1 410 - CPUID leaf=0x8 subleaf=0x0 eax=0x2 ebx=0x3 ecx=0x4 edx=0x5\n");
}

TEST(TraceDiff, OneDifferentTscIsFoundAndIgnoredWithIgnoreTsc) {
  auto Cpu0 = baseCpu0();
  Cpu0[3].Tsc = 261;
  const auto A = build(baseCpu0(), baseCpu1()), B = build(Cpu0, baseCpu1());
  expectAt(diff(A, B), 0, 3, 76, 76);
  DiffOptions O;
  O.IgnoreTsc = true;
  const RecordDiff D = diff(A, B, O);
  EXPECT_FALSE(D.Diverged);
  EXPECT_EQ(printed(D), "identical (14 records)\n");
}

// CPU 1's first record moves before CPU 0's: the merged order changes, the comparison of
// each CPU's records does not.
TEST(TraceDiff, TscThatChangesTheMergedOrderDivergesOnlyOnItsCpu) {
  auto Cpu1 = baseCpu1();
  Cpu1[0].Tsc = 99;
  const auto A = build(baseCpu0(), baseCpu1()), B = build(baseCpu0(), Cpu1);
  expectAt(diff(A, B), 1, 0, 148, 148);
  DiffOptions O;
  O.IgnoreTsc = true;
  EXPECT_FALSE(diff(A, B, O).Diverged);
}

// The CPUID exit and the I/O exit of CPU 0 swap places (the TSCs stay in order).
TEST(TraceDiff, TwoSwappedRecordsDivergeAtTheFirstOfThem) {
  auto Cpu0 = baseCpu0();
  std::swap(Cpu0[1].Words, Cpu0[4].Words);
  std::swap(Cpu0[2], Cpu0[5]);
  const RecordDiff D = diff(build(baseCpu0(), baseCpu1()), build(Cpu0, baseCpu1()));
  expectAt(D, 0, 1, 24, 24);
  ASSERT_EQ(D.First.ContextA.size(), 1u);
  EXPECT_EQ(D.First.ContextA[0].Rec.Offset, 12u);
}

TEST(TraceDiff, ShorterSecondFileEndsOnItsCpu) {
  auto Cpu1 = baseCpu1();
  Cpu1.pop_back();
  const RecordDiff D = diff(build(baseCpu0(), baseCpu1()), build(baseCpu0(), Cpu1));
  expectAt(D, 1, 6, 256, -1);
  EXPECT_EQ(D.First.CountB, 6u);
  const std::string T = printed(D);
  EXPECT_NE(T.find("first divergence: CPU 1, record 6 of that CPU (A offset 0x100, B offset "
                   "none: B ends after 6 records of CPU 1)\n"),
            std::string::npos)
      << T;
  EXPECT_NE(T.find("  B: ends (no record 6 of CPU 1)\n"), std::string::npos) << T;
}

TEST(TraceDiff, ShorterFirstFileEndsOnItsCpu) {
  auto Cpu0 = baseCpu0();
  Cpu0.resize(4);
  // B's CPU 0 window is 124 bytes as in the base: CPU 1's header at 136.
  const RecordDiff D = diff(build(Cpu0, baseCpu1()), build(baseCpu0(), baseCpu1()));
  expectAt(D, 0, 4, -1, 88);
  EXPECT_EQ(D.First.CountA, 4u);
}

TEST(TraceDiff, FileWithAnExtraCpuDivergesOnThatCpu) {
  const RecordDiff D = diff(build(baseCpu0(), {}), build(baseCpu0(), baseCpu1()));
  // A has no CPU 1: B's CPU 1 window header is at 136, its first record at 148.
  expectAt(D, 1, 0, -1, 148);
}

// Two divergences: CPU 1 at its record 1 (TSC 205, merged position 4 in A) and CPU 0 at
// its record 5 (merged position 8). The first in A's merged order is reported, although
// B's CPU 1 records come after all of CPU 0's in B's merged order (their TSCs moved).
TEST(TraceDiff, FirstDivergenceIsTheEarliestInMergedOrder) {
  auto Cpu0 = baseCpu0();
  Cpu0[5].Words[0] = 0x2f8;
  auto Cpu1 = baseCpu1();
  Cpu1[0].Tsc = 500;
  Cpu1[1] = {XT_EV_VmxExit64, true, 600, {18, 0x2000, 0}};
  Cpu1[3].Tsc = 700;
  Cpu1[4].Tsc = 710;
  Cpu1[6].Tsc = 720;
  const RecordDiff D = diff(build(baseCpu0(), baseCpu1()), build(Cpu0, Cpu1));
  expectAt(D, 1, 0, 148, 148); // CPU 1's first record already differs in TSC
  DiffOptions O;
  O.IgnoreTsc = true;
  expectAt(diff(build(baseCpu0(), baseCpu1()), build(Cpu0, Cpu1), O), 1, 1, 160, 160);
}

TEST(TraceDiff, IgnoreTscSkipsLostRecordsAndTimeWords) {
  auto Cpu0 = baseCpu0();
  auto Cpu0B = baseCpu0();
  Cpu0.insert(Cpu0.begin() + 1, {XT_EV_Rdtsc, false, 0, {0x1000, 0}});
  Cpu0B.insert(Cpu0B.begin() + 1, {XT_EV_Rdtsc, false, 0, {0x2345, 0}});
  Cpu0B.insert(Cpu0B.begin(), {XT_EV_LostRecords, true, 90, {3, 0x00000001, 80, 0}});
  const auto A = build(Cpu0, baseCpu1()), B = build(Cpu0B, baseCpu1());
  expectAt(diff(A, B), 0, 0, 12, 12);
  DiffOptions O;
  O.IgnoreTsc = true;
  const RecordDiff D = diff(A, B, O);
  EXPECT_FALSE(D.Diverged);
  EXPECT_EQ(D.RecordsA, 15u);
}

namespace {

std::vector<Rec> exitsOf(std::initializer_list<uint32_t> Reasons, uint64_t Start,
                         uint64_t Cycles) {
  std::vector<Rec> R;
  uint64_t T = Start;
  R.push_back({XT_EV_VmEntry, true, T, {}});
  for (uint32_t Reason : Reasons) {
    R.push_back({XT_EV_VmxExit64, true, T += 100, {Reason, 0x1000, 0}});
    R.push_back({XT_EV_VmEntry, true, T += Cycles, {}});
  }
  return R;
}

std::vector<DistributionDifference> distDiff(const std::vector<uint8_t> &A,
                                             const std::vector<uint8_t> &B, DiffOptions O) {
  TraceReader RA, RB;
  RA.openMemory(A.data(), A.size());
  RB.openMemory(B.data(), B.size());
  return diffDistributions(summarizeTrace(RA), summarizeTrace(RB), O);
}

} // namespace

TEST(TraceDiff, DistributionsEqualForTheSameExitsInAnotherOrder) {
  DiffOptions O;
  O.Distribution = true;
  const auto A = build(exitsOf({10, 30, 10}, 100, 50), exitsOf({12}, 100, 50));
  const auto B = build(exitsOf({30, 10, 10}, 1000, 50), exitsOf({12}, 10, 50));
  EXPECT_TRUE(distDiff(A, B, O).empty());
  EXPECT_TRUE(diff(A, B).Diverged); // record for record they differ
}

TEST(TraceDiff, DistributionsDifferForChangedCounts) {
  DiffOptions O;
  O.Distribution = true;
  const auto A = build(exitsOf({10, 30, 10}, 100, 50), exitsOf({12}, 100, 50));
  const auto B = build(exitsOf({10, 10, 10}, 100, 50), exitsOf({12}, 100, 50));
  const auto D = distDiff(A, B, O);
  ASSERT_EQ(D.size(), 4u);
  EXPECT_EQ(D[0].Scope, "cpu0");
  EXPECT_EQ(D[0].Reason, 10u);
  EXPECT_EQ(D[0].Field, "exits");
  EXPECT_EQ(D[0].A, 2);
  EXPECT_EQ(D[0].B, 3);
  EXPECT_EQ(D[1].Scope, "cpu0");
  EXPECT_EQ(D[1].Reason, 30u);
  EXPECT_EQ(D[1].A, 1);
  EXPECT_EQ(D[1].B, 0);
  EXPECT_EQ(D[2].Scope, "d?v0"); // the same for the vCPU
  EXPECT_EQ(D[3].Scope, "d?v0");
}

TEST(TraceDiff, DistributionCyclesCompareWithinTheTolerance) {
  DiffOptions O;
  O.Distribution = true;
  const auto A = build(exitsOf({10, 10}, 100, 100), {});
  const auto B = build(exitsOf({10, 10}, 100, 110), {});
  EXPECT_TRUE(distDiff(A, B, O).empty()); // counts only
  O.Tolerance = 0.2;
  EXPECT_TRUE(distDiff(A, B, O).empty());
  O.Tolerance = 0.05;
  const auto D = distDiff(A, B, O);
  ASSERT_EQ(D.size(), 6u); // avg, median, p99 for cpu0 and d?v0
  EXPECT_EQ(D[0].Field, "avg");
  EXPECT_EQ(D[0].A, 100);
  EXPECT_EQ(D[0].B, 110);
  EXPECT_EQ(D[1].Field, "median");
  EXPECT_EQ(D[2].Field, "p99");
}

TEST(TraceDiff, CommandStatusIsZeroOneOrTwo) {
  const std::string Dir = std::string(VMXSIM_BINARY_DIR) + "/tests/";
  auto Write = [&](const std::string &Name, const std::vector<uint8_t> &Bytes) {
    std::ofstream Out(Dir + Name, std::ios::binary);
    Out.write(reinterpret_cast<const char *>(Bytes.data()), std::streamsize(Bytes.size()));
    return Dir + Name;
  };
  auto Cpu1 = baseCpu1();
  Cpu1[2].Words[0] = 1;
  const std::string A = Write("trace_diff_a.xt", build(baseCpu0(), baseCpu1()));
  const std::string B = Write("trace_diff_b.xt", build(baseCpu0(), Cpu1));
  auto Truncated = build(baseCpu0(), baseCpu1());
  Truncated.resize(100);
  const std::string C = Write("trace_diff_c.xt", Truncated);
  std::FILE *Out = std::tmpfile(), *Err = std::tmpfile();
  DiffOptions O;
  EXPECT_EQ(traceDiffCommand(A, A, O, Out, Err), 0);
  EXPECT_EQ(traceDiffCommand(A, B, O, Out, Err), 1);
  EXPECT_EQ(std::ftell(Err), 0);
  EXPECT_EQ(traceDiffCommand(A, C, O, Out, Err), 2);
  EXPECT_GT(std::ftell(Err), 0);
  EXPECT_EQ(traceDiffCommand(A, Dir + "no_such_trace.xt", O, Out, Err), 2);
  O.Distribution = true;
  EXPECT_EQ(traceDiffCommand(A, A, O, Out, Err), 0);
  EXPECT_EQ(traceDiffCommand(A, B, O, Out, Err), 0); // same exits
  std::fclose(Out);
  std::fclose(Err);
}
