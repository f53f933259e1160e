#include "harness/devices/local_apic.h"

namespace vmxsim {

void LocalApic::reset() {
  for (uint32_t &R : Regs)
    R = 0;
  Regs[Id >> 4] = ApicId << 24;
  Regs[Version >> 4] = 0x00050014;
  Regs[Dfr >> 4] = 0xffffffff;
  Regs[Svr >> 4] = 0xff;
  for (uint32_t Lvt = LvtTimer; Lvt <= LvtError; Lvt += 0x10)
    Regs[Lvt >> 4] = 0x00010000;
}

bool LocalApic::readOnly(uint32_t Offset) {
  return Offset == Version || Offset == Apr || Offset == Ppr ||
         (Offset >= Isr0 && Offset < Esr) || Offset == TimerCurrent;
}

uint64_t LocalApic::mmioRead(uint64_t Offset, unsigned SizeBytes) {
  // Registers are 32 bits wide at the start of each 16-byte slot; bytes 4-15 of a slot
  // read 0. Accesses narrower or wider than 4 bytes are composed byte by byte.
  uint64_t V = 0;
  for (unsigned I = 0; I < SizeBytes; ++I) {
    uint64_t A = (Offset + I) & (kSize - 1);
    uint32_t Byte = (A & 0xf) < 4 ? (Regs[A >> 4] >> (8 * (A & 3))) & 0xff : 0;
    V |= uint64_t(Byte) << (8 * I);
  }
  return V;
}

void LocalApic::mmioWrite(uint64_t Offset, unsigned SizeBytes, uint64_t Value) {
  for (unsigned I = 0; I < SizeBytes; ++I) {
    uint64_t A = (Offset + I) & (kSize - 1);
    if ((A & 0xf) >= 4 || readOnly(uint32_t(A & ~0xfull)))
      continue;
    unsigned Shift = 8 * unsigned(A & 3);
    uint32_t &R = Regs[A >> 4];
    R = (R & ~(0xffu << Shift)) | (uint32_t((Value >> (8 * I)) & 0xff) << Shift);
  }
}

} // namespace vmxsim
