// `vmxsim trace summary` (trace/summary.h): every number of hand-built hypervisor and
// ground-truth traces computed by hand, unclosed exits, a truncated file, the exact JSON
// and CSV of a tiny trace, and the command's status on bad files.
#include "trace_test_util.h"

#include "trace/summary.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>

using namespace vmxsim::trace;
using namespace vmxsim::trace::testing;

namespace {

/// Records written in per-CPU order; the bytes are one window per CPU unless flushCpu
/// cuts more.
struct Builder {
  explicit Builder(unsigned Cpus) : W(std::make_unique<TraceWriter>(Out, Cpus)) {}
  void timed(unsigned Cpu, uint32_t Ev, uint64_t Tsc, std::vector<uint32_t> Words = {}) {
    W->recordTsc(Cpu, Ev, Tsc, Words.data(), unsigned(Words.size()));
  }
  void untimed(unsigned Cpu, uint32_t Ev, std::vector<uint32_t> Words = {}) {
    W->record(Cpu, Ev, Words.data(), unsigned(Words.size()));
  }
  // Runstate change of d<Dom>v<Vcpu> (format doc, section 5).
  void runstate(unsigned Cpu, uint64_t Tsc, unsigned Old, unsigned New, uint32_t Dom,
                uint32_t Vcpu) {
    timed(Cpu, 0x00021001u | Old << 8 | New << 4, Tsc, {Dom << 16 | Vcpu});
  }
  void entry(unsigned Cpu, uint64_t Tsc) { timed(Cpu, XT_EV_VmEntry, Tsc); }
  void exit64(unsigned Cpu, uint64_t Tsc, uint32_t Reason) {
    timed(Cpu, XT_EV_VmxExit64, Tsc, {Reason, 0x81001000, 0xffffffff});
  }
  void exit32(unsigned Cpu, uint64_t Tsc, uint32_t Reason) {
    timed(Cpu, XT_EV_VmxExit, Tsc, {Reason, 0x1000});
  }
  void cpuid(unsigned Cpu) { untimed(Cpu, XT_EV_Cpuid, {1, 0, 2, 3, 4, 5}); }
  std::vector<uint8_t> bytes() {
    W.reset();
    return Out.Bytes;
  }
  MemoryOutput Out;
  std::unique_ptr<TraceWriter> W;
};

constexpr unsigned Running = 0, Runnable = 1, Blocked = 2;
constexpr uint32_t Idle = 32767;
constexpr uint32_t ExtInt = 1, Cpuid = 10, Hlt = 12, Io = 30, Rdmsr = 31, Wrmsr = 32;

TraceSummary summarize(const std::vector<uint8_t> &Bytes) {
  TraceReader R;
  R.openMemory(Bytes.data(), Bytes.size());
  return summarizeTrace(R);
}

void expectStats(const CycleStats &C, uint64_t Count, uint64_t Total, uint64_t Min,
                 uint64_t Median, uint64_t P99, uint64_t Max, double Avg) {
  EXPECT_EQ(C.Count, Count);
  EXPECT_EQ(C.Total, Total);
  EXPECT_EQ(C.Min, Min);
  EXPECT_EQ(C.Median, Median);
  EXPECT_EQ(C.P99, P99);
  EXPECT_EQ(C.Max, Max);
  EXPECT_DOUBLE_EQ(C.Avg, Avg);
}

void expectReason(const ReasonRow &R, uint32_t Reason, uint64_t Exits, double Share) {
  EXPECT_EQ(R.Reason, Reason);
  EXPECT_EQ(R.Exits, Exits);
  EXPECT_DOUBLE_EQ(R.Share, Share);
}

void expectAccess(const AccessRow &A, uint32_t Key, uint64_t Reads, uint64_t Writes,
                  uint64_t Cycles) {
  EXPECT_EQ(A.Key, Key);
  EXPECT_EQ(A.Reads, Reads);
  EXPECT_EQ(A.Writes, Writes);
  EXPECT_EQ(A.Cycles, Cycles);
}

// Two CPUs. CPU 0 runs d1v0: six closed exits, then an external interrupt after which
// d1v0 is switched out (that exit is never closed). CPU 1 runs d2v1, which blocks in
// HLT (exit 1300, closed by the entry at 1810 after the wake-up), then is preempted by
// d1v0 (migrated from CPU 0), which exits twice there.
std::vector<uint8_t> hypervisorTrace() {
  Builder B(2);
  // CPU 0, d1v0.
  B.runstate(0, 1000, Runnable, Running, 1, 0);
  B.entry(0, 1100);
  B.exit64(0, 1300, Cpuid); // 50 cycles; guest 1100..1300 = 200
  B.cpuid(0);
  B.entry(0, 1350);
  B.exit64(0, 1500, Io); // 120; guest 150
  B.untimed(0, XT_EV_IoportWrite, {0x3f8, 0x41});
  B.entry(0, 1620);
  B.exit64(0, 1700, Cpuid); // 90; guest 80
  B.cpuid(0);
  B.entry(0, 1790);
  B.exit64(0, 2000, Rdmsr); // 30; guest 210
  B.untimed(0, XT_EV_MsrRead, {0x1b, 0xfee00900, 0});
  B.entry(0, 2030);
  B.exit64(0, 2100, Io); // 300; guest 70
  B.untimed(0, XT_EV_IoportRead, {0x60, 0x1c});
  B.entry(0, 2400);
  B.exit64(0, 2500, Cpuid); // 10; guest 100
  B.cpuid(0);
  B.entry(0, 2510);
  B.exit64(0, 2590, ExtInt); // never closed; guest 80
  B.untimed(0, XT_EV_Intr, {0xf0});
  B.runstate(0, 2600, Running, Runnable, 1, 0);
  B.runstate(0, 2600, Runnable, Running, Idle, 0);
  // CPU 1, d2v1.
  B.runstate(1, 1000, Runnable, Running, 2, 1);
  B.entry(1, 1010);
  B.exit32(1, 1110, Wrmsr); // 40; guest 100
  B.untimed(1, XT_EV_MsrWrite, {0xc0000080, 0xd01, 0});
  B.entry(1, 1150);
  B.exit32(1, 1200, Io); // 60; guest 50
  B.untimed(1, XT_EV_IoportWrite, {0x3f8, 0x42});
  B.entry(1, 1260);
  B.exit32(1, 1300, Hlt); // 510; guest 40
  B.untimed(1, XT_EV_Hlt, {0});
  B.runstate(1, 1300, Running, Blocked, 2, 1);
  B.runstate(1, 1300, Runnable, Running, Idle, 1);
  B.runstate(1, 1800, Blocked, Runnable, 2, 1);
  B.runstate(1, 1800, Running, Runnable, Idle, 1);
  B.runstate(1, 1800, Runnable, Running, 2, 1);
  B.entry(1, 1810);
  B.exit32(1, 1900, Cpuid); // 25; guest 90
  B.cpuid(1);
  B.entry(1, 1925);
  B.exit32(1, 2700, ExtInt); // 20, d2v1's; guest 775 (d2v1)
  B.untimed(1, XT_EV_Intr, {0xef});
  B.runstate(1, 2700, Running, Runnable, 2, 1);
  B.runstate(1, 2700, Runnable, Running, 1, 0);
  B.entry(1, 2720);
  B.exit64(1, 2800, Cpuid); // d1v0 on CPU 1: 40; guest 80
  B.cpuid(1);
  B.entry(1, 2840);
  B.exit64(1, 2900, Io); // 60; guest 60
  B.untimed(1, XT_EV_IoportRead, {0x60, 0x1d});
  B.entry(1, 2960);
  return B.bytes();
}

} // namespace

TEST(VmExitSummary, CycleStatsUseNearestRank) {
  std::vector<uint64_t> S = {7, 1, 5, 3};
  // Sorted 1 3 5 7: median rank ceil(2) = 2 -> 3; p99 rank ceil(3.96) = 4 -> 7.
  expectStats(cycleStats(S), 4, 16, 1, 3, 7, 7, 4.0);
  std::vector<uint64_t> Many;
  for (uint64_t I = 1; I <= 200; ++I)
    Many.push_back(201 - I);
  // Ranks 100 and ceil(198) = 198.
  expectStats(cycleStats(Many), 200, 20100, 1, 100, 198, 200, 100.5);
  std::vector<uint64_t> None;
  expectStats(cycleStats(None), 0, 0, 0, 0, 0, 0, 0.0);
}

TEST(VmExitSummary, HypervisorTraceNumbersEqualHandComputedOnes) {
  const TraceSummary S = summarize(hypervisorTrace());
  EXPECT_EQ(S.Kind, TraceKind::Hypervisor);
  EXPECT_FALSE(S.Failed);
  EXPECT_EQ(S.Records, 54u);
  EXPECT_EQ(S.LostRecords, 0u);
  EXPECT_EQ(S.FirstTsc, 1000u);
  EXPECT_EQ(S.LastTsc, 2960u);
  ASSERT_EQ(S.Cpus.size(), 2u);
  ASSERT_EQ(S.Vcpus.size(), 2u);

  // CPU 0: CPUID 50 90 10; I/O 120 300; RDMSR 30; external interrupt unclosed.
  const ScopeSummary &C0 = S.Cpus[0];
  EXPECT_EQ(C0.Name, "cpu0");
  EXPECT_EQ(C0.Exits, 7u);
  EXPECT_EQ(C0.GuestCycles, 200u + 150 + 80 + 210 + 70 + 100 + 80);
  EXPECT_EQ(C0.HypervisorCycles, 600u);
  expectStats(C0.AllExits, 6, 600, 10, 50, 300, 300, 100.0);
  ASSERT_EQ(C0.Reasons.size(), 4u);
  expectReason(C0.Reasons[0], Cpuid, 3, 3.0 / 7);
  expectStats(C0.Reasons[0].Cycles, 3, 150, 10, 50, 90, 90, 50.0);
  expectReason(C0.Reasons[1], Io, 2, 2.0 / 7);
  expectStats(C0.Reasons[1].Cycles, 2, 420, 120, 120, 300, 300, 210.0);
  expectReason(C0.Reasons[2], ExtInt, 1, 1.0 / 7);
  expectStats(C0.Reasons[2].Cycles, 0, 0, 0, 0, 0, 0, 0.0);
  expectReason(C0.Reasons[3], Rdmsr, 1, 1.0 / 7);
  expectStats(C0.Reasons[3].Cycles, 1, 30, 30, 30, 30, 30, 30.0);
  ASSERT_EQ(C0.Ports.size(), 2u);
  expectAccess(C0.Ports[0], 0x60, 1, 0, 300);
  expectAccess(C0.Ports[1], 0x3f8, 0, 1, 120);
  ASSERT_EQ(C0.Msrs.size(), 1u);
  expectAccess(C0.Msrs[0], 0x1b, 1, 0, 30);

  // CPU 1: WRMSR 40, I/O 60 60, HLT 510, CPUID 25 40, external interrupt 20.
  const ScopeSummary &C1 = S.Cpus[1];
  EXPECT_EQ(C1.Name, "cpu1");
  EXPECT_EQ(C1.Exits, 7u);
  EXPECT_EQ(C1.GuestCycles, 100u + 50 + 40 + 90 + 775 + 80 + 60);
  EXPECT_EQ(C1.HypervisorCycles, 755u);
  // Sorted 20 25 40 40 60 60 510: ranks 4 and ceil(6.93) = 7.
  expectStats(C1.AllExits, 7, 755, 20, 40, 510, 510, 755.0 / 7);
  ASSERT_EQ(C1.Reasons.size(), 5u);
  expectReason(C1.Reasons[0], Cpuid, 2, 2.0 / 7);
  expectStats(C1.Reasons[0].Cycles, 2, 65, 25, 25, 40, 40, 32.5);
  expectReason(C1.Reasons[1], Io, 2, 2.0 / 7);
  expectStats(C1.Reasons[1].Cycles, 2, 120, 60, 60, 60, 60, 60.0);
  expectReason(C1.Reasons[2], ExtInt, 1, 1.0 / 7);
  expectStats(C1.Reasons[2].Cycles, 1, 20, 20, 20, 20, 20, 20.0);
  expectReason(C1.Reasons[3], Hlt, 1, 1.0 / 7);
  expectStats(C1.Reasons[3].Cycles, 1, 510, 510, 510, 510, 510, 510.0);
  expectReason(C1.Reasons[4], Wrmsr, 1, 1.0 / 7);
  expectStats(C1.Reasons[4].Cycles, 1, 40, 40, 40, 40, 40, 40.0);
  ASSERT_EQ(C1.Ports.size(), 2u);
  expectAccess(C1.Ports[0], 0x60, 1, 0, 60);
  expectAccess(C1.Ports[1], 0x3f8, 0, 1, 60);
  ASSERT_EQ(C1.Msrs.size(), 1u);
  expectAccess(C1.Msrs[0], 0xc0000080, 0, 1, 40);

  // d1v0: all of CPU 0 plus its two exits on CPU 1 (CPUID 40, I/O 60; guest 80 + 60).
  const ScopeSummary &V0 = S.Vcpus[0];
  EXPECT_EQ(V0.Name, "d1v0");
  EXPECT_EQ(V0.Exits, 9u);
  EXPECT_EQ(V0.GuestCycles, 890u + 80 + 60);
  EXPECT_EQ(V0.HypervisorCycles, 700u);
  // Sorted 10 30 40 50 60 90 120 300: ranks 4 and 8.
  expectStats(V0.AllExits, 8, 700, 10, 50, 300, 300, 87.5);
  ASSERT_EQ(V0.Reasons.size(), 4u);
  expectReason(V0.Reasons[0], Cpuid, 4, 4.0 / 9);
  expectStats(V0.Reasons[0].Cycles, 4, 190, 10, 40, 90, 90, 47.5);
  expectReason(V0.Reasons[1], Io, 3, 3.0 / 9);
  expectStats(V0.Reasons[1].Cycles, 3, 480, 60, 120, 300, 300, 160.0);
  expectReason(V0.Reasons[2], ExtInt, 1, 1.0 / 9);
  expectReason(V0.Reasons[3], Rdmsr, 1, 1.0 / 9);
  ASSERT_EQ(V0.Ports.size(), 2u);
  expectAccess(V0.Ports[0], 0x60, 2, 0, 360);
  expectAccess(V0.Ports[1], 0x3f8, 0, 1, 120);
  ASSERT_EQ(V0.Msrs.size(), 1u);
  expectAccess(V0.Msrs[0], 0x1b, 1, 0, 30);

  // d2v1: one exit of each of five reasons (ties in count go by reason number).
  const ScopeSummary &V1 = S.Vcpus[1];
  EXPECT_EQ(V1.Name, "d2v1");
  EXPECT_EQ(V1.Exits, 5u);
  EXPECT_EQ(V1.GuestCycles, 100u + 50 + 40 + 90 + 775);
  EXPECT_EQ(V1.HypervisorCycles, 655u);
  expectStats(V1.AllExits, 5, 655, 20, 40, 510, 510, 131.0);
  ASSERT_EQ(V1.Reasons.size(), 5u);
  const uint32_t Order[5] = {ExtInt, Cpuid, Hlt, Io, Wrmsr};
  for (unsigned I = 0; I < 5; ++I)
    expectReason(V1.Reasons[I], Order[I], 1, 0.2);
  expectStats(V1.Reasons[2].Cycles, 1, 510, 510, 510, 510, 510, 510.0);
  ASSERT_EQ(V1.Ports.size(), 1u);
  expectAccess(V1.Ports[0], 0x3f8, 0, 1, 60);
  ASSERT_EQ(V1.Msrs.size(), 1u);
  expectAccess(V1.Msrs[0], 0xc0000080, 0, 1, 40);
}

TEST(VmExitSummary, TopAccessesKeepsTheMostFrequentPorts) {
  Builder B(1);
  B.entry(0, 10);
  uint64_t T = 20;
  const uint32_t Ports[] = {0x70, 0x71, 0x71, 0x80, 0x71, 0x80};
  for (uint32_t P : Ports) {
    B.exit32(0, T, Io);
    B.untimed(0, XT_EV_IoportWrite, {P, 0});
    B.entry(0, T + 5);
    T += 10;
  }
  TraceReader R;
  const auto Bytes = B.bytes();
  R.openMemory(Bytes.data(), Bytes.size());
  SummaryOptions O;
  O.TopAccesses = 2;
  const TraceSummary S = summarizeTrace(R, O);
  ASSERT_EQ(S.Cpus.size(), 1u);
  ASSERT_EQ(S.Cpus[0].Ports.size(), 2u);
  expectAccess(S.Cpus[0].Ports[0], 0x71, 0, 3, 15);
  expectAccess(S.Cpus[0].Ports[1], 0x80, 0, 2, 10);
  EXPECT_EQ(S.Vcpus[0].Name, "d?v0"); // no runstate record: domain unknown
}

// Ground truth: GT_EXIT .. GT_RESUME / GT_VMENTRY / GT_VMENTRY_FAIL; ports from the I/O
// exit qualification (bits 31:16 port, bit 3 IN). The same numbers from the layout before
// the compact records (GT_VMEXIT .. GT_VMENTRY).
namespace {
void groundTruthSummary(bool Compact) {
  Builder B(2);
  std::map<unsigned, bool> AfterExit; // per CPU: a GT_RESUME may follow
  auto Exit = [&](unsigned Cpu, uint64_t Tsc, uint32_t Reason, uint64_t Qual) {
    if (Compact)
      B.timed(Cpu, XT_EV_GtExit, Tsc,
              {Reason, 0x1000, 0, 2, uint32_t(Qual), uint32_t(Qual >> 32)});
    else
      B.timed(Cpu, XT_EV_GtVmExit, Tsc,
              {Cpu, Reason, 0x1000, 0, uint32_t(Qual), uint32_t(Qual >> 32), 2});
    B.untimed(Cpu, XT_EV_GtVmExitEvent, {0, 0, 0, 0, 0});
    AfterExit[Cpu] = true;
  };
  auto Entry = [&](unsigned Cpu, uint64_t Tsc) {
    if (Compact && AfterExit[Cpu])
      B.timed(Cpu, XT_EV_GtResume, Tsc);
    else
      B.timed(Cpu, XT_EV_GtVmEntry, Tsc, {Cpu, 0x1000, 0, 0, 0, 0});
    AfterExit[Cpu] = false;
  };
  Entry(0, 100);
  Exit(0, 300, Io, 0x00700000); // OUT 0x70: 50; guest 200
  Entry(0, 350);
  Exit(0, 400, Io, 0x00710008); // IN 0x71: 80; guest 50
  Entry(0, 480);
  Exit(0, 500, Cpuid, 0); // closed by the failed entry: 20; guest 20
  B.timed(0, XT_EV_GtVmEntryFail, 520, {0, 2, 33, 3, 0, 0});
  Exit(0, 520, 0x80000021, 0); // entry failure, basic reason 33: 80; no guest time
  Entry(0, 600);
  Exit(0, 700, Io, 0x00700008); // IN 0x70, never closed; guest 100
  Entry(1, 150);
  Exit(1, 250, Hlt, 0); // 1000; guest 100
  Entry(1, 1250);
  const TraceSummary S = summarize(B.bytes());
  EXPECT_EQ(S.Kind, TraceKind::GroundTruth);
  EXPECT_EQ(S.Records, 19u);
  EXPECT_EQ(S.FirstTsc, 100u);
  EXPECT_EQ(S.LastTsc, 1250u);
  ASSERT_EQ(S.Cpus.size(), 2u);
  const ScopeSummary &C0 = S.Cpus[0];
  EXPECT_EQ(C0.Exits, 5u);
  EXPECT_EQ(C0.GuestCycles, 370u);
  EXPECT_EQ(C0.HypervisorCycles, 230u);
  expectStats(C0.AllExits, 4, 230, 20, 50, 80, 80, 57.5);
  ASSERT_EQ(C0.Reasons.size(), 3u);
  expectReason(C0.Reasons[0], Io, 3, 0.6);
  expectStats(C0.Reasons[0].Cycles, 2, 130, 50, 50, 80, 80, 65.0);
  expectReason(C0.Reasons[1], Cpuid, 1, 0.2);
  expectStats(C0.Reasons[1].Cycles, 1, 20, 20, 20, 20, 20, 20.0);
  expectReason(C0.Reasons[2], 33, 1, 0.2);
  expectStats(C0.Reasons[2].Cycles, 1, 80, 80, 80, 80, 80, 80.0);
  ASSERT_EQ(C0.Ports.size(), 2u);
  expectAccess(C0.Ports[0], 0x70, 1, 1, 50);
  expectAccess(C0.Ports[1], 0x71, 1, 0, 80);
  EXPECT_TRUE(C0.Msrs.empty());
  const ScopeSummary &C1 = S.Cpus[1];
  EXPECT_EQ(C1.Exits, 1u);
  EXPECT_EQ(C1.GuestCycles, 100u);
  EXPECT_EQ(C1.HypervisorCycles, 1000u);
  expectStats(C1.AllExits, 1, 1000, 1000, 1000, 1000, 1000, 1000.0);
  ASSERT_EQ(S.Vcpus.size(), 2u);
  EXPECT_EQ(S.Vcpus[0].Name, "v0");
  EXPECT_EQ(S.Vcpus[0].Exits, 5u);
  EXPECT_EQ(S.Vcpus[0].GuestCycles, 370u);
  EXPECT_EQ(S.Vcpus[1].Name, "v1");
  EXPECT_EQ(S.Vcpus[1].HypervisorCycles, 1000u);
}
} // namespace

TEST(VmExitSummary, GroundTruthTraceNumbersEqualHandComputedOnes) {
  for (const bool Compact : {false, true}) {
    SCOPED_TRACE(Compact ? "GT_EXIT, GT_RESUME" : "GT_VMEXIT, GT_VMENTRY");
    groundTruthSummary(Compact);
  }
}

TEST(VmExitSummary, UnclosedExitsAreCountedWithoutCycles) {
  Builder B(1);
  B.entry(0, 10);
  B.exit32(0, 20, Cpuid); // followed by another exit: never closed
  B.exit32(0, 30, Hlt);   // 15
  B.entry(0, 45);
  B.exit32(0, 50, Cpuid); // the trace ends
  const TraceSummary S = summarize(B.bytes());
  const ScopeSummary &C = S.Cpus[0];
  EXPECT_EQ(C.Exits, 3u);
  EXPECT_EQ(C.GuestCycles, 15u);
  EXPECT_EQ(C.HypervisorCycles, 15u);
  ASSERT_EQ(C.Reasons.size(), 2u);
  expectReason(C.Reasons[0], Cpuid, 2, 2.0 / 3);
  expectStats(C.Reasons[0].Cycles, 0, 0, 0, 0, 0, 0, 0.0);
  expectReason(C.Reasons[1], Hlt, 1, 1.0 / 3);
  expectStats(C.Reasons[1].Cycles, 1, 15, 15, 15, 15, 15, 15.0);
  expectStats(C.AllExits, 1, 15, 15, 15, 15, 15, 15.0);
}

// Window 1 (CPU 0, offset 0): entry 10, CPUID exit 20, entry 30; window 2 (offset 56):
// HLT exit 40 at 68, entry 100 at 88 — cut off by the end of the file at 96.
TEST(VmExitSummary, TruncatedFileSummarisesTheRecordsBeforeTheError) {
  Builder B(1);
  B.entry(0, 10);
  B.exit32(0, 20, Cpuid);
  B.entry(0, 30);
  B.W->flushCpu(0);
  B.exit32(0, 40, Hlt);
  B.entry(0, 100);
  std::vector<uint8_t> Bytes = B.bytes();
  ASSERT_EQ(Bytes.size(), 100u);
  Bytes.resize(96);
  const TraceSummary S = summarize(Bytes);
  EXPECT_TRUE(S.Failed);
  EXPECT_EQ(S.Error.Offset, 88u);
  EXPECT_EQ(S.Records, 4u);
  ASSERT_EQ(S.Cpus.size(), 1u);
  EXPECT_EQ(S.Cpus[0].Exits, 2u);
  EXPECT_EQ(S.Cpus[0].GuestCycles, 20u);
  EXPECT_EQ(S.Cpus[0].HypervisorCycles, 10u);
  expectStats(S.Cpus[0].AllExits, 1, 10, 10, 10, 10, 10, 10.0);
}

namespace {

std::vector<uint8_t> tinyTrace() {
  Builder B(1);
  B.runstate(0, 100, Runnable, Running, 1, 0);
  B.entry(0, 110);
  B.exit64(0, 150, Io);
  B.untimed(0, XT_EV_IoportWrite, {0x80, 0x12});
  B.entry(0, 175);
  return B.bytes();
}

std::string printed(const TraceSummary &S, SummaryFormat F) {
  char *Buf = nullptr;
  size_t Len = 0;
  std::FILE *Out = open_memstream(&Buf, &Len);
  printSummary(S, F, Out);
  std::fclose(Out);
  std::string Text(Buf, Len);
  std::free(Buf);
  return Text;
}

} // namespace

TEST(VmExitSummary, JsonOfATinyTraceIsExact) {
  const std::string Scope =
      R"({"name":"%s","exits":1,"guest_cycles":40,"hypervisor_cycles":25,)"
      R"("all_exits":{"count":1,"total":25,"avg":25,"min":25,"median":25,"p99":25,"max":25},)"
      R"("reasons":[{"reason":30,"name":"IoInstruction","exits":1,"share":1,)"
      R"("cycles":{"count":1,"total":25,"avg":25,"min":25,"median":25,"p99":25,"max":25}}],)"
      R"("ports":[{"port":128,"reads":0,"writes":1,"cycles":25}],"msrs":[]})";
  auto Named = [&](const char *Name) {
    std::string S = Scope;
    S.replace(S.find("%s"), 2, Name);
    return S;
  };
  EXPECT_EQ(printed(summarize(tinyTrace()), SummaryFormat::Json),
            R"({"kind":"hypervisor","records":5,"lost_records":0,"first_tsc":100,)"
            R"("last_tsc":175,"failed":false,"error":null,"cpus":[)" +
                Named("cpu0") + R"(],"vcpus":[)" + Named("d1v0") + "]}\n");
}

TEST(VmExitSummary, CsvOfATinyTraceIsExact) {
  EXPECT_EQ(printed(summarize(tinyTrace()), SummaryFormat::Csv),
            "scope,name,row,key,label,exits,share,count,total,avg,min,median,p99,max,reads,"
            "writes,guest_cycles,hypervisor_cycles\n"
            "cpu,cpu0,all,,,1,1,1,25,25,25,25,25,25,,,40,25\n"
            "cpu,cpu0,reason,30,IoInstruction,1,1,1,25,25,25,25,25,25,,,,\n"
            "cpu,cpu0,port,128,,,,,25,,,,,,0,1,,\n"
            "vcpu,d1v0,all,,,1,1,1,25,25,25,25,25,25,,,40,25\n"
            "vcpu,d1v0,reason,30,IoInstruction,1,1,1,25,25,25,25,25,25,,,,\n"
            "vcpu,d1v0,port,128,,,,,25,,,,,,0,1,,\n");
}

TEST(VmExitSummary, TextOfATinyTraceHasTheTables) {
  const std::string T = printed(summarize(tinyTrace()), SummaryFormat::Text);
  EXPECT_NE(T.find("Trace summary: hypervisor trace, 5 records, 0 lost, TSC 100..175 (75 cycles)"),
            std::string::npos)
      << T;
  EXPECT_NE(T.find("CPU cpu0: 1 exits; guest 40 cycles (61.54%), hypervisor 25 cycles (38.46%)"),
            std::string::npos)
      << T;
  EXPECT_NE(T.find("vCPU d1v0: 1 exits"), std::string::npos) << T;
  EXPECT_NE(T.find("30 IoInstruction"), std::string::npos) << T;
  EXPECT_NE(T.find("0x80"), std::string::npos) << T;
}

TEST(VmExitSummary, CommandOnATruncatedFilePrintsTheSummaryThenTheErrorAndFails) {
  std::vector<uint8_t> Bytes = tinyTrace();
  Bytes.resize(Bytes.size() - 4); // inside the last VMENTRY
  const std::string Path = std::string(VMXSIM_BINARY_DIR) + "/tests/trace_summary_truncated.xt";
  {
    std::ofstream Out(Path, std::ios::binary);
    Out.write(reinterpret_cast<const char *>(Bytes.data()), std::streamsize(Bytes.size()));
  }
  char *OutBuf = nullptr, *ErrBuf = nullptr;
  size_t OutLen = 0, ErrLen = 0;
  std::FILE *Out = open_memstream(&OutBuf, &OutLen), *Err = open_memstream(&ErrBuf, &ErrLen);
  EXPECT_EQ(traceSummaryCommand(Path, SummaryFormat::Csv, Out, Err), 2);
  std::fclose(Out);
  std::fclose(Err);
  const std::string OutText(OutBuf, OutLen), ErrText(ErrBuf, ErrLen);
  std::free(OutBuf);
  std::free(ErrBuf);
  // The exit is counted, never closed.
  EXPECT_NE(OutText.find("cpu,cpu0,reason,30,IoInstruction,1,1,0,0,0,0,0,0,0,,,,\n"),
            std::string::npos)
      << OutText;
  EXPECT_EQ(ErrText, "vmxsim: error: " + Path +
                         ": offset 0x4c: file ends inside a record (8 of its bytes present) in "
                         "the window of CPU 0 (window header at 0x0, 76 bytes announced)\n");
}

TEST(VmExitSummary, CommandOnAMissingFileFails) {
  std::FILE *Out = std::tmpfile(), *Err = std::tmpfile();
  EXPECT_EQ(traceSummaryCommand("/nonexistent/trace.xt", SummaryFormat::Text, Out, Err), 2);
  EXPECT_EQ(std::ftell(Out), 0);
  EXPECT_GT(std::ftell(Err), 0);
  std::fclose(Out);
  std::fclose(Err);
}
