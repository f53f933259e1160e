// MOV to CR3 with PCIDs (SDM Vol. 3A, "Process-Context Identifiers (PCIDs)") and the SMAP
// flag instructions CLAC/STAC (SDM Vol. 2A, CLAC; Vol. 2B, STAC).
#include "tests/cpu/insn_fault_helpers.h"
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

TEST(ProcessContextIdentifiers, Cr3WriteKeepingPcidTranslationsStillSwitchesAddressSpace) {
  TestMachine M;
  M.setupLongMode();
  // A second address space: the same identity map except that the 2 MiB page at
  // kDataBase maps physical 0x400000 (PML4 0x30000 -> PDPT 0x31000 -> PD 0x32000).
  const uint64_t Pml4 = 0x30000, Pdpt = 0x31000, Pd = 0x32000;
  uint64_t E = Pdpt | 7;
  M.write(Pml4, &E, 8);
  for (uint64_t I = 0; I < 4; ++I) {
    E = I == 0 ? (Pd | 7) : M.read64(kPml4Base + 0x1000 + 8 * I);
    M.write(Pdpt + 8 * I, &E, 8);
  }
  for (uint64_t J = 0; J < 512; ++J) {
    E = J == 1 ? (0x400000 | 0x87) : M.read64(kPml4Base + 0x2000 + 8 * J);
    M.write(Pd + 8 * J, &E, 8);
  }
  const uint64_t Old = 0x1111, New = 0x2222;
  M.write(kDataBase, &Old, 8);
  M.write(0x400000, &New, 8);
  M.S.Cr4 |= cr4::PCIDE;
  M.S.Gpr[RBX] = Pml4 | (1ull << 63); // PCID 0, keep its translations
  M.loadCode({0x48, 0x8b, 0x04, 0x25, 0x00, 0x00, 0x20, 0x00, // mov rax, [kDataBase]
              0x0f, 0x22, 0xdb,                               // mov cr3, rbx
              0x48, 0x8b, 0x0c, 0x25, 0x00, 0x00, 0x20, 0x00, // mov rcx, [kDataBase]
              0xf4});
  ASSERT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Cr3, Pml4); // bit 63 is not stored
  EXPECT_EQ(M.S.Gpr[RAX], Old);
  EXPECT_EQ(M.S.Gpr[RCX], New); // the old CR3's cached translation is not used
}

TEST(SupervisorModeAccessPrevention, ClacAndStacClearAndSetAcAtCpl0) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode({0x0f, 0x01, 0xcb,  // stac
              0x9c, 0x58,        // pushf; pop rax
              0x0f, 0x01, 0xca,  // clac
              0x9c, 0x59,        // pushf; pop rcx
              0xf4});
  ASSERT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX] & rflags::AC, rflags::AC);
  EXPECT_EQ(M.S.Gpr[RCX] & rflags::AC, 0u);
  EXPECT_EQ(M.S.Rflags & rflags::AC, 0u);
}

TEST(SupervisorModeAccessPrevention, ClacAtCpl3IsUd) {
  TestMachine M;
  M.setupLongMode();
  // CPL 3, with a TSS whose RSP0 takes the #UD's delivery to CPL 0.
  const uint64_t Rsp0 = 0x88000;
  M.write(0x5000 + 4, &Rsp0, 8);
  M.S.Tr = Segment{kSelTss, 0x5000, 0x67, 0x8b};
  M.loadCode({0x0f, 0x01, 0xca, 0xf4}); // clac
  M.S.seg(SegReg::CS) = Segment{kSelUserCode64, 0, 0xffffffff, 0xfb | Segment::L | Segment::G};
  M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
  M.Cpu_.modeChanged();
  const FaultInfo F = runToFault(M);
  EXPECT_TRUE(F.Faulted);
  EXPECT_EQ(F.Vector, vec::UD);
  EXPECT_EQ(F.Rip, kCodeBase);
}

} // namespace
