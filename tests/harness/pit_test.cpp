// The 8254 PIT (harness/devices/pit8254.h): control word, access modes, counter latch,
// exact tick timing derived from the virtual clock, and IRQ0 at exact virtual cycles in a
// running guest (through the 8259 and the scheduler's timer events).
#include "harness/machine.h"
#include "tests/support/flat_guest.h"

#include <gtest/gtest.h>

#include <cstring>

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

// Guest (32-bit flat, at 0x10000): STI; HLT; JMP back to HLT. The IRQ0 handler at
// 0x10010 stores RDTSC's low half at 0x600 + 4 * n, increments n at 0x500, sends a
// non-specific EOI to the master 8259 and IRETs.
const uint8_t kGuest[] = {
    0xfb, 0xf4, 0xeb, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0x0f, 0x31,                               // rdtsc
    0x8b, 0x0d, 0x00, 0x05, 0x00, 0x00,       // mov ecx, [0x500]
    0x89, 0x04, 0x8d, 0x00, 0x06, 0x00, 0x00, // mov [ecx*4 + 0x600], eax
    0x41,                                     // inc ecx
    0x89, 0x0d, 0x00, 0x05, 0x00, 0x00,       // mov [0x500], ecx
    0xb0, 0x20,                               // mov al, 0x20
    0xe6, 0x20,                               // out 0x20, al
    0xcf,                                     // iret
};
constexpr uint8_t kIrq0Vector = 0x20;

// Guest that arms the PIT itself and then spins with no I/O (a calibration loop's shape):
// JMP to 0x10030; the IRQ0 handler of kGuest at 0x10010; at 0x10030: RDTSC, low half to
// 0x580; channel 0 mode 0 with count 10 (the second data byte arms it); STI; JMP $.
const uint8_t kArmingGuest[] = {
    0xeb, 0x2e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0x0f, 0x31, 0x8b, 0x0d, 0x00, 0x05, 0x00, 0x00, 0x89, 0x04, 0x8d, 0x00, 0x06, 0x00, 0x00,
    0x41, 0x89, 0x0d, 0x00, 0x05, 0x00, 0x00, 0xb0, 0x20, 0xe6, 0x20, 0xcf, // handler
    0, 0, 0, 0, 0,
    0x0f, 0x31,                   // 0x10030: rdtsc
    0xa3, 0x80, 0x05, 0x00, 0x00, // mov [0x580], eax
    0xb0, 0x30, 0xe6, 0x43,       // channel 0, lobyte/hibyte, mode 0
    0xb0, 0x0a, 0xe6, 0x40,       // count low byte 10
    0xb0, 0x00, 0xe6, 0x40,       // count high byte 0: armed
    0xfb,                         // sti
    0xeb, 0xfe,                   // jmp $
};

std::unique_ptr<Machine> guestMachine(const uint8_t *Image = kGuest,
                                      size_t Size = sizeof(kGuest)) {
  MachineConfig Cfg;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Cfg.KernelImage.assign(Image, Image + Size);
  Cfg.FlatAddr = 0x10000;
  Cfg.FlatMode = EntryMode::Prot32;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  if (!M)
    return M;
  EXPECT_TRUE(test::installInterruptGate(*M, kIrq0Vector, 0x10010));
  test::initPic(*M, false, kIrq0Vector, 0xfe); // only IR0 unmasked
  return M;
}

uint32_t rd32(Machine &M, uint64_t Addr) {
  uint32_t V = 0;
  EXPECT_TRUE(M.mem().copyOut(Hpa(Addr), &V, 4));
  return V;
}

} // namespace

TEST(ProgrammableIntervalTimer, TickConversionIsExactRatio) {
  // 1e9 / 1193182 = 838.0953... virtual cycles per tick.
  EXPECT_EQ(Pit8254::cycleOfTick(0, 1), 839u);
  EXPECT_EQ(Pit8254::cycleOfTick(0, 1193182), 1000000000u);
  EXPECT_EQ(Pit8254::cycleOfTick(100, 11932), 100u + 10000151u); // ceil(11932e9 / 1193182)
  EXPECT_EQ(Pit8254::ticksBetween(0, 838), 0u);
  EXPECT_EQ(Pit8254::ticksBetween(0, 839), 1u);
  EXPECT_EQ(Pit8254::ticksBetween(5, 5 + 1000000000), 1193182u);
}

TEST(ProgrammableIntervalTimer, ModeTwoCountReadsDownAndLatches) {
  auto M = bareMachine();
  ASSERT_TRUE(M);
  IoBus &Io = M->io();
  Cpu &C = M->bsp();
  C.Cycles = 1000;
  Io.write(0x43, 1, 0x34); // channel 0, lobyte/hibyte, mode 2, binary
  Io.write(0x40, 1, 0x10);
  Io.write(0x40, 1, 0x27); // count 0x2710 = 10000
  EXPECT_EQ(M->pit().nextTimerEvent(), Pit8254::cycleOfTick(1000, 10000));
  C.Cycles = 1000 + Pit8254::cycleOfTick(0, 3); // 3 ticks later
  EXPECT_EQ(Io.read(0x40, 1), 0x0du); // 9997 = 0x270d
  EXPECT_EQ(Io.read(0x40, 1), 0x27u);
  // Counter latch: the value stays frozen while time passes, until both bytes are read.
  Io.write(0x43, 1, 0x00);
  C.Cycles += Pit8254::cycleOfTick(0, 100);
  Io.write(0x43, 1, 0x00); // a second latch before reading is ignored
  EXPECT_EQ(Io.read(0x40, 1), 0x0du);
  EXPECT_EQ(Io.read(0x40, 1), 0x27u);
  // Unlatched again: the live count (3 + 100 ticks, within rounding of 1 tick).
  const uint32_t Lo = Io.read(0x40, 1), Hi = Io.read(0x40, 1);
  const uint32_t Live = Lo | Hi << 8;
  EXPECT_EQ(Live, 10000u - uint32_t(Pit8254::ticksBetween(1000, C.Cycles)));
}

TEST(ProgrammableIntervalTimer, AccessModesLoadLowOrHighByte) {
  auto M = bareMachine();
  ASSERT_TRUE(M);
  IoBus &Io = M->io();
  Io.write(0x43, 1, 0x14); // lobyte only, mode 2
  Io.write(0x40, 1, 0x80);
  EXPECT_EQ(M->pit().Ch[0].Count, 0x80u);
  EXPECT_EQ(Io.read(0x40, 1), 0x80u);
  Io.write(0x43, 1, 0x24); // hibyte only, mode 2
  Io.write(0x40, 1, 0x12);
  EXPECT_EQ(M->pit().Ch[0].Count, 0x1200u);
  EXPECT_EQ(Io.read(0x40, 1), 0x12u);
  Io.write(0x43, 1, 0x36); // lobyte/hibyte, mode 3, count 0 = 65536
  Io.write(0x40, 1, 0);
  Io.write(0x40, 1, 0);
  EXPECT_EQ(M->pit().Ch[0].Count, 0x10000u);
  EXPECT_EQ(M->pit().Ch[0].Mode, 3u);
  Io.write(0x43, 1, 0x3e); // mode 7 is mode 3
  EXPECT_EQ(M->pit().Ch[0].Mode, 3u);
}

TEST(ProgrammableIntervalTimer, BadInputIsHarmless) {
  auto M = bareMachine();
  ASSERT_TRUE(M);
  IoBus &Io = M->io();
  EXPECT_EQ(Io.read(0x43, 1), 0xffu); // control port is write-only
  Io.write(0x43, 1, 0xc2);           // read-back: ignored
  EXPECT_EQ(M->pit().nextTimerEvent(), kNoTimerEvent);
  Io.write(0x43, 1, 0x32); // mode 1 on channel 0: gate never rises, never fires
  Io.write(0x40, 1, 5);
  Io.write(0x40, 1, 0);
  EXPECT_EQ(M->pit().nextTimerEvent(), kNoTimerEvent);
  Io.write(0x40, 4, 0xffffffff); // a 32-bit write spreads over the ports: no crash
  (void)Io.read(0x40, 4);
  M->pit().advanceTo(0); // time before the load: nothing happens
}

TEST(ProgrammableIntervalTimer, ModeTwoRaisesIrqZeroEveryCountTicks) {
  auto M = guestMachine();
  ASSERT_TRUE(M);
  const uint64_t Load = M->bsp().Cycles;
  const uint32_t N = 1000;
  IoBus &Io = M->io();
  Io.write(0x43, 1, 0x34);
  Io.write(0x40, 1, N & 0xff);
  Io.write(0x40, 1, N >> 8);
  M->setMaxInsns(200);
  RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::InsnLimit) << R.describe();
  const uint32_t Count = rd32(*M, 0x500);
  ASSERT_GE(Count, 10u);
  // Each handler's RDTSC is the IRQ0 time (tick K*N after the load) plus the same
  // delivery cost.
  const uint64_t Delivery = rd32(*M, 0x600) - Pit8254::cycleOfTick(Load, N);
  EXPECT_LT(Delivery, 200u);
  for (uint32_t K = 0; K < Count; ++K)
    EXPECT_EQ(rd32(*M, 0x600 + 4 * K), Pit8254::cycleOfTick(Load, uint64_t(K + 1) * N) + Delivery)
        << "interrupt " << K;
}

TEST(ProgrammableIntervalTimer, ModeZeroRaisesOneIrqAtTerminalCount) {
  auto M = guestMachine();
  ASSERT_TRUE(M);
  const uint64_t Load = M->bsp().Cycles;
  IoBus &Io = M->io();
  Io.write(0x43, 1, 0x30); // mode 0
  Io.write(0x40, 1, 0x34);
  Io.write(0x40, 1, 0x12);
  M->setMaxInsns(500);
  RunResult R = M->run();
  // After the single interrupt nothing can wake the CPU.
  EXPECT_EQ(R.Reason, RunReason::Halted) << R.describe();
  EXPECT_EQ(rd32(*M, 0x500), 1u);
  const uint64_t Delivery = rd32(*M, 0x600) - Pit8254::cycleOfTick(Load, 0x1234);
  EXPECT_LT(Delivery, 200u);
}

// A timer the running guest arms fires at its exact cycle even though nothing ends the
// CPU's run after the OUT (one CPU: the run has no quantum, and a spin loop breaks no
// block): the scheduler brings the run's end forward to the new event
// (Cpu::pullDeadline). The same run cut into slices of 7 instructions is identical.
TEST(ProgrammableIntervalTimer, TimerArmedByTheRunningGuestFiresOnTimeDuringASpin) {
  uint32_t Stamp[2] = {}, Armed[2] = {};
  uint64_t Retired[2] = {}, Cycles[2] = {};
  for (int Sliced = 0; Sliced < 2; ++Sliced) {
    auto M = guestMachine(kArmingGuest, sizeof(kArmingGuest));
    ASSERT_TRUE(M);
    M->setMaxInsns(20000);
    RunResult R = Sliced ? M->run([](uint64_t) {}, 7) : M->run();
    EXPECT_EQ(R.Reason, RunReason::InsnLimit) << R.describe();
    ASSERT_EQ(rd32(*M, 0x500), 1u) << "the interrupt was not delivered (sliced " << Sliced << ") " << rd32(*M, 0x580) << " " << M->pit().nextTimerEvent() << " " << M->bsp().Cycles << " " << std::hex << M->bsp().S.Rip << " irr " << int(M->pic().Master.Irr);
    Stamp[Sliced] = rd32(*M, 0x600);
    Armed[Sliced] = rd32(*M, 0x580);
    Retired[Sliced] = R.Retired;
    Cycles[Sliced] = M->bsp().Cycles;
  }
  // The RDTSC before the arming OUTs is a few cycles before the load; the handler's RDTSC
  // follows the terminal count by the delivery cost.
  const uint64_t Terminal = Pit8254::cycleOfTick(Armed[0], 10);
  EXPECT_GT(Stamp[0], Terminal);
  EXPECT_LT(Stamp[0], Terminal + 200);
  EXPECT_EQ(Stamp[1], Stamp[0]);
  EXPECT_EQ(Armed[1], Armed[0]);
  EXPECT_EQ(Retired[1], Retired[0]);
  EXPECT_EQ(Cycles[1], Cycles[0]);
}

TEST(ProgrammableIntervalTimer, IrqZeroAlsoReachesIoApicPinTwo) {
  auto M = bareMachine();
  ASSERT_TRUE(M);
  // Route pin 2 to CPU 0, vector 0x31, edge, physical.
  IoApic &A = M->ioApic();
  A.writeReg(IoApic::RedirIdx + 2 * 2 + 1, 0);
  A.writeReg(IoApic::RedirIdx + 2 * 2, 0x31);
  IoBus &Io = M->io();
  Io.write(0x43, 1, 0x30);
  Io.write(0x40, 1, 10);
  Io.write(0x40, 1, 0);
  M->pit().advanceTo(Pit8254::cycleOfTick(M->bsp().Cycles, 10));
  EXPECT_EQ(M->localApic(0).readReg(LocalApic::Irr0 + 0x10), 1u << (0x31 - 32));
  EXPECT_EQ(M->pic().Master.Irr & 1, 1);
}

TEST(ProgrammableIntervalTimer, MaskedPeriodicTimerDoesNotKeepHaltedMachineRunning) {
  auto M = guestMachine();
  ASSERT_TRUE(M);
  IoBus &Io = M->io();
  Io.write(0x21, 1, 0xff); // IR0 masked at the 8259 (the I/O APIC pin is masked at reset)
  Io.write(0x43, 1, 0x34);
  Io.write(0x40, 1, 100);
  Io.write(0x40, 1, 0);
  M->setMaxInsns(1000);
  RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::Halted) << R.describe();
  EXPECT_EQ(rd32(*M, 0x500), 0u);
}
