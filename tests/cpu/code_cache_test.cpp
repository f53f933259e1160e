// The decoded-instruction cache (STYLE 2.2) must never run stale code: writes to a page
// holding decoded instructions invalidate them, within the same block, across blocks,
// through the fast TLB path and through other mappings of the same physical page.
// SDM Vol. 3A, Self-Modifying Code: "a write to a memory location in a code segment that
// is currently cached in the processor causes the associated cache line to be
// invalidated"; the instruction after the store sees the new bytes.
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {
// Runs until HLT and returns RAX.
uint64_t runToHalt(TestMachine &M) {
  EXPECT_EQ(M.run(100000), StopReason::Halted);
  return M.S.Gpr[RAX];
}
} // namespace

TEST(SelfModifyingCode, StoreToNextInstructionInSameBlockTakesEffect) {
  TestMachine M;
  M.setupLongMode();
  // mov byte [rip+1], 0x42   ; patches the imm8 of the following "mov al, 0x11"... the
  // store's target is the immediate byte of the next instruction.
  //   c6 05 01 00 00 00 42  mov byte [rip+1], 0x42   (next insn starts right after)
  //   b0 11                 mov al, 0x11  -> becomes mov al, 0x42
  //   f4                    hlt
  // rip+1 relative to the end of the store = address of the imm8 of "mov al".
  M.loadCode({0x31, 0xc0, 0xc6, 0x05, 0x01, 0, 0, 0, 0x42, 0xb0, 0x11, 0xf4});
  EXPECT_EQ(runToHalt(M), 0x42u);
}

TEST(SelfModifyingCode, RewrittenLoopBodyIsRedecodedOnNextIteration) {
  TestMachine M;
  M.setupLongMode();
  // Runs a subroutine "mov eax, imm32; ret" at kDataBase, patches imm32, runs it again.
  //   mov rbx, kDataBase
  //   mov dword [rbx], 0x000001b8   ; b8 01 00 00 -> "mov eax, 1" (first 4 bytes)
  //   mov dword [rbx+4], 0xc3000000 ; 00 .. c3     (imm32 high byte 0, then ret)
  //   call rbx                      ; eax = 1
  //   mov esi, eax
  //   mov byte [rbx+1], 7           ; now "mov eax, 7"
  //   call rbx                      ; eax = 7
  //   add eax, esi                  ; 8
  //   hlt
  std::vector<uint8_t> Code = {
      0x48, 0xc7, 0xc3, 0x00, 0x00, 0x20, 0x00,       // mov rbx, 0x200000
      0xc7, 0x03, 0xb8, 0x01, 0x00, 0x00,             // mov dword [rbx], 0x000001b8
      0xc7, 0x43, 0x04, 0x00, 0x00, 0x00, 0xc3,       // mov dword [rbx+4], 0xc3000000
      0xff, 0xd3,                                     // call rbx
      0x89, 0xc6,                                     // mov esi, eax
      0xc6, 0x43, 0x01, 0x07,                         // mov byte [rbx+1], 7
      0xff, 0xd3,                                     // call rbx
      0x01, 0xf0,                                     // add eax, esi
      0xf4};                                          // hlt
  M.loadCode(Code);
  EXPECT_EQ(runToHalt(M), 8u);
}

TEST(SelfModifyingCode, HostSideWriteThroughPhysMemInvalidatesDecodedCode) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode({0xb8, 0x05, 0, 0, 0, 0xf4}); // mov eax, 5; hlt
  EXPECT_EQ(runToHalt(M), 5u);
  uint8_t Patch = 0x09;
  M.write(kCodeBase + 1, &Patch, 1); // a loader or DMA-style write
  M.S.Rip = kCodeBase;
  M.Cpu_.Halted = false;
  EXPECT_EQ(runToHalt(M), 9u);
}

TEST(SelfModifyingCode, WriteThroughSecondLinearAliasOfCodePageTakesEffect) {
  TestMachine M;
  M.setupLongMode();
  // Linear 1 GiB + x aliases physical x only if mapped; the identity map covers 0..4 GiB
  // without aliases, so alias through a 2 MiB PDE: PD[0][8] (linear 16 MiB) -> phys 0.
  uint64_t Alias = (0ull << 21) | 0x87;
  M.write(kPml4Base + 0x2000 + 8 * 8, &Alias, 8);
  // Code at kCodeBase (1 MiB) is also visible at linear 16 MiB + 1 MiB.
  //   mov byte [0x1100000 + 10], 0x33   ; patch imm8 of "mov al" below through the alias
  //   mov al, 0x11
  //   hlt
  // c6 04 25 <disp32> 33 : mov byte [disp32], 0x33 (8 bytes), then b0 11 at offset 8..9
  std::vector<uint8_t> Code = {0x31, 0xc0,                                // xor eax, eax
                               0xc6, 0x04, 0x25, 0x0b, 0x00, 0x10, 0x01, 0x33, // mov byte [0x110000b], 0x33
                               0xb0, 0x11,                                // mov al, 0x11 (imm at +11)
                               0xf4};
  M.loadCode(Code);
  EXPECT_EQ(runToHalt(M), 0x33u);
}
