// `trace check` catches every single-bit change of a real imported KVM trace (issue 16), as
// it does for the bundled core's (slot_check_mutation_test.cpp): the KVM kit's trace on
// two CPUs (tests/trace/golden/kvm_2cpu: KVM's ftrace output, its import and vmxsim's
// ground truth of the same boot, committed so that no minute-long Linux boot is needed
// here; the LinuxKvm test compares them with a fresh boot) is checked, then every bit of
// the imported file is flipped in turn and each mutant must be caught, with status 1
// naming the record or as a broken file (status 2), except the bits of the fields
// trace/check_kvm.cpp lists as free (kvmFreeFields(), with the reasons; a timestamp only
// while it stays inside its window). The catch rate is printed; below 100% of the checked
// bits fails.
#include "tests/support/files.h"
#include "tests/support/kvm_trace_mutation.h"
#include "trace/check_kvm.h"
#include "trace/ftrace_import.h"
#include "trace/gt_records.h"
#include "trace/reader.h"
#include "trace/writer.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using namespace vmxsim;

namespace {

std::string goldenPath(const char *Name) {
  return std::string(VMXSIM_SOURCE_DIR) + "/tests/trace/golden/kvm_2cpu/" + Name;
}

std::vector<uint8_t> golden(const char *Name) {
  const std::string S = vmxsim::test::readFile(goldenPath(Name));
  return std::vector<uint8_t>(S.begin(), S.end());
}

} // namespace

TEST(KvmCheckMutation, TheGoldenTwoCpuTraceIsItsImportAndChecksOut) {
  const std::vector<uint8_t> Kvm = golden("kvm.xt"), Gt = golden("gt.xt");
  ASSERT_FALSE(Kvm.empty());
  ASSERT_FALSE(Gt.empty());
  // kvm.xt is what the import makes of ftrace.txt today.
  trace::MemoryOutput Imported;
  const trace::FtraceImportResult I =
      trace::importFtrace(vmxsim::test::readFile(goldenPath("ftrace.txt")), "ftrace.txt",
                          Imported);
  ASSERT_EQ(I.Status, 0) << I.Problem;
  EXPECT_EQ(I.Events, 112u);
  EXPECT_EQ(Imported.Bytes, Kvm);
  const trace::KvmCheckResult C = vmxsim::test::checkKvm(Kvm, Gt);
  ASSERT_TRUE(C.Ok) << C.Problem;
  // Per CPU: {exits, entries, handler events} (docs/kvm-in-linux.md).
  std::map<unsigned, std::array<uint64_t, 3>> PerCpu;
  for (const trace::KvmCpuCheck &Cpu : C.Cpus)
    PerCpu[Cpu.Cpu] = {Cpu.Exits, Cpu.Entries, Cpu.Handlers};
  EXPECT_EQ(PerCpu, (std::map<unsigned, std::array<uint64_t, 3>>{{0, {33, 33, 25}},
                                                                 {1, {8, 8, 5}}}));
}

// gt-2026-12-02.xt is the same boot's ground truth as vmxsim wrote it before the compact
// transition records (GT_VMEXIT and GT_VMENTRY for every transition; trace/events.def,
// GT_EXIT and GT_RESUME): it holds the same transitions, record for record, and the
// imported trace checks against it exactly as against gt.xt.
TEST(KvmCheckMutation, TheGroundTruthOfTheLayoutBeforeChecksTheSame) {
  const std::vector<uint8_t> Kvm = golden("kvm.xt"), Gt = golden("gt.xt"),
                             Before = golden("gt-2026-12-02.xt");
  ASSERT_FALSE(Before.empty());
  /// Each transition as {TSC, reason or ~0 for an entry, RIP, qualification, launch,
  /// injected}, per CPU, and how many records of each of the two forms.
  struct Read {
    std::map<unsigned, std::vector<std::array<uint64_t, 6>>> Transitions;
    unsigned Compact = 0, Full = 0;
  };
  const auto read = [](const std::vector<uint8_t> &Bytes) {
    Read Out;
    trace::TraceReader R;
    R.openMemory(Bytes.data(), Bytes.size());
    trace::TraceRecord Rec;
    std::map<unsigned, uint64_t> ResumeRip;
    while (R.next(Rec)) {
      trace::GtExitFields X;
      trace::GtEntryFields E;
      if (trace::gtExitOf(Rec, X)) {
        Out.Transitions[Rec.Cpu].push_back({Rec.Tsc, X.Reason, X.Rip, X.Qual, 0, 0});
        ResumeRip[Rec.Cpu] = X.resumeRip();
      } else if (trace::gtEntryOf(Rec, ResumeRip[Rec.Cpu], E)) {
        Out.Transitions[Rec.Cpu].push_back({Rec.Tsc, ~0ull, E.Rip, 0, E.Launch, E.InjInfo});
      } else {
        continue;
      }
      (Rec.Event == XT_EV_GtExit || Rec.Event == XT_EV_GtResume ? Out.Compact : Out.Full)++;
    }
    EXPECT_FALSE(R.failed());
    return Out;
  };
  const Read New = read(Gt), Old = read(Before);
  EXPECT_EQ(New.Transitions, Old.Transitions);
  EXPECT_EQ(Old.Compact, 0u);
  EXPECT_GT(New.Compact, 0u);
  EXPECT_EQ(New.Compact + New.Full, Old.Full);
  EXPECT_LT(Gt.size(), Before.size());
  const trace::KvmCheckResult A = vmxsim::test::checkKvm(Kvm, Gt),
                              B = vmxsim::test::checkKvm(Kvm, Before);
  ASSERT_TRUE(A.Ok) << A.Problem;
  ASSERT_TRUE(B.Ok) << B.Problem;
  ASSERT_EQ(A.Cpus.size(), B.Cpus.size());
  for (size_t I = 0; I < A.Cpus.size(); ++I) {
    const trace::KvmCpuCheck &X = A.Cpus[I], &Y = B.Cpus[I];
    EXPECT_EQ(std::tie(X.Cpu, X.Exits, X.Entries, X.Handlers, X.ExitLag.Total,
                       X.EntryLead.Total),
              std::tie(Y.Cpu, Y.Exits, Y.Entries, Y.Handlers, Y.ExitLag.Total,
                       Y.EntryLead.Total));
  }
}

TEST(KvmCheckMutation, EveryCheckedBitOfTheGoldenTwoCpuTraceIsCaught) {
  const std::vector<uint8_t> Kvm = golden("kvm.xt"), Gt = golden("gt.xt");
  ASSERT_TRUE(vmxsim::test::checkKvm(Kvm, Gt).Ok);
  const vmxsim::test::KvmMutationResult M =
      vmxsim::test::expectEveryCheckedBitCaught(Kvm, Gt, "kvm_2cpu");
  EXPECT_GT(M.Checked, 2000u);
  EXPECT_GT(M.Broken, 0u);
}
