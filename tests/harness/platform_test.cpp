// The PC platform around the processors: the i8042, the A20 gate in the memory path, the
// reset paths, and the PCI configuration space of the 440FX host and PIIX3 ISA bridge.
#include "harness/machine.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace vmxsim;

namespace {

MachineConfig baseConfig() {
  MachineConfig Cfg;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  return Cfg;
}

std::unique_ptr<Machine> bareMachine() {
  Error Err;
  auto M = Machine::create(baseConfig(), Err);
  EXPECT_TRUE(M) << Err.str();
  return M;
}

/// A real-mode flat image at 0x10000 (CS:IP = 1000:0000).
std::unique_ptr<Machine> realModeGuest(std::vector<uint8_t> Code) {
  MachineConfig Cfg = baseConfig();
  Cfg.KernelImage = std::move(Code);
  Cfg.FlatAddr = 0x10000;
  Cfg.FlatMode = EntryMode::Real;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  return M;
}

uint8_t rd8(Machine &M, uint64_t A) { return uint8_t(M.mem().read(Hpa(A), 1)); }

uint32_t pciRead(Machine &M, unsigned Dev, unsigned Fn, unsigned Off, unsigned Size = 4) {
  M.io().write(0xcf8, 4, 0x80000000u | Dev << 11 | Fn << 8 | (Off & 0xfc));
  return M.io().read(uint16_t(0xcfc + (Off & 3)), Size);
}
void pciWrite(Machine &M, unsigned Dev, unsigned Off, uint32_t V, unsigned Size) {
  M.io().write(0xcf8, 4, 0x80000000u | Dev << 11 | (Off & 0xfc));
  M.io().write(uint16_t(0xcfc + (Off & 3)), Size, V);
}

// Real-mode code pieces.
const std::vector<uint8_t> kA20Off = {0xe4, 0x92, 0x24, 0xfd, 0xe6, 0x92}; // in; and ~2; out
const std::vector<uint8_t> kA20On = {0xe4, 0x92, 0x0c, 0x02, 0xe6, 0x92};  // in; or 2; out
const std::vector<uint8_t> kDsFfff = {0xb8, 0xff, 0xff, 0x8e, 0xd8};       // mov ax,ffff; mov ds,ax
/// mov byte [0x0510], V: FFFF:0510 is linear 0x100500.
std::vector<uint8_t> store(uint8_t V) { return {0xc6, 0x06, 0x10, 0x05, V}; }
const std::vector<uint8_t> kExit = {0xb0, 0x00, 0xe6, 0xf4}; // isa-debug-exit 0

std::vector<uint8_t> concat(std::initializer_list<std::vector<uint8_t>> Parts) {
  std::vector<uint8_t> Out;
  for (const auto &P : Parts)
    Out.insert(Out.end(), P.begin(), P.end());
  return Out;
}

} // namespace

TEST(KeyboardController, SelfTestInterfaceTestsAndCommandByte) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  EXPECT_EQ(Io.read(0x64, 1) & 0x01, 0u);
  Io.write(0x64, 1, 0xaa);
  EXPECT_EQ(Io.read(0x64, 1), 0x1du); // OBF, SYS, command, unlocked
  EXPECT_EQ(Io.read(0x60, 1), 0x55u);
  EXPECT_EQ(Io.read(0x64, 1) & 0x01, 0u);
  Io.write(0x64, 1, 0xab);
  EXPECT_EQ(Io.read(0x60, 1), 0x00u);
  Io.write(0x64, 1, 0xa9);
  EXPECT_EQ(Io.read(0x60, 1), 0x00u);
  Io.write(0x64, 1, 0x20);
  EXPECT_EQ(Io.read(0x60, 1), 0x65u);
  Io.write(0x64, 1, 0x60);
  Io.write(0x60, 1, 0x47);
  EXPECT_EQ(M->keyboardController().commandByte(), 0x47u);
  Io.write(0x64, 1, 0xad); // disable keyboard: bit 4
  Io.write(0x64, 1, 0xa8); // enable aux: bit 5 clear
  Io.write(0x64, 1, 0x20);
  EXPECT_EQ(Io.read(0x60, 1), 0x57u);
  Io.write(0x64, 1, 0x23); // controller RAM byte 3
  EXPECT_EQ(Io.read(0x60, 1), 0x00u);
  Io.write(0x64, 1, 0xc0);
  EXPECT_EQ(Io.read(0x60, 1), 0x80u);
  Io.write(0x64, 1, 0xd0);
  EXPECT_EQ(Io.read(0x60, 1), 0x01u); // not in reset, A20 input off
}

TEST(KeyboardController, DeviceBytesTimeOutAndRaiseIrqOne) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  M->ioApic().writeReg(IoApic::RedirIdx + 2 * 1, 0x31);
  Io.write(0x60, 1, 0xff); // keyboard reset: nobody answers
  EXPECT_EQ(Io.read(0x64, 1) & 0x61, 0x41u); // OBF and time-out
  EXPECT_EQ(M->pic().Master.Irr & 2, 2);
  EXPECT_EQ(Io.read(0x60, 1), 0xfeu);
  Io.write(0x64, 1, 0xd4); // to the auxiliary device: also nobody
  Io.write(0x60, 1, 0xf4);
  EXPECT_EQ(Io.read(0x64, 1) & 0x61, 0x61u);
  Io.write(0x64, 1, 0xd2); // echo as keyboard data
  Io.write(0x60, 1, 0x1c);
  EXPECT_EQ(Io.read(0x64, 1) & 0x61, 0x01u);
  EXPECT_EQ(Io.read(0x60, 1), 0x1cu);
  Io.write(0x64, 1, 0x05); // reserved command: ignored
  EXPECT_EQ(Io.read(0x64, 1) & 0x01, 0u);
  (void)Io.read(0x60, 4);
  EXPECT_FALSE(Io.stopRequested());
}

TEST(A20Gate, PortNinetyTwoAndKeyboardOutputPortAreOred) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  EXPECT_TRUE(M->mem().a20Enabled());
  EXPECT_EQ(Io.read(0x92, 1), 0x02u);
  Io.write(0x92, 1, 0x00);
  EXPECT_FALSE(M->mem().a20Enabled());
  EXPECT_EQ(M->mem().a20Mask(), ~(uint64_t(1) << 20));
  Io.write(0x64, 1, 0xd1);
  Io.write(0x60, 1, 0x03); // output port: A20 on
  EXPECT_TRUE(M->mem().a20Enabled());
  Io.write(0x64, 1, 0xd0);
  EXPECT_EQ(Io.read(0x60, 1), 0x03u);
  Io.write(0x64, 1, 0xd1);
  Io.write(0x60, 1, 0x01);
  EXPECT_FALSE(M->mem().a20Enabled());
  Io.write(0x92, 1, 0x02);
  EXPECT_TRUE(M->mem().a20Enabled());
  EXPECT_FALSE(Io.stopRequested());
}

TEST(A20Gate, RealModeStoreWrapsWhileTheGateIsOff) {
  auto M = realModeGuest(concat({kA20Off, kDsFfff, store(0x11), kA20On, store(0x22), kExit}));
  RunResult R = M->run();
  ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  EXPECT_EQ(rd8(*M, 0x500), 0x11u);
  EXPECT_EQ(rd8(*M, 0x100500), 0x22u);
}

TEST(A20Gate, TranslationFilledBeforeTheChangeDoesNotSurviveIt) {
  // The first store fills the write TLB for linear 0x100000 with A20 on; after the gate
  // goes off the same linear address must reach 0x500, and back on 0x100500 again.
  auto M = realModeGuest(concat({kDsFfff, store(0x33), kA20Off, store(0x44), kA20On,
                                 store(0x55), kExit}));
  RunResult R = M->run();
  ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  EXPECT_EQ(rd8(*M, 0x500), 0x44u);
  EXPECT_EQ(rd8(*M, 0x100500), 0x55u);
}

TEST(A20Gate, InstructionFetchWrapsWhileTheGateIsOff) {
  // Code at 0x10000 turns A20 off and far-jumps to FFFF:0110 = linear 0x100100, which
  // with A20 off is 0x000100: there, isa-debug-exit 5. At 0x100100 itself, exit 9.
  auto M = realModeGuest(concat({kA20Off, {0xea, 0x10, 0x01, 0xff, 0xff}}));
  const uint8_t Five[] = {0xb0, 0x05, 0xe6, 0xf4}, Nine[] = {0xb0, 0x09, 0xe6, 0xf4};
  ASSERT_TRUE(M->mem().copyIn(Hpa(0x100), Five, 4));
  ASSERT_TRUE(M->mem().copyIn(Hpa(0x100100), Nine, 4));
  RunResult R = M->run();
  ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  EXPECT_EQ(R.ExitValue, 5u);
}

TEST(ResetPaths, EveryResetEndsTheRunWithStatusZero) {
  struct Case {
    std::vector<uint8_t> Code;
    uint32_t Port;
  };
  const Case Cases[] = {
      {{0xb0, 0x01, 0xe6, 0x92, 0xf4}, 0x92},                   // fast reset
      {{0xba, 0xf9, 0x0c, 0xb0, 0x06, 0xee, 0xf4}, 0xcf9},      // PIIX3 hard reset
      {{0xba, 0xf9, 0x0c, 0xb0, 0x04, 0xee, 0xf4}, 0xcf9},      // PIIX3 soft reset
      {{0xb0, 0xfe, 0xe6, 0x64, 0xf4}, 0x64},                   // i8042 pulse reset line
      {{0xb0, 0xd1, 0xe6, 0x64, 0xb0, 0x00, 0xe6, 0x60, 0xf4}, 0x64}, // output port bit 0
  };
  for (const Case &C : Cases) {
    auto M = realModeGuest(C.Code);
    RunResult R = M->run();
    EXPECT_EQ(R.Reason, RunReason::Reset) << R.describe();
    EXPECT_EQ(R.ExitStatus, 0);
    EXPECT_EQ(R.ExitValue, C.Port);
    char Want[40];
    std::snprintf(Want, sizeof Want, "guest reset (port %#x)", C.Port);
    EXPECT_EQ(R.describe(), Want);
  }
  // Bit 1 alone (no reset-CPU bit) does nothing but read back.
  auto M = bareMachine();
  M->io().write(0xcf9, 1, 0x02);
  EXPECT_FALSE(M->io().stopRequested());
  EXPECT_EQ(M->io().read(0xcf9, 1), 0x02u);
  M->io().write(0x64, 1, 0xff); // pulse no line
  EXPECT_FALSE(M->io().stopRequested());
}

TEST(PciConfiguration, HostBridgeAndIsaBridgeRegisters) {
  auto M = bareMachine();
  EXPECT_EQ(pciRead(*M, 0, 0, 0x00), 0x12378086u);
  EXPECT_EQ(pciRead(*M, 0, 0, 0x04), 0x02000006u);
  EXPECT_EQ(pciRead(*M, 0, 0, 0x08), 0x06000002u);
  EXPECT_EQ(pciRead(*M, 0, 0, 0x0e, 1), 0x00u);
  EXPECT_EQ(pciRead(*M, 0, 0, 0x2c), 0x11001af4u);
  EXPECT_EQ(pciRead(*M, 1, 0, 0x00), 0x70008086u);
  EXPECT_EQ(pciRead(*M, 1, 0, 0x00, 2), 0x8086u);
  EXPECT_EQ(pciRead(*M, 1, 0, 0x02, 2), 0x7000u);
  EXPECT_EQ(pciRead(*M, 1, 0, 0x08), 0x06010000u);
  EXPECT_EQ(pciRead(*M, 1, 0, 0x0b, 1), 0x06u);
  EXPECT_EQ(pciRead(*M, 1, 0, 0x0e, 1), 0x80u);
  EXPECT_EQ(pciRead(*M, 1, 0, 0x60), 0x0b0b0a0au);
  EXPECT_EQ(pciRead(*M, 1, 0, 0x62, 1), 0x0bu);
  EXPECT_EQ(pciRead(*M, 1, 0, 0x61, 2), 0x0b0au);
  // PIRQ routes: bits 7 and 3:0 writable.
  pciWrite(*M, 1, 0x61, 0x85, 1);
  EXPECT_EQ(pciRead(*M, 1, 0, 0x60), 0x0b0b850au);
  pciWrite(*M, 1, 0x61, 0x7f, 1);
  EXPECT_EQ(pciRead(*M, 1, 0, 0x61, 1), 0x0fu);
  // Read-only identity, command bits 0-2 only.
  pciWrite(*M, 0, 0x00, 0xffffffff, 4);
  EXPECT_EQ(pciRead(*M, 0, 0, 0x00), 0x12378086u);
  pciWrite(*M, 0, 0x04, 0xffff, 2);
  EXPECT_EQ(pciRead(*M, 0, 0, 0x04, 2), 0x0007u);
}

TEST(PciConfiguration, AbsentFunctionsAndDisabledCyclesReadAllOnes) {
  auto M = bareMachine();
  EXPECT_EQ(pciRead(*M, 1, 1, 0x00), 0xffffffffu); // PIIX3 IDE: not modelled
  EXPECT_EQ(pciRead(*M, 0, 1, 0x00), 0xffffffffu);
  EXPECT_EQ(pciRead(*M, 2, 0, 0x00), 0xffffffffu);
  EXPECT_EQ(pciRead(*M, 31, 7, 0xfc, 2), 0xffffu);
  M->io().write(0xcf8, 4, 0x00000000); // enable bit clear
  EXPECT_EQ(M->io().read(0xcfc, 4), 0xffffffffu);
  M->io().write(0xcf8, 4, 0x80010000); // bus 1
  EXPECT_EQ(M->io().read(0xcfc, 4), 0xffffffffu);
  M->io().write(0xcfc, 4, 0); // dropped
  M->io().write(0xcf8, 2, 0x1234); // not a configuration address cycle
  EXPECT_EQ(M->io().read(0xcf8, 4), 0x80010000u);
  EXPECT_EQ(M->io().read(0xcfa, 2), 0xffffu);
}

TEST(PostCodePort, WritesAreRecordedAndReadsAreAllOnes) {
  auto M = bareMachine();
  M->io().write(0x80, 1, 0x42);
  EXPECT_EQ(M->postCodePort().lastValue(), 0x42u);
  EXPECT_EQ(M->io().read(0x80, 1), 0xffu);
}
