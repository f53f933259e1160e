// SDM Vol. 3A, Interrupt and Exception Handling: stack frames in 64-bit, 32-bit and
// real mode, IST and privilege-change stack switches, error codes, #DF escalation, triple
// fault, gate DPL checks for software interrupts, external interrupts, NMI blocking and
// the STI / MOV SS interrupt shadows.
#include "tests/cpu/system_test_support.h"

#include "cpu/exceptions.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr uint64_t kHandler = 0x101000; // "hlt" for every vector unless a test says else
constexpr uint64_t kTss = 0x5000;

// 64-bit mode with interrupt gates for vectors 0..31 and 0x80 (DPL 0) to kHandler + 16*v,
// each handler a HLT, and a TSS whose RSP0 is 0x88000 and IST1 is 0x90000.
struct LongFixture {
  TestMachine M;
  LongFixture() {
    M.setupLongMode();
    M.S.Idtr = TableReg{kIdtBase, 0xfff};
    for (unsigned V = 0; V < 256; ++V) {
      gate64(M, kIdtBase + 16 * V, kSelCode64, kHandler + 16 * V, 0xe, 0);
      uint8_t Hlt = 0xf4;
      M.write(kHandler + 16 * V, &Hlt, 1);
    }
    write64(M, kTss + 4, 0x88000);  // RSP0
    write64(M, kTss + 36, 0x90000); // IST1
    M.S.Tr = Segment{kSelTss, kTss, 0x67, 0x8b};
  }
  uint64_t stack(unsigned K) { return M.read64(M.S.Gpr[RSP] + 8 * K); }
  void enterUser() {
    M.S.seg(SegReg::CS) = Segment{kSelUserCode64, 0, 0xffffffff, 0xfb | Segment::L | Segment::G};
    M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
    M.S.Gpr[RSP] = 0x70000;
    M.Cpu_.Mmu.flushTlb();
    M.Cpu_.modeChanged();
  }
};

} // namespace

TEST(InterruptAndExceptionHandling, LongModeUd2PushesFaultFrameWithRfSet) {
  LongFixture F;
  F.M.loadCode({0x0f, 0x0b}); // ud2
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::UD + 1);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x80000u - 40);
  EXPECT_EQ(F.stack(0), kCodeBase);
  EXPECT_EQ(F.stack(1), kSelCode64);
  EXPECT_EQ(F.stack(2), rflags::Fixed1 | rflags::RF);
  EXPECT_EQ(F.stack(3), 0x80000u);
  EXPECT_EQ(F.stack(4), kSelData);
}

TEST(InterruptAndExceptionHandling, LongModeGpOnBadSelectorPushesSelectorErrorCode) {
  LongFixture F;
  // mov ax, 0x48 ; mov ds, ax  (GDT slot 0x48 is empty: a system type-0 descriptor)
  F.M.loadCode({0x66, 0xb8, 0x48, 0x00, 0x8e, 0xd8});
  F.M.S.Gdtr.Limit = 0x4f;
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::GP + 1);
  EXPECT_EQ(F.stack(0), 0x48u);
  EXPECT_EQ(F.stack(1), kCodeBase + 4);
  EXPECT_EQ(F.stack(2), kSelCode64);
}

TEST(InterruptAndExceptionHandling, LongModeNotPresentDataSegmentRaisesNp) {
  LongFixture F;
  write64(F.M, kGdtBase + 0x48, segDesc(0, 0xfffff, 0x13, 0xc)); // data, P=0
  F.M.S.Gdtr.Limit = 0x4f;
  F.M.loadCode({0x66, 0xb8, 0x48, 0x00, 0x8e, 0xd8});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::NP + 1);
  EXPECT_EQ(F.stack(0), 0x48u);
}

TEST(InterruptAndExceptionHandling, LongModeNonCanonicalPushRaisesSsZero) {
  LongFixture F;
  // mov rsp, 0x800000000008 ; push rax  (the push lands at a non-canonical address)
  F.M.loadCode({0x48, 0xbc, 8, 0, 0, 0, 0, 0x80, 0, 0, 0x50});
  gate64(F.M, kIdtBase + 16 * vec::SS, kSelCode64, kHandler + 16 * vec::SS, 0xe, 0, 1);
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::SS + 1);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x90000u - 48);
  EXPECT_EQ(F.stack(0), 0u);            // error code
  EXPECT_EQ(F.stack(1), kCodeBase + 10); // the push
  EXPECT_EQ(F.stack(4), 0x800000000008u);
}

// Flat 64-bit memory operands (cpu/memory.h, flat64Operand: a general-register base in
// ES/CS/SS/DS) skip effectiveAddress's and segmentToLinear's tests on a TLB hit; a
// non-canonical address never hits, and the full path raises what the SDM says (Vol. 3A,
// "Limit Checking in 64-Bit Mode"): #SS(0) for an SS reference (base RBP), else #GP(0),
// with the instruction not executed.
TEST(InterruptAndExceptionHandling, LongModeNonCanonicalFlatOperandsFault) {
  struct Case {
    std::vector<uint8_t> Code;
    uint8_t Vector;
  };
  const Case Cases[] = {
      // mov rbp, 0x800000000000 ; mov rax, [rbp+8]
      {{0x48, 0xbd, 0, 0, 0, 0, 0, 0x80, 0, 0, 0x48, 0x8b, 0x45, 0x08}, vec::SS},
      // mov rbx, 0x800000000000 ; mov rax, [rbx+rcx*8]
      {{0x48, 0xbb, 0, 0, 0, 0, 0, 0x80, 0, 0, 0x48, 0x8b, 0x04, 0xcb}, vec::GP},
      // mov rbx, 0x800000000000 ; add [rbx+rcx*8], eax
      {{0x48, 0xbb, 0, 0, 0, 0, 0, 0x80, 0, 0, 0x01, 0x04, 0xcb}, vec::GP},
      // mov rbx, 0x800000000000 ; mov byte [rbx], 1
      {{0x48, 0xbb, 0, 0, 0, 0, 0, 0x80, 0, 0, 0xc6, 0x03, 0x01}, vec::GP},
      // mov rbx, 0x800000000000 ; movzx eax, word [rbx+0x10]
      {{0x48, 0xbb, 0, 0, 0, 0, 0, 0x80, 0, 0, 0x0f, 0xb7, 0x43, 0x10}, vec::GP},
      // mov rbx, 0x800000000000 ; call [rbx+8]: nothing pushed (RSP checked below)
      {{0x48, 0xbb, 0, 0, 0, 0, 0, 0x80, 0, 0, 0xff, 0x53, 0x08}, vec::GP},
      // mov rbp, 0x800000000000 ; call [rbp+8]
      {{0x48, 0xbd, 0, 0, 0, 0, 0, 0x80, 0, 0, 0xff, 0x55, 0x08}, vec::SS},
  };
  for (const Case &K : Cases) {
    LongFixture F;
    F.M.loadCode(K.Code);
    gate64(F.M, kIdtBase + 16 * vec::SS, kSelCode64, kHandler + 16 * vec::SS, 0xe, 0, 1);
    F.M.S.Gpr[RAX] = 0x1234;
    const uint64_t Sp = F.M.S.Gpr[RSP];
    EXPECT_EQ(F.M.run(), StopReason::Halted);
    EXPECT_EQ(F.M.S.Rip, kHandler + 16 * K.Vector + 1);
    EXPECT_EQ(F.stack(0), 0u);             // error code
    EXPECT_EQ(F.stack(1), kCodeBase + 10); // the memory instruction
    EXPECT_EQ(F.stack(4), Sp);             // RSP as the fault found it: nothing pushed
    EXPECT_EQ(F.M.S.Gpr[RAX], 0x1234u);    // not loaded
  }
}

// Near branches in 64-bit mode check their target for canonicality (SDM Vol. 2A, CALL,
// RET, Jcc: #GP(0) "if the target offset is non-canonical"), before anything is pushed or
// popped; a target that shares bits 63:47 with RIP skips the full check (cpu/exec.h,
// sameCanonicalHalf), every other one takes it.
namespace {
/// Runs Code in 64-bit mode and expects #GP(0) on the instruction at kCodeBase + At with
/// RSP, as the fault found it, at its starting value + SpDelta.
void expectGpAt(std::vector<uint8_t> Code, uint64_t At, int64_t SpDelta) {
  LongFixture F;
  F.M.loadCode(Code);
  const uint64_t Sp = F.M.S.Gpr[RSP];
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::GP + 1);
  EXPECT_EQ(F.stack(0), 0u);             // error code
  EXPECT_EQ(F.stack(1), kCodeBase + At); // the faulting instruction
  EXPECT_EQ(F.stack(4), Sp + SpDelta);
}
} // namespace

TEST(InterruptAndExceptionHandling, LongModeCallToNonCanonicalTargetRaisesGpBeforePushing) {
  // mov rax, 0x800000000000 ; call rax: nothing is pushed.
  expectGpAt({0x48, 0xb8, 0, 0, 0, 0, 0, 0x80, 0, 0, 0xff, 0xd0}, 10, 0);
}

TEST(InterruptAndExceptionHandling, LongModeRetToNonCanonicalAddressRaisesGpWithoutPopping) {
  // mov rax, 0xffff7fffffffffff ; push rax ; ret: the return address stays on the stack.
  expectGpAt({0x48, 0xb8, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0x50, 0xc3}, 11, -8);
}

TEST(InterruptAndExceptionHandling, LongModeJccIntoTheUpperCanonicalHalfFetchesThere) {
  LongFixture F;
  // xor eax, eax ; jz -0x200000 (rel32): from the lower half to 0xfffffffffff00008, a
  // canonical address (no #GP) that the identity map does not map (a #PF on the fetch).
  F.M.loadCode({0x31, 0xc0, 0x0f, 0x84, 0x00, 0x00, 0xe0, 0xff});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::PF + 1);
  EXPECT_EQ(F.M.S.Cr2, 0xfffffffffff00008u);
  EXPECT_EQ(F.stack(1), 0xfffffffffff00008u); // the fault is on the fetch at the target
}

TEST(InterruptAndExceptionHandling, PageFaultLoadsCr2AndPushesErrorCode) {
  LongFixture F;
  // mov rax, [0x200000000]  (beyond the identity map: PDPTE not present)
  F.M.loadCode({0x48, 0xa1, 0, 0, 0, 0, 2, 0, 0, 0});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::PF + 1);
  EXPECT_EQ(F.M.S.Cr2, 0x200000000u);
  EXPECT_EQ(F.stack(0), 0u);
  EXPECT_EQ(F.stack(1), kCodeBase);
  EXPECT_EQ(F.stack(3), rflags::Fixed1 | rflags::RF);
}

TEST(InterruptAndExceptionHandling, IstGateSwitchesStackAndKeepsSs) {
  LongFixture F;
  gate64(F.M, kIdtBase + 16 * vec::UD, kSelCode64, kHandler + 16 * vec::UD, 0xe, 0, 1);
  F.M.loadCode({0x0f, 0x0b});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x90000u - 40);
  EXPECT_EQ(F.stack(3), 0x80000u);
  EXPECT_EQ(F.M.S.ss().Selector, kSelData);
}

TEST(InterruptAndExceptionHandling, InterruptStackIsAlignedTo16Bytes) {
  LongFixture F;
  F.M.loadCode({0x0f, 0x0b});
  F.M.S.Gpr[RSP] = 0x80008;
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x80000u - 40);
  EXPECT_EQ(F.stack(3), 0x80008u);
}

TEST(InterruptAndExceptionHandling, UserToKernelFrameUsesRsp0AndNullSs) {
  LongFixture F;
  F.enterUser();
  F.M.loadCode({0x0f, 0x0b});
  F.enterUser();
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x88000u - 40);
  EXPECT_EQ(F.stack(0), kCodeBase);
  EXPECT_EQ(F.stack(1), kSelUserCode64);
  EXPECT_EQ(F.stack(2), rflags::Fixed1 | rflags::RF);
  EXPECT_EQ(F.stack(3), 0x70000u);
  EXPECT_EQ(F.stack(4), kSelUserData);
  EXPECT_EQ(F.M.S.ss().Selector, 0u);
  EXPECT_TRUE(F.M.S.ss().Attr & Segment::Unusable);
  EXPECT_EQ(F.M.S.cpl(), 0u);
  EXPECT_EQ(F.M.S.cs().Selector, kSelCode64);
}

TEST(InterruptAndExceptionHandling, SoftwareIntAboveGateDplRaisesGpWithIdtErrorCode) {
  LongFixture F;
  F.M.loadCode({0xcd, 0x80}); // int 0x80, gate DPL 0
  F.enterUser();
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::GP + 1);
  EXPECT_EQ(F.stack(0), 0x80u * 8 + 2);
  EXPECT_EQ(F.stack(1), kCodeBase); // fault: RIP of the INT
}

TEST(InterruptAndExceptionHandling, SoftwareIntThroughDpl3GatePushesNextRip) {
  LongFixture F;
  gate64(F.M, kIdtBase + 16 * 0x80, kSelCode64, kHandler + 16 * 0x80, 0xf, 3);
  F.M.loadCode({0xcd, 0x80});
  F.enterUser();
  F.M.S.Rflags |= rflags::IF;
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * 0x80 + 1);
  EXPECT_EQ(F.stack(0), kCodeBase + 2);
  EXPECT_EQ(F.stack(2), rflags::Fixed1 | rflags::IF); // software INT: no RF
  EXPECT_TRUE(F.M.S.Rflags & rflags::IF);              // trap gate keeps IF
}

TEST(InterruptAndExceptionHandling, Int3PushesNextRip) {
  LongFixture F;
  F.M.loadCode({0xcc});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::BP + 1);
  EXPECT_EQ(F.stack(0), kCodeBase + 1);
  EXPECT_EQ(F.stack(2), rflags::Fixed1);
}

TEST(InterruptAndExceptionHandling, GpDuringGpDeliveryBecomesDoubleFault) {
  LongFixture F;
  // #GP's gate is not present: delivering #GP raises #NP (contributory) -> #DF.
  gate64(F.M, kIdtBase + 16 * vec::GP, kSelCode64, kHandler + 16 * vec::GP, 0xe, 0, 0, false);
  F.M.S.Gdtr.Limit = 0x4f;
  F.M.loadCode({0x66, 0xb8, 0x48, 0x00, 0x8e, 0xd8});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::DF + 1);
  EXPECT_EQ(F.stack(0), 0u);
  EXPECT_EQ(F.stack(1), kCodeBase + 4);
}

TEST(InterruptAndExceptionHandling, UdWithUnusableIdtEndsInTripleFaultShutdown) {
  LongFixture F;
  F.M.S.Idtr.Limit = 0;
  F.M.loadCode({0x0f, 0x0b});
  EXPECT_EQ(F.M.run(), StopReason::Shutdown);
  EXPECT_EQ(F.M.S.Rip, kCodeBase);
}

TEST(InterruptAndExceptionHandling, ExternalInterruptDeliveredAtNextBoundary) {
  LongFixture F;
  ScriptedIntr Pic(F.M.Cpu_, 0, 0x30);
  F.M.Cpu_.Intr = &Pic;
  F.M.S.Rflags |= rflags::IF;
  F.M.loadCode({0x90, 0x90, 0xf4});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * 0x30 + 1);
  EXPECT_EQ(F.stack(0), kCodeBase);
  EXPECT_EQ(F.stack(2), rflags::Fixed1 | rflags::IF);
  EXPECT_FALSE(F.M.S.Rflags & rflags::IF);
}

TEST(InterruptAndExceptionHandling, StiShadowDefersInterruptByOneInstruction) {
  LongFixture F;
  ScriptedIntr Pic(F.M.Cpu_, 0, 0x30);
  F.M.Cpu_.Intr = &Pic;
  // sti ; nop ; nop ; hlt
  F.M.loadCode({0xfb, 0x90, 0x90, 0xf4});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * 0x30 + 1);
  EXPECT_EQ(Pic.AckRetired, 2u);
  EXPECT_EQ(F.stack(0), kCodeBase + 2);
}

TEST(InterruptAndExceptionHandling, StiHltWakesForPendingInterrupt) {
  LongFixture F;
  ScriptedIntr Pic(F.M.Cpu_, 0, 0x30);
  F.M.Cpu_.Intr = &Pic;
  // sti ; hlt ; ud2
  gate64(F.M, kIdtBase + 16 * 0x30, kSelCode64, kHandler + 16 * 0x30, 0xe, 0);
  F.M.loadCode({0xfb, 0xf4, 0x0f, 0x0b});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * 0x30 + 1);
  EXPECT_EQ(F.stack(0), kCodeBase + 2);
}

TEST(InterruptAndExceptionHandling, MovSsShadowCoversExactlyTheNextInstruction) {
  LongFixture F;
  ScriptedIntr Pic(F.M.Cpu_, 1, 0x30);
  F.M.Cpu_.Intr = &Pic;
  F.M.S.Rflags |= rflags::IF;
  F.M.S.Gpr[RAX] = kSelData;
  // mov ss, ax ; nop ; nop ; nop ; hlt
  F.M.loadCode({0x8e, 0xd0, 0x90, 0x90, 0x90, 0xf4});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(Pic.AckRetired, 2u);
  EXPECT_EQ(F.stack(0), kCodeBase + 3);
}

TEST(InterruptAndExceptionHandling, NmiBlocksFurtherNmisUntilIret) {
  LongFixture F;
  // NMI handler: iretq ; the main code: nop ; nop ; hlt
  uint8_t Iretq[] = {0x48, 0xcf};
  F.M.write(kHandler + 16 * vec::NMI, Iretq, 2);
  F.M.loadCode({0x90, 0x90, 0xf4});
  F.M.Cpu_.NmiPending = true;
  EXPECT_EQ(F.M.run(1), StopReason::InsnLimit); // NMI delivered, then the IRETQ ran
  EXPECT_FALSE(F.M.Cpu_.NmiBlocked);
  EXPECT_EQ(F.M.S.Rip, kCodeBase);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x80000u);
  F.M.Cpu_.NmiPending = true;
  F.M.Cpu_.NmiBlocked = true;
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_TRUE(F.M.Cpu_.NmiPending);
  EXPECT_EQ(F.M.S.Rip, kCodeBase + 3);
}

TEST(InterruptAndExceptionHandling, DivideErrorIsDeliveredAsFault) {
  LongFixture F;
  // xor ecx, ecx ; div ecx
  F.M.loadCode({0x31, 0xc9, 0xf7, 0xf1});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::DE + 1);
  EXPECT_EQ(F.stack(0), kCodeBase + 2);
}

TEST(InterruptAndExceptionHandling, SingleStepTrapSetsDr6Bs) {
  LongFixture F;
  F.M.loadCode({0x90, 0x90});
  F.M.S.Rflags |= rflags::TF;
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::DB + 1);
  EXPECT_EQ(F.stack(0), kCodeBase + 1);
  EXPECT_EQ(F.stack(2), rflags::Fixed1 | rflags::TF);
  EXPECT_TRUE(F.M.S.Dr[6] & (1u << 14));
  EXPECT_FALSE(F.M.S.Rflags & rflags::TF);
}

// --- 32-bit protected mode -------------------------------------------------------------

namespace {
struct Prot32Fixture {
  TestMachine M;
  Prot32Fixture() {
    M.setupProtected32();
    M.S.Idtr = TableReg{kIdtBase, 0x7ff};
    for (unsigned V = 0; V < 256; ++V) {
      write64(M, kIdtBase + 8 * V, gate32(kSelCode32, uint32_t(kHandler + 16 * V), 0xe, 0));
      uint8_t Hlt = 0xf4;
      M.write(kHandler + 16 * V, &Hlt, 1);
    }
    // 32-bit TSS: ESP0 = 0x88000, SS0 = data.
    write32(M, kTss + 4, 0x88000);
    write16(M, kTss + 8, kSelData);
    M.S.Tr = Segment{kSelTss, kTss, 0x67, 0x8b};
  }
  uint32_t stack(unsigned K) { return read32(M, M.S.Gpr[RSP] + 4 * K); }
};
} // namespace

TEST(InterruptAndExceptionHandling, Protected32UdPushesEipCsEflags) {
  Prot32Fixture F;
  F.M.loadCode({0x0f, 0x0b});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::UD + 1);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x80000u - 12);
  EXPECT_EQ(F.stack(0), kCodeBase);
  EXPECT_EQ(F.stack(1), kSelCode32);
  EXPECT_EQ(F.stack(2), rflags::Fixed1 | rflags::RF);
}

TEST(InterruptAndExceptionHandling, Protected32GpPushesSelectorErrorCode) {
  Prot32Fixture F;
  F.M.S.Gdtr.Limit = 0x4f;
  F.M.loadCode({0x66, 0xb8, 0x48, 0x00, 0x8e, 0xd8}); // mov ax, 0x48 ; mov ds, ax
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x80000u - 16);
  EXPECT_EQ(F.stack(0), 0x48u);
  EXPECT_EQ(F.stack(1), kCodeBase + 4);
}

TEST(InterruptAndExceptionHandling, Protected32UserInterruptSwitchesToTssStack) {
  Prot32Fixture F;
  write64(F.M, kIdtBase + 8 * 0x80, gate32(kSelCode32, uint32_t(kHandler + 16 * 0x80), 0xe, 3));
  F.M.loadCode({0xcd, 0x80});
  F.M.S.seg(SegReg::CS) = Segment{kSelUserCode32, 0, 0xffffffff, 0xfb | Segment::DB | Segment::G};
  F.M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
  F.M.S.Gpr[RSP] = 0x70000;
  F.M.Cpu_.modeChanged();
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x88000u - 20);
  EXPECT_EQ(F.stack(0), kCodeBase + 2);
  EXPECT_EQ(F.stack(1), kSelUserCode32);
  EXPECT_EQ(F.stack(2), rflags::Fixed1);
  EXPECT_EQ(F.stack(3), 0x70000u);
  EXPECT_EQ(F.stack(4), kSelUserData);
  EXPECT_EQ(F.M.S.ss().Selector, kSelData);
  EXPECT_EQ(F.M.S.cpl(), 0u);
}

TEST(InterruptAndExceptionHandling, Protected32IntoRaisesOverflowTrap) {
  Prot32Fixture F;
  F.M.loadCode({0xce}); // into
  F.M.S.Rflags |= rflags::OF;
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::OF + 1);
  EXPECT_EQ(F.stack(0), kCodeBase + 1);
}

TEST(InterruptAndExceptionHandling, Protected32BadTssStackSegmentRaisesTs) {
  Prot32Fixture F;
  write64(F.M, kIdtBase + 8 * 0x80, gate32(kSelCode32, uint32_t(kHandler + 16 * 0x80), 0xe, 3));
  write16(F.M, kTss + 8, kSelCode32); // SS0 names a code segment
  // #TS goes to a conforming DPL-0 code segment, so it runs at CPL 3 on the user stack.
  write64(F.M, kGdtBase + 0x48, segDesc(0, 0xfffff, 0x9f, 0xc));
  F.M.S.Gdtr.Limit = 0x4f;
  write64(F.M, kIdtBase + 8 * vec::TS, gate32(0x48, uint32_t(kHandler + 16 * vec::TS), 0xe, 0));
  uint8_t Spin[] = {0xeb, 0xfe}; // jmp $
  F.M.write(kHandler + 16 * vec::TS, Spin, 2);
  F.M.loadCode({0xcd, 0x80});
  F.M.S.seg(SegReg::CS) = Segment{kSelUserCode32, 0, 0xffffffff, 0xfb | Segment::DB | Segment::G};
  F.M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
  F.M.S.Gpr[RSP] = 0x70000;
  F.M.Cpu_.modeChanged();
  EXPECT_EQ(F.M.run(10), StopReason::InsnLimit);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::TS);
  EXPECT_EQ(F.M.S.cs().Selector, 0x4bu); // RPL = CPL 3
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x70000u - 16);
  EXPECT_EQ(F.stack(0), uint32_t(kSelCode32)); // #TS(SS0 selector), EXT=0 (INT n)
  EXPECT_EQ(F.stack(1), kCodeBase);
  EXPECT_EQ(F.stack(2), kSelUserCode32);
}

// --- real-address mode -----------------------------------------------------------------

namespace {
struct RealFixture {
  TestMachine M;
  RealFixture(std::initializer_list<uint8_t> Code) {
    M.setupReal();
    std::vector<uint8_t> Bytes(Code);
    M.write(0x10000, Bytes.data(), Bytes.size());
    M.S.seg(SegReg::CS) = Segment{0x1000, 0x10000, 0xffff, 0x9b};
    M.S.Rip = 0;
    M.S.Gpr[RSP] = 0x8000;
    M.Cpu_.modeChanged();
    uint8_t Hlt = 0xf4;
    for (unsigned V = 0; V < 256; ++V) {
      write32(M, 4 * V, (0x2000u << 16) | (V * 4)); // 2000:v*4
      M.write(0x20000 + V * 4, &Hlt, 1);
    }
  }
};
} // namespace

TEST(InterruptAndExceptionHandling, RealModeIntVectorsThroughIvt) {
  RealFixture F({0xcd, 0x21}); // int 0x21
  F.M.S.Rflags |= rflags::IF;
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.cs().Selector, 0x2000u);
  EXPECT_EQ(F.M.S.cs().Base, 0x20000u);
  EXPECT_EQ(F.M.S.Rip, 0x21u * 4 + 1);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x8000u - 6);
  EXPECT_EQ(read16(F.M, 0x7ffa), 2u);
  EXPECT_EQ(read16(F.M, 0x7ffc), 0x1000u);
  EXPECT_EQ(read16(F.M, 0x7ffe), rflags::Fixed1 | rflags::IF);
  EXPECT_FALSE(F.M.S.Rflags & rflags::IF);
}

TEST(InterruptAndExceptionHandling, RealModeUdPushesFaultingIpWithoutErrorCode) {
  RealFixture F({0x90, 0x0f, 0x0b}); // nop ; ud2
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, 6u * 4 + 1);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x8000u - 6);
  EXPECT_EQ(read16(F.M, 0x7ffa), 1u);
  EXPECT_EQ(read16(F.M, 0x7ffc), 0x1000u);
}

TEST(InterruptAndExceptionHandling, RealModeIretReturnsToInterruptedCode) {
  RealFixture F({0xcd, 0x21, 0xf4}); // int 0x21 ; hlt
  uint8_t Iret = 0xcf;
  F.M.write(0x20000 + 0x21 * 4, &Iret, 1);
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.cs().Selector, 0x1000u);
  EXPECT_EQ(F.M.S.Rip, 3u);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x8000u);
}

// SDM Vol. 3A, "Interrupt 17—Alignment Check Exception (#AC)": with CR0.AM = 1 and
// RFLAGS.AC = 1, a misaligned data or stack reference at CPL 3 faults with error code 0
// (before paging); any of the three conditions missing, or a byte access, does not.
namespace {
struct AlignCase {
  bool Am, Ac, User;
  uint64_t Address;
  std::vector<uint8_t> Load; ///< the access, then ud2
};
/// Runs Load with RBX = Address; returns the vector that stopped it.
unsigned alignRun(const AlignCase &C, uint64_t *ErrorCode = nullptr, uint64_t *Flags = nullptr) {
  LongFixture F;
  std::vector<uint8_t> Code = C.Load;
  Code.insert(Code.end(), {0x0f, 0x0b}); // ud2
  F.M.loadCode(Code);
  if (C.User)
    F.enterUser();
  F.M.S.Cr0 = C.Am ? (F.M.S.Cr0 | cr0::AM) : (F.M.S.Cr0 & ~uint64_t(cr0::AM));
  if (C.Ac)
    F.M.S.Rflags |= rflags::AC;
  F.M.S.Gpr[RBX] = C.Address;
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  const unsigned Vector = unsigned((F.M.S.Rip - 1 - kHandler) / 16);
  if (ErrorCode)
    *ErrorCode = F.stack(0);
  if (Flags)
    *Flags = F.stack(3);
  return Vector;
}
const std::vector<uint8_t> kMovEaxFromRbx = {0x8b, 0x03}; // mov eax, [rbx]
} // namespace

TEST(InterruptAndExceptionHandling, MisalignedLoadAtCpl3WithAmAndAcRaisesAcZero) {
  uint64_t Err = ~0ull, Flags = 0;
  EXPECT_EQ(alignRun({true, true, true, 0x60002, kMovEaxFromRbx}, &Err, &Flags),
            unsigned(vec::AC));
  EXPECT_EQ(Err, 0u);
  EXPECT_EQ(Flags, rflags::Fixed1 | rflags::AC | rflags::RF); // the faulting RFLAGS
}

TEST(InterruptAndExceptionHandling, AlignmentCheckNeedsAmAcCpl3AndAMisalignedWord) {
  EXPECT_EQ(alignRun({true, true, true, 0x60004, kMovEaxFromRbx}), unsigned(vec::UD));
  EXPECT_EQ(alignRun({false, true, true, 0x60002, kMovEaxFromRbx}), unsigned(vec::UD));
  EXPECT_EQ(alignRun({true, false, true, 0x60002, kMovEaxFromRbx}), unsigned(vec::UD));
  EXPECT_EQ(alignRun({true, true, false, 0x60002, kMovEaxFromRbx}), unsigned(vec::UD));
  EXPECT_EQ(alignRun({true, true, true, 0x60001, {0x8a, 0x03}}), unsigned(vec::UD)); // mov al
  // Word (2), quadword (8) and a read-modify-write store are checked too.
  EXPECT_EQ(alignRun({true, true, true, 0x60001, {0x66, 0x8b, 0x03}}), unsigned(vec::AC));
  EXPECT_EQ(alignRun({true, true, true, 0x60004, {0x48, 0x8b, 0x03}}), unsigned(vec::AC));
  EXPECT_EQ(alignRun({true, true, true, 0x60002, {0x01, 0x03}}), unsigned(vec::AC)); // add [rbx], eax
}

TEST(InterruptAndExceptionHandling, MisalignedStackPushAtCpl3RaisesAc) {
  // push rbx with RSP = 0x70001: the stack reference is checked like any other.
  LongFixture F;
  F.M.loadCode({0x53, 0x0f, 0x0b});
  F.enterUser();
  F.M.S.Gpr[RSP] = 0x70001;
  F.M.S.Cr0 |= cr0::AM;
  F.M.S.Rflags |= rflags::AC;
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kHandler + 16 * vec::AC + 1);
  EXPECT_EQ(F.stack(1), kCodeBase); // the push did not complete
  EXPECT_EQ(F.stack(4), 0x70001u);
}
