/* Built with -fno-tree-loop-distribute-patterns: otherwise gcc turns the loops below
   into calls to memset/memcpy, that is, into themselves. */
#include "lib/string.h"

#include <stdint.h>

/* Word accesses through a type that may alias anything and be misaligned. */
typedef uint64_t __attribute__((may_alias, aligned(1))) Word;

void *memcpy(void *__restrict Dst, const void *__restrict Src, size_t N) {
  unsigned char *D = Dst;
  const unsigned char *S = Src;
  for (; N >= 8; N -= 8, D += 8, S += 8)
    *(Word *)D = *(const Word *)S;
  while (N--)
    *D++ = *S++;
  return Dst;
}

void *memmove(void *Dst, const void *Src, size_t N) {
  unsigned char *D = Dst;
  const unsigned char *S = Src;
  if (D == S || N == 0)
    return Dst;
  if (D < S || D >= S + N) /* no overlap that a forward copy would clobber */
    return memcpy(Dst, Src, N);
  while (N--)
    D[N] = S[N];
  return Dst;
}

void *memset(void *Dst, int C, size_t N) {
  unsigned char *D = Dst;
  uint64_t Pattern = 0x0101010101010101ull * (unsigned char)C;
  for (; N >= 8; N -= 8, D += 8)
    *(Word *)D = Pattern;
  while (N--)
    *D++ = (unsigned char)C;
  return Dst;
}

int memcmp(const void *A, const void *B, size_t N) {
  const unsigned char *X = A, *Y = B;
  for (size_t I = 0; I < N; ++I)
    if (X[I] != Y[I])
      return X[I] < Y[I] ? -1 : 1;
  return 0;
}

size_t strlen(const char *S) {
  size_t N = 0;
  while (S[N])
    ++N;
  return N;
}

int strcmp(const char *A, const char *B) {
  while (*A && *A == *B)
    ++A, ++B;
  return (unsigned char)*A - (unsigned char)*B;
}

int strncmp(const char *A, const char *B, size_t N) {
  for (; N; --N, ++A, ++B) {
    if (*A != *B)
      return (unsigned char)*A - (unsigned char)*B;
    if (!*A)
      return 0;
  }
  return 0;
}

char *strcpy(char *__restrict Dst, const char *__restrict Src) {
  char *D = Dst;
  while ((*D++ = *Src++))
    ;
  return Dst;
}

char *strchr(const char *S, int C) {
  for (;; ++S) {
    if (*S == (char)C)
      return (char *)S;
    if (!*S)
      return 0;
  }
}
