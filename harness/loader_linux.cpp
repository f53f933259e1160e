// Linux bzImage kernels through the 32-bit boot protocol. The source is the kernel's
// Documentation/x86/boot.rst, "The Linux/x86 Boot Protocol" (sections "The Real-Mode
// Kernel Header", "Details of Header Fields", "32-bit Boot Protocol"), and
// Documentation/x86/zero-page.rst for the offsets of struct boot_params.
//
// Why the 32-bit protocol and not the 64-bit one: it is the state the kernel's own
// real-mode setup code leaves when it jumps to code32_start, so from the first
// instruction on the guest runs the same path it runs under QEMU's -kernel (whose option
// ROM runs that setup code) or a BIOS boot loader: the kernel's startup_32 builds its own
// page tables and enters long mode itself. Its entry state is exactly the boot GDT's
// 0x10/0x18 flat segments (harness/boot_state.h), which are the protocol's __BOOT_CS and
// __BOOT_DS; the 64-bit protocol wants a 64-bit code segment at 0x10, which that GDT does
// not have. The real-mode setup code itself is not run (there is no BIOS for it to call):
// the loader fills the zero page the way that code would have.
#include "cpu/cpu.h"
#include "harness/boot_state.h"
#include "harness/firmware.h"
#include "harness/loader.h"
#include "harness/loader_internal.h"

#include <algorithm>
#include <fmt/format.h>

namespace vmxsim {

using namespace loader;

namespace {

// boot.rst, "The Real-Mode Kernel Header": offsets in the file (and, from 0x1f1 on, in
// boot_params, which embeds the header at the same offsets).
constexpr uint64_t kSetupSects = 0x1f1, kSysSize = 0x1f4, kJump = 0x200, kHeaderMagicOff = 0x202,
                   kVersion = 0x206, kTypeOfLoader = 0x210, kLoadFlags = 0x211,
                   kCode32Start = 0x214, kRamdiskImage = 0x218, kRamdiskSize = 0x21c,
                   kHeapEndPtr = 0x224, kCmdLinePtr = 0x228, kInitrdAddrMax = 0x22c,
                   kRelocatableKernel = 0x234, kCmdlineSize = 0x238, kPrefAddress = 0x258,
                   kInitSize = 0x260;
constexpr uint32_t kHeaderMagic = 0x53726448; // "HdrS"
constexpr uint16_t kMinVersion = 0x206;       // cmdline_size exists from 2.06 on
constexpr uint8_t kLoadedHigh = 1u << 0, kCanUseHeap = 1u << 7;
// type_of_loader 0xff: "undefined" (boot.rst, "Details of Header Fields"): vmxsim has no
// assigned boot loader ID.
constexpr uint8_t kLoaderUndefined = 0xff;
// heap_end_ptr as a loader that put the setup code at X and the command line at
// X + 0x10000 sets it (QEMU does this): the end of the setup heap minus 0x200. Only the
// real-mode setup code reads it, and it is not run here.
constexpr uint16_t kHeapEnd = 0xfe00;

// zero-page.rst: boot_params offsets outside the header.
constexpr uint64_t kExtRamdiskImage = 0x0c0, kExtRamdiskSize = 0x0c4, kExtCmdLinePtr = 0x0c8,
                   kAltMemK = 0x1e0, kE820Entries = 0x1e8, kSentinel = 0x1ef,
                   kHeaderEndMax = 0x290, kE820Table = 0x2d0;
constexpr uint64_t kBootParamsBytes = 4096;
constexpr unsigned kE820Max = 128; // E820_MAX_ENTRIES_ZEROPAGE

constexpr uint64_t kOneMiB = 1ull << 20, kFourGiB = 1ull << 32;

struct Header {
  uint16_t Version = 0;
  uint64_t SetupBytes = 0;   ///< (setup_sects + 1) * 512: file offset of the kernel
  uint64_t PayloadBytes = 0; ///< the protected-mode kernel's bytes in the file
  uint64_t HeaderEnd = 0;    ///< 0x202 + the jump's offset byte
  uint64_t Load = 0;         ///< where the protected-mode kernel is copied and entered
  uint64_t NeedBegin = 0, NeedEnd = 0; ///< RAM the kernel claims (init_size from its base)
  uint64_t InitrdLimit = 0;  ///< one past the highest byte an initrd may occupy
  uint64_t CmdlineMax = 0;   ///< cmdline_size: longest command line, without the NUL
};

/// boot.rst, "Details of Header Fields" and "Loading the Rest of the Kernel".
Error parseHeader(std::span<const uint8_t> Image, Header &H) {
  const uint64_t Size = Image.size();
  if (!inFile(Size, 0, kInitSize + 4))
    return Error(ErrorCode::TruncatedImage,
                 fmt::format("bzImage is {} bytes, too short for a boot protocol 2.06 setup header",
                             Size));
  H.Version = le16(Image, kVersion);
  if (H.Version < kMinVersion)
    return Error(ErrorCode::NotAnImage,
                 fmt::format("Linux boot protocol {}.{:02} is older than 2.06, which vmxsim needs",
                             H.Version >> 8, H.Version & 0xff));
  const uint8_t LoadFlags = Image[kLoadFlags];
  if (!(LoadFlags & kLoadedHigh))
    return Error(ErrorCode::NotAnImage,
                 "Linux zImage (LOADED_HIGH clear): only bzImage kernels are supported");
  // "If this field is 0, the real-mode code is actually 4 sectors."
  const unsigned SetupSects = Image[kSetupSects] ? Image[kSetupSects] : 4;
  H.SetupBytes = uint64_t(SetupSects + 1) * 512;
  H.HeaderEnd = kHeaderMagicOff + Image[kJump + 1];
  if (H.HeaderEnd > kHeaderEndMax || H.HeaderEnd > H.SetupBytes)
    return Error(ErrorCode::NotAnImage,
                 fmt::format("setup header ends at {:#x} (jump offset {:#x}), past the setup "
                             "area ({:#x} bytes) or the header's space in boot_params",
                             H.HeaderEnd, Image[kJump + 1], std::min(H.SetupBytes, kHeaderEndMax)));
  if (H.SetupBytes >= Size)
    return Error(ErrorCode::TruncatedImage,
                 fmt::format("setup_sects {} puts the protected-mode kernel at {:#x}, past the "
                             "end of the file ({:#x} bytes)",
                             SetupSects, H.SetupBytes, Size));
  // syssize: "The size of the protected-mode code in units of 16-byte paragraphs."
  const uint64_t SysBytes = uint64_t(le32(Image, kSysSize)) * 16;
  H.PayloadBytes = Size - H.SetupBytes;
  if (SysBytes == 0)
    return Error(ErrorCode::NotAnImage, "syssize is 0: the bzImage has no protected-mode kernel");
  if (SysBytes > H.PayloadBytes)
    return Error(ErrorCode::TruncatedImage,
                 fmt::format("truncated bzImage: syssize says {:#x} bytes of protected-mode "
                             "kernel, the file has {:#x} after the setup code",
                             SysBytes, H.PayloadBytes));
  H.PayloadBytes = SysBytes;

  // Where to load. Protocol 2.10 added pref_address and init_size: a relocatable kernel
  // should be loaded at pref_address "if possible", and needs init_size bytes from the
  // address it runs at (a relocatable kernel loaded lower moves itself up to
  // LOAD_PHYSICAL_ADDR, which is pref_address). Older or non-relocatable kernels load at
  // the traditional 1 MiB (code32_start's default) and run at their fixed address.
  uint64_t RunBase = kOneMiB, InitSize = H.PayloadBytes;
  const bool Relocatable = Image[kRelocatableKernel] != 0;
  if (H.Version >= 0x20a) {
    RunBase = le64(Image, kPrefAddress);
    InitSize = std::max<uint64_t>(le32(Image, kInitSize), H.PayloadBytes);
    if (RunBase < kOneMiB || RunBase >= kFourGiB)
      return Error(ErrorCode::BadEntry,
                   fmt::format("pref_address {:#x} is outside 1 MiB..4 GiB", RunBase));
  }
  H.Load = Relocatable && H.Version >= 0x20a ? RunBase : kOneMiB;
  H.NeedBegin = std::min(H.Load, RunBase);
  H.NeedEnd = std::max(H.Load + H.PayloadBytes, RunBase + InitSize);
  // initrd_addr_max: "the highest address that may be occupied by the initial ramdisk".
  H.InitrdLimit = std::min<uint64_t>(uint64_t(le32(Image, kInitrdAddrMax)) + 1, kFourGiB);
  H.CmdlineMax = le32(Image, kCmdlineSize);
  return Error::success();
}

/// Places Size bytes as high as possible, page-aligned, inside a RAM entry of the map,
/// below Limit, clear of Used (boot.rst, "Loading the Rest of the Kernel": the initrd goes
/// "as high as possible" below initrd_addr_max, as QEMU and GRUB place it).
bool placeHigh(const std::vector<E820Entry> &Map, const std::vector<AddrRange> &Used,
               uint64_t Size, uint64_t Limit, uint64_t &Out) {
  std::vector<E820Entry> Ram;
  for (const E820Entry &E : Map)
    if (E.Type == E820Type::Ram)
      Ram.push_back(E);
  std::sort(Ram.begin(), Ram.end(),
            [](const E820Entry &A, const E820Entry &B) { return A.Base > B.Base; });
  for (const E820Entry &E : Ram) {
    const uint64_t Top = std::min(E.Base + E.SizeBytes, Limit);
    if (Top <= E.Base || Top - E.Base < Size)
      continue;
    uint64_t Cand = (Top - Size) & ~(kPageSize - 1);
    bool Fits = Cand >= E.Base;
    for (bool Moved = true; Moved && Fits;) {
      Moved = false;
      for (const AddrRange &R : Used)
        if (Fits && R.overlaps(Cand, Cand + Size)) {
          // Move below the range, if anything is left of this entry there.
          Fits = R.Begin >= E.Base + Size;
          Cand = Fits ? (R.Begin - Size) & ~(kPageSize - 1) : 0;
          Fits = Fits && Cand >= E.Base;
          Moved = true;
        }
    }
    if (Fits) {
      Out = Cand;
      return true;
    }
  }
  return false;
}

} // namespace

bool isBzImage(std::span<const uint8_t> Image) {
  return Image.size() >= kHeaderMagicOff + 4 && le32(Image, kHeaderMagicOff) == kHeaderMagic;
}

Error loadBzImage(Cpu &C, std::span<const uint8_t> Image, const LinuxParams &P,
                  BootLayout *Out) {
  PhysMem &Mem = C.Mem;
  if (!isBzImage(Image))
    return Error(ErrorCode::NotAnImage, "no Linux setup header (\"HdrS\" at 0x202)");
  Header H;
  if (Error E = parseHeader(Image, H))
    return E;
  if (!rangeIsRam(Mem, H.NeedBegin, H.NeedEnd - H.NeedBegin))
    return Error(ErrorCode::OutsideRam,
                 fmt::format("the kernel needs RAM at {:#x}-{:#x} (pref_address + init_size); "
                             "guest RAM below 4 GiB ends at {:#x}",
                             H.NeedBegin, H.NeedEnd, Mem.lowRamBytes()));
  if (P.CmdLine.size() > H.CmdlineMax)
    return Error(ErrorCode::BadConfig,
                 fmt::format("kernel command line is {} bytes, the kernel takes at most {} "
                             "(cmdline_size)",
                             P.CmdLine.size(), H.CmdlineMax));
  if (P.CmdLine.find('\0') != std::string::npos)
    return Error(ErrorCode::BadConfig, "kernel command line contains a NUL byte");

  std::vector<AddrRange> Used{{H.NeedBegin, H.NeedEnd}};
  const std::vector<E820Entry> Map = e820Map(Mem); // the firmware's one map
  if (Map.size() > kE820Max)
    return Error(ErrorCode::NoRoom,
                 fmt::format("memory map has {} entries, boot_params holds {}", Map.size(), kE820Max));
  uint64_t InitrdAddr = 0;
  const uint64_t InitrdBytes = P.Initrd.size();
  if (InitrdBytes) {
    if (!placeHigh(Map, Used, InitrdBytes, H.InitrdLimit, InitrdAddr))
      return Error(ErrorCode::NoRoom,
                   fmt::format("initrd ({:#x} bytes) does not fit in guest RAM below {:#x} "
                               "(initrd_addr_max + 1 or the top of RAM below 4 GiB) clear of "
                               "the kernel at {:#x}-{:#x}",
                               InitrdBytes, std::min(H.InitrdLimit, Mem.lowRamBytes()),
                               H.NeedBegin, H.NeedEnd));
    Used.push_back({InitrdAddr, InitrdAddr + InitrdBytes});
  }
  BootLayout L;
  if (!findFree(Mem, Used, kBootParamsBytes, kPageSize, L.InfoAddr))
    return Error(ErrorCode::NoRoom, "no free guest memory for boot_params");
  Used.push_back({L.InfoAddr, L.InfoAddr + kBootParamsBytes});
  const uint64_t CmdBytes = P.CmdLine.size() + 1;
  if (!findFree(Mem, Used, CmdBytes, 16, L.CmdLineAddr))
    return Error(ErrorCode::NoRoom, "no free guest memory for the kernel command line");
  Used.push_back({L.CmdLineAddr, L.CmdLineAddr + CmdBytes});
  if (!findFree(Mem, Used, kBootGdtBytes, 8, L.GdtAddr))
    return Error(ErrorCode::NoRoom, "no free guest memory for the boot GDT");

  // The zero page (zero-page.rst): all zero, then the setup header copied from the image
  // ("the setup header ... should be loaded into struct boot_params"), then the fields a
  // boot loader writes (boot.rst, "Details of Header Fields", the "write" ones).
  std::vector<uint8_t> Bp(kBootParamsBytes, 0);
  std::memcpy(Bp.data() + kSetupSects, Image.data() + kSetupSects, H.HeaderEnd - kSetupSects);
  auto put8 = [&](uint64_t Off, uint8_t V) { Bp[Off] = V; };
  auto put16 = [&](uint64_t Off, uint16_t V) { std::memcpy(Bp.data() + Off, &V, 2); };
  auto put32 = [&](uint64_t Off, uint32_t V) { std::memcpy(Bp.data() + Off, &V, 4); };
  auto put64 = [&](uint64_t Off, uint64_t V) { std::memcpy(Bp.data() + Off, &V, 8); };
  put8(kSentinel, 0); // a non-zero sentinel makes the kernel distrust the fields below
  put8(kTypeOfLoader, kLoaderUndefined);
  put8(kLoadFlags, uint8_t(Image[kLoadFlags] | kCanUseHeap));
  put16(kHeapEndPtr, kHeapEnd);
  put32(kCode32Start, uint32_t(H.Load)); // "can be used by the boot loader to determine
                                         // the proper load address"
  put32(kCmdLinePtr, uint32_t(L.CmdLineAddr));
  put32(kExtCmdLinePtr, uint32_t(L.CmdLineAddr >> 32));
  put32(kRamdiskImage, uint32_t(InitrdAddr));
  put32(kRamdiskSize, uint32_t(InitrdBytes));
  put32(kExtRamdiskImage, uint32_t(InitrdAddr >> 32));
  put32(kExtRamdiskSize, uint32_t(InitrdBytes >> 32));
  // alt_mem_k: KiB above 1 MiB, what the setup code reads from INT 15h AX=E801h; the
  // kernel uses it only when the E820 table has fewer than two entries.
  const uint64_t Low = Mem.lowRamBytes();
  put32(kAltMemK, uint32_t(Low > kOneMiB ? (Low - kOneMiB) >> 10 : 0));
  put8(kE820Entries, uint8_t(Map.size()));
  for (size_t I = 0; I < Map.size(); ++I) { // struct boot_e820_entry: addr, size, type
    put64(kE820Table + 20 * I, Map[I].Base);
    put64(kE820Table + 20 * I + 8, Map[I].SizeBytes);
    put32(kE820Table + 20 * I + 16, uint32_t(Map[I].Type));
  }
  // screen_info (offset 0) stays zero: no video mode, lines or columns tells the kernel
  // there is no VGA text console (vmxsim has no display; the console is ttyS0). vid_mode
  // stays the image's, as QEMU leaves it when the command line has no "vga=".

  // Everything is checked: write guest memory.
  Mem.copyIn(Hpa(H.Load), Image.data() + H.SetupBytes, H.PayloadBytes);
  if (InitrdBytes)
    Mem.copyIn(Hpa(InitrdAddr), P.Initrd.data(), InitrdBytes);
  Mem.copyIn(Hpa(L.InfoAddr), Bp.data(), Bp.size());
  Mem.copyIn(Hpa(L.CmdLineAddr), P.CmdLine.c_str(), CmdBytes);
  writeBootGdt(Mem, L.GdtAddr);

  // boot.rst, "32-bit Boot Protocol": protected mode, paging off, a GDT with flat 4 GiB
  // __BOOT_CS (0x10, execute/read) and __BOOT_DS (0x18, read/write), CS = __BOOT_CS, DS,
  // ES, SS = __BOOT_DS, interrupts disabled, ESI = boot_params, EBP = EDI = EBX = 0; the
  // entry is the load address (code32_start). enterProtected32 sets exactly that (FS and
  // GS flat as well), with the other GPRs zero but EDX (the reset signature).
  enterProtected32(C, L.GdtAddr, H.Load);
  C.S.Gpr[RSI] = L.InfoAddr;

  if (Out) {
    L.Entry = H.Load;
    L.ImageBegin = H.NeedBegin;
    L.ImageEnd = H.NeedEnd;
    L.RamdiskAddr = InitrdAddr;
    L.RamdiskBytes = InitrdBytes;
    L.LinuxBzImage = true;
    *Out = L;
  }
  return Error::success();
}

} // namespace vmxsim
