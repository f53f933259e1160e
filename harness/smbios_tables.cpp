#include "harness/smbios_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace vmxsim {

namespace {

/// One structure: the formatted area (type, length, handle, fields), then its strings,
/// each NUL-terminated, and a final NUL (two NULs when it has none). DSP0134, "Structure
/// Standards" > "Text strings".
struct Structure {
  std::vector<uint8_t> B;
  std::vector<std::string> Strings;
  Structure(uint8_t Type, uint8_t Length, uint16_t Handle) : B(Length, 0) {
    B[0] = Type;
    B[1] = Length;
    putLe(B, 2, Handle, 2);
  }
  void put(size_t Off, uint64_t V, unsigned Bytes) { putLe(B, Off, V, Bytes); }
  /// Adds a string and stores its number (from 1) at Off.
  void str(size_t Off, std::string S) {
    Strings.push_back(std::move(S));
    B[Off] = uint8_t(Strings.size());
  }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> Out = B;
    for (const std::string &S : Strings) {
      Out.insert(Out.end(), S.begin(), S.end());
      Out.push_back(0);
    }
    if (Strings.empty())
      Out.push_back(0);
    Out.push_back(0);
    return Out;
  }
};

} // namespace

bool buildSmbiosTables(BiosArea &Area, const PhysMem &Mem, const FirmwareConfig &Cfg) {
  std::vector<Structure> S;
  uint16_t Handle = 0;

  // DSP0134, "BIOS Information (Type 0)", 2.4+ layout (0x18 bytes).
  Structure Bios(0, 0x18, Handle++);
  Bios.str(0x04, "vmxsim");
  Bios.str(0x05, "vmxsim firmware 1");
  Bios.put(0x06, BiosArea::kBase >> 4, 2); // BIOS starting address segment
  Bios.str(0x08, "01/01/2026");
  Bios.B[0x09] = uint8_t((BiosArea::kEnd - BiosArea::kBase) / 65536 - 1); // 64K * (n + 1)
  Bios.put(0x0a, 1u << 3, 8); // "BIOS Characteristics are not supported"
  Bios.B[0x14] = 0xff;        // system BIOS major/minor release: not supported
  Bios.B[0x15] = 0xff;
  Bios.B[0x16] = 0xff; // embedded controller firmware: none
  Bios.B[0x17] = 0xff;
  S.push_back(Bios);

  // "System Information (Type 1)", 2.4+ layout (0x1B bytes). UUID 16 zero bytes: "the
  // ID is not present in the system". Wake-up type 6: power switch.
  Structure Sys(1, 0x1b, Handle++);
  Sys.str(0x04, "vmxsim");
  Sys.str(0x05, "vmxsim PC");
  Sys.str(0x06, "1");
  Sys.B[0x18] = 6;
  S.push_back(Sys);

  // "Processor Information (Type 4)", 2.6+ layout (0x2A bytes).
  for (unsigned I = 0; I < Cfg.NumCpus; ++I) {
    Structure P(4, 0x2a, Handle++);
    P.str(0x04, fmt::format("CPU {}", I));
    P.B[0x05] = 3;    // central processor
    P.B[0x06] = 0xfe; // family: see Processor Family 2
    P.str(0x07, "GenuineIntel");
    P.put(0x08, Cfg.CpuidSignature, 4); // processor ID: CPUID.1 EAX, EDX
    P.put(0x0c, Cfg.CpuidFeatures, 4);
    P.str(0x10, "vmxsim virtual processor");
    P.put(0x12, 0, 2);      // external clock: unknown
    P.put(0x14, 1000, 2);   // max speed, MHz
    P.put(0x16, 1000, 2);   // current speed, MHz
    P.B[0x18] = 0x41;       // socket populated, CPU enabled
    P.B[0x19] = 0x01;       // upgrade: other
    P.put(0x1a, 0xffff, 2); // no L1/L2/L3 cache information
    P.put(0x1c, 0xffff, 2);
    P.put(0x1e, 0xffff, 2);
    P.B[0x23] = 1; // core count
    P.B[0x24] = 1; // cores enabled
    P.B[0x25] = 1; // thread count
    P.put(0x26, 1u << 2, 2); // characteristics: 64-bit capable
    P.put(0x28, 0x01, 2);    // processor family 2: other
    S.push_back(P);
  }

  // "Physical Memory Array (Type 16)", 2.7+ layout (0x17 bytes): location system board
  // (3), use system memory (3), error correction none (3), maximum capacity in KiB.
  const uint16_t ArrayHandle = Handle;
  Structure Array(16, 0x17, Handle++);
  Array.B[0x04] = 3;
  Array.B[0x05] = 3;
  Array.B[0x06] = 3;
  Array.put(0x07, Mem.ramSizeBytes() / 1024, 4); // at most 64 GiB: fits
  Array.put(0x0b, 0xfffe, 2);                    // no error information
  Array.put(0x0d, 1, 2);                         // one memory device
  S.push_back(Array);

  // "Memory Device (Type 17)", 2.8 layout (0x28 bytes). Size: MiB in bits 14:0 up to
  // 0x7ffe; KiB with bit 15 set for sizes below 32 MiB that are not whole MiB; 0x7fff
  // and the extended size in MiB otherwise (the RAM is a multiple of 4 KiB: a large
  // size that is not whole MiB is rounded down).
  Structure Dimm(17, 0x28, Handle++);
  const uint64_t Ram = Mem.ramSizeBytes(), RamMiB = Ram >> 20;
  Dimm.put(0x04, ArrayHandle, 2);
  Dimm.put(0x06, 0xfffe, 2); // no error information
  Dimm.put(0x08, 0xffff, 2); // total width: unknown
  Dimm.put(0x0a, 0xffff, 2); // data width: unknown
  if (Ram % (1u << 20) && Ram < (32u << 20))
    Dimm.put(0x0c, 0x8000 | (Ram >> 10), 2);
  else if (RamMiB <= 0x7ffe)
    Dimm.put(0x0c, RamMiB, 2);
  else {
    Dimm.put(0x0c, 0x7fff, 2);
    Dimm.put(0x1c, RamMiB, 4);
  }
  Dimm.B[0x0e] = 0x09; // form factor: DIMM
  Dimm.str(0x10, "DIMM 0");
  Dimm.B[0x12] = 0x07;        // memory type: RAM
  Dimm.put(0x13, 1u << 1, 2); // type detail: other
  S.push_back(Dimm);

  // "Memory Array Mapped Address (Type 19)", 2.7+ layout (0x1F bytes): starting and
  // ending (inclusive) address in KiB, the array's handle, partition width 1.
  auto Mapped = [&](uint64_t Base, uint64_t Bytes) {
    Structure M(19, 0x1f, Handle++);
    M.put(0x04, Base >> 10, 4);
    M.put(0x08, ((Base + Bytes) >> 10) - 1, 4);
    M.put(0x0c, ArrayHandle, 2);
    M.B[0x0e] = 1;
    S.push_back(M);
  };
  Mapped(0, Mem.lowRamBytes());
  if (Mem.highRamBytes())
    Mapped(PhysMem::kHighRamBase, Mem.highRamBytes());

  // "System Boot Information (Type 32)": six reserved bytes, boot status 0 (no errors).
  S.push_back(Structure(32, 0x0b, Handle++));
  // "End-of-Table (Type 127)".
  S.push_back(Structure(127, 4, Handle++));

  std::vector<uint8_t> Table;
  size_t MaxSize = 0;
  for (const Structure &X : S) {
    const std::vector<uint8_t> B = X.bytes();
    MaxSize = std::max(MaxSize, B.size());
    Table.insert(Table.end(), B.begin(), B.end());
  }
  const uint64_t TableAt = Area.place(Table, 16);
  if (!TableAt)
    return false;

  // DSP0134, "SMBIOS 2.1 (32-bit) Entry Point": anchor "_SM_", checksum over the 31
  // bytes, length 0x1f, version 2.8, maximum structure size, entry point revision 0,
  // intermediate anchor "_DMI_", intermediate checksum over bytes 0x10-0x1e, table
  // length, table address, number of structures, BCD revision 0x28.
  std::vector<uint8_t> Ep(0x1f, 0);
  std::memcpy(&Ep[0], "_SM_", 4);
  Ep[5] = 0x1f;
  Ep[6] = 2;
  Ep[7] = 8;
  putLe(Ep, 8, MaxSize, 2);
  std::memcpy(&Ep[0x10], "_DMI_", 5);
  putLe(Ep, 0x16, Table.size(), 2);
  putLe(Ep, 0x18, TableAt, 4);
  putLe(Ep, 0x1c, S.size(), 2);
  Ep[0x1e] = 0x28;
  setChecksum(Ep, 0x15, 0x10, 0x0f);
  setChecksum(Ep, 4, 0, 0x1f);
  Area.putAt(kSmbiosEntryAddr, Ep);

  // "SMBIOS 3.0 (64-bit) Entry Point": anchor "_SM3_", checksum, length 0x18, version
  // 3.0.0, entry point revision 1, structure table maximum size, table address.
  std::vector<uint8_t> Ep3(0x18, 0);
  std::memcpy(&Ep3[0], "_SM3_", 5);
  Ep3[6] = 0x18;
  Ep3[7] = 3;
  Ep3[8] = 0;
  Ep3[9] = 0;
  Ep3[0x0a] = 1;
  putLe(Ep3, 0x0c, Table.size(), 4);
  putLe(Ep3, 0x10, TableAt, 8);
  setChecksum(Ep3, 5, 0, 0x18);
  Area.putAt(kSmbios3EntryAddr, Ep3);
  return true;
}

} // namespace vmxsim
