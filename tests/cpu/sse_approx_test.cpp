// RCPSS/RCPPS/RSQRTSS/RSQRTPS (SDM Vol. 2B, the four instruction pages): vmxsim's
// approximation (cpu/sse_approx.h) — exact bits for hand-worked values, every special
// case the SDM lists, the SDM's error bound over a sweep of the single-precision range,
// and the instructions' lanes, memory forms, faults and MXCSR behaviour.
#include "cpu/sse_approx.h"
#include "tests/cpu/sse_test_util.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>

using namespace vmxsim;
using namespace vmxsim::test;
using vmxsim::sse::approxReciprocal;
using vmxsim::sse::approxReciprocalSqrt;

namespace {

uint32_t bits(float F) { return std::bit_cast<uint32_t>(F); }

// Worked by hand: 1/3 = 1.010101010101|0101...b * 2^-2 rounds down to fraction 0x555;
// 1/10 = 1.100110011001|1001...b * 2^-4 rounds up to 0x99a; 1/sqrt(2) =
// 1.011010100000|1001111...b * 2^-1 rounds up to 0x6a1.
TEST(SseApproximation, WorkedValues) {
  EXPECT_EQ(approxReciprocal(bits(1.0f)), 0x3f800000u);
  EXPECT_EQ(approxReciprocal(bits(2.0f)), 0x3f000000u);
  EXPECT_EQ(approxReciprocal(bits(-4.0f)), 0xbe800000u);
  EXPECT_EQ(approxReciprocal(bits(3.0f)), 0x3eaaa800u);
  EXPECT_EQ(approxReciprocal(bits(10.0f)), 0x3dccd000u);
  EXPECT_EQ(approxReciprocal(bits(-10.0f)), 0xbdccd000u);
  EXPECT_EQ(approxReciprocalSqrt(bits(4.0f)), 0x3f000000u);
  EXPECT_EQ(approxReciprocalSqrt(bits(2.0f)), 0x3f350800u);
  EXPECT_EQ(approxReciprocalSqrt(bits(0.25f)), 0x40000000u);
}

TEST(SseApproximation, SpecialCasesOfTheSdm) {
  struct Case {
    uint32_t In, Rcp, Rsqrt;
  } Cases[] = {
      {0x00000000, 0x7f800000, 0x7f800000}, // +0 -> +inf
      {0x80000000, 0xff800000, 0xff800000}, // -0 -> -inf
      {0x00000001, 0x7f800000, 0x7f800000}, // denormals are 0.0 of their sign
      {0x807fffff, 0xff800000, 0xff800000},
      {0x7f800000, 0x00000000, 0x00000000}, // +inf -> +0
      {0xff800000, 0x80000000, 0xffc00000}, // -inf: -0; RSQRT of a negative: indefinite
      {0xbf800000, 0xbf800000, 0xffc00000}, // -1.0
      {0x7fc00001, 0x7fc00001, 0x7fc00001}, // QNaN returned
      {0xff800001, 0xffc00001, 0xffc00001}, // SNaN quietened
      {0x00800000, 0x7e800000, 0x5f000000}, // 2^-126: 2^126; 2^63
      {0x7f7fffff, 0x00000000, 0x1f800000}, // max: tiny reciprocal flushed; 2^-64
      {0xff7fffff, 0x80000000, 0xffc00000}, //   with the operand's sign
      {0x7e800000, 0x00800000, 0x20000000}, // 2^126: 2^-126 is normal; 2^-63
      {0x7e800001, 0x00800000, 0x20000000}, // just above: rounds up to 2^-126
      {0x7effffff, 0x00000000, 0x1fb50800}, // 2^127(1-2^-24): 2^-127 flushed; 2^-63.5
  };
  for (const Case &C : Cases) {
    EXPECT_EQ(approxReciprocal(C.In), C.Rcp) << std::hex << "rcp 0x" << C.In;
    EXPECT_EQ(approxReciprocalSqrt(C.In), C.Rsqrt) << std::hex << "rsqrt 0x" << C.In;
  }
}

// |relative error| <= 1.5 * 2^-12 (the SDM's bound) for every sampled normal input whose
// result is normal, and bits 10:0 of every result are zero.
TEST(SseApproximation, WithinTheSdmBoundAcrossTheRange) {
  const long double Bound = 1.5L * std::ldexp(1.0L, -12);
  long double Worst[2] = {0, 0};
  uint64_t Checked = 0;
  for (uint64_t B = 0x00800000; B < 0x7f800000; B += 4093) {
    const uint32_t X = uint32_t(B);
    const long double Xv = std::bit_cast<float>(X);
    const uint32_t R = approxReciprocal(X), Q = approxReciprocalSqrt(X);
    ASSERT_EQ(R & 0x7ff, 0u) << std::hex << X;
    ASSERT_EQ(Q & 0x7ff, 0u) << std::hex << X;
    if (R != 0) {
      const long double E = std::fabs((std::bit_cast<float>(R) - 1.0L / Xv) * Xv);
      ASSERT_LE(E, Bound) << std::hex << X;
      Worst[0] = std::max(Worst[0], E);
    } else {
      ASSERT_LT(1.0L / Xv, std::ldexp(1.0L, -126)) << std::hex << X;
    }
    const long double Exact = 1.0L / std::sqrt(Xv);
    const long double F = std::fabs((std::bit_cast<float>(Q) - Exact) / Exact);
    ASSERT_LE(F, Bound) << std::hex << X;
    Worst[1] = std::max(Worst[1], F);
    ++Checked;
  }
  EXPECT_EQ(Checked, 520574u);
  // Round-to-nearest at 12 fraction bits: at most half a unit, 2^-13 relative.
  EXPECT_LE(Worst[0], std::ldexp(1.0L, -13) * (1 + 1e-9L));
  EXPECT_LE(Worst[1], std::ldexp(1.0L, -13) * (1 + 1e-9L));
}

constexpr uint8_t Hlt = 0xf4;

TEST(SseApproximation, PackedFormsComputeEveryLane) {
  TestMachine M;
  M.setupLongMode();
  M.S.XmmReg[1] = {uint64_t(bits(3.0f)) | uint64_t(bits(-2.0f)) << 32,
                   uint64_t(0x7f800000) | uint64_t(bits(4.0f)) << 32};
  M.S.XmmReg[2] = M.S.XmmReg[1];
  M.loadCode({0x0f, 0x53, 0xc1,       // rcpps xmm0, xmm1
              0x0f, 0x52, 0xda, Hlt}); // rsqrtps xmm3, xmm2
  ASSERT_EQ(M.run(10), StopReason::Halted);
  EXPECT_EQ(M.S.XmmReg[0].Lo, 0xbf0000003eaaa800ull);
  EXPECT_EQ(M.S.XmmReg[0].Hi, 0x3e80000000000000ull);
  EXPECT_EQ(M.S.XmmReg[3].Lo, 0xffc000003f13d000ull);
  EXPECT_EQ(M.S.XmmReg[3].Hi, 0x3f00000000000000ull);
}

TEST(SseApproximation, ScalarFormsKeepTheUpperLanesAndReadM32Unaligned) {
  TestMachine M;
  M.setupLongMode();
  M.S.XmmReg[0] = {0x1111111122222222ull, 0x3333333344444444ull};
  M.S.XmmReg[1] = {uint64_t(bits(10.0f)) | 0xdeadbeef00000000ull, ~0ull};
  M.S.XmmReg[4] = M.S.XmmReg[0];
  M.S.Gpr[RSI] = kDataBase + 1;
  const uint32_t Four = bits(4.0f);
  M.write(kDataBase + 1, &Four, 4);
  M.loadCode({0xf3, 0x0f, 0x53, 0xc1,       // rcpss xmm0, xmm1
              0xf3, 0x0f, 0x52, 0x26, Hlt}); // rsqrtss xmm4, [rsi]
  ASSERT_EQ(M.run(10), StopReason::Halted);
  EXPECT_EQ(M.S.XmmReg[0].Lo, 0x111111113dccd000ull);
  EXPECT_EQ(M.S.XmmReg[0].Hi, 0x3333333344444444ull);
  EXPECT_EQ(M.S.XmmReg[4].Lo, 0x111111113f000000ull);
  EXPECT_EQ(M.S.XmmReg[4].Hi, 0x3333333344444444ull);
}

// No SIMD floating-point exception even with every exception unmasked and a denormal,
// a zero and an SNaN in the source; MXCSR is not changed (its flags stay clear).
TEST(SseApproximation, NoExceptionAndMxcsrUnchanged) {
  TestMachine M;
  setupLongModeWithFaultIdt(M);
  M.S.Cr4 |= cr4::OSXMMEXCPT;
  M.S.Mxcsr = 0x0000; // all exceptions unmasked, round to nearest
  M.S.XmmReg[1] = {0x0000000100000000ull, 0xff80000100000000ull};
  M.loadCode({0x0f, 0x53, 0xc1, Hlt}); // rcpps xmm0, xmm1
  ASSERT_EQ(M.run(10), StopReason::Halted);
  EXPECT_EQ(M.S.Mxcsr, 0u);
  EXPECT_EQ(M.S.XmmReg[0].Lo, 0x7f8000007f800000ull);
  EXPECT_EQ(M.S.XmmReg[0].Hi, 0xffc000017f800000ull);
}

TEST(SseApproximation, PackedMemoryOperandMustBeAligned) {
  TestMachine M;
  setupLongModeWithFaultIdt(M);
  M.S.Gpr[RSI] = kDataBase + 4;
  M.loadCode({0x0f, 0x53, 0x06, Hlt}); // rcpps xmm0, [rsi]
  EXPECT_EQ(faultVector(M, M.run(10)), vec::GP);
}

TEST(SseApproximation, CheckedForAvailabilityLikeEverySseInstruction) {
  TestMachine M;
  setupLongModeWithFaultIdt(M);
  M.S.Cr0 |= cr0::TS;
  M.loadCode({0x0f, 0x52, 0xc1, Hlt}); // rsqrtps xmm0, xmm1
  EXPECT_EQ(faultVector(M, M.run(10)), vec::NM);
}

} // namespace
