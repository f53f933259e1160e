// SDM Vol. 3C, "VMX Support for Address Translation" > "Page-Modification Logging": with
// "enable PML" = 1 and accessed and dirty flags for EPT enabled (EPTP bit 6), every
// guest-physical access that sets a dirty flag for EPT from 0 to 1 writes the 4-KByte
// aligned guest-physical address to PML address + 8 * PML index and decrements the
// index; with the index outside 0-511, an access that needs an accessed or dirty flag set
// is a page-modification log-full event (VM exit 62): no flag is set and the access does
// not occur. (The VM-entry checks of "enable PML" are rows of vm_entry_checks.def.)
//
// The guest uses TestMachine's identity paging (PML4 0x10000, PDPT 0x11000, PD 0x12000:
// 2-MByte pages over 0..4 GiB). EPT maps guest-physical 0..2 MiB identity with 4-KByte
// pages and two data pages at 0x800000 and 0x801000; every EPT entry starts with its
// accessed flag and every leaf but the data pages' with its dirty flag set, so that only
// what a test names needs a flag.
#include "tests/support/ept_builder.h"
#include "tests/support/vmx_test_machine.h"

#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_exit.h"
#include "mmu/ept.h"

#include <gtest/gtest.h>

#include <vector>

namespace vmxsim::test {
namespace {

using F = VmcsField;
using Bytes = std::vector<uint8_t>;

constexpr uint64_t kEptPool = 0x1000000, kEptPoolBytes = 0x100000;
constexpr uint64_t kPmlLog = 0x320000;
constexpr uint64_t kData0 = 0x800000, kData1 = 0x801000;
constexpr uint64_t kPml4 = 0x10000, kPdpt = 0x11000, kPd = 0x12000;
constexpr uint64_t kEptA = eptentry::Accessed, kEptD = eptentry::Dirty;

// mov [0x800008], rax; vmcall
const Bytes kWriteData0{0x48, 0x89, 0x04, 0x25, 0x08, 0x00, 0x80, 0x00, 0x0f, 0x01, 0xc1};
// mov rax, [0x800008]; vmcall
const Bytes kReadData0{0x48, 0x8b, 0x04, 0x25, 0x08, 0x00, 0x80, 0x00, 0x0f, 0x01, 0xc1};
// mov [0x800008], rax; mov [0x800ff0], rax; mov [0x801000], rax; vmcall
const Bytes kWriteTwoPages{0x48, 0x89, 0x04, 0x25, 0x08, 0x00, 0x80, 0x00,
                           0x48, 0x89, 0x04, 0x25, 0xf0, 0x0f, 0x80, 0x00,
                           0x48, 0x89, 0x04, 0x25, 0x00, 0x10, 0x80, 0x00, 0x0f, 0x01, 0xc1};

struct PmlMachine : VmxTestMachine {
  PmlMachine() : VmxTestMachine(VmxProfile::full()), Ept(*this, kEptPool, kEptPoolBytes) {
    Ept.identity4K(0, 0x200000, ept::Rwx | kEptA | kEptD);
    Ept.map4K(kData0, kData0);
    Ept.map4K(kData1, kData1);
    // Every present entry accessed; then the data leaves fresh (A = D = 0).
    for (uint64_t Pa = kEptPool; Pa < kEptPool + 4096 * Ept.tablesUsed(); Pa += 8)
      if (uint64_t E = read64(Pa); E & ept::Rwx) {
        E |= kEptA;
        write(Pa, &E, 8);
      }
    Ept.map4K(kData0, kData0);
    Ept.map4K(kData1, kData1);
    const std::vector<uint8_t> Zero(4096, 0);
    write(kPmlLog, Zero.data(), Zero.size());
    VmcsData &V = vmcs();
    V.set(F::PrimaryProcessorBasedVmExecutionControls,
          V.get(F::PrimaryProcessorBasedVmExecutionControls) |
              controlBit(VmxControl::ActivateSecondaryControls));
    V.set(F::SecondaryProcessorBasedVmExecutionControls,
          controlBit(VmxControl::EnableEpt) | controlBit(VmxControl::EnablePml));
    V.set(F::EptPointer, Ept.eptp() | eptp::AccessedDirty);
    V.set(F::PmlAddress, kPmlLog);
    V.set(F::PmlIndex, 511);
    const uint8_t Hlt = 0xf4;
    write(kHostCode, &Hlt, 1);
  }
  /// Runs Guest with RAX = Rax until the host halts after the guest's VM exit.
  void runGuest(const Bytes &Guest, uint64_t Rax = 0x5a5a5a5a5a5a5a5aull) {
    write(kGuestCode, Guest.data(), Guest.size());
    S.Gpr[RAX] = Rax;
    StepResult R = exec(enc::Vmlaunch, 20);
    ASSERT_FALSE(R.Faulted) << "vector " << unsigned(R.Vector);
    ASSERT_EQ(R.Why, StopReason::Halted);
    ASSERT_FALSE(Cpu_.NonRoot);
  }
  uint64_t logEntry(unsigned Index) { return read64(kPmlLog + 8 * Index); }
  uint64_t leaf(uint64_t Gpa) { return read64(Ept.leafAddress(Gpa)); }
  uint64_t exitReason() { return vmcs().get(F::ExitReason); }
  uint64_t pmlIndex() { return vmcs().get(F::PmlIndex); }
  /// Makes the EPT leaf of the guest page-table page Gpa not dirty.
  void cleanLeaf(uint64_t Gpa) {
    uint64_t E = leaf(Gpa) & ~kEptD;
    write(Ept.leafAddress(Gpa), &E, 8);
  }

  EptBuilder Ept;
};

TEST(VmxSupportForAddressTranslation, PmlLogsTheWriteThatSetsADirtyFlag) {
  PmlMachine M;
  M.runGuest(kWriteData0);
  EXPECT_EQ(M.exitReason(), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.logEntry(511), kData0); // 4-KByte aligned: not 0x800008
  EXPECT_EQ(M.pmlIndex(), 510u);
  EXPECT_EQ(M.leaf(kData0) & (kEptA | kEptD), kEptA | kEptD);
  EXPECT_EQ(M.read64(kData0 + 8), 0x5a5a5a5a5a5a5a5aull);
  EXPECT_EQ(M.logEntry(510), 0u);
}

TEST(VmxSupportForAddressTranslation, PmlDoesNotLogAReadOrAnAlreadyDirtyPage) {
  PmlMachine M;
  M.runGuest(kReadData0);
  EXPECT_EQ(M.exitReason(), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.pmlIndex(), 511u);
  EXPECT_EQ(M.leaf(kData0) & (kEptA | kEptD), kEptA); // accessed, not dirty
  EXPECT_EQ(M.logEntry(511), 0u);
  // Two writes to kData0 and one to kData1: one entry per dirty flag set, in order.
  PmlMachine M2;
  M2.runGuest(kWriteTwoPages);
  EXPECT_EQ(M2.exitReason(), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M2.logEntry(511), kData0);
  EXPECT_EQ(M2.logEntry(510), kData1);
  EXPECT_EQ(M2.pmlIndex(), 509u);
}

TEST(VmxSupportForAddressTranslation, PmlLogsGuestPagingStructuresTreatedAsWrites) {
  // With EPT A/D, the processor's accesses to guest paging-structure entries are writes
  // for EPT: the first use of each table page whose EPT dirty flag is 0 logs it, in the
  // order of the walk of the first access (the instruction fetch).
  PmlMachine M;
  for (uint64_t Table : {kPml4, kPdpt, kPd})
    M.cleanLeaf(Table);
  M.runGuest({0x0f, 0x01, 0xc1}); // vmcall
  EXPECT_EQ(M.exitReason(), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.logEntry(511), kPml4);
  EXPECT_EQ(M.logEntry(510), kPdpt);
  EXPECT_EQ(M.logEntry(509), kPd);
  EXPECT_EQ(M.pmlIndex(), 508u);
}

TEST(VmxSupportForAddressTranslation, PmlIndexZeroLogsThenWrapsToFfff) {
  PmlMachine M;
  M.vmcs().set(F::PmlIndex, 0);
  M.runGuest(kWriteData0);
  EXPECT_EQ(M.exitReason(), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.logEntry(0), kData0);
  EXPECT_EQ(M.pmlIndex(), 0xffffu);
}

TEST(VmxSupportForAddressTranslation, PmlLogFullExitsWithReason62BeforeTheAccess) {
  for (uint64_t Index : {uint64_t(512), uint64_t(0xffff)}) {
    SCOPED_TRACE(Index);
    PmlMachine M;
    M.vmcs().set(F::PmlIndex, Index);
    const uint64_t Before = M.read64(kData0 + 8);
    M.runGuest(kWriteData0);
    const VmcsData &V = M.vmcs();
    EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::PageModificationLogFull));
    EXPECT_EQ(V.get(F::ExitQualification), 0u);
    EXPECT_EQ(V.get(F::GuestRip), kGuestCode); // fault-like: the MOV did not complete
    EXPECT_EQ(V.get(F::IdtVectoringInformation), 0u);
    EXPECT_EQ(V.get(F::PmlIndex), Index);
    EXPECT_EQ(M.read64(kData0 + 8), Before);    // the access did not occur
    EXPECT_EQ(M.leaf(kData0) & (kEptA | kEptD), 0u); // no flag was set, not even A
    EXPECT_EQ(M.logEntry(511), 0u);
  }
}

TEST(VmxSupportForAddressTranslation, PmlLogFullAlsoStopsAnAccessThatOnlyNeedsAccessed) {
  PmlMachine M;
  M.vmcs().set(F::PmlIndex, 0xffff);
  M.runGuest(kReadData0);
  EXPECT_EQ(M.exitReason(), uint64_t(ExitReason::PageModificationLogFull));
  EXPECT_EQ(M.leaf(kData0) & kEptA, 0u);
}

TEST(VmxSupportForAddressTranslation, PmlLogFullIsNoEventWhenNoFlagNeedsSetting) {
  PmlMachine M;
  uint64_t E = M.leaf(kData0) | kEptA | kEptD;
  M.write(M.Ept.leafAddress(kData0), &E, 8);
  M.vmcs().set(F::PmlIndex, 0xffff);
  M.runGuest(kWriteData0, 0x77);
  EXPECT_EQ(M.exitReason(), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.read64(kData0 + 8), 0x77u);
  EXPECT_EQ(M.pmlIndex(), 0xffffu);
}

TEST(VmxSupportForAddressTranslation, PmlWithoutEptAccessedDirtyLogsNothing) {
  PmlMachine M;
  M.vmcs().set(F::EptPointer, M.Ept.eptp()); // bit 6 clear
  M.vmcs().set(F::PmlIndex, 0xffff);          // would be full: no flag is ever needed
  M.runGuest(kWriteData0);
  EXPECT_EQ(M.exitReason(), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.leaf(kData0) & (kEptA | kEptD), 0u);
}

TEST(VmxSupportForAddressTranslation, PmlLogFullOnIretThatUnblockedNmisSetsBit12) {
  // mov rsp, 0x800000; iretq — the IRET frame is in the data page, whose accessed flag
  // needs setting with the log full; blocking by NMI was in effect before the IRET.
  PmlMachine M;
  M.vmcs().set(F::PmlIndex, 0xffff);
  M.vmcs().set(F::GuestInterruptibilityState, 1u << 3);
  M.runGuest({0x48, 0xbc, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x48, 0xcf});
  EXPECT_EQ(M.exitReason(), uint64_t(ExitReason::PageModificationLogFull));
  EXPECT_EQ(M.vmcs().get(F::ExitQualification), 1u << 12);
  EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode + 10);
}

TEST(VmxCapabilities, FullProfileAdvertisesPmlWithEptAccessedDirty) {
  const VmxProfile &P = VmxProfile::full();
  EXPECT_TRUE(P.has(VmxFeature::Pml));
  EXPECT_TRUE(P.EptAccessedDirty);
  const uint64_t Ctls2 = vmxCapabilityMsr(P, 0x48b, 0).value_or(0);
  EXPECT_TRUE((Ctls2 >> 32) & controlBit(VmxControl::EnablePml));
}

} // namespace
} // namespace vmxsim::test
