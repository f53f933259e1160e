// The HPET (harness/devices/hpet.h): capabilities, the counter from the virtual clock,
// one-shot and periodic comparators, legacy replacement and I/O APIC routing, edge and
// level interrupts with the status register.
#include "harness/machine.h"

#include <gtest/gtest.h>

using namespace vmxsim;

namespace {

constexpr uint64_t kBase = Hpet::kBase;

std::unique_ptr<Machine> bareMachine() {
  MachineConfig Cfg;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  return M;
}

uint64_t rd(Machine &M, uint64_t Off, unsigned Size = 8) {
  return M.mem().read(Hpa(kBase + Off), Size);
}
void wr(Machine &M, uint64_t Off, uint64_t V, unsigned Size = 8) {
  M.mem().write(Hpa(kBase + Off), Size, V);
}
uint64_t timerCfg(unsigned N) { return 0x100 + 0x20 * N; }
uint64_t timerCmp(unsigned N) { return 0x108 + 0x20 * N; }

/// I/O APIC pin Pin to CPU 0 with Vector (edge unless Level).
void routePin(Machine &M, unsigned Pin, uint8_t Vector, bool Level = false) {
  M.ioApic().writeReg(IoApic::RedirIdx + 2 * Pin + 1, 0);
  M.ioApic().writeReg(IoApic::RedirIdx + 2 * Pin, Vector | (Level ? IoApic::kLevel : 0));
}
bool apicIrr(Machine &M, uint8_t Vector) {
  return (M.localApic(0).readReg(LocalApic::Irr0 + 0x10 * (Vector / 32)) >> (Vector % 32)) & 1;
}

} // namespace

TEST(Hpet, CapabilitiesAndResetState) {
  auto M = bareMachine();
  EXPECT_EQ(rd(*M, 0x000), 0x009896808086a201ull);
  EXPECT_EQ(rd(*M, 0x004, 4), 10000000u); // 100 MHz
  EXPECT_EQ(rd(*M, 0x010), 0u);
  EXPECT_EQ(rd(*M, 0x020), 0u);
  EXPECT_EQ(rd(*M, 0x0f0), 0u);
  for (unsigned N = 0; N < 3; ++N) {
    EXPECT_EQ(rd(*M, timerCfg(N)), 0x00f0000000000030ull) << N; // periodic, 64-bit, pins 20-23
    EXPECT_EQ(rd(*M, timerCmp(N)), ~0ull) << N;
    EXPECT_EQ(rd(*M, timerCfg(N) + 0x10), 0u) << N; // no FSB route
  }
  EXPECT_EQ(rd(*M, 0x3f8), 0u); // no register
  EXPECT_EQ(M->hpet().nextTimerEvent(), kNoTimerEvent);
}

TEST(Hpet, MainCounterRunsAtOneCountPerTenCyclesWhileEnabled) {
  auto M = bareMachine();
  Cpu &C = M->bsp();
  C.Cycles = 1000;
  wr(*M, 0x010, 1);
  C.Cycles = 1000 + 12345;
  EXPECT_EQ(rd(*M, 0x0f0), 1234u);
  EXPECT_EQ(rd(*M, 0x0f0, 4), 1234u);
  wr(*M, 0x010, 0); // halted: the counter holds
  C.Cycles += 1000000;
  EXPECT_EQ(rd(*M, 0x0f0), 1234u);
  wr(*M, 0x0f0, 0xfffffff0ull); // written while halted
  EXPECT_EQ(rd(*M, 0x0f0), 0xfffffff0u);
  const uint64_t S = C.Cycles;
  wr(*M, 0x010, 1);
  C.Cycles = S + 10 * 0x20;
  EXPECT_EQ(rd(*M, 0x0f0), 0x100000010ull); // 64-bit: carries into the high half
  EXPECT_EQ(rd(*M, 0x0f4, 4), 1u);
}

TEST(Hpet, OneShotInLegacyReplacementRaisesIrqZeroAtTheComparator) {
  auto M = bareMachine();
  Cpu &C = M->bsp();
  routePin(*M, 2, 0x30);
  C.Cycles = 5000;
  wr(*M, timerCfg(0), Hpet::kIntEnable); // edge, one-shot
  wr(*M, timerCmp(0), 500);
  wr(*M, 0x010, Hpet::kEnable | Hpet::kLegacy);
  EXPECT_EQ(M->hpet().nextTimerEvent(), 5000u + 5000);
  // The PIT is disconnected from IRQ0 while the HPET owns it.
  M->io().write(0x43, 1, 0x30);
  M->io().write(0x40, 1, 2);
  M->io().write(0x40, 1, 0);
  M->pit().advanceTo(Pit8254::cycleOfTick(5000, 2));
  EXPECT_EQ(M->pic().Master.Irr & 1, 0);
  M->hpet().advanceTo(9999);
  EXPECT_EQ(M->pic().Master.Irr & 1, 0);
  M->hpet().advanceTo(10000);
  EXPECT_EQ(M->pic().Master.Irr & 1, 1);
  EXPECT_TRUE(apicIrr(*M, 0x30));
  EXPECT_EQ(rd(*M, 0x020), 0u); // edge: no status
  EXPECT_EQ(M->hpet().nextTimerEvent(), kNoTimerEvent); // 64-bit one-shot: never again
}

TEST(Hpet, TimerOneInLegacyReplacementIsIrqEightAndTheRtcIsDisconnected) {
  auto M = bareMachine();
  Cpu &C = M->bsp();
  wr(*M, timerCfg(1), Hpet::kIntEnable);
  wr(*M, timerCmp(1), 30);
  wr(*M, 0x010, Hpet::kEnable | Hpet::kLegacy);
  M->io().write(0x70, 1, 0x0b);
  M->io().write(0x71, 1, 0x42); // RTC periodic interrupt enabled
  M->rtc().advanceTo(299);
  M->hpet().advanceTo(299);
  EXPECT_EQ(M->pic().Slave.Irr & 1, 0);
  C.Cycles = 300;
  M->hpet().advanceTo(300);
  EXPECT_EQ(M->pic().Slave.Irr & 1, 1);
  M->pic().Slave.Irr = 0;
  M->rtc().advanceTo(2000000); // RTC PF at 976563: not on IRQ8 while the HPET owns it
  EXPECT_EQ(M->pic().Slave.Irr & 1, 0);
}

TEST(Hpet, PeriodicThirtyTwoBitTimerOnIoApicPin) {
  auto M = bareMachine();
  Cpu &C = M->bsp();
  routePin(*M, 21, 0x41);
  C.Cycles = 0;
  wr(*M, 0x010, Hpet::kEnable);
  C.Cycles = 1000; // counter 100
  // Linux's sequence: periodic, VAL_SET, 32-bit; comparator = now + period; then period.
  wr(*M, timerCfg(2),
     Hpet::kIntEnable | Hpet::kPeriodic | Hpet::kValSet | Hpet::kMode32 | 21u << 9, 4);
  EXPECT_EQ(rd(*M, timerCfg(2), 4) & 0x3e00, 21u << 9);
  wr(*M, timerCmp(2), 100 + 250, 4);
  EXPECT_EQ(rd(*M, timerCfg(2), 4) & Hpet::kValSet, 0u); // cleared by the write
  wr(*M, timerCmp(2), 250, 4);
  EXPECT_EQ(rd(*M, timerCmp(2)), 350u); // the comparator, not the period
  for (uint64_t K = 0; K < 4; ++K) {
    const uint64_t Due = (350 + 250 * K) * 10;
    EXPECT_EQ(M->hpet().nextTimerEvent(), Due) << K;
    M->localApic(0).writeReg(LocalApic::Eoi, 0);
    M->hpet().advanceTo(Due - 1);
    M->hpet().advanceTo(Due);
    EXPECT_TRUE(apicIrr(*M, 0x41)) << K;
    C.Cycles = Due;
    EXPECT_EQ(rd(*M, timerCmp(2)), 350 + 250 * (K + 1)) << K;
    // Take the interrupt so the next edge is visible.
    (void)M->localApic(0).acknowledge();
    M->localApic(0).writeReg(LocalApic::Eoi, 0);
  }
  // Missed periods are skipped in one step.
  const uint64_t Late = (350 + 250 * 10) * 10 + 7;
  M->hpet().advanceTo(Late);
  EXPECT_EQ(M->hpet().nextTimerEvent(), (350 + 250 * 11) * 10u);
}

TEST(Hpet, LevelTriggeredTimerHoldsItsLineUntilStatusIsCleared) {
  auto M = bareMachine();
  Cpu &C = M->bsp();
  routePin(*M, 20, 0x50, /*Level=*/true);
  wr(*M, timerCfg(0), Hpet::kLevel | 20u << 9); // interrupt disabled for now
  wr(*M, timerCmp(0), 10);
  wr(*M, 0x010, Hpet::kEnable);
  C.Cycles = 100;
  EXPECT_EQ(rd(*M, 0x020), 1u); // status set although the interrupt is disabled
  EXPECT_FALSE(apicIrr(*M, 0x50));
  wr(*M, timerCfg(0), Hpet::kLevel | Hpet::kIntEnable | 20u << 9);
  EXPECT_TRUE(apicIrr(*M, 0x50));
  EXPECT_EQ(M->ioApic().PinLevel >> 20 & 1, 1u);
  wr(*M, 0x020, 1); // write 1 to clear
  EXPECT_EQ(rd(*M, 0x020), 0u);
  EXPECT_EQ(M->ioApic().PinLevel >> 20 & 1, 0u);
}

TEST(Hpet, RouteOutsideTheCapabilityIsNotTakenAndBadAccessesAreHarmless) {
  auto M = bareMachine();
  wr(*M, timerCfg(0), 3u << 9);
  EXPECT_EQ(rd(*M, timerCfg(0)) >> 9 & 0x1f, 0u);
  wr(*M, timerCfg(0), 22u << 9);
  EXPECT_EQ(rd(*M, timerCfg(0)) >> 9 & 0x1f, 22u);
  wr(*M, 0x000, ~0ull); // read-only
  EXPECT_EQ(rd(*M, 0x000), 0x009896808086a201ull);
  wr(*M, 0x010, 0xfc); // reserved bits
  EXPECT_EQ(rd(*M, 0x010), 0u);
  EXPECT_EQ(rd(*M, 0x001, 1), 0xa2u); // byte reads of a dword
  EXPECT_EQ(rd(*M, 0x006, 2), 0x0098u);
  wr(*M, timerCfg(1), 0x04, 1); // byte write into a timer's configuration
  EXPECT_EQ(rd(*M, timerCfg(1)) & Hpet::kIntEnable, Hpet::kIntEnable);
  wr(*M, 0x3ff, 0xff, 1);
  (void)rd(*M, 0x3fe, 2);
}

TEST(Hpet, LeavingLegacyReplacementGivesIrqEightBackToTheRtc) {
  auto M = bareMachine();
  Cpu &C = M->bsp();
  M->io().write(0x70, 1, 0x0b);
  M->io().write(0x71, 1, 0x42); // RTC periodic interrupt, 1024 Hz
  wr(*M, 0x010, Hpet::kEnable | Hpet::kLegacy);
  C.Cycles = 976563;
  M->rtc().advanceTo(C.Cycles); // the RTC raises IRQF while the HPET owns IRQ8
  EXPECT_EQ(M->pic().Slave.Irr & 1, 0);
  EXPECT_EQ(M->ioApic().PinLevel >> 8 & 1, 0u);
  wr(*M, 0x010, Hpet::kEnable); // back to the RTC: its line is high
  EXPECT_EQ(M->pic().Slave.Irr & 1, 1);
  EXPECT_EQ(M->ioApic().PinLevel >> 8 & 1, 1u);
  wr(*M, 0x010, Hpet::kEnable | Hpet::kLegacy); // taken again: low
  EXPECT_EQ(M->ioApic().PinLevel >> 8 & 1, 0u);
}
