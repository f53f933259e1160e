// Exact values for what the host oracle cannot check: the values vmxsim gives to flags and
// results the SDM leaves undefined (Intel behaviour where known, else a documented
// choice; see the comments at the top of cpu/exec_shift.cpp, exec_muldiv.cpp,
// exec_bit.cpp, exec_flags.cpp), and instructions that a 64-bit host process cannot run
// (BCD adjusts, PUSHA/POPA, 32-bit segment overrides). SDM Vol. 1, Programming with
// General-Purpose Instructions; Vol. 2, the instruction pages.
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr uint64_t CF = rflags::CF, PF = rflags::PF, AF = rflags::AF, ZF = rflags::ZF,
                   SF = rflags::SF, OF = rflags::OF;

/// Runs Code followed by HLT; returns the arithmetic flags.
uint64_t runCode(TestMachine &M, std::vector<uint8_t> Code, uint64_t FlagsIn = 0) {
  Code.push_back(0xf4);
  M.loadCode(Code);
  M.S.Rflags = rflags::Fixed1 | FlagsIn;
  M.Cpu_.Activity = ActivityState::Active;
  EXPECT_EQ(M.run(100), StopReason::Halted);
  return M.S.Rflags & rflags::Arith;
}

} // namespace

TEST(GeneralPurposeInstructions, ShlCountAboveOneSetsOfFromResultAndCarry) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0x60000001;
  // shl eax, 2: result 0x80000004, CF = bit 30 = 1, OF = MSB(result) XOR CF = 0, AF = 0.
  EXPECT_EQ(runCode(M, {0xc1, 0xe0, 0x02}, AF | OF), SF | CF);
  EXPECT_EQ(M.S.Gpr[RAX], 0x80000004u);
}

TEST(GeneralPurposeInstructions, ShrCountAboveOneSetsOfToOriginalMsb) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0x80000010;
  // shr eax, 3: result 0x10000002, CF = bit 2 = 0, OF = MSB(original) = 1.
  EXPECT_EQ(runCode(M, {0xc1, 0xe8, 0x03}), OF);
  EXPECT_EQ(M.S.Gpr[RAX], 0x10000002u);
}

TEST(GeneralPurposeInstructions, RolCountAboveOneSetsOfFromResult) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0x10;
  // rol al, 3: 0x80, CF = LSB = 0, OF = MSB XOR CF = 1; SF/ZF/PF/AF untouched.
  EXPECT_EQ(runCode(M, {0xc0, 0xc0, 0x03}, ZF | PF), ZF | PF | OF);
  EXPECT_EQ(M.S.Gpr[RAX], 0x80u);
}

TEST(GeneralPurposeInstructions, ShlByteCountPastWidthClearsCarry) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0xff;
  M.S.Gpr[RCX] = 9;
  // shl al, cl with 9: the bit-by-bit pseudocode shifts the last 1 out at step 8.
  EXPECT_EQ(runCode(M, {0xd2, 0xe0}), ZF | PF);
  EXPECT_EQ(M.S.Gpr[RAX], 0u);
}

TEST(GeneralPurposeInstructions, Shld16CountAbove16ShiftsDestSrcDest) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0x1234;
  M.S.Gpr[RBX] = 0x5678;
  // shld ax, bx, 20: bits of the 48-bit DEST:SRC:DEST = 1234_5678_1234 shifted left 20.
  uint64_t F = runCode(M, {0x66, 0x0f, 0xa4, 0xd8, 0x14});
  EXPECT_EQ(M.S.Gpr[RAX], 0x6781u);
  EXPECT_EQ(F & CF, CF);
}

TEST(GeneralPurposeInstructions, ShiftCountZeroLeavesFlags) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0xffffffff00000001ull;
  M.S.Gpr[RCX] = 0x20; // masked to 0
  EXPECT_EQ(runCode(M, {0xd3, 0xe0}, CF | OF | AF), CF | OF | AF);
  // The 32-bit destination is still written: the upper half is cleared.
  EXPECT_EQ(M.S.Gpr[RAX], 1u);
}

TEST(GeneralPurposeInstructions, MulSetsSzpFromLowHalfAndClearsAf) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0x10;
  M.S.Gpr[RCX] = 0x10;
  EXPECT_EQ(runCode(M, {0xf7, 0xe1}, AF | SF | ZF), PF); // mul ecx: 0x100
  EXPECT_EQ(M.S.Gpr[RAX], 0x100u);
  EXPECT_EQ(M.S.Gpr[RDX], 0u);
}

TEST(GeneralPurposeInstructions, DivLeavesFlagsUnchanged) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 100;
  M.S.Gpr[RDX] = 0;
  M.S.Gpr[RCX] = 7;
  EXPECT_EQ(runCode(M, {0xf7, 0xf1}, CF | SF | OF | AF), CF | SF | OF | AF);
  EXPECT_EQ(M.S.Gpr[RAX], 14u);
  EXPECT_EQ(M.S.Gpr[RDX], 2u);
}

TEST(GeneralPurposeInstructions, BsfZeroSourceLeavesWholeDestination) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0x1122334455667788ull;
  M.S.Gpr[RCX] = 0xffffffff00000000ull; // ECX = 0
  EXPECT_EQ(runCode(M, {0x0f, 0xbc, 0xc1}, CF) & ZF, ZF); // bsf eax, ecx
  EXPECT_EQ(M.S.Gpr[RAX], 0x1122334455667788ull);
  EXPECT_EQ(runCode(M, {0x0f, 0xbd, 0xc1}) & ZF, ZF); // bsr eax, ecx
  EXPECT_EQ(M.S.Gpr[RAX], 0x1122334455667788ull);
}

TEST(GeneralPurposeInstructions, Bswap16ClearsLowWord) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0x1122334455667788ull;
  runCode(M, {0x66, 0x0f, 0xc8});
  EXPECT_EQ(M.S.Gpr[RAX], 0x1122334455660000ull);
}

TEST(GeneralPurposeInstructions, AamDividesAlAndSetsSzp) {
  TestMachine M;
  M.setupProtected32();
  M.S.Gpr[RAX] = 0x4f; // 79
  EXPECT_EQ(runCode(M, {0xd4, 0x0a}, CF | AF | OF), PF);
  EXPECT_EQ(M.S.Gpr[RAX] & 0xffff, 0x0709u);
}

TEST(GeneralPurposeInstructions, AadCombinesDigits) {
  TestMachine M;
  M.setupProtected32();
  M.S.Gpr[RAX] = 0x0709;
  EXPECT_EQ(runCode(M, {0xd5, 0x0a}, CF | AF | OF), 0u);
  EXPECT_EQ(M.S.Gpr[RAX] & 0xffff, 0x004fu);
}

TEST(GeneralPurposeInstructions, AaaAdjustsUnpackedBcd) {
  TestMachine M;
  M.setupProtected32();
  M.S.Gpr[RAX] = 0x000b;
  EXPECT_EQ(runCode(M, {0x37}), AF | CF); // AX + 106H, AL masked to 01
  EXPECT_EQ(M.S.Gpr[RAX] & 0xffff, 0x0101u);
  M.S.Gpr[RAX] = 0x0205;
  EXPECT_EQ(runCode(M, {0x37}), PF); // no adjust: AL & 0FH
  EXPECT_EQ(M.S.Gpr[RAX] & 0xffff, 0x0205u);
}

TEST(GeneralPurposeInstructions, AasAdjustsUnpackedBcd) {
  TestMachine M;
  M.setupProtected32();
  M.S.Gpr[RAX] = 0x020b;
  EXPECT_EQ(runCode(M, {0x3f}) & (AF | CF), AF | CF);
  EXPECT_EQ(M.S.Gpr[RAX] & 0xffff, 0x0105u);
}

TEST(GeneralPurposeInstructions, DaaAdjustsPackedBcdSum) {
  TestMachine M;
  M.setupProtected32();
  M.S.Gpr[RAX] = 0xae; // 79H + 35H
  EXPECT_EQ(runCode(M, {0x27}), AF | CF | PF);
  EXPECT_EQ(M.S.Gpr[RAX] & 0xff, 0x14u); // 114 decimal
}

TEST(GeneralPurposeInstructions, DasAdjustsPackedBcdDifference) {
  TestMachine M;
  M.setupProtected32();
  M.S.Gpr[RAX] = 0xee; // 35H - 47H with borrow
  EXPECT_EQ(runCode(M, {0x2f}, CF | AF), AF | CF | SF | PF);
  EXPECT_EQ(M.S.Gpr[RAX] & 0xff, 0x88u);
}

TEST(GeneralPurposeInstructions, PushadPopadRoundTripSkipsEsp) {
  TestMachine M;
  M.setupProtected32();
  for (unsigned R = 0; R < 8; ++R)
    if (R != RSP)
      M.S.Gpr[R] = 0x11111111u * (R + 1);
  const uint64_t Sp = M.S.Gpr[RSP];
  runCode(M, {0x60}); // pushad
  EXPECT_EQ(M.S.Gpr[RSP], Sp - 32);
  uint32_t Saved[8];
  M.Mem.copyOut(Hpa(Sp - 32), Saved, 32);
  EXPECT_EQ(Saved[7], 0x11111111u); // EAX pushed first
  EXPECT_EQ(Saved[3], uint32_t(Sp)); // original ESP
  EXPECT_EQ(Saved[0], 0x88888888u); // EDI last
  for (unsigned R = 0; R < 8; ++R)
    if (R != RSP)
      M.S.Gpr[R] = 0;
  M.Mem.copyIn(Hpa(Sp - 20), "\x44\x33\x22\x11", 4); // a different saved ESP: ignored
  runCode(M, {0x61}); // popad
  EXPECT_EQ(M.S.Gpr[RSP], Sp);
  for (unsigned R = 0; R < 8; ++R)
    if (R != RSP) {
      EXPECT_EQ(M.S.Gpr[R], 0x11111111u * (R + 1)) << "register " << R;
    }
}

TEST(GeneralPurposeInstructions, Pusha16PushesWords) {
  TestMachine M;
  M.setupProtected32();
  M.S.Gpr[RAX] = 0xaaaa1234;
  const uint64_t Sp = M.S.Gpr[RSP];
  runCode(M, {0x66, 0x60});
  EXPECT_EQ(M.S.Gpr[RSP], Sp - 16);
  uint16_t Ax = 0;
  M.Mem.copyOut(Hpa(Sp - 2), &Ax, 2);
  EXPECT_EQ(Ax, 0x1234u);
}

TEST(GeneralPurposeInstructions, StringSourceHonoursSegmentOverrideDestinationIsEs) {
  TestMachine M;
  M.setupProtected32();
  // FS and ES with distinct bases: fs rep movsb reads FS:ESI and writes ES:EDI.
  M.S.seg(SegReg::FS).Base = 0x10000;
  M.S.seg(SegReg::ES).Base = 0x20000;
  M.write(kDataBase + 0x10000, "vmxsim!!", 8);
  M.write(kDataBase, "wrongsrc", 8);
  M.S.Gpr[RSI] = kDataBase;
  M.S.Gpr[RDI] = kDataBase;
  M.S.Gpr[RCX] = 8;
  runCode(M, {0x64, 0xf3, 0xa4});
  char Out[9] = {};
  M.Mem.copyOut(Hpa(kDataBase + 0x20000), Out, 8);
  EXPECT_STREQ(Out, "vmxsim!!");
  EXPECT_EQ(M.S.Gpr[RCX], 0u);
  EXPECT_EQ(M.S.Gpr[RSI], kDataBase + 8);
  // CMPS: the ES override applies to the source only; the destination stays ES.
  M.S.Gpr[RSI] = kDataBase;
  M.S.Gpr[RDI] = kDataBase;
  runCode(M, {0x64, 0xa6}); // cmps byte fs:[esi], es:[edi]
  EXPECT_TRUE(M.S.Rflags & ZF);
}

TEST(GeneralPurposeInstructions, RepMovsbOverlappingForwardReplicatesPattern) {
  TestMachine M;
  M.setupLongMode();
  M.write(kDataBase, "ab", 2);
  M.S.Gpr[RSI] = kDataBase;
  M.S.Gpr[RDI] = kDataBase + 2;
  M.S.Gpr[RCX] = 10;
  runCode(M, {0xf3, 0xa4});
  char Out[13] = {};
  M.Mem.copyOut(Hpa(kDataBase), Out, 12);
  EXPECT_STREQ(Out, "abababababab");
  // Again with the TLB warm, through the host-pointer fast path.
  M.write(kDataBase, "xyz", 3);
  M.S.Gpr[RSI] = kDataBase;
  M.S.Gpr[RDI] = kDataBase + 3;
  M.S.Gpr[RCX] = 9;
  runCode(M, {0xf3, 0xa4});
  M.Mem.copyOut(Hpa(kDataBase), Out, 12);
  EXPECT_STREQ(Out, "xyzxyzxyzxyz");
}
