#include "harness/firmware.h"

#include "harness/acpi_tables.h"
#include "harness/smbios_tables.h"

namespace vmxsim {

std::vector<E820Entry> e820Map(const PhysMem &Mem) {
  std::vector<E820Entry> Map;
  const uint64_t Low = Mem.lowRamBytes(), High = Mem.highRamBytes();
  // Machine::validate guarantees at least 2 MiB, so low RAM always reaches past 1 MiB.
  Map.push_back({0, kEbdaAddr, E820Type::Ram});
  Map.push_back({kEbdaAddr, BiosArea::kEnd - kEbdaAddr, E820Type::Reserved});
  if (Low > BiosArea::kEnd)
    Map.push_back({BiosArea::kEnd, Low - BiosArea::kEnd, E820Type::Ram});
  if (High)
    Map.push_back({PhysMem::kHighRamBase, High, E820Type::Ram});
  return Map;
}

namespace {

void buildBda(std::vector<uint8_t> &Low, const FirmwareConfig &Cfg) {
  const size_t B = kBdaAddr;
  const size_t NumCom = std::min<size_t>(Cfg.ComPorts.size(), 4);
  for (size_t I = 0; I < NumCom; ++I)
    putLe(Low, B + 0x00 + 2 * I, Cfg.ComPorts[I], 2);
  putLe(Low, B + 0x0e, kEbdaAddr >> 4, 2);
  putLe(Low, B + 0x10, (1u << 1) | (NumCom << 9), 2);
  putLe(Low, B + 0x13, kBaseMemoryKiB, 2);
  putLe(Low, B + 0x1a, 0x1e, 2);
  putLe(Low, B + 0x1c, 0x1e, 2);
  putLe(Low, B + 0x80, 0x1e, 2);
  putLe(Low, B + 0x82, 0x3e, 2);
}

} // namespace

Error buildFirmware(PhysMem &Mem, const FirmwareConfig &Cfg) {
  // IVT (SDM Vol. 3A, "Interrupt and Exception Handling in Real-Address Mode"): each
  // vector is offset:segment, F000:FF53 for all 256, then the BDA after it.
  std::vector<uint8_t> Low(0x500, 0);
  for (unsigned V = 0; V < 256; ++V) {
    putLe(Low, 4 * V, kIretStub & 0xffff, 2);
    putLe(Low, 4 * V + 2, 0xf000, 2);
  }
  buildBda(Low, Cfg);
  std::vector<uint8_t> Ebda(kEbdaBytes, 0);
  putLe(Ebda, 0, kEbdaBytes / 1024, 2);
  if (!Mem.copyIn(Hpa(0), Low.data(), Low.size()) ||
      !Mem.copyIn(Hpa(kEbdaAddr), Ebda.data(), Ebda.size()))
    return Error(ErrorCode::BadConfig, "no RAM for the BIOS data areas below 640 KiB");

  BiosArea Area;
  if (!buildAcpiTables(Area, Mem, Cfg))
    return Error(ErrorCode::BadConfig, "the ACPI tables do not fit in the BIOS area");
  if (!buildSmbiosTables(Area, Mem, Cfg))
    return Error(ErrorCode::BadConfig, "the SMBIOS tables do not fit in the BIOS area");
  Area.putAt(kIretStub, {0xcf}); // IRET
  if (!Mem.copyIn(Hpa(BiosArea::kBase), Area.bytes().data(), Area.bytes().size()) ||
      !Mem.setReadOnly(Hpa(BiosArea::kBase), BiosArea::kEnd - BiosArea::kBase))
    return Error(ErrorCode::BadConfig, "no RAM for the BIOS area at 0xe0000");
  return Error::success();
}

} // namespace vmxsim
