// ELF executables as Multiboot kernels (Multiboot 0.6.96, "OS image format": without the
// a.out kludge the loader uses the ELF program headers). Field offsets are those of the
// System V ABI (gABI) "ELF Header" and "Program Header" tables.
#include "harness/boot_state.h"
#include "harness/loader.h"
#include "harness/loader_internal.h"
#include "mmu/phys_mem.h"

#include <elf.h>
#include <fmt/format.h>

namespace vmxsim::loader {

bool isElf(std::span<const uint8_t> Image) {
  return Image.size() >= 4 && std::memcmp(Image.data(), ELFMAG, SELFMAG) == 0;
}

Error planElf(std::span<const uint8_t> Image, LoadPlan &Plan) {
  const uint64_t Size = Image.size();
  if (Size < EI_NIDENT)
    return Error(ErrorCode::TruncatedImage, "truncated ELF header");
  const uint8_t Class = Image[EI_CLASS];
  if (Class != ELFCLASS32 && Class != ELFCLASS64)
    return Error(ErrorCode::BadElf, fmt::format("unsupported ELF class {}", Class));
  if (Image[EI_DATA] != ELFDATA2LSB)
    return Error(ErrorCode::BadElf, "ELF file is not little-endian");
  const bool Is64 = Class == ELFCLASS64;
  const uint64_t EhSize = Is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
  if (Size < EhSize)
    return Error(ErrorCode::TruncatedImage, "truncated ELF header");

  const uint16_t Type = le16(Image, 16), Machine = le16(Image, 18);
  if (Type != ET_EXEC)
    return Error(ErrorCode::BadElf, fmt::format("ELF type {} is not ET_EXEC", Type));
  const uint16_t WantMachine = Is64 ? EM_X86_64 : EM_386;
  if (Machine != WantMachine)
    return Error(ErrorCode::BadElf,
                 fmt::format("ELF{} machine {} is not {}", Is64 ? 64 : 32, Machine,
                             Is64 ? "EM_X86_64" : "EM_386"));

  uint64_t Entry, PhOff;
  unsigned PhEntSize, PhNum;
  if (Is64) {
    Entry = le64(Image, 24);
    PhOff = le64(Image, 32);
    PhEntSize = le16(Image, 54);
    PhNum = le16(Image, 56);
  } else {
    Entry = le32(Image, 24);
    PhOff = le32(Image, 28);
    PhEntSize = le16(Image, 42);
    PhNum = le16(Image, 44);
  }
  const unsigned MinPhSize = Is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
  if (PhNum == 0)
    return Error(ErrorCode::BadElf, "ELF file has no program headers");
  if (PhEntSize < MinPhSize)
    return Error(ErrorCode::BadElf, fmt::format("ELF e_phentsize {} is too small", PhEntSize));
  if (!inFile(Size, PhOff, uint64_t(PhEntSize) * PhNum))
    return Error(ErrorCode::TruncatedImage, "program headers past the end of the file");

  Plan = LoadPlan{};
  Plan.Elf64 = Is64;
  // Entry translation (as GRUB does): if e_entry lies in a segment's virtual range, the
  // physical entry is at the same offset in its physical range.
  bool EntryFound = false;
  uint64_t PhysEntry = 0;
  for (unsigned I = 0; I < PhNum; ++I) {
    const uint64_t Ph = PhOff + uint64_t(I) * PhEntSize;
    uint64_t PType = le32(Image, Ph), Off, VAddr, PAddr, FileSz, MemSz;
    if (Is64) {
      Off = le64(Image, Ph + 8);
      VAddr = le64(Image, Ph + 16);
      PAddr = le64(Image, Ph + 24);
      FileSz = le64(Image, Ph + 32);
      MemSz = le64(Image, Ph + 40);
    } else {
      Off = le32(Image, Ph + 4);
      VAddr = le32(Image, Ph + 8);
      PAddr = le32(Image, Ph + 12);
      FileSz = le32(Image, Ph + 16);
      MemSz = le32(Image, Ph + 20);
    }
    if (PType != PT_LOAD || MemSz == 0)
      continue;
    if (FileSz > MemSz)
      return Error(ErrorCode::BadElf,
                   fmt::format("segment {}: p_filesz {:#x} is larger than p_memsz {:#x}", I,
                               FileSz, MemSz));
    if (!inFile(Size, Off, FileSz))
      return Error(ErrorCode::TruncatedImage,
                   fmt::format("segment {}: file bytes {:#x}+{:#x} are past the end of the "
                               "file ({:#x} bytes)",
                               I, Off, FileSz, Size));
    if (PAddr + MemSz < PAddr)
      return Error(ErrorCode::OutsideRam,
                   fmt::format("segment {} at {:#x} (size {:#x}) wraps around", I, PAddr, MemSz));
    Plan.Segs.push_back({Off, FileSz, PAddr, MemSz});
    if (!EntryFound && Entry >= VAddr && Entry - VAddr < MemSz) {
      EntryFound = true;
      PhysEntry = PAddr + (Entry - VAddr);
    }
  }
  if (Plan.Segs.empty())
    return Error(ErrorCode::BadElf, "ELF file has no loadable segments");
  if (!EntryFound)
    return Error(ErrorCode::BadEntry,
                 fmt::format("entry point {:#x} is not in a loadable segment", Entry));
  // The entry runs in 32-bit protected mode (Multiboot "Machine state"), so an ELF64
  // kernel's entry must be below 4 GiB. QEMU refuses ELF64 Multiboot kernels without the
  // a.out kludge; GRUB loads them, and so do we.
  if (PhysEntry > 0xffffffffull)
    return Error(ErrorCode::BadEntry,
                 fmt::format("entry point {:#x} is above 4 GiB", PhysEntry));
  Plan.Entry = PhysEntry;
  return Error::success();
}

Error placeSegments(PhysMem &Mem, std::span<const uint8_t> Image, const LoadPlan &Plan) {
  // Check everything first so that a bad image leaves guest memory untouched.
  for (size_t I = 0; I < Plan.Segs.size(); ++I) {
    const LoadSegment &S = Plan.Segs[I];
    if (!rangeIsRam(Mem, S.Dest, S.MemSize))
      return Error(ErrorCode::OutsideRam,
                   fmt::format("segment {} at {:#x}-{:#x} is not in guest RAM", I, S.Dest,
                               S.Dest + S.MemSize));
  }
  for (const LoadSegment &S : Plan.Segs) {
    Mem.copyIn(Hpa(S.Dest), Image.data() + S.FileOff, S.FileSize);
    zeroGuestRam(Mem, S.Dest + S.FileSize, S.MemSize - S.FileSize);
  }
  return Error::success();
}

} // namespace vmxsim::loader

namespace vmxsim {

// gABI "Sections" and "Symbol Table": the first SHT_SYMTAB section, its sh_link string
// table; a symbol's value is its virtual address, mapped to the physical one through the
// PT_LOAD segment holding it (as planElf maps the entry point).
bool findElfSymbol(std::span<const uint8_t> Image, std::string_view Name, uint64_t &Pa,
                   uint64_t &SizeBytes) {
  using namespace loader;
  const uint64_t Size = Image.size();
  if (!isElf(Image) || Size < sizeof(Elf64_Ehdr) || Image[EI_CLASS] != ELFCLASS64 ||
      Image[EI_DATA] != ELFDATA2LSB)
    return false;
  const uint64_t ShOff = le64(Image, 40), PhOff = le64(Image, 32);
  const unsigned ShEntSize = le16(Image, 58), ShNum = le16(Image, 60);
  const unsigned PhEntSize = le16(Image, 54), PhNum = le16(Image, 56);
  if (ShEntSize < sizeof(Elf64_Shdr) || !inFile(Size, ShOff, uint64_t(ShEntSize) * ShNum) ||
      PhEntSize < sizeof(Elf64_Phdr) || !inFile(Size, PhOff, uint64_t(PhEntSize) * PhNum))
    return false;
  for (unsigned S = 0; S < ShNum; ++S) {
    const uint64_t Sh = ShOff + uint64_t(S) * ShEntSize;
    if (le32(Image, Sh + 4) != SHT_SYMTAB)
      continue;
    const uint64_t SymOff = le64(Image, Sh + 24), SymSize = le64(Image, Sh + 32);
    const uint32_t Link = le32(Image, Sh + 40);
    const uint64_t EntSize = le64(Image, Sh + 56);
    if (Link >= ShNum || EntSize < sizeof(Elf64_Sym) || !inFile(Size, SymOff, SymSize))
      return false;
    const uint64_t Str = ShOff + uint64_t(Link) * ShEntSize;
    const uint64_t StrOff = le64(Image, Str + 24), StrSize = le64(Image, Str + 32);
    if (!inFile(Size, StrOff, StrSize))
      return false;
    for (uint64_t E = 0; E + EntSize <= SymSize; E += EntSize) {
      const uint64_t Sym = SymOff + E;
      const uint32_t NameOff = le32(Image, Sym);
      if (NameOff >= StrSize || StrSize - NameOff <= Name.size() ||
          std::memcmp(Image.data() + StrOff + NameOff, Name.data(), Name.size()) != 0 ||
          Image[StrOff + NameOff + Name.size()] != 0)
        continue;
      const uint64_t Value = le64(Image, Sym + 8), SymBytes = le64(Image, Sym + 16);
      for (unsigned P = 0; P < PhNum; ++P) {
        const uint64_t Ph = PhOff + uint64_t(P) * PhEntSize;
        const uint64_t VAddr = le64(Image, Ph + 16), PAddr = le64(Image, Ph + 24),
                       MemSz = le64(Image, Ph + 40);
        if (le32(Image, Ph) == PT_LOAD && Value >= VAddr && Value - VAddr < MemSz &&
            SymBytes <= MemSz - (Value - VAddr)) {
          Pa = PAddr + (Value - VAddr);
          SizeBytes = SymBytes;
          return true;
        }
      }
      return false;
    }
    return false;
  }
  return false;
}

} // namespace vmxsim
