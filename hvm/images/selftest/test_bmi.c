/* Built with -mpopcnt -mlzcnt -mbmi -mbmi2, so gcc emits POPCNT, LZCNT, TZCNT, ANDN,
   BLSR, BLSI, BLSMSK, BEXTR, BZHI, PDEP, PEXT, SHLX, SARX, RORX and MULX. Only called
   after test_bmi has checked CPUID. */
#include <stdint.h>

uint64_t bmiPopcnt(uint64_t X) { return (uint64_t)__builtin_popcountll(X); }
/* LZCNT/TZCNT define the zero case, so gcc drops the branch __builtin_clzll needs. */
uint64_t bmiLzcnt(uint64_t X) { return X ? (uint64_t)__builtin_clzll(X) : 64; }
uint64_t bmiTzcnt(uint64_t X) { return X ? (uint64_t)__builtin_ctzll(X) : 64; }
uint64_t bmiAndn(uint64_t A, uint64_t B) { return ~A & B; }
uint64_t bmiBlsr(uint64_t X) { return X & (X - 1); }
uint64_t bmiBlsi(uint64_t X) { return X & -X; }
uint64_t bmiBlsmsk(uint64_t X) { return X ^ (X - 1); }
uint64_t bmiBextr(uint64_t X, unsigned Start, unsigned Len) {
  return __builtin_ia32_bextr_u64(X, (uint64_t)((Len << 8) | Start));
}
uint64_t bmiBzhi(uint64_t X, unsigned Index) { return __builtin_ia32_bzhi_di(X, Index); }
uint64_t bmiPdep(uint64_t X, uint64_t Mask) { return __builtin_ia32_pdep_di(X, Mask); }
uint64_t bmiPext(uint64_t X, uint64_t Mask) { return __builtin_ia32_pext_di(X, Mask); }
uint64_t bmiShlx(uint64_t X, unsigned N) { return X << (N & 63); }
int64_t bmiSarx(int64_t X, unsigned N) { return X >> (N & 63); }
uint64_t bmiRorx(uint64_t X) { return (X >> 8) | (X << 56); }
/* gcc prefers MUL for 128-bit products even with -mbmi2, so MULX is spelled out. */
uint64_t bmiMulx(uint64_t A, uint64_t B, uint64_t *Lo) {
  uint64_t Hi;
  __asm__("mulx %2, %0, %1" : "=r"(*Lo), "=r"(Hi) : "rm"(B), "d"(A));
  return Hi;
}
