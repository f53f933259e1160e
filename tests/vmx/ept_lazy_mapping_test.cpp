// The issue's lazily mapped guest (SDM Vol. 3C, "EPT Violations" and "Exit Qualification
// for EPT Violations"): the EPT starts with only the guest's code, stack and paging
// structures; every first touch of a data page is an EPT violation (exit reason 48) that
// the test hypervisor handles by giving the page a fresh host page, then VMRESUME, until
// the guest halts. The exit count equals the number of distinct pages touched, and the
// guest's checksum proves every value landed where the guest put it.
#include "tests/support/ept_builder.h"
#include "tests/support/vmx_test_machine.h"

#include "cpu/vmx/capabilities.h"

#include <gtest/gtest.h>

#include <set>

namespace vmxsim::test {
namespace {

using F = VmcsField;

constexpr uint64_t kEptPool = 0x400000, kPoolBytes = 0x40000;
/// The guest's data pages (guest-physical = guest-linear: identity guest paging).
constexpr uint64_t kDataBase = 0x1000000;
/// Host pages handed out by the handler, in order of first touch.
constexpr uint64_t kHostPool = 0x2000000;
constexpr unsigned kPagesRead = 16, kPagesWritten = 24, kRmwPage = 24;
constexpr unsigned kDistinctPages = kRmwPage + 1;

// Guest (64-bit, at kGuestCode; assembled from):
//   mov ebx, kDataBase; xor eax, eax; xor ecx, ecx
//   1: read the qword at offset 8 of pages 0..15 into the checksum (rax)
//   2: write K + 1 to offset 0 of pages 0..23 (pages 0..15 were read before)
//   3: three passes adding offset 0 of pages 0..23
//   add qword [rbx + 24 * 4096], 0x100 (read-modify-write first touch); add it too; hlt
const std::vector<uint8_t> kGuest = {
    0xbb, 0x00, 0x00, 0x00, 0x01, 0x31, 0xc0, 0x31, 0xc9, 0x48, 0x89, 0xca, 0x48, 0xc1,
    0xe2, 0x0c, 0x48, 0x03, 0x44, 0x13, 0x08, 0xff, 0xc1, 0x83, 0xf9, 0x10, 0x72, 0xed,
    0x31, 0xc9, 0x48, 0x89, 0xca, 0x48, 0xc1, 0xe2, 0x0c, 0x48, 0x8d, 0x71, 0x01, 0x48,
    0x89, 0x34, 0x13, 0xff, 0xc1, 0x83, 0xf9, 0x18, 0x72, 0xea, 0xbf, 0x03, 0x00, 0x00,
    0x00, 0x31, 0xc9, 0x48, 0x89, 0xca, 0x48, 0xc1, 0xe2, 0x0c, 0x48, 0x03, 0x04, 0x13,
    0xff, 0xc1, 0x83, 0xf9, 0x18, 0x72, 0xee, 0xff, 0xcf, 0x75, 0xe8, 0x48, 0x81, 0x83,
    0x00, 0x80, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x48, 0x03, 0x83, 0x00, 0x80, 0x01,
    0x00, 0xf4};
constexpr uint64_t kReadRip = 0x10, kWriteRip = 0x29, kRmwRip = 0x51;

/// What the handler gives a newly touched page: qword 1 holds its guest page number
/// (a "backing store" the guest can check), the rest is zero.
uint64_t backingValue(uint64_t Gpa) { return Gpa >> 12; }

/// The guest's checksum: phase 1 reads the backing values of pages 0..15, phase 3
/// reads 1 + 2 + ... + 24 three times, and the read-modify-write page ends at 0x100.
constexpr uint64_t expectedChecksum() {
  uint64_t Sum = 0;
  for (uint64_t K = 0; K < kPagesRead; ++K)
    Sum += (kDataBase >> 12) + K;
  for (uint64_t K = 0; K < kPagesWritten; ++K)
    Sum += 3 * (K + 1);
  return Sum + 0x100;
}

enum class Policy {
  MapReadWriteOnFirstTouch, ///< any first touch maps the page R/W
  MapWhatTheAccessNeeds,    ///< a read maps R only; a write (later) upgrades to R/W
};

struct ExitRecord {
  uint64_t Qualification, Gpa, Gla, Rip;
};

struct LazyMachine : VmxTestMachine {
  LazyMachine() : VmxTestMachine(eptTestProfile()), Ept(*this, kEptPool, kPoolBytes) {
    // The guest's code page, its stack page and its paging structures (PML4, PDPT and
    // the PD of the first GiB at 0x10000..0x12fff, written by guest A-bit updates).
    Ept.identity4K(kGuestCode, 4096);
    Ept.identity4K(Layout.GuestRsp - 4096, 4096);
    Ept.identity4K(kPml4Base, 3 * 4096, ept::R | ept::W);
    write(kGuestCode, kGuest.data(), kGuest.size());
    const uint8_t Host[] = {0xf4};
    write(kHostCode, Host, sizeof(Host));
    VmcsData &V = vmcs();
    V.set(F::PrimaryProcessorBasedVmExecutionControls,
          V.get(F::PrimaryProcessorBasedVmExecutionControls) |
              controlBit(VmxControl::ActivateSecondaryControls) |
              controlBit(VmxControl::HltExiting));
    V.set(F::SecondaryProcessorBasedVmExecutionControls, controlBit(VmxControl::EnableEpt));
    V.set(F::EptPointer, Ept.eptp());
  }

  /// VMLAUNCH, then the test hypervisor's loop: each EPT violation maps the page by
  /// Pol and resumes; stops at the guest's HLT (exit 12) or anything unexpected.
  void run(Policy Pol) {
    bool Launch = true;
    for (unsigned Guard = 0; Guard < 1000; ++Guard) {
      Cpu_.Activity = ActivityState::Active;
      StepResult R = exec(Launch ? enc::Vmlaunch : enc::Vmresume, 100000);
      Launch = false;
      ASSERT_FALSE(R.Faulted);
      ASSERT_EQ(R.Why, StopReason::Halted);
      ASSERT_FALSE(Cpu_.NonRoot);
      uint64_t Reason = vmcs().get(F::ExitReason);
      if (Reason == 12)
        return;
      ASSERT_EQ(Reason, 48u);
      ExitRecord E{vmcs().get(F::ExitQualification), vmcs().get(F::GuestPhysicalAddress),
                   vmcs().get(F::GuestLinearAddress), vmcs().get(F::GuestRip)};
      Exits.push_back(E);
      mapPage(E.Gpa & ~uint64_t(0xfff), Pol == Policy::MapWhatTheAccessNeeds &&
                                            !(E.Qualification & 2));
    }
    FAIL() << "the guest did not halt";
  }

  /// The violation handler: a first touch gets a fresh host page (zero but for the
  /// backing value); a write to a page mapped read-only upgrades it in place.
  void mapPage(uint64_t Gpa, bool ReadOnly) {
    uint64_t Leaf = Ept.leafAddress(Gpa);
    uint64_t E = read64(Leaf);
    uint64_t Rights = ReadOnly ? ept::R : ept::R | ept::W;
    if (E & ept::Rwx) {
      E |= Rights;
    } else {
      uint64_t Host = kHostPool + 4096 * HostPagesUsed++;
      std::vector<uint8_t> Zero(4096, 0);
      write(Host, Zero.data(), 4096);
      uint64_t Backing = backingValue(Gpa);
      write(Host + 8, &Backing, 8);
      E = Host | ept::MemTypeWb | Rights;
    }
    write(Leaf, &E, 8);
  }

  std::set<uint64_t> distinctPages() const {
    std::set<uint64_t> Pages;
    for (const ExitRecord &E : Exits)
      Pages.insert(E.Gpa >> 12);
    return Pages;
  }

  EptBuilder Ept;
  std::vector<ExitRecord> Exits;
  unsigned HostPagesUsed = 0;
};

// Qualification bits (SDM Vol. 3C, Table "Exit Qualification for EPT Violations"):
// 0 read, 1 write, 3-5 the entry's R/W/X, 7 guest-linear address valid, 8 the access was
// to the translation of that linear address (not to a paging-structure entry).
// kQualFinal includes the advanced information the full profile reports (bits 9 and 10:
// the guest's identity pages are user-mode read/write pages).
constexpr uint64_t kQualRead = 1, kQualWrite = 2, kQualReadable = 1u << 3,
                   kQualLinearValid = 1u << 7, kQualFinal = (1u << 8) | (3u << 9);

TEST(EptLazyMapping, EveryFirstTouchIsOneViolationWhenMappedReadWrite) {
  LazyMachine M;
  M.run(Policy::MapReadWriteOnFirstTouch);
  ASSERT_EQ(M.vmcs().get(F::ExitReason), 12u);
  EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode + kGuest.size() - 1);
  EXPECT_EQ(M.S.Gpr[RAX], expectedChecksum());
  ASSERT_EQ(M.Exits.size(), kDistinctPages);
  EXPECT_EQ(M.distinctPages().size(), kDistinctPages);
  EXPECT_EQ(M.HostPagesUsed, kDistinctPages);
  // The first violations: reads of qword 1 of pages 0, 1, 2 by the phase-1 load.
  for (unsigned K = 0; K < 3; ++K) {
    SCOPED_TRACE(K);
    const ExitRecord &E = M.Exits[K];
    EXPECT_EQ(E.Qualification, kQualRead | kQualLinearValid | kQualFinal);
    EXPECT_EQ(E.Gpa, kDataBase + 4096 * K + 8);
    EXPECT_EQ(E.Gla, kDataBase + 4096 * K + 8);
    EXPECT_EQ(E.Rip, kGuestCode + kReadRip);
  }
  // Page 16 is first touched by the phase-2 store.
  const ExitRecord &W = M.Exits[kPagesRead];
  EXPECT_EQ(W.Qualification, kQualWrite | kQualLinearValid | kQualFinal);
  EXPECT_EQ(W.Gpa, kDataBase + 4096 * kPagesRead);
  EXPECT_EQ(W.Gla, kDataBase + 4096 * kPagesRead);
  EXPECT_EQ(W.Rip, kGuestCode + kWriteRip);
  // The read-modify-write sets bit 1; bit 0 is implementation-specific.
  const ExitRecord &Rmw = M.Exits.back();
  EXPECT_EQ(Rmw.Qualification & ~kQualRead, kQualWrite | kQualLinearValid | kQualFinal);
  EXPECT_EQ(Rmw.Gpa, kDataBase + 4096 * kRmwPage);
  EXPECT_EQ(Rmw.Rip, kGuestCode + kRmwRip);
  // The values are in the host pages the handler chose (first-touch order).
  uint64_t Page3Host = kHostPool + 4096 * 3;
  EXPECT_EQ(M.read64(Page3Host), 4u);
  EXPECT_EQ(M.read64(Page3Host + 8), (kDataBase >> 12) + 3);
  EXPECT_EQ(M.read64(kHostPool + 4096 * kRmwPage), 0x100u);
}

TEST(EptLazyMapping, ReadOnlyFirstMappingGivesASecondViolationOnWrite) {
  LazyMachine M;
  M.run(Policy::MapWhatTheAccessNeeds);
  ASSERT_EQ(M.vmcs().get(F::ExitReason), 12u);
  EXPECT_EQ(M.S.Gpr[RAX], expectedChecksum());
  // Pages 0..15 are read first (mapped R), then written: two violations each; the
  // others one each.
  EXPECT_EQ(M.Exits.size(), kDistinctPages + kPagesRead);
  EXPECT_EQ(M.distinctPages().size(), kDistinctPages);
  EXPECT_EQ(M.HostPagesUsed, kDistinctPages);
  // The write to page 0 finds it readable: bit 3 reports the read permission.
  const ExitRecord &E = M.Exits[kPagesRead];
  EXPECT_EQ(E.Qualification, kQualWrite | kQualReadable | kQualLinearValid | kQualFinal);
  EXPECT_EQ(E.Gpa, kDataBase);
  EXPECT_EQ(E.Gla, kDataBase);
  EXPECT_EQ(E.Rip, kGuestCode + kWriteRip);
}

TEST(EptLazyMapping, ResumingWithoutMappingRepeatsTheSameViolation) {
  LazyMachine M;
  M.Cpu_.Activity = ActivityState::Active;
  M.exec(enc::Vmlaunch, 1000);
  ASSERT_EQ(M.vmcs().get(F::ExitReason), 48u);
  const uint64_t Q = M.vmcs().get(F::ExitQualification), Rip = M.vmcs().get(F::GuestRip);
  M.Cpu_.Activity = ActivityState::Active;
  M.exec(enc::Vmresume, 1000);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), 48u);
  EXPECT_EQ(M.vmcs().get(F::ExitQualification), Q);
  EXPECT_EQ(M.vmcs().get(F::GuestRip), Rip);
  EXPECT_EQ(M.vmcs().get(F::GuestPhysicalAddress), kDataBase + 8);
}

} // namespace
} // namespace vmxsim::test
