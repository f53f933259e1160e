// The MC146818 CMOS/RTC (harness/devices/rtc146818.h) and the CMOS layout
// (harness/devices/cmos_layout.h): standard fields, the clock from the virtual time, data
// modes, UIP, the periodic interrupt on IRQ 8, and the RTC base's parsing.
#include "harness/machine.h"
#include "tests/support/flat_guest.h"

#include <gtest/gtest.h>

using namespace vmxsim;

namespace {

constexpr uint64_t kSecond = 1000000000;

std::unique_ptr<Machine> machineWith(uint64_t Ram, int64_t Base = kDefaultRtcBase) {
  MachineConfig Cfg;
  Cfg.RamBytes = Ram;
  Cfg.RtcBaseSeconds = Base;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  return M;
}

uint32_t cmos(Machine &M, uint8_t Index) {
  M.io().write(0x70, 1, Index);
  return M.io().read(0x71, 1);
}
void cmosWrite(Machine &M, uint8_t Index, uint8_t V) {
  M.io().write(0x70, 1, Index);
  M.io().write(0x71, 1, V);
}

} // namespace

TEST(CmosLayout, FieldsFor128MiB) {
  auto M = machineWith(128ull << 20);
  EXPECT_EQ(cmos(*M, 0x0f), 0u);
  EXPECT_EQ(cmos(*M, 0x10), 0u);
  EXPECT_EQ(cmos(*M, 0x12), 0u);
  EXPECT_EQ(cmos(*M, 0x14), 0x02u);
  EXPECT_EQ(cmos(*M, 0x15), 0x80u); // 640 KiB
  EXPECT_EQ(cmos(*M, 0x16), 0x02u);
  EXPECT_EQ(cmos(*M, 0x17), 0xffu); // 127 MiB above 1 MiB: capped at 65535 KiB
  EXPECT_EQ(cmos(*M, 0x18), 0xffu);
  EXPECT_EQ(cmos(*M, 0x30), 0xffu);
  EXPECT_EQ(cmos(*M, 0x31), 0xffu);
  EXPECT_EQ(cmos(*M, 0x34), 0x00u); // (128 - 16) MiB / 64 KiB = 0x0700
  EXPECT_EQ(cmos(*M, 0x35), 0x07u);
  EXPECT_EQ(cmos(*M, 0x5b), 0u);
  EXPECT_EQ(cmos(*M, 0x5c), 0u);
  EXPECT_EQ(cmos(*M, 0x5d), 0u);
  EXPECT_EQ(cmos(*M, 0x5f), 0u); // one CPU
  EXPECT_EQ(cmos(*M, 0x32), 0x20u);
  EXPECT_EQ(cmos(*M, 0x0d), 0x80u);
  unsigned Sum = 0;
  for (uint8_t I = 0x10; I <= 0x2d; ++I)
    Sum += cmos(*M, I);
  EXPECT_EQ(cmos(*M, 0x2e) << 8 | cmos(*M, 0x2f), Sum);
}

TEST(CmosLayout, FieldsFor5GiBAndSmallMemory) {
  auto M = machineWith(5ull << 30);
  // Low RAM is 3 GiB (QEMU's split above 3.5 GiB), 2 GiB is above 4 GiB.
  EXPECT_EQ(cmos(*M, 0x34), 0x00u); // (3 GiB - 16 MiB) / 64 KiB = 0xbf00
  EXPECT_EQ(cmos(*M, 0x35), 0xbfu);
  EXPECT_EQ(cmos(*M, 0x5b), 0x00u); // 2 GiB / 64 KiB = 0x008000
  EXPECT_EQ(cmos(*M, 0x5c), 0x80u);
  EXPECT_EQ(cmos(*M, 0x5d), 0x00u);
  auto S = machineWith(8ull << 20);
  EXPECT_EQ(cmos(*S, 0x17), 0x00u); // 7 MiB = 7168 KiB = 0x1c00
  EXPECT_EQ(cmos(*S, 0x18), 0x1cu);
  EXPECT_EQ(cmos(*S, 0x34), 0u);
  EXPECT_EQ(cmos(*S, 0x35), 0u);
}

TEST(RealTimeClock, EpochIsTheDefaultBaseInBcd) {
  auto M = machineWith(32ull << 20);
  EXPECT_EQ(cmos(*M, 0x0a), 0x26u);
  EXPECT_EQ(cmos(*M, 0x0b), 0x02u);
  EXPECT_EQ(cmos(*M, 0x00), 0x00u);
  EXPECT_EQ(cmos(*M, 0x02), 0x00u);
  EXPECT_EQ(cmos(*M, 0x04), 0x00u);
  EXPECT_EQ(cmos(*M, 0x06), 5u); // 2026-01-01 is a Thursday (Sunday = 1)
  EXPECT_EQ(cmos(*M, 0x07), 0x01u);
  EXPECT_EQ(cmos(*M, 0x08), 0x01u);
  EXPECT_EQ(cmos(*M, 0x09), 0x26u);
  EXPECT_EQ(cmos(*M, 0x32), 0x20u);
  EXPECT_EQ(M->rtc().timeNow(), kDefaultRtcBase);
}

TEST(RealTimeClock, AdvancesWithVirtualTimeOnly) {
  auto M = machineWith(32ull << 20);
  Cpu &C = M->bsp();
  C.Cycles = kSecond - 1;
  EXPECT_EQ(cmos(*M, 0x00), 0x00u);
  C.Cycles = kSecond;
  EXPECT_EQ(cmos(*M, 0x00), 0x01u);
  C.Cycles = 3723 * kSecond + 5; // 01:02:03
  EXPECT_EQ(cmos(*M, 0x04), 0x01u);
  EXPECT_EQ(cmos(*M, 0x02), 0x02u);
  EXPECT_EQ(cmos(*M, 0x00), 0x03u);
  C.Cycles = (86400 * 31 + 59) * kSecond; // 2026-02-01 00:00:59, a Sunday
  EXPECT_EQ(cmos(*M, 0x08), 0x02u);
  EXPECT_EQ(cmos(*M, 0x07), 0x01u);
  EXPECT_EQ(cmos(*M, 0x06), 1u);
  EXPECT_EQ(cmos(*M, 0x00), 0x59u);
}

TEST(RealTimeClock, BinaryAndTwelveHourModes) {
  auto M = machineWith(32ull << 20);
  Cpu &C = M->bsp();
  C.Cycles = (13 * 3600 + 45 * 60 + 30) * kSecond; // 13:45:30
  cmosWrite(*M, 0x0b, 0x06);                       // binary, 24-hour
  EXPECT_EQ(cmos(*M, 0x04), 13u);
  EXPECT_EQ(cmos(*M, 0x02), 45u);
  EXPECT_EQ(cmos(*M, 0x00), 30u);
  EXPECT_EQ(cmos(*M, 0x09), 26u);
  EXPECT_EQ(cmos(*M, 0x32), 20u);
  cmosWrite(*M, 0x0b, 0x04); // binary, 12-hour
  EXPECT_EQ(cmos(*M, 0x04), 0x81u); // 1 PM
  cmosWrite(*M, 0x0b, 0x00); // BCD, 12-hour
  EXPECT_EQ(cmos(*M, 0x04), 0x81u);
  C.Cycles = (22 * 3600) * kSecond;
  EXPECT_EQ(cmos(*M, 0x04), 0x90u); // 10 PM in BCD
  C.Cycles = 86400 * kSecond; // midnight: 12 AM
  EXPECT_EQ(cmos(*M, 0x04), 0x12u);
  C.Cycles = (86400 + 12 * 3600) * kSecond; // noon: 12 PM
  EXPECT_EQ(cmos(*M, 0x04), 0x92u);
  // Writing in 12-hour BCD: 11 PM.
  cmosWrite(*M, 0x0b, 0x80); // SET, BCD, 12-hour
  cmosWrite(*M, 0x04, 0x91);
  cmosWrite(*M, 0x0b, 0x02); // 24-hour BCD, running
  EXPECT_EQ(cmos(*M, 0x04), 0x23u);
}

TEST(RealTimeClock, SetBitHoldsTheTimeWhileSoftwareWritesIt) {
  auto M = machineWith(32ull << 20);
  Cpu &C = M->bsp();
  C.Cycles = 500000000;
  cmosWrite(*M, 0x0b, 0x82); // SET
  cmosWrite(*M, 0x09, 0x99);  // 2099
  cmosWrite(*M, 0x08, 0x12);
  cmosWrite(*M, 0x07, 0x31);
  cmosWrite(*M, 0x04, 0x23);
  cmosWrite(*M, 0x02, 0x59);
  cmosWrite(*M, 0x00, 0x58);
  C.Cycles = 5 * kSecond + 500000000; // updates stopped
  EXPECT_EQ(cmos(*M, 0x00), 0x58u);
  cmosWrite(*M, 0x0b, 0x02); // updates resume on the divider's phase
  C.Cycles = 6 * kSecond - 1;
  EXPECT_EQ(cmos(*M, 0x00), 0x58u);
  C.Cycles = 6 * kSecond;
  EXPECT_EQ(cmos(*M, 0x00), 0x59u);
  C.Cycles = 7 * kSecond; // 2099-12-31 23:59:59 -> 2100-01-01 00:00:00
  EXPECT_EQ(cmos(*M, 0x00), 0x00u);
  EXPECT_EQ(cmos(*M, 0x04), 0x00u);
  EXPECT_EQ(cmos(*M, 0x07), 0x01u);
  EXPECT_EQ(cmos(*M, 0x08), 0x01u);
  EXPECT_EQ(cmos(*M, 0x09), 0x00u);
  EXPECT_EQ(cmos(*M, 0x32), 0x21u);
  EXPECT_EQ(cmos(*M, 0x06), 6u); // the day of week ran on: Thursday, then Friday
}

TEST(RealTimeClock, UpdateInProgressIsSetFor244MicrosecondsBeforeEachUpdate) {
  auto M = machineWith(32ull << 20);
  Cpu &C = M->bsp();
  C.Cycles = 3 * kSecond - 244001;
  EXPECT_EQ(cmos(*M, 0x0a) & 0x80, 0u);
  C.Cycles = 3 * kSecond - 244000;
  EXPECT_EQ(cmos(*M, 0x0a) & 0x80, 0x80u);
  C.Cycles = 3 * kSecond - 1;
  EXPECT_EQ(cmos(*M, 0x0a) & 0x80, 0x80u);
  EXPECT_EQ(cmos(*M, 0x00), 0x02u);
  C.Cycles = 3 * kSecond;
  EXPECT_EQ(cmos(*M, 0x0a) & 0x80, 0u);
  EXPECT_EQ(cmos(*M, 0x00), 0x03u);
  // Divider held in reset: no updates, no UIP; released: the first update half a second
  // later.
  cmosWrite(*M, 0x0a, 0x66);
  C.Cycles = 10 * kSecond;
  EXPECT_EQ(cmos(*M, 0x00), 0x03u);
  cmosWrite(*M, 0x0a, 0x26);
  C.Cycles = 10 * kSecond + kSecond / 2 - 1;
  EXPECT_EQ(cmos(*M, 0x00), 0x03u);
  C.Cycles = 10 * kSecond + kSecond / 2;
  EXPECT_EQ(cmos(*M, 0x00), 0x04u);
}

TEST(RealTimeClock, PeriodicInterruptOnIrqEightAtTheProgrammedRate) {
  auto M = machineWith(32ull << 20);
  Cpu &C = M->bsp();
  IoApic &A = M->ioApic();
  A.writeReg(IoApic::RedirIdx + 2 * 8 + 1, 0);
  A.writeReg(IoApic::RedirIdx + 2 * 8, 0x38); // pin 8: vector 0x38, edge, CPU 0
  Rtc146818 &R = M->rtc();
  cmosWrite(*M, 0x0a, 0x2f); // RS 15: 2 Hz, 16384 ticks of 32.768 kHz
  cmosWrite(*M, 0x0a, 0x26); // RS 6: 1024 Hz, 32 ticks = 976562.5 cycles
  EXPECT_EQ(R.nextTimerEvent(), kNoTimerEvent); // PIE clear: nothing to raise
  cmosWrite(*M, 0x0b, 0x42);                    // PIE
  EXPECT_EQ(R.nextTimerEvent(), 976563u);
  R.advanceTo(976562);
  EXPECT_EQ(M->pic().Slave.Irr & 1, 0);
  R.advanceTo(976563);
  EXPECT_EQ(M->pic().Slave.Irr & 1, 1);
  EXPECT_EQ(M->localApic(0).readReg(LocalApic::Irr0 + 0x10), 1u << (0x38 - 32));
  EXPECT_EQ(R.nextTimerEvent(), kNoTimerEvent); // IRQF already set: no new edge
  C.Cycles = 976563;
  EXPECT_EQ(cmos(*M, 0x0c), 0xc0u); // IRQF | PF, cleared by the read
  EXPECT_EQ(cmos(*M, 0x0c), 0x00u);
  EXPECT_EQ(R.nextTimerEvent(), 1953125u);
  for (uint64_t K = 2; K < 6; ++K) {
    const uint64_t Due = (K * 1953125 + 1) / 2; // ceil(K * 976562.5)
    EXPECT_EQ(R.nextTimerEvent(), Due);
    C.Cycles = Due;
    R.advanceTo(Due);
    EXPECT_EQ(cmos(*M, 0x0c), 0xc0u);
  }
  // RS 3: 8192 Hz.
  cmosWrite(*M, 0x0a, 0x23);
  // The last event was tick 5 * 32 = 160; the next of every 4 ticks is tick 164.
  EXPECT_EQ(R.nextTimerEvent(), (uint64_t(164) * 1953125 + 63) / 64);
}

TEST(RealTimeClock, UpdateEndedAndAlarmFlags) {
  auto M = machineWith(32ull << 20);
  Cpu &C = M->bsp();
  Rtc146818 &R = M->rtc();
  cmosWrite(*M, 0x01, 0x05); // alarm at hh:mm:05, any hour and minute
  cmosWrite(*M, 0x03, 0xff);
  cmosWrite(*M, 0x05, 0xc0);
  cmosWrite(*M, 0x0b, 0x22); // AIE
  EXPECT_EQ(R.nextTimerEvent(), kSecond); // checked at every update
  C.Cycles = 4 * kSecond;
  EXPECT_EQ(cmos(*M, 0x0c), 0x50u); // PF and UF are set, but not enabled: IRQF clear
  EXPECT_EQ(M->pic().Slave.Irr & 1, 0);
  R.advanceTo(5 * kSecond);
  EXPECT_EQ(M->pic().Slave.Irr & 1, 1);
  C.Cycles = 5 * kSecond;
  EXPECT_EQ(cmos(*M, 0x0c), 0xf0u); // IRQF, PF (1024 Hz runs), AF, UF
  cmosWrite(*M, 0x0b, 0x12);        // UIE
  C.Cycles = 6 * kSecond;
  EXPECT_EQ(cmos(*M, 0x0c), 0xd0u); // IRQF, PF, UF
}

TEST(RealTimeClock, BaseParsingIsStrict) {
  int64_t V = 0;
  std::string Why;
  EXPECT_TRUE(Rtc146818::parseBase("2026-01-01T00:00:00", V, Why));
  EXPECT_EQ(V, kDefaultRtcBase);
  EXPECT_TRUE(Rtc146818::parseBase("2000-02-29 23:59:59Z", V, Why));
  EXPECT_EQ(V, 951868799);
  EXPECT_TRUE(Rtc146818::parseBase("0", V, Why));
  EXPECT_EQ(V, 0);
  EXPECT_TRUE(Rtc146818::parseBase("253402300799", V, Why));
  for (const char *Bad : {"", "-1", "253402300800", "1e9", "2026-1-01T00:00:00",
                          "2026-01-01", "2026-13-01T00:00:00", "2025-02-29T00:00:00",
                          "2026-01-01T24:00:00", "2026-01-01T00:60:00", "1969-12-31T23:59:59",
                          "2026-01-01T00:00:00ZZ", "2026-01-01T00:00:00+01:00",
                          "99999999999999999999", " 5"}) {
    EXPECT_FALSE(Rtc146818::parseBase(Bad, V, Why)) << Bad;
    EXPECT_FALSE(Why.empty());
  }
}

TEST(RealTimeClock, ConfiguredBaseStartsTheClock) {
  int64_t Base;
  std::string Why;
  ASSERT_TRUE(Rtc146818::parseBase("2000-02-29T23:59:59", Base, Why));
  auto M = machineWith(32ull << 20, Base);
  EXPECT_EQ(cmos(*M, 0x09), 0x00u);
  EXPECT_EQ(cmos(*M, 0x08), 0x02u);
  EXPECT_EQ(cmos(*M, 0x07), 0x29u);
  EXPECT_EQ(cmos(*M, 0x06), 3u); // a Tuesday
  M->bsp().Cycles = kSecond;
  EXPECT_EQ(cmos(*M, 0x08), 0x03u);
  EXPECT_EQ(cmos(*M, 0x07), 0x01u);
  EXPECT_EQ(cmos(*M, 0x04), 0x00u);
}

TEST(RealTimeClock, NmiMaskBitAndBadAccessesAreHarmless) {
  auto M = machineWith(32ull << 20);
  IoBus &Io = M->io();
  Io.write(0x70, 1, 0x8f);
  EXPECT_TRUE(M->rtc().nmiMasked());
  EXPECT_EQ(M->rtc().index(), 0x0fu);
  EXPECT_EQ(Io.read(0x70, 1), 0xffu); // write-only
  Io.write(0x70, 1, 0x0d);
  Io.write(0x71, 1, 0x00); // D is read-only
  EXPECT_EQ(Io.read(0x71, 1), 0x80u);
  Io.write(0x70, 2, 0x5540); // index 0x40, then 0x55 into byte 0x40
  EXPECT_EQ(cmos(*M, 0x40), 0x55u);
  (void)Io.read(0x70, 4);
}

namespace {
// Guest (32-bit flat, at 0x10000): STI; HLT; JMP back to HLT. The IRQ 8 handler at
// 0x10010 stores RDTSC's low half at 0x600 + 4 * n, increments n at 0x500, reads
// register C (which lowers IRQ 8), sends non-specific EOIs to both 8259s and IRETs.
const uint8_t kRtcGuest[] = {
    0xfb, 0xf4, 0xeb, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0x0f, 0x31,                               // rdtsc
    0x8b, 0x0d, 0x00, 0x05, 0x00, 0x00,       // mov ecx, [0x500]
    0x89, 0x04, 0x8d, 0x00, 0x06, 0x00, 0x00, // mov [ecx*4 + 0x600], eax
    0x41,                                     // inc ecx
    0x89, 0x0d, 0x00, 0x05, 0x00, 0x00,       // mov [0x500], ecx
    0xb0, 0x0c, 0xe6, 0x70,                   // mov al, 0x0c; out 0x70, al
    0xe4, 0x71,                               // in al, 0x71
    0xb0, 0x20, 0xe6, 0xa0, 0xe6, 0x20,       // EOI to the slave and the master
    0xcf,                                     // iret
};
} // namespace

TEST(RealTimeClock, GuestTakesThePeriodicInterruptAtExactVirtualTimes) {
  MachineConfig Cfg;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Cfg.KernelImage.assign(std::begin(kRtcGuest), std::end(kRtcGuest));
  Cfg.FlatAddr = 0x10000;
  Cfg.FlatMode = EntryMode::Prot32;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  Cpu &C = M->bsp();
  constexpr uint8_t kVector = 0x28;
  ASSERT_TRUE(test::installInterruptGate(*M, kVector, 0x10010));
  test::initPic(*M, false, 0x20, 0xfb); // master: only the cascade unmasked
  test::initPic(*M, true, 0x28, 0xfe);  // slave: only IR0 (IRQ 8) unmasked
  ASSERT_EQ(C.Cycles, 0u);
  cmosWrite(*M, 0x0b, 0x42); // PIE at the power-on rate, 1024 Hz
  M->setMaxInsns(300);
  RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::InsnLimit) << R.describe();
  uint32_t Count = 0;
  ASSERT_TRUE(M->mem().copyOut(Hpa(0x500), &Count, 4));
  ASSERT_GE(Count, 10u);
  auto at = [&](uint32_t K) {
    uint32_t V = 0;
    EXPECT_TRUE(M->mem().copyOut(Hpa(0x600 + 4 * K), &V, 4));
    return V;
  };
  // Interrupt k (from 1) is due at ceil(k * 976562.5) cycles; each handler's RDTSC is
  // that plus the same delivery cost.
  const uint64_t Delivery = at(0) - 976563;
  EXPECT_LT(Delivery, 200u);
  for (uint32_t K = 0; K < Count; ++K)
    EXPECT_EQ(at(K), ((K + 1) * 1953125ull + 1) / 2 + Delivery) << "interrupt " << K;
}

TEST(RealTimeClock, MachineRefusesAnRtcBaseOutOfRange) {
  for (int64_t Bad : {int64_t(-1), kMaxRtcBase + 1}) {
    MachineConfig Cfg;
    Cfg.RtcBaseSeconds = Bad;
    Error Err = Machine::validate(Cfg);
    EXPECT_TRUE(Err) << Bad;
  }
  MachineConfig Cfg;
  Cfg.RtcBaseSeconds = kMaxRtcBase;
  EXPECT_FALSE(Machine::validate(Cfg));
}
