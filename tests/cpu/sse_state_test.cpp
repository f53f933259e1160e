// FXSAVE/FXRSTOR, MXCSR and the SSE/x87 availability rules (SDM Vol. 2A, FXSAVE,
// FXRSTOR, LDMXCSR; Vol. 3A, System Programming for Instruction Set Extensions and
// Processor Extended States). The FXSAVE image is compared with the host's for the same
// XMM/MXCSR state; faults are observed with the fault-catching IDT of sse_test_util.h.
#include "cpu/x87.h"
#include "tests/cpu/sse_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr unsigned kImage = 512;

// Encodings used below ([rsi] is ModRM rm=110; disp32 forms use mod=10).
const std::vector<uint8_t> FxsaveRsi = {0x0f, 0xae, 0x06};
const std::vector<uint8_t> Fxsave64Rsi = {0x48, 0x0f, 0xae, 0x06};
const std::vector<uint8_t> Fxrstor64Rsi = {0x48, 0x0f, 0xae, 0x0e};
const std::vector<uint8_t> FxrstorRsi = {0x0f, 0xae, 0x0e};
const std::vector<uint8_t> Fxsave64Rsi512 = {0x48, 0x0f, 0xae, 0x86, 0x00, 0x02, 0, 0};
const std::vector<uint8_t> FxsaveRsi512 = {0x0f, 0xae, 0x86, 0x00, 0x02, 0, 0};
const std::vector<uint8_t> LdmxcsrRsi = {0x0f, 0xae, 0x16};
const std::vector<uint8_t> StmxcsrRsi = {0x0f, 0xae, 0x1e};
const std::vector<uint8_t> MovdqaXmm0Rsi = {0x66, 0x0f, 0x6f, 0x06};
const std::vector<uint8_t> MovdquXmm0Rsi = {0xf3, 0x0f, 0x6f, 0x06};
const std::vector<uint8_t> PxorXmm0 = {0x66, 0x0f, 0xef, 0xc0};
const std::vector<uint8_t> Hlt = {0xf4};

/// Runs Code followed by HLT from kCodeBase.
StopReason runCode(TestMachine &M, const std::vector<uint8_t> &Code) {
  M.loadCode(Code + Hlt);
  M.Cpu_.Activity = ActivityState::Active;
  return M.run(100);
}

/// A long-mode machine with the fault-catching IDT and RSI = kDataBase.
void setupLong(TestMachine &M) {
  M.setupLongMode();
  installFaultIdt(M);
  M.S.Gpr[RSI] = kDataBase;
}

/// RIP of the instruction that faulted: with bootstrap delivery it is still in RIP; with
/// IDT delivery it is the return RIP in the 64-bit frame (after the error code if any).
uint64_t faultingRip(TestMachine &M, StopReason Why, int Vector) {
  if (Why == StopReason::Shutdown)
    return M.S.Rip;
  bool HasError = Vector == vec::GP || Vector == vec::SS || Vector == vec::PF ||
                  Vector == vec::TS || Vector == vec::NP || Vector == vec::AC ||
                  Vector == vec::DF;
  return M.read64(M.S.Gpr[RSP] + (HasError ? 8 : 0));
}

void fillRandomXmm(SplitMix64 &Rng, Xmm *X) {
  for (unsigned K = 0; K < 16; ++K)
    X[K] = Xmm{Rng.next(), Rng.next()};
}

TEST(ProcessorExtendedStates, Fxsave64XmmAndMxcsrFieldsMatchHost) {
  // stmxcsr [rsi+516]; ldmxcsr [rsi+512]; fxsave64 [rsi]; ldmxcsr [rsi+516]: the same
  // bytes run on the host and in the emulator.
  const std::vector<uint8_t> Snippet = {0x0f, 0xae, 0x9e, 0x04, 0x02, 0, 0,
                                        0x0f, 0xae, 0x96, 0x00, 0x02, 0, 0,
                                        0x48, 0x0f, 0xae, 0x06,
                                        0x0f, 0xae, 0x96, 0x04, 0x02, 0, 0};
  NativeCode Native;
  ASSERT_TRUE(Native.valid());
  Native.set(Snippet);
  TestMachine M;
  setupLong(M);
  SplitMix64 Rng(0xf5a7e);
  for (unsigned It = 0; It < 200; ++It) {
    alignas(16) uint8_t Host[kImage + 16] = {};
    NativeRegs R{};
    fillRandomXmm(Rng, R.X);
    // Any MXCSR value with only defined bits (DAZ included); nothing executes with it.
    uint32_t Mxcsr = uint32_t(Rng.next()) & 0xffff;
    std::memcpy(Host + 512, &Mxcsr, 4);
    R.Rsi = reinterpret_cast<uint64_t>(Host);
    Native.run(R);

    uint8_t Zero[kImage + 16] = {};
    M.write(kDataBase, Zero, sizeof(Zero));
    M.write(kDataBase + 512, &Mxcsr, 4);
    for (unsigned K = 0; K < 16; ++K)
      M.S.XmmReg[K] = R.X[K];
    M.S.Gpr[RSI] = kDataBase;
    ASSERT_EQ(runCode(M, Snippet), StopReason::Halted);
    uint8_t Emu[kImage];
    M.Mem.copyOut(Hpa(kDataBase), Emu, kImage);

    EXPECT_EQ(0, std::memcmp(Emu + 24, Host + 24, 4)) << "MXCSR, iteration " << It;
    EXPECT_EQ(0, std::memcmp(Emu + 160, Host + 160, 256)) << "XMM0-15, iteration " << It;
    uint32_t HostMask, EmuMask;
    std::memcpy(&HostMask, Host + 28, 4);
    std::memcpy(&EmuMask, Emu + 28, 4);
    EXPECT_EQ(EmuMask, 0xffffu);
    if (HostMask == 0xffff) { // Intel hosts; other vendors add bits (e.g. AMD's MM bit)
      EXPECT_EQ(EmuMask, HostMask);
    }
    EXPECT_EQ(M.S.Mxcsr, 0x1f80u); // restored by the last LDMXCSR
  }
}

/// A random FXSAVE image whose reserved bytes are zero and whose MXCSR is valid.
void randomImage(SplitMix64 &Rng, uint8_t *B, bool Wide) {
  std::memset(B, 0, kImage);
  for (unsigned K = 0; K < kImage; K += 8) {
    uint64_t V = Rng.next();
    std::memcpy(B + K, &V, 8);
  }
  B[5] = 0;
  // FCW's fixed bits and FSW's ES/B follow from the words (cpu/x87.h): a random image
  // holds them as the processor would store them back.
  uint16_t Cw, Sw;
  std::memcpy(&Cw, B, 2);
  std::memcpy(&Sw, B + 2, 2);
  Cw = x87::normalizeFcw(Cw);
  Sw = x87::withSummary(Sw, Cw);
  std::memcpy(B, &Cw, 2);
  std::memcpy(B + 2, &Sw, 2);
  uint16_t Fop = uint16_t(Rng.next() & 0x7ff);
  std::memcpy(B + 6, &Fop, 2);
  if (!Wide) { // FCS, FDS are stored as zero (deprecated); their reserved halves too
    std::memset(B + 12, 0, 4);
    std::memset(B + 20, 0, 4);
  }
  uint32_t Mxcsr = uint32_t(Rng.next()) & 0xffff, Mask = 0xffff;
  std::memcpy(B + 24, &Mxcsr, 4);
  std::memcpy(B + 28, &Mask, 4);
  for (unsigned K = 0; K < 8; ++K)
    std::memset(B + 32 + 16 * K + 10, 0, 6);
}

TEST(ProcessorExtendedStates, Fxrstor64ThenFxsave64IsIdentity) {
  TestMachine M;
  setupLong(M);
  SplitMix64 Rng(0x1d3a);
  for (unsigned It = 0; It < 100; ++It) {
    uint8_t In[kImage], Out[kImage];
    randomImage(Rng, In, true);
    M.write(kDataBase, In, kImage);
    ASSERT_EQ(runCode(M, Fxrstor64Rsi + Fxsave64Rsi512), StopReason::Halted);
    M.Mem.copyOut(Hpa(kDataBase + 512), Out, kImage);
    EXPECT_EQ(0, std::memcmp(In, Out, 416)) << "iteration " << It;
  }
}

TEST(ProcessorExtendedStates, LegacyFormatStoresThirtyTwoBitPointers) {
  TestMachine M;
  setupLong(M);
  SplitMix64 Rng(0x77);
  uint8_t In[kImage], Out[kImage];
  randomImage(Rng, In, false);
  M.write(kDataBase, In, kImage);
  ASSERT_EQ(runCode(M, FxrstorRsi + FxsaveRsi512), StopReason::Halted);
  M.Mem.copyOut(Hpa(kDataBase + 512), Out, kImage);
  EXPECT_EQ(0, std::memcmp(In, Out, 416));
  uint32_t Fip;
  std::memcpy(&Fip, In + 8, 4);
  EXPECT_EQ(M.S.Fip, Fip); // zero-extended: the 32-bit format holds 32 bits
}

TEST(ProcessorExtendedStates, ProtectedModeSavesOnlyXmm0To7) {
  TestMachine M;
  M.setupProtected32();
  SplitMix64 Rng(0x32);
  fillRandomXmm(Rng, M.S.XmmReg);
  std::vector<uint8_t> Fill(kImage, 0xcc);
  M.write(kDataBase, Fill.data(), kImage);
  M.S.Gpr[RSI] = kDataBase;
  ASSERT_EQ(runCode(M, FxsaveRsi), StopReason::Halted);
  uint8_t Out[kImage];
  M.Mem.copyOut(Hpa(kDataBase), Out, kImage);
  EXPECT_EQ(0, std::memcmp(Out + 160, M.S.XmmReg, 128));
  for (unsigned K = 288; K < kImage; ++K)
    ASSERT_EQ(Out[K], 0xcc) << "byte " << K << " must stay untouched";
}

TEST(ProcessorExtendedStates, FxsaveMisalignedRaisesGp) {
  TestMachine M;
  setupLong(M);
  M.S.Gpr[RSI] = kDataBase + 8;
  std::vector<uint8_t> Fill(kImage + 16, 0xcc);
  M.write(kDataBase, Fill.data(), Fill.size());
  StopReason Why = runCode(M, Fxsave64Rsi);
  int V = faultVector(M, Why);
  EXPECT_EQ(V, vec::GP);
  EXPECT_EQ(faultingRip(M, Why, V), kCodeBase);
  uint8_t Out[kImage + 16];
  M.Mem.copyOut(Hpa(kDataBase), Out, sizeof(Out));
  EXPECT_EQ(0, std::memcmp(Out, Fill.data(), sizeof(Out)));
}

TEST(ProcessorExtendedStates, FxrstorMisalignedRaisesGp) {
  TestMachine M;
  setupLong(M);
  M.S.Gpr[RSI] = kDataBase + 4;
  StopReason Why = runCode(M, Fxrstor64Rsi);
  EXPECT_EQ(faultVector(M, Why), vec::GP);
}

TEST(ProcessorExtendedStates, FxrstorReservedMxcsrBitsRaiseGpWithoutChangingState) {
  TestMachine M;
  setupLong(M);
  SplitMix64 Rng(0x99);
  uint8_t In[kImage];
  randomImage(Rng, In, true);
  uint32_t Bad = 0x10000 | 0x1f80;
  std::memcpy(In + 24, &Bad, 4);
  M.write(kDataBase, In, kImage);
  M.S.XmmReg[3] = Xmm{1, 2};
  StopReason Why = runCode(M, Fxrstor64Rsi);
  EXPECT_EQ(faultVector(M, Why), vec::GP);
  EXPECT_EQ(M.S.Mxcsr, 0x1f80u);
  EXPECT_EQ(M.S.XmmReg[3].Lo, 1u);
  EXPECT_EQ(M.S.XmmReg[3].Hi, 2u);
}

TEST(ProcessorExtendedStates, FxsaveWithCr0TsRaisesNm) {
  TestMachine M;
  setupLong(M);
  M.S.Cr0 |= cr0::TS;
  StopReason Why = runCode(M, Fxsave64Rsi);
  int V = faultVector(M, Why);
  EXPECT_EQ(V, vec::NM);
  EXPECT_EQ(faultingRip(M, Why, V), kCodeBase);
}

TEST(ProcessorExtendedStates, FxsaveWithCr0EmRaisesNm) {
  TestMachine M;
  setupLong(M);
  M.S.Cr0 |= cr0::EM;
  EXPECT_EQ(faultVector(M, runCode(M, Fxsave64Rsi)), vec::NM);
}

TEST(ProcessorExtendedStates, FxsaveWithoutOsfxsrStillSaves) {
  // FXSAVE itself does not depend on CR4.OSFXSR (SDM Vol. 2A, FXSAVE: only whether the
  // XMM/MXCSR fields are saved is implementation dependent; vmxsim saves them).
  TestMachine M;
  setupLong(M);
  M.S.Cr4 &= ~cr4::OSFXSR;
  M.S.XmmReg[0] = Xmm{0x1111, 0x2222};
  ASSERT_EQ(runCode(M, Fxsave64Rsi), StopReason::Halted);
  EXPECT_EQ(M.read64(kDataBase + 160), 0x1111u);
}

TEST(SseSystemProgramming, SseInstructionWithoutOsfxsrRaisesUd) {
  TestMachine M;
  setupLong(M);
  M.S.Cr4 &= ~cr4::OSFXSR;
  StopReason Why = runCode(M, PxorXmm0);
  int V = faultVector(M, Why);
  EXPECT_EQ(V, vec::UD);
  EXPECT_EQ(faultingRip(M, Why, V), kCodeBase);
}

TEST(SseSystemProgramming, SseInstructionWithCr0EmRaisesUd) {
  TestMachine M;
  setupLong(M);
  M.S.Cr0 |= cr0::EM;
  EXPECT_EQ(faultVector(M, runCode(M, MovdqaXmm0Rsi)), vec::UD);
}

TEST(SseSystemProgramming, SseInstructionWithCr0TsRaisesNm) {
  TestMachine M;
  setupLong(M);
  M.S.Cr0 |= cr0::TS;
  M.S.XmmReg[0] = Xmm{5, 6};
  EXPECT_EQ(faultVector(M, runCode(M, PxorXmm0)), vec::NM);
  EXPECT_EQ(M.S.XmmReg[0].Lo, 5u);
}

TEST(SseSystemProgramming, MovdqaMisalignedRaisesGp) {
  TestMachine M;
  setupLong(M);
  M.S.Gpr[RSI] = kDataBase + 1;
  StopReason Why = runCode(M, MovdqaXmm0Rsi);
  int V = faultVector(M, Why);
  EXPECT_EQ(V, vec::GP);
  EXPECT_EQ(faultingRip(M, Why, V), kCodeBase);
}

TEST(SseSystemProgramming, PaddbMisalignedMemoryOperandRaisesGp) {
  TestMachine M;
  setupLong(M);
  M.S.Gpr[RSI] = kDataBase + 8;
  EXPECT_EQ(faultVector(M, runCode(M, {0x66, 0x0f, 0xfc, 0x06})), vec::GP);
}

TEST(SseSystemProgramming, MovdquAcrossPageBoundaryLoadsBothPages) {
  TestMachine M;
  setupLong(M);
  uint8_t Bytes[16];
  for (unsigned K = 0; K < 16; ++K)
    Bytes[K] = uint8_t(0xa0 + K);
  M.write(kDataBase + 0xff8, Bytes, 16);
  M.S.Gpr[RSI] = kDataBase + 0xff8;
  ASSERT_EQ(runCode(M, MovdquXmm0Rsi), StopReason::Halted);
  EXPECT_EQ(M.S.XmmReg[0].Lo, 0xa7a6a5a4a3a2a1a0u);
  EXPECT_EQ(M.S.XmmReg[0].Hi, 0xafaeadacabaaa9a8u);
}

TEST(SseSystemProgramming, LdmxcsrStmxcsrRoundTrip) {
  TestMachine M;
  setupLong(M);
  uint32_t V = 0xffc0;
  M.write(kDataBase, &V, 4);
  // ldmxcsr [rsi]; stmxcsr [rsi+8]
  ASSERT_EQ(runCode(M, LdmxcsrRsi + std::vector<uint8_t>{0x0f, 0xae, 0x5e, 0x08}),
            StopReason::Halted);
  EXPECT_EQ(M.S.Mxcsr, 0xffc0u);
  EXPECT_EQ(M.read64(kDataBase + 8) & 0xffffffff, 0xffc0u);
}

TEST(SseSystemProgramming, LdmxcsrReservedBitRaisesGp) {
  TestMachine M;
  setupLong(M);
  uint32_t V = 0x1f80 | (1u << 16);
  M.write(kDataBase, &V, 4);
  StopReason Why = runCode(M, LdmxcsrRsi);
  EXPECT_EQ(faultVector(M, Why), vec::GP);
  EXPECT_EQ(M.S.Mxcsr, 0x1f80u);
}

TEST(SseSystemProgramming, StmxcsrStoresResetValue) {
  TestMachine M;
  setupLong(M);
  ASSERT_EQ(runCode(M, StmxcsrRsi), StopReason::Halted);
  EXPECT_EQ(M.read64(kDataBase) & 0xffffffff, 0x1f80u);
}

TEST(X87Fpu, FninitFnstcwFnstswStoreInitialValues) {
  TestMachine M;
  setupLong(M);
  M.S.Fsw = 0x1234;
  M.S.Gpr[RAX] = 0xffffffffffffffffull;
  // fninit; fnstcw [rsi]; fnstsw ax; fnstsw [rsi+2]
  ASSERT_EQ(runCode(M, {0xdb, 0xe3, 0xd9, 0x3e, 0xdf, 0xe0, 0xdd, 0x7e, 0x02}),
            StopReason::Halted);
  EXPECT_EQ(M.read64(kDataBase) & 0xffffffff, 0x0000037fu);
  EXPECT_EQ(M.S.Gpr[RAX], 0xffffffffffff0000ull);
  EXPECT_EQ(M.S.Fcw, 0x37f);
  EXPECT_EQ(M.S.Ftw, 0);
}

TEST(X87Fpu, FldcwLoadsControlWord) {
  TestMachine M;
  setupLong(M);
  uint16_t Cw = 0x027f;
  M.write(kDataBase, &Cw, 2);
  ASSERT_EQ(runCode(M, {0x9b, 0xd9, 0x2e}), StopReason::Halted); // fwait; fldcw [rsi]
  EXPECT_EQ(M.S.Fcw, 0x027f);
}

TEST(X87Fpu, FninitWithCr0TsRaisesNm) {
  TestMachine M;
  setupLong(M);
  M.S.Cr0 |= cr0::TS;
  EXPECT_EQ(faultVector(M, runCode(M, {0xdb, 0xe3})), vec::NM);
}

TEST(X87Fpu, FwaitRaisesNmOnlyWithMpAndTs) {
  TestMachine M;
  setupLong(M);
  M.S.Cr0 = (M.S.Cr0 | cr0::TS) & ~cr0::MP;
  EXPECT_EQ(runCode(M, {0x9b}), StopReason::Halted);
  M.S.Cr0 |= cr0::MP;
  EXPECT_EQ(faultVector(M, runCode(M, {0x9b})), vec::NM);
}

} // namespace
