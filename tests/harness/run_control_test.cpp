// Run control (harness/run_control.h, Machine::runUntil) and the machine's inspection
// functions: every condition stops where harness/run_control.h says, exactly (checked
// against the ground truth of the same run and the VMCS read by field name); a run that
// is stopped and continued many times is the uninterrupted run byte for byte (serial
// output, both trace files, clocks); errors are values with exact messages.
#include "harness/gtest/vmxsim_gtest.h"
#include "cpu/jit/translator.h"
#include "harness/machine.h"
#include "tests/support/files.h"
#include "tests/support/traced_run.h"
#include "tests/support/vmx_test_machine.h"
#include "trace/gt_records.h"
#include "trace/xentrace.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <memory>
#include <string>
#include <vector>

using namespace vmxsim;
using vmxsim::test::readFile;
using vmxsim::test::TracedMachine;
using vmxsim::test::tracedTempPath;
using vmxsim::testing::ExitInfo;
using vmxsim::testing::GroundTruth;

namespace {

RunResult stopped(ErrorOr<RunResult> R) {
  EXPECT_TRUE(R) << R.error().str();
  return R ? *R : RunResult{};
}

void expectSameRun(const TracedMachine::Outcome &A, const TracedMachine::Outcome &B) {
  EXPECT_EQ(A.Result.Reason, B.Result.Reason);
  EXPECT_EQ(A.Result.ExitStatus, B.Result.ExitStatus);
  EXPECT_EQ(A.Result.Retired, B.Result.Retired);
  EXPECT_EQ(A.Cycles, B.Cycles);
  EXPECT_EQ(A.Retired, B.Retired);
  EXPECT_EQ(A.Serial, B.Serial);
  EXPECT_GT(A.GtBytes.size(), 10000u);
  EXPECT_GT(A.HvBytes.size(), 10000u);
  EXPECT_TRUE(A.GtBytes == B.GtBytes) << "the ground truth differs";
  EXPECT_TRUE(A.HvBytes == B.HvBytes) << "the hypervisor's trace differs";
}

/// Runs M from exit to exit until the hypervisor has published CPU 0's trace slots
/// (GT_SLOT_PUBLISH); their address (0: never).
uint64_t cpu0Slots(Machine &M) {
  for (unsigned I = 0; I < 100; ++I) {
    if (stopped(M.runUntil({StopWhen::vmExit()})).Reason != RunReason::Stopped)
      return 0;
    auto G = GroundTruth::read(M);
    if (!G)
      return 0;
    for (const trace::TraceRecord &Rec : G->records())
      if (Rec.Event == XT_EV_GtSlotPublish && Rec.Words[0] == 0)
        return uint64_t(Rec.Words[1]) | uint64_t(Rec.Words[2]) << 32;
  }
  return 0;
}

} // namespace

TEST(RunControl, StopsAtTheTenthVmExitOfCpu1WithTheGroundTruthsExitInTheVmcs) {
  TracedMachine T("hv.elf", "scenario=mixed", 2, "tenth");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  const RunResult R = stopped(M.runUntil({StopWhen::vmExit().onCpu(1).nth(10)}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  EXPECT_EQ(R.Condition, 0u);
  EXPECT_EQ(R.CpuId, 1u);
  EXPECT_EQ(R.What, "the 10th VM exit on CPU 1");
  // The exit has completed: root operation at the host RIP.
  EXPECT_FALSE(M.cpu(1).NonRoot);
  EXPECT_EQ(M.cpu(1).S.Rip, *M.readVmcs(1, "HostRip"));
  EXPECT_EQ(R.Rip, M.cpu(1).S.Rip);
  // The VMCS holds what the ground truth recorded for CPU 1's 10th exit, its last record.
  auto G = GroundTruth::read(M);
  ASSERT_TRUE(G) << G.error().str();
  const std::vector<ExitInfo> Exits = G->exits(1);
  ASSERT_EQ(Exits.size(), 10u);
  EXPECT_EQ(*M.readVmcs(1, "ExitReason"), Exits[9].Reason);
  EXPECT_EQ(*M.readVmcs(1, "Exit qualification"), Exits[9].Qualification);
  EXPECT_EQ(*M.readVmcs(1, "GuestRip"), Exits[9].Rip);
  EXPECT_EQ(*M.readVmcs(1, "VmExitInstructionLength"), Exits[9].InstructionLength);
  EXPECT_EQ(M.cpu(1).Cycles - Exits[9].Tsc, 100u); // VmTransition (cpu/cost_model.def)
  EXPECT_EQ(Exits[9].Reason, 30u); // I/O instruction: the guest's OUT to COM1
  EXPECT_EQ(Exits[9].Qualification, 0x3f80000u);
  EXPECT_EQ(Exits[9].Rip, 0x1098ddu);
  // Continuing to the end is the run that never stopped.
  TracedMachine Plain("hv.elf", "scenario=mixed", 2, "tenth-plain");
  ASSERT_TRUE(Plain.M);
  expectSameRun(Plain.finish(), T.finish());
}

TEST(RunControl, StopAndContinueAtEveryVmExitAndEntryIsTheUninterruptedRun) {
  TracedMachine Plain("hv.elf", "scenario=mixed", 2, "every-plain");
  TracedMachine T("hv.elf", "scenario=mixed", 2, "every");
  ASSERT_TRUE(Plain.M && T.M);
  unsigned Stops = 0;
  for (;;) {
    const RunResult R =
        stopped(T.M->runUntil({StopWhen::vmExit(), StopWhen::vmEntry()}));
    if (R.Reason != RunReason::Stopped)
      break;
    ++Stops;
  }
  const TracedMachine::Outcome B = T.finish();
  expectSameRun(Plain.finish(), B);
  // One stop at every exit and every entry of the run.
  trace::TraceReader Reader;
  Reader.openMemory(B.GtBytes.data(), B.GtBytes.size());
  unsigned Transitions = 0;
  trace::TraceRecord Rec;
  while (Reader.next(Rec))
    Transitions += trace::isGtExit(Rec.Event) || trace::isGtEntry(Rec.Event);
  EXPECT_EQ(Stops, Transitions);
  EXPECT_EQ(Stops, 692u);
}

TEST(RunControl, StopAndContinueByEveryConditionIsTheUninterruptedRun) {
  TracedMachine Plain("hv.elf", "scenario=mixed", 2, "cond-plain");
  ASSERT_TRUE(Plain.M);
  const TracedMachine::Outcome A = Plain.finish();
  // The hypervisor's exit handler, as the host RIP of the VMCS.
  uint64_t HostRip = 0;
  {
    TracedMachine Probe("hv.elf", "scenario=mixed", 2, "cond-probe");
    ASSERT_EQ(stopped(Probe.M->runUntil({StopWhen::vmExit()})).Reason, RunReason::Stopped);
    HostRip = *Probe.M->readVmcs(0, "HostRip");
  }
  const char *const Names[] = {"instructions", "instructions of CPU 1", "TSC", "serial",
                               "execute", "all"};
  for (unsigned K = 0; K < 6; ++K) {
    SCOPED_TRACE(Names[K]);
    TracedMachine T("hv.elf", "scenario=mixed", 2, "cond");
    ASSERT_TRUE(T.M);
    unsigned Stops = 0;
    uint64_t Tsc = 0;
    for (;;) {
      Tsc += 7919;
      std::vector<StopWhen> All = {StopWhen::instructions(997),
                                   StopWhen::instructions(613).onCpu(1),
                                   StopWhen::tsc(Tsc).onCpu(0), StopWhen::serial("\n"),
                                   StopWhen::execute(Gla(HostRip))};
      const std::vector<StopWhen> Conds = K < 5 ? std::vector<StopWhen>{All[K]} : All;
      const RunResult R = stopped(T.M->runUntil(Conds));
      if (R.Reason != RunReason::Stopped)
        break;
      ++Stops;
    }
    EXPECT_GT(Stops, 5u);
    expectSameRun(A, T.finish());
  }
}

TEST(RunControl, InstructionCountsStopExactlyPerCpuAndInTotal) {
  TracedMachine T("hv.elf", "scenario=mixed", 2, "insns");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  // Let both CPUs run first (CPU 1 waits for its start-up IPI).
  RunResult R = stopped(M.runUntil({StopWhen::instructions(200'000)}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  EXPECT_EQ(R.Retired, 200'000u);
  EXPECT_EQ(R.What, "200000 more instructions");
  const uint64_t Cpu1 = M.cpu(1).Retired;
  EXPECT_GT(Cpu1, 0u);
  R = stopped(M.runUntil({StopWhen::instructions(12'345).onCpu(1)}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  EXPECT_EQ(R.CpuId, 1u);
  EXPECT_EQ(M.cpu(1).Retired, Cpu1 + 12'345);
  EXPECT_EQ(R.What, "12345 more instructions of CPU 1");
  const uint64_t Total = R.Retired;
  R = stopped(M.runUntil({StopWhen::instructions(1)}));
  EXPECT_EQ(R.Retired, Total + 1);
}

TEST(RunControl, VmEntryStopsInNonRootOperationAtTheGuestRip) {
  TracedMachine T("vmx_e2e.elf", "", 1, "entry");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  const RunResult R = stopped(M.runUntil({StopWhen::vmEntry().nth(3)}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  EXPECT_EQ(R.What, "the 3rd VM entry");
  EXPECT_TRUE(M.cpu(0).NonRoot);
  auto G = GroundTruth::read(M);
  ASSERT_TRUE(G) << G.error().str();
  ASSERT_EQ(G->entries().size(), 3u);
  EXPECT_EQ(G->entries()[2].Rip, M.cpu(0).S.Rip);
  EXPECT_LE(G->entries()[2].Tsc, M.cpu(0).Cycles); // the entry is the last thing done
  // The entry's record is the last timed one (GT_GPR records of its registers follow).
  auto Timed = G->records().rbegin();
  while (!Timed->HasTsc)
    ++Timed;
  EXPECT_TRUE(trace::isGtEntry(Timed->Event)) << Timed->Event;
  EXPECT_EQ(*M.readVmcs(0, "GuestRip"), G->entries()[2].Rip);
  EXPECT_EQ(G->exits().size(), 2u);
}

TEST(RunControl, ExecuteStopsBeforeTheInstructionLinearAndPhysical) {
  TracedMachine T("vmx_e2e.elf", "", 1, "exec");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  // The 5th exit's RIP: an instruction of the guest (CPUID, IN, OUT, ...).
  TracedMachine Probe("vmx_e2e.elf", "", 1, "exec-probe");
  ASSERT_TRUE(stopped(Probe.M->runUntil({StopWhen::vmExit().nth(5)})).Reason ==
              RunReason::Stopped);
  auto PG = GroundTruth::read(*Probe.M);
  ASSERT_TRUE(PG);
  const ExitInfo Fifth = PG->exits()[4];
  RunResult R = stopped(M.runUntil({StopWhen::execute(Gla(Fifth.Rip))}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  EXPECT_TRUE(M.cpu(0).NonRoot);
  EXPECT_EQ(M.cpu(0).S.Rip, Fifth.Rip);
  auto G = GroundTruth::read(M);
  ASSERT_TRUE(G);
  EXPECT_EQ(G->exits().size(), 4u); // held before it executed
  // Continuing from there moves on: the instruction runs and exits.
  R = stopped(M.runUntil({StopWhen::vmExit()}));
  G = GroundTruth::read(M);
  ASSERT_TRUE(G);
  ASSERT_EQ(G->exits().size(), 5u);
  EXPECT_EQ(G->exits()[4].Rip, Fifth.Rip);
  EXPECT_EQ(G->exits()[4].Reason, Fifth.Reason);
  // By physical address: the host's exit handler (the host RIP) as the CPU fetches it.
  const uint64_t HostRip = *M.readVmcs(0, "HostRip");
  ErrorOr<Hpa> HostPa = M.translate(0, Gla(HostRip));
  ASSERT_TRUE(HostPa) << HostPa.error().str();
  R = stopped(M.runUntil({StopWhen::vmEntry()}));
  R = stopped(M.runUntil({StopWhen::execute(*HostPa)}));
  std::ostringstream Want;
  Want << "the execution of physical address 0x" << std::hex << HostPa->value();
  EXPECT_EQ(R.What, Want.str());
  EXPECT_FALSE(M.cpu(0).NonRoot);
  EXPECT_EQ(M.cpu(0).S.Rip, HostRip);
  G = GroundTruth::read(M);
  ASSERT_TRUE(G);
  EXPECT_EQ(G->exits().size(), 6u);
}

TEST(RunControl, SerialTextStopsAfterTheOutOfItsLastByte) {
  TracedMachine T("vmx_e2e.elf", "", 1, "serial");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  const RunResult R = stopped(M.runUntil({StopWhen::serial("hello\n")}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  EXPECT_EQ(R.What, "serial output \"hello\\n\"");
  const std::string &Out = M.serialOutput();
  ASSERT_GE(Out.size(), 6u);
  EXPECT_EQ(Out.substr(Out.size() - 6), "hello\n");
}

TEST(RunControl, TscStopsAtTheFirstBoundaryAtOrPastTheValue) {
  TracedMachine T("vmx_e2e.elf", "", 1, "tsc");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  RunResult R = stopped(M.runUntil({StopWhen::tsc(100'000)}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  EXPECT_EQ(R.What, "TSC 100000 on CPU 0");
  // The first boundary at or past it: one instruction earlier the clock was below it.
  EXPECT_GE(M.cpu(0).Cycles, 100'000u);
  const uint64_t N = M.cpu(0).Retired;
  {
    TracedMachine Fresh("vmx_e2e.elf", "", 1, "tsc-fresh");
    ASSERT_EQ(stopped(Fresh.M->runUntil({StopWhen::instructions(N - 1)})).Reason,
              RunReason::Stopped);
    EXPECT_LT(Fresh.M->cpu(0).Cycles, 100'000u);
  }
  // A value already reached stops at once, running nothing.
  const uint64_t Retired = M.cpu(0).Retired;
  R = stopped(M.runUntil({StopWhen::tsc(5)}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  EXPECT_EQ(M.cpu(0).Retired, Retired);
}

TEST(RunControl, WriteStopsAfterTheStoringInstruction) {
  TracedMachine T("hv.elf", "scenario=mixed", 1, "write");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  // Run until the hypervisor has published its trace slots (GT_SLOT_PUBLISH), then
  // watch slot 0 of CPU 0's slot array: the stop follows the store GT_SLOT_OWN records.
  const uint64_t Slots = cpu0Slots(M);
  ASSERT_NE(Slots, 0u);
  const RunResult R = stopped(M.runUntil({StopWhen::write(Hpa(Slots), 8)}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  auto G = GroundTruth::read(M);
  ASSERT_TRUE(G);
  const trace::TraceRecord &Last = G->records().back();
  ASSERT_EQ(Last.Event, XT_EV_GtSlotOwn);
  trace::GtSlotStoreFields F;
  ASSERT_TRUE(trace::gtSlotStoreOf(Last, F));
  EXPECT_EQ(F.Owner, 0u);
  EXPECT_EQ(F.Slot, 0u);
  uint64_t Now = 0;
  ASSERT_FALSE(M.readPhysical(Hpa(Slots), &Now, 8));
  EXPECT_EQ(Now, F.Value);
  const uint64_t StoreRip = F.Rip;
  EXPECT_NE(M.cpu(0).S.Rip, StoreRip); // the store's instruction has completed
  EXPECT_GT(M.cpu(0).S.Rip, StoreRip);
  EXPECT_LT(M.cpu(0).S.Rip, StoreRip + 16);
  // The same through the linear address that maps it in the hypervisor (identity).
  const RunResult R2 = stopped(M.runUntil({StopWhen::write(Gla(Slots), 8).nth(2)}));
  EXPECT_EQ(R2.Reason, RunReason::Stopped);
}

TEST(RunControl, ErrorsAreValuesWithMessages) {
  MachineConfig Cfg;
  Cfg.Serial = OutputSpec::discard();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.NumCpus = 2;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  auto R = M->runUntil({StopWhen::vmExit().onCpu(2)});
  ASSERT_FALSE(R);
  EXPECT_EQ(R.error().Code, ErrorCode::NoSuchCpu);
  EXPECT_EQ(R.error().str(), "condition 0 (the VM exit on CPU 2): the machine has no CPU 2 "
                             "(it has 2)");
  R = M->runUntil({});
  EXPECT_EQ(R.error().str(), "runUntil needs at least one condition");
  R = M->runUntil({StopWhen::serial("")});
  EXPECT_EQ(R.error().Code, ErrorCode::BadCondition);
  R = M->runUntil({StopWhen::instructions(0)});
  EXPECT_EQ(R.error().str(), "condition 0: 0 more instructions can never be met");
  EXPECT_EQ(M->readVmcs(0, "GuestRip").error().str(), "CPU 0 has no current VMCS");
  EXPECT_EQ(M->readVmcs(0, "GuestRip").error().Code, ErrorCode::NoCurrentVmcs);
  EXPECT_EQ(M->readVmcs(0, "Guest Rip").error().str(),
            "\"Guest Rip\" is no VMCS field (cpu/vmx/vmcs_fields.def)");
  EXPECT_EQ(M->readVmcs(3, "GuestRip").error().str(), "the machine has no CPU 3 (it has 2)");
  EXPECT_EQ(M->readRegister(0, "rax2").error().str(), "no register \"rax2\"");
  EXPECT_EQ(M->readMsr(0, 0x12345678).error().str(), "RDMSR of 0x12345678 on CPU 0 raises #GP");
  EXPECT_EQ(M->writeMsr(1, 0x10, 0).str(), "");
  // Paging on, nothing mapped at 0x7000'0000: CR0.PG with a zeroed PML4.
  ASSERT_FALSE(M->writeRegister(0, "cr4", 0x20));        // PAE
  ASSERT_FALSE(M->writeRegister(0, "efer", 0x500));      // LME | LMA
  ASSERT_FALSE(M->writeRegister(0, "cr3", 0x100000));
  ASSERT_FALSE(M->writeRegister(0, "cr0", 0x80000011));  // PG | ET | PE
  uint8_t B = 0;
  const Error E = M->readLinear(0, Gla(0x70000000), &B, 1);
  EXPECT_EQ(E.Code, ErrorCode::UnmappedAddress);
  EXPECT_EQ(E.str(), "linear address 0x70000000 is not mapped on CPU 0");
  EXPECT_EQ(M->readPhysical(Hpa(0xfffffffff000), &B, 1).str(),
            "physical range 0xfffffffff000+0x1 is not all RAM");
  EXPECT_EQ(M->groundTruthRecords().error().str(),
            "the machine records no ground truth (MachineConfig::GroundTruthFile is empty)");
  EXPECT_EQ(M->hypervisorTraceRecords().error().Code, ErrorCode::NoTrace);
}

TEST(RunControl, RegistersMemoryMsrsAndVmcsReadAndWrite) {
  TracedMachine T("vmx_e2e.elf", "", 1, "rw");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  ASSERT_EQ(stopped(M.runUntil({StopWhen::vmExit().reason(ExitReason::IoInstruction)})).Reason,
            RunReason::Stopped);
  // Registers by name and as the whole state agree.
  ErrorOr<CpuState> S = M.registers(0);
  ASSERT_TRUE(S);
  EXPECT_EQ(*M.readRegister(0, "rip"), S->Rip);
  EXPECT_EQ(*M.readRegister(0, "cs"), S->cs().Selector);
  EXPECT_EQ(*M.readRegister(0, "cs.attr"), S->cs().Attr);
  EXPECT_EQ(*M.readRegister(0, "gdtr.base"), S->Gdtr.Base);
  EXPECT_EQ(*M.readRegister(0, "cr3"), S->Cr3);
  EXPECT_EQ(*M.readRegister(0, "dr7"), S->Dr[7]);
  ASSERT_FALSE(M.writeRegister(0, "r15", 0x1234));
  EXPECT_EQ(M.cpu(0).S.Gpr[15], 0x1234u);
  // MSRs through the MSR layer.
  ASSERT_FALSE(M.writeMsr(0, 0xc0000103, 0x77)); // IA32_TSC_AUX
  EXPECT_EQ(*M.readMsr(0, 0xc0000103), 0x77u);
  // Memory: linear (through the host's paging) and physical agree.
  const uint64_t Rsp = S->Gpr[4];
  ErrorOr<Hpa> Pa = M.translate(0, Gla(Rsp));
  ASSERT_TRUE(Pa);
  const uint64_t Magic = 0x0123456789abcdefull;
  ASSERT_FALSE(M.writeLinear(0, Gla(Rsp - 64), &Magic, 8));
  uint64_t Back = 0;
  ASSERT_FALSE(M.readPhysical(Hpa(Pa->value() - 64), &Back, 8));
  EXPECT_EQ(Back, Magic);
  // The current VMCS by both names, and by its region's address.
  const uint64_t Vmcs = M.cpu(0).Vmx->CurrentVmcsPointer;
  EXPECT_EQ(*M.readVmcs(0, "ExitReason"), 30u);
  EXPECT_EQ(*M.readVmcs(0, "Exit reason"), 30u);
  EXPECT_EQ(*M.readVmcsAt(Hpa(Vmcs), "ExitReason"), 30u);
  ASSERT_FALSE(M.writeVmcs(0, "GuestRsp", 0xabcdef));
  EXPECT_EQ(*M.readVmcsAt(Hpa(Vmcs), "GuestRsp"), 0xabcdefu);
  ASSERT_FALSE(M.writeVmcs(0, "VmExitInstructionLength", 0x1'0000'0002)); // 32-bit field
  EXPECT_EQ(*M.readVmcs(0, "VmExitInstructionLength"), 2u);
}

TEST(RunControl, TraceSoFarIsEachCpusPrefixOfTheFinishedTraces) {
  TracedMachine T("hv.elf", "scenario=mixed", 2, "sofar");
  ASSERT_TRUE(T.M);
  Machine &M = *T.M;
  ASSERT_EQ(stopped(M.runUntil({StopWhen::vmExit().onCpu(0).nth(100)})).Reason,
            RunReason::Stopped);
  auto Gt = M.groundTruthRecords();
  auto Hv = M.hypervisorTraceRecords();
  ASSERT_TRUE(Gt) << Gt.error().str();
  ASSERT_TRUE(Hv) << Hv.error().str();
  EXPECT_GT(Gt->size(), 1000u);
  EXPECT_GT(Hv->size(), 100u);
  // Looking drained nothing: the run goes on as if nobody had looked.
  TracedMachine Plain("hv.elf", "scenario=mixed", 2, "sofar-plain");
  ASSERT_TRUE(Plain.M);
  const TracedMachine::Outcome A = Plain.finish();
  const TracedMachine::Outcome B = T.finish();
  expectSameRun(A, B);
  auto perCpu = [](const std::vector<trace::TraceRecord> &Recs, unsigned Cpu) {
    std::vector<std::vector<uint32_t>> Out;
    for (const trace::TraceRecord &R : Recs)
      if (R.Cpu == Cpu) {
        std::vector<uint32_t> Key = {R.Event, uint32_t(R.Tsc), uint32_t(R.Tsc >> 32)};
        Key.insert(Key.end(), R.Words, R.Words + R.NumWords);
        Out.push_back(Key);
      }
    return Out;
  };
  auto readAll = [](const std::string &Bytes) {
    trace::TraceReader Reader;
    Reader.openMemory(Bytes.data(), Bytes.size());
    std::vector<trace::TraceRecord> Out;
    trace::TraceRecord R;
    while (Reader.next(R))
      Out.push_back(R);
    return Out;
  };
  const auto GtAll = readAll(B.GtBytes), HvAll = readAll(B.HvBytes);
  for (unsigned Cpu = 0; Cpu < 2; ++Cpu) {
    for (auto [SoFar, All] : {std::pair{&*Gt, &GtAll}, std::pair{&*Hv, &HvAll}}) {
      const auto Part = perCpu(*SoFar, Cpu), Whole = perCpu(*All, Cpu);
      ASSERT_LE(Part.size(), Whole.size());
      EXPECT_GT(Part.size(), 10u);
      EXPECT_TRUE(std::equal(Part.begin(), Part.end(), Whole.begin())) << "CPU " << Cpu;
    }
  }
}

namespace {
/// A machine whose CPU 0 runs Code at 0x100000 in 64-bit mode (identity paging of
/// tests/support/test_machine.h).
std::unique_ptr<Machine> bareLongMode(const std::vector<uint8_t> &Code,
                                      ExecMode Exec = ExecMode::Interp,
                                      uint64_t MaxInsns = 1000) {
  MachineConfig Cfg;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Cfg.MaxInsns = MaxInsns;
  Cfg.Exec = Exec;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_FALSE(Err) << Err.str();
  if (!M)
    return M;
  test::writeFlatGdt(M->mem());
  test::setupLongMode(M->cpu(0), M->mem());
  M->mem().copyIn(Hpa(test::kCodeBase), Code.data(), Code.size());
  M->cpu(0).S.Rip = test::kCodeBase;
  return M;
}

/// A device that stores into memory (as a DMA engine would) when port 0x510 is
/// written: the byte written, at Target.
class StoringDevice final : public PortDevice {
public:
  StoringDevice(PhysMem &Mem, uint64_t Target) : Mem(Mem), Target(Target) {}
  uint32_t ioRead(uint16_t, unsigned) override { return 0; }
  void ioWrite(uint16_t, unsigned, uint32_t Value) override {
    Mem.write(Hpa(Target), 1, Value);
  }
  PhysMem &Mem;
  uint64_t Target;
};
} // namespace

// A write stop sees the stores no instruction makes (issue 18): the processor's own
// accessed-flag update of a page-table entry during a page walk, and a device's store.
TEST(RunControl, WriteStopsAfterAnAccessedFlagUpdateOfThePageWalk) {
  // nop; mov rsi, [rbx] (RBX = 0x200000: its walk sets the accessed flag of the 2 MiB
  // PDE 1, clear as set up); nop; hlt
  auto M = bareLongMode({0x90, 0x48, 0x8b, 0x33, 0x90, 0xf4});
  ASSERT_TRUE(M);
  M->cpu(0).S.Gpr[RBX] = test::kDataBase;
  const uint64_t Pde = test::kPml4Base + 0x2000 + 8;
  ASSERT_EQ(M->mem().read(Hpa(Pde), 8) & 0x20, 0u);
  const RunResult R = stopped(M->runUntil({StopWhen::write(Hpa(Pde), 8)}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  EXPECT_EQ(M->cpu(0).S.Rip, test::kCodeBase + 4); // after the reading instruction
  EXPECT_EQ(M->mem().read(Hpa(Pde), 8) & 0x20, 0x20u);
}

TEST(RunControl, WriteStopsAfterTheInstructionWhoseDeviceStored) {
  // mov al, 0x5a; mov dx, 0x510; out dx, al; nop; hlt
  auto M = bareLongMode({0xb0, 0x5a, 0x66, 0xba, 0x10, 0x05, 0xee, 0x90, 0xf4});
  ASSERT_TRUE(M);
  const uint64_t Target = test::kDataBase + 0x123;
  StoringDevice Dev(M->mem(), Target);
  M->io().add(0x510, 1, &Dev);
  const RunResult R = stopped(M->runUntil({StopWhen::write(Hpa(Target), 1)}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  EXPECT_EQ(M->cpu(0).S.Rip, test::kCodeBase + 7); // after the OUT
  EXPECT_EQ(M->mem().read(Hpa(Target), 1), 0x5au);
}

namespace {
/// RBX = kDataBase; the watched bytes are [kDataBase, kDataBase + 4).
///   +0  mov ecx, 1000
///   +5  loop: mov eax, [rbx+4]   (the bytes after the range: no stop)
///   +8  mov [rbx+8], eax
///   +11 dec ecx
///   +13 jnz loop
///   +15 mov [rbx], eax           (a write: no read stop)
///   +17 nop
///   +18 mov esi, [rbx]           (a read)
///   +20 nop
///   +21 add [rbx], eax           (a read and a write)
///   +23 hlt
const std::vector<uint8_t> kWatchLoop = {
    0xb9, 0xe8, 0x03, 0x00, 0x00, 0x8b, 0x43, 0x04, 0x89, 0x43, 0x08, 0xff,
    0xc9, 0x75, 0xf6, 0x89, 0x03, 0x90, 0x8b, 0x33, 0x90, 0x01, 0x03, 0xf4};

/// Runs kWatchLoop under Exec: 2000 instructions with nothing set (translated, under
/// --exec translate, with the data page in the TLBs), then runUntil(Cond) until the run
/// ends; the (retired, RIP) of each stop.
std::vector<std::pair<uint64_t, uint64_t>> watchStops(ExecMode Exec, const StopWhen &Cond) {
  std::vector<std::pair<uint64_t, uint64_t>> Stops;
  auto M = bareLongMode(kWatchLoop, Exec, 100000);
  EXPECT_TRUE(M);
  if (!M)
    return Stops;
  M->cpu(0).S.Gpr[RBX] = test::kDataBase;
  EXPECT_EQ(stopped(M->runUntil({StopWhen::instructions(2000)})).Reason, RunReason::Stopped);
  if (Exec == ExecMode::Translate) { // the loop ran translated
    EXPECT_GT(M->cpu(0).Jit->stats().InsnsTranslated, 1000u);
  }
  for (unsigned I = 0; I < 10; ++I) {
    const RunResult R = stopped(M->runUntil({Cond}));
    if (R.Reason != RunReason::Stopped)
      break;
    EXPECT_EQ(R.What, Cond.describe());
    Stops.push_back({M->cpu(0).Retired, M->cpu(0).S.Rip - test::kCodeBase});
  }
  return Stops;
}
} // namespace

// Read and access stops (issue 18): right after the instruction that read (or, for
// access, wrote) a byte of the range, on the instruction count and RIP the program
// fixes, interpreted and translated alike; reads of the neighbouring bytes and writes
// do not stop a read stop.
TEST(RunControl, ReadStopsAfterTheReadingInstructionInterpretedAndTranslated) {
  for (ExecMode Exec : {ExecMode::Interp, ExecMode::Translate}) {
    SCOPED_TRACE(Exec == ExecMode::Interp ? "interp" : "translate");
    // 1 + 4 x 1000 instructions of the loop, the write, the nop, the read: 4004.
    const std::vector<std::pair<uint64_t, uint64_t>> Want = {{4004, 20}, {4006, 23}};
    EXPECT_EQ(watchStops(Exec, StopWhen::read(Hpa(test::kDataBase), 4)), Want);
    EXPECT_EQ(watchStops(Exec, StopWhen::read(Gla(test::kDataBase + 3), 1)), Want);
    // A range across a page boundary: two pieces, one condition.
    EXPECT_EQ(watchStops(Exec, StopWhen::read(Gla(test::kDataBase - 2), 4)), Want);
    // The 2nd read.
    EXPECT_EQ(watchStops(Exec, StopWhen::read(Hpa(test::kDataBase), 4).nth(2)),
              (std::vector<std::pair<uint64_t, uint64_t>>{{4006, 23}}));
  }
}

TEST(RunControl, AccessStopsAfterEveryInstructionThatReadOrWroteTheRange) {
  for (ExecMode Exec : {ExecMode::Interp, ExecMode::Translate}) {
    SCOPED_TRACE(Exec == ExecMode::Interp ? "interp" : "translate");
    const std::vector<std::pair<uint64_t, uint64_t>> Want = {{4002, 17}, {4004, 20}, {4006, 23}};
    EXPECT_EQ(watchStops(Exec, StopWhen::access(Hpa(test::kDataBase), 4)), Want);
    EXPECT_EQ(watchStops(Exec, StopWhen::access(Gla(test::kDataBase), 2)), Want);
    EXPECT_EQ(watchStops(Exec, StopWhen::access(Gla(test::kDataBase - 0x1000), 0x1001)), Want);
    // The write stop of the same program, for comparison: the write and the RMW.
    EXPECT_EQ(watchStops(Exec, StopWhen::write(Hpa(test::kDataBase), 4)),
              (std::vector<std::pair<uint64_t, uint64_t>>{{4002, 17}, {4006, 23}}));
  }
  // A read-modify-write is a read and a write: the 4th access is the ADD's store.
  EXPECT_EQ(watchStops(ExecMode::Interp, StopWhen::access(Hpa(test::kDataBase), 4).nth(4)),
            (std::vector<std::pair<uint64_t, uint64_t>>{{4006, 23}}));
  EXPECT_EQ(StopWhen::access(Hpa(0x1000), 4).describe(),
            "the access to physical address 0x1000 (4 bytes)");
  EXPECT_EQ(StopWhen::read(Gla(0x2000), 8).onCpu(1).nth(3).describe(),
            "the 3rd read of linear address 0x2000 (8 bytes) on CPU 1");
}

TEST(RunControl, ReadAndAccessRangesAreCheckedAsWriteRangesAre) {
  auto M = bareLongMode(kWatchLoop);
  ASSERT_TRUE(M);
  ErrorOr<RunResult> R = M->runUntil({StopWhen::read(Hpa(0x1000), 0)});
  ASSERT_FALSE(R);
  EXPECT_EQ(R.error().str(), "condition 0: a read range of 0 bytes at 0x1000");
  R = M->runUntil({StopWhen::access(Hpa(~uint64_t(0)), 2)});
  ASSERT_FALSE(R);
  EXPECT_EQ(R.error().str(), "condition 0: an access range of 2 bytes at 0xffffffffffffffff");
  R = M->runUntil({StopWhen::read(Gla(0x7fff00000000), 4)});
  ASSERT_FALSE(R);
  EXPECT_EQ(R.error().str(), "linear address 0x7fff00000000 is not mapped on CPU 0");
  EXPECT_FALSE(M->mem().readWatching()); // nothing was left installed
}

// A run with a read stop on the hypervisor's trace slots (read by its exit handler),
// stopped and continued at every read, is the uninterrupted run byte for byte; so is one
// with an access stop.
TEST(RunControl, StopAndContinueAtEveryReadOfTheSlotsIsTheUninterruptedRun) {
  TracedMachine Plain("hv.elf", "scenario=mixed", 2, "read-plain");
  ASSERT_TRUE(Plain.M);
  const TracedMachine::Outcome A = Plain.finish();
  for (const bool Access : {false, true}) {
    SCOPED_TRACE(Access ? "access" : "read");
    TracedMachine T("hv.elf", "scenario=mixed", 2, Access ? "access" : "read");
    ASSERT_TRUE(T.M);
    Machine &M = *T.M;
    const uint64_t Slots = cpu0Slots(M);
    ASSERT_NE(Slots, 0u);
    const StopWhen Cond =
        Access ? StopWhen::access(Hpa(Slots), 40) : StopWhen::read(Hpa(Slots), 40);
    unsigned Stops = 0;
    for (;;) {
      const RunResult R = stopped(M.runUntil({Cond}));
      if (R.Reason != RunReason::Stopped)
        break;
      ++Stops;
    }
    EXPECT_GT(Stops, 100u);
    expectSameRun(A, T.finish());
  }
}

namespace {
/// A device that reads memory (as a DMA engine would) when port 0x511 is written.
class ReadingDevice final : public PortDevice {
public:
  ReadingDevice(PhysMem &Mem, uint64_t Source) : Mem(Mem), Source(Source) {}
  uint32_t ioRead(uint16_t, unsigned) override { return 0; }
  void ioWrite(uint16_t, unsigned, uint32_t) override { Seen = Mem.read(Hpa(Source), 4); }
  PhysMem &Mem;
  uint64_t Source;
  uint64_t Seen = 0;
};
} // namespace

// A device's read (DMA) is no read of the read stop (run_control.h): the stop follows the
// instruction's read after it.
TEST(RunControl, ReadStopsIgnoreADevicesRead) {
  // mov dx, 0x511; out dx, al; nop; mov esi, [rbx]; nop; hlt
  auto M = bareLongMode({0x66, 0xba, 0x11, 0x05, 0xee, 0x90, 0x8b, 0x33, 0x90, 0xf4});
  ASSERT_TRUE(M);
  M->cpu(0).S.Gpr[RBX] = test::kDataBase;
  const uint32_t Value = 0x12345678;
  M->mem().copyIn(Hpa(test::kDataBase), &Value, 4);
  ReadingDevice Dev(M->mem(), test::kDataBase);
  M->io().add(0x511, 1, &Dev);
  const RunResult R = stopped(M->runUntil({StopWhen::read(Hpa(test::kDataBase), 4)}));
  EXPECT_EQ(R.Reason, RunReason::Stopped);
  EXPECT_EQ(Dev.Seen, Value);                        // the device read it first
  EXPECT_EQ(M->cpu(0).S.Rip, test::kCodeBase + 8); // after the MOV, not the OUT
  EXPECT_EQ(M->cpu(0).S.Gpr[RSI], Value);
}
