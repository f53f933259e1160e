// The I/O APIC (Intel 82093AA I/O Advanced Programmable Interrupt Controller data sheet,
// version 0x20 as in ICH-era chipsets) at 0xfec00000: IOREGSEL at offset 0x00, IOWIN at
// 0x10, and the EOI register at 0x40 (version 0x20). 24 input pins.
//
// Registers (through IOREGSEL/IOWIN, 32-bit): 0x00 ID (bits 27:24 writable; reset 0, the
// MADT's I/O APIC ID), 0x01 version (0x00170020: 24 entries, version 0x20, read-only),
// 0x02 arbitration ID (reads the ID, read-only), 0x10 + 2n / 0x11 + 2n the low / high
// halves of redirection entry n: vector 7:0, delivery mode 10:8 (fixed, lowest priority,
// NMI, INIT, ExtINT; SMI and the reserved codes stop the run with status 10 at the local
// APIC that receives them, LocalApic::accept), destination mode 11
// (physical / logical, as the local APIC matches them: ApicBus::matches), delivery status
// 12 (read-only, always idle: delivery is immediate), polarity 13, remote IRR 14
// (read-only), trigger mode 15, mask 16; destination 63:56. Entries reset masked. Other
// register indexes read 0 and ignore writes; other offsets in the page read 0.
//
// Pins: setPin(Pin, Level) gives the pin's electrical level, after polarity (an active-low
// pin is asserted at level 0). An edge-triggered entry sends one message per assertion
// edge; a level-triggered entry sends while asserted and remote IRR is clear, and sets
// remote IRR, which the local APIC's EOI for a level-triggered vector clears (EOI
// broadcast: every entry with that vector, through ApicBus::LevelEoi) as does a write of
// the vector to the EOI register. Unmasking an asserted level entry sends at once.
//
// Lowest-priority delivery goes to the matching, enabled local APIC with the lowest TPR
// class (ties: lowest APIC ID), as the local APIC's own IPIs do. A target vCPU that is
// halted has its clock moved to the sender's time (the message arrives now).
//
// An ExtINT entry (virtual-wire mode through the I/O APIC) is edge-triggered whatever its
// trigger bit (the data sheet requires edge for ExtINT): the target's INTA reads the
// vector from the 8259; a target with no 8259 behind it stops the run (status 10).
//
// Not modelled: the 82093AA's APIC-bus arbitration, and a pin's delivery status "send
// pending".
#pragma once
#include "harness/devices/local_apic.h"
#include "mmu/phys_mem.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <functional>

namespace vmxsim {

class IoApic : public MmioDevice, public EoiListener {
public:
  static constexpr uint64_t kBase = 0xfec00000, kSize = 0x1000;
  static constexpr unsigned kPins = 24;
  static constexpr uint32_t kVersion = 0x00170020;
  enum Offset : uint64_t { RegSel = 0x00, Window = 0x10, EoiReg = 0x40 };
  enum Index : uint32_t { IdIdx = 0x00, VersionIdx = 0x01, ArbIdx = 0x02, RedirIdx = 0x10 };
  // Redirection entry bits (low dword).
  static constexpr uint64_t kDeliveryStatus = 1u << 12, kPolarityLow = 1u << 13,
                            kRemoteIrr = 1u << 14, kLevel = 1u << 15, kMasked = 1u << 16;

  explicit IoApic(ApicBus &Bus) : Bus(Bus) { reset(); }
  void reset();

  /// The current virtual time, for moving a halted target's clock; 0 if unset.
  std::function<uint64_t()> Now;

  uint32_t readReg(uint32_t Index) const;
  void writeReg(uint32_t Index, uint32_t Value);
  /// Sets the level of an input pin (ignored for Pin >= kPins).
  void setPin(unsigned Pin, bool Level);
  /// An edge on a pin: raise then lower it.
  void pulse(unsigned Pin) {
    setPin(Pin, true);
    setPin(Pin, false);
  }
  /// EOI broadcast / EOI register: clears remote IRR of level entries with Vector.
  void levelEoi(uint8_t Vector) override;

  uint64_t mmioRead(uint64_t Offset, unsigned SizeBytes) override;
  void mmioWrite(uint64_t Offset, unsigned SizeBytes, uint64_t Value) override;

  uint32_t Sel = 0, IdReg = 0;
  uint64_t Redir[kPins] = {};
  uint32_t PinLevel = 0; ///< electrical levels, bit per pin

private:
  bool asserted(unsigned Pin) const {
    return bool((PinLevel >> Pin) & 1) != bool(Redir[Pin] & kPolarityLow);
  }
  void service(unsigned Pin);
  void send(unsigned Pin);
  ApicBus &Bus;
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Sel, S.IdReg, S.Redir, S.PinLevel);
  }
};

} // namespace vmxsim
