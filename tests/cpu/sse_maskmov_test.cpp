// MASKMOVDQU (SDM Vol. 2B, MASKMOVDQU): the selected bytes of an XMM register stored at
// DS:rDI, no alignment rule, the address size choosing DI/EDI/RDI, all or nothing.
#include "tests/cpu/sse_test_util.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

const Xmm kData = {0x8877665544332211ull, 0x00ffeeddccbbaa99ull};
// Bytes 0, 3, 4, 7 of the low half and 8, 15 selected; 0x7f bytes are not.
const Xmm kMask = {0x80000080ff7f0080ull, 0x800000007f7f7f80ull};
constexpr uint64_t kFill = 0x5a5a5a5a5a5a5a5aull;

void fill(TestMachine &M, uint64_t Gpa) {
  const uint64_t F[3] = {kFill, kFill, kFill};
  M.write(Gpa, F, sizeof F);
}

TEST(Maskmovdqu, StoresTheSelectedBytesAtRdiUnaligned) {
  TestMachine M;
  M.setupLongMode();
  M.S.XmmReg[0] = kData;
  M.S.XmmReg[1] = kMask;
  fill(M, kDataBase);
  M.S.Gpr[RDI] = kDataBase + 3;
  M.loadCode({0x66, 0x0f, 0xf7, 0xc1, 0xf4}); // maskmovdqu xmm0, xmm1
  ASSERT_EQ(M.run(10), StopReason::Halted);
  uint64_t Out[3];
  M.Mem.copyOut(Hpa(kDataBase), Out, sizeof Out);
  EXPECT_EQ(Out[0], 0x55445a5a115a5a5aull); // bytes 3..7: 11 5a 5a 44 55
  EXPECT_EQ(Out[1], 0x5a5a5a5a99885a5aull); // 8..15: 5a 5a 88 99 5a 5a 5a 5a
  EXPECT_EQ(Out[2], 0x5a5a5a5a5a005a5aull); // byte 15 of the data (0x00) at +18
  EXPECT_EQ(M.S.Rip, kCodeBase + 5);
}

TEST(Maskmovdqu, AddressSizePrefixUsesEdi) {
  TestMachine M;
  M.setupLongMode();
  M.S.XmmReg[0] = kData;
  M.S.XmmReg[1] = {0x80, 0}; // byte 0 only
  fill(M, kDataBase);
  M.S.Gpr[RDI] = 0xffff000000000000ull | kDataBase; // upper half ignored by 0x67
  M.loadCode({0x67, 0x66, 0x0f, 0xf7, 0xc1, 0xf4}); // maskmovdqu xmm0, xmm1 (EDI)
  ASSERT_EQ(M.run(10), StopReason::Halted);
  uint64_t Out;
  M.Mem.copyOut(Hpa(kDataBase), &Out, 8);
  EXPECT_EQ(Out, 0x5a5a5a5a5a5a5a11ull);
}

TEST(Maskmovdqu, NonCanonicalDestinationFaultsWithoutAStore) {
  TestMachine M;
  setupLongModeWithFaultIdt(M);
  M.S.XmmReg[0] = kData;
  M.S.XmmReg[1] = {0, 0}; // an all-zero mask faults alike
  M.S.Gpr[RDI] = 0x0000800000000000ull;
  M.loadCode({0x66, 0x0f, 0xf7, 0xc1, 0xf4});
  EXPECT_EQ(faultVector(M, M.run(10)), vec::GP);
}

TEST(Maskmovdqu, CheckedForAvailabilityLikeEverySseInstruction) {
  TestMachine M;
  setupLongModeWithFaultIdt(M);
  M.S.Cr0 |= cr0::TS;
  M.S.Gpr[RDI] = kDataBase;
  M.loadCode({0x66, 0x0f, 0xf7, 0xc1, 0xf4});
  EXPECT_EQ(faultVector(M, M.run(10)), vec::NM);
}

} // namespace
