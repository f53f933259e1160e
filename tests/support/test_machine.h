// A bare processor plus memory for instruction-level tests: sets up real, 32-bit
// protected or 64-bit long mode directly (no firmware), loads code bytes, and runs.
#pragma once
#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "mmu/io_bus.h"
#include "mmu/phys_mem.h"

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace vmxsim::test {

/// Guest-physical layout used by TestMachine's mode set-ups.
inline constexpr uint64_t kCodeBase = 0x100000;  ///< code is loaded here
inline constexpr uint64_t kDataBase = 0x200000;  ///< a scratch data area
inline constexpr uint64_t kStackTop = 0x80000;   ///< initial RSP
inline constexpr uint64_t kGdtBase = 0x1000;     ///< GDT (see selectors below)
inline constexpr uint64_t kIdtBase = 0x2000;     ///< IDT (empty until a test fills it)
inline constexpr uint64_t kPml4Base = 0x10000;   ///< 4-level tables: identity 0..4 GiB
/// GDT selectors installed by the set-ups.
inline constexpr uint16_t kSelCode64 = 0x08, kSelData = 0x10, kSelCode32 = 0x18,
                          kSelCode16 = 0x20, kSelUserCode64 = 0x2b, kSelUserData = 0x33,
                          kSelUserCode32 = 0x3b, kSelTss = 0x40;

/// The GDT with the selectors above, at kGdtBase.
void writeFlatGdt(PhysMem &Mem);
/// TestMachine::setupLongMode for any processor and its memory (e.g. a Machine's CPUs,
/// which then share the tables): identity 4-level tables at kPml4Base, CS = kSelCode64.
/// Needs the GDT of writeFlatGdt.
void setupLongMode(Cpu &C, PhysMem &Mem);

class TestMachine {
public:
  explicit TestMachine(uint64_t RamBytes = 64ull << 20,
                       const CpuModel &Model = CpuModel::defaultModel());

  /// 64-bit mode, CPL 0, paging with identity 2 MiB pages over 0..4 GiB (user, writable),
  /// flat segments from the GDT above, IDT at kIdtBase with limit 0 (no handlers).
  void setupLongMode();
  /// 32-bit protected mode, flat 4 GiB segments, paging off, CPL 0.
  void setupProtected32();
  /// Real mode at CS:IP = (kCodeBase >> 4):0.
  void setupReal();

  /// Copies code to kCodeBase and points RIP at it (for real mode IP=0).
  void loadCode(const std::vector<uint8_t> &Bytes);
  void loadCode(std::initializer_list<uint8_t> Bytes) { loadCode(std::vector<uint8_t>(Bytes)); }
  void write(uint64_t Gpa, const void *Src, uint64_t Size);
  uint64_t read64(uint64_t Gpa);

  /// Runs up to MaxInsns instructions.
  StopReason run(uint64_t MaxInsns = 1000000) { return Cpu_.run(MaxInsns); }

  PhysMem Mem;
  IoBus Io;
  Cpu Cpu_;
  CpuState &S;
};

} // namespace vmxsim::test
