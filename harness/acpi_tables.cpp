#include "harness/acpi_tables.h"

#include "harness/aml.h"
#include "harness/devices/acpi_pm.h"
#include "harness/devices/ioapic.h"
#include "harness/devices/local_apic.h"

#include <fmt/format.h>

#include <cstring>

namespace vmxsim {

namespace {

constexpr size_t kHeaderBytes = 36;

/// ACPI 6.5, "System Description Table Header" (36 bytes); the checksum is set by
/// finish() once the body is written.
std::vector<uint8_t> header(const char *Sig, size_t Len, uint8_t Revision) {
  std::vector<uint8_t> B(Len, 0);
  std::memcpy(&B[0], Sig, 4);
  putLe(B, 4, Len, 4);
  B[8] = Revision;
  std::memcpy(&B[10], "VMXSIM", 6);
  std::memcpy(&B[16], "VMXSIMPC", 8);
  putLe(B, 24, 1, 4);              // OEM revision
  std::memcpy(&B[28], "VMXS", 4); // creator ID
  putLe(B, 32, 1, 4);              // creator revision
  return B;
}
std::vector<uint8_t> finish(std::vector<uint8_t> B) {
  putLe(B, 4, B.size(), 4);
  setChecksum(B, 9, 0, B.size());
  return B;
}

/// ACPI 6.5, "Generic Address Structure (GAS)": address space (0 memory, 1 system I/O),
/// register bit width, bit offset, access size (1 byte, 2 word, 3 dword, 4 qword).
void putGas(std::vector<uint8_t> &B, size_t Off, uint8_t Space, uint8_t Bits, uint8_t Access,
            uint64_t Addr) {
  B[Off] = Space;
  B[Off + 1] = Bits;
  B[Off + 2] = 0;
  B[Off + 3] = Access;
  putLe(B, Off + 4, Addr, 8);
}
constexpr uint8_t kGasMemory = 0, kGasIo = 1;

// ACPI 6.5, "Differentiated System Description Table (DSDT)": a definition block of
// AML. Revision 2: integers are 64 bits.
std::vector<uint8_t> buildDsdt(const PhysMem &Mem, const FirmwareConfig &Cfg) {
  aml::Builder A;
  A.scope("\\_SB", [&](aml::Builder &Sb) {
    // ACPI 6.5, "PCI Host Bridge" devices: _HID PNP0A03, the bus numbers, I/O and
    // memory ranges it forwards (everything the machine does not claim itself: the I/O
    // space but the configuration ports, the VGA window and the 32-bit hole up to the
    // I/O APIC).
    Sb.device("PCI0", [&](aml::Builder &P) {
      P.nameEisaId("_HID", "PNP0A03");
      P.nameInteger("_UID", 0);
      P.nameInteger("_BBN", 0);
      P.nameBuffer("_CRS", aml::Resources()
                               .wordBusNumber(0, 0xff)
                               .io(0xcf8, 8)
                               .wordIo(0x0000, 0x0cf7)
                               .wordIo(0x0d00, 0xffff)
                               .dwordMemory(0xa0000, 0xbffff)
                               .dwordMemory(uint32_t(Mem.lowRamBytes()), 0xfebfffff)
                               .end());
      // ISA devices (ACPI 6.5, "Device Identification Objects": PNP IDs of the legacy
      // PC devices). A COM port's IRQ is 4 at 0x3f8/0x3e8 and 3 at 0x2f8/0x2e8.
      for (size_t I = 0; I < Cfg.ComPorts.size() && I < 4; ++I) {
        const uint16_t Port = Cfg.ComPorts[I];
        P.device(fmt::format("COM{}", I + 1), [&](aml::Builder &D) {
          D.nameEisaId("_HID", "PNP0501");
          D.nameInteger("_UID", I + 1);
          D.nameBuffer("_CRS", aml::Resources().io(Port, 8).irq(Port & 0x100 ? 4 : 3).end());
        });
      }
      P.device("RTC", [](aml::Builder &D) {
        D.nameEisaId("_HID", "PNP0B00");
        D.nameBuffer("_CRS", aml::Resources().io(0x70, 2).irq(8).end());
      });
      P.device("TIMR", [](aml::Builder &D) {
        D.nameEisaId("_HID", "PNP0100");
        D.nameBuffer("_CRS", aml::Resources().io(0x40, 4).irq(0).end());
      });
      P.device("KBD", [](aml::Builder &D) {
        D.nameEisaId("_HID", "PNP0303");
        D.nameBuffer("_CRS", aml::Resources().io(0x60, 1).io(0x64, 1).irq(1).end());
      });
      P.device("PIC", [](aml::Builder &D) {
        D.nameEisaId("_HID", "PNP0000");
        D.nameBuffer("_CRS", aml::Resources().io(0x20, 2).io(0xa0, 2).irq(2).end());
      });
      if (Cfg.Hpet)
        P.device("HPET", [](aml::Builder &D) {
          D.nameEisaId("_HID", "PNP0103");
          D.nameInteger("_UID", 0);
          D.nameBuffer("_CRS",
                       aml::Resources().memory32Fixed(uint32_t(kHpetBase), 0x400, false).end());
        });
      // PNP0C02, "motherboard resources": the PM registers, so the OS does not hand
      // their ports to another device.
      P.device("PMRS", [](aml::Builder &D) {
        D.nameEisaId("_HID", "PNP0C02");
        D.nameInteger("_UID", 1);
        D.nameBuffer("_CRS", aml::Resources().io(AcpiPm::kBase, AcpiPm::kSize).end());
      });
    });
    // ACPI 6.5, "Processor Device" (ACPI0007): _UID matches the MADT's processor UID.
    for (unsigned I = 0; I < Cfg.NumCpus; ++I)
      Sb.device(fmt::format("C{:03X}", I), [&](aml::Builder &D) {
        D.nameString("_HID", "ACPI0007");
        D.nameInteger("_UID", I);
      });
  });
  // ACPI 6.5, "\_Sx (System States)": SLP_TYPa, SLP_TYPb, reserved, reserved.
  A.namePackage("\\_S5", {AcpiPm::kSlpTypS5, AcpiPm::kSlpTypS5, 0, 0});

  std::vector<uint8_t> T = header("DSDT", kHeaderBytes, 2);
  T.insert(T.end(), A.bytes().begin(), A.bytes().end());
  return finish(std::move(T));
}

// ACPI 6.5, "Fixed ACPI Description Table (FADT)", the revision 6 layout (276 bytes).
std::vector<uint8_t> buildFadt(uint64_t Dsdt) {
  std::vector<uint8_t> F = header("FACP", 276, 6);
  putLe(F, 36, kAcpiFacsAddr, 4); // FIRMWARE_CTRL
  putLe(F, 40, Dsdt, 4);          // DSDT
  F[45] = 0;                      // Preferred_PM_Profile: unspecified
  putLe(F, 46, 9, 2);             // SCI_INT
  // SMI_CMD (48), ACPI_ENABLE, ACPI_DISABLE, S4BIOS_REQ, PSTATE_CNT: 0, no SMM.
  putLe(F, 56, AcpiPm::kPm1aEvt, 4); // PM1a_EVT_BLK
  putLe(F, 64, AcpiPm::kPm1aCnt, 4); // PM1a_CNT_BLK
  putLe(F, 76, AcpiPm::kPmTmr, 4);   // PM_TMR_BLK
  F[88] = AcpiPm::kPm1EvtLen;
  F[89] = AcpiPm::kPm1CntLen;
  F[91] = AcpiPm::kPmTmrLen;
  putLe(F, 96, 101, 2);  // P_LVL2_LAT > 100: C2 not supported
  putLe(F, 98, 1001, 2); // P_LVL3_LAT > 1000: C3 not supported
  F[108] = 0x32;         // CENTURY: CMOS RAM index
  // IAPC_BOOT_ARCH: LEGACY_DEVICES (bit 0), 8042 (bit 1), VGA Not Present (bit 2).
  putLe(F, 109, 0x7, 2);
  // Flags: WBINVD (0), PROC_C1 (2), PWR_BUTTON (4), SLP_BUTTON (5), FIX_RTC (6),
  // RESET_REG_SUP (10).
  putLe(F, 112, (1u << 0) | (1u << 2) | (1u << 4) | (1u << 5) | (1u << 6) | (1u << 10), 4);
  putGas(F, 116, kGasIo, 8, 1, 0xcf9); // RESET_REG
  F[128] = 0x06;                       // RESET_VALUE
  F[131] = 5;                          // FADT Minor Version
  // X_FIRMWARE_CTRL (132) stays 0: FIRMWARE_CTRL holds the FACS.
  putLe(F, 140, Dsdt, 8); // X_DSDT
  putGas(F, 148, kGasIo, 8 * AcpiPm::kPm1EvtLen, 2, AcpiPm::kPm1aEvt);
  putGas(F, 172, kGasIo, 8 * AcpiPm::kPm1CntLen, 2, AcpiPm::kPm1aCnt);
  putGas(F, 208, kGasIo, 8 * AcpiPm::kPmTmrLen, 3, AcpiPm::kPmTmr);
  return finish(std::move(F));
}

// ACPI 6.5, "Firmware ACPI Control Structure (FACS)": 64 bytes, no checksum; version 2.
std::vector<uint8_t> buildFacs() {
  std::vector<uint8_t> F(64, 0);
  std::memcpy(&F[0], "FACS", 4);
  putLe(F, 4, 64, 4);
  F[32] = 2;
  return F;
}

// ACPI 6.5, "Multiple APIC Description Table (MADT)".
std::vector<uint8_t> buildMadt(const FirmwareConfig &Cfg) {
  std::vector<uint8_t> M = header("APIC", 44, 5);
  putLe(M, 36, LocalApic::kBase, 4);
  putLe(M, 40, 1, 4); // PCAT_COMPAT
  auto Add = [&](std::initializer_list<uint8_t> Bytes) { M.insert(M.end(), Bytes); };
  // "Processor Local APIC Structure": type 0, length 8, UID, APIC ID, flags (enabled).
  for (unsigned I = 0; I < Cfg.NumCpus; ++I)
    Add({0, 8, uint8_t(I), uint8_t(I), 1, 0, 0, 0});
  // "I/O APIC Structure": type 1, length 12, ID 0 (the IoApic's ID register resets to
  // 0), reserved, address, GSI base 0.
  const uint32_t IoApicBase = uint32_t(IoApic::kBase);
  Add({1, 12, 0, 0, uint8_t(IoApicBase), uint8_t(IoApicBase >> 8), uint8_t(IoApicBase >> 16),
       uint8_t(IoApicBase >> 24), 0, 0, 0, 0});
  // "Interrupt Source Override Structure": type 2, length 10, bus 0 (ISA), source IRQ,
  // GSI, MPS INTI flags (bits 1:0 polarity, 3:2 trigger mode; 0 = bus conforming).
  Add({2, 10, 0, 0, 2, 0, 0, 0, 0, 0});       // IRQ0 -> GSI 2 (harness/devices/pit8254.h)
  Add({2, 10, 0, 9, 9, 0, 0, 0, 0x0d, 0x00}); // SCI: active high (01), level (11)
  // "Local APIC NMI Structure": type 4, length 6, UID 0xff (all processors), flags
  // active high (01), edge (01), LINT1.
  Add({4, 6, 0xff, 0x05, 0x00, 1});
  return finish(std::move(M));
}

// IA-PC HPET (High Precision Event Timers) Specification 1.0a, "ACPI Table": event
// timer block ID, base address (GAS, memory), HPET number, minimum clock tick in
// periodic mode, page protection.
std::vector<uint8_t> buildHpet() {
  std::vector<uint8_t> H = header("HPET", 56, 1);
  putLe(H, 36, 0x8086a201, 4);
  putGas(H, 40, kGasMemory, 64, 0, kHpetBase);
  H[52] = 0;
  putLe(H, 53, 100, 2);
  H[55] = 0;
  return finish(std::move(H));
}

} // namespace

bool buildAcpiTables(BiosArea &Area, PhysMem &Mem, const FirmwareConfig &Cfg) {
  const std::vector<uint8_t> Facs = buildFacs();
  if (!Mem.copyIn(Hpa(kAcpiFacsAddr), Facs.data(), Facs.size()))
    return false;
  const uint64_t Dsdt = Area.place(buildDsdt(Mem, Cfg), 16);
  const uint64_t Fadt = Dsdt ? Area.place(buildFadt(Dsdt), 16) : 0;
  const uint64_t Madt = Area.place(buildMadt(Cfg), 16);
  const uint64_t Hpet = Cfg.Hpet ? Area.place(buildHpet(), 16) : 1;
  if (!Fadt || !Madt || !Hpet)
    return false;
  std::vector<uint64_t> Entries{Fadt, Madt};
  if (Cfg.Hpet)
    Entries.push_back(Hpet);

  // "Root System Description Table (RSDT)" (32-bit entries) and "Extended System
  // Description Table (XSDT)" (64-bit entries), listing the same tables.
  std::vector<uint8_t> Rsdt = header("RSDT", kHeaderBytes + 4 * Entries.size(), 1);
  std::vector<uint8_t> Xsdt = header("XSDT", kHeaderBytes + 8 * Entries.size(), 1);
  for (size_t I = 0; I < Entries.size(); ++I) {
    putLe(Rsdt, kHeaderBytes + 4 * I, Entries[I], 4);
    putLe(Xsdt, kHeaderBytes + 8 * I, Entries[I], 8);
  }
  const uint64_t RsdtAt = Area.place(finish(std::move(Rsdt)), 16);
  const uint64_t XsdtAt = Area.place(finish(std::move(Xsdt)), 16);
  if (!RsdtAt || !XsdtAt)
    return false;

  // "Root System Description Pointer (RSDP) Structure", revision 2: the checksum covers
  // the first 20 bytes (the ACPI 1.0 part), the extended checksum all 36.
  std::vector<uint8_t> Rsdp(36, 0);
  std::memcpy(&Rsdp[0], "RSD PTR ", 8);
  std::memcpy(&Rsdp[9], "VMXSIM", 6);
  Rsdp[15] = 2;
  putLe(Rsdp, 16, RsdtAt, 4);
  putLe(Rsdp, 20, 36, 4);
  putLe(Rsdp, 24, XsdtAt, 8);
  setChecksum(Rsdp, 8, 0, 20);
  setChecksum(Rsdp, 32, 0, 36);
  Area.putAt(kAcpiRsdpAddr, Rsdp);
  return true;
}

namespace {
bool sumsToZero(const std::vector<uint8_t> &B) {
  uint8_t Sum = 0;
  for (uint8_t X : B)
    Sum = uint8_t(Sum + X);
  return Sum == 0;
}
uint64_t getLe(const std::vector<uint8_t> &B, size_t Off, unsigned Bytes) {
  uint64_t V = 0;
  for (unsigned I = 0; I < Bytes && Off + I < B.size(); ++I)
    V |= uint64_t(B[Off + I]) << (8 * I);
  return V;
}
/// Reads the table at Addr with the length of its header; false if that is not
/// readable memory or not a plausible length (36 bytes .. 1 MiB; FACS: 64).
bool readTable(const PhysMem &Mem, uint64_t Addr, AcpiTable &Out) {
  uint8_t Hdr[8];
  if (!Addr || !Mem.copyOut(Hpa(Addr), Hdr, sizeof(Hdr)))
    return false;
  const uint32_t Len = uint32_t(Hdr[4]) | uint32_t(Hdr[5]) << 8 | uint32_t(Hdr[6]) << 16 |
                       uint32_t(Hdr[7]) << 24;
  if (Len < 36 || Len > (1u << 20))
    return false;
  Out.Signature.assign(reinterpret_cast<const char *>(Hdr), 4);
  Out.Addr = Addr;
  Out.Bytes.resize(Len);
  return Mem.copyOut(Hpa(Addr), Out.Bytes.data(), Len);
}
} // namespace

uint64_t findRsdp(const PhysMem &Mem) {
  // ACPI 6.5, "Finding the RSDP on IA-PC Systems": the first KiB of the EBDA (segment
  // at 0x40e), then 0xE0000-0xFFFFF, on 16-byte boundaries; signature and checksum of
  // the first 20 bytes.
  auto Check = [&](uint64_t A) {
    std::vector<uint8_t> B(20);
    return Mem.copyOut(Hpa(A), B.data(), B.size()) && std::memcmp(B.data(), "RSD PTR ", 8) == 0 &&
           sumsToZero(B);
  };
  uint16_t EbdaSeg = 0;
  if (Mem.copyOut(Hpa(0x40e), &EbdaSeg, 2) && EbdaSeg)
    for (uint64_t A = uint64_t(EbdaSeg) << 4; A < (uint64_t(EbdaSeg) << 4) + 1024; A += 16)
      if (Check(A))
        return A;
  for (uint64_t A = BiosArea::kBase; A < BiosArea::kEnd; A += 16)
    if (Check(A))
      return A;
  return 0;
}

std::vector<AcpiTable> readAcpiTables(const PhysMem &Mem) {
  std::vector<AcpiTable> Out;
  const uint64_t RsdpAt = findRsdp(Mem);
  if (!RsdpAt)
    return Out;
  AcpiTable Rsdp{"RSD PTR ", RsdpAt, std::vector<uint8_t>(36)};
  if (!Mem.copyOut(Hpa(RsdpAt), Rsdp.Bytes.data(), 20))
    return Out;
  if (Rsdp.Bytes[15] < 2)
    Rsdp.Bytes.resize(20);
  else if (!Mem.copyOut(Hpa(RsdpAt), Rsdp.Bytes.data(), 36))
    return Out;
  Out.push_back(Rsdp);
  const bool HasXsdt = Rsdp.Bytes.size() == 36;
  AcpiTable Root;
  if (!readTable(Mem, HasXsdt ? getLe(Rsdp.Bytes, 24, 8) : getLe(Rsdp.Bytes, 16, 4), Root))
    return Out;
  Out.push_back(Root);
  const unsigned EntryBytes = HasXsdt ? 8 : 4;
  for (size_t Off = kHeaderBytes; Off + EntryBytes <= Root.Bytes.size(); Off += EntryBytes) {
    AcpiTable T;
    if (!readTable(Mem, getLe(Root.Bytes, Off, EntryBytes), T))
      return Out;
    Out.push_back(T);
    if (T.Signature == "FACP") {
      const uint64_t Facs = getLe(T.Bytes, 36, 4) ? getLe(T.Bytes, 36, 4) : getLe(T.Bytes, 132, 8);
      const uint64_t Dsdt = getLe(T.Bytes, 140, 8) ? getLe(T.Bytes, 140, 8) : getLe(T.Bytes, 40, 4);
      AcpiTable D, F;
      if (readTable(Mem, Dsdt, D))
        Out.push_back(D);
      if (readTable(Mem, Facs, F))
        Out.push_back(F);
    }
  }
  return Out;
}

} // namespace vmxsim
