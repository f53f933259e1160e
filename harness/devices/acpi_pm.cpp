#include "harness/devices/acpi_pm.h"

#include "harness/devices/pit8254.h"

namespace vmxsim {

uint64_t AcpiPm::ticksAt(uint64_t Cycles) {
  return uint64_t((unsigned __int128)Cycles * kPmTimerHz / Pit8254::kVirtualHz);
}

uint16_t AcpiPm::status() const {
  // ACPI 6.5, "PM1 Event Registers": TMR_STS "is set any time the last bit of the timer
  // (bit 23) goes from 0 to 1 or 1 to 0", i.e. each time Ticks crosses a multiple of 2^23.
  const bool Toggled = (ticksAt(now()) >> 23) != (TmrClearedAt >> 23);
  return uint16_t(Sts | (Toggled ? kTmrSts : 0));
}

uint8_t AcpiPm::readByte(unsigned Offset) const {
  switch (Offset) {
  case 0:
  case 1:
    return uint8_t(status() >> (8 * Offset));
  case 2:
  case 3:
    return uint8_t(En >> (8 * (Offset - 2)));
  case 4:
  case 5:
    return uint8_t(Cnt >> (8 * (Offset - 4)));
  case 8:
  case 9:
  case 10:
    return uint8_t(ticksAt(now()) >> (8 * (Offset - 8)));
  case 11:
    return 0; // TMR_VAL bits 31:24 with a 24-bit timer
  default:
    return 0xff;
  }
}

void AcpiPm::writeByte(unsigned Offset, uint8_t V) {
  switch (Offset) {
  case 0:
  case 1: {
    const uint16_t Clear = uint16_t(uint16_t(V) << (8 * Offset)) & kStsWritable;
    if (Clear & kTmrSts)
      TmrClearedAt = ticksAt(now());
    Sts = uint16_t(Sts & ~Clear);
    break;
  }
  case 2:
  case 3: {
    const unsigned Shift = 8 * (Offset - 2);
    En = uint16_t((En & ~(0xffu << Shift)) | ((unsigned(V) << Shift) & kEnWritable));
    break;
  }
  case 4:
    Cnt = uint16_t((Cnt & 0xff00) | kSciEn | (V & kBmRld));
    break;
  case 5: {
    // SLP_TYP (bits 12:10) is stored; SLP_EN (bit 13) acts and reads 0.
    const uint16_t High = uint16_t(V) << 8;
    Cnt = uint16_t((Cnt & 0x00ff) | (High & 0x1c00));
    if ((High & kSlpEn) && ((Cnt >> 10) & 7) == kSlpTypS5)
      Latch.request(StopCause::PowerOff, kPm1aCnt, 0);
    break;
  }
  default:
    break; // the timer and the unassigned bytes ignore writes
  }
}

uint32_t AcpiPm::ioRead(uint16_t Port, unsigned SizeBytes) {
  uint32_t V = 0;
  for (unsigned I = 0; I < SizeBytes; ++I) {
    const unsigned Off = unsigned(Port - kBase) + I;
    V |= uint32_t(Off < kSize ? readByte(Off) : 0xff) << (8 * I);
  }
  return V;
}

void AcpiPm::ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) {
  for (unsigned I = 0; I < SizeBytes; ++I) {
    const unsigned Off = unsigned(Port - kBase) + I;
    if (Off < kSize)
      writeByte(Off, uint8_t(Value >> (8 * I)));
  }
}

} // namespace vmxsim
