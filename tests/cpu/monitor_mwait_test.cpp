// MONITOR and MWAIT on one processor (SDM Vol. 2B, MONITOR and MWAIT; Vol. 3A,
// "MONITOR/MWAIT Instruction"; cpu/monitor.h): what is advertised, the faults, the
// wait and what ends it: a store into the monitored line by another agent or by the
// processor itself (an accessed-flag update of its page walk), a store before MWAIT, and
// interrupts, masked ones only with ECX[0] = 1. The multi-processor wake-up and the
// snapshot of a waiting machine are in tests/harness/mwait_machine_test.cpp, the VMX
// controls in tests/vmx/vm_exits_events_test.cpp.
#include "cpu/cpuid.h"
#include "cpu/msrs.h"
#include "tests/cpu/insn_fault_helpers.h"
#include "tests/cpu/system_test_support.h"
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr uint64_t kLine = kDataBase + 0x40; ///< the monitored line (RAX of MONITOR)

// monitor; mwait; nop; hlt (RAX = the address, ECX/EDX from the caller).
const std::vector<uint8_t> kMonitorMwait = {0x0f, 0x01, 0xc8, 0x0f, 0x01, 0xc9, 0x90, 0xf4};
constexpr uint64_t kAfterMwait = kCodeBase + 6;

void longMode(TestMachine &M) {
  M.setupLongMode();
  M.S.Gpr[RAX] = kLine + 8;
  M.S.Gpr[RCX] = 0;
  M.S.Gpr[RDX] = 0;
}

} // namespace

TEST(MonitorMwait, CpuidAdvertisesMonitorAndLeafFive) {
  TestMachine M;
  const CpuidResult L1 = cpuidQuery(M.Cpu_, 1, 0);
  EXPECT_EQ(L1.Ecx & cpuidbit::Monitor, cpuidbit::Monitor);
  const CpuidResult L5 = cpuidQuery(M.Cpu_, 5, 0);
  EXPECT_EQ(L5.Eax, 64u); // smallest monitor line
  EXPECT_EQ(L5.Ebx, 64u); // largest monitor line
  EXPECT_EQ(L5.Ecx, 3u);  // extensions enumerated; interrupts break even when masked
  EXPECT_EQ(L5.Edx, 0x11u); // one C0 and one C1 sub-state
  uint64_t Misc = 0;
  ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_MISC_ENABLE, Misc), Status::Ok);
  EXPECT_EQ(Misc & (1u << 18), 1u << 18); // ENABLE MONITOR FSM at reset
}

TEST(MonitorMwait, MwaitWaitsUntilAStoreIntoTheMonitoredLine) {
  TestMachine M;
  longMode(M);
  M.loadCode(kMonitorMwait);
  EXPECT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kAfterMwait); // MWAIT completed; the processor waits after it
  EXPECT_TRUE(mwaitWaiting(M.Cpu_));
  const uint64_t Waited = M.Cpu_.Cycles;
  // A store outside the line (the next line) does not end the wait.
  M.Mem.write(Hpa(kLine + 64), 8, 1);
  EXPECT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kAfterMwait);
  // A store into the line by another agent does, at that agent's time (here a device
  // store between runs: the processor's own time).
  M.Mem.write(Hpa(kLine + 63), 1, 1);
  EXPECT_FALSE(M.Cpu_.waiting());
  EXPECT_EQ(M.Cpu_.Cycles, Waited);
  EXPECT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kAfterMwait + 2); // nop; hlt
  EXPECT_FALSE(mwaitWaiting(M.Cpu_));
  EXPECT_FALSE(M.Mem.watching()); // the monitor is disarmed: its line is not watched
}

TEST(MonitorMwait, StoreBetweenMonitorAndMwaitMakesMwaitFallThrough) {
  TestMachine M;
  longMode(M);
  // monitor; mov [rax], ecx (into the line); mwait; mwait (no MONITOR: falls through
  // too); hlt.
  M.loadCode({0x0f, 0x01, 0xc8, 0x89, 0x08, 0x0f, 0x01, 0xc9, 0x0f, 0x01, 0xc9, 0xf4});
  EXPECT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kCodeBase + 12);
  EXPECT_EQ(M.Cpu_.Retired, 5u);
  EXPECT_FALSE(mwaitWaiting(M.Cpu_));
}

TEST(MonitorMwait, AccessedFlagUpdateOfThePageWalkTriggersTheMonitor) {
  TestMachine M;
  longMode(M);
  // The 2 MiB PDE that maps kDataBase (PD entry 1 at kPml4Base + 0x2000, accessed flag
  // clear as set up): MONITOR on it, then a read of kDataBase sets its accessed flag, a
  // store by the processor itself into the monitored line; MWAIT falls through.
  const uint64_t Pde = kPml4Base + 0x2000 + 8;
  ASSERT_EQ(M.read64(Pde) & 0x20, 0u);
  M.S.Gpr[RAX] = Pde;
  M.S.Gpr[RBX] = kDataBase;
  // monitor; mov rsi, [rbx]; mwait; hlt
  M.loadCode({0x0f, 0x01, 0xc8, 0x48, 0x8b, 0x33, 0x0f, 0x01, 0xc9, 0xf4});
  EXPECT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.read64(Pde) & 0x20, 0x20u);
  EXPECT_EQ(M.S.Rip, kCodeBase + 10);
  EXPECT_FALSE(mwaitWaiting(M.Cpu_));
}

TEST(MonitorMwait, MaskedInterruptEndsTheWaitOnlyWithEcxBitZero) {
  for (const bool Break : {false, true}) {
    SCOPED_TRACE(Break);
    TestMachine M;
    OneInterrupt Intr;
    M.Cpu_.Intr = &Intr;
    longMode(M);
    M.S.Rflags &= ~rflags::IF;
    // monitor (ECX = 0); mov ecx, Break; mwait; nop; hlt
    M.loadCode({0x0f, 0x01, 0xc8, 0xb9, uint8_t(Break), 0, 0, 0, 0x0f, 0x01, 0xc9, 0x90, 0xf4});
    EXPECT_EQ(M.run(100), StopReason::Halted);
    EXPECT_EQ(M.S.Rip, kCodeBase + 11);
    Intr.Pending = true;
    EXPECT_EQ(M.run(100), StopReason::Halted);
    // Woken, MWAIT resumes after itself without taking the interrupt (IF = 0): the NOP
    // and the HLT run. Without ECX[0] the interrupt leaves it waiting.
    EXPECT_EQ(M.S.Rip, Break ? kCodeBase + 13 : kCodeBase + 11);
    EXPECT_EQ(mwaitWaiting(M.Cpu_), !Break);
    EXPECT_EQ(Intr.Acks, 0u);
    EXPECT_TRUE(Intr.Pending);
  }
}

TEST(MonitorMwait, UnmaskedInterruptEndsTheWaitAndIsDelivered) {
  TestMachine M;
  OneInterrupt Intr;
  M.Cpu_.Intr = &Intr;
  longMode(M);
  installFaultHandlers(M, true);
  // Vector 0x40 to a HLT handler: a 64-bit interrupt gate.
  const uint64_t H = kHandlerBase + 0x40;
  const uint8_t Hlt = 0xf4;
  M.write(H, &Hlt, 1);
  const uint64_t Lo = (H & 0xffff) | (uint64_t(kSelCode64) << 16) | (uint64_t(0x8e) << 40) |
                      (((H >> 16) & 0xffff) << 48);
  const uint64_t Hi = H >> 32;
  M.write(kIdtBase + 16 * 0x40, &Lo, 8);
  M.write(kIdtBase + 16 * 0x40 + 8, &Hi, 8);
  M.S.Idtr.Limit = 0x41 * 16 - 1;
  M.S.Gpr[RSP] = kStackTop;
  M.S.Rflags |= rflags::IF;
  M.loadCode(kMonitorMwait);
  EXPECT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kAfterMwait);
  Intr.Pending = true;
  EXPECT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, H + 1);
  EXPECT_EQ(M.read64(M.S.Gpr[RSP]), kAfterMwait); // the return RIP is after MWAIT
  EXPECT_EQ(Intr.Acks, 1u);
  EXPECT_FALSE(mwaitWaiting(M.Cpu_));
}

TEST(MonitorMwait, CplAboveZeroRaisesUd) {
  for (const uint8_t Op : {0xc8, 0xc9}) {
    SCOPED_TRACE(Op);
    TestMachine M;
    longMode(M);
    const uint64_t Rsp0 = 0x88000;
    M.write(0x5000 + 4, &Rsp0, 8);
    M.S.Tr = Segment{kSelTss, 0x5000, 0x67, 0x8b};
    M.loadCode({0x0f, 0x01, Op});
    M.S.seg(SegReg::CS) =
        Segment{kSelUserCode64, 0, 0xffffffff, 0xfb | Segment::L | Segment::G};
    M.S.seg(SegReg::SS) =
        Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
    M.Cpu_.modeChanged();
    const FaultInfo F = runToFault(M);
    EXPECT_TRUE(F.Faulted);
    EXPECT_EQ(F.Vector, vec::UD);
    EXPECT_EQ(F.Rip, kCodeBase);
  }
}

TEST(MonitorMwait, MonitorFsmDisabledInMiscEnableClearsTheFlagAndRaisesUd) {
  for (const uint8_t Op : {0xc8, 0xc9}) {
    SCOPED_TRACE(Op);
    TestMachine M;
    longMode(M);
    uint64_t Misc = 0;
    ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_MISC_ENABLE, Misc), Status::Ok);
    ASSERT_EQ(writeMsr(M.Cpu_, msr::IA32_MISC_ENABLE, Misc & ~uint64_t(1u << 18)), Status::Ok);
    EXPECT_EQ(cpuidQuery(M.Cpu_, 1, 0).Ecx & cpuidbit::Monitor, 0u);
    M.loadCode({0x0f, 0x01, Op});
    const FaultInfo F = runToFault(M);
    EXPECT_TRUE(F.Faulted);
    EXPECT_EQ(F.Vector, vec::UD);
  }
}

TEST(MonitorMwait, ReservedExtensionsRaiseGp) {
  struct Case {
    uint8_t Op;
    uint64_t Rcx;
  };
  // MONITOR: any extension (RCX in 64-bit mode, also bits 63:32); MWAIT: bits above 0.
  for (const Case &K : {Case{0xc8, 1}, Case{0xc8, uint64_t(1) << 32}, Case{0xc9, 2},
                        Case{0xc9, uint64_t(1) << 40}}) {
    SCOPED_TRACE(unsigned(K.Op));
    TestMachine M;
    longMode(M);
    M.S.Gpr[RCX] = K.Rcx;
    M.loadCode({0x0f, 0x01, K.Op});
    const FaultInfo F = runToFault(M);
    EXPECT_TRUE(F.Faulted);
    EXPECT_EQ(F.Vector, vec::GP);
    EXPECT_EQ(F.ErrorCode, 0u);
    EXPECT_FALSE(M.Mem.watching());
  }
}

TEST(MonitorMwait, MonitorOperandIsTranslatedAsARead) {
  TestMachine M;
  longMode(M);
  M.S.Gpr[RAX] = uint64_t(8) << 30; // above the 4 GiB identity map: not present
  M.loadCode({0x0f, 0x01, 0xc8});
  const FaultInfo F = runToFault(M);
  EXPECT_TRUE(F.Faulted);
  EXPECT_EQ(F.Vector, vec::PF);
  EXPECT_EQ(F.ErrorCode, 0u); // not present, read, supervisor
  EXPECT_EQ(F.Cr2, uint64_t(8) << 30);
}

TEST(MonitorMwait, MonitorTakesTheSegmentOverrideAndTheAddressSize) {
  TestMachine M;
  longMode(M);
  M.S.seg(SegReg::FS).Base = 0x1000;
  M.S.Gpr[RAX] = 0xffffffff00000000ull | (kLine - 0x1000);
  // addr32 fs monitor (EAX, plus the FS base); mwait
  M.loadCode({0x64, 0x67, 0x0f, 0x01, 0xc8, 0x0f, 0x01, 0xc9, 0xf4});
  EXPECT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kCodeBase + 8);
  EXPECT_TRUE(mwaitWaiting(M.Cpu_));
  EXPECT_EQ(M.Cpu_.Monitor.Line, kLine);
}
