// Builders for small Multiboot v1 images (ELF32, ELF64, a.out kludge) around a few bytes
// of 32-bit code, for tests and fuzzers of libvmxsim's loaders. Header-only; layouts
// follow the gABI ELF tables and Multiboot 0.6.96 3.1.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

namespace vmxsim::testing {

inline constexpr uint32_t kMultibootMagic = 0x1BADB002;

inline void put16(std::vector<uint8_t> &B, size_t Off, uint16_t V) { std::memcpy(&B[Off], &V, 2); }
inline void put32(std::vector<uint8_t> &B, size_t Off, uint32_t V) { std::memcpy(&B[Off], &V, 4); }
inline void put64(std::vector<uint8_t> &B, size_t Off, uint64_t V) { std::memcpy(&B[Off], &V, 8); }

/// Writes a 12-byte Multiboot header (magic, flags, checksum) at Off.
inline void putMultibootHeader(std::vector<uint8_t> &B, size_t Off, uint32_t Flags) {
  put32(B, Off, kMultibootMagic);
  put32(B, Off + 4, Flags);
  put32(B, Off + 8, uint32_t(-(kMultibootMagic + Flags)));
}

/// The default guest code: "xor eax, ebx; out 0xf4, eax; hlt" — exits with
/// EAX ^ EBX = 0x2BADB002 ^ (address of the Multiboot information).
inline std::vector<uint8_t> exitWithMagicXorInfo() { return {0x31, 0xd8, 0xe7, 0xf4, 0xf4}; }

struct ElfImageOptions {
  uint64_t PAddr = 0x100000;  ///< physical load address of the one PT_LOAD segment
  uint64_t VAddr = 0x100000;  ///< its virtual address (entry is translated)
  uint64_t BssBytes = 0x1000; ///< p_memsz - p_filesz
  uint32_t MultibootFlags = 0x3;
  bool WithMultibootHeader = true;
};

/// ELF32 (EM_386, ET_EXEC): Ehdr at 0, one Phdr at 52, Multiboot header at 96, code at
/// 112; the PT_LOAD covers the whole file; entry = VAddr + 112.
inline std::vector<uint8_t> elf32Image(const std::vector<uint8_t> &Code,
                                       const ElfImageOptions &O = {}) {
  std::vector<uint8_t> B(112 + Code.size(), 0);
  const uint8_t Ident[] = {0x7f, 'E', 'L', 'F', 1, 1, 1, 0};
  std::memcpy(B.data(), Ident, sizeof(Ident));
  put16(B, 16, 2);                  // e_type ET_EXEC
  put16(B, 18, 3);                  // e_machine EM_386
  put32(B, 20, 1);                  // e_version
  put32(B, 24, uint32_t(O.VAddr + 112)); // e_entry
  put32(B, 28, 52);                 // e_phoff
  put16(B, 40, 52);                 // e_ehsize
  put16(B, 42, 32);                 // e_phentsize
  put16(B, 44, 1);                  // e_phnum
  put32(B, 52 + 0, 1);              // p_type PT_LOAD
  put32(B, 52 + 4, 0);              // p_offset
  put32(B, 52 + 8, uint32_t(O.VAddr));
  put32(B, 52 + 12, uint32_t(O.PAddr));
  put32(B, 52 + 16, uint32_t(B.size()));
  put32(B, 52 + 20, uint32_t(B.size() + O.BssBytes));
  put32(B, 52 + 24, 7);             // RWX
  put32(B, 52 + 28, 0x1000);
  if (O.WithMultibootHeader)
    putMultibootHeader(B, 96, O.MultibootFlags);
  std::memcpy(B.data() + 112, Code.data(), Code.size());
  return B;
}

/// ELF64 (EM_X86_64, ET_EXEC): Ehdr at 0, one Phdr at 64, Multiboot header at 120, code
/// at 136; entry = VAddr + 136.
inline std::vector<uint8_t> elf64Image(const std::vector<uint8_t> &Code,
                                       const ElfImageOptions &O = {}) {
  std::vector<uint8_t> B(136 + Code.size(), 0);
  const uint8_t Ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  std::memcpy(B.data(), Ident, sizeof(Ident));
  put16(B, 16, 2);           // ET_EXEC
  put16(B, 18, 62);          // EM_X86_64
  put32(B, 20, 1);
  put64(B, 24, O.VAddr + 136); // e_entry
  put64(B, 32, 64);          // e_phoff
  put16(B, 52, 64);          // e_ehsize
  put16(B, 54, 56);          // e_phentsize
  put16(B, 56, 1);           // e_phnum
  put32(B, 64 + 0, 1);       // PT_LOAD
  put32(B, 64 + 4, 7);       // p_flags
  put64(B, 64 + 8, 0);       // p_offset
  put64(B, 64 + 16, O.VAddr);
  put64(B, 64 + 24, O.PAddr);
  put64(B, 64 + 32, B.size());
  put64(B, 64 + 40, B.size() + O.BssBytes);
  put64(B, 64 + 48, 0x1000);
  if (O.WithMultibootHeader)
    putMultibootHeader(B, 120, O.MultibootFlags);
  std::memcpy(B.data() + 136, Code.data(), Code.size());
  return B;
}

/// ELF64 with two PT_LOAD segments: the whole file (FileBytes >= 189: Ehdr, two Phdrs,
/// the Multiboot header at 176, a HLT at 188 = the entry) at 1 MiB, and BssBytes of
/// zeros, with no file bytes, at BssAddr.
inline std::vector<uint8_t> elf64CodeAndBss(uint64_t BssAddr, uint64_t BssBytes,
                                            size_t FileBytes = 189) {
  std::vector<uint8_t> B(FileBytes < 189 ? 189 : FileBytes, 0);
  const uint8_t Ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  std::memcpy(B.data(), Ident, sizeof(Ident));
  put16(B, 16, 2);  // ET_EXEC
  put16(B, 18, 62); // EM_X86_64
  put32(B, 20, 1);
  put64(B, 24, 0x100000 + 188); // e_entry
  put64(B, 32, 64);             // e_phoff
  put16(B, 52, 64);
  put16(B, 54, 56);
  put16(B, 56, 2); // e_phnum
  for (unsigned I = 0; I < 2; ++I) {
    const size_t P = 64 + 56 * I;
    put32(B, P + 0, 1); // PT_LOAD
    put32(B, P + 4, 7);
    put64(B, P + 16, I ? BssAddr : 0x100000);
    put64(B, P + 24, I ? BssAddr : 0x100000);
    put64(B, P + 32, I ? 0 : B.size());
    put64(B, P + 40, I ? BssBytes : B.size());
  }
  putMultibootHeader(B, 176, 0x3);
  B[188] = 0xf4;
  return B;
}

struct AoutImageOptions {
  uint32_t LoadAddr = 0x100000;
  uint32_t LoadEndAddr = 0;          ///< 0: whole file
  uint32_t BssEndAddr = 0x102000;    ///< 0: no BSS
  uint32_t MultibootFlags = 0x10003; ///< page-align, memory info, address fields
  uint32_t HeaderOffset = 0;         ///< where the header sits in the file
};

/// A raw file with the a.out-kludge header at HeaderOffset (header_addr = LoadAddr +
/// HeaderOffset) and the code right after it (entry_addr).
inline std::vector<uint8_t> aoutImage(const std::vector<uint8_t> &Code,
                                      const AoutImageOptions &O = {}) {
  const size_t H = O.HeaderOffset;
  std::vector<uint8_t> B(H + 32 + Code.size(), 0);
  putMultibootHeader(B, H, O.MultibootFlags);
  put32(B, H + 12, O.LoadAddr + uint32_t(H)); // header_addr
  put32(B, H + 16, O.LoadAddr);               // load_addr
  put32(B, H + 20, O.LoadEndAddr);            // load_end_addr
  put32(B, H + 24, O.BssEndAddr);             // bss_end_addr
  put32(B, H + 28, O.LoadAddr + uint32_t(H) + 32); // entry_addr
  std::memcpy(B.data() + H + 32, Code.data(), Code.size());
  return B;
}

} // namespace vmxsim::testing
