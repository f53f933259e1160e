// The CMOS real-time clock of a PC: a Motorola MC146818A (MC146818A data sheet, "Address
// Map", "Time, Calendar and Alarm Locations", "Registers A-D", "Update Cycle",
// "Interrupts") at ports 0x70 (index; bit 7 is the PC's NMI mask) and 0x71 (data), with
// 128 bytes: 14 clock registers and 114 bytes of CMOS RAM whose standard PC fields the
// machine fills (harness/devices/cmos_layout.h). IRQ 8: the slave 8259's IR0 and the I/O
// APIC's pin 8 (the machine wires it; the HPET's legacy replacement takes it over).
//
// Time: the clock holds a date-time that starts at the machine's RTC base
// (MachineConfig::RtcBaseSeconds, default kDefaultRtcBase = 2026-01-01 00:00:00 UTC, the
// `--rtc-base` option) at virtual cycle 0 and advances with the virtual clock (1 GHz:
// 1e9 cycles = one second), never with the host's. The 32.768 kHz time base is the
// virtual clock divided exactly: tick j of the divider chain is at cycle ceil(j * 1e9 /
// 32768) after the chain started, so one second is exactly 32768 ticks. At power-on the
// chain is running and the first update is at cycle 1e9; after software releases the
// divider reset (register A DV from 11x to 010) the first update is half a second later
// (data sheet, "Divider Control"). Only DV = 010 (the PC's 32.768 kHz crystal) runs the
// chain; other DV values stop it (11x holds it in reset).
//
// Registers: A = UIP (bit 7, read-only), DV (6-4), RS (3-0), power-on 0x26; B = SET,
// PIE, AIE, UIE, SQWE, DM (1 = binary), 24/12 (1 = 24-hour), DSE, power-on 0x02; C =
// IRQF, PF, AF, UF, read-only and cleared by a read; D = VRT (0x80), read-only. The time
// registers read in the format B selects (BCD or binary, 12-hour with bit 7 = PM or
// 24-hour); writes are taken in that format. SET = 1 stops updates (the time holds while
// software writes it) and clears UIP; clearing it lets updates resume on the divider's
// phase. UIP is 1 for the 244 us before each update (tBUC); the update itself (tUC) is
// instantaneous here, so the time registers always read consistently.
//
// Interrupts: PF at every 2^(RS-1) time-base ticks (RS 1 and 2: 2^7 and 2^8, the data
// sheet's table for a 32.768 kHz base; RS 0: none), counted from the divider start and
// running while the chain runs (also with SET = 1); UF at every update; AF at an update
// whose new time matches the three alarm registers, an alarm byte 0xc0-0xff matching any
// value. IRQF = (PF & PIE) | (AF & AIE) | (UF & UIE); the IRQ line is IRQF (active high
// here, as the ISA IRQ the PC inverts it to), so the edge-triggered 8259 and I/O APIC see
// one rising edge per IRQF 0 -> 1, and reading C lowers it. The interrupt sources are
// TimerEventSources, so the edges happen at exact virtual cycles.
//
// Deviations (documented, deterministic): changing DM or 24/12 re-reads the same time in
// the new format (the chip would keep the old bytes); time fields written with values out
// of range are normalised into the date (second 60 = the next minute); DSE is ignored; the
// square-wave output (SQWE) goes nowhere. Port 0x70 is write-only (reads 0xff); its bit 7
// (NMI disable on a PC) is recorded (nmiMasked()) and otherwise a no-op: nothing on this
// machine raises NMI through the ISA NMI line (no parity or channel-check sources).
// Byte 0x32 (century, BCD or binary per DM) is part of the time: it is kept in step with
// the year, as PC chipsets' RTCs do, and writing it sets the century.
#pragma once
#include "harness/timer_event.h"
#include "mmu/io_bus.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <functional>
#include <string>

namespace vmxsim {

/// 2026-01-01 00:00:00 UTC in seconds since 1970-01-01 00:00:00 UTC.
inline constexpr int64_t kDefaultRtcBase = 1767225600;
/// 9999-12-31 23:59:59 UTC: the last RTC base accepted (Rtc146818::parseBase, Machine).
inline constexpr int64_t kMaxRtcBase = 253402300799;

class Rtc146818 : public PortDevice, public TimerEventSource {
public:
  static constexpr uint16_t kIndexPort = 0x70, kDataPort = 0x71;
  static constexpr unsigned kBytes = 128;
  enum Reg : uint8_t {
    Seconds = 0x00, SecondsAlarm = 0x01, Minutes = 0x02, MinutesAlarm = 0x03, Hours = 0x04,
    HoursAlarm = 0x05, DayOfWeek = 0x06, DayOfMonth = 0x07, Month = 0x08, Year = 0x09,
    RegA = 0x0a, RegB = 0x0b, RegC = 0x0c, RegD = 0x0d, Century = 0x32,
  };
  // Register bits.
  static constexpr uint8_t kUip = 0x80, kSet = 0x80, kPie = 0x40, kAie = 0x20, kUie = 0x10,
                           kBinary = 0x04, k24Hour = 0x02, kIrqf = 0x80, kPf = 0x40,
                           kAf = 0x20, kUf = 0x10;
  static constexpr uint64_t kCyclesPerSecond = 1000000000, kUipCycles = 244000;

  explicit Rtc146818(int64_t BaseSeconds);

  /// The current virtual time (the executing vCPU's Cpu::Cycles); 0 if unset.
  std::function<uint64_t()> Now;
  /// Sets IRQ 8's level (the machine drives the 8259 and the I/O APIC pin from it).
  std::function<void(bool)> Irq;
  /// Whether IRQ 8 can reach a processor; unset = always (TimerEventSource::canWake).
  std::function<bool()> IrqObserved;

  uint32_t ioRead(uint16_t Port, unsigned SizeBytes) override;
  void ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) override;

  uint64_t nextTimerEvent() const override;
  void advanceTo(uint64_t Now) override;
  bool canWake() const override { return !IrqObserved || IrqObserved(); }

  /// A byte as the guest reads it (index 0-127), at the current time; no side effects
  /// (reading C here does not clear it).
  uint8_t peek(uint8_t Index);
  /// Sets a CMOS RAM byte (the machine's standard fields); clock registers are refused.
  void setRam(uint8_t Index, uint8_t Value);
  /// Seconds since 1970 of the clock's date-time now.
  int64_t timeNow();
  bool nmiMasked() const { return NmiMask; }
  uint8_t index() const { return Index; }

  /// Parses an RTC base (the `--rtc-base` option): whole seconds since 1970-01-01
  /// 00:00:00 UTC ("1767225600"), or a UTC date-time "YYYY-MM-DDTHH:MM:SS" (a space may
  /// replace the T; a final Z is allowed), each field in range, years 1970-9999.
  /// Anything else is refused, with Why saying why.
  static bool parseBase(const std::string &S, int64_t &Out, std::string &Why);
  /// Calendar helpers (proleptic Gregorian, UTC): days since 1970-01-01 of a date, and
  /// back. Month 1-12, day 1-31.
  static int64_t daysFromCivil(int64_t Y, unsigned M, unsigned D);
  static void civilFromDays(int64_t Days, int64_t &Y, unsigned &M, unsigned &D);

private:
  uint64_t now() const { return Now ? Now() : 0; }
  bool dividerRunning() const { return (Ram[RegA] & 0x70) == 0x20; }
  bool updating() const { return dividerRunning() && !(Ram[RegB] & kSet); }
  uint64_t updatesUpTo(uint64_t T) const;
  uint64_t nextUpdateAfter(uint64_t T) const;
  uint64_t periodTicks() const;
  uint64_t periodicEventsUpTo(uint64_t T) const;
  uint64_t nextPeriodicAfter(uint64_t T) const;
  int64_t timeAt(uint64_t T) const;
  void fold(uint64_t T);
  uint8_t encode(unsigned V) const;
  unsigned decode(uint8_t V) const;
  uint8_t timeRegister(uint8_t Index, int64_t Secs) const;
  void writeTimeRegister(uint8_t Index, uint8_t Value);
  bool alarmMatches(int64_t Secs) const;
  void updateIrq();
  uint8_t readData();
  void writeData(uint8_t V);

  uint8_t Ram[kBytes] = {};
  uint8_t Index = 0;
  bool NmiMask = false;
  bool IrqLevel = false;
  // Clock state: the time was TimeAtRef at cycle RefCycle; updates happen at FirstUpdate
  // + k * 1e9 (k >= 0) while updating(); the divider chain started at DivBase.
  int64_t TimeAtRef;
  uint64_t RefCycle = 0, FirstUpdate = kCyclesPerSecond, DivBase = 0;
  int64_t DowOffset = 0; ///< day of week = (days since 1970 + 4 + DowOffset) mod 7 + 1
  uint64_t Evaluated = 0; ///< flags in C account for every event up to this cycle
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) {
    snapshotFields(R, *this);
    if (Index >= kBytes) {
      R.fail("the snapshot's RTC index register is out of range");
      Index = 0;
    }
  }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Ram, S.Index, S.NmiMask, S.IrqLevel, S.TimeAtRef, S.RefCycle, S.FirstUpdate,
          S.DivBase, S.DowOffset, S.Evaluated);
  }
};

} // namespace vmxsim
