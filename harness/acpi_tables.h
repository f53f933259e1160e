// The ACPI tables a PC firmware leaves for the operating system to find the processors
// (ACPI Specification 6.5, "ACPI Software Programming Model"): an RSDP (revision 0, i.e.
// ACPI 1.0, found by scanning the BIOS area on 16-byte boundaries), an RSDT with one
// entry, and a MADT ("APIC") with the local APIC address 0xfee00000, the PCAT_COMPAT flag
// (8259 pair present) and one enabled Processor Local APIC entry per CPU (processor UID =
// APIC ID = CPU number), then the I/O APIC (ID 0 at 0xfec00000, GSI base 0) and an
// interrupt source override ISA IRQ0 -> GSI 2 (the PIT on I/O APIC pin 2).
#pragma once
#include "mmu/phys_mem.h"

#include <cstdint>

namespace vmxsim {

inline constexpr uint64_t kAcpiRsdpAddr = 0xf0000; ///< in the BIOS read-only area
inline constexpr uint64_t kAcpiRsdtAddr = 0xf0040;
inline constexpr uint64_t kAcpiMadtAddr = 0xf0080;

/// Writes the tables into guest RAM; false if that memory is not RAM.
bool buildAcpiTables(PhysMem &Mem, unsigned NumCpus);

} // namespace vmxsim
