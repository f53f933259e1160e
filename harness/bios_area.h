// The firmware's picture of the machine and the BIOS area it writes (0xE0000-0xFFFFF),
// shared by harness/firmware.cpp, harness/acpi_tables.cpp and harness/smbios_tables.cpp.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

namespace vmxsim {

/// What the firmware describes. The machine fills it from what it built
/// (Machine::init, harness/machine.cpp).
struct FirmwareConfig {
  unsigned NumCpus = 1;
  /// Base ports of the 16550 UARTs present, COM1 first (at most four are listed).
  std::vector<uint16_t> ComPorts = {0x3f8};
  /// An HPET at kHpetBase (ACPI HPET table and PNP0103 device).
  bool Hpet = false;
  /// CPUID.1 EAX (signature) and EDX (features) for SMBIOS processor records.
  uint32_t CpuidSignature = 0, CpuidFeatures = 0;
};

inline constexpr uint64_t kHpetBase = 0xfed00000;

/// A host-side image of the BIOS area [kBase, kEnd), written by the firmware builders
/// and copied into guest memory once, before it is made read-only.
class BiosArea {
public:
  static constexpr uint64_t kBase = 0xe0000, kEnd = 0x100000;
  /// Tables are allocated upwards from kBase up to kTablesEnd; the segment above holds
  /// the fixed-address structures (RSDP, SMBIOS entry points, the IRET stub).
  static constexpr uint64_t kTablesEnd = 0xf0000;

  BiosArea() : Bytes(kEnd - kBase, 0) {}
  /// Copies B to the next free address aligned to Align; returns that guest-physical
  /// address, or 0 when the table area is full.
  uint64_t place(const std::vector<uint8_t> &B, uint64_t Align) {
    const uint64_t At = (Next + Align - 1) & ~(Align - 1);
    if (At + B.size() > kTablesEnd)
      return 0;
    putAt(At, B);
    Next = At + B.size();
    return At;
  }
  /// Writes B at guest-physical At (inside the area).
  void putAt(uint64_t At, const std::vector<uint8_t> &B) {
    std::memcpy(&Bytes[At - kBase], B.data(), B.size());
  }
  const std::vector<uint8_t> &bytes() const { return Bytes; }

private:
  std::vector<uint8_t> Bytes;
  uint64_t Next = kBase;
};

/// Little-endian stores and the byte-sum checksum of ACPI and SMBIOS structures.
inline void putLe(std::vector<uint8_t> &B, size_t Off, uint64_t V, unsigned Bytes) {
  for (unsigned I = 0; I < Bytes; ++I)
    B[Off + I] = uint8_t(V >> (8 * I));
}
/// Sets B[ChecksumOff] so that bytes [From, From + Len) sum to 0 mod 256.
inline void setChecksum(std::vector<uint8_t> &B, size_t ChecksumOff, size_t From, size_t Len) {
  uint8_t Sum = 0;
  B[ChecksumOff] = 0;
  for (size_t I = From; I < From + Len; ++I)
    Sum = uint8_t(Sum + B[I]);
  B[ChecksumOff] = uint8_t(-Sum);
}

} // namespace vmxsim
