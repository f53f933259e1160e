// The emulator's ground truth (trace/ground_truth.h) on the vmx_e2e image: one
// GT_EXIT per VM exit with exactly the exit reasons Bochs reports
// (hvm/images/vmx_e2e/expected_bochs.log), a GT_RESUME or GT_VMENTRY per entry, and
// byte-identical files from two runs (STYLE 2.8, determinism).
#include "harness/ground_truth_link.h"
#include "harness/gtest/vmxsim_gtest.h"
#include "harness/machine.h"
#include "tests/support/files.h"
#include "tests/support/test_machine.h"
#include "tests/trace/trace_test_util.h"
#include "trace/dump.h"
#include "trace/ground_truth.h"
#include "trace/gt_records.h"
#include "trace/reader.h"
#include "trace/slot_layout.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace vmxsim;
using namespace vmxsim::trace;

using vmxsim::test::readFile;

namespace {

std::vector<uint32_t> bochsExitReasons() {
  std::string Log = readFile(std::string(VMXSIM_SOURCE_DIR) +
                             "/hvm/images/vmx_e2e/expected_bochs.log");
  // Lines "exit n=N reason=R ..." (std::regex is avoided: GCC 12 warns inside it under
  // the sanitizer build).
  std::vector<uint32_t> Reasons;
  std::istringstream In(Log);
  std::string L;
  while (std::getline(In, L)) {
    if (L.rfind("exit n=", 0) != 0)
      continue;
    size_t At = L.find(" reason=");
    if (At != std::string::npos)
      Reasons.push_back(uint32_t(std::stoul(L.substr(At + 8))));
  }
  return Reasons;
}

std::string imagePath() { return std::string(VMXSIM_IMAGE_DIR) + "/vmx_e2e.elf"; }

RunResult runWithGroundTruth(const std::string &Path, bool Insns = false) {
  MachineConfig Cfg;
  Cfg.Kernel = imagePath();
  Cfg.Serial = OutputSpec::discard();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.MaxInsns = 100'000'000;
  Cfg.GroundTruthFile = Path;
  Cfg.GroundTruthInsns = Insns;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  if (!M)
    return {};
  return M->run();
}

} // namespace

TEST(GroundTruth, VmExitRecordsHaveTheExitReasonsOfTheBochsLog) {
  const std::vector<uint32_t> Expected = bochsExitReasons();
  ASSERT_EQ(Expected.size(), 40u);
  const std::string Path = std::string(VMXSIM_BINARY_DIR) + "/tests/ground_truth_e2e.xt";
  RunResult R = runWithGroundTruth(Path);
  EXPECT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  std::vector<uint32_t> Reasons;
  unsigned Entries = 0, Events = 0;
  uint64_t LastTsc = 0;
  for (const TraceRecord &Rec : vmxsim::trace::testing::readAllFile(Path)) {
    EXPECT_GE(Rec.Tsc, LastTsc);
    LastTsc = Rec.Tsc;
    EXPECT_EQ(Rec.Cpu, 0);
    if (Rec.Event == XT_EV_GtExit) {
      ASSERT_GE(Rec.NumWords, 4);
      EXPECT_TRUE(Rec.HasTsc);
      Reasons.push_back(Rec.Words[0]);
    } else if (isGtEntry(Rec.Event)) {
      ++Entries;
    } else if (Rec.Event == XT_EV_GtVmExitEvent) {
      ++Events;
    }
  }
  EXPECT_EQ(Reasons, Expected);
  // No exit of vmx_e2e is a vectored event or has instruction information, so no
  // GT_VMEXIT_EVENT is written (GroundTruth.ExitEventRecordOnlyWhenItHasAField).
  EXPECT_EQ(Events, 0u);
  EXPECT_EQ(Entries, 40u); // VMLAUNCH and 39 VMRESUMEs; the last exit ends the guest
}

TEST(GroundTruth, CommandLineRunsGiveByteIdenticalFiles) {
  const std::string Base = std::string(VMXSIM_BINARY_DIR) + "/tests/ground_truth_cli";
  for (const char *Suffix : {"_a.xt", "_b.xt"}) {
    const std::string Cmd = std::string(VMXSIM_BINARY_DIR) + "/vmxsim run " + imagePath() +
                            " --serial none --debugcon none -q --trace-ground-truth " + Base +
                            Suffix;
    const int Status = std::system(Cmd.c_str());
    ASSERT_TRUE(WIFEXITED(Status));
    EXPECT_EQ(WEXITSTATUS(Status), 1); // the guest's PASS exit
  }
  const std::string A = readFile(Base + "_a.xt"), B = readFile(Base + "_b.xt");
  EXPECT_GT(A.size(), 40u * 40);
  EXPECT_EQ(A, B);
  // The same as the library's file.
  const std::string Lib = Base + "_lib.xt";
  runWithGroundTruth(Lib);
  EXPECT_EQ(readFile(Lib), A);
}

TEST(GroundTruth, InstructionRecordsCoverEveryRetiredInstruction) {
  const std::string Path = std::string(VMXSIM_BINARY_DIR) + "/tests/ground_truth_insns.xt";
  RunResult R = runWithGroundTruth(Path, true);
  uint64_t Insns = 0, Exits = 0;
  for (const TraceRecord &Rec : vmxsim::trace::testing::readAllFile(Path)) {
    Insns += Rec.Event == XT_EV_GtInsn;
    Exits += Rec.Event == XT_EV_GtExit;
  }
  EXPECT_EQ(Exits, 40u);
  // Every instruction is recorded before it executes; faulting ones retire no count.
  EXPECT_GE(Insns, R.Retired);
  EXPECT_LE(Insns, R.Retired + 100);
}

// GT_VMEXIT_EVENT carries the interruption, IDT-vectoring and instruction information
// (SDM Vol. 3C, "Information for VM Exits Due to Vectored Events"); it is written only
// when one of them is non-zero, and then holds exactly those values.
TEST(GroundTruth, ExitEventRecordOnlyWhenItHasAField) {
  // Through the link the machine installs (harness/ground_truth_link.h): the processor's
  // VmExitEvent (cpu/observer.h) becomes the records.
  MemoryOutput Out;
  {
    TraceWriter W(Out, 1);
    GroundTruthRecorder G(W);
    GroundTruthLink L(G);
    const uint64_t Gpr[16] = {0x80000001, 0x1234567800000002, 0xfedcba9876543210};
    VmExitEvent Cpuid;
    Cpuid.Reason = 10; // CPUID
    Cpuid.Rip = 0x401000;
    Cpuid.InstructionLength = 2;
    Cpuid.Gpr = Gpr;
    L.vmExit(Cpuid);
    VmExitEvent Pf;
    Pf.Reason = 0; // exception or NMI
    Pf.Rip = 0x401000;
    Pf.InterruptionInfo = 0x80000b0e; // valid, hardware exception, error code, #PF
    Pf.InterruptionErrorCode = 6;
    Pf.Qualification = 0xdead000;
    L.vmExit(Pf);
  }
  const std::vector<TraceRecord> R = vmxsim::trace::testing::readAll(Out.Bytes, ReadOrder::Merged);
  ASSERT_EQ(R.size(), 4u);
  EXPECT_EQ(R[0].Event, uint32_t(XT_EV_GtExit));
  EXPECT_EQ(R[0].Words[0], 10u);
  EXPECT_EQ(R[0].NumWords, 4u); // qualification 0: left off
  // CPUID takes its operands in RAX and RCX: GT_VMEXIT_REGS follows its exit (the #PF
  // exit below has none).
  ASSERT_EQ(R[1].Event, uint32_t(XT_EV_GtVmExitRegs));
  const uint32_t Regs[6] = {0x80000001u, 0, 2, 0x12345678u, 0x76543210u, 0xfedcba98u};
  for (unsigned I = 0; I < 6; ++I)
    EXPECT_EQ(R[1].Words[I], Regs[I]) << I;
  EXPECT_EQ(R[2].Event, uint32_t(XT_EV_GtExit));
  EXPECT_EQ(R[2].Words[0], 0u);
  ASSERT_EQ(R[2].NumWords, 5u); // the qualification's high half is 0: left off
  EXPECT_EQ(R[2].Words[4], 0xdead000u);
  ASSERT_EQ(R[3].Event, uint32_t(XT_EV_GtVmExitEvent));
  EXPECT_EQ(R[3].Words[0], 0x80000b0eu);
  EXPECT_EQ(R[3].Words[1], 6u);
  EXPECT_EQ(R[3].Words[2], 0u);
  EXPECT_EQ(R[3].Words[3], 0u);
  EXPECT_EQ(R[3].Words[4], 0u);
}

// The compact slot store and root RDTSC (trace/events.def, GT_SLOT_OWN and GT_ROOT_RDTSC)
// leave off the high halves that are 0, and only those; every reader decodes them through
// trace/gt_records.h to what was stored and returned. A store into another CPU's slots is
// GT_SLOT_STORE. Written in place (the recorder's fast path) and through the writer (a
// buffer too small for a record in place), with the same bytes.
TEST(GroundTruth, CompactSlotStoreAndRootRdtscKeepEveryWord) {
  struct Store {
    uint32_t Owner, Slot;
    uint64_t Value, Rip;
    uint32_t Event;
    unsigned Words;
  };
  const Store Stores[] = {
      {0, 1, 0x1e, 0x1092ca, XT_EV_GtSlotOwn, 3},
      {0, 4, 0x123456789, 0x1092ca, XT_EV_GtSlotOwn, 4},
      {0, 2, 7, 0xffff82d040201234, XT_EV_GtSlotOwn, 5},
      {0, 3, 0x8000000000000000, 0xffffffff81000000, XT_EV_GtSlotOwn, 5},
      {1, 0, 5, 0x1092ca, XT_EV_GtSlotStore, 7},
  };
  struct Read {
    uint64_t Tsc, Value, Rip;
    unsigned Words;
  };
  const Read Reads[] = {
      {1000, 1000, 0x108986, 1},
      {1000, 1005, 0x108986, 2},
      {1000, 1000 + (3ull << 32), 0x108986, 3},
      {1000, 999, 0x108986, 3}, // an offset of -1: modulo 2^64
      {1000, 1000, 0xffff82d040201234, 4},
  };
  std::vector<uint8_t> Files[2];
  for (const bool InPlace : {true, false}) {
    MemoryOutput Out;
    {
      // 80 bytes: a record in place needs room for its longest form, so at the end of
      // this small buffer (drained every few records) the writer's path writes it.
      TraceWriter W(Out, 2, InPlace ? TraceWriter::kDefaultBufferBytes : 80);
      GroundTruthRecorder G(W);
      uint64_t Tsc = 500;
      for (const Store &S : Stores)
        G.slotStore(0, ++Tsc, S.Owner, S.Slot, S.Value, S.Rip);
      for (const Read &R : Reads)
        G.rootTsc(0, R.Tsc, R.Value, R.Rip);
    }
    Files[InPlace] = Out.Bytes;
    const std::vector<TraceRecord> R = vmxsim::trace::testing::readAll(Out.Bytes, ReadOrder::File);
    std::vector<TraceRecord> Data;
    for (const TraceRecord &Rec : R)
      if (Rec.Event != XT_EV_TraceCpuChange)
        Data.push_back(Rec);
    ASSERT_EQ(Data.size(), std::size(Stores) + std::size(Reads)) << InPlace;
    for (size_t I = 0; I < std::size(Stores); ++I) {
      const Store &S = Stores[I];
      EXPECT_EQ(Data[I].Event, S.Event) << I;
      EXPECT_EQ(Data[I].NumWords, S.Words) << I;
      GtSlotStoreFields F;
      ASSERT_TRUE(gtSlotStoreOf(Data[I], F)) << I;
      EXPECT_EQ(F.Owner, S.Owner) << I;
      EXPECT_EQ(F.Slot, S.Slot) << I;
      EXPECT_EQ(F.Value, S.Value) << I;
      EXPECT_EQ(F.Rip, S.Rip) << I;
    }
    for (size_t I = 0; I < std::size(Reads); ++I) {
      const Read &Want = Reads[I];
      const TraceRecord &Rec = Data[std::size(Stores) + I];
      EXPECT_EQ(Rec.Event, uint32_t(XT_EV_GtRootRdtsc)) << I;
      EXPECT_EQ(Rec.NumWords, Want.Words) << I;
      EXPECT_EQ(Rec.Tsc, Want.Tsc) << I;
      GtRootTscFields F;
      ASSERT_TRUE(gtRootTscOf(Rec, F)) << I;
      EXPECT_EQ(F.Value, Want.Value) << I;
      EXPECT_EQ(F.Rip, Want.Rip) << I;
    }
  }
  // The records are the same either way (the windows differ: the small buffer drains).
  const auto Records = [](const std::vector<uint8_t> &B) {
    std::vector<std::string> Out;
    for (const TraceRecord &Rec : vmxsim::trace::testing::readAll(B, ReadOrder::Merged))
      if (Rec.Event != XT_EV_TraceCpuChange)
        Out.push_back(formatRecord(Rec, 0));
    return Out;
  };
  EXPECT_EQ(Records(Files[0]), Records(Files[1]));
  // A GT_ROOT_TSC of a file from before still reads.
  TraceRecord Old;
  Old.Event = XT_EV_GtRootTsc;
  Old.NumWords = 5;
  Old.Tsc = 1000;
  const uint32_t W[5] = {0, 1005, 0, 0x108986, 0};
  std::copy(std::begin(W), std::end(W), Old.Words);
  GtRootTscFields F;
  ASSERT_TRUE(gtRootTscOf(Old, F));
  EXPECT_EQ(F.Value, 1005u);
  EXPECT_EQ(F.Rip, 0x108986u);
  // Records too short for their layout (a damaged file) are not read as any.
  TraceRecord Short;
  GtSlotStoreFields S;
  for (const auto &[Event, Words] : {std::pair{uint32_t(XT_EV_GtSlotOwn), 2u},
                                     std::pair{uint32_t(XT_EV_GtSlotStore), 6u},
                                     std::pair{uint32_t(XT_EV_GtRootRdtsc), 0u},
                                     std::pair{uint32_t(XT_EV_GtRootTsc), 4u}}) {
    Short.Event = Event;
    Short.NumWords = uint8_t(Words);
    EXPECT_FALSE(gtSlotStoreOf(Short, S)) << Event;
    EXPECT_FALSE(gtRootTscOf(Short, F)) << Event;
  }
}

// With a hypervisor's trace slots watched, the guest registers are a register file per
// CPU (trace/events.def, GT_GPR): RAX/RCX/RDX (GT_VMEXIT_REGS / GT_VMENTRY_REGS, all
// three) and RBX (GT_GPR) after every exit and entry, and the register a CR access names
// at that exit and its entry, each only when its value differs from the CPU's last record
// of it.
TEST(GroundTruth, WithSlotWatchingARegisterIsRecordedOnlyWhenItChanged) {
  PhysMem Mem(1 << 20);
  xt_slot_layout T{};
  T.magic = XT_SLOT_LAYOUT_MAGIC;
  T.version = XT_SLOT_LAYOUT_VERSION;
  T.slot_count = XT_SLOT_LAYOUT_SLOTS;
  T.max_cpus = XT_SLOT_LAYOUT_MAX_CPUS;
  ASSERT_TRUE(Mem.copyIn(Hpa(0x1000), &T, sizeof(T)));
  MemoryOutput Out;
  {
    TraceWriter W(Out, 1);
    GroundTruthRecorder G(W);
    GroundTruthLink L(G);
    ASSERT_TRUE(L.watchSlotTable(Mem, {}, 0x1000));
    uint64_t Gpr[16] = {1, 2, 3, 4};
    Gpr[12] = 0xc12;
    auto exitWith = [&](uint32_t Reason, uint64_t Qual) {
      VmExitEvent E;
      E.Reason = Reason;
      E.Qualification = Qual;
      E.Gpr = Gpr;
      L.vmExit(E);
    };
    auto entry = [&] {
      VmEntryEvent E;
      E.Gpr = Gpr;
      L.vmEntry(E);
    };
    exitWith(18, 0); // VMCALL: all four first recorded
    entry();         // nothing changed
    Gpr[3] = 5;
    exitWith(10, 0); // CPUID: only RBX changed
    Gpr[0] = 6;
    entry(); // RAX changed: the three
    exitWith(28, 0xc00); // MOV to CR0 from R12: R12 first recorded
    Gpr[12] = 0xd12;
    entry();             // R12 changed
    exitWith(28, 0xc00); // R12 as at the entry: nothing
    entry();
  }
  const std::vector<TraceRecord> R = vmxsim::trace::testing::readAll(Out.Bytes, ReadOrder::Merged);
  std::vector<std::string> Got;
  for (const TraceRecord &Rec : R)
    switch (Rec.Event) {
    case XT_EV_GtSlotLayout:
      break;
    case XT_EV_GtExit:
      Got.push_back("exit " + std::to_string(Rec.Words[0]));
      break;
    case XT_EV_GtResume:
    case XT_EV_GtVmEntry:
      Got.push_back("entry");
      break;
    case XT_EV_GtVmExitRegs:
    case XT_EV_GtVmEntryRegs:
      Got.push_back((Rec.Event == XT_EV_GtVmExitRegs ? "exit regs " : "entry regs ") +
                    std::to_string(Rec.Words[0]) + "," + std::to_string(Rec.Words[2]) + "," +
                    std::to_string(Rec.Words[4]));
      break;
    case XT_EV_GtGpr:
      Got.push_back("gpr " + std::to_string(Rec.Words[1]) + "=" + std::to_string(Rec.Words[2]));
      break;
    default:
      Got.push_back("event " + std::to_string(Rec.Event));
    }
  const std::vector<std::string> Want = {
      "exit 18", "exit regs 1,2,3", "gpr 3=4", "entry",                  // first records
      "exit 10", "gpr 3=5",                                              // RBX changed
      "entry",   "entry regs 6,2,3",                                     // RAX changed
      "exit 28", "gpr 12=3090",      "entry", "gpr 12=3346",             // R12 (0xc12, 0xd12)
      "exit 28", "entry"};                                               // nothing changed
  EXPECT_EQ(Got, Want);
}

// The compact transitions (trace/events.def, GT_EXIT and GT_RESUME): an entry is
// GT_RESUME exactly when it is the first attempt after an exit, a VMRESUME, injects
// nothing and resumes at the exit's rip + len (modulo 2^64); every other entry is
// GT_VMENTRY. Read back (the GoogleTest helpers, through trace/gt_records.h as every
// reader), each entry is the one the processor performed.
TEST(GroundTruth, TheCommonEntryIsGtResumeAndReadsAsTheEntryPerformed) {
  struct Step {
    uint64_t ExitRip;
    uint32_t Len;
    bool FailFirst; ///< a failed entry attempt before the entry
    VmEntryEvent Entry;
    uint32_t WantEvent;
  };
  auto entry = [](uint64_t Rip, bool Launch = false, uint32_t Info = 0, uint32_t Err = 0) {
    return VmEntryEvent{.Rip = Rip, .IsLaunch = Launch, .InjectedInfo = Info,
                        .InjectedErrorCode = Err};
  };
  const std::vector<Step> Steps = {
      {0x1000, 3, false, entry(0x1003), XT_EV_GtResume},
      {0x2000, 2, false, entry(0x2000), XT_EV_GtVmEntry},          // not advanced
      {0x3000, 1, false, entry(0x3001, true), XT_EV_GtVmEntry},    // VMLAUNCH
      {0x4000, 2, false, entry(0x4002, false, 0x80000b0e, 0), XT_EV_GtVmEntry},
      {0x4800, 2, false, entry(0x4802, false, 0, 5), XT_EV_GtVmEntry}, // an error code
      {0x5000, 2, true, entry(0x5002), XT_EV_GtVmEntry},           // after a failure
      {~0ull - 1, 4, false, entry(2), XT_EV_GtResume},            // wraps
      {0x6000, 0, false, entry(0x6000), XT_EV_GtResume},          // len 0
  };
  MemoryOutput Out;
  {
    TraceWriter W(Out, 2);
    GroundTruthRecorder G(W);
    GroundTruthLink L(G);
    const uint64_t Gpr[16] = {};
    uint64_t Tsc = 10;
    for (const Step &S : Steps) {
      VmExitEvent X;
      X.Cpu = 1;
      X.Tsc = Tsc += 10;
      X.Reason = 10;
      X.Rip = S.ExitRip;
      X.InstructionLength = S.Len;
      X.Qualification = 0x123456789;
      X.Gpr = Gpr;
      L.vmExit(X);
      if (S.FailFirst) {
        VmEntryFailureEvent F;
        F.Cpu = 1;
        F.Tsc = Tsc += 10;
        L.vmEntryFailure(F);
      }
      VmEntryEvent E = S.Entry;
      E.Cpu = 1;
      E.Tsc = Tsc += 10;
      E.Gpr = Gpr;
      L.vmEntry(E);
    }
  }
  std::vector<TraceRecord> Recs = vmxsim::trace::testing::readAll(Out.Bytes, ReadOrder::Merged);
  std::vector<uint32_t> Events;
  for (const TraceRecord &R : Recs) {
    if (isGtEntry(R.Event)) {
      Events.push_back(R.Event);
    } else if (R.Event == XT_EV_GtExit) {
      EXPECT_EQ(R.NumWords, 6u); // a qualification above 32 bits
    }
  }
  ASSERT_EQ(Events.size(), Steps.size());
  const vmxsim::testing::GroundTruth Read(std::move(Recs));
  ASSERT_EQ(Read.entries().size(), Steps.size());
  ASSERT_EQ(Read.exits().size(), Steps.size());
  for (size_t I = 0; I < Steps.size(); ++I) {
    const Step &S = Steps[I];
    EXPECT_EQ(Events[I], S.WantEvent) << I;
    const auto &E = Read.entries()[I];
    EXPECT_EQ(E.Cpu, 1u) << I;
    EXPECT_EQ(E.Rip, S.Entry.Rip) << I;
    EXPECT_EQ(E.Launch, S.Entry.IsLaunch) << I;
    EXPECT_EQ(E.InjectedInfo, S.Entry.InjectedInfo) << I;
    EXPECT_EQ(E.InjectedErrorCode, S.Entry.InjectedErrorCode) << I;
    const auto &X = Read.exits()[I];
    EXPECT_EQ(X.Cpu, 1u) << I;
    EXPECT_EQ(X.Rip, S.ExitRip) << I;
    EXPECT_EQ(X.InstructionLength, S.Len) << I;
    EXPECT_EQ(X.Qualification, 0x123456789u) << I;
    EXPECT_EQ(X.Reason, 10u) << I;
  }
}

// The fast path of GT_EXIT and GT_RESUME stores them in the CPU's buffer in place
// (TraceWriter::placeTsc); whenever it cannot (a full buffer, a LOST_RECORDS pending) the
// records go through recordTsc. Either way the bytes are those of recordTsc alone: with a
// buffer of 20 words (a window every few records) and with one that drops records.
TEST(GroundTruth, InPlaceExitAndResumeRecordsAreRecordTscBytes) {
  for (FullPolicy Policy : {FullPolicy::Flush, FullPolicy::Drop}) {
    MemoryOutput Fast, Plain;
    {
      TraceWriter WF(Fast, 2, 80, Policy), WP(Plain, 2, 80, Policy);
      GroundTruthRecorder G(WF);
      for (uint64_t I = 0; I < 40; ++I) {
        const unsigned Cpu = unsigned(I % 3 == 2);
        const uint64_t Qual = I % 4 == 0 ? 0 : I % 4 == 1 ? 0x80 : 0x100000000ull + I;
        const uint64_t Rip = 0xffffffff81000000ull + 16 * I;
        G.exit(Cpu, 100 * I, 30, Rip, Qual, 2);
        G.resume(Cpu, 100 * I + 50);
        const uint32_t Words[6] = {30, uint32_t(Rip), uint32_t(Rip >> 32), 2, uint32_t(Qual),
                                   uint32_t(Qual >> 32)};
        WP.recordTsc(Cpu, XT_EV_GtExit, 100 * I, Words, gtExitWords(Qual));
        WP.recordTsc(Cpu, XT_EV_GtResume, 100 * I + 50, nullptr, 0);
        if (Policy == FullPolicy::Drop && I % 10 == 9) {
          WF.flushCpu(Cpu);
          WP.flushCpu(Cpu);
        }
      }
      if (Policy == FullPolicy::Drop) {
        EXPECT_GT(WF.lostRecords(0), 0u);
        EXPECT_EQ(WF.lostRecords(0), WP.lostRecords(0));
        EXPECT_EQ(WF.lostRecords(1), WP.lostRecords(1));
      }
    }
    EXPECT_GT(Fast.Bytes.size(), 0u);
    EXPECT_EQ(Fast.Bytes, Plain.Bytes) << int(Policy);
  }
}

// GT_EXIT holds the qualification in as few words as it needs (trace/events.def); a
// word left off reads as 0, and GT_VMEXIT (the layout before 2026-12-03) reads the same.
TEST(GroundTruth, ExitRecordsOfBothLayoutsReadTheSame) {
  for (uint64_t Qual : {0ull, 0x80ull, 0xffffffffull, 0x100000000ull, ~0ull}) {
    MemoryOutput Out;
    {
      TraceWriter W(Out, 1);
      GroundTruthRecorder G(W);
      const uint32_t Event[5] = {};
      G.vmExit(0, 5, 30, 0xffffffff81000010, Qual, 2, Event, 0, 0, 0);
      const uint32_t Old[7] = {0, 30, 0x81000010, 0xffffffff, uint32_t(Qual),
                               uint32_t(Qual >> 32), 2};
      W.recordTsc(0, XT_EV_GtVmExit, 6, Old);
    }
    const std::vector<TraceRecord> R = vmxsim::trace::testing::readAll(Out.Bytes, ReadOrder::File);
    std::vector<GtExitFields> Got;
    for (const TraceRecord &Rec : R) {
      GtExitFields F;
      if (gtExitOf(Rec, F))
        Got.push_back(F);
      if (Rec.Event == XT_EV_GtExit) {
        EXPECT_EQ(Rec.NumWords, Qual >> 32 ? 6u : Qual ? 5u : 4u) << Qual;
      }
    }
    ASSERT_EQ(Got.size(), 2u);
    for (const GtExitFields &F : Got) {
      EXPECT_EQ(F.Reason, 30u);
      EXPECT_EQ(F.Rip, 0xffffffff81000010u);
      EXPECT_EQ(F.Qual, Qual);
      EXPECT_EQ(F.Len, 2u);
    }
  }
}

namespace {

// The processor's transitions with only the event-based calls forwarded: vmExitBegins,
// vmEntryDone and instructionStored take VmxTransitionObserver's defaults (the events
// built, then vmExit, vmEntry and watchedStore), so the link behind it writes everything
// through its full paths.
class EventsOnly final : public VmxTransitionObserver {
public:
  explicit EventsOnly(VmxTransitionObserver &Next) : Next(Next) {}
  void vmExit(const VmExitEvent &E) override {
    ++Exits;
    Next.vmExit(E);
  }
  void vmEntry(const VmEntryEvent &E) override { Next.vmEntry(E); }
  void vmEntryFailure(const VmEntryFailureEvent &E) override { Next.vmEntryFailure(E); }
  void rootTsc(unsigned Cpu, uint64_t Tsc, uint64_t Rip, uint64_t Value) override {
    Next.rootTsc(Cpu, Tsc, Rip, Value);
  }
  void watchedStore(const WatchedStoreEvent &E) override {
    ++Stores;
    Next.watchedStore(E);
  }
  void watchedLoad(const WatchedLoadEvent &E) override { Next.watchedLoad(E); }
  uint64_t Exits = 0, Stores = 0;

private:
  VmxTransitionObserver &Next;
};

struct PathCase {
  const char *Image;
  const char *Append;
  unsigned Cpus;
};

MachineConfig pathCaseConfig(const PathCase &Case, ExecMode Exec) {
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/" + Case.Image;
  Cfg.Append = Case.Append;
  Cfg.NumCpus = Case.Cpus;
  Cfg.Exec = Exec;
  Cfg.Serial = OutputSpec::discard();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.MaxInsns = 200'000'000;
  return Cfg;
}

// The machine's own ground truth (slot watching on: every image publishes its slots),
// through the fast paths or, with Full, through the full paths only. Exits counts the
// VM exits that reached a full path by their event.
std::string machineGroundTruth(const PathCase &Case, ExecMode Exec, bool Full,
                               uint64_t &Exits, uint64_t *Stores = nullptr,
                               bool Inline = true, uint64_t *Placed = nullptr) {
  MachineConfig Cfg = pathCaseConfig(Case, Exec);
  Cfg.GroundTruthFile = std::string(VMXSIM_BINARY_DIR) + "/tests/ground_truth_paths.xt";
  Cfg.GroundTruthInline = Inline;
  std::vector<std::unique_ptr<EventsOnly>> Wrappers; // outlive the machine
  {
    Error Err;
    auto M = Machine::create(Cfg, Err);
    EXPECT_TRUE(M) << Err.str();
    if (!M)
      return {};
    for (unsigned I = 0; Full && I < M->numCpus(); ++I) {
      Wrappers.push_back(std::make_unique<EventsOnly>(*M->cpu(I).Transitions));
      M->cpu(I).Transitions = Wrappers.back().get();
    }
    const RunResult R = M->run();
    EXPECT_EQ(R.Reason, RunReason::GuestExit) << Case.Image << " " << R.describe();
    for (unsigned I = 0; Placed && I < M->numCpus(); ++I)
      if (const InlineTransitionRecords *T = M->cpu(I).InlineRecords)
        *Placed += T->Placed;
  }
  Exits = 0;
  for (const auto &W : Wrappers) {
    Exits += W->Exits;
    if (Stores)
      *Stores += W->Stores;
  }
  return readFile(Cfg.GroundTruthFile);
}

// A link of the test's own, without slot watching, on a writer of BufferBytes per CPU.
// With Watch, the link watches the image's slot table as the machine's would.
std::vector<uint8_t> ownGroundTruth(const PathCase &Case, ExecMode Exec, bool Full,
                                    size_t BufferBytes, FullPolicy Policy,
                                    bool Inline = false, uint64_t *Placed = nullptr,
                                    bool Watch = false) {
  MemoryOutput Out;
  std::vector<std::unique_ptr<EventsOnly>> Wrappers;
  {
    TraceWriter W(Out, Case.Cpus, BufferBytes, Policy);
    GroundTruthRecorder G(W);
    GroundTruthLink Link(G);
    Error Err;
    auto M = Machine::create(pathCaseConfig(Case, Exec), Err);
    EXPECT_TRUE(M) << Err.str();
    if (!M)
      return {};
    if (Watch) {
      std::vector<Cpu *> Cpus;
      for (unsigned I = 0; I < M->numCpus(); ++I)
        Cpus.push_back(&M->cpu(I));
      EXPECT_TRUE(M->slotTablePa().has_value());
      if (M->slotTablePa()) {
        EXPECT_TRUE(Link.watchSlotTable(M->mem(), Cpus, *M->slotTablePa()));
      }
    }
    for (unsigned I = 0; I < M->numCpus(); ++I) {
      VmxTransitionObserver *O = &Link;
      if (Full) {
        Wrappers.push_back(std::make_unique<EventsOnly>(Link));
        O = Wrappers.back().get();
      }
      M->cpu(I).Transitions = O;
      if (Inline)
        Link.attachInline(M->cpu(I));
    }
    const RunResult R = M->run();
    EXPECT_EQ(R.Reason, RunReason::GuestExit) << Case.Image << " " << R.describe();
    for (unsigned I = 0; I < M->numCpus(); ++I) {
      if (Placed && M->cpu(I).InlineRecords)
        *Placed += M->cpu(I).InlineRecords->Placed;
      GroundTruthLink::detachInline(M->cpu(I));
    }
  }
  return Out.Bytes;
}

// How many records the processor writes in place in each case's ground truth (the same
// in both execution modes): the four kinds it writes (GT_EXIT, GT_RESUME, GT_SLOT_OWN,
// GT_ROOT_TSC) less those the link writes itself, which are the transitions with more to
// say (registers first seen or changed, events, addresses, CR accesses, launches) and
// the records met with a buffer too full for an exit record. vmx_bench untraced: 901
// GT_EXIT, 900 GT_RESUME and 2 GT_ROOT_TSC, less the one exit whose registers changed.
uint64_t placedRecords(const PathCase &Case);

const PathCase kPathCases[] = {
    {"vmx_e2e.elf", "", 1},                // 40 exits of many reasons, CR accesses
    {"vmx_bench.elf", "iters=300 trace=0", 1}, // the common exit, 901 times
    {"hv.elf", "scenario=mixed", 2},       // two CPUs, events, injections, slot stores
    {"vmx_bench.elf", "iters=100 trace=1", 1}, // the traced exit: 8.7 slot stores each
};

uint64_t placedRecords(const PathCase &Case) {
  const std::string Name = std::string(Case.Image) + " " + Case.Append;
  if (Name == "vmx_e2e.elf ") // of 519 records of the four kinds
    return 463;
  if (Name == "vmx_bench.elf iters=300 trace=0") // of 1,803
    return 1802;
  if (Name == "hv.elf scenario=mixed") // of 4,400, on two CPUs
    return 3998;
  if (Name == "vmx_bench.elf iters=100 trace=1") // of 3,813
    return 3811;
  ADD_FAILURE() << "no count for " << Name;
  return 0;
}

} // namespace

// The fast paths (GroundTruthLink::vmExitBegins, vmEntryDone and instructionStored, from
// the processor) write exactly what the full paths (vmExit, vmEntry and watchedStore, from
// the events) write: the same
// runs with the processor's calls forced through the events give the same bytes, with
// slot watching (the machine's ground truth) and without (a link of the test's own), in
// both execution modes, and on buffers that flush every few records or drop them. So do
// the records the processor writes in place (cpu/inline_records.h: GT_EXIT, GT_RESUME,
// GT_SLOT_OWN, GT_ROOT_TSC; MachineConfig::GroundTruthInline), which the machine's
// ground truth takes by default: off, every record goes through the link's calls; with
// the events forced (an observer interposed) the processor writes none.
TEST(GroundTruth, FastPathsWriteWhatTheFullPathsWrite) {
  for (ExecMode Exec : {ExecMode::Interp, ExecMode::Translate}) {
    for (const PathCase &Case : kPathCases) {
      SCOPED_TRACE(std::string(Case.Image) + " exec " + std::to_string(int(Exec)));
      uint64_t FastExits = 0, FullExits = 0, FullStores = 0, CallExits = 0;
      uint64_t Placed = 0, FullPlaced = 0, CallPlaced = 0;
      const std::string Fast =
          machineGroundTruth(Case, Exec, false, FastExits, nullptr, true, &Placed);
      const std::string Full =
          machineGroundTruth(Case, Exec, true, FullExits, &FullStores, true, &FullPlaced);
      const std::string Calls =
          machineGroundTruth(Case, Exec, false, CallExits, nullptr, false, &CallPlaced);
      EXPECT_EQ(FastExits, 0u);
      EXPECT_EQ(FullPlaced, 0u);
      EXPECT_EQ(CallPlaced, 0u);
      EXPECT_TRUE(Calls == Fast);
      std::printf("%s %s exec %d: %llu records in place\n", Case.Image, Case.Append, int(Exec),
                  (unsigned long long)Placed);
      EXPECT_EQ(Placed, placedRecords(Case));
      EXPECT_GE(FullExits, 40u); // every exit went through its event
      if (std::string(Case.Append).find("trace=1") != std::string::npos) {
        EXPECT_GE(FullStores, 8 * 300u); // and every slot store
      }
      EXPECT_GT(Fast.size(), 40u * 16);
      EXPECT_TRUE(Fast == Full);
      struct Buffer {
        size_t Bytes;
        FullPolicy Policy;
      };
      for (Buffer B : {Buffer{256 << 10, FullPolicy::Flush}, Buffer{80, FullPolicy::Flush},
                       Buffer{160, FullPolicy::Drop}}) {
        const std::vector<uint8_t> OwnFast = ownGroundTruth(Case, Exec, false, B.Bytes, B.Policy);
        const std::vector<uint8_t> OwnFull = ownGroundTruth(Case, Exec, true, B.Bytes, B.Policy);
        uint64_t OwnPlaced = 0;
        const std::vector<uint8_t> OwnInline =
            ownGroundTruth(Case, Exec, false, B.Bytes, B.Policy, true, &OwnPlaced);
        // Dropping keeps only the records of the last buffer (and LOST_RECORDS).
        EXPECT_GT(OwnFast.size(), B.Policy == FullPolicy::Drop ? 40u : 40u * 16) << B.Bytes;
        EXPECT_TRUE(OwnFast == OwnFull) << B.Bytes << " " << int(B.Policy);
        EXPECT_TRUE(OwnInline == OwnFull) << B.Bytes << " " << int(B.Policy);
        // Without slot watching: the exits that take no operands in RAX..RDX, and their
        // entries, when they fit.
        EXPECT_GT(OwnPlaced, 0u) << B.Bytes << " " << int(B.Policy);
        // With it, on these buffers: records of up to 10 words at their ends, the slot
        // stores and root RDTSCs too.
        uint64_t WatchPlaced = 0;
        const std::vector<uint8_t> WatchFull =
            ownGroundTruth(Case, Exec, true, B.Bytes, B.Policy, false, nullptr, true);
        const std::vector<uint8_t> WatchInline =
            ownGroundTruth(Case, Exec, false, B.Bytes, B.Policy, true, &WatchPlaced, true);
        EXPECT_GT(WatchFull.size(), B.Policy == FullPolicy::Drop ? 40u : 40u * 16) << B.Bytes;
        EXPECT_TRUE(WatchInline == WatchFull) << B.Bytes << " " << int(B.Policy);
        EXPECT_GT(WatchPlaced, 0u) << B.Bytes << " " << int(B.Policy);
      }
    }
  }
}

// The trace files are written by a thread each (MachineConfig::TraceFileThreads,
// trace/async_output.h): the ground truth and the hypervisor's drained trace are the
// bytes the emulation thread writes itself, run after run. vmx_bench traced (slot
// stores, root-mode RDTSCs: about 16 windows of 256 KiB, most handed to the thread
// without a copy) and hv.elf on two CPUs.
TEST(GroundTruth, ThreadedTraceFilesAreTheEmulationThreadsBytes) {
  const PathCase Cases[] = {{"vmx_bench.elf", "iters=3000 trace=1", 1},
                            {"hv.elf", "scenario=mixed", 2}};
  for (const PathCase &Case : Cases) {
    SCOPED_TRACE(Case.Image);
    std::string Gt[3], Hv[3];
    for (unsigned Run = 0; Run < 3; ++Run) {
      const bool Threaded = Run < 2;
      MachineConfig Cfg = pathCaseConfig(Case, ExecMode::Interp);
      const std::string Base = std::string(VMXSIM_BINARY_DIR) + "/tests/ground_truth_threads_" +
                               std::to_string(Run);
      Cfg.GroundTruthFile = Base + "_gt.xt";
      Cfg.XentraceFile = Base + "_hv.xt";
      Cfg.TraceFileThreads = Threaded;
      {
        Error Err;
        auto M = Machine::create(Cfg, Err);
        ASSERT_TRUE(M) << Err.str();
        const RunResult R = M->run();
        EXPECT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
        EXPECT_TRUE(M->outputProblems().empty());
      }
      Gt[Run] = readFile(Cfg.GroundTruthFile);
      Hv[Run] = readFile(Cfg.XentraceFile);
    }
    EXPECT_GT(Gt[2].size(), Case.Cpus == 1 ? 1'000'000u : 1000u);
    EXPECT_GT(Hv[2].size(), 1000u);
    for (unsigned Run = 0; Run < 2; ++Run) {
      EXPECT_TRUE(Gt[Run] == Gt[2]) << Run << ": " << Gt[Run].size() << " " << Gt[2].size();
      EXPECT_TRUE(Hv[Run] == Hv[2]) << Run << ": " << Hv[Run].size() << " " << Hv[2].size();
    }
  }
}

// The MMU's path for stores into watched pages without code (Mmu::writeWatchedPage,
// cpu/watched_store.h), which a traced hypervisor's slot stores take, writes what the
// slow path it replaces (writeLinearSlow, writeCodePage) writes: the ground truth and the
// hypervisor's own trace are the same bytes with it turned off on every CPU, interpreted,
// translated and in lockstep (whose interpreter pass must log or refuse every store: the
// path takes none while a store log is open), on one CPU and on two; it took the slot
// stores (thousands) when on.
TEST(GroundTruth, WatchedPageStoresWriteWhatTheSlowPathWrites) {
  const PathCase Cases[] = {{"vmx_bench.elf", "iters=300 trace=1", 1},
                            {"hv.elf", "scenario=mixed", 2},
                            {"vmx_e2e.elf", "", 1}};
  for (ExecMode Exec : {ExecMode::Interp, ExecMode::Translate, ExecMode::Lockstep}) {
    for (const PathCase &Case : Cases) {
      SCOPED_TRACE(std::string(Case.Image) + " exec " + std::to_string(int(Exec)));
      std::string Gt[2], Hv[2];
      uint64_t Taken[2] = {0, 0};
      for (unsigned On = 0; On < 2; ++On) {
        MachineConfig Cfg = pathCaseConfig(Case, Exec);
        const std::string Base = std::string(VMXSIM_BINARY_DIR) +
                                 "/tests/ground_truth_watched_page_" + std::to_string(On);
        Cfg.GroundTruthFile = Base + "_gt.xt";
        Cfg.XentraceFile = Base + "_hv.xt";
        {
          Error Err;
          auto M = Machine::create(Cfg, Err);
          ASSERT_TRUE(M) << Err.str();
          for (unsigned I = 0; I < M->numCpus(); ++I)
            M->cpu(I).Mmu.setWatchedPageStores(On);
          const RunResult R = M->run();
          EXPECT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
          for (unsigned I = 0; I < M->numCpus(); ++I)
            Taken[On] += M->cpu(I).Mmu.watchedPageStores();
        }
        Gt[On] = readFile(Cfg.GroundTruthFile);
        Hv[On] = readFile(Cfg.XentraceFile);
      }
      EXPECT_EQ(Taken[0], 0u);
      if (Exec == ExecMode::Lockstep)
        EXPECT_GT(Taken[1], 0u); // by blocks run translated alone
      else
        EXPECT_GE(Taken[1], Case.Cpus == 2                            ? 100u
                            : std::string(Case.Image) == "vmx_e2e.elf" ? 40u
                                                                      : 2000u);
      EXPECT_GT(Gt[1].size(), 1000u);
      EXPECT_TRUE(Gt[0] == Gt[1]) << Gt[0].size() << " " << Gt[1].size();
      EXPECT_TRUE(Hv[0] == Hv[1]) << Hv[0].size() << " " << Hv[1].size();
    }
  }
}

namespace {

// One run of OddSlotStoresGoThroughTheLink's script, with the processor's in-place
// records attached or not: the ground truth's bytes, its slot stores as text, the
// records written in place, and the MONITOR's state and clock at the end.
struct OddSlotRun {
  std::vector<uint8_t> Bytes;
  std::vector<std::string> Stores;
  uint64_t Placed = 0, Ahead = 0, Cycles = 0;
  /// The MONITOR's state after the store at +77 (armed elsewhere) and at the end.
  MonitorState::Phase MonitorElsewhere = MonitorState::Phase::Idle,
                      Monitor = MonitorState::Phase::Idle;
};

OddSlotRun runOddSlotStores(bool Inline) {
  vmxsim::test::TestMachine M;
  M.setupLongMode();
  const uint64_t Table = vmxsim::test::kDataBase + 0x800;
  const uint64_t Slots = vmxsim::test::kDataBase + 0x100;
  xt_slot_layout T{};
  T.magic = XT_SLOT_LAYOUT_MAGIC;
  T.version = XT_SLOT_LAYOUT_VERSION;
  T.slot_count = XT_SLOT_LAYOUT_SLOTS;
  T.max_cpus = XT_SLOT_LAYOUT_MAX_CPUS;
  T.slots_pa[0] = Slots; // published before the watch
  M.write(Table, &T, sizeof(T));
  MemoryOutput Out;
  OddSlotRun R;
  {
    TraceWriter W(Out, 1);
    GroundTruthRecorder G(W);
    GroundTruthLink L(G);
    Cpu *const Cpus[] = {&M.Cpu_};
    EXPECT_TRUE(L.watchSlotTable(M.Mem, Cpus, Table));
    M.Cpu_.Transitions = &L;
    if (Inline)
      L.attachInline(M.Cpu_);
    M.loadCode({
        0x48, 0xbf, 0x00, 0x01, 0x20, 0, 0, 0, 0, 0, // +0  mov rdi, 0x200100 (the slots)
        0x48, 0xb8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // +10 mov rax, imm64
        0x48, 0x89, 0x07,                   // +20 mov [rdi], rax: fills the page's entry
        0x48, 0x89, 0x47, 0x08,             // +23 mov [rdi+8], rax: slot 1
        0x48, 0x89, 0x47, 0x11,             // +27 mov [rdi+0x11], rax: across slots 2, 3
        0x89, 0x47, 0x20,                   // +31 mov [rdi+0x20], eax: 4 bytes of slot 4
        0x48, 0x89, 0x47, 0x28,             // +34 mov [rdi+0x28], rax: past the array
        0x48, 0xbb, 0x80, 0x01, 0x20, 0, 0, 0, 0, 0, // +38 mov rbx, 0x200180
        0x48, 0x89, 0x9f, 0x10, 0x07, 0, 0, // +48 mov [rdi+0x710], rbx: republish CPU 0
        0x48, 0x89, 0x43, 0x08,             // +55 mov [rbx+8], rax: the new array's slot 1
        0x48, 0x89, 0x47, 0x10,             // +59 mov [rdi+0x10], rax: the old array's
        0x48, 0x8d, 0x83, 0x00, 0x02, 0, 0, // +63 lea rax, [rbx+0x200]
        0x31, 0xc9, 0x31, 0xd2,             // +70 xor ecx, ecx; xor edx, edx
        0x0f, 0x01, 0xc8,                   // +74 monitor (a line of the page, not the array's)
        0x48, 0x89, 0x43, 0x20,             // +77 mov [rbx+0x20], rax: slot 4, armed elsewhere
        0x48, 0x89, 0xd8,                   // +81 mov rax, rbx
        0x0f, 0x01, 0xc8,                   // +84 monitor (the new array's line)
        0x48, 0x89, 0x43, 0x10,             // +87 mov [rbx+0x10], rax: the armed monitor's
        0x48, 0x89, 0x43, 0x18,             // +91 mov [rbx+0x18], rax: slot 3
    });
    M.run(16);
    EXPECT_EQ(M.S.Rip, vmxsim::test::kCodeBase + 81);
    R.MonitorElsewhere = M.Cpu_.Monitor.State;
    M.run(4);
    EXPECT_EQ(M.S.Rip, vmxsim::test::kCodeBase + 95);
    R.Placed = M.Cpu_.InlineRecords ? M.Cpu_.InlineRecords->Placed : 0;
    R.Ahead = M.Cpu_.Mmu.slotStoresAhead();
    GroundTruthLink::detachInline(M.Cpu_);
    M.Cpu_.Transitions = nullptr;
    R.Monitor = M.Cpu_.Monitor.State;
    R.Cycles = M.Cpu_.Cycles;
  }
  R.Bytes = Out.Bytes;
  for (const TraceRecord &Rec : vmxsim::trace::testing::readAll(Out.Bytes, ReadOrder::Merged))
    if (vmxsim::trace::GtSlotStoreFields F; vmxsim::trace::gtSlotStoreOf(Rec, F))
      R.Stores.push_back("owner " + std::to_string(F.Owner) + " slot " +
                         std::to_string(F.Slot) + " value " + std::to_string(F.Value) +
                         " rip +" + std::to_string(F.Rip - vmxsim::test::kCodeBase));
    else if (Rec.Event == XT_EV_GtSlotPublish)
      R.Stores.push_back("publish " + std::to_string(Rec.Words[0]) + " at " +
                         std::to_string(uint64_t(Rec.Words[2]) << 32 | Rec.Words[1]));
  return R;
}

} // namespace

// The processor's in-place slot-store records (Mmu::writeSlotInPlace and
// slotRecordInPlace, cpu/inline_records.h) take only an aligned 8-byte store into the
// running CPU's own slot array as the link last published it (a store that meets an
// armed MONITOR's line takes the watched-page path, which triggers it first; a monitor
// armed on another line does not stop them); a hypervisor's odd stores into its slots go
// through the link, which records them as before: the first store (it fills the page's
// TLB entry), one across two slots, one of 4 bytes, one past the array, the table's
// entry republishing CPU 0's array, a store into the old array (no longer a slot: no
// record). The same records, bytes, clock and MONITOR states with and without them.
TEST(GroundTruth, OddSlotStoresGoThroughTheLink) {
  const OddSlotRun Calls = runOddSlotStores(false);
  const OddSlotRun In = runOddSlotStores(true);
  EXPECT_EQ(Calls.Placed, 0u);
  EXPECT_EQ(Calls.Ahead, 0u);
  // +23, +55, +77 and +91 ahead of the watched-page lookup (Mmu::writeSlotInPlace); +87
  // after it, once that path has triggered the monitor (Mmu::storeSeen: MONITOR first,
  // then the record).
  EXPECT_EQ(In.Placed, 5u);
  EXPECT_EQ(In.Ahead, 4u);
  const uint64_t V = 0x1122334455667788ull, Moved = 0x200180;
  const auto slot = [](unsigned S, uint64_t Value, unsigned Rip) {
    return "owner 0 slot " + std::to_string(S) + " value " + std::to_string(Value) + " rip +" +
           std::to_string(Rip);
  };
  const std::vector<std::string> Want = {
      "publish 0 at " + std::to_string(0x200100),
      slot(0, V, 20),
      slot(1, V, 23),
      slot(2, V << 8, 27),  // the bytes of [0x111, 0x119) as each slot now holds them
      slot(3, V >> 56, 27),
      slot(4, 0x55667788, 31),
      "publish 0 at " + std::to_string(Moved),
      slot(1, V, 55),
      slot(4, Moved + 0x200, 77),
      slot(2, Moved, 87),
      slot(3, Moved, 91),
  };
  EXPECT_EQ(In.Stores, Want);
  EXPECT_TRUE(In.Bytes == Calls.Bytes);
  EXPECT_EQ(In.MonitorElsewhere, MonitorState::Phase::Armed);
  EXPECT_EQ(In.MonitorElsewhere, Calls.MonitorElsewhere);
  EXPECT_EQ(In.Monitor, MonitorState::Phase::Triggered);
  EXPECT_EQ(In.Monitor, Calls.Monitor);
  EXPECT_EQ(In.Cycles, Calls.Cycles);
}
