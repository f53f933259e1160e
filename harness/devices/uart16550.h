// National Semiconductor PC16550D UART (the 16550A register model; data sheet sections
// "Register Descriptions", "FIFO Interrupt Mode Operation", Table II "Register Addresses",
// Table IV "Interrupt Control Functions", Table V "UART Reset Configuration"). A PC has
// COM1 at 0x3f8 (IRQ 4) and COM2 at 0x2f8 (IRQ 3); the machine wires both.
//
// Registers: RBR/THR, IER (ERBFI, ETBEI, ELSI, EDSSI; bits 4-7 read 0), IIR (priorities
// and bits 6-7 = FIFOs enabled, bit 3 = character timeout), FCR (write-only: enable, clear
// RX/TX, DMA mode kept, RX trigger 1/4/8/14; with bit 0 = 0 the other bits are not
// programmed, and changing bit 0 clears both FIFOs), LCR (all 8 bits kept; DLAB selects
// DLL/DLM at offsets 0 and 1), MCR (bits 0-4), LSR, MSR, SCR. The divisor latch is not
// reset by the chip; it starts at 12 (9600 baud) so that a read is deterministic.
//
// Transmission is instantaneous: a byte written to THR reaches the output sink (or, in
// loopback, the receiver) in the same virtual cycle, so THR and the transmitter are
// always empty (LSR THRE and TEMT read 1) and the TX FIFO is never occupied. The THRE
// interrupt condition is therefore raised at the very cycle of every THR write (THR
// becomes empty again at once), and when IER.ETBEI goes 0 -> 1 (THR is empty); it is
// cleared by reading IIR while THRE is the reported source. Break (LCR bit 6) sends
// nothing.
//
// Interrupts, highest priority first (IIR code): receiver line status (0x6: LSR OE with
// ELSI; cleared by reading LSR), received data available (0x4: FIFO level at the trigger
// level, or RBR full without FIFOs; cleared below it) and character timeout (0xc: FIFO
// mode, at least one byte in the RX FIFO and neither a byte received nor RBR read for
// four character times; cleared by reading RBR; reported before 0x4 when both hold), THR
// empty (0x2), modem status (0x0: an MSR delta bit with EDSSI; cleared by reading MSR).
// The chip's INTR is the OR of the enabled pending conditions; on a PC it reaches the bus
// only through the buffer enabled by OUT2 (MCR bit 3), and loopback forces the OUT2 pin
// inactive (data sheet, MCR bit 4), so the IRQ line is INTR & OUT2 & !LOOP, a level that
// the edge-triggered 8259 and I/O APIC latch at each rising edge.
//
// Receiver: a 16-byte FIFO (one byte, RBR, with FIFOs disabled). Overrun: in FIFO mode a
// byte arriving at a full FIFO is lost; without FIFOs it replaces RBR; either way LSR OE
// is set (cleared by reading LSR). Parity, framing and break errors never occur (LSR
// bits 2-4 and 7 read 0): the input is bytes, not a line.
//
// Serial input (`--serial-in`, SerialInput below): a terminal on the UART's serial input
// that sends the bytes of its source one after another, each taking one character time
// at the UART's programmed format: (1 start + 5..8 data + parity + 1, 1.5 or 2 stop bits)
// x 16 x divisor clocks of 1.8432 MHz (divisor 0 counts as 65536), rounded up to whole
// virtual cycles of the 1 GHz virtual clock (115200 8N1: 86806 cycles). The terminal
// follows RTS/CTS-style flow control and never overruns the receiver: it sends only while
// the guest asserts RTS (MCR bit 1), loopback is off, and the receiver has room (FIFO not
// full; RBR empty without FIFOs). Sending a byte starts when those hold and the byte
// arrives one character time later; the next starts at once. If any condition stops
// holding, or an LCR or divisor write changes the character time, the character on the
// wire starts again (from the write's cycle, at the new format). So a byte is never lost, and bytes only
// flow once a driver is ready for them (Linux raises RTS when the tty is opened, after
// its start-up cleared the FIFOs). A file's bytes are all read when the machine is built,
// so delivery is deterministic; at its end nothing more is sent. Standard input ("-") is
// read without blocking when a character time ends, which makes the run depend on when
// the host's bytes come: interactive use only, not deterministic.
//
// Modem status: with loopback off the (absent) modem holds CTS, DSR and DCD active and
// RI inactive (MSR 0xb0), like QEMU's serial device, so drivers that wait for CTS do not
// hang. In loopback the inputs are DTR->DSR, RTS->CTS, OUT1->RI, OUT2->DCD. Delta bits
// (DCTS, DDSR, TERI on RI 1 -> 0, DDCD) record every change of these inputs, including the
// switch in and out of loopback, until MSR is read.
//
// Time is the virtual clock of the executing vCPU (Now). Byte arrivals and the character
// timeout are TimerEventSource events, so the scheduler stops a vCPU exactly at them and
// the IRQ rises at that cycle; a register access first brings the receiver up to the
// access's cycle, so polling guests see the same bytes at the same cycles. As for the
// other timers, every register access tells the scheduler (TimerEventSource::rearmed), so
// an event it arms (e.g. RTS raised, then a busy loop that neither halts nor touches the
// UART) ends the running vCPU's run at its exact cycle.
#pragma once
#include "harness/devices/byte_ports.h"
#include "harness/error.h"
#include "harness/input_log.h"
#include "harness/output.h"
#include "harness/timer_event.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vmxsim {

/// The byte source of a UART's serial input: a file read whole when the machine is
/// built (deterministic), the host's standard input polled without blocking
/// (interactive, not deterministic; optionally recorded into an input log), or the
/// events of an input log replayed (harness/input_log.h).
class SerialInput {
public:
  /// "-" = standard input; anything else a regular file, read whole now. One that cannot
  /// be opened, is not a regular file or is larger than kMaxFileBytes is an error naming
  /// it (ImageFile::open's messages).
  static Error open(const std::string &Spec, std::unique_ptr<SerialInput> &Out);
  static std::unique_ptr<SerialInput> fromBytes(std::vector<uint8_t> Bytes);
  /// Replays Events (all of port Port, in poll order): a poll the log names gets its
  /// byte or the end of the input; any other poll finds nothing. A logged poll at another
  /// cycle than the run's (the run is not the recorded one) ends the input and sets
  /// replayMismatch().
  static std::unique_ptr<SerialInput> replaying(std::vector<InputEvent> Events, unsigned Port);
  static constexpr size_t kMaxFileBytes = 64ull << 20;

  enum class Poll : uint8_t { Byte, NotYet, End };
  /// The next byte, if one is there now (At: the virtual cycle of the poll); End when
  /// none will ever come.
  Poll next(uint64_t At, uint8_t &B);
  /// No byte will ever come.
  bool ended() const;
  /// Reads the host's standard input (not deterministic: cannot be snapshotted).
  bool interactive() const { return Source == Kind::Stdin; }
  /// Standard input only: every poll that finds a byte or the end is added to Log.
  void recordInto(InputLogWriter *Log, unsigned Port) {
    Recorder = Log;
    RecordPort = Port;
  }
  bool replays() const { return Source == Kind::Replay; }
  /// Replay: where it is (polls so far, events consumed), for a snapshot's INPL section.
  uint64_t polls() const { return Polls; }
  size_t replayPosition() const { return ReplayPos; }
  /// Replay: continues at that point (after a restore); false if Position is past the log.
  bool seekReplay(uint64_t NumPolls, size_t Position);
  /// Replay: empty, or one line saying where the run left the recorded one.
  const std::string &replayMismatch() const { return Mismatch; }
  /// Snapshot: the bytes not sent yet (a restored machine needs no file).
  void save(SnapshotWriter &W) const { W.blob(Bytes.data() + Pos, Bytes.size() - Pos); }
  void load(SnapshotReader &R) {
    R.blob(Bytes, kMaxFileBytes);
    Pos = 0;
  }

private:
  enum class Kind : uint8_t { File, Stdin, Replay };
  Poll replay(uint64_t At, uint8_t &B);
  Kind Source = Kind::File;
  std::vector<uint8_t> Bytes;
  size_t Pos = 0;
  bool StdinEnded = false;
  uint64_t Polls = 0;
  InputLogWriter *Recorder = nullptr;
  unsigned RecordPort = 1;
  std::vector<InputEvent> Events;
  size_t ReplayPos = 0;
  bool ReplayEnded = false;
  std::string Mismatch;
};

class Uart16550 : public BytePortDevice, public TimerEventSource {
public:
  static constexpr uint16_t kCom1 = 0x3f8, kCom2 = 0x2f8;
  static constexpr unsigned kCom1Irq = 4, kCom2Irq = 3;
  static constexpr unsigned kFifoBytes = 16;
  /// The PC's UART clock (1.8432 MHz) and the virtual clock it is measured against.
  static constexpr uint64_t kClockHz = 1843200, kVirtualHz = 1000000000;
  /// Register offsets (data sheet, Table II "Register Addresses").
  enum Reg : uint16_t { RbrThr = 0, Ier = 1, IirFcr = 2, Lcr = 3, Mcr = 4, Lsr = 5, Msr = 6,
                        Scr = 7 };
  static constexpr uint8_t IerErbfi = 0x01, IerEtbei = 0x02, IerElsi = 0x04, IerEdssi = 0x08;
  static constexpr uint8_t IirNone = 0x01, IirLineStatus = 0x06, IirRxData = 0x04,
                           IirTimeout = 0x0c, IirThre = 0x02, IirModem = 0x00,
                           IirFifos = 0xc0;
  static constexpr uint8_t FcrEnable = 0x01, FcrClearRx = 0x02, FcrClearTx = 0x04,
                           FcrDma = 0x08;
  static constexpr uint8_t LcrDlab = 0x80;
  static constexpr uint8_t McrDtr = 0x01, McrRts = 0x02, McrOut1 = 0x04, McrOut2 = 0x08,
                           McrLoop = 0x10;
  static constexpr uint8_t LsrDr = 0x01, LsrOe = 0x02, LsrThre = 0x20, LsrTemt = 0x40;

  Uart16550(uint16_t Base, OutputSink &Out) : BytePortDevice(Base, 8), Out(Out) { reset(); }
  void reset();

  /// The current virtual time (the executing vCPU's Cpu::Cycles); 0 if unset.
  std::function<uint64_t()> Now;
  /// Sets the IRQ line's level (INTR & OUT2 & !LOOP); called only when it changes.
  std::function<void(bool)> Irq;
  /// Whether the IRQ can reach a processor (unmasked at a controller); unset = always.
  std::function<bool()> IrqObserved;
  /// The terminal on the serial input; none = nothing is ever received but loopback.
  void setInput(std::unique_ptr<SerialInput> In);

  uint16_t divisor() const { return Divisor; }
  bool irqLevel() const { return IrqLevel; }
  /// One character time at the current LCR and divisor, in virtual cycles.
  uint64_t charCycles() const;
  unsigned rxCount() const { return RxCount; }

  uint64_t nextTimerEvent() const override;
  void advanceTo(uint64_t Now) override;
  bool canWake() const override;

  /// The terminal on the serial input, or null.
  const SerialInput *input() const { return In.get(); }
  SerialInput *input() { return In.get(); }
  /// Records what the standard-input terminal sends into Log (SerialInput::recordInto).
  void recordInput(InputLogWriter *Log, unsigned Port) {
    if (In)
      In->recordInto(Log, Port);
  }
  /// Snapshot (harness/snapshot.h): the registers, the receiver with its timing and the
  /// input's unsent bytes (a file's; an interactive input cannot be saved: the machine
  /// refuses). load() replaces the input with the saved bytes when there were any.
  void save(SnapshotWriter &W) const;
  void load(SnapshotReader &R);

protected:
  uint8_t readByte(uint16_t Offset) override;
  void writeByte(uint16_t Offset, uint8_t Value) override;
  uint8_t readRegister(uint16_t Offset);
  void writeRegister(uint16_t Offset, uint8_t Value);

private:
  uint64_t now();
  uint8_t iir() const;
  uint8_t modemInputs() const;
  unsigned rxCapacity() const { return FifoEnabled ? kFifoBytes : 1; }
  unsigned triggerLevel() const;
  bool rxDataPending() const;
  uint64_t timeoutAt() const;
  bool senderReady() const;
  /// Starts the next byte at T if the terminal may send and none is on the wire; stops
  /// the one on the wire if it may not.
  void updateSender(uint64_t T);
  /// After an LCR or divisor write: restarts the byte on the wire if the character time
  /// changed (CharBefore is the old one).
  void restartIfRetimed(uint64_t CharBefore, uint64_t T);
  void receive(uint8_t B, uint64_t T);
  void clearRx();
  void setModemControl(uint8_t V);
  void updateIrq();

  OutputSink &Out;
  std::unique_ptr<SerialInput> In;
  uint8_t Rx[kFifoBytes] = {};
  unsigned RxHead = 0, RxCount = 0;
  uint8_t LastRbr = 0; ///< RBR when the receiver is empty: the last byte read
  uint16_t Divisor = 12;
  uint8_t IerV = 0, LcrV = 0, McrV = 0, ScrV = 0, FcrV = 0, MsrDelta = 0;
  bool FifoEnabled = false;
  bool Overrun = false;
  bool ThrePending = false;  ///< THRE interrupt condition
  bool TimeoutPending = false; ///< character timeout occurred, cleared by an RBR read
  bool IrqLevel = false;
  uint64_t Evaluated = 0;     ///< receiver events are accounted for up to this cycle
  uint64_t LastRxActivity = 0; ///< last byte received or RBR read (the timeout's start)
  uint64_t NextArrival = kNoTimerEvent; ///< when the byte on the wire arrives

  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Rx, S.RxHead, S.RxCount, S.LastRbr, S.Divisor, S.IerV, S.LcrV, S.McrV, S.ScrV,
          S.FcrV, S.MsrDelta, S.FifoEnabled, S.Overrun, S.ThrePending, S.TimeoutPending,
          S.IrqLevel, S.Evaluated, S.LastRxActivity, S.NextArrival);
  }
};

} // namespace vmxsim
