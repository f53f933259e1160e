// The Intel 8254 programmable interval timer at ports 0x40-0x43 (Intel 82C54 data sheet),
// channel 0 wired to IRQ0: the 8259 PIC's IR0 and the I/O APIC's pin 2, as on a PC
// (the MADT's interrupt source override says so, harness/acpi_tables.h).
//
// Clock: the PIT counts at kPitHz = 1 193 182 Hz. The virtual clock (Cpu::Cycles) is
// defined to run at kVirtualHz = 1 GHz for this purpose, so ONE PIT TICK = 1e9 / 1193182
// VIRTUAL CYCLES, computed exactly in integers: tick K after a count load at cycle S
// happens at cycle S + ceil(K * kVirtualHz / kPitHz), and the count read at cycle T has
// seen floor((T - S) * kPitHz / kVirtualHz) ticks. "Now" is the clock of the vCPU that is
// executing (the machine supplies it); the scheduler stops that vCPU at the PIT's next
// event (TimerEventSource), so IRQ0 is raised at exact virtual times.
//
// Modelled: the control word (channel, access mode lobyte / hibyte / lobyte-then-hibyte,
// mode, counter-latch command); count 0 means 65536; modes 0 (interrupt on terminal
// count: one IRQ0 edge Count ticks after the count write), 2 (rate generator) and 3
// (square wave), both an IRQ0 edge every Count ticks after the count write; modes 6 and 7
// are 2 and 3 (data sheet: "X10"/"X11"); mode 4 behaves as mode 0; modes 1 and 5 need a
// gate rising edge, which channel 0's always-high gate never gives, so they never fire.
// Channels 1 and 2 count the same way but their outputs go nowhere. The output is
// modelled as an edge (IRQ0 pulsed), which is what the edge-triggered 8259 and I/O APIC
// pin latch; a periodic timer whose edges are not observed (CPU not running) raises one
// edge for the missed periods, as the edge-triggered IRR holds one request.
//
// Simplifications (documented, deterministic): counting starts at the count write (the
// data sheet's extra load CLK is not modelled); a new count in modes 2/3 restarts the
// period at once instead of at the next reload; mode 3 reads the count as mode 2 does
// (not decrementing by two); BCD counting is treated as binary; the read-back command
// (control word 0xc0-0xff) is ignored; port 0x61's channel 2 gate is not connected.
#pragma once
#include "harness/devices/byte_ports.h"
#include "harness/timer_event.h"

#include <cstdint>
#include <functional>

namespace vmxsim {

class Pit8254 : public BytePortDevice, public TimerEventSource {
public:
  static constexpr uint16_t kBase = 0x40;
  static constexpr uint64_t kPitHz = 1193182, kVirtualHz = 1000000000;

  Pit8254() : BytePortDevice(kBase, 4) {}

  /// The current virtual time (the executing vCPU's Cpu::Cycles); 0 if unset.
  std::function<uint64_t()> Now;
  /// Called for every rising edge of channel 0's output (IRQ0).
  std::function<void()> Irq0;
  /// Whether IRQ0 can reach a processor (the machine: unmasked at the 8259 or at the I/O
  /// APIC); unset = always. See TimerEventSource::canWake.
  std::function<bool()> Irq0Observed;

  struct Channel {
    uint8_t Mode = 0, Access = 3;
    bool Bcd = false;
    uint32_t Count = 0x10000; ///< the loaded count, 1..65536
    bool Counting = false;
    uint64_t Start = 0;    ///< virtual cycle of the count load
    uint64_t NextTick = 0; ///< channel 0: tick (since Start) of the next IRQ0 edge; 0 = none
    bool WriteHigh = false; ///< access 3: the next count byte is the high byte
    bool ReadHigh = false;  ///< access 3: the next read returns the high byte
    uint8_t LowByte = 0;
    bool Latched = false;
    uint16_t LatchValue = 0;
    bool LatchHigh = false; ///< access 3: the latch's high byte is next
  };
  Channel Ch[3];

  uint64_t nextTimerEvent() const override;
  void advanceTo(uint64_t Now) override;
  bool canWake() const override { return !Irq0Observed || Irq0Observed(); }

  /// Virtual cycle of tick K of a count loaded at cycle Start.
  static uint64_t cycleOfTick(uint64_t Start, uint64_t K);
  /// Ticks elapsed between cycles Start and T (T >= Start).
  static uint64_t ticksBetween(uint64_t Start, uint64_t T);

protected:
  uint8_t readByte(uint16_t Offset) override;
  void writeByte(uint16_t Offset, uint8_t Value) override;

private:
  uint64_t now() const { return Now ? Now() : 0; }
  uint16_t currentCount(const Channel &C, uint64_t T) const;
  void load(unsigned Idx, uint32_t Count);
  void writeControl(uint8_t V);
};

} // namespace vmxsim
