// The x87 FPU's state and exception machinery (SDM Vol. 1, ch. "Programming with the x87
// FPU"; Vol. 3A, "Interrupt 16—x87 FPU Floating-Point Error (#MF)" and the EM/MP/TS
// table): initialisation values, stack faults, where #MF is delivered, the CR0.NE = 0
// stop, #NM, the FSTENV/FSAVE layouts of each mode and operand size, FLDENV/FRSTOR with
// their recomputed tags and summary bits, and agreement with FXSAVE.
#include "cpu/x87.h"
#include "tests/cpu/sse_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

const std::vector<uint8_t> Hlt = {0xf4};

StopReason runCode(TestMachine &M, const std::vector<uint8_t> &Code) {
  M.loadCode(Code + Hlt);
  M.Cpu_.Activity = ActivityState::Active;
  return M.run(100);
}

void setupLong(TestMachine &M) {
  M.setupLongMode();
  installFaultIdt(M);
  M.S.Gpr[RSI] = kDataBase;
  M.S.Gpr[RDI] = kDataBase + 0x100;
}

/// The return RIP of the exception frame (IDT delivery, no error code).
uint64_t faultRip(TestMachine &M) { return M.read64(M.S.Gpr[RSP]); }

std::vector<uint8_t> readBytes(TestMachine &M, uint64_t Gpa, unsigned N) {
  std::vector<uint8_t> B(N);
  M.Mem.copyOut(Hpa(Gpa), B.data(), N);
  return B;
}
uint16_t get16(const std::vector<uint8_t> &B, unsigned Off) {
  return uint16_t(B[Off] | B[Off + 1] << 8);
}
uint32_t get32(const std::vector<uint8_t> &B, unsigned Off) {
  return uint32_t(get16(B, Off)) | uint32_t(get16(B, Off + 2)) << 16;
}

const std::vector<uint8_t> Fninit = {0xdb, 0xe3}, Fld1 = {0xd9, 0xe8}, Fldz = {0xd9, 0xee},
                           Fwait = {0x9b}, FnstswAx = {0xdf, 0xe0},
                           FldcwRsi = {0xd9, 0x2e};                    // fldcw [rsi]
const std::vector<uint8_t> FdivpSt1 = {0xde, 0xf9};                    // fdivp st(1), st
constexpr uint16_t kIndefiniteExp = 0xffff;
constexpr uint64_t kIndefiniteMant = 0xc000000000000000ull;

uint16_t expOf(const uint8_t *R) { return uint16_t(R[8] | R[9] << 8); }
uint64_t mantOf(const uint8_t *R) {
  uint64_t M;
  std::memcpy(&M, R, 8);
  return M;
}

TEST(X87Fpu, FninitLoadsInitialValuesAndKeepsRegisters) {
  TestMachine M;
  setupLong(M);
  M.S.Fcw = 0x0c00;
  M.S.Fsw = 0x3883;
  M.S.Ftw = 0xff;
  M.S.Fop = 0x123;
  M.S.Fip = M.S.Fdp = 0x1234;
  M.S.St[0][0] = 0x5a;
  ASSERT_EQ(runCode(M, Fninit), StopReason::Halted);
  EXPECT_EQ(M.S.Fcw, 0x37f);
  EXPECT_EQ(M.S.Fsw, 0);
  EXPECT_EQ(M.S.Ftw, 0);
  EXPECT_EQ(M.S.Fop, 0);
  EXPECT_EQ(M.S.Fip, 0u);
  EXPECT_EQ(M.S.Fdp, 0u);
  EXPECT_EQ(M.S.St[0][0], 0x5a) << "FNINIT leaves the register contents";
  EXPECT_EQ(x87::fullTagWord(M.S), 0xffff);
}

TEST(X87Fpu, ResetStateHasEveryRegisterTaggedZero) {
  // SDM Vol. 3A, Processor State After Reset: FCW 0040H, FSW 0, FTW 5555H, registers +0.0.
  TestMachine M;
  M.setupReal();
  M.S.Gpr[RDI] = 0x3000;
  ASSERT_EQ(runCode(M, {0xd9, 0x35}), StopReason::Halted); // fnstenv [di]
  const std::vector<uint8_t> E = readBytes(M, 0x3000, 14);
  EXPECT_EQ(get16(E, 0), 0x0040);
  EXPECT_EQ(get16(E, 2), 0);
  EXPECT_EQ(get16(E, 4), 0x5555);
}

TEST(X87Fpu, StackOverflowSetsIeSfC1AndPushesIndefinite) {
  TestMachine M;
  setupLong(M);
  std::vector<uint8_t> Code = Fninit;
  for (int K = 0; K < 9; ++K)
    Code = Code + Fld1;
  ASSERT_EQ(runCode(M, Code), StopReason::Halted);
  const uint16_t Want = x87::fsw::IE | x87::fsw::SF | x87::fsw::C1;
  EXPECT_EQ(M.S.Fsw & (Want | x87::fsw::ES), Want);
  EXPECT_EQ(expOf(M.S.St[0]), kIndefiniteExp);
  EXPECT_EQ(mantOf(M.S.St[0]), kIndefiniteMant);
  EXPECT_EQ(M.S.Ftw, 0xff);
}

TEST(X87Fpu, StackUnderflowSetsIeSfClearsC1) {
  TestMachine M;
  setupLong(M);
  // fninit; fld1; fadd st(0), st(1) (ST(1) empty)
  ASSERT_EQ(runCode(M, Fninit + Fld1 + std::vector<uint8_t>{0xd8, 0xc1}), StopReason::Halted);
  EXPECT_EQ(M.S.Fsw & 0x3ff, x87::fsw::IE | x87::fsw::SF);
  EXPECT_EQ(expOf(M.S.St[0]), kIndefiniteExp);
  EXPECT_EQ(mantOf(M.S.St[0]), kIndefiniteMant);
}

TEST(X87Fpu, UnmaskedExceptionRaisesMfAtNextWaitingInstruction) {
  TestMachine M;
  setupLong(M);
  const uint16_t Cw = 0x037b; // ZE unmasked
  M.write(kDataBase, &Cw, 2);
  // fninit; fldcw [rsi]; fld1; fldz; fdivp; fnstsw ax; fld1 (faults)
  const std::vector<uint8_t> Code = Fninit + FldcwRsi + Fld1 + Fldz + FdivpSt1 + FnstswAx + Fld1;
  const uint64_t DivRip = kCodeBase + 8, FaultAt = kCodeBase + 12;
  const StopReason Why = runCode(M, Code);
  ASSERT_EQ(faultVector(M, Why), vec::MF);
  EXPECT_EQ(faultRip(M), FaultAt);
  EXPECT_EQ(M.S.Gpr[RAX] & 0xffff, M.S.Fsw) << "FNSTSW does not wait";
  EXPECT_EQ(M.S.Fsw & (x87::fsw::ZE | x87::fsw::ES | x87::fsw::B),
            x87::fsw::ZE | x87::fsw::ES | x87::fsw::B);
  EXPECT_EQ(M.S.Fip, DivRip) << "FIP names the instruction that raised it";
  EXPECT_EQ(M.S.Fop, 0x6f9);
  // Unmasked divide by zero: the destination and the stack are left alone (TOP = 6).
  EXPECT_EQ((M.S.Fsw >> 11) & 7, 6);
  EXPECT_EQ(expOf(M.S.St[0]), 0) << "ST(0) still +0";
}

TEST(X87Fpu, FwaitRaisesMfAndFnclexClearsThePendingException) {
  TestMachine M;
  setupLong(M);
  const uint16_t Cw = 0x037b;
  M.write(kDataBase, &Cw, 2);
  const std::vector<uint8_t> Raise = Fninit + FldcwRsi + Fld1 + Fldz + FdivpSt1;
  ASSERT_EQ(faultVector(M, runCode(M, Raise + Fwait)), vec::MF);
  EXPECT_EQ(faultRip(M), kCodeBase + 10);
  setupLong(M);
  // fnclex; fwait; fld1: nothing pending
  ASSERT_EQ(runCode(M, Raise + std::vector<uint8_t>{0xdb, 0xe2} + Fwait + Fld1),
            StopReason::Halted);
  EXPECT_EQ(M.S.Fsw & 0xff, 0);
}

TEST(X87Fpu, FldcwUnmaskingAFlaggedExceptionMakesItPending) {
  TestMachine M;
  setupLong(M);
  const uint16_t Cw = 0x037b;
  M.write(kDataBase, &Cw, 2);
  // fninit; fld1; fldz; fdivp (ZE masked: +inf); fldcw [rsi] (unmasks ZE); fld1
  const std::vector<uint8_t> Code = Fninit + Fld1 + Fldz + FdivpSt1 + FldcwRsi + Fld1;
  ASSERT_EQ(faultVector(M, runCode(M, Code)), vec::MF);
  EXPECT_EQ(faultRip(M), kCodeBase + 10);
  EXPECT_EQ(M.S.Fip, kCodeBase + 6) << "FLDCW is a control instruction";
}

// A bare processor has no chipset to take FERR# (the machine's is tested in
// tests/harness/ferr_irq13_test.cpp): the run stops, naming it; with IGNNE# asserted the
// pending exception is ignored and the instruction executes.
TEST(X87Fpu, PendingExceptionWithCr0NeClearWithoutAChipsetStopsUnimplemented) {
  TestMachine M;
  setupLong(M);
  M.S.Cr0 &= ~cr0::NE;
  const uint16_t Cw = 0x037b;
  M.write(kDataBase, &Cw, 2);
  const std::vector<uint8_t> Code = Fninit + FldcwRsi + Fld1 + Fldz + FdivpSt1 + Fld1;
  EXPECT_EQ(runCode(M, Code), StopReason::Unimplemented);
  EXPECT_STREQ(M.Cpu_.StopWhat,
               "x87 legacy FERR# (CR0.NE=0) error reporting without a chipset");
  EXPECT_EQ(M.S.Rip, kCodeBase + 10);
  M.Cpu_.Ignne = true;
  EXPECT_EQ(M.run(1), StopReason::InsnLimit); // fld1 executes
  EXPECT_EQ(M.S.Rip, kCodeBase + 12);
  EXPECT_TRUE(M.Cpu_.Ignne); // ES is still set: FERR# (and so IGNNE#) stay asserted
}

TEST(X87Fpu, EmMpTsTable) {
  // SDM Vol. 3A, "Action Taken By x87 FPU Instructions for Different Combinations of EM,
  // MP, and TS": x87 instructions fault with EM or TS; WAIT only with MP and TS.
  for (unsigned Bits = 0; Bits < 8; ++Bits) {
    const bool Em = Bits & 4, Mp = Bits & 2, Ts = Bits & 1;
    TestMachine M;
    setupLong(M);
    M.S.Fcw = 0x37f; // as after FNINIT: the reset state would overflow, unmasked
    M.S.Ftw = 0;
    M.S.Cr0 = (M.S.Cr0 & ~(cr0::EM | cr0::MP | cr0::TS)) | (Em ? cr0::EM : 0) |
              (Mp ? cr0::MP : 0) | (Ts ? cr0::TS : 0);
    const int X87 = faultVector(M, runCode(M, Fld1));
    EXPECT_EQ(X87, Em || Ts ? vec::NM : -1) << "EM MP TS = " << Em << Mp << Ts;
    const int Wait = faultVector(M, runCode(M, Fwait));
    EXPECT_EQ(Wait, Mp && Ts ? vec::NM : -1) << "EM MP TS = " << Em << Mp << Ts;
  }
}

/// A known state: fninit; fldcw [rsi]; fld1; fld dword [rsi+4]. FIP is the FLD m32's
/// address (offset 6), FDP its operand, FOP D9 46.
std::vector<uint8_t> knownState() {
  return Fninit + FldcwRsi + Fld1 + std::vector<uint8_t>{0xd9, 0x46, 0x04};
}

TEST(X87Fpu, FnstenvAndFnsaveLayoutsIn64BitMode) {
  TestMachine M;
  setupLong(M);
  const uint16_t Cw = 0x0a7f;
  const float Two = 2.0f;
  M.write(kDataBase, &Cw, 2);
  M.write(kDataBase + 4, &Two, 4);
  // knownState; fnstenv [rdi]; fnsave [rdi+0x40]; 66 fnstenv [rdi+0x100] (14 bytes)
  const std::vector<uint8_t> Code = knownState() + std::vector<uint8_t>{0xd9, 0x37} +
                                    std::vector<uint8_t>{0xdd, 0x77, 0x40} +
                                    std::vector<uint8_t>{0x66, 0xd9, 0xb7, 0x00, 0x01, 0, 0};
  ASSERT_EQ(runCode(M, Code), StopReason::Halted);
  const uint64_t FldRip = kCodeBase + 6;
  const std::vector<uint8_t> E = readBytes(M, kDataBase + 0x100, 28);
  EXPECT_EQ(get32(E, 0), 0xffff0a7fu);
  EXPECT_EQ(get32(E, 4), 0xffff3000u); // TOP = 6
  EXPECT_EQ(get32(E, 8), 0xffff0fffu); // phys 7: valid, phys 6: valid
  EXPECT_EQ(get32(E, 12), uint32_t(FldRip));
  EXPECT_EQ(get32(E, 16), 0x01460000u); // FCS 0, FOP D9 46
  EXPECT_EQ(get32(E, 20), uint32_t(kDataBase + 4));
  EXPECT_EQ(get32(E, 24), 0xffff0000u);
  // FNSTENV masked every exception; FNSAVE stored that and reinitialised.
  const std::vector<uint8_t> S = readBytes(M, kDataBase + 0x140, 108);
  EXPECT_EQ(get32(S, 0), 0xffff0a7fu | 0x3f);
  EXPECT_EQ(get32(S, 12), uint32_t(FldRip));
  EXPECT_EQ(expOf(&S[28]), 0x4000) << "ST(0) = 2.0";
  EXPECT_EQ(expOf(&S[38]), 0x3fff) << "ST(1) = 1.0";
  EXPECT_EQ(M.S.Fcw, 0x37f);
  EXPECT_EQ(M.S.Ftw, 0);
  const std::vector<uint8_t> E16 = readBytes(M, kDataBase + 0x200, 16);
  EXPECT_EQ(get16(E16, 0), 0x037f);
  EXPECT_EQ(get16(E16, 2), 0);
  EXPECT_EQ(get16(E16, 4), 0xffff);
  EXPECT_EQ(get16(E16, 14), 0) << "14 bytes only";
}

TEST(X87Fpu, FnsaveLayoutsInProtectedAndRealMode) {
  struct Case {
    const char *Name;
    bool Real, Osize;
  };
  for (const Case &K : {Case{"prot32", false, false}, Case{"prot16", false, true},
                        Case{"real16", true, false}, Case{"real32", true, true}}) {
    TestMachine M;
    if (K.Real)
      M.setupReal();
    else
      M.setupProtected32();
    M.S.Cr0 |= cr0::NE;
    // esi = 0x2000 (data), edi = 0x3000 (save area), as offsets in flat/zero-based DS.
    M.S.Gpr[RSI] = 0x2000;
    M.S.Gpr[RDI] = 0x3000;
    const uint16_t Cw = 0x0a7f;
    const float Two = 2.0f;
    M.write(0x2000, &Cw, 2);
    M.write(0x2004, &Two, 4);
    // fninit; fldcw [si]/[esi]; fld1; fld dword [si+4]/[esi+4]; [66] fnsave [di]/[edi]
    std::vector<uint8_t> Code;
    if (K.Real)
      Code = Fninit + std::vector<uint8_t>{0xd9, 0x2c} + Fld1 +
             std::vector<uint8_t>{0xd9, 0x44, 0x04};
    else
      Code = Fninit + FldcwRsi + Fld1 + std::vector<uint8_t>{0xd9, 0x46, 0x04};
    if (K.Osize)
      Code.push_back(0x66);
    Code = Code + std::vector<uint8_t>{0xdd, uint8_t(K.Real ? 0x35 : 0x37)};
    ASSERT_EQ(runCode(M, Code), StopReason::Halted) << K.Name;
    const bool Is16 = K.Real != K.Osize; // 16-bit default xor 66H
    const std::vector<uint8_t> B = readBytes(M, 0x3000, 108);
    const uint32_t FldOff = 6;
    const uint32_t Fip = uint32_t(kCodeBase + FldOff); // linear in real mode (CS.base 1 MiB)
    const uint16_t Fop = 0x144 + (K.Real ? 0 : 2); // D9 44 (real: [si+d8]) / D9 46
    const uint32_t Fdp = 0x2004;
    SCOPED_TRACE(K.Name);
    if (Is16) {
      EXPECT_EQ(get16(B, 0), 0x0a7f);
      EXPECT_EQ(get16(B, 2), 0x3000);
      EXPECT_EQ(get16(B, 4), 0x0fff);
      EXPECT_EQ(get16(B, 6), uint16_t(Fip));
      if (K.Real) {
        EXPECT_EQ(get16(B, 8), uint16_t(((Fip >> 4) & 0xf000) | Fop));
        EXPECT_EQ(get16(B, 12), uint16_t((Fdp >> 4) & 0xf000));
      } else {
        EXPECT_EQ(get16(B, 8), 0) << "FCS deprecated";
        EXPECT_EQ(get16(B, 12), 0) << "FDS deprecated";
      }
      EXPECT_EQ(get16(B, 10), uint16_t(Fdp));
      EXPECT_EQ(expOf(&B[14]), 0x4000);
      EXPECT_EQ(expOf(&B[24]), 0x3fff);
    } else {
      EXPECT_EQ(get32(B, 0), 0xffff0a7fu);
      EXPECT_EQ(get32(B, 4), 0xffff3000u);
      EXPECT_EQ(get32(B, 8), 0xffff0fffu);
      if (K.Real) {
        EXPECT_EQ(get32(B, 12), 0xffff0000u | (Fip & 0xffff));
        EXPECT_EQ(get32(B, 16), ((Fip & 0xffff0000u) >> 4) | Fop);
        EXPECT_EQ(get32(B, 20), 0xffff0000u | (Fdp & 0xffff));
        EXPECT_EQ(get32(B, 24), (Fdp & 0xffff0000u) >> 4);
      } else {
        EXPECT_EQ(get32(B, 12), Fip);
        EXPECT_EQ(get32(B, 16), uint32_t(Fop) << 16);
        EXPECT_EQ(get32(B, 20), Fdp);
        EXPECT_EQ(get32(B, 24), 0xffff0000u);
      }
      EXPECT_EQ(expOf(&B[28]), 0x4000);
      EXPECT_EQ(expOf(&B[38]), 0x3fff);
    }
    EXPECT_EQ(M.S.Fcw, 0x37f) << "FNSAVE reinitialises";
    EXPECT_EQ(M.S.Ftw, 0);
    // FRSTOR of the same image brings the state back, pointers included.
    Code = K.Osize ? std::vector<uint8_t>{0x66} : std::vector<uint8_t>{};
    Code = Code + std::vector<uint8_t>{0xdd, uint8_t(K.Real ? 0x25 : 0x27)};
    ASSERT_EQ(runCode(M, Code), StopReason::Halted);
    EXPECT_EQ(M.S.Fcw, 0x0a7f);
    EXPECT_EQ(M.S.Fsw, 0x3000);
    EXPECT_EQ(M.S.Ftw, 0xc0);
    // The 16-bit formats keep 16 bits of the offset (protected) or 20 bits of the linear
    // address (real).
    EXPECT_EQ(M.S.Fip, !Is16 ? Fip : K.Real ? Fip & 0xfffff : Fip & 0xffff);
    EXPECT_EQ(M.S.Fdp, Fdp);
    if (!(Is16 && !K.Real)) {
      EXPECT_EQ(M.S.Fop, Fop);
    }
    EXPECT_EQ(expOf(M.S.St[0]), 0x4000);
  }
}

TEST(X87Fpu, FldenvRecomputesTagsAndSummary) {
  TestMachine M;
  setupLong(M);
  // An environment whose tag word calls every register valid and whose FSW has ZE set,
  // unmasked by its FCW, with ES clear: the tags are recomputed from the contents (all
  // zeros: tag 01) and ES/B set, so the next waiting instruction raises #MF.
  uint8_t Env[28] = {};
  const uint32_t Cw = 0xffff037b, Sw = 0xffff0004, Tw = 0xffff0000;
  std::memcpy(Env, &Cw, 4);
  std::memcpy(Env + 4, &Sw, 4);
  std::memcpy(Env + 8, &Tw, 4);
  M.write(kDataBase, Env, 28);
  std::memset(M.S.St, 0, sizeof(M.S.St));
  // fldenv [rsi]; fnstenv [rdi]; fld1
  const StopReason Why = runCode(M, {0xd9, 0x26, 0xd9, 0x37, 0xd9, 0xe8});
  const std::vector<uint8_t> E = readBytes(M, kDataBase + 0x100, 28);
  EXPECT_EQ(get16(E, 8), 0x5555);
  EXPECT_EQ(get16(E, 4), 0x8084);
  // FNSTENV masked the exceptions, which clears ES again: nothing pending at FLD1.
  EXPECT_EQ(Why, StopReason::Halted);
  EXPECT_EQ(M.S.Fcw, 0x037f);
}

TEST(X87Fpu, FxsaveAbridgedTagsAgreeWithFnstenv) {
  TestMachine M;
  setupLong(M);
  // fninit; fld1; fldz; fxsave [rdi]; fnstenv [rsi]
  ASSERT_EQ(runCode(M, Fninit + Fld1 + Fldz +
                           std::vector<uint8_t>{0x0f, 0xae, 0x07, 0xd9, 0x36}),
            StopReason::Halted);
  const std::vector<uint8_t> Fx = readBytes(M, kDataBase + 0x100, 32);
  const std::vector<uint8_t> E = readBytes(M, kDataBase, 28);
  EXPECT_EQ(Fx[4], 0xc0);
  EXPECT_EQ(get16(E, 8), 0x1fff); // phys 7 valid (1.0), phys 6 zero
}

TEST(X87Fpu, FxrstorRecomputesSummaryBits) {
  TestMachine M;
  setupLong(M);
  alignas(16) uint8_t Img[512] = {};
  const uint16_t Cw = 0xfffe, Sw = 0x0001; // IE unmasked and flagged, ES clear
  std::memcpy(Img, &Cw, 2);
  std::memcpy(Img + 2, &Sw, 2);
  const uint32_t Mxcsr = 0x1f80;
  std::memcpy(Img + 24, &Mxcsr, 4);
  M.write(kDataBase, Img, 512);
  ASSERT_EQ(runCode(M, {0x0f, 0xae, 0x0e}), StopReason::Halted); // fxrstor [rsi]
  EXPECT_EQ(M.S.Fcw, 0x1f7e);
  EXPECT_EQ(M.S.Fsw, 0x8081);
}

TEST(X87Fpu, FcomiSetsEflags) {
  TestMachine M;
  setupLong(M);
  M.S.Rflags |= rflags::OF | rflags::SF | rflags::AF;
  // fninit; fld1; fldz; fcomi st, st(1): 0 < 1 -> CF
  ASSERT_EQ(runCode(M, Fninit + Fld1 + Fldz + std::vector<uint8_t>{0xdb, 0xf1}),
            StopReason::Halted);
  EXPECT_EQ(M.S.Rflags & (rflags::Arith), rflags::CF);
}

TEST(X87Fpu, FstSuppressedByUnmaskedOverflow) {
  TestMachine M;
  setupLong(M);
  const uint16_t Cw = 0x0377; // OE unmasked
  M.write(kDataBase, &Cw, 2);
  const uint32_t Sentinel = 0x12345678;
  M.write(kDataBase + 8, &Sentinel, 4);
  // fninit; fldcw [rsi]; fld1; fld1; fscale... simpler: load a huge m64 and fst m32
  const double Huge = 1e300;
  M.write(kDataBase + 16, &Huge, 8);
  // fld qword [rsi+16]; fst dword [rsi+8]
  ASSERT_EQ(runCode(M, Fninit + FldcwRsi +
                           std::vector<uint8_t>{0xdd, 0x46, 0x10, 0xd9, 0x56, 0x08}),
            StopReason::Halted);
  EXPECT_EQ(M.read64(kDataBase + 8) & 0xffffffff, Sentinel);
  EXPECT_TRUE(M.S.Fsw & x87::fsw::OE);
  EXPECT_TRUE(M.S.Fsw & x87::fsw::ES);
}

} // namespace
