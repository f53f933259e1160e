// `vmxsim trace import --ftrace` and `trace check` of the imported KVM trace
// (trace/ftrace_import.h, trace/check_kvm.h), on small ftrace text samples written for
// these tests (tests/trace/kvm_ftrace/): good.txt has the shapes of the KVM kit's real
// trace (I/O out and in, WRMSR, CPUID, MMIO through an EPT misconfiguration and an EPT
// violation, an interrupt window and the injection, a reinjection after an EPT violation
// in the IDT-vectoring phase, a MOV to CR0, HLT); its ground truth is built here, exit by
// exit, as vmxsim's recorder writes it. unknown.txt adds events the import does not know,
// wrong_clock.txt has the local clock's timestamps, malformed.txt a kvm_exit cut short.
#include "tests/support/files.h"
#include "tests/support/kvm_trace_mutation.h"
#include "trace/check_kvm.h"
#include "trace/dump.h"
#include "trace/events.h"
#include "trace/ftrace_import.h"
#include "trace/ground_truth.h"
#include "trace/reader.h"
#include "trace/summary.h"
#include "trace/writer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <unistd.h>

using namespace vmxsim;
using namespace vmxsim::trace;
using vmxsim::test::readFile;

namespace {

std::string sample(const char *Name) {
  return std::string(VMXSIM_SOURCE_DIR) + "/tests/trace/kvm_ftrace/" + Name;
}

FtraceImportResult import(const char *Name, std::vector<uint8_t> &Bytes) {
  MemoryOutput Out;
  FtraceImportResult R = importFtrace(readFile(sample(Name)), Name, Out);
  Bytes = Out.Bytes;
  return R;
}

/// good.txt's ground truth: the VM exits and entries KVM's events say happened, with the
/// exit information, addresses and registers vmxsim records.
std::vector<uint8_t> goodGroundTruth() {
  MemoryOutput Out;
  TraceWriter W(Out, 1);
  GroundTruthRecorder G(W);
  const uint32_t None[5] = {};
  struct Exit {
    uint64_t Tsc;
    uint32_t Reason;
    uint64_t Rip, Qual;
    uint32_t IdtVectoring = 0, AddrValid = 0;
    uint64_t Gpa = 0;
    uint64_t Regs[3] = {};
  };
  const auto exit = [&](const Exit &E) {
    const uint32_t Ev[5] = {0, 0, E.IdtVectoring, 0, 0};
    G.vmExit(0, E.Tsc, E.Reason, E.Rip, E.Qual, 1, E.IdtVectoring ? Ev : None, E.AddrValid,
             E.AddrValid & 1 ? E.Gpa : 0, E.Gpa, E.Regs);
  };
  const auto entry = [&](uint64_t Tsc, uint64_t Rip, uint32_t Inj = 0) {
    G.vmEntry(0, Tsc, Rip, Tsc == 1000, Inj, 0);
  };
  entry(1000, 0x0);
  exit({1100, 30, 0x5, 0x3f80000, 0, 0, 0, {0x41, 0, 0}}); // OUT 0x3f8, AL
  entry(1500, 0x6);
  exit({1600, 30, 0x9, 0x5010008, 0, 0, 0, {0, 0, 0x501}}); // IN AL, DX
  entry(2000, 0xa);
  exit({2100, 32, 0x71, 0, 0, 0, 0, {0x06040700, 0x277, 0x01050007}}); // WRMSR IA32_PAT
  entry(2300, 0x73);
  exit({2400, 10, 0x2a, 0, 0, 0, 0, {0, 0, 0}}); // CPUID leaf 0
  entry(2600, 0x2c);
  exit({2700, 49, 0x1a, 0, 0, 2, 0xd0004}); // EPT misconfiguration: the MMIO load
  entry(3000, 0x1f);
  exit({3100, 48, 0x10, 0x182, 0, 3, 0xd0000}); // EPT violation: the MMIO store
  entry(3400, 0x1a);
  exit({3500, 7, 0xcf, 0}); // interrupt window
  entry(3800, 0xcf, 0x80000020);
  exit({3900, 48, 0xcf, 0x181, 0x80000020, 3, 0x0}); // delivery reads the IVT
  entry(4200, 0xcf, 0x80000020);
  exit({4300, 28, 0xe0, 0x0, 0, 0, 0, {0x11, 0, 0}}); // MOV CR0, EAX
  entry(4500, 0xe3);
  exit({4600, 12, 0xd9, 0}); // HLT
  W.flush();
  return Out.Bytes;
}

KvmCheckResult check(const std::vector<uint8_t> &Kvm, const std::vector<uint8_t> &Gt) {
  return vmxsim::test::checkKvm(Kvm, Gt);
}

std::vector<TraceRecord> records(const std::vector<uint8_t> &Bytes) {
  return vmxsim::test::traceRecords(Bytes);
}

std::vector<uint8_t> rewrite(const std::vector<TraceRecord> &Recs) {
  return vmxsim::test::rewriteTrace(Recs);
}

/// "TSC NAME fields".
std::string recordText(const TraceRecord &R) {
  const std::string Fields = formatFields(R);
  return fmt::format("{} {}{}{}", R.Tsc, findEvent(R.Event)->Name, Fields.empty() ? "" : " ",
                     Fields);
}

} // namespace

TEST(FtraceImport, MapsEachKvmEventToItsRecords) {
  std::vector<uint8_t> Bytes;
  const FtraceImportResult R = import("good.txt", Bytes);
  ASSERT_EQ(R.Status, 0) << R.Problem;
  EXPECT_EQ(R.Events, 30u);
  EXPECT_EQ(R.Exits, 10u);
  EXPECT_EQ(R.Entries, 10u);
  EXPECT_EQ(R.Handlers, 10u);
  EXPECT_EQ(R.Unknown, 0u);
  EXPECT_EQ(R.Cpus, 1u);
  const std::vector<TraceRecord> Recs = records(Bytes);
  ASSERT_EQ(Recs.size(), 1u + 30u + 20u); // KVM_FTRACE, the events, the exit/entry infos
  const auto text = [&](size_t I) { return recordText(Recs[I]); };
  EXPECT_EQ(text(0), "0 KVM_FTRACE events=30 unknown=0 cpus=1");
  EXPECT_EQ(text(1), "900 VMENTRY");
  EXPECT_EQ(text(2), "900 KVM_ENTRY_INFO vcpu=0 rip=0x0 immediate_exit=0");
  EXPECT_EQ(text(3), "1150 VMX_EXIT64 reason=30(IoInstruction) rip=0x5");
  EXPECT_EQ(text(4), "1150 KVM_EXIT_INFO vcpu=0 info1=0x3f80000 info2=0x0 "
                     "intr_info=0x0 error_code=0x0");
  EXPECT_EQ(text(5), "1160 KVM_PIO write=1 port=0x3f8 size=1 count=1 val=0x41");
  EXPECT_EQ(text(10), "1900 KVM_PIO write=0 port=0x501 size=1 count=1 val=0x5a");
  EXPECT_EQ(text(15), "2160 KVM_MSR write=1 msr=0x277 value=0x105000706040700 gp=0");
  EXPECT_EQ(text(20), "2460 KVM_CPUID func=0x0 idx=0x0 eax=0x0 ebx=0x73786d76 "
                      "ecx=0x74696b4d edx=0x564b6d69 flags=0x1");
  EXPECT_EQ(text(25), "2760 KVM_MMIO type=0 len=4 gpa=0xd0004 val=0x0");
  EXPECT_EQ(text(26), "2900 KVM_MMIO type=1 len=4 gpa=0xd0004 val=0xcafef00d");
  EXPECT_EQ(text(36), "3700 KVM_INJ_VIRQ vector=0x20 soft=0 reinjected=0");
  EXPECT_EQ(text(38), "3750 KVM_ENTRY_INFO vcpu=0 rip=0xcf immediate_exit=1");
  EXPECT_EQ(text(40), "3950 KVM_EXIT_INFO vcpu=0 info1=0x181 info2=0x80000020 "
                      "intr_info=0x0 error_code=0x0");
  EXPECT_EQ(text(41), "4000 KVM_INJ_VIRQ vector=0x20 soft=0 reinjected=1");
  EXPECT_EQ(text(46), "4360 KVM_CR write=1 cr=0 value=0x11");
  EXPECT_EQ(text(49), "4650 VMX_EXIT64 reason=12(Hlt) rip=0xd9");
}

TEST(FtraceImport, CheckPairsEveryExitEntryAndHandlerEventWithTheGroundTruth) {
  std::vector<uint8_t> Kvm;
  ASSERT_EQ(import("good.txt", Kvm).Status, 0);
  const KvmCheckResult R = check(Kvm, goodGroundTruth());
  ASSERT_TRUE(R.Ok) << R.Problem;
  ASSERT_EQ(R.Cpus.size(), 1u);
  EXPECT_EQ(R.Cpus[0].Exits, 10u);
  EXPECT_EQ(R.Cpus[0].Entries, 10u);
  EXPECT_EQ(R.Cpus[0].Handlers, 10u);
  // kvm_exit 50 cycles after each VM exit; kvm_entry 100 before each VM entry (the first:
  // 100, the immediate-exit ones 50 and 100).
  EXPECT_EQ(R.Cpus[0].ExitLag.Min, 50u);
  EXPECT_EQ(R.Cpus[0].ExitLag.Max, 50u);
  EXPECT_EQ(R.Cpus[0].EntryLead.Min, 50u);
  EXPECT_EQ(R.Cpus[0].EntryLead.Max, 100u);
  std::FILE *F = std::tmpfile();
  printKvmCheck(R, F);
  std::rewind(F);
  char Line[512];
  ASSERT_TRUE(std::fgets(Line, sizeof Line, F));
  EXPECT_STREQ(Line, "match: 10 kvm_exit, 10 kvm_entry and 10 handler events on 1 CPU(s) agree "
                     "with the ground truth (51 KVM records, 29 ground-truth records, 0 "
                     "unknown events not checked)\n");
  std::fclose(F);
}

TEST(FtraceImport, SummaryCountsTheExitsPerReasonAndTheirPorts) {
  std::vector<uint8_t> Kvm;
  ASSERT_EQ(import("good.txt", Kvm).Status, 0);
  TraceReader Rd;
  Rd.openMemory(Kvm.data(), Kvm.size());
  const TraceSummary S = summarizeTrace(Rd);
  ASSERT_EQ(S.Cpus.size(), 1u);
  std::map<uint32_t, uint64_t> Exits;
  for (const ReasonRow &Row : S.Cpus[0].Reasons)
    Exits[Row.Reason] = Row.Exits;
  const std::map<uint32_t, uint64_t> Want = {{7, 1}, {10, 1}, {12, 1}, {28, 1},
                                             {30, 2}, {32, 1}, {48, 2}, {49, 1}};
  EXPECT_EQ(Exits, Want);
}

// Unknown events are kept in place as KVM_OTHER {line}, counted by name; the check counts
// them and checks the rest.
TEST(FtraceImport, UnknownEventsAreKeptCountedAndReported) {
  std::vector<uint8_t> Kvm;
  const FtraceImportResult R = import("unknown.txt", Kvm);
  ASSERT_EQ(R.Status, 0) << R.Problem;
  EXPECT_EQ(R.Events, 33u);
  EXPECT_EQ(R.Unknown, 3u);
  const std::map<std::string, uint64_t> Want = {{"kvm_fpu", 2}, {"kvm_userspace_exit", 1}};
  EXPECT_EQ(R.UnknownByName, Want);
  const std::vector<TraceRecord> Recs = records(Kvm);
  EXPECT_EQ(recordText(Recs[3]), "1000 KVM_OTHER line=15");
  std::FILE *F = std::tmpfile();
  printImport(R, F);
  std::rewind(F);
  std::string Text(4096, '\0');
  Text.resize(std::fread(Text.data(), 1, Text.size(), F));
  std::fclose(F);
  EXPECT_EQ(Text, "imported 33 events on 1 cpu(s): 10 kvm_exit, 10 kvm_entry, 10 handler "
                  "events, 3 unknown\n"
                  "  unknown event kvm_fpu x2 (kept as KVM_OTHER)\n"
                  "  unknown event kvm_userspace_exit x1 (kept as KVM_OTHER)\n");
  const KvmCheckResult C = check(Kvm, goodGroundTruth());
  ASSERT_TRUE(C.Ok) << C.Problem;
  EXPECT_EQ(C.Other, 3u);
}

TEST(FtraceImport, AClockOtherThanX86TscIsRefused) {
  std::vector<uint8_t> Kvm;
  const FtraceImportResult R = import("wrong_clock.txt", Kvm);
  EXPECT_EQ(R.Status, kImportWrongClock);
  EXPECT_EQ(R.Problem, "wrong_clock.txt: the trace's clock is local, not x86-tsc (the TSC): "
                       "its timestamps cannot be compared with the virtual TSC");
  EXPECT_TRUE(Kvm.empty());
  // No clock line at all: the clock is unknown, refused the same way.
  MemoryOutput Out;
  const FtraceImportResult N = importFtrace(
      "# tracer: nop\n  kvm-hello-1 [000] d..1. 900: kvm_entry: vcpu 0, rip 0x0\n", "x", Out);
  EXPECT_EQ(N.Status, kImportWrongClock);
  EXPECT_EQ(N.Problem, "x:2: an event before any '# vmxsim-kvm trace_clock: ...' line: the "
                       "trace does not say its clock (it must be x86-tsc)");
  // A clock line that says x86-tsc over timestamps in seconds.
  const FtraceImportResult S = importFtrace(
      "# trace_clock: [x86-tsc]\n  kvm-hello-1 [000] d..1. 0.000900: kvm_entry: vcpu 0, "
      "rip 0x0\n",
      "y", Out);
  EXPECT_EQ(S.Status, kImportWrongClock);
  EXPECT_EQ(S.Problem, "y:2: a timestamp in seconds: the trace's clock is not x86-tsc");
}

TEST(FtraceImport, MalformedLinesGiveOneLineWithTheLineNumber) {
  std::vector<uint8_t> Kvm;
  const FtraceImportResult R = import("malformed.txt", Kvm);
  EXPECT_EQ(R.Status, kImportBadInput);
  EXPECT_EQ(R.Problem, "malformed.txt:18: malformed kvm_exit fields: 'vcpu 0 reason "
                       "IO_INSTRUCTION rip 0x9 info1 0x0000000005010008'");
  EXPECT_TRUE(Kvm.empty());
  const std::pair<const char *, const char *> Bad[] = {
      {"garbage\n", "x:2: malformed event line: no [CPU] field"},
      {"  t-1 [000] d..1. 900 kvm_entry: vcpu 0, rip 0x0\n",
       "x:2: malformed event line: no timestamp"},
      {"  t-1 [000] d..1. 9x0: kvm_entry: vcpu 0, rip 0x0\n", "x:2: malformed timestamp '9x0'"},
      {"  t-1 [000] d..1. 900: kvm_exit: vcpu 0 reason NO_SUCH rip 0x0 info1 0x0 info2 0x0 "
       "intr_info 0x0 error_code 0x0\n",
       "x:2: malformed kvm_exit fields: 'vcpu 0 reason NO_SUCH rip 0x0 info1 0x0 info2 0x0 "
       "intr_info 0x0 error_code 0x0'"},
      {"  t-1 [000] d..1. 900: kvm_pio: pio_write at 0x10000000000 size 1 count 1 val 0x0\n",
       "x:2: malformed kvm_pio fields: 'pio_write at 0x10000000000 size 1 count 1 val 0x0'"},
      {"  t-1 [000] d..1. 900: kvm_inj_virq: IRQ 0x100\n",
       "x:2: malformed kvm_inj_virq fields: 'IRQ 0x100'"},
      {"  t-1 [000] d..1. 900: kvm_entry: vcpu 0, rip 0x0\n  t-1 [000] d..1. 899: kvm_entry: "
       "vcpu 0, rip 0x0\n",
       "x:3: the timestamp goes back on cpu 0"},
      {"  t-1 [999] d..1. 900: kvm_entry: vcpu 0, rip 0x0\n",
       "x:2: malformed event line: CPU number beyond 255"},
      {"# entries-in-buffer/entries-written: 10/12   #P:1\n",
       "x:2: ftrace lost 2 of 12 events (its ring buffer was overwritten: a larger "
       "buffer_size_kb)"},
      {"CPU:0 [LOST 7 EVENTS]\n",
       "x:2: ftrace lost events: 'CPU:0 [LOST 7 EVENTS]' (its ring buffer was overwritten: a "
       "larger buffer_size_kb)"},
      {"", "x: no events"},
  };
  for (const auto &[Body, Want] : Bad) {
    MemoryOutput Out;
    const FtraceImportResult B =
        importFtrace(std::string("# trace_clock: [x86-tsc]\n") + Body, "x", Out);
    EXPECT_EQ(B.Status, kImportBadInput) << Body;
    EXPECT_EQ(B.Problem, Want) << Body;
    EXPECT_TRUE(Out.Bytes.empty()) << Body;
  }
  // vmxsim-kvm's start line promises its end line: a file without it was cut.
  MemoryOutput Out;
  std::string Cut = readFile(sample("good.txt"));
  Cut.resize(Cut.find("# vmxsim-kvm trace end"));
  const FtraceImportResult C = importFtrace(Cut, "cut", Out);
  EXPECT_EQ(C.Status, kImportBadInput);
  EXPECT_EQ(C.Problem, "cut: no '# vmxsim-kvm trace end' line: the trace was cut short");
}

// Every single-bit change of the imported file is caught by `trace check` (status 1
// naming the record, or 2), except in the fields trace/check_kvm.cpp lists as free
// (kvmFreeFields()): a timestamp only while it stays inside its window.
TEST(FtraceImport, CheckCatchesEverySingleBitChangeOfTheImportedFile) {
  std::vector<uint8_t> Kvm;
  ASSERT_EQ(import("good.txt", Kvm).Status, 0);
  const std::vector<uint8_t> Gt = goodGroundTruth();
  ASSERT_TRUE(check(Kvm, Gt).Ok);
  const vmxsim::test::KvmMutationResult M =
      vmxsim::test::expectEveryCheckedBitCaught(Kvm, Gt, "good.txt");
  EXPECT_GT(M.Broken, 0u);
  EXPECT_GT(M.FreeTimestamps, 0u);
}

// A ground truth with one exit fewer, or the files swapped, are reported as such.
TEST(FtraceImport, CheckReportsAMissingExitAndSwappedFiles) {
  std::vector<uint8_t> Kvm;
  ASSERT_EQ(import("good.txt", Kvm).Status, 0);
  std::vector<uint8_t> Gt = goodGroundTruth();
  std::vector<TraceRecord> G = records(Gt);
  G.pop_back(); // the HLT exit
  const KvmCheckResult R = check(Kvm, rewrite(G));
  EXPECT_FALSE(R.Ok);
  EXPECT_EQ(R.Problem, "cpu0: VMX_EXIT64 reason=12(Hlt) rip=0xd9 at TSC 4650 (offset 0x494): "
                       "kvm_exit #10 has no VM exit in the ground truth");
  const KvmCheckResult S = check(Gt, Kvm);
  EXPECT_FALSE(S.Ok);
  EXPECT_TRUE(S.ReadError);
}

// A VM entry that injects an external interrupt needs its kvm_inj_virq (KVM 6.1 traces
// every such injection); kvm_msr's #GP flag must agree with the next entry's injection.
TEST(FtraceImport, CheckWantsAKvmInjVirqForEachInjectionAndTheMsrGpFlagAsInjected) {
  std::vector<uint8_t> Kvm;
  ASSERT_EQ(import("good.txt", Kvm).Status, 0);
  const std::vector<uint8_t> Gt = goodGroundTruth();
  std::vector<TraceRecord> Recs = records(Kvm);
  ASSERT_TRUE(check(rewrite(Recs), Gt).Ok);
  // Without the kvm_inj_virq records (KVM_FTRACE's count lowered to match).
  std::vector<TraceRecord> NoInj;
  for (const TraceRecord &R : Recs)
    if (R.Event != XT_EV_KvmInjVirq)
      NoInj.push_back(R);
  ASSERT_EQ(NoInj.size() + 2, Recs.size());
  NoInj[0].Words[0] -= 2;
  KvmCheckResult R = check(rewrite(NoInj), Gt);
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("its VM entry injects 0x80000020 (interruption information), with "
                           "no kvm_inj_virq before it"),
            std::string::npos)
      << R.Problem;
  // WRMSR of IA32_PAT said to have failed: its entry injects no #GP.
  for (TraceRecord &Rec : Recs)
    if (Rec.Event == XT_EV_KvmMsr)
      Rec.Words[4] = 1;
  R = check(rewrite(Recs), Gt);
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("kvm_msr said #GP 1, its VM entry injects 0x0"), std::string::npos)
      << R.Problem;
}
