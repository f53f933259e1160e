// MONITOR/MWAIT on the machine (cpu/monitor.h): a processor waiting in MWAIT is woken by
// another processor's store into its monitored line at that store's virtual time, as
// Linux's idle loop relies on (a CPU sets TIF_NEED_RESCHED in the idle CPU's monitored
// thread flags instead of sending an IPI); an APIC timer interrupt masked by RFLAGS.IF
// wakes MWAIT with ECX[0] = 1; a snapshot taken while a processor waits continues byte
// for byte as the uninterrupted run; and the run control's write stops see stores
// that no instruction makes (an accessed-flag update, a device's store).
#include "cpu/cost_model.h"
#include "harness/machine.h"
#include "tests/support/files.h"
#include "tests/support/test_machine.h"
#include "tests/support/traced_run.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace vmxsim;

namespace {

constexpr uint64_t kCode0 = 0x100000, kCode1 = 0x101000;
constexpr uint64_t kLine = 0x200040;   ///< CPU 0's monitored line
constexpr uint64_t kResult = 0x200100; ///< CPU 0's TSC after its wake-up
constexpr uint64_t kApic = 0xfee00000;

RunResult stopped(ErrorOr<RunResult> R) {
  EXPECT_TRUE(R) << R.error().str();
  return R ? *R : RunResult{};
}

std::unique_ptr<Machine> machine(unsigned Cpus) {
  MachineConfig Cfg;
  Cfg.NumCpus = Cpus;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Cfg.MaxInsns = 1000000;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_FALSE(Err) << Err.str();
  return M;
}

void put(Machine &M, uint64_t Pa, const std::vector<uint8_t> &Bytes) {
  ASSERT_TRUE(M.mem().copyIn(Hpa(Pa), Bytes.data(), Bytes.size()));
}
uint64_t get64(Machine &M, uint64_t Pa) { return M.mem().read(Hpa(Pa), 8); }

/// CPU Id in 64-bit mode at Rip (identity paging shared by all CPUs), active.
void start(Machine &M, unsigned Id, uint64_t Rip) {
  Cpu &C = M.cpu(Id);
  test::writeFlatGdt(M.mem());
  test::setupLongMode(C, M.mem());
  C.S.Rip = Rip;
  C.S.Gpr[RSP] = 0x80000 - 0x1000 * Id;
  C.Activity = ActivityState::Active;
}

// CPU 0: monitor [kLine]; mwait; rdtsc; mov [rbx], eax; mov [rbx+4], edx; hlt.
const std::vector<uint8_t> kWaiter = {0x0f, 0x01, 0xc8, 0x0f, 0x01, 0xc9, 0x0f, 0x31,
                                      0x89, 0x03, 0x89, 0x53, 0x04, 0xf4};
// CPU 1: mov ecx, 200; dec ecx; jnz -4; rdtsc; mov [rbx], eax (into CPU 0's line);
// mov [rbx+4], edx; hlt.
const std::vector<uint8_t> kStorer = {0xb9, 0xc8, 0, 0, 0, 0xff, 0xc9, 0x75, 0xfc, 0x0f,
                                      0x31, 0x89, 0x03, 0x89, 0x53, 0x04, 0xf4};

/// The two-CPU scenario: CPU 0 waits in MWAIT on kLine, CPU 1 stores its TSC there.
std::unique_ptr<Machine> wakeScenario() {
  auto M = machine(2);
  if (!M)
    return M;
  put(*M, kCode0, kWaiter);
  put(*M, kCode1, kStorer);
  start(*M, 0, kCode0);
  start(*M, 1, kCode1);
  Cpu &C0 = M->cpu(0), &C1 = M->cpu(1);
  C0.S.Gpr[RAX] = kLine;
  C0.S.Gpr[RCX] = C0.S.Gpr[RDX] = 0;
  C0.S.Gpr[RBX] = kResult;
  C1.S.Gpr[RBX] = kLine + 8;
  return M;
}

struct Finish {
  uint64_t Cycles0, Cycles1, Retired0, Retired1, Rip0, Rip1, Stored, Woke;
  bool operator==(const Finish &) const = default;
};
Finish finish(Machine &M) {
  return {M.cpu(0).Cycles, M.cpu(1).Cycles, M.cpu(0).Retired, M.cpu(1).Retired,
          M.cpu(0).S.Rip, M.cpu(1).S.Rip, get64(M, kLine + 8), get64(M, kResult)};
}

} // namespace

TEST(MonitorMwaitMachine, StoreByAnotherCpuWakesMwaitAtTheStoresVirtualTime) {
  auto M = wakeScenario();
  ASSERT_TRUE(M);
  const RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::Halted) << R.describe();
  const Finish F = finish(*M);
  EXPECT_EQ(F.Rip0, kCode0 + kWaiter.size());
  EXPECT_EQ(F.Rip1, kCode1 + kStorer.size());
  // CPU 1's RDTSC read T; its store started RDTSC's cost later, and CPU 0, woken by it,
  // read the TSC right then: its first instruction after MWAIT.
  EXPECT_EQ(F.Woke, F.Stored + costOf(CostClass::System));
  EXPECT_GT(F.Stored, 400u); // after CPU 1's loop: CPU 0 really waited
  EXPECT_EQ(M->cpu(0).Retired, 6u);
  // The time CPU 0 waited is halted time.
  EXPECT_EQ(M->cpu(0).HaltedCycles,
            F.Woke - costOf(CostClass::System) - costOf(CostClass::Halt)); // MONITOR, MWAIT
  // Deterministic: a second run is the same run.
  auto M2 = wakeScenario();
  ASSERT_TRUE(M2);
  M2->run();
  EXPECT_EQ(finish(*M2), F);
}

TEST(MonitorMwaitMachine, SnapshotWhileWaitingInMwaitContinuesAsTheUninterruptedRun) {
  auto Whole = wakeScenario();
  ASSERT_TRUE(Whole);
  Whole->run();
  const Finish Expected = finish(*Whole);

  auto M = wakeScenario();
  ASSERT_TRUE(M);
  // CPU 1 half-way through its loop: CPU 0 waits in MWAIT.
  const RunResult R = stopped(M->runUntil({StopWhen::instructions(150).onCpu(1)}));
  ASSERT_EQ(R.Reason, RunReason::Stopped);
  ASSERT_TRUE(mwaitWaiting(M->cpu(0)));
  const std::string Snap = test::tracedTempPath("mwait", "mid.snap");
  ASSERT_FALSE(M->saveSnapshot(Snap));
  M->run();
  EXPECT_EQ(finish(*M), Expected);

  auto Restored = machine(2);
  ASSERT_TRUE(Restored);
  ASSERT_FALSE(Restored->restoreSnapshot(Snap));
  EXPECT_TRUE(mwaitWaiting(Restored->cpu(0)));
  EXPECT_EQ(Restored->cpu(0).Monitor.Line, kLine);
  Restored->run();
  EXPECT_EQ(finish(*Restored), Expected);
  // Byte for byte: the two machines' end states are the same snapshot.
  const std::string EndA = test::tracedTempPath("mwait", "end-a.snap"),
                    EndB = test::tracedTempPath("mwait", "end-b.snap");
  ASSERT_FALSE(M->saveSnapshot(EndA));
  ASSERT_FALSE(Restored->saveSnapshot(EndB));
  EXPECT_TRUE(test::readFile(EndA) == test::readFile(EndB));
  std::remove(Snap.c_str());
  std::remove(EndA.c_str());
  std::remove(EndB.c_str());
}

TEST(MonitorMwaitMachine, MaskedTimerInterruptWakesMwaitWithEcxBitZeroAtItsExpiry) {
  for (const bool Break : {false, true}) {
    SCOPED_TRACE(Break);
    auto M = machine(1);
    ASSERT_TRUE(M);
    // monitor; mov ecx, Break; mwait; rdtsc; mov [rbx], eax; mov [rbx+4], edx; hlt
    put(*M, kCode0, {0x0f, 0x01, 0xc8, 0xb9, uint8_t(Break), 0, 0, 0, 0x0f, 0x01, 0xc9,
                     0x0f, 0x31, 0x89, 0x03, 0x89, 0x53, 0x04, 0xf4});
    start(*M, 0, kCode0);
    Cpu &C = M->cpu(0);
    C.S.Rflags &= ~rflags::IF;
    C.S.Gpr[RAX] = kLine;
    C.S.Gpr[RCX] = C.S.Gpr[RDX] = 0;
    C.S.Gpr[RBX] = kResult;
    C.Cycles = 0;
    // APIC timer: one-shot, vector 0x40, divide by 1, 5000 cycles.
    PhysMem &Mem = M->mem();
    Mem.write(Hpa(kApic + 0xf0), 4, 0x1ff);
    Mem.write(Hpa(kApic + 0x320), 4, 0x40);
    Mem.write(Hpa(kApic + 0x3e0), 4, 0xb);
    Mem.write(Hpa(kApic + 0x380), 4, 5000);
    const RunResult R = M->run();
    EXPECT_EQ(R.Reason, RunReason::Halted) << R.describe();
    if (Break) {
      EXPECT_EQ(C.S.Rip, kCode0 + 19);
      EXPECT_EQ(get64(*M, kResult), 5000u); // woken at the timer's expiry exactly
    } else {
      EXPECT_EQ(C.S.Rip, kCode0 + 11); // still waiting after MWAIT
      EXPECT_TRUE(mwaitWaiting(C));
    }
  }
}
