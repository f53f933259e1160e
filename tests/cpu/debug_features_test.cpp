// SDM Vol. 3B, "Debug, Branch Profile, TSC, and Intel Resource Director Technology
// Features": the debug registers' instruction, data and I/O breakpoints, DR6/DR7, RF,
// single-stepping (with IA32_DEBUGCTL.BTF on branches), MOV SS / POP SS blocking of #DB
// (Vol. 3A, "Masking Exceptions and Interrupts When Switching Stacks") and ICEBP, in VMX
// root operation (the VMX side: tests/vmx/vmx_debug_test.cpp).
#include "tests/cpu/system_test_support.h"

#include "cpu/debug.h"
#include "cpu/msrs.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr uint64_t kHandlers = 0x101000;
constexpr uint64_t kData = kDataBase + 0x40;

// 64-bit mode, every exception vector delivered to a "hlt" at kHandlers + 16 * vector.
void withHandlers(TestMachine &M) {
  M.S.Idtr = TableReg{kIdtBase, 0xfff};
  for (unsigned V = 0; V < 32; ++V) {
    gate64(M, kIdtBase + 16 * V, kSelCode64, kHandlers + 16 * V, 0xe, 0);
    const uint8_t Hlt = 0xf4;
    M.write(kHandlers + 16 * V, &Hlt, 1);
  }
}
uint64_t handlerOf(uint8_t V) { return kHandlers + 16 * V + 1; } // after its HLT

// The #DB handler counts in RDX and returns with IRETQ; SetRf also sets RF in the
// EFLAGS image first, as a debugger resuming at an instruction breakpoint does.
void dbHandlerReturns(TestMachine &M, bool SetRf) {
  std::vector<uint8_t> H = {0x48, 0xff, 0xc2}; // inc rdx
  if (SetRf)
    H.insert(H.end(), {0x48, 0x81, 0x4c, 0x24, 0x10, 0x00, 0x00, 0x01, 0x00}); // or [rsp+16], RF
  H.insert(H.end(), {0x48, 0xcf}); // iretq
  M.write(kHandlers + 16 * vec::DB, H.data(), H.size());
  M.S.Gpr[RDX] = 0; // RESET left the processor signature there
}

TestMachine &longMode(TestMachine &M) {
  M.setupLongMode();
  withHandlers(M);
  return M;
}

// The frame of an exception taken at CPL 0 in 64-bit mode (no error code).
uint64_t pushedRip(TestMachine &M) { return M.read64(kStackTop - 40); }
uint64_t pushedRflags(TestMachine &M) { return M.read64(kStackTop - 24); }

// DR7 enabling breakpoint N locally with R/W and LEN codes.
uint64_t dr7For(unsigned N, unsigned Rw, unsigned Len) {
  return 0x400 | (1u << (2 * N)) | (uint64_t(Rw) << (16 + 4 * N)) |
         (uint64_t(Len) << (18 + 4 * N));
}
void setDebugRegisters(TestMachine &M, std::initializer_list<std::pair<unsigned, uint64_t>> Regs) {
  for (auto [N, V] : Regs)
    M.S.Dr[N] = V;
  debugRegistersChanged(M.Cpu_);
}

constexpr uint64_t kDr6Clear = 0xffff0ff0;

// --- instruction breakpoints ------------------------------------------------------

// SDM Vol. 3B, "Instruction-Breakpoint Exception Condition": a fault before the
// instruction at the linear address in DRn executes; RF is not set in the image.
TEST(DebugFeatures, InstructionBreakpointFaultsBeforeTheInstruction) {
  TestMachine M;
  longMode(M);
  M.S.Gpr[RAX] = kCodeBase + 6;
  M.S.Gpr[RBX] = dr7For(0, 0, 0);
  // mov dr0, rax ; mov dr7, rbx ; inc rcx ; hlt
  M.loadCode({0x0f, 0x23, 0xc0, 0x0f, 0x23, 0xfb, 0x48, 0xff, 0xc1, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
  EXPECT_EQ(M.S.Gpr[RCX], 0u);
  EXPECT_EQ(pushedRip(M), kCodeBase + 6);
  EXPECT_EQ(pushedRflags(M) & rflags::RF, 0u);
  EXPECT_EQ(M.S.Dr[6], kDr6Clear | 1);
  EXPECT_EQ(M.S.Dr[7], 0x401u);
}

// The code breakpoint has priority over the faults of fetching the instruction: at a
// non-canonical RIP the #DB comes first (pushed RIP = that address), not the #GP.
TEST(DebugFeatures, InstructionBreakpointComesBeforeTheFetchFault) {
  TestMachine M;
  longMode(M);
  const uint64_t Bad = uint64_t(1) << 47;
  setDebugRegisters(M, {{0, Bad}, {7, dr7For(0, 0, 0)}});
  M.S.Rip = Bad;
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
  EXPECT_EQ(pushedRip(M), Bad);
  EXPECT_EQ(M.S.Dr[6], kDr6Clear | 1);
}

// RF = 1 suppresses the instruction breakpoint of one instruction and is cleared when
// it completes, so the breakpoint on the next one is taken; IRETQ loads RF.
TEST(DebugFeatures, ResumeFlagSuppressesOneInstructionBreakpointAndIsCleared) {
  TestMachine M;
  longMode(M);
  dbHandlerReturns(M, /*SetRf=*/true);
  M.loadCode({0x48, 0xff, 0xc1, 0xf4}); // inc rcx ; hlt
  setDebugRegisters(M, {{0, kCodeBase}, {1, kCodeBase + 3}, {7, dr7For(0, 0, 0) | dr7For(1, 0, 0)}});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kCodeBase + 4);
  EXPECT_EQ(M.S.Gpr[RCX], 1u);
  EXPECT_EQ(M.S.Gpr[RDX], 2u); // one #DB at the INC, one at the HLT
  EXPECT_EQ(M.S.Dr[6], kDr6Clear | 2);
  EXPECT_EQ(M.S.Rflags & rflags::RF, 0u);
}

// --- data breakpoints ---------------------------------------------------------------

// Each length (LEN 00b, 01b, 11b, 10b = 1, 2, 4, 8 bytes): the range is DRn with the
// bits below the length ignored; a store into it traps after the instruction, one just
// past it does not.
TEST(DebugFeatures, DataWriteBreakpointTrapsAfterTheStoreForEachLength) {
  const std::pair<unsigned, uint64_t> Lengths[] = {{0, 1}, {1, 2}, {3, 4}, {2, 8}};
  for (auto [Code, Len] : Lengths) {
    TestMachine M;
    longMode(M);
    setDebugRegisters(M, {{0, kData + Len - 1}, {7, dr7For(0, 1, Code)}});
    M.S.Gpr[RAX] = 0x5a;
    M.S.Gpr[RDI] = kData + Len; // outside
    M.S.Gpr[RSI] = kData;       // the first byte of the range
    M.loadCode({0x88, 0x07, 0x88, 0x06, 0xf4}); // mov [rdi], al ; mov [rsi], al ; hlt
    EXPECT_EQ(M.run(), StopReason::Halted) << Len;
    EXPECT_EQ(M.S.Rip, handlerOf(vec::DB)) << Len;
    EXPECT_EQ(pushedRip(M), kCodeBase + 4) << Len; // a trap: after the second store
    EXPECT_EQ(M.S.Dr[6], kDr6Clear | 1) << Len;
    EXPECT_EQ(M.read64(kData) & 0xff, 0x5au) << Len;
  }
}

// R/W = 01b breaks on writes only, 11b on reads and writes; an access that overlaps the
// range anywhere matches.
TEST(DebugFeatures, ReadWriteBreakpointTakesReadsWriteBreakpointDoesNot) {
  for (unsigned Rw : {1u, 3u}) {
    TestMachine M;
    longMode(M);
    setDebugRegisters(M, {{0, kData + 6}, {7, dr7For(0, Rw, 0)}});
    M.S.Gpr[RSI] = kData; // an 8-byte read covering kData + 6
    M.loadCode({0x48, 0x8b, 0x06, 0xf4}); // mov rax, [rsi] ; hlt
    EXPECT_EQ(M.run(), StopReason::Halted);
    if (Rw == 1) {
      EXPECT_EQ(M.S.Rip, kCodeBase + 4);
      EXPECT_EQ(M.S.Dr[6], kDr6Clear);
    } else {
      EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
      EXPECT_EQ(pushedRip(M), kCodeBase + 3);
      EXPECT_EQ(M.S.Dr[6], kDr6Clear | 1);
    }
  }
}

// DR6.B0-B3: every enabled breakpoint that matched (local or global enable), none that is
// not enabled (vmxsim's choice where the SDM says "may or may not"); the #DB replaces
// B0-B3 and leaves BS (and the rest) as they were.
TEST(DebugFeatures, Dr6ReportsEnabledMatchesReplacingB0toB3) {
  TestMachine M;
  longMode(M);
  const uint64_t Dr7 = 0x400 | 2 /*G0*/ | 4 /*L1*/ | (1u << 16) | (1u << 20) | (1u << 24);
  setDebugRegisters(M, {{0, kData}, {1, kData}, {2, kData}, {7, Dr7}});
  M.S.Dr[6] = kDr6Clear | dr6::BS | 8;
  M.S.Gpr[RSI] = kData;
  M.loadCode({0x88, 0x06, 0xf4}); // mov [rsi], al ; hlt
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
  EXPECT_EQ(M.S.Dr[6], kDr6Clear | dr6::BS | 3);
}

// REP string instructions: the trap follows the iteration that matched (SDM Vol. 3B,
// "Data Memory and I/O Breakpoint Exception Conditions"), RIP still on the instruction,
// RF = 1 in the image; the handler's IRETQ resumes the remaining iterations.
TEST(DebugFeatures, RepStringTrapsAfterTheIterationThatMatched) {
  TestMachine M;
  longMode(M);
  setDebugRegisters(M, {{0, kData + 5}, {7, dr7For(0, 1, 0)}});
  M.S.Gpr[RAX] = 0x77;
  M.S.Gpr[RDI] = kData;
  M.S.Gpr[RCX] = 10;
  M.loadCode({0xf3, 0xaa, 0xf4}); // rep stosb ; hlt
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
  EXPECT_EQ(M.S.Gpr[RCX], 4u);
  EXPECT_EQ(M.S.Gpr[RDI], kData + 6);
  EXPECT_EQ(pushedRip(M), kCodeBase);
  EXPECT_NE(pushedRflags(M) & rflags::RF, 0u);
  EXPECT_EQ(M.S.Dr[6], kDr6Clear | 1);
  EXPECT_EQ(M.read64(kData), 0x0000777777777777u);

  TestMachine N;
  longMode(N);
  dbHandlerReturns(N, /*SetRf=*/false);
  setDebugRegisters(N, {{0, kData + 5}, {7, dr7For(0, 1, 0)}});
  N.S.Gpr[RAX] = 0x77;
  N.S.Gpr[RDI] = kData;
  N.S.Gpr[RCX] = 10;
  N.loadCode({0xf3, 0xaa, 0xf4});
  EXPECT_EQ(N.run(), StopReason::Halted);
  EXPECT_EQ(N.S.Rip, kCodeBase + 3);
  EXPECT_EQ(N.S.Gpr[RCX], 0u);
  EXPECT_EQ(N.S.Gpr[RDX], 1u);
  EXPECT_EQ(N.read64(kData + 2), 0x7777777777777777u);
  EXPECT_EQ(N.S.Rflags & rflags::RF, 0u);
}

// The cost model: a page holding an armed data breakpoint never gets a TLB write entry
// (its accesses take the checking slow path); other pages do.
TEST(DebugFeatures, ArmedDataBreakpointPageStaysOutOfTheTlb) {
  TestMachine M;
  longMode(M);
  setDebugRegisters(M, {{0, kData + 0x800}, {7, dr7For(0, 1, 0)}});
  M.S.Gpr[RSI] = kData;
  M.S.Gpr[RDI] = kData + 0x1000;
  M.loadCode({0x88, 0x06, 0x88, 0x07, 0xf4}); // mov [rsi], al ; mov [rdi], al ; hlt
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kCodeBase + 5);
  EXPECT_EQ(M.Cpu_.Mmu.writeMappedFrame(Gla(kData)), kTlbEmpty);
  EXPECT_EQ(M.Cpu_.Mmu.writeMappedFrame(Gla(kData + 0x1000)), (kData + 0x1000) >> 12);
}

// --- I/O breakpoints ------------------------------------------------------------------

// R/W = 10b is an I/O breakpoint with CR4.DE = 1 (ports [DRn, DRn + LEN) aligned); with
// CR4.DE = 0 it is undefined, and vmxsim matches nothing.
TEST(DebugFeatures, IoBreakpointNeedsCr4De) {
  for (bool De : {false, true}) {
    TestMachine M;
    longMode(M);
    if (De)
      M.S.Cr4 |= cr4::DE;
    setDebugRegisters(M, {{0, 0x81}, {7, dr7For(0, 2, 1)}}); // ports 0x80-0x81
    M.S.Gpr[RDX] = 0x81;
    // out 0x7f, al ; in al, dx ; hlt
    M.loadCode({0xe6, 0x7f, 0xec, 0xf4});
    EXPECT_EQ(M.run(), StopReason::Halted);
    if (!De) {
      EXPECT_EQ(M.S.Rip, kCodeBase + 4);
      EXPECT_EQ(M.S.Dr[6], kDr6Clear);
      continue;
    }
    EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
    EXPECT_EQ(pushedRip(M), kCodeBase + 3);
    EXPECT_EQ(M.S.Dr[6], kDr6Clear | 1);
  }
}

// --- MOV DR rules -------------------------------------------------------------------

TEST(DebugFeatures, MovToDr7AcceptsEveryEnableBit) {
  for (uint64_t Enable = 1; Enable < 0x100; Enable <<= 1) {
    TestMachine M;
    longMode(M);
    M.S.Gpr[RAX] = 0x400 | Enable;
    M.loadCode({0x0f, 0x23, 0xf8, 0xf4}); // mov dr7, rax ; hlt
    EXPECT_EQ(M.run(), StopReason::Halted) << Enable;
    EXPECT_EQ(M.S.Dr[7], 0x400 | Enable);
    EXPECT_TRUE(M.Cpu_.Debug.InsnArmed); // DR0 = 0, R/W = 00b: an instruction breakpoint
  }
}

// DR7.GD: any MOV DR is a #DB fault with BD; GD is cleared and DR6.BD set as the #DB is
// delivered, and the image has RF = 1 (a fault other than an instruction breakpoint).
TEST(DebugFeatures, GeneralDetectFaultsWithBdAndClearsGd) {
  TestMachine M;
  longMode(M);
  M.S.Dr[7] = 0x400 | dr7::GD;
  M.loadCode({0x0f, 0x21, 0xf0, 0xf4}); // mov rax, dr6
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
  EXPECT_EQ(pushedRip(M), kCodeBase);
  EXPECT_NE(pushedRflags(M) & rflags::RF, 0u);
  EXPECT_EQ(M.S.Dr[6], kDr6Clear | dr6::BD);
  EXPECT_EQ(M.S.Dr[7], 0x400u);
}

// DR4/DR5 alias DR6/DR7 with CR4.DE = 0 and are #UD with CR4.DE = 1.
TEST(DebugFeatures, Dr5AliasesDr7UnlessCr4De) {
  TestMachine M;
  longMode(M);
  M.S.Dr[7] = 0x402;
  M.loadCode({0x0f, 0x21, 0xe8, 0xf4}); // mov rax, dr5
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], 0x402u);
  TestMachine N;
  longMode(N);
  N.S.Cr4 |= cr4::DE;
  N.loadCode({0x0f, 0x23, 0xe8, 0xf4}); // mov dr5, rax
  EXPECT_EQ(N.run(), StopReason::Halted);
  EXPECT_EQ(N.S.Rip, handlerOf(vec::UD));
}

// Bits 63:32 of DR6 and DR7 must be 0 in 64-bit mode (#GP(0)); DR0-DR3 take any value.
TEST(DebugFeatures, MovToDr6OrDr7WithHighBitsRaisesGp) {
  for (uint8_t ModRm : {0xf0, 0xf8}) { // dr6, dr7
    TestMachine M;
    longMode(M);
    M.S.Gpr[RAX] = (uint64_t(1) << 32) | 0x400;
    M.loadCode({0x0f, 0x23, ModRm, 0xf4});
    EXPECT_EQ(M.run(), StopReason::Halted);
    EXPECT_EQ(M.S.Rip, handlerOf(vec::GP));
  }
  TestMachine M;
  longMode(M);
  M.S.Gpr[RAX] = 0xffff800000001234u;
  M.loadCode({0x0f, 0x23, 0xd8, 0xf4}); // mov dr3, rax
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Dr[3], 0xffff800000001234u);
}

TEST(DebugFeatures, MovDrAtCpl3RaisesGp) {
  TestMachine M;
  longMode(M);
  write64(M, 0x5000 + 4, 0x88000); // RSP0
  M.S.Tr = Segment{kSelTss, 0x5000, 0x67, 0x8b};
  M.loadCode({0x0f, 0x21, 0xc0}); // mov rax, dr0
  M.S.seg(SegReg::CS) = Segment{kSelUserCode64, 0, 0xffffffff, 0xfb | Segment::L | Segment::G};
  M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
  M.Cpu_.modeChanged();
  M.run();
  EXPECT_EQ(M.S.Rip, handlerOf(vec::GP));
}

// --- single-step, BTF, MOV SS blocking, ICEBP --------------------------------------------

// TF: a trap after each instruction with DR6.BS. With IA32_DEBUGCTL.BTF, only after a
// taken branch; the #DB clears BTF (SDM Vol. 3B, "Single-Stepping on Branches").
TEST(DebugFeatures, BtfSingleStepsOnTakenBranchesOnly) {
  for (bool Btf : {false, true}) {
    TestMachine M;
    longMode(M);
    (*M.Cpu_.Msrs)[MsrSlot::IA32_DEBUGCTL] = Btf ? debugctl::BTF : 0;
    M.S.Rflags |= rflags::TF;
    // nop ; cmp eax, eax ; jne +9 (not taken) ; jmp +2 ; nop ; nop ; nop ; hlt
    M.loadCode({0x90, 0x39, 0xc0, 0x75, 0x09, 0xeb, 0x02, 0x90, 0x90, 0x90, 0xf4});
    EXPECT_EQ(M.run(), StopReason::Halted);
    EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
    EXPECT_EQ(pushedRip(M), Btf ? kCodeBase + 9 : kCodeBase + 1);
    EXPECT_EQ(M.S.Dr[6], kDr6Clear | dr6::BS);
    EXPECT_EQ((*M.Cpu_.Msrs)[MsrSlot::IA32_DEBUGCTL], 0u);
  }
}

// MOV SS / POP SS hold debug exceptions until the boundary after the next instruction
// (SDM Vol. 3A, "Masking Exceptions and Interrupts When Switching Stacks"): the
// single-step trap of the MOV SS is taken after the NOP that follows it, one #DB.
TEST(DebugFeatures, MovSsHoldsTheSingleStepTrapForOneInstruction) {
  TestMachine M;
  longMode(M);
  M.S.Rflags |= rflags::TF;
  M.S.Gpr[RAX] = kSelData;
  M.loadCode({0x8e, 0xd0, 0x90, 0x90, 0xf4}); // mov ss, ax ; nop ; nop ; hlt
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
  EXPECT_EQ(pushedRip(M), kCodeBase + 3);
  EXPECT_EQ(M.S.Dr[6], kDr6Clear | dr6::BS);
}

// The same for a data breakpoint on the memory operand of MOV SS (the #DB the SDM
// warns about): taken after the instruction that follows.
TEST(DebugFeatures, MovSsHoldsADataBreakpointTrapForOneInstruction) {
  TestMachine M;
  longMode(M);
  write16(M, kData, kSelData);
  setDebugRegisters(M, {{0, kData}, {7, dr7For(0, 3, 1)}});
  M.S.Gpr[RSI] = kData;
  M.loadCode({0x8e, 0x16, 0x90, 0x90, 0xf4}); // mov ss, [rsi] ; nop ; nop ; hlt
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
  EXPECT_EQ(pushedRip(M), kCodeBase + 3);
  EXPECT_EQ(M.S.Dr[6], kDr6Clear | 1);
}

// The same inhibition covers a code breakpoint on the instruction after MOV SS: it is
// not taken; one on the instruction after that is.
TEST(DebugFeatures, MovSsInhibitsTheCodeBreakpointOfTheNextInstruction) {
  TestMachine M;
  longMode(M);
  M.S.Gpr[RAX] = kSelData;
  M.loadCode({0x8e, 0xd0, 0x48, 0xff, 0xc1, 0x90, 0xf4}); // mov ss, ax ; inc rcx ; nop ; hlt
  setDebugRegisters(M, {{0, kCodeBase + 2}, {1, kCodeBase + 5},
                        {7, dr7For(0, 0, 0) | dr7For(1, 0, 0)}});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
  EXPECT_EQ(M.S.Gpr[RCX], 1u);
  EXPECT_EQ(pushedRip(M), kCodeBase + 5);
  EXPECT_EQ(M.S.Dr[6], kDr6Clear | 2);
}

// ICEBP (INT1, F1): a #DB trap through the IDT that sets no DR6 bit.
TEST(DebugFeatures, IcebpDeliversDbAsATrapWithoutDr6Bits) {
  TestMachine M;
  longMode(M);
  M.loadCode({0xf1, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
  EXPECT_EQ(pushedRip(M), kCodeBase + 1);
  EXPECT_EQ(M.S.Dr[6], kDr6Clear);
}

// RESET leaves DR7 = 400H: nothing stays armed.
TEST(DebugFeatures, ResetDisarmsEveryBreakpoint) {
  TestMachine M;
  longMode(M);
  setDebugRegisters(M, {{0, kData}, {7, dr7For(0, 1, 0) | dr7For(1, 0, 0)}});
  EXPECT_TRUE(M.Cpu_.Debug.DataArmed);
  EXPECT_TRUE(M.Cpu_.Debug.InsnArmed);
  M.Cpu_.reset();
  EXPECT_FALSE(M.Cpu_.Debug.DataArmed);
  EXPECT_FALSE(M.Cpu_.Debug.InsnArmed);
  EXPECT_EQ(M.S.Dr[7], 0x400u);
}

} // namespace
