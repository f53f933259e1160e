// The I/O APIC (harness/devices/ioapic.h): registers, redirection to a chosen CPU's local
// APIC, masking, level-triggered remote IRR and its EOI, bad input, and the MADT entries.
#include "harness/acpi_tables.h"
#include "harness/machine.h"
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>

#include <vector>

using namespace vmxsim;

namespace {

std::unique_ptr<Machine> machine(unsigned Cpus) {
  MachineConfig Cfg;
  Cfg.NumCpus = Cpus;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  return M;
}

uint32_t ioRead(Machine &M, uint32_t Index) {
  M.mem().write(Hpa(IoApic::kBase + IoApic::RegSel), 4, Index);
  return uint32_t(M.mem().read(Hpa(IoApic::kBase + IoApic::Window), 4));
}
void ioWrite(Machine &M, uint32_t Index, uint32_t V) {
  M.mem().write(Hpa(IoApic::kBase + IoApic::RegSel), 4, Index);
  M.mem().write(Hpa(IoApic::kBase + IoApic::Window), 4, V);
}
void route(Machine &M, unsigned Pin, uint32_t Low, uint8_t Dest) {
  ioWrite(M, IoApic::RedirIdx + 2 * Pin + 1, uint32_t(Dest) << 24);
  ioWrite(M, IoApic::RedirIdx + 2 * Pin, Low);
}
bool irrHas(LocalApic &A, uint8_t V) {
  return (A.readReg(LocalApic::Irr0 + 0x10 * (V >> 5)) >> (V & 31)) & 1;
}
bool isrHas(LocalApic &A, uint8_t V) {
  return (A.readReg(LocalApic::Isr0 + 0x10 * (V >> 5)) >> (V & 31)) & 1;
}

} // namespace

TEST(AdvancedProgrammableInterruptController, IoApicRegistersResetValues) {
  auto M = machine(1);
  ASSERT_TRUE(M);
  EXPECT_EQ(ioRead(*M, IoApic::IdIdx), 0u);
  EXPECT_EQ(ioRead(*M, IoApic::VersionIdx), 0x00170020u);
  EXPECT_EQ(ioRead(*M, IoApic::ArbIdx), 0u);
  for (unsigned Pin = 0; Pin < IoApic::kPins; ++Pin) {
    EXPECT_EQ(ioRead(*M, IoApic::RedirIdx + 2 * Pin), 0x10000u) << Pin;
    EXPECT_EQ(ioRead(*M, IoApic::RedirIdx + 2 * Pin + 1), 0u) << Pin;
  }
  ioWrite(*M, IoApic::IdIdx, 0xffffffff);
  EXPECT_EQ(ioRead(*M, IoApic::IdIdx), 0x0f000000u);
  EXPECT_EQ(ioRead(*M, IoApic::ArbIdx), 0x0f000000u);
  EXPECT_EQ(M->mem().read(Hpa(IoApic::kBase + IoApic::RegSel), 4), IoApic::ArbIdx);
}

TEST(AdvancedProgrammableInterruptController, IoApicReadOnlyFieldsIgnoreWrites) {
  auto M = machine(1);
  ASSERT_TRUE(M);
  ioWrite(*M, IoApic::VersionIdx, 0);
  EXPECT_EQ(ioRead(*M, IoApic::VersionIdx), 0x00170020u);
  ioWrite(*M, IoApic::ArbIdx, 0x05000000);
  EXPECT_EQ(ioRead(*M, IoApic::ArbIdx), 0u);
  // Delivery status (12) and remote IRR (14) are read-only; reserved high bits too.
  ioWrite(*M, IoApic::RedirIdx, 0xffffffff);
  EXPECT_EQ(ioRead(*M, IoApic::RedirIdx), 0x0001afffu);
  ioWrite(*M, IoApic::RedirIdx + 1, 0xffffffff);
  EXPECT_EQ(ioRead(*M, IoApic::RedirIdx + 1), 0xff000000u);
  // Unknown indexes read 0 and ignore writes; past the last entry too.
  ioWrite(*M, 0x03, 0x1234);
  EXPECT_EQ(ioRead(*M, 0x03), 0u);
  EXPECT_EQ(ioRead(*M, IoApic::RedirIdx + 2 * IoApic::kPins), 0u);
  ioWrite(*M, 0xff, 0x1234);
  EXPECT_EQ(ioRead(*M, 0xff), 0u);
  // Narrow writes to IOWIN are ignored; unknown offsets read 0.
  M->mem().write(Hpa(IoApic::kBase + IoApic::RegSel), 4, IoApic::IdIdx);
  M->mem().write(Hpa(IoApic::kBase + IoApic::Window), 1, 0xff);
  EXPECT_EQ(ioRead(*M, IoApic::IdIdx), 0u);
  EXPECT_EQ(M->mem().read(Hpa(IoApic::kBase + 0x20), 4), 0u);
  M->ioApic().setPin(IoApic::kPins, true); // no such pin: nothing
  M->ioApic().setPin(99, true);
}

TEST(AdvancedProgrammableInterruptController, IoApicEdgeEntryDeliversToChosenCpu) {
  auto M = machine(4);
  ASSERT_TRUE(M);
  route(*M, 5, 0x45, 2); // fixed, physical, edge, active high, unmasked, to APIC ID 2
  M->ioApic().setPin(5, true);
  for (unsigned I = 0; I < 4; ++I)
    EXPECT_EQ(irrHas(M->localApic(I), 0x45), I == 2) << I;
  // A held level does not re-send for an edge entry; a new edge does after acceptance.
  M->ioApic().setPin(5, true);
  LocalApic &A = M->localApic(2);
  A.writeReg(LocalApic::Svr, 0x1ff);
  EXPECT_EQ(A.acknowledge(), 0x45);
  EXPECT_TRUE(isrHas(A, 0x45));
  EXPECT_FALSE(irrHas(A, 0x45));
  M->ioApic().setPin(5, false);
  M->ioApic().setPin(5, true);
  EXPECT_TRUE(irrHas(A, 0x45));
}

TEST(AdvancedProgrammableInterruptController, IoApicMaskedEntrySendsNothing) {
  auto M = machine(2);
  ASSERT_TRUE(M);
  route(*M, 3, 0x10000 | 0x50, 1);
  M->ioApic().pulse(3);
  EXPECT_FALSE(irrHas(M->localApic(1), 0x50));
  // Active-low polarity: level 0 is asserted; an unmasked asserted level entry sends.
  route(*M, 4, (1u << 13) | (1u << 15) | 0x51, 1);
  EXPECT_TRUE(irrHas(M->localApic(1), 0x51));
}

TEST(AdvancedProgrammableInterruptController, IoApicLevelEntryWaitsForEoi) {
  auto M = machine(2);
  ASSERT_TRUE(M);
  LocalApic &A = M->localApic(1);
  A.writeReg(LocalApic::Svr, 0x1ff);
  route(*M, 9, (1u << 15) | 0x60, 1); // level, active high
  M->ioApic().setPin(9, true);
  EXPECT_TRUE(irrHas(A, 0x60));
  EXPECT_TRUE(ioRead(*M, IoApic::RedirIdx + 18) & IoApic::kRemoteIrr);
  EXPECT_EQ((A.readReg(LocalApic::Tmr0 + 0x30) >> 0) & 1, 1u); // TMR bit 0x60
  EXPECT_EQ(A.acknowledge(), 0x60);
  // Still asserted, remote IRR set: nothing new until the EOI.
  M->ioApic().setPin(9, true);
  EXPECT_FALSE(irrHas(A, 0x60));
  A.writeReg(LocalApic::Eoi, 0);
  // The EOI broadcast cleared remote IRR and the still-asserted pin sent again.
  EXPECT_TRUE(irrHas(A, 0x60));
  EXPECT_TRUE(ioRead(*M, IoApic::RedirIdx + 18) & IoApic::kRemoteIrr);
  // Lower the line, retire it: remote IRR clears and stays clear.
  M->ioApic().setPin(9, false);
  EXPECT_EQ(A.acknowledge(), 0x60);
  A.writeReg(LocalApic::Eoi, 0);
  EXPECT_FALSE(ioRead(*M, IoApic::RedirIdx + 18) & IoApic::kRemoteIrr);
  EXPECT_FALSE(irrHas(A, 0x60));
  // The EOI register (version 0x20) clears remote IRR too.
  M->ioApic().setPin(9, true);
  EXPECT_TRUE(ioRead(*M, IoApic::RedirIdx + 18) & IoApic::kRemoteIrr);
  M->mem().write(Hpa(IoApic::kBase + IoApic::EoiReg), 4, 0x60);
  EXPECT_TRUE(ioRead(*M, IoApic::RedirIdx + 18) & IoApic::kRemoteIrr); // re-sent
}

TEST(AdvancedProgrammableInterruptController, IoApicLogicalLowestPriorityAndNmi) {
  auto M = machine(3);
  ASSERT_TRUE(M);
  // Flat logical IDs 1, 2, 4; CPU 0 has the higher TPR, so CPU 1 wins.
  for (unsigned I = 0; I < 3; ++I) {
    M->localApic(I).writeReg(LocalApic::Svr, 0x1ff);
    M->localApic(I).writeReg(LocalApic::Ldr, (1u << I) << 24);
  }
  M->localApic(0).writeReg(LocalApic::Tpr, 0x20);
  route(*M, 7, (1u << 11) | (1u << 8) | 0x70, 0x03);
  M->ioApic().pulse(7);
  EXPECT_FALSE(irrHas(M->localApic(0), 0x70));
  EXPECT_TRUE(irrHas(M->localApic(1), 0x70));
  EXPECT_FALSE(irrHas(M->localApic(2), 0x70));
  route(*M, 8, (4u << 8), 2); // NMI to APIC ID 2
  M->ioApic().pulse(8);
  EXPECT_TRUE(M->cpu(2).NmiPending);
  EXPECT_FALSE(M->cpu(1).NmiPending);
}

// 82093AA data sheet, Delivery Mode 111 (ExtINT): the target's INTR is raised and the
// INTA that follows is answered by the 8259, not by the local APIC's IRR (virtual-wire
// mode through the I/O APIC).
TEST(AdvancedProgrammableInterruptController, IoApicExtIntEntryHandsTheInterruptAcknowledgeToThe8259) {
  auto M = machine(1);
  ASSERT_TRUE(M);
  LocalApic &A = M->localApic(0);
  A.writeReg(LocalApic::Svr, 0x1ff); // software-enabled, LINT0 masked: no LINT0 ExtINT
  for (auto [Port, V] : std::initializer_list<std::pair<uint16_t, uint8_t>>{
           {0x20, 0x11}, {0x21, 0x20}, {0x21, 0x04}, {0x21, 0x01}, {0xa0, 0x11},
           {0xa1, 0x28}, {0xa1, 0x02}, {0xa1, 0x01}, {0x21, 0x00}})
    M->io().write(Port, 1, V);
  M->pic().setIrq(5, true);
  EXPECT_FALSE(A.intrPending()); // the 8259's request does not reach the CPU by itself
  route(*M, 0, (7u << 8) | 0x99, 0); // ExtINT; the entry's vector is not used
  M->ioApic().pulse(0);
  EXPECT_TRUE(A.ExtIntPending);
  EXPECT_TRUE(A.intrPending());
  EXPECT_EQ(A.acknowledge(), 0x25u); // master vector base 0x20 + IRQ 5
  EXPECT_FALSE(A.ExtIntPending);
  EXPECT_FALSE(irrHas(A, 0x99));
  EXPECT_FALSE(isrHas(A, 0x99));
  EXPECT_FALSE(A.intrPending()); // the 8259 has IRQ 5 in service
}

namespace {
/// A one-CPU-or-more machine whose CPU 0 runs four NOPs and halts, in long mode.
void haltAfterNops(Machine &M) {
  Cpu &C = M.cpu(0);
  test::writeFlatGdt(M.mem());
  test::setupLongMode(C, M.mem());
  const uint8_t Code[] = {0x90, 0x90, 0x90, 0x90, 0xf4};
  M.mem().copyIn(Hpa(0x100000), Code, sizeof Code);
  C.S.Rip = 0x100000;
}
} // namespace

// SMI needs SMM, which vmxsim lacks; an ExtINT message to a processor with no 8259 has no
// one to answer its INTA; 011b and 110b are reserved: each stops the run with status 10
// naming it, never dropped silently.
TEST(AdvancedProgrammableInterruptController, IoApicMessagesVmxsimDoesNotModelStopTheRun) {
  struct Case {
    uint32_t Low;
    unsigned Dest;
    const char *What;
  };
  const Case Cases[] = {
      {(2u << 8) | 0x71, 0, "an SMI delivered to the local APIC (SMM)"},
      {(7u << 8) | 0x71, 1, "an ExtINT message to a local APIC with no 8259 behind it"},
      {(3u << 8) | 0x72, 0, "an interrupt message with a reserved delivery mode"},
      {(6u << 8) | 0x72, 0, "an interrupt message with a reserved delivery mode"},
  };
  for (const Case &K : Cases) {
    auto M = machine(2);
    ASSERT_TRUE(M);
    haltAfterNops(*M);
    route(*M, 10, K.Low, uint8_t(K.Dest));
    M->ioApic().pulse(10);
    const RunResult R = M->run();
    EXPECT_EQ(R.Reason, RunReason::Unimplemented) << std::hex << K.Low;
    EXPECT_EQ(R.ExitStatus, 10) << std::hex << K.Low;
    EXPECT_EQ(R.What, K.What);
    EXPECT_FALSE(irrHas(M->localApic(K.Dest), uint8_t(K.Low)));
  }
}

TEST(AdvancedProgrammableInterruptController, MadtListsIoApicAndIrqZeroOverride) {
  auto M = machine(2);
  ASSERT_TRUE(M);
  std::vector<uint8_t> T;
  for (const AcpiTable &A : readAcpiTables(M->mem()))
    if (A.Signature == "APIC")
      T = A.Bytes;
  // The CPUs, the I/O APIC, overrides for IRQ0 and the SCI, the LINT1 NMI.
  ASSERT_EQ(T.size(), 44u + 2 * 8 + 12 + 10 + 10 + 6);
  uint8_t Sum = 0;
  for (uint8_t B : T)
    Sum = uint8_t(Sum + B);
  EXPECT_EQ(Sum, 0);
  const uint8_t *Io = &T[44 + 16];
  EXPECT_EQ(Io[0], 1);
  EXPECT_EQ(Io[1], 12);
  EXPECT_EQ(Io[2], 0);
  EXPECT_EQ(Io[4] | Io[5] << 8 | Io[6] << 16 | uint32_t(Io[7]) << 24, 0xfec00000u);
  const uint8_t *Iso = Io + 12;
  EXPECT_EQ(Iso[0], 2);
  EXPECT_EQ(Iso[1], 10);
  EXPECT_EQ(Iso[2], 0);
  EXPECT_EQ(Iso[3], 0);
  EXPECT_EQ(Iso[4], 2);
  EXPECT_EQ(Iso[8] | Iso[9] << 8, 0);
}
