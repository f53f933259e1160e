// A pair of Intel 8259A programmable interrupt controllers (master 0x20/0x21, slave
// 0xa0/0xa1, slave cascaded on master IR2), as on every PC (Intel 8259A data sheet). The
// initialisation sequence ICW1-ICW4, OCW1 (mask, readable), OCW2 (EOI, rotation, set
// priority), OCW3 (IRR/ISR read select, poll, special mask) are modelled, plus edge
// triggered request lines. The 8254 PIT raises IR0 (harness/devices/pit8254.h); INTR
// goes to the BSP's LINT0. Not modelled: level-triggered
// mode (ELCR 0x4d0/0x4d1), buffered mode, special fully nested mode.
#pragma once
#include "cpu/cpu.h"
#include "harness/devices/byte_ports.h"
#include "state/snapshot_io.h"

namespace vmxsim {

/// One 8259A.
class Pic8259 : public BytePortDevice {
public:
  Pic8259(uint16_t Base, bool IsMaster) : BytePortDevice(Base, 2), IsMaster(IsMaster) {}

  uint8_t Irr = 0, Isr = 0, Imr = 0;
  uint8_t VectorBase = 0;  ///< ICW2 bits 7:3
  uint8_t Icw3 = 0;        ///< master: slave mask; slave: its ID
  uint8_t LowestPriority = 7; ///< IR of lowest priority (rotations change it)
  bool AutoEoi = false, RotateOnAutoEoi = false, SpecialMask = false;
  bool ReadIsr = false, Poll = false;
  uint8_t LineLevel = 0; ///< current input levels, for edge detection
  /// Initialisation: which ICW the next data-port write is (0 = initialised).
  uint8_t InitStep = 0;
  bool Single = false, NeedIcw4 = false;

  /// Sets or clears an input line; a rising edge latches the request in IRR.
  void setLine(unsigned Irq, bool Level);
  /// Highest-priority unmasked request that may interrupt the current in-service level,
  /// or -1.
  int pendingIrq() const;
  /// INTA: moves the request to ISR (unless auto-EOI) and returns its IR number.
  void acknowledgeIrq(unsigned Irq);

protected:
  uint8_t readByte(uint16_t Offset) override;
  void writeByte(uint16_t Offset, uint8_t Value) override;

private:
  int priorityOf(unsigned Irq) const { return (Irq - LowestPriority - 1) & 7; }
  int highestInService() const;
  void eoi(int Irq, bool Rotate);
  bool IsMaster;
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Irr, S.Isr, S.Imr, S.VectorBase, S.Icw3, S.LowestPriority, S.AutoEoi,
          S.RotateOnAutoEoi, S.SpecialMask, S.ReadIsr, S.Poll, S.LineLevel, S.InitStep,
          S.Single, S.NeedIcw4);
  }
};

/// The master/slave pair, as the CPU's interrupt controller.
class PicPair : public InterruptSource {
public:
  PicPair() : Master(0x20, true), Slave(0xa0, false) {}
  void attach(IoBus &Io) {
    Io.add(0x20, 2, &Master);
    Io.add(0xa0, 2, &Slave);
  }
  /// IRQ 0-15 (8-15 on the slave).
  void setIrq(unsigned Irq, bool Level);
  bool intrPending() override;
  uint8_t acknowledge() override;

  Pic8259 Master, Slave;

private:
  void updateCascade();
};

} // namespace vmxsim
