// PC devices of the machine, driven through the port-I/O bus and physical memory as the
// guest would.
#include "harness/machine.h"

#include <gtest/gtest.h>

using namespace vmxsim;

namespace {
std::unique_ptr<Machine> bareMachine(unsigned Cpus = 1, uint64_t Ram = 256ull << 20) {
  MachineConfig Cfg;
  Cfg.NumCpus = Cpus;
  Cfg.RamBytes = Ram;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_FALSE(Err) << Err.str();
  return M;
}
uint64_t fwCfgItem(Machine &M, uint16_t Key, unsigned Bytes) {
  M.io().write(0x510, 2, Key);
  uint64_t V = 0;
  for (unsigned I = 0; I < Bytes; ++I)
    V |= uint64_t(M.io().read(0x511, 1)) << (8 * I);
  return V;
}
} // namespace

TEST(SerialPort, ScratchRegisterReadsBackWrittenValue) {
  auto M = bareMachine();
  M->io().write(0x3ff, 1, 0x5a);
  EXPECT_EQ(M->io().read(0x3ff, 1), 0x5au);
}

TEST(SerialPort, DlabSelectsDivisorLatchAndHidesIer) {
  auto M = bareMachine();
  M->io().write(0x3f9, 1, 0x0f);       // IER
  M->io().write(0x3fb, 1, 0x80);       // LCR.DLAB
  EXPECT_EQ(M->io().read(0x3f8, 1), 12u); // DLL after reset (9600 baud)
  M->io().write(0x3f8, 1, 0x01);
  M->io().write(0x3f9, 1, 0x00);
  EXPECT_EQ(M->uart().divisor(), 1u);
  EXPECT_EQ(M->io().read(0x3f9, 1), 0u); // DLM, not IER
  M->io().write(0x3fb, 1, 0x03);
  EXPECT_EQ(M->io().read(0x3f9, 1), 0x0fu);
  EXPECT_EQ(M->io().read(0x3fb, 1), 0x03u);
  EXPECT_EQ(M->serialOutput(), "");
}

TEST(SerialPort, LsrReportsTransmitterEmptyAndNoData) {
  auto M = bareMachine();
  EXPECT_EQ(M->io().read(0x3fd, 1), 0x60u);
  M->io().write(0x3f8, 1, 'x');
  EXPECT_EQ(M->io().read(0x3fd, 1), 0x60u);
  EXPECT_EQ(M->io().read(0x3f8, 1), 0u); // RBR with no input
}

TEST(SerialPort, ThrBytesReachSerialOutputInOrder) {
  auto M = bareMachine();
  for (char C : std::string("hi\n"))
    M->io().write(0x3f8, 1, uint8_t(C));
  EXPECT_EQ(M->serialOutput(), "hi\n");
  EXPECT_EQ(M->debugconOutput(), "");
}

TEST(SerialPort, LoopbackReturnsTransmittedByteAndModemBits) {
  auto M = bareMachine();
  M->io().write(0x3fc, 1, 0x1f); // loop | OUT2 | OUT1 | RTS | DTR
  EXPECT_EQ(M->io().read(0x3fe, 1), 0xf0u);
  M->io().write(0x3f8, 1, 0xa5);
  EXPECT_EQ(M->io().read(0x3fd, 1), 0x61u);
  EXPECT_EQ(M->io().read(0x3f8, 1), 0xa5u);
  EXPECT_EQ(M->io().read(0x3fd, 1), 0x60u);
  EXPECT_EQ(M->serialOutput(), "");
}

TEST(SerialPort, IirReportsFifoAndThreInterrupt) {
  auto M = bareMachine();
  EXPECT_EQ(M->io().read(0x3fa, 1), 0x01u);
  M->io().write(0x3fa, 1, 0x07);
  EXPECT_EQ(M->io().read(0x3fa, 1), 0xc1u);
  M->io().write(0x3f9, 1, 0x02); // enable THRE interrupt: pending at once
  EXPECT_EQ(M->io().read(0x3fa, 1), 0xc2u);
  EXPECT_EQ(M->io().read(0x3fa, 1), 0xc1u); // reading IIR cleared it
  EXPECT_EQ(M->io().read(0x3fe, 1), 0xb0u); // MSR: CTS, DSR, DCD
}

TEST(DebugPorts, PortE9ReadsE9AndWritesDebugconOutput) {
  auto M = bareMachine();
  EXPECT_EQ(M->io().read(0xe9, 1), 0xe9u);
  M->io().write(0xe9, 1, 'o');
  M->io().write(0xe9, 1, 'k');
  EXPECT_EQ(M->debugconOutput(), "ok");
  EXPECT_EQ(M->serialOutput(), "");
}

TEST(DebugPorts, IsaDebugExitRequestsOddStatus) {
  auto M = bareMachine();
  EXPECT_FALSE(M->io().stopRequested());
  M->io().write(0xf4, 4, 0x21);
  EXPECT_TRUE(M->io().stopRequested());
  EXPECT_EQ(M->io().exitStatus(), 0x43);
  EXPECT_EQ(M->io().read(0xf4, 4), 0u);
  EXPECT_EQ(DebugExit::exitStatusFor(0x80), 1); // only 8 bits survive exit(2)
}

TEST(DebugPorts, ShutdownStringOnPort8900RequestsPowerOff) {
  auto M = bareMachine();
  for (char C : std::string("ShutShutdown"))
    M->io().write(0x8900, 1, uint8_t(C));
  EXPECT_TRUE(M->io().stopRequested());
  EXPECT_EQ(M->io().exitStatus(), 0);
}

TEST(DebugPorts, SystemControlPortAReportsA20Enabled) {
  auto M = bareMachine();
  EXPECT_EQ(M->io().read(0x92, 1), 0x02u);
  EXPECT_FALSE(M->io().stopRequested());
  M->io().write(0x92, 1, 0x03);
  EXPECT_TRUE(M->io().stopRequested());
}

TEST(FirmwareConfig, SignatureIdAndUnknownKey) {
  auto M = bareMachine();
  EXPECT_EQ(fwCfgItem(*M, 0x0000, 4), 0x554d4551u); // "QEMU"
  EXPECT_EQ(fwCfgItem(*M, 0x0001, 4), 1u);
  EXPECT_EQ(fwCfgItem(*M, 0x1234, 4), 0u);
  EXPECT_EQ(fwCfgItem(*M, 0x0019, 4), 0u); // FILE_DIR: zero files
}

TEST(FirmwareConfig, CpuCountAndRamSizeAreLittleEndian) {
  auto M = bareMachine(4, 3ull << 30);
  EXPECT_EQ(fwCfgItem(*M, 0x0005, 2), 4u);
  EXPECT_EQ(fwCfgItem(*M, 0x000f, 2), 4u);
  EXPECT_EQ(fwCfgItem(*M, 0x0003, 8), 3ull << 30);
  EXPECT_EQ(M->numCpus(), 4u);
  EXPECT_EQ(M->cpu(1).Activity, ActivityState::WaitForSipi);
}

TEST(FirmwareConfig, ReadsPastItemEndReturnZeroAndSelectorResetsOffset) {
  auto M = bareMachine();
  EXPECT_EQ(fwCfgItem(*M, 0x0000, 8), 0x554d4551ull);
  EXPECT_EQ(fwCfgItem(*M, 0x0000, 1), 'Q');
}

TEST(PciConfiguration, AddressRegisterReadsBackAndEmptySlotReadsAllOnes) {
  auto M = bareMachine();
  M->io().write(0xcf8, 4, 0x80002800);
  EXPECT_EQ(M->io().read(0xcf8, 4), 0x80002800u);
  EXPECT_EQ(M->io().read(0xcfc, 2), 0xffffu); // vendor ID of 00:05.0: no device
  EXPECT_EQ(M->io().read(0xcfc, 4), 0xffffffffu);
  M->io().write(0xcf8, 4, 0x12345678);
  EXPECT_EQ(M->io().read(0xcf8, 4), 0x12345678u);
  EXPECT_EQ(M->io().read(0xcfe, 1), 0xffu);
}

TEST(InterruptController, InitialisationSequenceAndMaskReadBack) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  // ICW1 (edge, cascade, ICW4), ICW2 (vector 0x20/0x28), ICW3, ICW4 (8086 mode).
  Io.write(0x20, 1, 0x11);
  Io.write(0xa0, 1, 0x11);
  Io.write(0x21, 1, 0x20);
  Io.write(0xa1, 1, 0x28);
  Io.write(0x21, 1, 0x04);
  Io.write(0xa1, 1, 0x02);
  Io.write(0x21, 1, 0x01);
  Io.write(0xa1, 1, 0x01);
  EXPECT_EQ(Io.read(0x21, 1), 0u); // ICW1 cleared the mask
  Io.write(0x21, 1, 0xfb);
  Io.write(0xa1, 1, 0xff);
  EXPECT_EQ(Io.read(0x21, 1), 0xfbu);
  EXPECT_EQ(Io.read(0xa1, 1), 0xffu);
  EXPECT_EQ(M->pic().Master.VectorBase, 0x20u);
  EXPECT_EQ(M->pic().Slave.VectorBase, 0x28u);
}

TEST(InterruptController, RequestAcknowledgeAndEoi) {
  auto M = bareMachine();
  IoBus &Io = M->io();
  for (auto [Port, V] : std::initializer_list<std::pair<uint16_t, uint8_t>>{
           {0x20, 0x11}, {0x21, 0x20}, {0x21, 0x04}, {0x21, 0x01}, {0xa0, 0x11},
           {0xa1, 0x28}, {0xa1, 0x02}, {0xa1, 0x01}})
    Io.write(Port, 1, V);
  PicPair &P = M->pic();
  EXPECT_FALSE(P.intrPending());
  P.setIrq(1, true);
  EXPECT_EQ(Io.read(0x20, 1), 0x02u); // IRR after ICW1
  EXPECT_TRUE(P.intrPending());
  EXPECT_EQ(P.acknowledge(), 0x21u);
  Io.write(0x20, 1, 0x0b); // OCW3: read ISR
  EXPECT_EQ(Io.read(0x20, 1), 0x02u);
  P.setIrq(9, true); // slave IR1 through the cascade (master IR2)
  EXPECT_FALSE(P.intrPending()); // IR2 has lower priority than in-service IR1
  Io.write(0x20, 1, 0x20);       // non-specific EOI ends IR1
  EXPECT_TRUE(P.intrPending());
  EXPECT_EQ(P.acknowledge(), 0x29u);
  EXPECT_EQ(Io.read(0x20, 1), 0x04u); // master ISR: the cascade line
  Io.write(0xa0, 1, 0x0b);
  EXPECT_EQ(Io.read(0xa0, 1), 0x02u); // slave ISR: IR1
  Io.write(0xa0, 1, 0x20); // EOI to slave, then master
  Io.write(0x20, 1, 0x20);
  EXPECT_EQ(Io.read(0x20, 1), 0x00u); // ISR empty
  Io.write(0x21, 1, 0x02);            // mask IR1
  P.setIrq(1, false);
  P.setIrq(1, true);
  EXPECT_FALSE(P.intrPending());
  EXPECT_EQ(P.acknowledge(), 0x27u); // spurious IRQ7
}

TEST(LocalApicPage, ResetValuesAndStoredWrites) {
  auto M = bareMachine();
  PhysMem &Mem = M->mem();
  EXPECT_EQ(Mem.read(Hpa(0xfee00020), 4), 0u);           // ID of CPU 0
  EXPECT_EQ(Mem.read(Hpa(0xfee00030), 4), 0x50014u);     // version
  EXPECT_EQ(Mem.read(Hpa(0xfee000f0), 4), 0xffu);        // SVR
  EXPECT_EQ(Mem.read(Hpa(0xfee00320), 4), 0x10000u);     // LVT timer masked
  EXPECT_EQ(Mem.read(Hpa(0xfee00370), 4), 0x10000u);     // LVT error masked
  EXPECT_EQ(Mem.read(Hpa(0xfee00400), 4), 0u);           // unknown
  Mem.write(Hpa(0xfee00080), 4, 0x20);
  EXPECT_EQ(Mem.read(Hpa(0xfee00080), 4), 0x20u);        // TPR
  Mem.write(Hpa(0xfee00030), 4, 0);
  EXPECT_EQ(Mem.read(Hpa(0xfee00030), 4), 0x50014u);     // read-only
}

TEST(PortIo, UnassignedPortsReadAllOnesAndIgnoreWrites) {
  auto M = bareMachine();
  M->io().write(0x300, 4, 0);
  EXPECT_EQ(M->io().read(0x300, 1), 0xffu);
  EXPECT_EQ(M->io().read(0x300, 2), 0xffffu);
  EXPECT_EQ(M->io().read(0x300, 4), 0xffffffffu);
  EXPECT_EQ(M->io().read(0x80, 1), 0xffu);
}
