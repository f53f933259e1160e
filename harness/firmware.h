// The state a PC firmware (SeaBIOS under QEMU is the model) leaves in memory before it
// hands over to a boot loader, for every loader vmxsim has (Multiboot, flat, Linux):
//
//   0x00000-0x003ff  real-mode IVT: all 256 vectors point to an IRET at F000:FF53
//                    (kIretStub, the IBM PC BIOS's "dummy interrupt handler" address)
//   0x00400-0x004ff  BIOS Data Area (fields below, each at its offset from 0x400)
//   0x9fc00-0x9ffff  EBDA (1 KiB; word 0 = its size in KiB), holding the ACPI FACS at
//                    0x9fc40 (harness/acpi_tables.h)
//   0xe0000-0xfffff  BIOS area, read-only to the guest (PhysMem::setReadOnly): the ACPI
//                    tables from 0xe0000 up, the SMBIOS structure table after them, the
//                    RSDP at 0xf0000, the SMBIOS entry points at 0xf0030 ("_SM_") and
//                    0xf0050 ("_SM3_"), the IRET stub at 0xfff53.
//
// BIOS Data Area (IBM PC/AT BIOS technical reference; what SeaBIOS fills and a kernel
// reads):
//   0x00  4 words  COM1..COM4 base ports (0x3f8, then 0x2f8, ... for each UART present,
//                  0 for the rest)
//   0x08  3 words  LPT1..LPT3 base ports: 0 (no parallel port)
//   0x0e  word     EBDA segment: 0x9fc0 (Linux and Xen read it to find the EBDA)
//   0x10  word     equipment list: bit 1 x87 present, bits 11:9 number of serial ports
//                  (no floppy, video bits 00 = none/EGA-VGA, no parallel port)
//   0x13  word     base memory size in KiB: 639 (conventional memory below the EBDA;
//                  Linux's reserve_bios_regions and Xen's trampoline placement read it)
//   0x1a  word     keyboard buffer head: 0x1e (empty buffer, offsets from 0x400)
//   0x1c  word     keyboard buffer tail: 0x1e
//   0x6c  dword    timer ticks since midnight: 0, static (no INT 8 handler updates it)
//   0x70  byte     timer overflow (midnight) flag: 0
//   0x72  word     soft-reset flag: 0 (cold boot)
//   0x80  word     keyboard buffer start: 0x1e
//   0x82  word     keyboard buffer end: 0x3e
// Every other byte of the BDA is 0.
//
// The memory map (e820Map) is the one description of what is RAM that every loader hands
// to the guest.
#pragma once
#include "harness/bios_area.h"
#include "harness/error.h"
#include "mmu/phys_mem.h"

#include <cstdint>
#include <vector>

namespace vmxsim {

inline constexpr uint64_t kBdaAddr = 0x400;
inline constexpr uint64_t kEbdaAddr = 0x9fc00, kEbdaBytes = 0x400;
inline constexpr uint64_t kIretStub = 0xfff53;        ///< F000:FF53
inline constexpr uint16_t kBaseMemoryKiB = 0x9fc00 / 1024; ///< 639

/// ACPI 6.5, "System Address Map Interfaces" > "Address Range Types".
enum class E820Type : uint32_t { Ram = 1, Reserved = 2, Acpi = 3, Nvs = 4, Unusable = 5 };

struct E820Entry {
  uint64_t Base = 0, SizeBytes = 0;
  E820Type Type = E820Type::Ram;
  bool operator==(const E820Entry &) const = default;
};

/// The machine's memory map, sorted, entries neither overlapping nor adjacent with the
/// same type (what INT 15h E820 returns on a PC):
///   [0, 0x9fc00)                RAM (conventional memory)
///   [0x9fc00, 0x100000)         reserved: EBDA, VGA window, option ROMs, BIOS area
///   [1 MiB, low RAM end)        RAM (all RAM below 3.5 GiB, else 3 GiB: PhysMem)
///   [4 GiB, 4 GiB + high RAM)   RAM, when RAM exceeds 3.5 GiB (PhysMem::kHighRamBase)
/// The 32-bit PCI hole between the end of low RAM and 4 GiB (the I/O APIC, HPET and local
/// APIC live there) is left out, as SeaBIOS leaves it: operating systems look for that
/// gap to place PCI devices. No ACPI (3) or NVS (4) ranges: the ACPI tables are in the
/// BIOS area and the FACS in the EBDA, both inside the reserved range.
std::vector<E820Entry> e820Map(const PhysMem &Mem);

/// Writes the IVT, BDA, EBDA, ACPI and SMBIOS tables and the BIOS area, then makes the
/// BIOS area read-only. Called once, before a loader runs. Fails with ErrorCode::BadConfig
/// if the tables do not fit (they do for every configuration Machine::validate accepts).
Error buildFirmware(PhysMem &Mem, const FirmwareConfig &Cfg);

} // namespace vmxsim
