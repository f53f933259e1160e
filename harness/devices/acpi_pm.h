// The ACPI fixed-hardware power-management registers (ACPI Specification 6.5, "ACPI
// Hardware Specification" > "ACPI Register Model" > "Fixed Hardware Registers"), at the
// I/O ports the FADT gives (harness/acpi_tables.cpp):
//   0x600 PM1a_STS (16 bits)  TMR_STS (bit 0) is set when bit 23 of the PM timer
//                             changes; every status bit is cleared by writing 1 to it.
//                             The other events (power/sleep button, RTC alarm, global
//                             lock release, wake) never happen on this machine.
//   0x602 PM1a_EN  (16 bits)  read-write enables (TMR_EN, GBL_EN, PWRBTN_EN, SLPBTN_EN,
//                             RTC_EN, PCIEXP_WAKE_DIS); the rest read 0.
//   0x604 PM1a_CNT (16 bits)  SCI_EN (bit 0) reads 1 and ignores writes: the FADT has no
//                             SMI_CMD port, so the machine is in ACPI mode from reset
//                             ("System Control Interrupt (SCI)": with SMI_CMD zero the
//                             OS does not transition). BM_RLD (bit 1) and SLP_TYP (bits
//                             12:10) read back; GBL_RLS (bit 2) and SLP_EN (bit 13) are
//                             write-only and read 0. Writing SLP_EN = 1 with SLP_TYP =
//                             kSlpTypS5 (the \_S5 package of the DSDT) enters the soft-off
//                             state: the run stops with StopCause::PowerOff, status 0, as
//                             the power-off port 0x8900 does (system_ports.h). SLP_EN with
//                             any other SLP_TYP names a sleep state the DSDT does not
//                             offer (no \_S1..\_S4) and changes nothing.
//   0x606-0x607               unassigned (all-ones, as the bus returns for no device).
//   0x608 PM_TMR   (32 bits)  the 24-bit ACPI PM timer (TMR_VAL_EXT clear in the FADT),
//                             bits 31:24 read 0, writes ignored.
// Any register may be accessed as bytes, words or dwords (each byte on its own).
//
// Clock: the timer counts at kPmTimerHz = 3 579 545 Hz from the virtual clock the PIT
// uses (harness/devices/pit8254.h: the executing vCPU's Cpu::Cycles, defined to run at
// Pit8254::kVirtualHz = 1 GHz). At virtual cycle T it has counted
//   Ticks(T) = floor(T * kPmTimerHz / kVirtualHz)
// (exact 128-bit integer arithmetic), and PM_TMR reads Ticks(T) mod 2^24. T is the clock
// of the vCPU that executes the IN instruction, so the value is deterministic.
//
// Not modelled: the SCI (IRQ 9) is never raised. The only event that can become
// pending is TMR_STS, and an OS that sets TMR_EN does not get an interrupt for it (Linux
// and Xen use the timer as a free-running counter and never enable it). No GPE blocks.
#pragma once
#include "harness/devices/stop_latch.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <functional>

namespace vmxsim {

class AcpiPm : public PortDevice {
public:
  static constexpr uint16_t kBase = 0x600, kSize = 12;
  static constexpr uint16_t kPm1aEvt = 0x600, kPm1aCnt = 0x604, kPmTmr = 0x608;
  static constexpr uint8_t kPm1EvtLen = 4, kPm1CntLen = 2, kPmTmrLen = 4;
  static constexpr uint64_t kPmTimerHz = 3579545;
  /// SLP_TYP of the soft-off state (the DSDT's \_S5 package): 111b, as the Intel
  /// ICH/PCH PM1_CNT encodes S5.
  static constexpr uint8_t kSlpTypS5 = 7;

  // PM1 status/enable and control bits (ACPI 6.5, "PM1 Event Registers", "PM1 Control
  // Registers").
  static constexpr uint16_t kTmrSts = 1u << 0, kStsWritable = 0xc731; // every defined bit
  static constexpr uint16_t kEnWritable = 0x4721;
  static constexpr uint16_t kSciEn = 1u << 0, kBmRld = 1u << 1, kSlpEn = 1u << 13;

  explicit AcpiPm(StopLatch &Latch) : Latch(Latch) {}

  /// The current virtual time (the executing vCPU's Cpu::Cycles); 0 if unset.
  std::function<uint64_t()> Now;

  /// Ticks of the PM timer after Cycles virtual cycles.
  static uint64_t ticksAt(uint64_t Cycles);

  uint32_t ioRead(uint16_t Port, unsigned SizeBytes) override;
  void ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) override;

  uint16_t status() const;
  uint16_t enable() const { return En; }
  uint16_t control() const { return Cnt; }

private:
  uint8_t readByte(unsigned Offset) const;
  void writeByte(unsigned Offset, uint8_t V);
  uint64_t now() const { return Now ? Now() : 0; }

  StopLatch &Latch;
  uint16_t Sts = 0;          ///< status bits other than TMR_STS (none ever set)
  uint64_t TmrClearedAt = 0; ///< PM timer ticks when TMR_STS was last cleared
  uint16_t En = 0;
  uint16_t Cnt = kSciEn;
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Sts, S.TmrClearedAt, S.En, S.Cnt);
  }
};

} // namespace vmxsim
