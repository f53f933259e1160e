// Helpers shared by the loader files (not part of the library API).
#pragma once
#include "harness/error.h"

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace vmxsim {

class PhysMem;

namespace loader {

inline uint16_t le16(std::span<const uint8_t> B, uint64_t Off) {
  uint16_t V;
  std::memcpy(&V, B.data() + Off, 2);
  return V;
}
inline uint32_t le32(std::span<const uint8_t> B, uint64_t Off) {
  uint32_t V;
  std::memcpy(&V, B.data() + Off, 4);
  return V;
}
inline uint64_t le64(std::span<const uint8_t> B, uint64_t Off) {
  uint64_t V;
  std::memcpy(&V, B.data() + Off, 8);
  return V;
}
/// True if [Off, Off + Len) lies inside a buffer of Size bytes (overflow-safe).
inline bool inFile(uint64_t Size, uint64_t Off, uint64_t Len) {
  return Off <= Size && Len <= Size - Off;
}

/// One piece of the image to place in guest memory: FileSize bytes from FileOff, then
/// zeros up to MemSize, at guest-physical Dest.
struct LoadSegment {
  uint64_t FileOff, FileSize, Dest, MemSize;
};
struct LoadPlan {
  std::vector<LoadSegment> Segs;
  uint64_t Entry = 0;
  bool Elf64 = false;
};

bool isElf(std::span<const uint8_t> Image);
/// Reads the ELF header and PT_LOAD program headers (ELF32 EM_386 or ELF64 EM_X86_64,
/// ET_EXEC, little-endian) into a plan; Entry is the physical entry point.
Error planElf(std::span<const uint8_t> Image, LoadPlan &Plan);
/// Checks every segment lies in guest RAM, then copies and zero-fills them.
Error placeSegments(PhysMem &Mem, std::span<const uint8_t> Image, const LoadPlan &Plan);

} // namespace loader
} // namespace vmxsim
