// Task switches in root operation (SDM Vol. 3A, "Task Management"; Vol. 2A/2B, JMP,
// CALL, INT n and IRET): what each source saves, loads, links and marks busy, and the
// faults before and after the commit point.
#include "tests/cpu/system_test_support.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr uint64_t kTssA = 0x5000, kTssB = 0x6000;
constexpr uint16_t kSelTssA = 0x50, kSelTssB = 0x58, kSelGateB = 0x60, kSelTss16 = 0x68;
constexpr uint64_t kTaskB = kCodeBase + 0x100; // the new task's code
constexpr uint64_t kHandler = kCodeBase + 0x800; // "hlt"
constexpr uint32_t kStackB = 0x70000;

struct Tss32 {
  uint32_t Cr3 = 0, Eip = uint32_t(kTaskB), Eflags = 0x2;
  uint32_t Gpr[8] = {0xb0, 0xb1, 0xb2, 0xb3, kStackB, 0xb5, 0xb6, 0xb7};
  uint16_t Sel[6] = {kSelData, kSelCode32, kSelData, kSelData, kSelData, kSelData};
  uint16_t Ldt = 0;
  bool Trap = false;
};

void writeTss(TestMachine &M, uint64_t Base, const Tss32 &T) {
  std::vector<uint8_t> Zero(0x68, 0);
  M.write(Base, Zero.data(), Zero.size());
  write32(M, Base + 0x1c, T.Cr3);
  write32(M, Base + 0x20, T.Eip);
  write32(M, Base + 0x24, T.Eflags);
  for (unsigned I = 0; I < 8; ++I)
    write32(M, Base + 0x28 + 4 * I, T.Gpr[I]);
  for (unsigned I = 0; I < 6; ++I)
    write16(M, Base + 0x48 + 4 * I, T.Sel[I]);
  write16(M, Base + 0x60, T.Ldt);
  write16(M, Base + 0x64, T.Trap ? 1 : 0);
}

void put(TestMachine &M, uint64_t At, std::initializer_list<uint8_t> Bytes) {
  std::vector<uint8_t> V(Bytes);
  M.write(At, V.data(), V.size());
}

/// 32-bit protected mode running as task A (TR = kSelTssA, busy), task B's TSS available
/// and described by T, a task gate to B at kSelGateB, and IDT gates for #DB, #TS, #NP,
/// #SS and #GP to a "hlt" at kHandler.
void setup(TestMachine &M, const Tss32 &T) {
  M.setupProtected32();
  M.S.Gdtr.Limit = 0x100 - 1;
  write64(M, kGdtBase + kSelTssA, segDesc(uint32_t(kTssA), 0x67, 0x8b, 0));
  write64(M, kGdtBase + kSelTssB, segDesc(uint32_t(kTssB), 0x67, 0x89, 0));
  write64(M, kGdtBase + kSelGateB, gate32(kSelTssB, 0, 0x5, 0));
  std::vector<uint8_t> Zero(0x68, 0);
  M.write(kTssA, Zero.data(), Zero.size());
  writeTss(M, kTssB, T);
  M.S.Tr = Segment{kSelTssA, kTssA, 0x67, 0x8b};
  M.S.Idtr = TableReg{kIdtBase, 0xff};
  for (uint8_t V : {1, 10, 11, 12, 13})
    write64(M, kIdtBase + 8 * V, gate32(kSelCode32, uint32_t(kHandler), 0xe, 0));
  put(M, kHandler, {0xf4});
  M.S.Gpr[RAX] = 0xa0;
  M.S.Gpr[RBX] = 0xa3;
}

unsigned gdtType(TestMachine &M, uint16_t Sel) {
  return unsigned(M.read64(kGdtBase + Sel) >> 40) & 0xf;
}

} // namespace

// CALL to a TSS nests: the old state is saved in A, B's back link names A, B is busy
// and runs with NT = 1; its IRET returns to A, saving B with NT clear and marking B
// available again, and A resumes after the CALL with its saved registers.
TEST(TaskSwitch, CallNestsAndIretReturnsToTheCaller) {
  TestMachine M;
  Tss32 B;
  setup(M, B);
  M.loadCode({0x9a, 0, 0, 0, 0, kSelTssB, 0, // call far kSelTssB:0
              0xf4});                         // hlt
  // Task B: mov ebx, 0x2222 ; pushfd ; pop ecx ; iret
  put(M, kTaskB, {0xbb, 0x22, 0x22, 0, 0, 0x9c, 0x59, 0xcf});
  ASSERT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kCodeBase + 8);
  EXPECT_EQ(M.S.Tr.Selector, kSelTssA);
  EXPECT_EQ(M.S.Gpr[RAX], 0xa0u); // A's registers, from A's TSS
  EXPECT_EQ(M.S.Gpr[RBX], 0xa3u);
  EXPECT_EQ(M.S.Rflags & rflags::NT, 0u);
  EXPECT_NE(M.S.Cr0 & cr0::TS, 0u);
  // A's TSS as the CALL saved it: the return EIP and the registers.
  EXPECT_EQ(read32(M, kTssA + 0x20), uint32_t(kCodeBase + 7));
  EXPECT_EQ(read32(M, kTssA + 0x28), 0xa0u);
  EXPECT_EQ(read16(M, kTssA + 0x4c), kSelCode32);
  // B's TSS: the back link, and the state its IRET saved (NT clear in the image; ECX
  // holds the EFLAGS B ran with, NT set).
  EXPECT_EQ(read16(M, kTssB), kSelTssA);
  EXPECT_EQ(read32(M, kTssB + 0x20), uint32_t(kTaskB + 8));
  EXPECT_EQ(read32(M, kTssB + 0x24), 0x2u);
  EXPECT_EQ(read32(M, kTssB + 0x2c), 0x4002u);
  EXPECT_EQ(read32(M, kTssB + 0x34), 0x2222u);
  EXPECT_EQ(gdtType(M, kSelTssA), 0xbu);
  EXPECT_EQ(gdtType(M, kSelTssB), 0x9u);
}

// JMP through a task gate does not nest: A becomes available, B busy, no back link.
TEST(TaskSwitch, JmpThroughTaskGateSwitchesWithoutNesting) {
  TestMachine M;
  Tss32 B;
  setup(M, B);
  M.loadCode({0xea, 0, 0, 0, 0, kSelGateB, 0}); // jmp far kSelGateB:0
  put(M, kTaskB, {0xf4});
  ASSERT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Tr.Selector, kSelTssB);
  EXPECT_EQ(M.S.Tr.Base, kTssB);
  EXPECT_EQ(M.S.Tr.Attr & 0xf, 0xbu);
  EXPECT_EQ(M.S.Rip, kTaskB + 1);
  EXPECT_EQ(M.S.Gpr[RAX], 0xb0u);
  EXPECT_EQ(M.S.Gpr[RSP], kStackB);
  EXPECT_EQ(M.S.Rflags & rflags::NT, 0u);
  EXPECT_EQ(read16(M, kTssB), 0u);
  EXPECT_EQ(read32(M, kTssA + 0x20), uint32_t(kCodeBase + 7));
  EXPECT_EQ(gdtType(M, kSelTssA), 0x9u);
  EXPECT_EQ(gdtType(M, kSelTssB), 0xbu);
}

// A fault delivered through an IDT task gate: the old task saves the faulting EIP, the
// new one is nested and finds the error code on its stack.
TEST(TaskSwitch, ExceptionThroughIdtTaskGatePushesItsErrorCodeOnTheNewStack) {
  TestMachine M;
  Tss32 B;
  setup(M, B);
  write64(M, kIdtBase + 8 * 13, gate32(kSelTssB, 0, 0x5, 0));
  M.loadCode({0x66, 0xb8, 0xf8, 0x0f, // mov ax, 0x0ff8 (beyond the GDT limit)
              0x8e, 0xd8});           // mov ds, ax: #GP(0x0ff8)
  put(M, kTaskB, {0xf4});
  ASSERT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Tr.Selector, kSelTssB);
  EXPECT_EQ(M.S.Rip, kTaskB + 1);
  EXPECT_EQ(M.S.Gpr[RSP], kStackB - 4);
  EXPECT_EQ(read32(M, kStackB - 4), 0x0ff8u);
  EXPECT_NE(M.S.Rflags & rflags::NT, 0u);
  EXPECT_EQ(read16(M, kTssB), kSelTssA);
  EXPECT_EQ(read32(M, kTssA + 0x20), uint32_t(kCodeBase + 4)); // the faulting MOV
  EXPECT_NE(read32(M, kTssA + 0x24) & rflags::RF, 0u);           // a fault saves RF = 1
  EXPECT_EQ(gdtType(M, kSelTssA), 0xbu);
  EXPECT_EQ(gdtType(M, kSelTssB), 0xbu);
}

// CALL to a busy TSS is refused before anything changes: #GP(selector).
TEST(TaskSwitch, CallToBusyTssRaisesGpWithItsSelector) {
  TestMachine M;
  Tss32 B;
  setup(M, B);
  write64(M, kGdtBase + kSelTssB, segDesc(uint32_t(kTssB), 0x67, 0x8b, 0));
  M.loadCode({0x9a, 0, 0, 0, 0, kSelTssB, 0});
  ASSERT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kHandler + 1);
  EXPECT_EQ(read32(M, M.S.Gpr[RSP]), kSelTssB); // the error code
  EXPECT_EQ(M.S.Tr.Selector, kSelTssA);
  EXPECT_EQ(read32(M, kTssA + 0x20), 0u); // nothing saved
}

// A TSS limit below 67H is #TS(selector) before the commit point.
TEST(TaskSwitch, TssBelowMinimumLimitRaisesTs) {
  TestMachine M;
  Tss32 B;
  setup(M, B);
  write64(M, kGdtBase + kSelTssB, segDesc(uint32_t(kTssB), 0x66, 0x89, 0));
  M.loadCode({0xea, 0, 0, 0, 0, kSelTssB, 0});
  ASSERT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kHandler + 1);
  EXPECT_EQ(read32(M, M.S.Gpr[RSP]), kSelTssB);
  EXPECT_EQ(M.S.Tr.Selector, kSelTssA);
  EXPECT_EQ(gdtType(M, kSelTssA), 0xbu);
}

// A bad data-segment selector in the new TSS faults after the commit point: the #TS is
// taken in the new task, on its stack, with its EIP as the return address.
TEST(TaskSwitch, BadSegmentInNewTaskRaisesTsInTheNewTask) {
  TestMachine M;
  Tss32 B;
  B.Sel[3] = 0x0ff8; // DS beyond the GDT limit
  setup(M, B);
  M.loadCode({0xea, 0, 0, 0, 0, kSelTssB, 0});
  ASSERT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kHandler + 1);
  EXPECT_EQ(M.S.Tr.Selector, kSelTssB);
  EXPECT_EQ(M.S.Gpr[RSP], kStackB - 16);
  EXPECT_EQ(read32(M, kStackB - 16), 0x0ff8u);        // error code
  EXPECT_EQ(read32(M, kStackB - 12), uint32_t(kTaskB)); // the new task's EIP
  EXPECT_EQ(read32(M, kStackB - 8), kSelCode32);
}

// The T flag in the new TSS raises a debug trap before the new task's first
// instruction, with DR6.BT.
TEST(TaskSwitch, TrapFlagInNewTssRaisesDebugTrapWithBt) {
  TestMachine M;
  Tss32 B;
  B.Trap = true;
  setup(M, B);
  M.loadCode({0xea, 0, 0, 0, 0, kSelTssB, 0});
  put(M, kTaskB, {0xf4});
  ASSERT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kHandler + 1);
  EXPECT_NE(M.S.Dr[6] & (1u << 15), 0u);
  EXPECT_EQ(read32(M, kStackB - 12), uint32_t(kTaskB));
}

// A 16-bit TSS: word fields; the upper halves of the general registers read FFFFH, FS
// and GS are null.
TEST(TaskSwitch, SixteenBitTssLoadsWordsAndNullsFsGs) {
  TestMachine M;
  Tss32 B;
  setup(M, B);
  constexpr uint64_t kTss16 = 0x7000;
  write64(M, kGdtBase + kSelTss16, segDesc(uint32_t(kTss16), 0x2b, 0x81, 0));
  std::vector<uint8_t> Zero(0x2c, 0);
  M.write(kTss16, Zero.data(), Zero.size());
  write16(M, kTss16 + 0x0e, uint16_t(kTaskB - kCodeBase)); // IP (CS base 0: use a
  write16(M, kTss16 + 0x10, 0x0002);                        // flat 16-bit code below)
  for (unsigned I = 0; I < 8; ++I)
    write16(M, kTss16 + 0x12 + 2 * I, uint16_t(0x100 + I));
  write16(M, kTss16 + 0x1a, 0x8000);     // SP
  write16(M, kTss16 + 0x22, kSelData);   // ES
  write16(M, kTss16 + 0x24, kSelCode16); // CS (base 0, limit FFFFH)
  write16(M, kTss16 + 0x26, kSelData);   // SS
  write16(M, kTss16 + 0x28, kSelData);   // DS
  put(M, kTaskB - kCodeBase, {0xf4});
  M.loadCode({0xea, 0, 0, 0, 0, kSelTss16, 0});
  ASSERT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Tr.Selector, kSelTss16);
  EXPECT_EQ(M.S.Tr.Attr & 0xf, 0x3u);
  EXPECT_EQ(M.S.Rip, kTaskB - kCodeBase + 1);
  EXPECT_EQ(M.S.Gpr[RAX], 0xffff0100u);
  EXPECT_EQ(M.S.Gpr[RSP], 0xffff8000u);
  EXPECT_EQ(M.S.Gpr[RDI], 0xffff0107u);
  EXPECT_EQ(M.S.seg(SegReg::FS).Selector, 0u);
  EXPECT_NE(M.S.seg(SegReg::GS).Attr & Segment::Unusable, 0u);
  EXPECT_EQ(gdtType(M, kSelTss16), 0x3u);
}
