// SDM Vol. 3B, "Performance Monitoring" > "Architectural Performance Monitoring"
// (versions 1 and 2), as cpu/perfmon.h models it: CPUID leaf 0AH, the counters and their
// MSRs, USR/OS filtering by CPL, overflow status, RDPMC, and the events it refuses.
// Counts are exact: instructions retired is Cpu::Retired, cycles the virtual clock.
// (The PMI through the local APIC: tests/harness/local_apic_test.cpp.)
#include "tests/cpu/system_test_support.h"

#include "cpu/cpuid.h"
#include "cpu/msrs.h"
#include "cpu/perfmon.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr uint64_t kFixed0 = uint64_t(1) << 32, kFixed1 = uint64_t(1) << 33,
                   kFixed2 = uint64_t(1) << 34;

uint64_t rdmsr(TestMachine &M, uint32_t Index) {
  uint64_t V = ~uint64_t(0);
  EXPECT_EQ(readMsr(M.Cpu_, Index, V), Status::Ok) << std::hex << Index;
  return V;
}
void wrmsr(TestMachine &M, uint32_t Index, uint64_t V) {
  EXPECT_EQ(writeMsr(M.Cpu_, Index, V), Status::Ok) << std::hex << Index;
}

// NOP (1 cycle), two IMULs (3 cycles each), HLT (1 cycle): 4 instructions, 8 cycles.
const std::vector<uint8_t> kKnownSequence = {0x90, 0x0f, 0xaf, 0xc0, 0x0f, 0xaf, 0xc0, 0xf4};

} // namespace

TEST(PerformanceMonitoring, CpuidLeafAReportsVersion2WithFourCountersAndThreeFixed) {
  TestMachine M;
  CpuidResult R = cpuidQuery(M.Cpu_, 0xa, 0);
  // EAX: version 2, 4 counters, 48 bits, 7 EBX bits; EBX: LLC references and misses,
  // branch instructions and mispredicts unavailable; EDX: 3 fixed counters of 48 bits.
  EXPECT_EQ(R.Eax, 0x07300402u);
  EXPECT_EQ(R.Ebx, 0x78u);
  EXPECT_EQ(R.Ecx, 0u);
  EXPECT_EQ(R.Edx, 0x603u);
  EXPECT_EQ(rdmsr(M, msr::IA32_MISC_ENABLE) & 0x80, 0x80u); // performance monitoring available
}

TEST(PerformanceMonitoring, FixedCountersCountInstructionsAndUnhaltedCycles) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode(kKnownSequence);
  wrmsr(M, msr::IA32_FIXED_CTR_CTRL, 0x333); // OS and USR for all three
  wrmsr(M, msr::IA32_PERF_GLOBAL_CTRL, kFixed0 | kFixed1 | kFixed2);
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(rdmsr(M, msr::IA32_FIXED_CTR0), 4u);
  EXPECT_EQ(rdmsr(M, msr::IA32_FIXED_CTR1), 8u);
  EXPECT_EQ(rdmsr(M, msr::IA32_FIXED_CTR2), 8u);
  EXPECT_EQ(rdmsr(M, msr::IA32_PERF_GLOBAL_STATUS), 0u);
}

TEST(PerformanceMonitoring, GeneralPurposeCountersCountTheArchitecturalEvents) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode(kKnownSequence);
  // IA32_PERF_GLOBAL_CTRL enables PMC0-3 at reset: the event selects alone start them.
  EXPECT_EQ(rdmsr(M, msr::IA32_PERF_GLOBAL_CTRL), 0xfu);
  wrmsr(M, msr::IA32_PERFEVTSEL0, 0x4300c0); // EN OS USR, instructions retired
  wrmsr(M, msr::IA32_PERFEVTSEL1, 0x43003c); // unhalted core cycles
  wrmsr(M, msr::IA32_PERFEVTSEL2, 0x43013c); // unhalted reference cycles
  wrmsr(M, msr::IA32_PERFEVTSEL3, 0x0300c0); // not enabled (EN = 0)
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC0), 4u);
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC1), 8u);
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC2), 8u);
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC3), 0u);
}

TEST(PerformanceMonitoring, GlobalCtrlBitGatesEachCounter) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode(kKnownSequence);
  wrmsr(M, msr::IA32_PERFEVTSEL0, 0x4300c0);
  wrmsr(M, msr::IA32_PERFEVTSEL1, 0x4300c0);
  wrmsr(M, msr::IA32_FIXED_CTR_CTRL, 0x3);
  wrmsr(M, msr::IA32_PERF_GLOBAL_CTRL, 0x2); // PMC1 only
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC0), 0u);
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC1), 4u);
  EXPECT_EQ(rdmsr(M, msr::IA32_FIXED_CTR0), 0u);
}

// OS counts at CPL 0, USR at CPL 1-3; an instruction counts under the CPL it leaves (the
// IRETQ to CPL 3 is a user-mode instruction), as do its cycles.
TEST(PerformanceMonitoring, UsrAndOsFilterByCpl) {
  TestMachine M;
  M.setupLongMode();
  constexpr uint64_t kUserCode = kCodeBase + 0x100, kUserStack = 0x70000;
  // CPL 0: nop; nop; iretq to CPL 3, which executes NOPs.
  M.loadCode({0x90, 0x90, 0x48, 0xcf});
  std::vector<uint8_t> Nops(16, 0x90);
  M.write(kUserCode, Nops.data(), Nops.size());
  const uint64_t Frame[5] = {kUserCode, kSelUserCode64, 0x2, kUserStack, kSelUserData};
  M.S.Gpr[RSP] = kStackTop - sizeof(Frame);
  M.write(M.S.Gpr[RSP], Frame, sizeof(Frame));
  wrmsr(M, msr::IA32_PERFEVTSEL0, 0x4100c0); // USR only: instructions
  wrmsr(M, msr::IA32_PERFEVTSEL1, 0x4200c0); // OS only: instructions
  wrmsr(M, msr::IA32_PERFEVTSEL2, 0x41003c); // USR only: cycles
  wrmsr(M, msr::IA32_PERFEVTSEL3, 0x42003c); // OS only: cycles
  EXPECT_EQ(M.run(8), StopReason::InsnLimit); // 3 at CPL 0, then 5 user NOPs
  ASSERT_EQ(M.S.cpl(), 3u);
  EXPECT_EQ(M.S.Rip, kUserCode + 5);
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC0), 6u);      // IRETQ and 5 NOPs
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC1), 2u);      // 2 NOPs
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC2), 20u + 5); // IRETQ (far branch, 20) and 5 NOPs
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC3), 2u);
}

TEST(PerformanceMonitoring, HaltedTimeIsNotCountedAsUnhaltedCycles) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode(kKnownSequence);
  wrmsr(M, msr::IA32_FIXED_CTR_CTRL, 0x330);
  wrmsr(M, msr::IA32_PERF_GLOBAL_CTRL, kFixed1 | kFixed2);
  EXPECT_EQ(M.run(), StopReason::Halted);
  const uint64_t Tsc = readTsc(M.Cpu_);
  M.Cpu_.waitUntil(M.Cpu_.Cycles + 100000); // the scheduler's jump to a wake-up event
  EXPECT_EQ(readTsc(M.Cpu_), Tsc + 100000);
  EXPECT_EQ(rdmsr(M, msr::IA32_FIXED_CTR1), 8u);
  EXPECT_EQ(rdmsr(M, msr::IA32_FIXED_CTR2), 8u);
}

TEST(PerformanceMonitoring, OverflowSetsGlobalStatusAndOvfCtrlClearsIt) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode(kKnownSequence);
  wrmsr(M, msr::IA32_FIXED_CTR0, perfmon::kCounterMask - 1); // wraps on the 2nd instruction
  wrmsr(M, msr::IA32_FIXED_CTR_CTRL, 0x3);                   // no PMI
  wrmsr(M, msr::IA32_PERF_GLOBAL_CTRL, kFixed0);
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(rdmsr(M, msr::IA32_FIXED_CTR0), 2u);
  EXPECT_EQ(rdmsr(M, msr::IA32_PERF_GLOBAL_STATUS), kFixed0);
  EXPECT_EQ(rdmsr(M, msr::IA32_PERF_GLOBAL_OVF_CTRL), 0u); // reads 0
  wrmsr(M, msr::IA32_PERF_GLOBAL_OVF_CTRL, kFixed0 | 1);
  EXPECT_EQ(rdmsr(M, msr::IA32_PERF_GLOBAL_STATUS), 0u);
  // IA32_PERF_GLOBAL_STATUS is read-only.
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_PERF_GLOBAL_STATUS, 0), Status::Fault);
  EXPECT_EQ(M.Cpu_.Pending.Vector, vec::GP);
}

TEST(PerformanceMonitoring, CounterWritesTakeTheirArchitecturalWidth) {
  TestMachine M;
  // IA32_PMCx: bits 31:0, sign-extended to 48 bits (no full-width writes).
  wrmsr(M, msr::IA32_PMC0, 0x80000000);
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC0), 0xffff80000000u);
  wrmsr(M, msr::IA32_PMC1, 0x123456789ull);
  EXPECT_EQ(rdmsr(M, msr::IA32_PMC1), 0x23456789u);
  // Fixed counters: the low 48 bits.
  wrmsr(M, msr::IA32_FIXED_CTR2, 0xffff000100000005ull);
  EXPECT_EQ(rdmsr(M, msr::IA32_FIXED_CTR2), 0x000100000005u);
}

TEST(PerformanceMonitoring, RdpmcReadsGeneralPurposeAndFixedCounters) {
  TestMachine M;
  M.setupLongMode();
  // nop; nop; rdpmc; hlt. RDPMC reads the count of the instructions before it.
  M.loadCode({0x90, 0x90, 0x0f, 0x33, 0xf4});
  wrmsr(M, msr::IA32_FIXED_CTR_CTRL, 0x1);
  wrmsr(M, msr::IA32_PERF_GLOBAL_CTRL, kFixed0);
  M.S.Gpr[RCX] = 0x40000000; // fixed counter 0
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], 2u);
  EXPECT_EQ(M.S.Gpr[RDX], 0u);

  TestMachine N;
  N.setupLongMode();
  N.loadCode({0x0f, 0x33, 0xf4});
  wrmsr(N, msr::IA32_PMC3, 0x87654321);
  N.S.Gpr[RCX] = 3;
  EXPECT_EQ(N.run(), StopReason::Halted);
  EXPECT_EQ(N.S.Gpr[RAX], 0x87654321u);
  EXPECT_EQ(N.S.Gpr[RDX], 0xffffu);
}

TEST(PerformanceMonitoring, RdpmcOfAMissingCounterRaisesGp) {
  for (uint32_t Ecx : {4u, 0x40000003u, 0x80000000u}) {
    TestMachine M;
    M.setupLongMode();
    // The #GP vector: a handler that halts.
    gate64(M, kIdtBase + 13 * 16, kSelCode64, kCodeBase + 0x10, 0xe, 0);
    M.S.Idtr = TableReg{kIdtBase, 0xfff};
    std::vector<uint8_t> Code(0x11, 0x90);
    Code[0] = 0x0f;
    Code[1] = 0x33;
    Code[0x10] = 0xf4;
    M.loadCode(Code);
    M.S.Gpr[RCX] = Ecx;
    EXPECT_EQ(M.run(), StopReason::Halted) << std::hex << Ecx;
    EXPECT_EQ(M.S.Rip, kCodeBase + 0x11) << std::hex << Ecx;
    EXPECT_EQ(M.read64(M.S.Gpr[RSP] + 8), kCodeBase) << std::hex << Ecx; // faulting RIP
  }
}

// An event select enabled for an event vmxsim cannot count exactly stops the run with
// status 10 naming it; disabled (EN = 0), any event is accepted.
TEST(PerformanceMonitoring, EnabledUncountableEventSelectIsUnimplemented) {
  const struct {
    uint64_t Value;
    const char *What;
  } Cases[] = {
      {0x4300c4, "performance-monitoring event select 0x4300c4 (IA32_PERFEVTSEL0)"},
      {0x4341c0 | (1u << 24), "performance-monitoring event select 0x14341c0 (IA32_PERFEVTSEL0)"},
      {0x4700c0, "performance-monitoring event select 0x4700c0 (IA32_PERFEVTSEL0)"},
      {0xc300c0, "performance-monitoring event select 0xc300c0 (IA32_PERFEVTSEL0)"},
      {0x43412e, "performance-monitoring event select 0x43412e (IA32_PERFEVTSEL0)"},
  };
  for (const auto &K : Cases) {
    TestMachine M;
    EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_PERFEVTSEL0, K.Value), Status::Unimplemented);
    ASSERT_NE(M.Cpu_.StopWhat, nullptr);
    EXPECT_STREQ(M.Cpu_.StopWhat, K.What);
    EXPECT_EQ(rdmsr(M, msr::IA32_PERFEVTSEL0), 0u); // not written
    wrmsr(M, msr::IA32_PERFEVTSEL0, K.Value & ~perfmon::evtsel::En);
  }
}

// INIT keeps the counters and their controls, as it keeps the other MSRs.
TEST(PerformanceMonitoring, InitKeepsCountersAndControls) {
  TestMachine M;
  wrmsr(M, msr::IA32_FIXED_CTR0, 1234);
  wrmsr(M, msr::IA32_FIXED_CTR_CTRL, 0x3);
  wrmsr(M, msr::IA32_PERF_GLOBAL_CTRL, kFixed0);
  M.Cpu_.init();
  EXPECT_EQ(rdmsr(M, msr::IA32_FIXED_CTR0), 1234u);
  EXPECT_EQ(rdmsr(M, msr::IA32_FIXED_CTR_CTRL), 0x3u);
  EXPECT_EQ(rdmsr(M, msr::IA32_PERF_GLOBAL_CTRL), kFixed0);
  M.Cpu_.reset();
  EXPECT_EQ(rdmsr(M, msr::IA32_FIXED_CTR0), 0u);
  EXPECT_EQ(rdmsr(M, msr::IA32_PERF_GLOBAL_CTRL), 0xfu);
}
