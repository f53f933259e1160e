// The emulator's ground truth (trace/ground_truth.h) on the vmx_e2e image: one
// GT_VMEXIT per VM exit with exactly the exit reasons Bochs reports
// (hvm/images/vmx_e2e/expected_bochs.log), a GT_VMENTRY per entry, and byte-identical
// files from two runs (STYLE 2.8, determinism).
#include "harness/ground_truth_link.h"
#include "harness/machine.h"
#include "tests/support/files.h"
#include "tests/trace/trace_test_util.h"
#include "trace/ground_truth.h"
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
    if (Rec.Event == XT_EV_GtVmExit) {
      ASSERT_EQ(Rec.NumWords, 7);
      EXPECT_TRUE(Rec.HasTsc);
      EXPECT_EQ(Rec.Words[0], 0u); // CPU
      Reasons.push_back(Rec.Words[1]);
    } else if (Rec.Event == XT_EV_GtVmEntry) {
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
    Exits += Rec.Event == XT_EV_GtVmExit;
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
  EXPECT_EQ(R[0].Event, uint32_t(XT_EV_GtVmExit));
  EXPECT_EQ(R[0].Words[1], 10u);
  // CPUID takes its operands in RAX and RCX: GT_VMEXIT_REGS follows its exit (the #PF
  // exit below has none).
  ASSERT_EQ(R[1].Event, uint32_t(XT_EV_GtVmExitRegs));
  const uint32_t Regs[6] = {0x80000001u, 0, 2, 0x12345678u, 0x76543210u, 0xfedcba98u};
  for (unsigned I = 0; I < 6; ++I)
    EXPECT_EQ(R[1].Words[I], Regs[I]) << I;
  EXPECT_EQ(R[2].Event, uint32_t(XT_EV_GtVmExit));
  EXPECT_EQ(R[2].Words[1], 0u);
  ASSERT_EQ(R[3].Event, uint32_t(XT_EV_GtVmExitEvent));
  EXPECT_EQ(R[3].Words[0], 0x80000b0eu);
  EXPECT_EQ(R[3].Words[1], 6u);
  EXPECT_EQ(R[3].Words[2], 0u);
  EXPECT_EQ(R[3].Words[3], 0u);
  EXPECT_EQ(R[3].Words[4], 0u);
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
    case XT_EV_GtVmExit:
      Got.push_back("exit " + std::to_string(Rec.Words[1]));
      break;
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
