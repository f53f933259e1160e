/* Sorting, hashing and recursion: loops, branches, calls and memory traffic. */
#include "images/selftest/selftest.h"
#include "lib/string.h"

#define SORT_N 1024

/* Knuth's MMIX LCG; the top bits are the well-mixed ones. */
static uint64_t lcgNext(uint64_t *State) {
  *State = *State * 6364136223846793005ull + 1442695040888963407ull;
  return *State >> 33;
}

static void quickSort(uint32_t *A, long Lo, long Hi) {
  while (Lo < Hi) {
    uint32_t Pivot = A[Lo + (Hi - Lo) / 2];
    long I = Lo, J = Hi;
    while (I <= J) {
      while (A[I] < Pivot)
        ++I;
      while (A[J] > Pivot)
        --J;
      if (I <= J) {
        uint32_t T = A[I];
        A[I++] = A[J];
        A[J--] = T;
      }
    }
    /* Recurse into the smaller half so the stack stays O(log n). */
    if (J - Lo < Hi - I) {
      quickSort(A, Lo, J);
      Lo = I;
    } else {
      quickSort(A, I, Hi);
      Hi = J;
    }
  }
}

static void insertionSort(uint32_t *A, long N) {
  for (long I = 1; I < N; ++I) {
    uint32_t V = A[I];
    long J = I - 1;
    while (J >= 0 && A[J] > V) {
      A[J + 1] = A[J];
      --J;
    }
    A[J + 1] = V;
  }
}

static uint32_t SortA[SORT_N], SortB[SORT_N];

enum TestResult test_sort(void) {
  uint64_t State = 42;
  uint64_t Sum = 0, Xor = 0;
  for (int I = 0; I < SORT_N; ++I) {
    SortA[I] = (uint32_t)lcgNext(&State);
    Sum += SortA[I];
    Xor ^= SortA[I];
  }
  memcpy(SortB, SortA, sizeof(SortA));
  quickSort(SortA, 0, SORT_N - 1);
  insertionSort(SortB, SORT_N);
  uint64_t SortedSum = 0, SortedXor = 0;
  for (int I = 0; I < SORT_N; ++I) {
    if (I > 0)
      EXPECT_TRUE(SortA[I - 1] <= SortA[I]);
    SortedSum += SortA[I];
    SortedXor ^= SortA[I];
  }
  EXPECT_EQ(SortedSum, Sum);
  EXPECT_EQ(SortedXor, Xor);
  EXPECT_EQ(memcmp(SortA, SortB, sizeof(SortA)), 0);
  /* Computed off-line from the same generator (seed 42). */
  EXPECT_EQ(Sum, 0x000001022cf3356aull);
  EXPECT_EQ(SortA[0], 0x0029b71au);
  EXPECT_EQ(SortA[SORT_N / 2], 0x4066f8a7u);
  EXPECT_EQ(SortA[SORT_N - 1], 0x7fc88034u);
  return TestPass;
}

static uint32_t fnv1a32(const uint8_t *P, size_t N) {
  uint32_t H = 0x811c9dc5u;
  for (size_t I = 0; I < N; ++I)
    H = (H ^ P[I]) * 0x01000193u;
  return H;
}

static uint64_t fnv1a64(const uint8_t *P, size_t N) {
  uint64_t H = 0xcbf29ce484222325ull;
  for (size_t I = 0; I < N; ++I)
    H = (H ^ P[I]) * 0x100000001b3ull;
  return H;
}

/* Bitwise CRC-32 (reflected polynomial 0xEDB88320), as zlib computes it. */
static uint32_t crc32(const uint8_t *P, size_t N) {
  uint32_t C = 0xffffffffu;
  for (size_t I = 0; I < N; ++I) {
    C ^= P[I];
    for (int K = 0; K < 8; ++K)
      C = (C >> 1) ^ (0xedb88320u & -(C & 1));
  }
  return ~C;
}

static uint8_t HashBuf[4096];

enum TestResult test_hash(void) {
  static const char Fox[] = "The quick brown fox jumps over the lazy dog";
  const uint8_t *F = (const uint8_t *)Fox;
  EXPECT_EQ(crc32((const uint8_t *)"123456789", 9), 0xcbf43926u);
  EXPECT_EQ(crc32(F, sizeof(Fox) - 1), 0x414fa339u);
  EXPECT_EQ(fnv1a32(F, sizeof(Fox) - 1), 0x048fff90u);
  EXPECT_EQ(fnv1a64(F, sizeof(Fox) - 1), 0xf3f9b7f5e7e47110ull);
  for (size_t I = 0; I < sizeof(HashBuf); ++I)
    HashBuf[I] = (uint8_t)(I * 31 + (I >> 8) + 7);
  EXPECT_EQ(crc32(HashBuf, sizeof(HashBuf)), 0xdb008186u);
  EXPECT_EQ(fnv1a32(HashBuf, sizeof(HashBuf)), 0xd5caf9c5u);
  EXPECT_EQ(fnv1a64(HashBuf, sizeof(HashBuf)), 0x1cb5d819aade6b25ull);
  return TestPass;
}

static __attribute__((noinline)) uint64_t ackermann(uint64_t M, uint64_t N) {
  if (M == 0)
    return N + 1;
  if (N == 0)
    return ackermann(M - 1, 1);
  return ackermann(M - 1, ackermann(M, N - 1));
}

static __attribute__((noinline)) uint64_t fib(uint64_t N) {
  return N < 2 ? N : fib(N - 1) + fib(N - 2);
}

enum TestResult test_recursion(void) {
  EXPECT_EQ(ackermann(OPAQUE(2), 3), 9);
  EXPECT_EQ(ackermann(OPAQUE(3), 3), 61);
  EXPECT_EQ(ackermann(OPAQUE(3), 4), 125);
  EXPECT_EQ(fib(OPAQUE(20)), 6765);
  EXPECT_EQ(fib(OPAQUE(24)), 46368);
  return TestPass;
}
