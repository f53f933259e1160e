#include "harness/devices/pic8259.h"

namespace vmxsim {

void Pic8259::setLine(unsigned Irq, bool Level) {
  uint8_t Bit = uint8_t(1u << (Irq & 7));
  if (Level && !(LineLevel & Bit))
    Irr |= Bit; // edge-triggered mode: the rising edge latches the request
  if (Level)
    LineLevel |= Bit;
  else
    LineLevel &= uint8_t(~Bit);
}

int Pic8259::highestInService() const {
  int Best = -1;
  for (unsigned Irq = 0; Irq < 8; ++Irq) {
    uint8_t Bit = uint8_t(1u << Irq);
    // In special mask mode a masked in-service level does not inhibit lower levels
    // (8259A data sheet, "Special Mask Mode").
    if (!(Isr & Bit) || (SpecialMask && (Imr & Bit)))
      continue;
    if (Best < 0 || priorityOf(Irq) < priorityOf(unsigned(Best)))
      Best = int(Irq);
  }
  return Best;
}

int Pic8259::pendingIrq() const {
  uint8_t Req = Irr & uint8_t(~Imr);
  int Best = -1;
  for (unsigned Irq = 0; Irq < 8; ++Irq)
    if ((Req & (1u << Irq)) && (Best < 0 || priorityOf(Irq) < priorityOf(unsigned(Best))))
      Best = int(Irq);
  if (Best < 0)
    return -1;
  int InService = highestInService();
  // Fully nested mode: only a request of strictly higher priority than the highest level
  // in service interrupts it.
  if (InService >= 0 && priorityOf(unsigned(Best)) >= priorityOf(unsigned(InService)))
    return -1;
  return Best;
}

void Pic8259::acknowledgeIrq(unsigned Irq) {
  uint8_t Bit = uint8_t(1u << Irq);
  Irr &= uint8_t(~Bit);
  if (AutoEoi) {
    if (RotateOnAutoEoi)
      LowestPriority = uint8_t(Irq);
  } else {
    Isr |= Bit;
  }
}

void Pic8259::eoi(int Irq, bool Rotate) {
  if (Irq < 0)
    return;
  Isr &= uint8_t(~(1u << Irq));
  if (Rotate)
    LowestPriority = uint8_t(Irq);
}

uint8_t Pic8259::readByte(uint16_t Offset) {
  if (Offset == 1)
    return Imr; // OCW1 reads back
  if (Poll) {
    // Poll command (8259A data sheet, "The Poll Command"): the next read acknowledges
    // the highest request and returns 1000_0LLL, or 0 if none.
    Poll = false;
    int Irq = pendingIrq();
    if (Irq < 0)
      return 0;
    acknowledgeIrq(unsigned(Irq));
    return uint8_t(0x80 | Irq);
  }
  return ReadIsr ? Isr : Irr;
}

void Pic8259::writeByte(uint16_t Offset, uint8_t V) {
  if (Offset == 0) {
    if (V & 0x10) {
      // ICW1 (8259A data sheet, "Initialization Command Words"): clears IMR, ISR and
      // IRR, gives IR7 the lowest priority, leaves special mask mode, selects IRR for
      // reads; then ICW2, ICW3 (unless single), ICW4 (if requested) follow.
      NeedIcw4 = V & 0x01;
      Single = V & 0x02;
      Imr = Isr = Irr = 0;
      LowestPriority = 7;
      SpecialMask = ReadIsr = Poll = AutoEoi = RotateOnAutoEoi = false;
      InitStep = 2;
      return;
    }
    if (V & 0x08) {
      // OCW3: bit 2 poll, bits 1:0 = 1x select IRR/ISR for reads, bits 6:5 = 1x
      // set/reset special mask mode.
      if (V & 0x04)
        Poll = true;
      if (V & 0x02)
        ReadIsr = V & 0x01;
      if (V & 0x40)
        SpecialMask = V & 0x20;
      return;
    }
    // OCW2: R, SL, EOI in bits 7:5, level in bits 2:0.
    const unsigned Level = V & 7;
    switch (V >> 5) {
    case 0b001: eoi(highestInService(), false); break; // non-specific EOI
    case 0b011: eoi(int(Level), false); break;         // specific EOI
    case 0b101: eoi(highestInService(), true); break;  // rotate on non-specific EOI
    case 0b100: RotateOnAutoEoi = true; break;
    case 0b000: RotateOnAutoEoi = false; break;
    case 0b111: eoi(int(Level), true); break;          // rotate on specific EOI
    case 0b110: LowestPriority = uint8_t(Level); break; // set priority
    default: break;                                    // 0b010: no operation
    }
    return;
  }
  switch (InitStep) {
  case 2:
    VectorBase = V & 0xf8;
    InitStep = Single ? (NeedIcw4 ? 4 : 0) : 3;
    return;
  case 3:
    Icw3 = V;
    InitStep = NeedIcw4 ? 4 : 0;
    return;
  case 4:
    AutoEoi = V & 0x02;
    InitStep = 0;
    return;
  default:
    Imr = V; // OCW1
    return;
  }
}

void PicPair::updateCascade() { Master.setLine(2, Slave.pendingIrq() >= 0); }

void PicPair::setIrq(unsigned Irq, bool Level) {
  if (Irq < 8)
    Master.setLine(Irq, Level);
  else if (Irq < 16)
    Slave.setLine(Irq - 8, Level);
  updateCascade();
}

bool PicPair::intrPending() {
  updateCascade();
  return Master.pendingIrq() >= 0;
}

uint8_t PicPair::acknowledge() {
  updateCascade();
  int Irq = Master.pendingIrq();
  if (Irq < 0)
    return uint8_t(Master.VectorBase | 7); // spurious IRQ7: no ISR bit set
  Master.acknowledgeIrq(unsigned(Irq));
  if (Irq == 2) {
    int S = Slave.pendingIrq();
    if (S < 0)
      return uint8_t(Slave.VectorBase | 7); // spurious IRQ15
    Slave.acknowledgeIrq(unsigned(S));
    updateCascade();
    return uint8_t(Slave.VectorBase | S);
  }
  return uint8_t(Master.VectorBase | Irq);
}

} // namespace vmxsim
