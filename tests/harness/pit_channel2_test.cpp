// The 8254's channel 2 behind port 0x61 (GATE = bit 0, OUT = bit 5), the read-back command
// and the mode definitions of the 82C54 data sheet, at exact virtual cycles.
#include "harness/machine.h"

#include <gtest/gtest.h>

using namespace vmxsim;

namespace {

std::unique_ptr<Machine> bareMachine() {
  MachineConfig Cfg;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  return M;
}

bool out2(Machine &M) { return M.io().read(0x61, 1) & 0x20; }

void loadChannel2(IoBus &Io, uint8_t Mode, uint16_t Count) {
  Io.write(0x43, 1, 0xb0 | Mode << 1); // counter 2, LSB then MSB, binary
  Io.write(0x42, 1, Count & 0xff);
  Io.write(0x42, 1, Count >> 8);
}

} // namespace

TEST(PitChannelTwo, ModeZeroOutputRisesExactlyAtTheCount) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  Cpu &C = M->bsp();
  C.Cycles = 5000;
  Io.write(0x61, 1, 0x01); // GATE high, speaker off
  loadChannel2(Io, 0, 1000);
  EXPECT_FALSE(out2(*M));
  C.Cycles = Pit8254::cycleOfTick(5000, 1000) - 1;
  EXPECT_FALSE(out2(*M));
  C.Cycles += 1;
  EXPECT_TRUE(out2(*M));
  C.Cycles += 10000000;
  EXPECT_TRUE(out2(*M)); // stays high until reprogrammed
  Io.write(0x43, 1, 0xb0);
  EXPECT_FALSE(out2(*M)); // the control word sets OUT low in mode 0
}

TEST(PitChannelTwo, GateLowSuspendsModeZeroCounting) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  Cpu &C = M->bsp();
  C.Cycles = 100;
  Io.write(0x61, 1, 0x00); // GATE low: loaded but not counting
  loadChannel2(Io, 0, 50);
  C.Cycles = 1000000;
  EXPECT_FALSE(out2(*M));
  Io.write(0x61, 1, 0x01); // counting starts now
  const uint64_t Start = C.Cycles;
  C.Cycles = Pit8254::cycleOfTick(Start, 20) + 3;
  Io.write(0x61, 1, 0x00); // 20 counts done; suspended
  C.Cycles += 5000000;
  EXPECT_FALSE(out2(*M));
  Io.write(0x61, 1, 0x01);
  const uint64_t Resume = C.Cycles;
  C.Cycles = Pit8254::cycleOfTick(Resume, 30) - 1;
  EXPECT_FALSE(out2(*M));
  C.Cycles += 1;
  EXPECT_TRUE(out2(*M));
}

TEST(PitChannelTwo, PortSixtyOneKeepsRefreshToggleAndLowBits) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  Io.write(0x61, 1, 0xff);
  const uint32_t A = Io.read(0x61, 1), B = Io.read(0x61, 1);
  EXPECT_EQ((A ^ B) & 0x10, 0x10u);
  EXPECT_EQ(A & 0x0f, 0x0fu);
  EXPECT_EQ(A & 0xc0, 0u);
}

TEST(PitChannelTwo, ReadBackLatchesStatusThenCount) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  Cpu &C = M->bsp();
  Io.write(0x61, 1, 0x01);
  Io.write(0x43, 1, 0xb0);
  Io.write(0x43, 1, 0xe8); // read-back: status only, counter 2
  EXPECT_EQ(Io.read(0x42, 1), 0x70u); // OUT low, null count, access 3, mode 0, binary
  C.Cycles = 1000;
  Io.write(0x42, 1, 0xe8);
  Io.write(0x42, 1, 0x03); // 1000
  C.Cycles = Pit8254::cycleOfTick(1000, 3);
  Io.write(0x43, 1, 0xc8); // read-back: count and status, counter 2
  C.Cycles += Pit8254::cycleOfTick(0, 100); // the latched values do not move
  Io.write(0x43, 1, 0xc8); // a second read-back before reading is ignored
  EXPECT_EQ(Io.read(0x42, 1), 0x30u); // OUT low, count loaded
  EXPECT_EQ(Io.read(0x42, 1), 997u & 0xff);
  EXPECT_EQ(Io.read(0x42, 1), 997u >> 8);
  // Released: the live count.
  const uint32_t Lo = Io.read(0x42, 1), Hi = Io.read(0x42, 1);
  EXPECT_EQ(Lo | Hi << 8, 1000u - Pit8254::ticksBetween(1000, C.Cycles));
  // Read-back of counter 0 and 1 status alone leaves counter 2 unlatched.
  Io.write(0x43, 1, 0xe6);
  EXPECT_EQ(Io.read(0x40, 1), 0x70u); // counter 0: never programmed: null count
}

TEST(PitChannelTwo, ModeOneIsAGateTriggeredOneShot) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  Cpu &C = M->bsp();
  Io.write(0x61, 1, 0x00);
  loadChannel2(Io, 1, 10);
  EXPECT_TRUE(out2(*M)); // high until triggered
  C.Cycles = 7777;
  Io.write(0x61, 1, 0x01); // rising edge: trigger
  EXPECT_FALSE(out2(*M));
  C.Cycles = Pit8254::cycleOfTick(7777, 10) - 1;
  EXPECT_FALSE(out2(*M));
  C.Cycles += 1;
  EXPECT_TRUE(out2(*M));
}

TEST(PitChannelTwo, ModeThreeIsASquareWaveAndGateLowForcesHigh) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  Cpu &C = M->bsp();
  Io.write(0x61, 1, 0x01);
  C.Cycles = 0;
  loadChannel2(Io, 3, 10);
  for (uint64_t K = 0; K < 20; ++K) {
    C.Cycles = Pit8254::cycleOfTick(0, K);
    EXPECT_EQ(out2(*M), K % 10 < 5) << "tick " << K;
  }
  // Odd count 7: high for 4 counts, low for 3.
  loadChannel2(Io, 3, 7);
  const uint64_t S = C.Cycles;
  for (uint64_t K = 0; K < 7; ++K) {
    C.Cycles = Pit8254::cycleOfTick(S, K);
    EXPECT_EQ(out2(*M), K < 4) << "tick " << K;
  }
  C.Cycles = Pit8254::cycleOfTick(S, 5);
  Io.write(0x61, 1, 0x00);
  EXPECT_TRUE(out2(*M));
}

TEST(PitChannelTwo, ModesTwoFourAndFivePulseLowForOneCount) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  Cpu &C = M->bsp();
  Io.write(0x61, 1, 0x01);
  C.Cycles = 0;
  loadChannel2(Io, 2, 4); // rate generator: low while the count is 1
  for (uint64_t K = 0; K < 8; ++K) {
    C.Cycles = Pit8254::cycleOfTick(0, K);
    EXPECT_EQ(out2(*M), K % 4 != 3) << "mode 2 tick " << K;
  }
  const uint64_t S = C.Cycles;
  loadChannel2(Io, 4, 5); // software strobe: low for the one count at terminal count
  for (uint64_t K = 0; K < 8; ++K) {
    C.Cycles = Pit8254::cycleOfTick(S, K);
    EXPECT_EQ(out2(*M), K != 5) << "mode 4 tick " << K;
  }
  Io.write(0x61, 1, 0x00);
  loadChannel2(Io, 5, 3); // hardware strobe: waits for a GATE edge
  C.Cycles += 100000;
  EXPECT_TRUE(out2(*M));
  const uint64_t G = C.Cycles;
  Io.write(0x61, 1, 0x01);
  for (uint64_t K = 0; K < 6; ++K) {
    C.Cycles = Pit8254::cycleOfTick(G, K);
    EXPECT_EQ(out2(*M), K != 3) << "mode 5 tick " << K;
  }
}

TEST(PitChannelTwo, BcdCountsDownInDecimal) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  Cpu &C = M->bsp();
  Io.write(0x61, 1, 0x01);
  Io.write(0x43, 1, 0xb1); // counter 2, mode 0, BCD
  Io.write(0x42, 1, 0x00);
  Io.write(0x42, 1, 0x10); // 1000 decimal
  C.Cycles = Pit8254::cycleOfTick(0, 1);
  Io.write(0x43, 1, 0x80); // latch counter 2
  EXPECT_EQ(Io.read(0x42, 1), 0x99u);
  EXPECT_EQ(Io.read(0x42, 1), 0x09u); // 0999
}
