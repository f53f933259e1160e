// Builds EPT paging structures (SDM Vol. 3C, "EPT Translation Mechanism") in a
// TestMachine's memory for tests and benchmarks: a hierarchy of 4 levels allocated from
// a pool of zeroed pages, leaves of 4 KiB or 2 MiB with write-back memory type, and
// helpers to find or change a leaf (the lazy-mapping tests map pages on EPT violations).
#pragma once
#include "cpu/vmx/vmx_features.h"
#include "tests/support/test_machine.h"

#include <cstdint>
#include <vector>

namespace vmxsim::test {

/// EPT permission bits and the write-back leaf memory type (bits 5:3 = 6).
namespace ept {
inline constexpr uint64_t R = 1, W = 2, X = 4, Rwx = 7, LargePage = 1u << 7,
                          MemTypeWb = 6u << 3, UserExecute = 1u << 10;
/// EPTP: memory type WB (6) in bits 2:0, walk length 4 (3) in bits 5:3.
inline constexpr uint64_t EptpWb4Level = 6 | (3u << 3);
} // namespace ept

/// The full profile plus EPT, unrestricted guest, VM functions and EPTP switching (the
/// real profiles advertise them once the EPT work is complete).
inline const VmxProfile &eptTestProfile() {
  static const VmxProfile P = [] {
    VmxProfile Q = VmxProfile::full();
    for (VmxFeature Feat : {VmxFeature::Ept, VmxFeature::UnrestrictedGuest,
                         VmxFeature::VmFunctions, VmxFeature::EptpSwitching})
      Q.Features |= uint64_t(1) << unsigned(Feat);
    return Q;
  }();
  return P;
}

class EptBuilder {
public:
  /// Tables come from [PoolBase, PoolBase + PoolBytes); the PML4 is the first page.
  EptBuilder(TestMachine &M, uint64_t PoolBase, uint64_t PoolBytes)
      : M(M), Next(PoolBase), End(PoolBase + PoolBytes) {
    Pml4 = allocTable();
  }

  uint64_t eptp() const { return Pml4 | ept::EptpWb4Level; }

  /// Maps the 4 KiB guest-physical page Gpa to host page Hpa with Rights (R/W/X bits).
  void map4K(uint64_t Gpa, uint64_t Hpa, uint64_t Rights = ept::Rwx) {
    uint64_t Pt = table(Gpa, 1);
    writeEntry(Pt + 8 * ((Gpa >> 12) & 511), (Hpa & ~uint64_t(0xfff)) | ept::MemTypeWb | Rights);
  }
  /// Maps the 2 MiB guest-physical page Gpa to host Hpa with Rights.
  void map2M(uint64_t Gpa, uint64_t Hpa, uint64_t Rights = ept::Rwx) {
    uint64_t Pd = table(Gpa, 2);
    writeEntry(Pd + 8 * ((Gpa >> 21) & 511),
               (Hpa & ~uint64_t(0x1fffff)) | ept::MemTypeWb | ept::LargePage | Rights);
  }
  /// Identity-maps [0, Bytes) with 2 MiB pages.
  void identity2M(uint64_t Bytes, uint64_t Rights = ept::Rwx) {
    for (uint64_t A = 0; A < Bytes; A += 2ull << 20)
      map2M(A, A, Rights);
  }
  /// Identity-maps [Base, Base + Bytes) with 4 KiB pages.
  void identity4K(uint64_t Base, uint64_t Bytes, uint64_t Rights = ept::Rwx) {
    for (uint64_t A = Base & ~uint64_t(0xfff); A < Base + Bytes; A += 4096)
      map4K(A, A, Rights);
  }
  /// Address of the 4 KiB leaf entry for Gpa (its page table is created if missing).
  uint64_t leafAddress(uint64_t Gpa) { return table(Gpa, 1) + 8 * ((Gpa >> 12) & 511); }
  /// ORs Bits into every entry of the walk of Gpa, from the PML4E down to the entry that
  /// maps the page (for bits the tables built here leave 0, such as bit 10, execute for
  /// user-mode linear addresses).
  void orPathBits(uint64_t Gpa, uint64_t Bits) {
    uint64_t T = Pml4;
    for (unsigned L = 4; L >= 1; --L) {
      const uint64_t EntryPa = T + 8 * ((Gpa >> (12 + 9 * (L - 1))) & 511);
      const uint64_t E = M.read64(EntryPa);
      writeEntry(EntryPa, E | Bits);
      if (L == 1 || (E & ept::LargePage))
        return;
      T = E & 0x000ffffffffff000ull;
    }
  }
  /// Number of table pages allocated so far.
  unsigned tablesUsed() const { return Tables; }

private:
  uint64_t allocTable() {
    uint64_t T = Next;
    Next += 4096;
    if (Next > End)
      return 0; // callers' pools are sized generously; a zero table shows up in tests
    std::vector<uint8_t> Zero(4096, 0);
    M.write(T, Zero.data(), 4096);
    ++Tables;
    return T;
  }
  void writeEntry(uint64_t Pa, uint64_t V) { M.write(Pa, &V, 8); }
  /// The table of level Level (1 = PT, 2 = PD) that covers Gpa, allocating as needed
  /// (a large page in the way is replaced by an empty table: map pages before or
  /// instead of the large page that covers them, never both).
  uint64_t table(uint64_t Gpa, unsigned Level) {
    uint64_t T = Pml4;
    for (unsigned L = 4; L > Level; --L) {
      uint64_t EntryPa = T + 8 * ((Gpa >> (12 + 9 * (L - 1))) & 511);
      uint64_t E = M.read64(EntryPa);
      if (!(E & ept::Rwx) || (E & ept::LargePage)) {
        E = allocTable() | ept::Rwx;
        writeEntry(EntryPa, E);
      }
      T = E & 0x000ffffffffff000ull;
    }
    return T;
  }

  TestMachine &M;
  uint64_t Next, End;
  uint64_t Pml4 = 0;
  unsigned Tables = 0;
};

} // namespace vmxsim::test
