/* A test-and-test-and-set spin-lock with XCHG (SDM Vol. 3A, "Locked Atomic
   Operations"), for the few places several CPUs share (the console lines). */
#pragma once
#include <stdint.h>

static inline void spinLock(volatile uint32_t *L) {
  while (__atomic_exchange_n(L, 1, __ATOMIC_ACQUIRE))
    while (*L)
      __builtin_ia32_pause();
}

static inline void spinUnlock(volatile uint32_t *L) { __atomic_store_n(L, 0, __ATOMIC_RELEASE); }
