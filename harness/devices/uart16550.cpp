#include "harness/devices/uart16550.h"

#include "harness/loader.h"

#include <algorithm>
#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <poll.h>
#include <unistd.h>

namespace vmxsim {

// --- The serial input's byte source ---

Error SerialInput::open(const std::string &Spec, std::unique_ptr<SerialInput> &Out) {
  std::unique_ptr<SerialInput> In(new SerialInput);
  if (Spec == "-") {
    In->Source = Kind::Stdin;
    Out = std::move(In);
    return Error::success();
  }
  // A regular file only (a FIFO or a device is refused without blocking, as for images);
  // it is read whole now, so what the guest receives does not depend on the host later.
  ImageFile F;
  if (Error E = ImageFile::open(Spec, kMaxFileBytes, F)) {
    E.Path = Spec;
    return E;
  }
  In->Bytes.assign(F.bytes().begin(), F.bytes().end());
  Out = std::move(In);
  return Error::success();
}

std::unique_ptr<SerialInput> SerialInput::fromBytes(std::vector<uint8_t> Bytes) {
  std::unique_ptr<SerialInput> In(new SerialInput);
  In->Bytes = std::move(Bytes);
  return In;
}

std::unique_ptr<SerialInput> SerialInput::replaying(std::vector<InputEvent> Events,
                                                    unsigned Port) {
  std::unique_ptr<SerialInput> In(new SerialInput);
  In->Source = Kind::Replay;
  In->Events = std::move(Events);
  In->RecordPort = Port;
  return In;
}

bool SerialInput::ended() const {
  switch (Source) {
  case Kind::File:
    return Pos == Bytes.size();
  case Kind::Stdin:
    return StdinEnded;
  case Kind::Replay:
    return ReplayEnded;
  }
  return true;
}

bool SerialInput::seekReplay(uint64_t NumPolls, size_t Position) {
  if (Position > Events.size())
    return false;
  Polls = NumPolls;
  ReplayPos = Position;
  ReplayEnded = Position > 0 && Events[Position - 1].K == InputEvent::Kind::End;
  return true;
}

SerialInput::Poll SerialInput::replay(uint64_t At, uint8_t &B) {
  if (ReplayEnded)
    return Poll::End;
  const uint64_t This = Polls++;
  if (ReplayPos == Events.size() || Events[ReplayPos].Poll > This)
    return Poll::NotYet; // the host had typed nothing at this poll
  const InputEvent &E = Events[ReplayPos];
  if (E.Poll != This || E.Cycle != At) {
    Mismatch = fmt::format("input log: COM{}'s poll {} came at cycle {}, the log has '{}': "
                           "this run is not the recorded one; its input ended there",
                           RecordPort, This, At, formatInputEvent(E));
    ReplayEnded = true;
    return Poll::End;
  }
  ++ReplayPos;
  if (E.K == InputEvent::Kind::End) {
    ReplayEnded = true;
    return Poll::End;
  }
  B = E.Value;
  return Poll::Byte;
}

SerialInput::Poll SerialInput::next(uint64_t At, uint8_t &B) {
  if (Source == Kind::File) {
    if (Pos == Bytes.size())
      return Poll::End;
    B = Bytes[Pos++];
    return Poll::Byte;
  }
  if (Source == Kind::Replay)
    return replay(At, B);
  if (StdinEnded)
    return Poll::End;
  const uint64_t This = Polls++;
  auto logged = [&](Poll P) {
    if (Recorder)
      Recorder->add(InputEvent{RecordPort, This, At,
                               P == Poll::End ? InputEvent::Kind::End : InputEvent::Kind::Byte,
                               P == Poll::End ? uint8_t(0) : B});
    return P;
  };
  // Interactive input: whatever the host has typed by now (never blocks).
  struct pollfd P = {STDIN_FILENO, POLLIN, 0};
  if (::poll(&P, 1, 0) <= 0 || !(P.revents & (POLLIN | POLLHUP)))
    return Poll::NotYet;
  const ssize_t N = ::read(STDIN_FILENO, &B, 1);
  if (N == 1)
    return logged(Poll::Byte);
  if (N < 0 && (errno == EAGAIN || errno == EINTR))
    return Poll::NotYet;
  StdinEnded = true; // end of file, or an error that will not go away
  return logged(Poll::End);
}

// --- The UART ---

void Uart16550::reset() {
  // Data sheet, Table V "UART Reset Configuration": IER, FCR, LCR and MCR cleared, IIR =
  // 0x01, LSR = THRE | TEMT, MSR deltas cleared. The FIFOs are empty.
  RxHead = RxCount = 0;
  LastRbr = 0;
  Divisor = 12;
  IerV = LcrV = McrV = ScrV = FcrV = MsrDelta = 0;
  FifoEnabled = Overrun = ThrePending = TimeoutPending = false;
  LastRxActivity = Evaluated;
  NextArrival = kNoTimerEvent;
  updateIrq();
}

void Uart16550::setInput(std::unique_ptr<SerialInput> NewIn) {
  In = std::move(NewIn);
  updateSender(Evaluated);
}

uint64_t Uart16550::charCycles() const {
  // Data sheet, "Line Control Register": bits 1-0 word length 5-8, bit 2 one stop bit or
  // (1.5 with 5-bit words) 2, bit 3 parity. Counted in half bits; one bit is 16 clocks of
  // kClockHz divided by the divisor.
  const uint64_t Word = 5 + (LcrV & 3);
  const uint64_t HalfBits =
      2 * (1 + Word + ((LcrV >> 3) & 1)) + (!(LcrV & 4) ? 2 : Word == 5 ? 3 : 4);
  const uint64_t D = Divisor ? Divisor : 65536;
  const uint64_t Den = 2 * kClockHz / 16; // half bits per second at divisor 1
  return (HalfBits * D * kVirtualHz + Den - 1) / Den;
}

unsigned Uart16550::triggerLevel() const {
  static constexpr unsigned kLevels[4] = {1, 4, 8, 14}; // FCR bits 7-6
  return kLevels[FcrV >> 6];
}

bool Uart16550::rxDataPending() const {
  return FifoEnabled ? RxCount >= triggerLevel() : RxCount != 0;
}

uint64_t Uart16550::timeoutAt() const {
  // Data sheet, "FIFO Interrupt Mode Operation": a timeout occurs with at least one byte
  // in the RX FIFO when no byte was received and none read for four character times.
  if (!FifoEnabled || RxCount == 0 || TimeoutPending)
    return kNoTimerEvent;
  return LastRxActivity + 4 * charCycles();
}

bool Uart16550::senderReady() const {
  return In && !In->ended() && (McrV & McrRts) && !(McrV & McrLoop) && RxCount < rxCapacity();
}

void Uart16550::updateSender(uint64_t T) {
  if (!senderReady())
    NextArrival = kNoTimerEvent;
  else if (NextArrival == kNoTimerEvent)
    NextArrival = T + charCycles();
}

void Uart16550::restartIfRetimed(uint64_t CharBefore, uint64_t T) {
  // A new character time (format or divisor) garbles the character on the wire: the
  // terminal sends it again from T at the new rate.
  if (charCycles() != CharBefore)
    NextArrival = kNoTimerEvent;
  updateSender(T);
}

uint8_t Uart16550::iir() const {
  // Data sheet, Table IV "Interrupt Control Functions", highest priority first.
  const uint8_t Fifo = FifoEnabled ? IirFifos : 0;
  if ((IerV & IerElsi) && Overrun)
    return Fifo | IirLineStatus;
  if (IerV & IerErbfi) {
    if (TimeoutPending)
      return Fifo | IirTimeout;
    if (rxDataPending())
      return Fifo | IirRxData;
  }
  if ((IerV & IerEtbei) && ThrePending)
    return Fifo | IirThre;
  if ((IerV & IerEdssi) && MsrDelta)
    return Fifo | IirModem;
  return Fifo | IirNone;
}

void Uart16550::updateIrq() {
  const bool Level = !(iir() & IirNone) && (McrV & McrOut2) && !(McrV & McrLoop);
  if (Level == IrqLevel)
    return;
  IrqLevel = Level;
  if (Irq)
    Irq(Level);
}

uint64_t Uart16550::nextTimerEvent() const { return std::min(NextArrival, timeoutAt()); }

bool Uart16550::canWake() const {
  // Only the receiver's interrupts are timed; they need ERBFI or ELSI and the OUT2 gate.
  return (IerV & (IerErbfi | IerElsi)) && (McrV & McrOut2) && !(McrV & McrLoop) &&
         (!IrqObserved || IrqObserved());
}

void Uart16550::advanceTo(uint64_t T) {
  if (T < Evaluated)
    return; // another vCPU's clock is behind: the receiver is already further on
  for (;;) {
    const uint64_t Timeout = timeoutAt(), Arrival = NextArrival;
    if (std::min(Timeout, Arrival) > T)
      break;
    if (Timeout <= Arrival) {
      TimeoutPending = true;
      continue;
    }
    NextArrival = kNoTimerEvent;
    uint8_t B = 0;
    switch (In->next(Arrival, B)) {
    case SerialInput::Poll::Byte:
      receive(B, Arrival);
      updateSender(Arrival); // the next byte starts at once
      break;
    case SerialInput::Poll::NotYet:
      updateSender(T); // nothing typed yet (stdin): look again a character time from now
      break;
    case SerialInput::Poll::End:
      break; // the terminal has nothing more to send
    }
  }
  Evaluated = T;
  updateIrq();
}

uint64_t Uart16550::now() {
  uint64_t T = Now ? Now() : 0;
  T = std::max(T, Evaluated);
  advanceTo(T);
  return T;
}

void Uart16550::receive(uint8_t B, uint64_t T) {
  LastRxActivity = T;
  if (RxCount == rxCapacity()) {
    // Data sheet, LSR bit 1: in FIFO mode the byte in the shift register is lost; without
    // FIFOs it overwrites RBR.
    Overrun = true;
    if (!FifoEnabled)
      Rx[RxHead] = B;
    return;
  }
  Rx[(RxHead + RxCount) % kFifoBytes] = B;
  ++RxCount;
}

void Uart16550::clearRx() {
  RxHead = RxCount = 0;
  TimeoutPending = false;
}

uint8_t Uart16550::modemInputs() const {
  // Data sheet, MCR bit 4: in loopback DTR->DSR, RTS->CTS, OUT1->RI, OUT2->DCD.
  if (McrV & McrLoop)
    return uint8_t(((McrV & McrRts) << 3) | ((McrV & McrDtr) << 5) | ((McrV & McrOut1) << 4) |
                   ((McrV & McrOut2) << 4));
  return 0xb0; // CTS, DSR, DCD active; RI inactive
}

void Uart16550::setModemControl(uint8_t V) {
  // Data sheet, "Modem Status Register": bits 0, 1, 3 flag a change of CTS, DSR, DCD;
  // bit 2 (TERI) RI going from active to inactive.
  const uint8_t Before = modemInputs();
  McrV = V & 0x1f;
  const uint8_t After = modemInputs(), Changed = Before ^ After;
  MsrDelta |= uint8_t(((Changed & 0x10) ? 0x01 : 0) | ((Changed & 0x20) ? 0x02 : 0) |
                      ((Before & 0x40) && !(After & 0x40) ? 0x04 : 0) |
                      ((Changed & 0x80) ? 0x08 : 0));
}

uint8_t Uart16550::readByte(uint16_t Offset) {
  const uint8_t V = readRegister(Offset);
  rearmed(); // a read that makes room in the receiver lets the next byte start
  return V;
}

void Uart16550::writeByte(uint16_t Offset, uint8_t Value) {
  writeRegister(Offset, Value);
  rearmed();
}

uint8_t Uart16550::readRegister(uint16_t Offset) {
  const uint64_t T = now();
  const bool Dlab = LcrV & LcrDlab;
  uint8_t V = 0xff;
  switch (Offset) {
  case RbrThr:
    if (Dlab)
      return uint8_t(Divisor);
    if (RxCount) {
      LastRbr = Rx[RxHead];
      RxHead = (RxHead + 1) % kFifoBytes;
      --RxCount;
      // Data sheet, "FIFO Interrupt Mode Operation": reading RBR clears a timeout and
      // restarts its timer.
      LastRxActivity = T;
      TimeoutPending = false;
      updateSender(T);
    }
    V = LastRbr;
    break;
  case Ier:
    return Dlab ? uint8_t(Divisor >> 8) : IerV;
  case IirFcr:
    V = iir();
    // Reading IIR while it reports THRE clears that condition (data sheet, "Interrupt
    // Identification Register").
    if ((V & 0x0f) == IirThre)
      ThrePending = false;
    break;
  case Lcr:
    return LcrV;
  case Mcr:
    return McrV;
  case Lsr:
    V = uint8_t(LsrThre | LsrTemt | (RxCount ? LsrDr : 0) | (Overrun ? LsrOe : 0));
    Overrun = false; // reading LSR clears the error bits and the line status interrupt
    break;
  case Msr:
    V = uint8_t(modemInputs() | MsrDelta);
    MsrDelta = 0;
    break;
  case Scr:
    return ScrV;
  }
  updateIrq();
  return V;
}

void Uart16550::writeRegister(uint16_t Offset, uint8_t Value) {
  const uint64_t T = now();
  const bool Dlab = LcrV & LcrDlab;
  const uint64_t CharBefore = charCycles();
  switch (Offset) {
  case RbrThr:
    if (Dlab) {
      Divisor = uint16_t((Divisor & 0xff00) | Value);
      restartIfRetimed(CharBefore, T);
      break;
    }
    if (McrV & McrLoop) {
      receive(Value, T);
      updateSender(T);
    } else {
      Out.put(Value);
    }
    // Writing THR clears the THRE interrupt; the byte leaves at once, so THR is empty
    // again in the same cycle and the condition is raised anew.
    ThrePending = true;
    break;
  case Ier:
    if (Dlab) {
      Divisor = uint16_t((Divisor & 0x00ff) | (Value << 8));
      restartIfRetimed(CharBefore, T);
      break;
    }
    // ETBEI 0 -> 1 with THR empty (always, here) raises THRE at once.
    if ((Value & IerEtbei) && !(IerV & IerEtbei))
      ThrePending = true;
    IerV = Value & 0x0f;
    break;
  case IirFcr: {
    // FCR (data sheet, "FIFO Control Register"): changing bit 0 clears both FIFOs; the
    // other bits are programmed only with bit 0 set; bits 1 and 2 self-clear.
    const bool Enable = Value & FcrEnable;
    if (Enable != FifoEnabled)
      clearRx();
    FifoEnabled = Enable;
    if (Enable) {
      FcrV = uint8_t(Value & (FcrEnable | FcrDma | 0xc0));
      if (Value & FcrClearRx)
        clearRx();
    } else {
      FcrV = 0;
    }
    updateSender(T);
    break;
  }
  case Lcr:
    LcrV = Value;
    restartIfRetimed(CharBefore, T);
    break;
  case Mcr:
    setModemControl(Value);
    updateSender(T);
    break;
  case Lsr:
  case Msr:
    break; // read-only in normal operation (factory test registers)
  case Scr:
    ScrV = Value;
    break;
  }
  updateIrq();
}

} // namespace vmxsim

namespace vmxsim {

void Uart16550::save(SnapshotWriter &W) const {
  snapshotFields(W, *this);
  W.io(bool(In));
  if (In)
    In->save(W);
}

void Uart16550::load(SnapshotReader &R) {
  snapshotFields(R, *this);
  bool HasInput = false;
  R.io(HasInput);
  if (HasInput) {
    In = SerialInput::fromBytes({});
    In->load(R);
  } else {
    In.reset();
  }
  if (RxCount > kFifoBytes || RxHead >= kFifoBytes)
    R.fail("UART receiver state out of range");
}

} // namespace vmxsim
