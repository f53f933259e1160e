// SDM Vol. 3A, Paging: 32-bit (4 KiB, 4 MiB with PSE and PSE-36), PAE (4 KiB, 2 MiB,
// PDPTE registers) and 4-level (4 KiB, 2 MiB, 1 GiB) translations, accessed/dirty
// updates, every #PF error-code bit, and the NX, WP, SMEP and SMAP rules.
#include "tests/support/test_machine.h"

#include "cpu/cpu.h"
#include "cpu/translation.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr uint64_t kP = 1, kRw = 2, kUs = 4, kA = 0x20, kD = 0x40, kPs = 0x80, kXd = 1ull << 63;

struct PagingFixture {
  TestMachine M;
  Cpu &C = M.Cpu_;
  void put(uint64_t Pa, uint64_t V) { M.write(Pa, &V, 8); }
  void put32(uint64_t Pa, uint32_t V) { M.write(Pa, &V, 4); }
  uint64_t get(uint64_t Pa) { return M.read64(Pa); }

  // 32-bit paging, CR3 = 0x10000.
  void bits32(uint64_t Cr4 = 0) {
    M.S.Cr0 = cr0::PE | cr0::PG | cr0::ET;
    M.S.Cr4 = Cr4;
    M.S.Efer = 0;
    M.S.Cr3 = 0x10000;
  }
  // PAE paging, PDPT at 0x10000 (PDPTEs loaded as MOV CR3 would).
  void pae(uint64_t Efer = 0) {
    M.S.Cr0 = cr0::PE | cr0::PG | cr0::ET | cr0::WP;
    M.S.Cr4 = cr4::PAE;
    M.S.Efer = Efer;
    M.S.Cr3 = 0x10000;
    ASSERT_EQ(loadPdptes(C), Status::Ok);
  }
  // 4-level paging: PML4 0x10000, PDPT 0x11000, PD 0x12000, PT 0x13000; La 0x40201000
  // is mapped 4K through all levels to Pa 0x55000 (kUs|kRw everywhere unless changed).
  void level4(uint64_t PteFlags = kP | kRw | kUs) {
    M.setupLongMode();
    M.S.Cr3 = 0x10000;
    put(0x10000, 0x11000 | kP | kRw | kUs);
    put(0x11000 + 8 * 1, 0x12000 | kP | kRw | kUs);
    put(0x12000 + 8 * 1, 0x13000 | kP | kRw | kUs);
    put(0x13000 + 8 * 1, 0x55000 | PteFlags);
  }
  Status tr(uint64_t La, Access K, bool User, Translation &T) {
    C.Pending = PendingEvent{};
    return translateLinear(C, Gla(La), K, User, T);
  }
  uint32_t fault(uint64_t La, Access K, bool User) {
    Translation T;
    if (tr(La, K, User, T) != Status::Fault)
      return 0xdead;
    EXPECT_EQ(C.Pending.Vector, vec::PF);
    EXPECT_EQ(C.Pending.FaultAddr, La);
    return C.Pending.ErrorCode;
  }
  uint64_t pa(uint64_t La, Access K = Access::Read, bool User = false) {
    Translation T;
    if (tr(La, K, User, T) != Status::Ok)
      return ~uint64_t(0);
    return T.Pa.value();
  }
};

constexpr uint64_t kLa4 = 0x40201123; // PML4 0, PDPT 1, PD 1, PT 1

} // namespace

TEST(Paging, ThirtyTwoBit4KTranslationSetsAccessedAndDirty) {
  PagingFixture F;
  F.bits32();
  F.put32(0x10000 + 4 * 1, 0x11000 | kP | kRw | kUs);
  F.put32(0x11000 + 4 * 3, 0x55000 | kP | kRw | kUs);
  EXPECT_EQ(F.pa(0x00403123), 0x55123u);
  EXPECT_EQ(F.get(0x10004) & 0xffffffff, 0x11000u | kP | kRw | kUs | kA);
  EXPECT_EQ(F.get(0x1100c) & 0xffffffff, 0x55000u | kP | kRw | kUs | kA);
  EXPECT_EQ(F.pa(0x00403123, Access::Write), 0x55123u);
  EXPECT_EQ(F.get(0x1100c) & 0xffffffff, 0x55000u | kP | kRw | kUs | kA | kD);
  EXPECT_EQ(F.get(0x10004) & 0xffffffff, 0x11000u | kP | kRw | kUs | kA); // no kD on a PDE
}

TEST(Paging, ThirtyTwoBit4MPageNeedsPseAndHonoursPse36) {
  PagingFixture F;
  F.bits32(cr4::PSE);
  F.put32(0x10000 + 4 * 2, 0x00c00000 | kPs | kP | kRw);
  EXPECT_EQ(F.pa(0x00812345), 0xc12345u);
  F.put32(0x10000 + 4 * 2, 0x00c00000 | (1u << 13) | kPs | kP | kRw); // PSE-36: Pa bit 32
  EXPECT_EQ(F.pa(0x00812345), 0x100c12345u);
  F.put32(0x10000 + 4 * 2, 0x00c00000 | (1u << 21) | kPs | kP | kRw); // bit 21 reserved
  EXPECT_EQ(F.fault(0x00812345, Access::Read, false), pferr::P | pferr::Rsvd);
}

TEST(Paging, ThirtyTwoBitPsIsIgnoredWithoutCr4Pse) {
  PagingFixture F;
  F.bits32();
  F.put32(0x10000 + 4 * 2, 0x11000 | kPs | kP | kRw);
  F.put32(0x11000 + 4 * 0x12, 0x66000 | kP | kRw);
  EXPECT_EQ(F.pa(0x00812345), 0x66345u);
}

TEST(Paging, ThirtyTwoBitSmepFetchReportsInstructionBit) {
  PagingFixture F;
  F.bits32(cr4::SMEP);
  F.put32(0x10000, 0x11000 | kP | kRw | kUs);
  F.put32(0x11000, 0x55000 | kP | kRw | kUs);
  EXPECT_EQ(F.fault(0x123, Access::Fetch, false), pferr::P | pferr::I);
}

TEST(Paging, PaeTranslates4KAnd2MPagesThroughPdpteRegisters) {
  PagingFixture F;
  F.put(0x10000 + 8 * 1, 0x11000 | kP);
  F.put(0x11000 + 8 * 0, 0x12000 | kP | kRw | kUs);
  F.put(0x12000 + 8 * 5, 0x77000 | kP | kRw | kUs);
  F.put(0x11000 + 8 * 1, 0x00a00000 | kPs | kP | kRw);
  F.pae();
  EXPECT_EQ(F.pa(0x40005abc), 0x77abcu);
  EXPECT_EQ(F.pa(0x40212345), 0xa12345u);
  // The walk uses the PDPTE registers, not memory: clearing the memory copy changes
  // nothing until the PDPTEs are reloaded.
  F.put(0x10000 + 8 * 1, 0);
  EXPECT_EQ(F.pa(0x40005abc), 0x77abcu);
  ASSERT_EQ(loadPdptes(F.C), Status::Ok);
  EXPECT_EQ(F.fault(0x40005abc, Access::Read, false), 0u);
}

TEST(Paging, PaePdpteReservedBitsFailTheLoad) {
  PagingFixture F;
  F.M.S.Cr3 = 0x10000;
  for (uint64_t Bad : {uint64_t(1) << 1, uint64_t(1) << 2, uint64_t(1) << 5,
                       uint64_t(1) << 8, uint64_t(1) << 46, uint64_t(1) << 63}) {
    F.put(0x10000 + 8 * 2, 0x11000 | kP | Bad);
    EXPECT_EQ(loadPdptes(F.C), Status::Fault) << std::hex << Bad;
    EXPECT_EQ(F.C.Pending.Vector, vec::GP);
  }
  F.put(0x10000 + 8 * 2, 0x11000 | (uint64_t(1) << 1)); // not present: no check
  EXPECT_EQ(loadPdptes(F.C), Status::Ok);
}

TEST(Paging, PaeBit62IsReservedInPdesAndPtes) {
  PagingFixture F;
  F.put(0x10000, 0x11000 | kP);
  F.put(0x11000, 0x12000 | kP | kRw | (uint64_t(1) << 62));
  F.pae(efer::NXE);
  EXPECT_EQ(F.fault(0x1000, Access::Read, false), pferr::P | pferr::Rsvd);
}

TEST(Paging, FourLevelTranslates4K2MAnd1GPages) {
  PagingFixture F;
  F.level4();
  EXPECT_EQ(F.pa(kLa4), 0x55123u);
  F.put(0x12000 + 8 * 1, 0x00600000 | kPs | kP | kRw);
  F.C.Mmu.flushTlb();
  EXPECT_EQ(F.pa(kLa4), 0x601123u);
  F.put(0x11000 + 8 * 1, 0x80000000 | kPs | kP | kRw);
  EXPECT_EQ(F.pa(kLa4), 0x80201123u);
}

TEST(Paging, FourLevelSetsAccessedOnEveryLevelAndDirtyOnLeaf) {
  PagingFixture F;
  F.level4();
  EXPECT_EQ(F.pa(kLa4, Access::Write), 0x55123u);
  EXPECT_TRUE(F.get(0x10000) & kA);
  EXPECT_TRUE(F.get(0x11008) & kA);
  EXPECT_TRUE(F.get(0x12008) & kA);
  EXPECT_EQ(F.get(0x13008), 0x55000u | kP | kRw | kUs | kA | kD);
  EXPECT_FALSE(F.get(0x12008) & kD);
}

TEST(Paging, NotPresentErrorCodesEncodeAccessAndMode) {
  PagingFixture F;
  F.level4(0);
  EXPECT_EQ(F.fault(kLa4, Access::Read, false), 0u);
  EXPECT_EQ(F.fault(kLa4, Access::Write, false), pferr::W);
  EXPECT_EQ(F.fault(kLa4, Access::Read, true), pferr::U);
  EXPECT_EQ(F.fault(kLa4, Access::Write, true), pferr::W | pferr::U);
  EXPECT_EQ(F.fault(kLa4, Access::Fetch, false), pferr::I); // NXE=1 in long mode set-up
}

TEST(Paging, ProtectionViolationsSetPresentBit) {
  PagingFixture F;
  F.level4(kP | kRw); // supervisor page
  EXPECT_EQ(F.fault(kLa4, Access::Read, true), pferr::P | pferr::U);
  F.put(0x13008, 0x55000 | kP | kUs); // read-only user page
  EXPECT_EQ(F.fault(kLa4, Access::Write, true), pferr::P | pferr::W | pferr::U);
  EXPECT_EQ(F.pa(kLa4, Access::Read, true), 0x55123u);
}

TEST(Paging, ReservedBitsRaiseRsvdFaults) {
  PagingFixture F;
  F.level4(kP | kRw | kUs | (uint64_t(1) << 51));
  EXPECT_EQ(F.fault(kLa4, Access::Read, false), pferr::P | pferr::Rsvd);
  EXPECT_EQ(F.fault(kLa4, Access::Write, true), pferr::P | pferr::W | pferr::U | pferr::Rsvd);
  F.put(0x13008, 0x55000 | kP | kRw | kUs);
  F.put(0x10000, 0x11000 | kP | kRw | kUs | kPs); // kPs is reserved in a PML4E
  EXPECT_EQ(F.fault(kLa4, Access::Read, false), pferr::P | pferr::Rsvd);
  F.put(0x10000, 0x11000 | kP | kRw | kUs);
  F.put(0x12008, 0x00600000 | (1u << 13) | kPs | kP | kRw); // 2 MiB page, bit 13 reserved
  EXPECT_EQ(F.fault(kLa4, Access::Read, false), pferr::P | pferr::Rsvd);
  F.put(0x11008, 0x80000000 | (1u << 20) | kPs | kP | kRw); // 1 GiB page, bit 20 reserved
  EXPECT_EQ(F.fault(kLa4, Access::Read, false), pferr::P | pferr::Rsvd);
}

TEST(Paging, ExecuteDisableNeedsNxeAndIsReservedWithoutIt) {
  PagingFixture F;
  F.level4(kP | kRw | kUs | kXd);
  EXPECT_EQ(F.fault(kLa4, Access::Fetch, false), pferr::P | pferr::I);
  EXPECT_EQ(F.fault(kLa4, Access::Fetch, true), pferr::P | pferr::U | pferr::I);
  EXPECT_EQ(F.pa(kLa4), 0x55123u);
  F.M.S.Efer &= ~efer::NXE;
  EXPECT_EQ(F.fault(kLa4, Access::Read, false), pferr::P | pferr::Rsvd);
  EXPECT_EQ(F.fault(kLa4, Access::Fetch, false), pferr::P | pferr::Rsvd);
}

TEST(Paging, WriteProtectAppliesToSupervisorWritesOnlyWhenCr0WpSet) {
  PagingFixture F;
  F.level4(kP | kUs);
  F.M.S.Cr0 &= ~cr0::WP;
  EXPECT_EQ(F.pa(kLa4, Access::Write), 0x55123u);
  F.M.S.Cr0 |= cr0::WP;
  EXPECT_EQ(F.fault(kLa4, Access::Write, false), pferr::P | pferr::W);
}

TEST(Paging, SmepBlocksSupervisorFetchFromUserPages) {
  PagingFixture F;
  F.level4();
  F.M.S.Cr4 |= cr4::SMEP;
  EXPECT_EQ(F.fault(kLa4, Access::Fetch, false), pferr::P | pferr::I);
  EXPECT_EQ(F.pa(kLa4, Access::Read), 0x55123u);
  EXPECT_EQ(F.pa(kLa4, Access::Fetch, true), 0x55123u);
}

TEST(Paging, SmapBlocksSupervisorDataAccessUnlessAcAtCplBelow3) {
  PagingFixture F;
  F.level4();
  F.M.S.Cr4 |= cr4::SMAP;
  EXPECT_EQ(F.fault(kLa4, Access::Read, false), pferr::P);
  EXPECT_EQ(F.fault(kLa4, Access::Write, false), pferr::P | pferr::W);
  F.M.S.Rflags |= rflags::AC;
  EXPECT_EQ(F.pa(kLa4, Access::Write), 0x55123u);
  // At CPL 3 a supervisor access is implicit (descriptor tables): AC does not help.
  F.M.S.seg(SegReg::SS).Attr |= 3u << Segment::DplShift;
  EXPECT_EQ(F.fault(kLa4, Access::Read, false), pferr::P);
  EXPECT_EQ(F.pa(kLa4, Access::Read, true), 0x55123u);
}

TEST(Paging, PagingDisabledIsIdentity) {
  PagingFixture F;
  EXPECT_EQ(F.pa(0x12345678), 0x12345678u);
}

// The walker on its own (mmu/ only: a PhysMem and a PagingContext, no processor): the
// fault comes back as a value, and under EPT every paging-structure access goes through
// the translator, whose refusal ends the walk with everything the VM exit needs.
namespace {

struct BareWalker {
  PhysMem Mem{1u << 20};
  PagingContext Ctx;
  BareWalker() {
    Ctx.Cr3 = 0x10000;
    Ctx.Paging = Ctx.WriteProtect = Ctx.Pae = Ctx.LongMode = Ctx.Nxe = true;
    Ctx.MaxPhysAddrBits = 46;
    put(0x10000, 0x11000 | kP | kRw | kUs);
    put(0x11000 + 8 * 1, 0x12000 | kP | kRw | kUs);
    put(0x12000 + 8 * 1, 0x13000 | kP | kRw | kUs);
    put(0x13000 + 8 * 1, 0x55000 | kP | kUs); // read-only user page
  }
  void put(uint64_t Pa, uint64_t V) { ASSERT_TRUE(Mem.copyIn(Hpa(Pa), &V, 8)); }
  uint64_t get(uint64_t Pa) {
    uint64_t V = 0;
    EXPECT_TRUE(Mem.copyOut(Hpa(Pa), &V, 8));
    return V;
  }
};

/// Guest-physical = machine-physical + 0x80000 for entries, except one refused page.
struct ShiftingEpt final : PagingStructureTranslator {
  uint64_t RefusedPage = ~uint64_t(0);
  EptOutcome Refusal = EptOutcome::Violation;
  unsigned Calls = 0;
  EptAccess Last{Access::Read};
  EptWalk translate(Gpa Entry, const EptAccess &A) override {
    ++Calls;
    Last = A;
    EptWalk W;
    if ((Entry.value() & kPageMask) == RefusedPage) {
      W.Outcome = Refusal;
      W.Rights = eptright::R;
      return W;
    }
    W.Address = Hpa(Entry.value() - 0x80000);
    W.Rights = eptright::R | eptright::W | eptright::X;
    return W;
  }
};

} // namespace

TEST(PagingWalker, ReturnsTheTranslationAndThePageFaultAsValues) {
  BareWalker B;
  PagingWalk W = walkGuestPaging(B.Mem, B.Ctx, Gla(kLa4), Access::Read, true, nullptr);
  ASSERT_EQ(W.Outcome, PagingOutcome::Translated);
  EXPECT_EQ(W.Address, Gpa(0x55123));
  EXPECT_FALSE(W.Writable);
  EXPECT_TRUE(W.User);
  EXPECT_EQ(B.get(0x13008), 0x55000u | kP | kUs | kA);
  // A user write to the read-only page: #PF(P|W|U), nothing dirtied.
  W = walkGuestPaging(B.Mem, B.Ctx, Gla(kLa4), Access::Write, true, nullptr);
  ASSERT_EQ(W.Outcome, PagingOutcome::PageFault);
  EXPECT_EQ(W.ErrorCode, pferr::P | pferr::W | pferr::U);
  EXPECT_EQ(B.get(0x13008), 0x55000u | kP | kUs | kA);
  // Not present at the PML4 level, fetch with NXE: #PF(I).
  W = walkGuestPaging(B.Mem, B.Ctx, Gla(0x8000000000ull), Access::Fetch, false, nullptr);
  ASSERT_EQ(W.Outcome, PagingOutcome::PageFault);
  EXPECT_EQ(W.ErrorCode, pferr::I);
}

TEST(PagingWalker, UnderEptReadsEntriesThroughTheTranslatorAndReturnsItsRefusal) {
  BareWalker B;
  // The guest sees its tables 0x80000 higher than they are in machine memory.
  B.Ctx.Cr3 = 0x90000;
  B.put(0x10000, 0x91000 | kP | kRw | kUs);
  B.put(0x11000 + 8 * 1, 0x92000 | kP | kRw | kUs);
  B.put(0x12000 + 8 * 1, 0x93000 | kP | kRw | kUs);
  ShiftingEpt Ept;
  PagingWalk W = walkGuestPaging(B.Mem, B.Ctx, Gla(kLa4), Access::Read, false, &Ept);
  ASSERT_EQ(W.Outcome, PagingOutcome::Translated);
  EXPECT_EQ(W.Address, Gpa(0x55123)); // guest-physical: EPT of the data is the caller's
  EXPECT_EQ(Ept.Calls, 8u); // four entry reads, four accessed-flag writes
  EXPECT_EQ(Ept.Last.Kind, Access::Write);
  EXPECT_EQ(B.get(0x12008), 0x93000u | kP | kRw | kUs | kA);
  Ept.Calls = 0;
  W = walkGuestPaging(B.Mem, B.Ctx, Gla(kLa4), Access::Read, false, &Ept);
  ASSERT_EQ(W.Outcome, PagingOutcome::Translated);
  EXPECT_EQ(Ept.Calls, 4u); // the flags are set now: reads only

  // The page directory's page refused: the PD entry read ends the walk as an EPT fault
  // at the entry's guest-physical address, a paging-structure read with the linear
  // address, and the walk EPT returned.
  Ept.RefusedPage = 0x92000;
  Ept.Refusal = EptOutcome::Misconfiguration;
  W = walkGuestPaging(B.Mem, B.Ctx, Gla(kLa4 + 0x200000), Access::Write, false, &Ept);
  ASSERT_EQ(W.Outcome, PagingOutcome::EptFault);
  EXPECT_EQ(W.EptAddress, Gpa(0x92000 + 8 * 2));
  EXPECT_EQ(W.EptAccessKind.Kind, Access::Read);
  EXPECT_TRUE(W.EptAccessKind.PagingStructure);
  EXPECT_TRUE(W.EptAccessKind.LinearValid);
  EXPECT_EQ(W.EptAccessKind.Gla, kLa4 + 0x200000);
  EXPECT_EQ(W.Ept.Outcome, EptOutcome::Misconfiguration);

  // The leaf's dirty-flag update refused: an EPT fault of the write, after the read.
  B.put(0x13000 + 8 * 1, 0x55000 | kP | kRw | kUs | kA);
  Ept.RefusedPage = ~uint64_t(0);
  struct WriteRefusing final : PagingStructureTranslator {
    ShiftingEpt &Inner;
    explicit WriteRefusing(ShiftingEpt &I) : Inner(I) {}
    EptWalk translate(Gpa Entry, const EptAccess &A) override {
      EptWalk W = Inner.translate(Entry, A);
      if (A.Kind == Access::Write) {
        W.Outcome = EptOutcome::Violation;
        W.Rights = eptright::R;
      }
      return W;
    }
  } Refusing(Ept);
  W = walkGuestPaging(B.Mem, B.Ctx, Gla(kLa4), Access::Write, false, &Refusing);
  ASSERT_EQ(W.Outcome, PagingOutcome::EptFault);
  EXPECT_EQ(W.EptAddress, Gpa(0x93000 + 8 * 1));
  EXPECT_EQ(W.EptAccessKind.Kind, Access::Write);
  EXPECT_TRUE(W.EptAccessKind.PagingStructure);
  EXPECT_EQ(W.Ept.Rights, eptright::R);
  EXPECT_EQ(B.get(0x13008), 0x55000u | kP | kRw | kUs | kA); // not dirtied
}

// SDM Vol. 3A, "A20M#": while the platform asserts A20M# (PhysMem's A20 mask), bit 20 of
// every physical address is 0: the paging-structure reads and the translation itself.
TEST(Paging, A20MaskAppliesToTableReadsAndTheResultOutsideVmxOperation) {
  PagingFixture F;
  F.bits32();
  F.M.S.Cr3 = 0x110000; // with A20 off: the tables at 0x10000
  F.put32(0x10000 + 4 * 1, 0x111000 | kP | kRw | kUs);
  F.put32(0x11000 + 4 * 3, 0x155000 | kP | kRw | kUs);
  F.M.Mem.setA20(false);
  EXPECT_EQ(F.pa(0x00403123), 0x55123u);
  F.M.Mem.setA20(true);
  EXPECT_EQ(F.pa(0x00403123), ~uint64_t(0)); // the tables at 0x110000 are empty: #PF
}
