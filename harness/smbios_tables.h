// The SMBIOS tables a PC firmware leaves (DMTF DSP0134, System Management BIOS Reference
// Specification 3.x): a 2.1-style 32-bit entry point "_SM_" (version 2.8) and a 3.0 64-bit
// entry point "_SM3_" (version 3.0), both on 16-byte boundaries in 0xF0000-0xFFFFF, point
// to one structure table in the BIOS area:
//   type 0    BIOS Information: vendor "vmxsim", version, release date, the BIOS area
//             as the ROM (segment 0xE000, 128 KiB), "BIOS characteristics not supported"
//   type 1    System Information: "vmxsim" / "vmxsim PC", UUID all zero ("not present")
//   type 4    Processor Information, one per CPU ("CPU n"; central processor, processor
//             ID = CPUID.1 EAX and EDX, 1000 MHz = the 1 GHz virtual clock, populated and
//             enabled, one core and thread, 64-bit capable)
//   type 16   Physical Memory Array (system board, system memory, capacity = the RAM)
//   type 17   Memory Device: one DIMM of the whole RAM
//   type 19   Memory Array Mapped Address: one per RAM block (below the hole, above 4 GiB)
//   type 32   System Boot Information: no errors
//   type 127  End-of-Table
// Structures use the 2.8 layouts (type 4: 0x2A bytes, type 17: 0x28 bytes), which a 3.0
// reader reads too.
#pragma once
#include "harness/bios_area.h"
#include "mmu/phys_mem.h"

namespace vmxsim {

inline constexpr uint64_t kSmbiosEntryAddr = 0xf0030;  ///< "_SM_", 31 bytes
inline constexpr uint64_t kSmbios3EntryAddr = 0xf0050; ///< "_SM3_", 24 bytes

/// Writes the structure table and both entry points into Area; false if it is full.
bool buildSmbiosTables(BiosArea &Area, const PhysMem &Mem, const FirmwareConfig &Cfg);

} // namespace vmxsim
