// Guest-physical address space of a machine: sparse RAM, MMIO regions.
//
// RAM is one anonymous MAP_NORESERVE mapping per region, so a 64 GiB machine commits host
// memory only for pages the guest touches, and a RAM hit is one add. Layout follows a PC
// with QEMU's defaults: RAM from 0 up to the low-memory limit, the 32-bit PCI/MMIO hole
// below 4 GiB, and the rest of RAM from 4 GiB up. The legacy VGA/BIOS window
// (0xA0000-0xFFFFF) is RAM here but reported reserved in the firmware memory map.
#pragma once
#include "mmu/address.h"
#include <cstddef>
#include <cstdint>
#include <vector>

namespace vmxsim {

/// A device that claims a range of guest-physical addresses. Accesses are 1, 2, 4 or 8
/// bytes, naturally split by the caller if they cross the region's end.
class MmioDevice {
public:
  virtual ~MmioDevice() = default;
  virtual uint64_t mmioRead(uint64_t Offset, unsigned SizeBytes) = 0;
  virtual void mmioWrite(uint64_t Offset, unsigned SizeBytes, uint64_t Value) = 0;
};

class PhysMem {
public:
  /// Lowest address of the 32-bit hole; RAM above it moves to 4 GiB (QEMU pc: 3 GiB when
  /// RAM exceeds 3.5 GiB, else all RAM is low).
  static constexpr uint64_t kHighRamBase = 4ull << 30;

  explicit PhysMem(uint64_t RamSizeBytes);
  ~PhysMem();
  PhysMem(const PhysMem &) = delete;
  PhysMem &operator=(const PhysMem &) = delete;

  /// False if the host refused the mapping (reported by the machine as a one-line error).
  bool ok() const { return Low != nullptr; }
  uint64_t ramSizeBytes() const { return RamSize; }
  uint64_t lowRamBytes() const { return LowSize; }
  uint64_t highRamBytes() const { return HighSize; }

  /// Host pointer for guest-physical RAM at Addr, valid for the rest of its 4 KiB page, or
  /// nullptr if Addr is not RAM or is covered by an MMIO region.
  uint8_t *ramPointer(Gpa Addr) const {
    uint64_t A = Addr.value();
    if (A < LowSize) {
      if (A >= MmioLowWater && mmioAt(A))
        return nullptr;
      return Low + A;
    }
    if (A >= kHighRamBase && A - kHighRamBase < HighSize)
      return High + (A - kHighRamBase);
    return nullptr;
  }

  /// Registers an MMIO region. Regions must not overlap each other.
  void addMmio(Gpa Base, uint64_t SizeBytes, MmioDevice *Dev);
  MmioDevice *mmioAt(uint64_t A, uint64_t *OffsetOut = nullptr) const;

  /// Slow-path accessors used for MMIO, page-crossing and loader access. Unassigned
  /// addresses read all-ones and ignore writes, as on a PC.
  uint64_t read(Gpa Addr, unsigned SizeBytes) const;
  void write(Gpa Addr, unsigned SizeBytes, uint64_t Value);

  /// Bulk copies for loaders and tests; return false if any byte is not RAM.
  bool copyIn(Gpa Addr, const void *Src, uint64_t SizeBytes);
  bool copyOut(Gpa Addr, void *Dst, uint64_t SizeBytes) const;
  bool isRam(Gpa Addr, uint64_t SizeBytes) const;
  /// Makes RAM in [Addr, Addr + SizeBytes) read as zero (false if any byte is not RAM).
  /// Whole pages are given back to the host (sparse RAM reads zero until written), so the
  /// cost follows the pages that were written, not the size: a loader can clear a BSS of
  /// many GiB for nothing. Decoded code of the cleared pages is invalidated.
  bool zeroRam(Gpa Addr, uint64_t SizeBytes);

  // Self-modifying code support (STYLE 2.2): one generation counter per 4 KiB RAM page.
  // The decode cache records the generation of the page it decoded from; any write to a
  // page that holds decoded code bumps it. Pages holding code are flagged so that the
  // TLBs never install a fast write mapping for them.
  bool pageHoldsCode(uint64_t Pfn) const { return Pfn < NumPfns && CodeFlags[Pfn]; }
  void markCodePage(uint64_t Pfn) {
    if (Pfn < NumPfns && !CodeFlags[Pfn]) {
      CodeFlags[Pfn] = 1;
      ++CodePages;
    }
  }
  uint32_t codeGeneration(uint64_t Pfn) const { return Pfn < NumPfns ? CodeGen[Pfn] : 0; }
  /// Called on every slow-path write to RAM: invalidates decoded code of that page.
  void noteWrite(uint64_t Pfn) {
    if (Pfn < NumPfns && CodeFlags[Pfn]) {
      CodeFlags[Pfn] = 0;
      --CodePages;
      ++CodeGen[Pfn];
      ++GlobalCodeWrites;
    }
  }
  /// Counts writes that invalidated code; CPUs compare it to leave a stale block early.
  uint64_t codeWriteCount() const { return GlobalCodeWrites; }

private:
  struct Region {
    uint64_t Base, Size;
    MmioDevice *Dev;
  };
  uint64_t RamSize, LowSize, HighSize;
  uint8_t *Low = nullptr, *High = nullptr;
  std::vector<Region> Mmio;     // sorted by base; few entries
  uint64_t MmioLowWater = ~0ull; // lowest MMIO base, to keep RAM hits to one compare
  // Indexed by page frame number up to the end of RAM; mapped NORESERVE so untouched
  // entries cost no host memory.
  uint64_t NumPfns = 0;
  uint8_t *CodeFlags = nullptr;
  uint32_t *CodeGen = nullptr;
  uint64_t GlobalCodeWrites = 0;
  uint64_t CodePages = 0; ///< pages flagged in CodeFlags (zeroRam skips its scan at 0)
};

} // namespace vmxsim
