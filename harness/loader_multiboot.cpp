// Multiboot v1 (Multiboot Specification 0.6.96). Section references below are to that
// document: 3.1 "OS image format", 3.2 "Machine state", 3.3 "Boot information format".
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

constexpr uint32_t kHeaderMagic = 0x1BADB002, kBootMagic = 0x2BADB002;
constexpr uint64_t kSearchBytes = 8192; // 3.1.1: the header lies in the first 8192 bytes

// 3.1.2 header flags. Bits 0-15 are "must understand": a loader that cannot honour one
// must refuse the image. Bit 0 (page-aligned modules) and bit 1 (memory information)
// are always honoured. Bit 2 (video mode) is accepted and ignored: there is no display,
// and the information structure simply lacks the VBE/framebuffer fields (flags bits 11
// and 12 stay clear), which the specification allows the kernel to check.
constexpr uint32_t kFlagPageAlign = 1u << 0, kFlagMemInfo = 1u << 1, kFlagVideo = 1u << 2,
                   kFlagAoutKludge = 1u << 16;
constexpr uint32_t kUnderstood = kFlagPageAlign | kFlagMemInfo | kFlagVideo;

// 3.3 information structure flags.
constexpr uint32_t kInfoMem = 1u << 0, kInfoCmdline = 1u << 2, kInfoMods = 1u << 3,
                   kInfoMmap = 1u << 6, kInfoLoaderName = 1u << 9;
// 3.3 field offsets.
constexpr uint64_t kMiFlags = 0, kMiMemLower = 4, kMiMemUpper = 8, kMiCmdline = 16,
                   kMiModsCount = 20, kMiModsAddr = 24, kMiMmapLength = 44,
                   kMiMmapAddr = 48, kMiLoaderName = 64;
constexpr uint64_t kInfoBytes = 120; // up to the end of the framebuffer fields, all zero

struct Header {
  uint64_t Offset;
  uint32_t Flags;
};

uint64_t alignUp(uint64_t V, uint64_t A) { return (V + A - 1) & ~(A - 1); }

/// 3.1.1: the first 4-byte aligned magic whose checksum is right.
Error findHeader(std::span<const uint8_t> Image, Header &Out) {
  const uint64_t Limit = std::min<uint64_t>(Image.size(), kSearchBytes);
  bool BadChecksum = false;
  uint64_t BadAt = 0;
  for (uint64_t Off = 0; Off + 12 <= Limit; Off += 4) {
    if (le32(Image, Off) != kHeaderMagic)
      continue;
    uint32_t Flags = le32(Image, Off + 4), Sum = le32(Image, Off + 8);
    if (uint32_t(kHeaderMagic + Flags + Sum) == 0) {
      Out = {Off, Flags};
      return Error::success();
    }
    if (!BadChecksum) {
      BadChecksum = true;
      BadAt = Off;
    }
  }
  if (BadChecksum)
    return Error(ErrorCode::BadMultibootHeader,
                 fmt::format("Multiboot header at offset {:#x} has a bad checksum", BadAt));
  if (isElf(Image))
    return Error(ErrorCode::NotAnImage, "ELF file has no Multiboot header in its first 8192 bytes");
  return Error(ErrorCode::NotAnImage, "not an ELF file and no Multiboot header in the first 8192 bytes");
}

/// 3.1.3 "The address fields of Multiboot header" (the a.out kludge).
Error planAout(std::span<const uint8_t> Image, const Header &H, LoadPlan &Plan) {
  if (!inFile(std::min<uint64_t>(Image.size(), kSearchBytes), H.Offset, 32))
    return Error(ErrorCode::TruncatedImage,
                 "Multiboot header address fields are past the end of the first 8192 bytes");
  const uint32_t HeaderAddr = le32(Image, H.Offset + 12), LoadAddr = le32(Image, H.Offset + 16),
                 LoadEnd = le32(Image, H.Offset + 20), BssEnd = le32(Image, H.Offset + 24),
                 Entry = le32(Image, H.Offset + 28);
  // header_addr is where the header itself is loaded, so load_addr corresponds to file
  // offset H.Offset - (header_addr - load_addr).
  if (HeaderAddr < LoadAddr || HeaderAddr - LoadAddr > H.Offset)
    return Error(ErrorCode::BadMultibootHeader,
                 fmt::format("header_addr {:#x} is inconsistent with load_addr {:#x}",
                             HeaderAddr, LoadAddr));
  const uint64_t FileOff = H.Offset - (HeaderAddr - LoadAddr);
  uint64_t LoadSize;
  if (LoadEnd == 0) {
    LoadSize = Image.size() - FileOff; // 0: load to the end of the file
  } else {
    if (LoadEnd < LoadAddr)
      return Error(ErrorCode::BadMultibootHeader,
                   fmt::format("load_end_addr {:#x} is below load_addr {:#x}", LoadEnd, LoadAddr));
    LoadSize = LoadEnd - LoadAddr;
    if (!inFile(Image.size(), FileOff, LoadSize))
      return Error(ErrorCode::TruncatedImage,
                   fmt::format("load_end_addr {:#x} is past the end of the file", LoadEnd));
  }
  uint64_t MemSize = LoadSize;
  if (BssEnd != 0) { // 0: no BSS
    if (BssEnd < LoadAddr + LoadSize)
      return Error(ErrorCode::BadMultibootHeader,
                   fmt::format("bss_end_addr {:#x} is below the end of the loaded data {:#x}",
                               BssEnd, LoadAddr + LoadSize));
    MemSize = BssEnd - LoadAddr;
  }
  if (MemSize == 0)
    return Error(ErrorCode::BadMultibootHeader, "the a.out kludge loads nothing");
  if (Entry < LoadAddr || Entry - LoadAddr >= MemSize)
    return Error(ErrorCode::BadEntry,
                 fmt::format("entry_addr {:#x} is outside the loaded image {:#x}-{:#x}", Entry,
                             LoadAddr, LoadAddr + MemSize));
  Plan = LoadPlan{};
  Plan.Segs.push_back({FileOff, LoadSize, LoadAddr, MemSize});
  Plan.Entry = Entry;
  return Error::success();
}

/// The boot information blob: GDT, information structure, memory map, module list and
/// strings, built in host memory and copied once its guest address is known.
class InfoBlob {
public:
  uint64_t add(const void *P, uint64_t N, uint64_t Align = 1) {
    uint64_t Off = alignUp(Bytes.size(), Align);
    // Zero-filled; P = nullptr reserves space to fill in later.
    Bytes.resize(Off + N, 0);
    if (P)
      std::memcpy(Bytes.data() + Off, P, N);
    return Off;
  }
  uint64_t addString(const std::string &S) { return add(S.c_str(), S.size() + 1); }
  void put32(uint64_t Off, uint32_t V) { std::memcpy(Bytes.data() + Off, &V, 4); }
  std::vector<uint8_t> Bytes;
};

} // namespace

Error loadMultiboot(Cpu &C, std::span<const uint8_t> Image, const MultibootParams &P,
                    BootLayout *Out) {
  PhysMem &Mem = C.Mem;
  Header H;
  if (Error E = findHeader(Image, H))
    return E;
  if (uint32_t Bad = H.Flags & 0xffffu & ~kUnderstood)
    return Error(ErrorCode::UnsupportedFlags,
                 fmt::format("unsupported Multiboot header flags {:#x}", Bad));

  // 3.1.3: the address fields, when valid, take precedence over the ELF headers.
  LoadPlan Plan;
  const bool Kludge = H.Flags & kFlagAoutKludge;
  if (!Kludge && !isElf(Image))
    return Error(ErrorCode::NotAnImage,
                 fmt::format("Multiboot header at offset {:#x} has no address fields (flag bit "
                             "16 clear) and the file is not ELF, so there is nothing to say "
                             "where to load it",
                             H.Offset));
  if (Error E = Kludge ? planAout(Image, H, Plan) : planElf(Image, Plan))
    return E;
  if (Error E = placeSegments(Mem, Image, Plan))
    return E;

  std::vector<AddrRange> Used;
  uint64_t ImageBegin = ~0ull, ImageEnd = 0;
  for (const LoadSegment &S : Plan.Segs) {
    Used.push_back({S.Dest, S.Dest + S.MemSize});
    ImageBegin = std::min(ImageBegin, S.Dest);
    ImageEnd = std::max(ImageEnd, S.Dest + S.MemSize);
  }

  // Modules: page-aligned (header flag 0, honoured always), one after another above the
  // kernel's highest loaded byte, all below 4 GiB since the module list holds 32-bit
  // addresses.
  struct ModPlace {
    uint64_t Begin, End;
  };
  std::vector<ModPlace> Mods;
  uint64_t Next = alignUp(std::max<uint64_t>(ImageEnd, 1ull << 20), kPageSize);
  for (size_t I = 0; I < P.Modules.size(); ++I) {
    const uint64_t Len = P.Modules[I].Bytes.size();
    if (Next + Len > (1ull << 32) || !rangeIsRam(Mem, Next, Len))
      return Error(ErrorCode::NoRoom,
                   fmt::format("module {} ({} bytes) does not fit in guest RAM below 4 GiB "
                               "above the kernel (next free address {:#x})",
                               I, Len, Next));
    Mods.push_back({Next, Next + Len});
    Next = alignUp(Next + Len, kPageSize);
  }

  // Build the information blob (3.3).
  InfoBlob B;
  const uint64_t GdtOff = B.add(nullptr, kBootGdtBytes, 8);
  const uint64_t InfoOff = B.add(nullptr, kInfoBytes, 8);
  // Memory map entries (3.3): size (of the rest, 20), base_addr, length, type; the
  // firmware's E820 map (harness/firmware.h), whose types Multiboot shares.
  const std::vector<E820Entry> Map = e820Map(Mem);
  const uint64_t MmapOff = alignUp(B.Bytes.size(), 4);
  for (const E820Entry &E : Map) {
    uint8_t Raw[24];
    const uint32_t Size = 20, Type = uint32_t(E.Type);
    std::memcpy(Raw, &Size, 4);
    std::memcpy(Raw + 4, &E.Base, 8);
    std::memcpy(Raw + 12, &E.SizeBytes, 8);
    std::memcpy(Raw + 20, &Type, 4);
    B.add(Raw, sizeof(Raw), 4);
  }
  const uint64_t MmapLen = B.Bytes.size() - MmapOff;
  const uint64_t ModsOff = B.add(nullptr, 16 * Mods.size(), 4);
  std::vector<uint64_t> ModStrOff;
  for (const ModuleImage &M : P.Modules)
    ModStrOff.push_back(B.addString(M.CmdLine));
  const uint64_t CmdOff = B.addString(P.KernelName + " " + P.Append);
  const uint64_t NameOff = B.addString(P.BootLoaderName ? P.BootLoaderName : "vmxsim");

  for (const ModPlace &M : Mods)
    Used.push_back({M.Begin, M.End});
  uint64_t Base;
  if (!findFree(Mem, Used, B.Bytes.size(), kPageSize, Base) || Base + B.Bytes.size() > (1ull << 32))
    return Error(ErrorCode::NoRoom, "no free guest memory for the Multiboot information");

  auto Addr = [&](uint64_t Off) { return uint32_t(Base + Off); };
  const uint64_t Mi = InfoOff;
  B.put32(Mi + kMiFlags, kInfoMem | kInfoCmdline | kInfoMods | kInfoMmap | kInfoLoaderName);
  // mem_lower: KiB of conventional memory from 0; mem_upper: KiB from 1 MiB up to the
  // first hole (3.3). Both from the map's RAM ranges at 0 and at 1 MiB.
  uint64_t LowerBytes = 0, UpperBytes = 0;
  for (const E820Entry &E : Map)
    if (E.Type == E820Type::Ram && E.Base == 0)
      LowerBytes = E.SizeBytes;
    else if (E.Type == E820Type::Ram && E.Base == (1ull << 20))
      UpperBytes = E.SizeBytes;
  B.put32(Mi + kMiMemLower, uint32_t(LowerBytes / 1024));
  B.put32(Mi + kMiMemUpper, uint32_t(UpperBytes / 1024));
  B.put32(Mi + kMiCmdline, Addr(CmdOff));
  B.put32(Mi + kMiModsCount, uint32_t(Mods.size()));
  B.put32(Mi + kMiModsAddr, Addr(ModsOff));
  B.put32(Mi + kMiMmapLength, uint32_t(MmapLen));
  B.put32(Mi + kMiMmapAddr, Addr(MmapOff));
  B.put32(Mi + kMiLoaderName, Addr(NameOff));
  for (size_t I = 0; I < Mods.size(); ++I) {
    // 3.3 module structure: mod_start, mod_end (one past the last byte, as GRUB and QEMU
    // pass it), string, reserved.
    B.put32(ModsOff + 16 * I + 0, uint32_t(Mods[I].Begin));
    B.put32(ModsOff + 16 * I + 4, uint32_t(Mods[I].End));
    B.put32(ModsOff + 16 * I + 8, Addr(ModStrOff[I]));
  }

  // Everything is checked: write guest memory.
  for (size_t I = 0; I < Mods.size(); ++I) {
    const std::span<const uint8_t> Bytes = P.Modules[I].Bytes;
    Mem.copyIn(Hpa(Mods[I].Begin), Bytes.data(), Bytes.size());
  }
  Mem.copyIn(Hpa(Base), B.Bytes.data(), B.Bytes.size());
  writeBootGdt(Mem, Base + GdtOff);

  // 3.2 "Machine state".
  enterProtected32(C, Base + GdtOff, Plan.Entry);
  C.S.Gpr[RAX] = kBootMagic;
  C.S.Gpr[RBX] = Base + InfoOff;

  if (Out) {
    *Out = BootLayout{};
    Out->Entry = Plan.Entry;
    Out->ImageBegin = ImageBegin;
    Out->ImageEnd = ImageEnd;
    Out->InfoAddr = Base + InfoOff;
    Out->GdtAddr = Base + GdtOff;
    Out->AoutKludge = Kludge;
    Out->Elf64 = Plan.Elf64;
  }
  return Error::success();
}

} // namespace vmxsim
