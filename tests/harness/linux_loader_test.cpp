// Linux bzImage loading through Machine (Documentation/x86/boot.rst, "32-bit Boot
// Protocol"): the entry state, every boot_params field the loader writes, the E820 table,
// the command line, initrd placement, a run of a payload that reads them, and exact
// one-line errors for bad kernels and initrds.
#include "harness/machine.h"
#include "harness/testing/linux_images.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::testing;

namespace {

std::string tempPath(const std::string &Name) {
  return (std::filesystem::temp_directory_path() /
          ("vmxsim_linux_loader_test_" + std::to_string(::getpid()) + "_" + Name))
      .string();
}

/// A file removed when the test ends.
struct TempFile {
  std::string Path;
  TempFile(const std::string &Name, const std::vector<uint8_t> &Bytes) : Path(tempPath(Name)) {
    std::ofstream(Path, std::ios::binary)
        .write(reinterpret_cast<const char *>(Bytes.data()), std::streamsize(Bytes.size()));
  }
  ~TempFile() { std::filesystem::remove(Path); }
};

MachineConfig linuxConfig(std::vector<uint8_t> Image, const std::string &Append = "console=ttyS0") {
  MachineConfig Cfg;
  Cfg.Kernel = "bzImage";
  Cfg.KernelImage = std::move(Image);
  Cfg.Append = Append;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Cfg.MaxInsns = 100000;
  return Cfg;
}

template <typename T> T rd(Machine &M, uint64_t A) {
  T V{};
  EXPECT_TRUE(M.mem().copyOut(Hpa(A), &V, sizeof(T)));
  return V;
}
std::string rdStr(Machine &M, uint64_t A) {
  std::string S;
  for (char C; M.mem().copyOut(Hpa(A), &C, 1) && C; ++A)
    S += C;
  return S;
}

Error loadError(const MachineConfig &Cfg) {
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_EQ(M, nullptr);
  return Err;
}

// The cpio "newc" magic, as a real initramfs starts.
std::vector<uint8_t> initrdBytes(size_t N) {
  std::vector<uint8_t> B(N, 0x5a);
  const char Magic[] = "070701";
  std::memcpy(B.data(), Magic, 6);
  return B;
}

constexpr uint64_t kBootParams = 0x8000; // first free page of conventional memory
constexpr uint64_t kCmdLine = 0x9000;    // the next free 16-byte slot after it

} // namespace

TEST(LinuxLoader, EntryStateIsThe32BitBootProtocol) {
  const std::vector<uint8_t> Image = bzImage(echoCmdlineExitWithInitrd());
  TempFile Initrd("initrd", initrdBytes(100));
  MachineConfig Cfg = linuxConfig(Image);
  Cfg.Modules = {Initrd.Path};
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_NE(M, nullptr) << Err.str();
  const CpuState &S = M->bsp().S;
  // boot.rst, "32-bit Boot Protocol".
  EXPECT_EQ(S.Rip, 0x1000000u); // pref_address: relocatable, protocol 2.10+
  EXPECT_EQ(S.Gpr[RSI], kBootParams);
  EXPECT_EQ(S.Gpr[RBP], 0u);
  EXPECT_EQ(S.Gpr[RDI], 0u);
  EXPECT_EQ(S.Gpr[RBX], 0u);
  EXPECT_EQ(S.Cr0, cr0::PE | cr0::ET); // protected mode, paging off
  EXPECT_EQ(S.Efer, 0u);
  EXPECT_EQ(S.Rflags, 0x2u);           // interrupts disabled
  EXPECT_EQ(S.cs().Selector, 0x10);    // __BOOT_CS
  EXPECT_EQ(S.cs().Base, 0u);
  EXPECT_EQ(S.cs().Limit, 0xffffffffu);
  EXPECT_EQ(S.cs().Attr, 0xc09bu);     // 32-bit, execute/read
  for (SegReg R : {SegReg::DS, SegReg::ES, SegReg::SS}) {
    EXPECT_EQ(S.seg(R).Selector, 0x18); // __BOOT_DS
    EXPECT_EQ(S.seg(R).Base, 0u);
    EXPECT_EQ(S.seg(R).Limit, 0xffffffffu);
    EXPECT_EQ(S.seg(R).Attr, 0xc093u);  // read/write
  }
  // The GDT's descriptors for the selectors, as the kernel reloads them.
  const uint64_t Gdt = S.Gdtr.Base;
  EXPECT_EQ(S.Gdtr.Limit, 7 * 8 - 1);
  EXPECT_EQ(rd<uint64_t>(*M, Gdt + 0x10), 0x00cf9b000000ffffull);
  EXPECT_EQ(rd<uint64_t>(*M, Gdt + 0x18), 0x00cf93000000ffffull);
  // The protected-mode kernel is at the entry.
  const size_t Setup = 5 * 512;
  EXPECT_EQ(rd<uint64_t>(*M, 0x1000000), [&] {
    uint64_t V;
    std::memcpy(&V, Image.data() + Setup, 8);
    return V;
  }());
  const BootLayout &L = M->layout();
  EXPECT_TRUE(L.LinuxBzImage);
  EXPECT_EQ(L.InfoAddr, kBootParams);
  EXPECT_EQ(L.Entry, 0x1000000u);
  EXPECT_EQ(L.ImageBegin, 0x1000000u);
  EXPECT_EQ(L.ImageEnd, 0x1400000u); // pref_address + init_size
}

TEST(LinuxLoader, ZeroPageHoldsHeaderCommandLineInitrdAndE820) {
  const std::vector<uint8_t> Image = bzImage(echoCmdlineExitWithInitrd());
  TempFile Initrd("initrd", initrdBytes(100));
  MachineConfig Cfg = linuxConfig(Image, "console=ttyS0 quiet");
  Cfg.Modules = {Initrd.Path};
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_NE(M, nullptr) << Err.str();
  const uint64_t Bp = kBootParams;
  // The setup header is copied from 0x1f1 to its end (0x202 + 0x6a); the fields a boot
  // loader writes differ, every other byte is the image's.
  const std::set<uint64_t> Written = {0x210, 0x211, 0x214, 0x215, 0x216, 0x217, 0x218, 0x219,
                                      0x21a, 0x21b, 0x21c, 0x21d, 0x21e, 0x21f, 0x224, 0x225,
                                      0x228, 0x229, 0x22a, 0x22b};
  for (uint64_t Off = 0x1f1; Off < 0x26c; ++Off) {
    if (!Written.count(Off)) {
      EXPECT_EQ(rd<uint8_t>(*M, Bp + Off), Image[Off]) << std::hex << Off;
    }
  }
  EXPECT_EQ(rd<uint32_t>(*M, Bp + 0x202), 0x53726448u); // "HdrS"
  EXPECT_EQ(rd<uint16_t>(*M, Bp + 0x1fa), 0xffffu);     // vid_mode as the image has it
  EXPECT_EQ(rd<uint8_t>(*M, Bp + 0x1ef), 0u);           // sentinel
  EXPECT_EQ(rd<uint8_t>(*M, Bp + 0x210), 0xffu);        // type_of_loader: undefined
  EXPECT_EQ(rd<uint8_t>(*M, Bp + 0x211), 0x81u);        // LOADED_HIGH | CAN_USE_HEAP
  EXPECT_EQ(rd<uint32_t>(*M, Bp + 0x214), 0x1000000u);  // code32_start = load address
  EXPECT_EQ(rd<uint16_t>(*M, Bp + 0x224), 0xfe00u);     // heap_end_ptr
  EXPECT_EQ(rd<uint32_t>(*M, Bp + 0x228), kCmdLine);    // cmd_line_ptr
  EXPECT_EQ(rd<uint32_t>(*M, Bp + 0x0c8), 0u);          // ext_cmd_line_ptr
  EXPECT_EQ(rdStr(*M, kCmdLine), "console=ttyS0 quiet");
  // The initrd: as high as it fits below the top of the 256 MiB of RAM, page-aligned.
  EXPECT_EQ(rd<uint32_t>(*M, Bp + 0x218), 0x0ffff000u); // ramdisk_image
  EXPECT_EQ(rd<uint32_t>(*M, Bp + 0x21c), 100u);        // ramdisk_size
  EXPECT_EQ(rd<uint32_t>(*M, Bp + 0x0c0), 0u);          // ext_ramdisk_image
  EXPECT_EQ(rd<uint32_t>(*M, Bp + 0x0c4), 0u);          // ext_ramdisk_size
  EXPECT_EQ(rd<uint64_t>(*M, 0x0ffff000), 0x5a5a313037303730ull); // "070701" 0x5a 0x5a
  EXPECT_EQ(M->layout().RamdiskAddr, 0x0ffff000u);
  EXPECT_EQ(M->layout().RamdiskBytes, 100u);
  EXPECT_EQ(rd<uint32_t>(*M, Bp + 0x1e0), (256u - 1) * 1024); // alt_mem_k
  EXPECT_EQ(rd<uint64_t>(*M, Bp + 0x000), 0u); // screen_info: no video
  // E820: the firmware's map (harness/firmware.h, e820Map): conventional memory, the EBDA
  // up to 1 MiB reserved, RAM from 1 MiB.
  struct {
    uint64_t Addr, Size;
    uint32_t Type;
  } const Want[] = {{0, 0x9fc00, 1},
                    {0x9fc00, 0x100000 - 0x9fc00, 2},
                    {0x100000, (256ull << 20) - 0x100000, 1}};
  ASSERT_EQ(rd<uint8_t>(*M, Bp + 0x1e8), std::size(Want));
  for (size_t I = 0; I < std::size(Want); ++I) {
    EXPECT_EQ(rd<uint64_t>(*M, Bp + 0x2d0 + 20 * I), Want[I].Addr) << I;
    EXPECT_EQ(rd<uint64_t>(*M, Bp + 0x2d0 + 20 * I + 8), Want[I].Size) << I;
    EXPECT_EQ(rd<uint32_t>(*M, Bp + 0x2d0 + 20 * I + 16), Want[I].Type) << I;
  }
  EXPECT_EQ(rd<uint64_t>(*M, Bp + 0x2d0 + 20 * std::size(Want)), 0u);
}

TEST(LinuxLoader, PayloadReadsCommandLineAndInitrdThroughEsi) {
  TempFile Initrd("initrd", initrdBytes(4096 + 3));
  MachineConfig Cfg = linuxConfig(bzImage(echoCmdlineExitWithInitrd()), "console=ttyS0 root=/dev/ram0");
  Cfg.Modules = {Initrd.Path};
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_NE(M, nullptr) << Err.str();
  const RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  EXPECT_EQ(R.ExitValue, 0x37303730u); // "0707", the initrd's first bytes
  EXPECT_EQ(M->debugconOutput(), "console=ttyS0 root=/dev/ram0");
}

TEST(LinuxLoader, NoInitrdLeavesRamdiskFieldsZeroAndEmptyCommandLine) {
  Error Err;
  auto M = Machine::create(linuxConfig(bzImage(echoCmdlineExitWithInitrd()), ""), Err);
  ASSERT_NE(M, nullptr) << Err.str();
  EXPECT_EQ(rd<uint32_t>(*M, kBootParams + 0x218), 0u);
  EXPECT_EQ(rd<uint32_t>(*M, kBootParams + 0x21c), 0u);
  EXPECT_EQ(rd<uint32_t>(*M, kBootParams + 0x228), kCmdLine);
  EXPECT_EQ(rdStr(*M, kCmdLine), "");
}

TEST(LinuxLoader, InitrdStaysBelowInitrdAddrMax) {
  BzImageOptions O;
  O.InitrdAddrMax = 0x37ffffff; // the pre-2.6.x kernels' limit
  TempFile Initrd("initrd", initrdBytes(0x2345));
  MachineConfig Cfg = linuxConfig(bzImage(echoCmdlineExitWithInitrd(), O));
  Cfg.RamBytes = 1ull << 30;
  Cfg.Modules = {Initrd.Path};
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_NE(M, nullptr) << Err.str();
  EXPECT_EQ(M->layout().RamdiskAddr, (0x38000000u - 0x2345) & ~0xfffu);
}

TEST(LinuxLoader, InitrdGoesBelowTheKernelWhenAboveIsFull) {
  // 24 MiB of RAM: the kernel claims 16..20 MiB, 4 MiB remain above it; a 6 MiB initrd
  // fits only between 1 and 16 MiB, as high as possible there.
  TempFile Initrd("initrd", initrdBytes(6u << 20));
  MachineConfig Cfg = linuxConfig(bzImage(echoCmdlineExitWithInitrd()));
  Cfg.RamBytes = 24u << 20;
  Cfg.Modules = {Initrd.Path};
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_NE(M, nullptr) << Err.str();
  EXPECT_EQ(M->layout().RamdiskAddr, 10u << 20);
}

TEST(LinuxLoader, NonRelocatableOrPre210KernelLoadsAtOneMegabyte) {
  BzImageOptions O;
  O.Relocatable = 0;
  Error Err;
  auto M = Machine::create(linuxConfig(bzImage(echoCmdlineExitWithInitrd(), O)), Err);
  ASSERT_NE(M, nullptr) << Err.str();
  EXPECT_EQ(M->bsp().S.Rip, 0x100000u);
  EXPECT_EQ(rd<uint32_t>(*M, kBootParams + 0x214), 0x100000u);
  EXPECT_EQ(M->layout().ImageEnd, 0x1400000u); // still claims pref_address + init_size

  BzImageOptions Old;
  Old.Version = 0x206;
  Old.JumpOffset = 0x3a; // the 2.06 header ends at 0x23c
  auto M2 = Machine::create(linuxConfig(bzImage(echoCmdlineExitWithInitrd(), Old)), Err);
  ASSERT_NE(M2, nullptr) << Err.str();
  EXPECT_EQ(M2->bsp().S.Rip, 0x100000u);
  EXPECT_EQ(rd<uint64_t>(*M2, kBootParams + 0x258), 0u); // past its header: not copied
  const RunResult R = M2->run();
  EXPECT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  EXPECT_EQ(M2->debugconOutput(), "console=ttyS0");
}

// Bad kernels: one line, the right code, nothing loaded.

TEST(LinuxLoader, ProtocolOlderThan206IsRejected) {
  BzImageOptions O;
  O.Version = 0x205;
  const Error E = loadError(linuxConfig(bzImage({0xf4}, O)));
  EXPECT_EQ(E.Code, ErrorCode::NotAnImage);
  EXPECT_EQ(E.str(), "bzImage: Linux boot protocol 2.05 is older than 2.06, which vmxsim needs");
}

TEST(LinuxLoader, ZImageIsRejected) {
  BzImageOptions O;
  O.LoadFlags = 0;
  const Error E = loadError(linuxConfig(bzImage({0xf4}, O)));
  EXPECT_EQ(E.str(), "bzImage: Linux zImage (LOADED_HIGH clear): only bzImage kernels are supported");
}

TEST(LinuxLoader, TruncatedKernelIsRejected) {
  std::vector<uint8_t> Image = bzImage(std::vector<uint8_t>(64, 0x90));
  Image.resize(Image.size() - 16);
  const Error E = loadError(linuxConfig(Image));
  EXPECT_EQ(E.Code, ErrorCode::TruncatedImage);
  EXPECT_EQ(E.str(), "bzImage: truncated bzImage: syssize says 0x40 bytes of protected-mode "
                     "kernel, the file has 0x30 after the setup code");
  Image.resize(0x230);
  EXPECT_EQ(loadError(linuxConfig(Image)).str(),
            "bzImage: bzImage is 560 bytes, too short for a boot protocol 2.06 setup header");
}

TEST(LinuxLoader, SetupSectsPastTheEndIsRejected) {
  std::vector<uint8_t> Image = bzImage({0xf4});
  Image[0x1f1] = 200;
  const Error E = loadError(linuxConfig(Image));
  EXPECT_EQ(E.Code, ErrorCode::TruncatedImage);
  EXPECT_EQ(E.str(), "bzImage: setup_sects 200 puts the protected-mode kernel at 0x19200, "
                     "past the end of the file (0xa10 bytes)");
}

TEST(LinuxLoader, HeaderLongerThanItsSpaceIsRejected) {
  BzImageOptions O;
  O.JumpOffset = 0xff;
  EXPECT_EQ(loadError(linuxConfig(bzImage({0xf4}, O))).str(),
            "bzImage: setup header ends at 0x301 (jump offset 0xff), past the setup area "
            "(0x290 bytes) or the header's space in boot_params");
}

TEST(LinuxLoader, ZeroSyssizeIsRejected) {
  std::vector<uint8_t> Image = bzImage({0xf4});
  put32(Image, 0x1f4, 0);
  EXPECT_EQ(loadError(linuxConfig(Image)).str(),
            "bzImage: syssize is 0: the bzImage has no protected-mode kernel");
}

TEST(LinuxLoader, PrefAddressBelowOneMegabyteIsRejected) {
  BzImageOptions O;
  O.PrefAddress = 0x8000;
  const Error E = loadError(linuxConfig(bzImage({0xf4}, O)));
  EXPECT_EQ(E.Code, ErrorCode::BadEntry);
  EXPECT_EQ(E.str(), "bzImage: pref_address 0x8000 is outside 1 MiB..4 GiB");
}

TEST(LinuxLoader, KernelLargerThanRamIsRejected) {
  MachineConfig Cfg = linuxConfig(bzImage({0xf4}));
  Cfg.RamBytes = 16u << 20;
  const Error E = loadError(Cfg);
  EXPECT_EQ(E.Code, ErrorCode::OutsideRam);
  EXPECT_EQ(E.str(), "bzImage: the kernel needs RAM at 0x1000000-0x1400000 (pref_address + "
                     "init_size); guest RAM below 4 GiB ends at 0x1000000");
}

TEST(LinuxLoader, CommandLineLongerThanCmdlineSizeIsRejected) {
  BzImageOptions O;
  O.CmdlineSize = 8;
  const Error E = loadError(linuxConfig(bzImage({0xf4}, O), "console=ttyS0"));
  EXPECT_EQ(E.Code, ErrorCode::BadConfig);
  EXPECT_EQ(E.str(), "bzImage: kernel command line is 13 bytes, the kernel takes at most 8 "
                     "(cmdline_size)");
}

// Bad initrds.

TEST(LinuxLoader, InitrdThatDoesNotFitIsRejected) {
  // 32 MiB of RAM: the kernel claims 16..20 MiB, leaving 15 MiB below and 12 MiB above.
  TempFile Initrd("initrd", initrdBytes(20u << 20));
  MachineConfig Cfg = linuxConfig(bzImage({0xf4}));
  Cfg.RamBytes = 32u << 20;
  Cfg.Modules = {Initrd.Path};
  const Error E = loadError(Cfg);
  EXPECT_EQ(E.Code, ErrorCode::NoRoom);
  EXPECT_EQ(E.str(), "bzImage: initrd (0x1400000 bytes) does not fit in guest RAM below "
                     "0x2000000 (initrd_addr_max + 1 or the top of RAM below 4 GiB) clear of "
                     "the kernel at 0x1000000-0x1400000");
}

TEST(LinuxLoader, InitrdAboveInitrdAddrMaxIsRejected) {
  // Room only below 16 MiB (initrd_addr_max), from 1 MiB: 15 MiB, too little for 15.5.
  BzImageOptions O;
  O.InitrdAddrMax = 0xffffff;
  TempFile Initrd("initrd", initrdBytes((31u << 20) / 2));
  MachineConfig Cfg = linuxConfig(bzImage({0xf4}, O));
  Cfg.Modules = {Initrd.Path};
  const Error E = loadError(Cfg);
  EXPECT_EQ(E.Code, ErrorCode::NoRoom);
  EXPECT_EQ(E.str(), "bzImage: initrd (0xf80000 bytes) does not fit in guest RAM below "
                     "0x1000000 (initrd_addr_max + 1 or the top of RAM below 4 GiB) clear of "
                     "the kernel at 0x1000000-0x1400000");
}

TEST(LinuxLoader, InitrdLargerThanRamIsRejected) {
  TempFile Initrd("initrd", initrdBytes((32u << 20) + 1));
  MachineConfig Cfg = linuxConfig(bzImage({0xf4}));
  Cfg.RamBytes = 32u << 20;
  Cfg.Modules = {Initrd.Path};
  const Error E = loadError(Cfg);
  EXPECT_EQ(E.Code, ErrorCode::FileTooLarge);
  EXPECT_EQ(E.Path, Initrd.Path);
}

TEST(LinuxLoader, MissingInitrdIsRejected) {
  MachineConfig Cfg = linuxConfig(bzImage({0xf4}));
  Cfg.Modules = {tempPath("missing")};
  const Error E = loadError(Cfg);
  EXPECT_EQ(E.Code, ErrorCode::FileUnreadable);
  EXPECT_EQ(E.str(), tempPath("missing") + ": cannot open: No such file or directory");
}

TEST(LinuxLoader, TwoInitrdsAreRejected) {
  MachineConfig Cfg = linuxConfig(bzImage({0xf4}));
  Cfg.Modules = {"a", "b"};
  EXPECT_EQ(loadError(Cfg).str(), "bzImage: a Linux kernel takes one initrd, 2 were given");
}

TEST(LinuxLoader, MissingKernelIsRejected) {
  MachineConfig Cfg;
  Cfg.Kernel = tempPath("no-bzImage");
  const Error E = loadError(Cfg);
  EXPECT_EQ(E.Code, ErrorCode::FileUnreadable);
}
