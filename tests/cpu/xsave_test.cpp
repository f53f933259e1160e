// The XSAVE feature set for x87 and SSE state (SDM Vol. 1, Managing State Using the XSAVE
// Feature Set; SDM Vol. 2C, XSAVE, XSAVEOPT, XSAVEC, XRSTOR): the standard and compacted
// formats, the header rules of XRSTOR, alignment and availability faults. The legacy
// region is cross-checked against FXSAVE64 of the same state.
#include "cpu/x87.h"
#include "tests/cpu/sse_test_util.h"

#include "cpu/cpuid.h"
#include "cpu/cpu_model.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr unsigned kArea = 576;

// [rsi] forms (ModRM mod=00 rm=110); the REX.W forms use the 64-bit x87 layout.
const std::vector<uint8_t> Xsave64 = {0x48, 0x0f, 0xae, 0x26};
const std::vector<uint8_t> Xsave = {0x0f, 0xae, 0x26};
const std::vector<uint8_t> Xsaveopt64 = {0x48, 0x0f, 0xae, 0x36};
const std::vector<uint8_t> Xsavec64 = {0x48, 0x0f, 0xc7, 0x26};
const std::vector<uint8_t> Xrstor64 = {0x48, 0x0f, 0xae, 0x2e};
const std::vector<uint8_t> Fxsave64At1024 = {0x48, 0x0f, 0xae, 0x86, 0x00, 0x04, 0, 0};
const std::vector<uint8_t> Hlt = {0xf4};

/// The default model with XSAVE, XSAVEOPT and XSAVEC reported (CPUID.1:ECX[26],
/// CPUID.(0DH,1):EAX[1:0]); Xsavec = false reports only XSAVE and XSAVEOPT.
const CpuModel &xsaveModel(bool Xsavec = true) {
  static const CpuModel Models[2] = {[] {
                                       CpuModel M = CpuModel::defaultModel();
                                       for (CpuidLeaf &L : M.Cpuid) {
                                         if (L.Leaf == 1)
                                           L.Ecx |= cpuidbit::Xsave;
                                         if (L.Leaf == 0xd && L.Subleaf == 1)
                                           L.Eax = 1;
                                       }
                                       return M;
                                     }(),
                                     [] {
                                       CpuModel M = CpuModel::defaultModel();
                                       for (CpuidLeaf &L : M.Cpuid) {
                                         if (L.Leaf == 1)
                                           L.Ecx |= cpuidbit::Xsave;
                                         if (L.Leaf == 0xd && L.Subleaf == 1)
                                           L.Eax = 3;
                                       }
                                       return M;
                                     }()};
  return Models[Xsavec];
}

/// Long mode, CR4.OSXSAVE, XCR0 = x87|SSE, fault-catching IDT, RSI = kDataBase,
/// EDX:EAX = all components.
struct XsaveMachine : TestMachine {
  explicit XsaveMachine(bool Xsavec = true) : TestMachine(64ull << 20, xsaveModel(Xsavec)) {
    setupLongMode();
    installFaultIdt(*this);
    S.Cr4 |= cr4::OSXSAVE;
    S.Xcr0 = 3;
    S.Gpr[RSI] = kDataBase;
    S.Gpr[RAX] = ~0u;
    S.Gpr[RDX] = ~0u;
    S.Gpr[RSP] = 0x80000;
  }
  StopReason runCode(const std::vector<uint8_t> &Code) {
    loadCode(Code + Hlt);
    Cpu_.Activity = ActivityState::Active;
    return run(100);
  }
  std::vector<uint8_t> area(uint64_t At = kDataBase, unsigned Size = kArea) {
    std::vector<uint8_t> B(Size);
    Mem.copyOut(Hpa(At), B.data(), Size);
    return B;
  }
  void fill(uint8_t Byte, unsigned Size = 2048) {
    std::vector<uint8_t> B(Size, Byte);
    write(kDataBase, B.data(), Size);
  }
};

uint64_t get64(const std::vector<uint8_t> &B, unsigned Off) {
  uint64_t V;
  std::memcpy(&V, B.data() + Off, 8);
  return V;
}
uint32_t get32(const std::vector<uint8_t> &B, unsigned Off) {
  uint32_t V;
  std::memcpy(&V, B.data() + Off, 4);
  return V;
}

void randomState(SplitMix64 &Rng, CpuState &S) {
  for (Xmm &X : S.XmmReg)
    X = Xmm{Rng.next(), Rng.next()};
  S.Mxcsr = uint32_t(Rng.next()) & 0xffff;
  S.Fcw = x87::normalizeFcw(uint16_t(Rng.next()));
  S.Fsw = x87::withSummary(uint16_t(Rng.next()), S.Fcw);
  S.Ftw = uint8_t(Rng.next());
  S.Fop = uint16_t(Rng.next()) & 0x7ff;
  S.Fip = Rng.next();
  S.Fdp = Rng.next();
  for (auto &St : S.St)
    for (uint8_t &B : St)
      B = uint8_t(Rng.next());
}

TEST(ProcessorExtendedStates, Xsave64LegacyRegionMatchesFxsave64) {
  XsaveMachine M;
  SplitMix64 Rng(0x5a7e);
  for (unsigned It = 0; It < 50; ++It) {
    randomState(Rng, M.S);
    M.fill(0);
    ASSERT_EQ(M.runCode(Xsave64 + Fxsave64At1024), StopReason::Halted);
    std::vector<uint8_t> X = M.area(), F = M.area(kDataBase + 1024, 512);
    EXPECT_EQ(0, std::memcmp(X.data(), F.data(), 416)) << "iteration " << It;
    EXPECT_EQ(get64(X, 512), 3u) << "XSTATE_BV";
    EXPECT_EQ(get64(X, 520), 0u) << "XCOMP_BV is not written by XSAVE";
  }
}

TEST(ProcessorExtendedStates, XsaveThenXrstorRestoresState) {
  XsaveMachine M;
  SplitMix64 Rng(0x2222);
  for (unsigned It = 0; It < 50; ++It) {
    randomState(Rng, M.S);
    const CpuState Saved = M.S;
    M.fill(0);
    ASSERT_EQ(M.runCode(Xsave64), StopReason::Halted);
    randomState(Rng, M.S);
    M.S.Gpr[RAX] = M.S.Gpr[RDX] = ~0u;
    ASSERT_EQ(M.runCode(Xrstor64), StopReason::Halted);
    EXPECT_EQ(0, std::memcmp(M.S.XmmReg, Saved.XmmReg, sizeof(Saved.XmmReg)));
    EXPECT_EQ(M.S.Mxcsr, Saved.Mxcsr);
    EXPECT_EQ(M.S.Fcw, Saved.Fcw);
    EXPECT_EQ(M.S.Fsw, Saved.Fsw);
    EXPECT_EQ(M.S.Ftw, Saved.Ftw);
    EXPECT_EQ(M.S.Fop, Saved.Fop);
    EXPECT_EQ(M.S.Fip, Saved.Fip);
    EXPECT_EQ(M.S.Fdp, Saved.Fdp);
    EXPECT_EQ(0, std::memcmp(M.S.St, Saved.St, sizeof(Saved.St)));
  }
}

TEST(ProcessorExtendedStates, XsaveWithRfbmX87LeavesSseBytesAndKeepsOtherXstateBits) {
  XsaveMachine M;
  M.fill(0xcc);
  uint64_t OldBv = 0x2; // SSE bit from an earlier save must survive
  M.write(kDataBase + 512, &OldBv, 8);
  M.S.Gpr[RAX] = 1;
  M.S.Gpr[RDX] = 0;
  ASSERT_EQ(M.runCode(Xsave64), StopReason::Halted);
  std::vector<uint8_t> B = M.area();
  EXPECT_EQ(get32(B, 24), 0xccccccccu) << "MXCSR is part of the SSE component";
  for (unsigned K = 160; K < 512; ++K)
    ASSERT_EQ(B[K], 0xcc) << "byte " << K;
  EXPECT_EQ(get64(B, 512), 3u);
  EXPECT_EQ(get64(B, 520), 0xccccccccccccccccull) << "XSAVE writes only XSTATE_BV";
}

TEST(ProcessorExtendedStates, XsaveoptAlwaysWritesRequestedComponents) {
  XsaveMachine M;
  SplitMix64 Rng(0x0b7);
  randomState(Rng, M.S);
  M.fill(0);
  ASSERT_EQ(M.runCode(Xsave64 + Fxsave64At1024), StopReason::Halted);
  std::vector<uint8_t> Want = M.area();
  M.fill(0);
  ASSERT_EQ(M.runCode(Xsaveopt64), StopReason::Halted);
  EXPECT_EQ(M.area(), Want);
}

TEST(ProcessorExtendedStates, XsavecWritesCompactedHeader) {
  XsaveMachine M;
  SplitMix64 Rng(0xc0c);
  randomState(Rng, M.S);
  M.fill(0);
  M.S.Gpr[RAX] = 2; // SSE only
  ASSERT_EQ(M.runCode(Xsavec64), StopReason::Halted);
  std::vector<uint8_t> B = M.area();
  EXPECT_EQ(get64(B, 512), 2u);
  EXPECT_EQ(get64(B, 520), 0x8000000000000002ull);
  EXPECT_EQ(get32(B, 24), M.S.Mxcsr);
  EXPECT_EQ(0, std::memcmp(B.data() + 160, M.S.XmmReg, 256));
  EXPECT_EQ(get32(B, 0), 0u) << "x87 not requested";
}

TEST(ProcessorExtendedStates, XrstorCompactedRoundTrip) {
  XsaveMachine M;
  SplitMix64 Rng(0xc0d);
  randomState(Rng, M.S);
  const CpuState Saved = M.S;
  M.fill(0);
  ASSERT_EQ(M.runCode(Xsavec64), StopReason::Halted);
  randomState(Rng, M.S);
  M.S.Gpr[RAX] = M.S.Gpr[RDX] = ~0u;
  ASSERT_EQ(M.runCode(Xrstor64), StopReason::Halted);
  EXPECT_EQ(0, std::memcmp(M.S.XmmReg, Saved.XmmReg, sizeof(Saved.XmmReg)));
  EXPECT_EQ(M.S.Mxcsr, Saved.Mxcsr);
  EXPECT_EQ(M.S.Fcw, Saved.Fcw);
  EXPECT_EQ(M.S.Fip, Saved.Fip);
}

TEST(ProcessorExtendedStates, XrstorStandardWithClearXstateBvInitializesButLoadsMxcsr) {
  XsaveMachine M;
  SplitMix64 Rng(0x1717);
  randomState(Rng, M.S);
  M.fill(0);
  uint32_t Mxcsr = 0x3f80;
  M.write(kDataBase + 24, &Mxcsr, 4);
  ASSERT_EQ(M.runCode(Xrstor64), StopReason::Halted);
  for (const Xmm &X : M.S.XmmReg)
    EXPECT_TRUE(X.Lo == 0 && X.Hi == 0);
  EXPECT_EQ(M.S.Mxcsr, 0x3f80u) << "standard form loads MXCSR regardless of XSTATE_BV";
  EXPECT_EQ(M.S.Fcw, 0x37fu);
  EXPECT_EQ(M.S.Fsw, 0u);
  EXPECT_EQ(M.S.Ftw, 0u);
  EXPECT_EQ(M.S.Fip, 0u);
}

TEST(ProcessorExtendedStates, XrstorCompactedWithClearSseBitInitializesMxcsr) {
  XsaveMachine M;
  M.S.Mxcsr = 0x7f80;
  M.fill(0);
  uint64_t Header[2] = {0, 0x8000000000000003ull};
  M.write(kDataBase + 512, Header, 16);
  uint32_t Mxcsr = 0x3f80;
  M.write(kDataBase + 24, &Mxcsr, 4);
  ASSERT_EQ(M.runCode(Xrstor64), StopReason::Halted);
  EXPECT_EQ(M.S.Mxcsr, 0x1f80u);
}

TEST(ProcessorExtendedStates, XrstorRfbmSelectsComponents) {
  XsaveMachine M;
  SplitMix64 Rng(0x99);
  randomState(Rng, M.S);
  const CpuState Before = M.S;
  M.fill(0);
  M.S.Gpr[RAX] = 1; // x87 only: XSTATE_BV = 0 initializes x87, SSE untouched
  M.S.Gpr[RDX] = 0;
  ASSERT_EQ(M.runCode(Xrstor64), StopReason::Halted);
  EXPECT_EQ(0, std::memcmp(M.S.XmmReg, Before.XmmReg, sizeof(Before.XmmReg)));
  EXPECT_EQ(M.S.Mxcsr, Before.Mxcsr);
  EXPECT_EQ(M.S.Fcw, 0x37fu);
}

/// Runs Code expecting a fault with vector V and no change to XMM0 or MXCSR.
void expectFault(XsaveMachine &M, const std::vector<uint8_t> &Code, int V) {
  M.S.XmmReg[0] = Xmm{0x1111, 0x2222};
  M.S.Mxcsr = 0x1f80;
  StopReason Why = M.runCode(Code);
  EXPECT_EQ(faultVector(M, Why), V);
  EXPECT_EQ(M.S.XmmReg[0].Lo, 0x1111u);
  EXPECT_EQ(M.S.XmmReg[0].Hi, 0x2222u);
  EXPECT_EQ(M.S.Mxcsr, 0x1f80u);
}

TEST(ProcessorExtendedStates, XsaveMisalignedRaisesGp) {
  XsaveMachine M;
  M.fill(0xcc);
  M.S.Gpr[RSI] = kDataBase + 16;
  expectFault(M, Xsave64, vec::GP);
  std::vector<uint8_t> B = M.area(kDataBase, 1024);
  for (unsigned K = 0; K < B.size(); ++K)
    ASSERT_EQ(B[K], 0xcc) << "byte " << K;
}

TEST(ProcessorExtendedStates, XrstorMisalignedRaisesGp) {
  XsaveMachine M;
  M.fill(0);
  M.S.Gpr[RSI] = kDataBase + 32;
  expectFault(M, Xrstor64, vec::GP);
}

TEST(ProcessorExtendedStates, XrstorStandardReservedHeaderBytesRaiseGp) {
  for (unsigned Off : {520u, 527u, 528u, 535u}) {
    XsaveMachine M;
    M.fill(0);
    uint8_t One = 1;
    M.write(kDataBase + Off, &One, 1);
    SCOPED_TRACE(Off);
    expectFault(M, Xrstor64, vec::GP);
  }
}

TEST(ProcessorExtendedStates, XrstorStandardIgnoresHeaderBytesFrom24) {
  XsaveMachine M;
  M.fill(0);
  uint8_t One = 1;
  M.write(kDataBase + 536, &One, 1);
  EXPECT_EQ(M.runCode(Xrstor64), StopReason::Halted);
}

TEST(ProcessorExtendedStates, XrstorCompactedReservedHeaderBytesRaiseGp) {
  for (unsigned Off : {528u, 540u, 575u}) {
    XsaveMachine M;
    M.fill(0);
    uint64_t Comp = 0x8000000000000003ull;
    M.write(kDataBase + 520, &Comp, 8);
    uint8_t One = 1;
    M.write(kDataBase + Off, &One, 1);
    SCOPED_TRACE(Off);
    expectFault(M, Xrstor64, vec::GP);
  }
}

TEST(ProcessorExtendedStates, XrstorXstateBvOutsideXcr0RaisesGp) {
  XsaveMachine M;
  M.fill(0);
  uint64_t Bv = 0x7; // AVX is not enabled in XCR0
  M.write(kDataBase + 512, &Bv, 8);
  expectFault(M, Xrstor64, vec::GP);
}

TEST(ProcessorExtendedStates, XrstorCompactedXstateBvOutsideXcompBvRaisesGp) {
  XsaveMachine M;
  M.fill(0);
  uint64_t Header[2] = {0x3, 0x8000000000000001ull};
  M.write(kDataBase + 512, Header, 16);
  expectFault(M, Xrstor64, vec::GP);
}

TEST(ProcessorExtendedStates, XrstorCompactedWithoutXsavecSupportRaisesGp) {
  XsaveMachine M(false);
  M.fill(0);
  uint64_t Header[2] = {0x3, 0x8000000000000003ull};
  M.write(kDataBase + 512, Header, 16);
  expectFault(M, Xrstor64, vec::GP);
}

TEST(ProcessorExtendedStates, XrstorReservedMxcsrBitRaisesGp) {
  XsaveMachine M;
  M.fill(0);
  uint64_t Bv = 3;
  M.write(kDataBase + 512, &Bv, 8);
  uint32_t Mxcsr = 0x11f80;
  M.write(kDataBase + 24, &Mxcsr, 4);
  M.S.Fcw = 0x40;
  expectFault(M, Xrstor64, vec::GP);
  EXPECT_EQ(M.S.Fcw, 0x40u) << "x87 state unchanged too";
}

TEST(ProcessorExtendedStates, XsaveWithoutOsxsaveRaisesUd) {
  XsaveMachine M;
  M.S.Cr4 &= ~cr4::OSXSAVE;
  M.fill(0);
  expectFault(M, Xsave64, vec::UD);
  expectFault(M, Xrstor64, vec::UD);
}

TEST(ProcessorExtendedStates, XsaveWithCr0TsRaisesNm) {
  XsaveMachine M;
  M.S.Cr0 |= cr0::TS;
  M.fill(0);
  expectFault(M, Xsave64, vec::NM);
  expectFault(M, Xrstor64, vec::NM);
}

TEST(ProcessorExtendedStates, XsaveIgnoresCr0Em) {
  XsaveMachine M;
  M.S.Cr0 |= cr0::EM;
  M.fill(0);
  EXPECT_EQ(M.runCode(Xsave64), StopReason::Halted);
}

TEST(ProcessorExtendedStates, XsavecWithoutCpuidSupportRaisesUd) {
  XsaveMachine M(false);
  M.fill(0);
  expectFault(M, Xsavec64, vec::UD);
}

TEST(ProcessorExtendedStates, ProtectedModeXsaveSavesOnlyXmm0To7) {
  XsaveMachine M;
  M.setupProtected32();
  installFaultIdt(M);
  M.S.Cr4 |= cr4::OSXSAVE;
  M.S.Gpr[RSI] = kDataBase;
  M.S.Gpr[RAX] = 3;
  M.S.Gpr[RDX] = 0;
  SplitMix64 Rng(0x32);
  for (Xmm &X : M.S.XmmReg)
    X = Xmm{Rng.next(), Rng.next()};
  M.fill(0xcc);
  ASSERT_EQ(M.runCode(Xsave), StopReason::Halted);
  std::vector<uint8_t> B = M.area();
  EXPECT_EQ(0, std::memcmp(B.data() + 160, M.S.XmmReg, 128));
  for (unsigned K = 288; K < 512; ++K)
    ASSERT_EQ(B[K], 0xcc) << "byte " << K;
  EXPECT_EQ(get64(B, 512) & 3, 3u);
}

TEST(ProcessorExtendedStates, PrefetchOfUnmappedAddressDoesNotFault) {
  XsaveMachine M;
  // prefetcht0/t1/t2/nta [rsi], prefetchw [rsi] with RSI far outside RAM and non-canonical
  // addresses excluded: hints never fault (SDM Vol. 2B, PREFETCHh: "no exceptions").
  M.S.Gpr[RSI] = 0x7fff00000000ull;
  EXPECT_EQ(M.runCode({0x0f, 0x18, 0x0e, 0x0f, 0x18, 0x16, 0x0f, 0x18, 0x1e, 0x0f, 0x18, 0x06,
                       0x0f, 0x0d, 0x0e}),
            StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kCodeBase + 16);
}

} // namespace
