#include "harness/devices/uart16550.h"

namespace vmxsim {

void Uart16550::reset() {
  // PC16550D data sheet, Table IV "UART Reset Configuration": IER, FCR, LCR, MCR cleared,
  // LSR = THRE | TEMT, IIR = 0x01 (no interrupt pending). The divisor latch is not reset
  // by the chip; we start at 12 (9600 baud), as QEMU does, so a read is deterministic.
  Rx.clear();
  Divisor = 12;
  IerV = LcrV = McrV = ScrV = 0;
  FifoEnabled = false;
  FcrTrigger = 0;
  ThrePending = false;
}

uint8_t Uart16550::iir() const {
  // Interrupt identification in priority order (data sheet, Table IV "Interrupt Control
  // Functions"): received data available (code 0100b), then THR empty (0010b). Bits 6-7
  // report enabled FIFOs.
  uint8_t Fifo = FifoEnabled ? 0xc0 : 0;
  if ((IerV & IerRda) && !Rx.empty())
    return Fifo | 0x04;
  if ((IerV & IerThre) && ThrePending)
    return Fifo | 0x02;
  return Fifo | 0x01;
}

uint8_t Uart16550::readByte(uint16_t Offset) {
  const bool Dlab = LcrV & LcrDlab;
  switch (Offset) {
  case RbrThr:
    if (Dlab)
      return uint8_t(Divisor);
    if (Rx.empty())
      return 0;
    {
      uint8_t B = Rx.front();
      Rx.pop_front();
      return B;
    }
  case Ier:
    return Dlab ? uint8_t(Divisor >> 8) : IerV;
  case IirFcr: {
    uint8_t V = iir();
    // Reading IIR while it reports THRE clears that condition (data sheet, "Interrupt
    // Identification Register").
    if ((V & 0x0f) == 0x02)
      ThrePending = false;
    return V;
  }
  case Lcr:
    return LcrV;
  case Mcr:
    return McrV;
  case Lsr:
    return uint8_t(LsrThre | LsrTemt | (Rx.empty() ? 0 : LsrDr));
  case Msr:
    // Loopback connects RTS->CTS, DTR->DSR, OUT1->RI, OUT2->DCD (data sheet, "Modem
    // Control Register" bit 4). Otherwise the (absent) modem reports CTS, DSR and DCD
    // active, like QEMU's serial device, so drivers that wait for CTS do not hang.
    if (McrV & McrLoop)
      return uint8_t(((McrV & 0x02) << 3) | ((McrV & 0x01) << 5) | ((McrV & 0x04) << 4) |
                     ((McrV & 0x08) << 4));
    return 0xb0;
  case Scr:
    return ScrV;
  }
  return 0xff;
}

void Uart16550::writeByte(uint16_t Offset, uint8_t Value) {
  const bool Dlab = LcrV & LcrDlab;
  switch (Offset) {
  case RbrThr:
    if (Dlab) {
      Divisor = uint16_t((Divisor & 0xff00) | Value);
      return;
    }
    if (McrV & McrLoop)
      Rx.push_back(Value);
    else
      Out.put(Value);
    // The byte leaves at once: THR is empty again.
    ThrePending = true;
    return;
  case Ier:
    if (Dlab) {
      Divisor = uint16_t((Divisor & 0x00ff) | (Value << 8));
      return;
    }
    // Enabling the THRE interrupt while THR is empty raises it at once.
    if ((Value & IerThre) && !(IerV & IerThre))
      ThrePending = true;
    IerV = Value & 0x0f;
    return;
  case IirFcr:
    // FCR: bit 0 enables the FIFOs, bits 1-2 clear them (self-clearing), bits 6-7 are
    // the receiver trigger level.
    FifoEnabled = Value & 0x01;
    FcrTrigger = Value >> 6;
    if (Value & 0x02)
      Rx.clear();
    return;
  case Lcr:
    LcrV = Value;
    return;
  case Mcr:
    McrV = Value & 0x1f;
    return;
  case Lsr:
  case Msr:
    return; // read-only in normal operation (factory test registers)
  case Scr:
    ScrV = Value;
    return;
  }
}

} // namespace vmxsim
