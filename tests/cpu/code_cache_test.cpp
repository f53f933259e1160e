// The decoded-instruction cache (STYLE 2.2) must never run stale code: writes to a page
// holding decoded instructions invalidate them, within the same block, across blocks,
// through the fast TLB path and through other mappings of the same physical page.
// SDM Vol. 3A, Self-Modifying Code: "a write to a memory location in a code segment that
// is currently cached in the processor causes the associated cache line to be
// invalidated"; the instruction after the store sees the new bytes.
#include "cpu/decode_info.h"
#include "cpu/jit/translator.h"
#include "tests/cpu/insn_fault_helpers.h"
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
  M.Cpu_.Activity = ActivityState::Active;
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

// --- Line-granular invalidation (mmu/phys_mem.h, "Decoded code and the writes that
// invalidate it"): a write drops the blocks with an instruction byte in a 64-byte line it
// touches, and no other. Block counts below are Mmu::blocksDecoded(): each block start the
// run reaches is decoded once unless a write touched one of its lines.

TEST(SelfModifyingCode, DataStoresIntoOwnCodePageDoNotInvalidateTheLoop) {
  TestMachine M;
  M.setupLongMode();
  // 100 stores into the loop's own page, 0x800 bytes past the code (lines 32..38; the
  // code is in line 0):
  //    0: mov ecx, 100
  //    5: mov rsi, kCodeBase + 0x800
  //   12: loop: mov [rsi+rcx*4], ecx ; dec ecx ; jnz loop
  //   19: hlt
  M.loadCode({0xb9, 0x64, 0x00, 0x00, 0x00,             // mov ecx, 100
              0x48, 0xc7, 0xc6, 0x00, 0x08, 0x10, 0x00, // mov rsi, 0x100800
              0x89, 0x0c, 0x8e,                         // mov [rsi+rcx*4], ecx
              0xff, 0xc9,                               // dec ecx
              0x75, 0xf9,                               // jnz loop
              0xf4});                                   // hlt
  EXPECT_EQ(runToHalt(M), 0u);
  EXPECT_EQ(M.Cpu_.Retired, 2u + 100 * 3 + 1);
  EXPECT_EQ(M.read64(kCodeBase + 0x804), (uint64_t(2) << 32) | 1);
  EXPECT_EQ(uint32_t(M.read64(kCodeBase + 0x800 + 4 * 100)), 100u);
  // Three blocks: the start (to the first jnz), the loop, the final hlt; each decoded
  // once. With whole-page invalidation every store dropped the loop, which then ran as two
  // blocks (the one after the store, then the loop again) per iteration: 201.
  EXPECT_EQ(M.Cpu_.Mmu.blocksDecoded(), 3u);
  EXPECT_EQ(M.Mem.codeWriteCount(), 0u);
}

TEST(SelfModifyingCode, RealModeDataStoresIntoTheCodeSegmentDoNotInvalidateTheLoop) {
  // The case of issue 11: real-mode code keeping its variables in its code segment.
  TestMachine M;
  M.setupReal();
  //    0: mov ecx, 100
  //    6: mov si, 0x800
  //    9: loop: mov cs:[si], cx ; add si, 2 ; dec ecx ; jnz loop
  //   19: hlt
  M.loadCode({0x66, 0xb9, 0x64, 0x00, 0x00, 0x00, // mov ecx, 100
              0xbe, 0x00, 0x08,                   // mov si, 0x800
              0x2e, 0x89, 0x0c,                   // mov cs:[si], cx
              0x83, 0xc6, 0x02,                   // add si, 2
              0x66, 0x49,                         // dec ecx
              0x75, 0xf6,                         // jnz loop
              0xf4});                             // hlt
  EXPECT_EQ(runToHalt(M) & 0xffff, 0u);
  EXPECT_EQ(M.Cpu_.Retired, 2u + 100 * 4 + 1);
  EXPECT_EQ(M.read64(kCodeBase + 0x800), 0x0061'0062'0063'0064u); // 100, 99, 98, 97
  EXPECT_EQ(M.Cpu_.Mmu.blocksDecoded(), 3u);
  EXPECT_EQ(M.Mem.codeWriteCount(), 0u);
}

TEST(SelfModifyingCode, PatchedBlockIsRedecodedAndTheOtherBlocksOfItsPageAreKept) {
  TestMachine M;
  M.setupLongMode();
  // A loop calls S (line 2 of the page: add eax, imm8; ret) and increments S's imm8 with
  // a read-modify-write after each call: eax = 1 + 2 + 3. The loop's blocks (line 0)
  // are decoded once; S once per iteration.
  //    0: mov ecx, 3 ; xor eax, eax ; mov rbx, kCodeBase + 0x80
  //   14: loop: call rbx
  //   16: add byte [rbx+2], 1      (the store ends the block: the next starts at 20)
  //   20: dec ecx ; jnz loop
  //   24: hlt
  std::vector<uint8_t> Code = {0xb9, 0x03, 0x00, 0x00, 0x00,             // mov ecx, 3
                               0x31, 0xc0,                               // xor eax, eax
                               0x48, 0xc7, 0xc3, 0x80, 0x00, 0x10, 0x00, // mov rbx, 0x100080
                               0xff, 0xd3,                               // call rbx
                               0x80, 0x43, 0x02, 0x01,                   // add byte [rbx+2], 1
                               0xff, 0xc9,                               // dec ecx
                               0x75, 0xf6,                               // jnz loop
                               0xf4};                                    // hlt
  Code.resize(0x80, 0x90);
  for (uint8_t B : {0x83, 0xc0, 0x01, 0xc3}) // S: add eax, 1; ret
    Code.push_back(B);
  M.loadCode(Code);
  EXPECT_EQ(runToHalt(M), 6u);
  // Blocks at 0, S, 16 and 20 in the first iteration; at 14 and S in the second; S in
  // the third; 24. Dropping the page at each patch would decode 16 and 20 again in the
  // second and third iterations and 14 again in the third: 13.
  EXPECT_EQ(M.Cpu_.Mmu.blocksDecoded(), 8u);
  EXPECT_EQ(M.Mem.codeWriteCount(), 3u);
}

TEST(SelfModifyingCode, StoreIntoInstructionSharingALineWithDataTakesEffect) {
  TestMachine M;
  M.setupLongMode();
  // Data at offset 0x30 shares line 0 with the loop; each iteration stores AL there, then
  // stores CL into the imm8 of the loop's own "add eax, imm8", which the next iteration
  // executes: eax = 1 + 3 + 2 (a stale decode would give 3).
  //    0: xor eax, eax ; mov ecx, 3
  //    7: loop: add eax, 1          (imm8 at offset 9)
  //   10: mov [rip+0x20], al        (offset 0x30)
  //   16: mov [rip-13], cl          (offset 9)
  //   22: dec ecx ; jnz loop
  //   26: hlt
  M.loadCode({0x31, 0xc0,                         // xor eax, eax
              0xb9, 0x03, 0x00, 0x00, 0x00,       // mov ecx, 3
              0x83, 0xc0, 0x01,                   // add eax, 1
              0x88, 0x05, 0x20, 0x00, 0x00, 0x00, // mov [rip+0x20], al
              0x88, 0x0d, 0xf3, 0xff, 0xff, 0xff, // mov [rip-13], cl
              0xff, 0xc9,                         // dec ecx
              0x75, 0xed,                         // jnz loop
              0xf4});                             // hlt
  EXPECT_EQ(runToHalt(M), 6u);
  EXPECT_EQ(M.read64(kCodeBase + 0x30) & 0xff, 6u);
  EXPECT_EQ(M.read64(kCodeBase + 8) & 0xffff, 0x01c0u); // imm8 = the last CL
}

TEST(SelfModifyingCode, StoreOverlappingTheLastBytesOfABlockInItsNextLineTakesEffect) {
  TestMachine M;
  M.setupLongMode();
  // S spans lines 0 and 1: mov eax, 0x11 (0x3a..0x3e); add eax, 0x100 (0x3f..0x43, the
  // imm32 in line 1); ret (0x44). A word store to 0x43..0x44 (line 1 only: the top byte
  // of the imm32 and the ret, rewritten unchanged) changes S's result.
  //    0: mov rbx, kCodeBase + 0x3a
  //    7: call rbx                   ; 0x111
  //    9: mov esi, eax
  //   11: mov word [rbx+9], 0xc302
  //   17: call rbx                   ; 0x02000111
  //   19: hlt
  std::vector<uint8_t> Code = {0x48, 0xc7, 0xc3, 0x3a, 0x00, 0x10, 0x00, // mov rbx, 0x10003a
                               0xff, 0xd3,                               // call rbx
                               0x89, 0xc6,                               // mov esi, eax
                               0x66, 0xc7, 0x43, 0x09, 0x02, 0xc3,       // mov word [rbx+9], 0xc302
                               0xff, 0xd3,                               // call rbx
                               0xf4};                                    // hlt
  Code.resize(0x3a, 0x90);
  for (uint8_t B : {0xb8, 0x11, 0x00, 0x00, 0x00, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3})
    Code.push_back(B);
  M.loadCode(Code);
  EXPECT_EQ(runToHalt(M), 0x02000111u);
  EXPECT_EQ(M.S.Gpr[RSI], 0x111u);
}

TEST(SelfModifyingCode, StoreCrossingIntoTheNextPageRewritesTheCodeThere) {
  TestMachine M;
  M.setupLongMode();
  // S at the start of the next page: mov eax, 5; ret. A qword store at 2 bytes before
  // that page rewrites S as mov eax, 9; ret.
  //    0: mov rbx, kCodeBase + 0x1000
  //    7: call rbx                         ; 5
  //    9: mov esi, eax
  //   11: mov rax, 0xc300000009b8bbaa      ; bytes aa bb | b8 09 00 00 00 c3
  //   21: mov [rbx-2], rax
  //   25: call rbx                         ; 9
  //   27: add eax, esi
  //   29: hlt
  M.loadCode({0x48, 0xc7, 0xc3, 0x00, 0x10, 0x10, 0x00,                   // mov rbx, 0x101000
              0xff, 0xd3,                                                 // call rbx
              0x89, 0xc6,                                                 // mov esi, eax
              0x48, 0xb8, 0xaa, 0xbb, 0xb8, 0x09, 0x00, 0x00, 0x00, 0xc3, // mov rax, imm64
              0x48, 0x89, 0x43, 0xfe,                                     // mov [rbx-2], rax
              0xff, 0xd3,                                                 // call rbx
              0x01, 0xf0,                                                 // add eax, esi
              0xf4});                                                     // hlt
  const uint8_t S[] = {0xb8, 0x05, 0x00, 0x00, 0x00, 0xc3};
  M.write(kCodeBase + 0x1000, S, sizeof(S));
  EXPECT_EQ(runToHalt(M), 14u);
  EXPECT_EQ(M.read64(kCodeBase + 0xffe), 0xc300000009b8bbaau);
}

TEST(SelfModifyingCode, PageCrossingInstructionPatchedInItsSecondPageTakesEffect) {
  TestMachine M;
  M.setupLongMode();
  // S = mov eax, 5 at 0xffd..0x1001 of the code (crossing into the next page); ret. The
  // store rewrites the imm32's byte 2, in the second page.
  //    0: mov rbx, kCodeBase + 0xffd
  //    7: call rbx                  ; 5
  //    9: mov esi, eax
  //   11: mov byte [rbx+3], 1
  //   15: call rbx                  ; 0x10005
  //   17: add eax, esi
  //   19: hlt
  M.loadCode({0x48, 0xc7, 0xc3, 0xfd, 0x0f, 0x10, 0x00, // mov rbx, 0x100ffd
              0xff, 0xd3,                               // call rbx
              0x89, 0xc6,                               // mov esi, eax
              0xc6, 0x43, 0x03, 0x01,                   // mov byte [rbx+3], 1
              0xff, 0xd3,                               // call rbx
              0x01, 0xf0,                               // add eax, esi
              0xf4});                                   // hlt
  const uint8_t S[] = {0xb8, 0x05, 0x00, 0x00, 0x00, 0xc3};
  M.write(kCodeBase + 0xffd, S, sizeof(S));
  EXPECT_EQ(runToHalt(M), 0x1000au);
}

TEST(SelfModifyingCode, RepStosIntoDataOfTheCodePageKeepsItsBlocksAndIntoCodeTakesEffect) {
  TestMachine M;
  M.setupLongMode();
  // S at 0x41 (line 1): mov eax, 1; ret. A REP STOSB fills 256 bytes of data in the
  // code page (lines 32..35: nothing invalidated), a second one S's imm32.
  //    0: mov rbx, kCodeBase + 0x41 ; call rbx          ; 1
  //    9: mov esi, eax ; mov rdi, kCodeBase + 0x800 ; mov ecx, 256 ; mov al, 0xaa
  //   25: rep stosb
  //   27: lea rdi, [rbx+1] ; mov cl, 4
  //   33: rep stosb                                     ; S: mov eax, 0xaaaaaaaa
  //   35: call rbx
  //   37: hlt
  std::vector<uint8_t> Code = {0x48, 0xc7, 0xc3, 0x41, 0x00, 0x10, 0x00, // mov rbx, 0x100041
                               0xff, 0xd3,                               // call rbx
                               0x89, 0xc6,                               // mov esi, eax
                               0x48, 0xc7, 0xc7, 0x00, 0x08, 0x10, 0x00, // mov rdi, 0x100800
                               0xb9, 0x00, 0x01, 0x00, 0x00,             // mov ecx, 256
                               0xb0, 0xaa,                               // mov al, 0xaa
                               0xf3, 0xaa,                               // rep stosb
                               0x48, 0x8d, 0x7b, 0x01,                   // lea rdi, [rbx+1]
                               0xb1, 0x04,                               // mov cl, 4
                               0xf3, 0xaa,                               // rep stosb
                               0xff, 0xd3,                               // call rbx
                               0xf4};                                    // hlt
  Code.resize(0x41, 0x90);
  for (uint8_t B : {0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3})
    Code.push_back(B);
  M.loadCode(Code);
  EXPECT_EQ(runToHalt(M), 0xaaaaaaaau);
  EXPECT_EQ(M.S.Gpr[RSI], 1u);
  EXPECT_EQ(M.read64(kCodeBase + 0x8f8), 0xaaaaaaaaaaaaaaaau);
  EXPECT_EQ(M.read64(kCodeBase + 0x900), 0u);
  // Only the store into S invalidated code; S was decoded twice, the blocks at 0, 9,
  // 33 (where the invalidating store left its block) and 37 once.
  EXPECT_EQ(M.Mem.codeWriteCount(), 1u);
  EXPECT_EQ(M.Cpu_.Mmu.blocksDecoded(), 6u);
}

TEST(SelfModifyingCode, PageThatLostAllItsCodeGetsAFastWriteMappingAgain) {
  TestMachine M;
  M.setupLongMode();
  // R = mov eax, 5; ret at kDataBase + 0x40 is the only code of its page. Overwriting it
  // leaves the page without decoded code, so the next store there takes a TlbWrite
  // mapping again (slot 0 for page 0x200).
  //    0: mov rbx, kDataBase + 0x40
  //    7: call rbx                        ; 5
  //    9: mov byte [rbx], 0xc3            ; R's only line: the page holds no code now
  //   12: mov dword [rbx+0x7c0], 1        ; kDataBase + 0x800
  //   22: hlt
  M.loadCode({0x48, 0xc7, 0xc3, 0x40, 0x00, 0x20, 0x00,             // mov rbx, 0x200040
              0xff, 0xd3,                                           // call rbx
              0xc6, 0x03, 0xc3,                                     // mov byte [rbx], 0xc3
              0xc7, 0x83, 0xc0, 0x07, 0x00, 0x00, 0x01, 0, 0, 0,    // mov dword [rbx+0x7c0], 1
              0xf4});                                               // hlt
  const uint8_t R[] = {0xb8, 0x05, 0x00, 0x00, 0x00, 0xc3};
  M.write(kDataBase + 0x40, R, sizeof(R));
  EXPECT_EQ(runToHalt(M), 5u);
  EXPECT_FALSE(M.Mem.pageHoldsCode(kDataBase >> 12));
  EXPECT_EQ(M.Cpu_.Mmu.writeMappedFrame(Gla(kDataBase + 0x800)), kDataBase >> 12);
  EXPECT_EQ(M.read64(kDataBase + 0x800), 1u);
}

TEST(SelfModifyingCode, WriteMappingOfACodePageIsFlushedByInvlpg) {
  TestMachine M;
  M.setupLongMode();
  // Linear 16 MiB is an alias of physical 0 (a 2 MiB page, PD[0][8]), so linear
  // 0x1100800 is the code page's data. After a store through the alias, the PDE is
  // pointed at physical 2 MiB and the alias invalidated: the second store must land at
  // physical 0x300800, not in the code page.
  uint64_t Alias = 0x87;
  M.write(kPml4Base + 0x2000 + 8 * 8, &Alias, 8);
  M.loadCode({0x48, 0xc7, 0xc3, 0x00, 0x08, 0x10, 0x01, // mov rbx, 0x1100800
              0xc7, 0x03, 0x11, 0x11, 0x11, 0x11,       // mov dword [rbx], 0x11111111
              0x48, 0xc7, 0xc6, 0x40, 0x20, 0x01, 0x00, // mov rsi, 0x12040 (PD[0][8])
              0xc7, 0x06, 0x87, 0x00, 0x20, 0x00,       // mov dword [rsi], 0x200087
              0x0f, 0x01, 0x3b,                         // invlpg [rbx]
              0xc7, 0x03, 0x22, 0x22, 0x22, 0x22,       // mov dword [rbx], 0x22222222
              0xf4});                                   // hlt
  runToHalt(M);
  EXPECT_EQ(uint32_t(M.read64(kCodeBase + 0x800)), 0x11111111u);
  EXPECT_EQ(uint32_t(M.read64(0x300800)), 0x22222222u);
}

// SDM Vol. 3A, "Cross-Modifying Code": a store by one processor into code another
// processor has decoded is seen by that processor's next execution of it. Each Cpu has
// its own block cache; PhysMem is shared.
TEST(CrossModifyingCode, StoreByAnotherCpuIsSeenByTheCpuThatDecodedTheCode) {
  TestMachine M;
  M.setupLongMode();
  Cpu Other(M.Mem, M.Io, M.Cpu_.Model, 1);
  Cpu *All[2] = {&M.Cpu_, &Other};
  M.Cpu_.Mmu.setPeers(All, 2);
  Other.Mmu.setPeers(All, 2);
  Other.S = M.S;
  Other.Mmu.flushTlb();
  Other.modeChanged();
  // CPU 0 runs R = mov eax, 5; hlt from line 1 of page kDataBase; CPU 1 runs
  // mov [rbx], dl; hlt.
  const uint8_t R[] = {0xb8, 0x05, 0x00, 0x00, 0x00, 0xf4};
  M.write(kDataBase + 0x40, R, sizeof(R));
  const uint8_t Store[] = {0x88, 0x13, 0xf4};
  M.write(kCodeBase + 0x100, Store, sizeof(Store));
  auto runOther = [&](uint64_t Rbx, uint8_t Dl) {
    Other.S.Rip = kCodeBase + 0x100;
    Other.S.Gpr[RBX] = Rbx;
    Other.S.Gpr[RDX] = Dl;
    Other.Activity = ActivityState::Active;
    EXPECT_EQ(Other.run(100), StopReason::Halted);
  };
  auto runR = [&] {
    M.S.Rip = kDataBase + 0x40;
    M.Cpu_.Activity = ActivityState::Active;
    return runToHalt(M);
  };
  // CPU 1 stores into page kDataBase before it holds code: a fast write mapping, which
  // CPU 0's decode of R must take away.
  runOther(kDataBase + 0x800, 1);
  EXPECT_EQ(runR(), 5u);
  runOther(kDataBase + 0x41, 9); // R's imm32
  EXPECT_EQ(runR(), 9u);
  // A store by CPU 1 to data in R's page (another line) leaves CPU 0's block alone.
  const uint64_t Decoded = M.Cpu_.Mmu.blocksDecoded();
  runOther(kDataBase + 0x800, 2);
  EXPECT_EQ(runR(), 9u);
  EXPECT_EQ(M.Cpu_.Mmu.blocksDecoded(), Decoded);
  EXPECT_EQ(M.read64(kDataBase + 0x800) & 0xff, 2u);
}

namespace {
// A page-crossing instruction kept as a block of its own (cpu/decode.cpp,
// decodeCrossingBlock): "mov eax, imm32; ret" at linear 16 MiB + 0xffd, whose imm32
// crosses into the next page. The two pages are mapped by a page table of their own, so
// that the guest can remap or unmap the second one (SDM Vol. 3A, 4.10.4.1: INVLPG then
// makes the new mapping, or its absence, take effect).
constexpr uint64_t kCrossLinear = 0x1000000, kCrossPt = 0x40000;
constexpr uint64_t kPage1 = kDataBase, kPage2 = kDataBase + 0x1000, kPage3 = kDataBase + 0x2000;

void mapCrossingPages(TestMachine &M) {
  const uint8_t Head[] = {0xb8, 0x05, 0x00};       // mov eax, imm32 (bytes 0, 1 of imm32)
  const uint8_t Tail2[] = {0x00, 0x00, 0xc3};      // imm32 = 5; ret
  const uint8_t Tail3[] = {0x01, 0x00, 0xc3};      // imm32 = 0x10005; ret
  M.write(kPage1 + 0xffd, Head, sizeof(Head));
  M.write(kPage2, Tail2, sizeof(Tail2));
  M.write(kPage3, Tail3, sizeof(Tail3));
  const uint64_t Pte[2] = {kPage1 | 7, kPage2 | 7};
  M.write(kCrossPt, Pte, sizeof(Pte));
  const uint64_t Pde = kCrossPt | 7;
  M.write(kPml4Base + 0x2000 + 8 * (kCrossLinear >> 21), &Pde, 8);
}

// The code: CALL the crossing instruction Iterations times (ESI = the last EAX), remap
// its second page to kPage3 and call it again (EAX += ESI), then unmap that page and call
// it a third time (#PF); HLT.
std::vector<uint8_t> crossingCode(uint32_t Iterations) {
  const uint32_t T = uint32_t(kCrossLinear + 0xffd), Pte3 = uint32_t(kPage3 | 7);
  auto Le = [](uint32_t V) {
    return std::vector<uint8_t>{uint8_t(V), uint8_t(V >> 8), uint8_t(V >> 16), uint8_t(V >> 24)};
  };
  std::vector<uint8_t> C = {0x48, 0xc7, 0xc3}; // mov rbx, T
  for (uint8_t B : Le(T))
    C.push_back(B);
  C.push_back(0xb9); // mov ecx, Iterations
  for (uint8_t B : Le(Iterations))
    C.push_back(B);
  const std::vector<uint8_t> Rest = {
      0xff, 0xd3,                                // loop: call rbx
      0xff, 0xc9,                                // dec ecx
      0x75, 0xfa,                                // jnz loop
      0x89, 0xc6,                                // mov esi, eax
      0x48, 0xc7, 0xc7, 0x08, 0x00, 0x04, 0x00,  // mov rdi, kCrossPt + 8
      0x48, 0xc7, 0x07};                         // mov qword [rdi], Pte3 (imm32 below)
  C.insert(C.end(), Rest.begin(), Rest.end());
  for (uint8_t B : Le(Pte3))
    C.push_back(B);
  const std::vector<uint8_t> End = {
      0x0f, 0x01, 0x7b, 0x03,                    // invlpg [rbx+3]: the second page
      0xff, 0xd3,                                // call rbx
      0x01, 0xf0,                                // add eax, esi
      0x89, 0xc6,                                // mov esi, eax
      0x48, 0xc7, 0x07, 0x00, 0x00, 0x00, 0x00,  // mov qword [rdi], 0
      0x0f, 0x01, 0x7b, 0x03,                    // invlpg [rbx+3]
      0xff, 0xd3,                                // call rbx: #PF
      0xf4};                                     // hlt
  C.insert(C.end(), End.begin(), End.end());
  return C;
}

struct CrossingRun {
  FaultInfo F;
  uint64_t Esi = 0, Decoded = 0;
  bool Cached = false; ///< after the loop: a current block of its own in the cache
};

CrossingRun runCrossing(uint32_t Iterations, ExecMode Mode) {
  TestMachine M;
  M.setupLongMode();
  M.Cpu_.setExecMode(Mode);
  mapCrossingPages(M);
  M.loadCode(crossingCode(Iterations));
  CrossingRun R;
  // MOV, MOV, then per iteration CALL, the crossing MOV, RET, DEC, JNZ.
  EXPECT_EQ(M.run(2 + 5 * uint64_t(Iterations)), StopReason::InsnLimit);
  const Block *B = M.Cpu_.Mmu.cachedBlock(Gla(kCrossLinear + 0xffd), uint8_t(CodeMode::Long64));
  R.Cached = B && B->Crosses && B->NumInsns == 1 && B->Insns[0].Len == 5;
  R.F = runToFault(M, 100000);
  R.Esi = M.S.Gpr[RSI];
  R.Decoded = M.Cpu_.Mmu.blocksDecoded();
  return R;
}
} // namespace

TEST(PageCrossingInstructions, AreDecodedOnceFollowARemapOfTheSecondPageAndFaultWhenItGoes) {
  for (const ExecMode Mode : {ExecMode::Interp, ExecMode::Translate}) {
    SCOPED_TRACE(Mode == ExecMode::Interp ? "interp" : "translate");
    const CrossingRun Few = runCrossing(20, Mode), Many = runCrossing(2000, Mode);
    for (const CrossingRun *R : {&Few, &Many}) {
      // 5 from the first mapping, 0x10005 after the remap: the new bytes run.
      EXPECT_TRUE(R->Cached);
      EXPECT_EQ(R->Esi, 0x1000au);
      ASSERT_TRUE(R->F.Faulted);
      EXPECT_EQ(R->F.Vector, vec::PF);
      EXPECT_EQ(R->F.Rip, kCrossLinear + 0xffd); // the crossing instruction
      EXPECT_EQ(R->F.Cr2, kCrossLinear + 0x1000); // its second page
      EXPECT_EQ(R->F.ErrorCode & 7u, 0u);          // not present, read, supervisor
    }
    // 1,980 more executions of the crossing instruction decoded nothing more.
    EXPECT_EQ(Few.Decoded, Many.Decoded);
  }
}

namespace {
// The crossing instruction of mapCrossingPages called N times, its imm32's byte 2 (in
// the second page) then set to 1 by a store, then called N times again; ESI sums EAX.
// Direct CALLs: a block ending with an indirect one is not translated. The two pages are
// mapped again 64 KiB higher too, where their fetch TLB slots (0x10, 0x11) are not the
// code's (0, for page 0x100): a victim swap at every call would move the chain cells'
// stamp (cpu/mmu.h, "Block links") and keep them from chaining.
constexpr uint64_t kCrossLinearHigh = kCrossLinear + 0x10000;
void mapCrossingPagesHigh(TestMachine &M) {
  mapCrossingPages(M);
  const uint64_t Pte[2] = {kPage1 | 7, kPage2 | 7};
  M.write(kCrossPt + 8 * 0x10, Pte, sizeof(Pte));
}
std::vector<uint8_t> crossingStoreCode(uint32_t N) {
  const uint32_t T = uint32_t(kCrossLinearHigh + 0xffd);
  std::vector<uint8_t> C = {0x48, 0xc7, 0xc3, uint8_t(T), uint8_t(T >> 8), uint8_t(T >> 16),
                            uint8_t(T >> 24), // mov rbx, T
                            0x31, 0xf6};      // xor esi, esi
  auto loop = [&] {
    C.insert(C.end(), {0xb9, uint8_t(N), uint8_t(N >> 8), uint8_t(N >> 16), uint8_t(N >> 24)});
    const uint32_t Rel = T - uint32_t(kCodeBase + C.size() + 5); // mov ecx, N above
    C.insert(C.end(), {0xe8, uint8_t(Rel), uint8_t(Rel >> 8), uint8_t(Rel >> 16),
                       uint8_t(Rel >> 24), // l: call T
                       0x01, 0xc6,         // add esi, eax
                       0xff, 0xc9,         // dec ecx
                       0x75, 0xf5});       // jnz l
  };
  loop();
  C.insert(C.end(), {0xc6, 0x43, 0x03, 0x01}); // mov byte [rbx+3], 1: imm32 = 0x10005
  loop();
  C.push_back(0xf4); // hlt
  return C;
}
} // namespace

// Translated, the crossing instruction's block is entered through the chain cells of the
// block that calls it and of RET (docs/TRANSLATOR.md, "Page-crossing instructions"): a
// store into its second page moves the cells' stamp, and the next call runs the new
// bytes, as interpreted.
TEST(PageCrossingInstructions, RunTranslatedAndChainedAndSeeAStoreIntoTheirSecondPage) {
  constexpr uint32_t N = 1000;
  for (const ExecMode Mode : {ExecMode::Interp, ExecMode::Translate, ExecMode::Lockstep}) {
    SCOPED_TRACE(int(Mode));
    TestMachine M;
    M.setupLongMode();
    M.Cpu_.setExecMode(Mode);
    mapCrossingPagesHigh(M);
    M.loadCode(crossingStoreCode(N));
    // MOV RBX, XOR, MOV ECX; per iteration CALL, MOV, RET, ADD, DEC, JNZ; the store,
    // MOV ECX, again the iterations; HLT.
    EXPECT_EQ(M.run(1000000), StopReason::Halted);
    EXPECT_EQ(M.S.Gpr[RSI], uint64_t(N * 5u + N * 0x10005u));
    EXPECT_EQ(M.Cpu_.Retired, 3 + 6 * uint64_t(N) + 2 + 6 * uint64_t(N) + 1);
    const Block *B =
        M.Cpu_.Mmu.cachedBlock(Gla(kCrossLinearHigh + 0xffd), uint8_t(CodeMode::Long64));
    ASSERT_TRUE(B && B->Crosses);
    EXPECT_EQ(B->Insns[0].Imm, 0x10005);
    if (Mode == ExecMode::Translate) {
      // Translated after 16 entries, twice (the store made a new block of it); after
      // that, all four blocks of the loop chained: the run loop entered translated code
      // a few dozen times, not 2,000.
      EXPECT_TRUE(B->JitCode);
      EXPECT_LT(M.Cpu_.Jit->stats().Runs, 100u);
      EXPECT_GT(M.Cpu_.Jit->stats().Chained, 7000u);
    }
  }
}
