/* Language constructs with characteristic code: struct copies (SSE moves, memcpy
   calls), jump tables, indirect calls, varargs (the register save area), volatile
   accesses of every width, and locked read-modify-write instructions. */
#include <stdarg.h>

#include "images/selftest/selftest.h"
#include "lib/string.h"

struct Small { uint64_t A, B; };                 /* 16 bytes: one movdqa/movups */
struct Medium { uint32_t W[13]; };               /* 52 bytes: SSE moves plus a tail */
struct Large { uint64_t Q[40]; uint8_t Tail[3]; }; /* 328 bytes: memcpy or rep movs */

static __attribute__((noinline)) struct Medium makeMedium(uint32_t Seed) {
  struct Medium M;
  for (int I = 0; I < 13; ++I)
    M.W[I] = Seed * (uint32_t)(I + 1);
  return M;
}

static __attribute__((noinline)) struct Large passLarge(struct Large L, int Bump) {
  L.Q[39] += (uint64_t)Bump;
  L.Tail[2] ^= 0xff;
  return L;
}

static struct Small GSmall[4];
static struct Large GLarge1, GLarge2;

enum TestResult test_struct_copy(void) {
  struct Small S = {OPAQUE(0x1111222233334444ull), 0x5555666677778888ull};
  for (int I = 0; I < 4; ++I) {
    GSmall[I] = S;
    S.A += 1;
  }
  EXPECT_EQ(GSmall[3].A, 0x1111222233334447ull);
  EXPECT_EQ(GSmall[3].B, 0x5555666677778888ull);
  struct Medium M = makeMedium(OPAQUE(7u));
  struct Medium M2 = M;
  M.W[12] = 0;
  EXPECT_EQ(M2.W[0], 7);
  EXPECT_EQ(M2.W[12], 91);
  for (int I = 0; I < 40; ++I)
    GLarge1.Q[I] = (uint64_t)I * 0x0101010101010101ull;
  GLarge1.Tail[0] = 1, GLarge1.Tail[1] = 2, GLarge1.Tail[2] = 3;
  GLarge2 = passLarge(GLarge1, OPAQUE(5));
  EXPECT_EQ(GLarge2.Q[0], 0);
  EXPECT_EQ(GLarge2.Q[38], 38 * 0x0101010101010101ull);
  EXPECT_EQ(GLarge2.Q[39], 39 * 0x0101010101010101ull + 5);
  EXPECT_EQ(GLarge2.Tail[2], 0xfc);
  EXPECT_EQ(GLarge1.Tail[2], 3); /* passed by value: the original is untouched */
  struct Medium Zero = {{0}};
  EXPECT_EQ(memcmp(&Zero, &(struct Medium){{0}}, sizeof(Zero)), 0);
  return TestPass;
}

/* Dense cases with different operations: gcc emits an indirect jump through a table. */
static __attribute__((noinline)) uint64_t switchOp(unsigned Op, uint64_t X) {
  switch (Op) {
  case 0: return X + 1;
  case 1: return X * 3;
  case 2: return X ^ 0x5555;
  case 3: return X << 3;
  case 4: return X >> 2;
  case 5: return ~X;
  case 6: return X - 7;
  case 7: return X * X;
  case 8: return X | 0x100;
  case 9: return X & 0xffffff;
  case 10: return X / 3;
  case 11: return X % 7 + X;
  case 12: return (X << 32) | (X >> 32);
  case 13: return X + (X >> 1);
  default: return X ^ 0xdead;
  }
}

enum TestResult test_switch_table(void) {
  uint64_t X = OPAQUE(12345ull);
  for (unsigned I = 0; I < 1000; ++I)
    X = switchOp(I % 17, X);
  EXPECT_EQ(X, 0x0071389680000000ull);
  return TestPass;
}

static uint64_t opInc(uint64_t X) { return X + 1; }
static uint64_t opDouble(uint64_t X) { return X * 2; }
static uint64_t opMix(uint64_t X) { return X ^ (X >> 7); }
static uint64_t opRot(uint64_t X) { return (X << 13) | (X >> 51); }

static int cmpDescending(const void *A, const void *B) {
  uint32_t X = *(const uint32_t *)A, Y = *(const uint32_t *)B;
  return X < Y ? 1 : X > Y ? -1 : 0;
}

static __attribute__((noinline)) void sortWith(uint32_t *A, int N,
                                               int (*Cmp)(const void *, const void *)) {
  for (int I = 1; I < N; ++I)
    for (int J = I; J > 0 && Cmp(&A[J - 1], &A[J]) > 0; --J) {
      uint32_t T = A[J];
      A[J] = A[J - 1];
      A[J - 1] = T;
    }
}

enum TestResult test_funcptr(void) {
  static uint64_t (*const Ops[4])(uint64_t) = {opInc, opDouble, opMix, opRot};
  uint64_t X = OPAQUE(1ull);
  for (unsigned I = 0; I < 64; ++I)
    X = Ops[OPAQUE(I) & 3](X);
  EXPECT_EQ(X, 0xe1c38004180c38f1ull);
  uint32_t A[8] = {5, 1, 9, 3, 7, 2, 8, 6};
  sortWith(A, 8, OPAQUE(&cmpDescending));
  EXPECT_EQ(A[0], 9);
  EXPECT_EQ(A[7], 1);
  EXPECT_EQ(A[3], 6);
  return TestPass;
}

/* Fmt letters: i = int, l = long long, d = double. Doubles travel in XMM registers and
   the callee spills them into the register save area. */
static __attribute__((noinline)) double sumVa(const char *Fmt, ...) {
  va_list Ap, Copy;
  va_start(Ap, Fmt);
  va_copy(Copy, Ap);
  double Sum = 0;
  for (const char *P = Fmt; *P; ++P) {
    if (*P == 'i')
      Sum += va_arg(Ap, int);
    else if (*P == 'l')
      Sum += (double)va_arg(Ap, long long);
    else
      Sum += va_arg(Ap, double);
  }
  /* Walk again from the copy: the first argument only, scaled, to show it is fresh. */
  if (*Fmt == 'i')
    Sum += 1000 * va_arg(Copy, int);
  va_end(Copy);
  va_end(Ap);
  return Sum;
}

enum TestResult test_varargs(void) {
  /* Eight integers and ten doubles: more than the six GPR and eight XMM argument
     registers, so the tail comes from the stack. */
  double S = sumVa("ididldididididlddd", 1, 0.5, 2, 0.25, 3ll, 0.125, 4, 1.0, 5, 2.0,
                   6, 4.0, 7, 8.0, 8ll, 16.0, 32.0, 64.0);
  EXPECT_EQ((int64_t)(S * 1000), 1163875);
  return TestPass;
}

static volatile uint8_t V8[16];
static volatile uint16_t V16[8];
static volatile uint32_t V32[8];
static volatile uint64_t V64[8];
static struct __attribute__((packed)) {
  uint8_t Pad;
  uint64_t Q; /* misaligned by one byte */
  uint16_t W;
} volatile Packed;

enum TestResult test_volatile(void) {
  for (int I = 0; I < 8; ++I) {
    V8[I] = (uint8_t)(0xa0 + I);
    V16[I] = (uint16_t)(0xb000 + I);
    V32[I] = 0xc0000000u + (uint32_t)I;
    V64[I] = 0xd000000000000000ull + (uint64_t)I;
  }
  uint64_t Sum = 0;
  for (int I = 0; I < 8; ++I)
    Sum += V8[I] + V16[I] + V32[I] + V64[I];
  EXPECT_EQ(Sum, 0x8000000600058570ull);
  V32[3] += 5;   /* read-modify-write through memory */
  V64[2] |= 0xf0;
  V16[1] ^= 0xffff;
  V8[0] = (uint8_t)(V8[0] << 1);
  EXPECT_EQ(V32[3], 0xc0000008u);
  EXPECT_EQ(V64[2], 0xd0000000000000f2ull);
  EXPECT_EQ(V16[1], 0x4ffe);
  EXPECT_EQ(V8[0], 0x40);
  Packed.Q = 0x0102030405060708ull;
  Packed.W = 0xbeef;
  EXPECT_EQ(Packed.Q, 0x0102030405060708ull);
  EXPECT_EQ(Packed.W, 0xbeef);
  /* Byte view of the misaligned store: little-endian. */
  const volatile uint8_t *B = (const volatile uint8_t *)&Packed;
  EXPECT_EQ(B[1], 0x08);
  EXPECT_EQ(B[8], 0x01);
  return TestPass;
}

static uint64_t Counter;
static uint32_t Flags32;

enum TestResult test_atomics(void) {
  Counter = 10;
  EXPECT_EQ(__atomic_fetch_add(&Counter, 5, __ATOMIC_SEQ_CST), 10); /* lock xadd */
  EXPECT_EQ(__atomic_add_fetch(&Counter, 1, __ATOMIC_SEQ_CST), 16);
  EXPECT_EQ(__atomic_exchange_n(&Counter, 99, __ATOMIC_SEQ_CST), 16); /* xchg */
  uint64_t Expected = 98;
  EXPECT_EQ(__atomic_compare_exchange_n(&Counter, &Expected, 7, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST),
            0); /* lock cmpxchg fails and loads the current value */
  EXPECT_EQ(Expected, 99);
  EXPECT_EQ(__sync_val_compare_and_swap(&Counter, 99, 7), 99);
  EXPECT_EQ(Counter, 7);
  Flags32 = 0x0f;
  __atomic_fetch_or(&Flags32, 0x100, __ATOMIC_SEQ_CST); /* lock or */
  EXPECT_EQ(__atomic_fetch_and(&Flags32, ~1u, __ATOMIC_SEQ_CST), 0x10f); /* cmpxchg loop */
  EXPECT_EQ(__atomic_fetch_xor(&Flags32, 0xff, __ATOMIC_SEQ_CST), 0x10e);
  EXPECT_EQ(Flags32, 0x1f1);
  /* lock bts / btr via a test-and-set bit idiom. */
  EXPECT_EQ(!!(__atomic_fetch_or(&Flags32, 1u << 3, __ATOMIC_SEQ_CST) & (1u << 3)), 0);
  EXPECT_EQ(!!(__atomic_fetch_and(&Flags32, ~(1u << 4), __ATOMIC_SEQ_CST) & (1u << 4)), 1);
  EXPECT_EQ(Flags32, 0x1e9);
  __atomic_thread_fence(__ATOMIC_SEQ_CST); /* mfence or a locked op */
  return TestPass;
}
