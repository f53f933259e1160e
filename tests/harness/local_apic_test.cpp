// The local APIC (SDM Vol. 3A, Advanced Programmable Interrupt Controller (APIC)),
// driven through the machine's register page and API as a CPU would.
#include "harness/machine.h"
#include "cpu/msrs.h"
#include "cpu/perfmon.h"
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>

using namespace vmxsim;

namespace {
std::unique_ptr<Machine> machine(unsigned Cpus) {
  MachineConfig Cfg;
  Cfg.NumCpus = Cpus;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_FALSE(Err) << Err.str();
  return M;
}
constexpr uint64_t kApic = 0xfee00000;
void wr(Machine &M, unsigned Cpu, uint32_t Reg, uint32_t V) {
  M.apicBus().Current = Cpu;
  M.mem().write(Hpa(kApic + Reg), 4, V);
  M.apicBus().Current = 0;
}
uint32_t rd(Machine &M, unsigned Cpu, uint32_t Reg) {
  M.apicBus().Current = Cpu;
  uint32_t V = uint32_t(M.mem().read(Hpa(kApic + Reg), 4));
  M.apicBus().Current = 0;
  return V;
}
} // namespace

TEST(Apic, EachCpuSeesItsOwnIdAtTheSamePage) {
  auto M = machine(3);
  EXPECT_EQ(rd(*M, 0, 0x20), 0u);
  EXPECT_EQ(rd(*M, 1, 0x20), 1u << 24);
  EXPECT_EQ(rd(*M, 2, 0x20), 2u << 24);
}

TEST(Apic, OneShotTimerFiresAfterExactlyCountTimesDivideCycles) {
  auto M = machine(1);
  Cpu &C = M->cpu(0);
  LocalApic &A = M->localApic(0);
  C.Cycles = 1000;
  wr(*M, 0, 0xf0, 0x1ff);    // software enable
  wr(*M, 0, 0x320, 0x40);    // one-shot, vector 0x40
  wr(*M, 0, 0x3e0, 0x1);     // divide by 4
  wr(*M, 0, 0x380, 250);     // C = 250: expires at 1000 + 250 * 4
  EXPECT_EQ(A.nextTimerEvent(), 2000u);
  C.Cycles = 1999;
  EXPECT_FALSE(A.intrPending());
  EXPECT_EQ(rd(*M, 0, 0x390), 1u); // 250 - 999 / 4
  C.Cycles = 2000;
  EXPECT_TRUE(A.intrPending());
  EXPECT_EQ(rd(*M, 0, 0x390), 0u);
  EXPECT_EQ(A.acknowledge(), 0x40);
  EXPECT_EQ(rd(*M, 0, 0x100 + 0x20), 1u); // ISR bit 0x40
  wr(*M, 0, 0xb0, 0);                     // EOI
  EXPECT_EQ(rd(*M, 0, 0x100 + 0x20), 0u);
  EXPECT_EQ(A.nextTimerEvent(), ~uint64_t(0)); // one-shot: disarmed
}

TEST(Apic, PeriodicTimerReloads) {
  auto M = machine(1);
  Cpu &C = M->cpu(0);
  LocalApic &A = M->localApic(0);
  wr(*M, 0, 0xf0, 0x1ff);
  wr(*M, 0, 0x320, (1u << 17) | 0x41);
  wr(*M, 0, 0x3e0, 0xb); // divide by 1
  wr(*M, 0, 0x380, 100);
  C.Cycles = 100;
  EXPECT_TRUE(A.intrPending());
  EXPECT_EQ(A.nextTimerEvent(), 200u);
}

TEST(Apic, TprAbovePendingClassBlocksDelivery) {
  auto M = machine(1);
  LocalApic &A = M->localApic(0);
  wr(*M, 0, 0xf0, 0x1ff);
  wr(*M, 0, 0x80, 0x50);
  wr(*M, 0, 0x300, 0x40045); // self IPI, fixed, vector 0x45
  EXPECT_FALSE(A.intrPending());
  EXPECT_EQ(A.acknowledge(), 0xff); // spurious vector
  wr(*M, 0, 0x300, 0x40065);
  EXPECT_TRUE(A.intrPending());
  EXPECT_EQ(A.acknowledge(), 0x65);
  EXPECT_EQ(rd(*M, 0, 0xa0), 0x60u); // PPR = ISR class
}

TEST(Apic, IllegalVectorsSetSendAndReceiveErrors) {
  auto M = machine(2);
  wr(*M, 0, 0xf0, 0x1ff);
  wr(*M, 0, 0x310, 1u << 24);
  wr(*M, 0, 0x300, 0x00005); // fixed vector 5 to CPU 1: send illegal vector
  wr(*M, 0, 0x280, 0);
  EXPECT_EQ(rd(*M, 0, 0x280), 0x20u);
  wr(*M, 0, 0x280, 0); // a second write clears the latched errors
  EXPECT_EQ(rd(*M, 0, 0x280), 0u);
  wr(*M, 0, 0x350, 0x0000a); // LINT0 unmasked with illegal vector: stored
  M->localApic(0).accept(LocalApic::Delivery::Fixed, 3, false);
  wr(*M, 0, 0x280, 0);
  EXPECT_EQ(rd(*M, 0, 0x280), 0x40u); // receive illegal vector
  EXPECT_EQ(rd(*M, 0, 0x200), 0u);    // nothing in IRR
}

TEST(Apic, InitDeassertAndNmiToSelfSendNothing) {
  auto M = machine(2);
  wr(*M, 0, 0x310, 1u << 24);
  wr(*M, 0, 0x300, 0x08500);  // INIT level de-assert
  wr(*M, 0, 0x300, 0x40400);  // NMI with the self shorthand: invalid combination
  LocalApic &B = M->localApic(1);
  EXPECT_FALSE(B.InitPending);
  EXPECT_FALSE(B.SipiPending);
  EXPECT_FALSE(M->cpu(0).NmiPending);
  EXPECT_EQ(rd(*M, 1, 0x200 + 0x20), 0u);
}

TEST(Apic, InitSipiStartsWaitingApInRealModeAtVectorPage) {
  auto M = machine(2);
  Cpu &Ap = M->cpu(1);
  LocalApic &B = M->localApic(1);
  EXPECT_EQ(Ap.Activity, ActivityState::WaitForSipi);
  M->cpu(0).Cycles = 5000;
  wr(*M, 0, 0x310, 1u << 24);
  wr(*M, 0, 0x300, 0x04500); // INIT
  wr(*M, 0, 0x300, 0x04612); // start-up, vector 0x12
  EXPECT_EQ(Ap.Cycles, 5000u); // the waiting AP's clock caught up with the sender
  B.applySignals();
  EXPECT_EQ(Ap.Activity, ActivityState::Active);
  EXPECT_EQ(Ap.S.seg(SegReg::CS).Selector, 0x1200u);
  EXPECT_EQ(Ap.S.seg(SegReg::CS).Base, 0x12000u);
  EXPECT_EQ(Ap.S.Rip, 0u);
  EXPECT_EQ(Ap.S.Cr0 & cr0::PE, 0u);
  // A second SIPI to a running AP is discarded.
  Ap.S.Rip = 0x44;
  wr(*M, 0, 0x300, 0x04613);
  B.applySignals();
  EXPECT_EQ(Ap.S.Rip, 0x44u);
}

TEST(Apic, NmiIpiAndLogicalFlatDestination) {
  auto M = machine(3);
  wr(*M, 1, 0xd0, 0x02000000); // logical ID bit 1
  wr(*M, 2, 0xd0, 0x04000000); // logical ID bit 2
  wr(*M, 0, 0x310, 0x04000000);
  wr(*M, 0, 0x300, 0x00c00); // NMI, logical
  EXPECT_FALSE(M->cpu(1).NmiPending);
  EXPECT_TRUE(M->cpu(2).NmiPending);
  wr(*M, 0, 0x300, 0xc0400); // NMI to all excluding self
  EXPECT_TRUE(M->cpu(1).NmiPending);
  EXPECT_FALSE(M->cpu(0).NmiPending);
}

TEST(Apic, GloballyDisabledApicPageReadsAllOnes) {
  auto M = machine(1);
  (*M->cpu(0).Msrs)[MsrSlot::IA32_APIC_BASE] &= ~uint64_t(1u << 11);
  EXPECT_EQ(rd(*M, 0, 0x30), 0xffffffffu);
  wr(*M, 0, 0x80, 0x20); // ignored
  (*M->cpu(0).Msrs)[MsrSlot::IA32_APIC_BASE] |= 1u << 11;
  EXPECT_EQ(rd(*M, 0, 0x80), 0u);
}

TEST(Apic, MachineWhoseApsNeverStartEndsHaltedWithMessage) {
  MachineConfig Cfg;
  Cfg.NumCpus = 4;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Cfg.KernelImage = {0xfa, 0xf4}; // cli; hlt
  Cfg.Kernel = "hlt.bin";
  Cfg.FlatAddr = 0x100000;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_FALSE(Err) << Err.str();
  RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::Halted);
  EXPECT_EQ(R.What, "3 of 4 CPUs never received a start-up IPI");
  EXPECT_EQ(R.Retired, 2u);
}

// SDM Vol. 3B, "Architectural Performance Monitoring Version 2", and Vol. 3A, "Local
// Vector Table": a counter that wraps with its PMI bit set interrupts through the LVT
// performance-counter entry, at the boundary after the instruction that made it wrap
// (cpu/perfmon.h), with the entry's delivery mode; the delivery sets the entry's mask.
TEST(Apic, CounterOverflowPmiArrivesAfterTheOverflowingInstructionAndMasksTheEntry) {
  for (const uint32_t Lvt : {0x50u, 0x400u}) { // fixed vector 0x50; NMI
    SCOPED_TRACE(Lvt);
    auto M = machine(1);
    Cpu &C = M->cpu(0);
    PhysMem &Mem = M->mem();
    test::writeFlatGdt(Mem);
    test::setupLongMode(C, Mem);
    constexpr uint64_t kCode = 0x100000, kHandler = 0x100100, kIdt = 0x2000;
    const std::vector<uint8_t> Nops(16, 0x90);
    Mem.copyIn(Hpa(kCode), Nops.data(), Nops.size());
    Mem.write(Hpa(kHandler), 1, 0xf4); // HLT
    const unsigned Vector = Lvt == 0x400 ? 2 : 0x50;
    const uint64_t Gate[2] = {(kHandler & 0xffff) | (uint64_t(0x08) << 16) |
                                  (uint64_t(0x8e) << 40) | (((kHandler >> 16) & 0xffff) << 48),
                              kHandler >> 32};
    Mem.copyIn(Hpa(kIdt + 16 * Vector), Gate, sizeof(Gate));
    C.S.Idtr = TableReg{kIdt, 0xfff};
    C.S.Rip = kCode;
    C.S.Gpr[RSP] = 0x80000;
    C.S.Rflags |= rflags::IF;
    wr(*M, 0, 0xf0, 0x1ff);
    wr(*M, 0, 0x340, Lvt);
    ASSERT_EQ(writeMsr(C, msr::IA32_FIXED_CTR0, perfmon::kCounterMask - 2), Status::Ok);
    ASSERT_EQ(writeMsr(C, msr::IA32_FIXED_CTR_CTRL, 0xb), Status::Ok); // OS USR PMI
    ASSERT_EQ(writeMsr(C, msr::IA32_PERF_GLOBAL_CTRL, uint64_t(1) << 32), Status::Ok);
    EXPECT_EQ(C.run(100), StopReason::Halted);
    EXPECT_EQ(C.S.Rip, kHandler + 1);
    EXPECT_EQ(Mem.read(Hpa(C.S.Gpr[RSP]), 8), kCode + 3); // after the third NOP
    EXPECT_EQ(rd(*M, 0, 0x340), Lvt | 0x10000u);         // masked by the delivery
    uint64_t V = 0;
    ASSERT_EQ(readMsr(C, msr::IA32_PERF_GLOBAL_STATUS, V), Status::Ok);
    EXPECT_EQ(V, uint64_t(1) << 32);
    ASSERT_EQ(readMsr(C, msr::IA32_FIXED_CTR0, V), Status::Ok);
    EXPECT_EQ(V, 1u); // wrapped to 0, then the handler's HLT
  }
}

namespace {
/// One CPU in long mode with IF = 1 running four NOPs and a HLT at 0x100000, the APIC
/// software-enabled with Lvt as its performance-counter entry, and fixed counter 0
/// (instructions retired, OS and user, PMI on) one instruction from overflowing.
std::unique_ptr<Machine> overflowAfterOneNop(uint32_t Lvt) {
  auto M = machine(1);
  Cpu &C = M->cpu(0);
  PhysMem &Mem = M->mem();
  test::writeFlatGdt(Mem);
  test::setupLongMode(C, Mem);
  const std::vector<uint8_t> Code = {0x90, 0x90, 0x90, 0x90, 0xf4};
  Mem.copyIn(Hpa(0x100000), Code.data(), Code.size());
  C.S.Rip = 0x100000;
  C.S.Rflags |= rflags::IF;
  wr(*M, 0, 0xf0, 0x1ff);
  wr(*M, 0, 0x340, Lvt);
  EXPECT_EQ(writeMsr(C, msr::IA32_FIXED_CTR0, perfmon::kCounterMask), Status::Ok);
  EXPECT_EQ(writeMsr(C, msr::IA32_FIXED_CTR_CTRL, 0xb), Status::Ok);
  EXPECT_EQ(writeMsr(C, msr::IA32_PERF_GLOBAL_CTRL, uint64_t(1) << 32), Status::Ok);
  return M;
}
} // namespace

TEST(Apic, CounterOverflowWithMaskedLvtEntryRaisesNoInterrupt) {
  auto M = overflowAfterOneNop(0x10050); // masked
  Cpu &C = M->cpu(0);
  EXPECT_EQ(C.run(100), StopReason::Halted);
  EXPECT_EQ(C.S.Rip, 0x100005u); // no interrupt: the code ran to its HLT
  EXPECT_EQ(rd(*M, 0, 0x200 + 0x20), 0u);
  uint64_t V = 0;
  ASSERT_EQ(readMsr(C, msr::IA32_PERF_GLOBAL_STATUS, V), Status::Ok);
  EXPECT_EQ(V, uint64_t(1) << 32);
}

// An IPI with a reserved ICR delivery mode (011b, 111b: SDM Vol. 3A, "Interrupt Command
// Register (ICR)") has no defined effect, and an SMI needs SMM: each stops the run with
// status 10 naming it, never dropped silently.
TEST(Apic, IpiWithReservedDeliveryModeOrSmiStopsTheRun) {
  struct Case {
    uint32_t IcrLow;
    const char *What;
  };
  const Case Cases[] = {
      {0x00340, "an IPI with a reserved ICR delivery mode (011b or 111b)"},
      {0x00740, "an IPI with a reserved ICR delivery mode (011b or 111b)"},
      {0x00200, "an SMI sent through the ICR (SMM)"},
  };
  for (const Case &K : Cases) {
    auto M = overflowAfterOneNop(0x10050); // a CPU that runs NOPs and halts; no PMI
    wr(*M, 0, 0x310, 0);
    wr(*M, 0, 0x300, K.IcrLow);
    const RunResult R = M->run();
    EXPECT_EQ(R.Reason, RunReason::Unimplemented) << std::hex << K.IcrLow;
    EXPECT_EQ(R.ExitStatus, 10) << std::hex << K.IcrLow;
    EXPECT_EQ(R.What, K.What);
    EXPECT_EQ(rd(*M, 0, 0x200 + 0x20), 0u);
  }
}

// SDM Vol. 3A, "Local Vector Table": INIT and ExtINT are not supported for the LVT
// performance-counter entry, and an SMI needs SMM, which vmxsim lacks: a PMI through such
// an entry stops the run with status 10 naming it, never dropped silently.
TEST(Apic, CounterOverflowThroughAnUnsupportedDeliveryModeStopsTheRun) {
  struct Case {
    uint32_t Lvt;
    const char *What;
  };
  const Case Cases[] = {
      {0x500, "a PMI through an LVT performance-counter entry with a reserved or unsupported "
              "delivery mode (INIT, ExtINT or a reserved encoding)"},
      {0x750, "a PMI through an LVT performance-counter entry with a reserved or unsupported "
              "delivery mode (INIT, ExtINT or a reserved encoding)"},
      {0x350, "a PMI through an LVT performance-counter entry with a reserved or unsupported "
              "delivery mode (INIT, ExtINT or a reserved encoding)"},
      {0x200, "an SMI delivered to the local APIC (SMM)"},
  };
  for (const Case &K : Cases) {
    auto M = overflowAfterOneNop(K.Lvt);
    const RunResult R = M->run();
    EXPECT_EQ(R.Reason, RunReason::Unimplemented) << std::hex << K.Lvt;
    EXPECT_EQ(R.ExitStatus, 10) << std::hex << K.Lvt;
    EXPECT_EQ(R.What, K.What);
    EXPECT_EQ(rd(*M, 0, 0x200 + 0x20), 0u); // nothing reached the IRR
  }
}
