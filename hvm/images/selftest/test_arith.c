/* Integer and floating-point arithmetic as gcc -O2 emits it for the baseline x86-64
   ISA (no popcnt/lzcnt: those come from libgcc or bit tricks). */
#include "images/selftest/selftest.h"
#include "lib/cpu.h"
#include "lib/string.h"

enum TestResult test_muldiv64(void) {
  uint64_t A = OPAQUE(0xfedcba9876543210ull), B = OPAQUE(0x123456789ull);
  int64_t SA = OPAQUE(-1234567890123456789ll), SB = OPAQUE(987654321ll);
  EXPECT_EQ(A * B, 0xcccccccce1833a90ull);
  EXPECT_EQ(A / B, 0xe0000000ull);
  EXPECT_EQ(A % B, 0x96543210ull);
  EXPECT_EQ(SA / SB, -1249999988);
  EXPECT_EQ(SA % SB, -725308641);
  EXPECT_EQ(SA / -SB, 1249999988);
  EXPECT_EQ(-SA % SB, 725308641);
  EXPECT_EQ((int64_t)OPAQUE(-7) / 2, -3); /* C truncates toward zero, like IDIV */
  EXPECT_EQ((int64_t)OPAQUE(-7) % 2, -1);
  EXPECT_EQ((int64_t)OPAQUE(-7) >> 1, -4); /* arithmetic shift rounds down */
  uint32_t A32 = OPAQUE(0xdeadbeefu), B32 = OPAQUE(12345u);
  EXPECT_EQ(A32 / B32, 302626u);
  EXPECT_EQ(A32 % B32, 10589u);
  EXPECT_EQ((int32_t)A32 / (int32_t)B32, -45284);
  EXPECT_EQ((int32_t)A32 % (int32_t)B32, -7757);
  EXPECT_EQ((uint32_t)(A32 * B32), 0x287c5337u);
  EXPECT_EQ(A / OPAQUE(1ull), A);
  EXPECT_EQ(OPAQUE(UINT64_MAX) / UINT64_MAX, 1);
  /* Division by a constant becomes a multiply by a reciprocal. */
  EXPECT_EQ(A / 10, 0x197c790f3f086b68ull);
  EXPECT_EQ(A % 10, 0);
  EXPECT_EQ(SA / 7, -176366841446208112ll);
  return TestPass;
}

enum TestResult test_int128(void) {
  unsigned __int128 X = OPAQUE(0xfedcba9876543210ull), Y = OPAQUE(0x0123456789abcdefull);
  unsigned __int128 P = X * Y;
  EXPECT_EQ((uint64_t)(P >> 64), 0x0121fa00ad77d742ull);
  EXPECT_EQ((uint64_t)P, 0x2236d88fe5618cf0ull);
  __int128 S = (__int128)(int64_t)OPAQUE(-5000000000ll) * (int64_t)OPAQUE(7000000000ll);
  EXPECT_EQ((uint64_t)((unsigned __int128)S >> 64), 0xfffffffffffffffeull);
  EXPECT_EQ((uint64_t)S, 0x1a4705701d540000ull);
  /* 128-bit division goes through libgcc's __udivti3 / __umodti3. */
  /* OPAQUE: gcc knows a 64x64-bit product divided by a factor is the other one. */
  EXPECT_EQ((uint64_t)(OPAQUE(P) / X), 0x0123456789abcdefull);
  EXPECT_EQ((uint64_t)(P % Y), 0);
  EXPECT_EQ((uint64_t)((P + 12345) % X), 12345);
  return TestPass;
}

enum TestResult test_bits(void) {
  uint64_t V = OPAQUE(0x00f0000000001000ull);
  EXPECT_EQ(__builtin_popcountll(V), 5);
  EXPECT_EQ(__builtin_popcountll(OPAQUE(~0ull)), 64);
  EXPECT_EQ(__builtin_clzll(V), 8);
  EXPECT_EQ(__builtin_ctzll(V), 12);
  EXPECT_EQ(__builtin_clz(OPAQUE(1u)), 31);
  EXPECT_EQ(__builtin_ffsll(OPAQUE(0ll)), 0);
  EXPECT_EQ(__builtin_ffsll(V), 13);
  EXPECT_EQ(__builtin_parityll(V), 1);
  EXPECT_EQ(__builtin_bswap64(OPAQUE(0x0102030405060708ull)), 0x0807060504030201ull);
  EXPECT_EQ(__builtin_bswap32(OPAQUE(0xaabbccddu)), 0xddccbbaau);
  EXPECT_EQ(__builtin_bswap16(OPAQUE((uint16_t)0x1234)), 0x3412);
  uint64_t R = OPAQUE(0x8000000000000001ull);
  unsigned K = OPAQUE(4u);
  EXPECT_EQ((R << K) | (R >> (64 - K)), 0x0000000000000018ull); /* rol */
  EXPECT_EQ((R >> K) | (R << (64 - K)), 0x1800000000000000ull); /* ror */
  EXPECT_EQ(V & -V, 0x1000);                                     /* lowest set bit */
  EXPECT_EQ(V & (V - 1), 0x00f0000000000000ull);                 /* clear it */
  uint64_t Ovf;
  EXPECT_EQ(__builtin_mul_overflow(OPAQUE(1ull << 40), 1ull << 30, &Ovf), 1);
  EXPECT_EQ(__builtin_add_overflow(OPAQUE(INT64_MAX), (int64_t)1, (int64_t *)&Ovf), 1);
  return TestPass;
}

/* Defined in test_bmi.c, built with -mpopcnt -mlzcnt -mbmi -mbmi2. */
uint64_t bmiPopcnt(uint64_t X);
uint64_t bmiLzcnt(uint64_t X);
uint64_t bmiTzcnt(uint64_t X);
uint64_t bmiAndn(uint64_t A, uint64_t B);
uint64_t bmiBlsr(uint64_t X);
uint64_t bmiBlsi(uint64_t X);
uint64_t bmiBlsmsk(uint64_t X);
uint64_t bmiBextr(uint64_t X, unsigned Start, unsigned Len);
uint64_t bmiBzhi(uint64_t X, unsigned Index);
uint64_t bmiPdep(uint64_t X, uint64_t Mask);
uint64_t bmiPext(uint64_t X, uint64_t Mask);
uint64_t bmiShlx(uint64_t X, unsigned N);
int64_t bmiSarx(int64_t X, unsigned N);
uint64_t bmiRorx(uint64_t X);
uint64_t bmiMulx(uint64_t A, uint64_t B, uint64_t *Lo);

enum TestResult test_bmi(void) {
  /* SDM Vol. 2A, CPUID: POPCNT is CPUID.01H:ECX[23]; LZCNT is CPUID.80000001H:ECX[5];
     BMI1 and BMI2 are CPUID.(07H,0):EBX[3] and [8]. Without LZCNT the F3 prefix is
     ignored and the same bytes execute as BSR, so the check is needed. */
  bool Popcnt = cpuid(1, 0).Ecx & (1u << 23);
  bool Lzcnt = cpuidHasLeaf(0x80000001) && (cpuid(0x80000001, 0).Ecx & (1u << 5));
  uint32_t Ebx7 = cpuidHasLeaf(7) ? cpuid(7, 0).Ebx : 0;
  bool Bmi1 = Ebx7 & (1u << 3), Bmi2 = Ebx7 & (1u << 8);
  if (!(Popcnt && Lzcnt && Bmi1 && Bmi2))
    return testSkipped(!Popcnt ? "no POPCNT" : !Lzcnt ? "no LZCNT" : !Bmi1 ? "no BMI1" : "no BMI2");
  uint64_t V = OPAQUE(0x00f0000000001000ull);
  EXPECT_EQ(bmiPopcnt(V), 5);
  EXPECT_EQ(bmiLzcnt(V), 8);
  EXPECT_EQ(bmiLzcnt(0), 64); /* unlike BSR, defined for zero */
  EXPECT_EQ(bmiTzcnt(V), 12);
  EXPECT_EQ(bmiTzcnt(0), 64);
  EXPECT_EQ(bmiAndn(0xff00ff00ff00ff00ull, 0x0ff00ff00ff00ff0ull), 0x00f000f000f000f0ull);
  EXPECT_EQ(bmiBlsr(V), 0x00f0000000000000ull);
  EXPECT_EQ(bmiBlsi(V), 0x1000);
  EXPECT_EQ(bmiBlsmsk(V), 0x1fff);
  EXPECT_EQ(bmiBextr(0x123456789abcdef0ull, 8, 16), 0xbcde);
  EXPECT_EQ(bmiBzhi(0x123456789abcdef0ull, 20), 0xcdef0);
  EXPECT_EQ(bmiPdep(0x00000000000000abull, 0xf0f0f0f0f0f0f0f0ull), 0x000000000000a0b0ull);
  EXPECT_EQ(bmiPext(0x123456789abcdef0ull, 0xff00ff00ff00ff00ull), 0x12569adeull);
  EXPECT_EQ(bmiShlx(3, OPAQUE(62u)), 0xc000000000000000ull);
  EXPECT_EQ(bmiSarx(-256, OPAQUE(4u)), -16);
  EXPECT_EQ(bmiRorx(0x0123456789abcdefull), 0xef0123456789abcdull);
  uint64_t Lo;
  EXPECT_EQ(bmiMulx(0xfedcba9876543210ull, 0x0123456789abcdefull, &Lo), 0x0121fa00ad77d742ull);
  EXPECT_EQ(Lo, 0x2236d88fe5618cf0ull);
  return TestPass;
}

static uint64_t doubleBits(double D) {
  uint64_t U;
  memcpy(&U, &D, sizeof(U));
  return U;
}

enum TestResult test_float(void) {
  /* Every operation is correctly rounded IEEE double arithmetic in a fixed order, so
     the bits are exact; computed off-line with Python floats. */
  double Sum = 0;
  for (int K = OPAQUE(1); K <= 1000; ++K)
    Sum += 1.0 / ((double)K * K);
  EXPECT_EQ(doubleBits(Sum), 0x3ffa4d8e550a946eull);
  float F = OPAQUE(1.0f);
  for (int I = 0; I < 10; ++I)
    F = F * 1.5f + 0.25f;
  EXPECT_EQ((uint64_t)doubleBits((double)F), 0x40557fd800000000ull);
  EXPECT_EQ((int64_t)OPAQUE(-3.75), -3); /* cvttsd2si truncates */
  EXPECT_EQ((uint64_t)OPAQUE(1e19), 10000000000000000000ull);
  EXPECT_EQ(doubleBits((double)OPAQUE(UINT64_MAX)), 0x43f0000000000000ull);
  EXPECT_EQ(doubleBits((double)OPAQUE((int64_t)-123456789)), 0xc19d6f3454000000ull);
  EXPECT_TRUE(OPAQUE(0.1) + 0.2 != 0.3);
  return TestPass;
}
