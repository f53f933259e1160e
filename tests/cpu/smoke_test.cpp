// First light: a few instructions in 64-bit mode end in HLT with exact results.
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

TEST(ExecutionEnvironment, LongModeAddLoopHaltsWithExactResult) {
  TestMachine M;
  M.setupLongMode();
  // mov ecx, 10; xor eax, eax; loop: add rax, rcx; dec ecx; jnz loop; hlt
  M.loadCode({0xb9, 0x0a, 0, 0, 0, 0x31, 0xc0, 0x48, 0x01, 0xc8, 0xff, 0xc9, 0x75, 0xf9,
              0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], 55u);
  EXPECT_EQ(M.S.Gpr[RCX], 0u);
  EXPECT_EQ(M.S.Rip, kCodeBase + 15);
  EXPECT_EQ(M.Cpu_.Retired, 2u + 3u * 10u + 1u);
  EXPECT_TRUE(M.S.Rflags & rflags::ZF);
}
