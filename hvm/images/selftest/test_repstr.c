/* String instructions. Built with -mstringop-strategy=rep_byte -minline-all-stringops,
   so gcc expands __builtin_memcpy/__builtin_memset (also of variable length) into
   REP MOVSB / REP STOSB; the rest is inline assembly for forms gcc never emits: a
   backward copy (DF = 1), REPE CMPSB, REPNE SCASB, REP MOVSQ/STOSQ, LODSB. */
#include "images/selftest/selftest.h"

static uint8_t RepSrc[300], RepDst[300];

static __attribute__((noinline)) void copyBytes(void *Dst, const void *Src, size_t N) {
  __builtin_memcpy(Dst, Src, N);
}

static __attribute__((noinline)) void fillBytes(void *Dst, int C, size_t N) {
  __builtin_memset(Dst, C, N);
}

static bool bytesEqual(const uint8_t *A, const uint8_t *B, size_t N) {
  for (size_t I = 0; I < N; ++I)
    if (A[I] != B[I])
      return false;
  return true;
}

enum TestResult test_rep_string(void) {
  for (size_t I = 0; I < sizeof(RepSrc); ++I)
    RepSrc[I] = (uint8_t)(I * 7 + 1);
  fillBytes(RepDst, 0xee, sizeof(RepDst));
  EXPECT_EQ(RepDst[0], 0xee);
  EXPECT_EQ(RepDst[299], 0xee);
  copyBytes(RepDst + 1, RepSrc, OPAQUE((size_t)257));
  EXPECT_TRUE(bytesEqual(RepDst + 1, RepSrc, 257));
  EXPECT_EQ(RepDst[0], 0xee);
  EXPECT_EQ(RepDst[258], 0xee);
  copyBytes(RepDst, RepSrc, OPAQUE((size_t)0)); /* RCX = 0: no iteration */
  EXPECT_EQ(RepDst[0], 0xee);

  /* Backward overlapping copy, as memmove does it: DF = 1, RSI/RDI at the last byte. */
  uint8_t Buf[16] = "0123456789";
  {
    void *D = Buf + 2 + 7, *S = Buf + 7;
    size_t N = 8;
    __asm__ volatile("std\n\trep movsb\n\tcld" : "+D"(D), "+S"(S), "+c"(N) : : "memory");
    EXPECT_EQ((uintptr_t)D, (uintptr_t)(Buf + 1)); /* decremented past the start */
    EXPECT_EQ(N, 0);
  }
  EXPECT_TRUE(bytesEqual(Buf, (const uint8_t *)"0101234567", 10));

  /* REPE CMPSB stops after the first mismatch; RCX counts what was left. */
  {
    const char *A = "abcdefgh", *B = "abcdXfgh";
    size_t N = 8;
    uint8_t Equal;
    __asm__ volatile("repe cmpsb\n\tsete %3"
                     : "+S"(A), "+D"(B), "+c"(N), "=r"(Equal) : : "memory", "cc");
    EXPECT_EQ(N, 3);
    EXPECT_EQ(Equal, 0);
  }
  /* REPNE SCASB: the classic strlen. */
  {
    const char *S = "hello, world";
    size_t N = (size_t)-1;
    __asm__ volatile("repne scasb" : "+D"(S), "+c"(N) : "a"(0) : "memory", "cc");
    EXPECT_EQ(~N - 1, 12);
  }
  /* REP STOSQ and REP MOVSQ. */
  {
    uint64_t Q[6], R[6];
    void *D = Q;
    size_t N = 6;
    __asm__ volatile("rep stosq" : "+D"(D), "+c"(N) : "a"(0x1122334455667788ull) : "memory");
    void *Dst = R, *Src = Q;
    N = 6;
    __asm__ volatile("rep movsq" : "+D"(Dst), "+S"(Src), "+c"(N) : : "memory");
    EXPECT_EQ(R[5], 0x1122334455667788ull);
    EXPECT_EQ((uintptr_t)Dst, (uintptr_t)(R + 6));
  }
  /* LODSB in a loop. */
  {
    const uint8_t *S = RepSrc;
    uint64_t Sum = 0;
    for (int I = 0; I < 10; ++I) {
      uint8_t B;
      __asm__ volatile("lodsb" : "=a"(B), "+S"(S) : : "memory");
      Sum += B;
    }
    EXPECT_EQ(Sum, 325); /* sum of (7i + 1) for i < 10 */
  }
  return TestPass;
}
