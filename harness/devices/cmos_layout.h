// The standard PC fields of the CMOS RAM (IBM PC AT Technical Reference, "CMOS RAM Address
// Map"; the memory fields above 16 MiB and 4 GiB as SeaBIOS reads them on QEMU's pc
// machine, src/fw/paravirt.c and src/hw/rtc.h), filled at power-on:
//   0x0f shutdown status          0 (normal power-on)
//   0x10 diskette drive types     0 (no drives)
//   0x12 fixed disk types         0 (no disks)
//   0x14 equipment byte           0x02: math coprocessor present, primary display EGA/VGA
//                                 (bits 5-4 = 00), no diskette, no PS/2 mouse
//   0x15/0x16 base memory KiB     640 (0x0280), low byte first
//   0x17/0x18, 0x30/0x31          memory above 1 MiB in KiB, up to 65535
//   0x2e/0x2f                     checksum (big-endian sum of 0x10-0x2d)
//   0x32 century                  kept by the clock (harness/devices/rtc146818.h)
//   0x34/0x35                     RAM from 16 MiB to the low-RAM limit, 64 KiB units, up
//                                 to 0xffff
//   0x5b/0x5c/0x5d                RAM above 4 GiB in 64 KiB units (low, middle, high byte)
//   0x5f                          number of CPUs - 1 (SeaBIOS's CMOS_BIOS_SMP_COUNT)
#pragma once
#include "harness/devices/rtc146818.h"

#include <algorithm>
#include <cstdint>

namespace vmxsim {

inline void fillCmosLayout(Rtc146818 &Rtc, uint64_t LowRamBytes, uint64_t HighRamBytes,
                           unsigned NumCpus) {
  auto set16 = [&](uint8_t Lo, uint64_t V) {
    Rtc.setRam(Lo, uint8_t(V));
    Rtc.setRam(uint8_t(Lo + 1), uint8_t(V >> 8));
  };
  Rtc.setRam(0x0f, 0);
  Rtc.setRam(0x10, 0);
  Rtc.setRam(0x12, 0);
  Rtc.setRam(0x14, 0x02);
  set16(0x15, 640);
  const uint64_t ExtKiB =
      LowRamBytes > (1u << 20) ? std::min<uint64_t>((LowRamBytes >> 10) - 1024, 0xffff) : 0;
  set16(0x17, ExtKiB);
  set16(0x30, ExtKiB);
  const uint64_t Above16M =
      LowRamBytes > (16u << 20) ? std::min<uint64_t>((LowRamBytes - (16u << 20)) >> 16, 0xffff)
                                : 0;
  set16(0x34, Above16M);
  const uint64_t Above4G = HighRamBytes >> 16;
  Rtc.setRam(0x5b, uint8_t(Above4G));
  Rtc.setRam(0x5c, uint8_t(Above4G >> 8));
  Rtc.setRam(0x5d, uint8_t(Above4G >> 16));
  Rtc.setRam(0x5f, uint8_t(NumCpus - 1));
  unsigned Sum = 0;
  for (uint8_t I = 0x10; I <= 0x2d; ++I)
    Sum += Rtc.peek(I);
  Rtc.setRam(0x2e, uint8_t(Sum >> 8));
  Rtc.setRam(0x2f, uint8_t(Sum));
}

} // namespace vmxsim
