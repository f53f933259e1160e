// Faults of general-purpose instructions and restartable string instructions: #DE from
// DIV/IDIV/AAM, #UD for LOCK misuse and opcodes invalid in 64-bit mode, #GP for a
// misaligned CMPXCHG16B, and REP string instructions interrupted by #PF or by the
// run loop's deadline (SDM Vol. 2, the instruction pages; Vol. 3A, Exception and
// Interrupt Reference; Vol. 2B, REP/REPE/REPZ/REPNE/REPNZ).
#include "tests/cpu/insn_fault_helpers.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

/// Loads Code, runs to the fault, and checks the vector, the faulting RIP (the start of
/// Code) and that no GPR but RSP changed.
void expectFault(TestMachine &M, std::vector<uint8_t> Code, uint8_t Vector) {
  Code.push_back(0xf4);
  M.loadCode(Code);
  uint64_t Before[16];
  std::memcpy(Before, M.S.Gpr, sizeof(Before));
  FaultInfo F = runToFault(M);
  ASSERT_TRUE(F.Faulted) << "no fault";
  EXPECT_EQ(F.Vector, Vector);
  EXPECT_EQ(F.Rip, kCodeBase);
  for (unsigned R = 0; R < 16; ++R)
    if (R != RSP) {
      EXPECT_EQ(M.S.Gpr[R], Before[R]) << "register " << R;
    }
}

TestMachine &longMachine() {
  static TestMachine *M = nullptr;
  delete M;
  M = new TestMachine;
  M->setupLongMode();
  return *M;
}

} // namespace

TEST(GeneralPurposeInstructions, DivByZeroRaisesDe) {
  TestMachine &M = longMachine();
  M.S.Gpr[RAX] = 5;
  M.S.Gpr[RDX] = 0;
  M.S.Gpr[RCX] = 0xffffffff00000000ull; // ECX = 0
  expectFault(M, {0xf7, 0xf1}, vec::DE);
}

TEST(GeneralPurposeInstructions, DivQuotientOverflowRaisesDe) {
  TestMachine &M = longMachine();
  M.S.Gpr[RAX] = 0x1000;
  M.S.Gpr[RCX] = 0x10; // div cl: 0x100 does not fit AL
  expectFault(M, {0xf6, 0xf1}, vec::DE);
}

TEST(GeneralPurposeInstructions, IdivMostNegativeByMinusOneRaisesDe) {
  TestMachine &M = longMachine();
  M.S.Gpr[RAX] = 0x8000000000000000ull;
  M.S.Gpr[RDX] = ~0ull;
  M.S.Gpr[RCX] = ~0ull;
  expectFault(M, {0x48, 0xf7, 0xf9}, vec::DE); // idiv rcx
  TestMachine &M8 = longMachine();
  M8.S.Gpr[RAX] = 0xff80; // AX = -128
  M8.S.Gpr[RCX] = 0xff;   // CL = -1
  expectFault(M8, {0xf6, 0xf9}, vec::DE); // idiv cl: +128 does not fit AL
}

TEST(GeneralPurposeInstructions, IdivInRangeNegativeQuotientSucceeds) {
  TestMachine &M = longMachine();
  M.S.Gpr[RAX] = 0xff80; // -128 / 1 = -128 fits
  M.S.Gpr[RCX] = 1;
  M.loadCode({0xf6, 0xf9, 0xf4});
  EXPECT_EQ(M.run(10), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX] & 0xffff, 0x0080u);
}

TEST(GeneralPurposeInstructions, AamZeroRaisesDe) {
  TestMachine M;
  M.setupProtected32();
  M.S.Gpr[RAX] = 0x1234;
  expectFault(M, {0xd4, 0x00}, vec::DE);
}

TEST(GeneralPurposeInstructions, LockMisuseRaisesUd) {
  const std::vector<std::vector<uint8_t>> Cases = {
      {0xf0, 0x01, 0xc8},             // lock add eax, ecx (register destination)
      {0xf0, 0x39, 0x03},             // lock cmp [rbx], eax (CMP does not write)
      {0xf0, 0x85, 0x03},             // lock test [rbx], eax
      {0xf0, 0x0f, 0xa3, 0x03},       // lock bt [rbx], eax
      {0xf0, 0x8b, 0x03},             // lock mov eax, [rbx]
      {0xf0, 0x0f, 0xaf, 0x03},       // lock imul eax, [rbx]
      {0xf0, 0xd1, 0x23},             // lock shl dword [rbx], 1
      {0xf0, 0x0f, 0xb1, 0xc8},       // lock cmpxchg eax, ecx (register destination)
      {0xf0, 0x87, 0xc8},             // lock xchg eax, ecx
      {0xf0, 0x0f, 0xc1, 0xc8},       // lock xadd eax, ecx
      {0xf0, 0x90},                   // lock nop
      {0xf0, 0xa4},                   // lock movsb
  };
  for (const auto &C : Cases) {
    TestMachine &M = longMachine();
    M.S.Gpr[RBX] = kDataBase;
    SCOPED_TRACE(testing::Message() << "first opcode byte " << std::hex << int(C[1]));
    expectFault(M, C, vec::UD);
  }
}

TEST(GeneralPurposeInstructions, LockedMemoryForms) {
  TestMachine &M = longMachine();
  M.S.Gpr[RBX] = kDataBase;
  M.S.Gpr[RCX] = 5;
  uint32_t V = 10;
  M.write(kDataBase, &V, 4);
  M.loadCode({0xf0, 0x01, 0x0b, 0xf0, 0x0f, 0xab, 0x0b, 0xf4}); // lock add; lock bts
  EXPECT_EQ(M.run(10), StopReason::Halted);
  M.Mem.copyOut(Hpa(kDataBase), &V, 4);
  EXPECT_EQ(V, 15u | (1u << 5));
}

TEST(GeneralPurposeInstructions, InvalidIn64BitModeRaisesUd) {
  for (std::vector<uint8_t> C : std::vector<std::vector<uint8_t>>{
           {0x37}, {0x3f}, {0x27}, {0x2f}, {0xd4, 0x0a}, {0xd5, 0x0a}, {0x60}, {0x61}}) {
    TestMachine &M = longMachine();
    SCOPED_TRACE(testing::Message() << "opcode " << std::hex << int(C[0]));
    expectFault(M, C, vec::UD);
  }
}

TEST(GeneralPurposeInstructions, Cmpxchg16bMisalignedRaisesGp) {
  TestMachine &M = longMachine();
  M.S.Gpr[RSI] = kDataBase + 8;
  uint64_t Mem[2] = {1, 2};
  M.write(kDataBase + 8, Mem, 16);
  M.S.Gpr[RAX] = 1;
  M.S.Gpr[RDX] = 2;
  expectFault(M, {0x48, 0x0f, 0xc7, 0x0e}, vec::GP);
  uint64_t After[2];
  M.Mem.copyOut(Hpa(kDataBase + 8), After, 16);
  EXPECT_EQ(After[0], 1u);
  EXPECT_EQ(After[1], 2u);
}

namespace {

/// Splits the 2 MiB page at kDataBase into 4 KiB pages (a page table at PtBase) and
/// makes the page at NotPresent absent (SDM Vol. 3A, 4-Level Paging).
void splitDataPage(TestMachine &M, uint64_t NotPresent) {
  const uint64_t PtBase = 0x30000, Pd = kPml4Base + 0x2000;
  for (uint64_t K = 0; K < 512; ++K) {
    uint64_t Pa = kDataBase + K * 4096;
    uint64_t E = Pa == NotPresent ? 0 : (Pa | 0x7);
    M.write(PtBase + 8 * K, &E, 8);
  }
  uint64_t Pde = PtBase | 0x7;
  M.write(Pd + 8 * (kDataBase >> 21), &Pde, 8);
  M.Cpu_.Mmu.flushTlb();
}

void makePresent(TestMachine &M, uint64_t Page) {
  uint64_t E = Page | 0x7;
  M.write(0x30000 + 8 * ((Page - kDataBase) >> 12), &E, 8);
  M.Cpu_.Mmu.flushTlb();
}

} // namespace

TEST(GeneralPurposeInstructions, RepStosbPageFaultMidwayIsRestartable) {
  TestMachine &M = longMachine();
  const uint64_t Hole = kDataBase + 0x2000;
  splitDataPage(M, Hole);
  M.S.Gpr[RDI] = Hole - 16;
  M.S.Gpr[RCX] = 40;
  M.S.Gpr[RAX] = 0x5a;
  M.loadCode({0xf3, 0xaa, 0xf4});
  const uint64_t Sp = M.S.Gpr[RSP];
  FaultInfo F = runToFault(M);
  ASSERT_TRUE(F.Faulted);
  EXPECT_EQ(F.Vector, vec::PF);
  EXPECT_EQ(F.Rip, kCodeBase);
  EXPECT_EQ(F.Cr2, Hole);
  // 16 iterations completed: the registers say so.
  EXPECT_EQ(M.S.Gpr[RCX], 24u);
  EXPECT_EQ(M.S.Gpr[RDI], Hole);
  uint8_t Buf[16];
  M.Mem.copyOut(Hpa(Hole - 16), Buf, 16);
  for (uint8_t B : Buf)
    EXPECT_EQ(B, 0x5a);
  // Map the page and restart the instruction: it finishes the remaining 24 bytes.
  makePresent(M, Hole);
  M.S.Rip = kCodeBase;
  M.S.Gpr[RSP] = Sp;
  M.Cpu_.Activity = ActivityState::Active;
  EXPECT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RCX], 0u);
  EXPECT_EQ(M.S.Gpr[RDI], Hole + 24);
  uint8_t Rest[24];
  M.Mem.copyOut(Hpa(Hole), Rest, 24);
  for (uint8_t B : Rest)
    EXPECT_EQ(B, 0x5a);
}

TEST(GeneralPurposeInstructions, RepMovsqSourcePageFaultKeepsCompletedIterations) {
  TestMachine &M = longMachine();
  const uint64_t Hole = kDataBase + 0x5000;
  splitDataPage(M, Hole);
  M.S.Gpr[RSI] = Hole - 24; // 3 quadwords readable, then the hole
  M.S.Gpr[RDI] = kDataBase + 0x100;
  M.S.Gpr[RCX] = 10;
  uint64_t Src[3] = {11, 22, 33};
  M.write(Hole - 24, Src, 24);
  M.loadCode({0xf3, 0x48, 0xa5, 0xf4});
  FaultInfo F = runToFault(M);
  ASSERT_TRUE(F.Faulted);
  EXPECT_EQ(F.Vector, vec::PF);
  EXPECT_EQ(F.Rip, kCodeBase);
  EXPECT_EQ(F.Cr2, Hole);
  EXPECT_EQ(M.S.Gpr[RCX], 7u);
  EXPECT_EQ(M.S.Gpr[RSI], Hole);
  EXPECT_EQ(M.S.Gpr[RDI], kDataBase + 0x118);
  uint64_t Dst[3];
  M.Mem.copyOut(Hpa(kDataBase + 0x100), Dst, 24);
  EXPECT_EQ(Dst[2], 33u);
}

TEST(GeneralPurposeInstructions, RepStringStopsAtDeadlineAndResumes) {
  for (bool WarmTlb : {false, true}) {
    TestMachine &M = longMachine();
    M.S.Gpr[RDI] = kDataBase + 0x40;
    M.S.Gpr[RCX] = 1000;
    M.S.Gpr[RAX] = 0x77;
    if (WarmTlb) { // a first stosb fills the TLB so the fast path can run
      M.loadCode({0xaa, 0xf3, 0xaa, 0xf4});
      ASSERT_EQ(M.run(1), StopReason::InsnLimit);
    } else {
      M.loadCode({0xf3, 0xaa, 0xf4});
    }
    const uint64_t RepRip = M.S.Rip, Start = M.Cpu_.Cycles, Rdi = M.S.Gpr[RDI];
    // Stop the clock 50 cycles later: the REP yields between iterations.
    StopReason Why = M.Cpu_.run(1000, Start + 50);
    EXPECT_EQ(Why, StopReason::Deadline);
    EXPECT_EQ(M.S.Rip, RepRip);
    const uint64_t Done = 1000 - M.S.Gpr[RCX];
    EXPECT_EQ(Done, 50u) << "warm TLB " << WarmTlb;
    EXPECT_EQ(M.S.Gpr[RDI], Rdi + Done);
    EXPECT_EQ(M.run(100), StopReason::Halted);
    EXPECT_EQ(M.S.Gpr[RCX], 0u);
    EXPECT_EQ(M.S.Gpr[RDI], Rdi + 1000);
  }
}

// BOUND (SDM Vol. 2A, BOUND—Check Array Index Against Bounds): the signed index against
// the lower and upper bound at the memory operand; #BR (a fault) outside, nothing inside;
// a register operand is #UD.
TEST(GeneralPurposeInstructions, BoundChecksTheSignedIndexAndRaisesBrOutside) {
  struct Case {
    uint32_t Index;
    int32_t Lower, Upper;
    bool Faults;
  };
  const Case Cases[] = {{5, 5, 9, false},           {9, 5, 9, false},  {4, 5, 9, true},
                        {10, 5, 9, true},           {uint32_t(-3), -3, 2, false},
                        {uint32_t(-4), -3, 2, true}, {0x80000000u, 0, 0x7fffffff, true}};
  for (const Case &K : Cases) {
    TestMachine M;
    M.setupProtected32();
    const uint64_t Bounds = kCodeBase + 0x800;
    const int32_t Pair[2] = {K.Lower, K.Upper};
    M.write(Bounds, Pair, 8);
    M.S.Gpr[RAX] = K.Index;
    M.S.Gpr[RBX] = Bounds;
    if (K.Faults) {
      expectFault(M, {0x62, 0x03}, vec::BR); // bound eax, [ebx]
      continue;
    }
    M.loadCode({0x62, 0x03, 0xf4});
    FaultInfo F = runToFault(M);
    EXPECT_FALSE(F.Faulted) << "index " << int32_t(K.Index);
    EXPECT_EQ(M.S.Rip, kCodeBase + 3); // past the HLT
  }
  // 16-bit operand size: the bounds are words, compared signed.
  TestMachine M;
  M.setupProtected32();
  const int16_t Pair[2] = {-2, 3};
  M.write(kCodeBase + 0x800, Pair, 4);
  M.S.Gpr[RAX] = 0xffff0004; // AX = 4: above the upper bound
  M.S.Gpr[RBX] = kCodeBase + 0x800;
  expectFault(M, {0x66, 0x62, 0x03}, vec::BR);
  TestMachine R;
  R.setupProtected32();
  expectFault(R, {0x62, 0xc3}, vec::UD); // bound eax, ebx: no memory operand
}
