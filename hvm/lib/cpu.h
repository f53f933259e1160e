/* Privileged-register access and CPUID. */
#ifndef HVM_LIB_CPU_H
#define HVM_LIB_CPU_H

#include <stdbool.h>
#include <stdint.h>

struct CpuidRegs {
  uint32_t Eax, Ebx, Ecx, Edx;
};

static inline struct CpuidRegs cpuid(uint32_t Leaf, uint32_t Subleaf) {
  struct CpuidRegs R;
  __asm__ volatile("cpuid"
                   : "=a"(R.Eax), "=b"(R.Ebx), "=c"(R.Ecx), "=d"(R.Edx)
                   : "a"(Leaf), "c"(Subleaf));
  return R;
}

/// Whether CPUID leaf Leaf exists (basic or extended range).
static inline bool cpuidHasLeaf(uint32_t Leaf) {
  return cpuid(Leaf & 0x80000000u, 0).Eax >= Leaf;
}

#define DEFINE_READ_CR(N)                                                        \
  static inline uint64_t readCr##N(void) {                                       \
    uint64_t V;                                                                  \
    __asm__ volatile("mov %%cr" #N ", %0" : "=r"(V));                            \
    return V;                                                                    \
  }
DEFINE_READ_CR(0)
DEFINE_READ_CR(2)
DEFINE_READ_CR(3)
DEFINE_READ_CR(4)
#undef DEFINE_READ_CR

static inline void writeCr3(uint64_t V) {
  __asm__ volatile("mov %0, %%cr3" : : "r"(V) : "memory");
}

static inline uint64_t rdmsr(uint32_t Msr) {
  uint32_t Lo, Hi;
  __asm__ volatile("rdmsr" : "=a"(Lo), "=d"(Hi) : "c"(Msr));
  return ((uint64_t)Hi << 32) | Lo;
}

static inline void wrmsr(uint32_t Msr, uint64_t V) {
  __asm__ volatile("wrmsr" : : "c"(Msr), "a"((uint32_t)V), "d"((uint32_t)(V >> 32)));
}

static inline void invlpg(const volatile void *Addr) {
  __asm__ volatile("invlpg (%0)" : : "r"(Addr) : "memory");
}

#endif
