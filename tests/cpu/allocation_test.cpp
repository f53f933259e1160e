// Hot paths allocate nothing (STYLE 2.4): a steady-state guest loop — decode-cache hits,
// TLB-hit loads and stores, branches — runs with zero heap allocations.
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<uint64_t> Allocations{0};
} // namespace

// Counting replacements of the global allocation functions for this test binary. GCC's
// -Wmismatched-new-delete cannot tell a replacement operator delete that frees what the
// replacement operator new malloc'd from a real mismatch (it fires under -fsanitize).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void *operator new(std::size_t N) {
  Allocations.fetch_add(1, std::memory_order_relaxed);
  if (void *P = std::malloc(N ? N : 1))
    return P;
  throw std::bad_alloc();
}
void *operator new[](std::size_t N) { return operator new(N); }
void operator delete(void *P) noexcept { std::free(P); }
void operator delete[](void *P) noexcept { std::free(P); }
void operator delete(void *P, std::size_t) noexcept { std::free(P); }
void operator delete[](void *P, std::size_t) noexcept { std::free(P); }
#pragma GCC diagnostic pop

using namespace vmxsim;
using namespace vmxsim::test;

TEST(ExecutionEnvironment, SteadyStateGuestLoopAllocatesNothing) {
  TestMachine M;
  M.setupLongMode();
  // loop: mov rax, [rsi]; add rax, rcx; mov [rsi+8], rax; dec rcx; jnz loop; hlt
  M.loadCode({0x48, 0x8b, 0x06, 0x48, 0x01, 0xc8, 0x48, 0x89, 0x46, 0x08, 0x48, 0xff, 0xc9,
              0x75, 0xf1, 0xf4});
  M.S.Gpr[RSI] = kDataBase;
  M.S.Gpr[RCX] = 1000; // warm-up: decode, TLB fills
  ASSERT_EQ(M.run(), StopReason::Halted);

  M.S.Rip = kCodeBase;
  M.S.Gpr[RCX] = 100000;
  M.Cpu_.Activity = ActivityState::Active;
  uint64_t Before = Allocations.load();
  ASSERT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(Allocations.load() - Before, 0u);
  EXPECT_EQ(M.read64(kDataBase + 8), 1u); // last store: [rsi] (0) + rcx (1)
}
