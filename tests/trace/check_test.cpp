// `vmxsim trace check` (trace/check.h): a hypervisor's trace paired with the ground
// truth record by record. Hand-built traces: one that agrees (exact lags and leads),
// then one disagreement each — reason, RIP, a TSC on the wrong side, a missing or an
// extra exit, a handler record that contradicts the exit qualification, lost records,
// a truncated file.
#include "trace/check.h"
#include "trace/writer.h"

#include <gtest/gtest.h>

#include <array>

using namespace vmxsim::trace;

namespace {

struct Exit {
  uint64_t GtExit, HvExit, HvEntry, GtEntry;
  uint32_t Reason;
  uint64_t Rip, Qual;
};

/// An OUT to port 0x80 (I/O exit, qualification 0x800000) and a CPUID exit on CPU 1.
std::vector<Exit> twoExits() {
  return {{1000, 1300, 1800, 2000, 30, 0xffffffff81000010, 0x00800000},
          {3000, 3250, 3700, 3710, 10, 0xffffffff81000020, 0}};
}

struct Traces {
  std::vector<uint8_t> Hv, Gt;
};

/// Builds both traces of exits E on CPU 1, with a launch entry at 100 (GT) / 90 (HV).
/// Mutate(I, HvWords) may change the I-th exit's hypervisor words.
/// Regs: each exit's GT_VMEXIT_REGS {rax, rcx, rdx} (none when empty). LostBefore /
/// LostAfter: a LOST_RECORDS right before / after that exit's VMX_EXIT64 (-1: none).
/// Compact: the ground truth's exits as GT_EXIT and its entries after them as GT_RESUME
/// (what vmxsim writes since 2026-12-03; trace/events.def), else GT_VMEXIT and GT_VMENTRY.
Traces build(const std::vector<Exit> &E, bool HandlerRecords = true,
             uint32_t IoPort = 0x80, const std::vector<std::array<uint64_t, 3>> &Regs = {},
             int LostBefore = -1, int LostAfter = -1, bool Compact = false) {
  MemoryOutput HvOut, GtOut;
  {
    TraceWriter Hv(HvOut, 2), Gt(GtOut, 2);
    Hv.recordTsc(1, XT_EV_RunstateRunnableToRunning, 80, {0x10001u});
    Hv.recordTsc(1, XT_EV_VmEntry, 90, nullptr, 0);
    Gt.recordTsc(1, XT_EV_GtVmEntry, 100, {1u, 0x81000000u, 0xffffffffu, 1u, 0u, 0u});
    for (size_t I = 0; I < E.size(); ++I) {
      const Exit &X = E[I];
      if (Compact)
        Gt.recordTsc(1, XT_EV_GtExit, X.GtExit,
                     {X.Reason, uint32_t(X.Rip), uint32_t(X.Rip >> 32), 2u, uint32_t(X.Qual),
                      uint32_t(X.Qual >> 32)});
      else
        Gt.recordTsc(1, XT_EV_GtVmExit, X.GtExit,
                     {1u, X.Reason, uint32_t(X.Rip), uint32_t(X.Rip >> 32), uint32_t(X.Qual),
                      uint32_t(X.Qual >> 32), 2u});
      Gt.record(1, XT_EV_GtVmExitEvent, {0u, 0u, 0u, 0u, 0u});
      if (I < Regs.size())
        Gt.record(1, XT_EV_GtVmExitRegs,
                  {uint32_t(Regs[I][0]), uint32_t(Regs[I][0] >> 32), uint32_t(Regs[I][1]),
                   uint32_t(Regs[I][1] >> 32), uint32_t(Regs[I][2]), uint32_t(Regs[I][2] >> 32)});
      // {count 3, d1v0, first_tsc}: losses from 10 cycles before the record.
      if (int(I) == LostBefore)
        Hv.recordTsc(1, XT_EV_LostRecords, X.HvExit - 1,
                     {3u, 1u, uint32_t(X.HvExit - 11), 0u});
      if (Compact)
        Gt.recordTsc(1, XT_EV_GtResume, X.GtEntry, nullptr, 0);
      else
        Gt.recordTsc(1, XT_EV_GtVmEntry, X.GtEntry,
                     {1u, uint32_t(X.Rip + 2), uint32_t((X.Rip + 2) >> 32), 0u, 0u, 0u});
      Hv.recordTsc(1, XT_EV_VmxExit64, X.HvExit,
                   {X.Reason, uint32_t(X.Rip), uint32_t(X.Rip >> 32)});
      if (int(I) == LostAfter)
        Hv.recordTsc(1, XT_EV_LostRecords, X.HvExit + 1,
                     {3u, 1u, uint32_t(X.HvExit + 1), 0u});
      if (HandlerRecords && X.Reason == 30)
        Hv.record(1, XT_EV_IoportWrite, {IoPort, 0x55u});
      if (HandlerRecords && X.Reason == 10)
        Hv.record(1, XT_EV_Cpuid, {0u, 0u, 1u, 2u, 3u, 4u});
      Hv.recordTsc(1, XT_EV_VmEntry, X.HvEntry, nullptr, 0);
    }
  }
  return {HvOut.Bytes, GtOut.Bytes};
}

CheckResult check(const Traces &T) {
  TraceReader Hv, Gt;
  Hv.openMemory(T.Hv.data(), T.Hv.size());
  Gt.openMemory(T.Gt.data(), T.Gt.size());
  return checkAgainstGroundTruth(Hv, Gt);
}

} // namespace

TEST(TraceCheck, AgreeingTracesGiveExactLagsAndLeads) {
  const CheckResult R = check(build(twoExits()));
  ASSERT_TRUE(R.Ok) << R.Problem;
  ASSERT_EQ(R.Cpus.size(), 1u);
  const CpuCheck &C = R.Cpus[0];
  EXPECT_EQ(C.Cpu, 1u);
  EXPECT_EQ(C.Exits, 2u);
  EXPECT_EQ(C.Entries, 3u); // the launch and one per exit
  // The I/O record (port and direction) and the CPUID record (after a CPUID exit; this
  // ground truth has no GT_VMEXIT_REGS, so its leaf is not compared).
  EXPECT_EQ(C.HandlerRecords, 2u);
  EXPECT_EQ(C.ExitLag.Min, 250u);
  EXPECT_EQ(C.ExitLag.Max, 300u);
  EXPECT_EQ(C.ExitLag.Total, 550u);
  EXPECT_EQ(C.EntryLead.Min, 10u);
  EXPECT_EQ(C.EntryLead.Max, 200u);
  EXPECT_EQ(C.EntryLead.Total, 10u + 200u + 10u);
  EXPECT_EQ(R.HypervisorRecords, 2u + 2u * 3u);
  EXPECT_EQ(R.GroundTruthRecords, 1u + 2u * 3u);
  char *Buf = nullptr;
  size_t Len = 0;
  std::FILE *F = open_memstream(&Buf, &Len);
  printCheck(R, F);
  std::fclose(F);
  EXPECT_EQ(std::string(Buf, Len),
            "match: 2 exits and 3 entries on 1 CPU(s) agree with the ground truth (8 "
            "hypervisor records, 7 ground-truth records)\n"
            "cpu1: 2 exits, 3 entries, 2 handler records checked; cycles from VM exit to "
            "VMX_EXIT min/mean/max 250/275.0/300; from VMENTRY to VM entry 10/73.3/200\n");
  free(Buf);
}

// The compact ground truth (GT_EXIT, GT_RESUME) checks exactly as the layout before it:
// the same pairing, lags and leads, and the same first problem.
TEST(TraceCheck, CompactGroundTruthChecksAsTheLayoutBefore) {
  const CheckResult Old = check(build(twoExits()));
  const CheckResult New = check(build(twoExits(), true, 0x80, {}, -1, -1, true));
  ASSERT_TRUE(Old.Ok) << Old.Problem;
  ASSERT_TRUE(New.Ok) << New.Problem;
  ASSERT_EQ(New.Cpus.size(), 1u);
  EXPECT_EQ(New.Cpus[0].Exits, Old.Cpus[0].Exits);
  EXPECT_EQ(New.Cpus[0].Entries, Old.Cpus[0].Entries);
  EXPECT_EQ(New.Cpus[0].HandlerRecords, Old.Cpus[0].HandlerRecords);
  EXPECT_EQ(New.Cpus[0].ExitLag.Total, Old.Cpus[0].ExitLag.Total);
  EXPECT_EQ(New.Cpus[0].EntryLead.Total, Old.Cpus[0].EntryLead.Total);
  EXPECT_EQ(New.GroundTruthRecords, Old.GroundTruthRecords);
  // A wrong port in the I/O record: caught from GT_EXIT's qualification too.
  const CheckResult Bad = check(build(twoExits(), true, 0x81, {}, -1, -1, true));
  const CheckResult BadOld = check(build(twoExits(), true, 0x81));
  EXPECT_FALSE(Bad.Ok);
  EXPECT_FALSE(BadOld.Ok);
  EXPECT_EQ(Bad.Problem.substr(0, 40), BadOld.Problem.substr(0, 40));
}

// GT_RESUME stands for the entry its CPU's last exit implies: one that follows no exit
// is a broken ground truth (status 2), not a disagreement.
TEST(TraceCheck, ResumeAfterNoExitIsABrokenGroundTruth) {
  Traces T = build(twoExits(), true, 0x80, {}, -1, -1, true);
  MemoryOutput GtOut;
  {
    TraceWriter Gt(GtOut, 2);
    Gt.recordTsc(1, XT_EV_GtResume, 100, nullptr, 0);
  }
  T.Gt = GtOut.Bytes;
  const CheckResult R = check(T);
  EXPECT_FALSE(R.Ok);
  EXPECT_TRUE(R.ReadError);
  EXPECT_NE(R.Problem.find("GT_RESUME at offset 0xc follows no VM exit of its CPU"),
            std::string::npos)
      << R.Problem;
}

TEST(TraceCheck, DifferentReasonIsTheFirstProblem) {
  auto E = twoExits();
  Traces T = build(E);
  E[1].Reason = 12; // the hypervisor says HLT, the processor did CPUID
  Traces Bad = build(E);
  Bad.Gt = T.Gt;
  const CheckResult R = check(Bad);
  EXPECT_FALSE(R.Ok);
  EXPECT_EQ(R.Problem.rfind("cpu1: exit 2: exit reason differs: hypervisor CPU1 3250 +0 "
                            "VMX_EXIT64 reason=12(Hlt)", 0),
            0u)
      << R.Problem;
}

TEST(TraceCheck, DifferentRipIsFound) {
  auto E = twoExits();
  Traces Good = build(E);
  E[0].Rip += 1;
  Traces Bad = build(E);
  Bad.Gt = Good.Gt;
  const CheckResult R = check(Bad);
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("exit 1: guest RIP differs"), std::string::npos) << R.Problem;
}

TEST(TraceCheck, HypervisorTscBeforeTheExitOrAfterTheEntryIsFound) {
  auto E = twoExits();
  E[1].HvExit = 2999; // one cycle before the processor's exit
  CheckResult R = check(build(E));
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("exit 2: the hypervisor's TSC is before the VM exit"),
            std::string::npos)
      << R.Problem;
  E = twoExits();
  E[0].HvEntry = 2001; // one cycle after the processor's entry
  R = check(build(E));
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("entry 2: the hypervisor's TSC is after the VM entry"),
            std::string::npos)
      << R.Problem;
}

TEST(TraceCheck, MissingAndExtraExitsAreFound) {
  auto E = twoExits();
  Traces Full = build(E);
  Traces Short = build({E[0]});
  Traces MissingInHv{Short.Hv, Full.Gt};
  CheckResult R = check(MissingInHv);
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("the ground truth has more: CPU1 3000 +0 GT_VMEXIT"),
            std::string::npos)
      << R.Problem;
  Traces MissingInGt{Full.Hv, Short.Gt};
  R = check(MissingInGt);
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("VMX_EXIT64 reason=10(Cpuid)"), std::string::npos) << R.Problem;
  EXPECT_NE(R.Problem.find("has no VM exit in the ground truth"), std::string::npos)
      << R.Problem;
}

TEST(TraceCheck, IoHandlerRecordMustMatchTheQualification) {
  const CheckResult R = check(build(twoExits(), true, 0x81));
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("exit 1: port or direction differs from the exit qualification"),
            std::string::npos)
      << R.Problem;
}

// Records lost before the CPU's first VM entry (Xen traced from boot, its buffers full
// before its first HVM guest): nothing of the exits is lost, the check goes on.
TEST(TraceCheck, LostRecordsOutsideEveryExitWindowAreAccepted) {
  Traces T = build(twoExits());
  MemoryOutput Out;
  {
    TraceWriter W(Out, 2);
    W.recordTsc(1, XT_EV_LostRecords, 50, {3u, 1u, 40u, 0u});
  }
  std::vector<uint8_t> Hv = Out.Bytes;
  Hv.insert(Hv.end(), T.Hv.begin(), T.Hv.end());
  const CheckResult R = check({Hv, T.Gt});
  ASSERT_TRUE(R.Ok) << R.Problem;
  EXPECT_EQ(R.LostOutsideExits, 1u);
  EXPECT_EQ(R.LostRecords, 3u);
  EXPECT_EQ(R.Cpus[0].Exits, 2u);
}

// Records lost where the record of a VM exit may be: the check fails there.
TEST(TraceCheck, LostRecordsThatMayHoldAnExitsRecordFailTheCheck) {
  // After exit 2's VM exit, before Xen's record of it.
  CheckResult R = check(build(twoExits(), true, 0x80, {}, 1, -1));
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("the hypervisor lost 3 records (LOST_RECORDS at offset"),
            std::string::npos) << R.Problem;
  EXPECT_NE(R.Problem.find("after a VM transition it may hold"), std::string::npos)
      << R.Problem;
  EXPECT_FALSE(R.ReadError);
  // Inside exit 1's window, between its VMX_EXIT and its VMENTRY.
  R = check(build(twoExits(), true, 0x80, {}, -1, 0));
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("inside an exit window"), std::string::npos) << R.Problem;
}

// With GT_VMEXIT_REGS, the operands Xen's handler records carry: an OUT's data from RAX,
// CPUID's leaf and sub-leaf from EAX and ECX.
TEST(TraceCheck, HandlerRecordOperandsMustMatchTheRegistersAtTheExit) {
  // OUT of 0x55 (AL; RAX's upper bytes are not written), CPUID leaf 0 sub-leaf 0.
  CheckResult R = check(build(twoExits(), true, 0x80, {{0x1255, 7, 9}, {0, 0, 0}}));
  ASSERT_TRUE(R.Ok) << R.Problem;
  EXPECT_EQ(R.Cpus[0].HandlerRecords, 2u);
  R = check(build(twoExits(), true, 0x80, {{0x1256, 7, 9}, {0, 0, 0}}));
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("exit 1: the OUT's data differs from RAX at the exit"),
            std::string::npos) << R.Problem;
  R = check(build(twoExits(), true, 0x80, {{0x55, 0, 0}, {0, 1, 0}}));
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("exit 2: not a CPUID exit, or the leaf or sub-leaf differs"),
            std::string::npos) << R.Problem;
}

TEST(TraceCheck, TruncatedHypervisorTraceIsReportedWithItsOffset) {
  Traces T = build(twoExits());
  T.Hv.resize(T.Hv.size() - 2);
  const CheckResult R = check(T);
  EXPECT_FALSE(R.Ok);
  EXPECT_EQ(R.Problem.rfind("hypervisor trace: offset 0x", 0), 0u) << R.Problem;
  EXPECT_TRUE(R.ReadError);
}

namespace {

/// One exit of the Xen records test below: the ground truth's exit (reason,
/// qualification, interruption information, guest-physical address, registers) and the
/// handler records Xen writes for it (event id and words).
struct XenExit {
  uint32_t Reason;
  uint64_t Qual;
  uint32_t IntrInfo;
  uint64_t Gpa;
  std::array<uint64_t, 3> Regs;
  std::vector<std::pair<uint32_t, std::vector<uint32_t>>> Records;
  uint32_t EntryInjects = 0; ///< the next entry's VM-entry interruption information
};

/// Builds both traces of exits E on CPU 0, each exit at 1000 * (I + 1), its entry 500
/// cycles later; the GT_VMEXIT_REGS only for the reasons that have them (trace/events.def).
Traces buildXen(const std::vector<XenExit> &E) {
  MemoryOutput HvOut, GtOut;
  {
    TraceWriter Hv(HvOut, 1), Gt(GtOut, 1);
    Hv.recordTsc(0, XT_EV_VmEntry, 90, nullptr, 0);
    Gt.recordTsc(0, XT_EV_GtVmEntry, 100, {0u, 0x1000u, 0u, 1u, 0u, 0u});
    for (size_t I = 0; I < E.size(); ++I) {
      const XenExit &X = E[I];
      const uint64_t T = 1000 * (I + 1), Rip = 0x1000 + I;
      Gt.recordTsc(0, XT_EV_GtVmExit, T,
                   {0u, X.Reason, uint32_t(Rip), 0u, uint32_t(X.Qual), uint32_t(X.Qual >> 32),
                    2u});
      if (X.IntrInfo)
        Gt.record(0, XT_EV_GtVmExitEvent, {X.IntrInfo, 0u, 0u, 0u, 0u});
      if (X.Gpa)
        Gt.record(0, XT_EV_GtVmExitAddr,
                  {2u, 0u, 0u, uint32_t(X.Gpa), uint32_t(X.Gpa >> 32)});
      if (X.Reason == 28 || X.Reason == 30)
        Gt.record(0, XT_EV_GtVmExitRegs,
                  {uint32_t(X.Regs[0]), uint32_t(X.Regs[0] >> 32), uint32_t(X.Regs[1]),
                   uint32_t(X.Regs[1] >> 32), uint32_t(X.Regs[2]), uint32_t(X.Regs[2] >> 32)});
      Gt.recordTsc(0, XT_EV_GtVmEntry, T + 500,
                   {0u, uint32_t(Rip + 1), 0u, 0u, X.EntryInjects, 0u});
      Hv.recordTsc(0, XT_EV_VmxExit64, T + 100, {X.Reason, uint32_t(Rip), 0u});
      for (const auto &[Event, Words] : X.Records)
        Hv.record(0, Event, Words.data(), unsigned(Words.size()));
      Hv.recordTsc(0, XT_EV_VmEntry, T + 400, nullptr, 0);
    }
  }
  return {HvOut.Bytes, GtOut.Bytes};
}

/// Xen 4.17's records of pvh-long's exits (scripts/guests/pvh-long.S): MOV to CR4 from
/// EAX, an MMIO load's EPT violation at 0x20000000, an external interrupt (vector 0xf9),
/// HLT.
std::vector<XenExit> xenExits() {
  const uint64_t Gpa = 0x20000000;
  return {
      {28, 0x004, 0, 0, {0x2020, 0, 0}, {{XT_EV_CrWrite64, {4u, 0x2020u, 0u}}}},
      {48, 0x181, 0, Gpa, {}, {{XT_EV_Npf, {uint32_t(Gpa), 0u, ~0u, ~0u, 0x181u, 4u}},
                               {XT_EV_IomemRead, {uint32_t(Gpa), ~0u}}}},
      {1, 0, 0x800000f9, 0, {}, {{XT_EV_Intr, {0xf9u}}}},
      {12, 0, 0, 0, {}, {{XT_EV_Hlt, {0u}}}},
  };
}

} // namespace

// The records Xen writes for a 64-bit guest's CR writes, EPT violations on MMIO, external
// interrupts and HLT: each field the ground truth gives is compared, the others are free
// (the NPF's frame and p2m type, the IOMEM data, HLT's pending).
TEST(TraceCheck, XenNpfIomemIntrHltAndCrValueRecordsMatchTheGroundTruth) {
  CheckResult R = check(buildXen(xenExits()));
  ASSERT_TRUE(R.Ok) << R.Problem;
  EXPECT_EQ(R.Cpus[0].Exits, 4u);
  EXPECT_EQ(R.Cpus[0].HandlerRecords, 5u);
  // The free fields: any value.
  std::vector<XenExit> E = xenExits();
  E[1].Records[0].second[2] = 0x1234; // mfn
  E[1].Records[0].second[5] = 0;      // p2m type
  E[1].Records[1].second[1] = 7;      // the load's data
  E[3].Records[0].second[0] = 1;      // pending
  R = check(buildXen(E));
  EXPECT_TRUE(R.Ok) << R.Problem;

  struct Case {
    size_t Exit, Record, Word;
    uint32_t Value;
    const char *Problem;
  } Cases[] = {
      {0, 0, 1, 0x2021, "exit 1: the value written differs from the register at the exit"},
      {0, 0, 0, 3, "exit 1: CR number or access type differs"},
      {1, 0, 0, 0x20001000, "exit 2: not an EPT violation, or the guest-physical address"},
      {1, 0, 4, 0x182, "exit 2: not an EPT violation, or the guest-physical address"},
      {1, 1, 0, 0x20000004, "exit 2: not after an EPT violation or misconfiguration, or the "
                            "first access's address"},
      {2, 0, 0, 0xfa, "exit 3: not an external-interrupt exit, or the vector differs"},
  };
  for (const Case &C : Cases) {
    E = xenExits();
    E[C.Exit].Records[C.Record].second[C.Word] = C.Value;
    R = check(buildXen(E));
    EXPECT_FALSE(R.Ok) << C.Problem;
    EXPECT_NE(R.Problem.find(C.Problem), std::string::npos) << R.Problem;
  }
  // A record after an exit of another reason.
  E = xenExits();
  std::swap(E[2].Records, E[3].Records);
  R = check(buildXen(E));
  EXPECT_FALSE(R.Ok);
  EXPECT_NE(R.Problem.find("exit 3: not an HLT exit"), std::string::npos) << R.Problem;
}

// Xen without virtual-interrupt delivery (its apicv=0) injects through the VM-entry
// interruption-information field: INTR_WINDOW when the interrupt must wait (here after an
// external-interrupt exit, nothing being injected: all ones), then INJ_VIRQ on the
// interrupt-window exit, whose entry injects the vector. Both are checked against the next
// VM entry's injection; the waiting vector and its source are Xen's own.
TEST(TraceCheck, XenInjVirqAndIntrWindowMatchTheNextEntrysInjection) {
  const auto exits = [] {
    return std::vector<XenExit>{
        {1, 0, 0x800000fa, 0, {}, {{XT_EV_Intr, {0xfau}}, {XT_EV_IntrWindow, {0x40u, 2u, ~0u}}}},
        {7, 0, 0, 0, {}, {{XT_EV_InjVirq, {0x40u, 0u}}}, 0x80000040u},
    };
  };
  CheckResult R = check(buildXen(exits()));
  ASSERT_TRUE(R.Ok) << R.Problem;
  EXPECT_EQ(R.Cpus[0].HandlerRecords, 3u);
  // The waiting vector and the source are free.
  std::vector<XenExit> E = exits();
  E[0].Records[1].second = {0x41u, 0u, ~0u};
  R = check(buildXen(E));
  EXPECT_TRUE(R.Ok) << R.Problem;

  struct Case {
    size_t Exit, Record, Word;
    uint32_t Value;
  } Cases[] = {
      {1, 0, 0, 0x41}, // INJ_VIRQ of another vector
      {1, 0, 1, 1},    // "fake"
      {0, 1, 2, 0x40}, // INTR_WINDOW says 0x40 is being injected: nothing is
      {0, 1, 0, 0x140}, // not a vector
  };
  for (const Case &C : Cases) {
    E = exits();
    E[C.Exit].Records[C.Record].second[C.Word] = C.Value;
    R = check(buildXen(E));
    EXPECT_FALSE(R.Ok) << C.Exit << " " << C.Record << " " << C.Word;
    EXPECT_NE(R.Problem.find("offset 0x"), std::string::npos) << R.Problem;
    EXPECT_NE(R.Problem.find("the next VM entry injects"), std::string::npos) << R.Problem;
  }
  // The entry injects something else (an NMI: type 2), or nothing.
  for (uint32_t Inj : {0x80000202u, 0u}) {
    E = exits();
    E[1].EntryInjects = Inj;
    R = check(buildXen(E));
    EXPECT_FALSE(R.Ok) << Inj;
    EXPECT_NE(R.Problem.find("INJ_VIRQ vector=0x40"), std::string::npos) << R.Problem;
  }
  // INTR_WINDOW while the entry injects: its third word is the vector.
  E = exits();
  E[0].EntryInjects = 0x80000030u;
  E[0].Records[1].second[2] = 0x30;
  R = check(buildXen(E));
  EXPECT_TRUE(R.Ok) << R.Problem;
}
