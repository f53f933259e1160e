// Multiboot v1 and flat-binary loading through Machine: boot state, information
// structure, modules, and exact one-line errors for bad images.
#include "harness/firmware.h"
#include "harness/machine.h"
#include "harness/testing/multiboot_images.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::testing;

namespace {

MachineConfig imageConfig(std::vector<uint8_t> Image, const std::string &Name = "kernel.elf") {
  MachineConfig Cfg;
  Cfg.Kernel = Name;
  Cfg.KernelImage = std::move(Image);
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Cfg.MaxInsns = 100000;
  return Cfg;
}

uint32_t rd32(Machine &M, uint64_t A) {
  uint32_t V = 0;
  EXPECT_TRUE(M.mem().copyOut(Hpa(A), &V, 4));
  return V;
}
uint64_t rd64(Machine &M, uint64_t A) {
  uint64_t V = 0;
  EXPECT_TRUE(M.mem().copyOut(Hpa(A), &V, 8));
  return V;
}
std::string rdStr(Machine &M, uint64_t A) {
  std::string S;
  for (char C; M.mem().copyOut(Hpa(A), &C, 1) && C; ++A)
    S += C;
  return S;
}

Error loadError(MachineConfig Cfg) {
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_EQ(M, nullptr);
  return Err;
}

std::string tempPath(const std::string &Name) {
  return (std::filesystem::temp_directory_path() /
          ("vmxsim_loader_test_" + std::to_string(::getpid()) + "_" + Name))
      .string();
}
void writeFile(const std::string &Path, const std::vector<uint8_t> &B) {
  std::ofstream(Path, std::ios::binary).write(reinterpret_cast<const char *>(B.data()),
                                              std::streamsize(B.size()));
}

constexpr uint32_t kBootMagic = 0x2BADB002;
constexpr uint64_t kInfo = 0x8038; // GDT at 0x8000 (56 bytes), info 8-aligned after it

void expectMultibootMachineState(Machine &M, uint64_t Entry) {
  const CpuState &S = M.bsp().S;
  EXPECT_EQ(S.Gpr[RAX], kBootMagic);
  EXPECT_EQ(S.Gpr[RBX], kInfo);
  EXPECT_EQ(S.Rip, Entry);
  EXPECT_EQ(S.Cr0, cr0::PE | cr0::ET);
  EXPECT_EQ(S.Rflags, 0x2u);
  EXPECT_EQ(S.Gpr[RSP], 0x7000u);
  EXPECT_EQ(S.cs().Selector, 0x10);
  EXPECT_EQ(S.cs().Base, 0u);
  EXPECT_EQ(S.cs().Limit, 0xffffffffu);
  EXPECT_EQ(S.cs().Attr, 0xc09bu);
  for (SegReg R : {SegReg::DS, SegReg::ES, SegReg::FS, SegReg::GS, SegReg::SS}) {
    EXPECT_EQ(S.seg(R).Selector, 0x18);
    EXPECT_EQ(S.seg(R).Limit, 0xffffffffu);
    EXPECT_EQ(S.seg(R).Attr, 0xc093u);
  }
  EXPECT_EQ(S.Gdtr.Base, 0x8000u);
  EXPECT_EQ(S.Gdtr.Limit, 55u);
  // The GDT matches the loaded selectors.
  EXPECT_EQ(rd64(M, 0x8010), 0x00cf9b000000ffffull);
  EXPECT_EQ(rd64(M, 0x8018), 0x00cf93000000ffffull);
}

void expectInfoAndMemoryMap(Machine &M) {
  EXPECT_EQ(rd32(M, kInfo + 0), 0x24du); // mem, cmdline, mods, mmap, boot_loader_name
  EXPECT_EQ(rd32(M, kInfo + 4), 639u);
  EXPECT_EQ(rd32(M, kInfo + 8), 261120u); // (256 MiB - 1 MiB) / 1 KiB
  EXPECT_EQ(rdStr(M, rd32(M, kInfo + 64)), "vmxsim");
  const uint32_t Len = rd32(M, kInfo + 44), Map = rd32(M, kInfo + 48);
  // The firmware's E820 map, entry for entry (harness/firmware.h), which for 256 MiB is:
  const std::vector<E820Entry> Want = {{0, 0x9fc00, E820Type::Ram},
                                       {0x9fc00, 0x60400, E820Type::Reserved},
                                       {0x100000, 0xff00000, E820Type::Ram}};
  ASSERT_EQ(e820Map(M.mem()), Want);
  ASSERT_EQ(Len, Want.size() * 24u);
  for (unsigned I = 0; I < Want.size(); ++I) {
    EXPECT_EQ(rd32(M, Map + 24 * I), 20u);
    EXPECT_EQ(rd64(M, Map + 24 * I + 4), Want[I].Base);
    EXPECT_EQ(rd64(M, Map + 24 * I + 12), Want[I].SizeBytes);
    EXPECT_EQ(rd32(M, Map + 24 * I + 20), uint32_t(Want[I].Type));
  }
}

} // namespace

TEST(MultibootLoader, Elf32BootStateInfoAndRun) {
  MachineConfig Cfg = imageConfig(elf32Image(exitWithMagicXorInfo()));
  Cfg.Append = "console=ttyS0 x=1";
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  expectMultibootMachineState(*M, 0x100000 + 112);
  expectInfoAndMemoryMap(*M);
  EXPECT_EQ(rdStr(*M, rd32(*M, kInfo + 16)), "kernel.elf console=ttyS0 x=1");
  EXPECT_EQ(rd32(*M, kInfo + 20), 0u); // no modules
  EXPECT_EQ(M->layout().ImageEnd, 0x100000u + 117 + 0x1000);
  RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::GuestExit);
  EXPECT_EQ(R.ExitValue, kBootMagic ^ kInfo);
  EXPECT_EQ(R.ExitStatus, int(((uint64_t(kBootMagic ^ kInfo) << 1) | 1) & 0xff));
  EXPECT_EQ(R.Retired, 2u);
}

TEST(MultibootLoader, EmptyAppendLeavesTrailingSpaceLikeQemu) {
  Error Err;
  auto M = Machine::create(imageConfig(elf32Image(exitWithMagicXorInfo())), Err);
  ASSERT_TRUE(M) << Err.str();
  EXPECT_EQ(rdStr(*M, rd32(*M, kInfo + 16)), "kernel.elf ");
}

TEST(MultibootLoader, Elf64LoadsAtPhysicalAddressAndTranslatesEntry) {
  ElfImageOptions O;
  O.VAddr = 0xffffffff80100000ull;
  std::vector<uint8_t> Img = elf64Image(exitWithMagicXorInfo(), O);
  Error Err;
  auto M = Machine::create(imageConfig(Img), Err);
  ASSERT_TRUE(M) << Err.str();
  expectMultibootMachineState(*M, 0x100000 + 136);
  expectInfoAndMemoryMap(*M);
  EXPECT_TRUE(M->layout().Elf64);
  EXPECT_EQ(rd32(*M, 0x100000), 0x464c457fu); // the file's first bytes at p_paddr
  RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::GuestExit);
  EXPECT_EQ(R.ExitValue, kBootMagic ^ kInfo);
}

TEST(MultibootLoader, AoutKludgeTakesPrecedenceAndZeroesBss) {
  std::vector<uint8_t> Img = aoutImage(exitWithMagicXorInfo());
  MachineConfig Cfg = imageConfig(Img, "kludge.bin");
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  expectMultibootMachineState(*M, 0x100020);
  expectInfoAndMemoryMap(*M);
  EXPECT_TRUE(M->layout().AoutKludge);
  EXPECT_EQ(M->layout().ImageEnd, 0x102000u);
  EXPECT_EQ(rd32(*M, 0x100000), kMultibootMagic);
  EXPECT_EQ(rd32(*M, 0x101ffc), 0u);
  RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::GuestExit);
  EXPECT_EQ(R.ExitValue, kBootMagic ^ kInfo);
}

TEST(MultibootLoader, ModulesArePageAlignedAfterKernelWithFullStrings) {
  const std::string A = tempPath("a.bin"), B = tempPath("b.bin");
  writeFile(A, {1, 2, 3, 4, 5});
  writeFile(B, std::vector<uint8_t>(0x1800, 0xcc));
  MachineConfig Cfg = imageConfig(elf32Image(exitWithMagicXorInfo()));
  Cfg.Modules = {A + " arg1 arg2", B};
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  EXPECT_EQ(rd32(*M, kInfo + 20), 2u);
  const uint32_t Mods = rd32(*M, kInfo + 24);
  EXPECT_EQ(rd32(*M, Mods + 0), 0x102000u);
  EXPECT_EQ(rd32(*M, Mods + 4), 0x102005u);
  EXPECT_EQ(rdStr(*M, rd32(*M, Mods + 8)), A + " arg1 arg2");
  EXPECT_EQ(rd32(*M, Mods + 16), 0x103000u);
  EXPECT_EQ(rd32(*M, Mods + 20), 0x104800u);
  EXPECT_EQ(rdStr(*M, rd32(*M, Mods + 24)), B);
  EXPECT_EQ(rd32(*M, 0x102000), 0x04030201u);
  EXPECT_EQ(rd32(*M, 0x1047fc), 0xccccccccu);
  std::remove(A.c_str());
  std::remove(B.c_str());
}

TEST(MultibootLoader, InfoMovesAboveModulesWhenImageCoversLowMemory) {
  AoutImageOptions O;
  O.LoadAddr = 0x1000;
  O.BssEndAddr = 0x9fc00; // all of conventional memory above 0x1000
  Error Err;
  auto M = Machine::create(imageConfig(aoutImage(exitWithMagicXorInfo(), O)), Err);
  ASSERT_TRUE(M) << Err.str();
  EXPECT_EQ(M->bsp().S.Gpr[RBX], 0x100038u); // GDT at 1 MiB, info after it
  EXPECT_EQ(M->bsp().S.Gdtr.Base, 0x100000u);
  RunResult R = M->run();
  EXPECT_EQ(R.ExitValue, kBootMagic ^ 0x100038u);
}

TEST(MultibootLoader, HighRamAppearsInMemoryMap) {
  MachineConfig Cfg = imageConfig(elf32Image(exitWithMagicXorInfo()));
  Cfg.RamBytes = 5ull << 30;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  EXPECT_EQ(rd32(*M, kInfo + 8), (0xc0000000u - 0x100000u) / 1024);
  const uint32_t Map = rd32(*M, kInfo + 48);
  ASSERT_EQ(rd32(*M, kInfo + 44), 4u * 24u); // the E820 map (harness/firmware.h)
  EXPECT_EQ(rd64(*M, Map + 24 * 2 + 12), 0xc0000000ull - 0x100000);
  EXPECT_EQ(rd64(*M, Map + 24 * 3 + 4), 4ull << 30);
  EXPECT_EQ(rd64(*M, Map + 24 * 3 + 12), 2ull << 30);
  EXPECT_EQ(rd32(*M, Map + 24 * 3 + 20), 1u);
}

// --- bad images: exact message and code ---

struct BadCase {
  ErrorCode Code;
  std::string Message;
};
void expectBad(MachineConfig Cfg, const BadCase &Want) {
  Error E = loadError(std::move(Cfg));
  EXPECT_EQ(E.Code, Want.Code);
  EXPECT_EQ(E.str(), Want.Message);
}

TEST(MultibootLoader, NotElfAndNoHeaderIsRejected) {
  expectBad(imageConfig(std::vector<uint8_t>(100, 0), "k.bin"),
            {ErrorCode::NotAnImage,
             "k.bin: not an ELF file and no Multiboot header in the first 8192 bytes"});
}

TEST(MultibootLoader, ElfWithoutHeaderIsRejected) {
  ElfImageOptions O;
  O.WithMultibootHeader = false;
  expectBad(imageConfig(elf32Image(exitWithMagicXorInfo(), O)),
            {ErrorCode::NotAnImage,
             "kernel.elf: ELF file has no Multiboot header in its first 8192 bytes"});
}

TEST(MultibootLoader, HeaderBeyond8192BytesIsNotFound) {
  AoutImageOptions O;
  O.HeaderOffset = 8192;
  expectBad(imageConfig(aoutImage(exitWithMagicXorInfo(), O), "k.bin"),
            {ErrorCode::NotAnImage,
             "k.bin: not an ELF file and no Multiboot header in the first 8192 bytes"});
}

TEST(MultibootLoader, BadChecksumIsRejected) {
  std::vector<uint8_t> Img = elf32Image(exitWithMagicXorInfo());
  Img[104] ^= 1;
  expectBad(imageConfig(Img), {ErrorCode::BadMultibootHeader,
                               "kernel.elf: Multiboot header at offset 0x60 has a bad checksum"});
}

TEST(MultibootLoader, UnsupportedRequiredFlagIsRejected) {
  ElfImageOptions O;
  O.MultibootFlags = 0x8003;
  expectBad(imageConfig(elf32Image(exitWithMagicXorInfo(), O)),
            {ErrorCode::UnsupportedFlags, "kernel.elf: unsupported Multiboot header flags 0x8000"});
}

TEST(MultibootLoader, VideoFlagIsAcceptedAndIgnored) {
  ElfImageOptions O;
  O.MultibootFlags = 0x7;
  Error Err;
  auto M = Machine::create(imageConfig(elf32Image(exitWithMagicXorInfo(), O)), Err);
  ASSERT_TRUE(M) << Err.str();
  EXPECT_EQ(rd32(*M, kInfo), 0x24du);
}

TEST(MultibootLoader, TruncatedElfHeaderIsRejected) {
  std::vector<uint8_t> Img = {0x7f, 'E', 'L', 'F', 1, 1, 1, 0};
  Img.resize(20, 0);
  putMultibootHeader(Img, 8, 0x3);
  expectBad(imageConfig(Img), {ErrorCode::TruncatedImage, "kernel.elf: truncated ELF header"});
}

TEST(MultibootLoader, SegmentPastEndOfFileIsRejected) {
  std::vector<uint8_t> Img = elf32Image(exitWithMagicXorInfo());
  put32(Img, 52 + 16, 0x200); // p_filesz
  expectBad(imageConfig(Img),
            {ErrorCode::TruncatedImage,
             "kernel.elf: segment 0: file bytes 0x0+0x200 are past the end of the file (0x75 "
             "bytes)"});
}

TEST(MultibootLoader, SegmentOutsideRamIsRejected) {
  ElfImageOptions O;
  O.PAddr = O.VAddr = 0x20000000;
  expectBad(imageConfig(elf32Image(exitWithMagicXorInfo(), O)),
            {ErrorCode::OutsideRam,
             "kernel.elf: segment 0 at 0x20000000-0x20001075 is not in guest RAM"});
}

TEST(MultibootLoader, SegmentOnLocalApicPageIsRejected) {
  ElfImageOptions O;
  O.PAddr = O.VAddr = 0xfee00000;
  MachineConfig Cfg = imageConfig(elf32Image(exitWithMagicXorInfo(), O));
  Cfg.RamBytes = 8ull << 30;
  expectBad(Cfg, {ErrorCode::OutsideRam,
                  "kernel.elf: segment 0 at 0xfee00000-0xfee01075 is not in guest RAM"});
}

TEST(MultibootLoader, EntryOutsideSegmentsIsRejected) {
  std::vector<uint8_t> Img = elf32Image(exitWithMagicXorInfo());
  put32(Img, 24, 0x500000);
  expectBad(imageConfig(Img), {ErrorCode::BadEntry,
                               "kernel.elf: entry point 0x500000 is not in a loadable segment"});
}

TEST(MultibootLoader, Elf64WrongMachineIsRejected) {
  std::vector<uint8_t> Img = elf64Image(exitWithMagicXorInfo());
  put16(Img, 18, 3);
  expectBad(imageConfig(Img), {ErrorCode::BadElf, "kernel.elf: ELF64 machine 3 is not EM_X86_64"});
}

TEST(MultibootLoader, ProgramHeadersPastEndAreRejected) {
  std::vector<uint8_t> Img = elf64Image(exitWithMagicXorInfo());
  put64(Img, 32, 0xffffffffffffff00ull);
  expectBad(imageConfig(Img),
            {ErrorCode::TruncatedImage, "kernel.elf: program headers past the end of the file"});
}

TEST(MultibootLoader, AoutEntryOutsideImageIsRejected) {
  std::vector<uint8_t> Img = aoutImage(exitWithMagicXorInfo());
  put32(Img, 28, 0x200000);
  expectBad(imageConfig(Img, "k.bin"),
            {ErrorCode::BadEntry,
             "k.bin: entry_addr 0x200000 is outside the loaded image 0x100000-0x102000"});
}

TEST(MultibootLoader, AoutLoadEndPastFileIsRejected) {
  AoutImageOptions O;
  O.LoadEndAddr = 0x100100;
  expectBad(imageConfig(aoutImage(exitWithMagicXorInfo(), O), "k.bin"),
            {ErrorCode::TruncatedImage, "k.bin: load_end_addr 0x100100 is past the end of the file"});
}

TEST(MultibootLoader, AoutHeaderAddrBelowLoadAddrIsRejected) {
  std::vector<uint8_t> Img = aoutImage(exitWithMagicXorInfo());
  put32(Img, 12, 0xfff00);
  expectBad(imageConfig(Img, "k.bin"),
            {ErrorCode::BadMultibootHeader,
             "k.bin: header_addr 0xfff00 is inconsistent with load_addr 0x100000"});
}

TEST(MultibootLoader, MissingFileIsRejected) {
  MachineConfig Cfg;
  Cfg.Kernel = "/nonexistent/vmxsim/k.elf";
  expectBad(Cfg, {ErrorCode::FileUnreadable,
                  "/nonexistent/vmxsim/k.elf: cannot open: No such file or directory"});
}

TEST(MultibootLoader, FileLargerThanRamIsRejected) {
  const std::string P = tempPath("big.bin");
  writeFile(P, std::vector<uint8_t>(3 << 20, 0));
  MachineConfig Cfg;
  Cfg.Kernel = P;
  Cfg.RamBytes = 2 << 20;
  expectBad(Cfg, {ErrorCode::FileTooLarge,
                  P + ": file is 3145728 bytes, more than the 2097152 bytes that fit"});
  std::remove(P.c_str());
}

TEST(MultibootLoader, MissingModuleIsRejected) {
  MachineConfig Cfg = imageConfig(elf32Image(exitWithMagicXorInfo()));
  Cfg.Modules = {"/nonexistent/vmxsim/mod.bin some args"};
  expectBad(Cfg, {ErrorCode::FileUnreadable,
                  "/nonexistent/vmxsim/mod.bin: cannot open: No such file or directory"});
}

// --- flat binaries and run-control reasons ---

namespace {
MachineConfig flatConfig(std::vector<uint8_t> Code, EntryMode Mode, uint64_t Addr = 0x100000) {
  MachineConfig Cfg = imageConfig(std::move(Code), "flat.bin");
  Cfg.FlatAddr = Addr;
  Cfg.FlatMode = Mode;
  return Cfg;
}
RunResult runFlat(std::vector<uint8_t> Code, EntryMode Mode, uint64_t Addr = 0x100000,
                  uint64_t MaxInsns = 100000) {
  MachineConfig Cfg = flatConfig(std::move(Code), Mode, Addr);
  Cfg.MaxInsns = MaxInsns;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  return M ? M->run() : RunResult{};
}
} // namespace

TEST(FlatLoader, Prot32EntryExitsWithValue) {
  RunResult R = runFlat({0xb8, 5, 0, 0, 0, 0xe7, 0xf4}, EntryMode::Prot32);
  EXPECT_EQ(R.Reason, RunReason::GuestExit);
  EXPECT_EQ(R.ExitValue, 5u);
  EXPECT_EQ(R.ExitStatus, 11);
  EXPECT_EQ(R.summary(), "vmxsim: guest exit 0x5 (status 11); 2 instructions, " +
                             std::to_string(R.Cycles) + " cycles");
}

TEST(FlatLoader, LongModeEntryExitsWithValue) {
  MachineConfig Cfg = flatConfig({0xb8, 6, 0, 0, 0, 0xe7, 0xf4}, EntryMode::Long);
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  EXPECT_TRUE(M->bsp().S.in64BitMode());
  EXPECT_EQ(M->bsp().S.cs().Selector, 0x20);
  EXPECT_EQ(M->layout().PageTables, 0x9000u); // GDT took 0x8000
  RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::GuestExit);
  EXPECT_EQ(R.ExitValue, 6u);
}

TEST(FlatLoader, RealModeEntryExitsWithValue) {
  RunResult R = runFlat({0xb8, 7, 0, 0xe7, 0xf4}, EntryMode::Real, 0x10010);
  EXPECT_EQ(R.Reason, RunReason::GuestExit);
  EXPECT_EQ(R.ExitValue, 7u);
}

TEST(FlatLoader, RealModeAboveOneMegabyteIsRejected) {
  expectBad(flatConfig({0xf4}, EntryMode::Real, 0x100000),
            {ErrorCode::BadEntry, "flat.bin: real-mode entry 0x100000 is not below 1 MiB"});
}

TEST(FlatLoader, ImageOutsideRamIsRejected) {
  expectBad(flatConfig({0xf4}, EntryMode::Prot32, 0x10000000),
            {ErrorCode::OutsideRam,
             "flat.bin: flat image at 0x10000000-0x10000001 is not in guest RAM"});
}

TEST(RunControl, HltWithInterruptsDisabledStopsAsHalted) {
  RunResult R = runFlat({0xf4}, EntryMode::Prot32);
  EXPECT_EQ(R.Reason, RunReason::Halted);
  EXPECT_EQ(R.ExitStatus, kExitHalted);
  EXPECT_EQ(R.Retired, 1u);
}

TEST(RunControl, InstructionLimitStopsAtBudget) {
  RunResult R = runFlat({0xeb, 0xfe}, EntryMode::Prot32, 0x100000, 1000);
  EXPECT_EQ(R.Reason, RunReason::InsnLimit);
  EXPECT_EQ(R.ExitStatus, kExitInsnLimit);
  EXPECT_EQ(R.Retired, 1000u);
  EXPECT_EQ(R.Rip, 0x100000u);
}

TEST(RunControl, FaultWithEmptyIdtIsTripleFault) {
  // UD2 with IDTR.limit = 0: #UD cannot be delivered -> #GP -> #DF -> shutdown.
  RunResult R = runFlat({0x0f, 0x0b}, EntryMode::Prot32);
  EXPECT_EQ(R.Reason, RunReason::TripleFault);
  EXPECT_EQ(R.ExitStatus, kExitTripleFault);
  EXPECT_EQ(R.describe(), "triple fault at RIP=0x100000 (CPU 0)");
}

TEST(RunControl, InstructionTraceShowsBytesDisassemblyAndDeltas) {
  MachineConfig Cfg = flatConfig({0xb8, 5, 0, 0, 0, 0xe7, 0xf4}, EntryMode::Prot32);
  Cfg.TraceInsns = OutputSpec::capture();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  M->run();
  EXPECT_EQ(M->traceOutput(),
            "         1 0010:00100000 b8 05 00 00 00                 mov eax, 5"
            "                               rax=0x5\n"
            "         2 0010:00100005 e7 f4                          out 0xf4, eax\n");
}
