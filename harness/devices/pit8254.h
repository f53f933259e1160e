// The Intel 8254 programmable interval timer at ports 0x40-0x43 (Intel 82C54 CHMOS
// Programmable Interval Timer data sheet, order 231244: "Operation", "Mode Definitions",
// "Read-Back Command"). Channel 0's output is IRQ0: the 8259 PIC's IR0 and the I/O
// APIC's pin 2, as on a PC (the MADT's interrupt source override says so). Channels 0 and
// 1 have their GATE tied high; channel 2's GATE is bit 0 of port 0x61 and its OUT reads
// back as bit 5 of port 0x61 (SystemControlB, harness/devices/system_ports.h), which is
// what Linux's and Xen's PIT calibration loops poll. Channel 1's output goes nowhere.
//
// Clock: the PIT counts at kPitHz = 1 193 182 Hz. The virtual clock (Cpu::Cycles) is
// defined to run at kVirtualHz = 1 GHz for this purpose, so ONE PIT TICK = 1e9 / 1193182
// VIRTUAL CYCLES, computed exactly in integers: tick K after a reference cycle S happens
// at cycle S + ceil(K * kVirtualHz / kPitHz), and at cycle T floor((T - S) * kPitHz /
// kVirtualHz) ticks have passed. "Now" is the clock of the vCPU that is executing (the
// machine supplies it); the scheduler stops that vCPU at channel 0's next rising edge
// (TimerEventSource), so IRQ0 is raised at exact virtual times.
//
// Each channel is a function of K, the CLK pulses it has counted since it was triggered
// (count load in modes 0, 2, 3, 4; GATE rising edge in modes 1 and 5, and the reload on a
// GATE rising edge in modes 2 and 3), and of N, the initial count (0 means 65536, or
// 10000 in BCD). Per the data sheet's mode definitions:
//   mode 0 interrupt on terminal count: OUT low from the control word, high from K = N;
//          GATE low suspends counting; writing the first byte of a new count stops the
//          count and sets OUT low.
//   mode 1 hardware-retriggerable one-shot: OUT high; a GATE rising edge (re)starts the
//          count and sets OUT low until K = N.
//   mode 2 rate generator: OUT low while the count is 1 (K mod N = N - 1), high else;
//          GATE low stops counting and forces OUT high, a GATE rising edge reloads.
//   mode 3 square wave: OUT high for the first ceil(N/2) counts of each period, low for
//          the rest; the count decrements by two; GATE as in mode 2.
//   mode 4 software-triggered strobe: OUT high, low for the one count K = N; GATE low
//          suspends counting.
//   mode 5 hardware-triggered strobe: mode 4 started by a GATE rising edge.
// Modes 6 and 7 are modes 2 and 3 ("X10", "X11"). The counter keeps counting down through
// 0 (wrapping to 0xffff, or 9999 in BCD) after terminal count in modes 0, 1, 4 and 5.
// IRQ0 is the rising edges of channel 0's OUT, which is what the edge-triggered 8259 and
// I/O APIC pin latch; a periodic timer whose edges are not observed (CPU not running)
// raises one edge for the missed periods, as the edge-triggered IRR holds one request.
//
// Control word (port 0x43): counter select, read/write access (latch, LSB, MSB,
// LSB-then-MSB), mode, BCD. The counter-latch command freezes the count until read; the
// read-back command (0xc0-0xff: bit 5 = 0 latches the count, bit 4 = 0 latches the status,
// bits 3-1 select counters 2, 1, 0) latches the status byte (bit 7 OUT, bit 6 null count,
// bits 5-0 the control word's access, mode and BCD bits), read before the count when both
// are latched; a second latch of either before it is read is ignored.
//
// Simplifications (documented, deterministic): counting starts at the count write or the
// GATE edge (the data sheet's extra load CLK is not modelled, so OUT rises exactly N ticks
// after the load); a new count in modes 2 and 3 restarts the period at once instead of at
// the next reload, and one in modes 1 and 5 applies to the current one-shot; a count
// suspended by GATE low in modes 0 and 4 resumes without its fraction of a tick; null
// count clears at the count write (modes 0, 2, 3, 4) or at the trigger (modes 1, 5).
#pragma once
#include "harness/devices/byte_ports.h"
#include "harness/timer_event.h"
#include "state/snapshot_io.h"

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
    uint8_t Mode = 0;       ///< effective mode 0-5 (6 and 7 folded to 2 and 3)
    uint8_t ControlBits = 0x30; ///< control word bits 5-0 as written (status byte)
    uint8_t Access = 3;
    bool Bcd = false;
    uint32_t Count = 0x10000; ///< N, the loaded initial count: 1..65536 (BCD 1..10000)
    bool Gate = true;
    bool Loaded = false;    ///< a count was written since the control word
    bool Triggered = false; ///< counting sequence started (K counts from the trigger)
    bool NullCount = true;
    uint64_t Ref = 0;        ///< virtual cycle from which the running count is measured
    uint64_t TicksAtRef = 0; ///< K at Ref
    uint64_t NextEdge = 0;   ///< channel 0: K of the next IRQ0 rising edge; 0 = none
    bool WriteHigh = false; ///< access 3: the next count byte is the high byte
    bool ReadHigh = false;  ///< access 3: the next read returns the high byte
    uint8_t LowByte = 0;
    bool Latched = false;
    uint16_t LatchValue = 0;
    bool LatchHigh = false; ///< access 3: the latch's high byte is next
    bool StatusLatched = false;
    uint8_t StatusValue = 0;
  };
  Channel Ch[3];

  uint64_t nextTimerEvent() const override;
  void advanceTo(uint64_t Now) override;
  bool canWake() const override { return !Irq0Observed || Irq0Observed(); }

  /// Sets channel Idx's GATE input (channel 2: port 0x61 bit 0) at the current time.
  void setGate(unsigned Idx, bool Level);
  /// Channel Idx's OUT at the current time (channel 2: port 0x61 bit 5).
  bool output(unsigned Idx);

  /// Virtual cycle of tick K of a count loaded at cycle Start.
  static uint64_t cycleOfTick(uint64_t Start, uint64_t K);
  /// Ticks elapsed between cycles Start and T (T >= Start).
  static uint64_t ticksBetween(uint64_t Start, uint64_t T);

protected:
  uint8_t readByte(uint16_t Offset) override;
  void writeByte(uint16_t Offset, uint8_t Value) override;

private:
  uint64_t now() const { return Now ? Now() : 0; }
  bool running(const Channel &C) const;
  uint64_t ticksAt(const Channel &C, uint64_t T) const;
  bool outputAt(const Channel &C, uint64_t T) const;
  uint16_t currentCount(const Channel &C, uint64_t T) const;
  void trigger(Channel &C, uint64_t T);
  void fold(Channel &C, uint64_t T);
  void scheduleEdge(unsigned Idx, uint64_t T);
  void load(unsigned Idx, uint32_t Count);
  void writeControl(uint8_t V);
  void writeRegister(uint16_t Offset, uint8_t V);
  void readBack(uint8_t V);
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    for (auto &C : S.Ch)
      A.all(C.Mode, C.ControlBits, C.Access, C.Bcd, C.Count, C.Gate, C.Loaded, C.Triggered,
            C.NullCount, C.Ref, C.TicksAtRef, C.NextEdge, C.WriteHigh, C.ReadHigh, C.LowByte,
            C.Latched, C.LatchValue, C.LatchHigh, C.StatusLatched, C.StatusValue);
  }
};

} // namespace vmxsim
