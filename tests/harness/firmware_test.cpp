// The state the firmware leaves (harness/firmware.h): IVT, BIOS Data Area, EBDA, the
// read-only BIOS area, the E820 map, the ACPI tables (ACPI Specification 6.5) and their
// AML, the SMBIOS entry points and tables (DMTF DSP0134), and the ACPI PM registers.
#include "harness/acpi_tables.h"
#include "harness/aml.h"
#include "harness/firmware.h"
#include "harness/machine.h"
#include "harness/smbios_tables.h"
#include "tests/support/files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <unistd.h>

using namespace vmxsim;

namespace {

std::unique_ptr<Machine> machine(unsigned Cpus = 1, uint64_t Ram = 128ull << 20,
                                 std::vector<uint8_t> Flat = {}) {
  MachineConfig Cfg;
  Cfg.NumCpus = Cpus;
  Cfg.RamBytes = Ram;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  if (!Flat.empty()) {
    Cfg.Kernel = "flat.bin";
    Cfg.KernelImage = std::move(Flat);
    Cfg.FlatAddr = 0x7c00;
    Cfg.FlatMode = EntryMode::Real;
    Cfg.MaxInsns = 1000;
  }
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  return M;
}

uint64_t rd(const PhysMem &Mem, uint64_t A, unsigned Bytes) {
  uint64_t V = 0;
  EXPECT_TRUE(Mem.copyOut(Hpa(A), &V, Bytes)) << std::hex << A;
  return V;
}
uint64_t le(const std::vector<uint8_t> &B, size_t Off, unsigned Bytes) {
  uint64_t V = 0;
  for (unsigned I = 0; I < Bytes; ++I)
    V |= uint64_t(B.at(Off + I)) << (8 * I);
  return V;
}
uint8_t sum(const std::vector<uint8_t> &B, size_t From, size_t Len) {
  uint8_t S = 0;
  for (size_t I = From; I < From + Len; ++I)
    S = uint8_t(S + B.at(I));
  return S;
}
const AcpiTable *find(const std::vector<AcpiTable> &Ts, const std::string &Sig) {
  for (const AcpiTable &T : Ts)
    if (T.Signature == Sig)
      return &T;
  return nullptr;
}
size_t count(const std::vector<uint8_t> &Hay, const std::string &Needle) {
  size_t N = 0;
  for (auto It = Hay.begin();
       (It = std::search(It, Hay.end(), Needle.begin(), Needle.end())) != Hay.end(); ++It)
    ++N;
  return N;
}

// --- IVT, BDA, EBDA, BIOS area ---

TEST(Firmware, BiosDataAreaHoldsThePcAtFields) {
  auto M = machine();
  const PhysMem &Mem = M->mem();
  EXPECT_EQ(rd(Mem, 0x400, 2), 0x3f8u); // COM1
  EXPECT_EQ(rd(Mem, 0x402, 2), 0x2f8u); // COM2
  EXPECT_EQ(rd(Mem, 0x404, 4), 0u);     // no COM3, COM4
  EXPECT_EQ(rd(Mem, 0x408, 6), 0u);      // no LPT
  EXPECT_EQ(rd(Mem, 0x40e, 2), 0x9fc0u); // EBDA segment
  EXPECT_EQ(rd(Mem, 0x410, 2), 0x0402u); // x87, two serial ports
  EXPECT_EQ(rd(Mem, 0x413, 2), 639u);    // base memory KiB
  EXPECT_EQ(rd(Mem, 0x41a, 2), 0x1eu);   // keyboard buffer head, tail
  EXPECT_EQ(rd(Mem, 0x41c, 2), 0x1eu);
  EXPECT_EQ(rd(Mem, 0x46c, 4), 0u); // timer ticks
  EXPECT_EQ(rd(Mem, 0x470, 1), 0u);
  EXPECT_EQ(rd(Mem, 0x472, 2), 0u);
  EXPECT_EQ(rd(Mem, 0x480, 2), 0x1eu); // keyboard buffer start, end
  EXPECT_EQ(rd(Mem, 0x482, 2), 0x3eu);
}

TEST(Firmware, EveryIvtVectorPointsAtTheIretStub) {
  auto M = machine();
  for (unsigned V = 0; V < 256; ++V)
    ASSERT_EQ(rd(M->mem(), 4 * V, 4), 0xf000ff53u) << V;
  EXPECT_EQ(rd(M->mem(), kIretStub, 1), 0xcfu);
}

TEST(Firmware, EbdaStartsWithItsSizeInKiB) {
  auto M = machine();
  EXPECT_EQ(rd(M->mem(), 0x9fc00, 2), 1u);
}

TEST(Firmware, BiosAreaIgnoresGuestWrites) {
  auto M = machine();
  const uint64_t Before = M->mem().read(Hpa(0xf0000), 8);
  M->mem().write(Hpa(0xf0000), 8, 0);
  EXPECT_EQ(M->mem().read(Hpa(0xf0000), 8), Before);
  uint64_t Sig;
  std::memcpy(&Sig, "RSD PTR ", 8);
  EXPECT_EQ(Before, Sig);
}

TEST(Firmware, RealModeIntReturnsThroughTheIretStub) {
  // int 0x10; mov al, 0x5a; out 0xf4, al (isa-debug-exit): the BIOS call "returns".
  auto M = machine(1, 128ull << 20, {0xcd, 0x10, 0xb0, 0x5a, 0xe6, 0xf4});
  const RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  EXPECT_EQ(R.ExitValue, 0x5au);
}

// --- E820 ---

TEST(Firmware, E820MapOf128MiB) {
  PhysMem Mem(128ull << 20);
  const std::vector<E820Entry> Want = {{0, 0x9fc00, E820Type::Ram},
                                       {0x9fc00, 0x60400, E820Type::Reserved},
                                       {0x100000, (128ull << 20) - 0x100000, E820Type::Ram}};
  EXPECT_EQ(e820Map(Mem), Want);
}

TEST(Firmware, E820MapOf5GiBPutsRamAbove4GiB) {
  PhysMem Mem(5ull << 30);
  const std::vector<E820Entry> Want = {{0, 0x9fc00, E820Type::Ram},
                                       {0x9fc00, 0x60400, E820Type::Reserved},
                                       {0x100000, 0xc0000000 - 0x100000, E820Type::Ram},
                                       {0x100000000, 2ull << 30, E820Type::Ram}};
  EXPECT_EQ(e820Map(Mem), Want);
}

// --- ACPI ---

TEST(AcpiTables, RsdpIsFoundByTheScanWithBothChecksums) {
  auto M = machine();
  EXPECT_EQ(findRsdp(M->mem()), kAcpiRsdpAddr);
  std::vector<uint8_t> R(36);
  ASSERT_TRUE(M->mem().copyOut(Hpa(kAcpiRsdpAddr), R.data(), 36));
  EXPECT_EQ(R[15], 2);              // revision 2
  EXPECT_EQ(le(R, 20, 4), 36u);     // length
  EXPECT_EQ(sum(R, 0, 20), 0);      // checksum
  EXPECT_EQ(sum(R, 0, 36), 0);      // extended checksum
  EXPECT_NE(le(R, 16, 4), 0u);      // RSDT
  EXPECT_NE(le(R, 24, 8), 0u);      // XSDT
  EXPECT_LT(le(R, 24, 8), 0x100000u);
}

TEST(AcpiTables, EveryTableHasAZeroChecksumAndRsdtMatchesXsdt) {
  auto M = machine(3);
  const std::vector<AcpiTable> Ts = readAcpiTables(M->mem());
  std::set<std::string> Sigs;
  for (const AcpiTable &T : Ts) {
    Sigs.insert(T.Signature);
    if (T.Signature != "FACS" && T.Signature != "RSD PTR ") {
      EXPECT_EQ(sum(T.Bytes, 0, T.Bytes.size()), 0) << T.Signature;
    }
  }
  // The machine has an HPET at 0xfed00000, so its table is there too.
  EXPECT_EQ(Sigs, (std::set<std::string>{"RSD PTR ", "XSDT", "FACP", "DSDT", "FACS", "APIC",
                                         "HPET"}));
  std::vector<uint8_t> Rsdt(36);
  const uint64_t RsdtAt = rd(M->mem(), kAcpiRsdpAddr + 16, 4);
  Rsdt.resize(rd(M->mem(), RsdtAt + 4, 4));
  ASSERT_TRUE(M->mem().copyOut(Hpa(RsdtAt), Rsdt.data(), Rsdt.size()));
  EXPECT_EQ(sum(Rsdt, 0, Rsdt.size()), 0);
  const AcpiTable *X = find(Ts, "XSDT");
  ASSERT_TRUE(X);
  ASSERT_EQ((Rsdt.size() - 36) * 2, X->Bytes.size() - 36);
  for (size_t I = 0; 36 + 4 * I < Rsdt.size(); ++I)
    EXPECT_EQ(le(Rsdt, 36 + 4 * I, 4), le(X->Bytes, 36 + 8 * I, 8));
}

TEST(AcpiTables, FadtDescribesThePmBlocksResetRegisterAndBootArch) {
  auto M = machine();
  const std::vector<AcpiTable> Ts = readAcpiTables(M->mem());
  const AcpiTable *F = find(Ts, "FACP");
  ASSERT_TRUE(F);
  const std::vector<uint8_t> &B = F->Bytes;
  ASSERT_EQ(B.size(), 276u);
  EXPECT_EQ(B[8], 6);   // revision
  EXPECT_EQ(B[131], 5); // minor version
  EXPECT_EQ(le(B, 36, 4), kAcpiFacsAddr);
  EXPECT_EQ(le(B, 132, 8), 0u); // X_FIRMWARE_CTRL
  EXPECT_EQ(le(B, 40, 4), le(B, 140, 8));
  EXPECT_EQ(le(B, 46, 2), 9u);
  EXPECT_EQ(le(B, 48, 4), 0u); // no SMI_CMD
  EXPECT_EQ(le(B, 56, 4), 0x600u);
  EXPECT_EQ(le(B, 64, 4), 0x604u);
  EXPECT_EQ(le(B, 76, 4), 0x608u);
  EXPECT_EQ(B[88], 4);
  EXPECT_EQ(B[89], 2);
  EXPECT_EQ(B[91], 4);
  EXPECT_EQ(B[108], 0x32);
  EXPECT_EQ(le(B, 109, 2), 0x7u);
  EXPECT_EQ(le(B, 112, 4) & (1u << 8), 0u); // TMR_VAL_EXT clear: 24-bit timer
  EXPECT_NE(le(B, 112, 4) & (1u << 10), 0u); // RESET_REG_SUP
  EXPECT_EQ(le(B, 116, 4), 0x01000801u);   // GAS: I/O, 8 bits, byte access
  EXPECT_EQ(le(B, 120, 8), 0xcf9u);
  EXPECT_EQ(B[128], 0x06);
  EXPECT_EQ(le(B, 148, 4), 0x02002001u); // X_PM1a_EVT_BLK: I/O, 32 bits, word access
  EXPECT_EQ(le(B, 152, 8), 0x600u);
  EXPECT_EQ(le(B, 172, 4), 0x02001001u); // X_PM1a_CNT_BLK: 16 bits
  EXPECT_EQ(le(B, 176, 8), 0x604u);
  EXPECT_EQ(le(B, 208, 4), 0x03002001u); // X_PM_TMR_BLK: 32 bits, dword access
  EXPECT_EQ(le(B, 212, 8), 0x608u);
  const AcpiTable *Facs = find(Ts, "FACS");
  ASSERT_TRUE(Facs);
  EXPECT_EQ(Facs->Bytes.size(), 64u);
  EXPECT_EQ(Facs->Addr % 64, 0u);
}

TEST(AcpiTables, MadtHasSciOverrideAndLint1Nmi) {
  auto M = machine(2);
  const std::vector<AcpiTable> Ts = readAcpiTables(M->mem()); // outlives the pointer
  const AcpiTable *Madt = find(Ts, "APIC");
  ASSERT_TRUE(Madt);
  const std::vector<uint8_t> &B = Madt->Bytes;
  ASSERT_EQ(B.size(), 44u + 2 * 8 + 12 + 10 + 10 + 6);
  const size_t Iso9 = 44 + 16 + 12 + 10;
  EXPECT_EQ(std::vector<uint8_t>(B.begin() + Iso9, B.begin() + Iso9 + 10),
            (std::vector<uint8_t>{2, 10, 0, 9, 9, 0, 0, 0, 0x0d, 0}));
  EXPECT_EQ(std::vector<uint8_t>(B.begin() + Iso9 + 10, B.end()),
            (std::vector<uint8_t>{4, 6, 0xff, 0x05, 0x00, 1}));
}

TEST(AcpiTables, DsdtHasS5AndOneProcessorDevicePerCpu) {
  auto M = machine(5);
  const std::vector<AcpiTable> Ts = readAcpiTables(M->mem()); // outlives the pointer
  const AcpiTable *D = find(Ts, "DSDT");
  ASSERT_TRUE(D);
  EXPECT_EQ(count(D->Bytes, "ACPI0007"), 5u);
  // Name(\_S5, Package(4){7, 7, 0, 0})
  EXPECT_EQ(count(D->Bytes, std::string("\x08\\_S5_\x12\x08\x04\x0a\x07\x0a\x07\x00\x00", 14)), 1u);
  for (const char *Dev : {"C000", "C004", "COM1", "COM2", "RTC_", "TIMR", "KBD_", "PIC_", "PCI0"})
    EXPECT_EQ(count(D->Bytes, Dev), 1u) << Dev;
  EXPECT_EQ(count(D->Bytes, "HPET"), 1u); // the machine's HPET (PNP0103)
  // The UARTs' _CRS: IO(Decode16, 0x3f8/0x2f8, 8 ports) and IRQNoFlags(4/3).
  const std::vector<uint8_t> Com1Crs = {0x47, 0x01, 0xf8, 0x03, 0xf8, 0x03, 0x01, 0x08, 0x22, 0x10, 0x00};
  const std::vector<uint8_t> Com2Crs = {0x47, 0x01, 0xf8, 0x02, 0xf8, 0x02, 0x01, 0x08, 0x22, 0x08, 0x00};
  for (const std::vector<uint8_t> *Crs : {&Com1Crs, &Com2Crs})
    EXPECT_NE(std::search(D->Bytes.begin(), D->Bytes.end(), Crs->begin(), Crs->end()),
              D->Bytes.end());
}

TEST(AcpiTables, HpetTableWhenTheMachineHasOne) {
  PhysMem Mem(64ull << 20);
  FirmwareConfig Cfg;
  Cfg.Hpet = true;
  ASSERT_FALSE(buildFirmware(Mem, Cfg));
  const std::vector<AcpiTable> Ts = readAcpiTables(Mem);
  const AcpiTable *H = find(Ts, "HPET");
  ASSERT_TRUE(H);
  ASSERT_EQ(H->Bytes.size(), 56u);
  EXPECT_EQ(sum(H->Bytes, 0, 56), 0);
  EXPECT_EQ(le(H->Bytes, 36, 4), 0x8086a201u);
  EXPECT_EQ(le(H->Bytes, 44, 8), 0xfed00000u);
  EXPECT_EQ(le(H->Bytes, 53, 2), 100u);
  EXPECT_EQ(count(find(Ts, "DSDT")->Bytes, "HPET"), 1u);
}

TEST(Aml, PkgLengthEncodingsAndEisaId) {
  EXPECT_EQ(aml::pkgLength(0), std::vector<uint8_t>{1});
  EXPECT_EQ(aml::pkgLength(62), std::vector<uint8_t>{63});
  EXPECT_EQ(aml::pkgLength(63), (std::vector<uint8_t>{0x41, 0x04})); // 65 = 0x41
  EXPECT_EQ(aml::pkgLength(4093), (std::vector<uint8_t>{0x4f, 0xff}));       // 4095
  EXPECT_EQ(aml::pkgLength(4094), (std::vector<uint8_t>{0x81, 0x00, 0x01})); // 4097
  EXPECT_EQ(aml::eisaId("PNP0A03"), 0x030ad041u);
  EXPECT_EQ(aml::eisaId("PNP0303"), 0x0303d041u);
}

// Every table disassembles with ACPICA's iasl (Debian acpica-tools, installed by
// scripts/setup.sh) without errors, and the disassembled ASL compiles again with no
// errors, warnings or remarks. The RSDP is not a table with a header and iasl (20200925)
// refuses it as a binary file ("does not contain a valid ACPI table"): its checksums are
// checked by RsdpIsFoundByTheScanWithBothChecksums instead.
TEST(AcpiTables, IaslDisassemblesAndRecompilesEveryTable) {
  if (std::system("command -v iasl > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "iasl not found (Debian package acpica-tools; scripts/setup.sh installs it)";
  PhysMem Mem(256ull << 20);
  FirmwareConfig Cfg;
  Cfg.NumCpus = 4;
  Cfg.ComPorts = {0x3f8, 0x2f8};
  Cfg.Hpet = true;
  ASSERT_FALSE(buildFirmware(Mem, Cfg));
  const std::filesystem::path Dir = std::filesystem::temp_directory_path() /
                                    ("vmxsim_firmware_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(Dir);
  const std::vector<AcpiTable> Ts = readAcpiTables(Mem);
  ASSERT_EQ(Ts.size(), 7u); // RSDP, XSDT, FACP, DSDT, FACS, APIC, HPET
  auto Run = [&](const std::string &Args, const std::string &LogName, std::string &Out) {
    const std::string Cmd =
        "cd '" + Dir.string() + "' && iasl " + Args + " > " + LogName + " 2>&1";
    const int Rc = std::system(Cmd.c_str());
    Out = test::readFile((Dir / LogName).string());
    return Rc;
  };
  for (const AcpiTable &T : Ts) {
    if (T.Signature == "RSD PTR ")
      continue;
    std::string Name = T.Signature;
    std::transform(Name.begin(), Name.end(), Name.begin(), ::tolower);
    std::ofstream(Dir / (Name + ".dat"), std::ios::binary)
        .write(reinterpret_cast<const char *>(T.Bytes.data()), std::streamsize(T.Bytes.size()));
    std::string Out;
    EXPECT_EQ(Run("-d " + Name + ".dat", Name + ".log", Out), 0) << T.Signature << ": " << Out;
    EXPECT_EQ(Out.find("Error"), std::string::npos) << T.Signature << ": " << Out;
    ASSERT_TRUE(std::filesystem::exists(Dir / (Name + ".dsl"))) << T.Signature << ": " << Out;
    EXPECT_EQ(Run("-p " + Name + "2 " + Name + ".dsl", Name + "2.log", Out), 0)
        << T.Signature << ": " << Out;
    EXPECT_NE(Out.find("0 Errors, 0 Warnings, 0 Remarks"), std::string::npos)
        << T.Signature << ": " << Out;
  }
  std::filesystem::remove_all(Dir);
}

// --- SMBIOS ---

TEST(Smbios, EntryPointsHaveValidChecksumsAndPointToTheTable) {
  auto M = machine(2, 5ull << 30);
  std::vector<uint8_t> E(0x1f), E3(0x18);
  ASSERT_TRUE(M->mem().copyOut(Hpa(kSmbiosEntryAddr), E.data(), E.size()));
  ASSERT_TRUE(M->mem().copyOut(Hpa(kSmbios3EntryAddr), E3.data(), E3.size()));
  EXPECT_EQ(std::string(E.begin(), E.begin() + 4), "_SM_");
  EXPECT_EQ(std::string(E.begin() + 0x10, E.begin() + 0x15), "_DMI_");
  EXPECT_EQ(sum(E, 0, 0x1f), 0);
  EXPECT_EQ(sum(E, 0x10, 0x0f), 0);
  EXPECT_EQ(std::string(E3.begin(), E3.begin() + 5), "_SM3_");
  EXPECT_EQ(sum(E3, 0, 0x18), 0);
  EXPECT_EQ(le(E, 0x18, 4), le(E3, 0x10, 8));
  EXPECT_EQ(le(E, 0x16, 2), le(E3, 0x0c, 4));

  // Walk the structure table: types in order, the count the entry point gives.
  std::vector<uint8_t> T(le(E, 0x16, 2));
  ASSERT_TRUE(M->mem().copyOut(Hpa(le(E, 0x18, 4)), T.data(), T.size()));
  std::vector<unsigned> Types;
  size_t Off = 0;
  while (Off + 4 <= T.size()) {
    Types.push_back(T[Off]);
    if (T[Off] == 19) { // Memory Array Mapped Address: start, end (KiB)
      EXPECT_LT(le(T, Off + 4, 4), le(T, Off + 8, 4));
    }
    if (T[Off] == 17) { // 5 GiB = 5120 MiB
      EXPECT_EQ(le(T, Off + 0x0c, 2), 5120u);
    }
    size_t S = Off + T[Off + 1];
    while (S + 1 < T.size() && !(T[S] == 0 && T[S + 1] == 0))
      ++S;
    Off = S + 2;
  }
  EXPECT_EQ(Off, T.size());
  EXPECT_EQ(Types, (std::vector<unsigned>{0, 1, 4, 4, 16, 17, 19, 19, 32, 127}));
  EXPECT_EQ(le(E, 0x1c, 2), Types.size());
}

// --- ACPI PM registers ---

TEST(AcpiPm, TimerCountsAt3579545HzOfTheVirtualClock) {
  IoBus Io;
  StopLatch Latch(Io);
  AcpiPm Pm(Latch);
  uint64_t Now = 0;
  Pm.Now = [&] { return Now; };
  EXPECT_EQ(Pm.ioRead(0x608, 4), 0u);
  Now = 1000000000; // one virtual second
  EXPECT_EQ(Pm.ioRead(0x608, 4), 3579545u);
  Now = 279; // 279 * 3579545 / 1e9 = 0.9987 ticks
  EXPECT_EQ(Pm.ioRead(0x608, 4), 0u);
  Now = 280; // 1.0023 ticks
  EXPECT_EQ(Pm.ioRead(0x608, 4), 1u);
  Now = 5000000000; // 17897725 ticks, mod 2^24
  EXPECT_EQ(Pm.ioRead(0x608, 4), 17897725u - (1u << 24));
  EXPECT_EQ(Pm.ioRead(0x608, 2), (17897725u - (1u << 24)) & 0xffff);
  Pm.ioWrite(0x608, 4, 0); // read-only
  EXPECT_EQ(Pm.ioRead(0x608, 4), 17897725u - (1u << 24));
}

TEST(AcpiPm, GuestReadsTheTimerFromTheExecutingCpusClock) {
  // mov dx, 0x608; in eax, dx; hlt. At cycle 1e9 + c for the few cycles c < 279 the
  // first two instructions cost, the timer has counted exactly 3579545 ticks.
  auto M = machine(1, 128ull << 20, {0xba, 0x08, 0x06, 0x66, 0xed, 0xf4});
  M->bsp().Cycles = 1000000000;
  const RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::Halted) << R.describe();
  EXPECT_EQ(M->bsp().S.Gpr[0], 3579545u);
}

TEST(AcpiPm, TimerStatusSetsWhenBit23TogglesAndClearsOnWriteOne) {
  IoBus Io;
  StopLatch Latch(Io);
  AcpiPm Pm(Latch);
  uint64_t Now = 0;
  Pm.Now = [&] { return Now; };
  const uint64_t Toggle = 2343484438; // first cycle with 2^23 ticks: ceil(2^23 * 1e9 / 3579545)
  Now = Toggle - 1;
  EXPECT_EQ(Pm.ioRead(0x600, 2), 0u);
  Now = Toggle;
  EXPECT_EQ(Pm.ioRead(0x600, 2), 1u);
  Pm.ioWrite(0x600, 2, 0); // writing 0 clears nothing
  EXPECT_EQ(Pm.ioRead(0x600, 2), 1u);
  Pm.ioWrite(0x600, 2, 1);
  EXPECT_EQ(Pm.ioRead(0x600, 2), 0u);
  Pm.ioWrite(0x602, 2, 0xffff);
  EXPECT_EQ(Pm.ioRead(0x602, 2), 0x4721u);
  EXPECT_EQ(Pm.ioRead(0x604, 2), 1u); // SCI_EN
  EXPECT_EQ(Pm.ioRead(0x606, 2), 0xffffu);
}

TEST(AcpiPm, SleepEnableWithS5PowersTheMachineOff) {
  // mov dx, 0x604; mov ax, SLP_TYP 7 (no SLP_EN); out dx, ax; then with SLP_EN; hlt.
  auto M = machine(1, 128ull << 20,
                   {0xba, 0x04, 0x06, 0xb8, 0x00, 0x1c, 0xef, 0xb8, 0x00, 0x3c, 0xef, 0xf4});
  const RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::PowerOff) << R.describe();
  EXPECT_EQ(R.ExitValue, AcpiPm::kPm1aCnt);
  EXPECT_EQ(R.describe(), "guest powered off (ACPI S5, PM1a_CNT)");
  EXPECT_EQ(R.ExitStatus, 0);
  EXPECT_EQ(R.Rip, 11u); // CS = 0x7c0: stopped after the second OUT
  EXPECT_EQ(M->acpiPm().control() & 0x1c00, 0x1c00);
}

TEST(AcpiPm, SleepEnableWithAnotherSleepTypeChangesNothing) {
  // SLP_TYP 5 with SLP_EN (a state the DSDT does not offer), then hlt.
  auto M = machine(1, 128ull << 20, {0xba, 0x04, 0x06, 0xb8, 0x00, 0x34, 0xef, 0xf4});
  const RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::Halted) << R.describe();
  EXPECT_EQ(M->io().read(0x604, 2), 0x1401u); // SLP_TYP 5, SCI_EN; SLP_EN reads 0
}

} // namespace
