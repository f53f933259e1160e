#include "harness/acpi_tables.h"

#include <cstring>
#include <vector>

namespace vmxsim {

namespace {
void put(std::vector<uint8_t> &B, size_t Off, uint64_t V, unsigned Bytes) {
  for (unsigned I = 0; I < Bytes; ++I)
    B[Off + I] = uint8_t(V >> (8 * I));
}
/// Makes the bytes sum to 0 mod 256 by setting the checksum byte at ChecksumOff.
void checksum(std::vector<uint8_t> &B, size_t ChecksumOff, size_t Len) {
  uint8_t Sum = 0;
  B[ChecksumOff] = 0;
  for (size_t I = 0; I < Len; ++I)
    Sum = uint8_t(Sum + B[I]);
  B[ChecksumOff] = uint8_t(-Sum);
}
/// ACPI 6.5, "System Description Table Header" (36 bytes).
std::vector<uint8_t> header(const char *Sig, size_t Len, uint8_t Revision) {
  std::vector<uint8_t> B(Len, 0);
  std::memcpy(&B[0], Sig, 4);
  put(B, 4, Len, 4);
  B[8] = Revision;
  std::memcpy(&B[10], "VMXSIM", 6);
  std::memcpy(&B[16], "VMXSIMPC", 8);
  put(B, 24, 1, 4);              // OEM revision
  std::memcpy(&B[28], "VMXS", 4); // creator ID
  put(B, 32, 1, 4);              // creator revision
  return B;
}
} // namespace

bool buildAcpiTables(PhysMem &Mem, unsigned NumCpus) {
  // ACPI 6.5, "Root System Description Pointer (RSDP) Structure": revision 0 is the
  // 20-byte ACPI 1.0 form whose checksum covers those 20 bytes.
  std::vector<uint8_t> Rsdp(20, 0);
  std::memcpy(&Rsdp[0], "RSD PTR ", 8);
  std::memcpy(&Rsdp[9], "VMXSIM", 6);
  Rsdp[15] = 0;
  put(Rsdp, 16, kAcpiRsdtAddr, 4);
  checksum(Rsdp, 8, 20);

  std::vector<uint8_t> Rsdt = header("RSDT", 36 + 4, 1);
  put(Rsdt, 36, kAcpiMadtAddr, 4);
  checksum(Rsdt, 9, Rsdt.size());

  // ACPI 6.5, "Multiple APIC Description Table (MADT)" and "Processor Local APIC
  // Structure" (type 0, length 8: UID, APIC ID, flags bit 0 = enabled).
  // Then one I/O APIC Structure (type 1, length 12: ID 0, address 0xfec00000, GSI base
  // 0) and an Interrupt Source Override (type 2, length 10: ISA IRQ0 -> GSI 2, flags 0 =
  // bus-conforming polarity and trigger), as the PIT is wired (harness/devices/pit8254.h).
  const size_t IoApicOff = 44 + 8 * size_t(NumCpus);
  std::vector<uint8_t> Madt = header("APIC", IoApicOff + 12 + 10, 1);
  put(Madt, 36, 0xfee00000, 4);
  put(Madt, 40, 1, 4); // PCAT_COMPAT
  for (unsigned I = 0; I < NumCpus; ++I) {
    size_t Off = 44 + 8 * size_t(I);
    Madt[Off] = 0;
    Madt[Off + 1] = 8;
    Madt[Off + 2] = uint8_t(I);
    Madt[Off + 3] = uint8_t(I);
    put(Madt, Off + 4, 1, 4);
  }
  Madt[IoApicOff] = 1;
  Madt[IoApicOff + 1] = 12;
  Madt[IoApicOff + 2] = 0; // I/O APIC ID (the IoApic's ID register resets to 0)
  put(Madt, IoApicOff + 4, 0xfec00000, 4);
  put(Madt, IoApicOff + 8, 0, 4);
  const size_t IsoOff = IoApicOff + 12;
  Madt[IsoOff] = 2;
  Madt[IsoOff + 1] = 10;
  Madt[IsoOff + 2] = 0; // bus: ISA
  Madt[IsoOff + 3] = 0; // source: IRQ0
  put(Madt, IsoOff + 4, 2, 4);
  put(Madt, IsoOff + 8, 0, 2);
  checksum(Madt, 9, Madt.size());

  return Mem.copyIn(Hpa(kAcpiRsdpAddr), Rsdp.data(), Rsdp.size()) &&
         Mem.copyIn(Hpa(kAcpiRsdtAddr), Rsdt.data(), Rsdt.size()) &&
         Mem.copyIn(Hpa(kAcpiMadtAddr), Madt.data(), Madt.size());
}

} // namespace vmxsim
