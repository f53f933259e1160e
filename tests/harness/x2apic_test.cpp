// x2APIC mode of the local APIC (SDM Vol. 3A, Extended XAPIC (x2APIC)): IA32_APIC_BASE
// state transitions, the register MSRs 0x802-0x83f and their #GP cases, and the MMIO
// page while in x2APIC mode.
#include "cpu/cpuid.h"
#include "cpu/msrs.h"
#include "harness/machine.h"

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
constexpr uint64_t kApicMmio = 0xfee00000;
constexpr uint64_t kXapic = 0xfee00800, kX2apic = 0xfee00c00, kDisabled = 0xfee00000;
constexpr uint64_t kBsp = 0x100;

/// Whether St is a #GP(0) fault; clears the pending event for the next access.
bool isGp(Cpu &C, Status St) {
  const bool Gp = St == Status::Fault && C.Pending.Vector == vec::GP && C.Pending.ErrorCode == 0;
  C.Pending = PendingEvent{};
  return Gp;
}
uint64_t rdmsr(Cpu &C, uint32_t Index) {
  uint64_t V = 0xbadbadbadull;
  EXPECT_EQ(readMsr(C, Index, V), Status::Ok) << std::hex << Index;
  return V;
}
void wrmsr(Cpu &C, uint32_t Index, uint64_t V) {
  EXPECT_EQ(writeMsr(C, Index, V), Status::Ok) << std::hex << Index;
}
bool rdmsrGp(Cpu &C, uint32_t Index) {
  uint64_t V = 0;
  return isGp(C, readMsr(C, Index, V));
}
bool wrmsrGp(Cpu &C, uint32_t Index, uint64_t V) { return isGp(C, writeMsr(C, Index, V)); }
/// xAPIC -> x2APIC on CPU I (the BSP keeps its BSP flag).
void enterX2apic(Machine &M, unsigned I) {
  wrmsr(M.cpu(I), msr::IA32_APIC_BASE, kX2apic | (I == 0 ? kBsp : 0));
}
} // namespace

TEST(X2apic, CpuidAdvertisesX2apicAndTscDeadline) {
  auto M = machine(1);
  CpuidResult R = cpuidQuery(M->cpu(0), 1, 0);
  EXPECT_EQ(R.Ecx & cpuidbit::X2apic, 1u << 21);
  EXPECT_EQ(R.Ecx & cpuidbit::TscDeadline, 1u << 24);
}

TEST(X2apic, ApicBaseTransitionsFollowTheStateDiagram) {
  auto M = machine(1);
  Cpu &C = M->cpu(0);
  EXPECT_EQ(rdmsr(C, msr::IA32_APIC_BASE), 0xfee00900u); // xAPIC after RESET
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_APIC_BASE, 0xfee00500)); // EN=0 EXTD=1: invalid
  wrmsr(C, msr::IA32_APIC_BASE, 0xfee00d00);                // xAPIC -> x2APIC
  EXPECT_EQ(rdmsr(C, msr::IA32_APIC_BASE), 0xfee00d00u);
  EXPECT_TRUE(M->localApic(0).x2apicMode());
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_APIC_BASE, 0xfee00900)); // x2APIC -> xAPIC
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_APIC_BASE, 0xfee00500)); // x2APIC -> invalid
  EXPECT_EQ(rdmsr(C, msr::IA32_APIC_BASE), 0xfee00d00u);
  wrmsr(C, msr::IA32_APIC_BASE, 0xfee00d00); // x2APIC -> x2APIC: no change, legal
  wrmsr(C, msr::IA32_APIC_BASE, 0xfee00100); // x2APIC -> disabled
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_APIC_BASE, 0xfee00d00)); // disabled -> x2APIC
  wrmsr(C, msr::IA32_APIC_BASE, 0xfee00900);                // disabled -> xAPIC
  EXPECT_FALSE(M->localApic(0).x2apicMode());
  EXPECT_EQ(rdmsr(C, msr::IA32_APIC_BASE), 0xfee00900u);
}

TEST(X2apic, RegisterMsrsOutsideX2apicModeRaiseGp) {
  auto M = machine(1);
  Cpu &C = M->cpu(0);
  EXPECT_TRUE(rdmsrGp(C, msr::IA32_X2APIC_APICID));
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_X2APIC_TPR, 0));
  wrmsr(C, msr::IA32_APIC_BASE, kDisabled | kBsp);
  EXPECT_TRUE(rdmsrGp(C, msr::IA32_X2APIC_VERSION));
}

TEST(X2apic, IdIsThe32BitIdAndLdrIsDerivedFromIt) {
  auto M = machine(20);
  enterX2apic(*M, 1);
  enterX2apic(*M, 19);
  EXPECT_EQ(rdmsr(M->cpu(1), msr::IA32_X2APIC_APICID), 1u);
  EXPECT_EQ(rdmsr(M->cpu(1), msr::IA32_X2APIC_LDR), 0x2u); // cluster 0, bit 1
  EXPECT_EQ(rdmsr(M->cpu(19), msr::IA32_X2APIC_APICID), 0x13u);
  EXPECT_EQ(rdmsr(M->cpu(19), msr::IA32_X2APIC_LDR), 0x10008u); // cluster 1, bit 3
  EXPECT_EQ(rdmsr(M->cpu(19), msr::IA32_X2APIC_VERSION), 0x00050014u);
}

TEST(X2apic, ReadOnlyRegistersRaiseGpOnWrmsr) {
  auto M = machine(1);
  enterX2apic(*M, 0);
  Cpu &C = M->cpu(0);
  for (uint32_t Index : {0x802u, 0x803u, 0x80au, 0x80du, 0x810u, 0x817u, 0x818u, 0x81fu,
                         0x820u, 0x827u, 0x839u})
    EXPECT_TRUE(wrmsrGp(C, Index, 0)) << std::hex << Index;
}

TEST(X2apic, RegistersWithoutAnMsrRaiseGp) {
  auto M = machine(1);
  enterX2apic(*M, 0);
  Cpu &C = M->cpu(0);
  // DFR (0x80e) does not exist in x2APIC mode; APR, RRD and the reserved slots neither.
  for (uint32_t Index : {0x800u, 0x801u, 0x804u, 0x809u, 0x80cu, 0x80eu, 0x829u, 0x831u,
                         0x83au, 0x83du, 0x840u, 0x8ffu}) {
    EXPECT_TRUE(rdmsrGp(C, Index)) << std::hex << Index;
    EXPECT_TRUE(wrmsrGp(C, Index, 0)) << std::hex << Index;
  }
}

TEST(X2apic, WriteOnlyRegistersRaiseGpOnRdmsr) {
  auto M = machine(1);
  enterX2apic(*M, 0);
  EXPECT_TRUE(rdmsrGp(M->cpu(0), msr::IA32_X2APIC_EOI));
  EXPECT_TRUE(rdmsrGp(M->cpu(0), msr::IA32_X2APIC_SELF_IPI));
}

TEST(X2apic, ReservedBitsRaiseGp) {
  auto M = machine(1);
  enterX2apic(*M, 0);
  Cpu &C = M->cpu(0);
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_X2APIC_TPR, 0x100));
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_X2APIC_TPR, uint64_t(1) << 32));
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_X2APIC_EOI, 1)); // EOI takes only 0
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_X2APIC_ESR, 1)); // so does ESR
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_X2APIC_ICR, 0x1000 | 0x40)); // delivery status
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_X2APIC_ICR, 0x00100040));    // bit 20
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_X2APIC_SELF_IPI, 0x100));
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_X2APIC_DIV_CONF, 0x4));
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_X2APIC_INIT_COUNT, uint64_t(1) << 32));
  EXPECT_TRUE(wrmsrGp(C, msr::IA32_X2APIC_LVT_TIMER, 0x700)); // no delivery mode
  wrmsr(C, msr::IA32_X2APIC_TPR, 0x20);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_TPR), 0x20u);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_PPR), 0x20u);
  wrmsr(C, msr::IA32_X2APIC_ESR, 0);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_ESR), 0u);
}

TEST(X2apic, SelfIpiSetsIrrAndEoiRetiresIt) {
  auto M = machine(1);
  enterX2apic(*M, 0);
  Cpu &C = M->cpu(0);
  LocalApic &A = M->localApic(0);
  wrmsr(C, msr::IA32_X2APIC_SIVR, 0x1ff);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_SIVR), 0x1ffu);
  wrmsr(C, msr::IA32_X2APIC_SELF_IPI, 0x55);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_IRR0 + 2), 1u << 0x15);
  EXPECT_TRUE(A.intrPending());
  EXPECT_EQ(A.acknowledge(), 0x55);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_IRR0 + 2), 0u);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_ISR0 + 2), 1u << 0x15);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_PPR), 0x50u);
  wrmsr(C, msr::IA32_X2APIC_EOI, 0);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_ISR0 + 2), 0u);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_PPR), 0u);
  // An illegal vector is not delivered and latches "send illegal vector".
  wrmsr(C, msr::IA32_X2APIC_SELF_IPI, 0x05);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_IRR0), 0u);
  wrmsr(C, msr::IA32_X2APIC_ESR, 0);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_ESR), 0x20u);
}

TEST(X2apic, IcrIsOne64BitMsrWithA32BitDestination) {
  auto M = machine(20);
  for (unsigned I = 0; I < 20; ++I)
    enterX2apic(*M, I);
  Cpu &C = M->cpu(0);
  // Physical destination 19, fixed, vector 0x60.
  wrmsr(C, msr::IA32_X2APIC_ICR, (uint64_t(19) << 32) | 0x60);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_ICR), (uint64_t(19) << 32) | 0x60);
  EXPECT_EQ(rdmsr(M->cpu(19), msr::IA32_X2APIC_IRR0 + 3), 1u);
  EXPECT_EQ(rdmsr(M->cpu(3), msr::IA32_X2APIC_IRR0 + 3), 0u);
  // Logical, cluster 1, members 2 and 3 (x2APIC IDs 0x12 and 0x13): vector 0x70.
  wrmsr(C, msr::IA32_X2APIC_ICR, (uint64_t(0x1000c) << 32) | 0x800 | 0x70);
  EXPECT_EQ(rdmsr(M->cpu(18), msr::IA32_X2APIC_IRR0 + 3), 1u << 16);
  EXPECT_EQ(rdmsr(M->cpu(19), msr::IA32_X2APIC_IRR0 + 3), (1u << 16) | 1u);
  EXPECT_EQ(rdmsr(M->cpu(2), msr::IA32_X2APIC_IRR0 + 3), 0u); // cluster 0, bit 2
  // Broadcast 0xffffffff: every CPU, vector 0x80.
  wrmsr(C, msr::IA32_X2APIC_ICR, (uint64_t(0xffffffff) << 32) | 0x80);
  for (unsigned I = 0; I < 20; ++I)
    EXPECT_EQ(rdmsr(M->cpu(I), msr::IA32_X2APIC_IRR0 + 4), 1u) << I;
}

TEST(X2apic, TimerRegistersCountInVirtualCycles) {
  auto M = machine(1);
  enterX2apic(*M, 0);
  Cpu &C = M->cpu(0);
  C.Cycles = 1000;
  wrmsr(C, msr::IA32_X2APIC_SIVR, 0x1ff);
  wrmsr(C, msr::IA32_X2APIC_LVT_TIMER, 0x40);
  wrmsr(C, msr::IA32_X2APIC_DIV_CONF, 0x1); // divide by 4
  wrmsr(C, msr::IA32_X2APIC_INIT_COUNT, 250);
  EXPECT_EQ(M->localApic(0).nextTimerEvent(), 2000u);
  C.Cycles = 1400;
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_CUR_COUNT), 150u);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_INIT_COUNT), 250u);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_DIV_CONF), 1u);
  EXPECT_EQ(rdmsr(C, msr::IA32_X2APIC_LVT_TIMER), 0x40u);
}

TEST(X2apic, MmioPageBehavesAsDisabledInX2apicMode) {
  auto M = machine(1);
  enterX2apic(*M, 0);
  EXPECT_EQ(M->mem().read(Hpa(kApicMmio + 0x20), 4), 0xffffffffu);
  M->mem().write(Hpa(kApicMmio + 0x80), 4, 0x30); // TPR: ignored
  EXPECT_EQ(rdmsr(M->cpu(0), msr::IA32_X2APIC_TPR), 0u);
}

TEST(X2apic, DisablingThenReenablingReturnsToTheMmioInterface) {
  auto M = machine(1);
  Cpu &C = M->cpu(0);
  wrmsr(C, msr::IA32_APIC_BASE, kX2apic | kBsp);
  wrmsr(C, msr::IA32_APIC_BASE, kDisabled | kBsp);
  wrmsr(C, msr::IA32_APIC_BASE, kXapic | kBsp);
  EXPECT_EQ(M->mem().read(Hpa(kApicMmio + 0x30), 4), 0x00050014u);
  EXPECT_TRUE(rdmsrGp(C, msr::IA32_X2APIC_VERSION));
}
