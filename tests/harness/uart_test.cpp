// The 16550A UARTs (harness/devices/uart16550.h): register reset values, IIR priorities
// and clearing rules, the THRE interrupt's cycle, FIFO trigger levels, the character
// timeout at its exact cycle, loopback, the scripted serial input's pace and flow control,
// COM2, and interrupts through the 8259 and the I/O APIC in a running guest.
#include "harness/machine.h"
#include "tests/support/flat_guest.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <utility>
#include <vector>

using namespace vmxsim;

namespace {

/// One UART on its own, with a test-driven clock and a record of its IRQ line's edges.
struct Rig {
  OutputSink Out;
  uint64_t T = 0;
  std::vector<std::pair<uint64_t, bool>> Edges;
  Uart16550 U{Uart16550::kCom1, Out};

  explicit Rig(std::string Input = {}, bool WithInput = false) {
    EXPECT_FALSE(Out.open(OutputSpec::capture()));
    U.Now = [this] { return T; };
    U.Irq = [this](bool Level) { Edges.push_back({T, Level}); };
    if (WithInput || !Input.empty())
      U.setInput(SerialInput::fromBytes(std::vector<uint8_t>(Input.begin(), Input.end())));
  }
  uint8_t rd(uint16_t Off) { return uint8_t(U.ioRead(uint16_t(Uart16550::kCom1 + Off), 1)); }
  void wr(uint16_t Off, uint8_t V) { U.ioWrite(uint16_t(Uart16550::kCom1 + Off), 1, V); }
  void at(uint64_t Cycle) {
    T = Cycle;
    U.advanceTo(Cycle);
  }
  /// 8N1 at 115200 baud (divisor 1): 20 half bits x 16 clocks / 1.8432 MHz.
  void fast8n1() {
    wr(Uart16550::Lcr, 0x83);
    wr(Uart16550::RbrThr, 1);
    wr(Uart16550::Ier, 0);
    wr(Uart16550::Lcr, 0x03);
  }
};

constexpr uint64_t kChar115200 = 86806; // ceil(20 * 1e9 / 230400)

using Edges = std::vector<std::pair<uint64_t, bool>>;

} // namespace

TEST(Uart, RegistersHoldTheirResetValues) {
  Rig R;
  EXPECT_EQ(R.rd(Uart16550::Ier), 0x00);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0x01);
  EXPECT_EQ(R.rd(Uart16550::Lcr), 0x00);
  EXPECT_EQ(R.rd(Uart16550::Mcr), 0x00);
  EXPECT_EQ(R.rd(Uart16550::Lsr), 0x60);
  EXPECT_EQ(R.rd(Uart16550::Msr), 0xb0);
  EXPECT_EQ(R.rd(Uart16550::Scr), 0x00);
  EXPECT_EQ(R.rd(Uart16550::RbrThr), 0x00);
  R.wr(Uart16550::Lcr, 0x80);
  EXPECT_EQ(R.rd(0), 12);
  EXPECT_EQ(R.rd(1), 0);
  EXPECT_FALSE(R.U.irqLevel());
  EXPECT_EQ(R.U.nextTimerEvent(), kNoTimerEvent);
  // LCR 0x80: 5 data bits, 1 stop bit, no parity = 14 half bits at divisor 12.
  EXPECT_EQ(R.U.charCycles(), 729167u); // ceil(14 * 12 * 1e9 / 230400)
}

TEST(Uart, CharacterTimeFollowsTheFormatAndDivisor) {
  Rig R;
  R.fast8n1();
  EXPECT_EQ(R.U.charCycles(), kChar115200);
  R.wr(Uart16550::Lcr, 0x1f); // 8 data bits, even parity, 2 stop bits: 24 half bits
  EXPECT_EQ(R.U.charCycles(), 104167u);
  R.wr(Uart16550::Lcr, 0x04); // 5 data bits, 1.5 stop bits: 15 half bits
  EXPECT_EQ(R.U.charCycles(), 65105u);
  R.wr(Uart16550::Lcr, 0x83); // divisor 0 counts as 65536
  R.wr(0, 0);
  R.wr(Uart16550::Lcr, 0x03);
  EXPECT_EQ(R.U.charCycles(), 5688888889u);
}

TEST(Uart, DlabSelectsTheDivisorLatchAtOffsetsZeroAndOne) {
  Rig R;
  R.wr(Uart16550::Ier, 0x0f);
  R.wr(Uart16550::Lcr, 0x80);
  R.wr(0, 0x34);
  R.wr(1, 0x12);
  EXPECT_EQ(R.U.divisor(), 0x1234u);
  EXPECT_EQ(R.rd(0), 0x34);
  EXPECT_EQ(R.rd(1), 0x12);
  EXPECT_EQ(R.Out.captured(), ""); // DLL is not THR
  R.wr(Uart16550::Lcr, 0x03);
  EXPECT_EQ(R.rd(Uart16550::Ier), 0x0f);
  R.wr(Uart16550::Ier, 0xff); // bits 4-7 read 0
  EXPECT_EQ(R.rd(Uart16550::Ier), 0x0f);
}

// THRE: raised at the cycle THR empties (every THR write: transmission is instantaneous)
// and when ETBEI goes 0 -> 1; cleared by reading IIR while it is the source. The IRQ line
// is INTR gated by OUT2.
TEST(Uart, ThreInterruptRisesAtTheCycleOfTheWriteThatCausesIt) {
  Rig R;
  R.T = 100;
  R.wr(Uart16550::Mcr, Uart16550::McrOut2);
  R.T = 200;
  R.wr(Uart16550::Ier, Uart16550::IerEtbei);
  EXPECT_EQ(R.rd(Uart16550::Lsr), 0x60);
  R.T = 300;
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0x02);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0x01);
  R.T = 400;
  R.wr(Uart16550::Ier, Uart16550::IerEtbei); // 1 -> 1: nothing new
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0x01);
  R.T = 500;
  R.wr(Uart16550::RbrThr, 'a');
  R.T = 600;
  R.wr(Uart16550::RbrThr, 'b'); // the line is already high
  R.T = 700;
  R.wr(Uart16550::Ier, 0);
  R.T = 800;
  R.wr(Uart16550::Ier, Uart16550::IerEtbei);
  R.T = 900;
  R.wr(Uart16550::Mcr, 0); // OUT2 low closes the gate; the condition stays
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0x02);
  R.wr(Uart16550::Ier, 0);
  R.wr(Uart16550::Ier, Uart16550::IerEtbei);
  R.T = 1000;
  R.wr(Uart16550::Mcr, Uart16550::McrOut2);
  EXPECT_EQ(R.Edges, (Edges{{200, true}, {300, false}, {500, true}, {700, false},
                            {800, true}, {900, false}, {1000, true}}));
  EXPECT_EQ(R.Out.captured(), "ab");
}

// Line status > received data / timeout > THRE > modem status, each with its own clearing
// rule (data sheet, Table IV), driven through loopback with the FIFOs on.
TEST(Uart, IirReportsTheHighestPriorityConditionAndEachClearsItsOwnWay) {
  Rig R;
  R.fast8n1();
  R.wr(Uart16550::IirFcr, 0x07); // FIFOs on and cleared, trigger 1
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc1);
  R.wr(Uart16550::Ier, 0x0f);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc2);
  // Loopback: CTS and DSR drop (RTS, DTR are 0), DCD follows OUT2 and stays active.
  R.wr(Uart16550::Mcr, Uart16550::McrLoop | Uart16550::McrOut2);
  R.T = 1000;
  for (unsigned I = 0; I < 17; ++I) // the 17th overruns the 16-byte FIFO
    R.wr(Uart16550::RbrThr, uint8_t('A' + I));
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc6);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc6); // reading IIR does not clear line status
  EXPECT_EQ(R.rd(Uart16550::Lsr), 0x63);    // DR, OE, THRE, TEMT
  EXPECT_EQ(R.rd(Uart16550::Lsr), 0x61);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc4);
  R.at(1000 + 4 * kChar115200 - 1);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc4);
  R.at(1000 + 4 * kChar115200);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xcc); // character timeout
  std::string Got;
  for (unsigned I = 0; I < 16; ++I) {
    Got += char(R.rd(Uart16550::RbrThr));
    EXPECT_EQ(R.rd(Uart16550::IirFcr), I < 15 ? 0xc4 : 0xc2) << I;
  }
  EXPECT_EQ(Got, "ABCDEFGHIJKLMNOP"); // 'Q' was lost
  // The last IIR read above reported THRE and so cleared it.
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc0);
  EXPECT_EQ(R.rd(Uart16550::Msr), 0x83); // DCD; DCTS, DDSR
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc1);
  EXPECT_EQ(R.Edges, Edges{}); // loopback forces OUT2 inactive: no IRQ at all
  EXPECT_EQ(R.Out.captured(), "");
}

TEST(Uart, ReceivedDataInterruptAtEachFifoTriggerLevel) {
  for (unsigned Bits = 0; Bits < 4; ++Bits) {
    const unsigned Level = std::vector<unsigned>{1, 4, 8, 14}[Bits];
    Rig R;
    R.wr(Uart16550::IirFcr, uint8_t(0x01 | (Bits << 6)));
    R.wr(Uart16550::Ier, Uart16550::IerErbfi);
    R.wr(Uart16550::Mcr, Uart16550::McrLoop);
    for (unsigned N = 1; N <= 16; ++N) {
      R.wr(Uart16550::RbrThr, uint8_t(N));
      EXPECT_EQ(R.rd(Uart16550::IirFcr), N >= Level ? 0xc4 : 0xc1) << Level << " " << N;
    }
    // Reading below the level clears it again.
    for (unsigned N = 16; N > 0; --N) {
      EXPECT_EQ(R.rd(Uart16550::RbrThr), 17 - N);
      EXPECT_EQ(R.rd(Uart16550::IirFcr), N - 1 >= Level ? 0xc4 : 0xc1) << Level << " " << N;
    }
  }
}

TEST(Uart, FcrBitZeroGatesTheOtherBitsAndClearsTheFifos) {
  Rig R;
  R.wr(Uart16550::Mcr, Uart16550::McrLoop);
  R.wr(Uart16550::IirFcr, 0xc1); // trigger 14
  R.wr(Uart16550::RbrThr, 1);
  R.wr(Uart16550::RbrThr, 2);
  EXPECT_EQ(R.U.rxCount(), 2u);
  R.wr(Uart16550::IirFcr, 0x03); // clear RX, trigger 1
  EXPECT_EQ(R.U.rxCount(), 0u);
  R.wr(Uart16550::Ier, Uart16550::IerErbfi);
  R.wr(Uart16550::RbrThr, 3);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc4);
  R.wr(Uart16550::IirFcr, 0x02); // bit 0 = 0: FIFOs off (cleared), bit 1 not programmed
  EXPECT_EQ(R.U.rxCount(), 0u);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0x01);
  // Without FIFOs RBR holds one byte; a second one replaces it and sets OE.
  R.wr(Uart16550::RbrThr, 4);
  R.wr(Uart16550::RbrThr, 5);
  EXPECT_EQ(R.rd(Uart16550::Lsr), 0x63);
  EXPECT_EQ(R.rd(Uart16550::RbrThr), 5);
  EXPECT_EQ(R.rd(Uart16550::Lsr), 0x60);
  EXPECT_EQ(R.rd(Uart16550::RbrThr), 5); // the last byte read stays in RBR
}

TEST(Uart, LoopbackFeedsMcrToMsrWithDeltaBits) {
  Rig R;
  R.wr(Uart16550::Mcr, 0x1f); // loop | OUT2 | OUT1 | RTS | DTR
  EXPECT_EQ(R.rd(Uart16550::Msr), 0xf0); // CTS, DSR, RI, DCD; only RI changed (rising)
  R.wr(Uart16550::Mcr, 0x10);
  EXPECT_EQ(R.rd(Uart16550::Msr), 0x0f); // all inputs dropped: DCTS, DDSR, TERI, DDCD
  EXPECT_EQ(R.rd(Uart16550::Msr), 0x00);
  R.wr(Uart16550::Mcr, 0x12); // RTS -> CTS
  EXPECT_EQ(R.rd(Uart16550::Msr), 0x11);
  R.wr(Uart16550::Ier, Uart16550::IerEdssi);
  R.wr(Uart16550::Mcr, 0x00); // out of loopback: the absent modem's CTS, DSR, DCD
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0x00);
  EXPECT_EQ(R.rd(Uart16550::Msr), 0xba); // DDSR, DDCD (CTS stayed active)
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0x01);
  R.wr(Uart16550::Mcr, Uart16550::McrLoop);
  R.wr(Uart16550::RbrThr, 0xa5);
  EXPECT_EQ(R.rd(Uart16550::Lsr), 0x61);
  EXPECT_EQ(R.rd(Uart16550::RbrThr), 0xa5);
  EXPECT_EQ(R.rd(Uart16550::Lsr), 0x60);
  EXPECT_EQ(R.Out.captured(), "");
}

// The scripted terminal: one byte per character time from the cycle RTS rises; the
// received-data interrupt at the trigger level, at the exact arrival cycle.
TEST(Uart, SerialInputArrivesOneCharacterTimeApartFromRts) {
  Rig R("0123456789");
  R.fast8n1();
  R.wr(Uart16550::IirFcr, 0x41); // trigger 4
  R.wr(Uart16550::Ier, Uart16550::IerErbfi);
  R.T = 5000;
  R.wr(Uart16550::Mcr, Uart16550::McrOut2); // no RTS yet: nothing is sent
  EXPECT_EQ(R.U.nextTimerEvent(), kNoTimerEvent);
  R.T = 10000;
  R.wr(Uart16550::Mcr, Uart16550::McrOut2 | Uart16550::McrRts);
  for (unsigned K = 1; K <= 4; ++K) {
    EXPECT_EQ(R.U.nextTimerEvent(), 10000 + K * kChar115200);
    R.at(10000 + K * kChar115200 - 1);
    EXPECT_EQ(R.U.rxCount(), K - 1);
    R.at(10000 + K * kChar115200);
    EXPECT_EQ(R.U.rxCount(), K);
  }
  EXPECT_EQ(R.Edges, (Edges{{10000 + 4 * kChar115200, true}}));
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc4);
  // Dropping RTS stops the terminal; raising it again starts the next byte afresh.
  R.T = 10000 + 4 * kChar115200 + 100;
  R.wr(Uart16550::Mcr, Uart16550::McrOut2);
  EXPECT_EQ(R.U.nextTimerEvent(), R.T + 4 * kChar115200 - 100); // only the timeout is due
  R.wr(Uart16550::Mcr, Uart16550::McrOut2 | Uart16550::McrRts);
  EXPECT_EQ(R.U.nextTimerEvent(), R.T + kChar115200);
  std::string Got;
  while (R.rd(Uart16550::Lsr) & Uart16550::LsrDr)
    Got += char(R.rd(Uart16550::RbrThr));
  EXPECT_EQ(Got, "0123");
}

TEST(Uart, CharacterTimeoutRisesFourCharacterTimesAfterTheLastByte) {
  Rig R("abc");
  R.fast8n1();
  R.wr(Uart16550::IirFcr, 0x81); // trigger 8: three bytes never reach it
  R.wr(Uart16550::Ier, Uart16550::IerErbfi);
  R.T = 1000;
  R.wr(Uart16550::Mcr, Uart16550::McrOut2 | Uart16550::McrRts);
  R.at(1000 + 3 * kChar115200);
  EXPECT_EQ(R.U.rxCount(), 3u);
  const uint64_t Timeout = 1000 + 7 * kChar115200;
  EXPECT_EQ(R.U.nextTimerEvent(), Timeout);
  R.at(Timeout - 1);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc1);
  R.at(Timeout);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xcc);
  EXPECT_EQ(R.U.nextTimerEvent(), kNoTimerEvent); // the input has ended
  // Reading one byte clears the timeout and restarts its timer.
  R.T = Timeout + 50;
  EXPECT_EQ(R.rd(Uart16550::RbrThr), 'a');
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xc1);
  EXPECT_EQ(R.U.nextTimerEvent(), Timeout + 50 + 4 * kChar115200);
  R.at(Timeout + 50 + 4 * kChar115200);
  EXPECT_EQ(R.rd(Uart16550::IirFcr), 0xcc);
  EXPECT_EQ(R.Edges, (Edges{{Timeout, true}, {Timeout + 50, false},
                            {Timeout + 50 + 4 * kChar115200, true}}));
}

TEST(Uart, SerialInputWaitsForRoomInsteadOfOverrunning) {
  Rig R("ABCDEFGHIJKLMNOPQRST"); // 20 bytes
  R.fast8n1();
  R.wr(Uart16550::IirFcr, 0x01);
  R.wr(Uart16550::Mcr, Uart16550::McrRts);
  R.at(100 * kChar115200);
  EXPECT_EQ(R.U.rxCount(), 16u);
  EXPECT_EQ(R.rd(Uart16550::Lsr), 0x61); // no overrun
  EXPECT_EQ(R.U.nextTimerEvent(), kNoTimerEvent); // full; the timeout has occurred
  R.T = 100 * kChar115200 + 7;
  EXPECT_EQ(R.rd(Uart16550::RbrThr), 'A');
  EXPECT_EQ(R.U.nextTimerEvent(), R.T + kChar115200);
  // A new format restarts the character on the wire.
  R.T += 1000;
  R.wr(Uart16550::Lcr, 0x1f);
  EXPECT_EQ(R.U.nextTimerEvent(), R.T + 104167);
  // The same character time (DLAB toggled, the divisor rewritten unchanged): no restart.
  const uint64_t Due = R.T + 104167;
  R.T += 10;
  R.wr(Uart16550::Lcr, 0x9f);
  R.wr(Uart16550::RbrThr, 1);
  R.wr(Uart16550::Lcr, 0x1f);
  EXPECT_EQ(R.U.nextTimerEvent(), Due);
  // Without FIFOs the terminal sends one byte and waits for RBR to be read.
  R.wr(Uart16550::IirFcr, 0x00);
  R.at(R.T + 10 * 104167);
  EXPECT_EQ(R.U.rxCount(), 1u);
  EXPECT_EQ(R.rd(Uart16550::RbrThr), 'Q'); // B..P went with the FIFOs
  R.at(R.T + 104167);
  EXPECT_EQ(R.rd(Uart16550::RbrThr), 'R');
  R.at(R.T + 104167);
  EXPECT_EQ(R.rd(Uart16550::RbrThr), 'S');
  R.at(R.T + 104167);
  EXPECT_EQ(R.rd(Uart16550::RbrThr), 'T');
  R.at(R.T + 10 * 104167);
  EXPECT_EQ(R.rd(Uart16550::Lsr), 0x60); // the end of the input: nothing more
  EXPECT_EQ(R.U.nextTimerEvent(), kNoTimerEvent);
}

TEST(Uart, LoopbackDisconnectsTheSerialInput) {
  Rig R("xyz");
  R.wr(Uart16550::Mcr, Uart16550::McrRts | Uart16550::McrLoop);
  EXPECT_EQ(R.U.nextTimerEvent(), kNoTimerEvent);
  R.wr(Uart16550::Mcr, Uart16550::McrRts);
  EXPECT_EQ(R.U.nextTimerEvent(), R.U.charCycles());
}

// --- In the machine ---

namespace {

std::unique_ptr<Machine> bareMachine(MachineConfig Cfg = {}) {
  Cfg.Serial = OutputSpec::capture();
  Cfg.Serial2 = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  return M;
}

} // namespace

TEST(Uart, Com2IsAtPort2f8OnIrq3AndCom1OnIrq4) {
  auto M = bareMachine();
  ASSERT_TRUE(M);
  IoBus &Io = M->io();
  Io.write(0x2ff, 1, 0x5a);
  EXPECT_EQ(Io.read(0x2ff, 1), 0x5au);
  EXPECT_EQ(Io.read(0x3ff, 1), 0x00u); // COM1's scratch register is its own
  Io.write(0x2f8, 1, 'x');
  Io.write(0x3f8, 1, 'y');
  EXPECT_EQ(M->serial2Output(), "x");
  EXPECT_EQ(M->serialOutput(), "y");
  // I/O APIC pin 3 to vector 0x33 on CPU 0, edge, unmasked.
  M->ioApic().writeReg(IoApic::RedirIdx + 2 * 3 + 1, 0);
  M->ioApic().writeReg(IoApic::RedirIdx + 2 * 3, 0x33);
  Io.write(0x2fc, 1, Uart16550::McrOut2);
  Io.write(0x2f9, 1, Uart16550::IerEtbei);
  EXPECT_EQ(M->pic().Master.Irr, 1u << 3);
  EXPECT_EQ(M->localApic(0).readReg(LocalApic::Irr0 + 0x10), 1u << (0x33 - 32));
  Io.write(0x3fc, 1, Uart16550::McrOut2);
  Io.write(0x3f9, 1, Uart16550::IerEtbei);
  EXPECT_EQ(M->pic().Master.Irr, (1u << 3) | (1u << 4));
}

TEST(Uart, BadSerialInputIsAnErrorNamingTheFile) {
  MachineConfig Cfg;
  Cfg.Serial = Cfg.Debugcon = OutputSpec::discard();
  Cfg.SerialIn = "/nonexistent/vmxsim/input";
  Error Err;
  EXPECT_FALSE(Machine::create(Cfg, Err));
  EXPECT_EQ(Err.Code, ErrorCode::FileUnreadable);
  EXPECT_EQ(Err.str(), "/nonexistent/vmxsim/input: cannot open: No such file or directory");
  Cfg.SerialIn.clear();
  Cfg.Serial2In = "/";
  EXPECT_FALSE(Machine::create(Cfg, Err));
  EXPECT_EQ(Err.str(), "/: is a directory, not a regular file");
  Cfg.SerialIn = Cfg.Serial2In = "-";
  EXPECT_FALSE(Machine::create(Cfg, Err));
  EXPECT_EQ(Err.str(), "only one serial port can take its input from standard input");
}

namespace {

// Guest (32-bit flat, at 0x10000): STI; HLT; JMP back to HLT. The IRQ 4 handler at
// 0x10010 logs RDTSC's low half at 0x600 + 4 * n and IIR at 0x580 + n, echoes every
// received byte to THR, increments n at 0x500, sends EOI to the master 8259 and IRETs.
const uint8_t kEchoGuest[] = {
    0xfb, 0xf4, 0xeb, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0x0f, 0x31,                               // rdtsc
    0x8b, 0x0d, 0x00, 0x05, 0x00, 0x00,       // mov ecx, [0x500]
    0x89, 0x04, 0x8d, 0x00, 0x06, 0x00, 0x00, // mov [ecx*4 + 0x600], eax
    0x66, 0xba, 0xfa, 0x03,                   // mov dx, 0x3fa
    0xec,                                     // in al, dx (IIR)
    0x88, 0x81, 0x80, 0x05, 0x00, 0x00,       // mov [ecx + 0x580], al
    0x66, 0xba, 0xfd, 0x03,                   // loop: mov dx, 0x3fd
    0xec,                                     // in al, dx (LSR)
    0xa8, 0x01,                               // test al, 1
    0x74, 0x08,                               // jz done
    0x66, 0xba, 0xf8, 0x03,                   // mov dx, 0x3f8
    0xec,                                     // in al, dx (RBR)
    0xee,                                     // out dx, al (THR)
    0xeb, 0xef,                               // jmp loop
    0x41,                                     // done: inc ecx
    0x89, 0x0d, 0x00, 0x05, 0x00, 0x00,       // mov [0x500], ecx
    0xb0, 0x20,                               // mov al, 0x20
    0xe6, 0x20,                               // out 0x20, al
    0xcf,                                     // iret
};
constexpr uint8_t kIrq4Vector = 0x24;

struct EchoRun {
  RunResult R;
  std::string Serial;
  std::vector<uint32_t> Times;
  std::vector<uint8_t> Iirs;
  uint64_t RtsCycle = 0;
};

EchoRun runEchoGuest(const std::string &Input, uint8_t Fcr) {
  const std::string Path = ::testing::TempDir() + "vmxsim_uart_test_input";
  {
    std::FILE *F = std::fopen(Path.c_str(), "wb");
    std::fwrite(Input.data(), 1, Input.size(), F);
    std::fclose(F);
  }
  MachineConfig Cfg;
  Cfg.KernelImage.assign(std::begin(kEchoGuest), std::end(kEchoGuest));
  Cfg.FlatAddr = 0x10000;
  Cfg.FlatMode = EntryMode::Prot32;
  Cfg.SerialIn = Path;
  Cfg.MaxInsns = 100000;
  auto M = bareMachine(Cfg);
  std::remove(Path.c_str());
  EchoRun Out;
  if (!M)
    return Out;
  EXPECT_TRUE(test::installInterruptGate(*M, kIrq4Vector, 0x10010));
  test::initPic(*M, false, 0x20, 0xef); // only IR4 unmasked
  IoBus &Io = M->io();
  // COM1: 115200 8N1, the given FCR, received-data interrupt, OUT2 and RTS.
  Io.write(0x3fb, 1, 0x83);
  Io.write(0x3f8, 1, 1);
  Io.write(0x3f9, 1, 0);
  Io.write(0x3fb, 1, 0x03);
  Io.write(0x3fa, 1, Fcr);
  Io.write(0x3f9, 1, Uart16550::IerErbfi);
  Out.RtsCycle = M->bsp().Cycles;
  Io.write(0x3fc, 1, Uart16550::McrOut2 | Uart16550::McrRts);
  Out.R = M->run();
  Out.Serial = M->serialOutput();
  uint32_t N = 0;
  EXPECT_TRUE(M->mem().copyOut(Hpa(0x500), &N, 4));
  Out.Times.resize(std::min<uint32_t>(N, 64));
  Out.Iirs.resize(Out.Times.size());
  if (N) {
    EXPECT_TRUE(M->mem().copyOut(Hpa(0x600), Out.Times.data(), 4 * Out.Times.size()));
    EXPECT_TRUE(M->mem().copyOut(Hpa(0x580), Out.Iirs.data(), Out.Iirs.size()));
  }
  return Out;
}

} // namespace

// Trigger level 1: one interrupt per byte, each at its arrival cycle (RTS + k character
// times) plus the same delivery cost; the guest echoes the input. Twice: the same.
TEST(Uart, ScriptedInputInterruptsARunningGuestAtExactCycles) {
  const EchoRun A = runEchoGuest("hi!\n", 0x01);
  EXPECT_EQ(A.R.Reason, RunReason::Halted) << A.R.describe();
  EXPECT_EQ(A.Serial, "hi!\n");
  ASSERT_EQ(A.Times.size(), 4u);
  const uint64_t Delivery = A.Times[0] - (A.RtsCycle + kChar115200);
  EXPECT_LT(Delivery, 200u);
  for (unsigned K = 0; K < 4; ++K) {
    EXPECT_EQ(A.Times[K], A.RtsCycle + (K + 1) * kChar115200 + Delivery) << K;
    EXPECT_EQ(A.Iirs[K], 0xc4) << K;
  }
  const EchoRun B = runEchoGuest("hi!\n", 0x01);
  EXPECT_EQ(B.Times, A.Times);
  EXPECT_EQ(B.R.Retired, A.R.Retired);
  EXPECT_EQ(B.R.Cycles, A.R.Cycles);
}

// Trigger level 8 with three bytes: one interrupt, the character timeout, four character
// times after the last byte arrived.
TEST(Uart, CharacterTimeoutInterruptsARunningGuestAtItsExactCycle) {
  const EchoRun A = runEchoGuest("abc", 0x81);
  EXPECT_EQ(A.R.Reason, RunReason::Halted) << A.R.describe();
  EXPECT_EQ(A.Serial, "abc");
  ASSERT_EQ(A.Times.size(), 1u);
  EXPECT_EQ(A.Iirs[0], 0xcc);
  const uint64_t Delivery = A.Times[0] - (A.RtsCycle + 7 * kChar115200);
  EXPECT_LT(Delivery, 200u);
}
