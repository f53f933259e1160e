// SDM Vol. 3A, Protection: privilege checks on segment loads and control transfers,
// call gates, IRET to an outer level, fast system calls, descriptor-probing instructions,
// IOPL-sensitive instructions and the I/O permission bitmap.
#include "tests/cpu/system_test_support.h"

#include "cpu/binders.h"
#include "cpu/cost_model.h"
#include "cpu/decode.h"
#include "cpu/msrs.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr uint64_t kKernel = 0x101000;
constexpr uint64_t kUser = 0x100100;
constexpr uint64_t kTss = 0x5000;

void put(TestMachine &M, uint64_t At, std::initializer_list<uint8_t> Bytes) {
  std::vector<uint8_t> V(Bytes);
  M.write(At, V.data(), V.size());
}

// IDT: every vector to an interrupt gate whose handler is "hlt" at kKernel + 16*v + 0x800.
void longModeIdt(TestMachine &M) {
  M.S.Idtr = TableReg{kIdtBase, 0xfff};
  for (unsigned V = 0; V < 256; ++V) {
    gate64(M, kIdtBase + 16 * V, kSelCode64, kKernel + 0x800 + 16 * V, 0xe, 0);
    put(M, kKernel + 0x800 + 16 * V, {0xf4});
  }
  write64(M, kTss + 4, 0x88000);
  M.S.Tr = Segment{kSelTss, kTss, 0x67, 0x8b};
}
uint64_t handlerOf(uint8_t V) { return kKernel + 0x800 + 16 * V; }

void userMode64(TestMachine &M) {
  M.S.seg(SegReg::CS) = Segment{kSelUserCode64, 0, 0xffffffff, 0xfb | Segment::L | Segment::G};
  M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
  M.S.Gpr[RSP] = 0x70000;
  M.Cpu_.modeChanged();
}

} // namespace

TEST(Protection, IretqToCpl3LoadsUserSegmentsAndStack) {
  TestMachine M;
  M.setupLongMode();
  longModeIdt(M);
  M.loadCode({
      0x6a, 0x33,                   // push 0x33
      0x68, 0x00, 0x00, 0x07, 0x00, // push 0x70000
      0x68, 0x02, 0x02, 0x00, 0x00, // push 0x202
      0x6a, 0x2b,                   // push 0x2b
      0x68, 0x00, 0x01, 0x10, 0x00, // push 0x100100
      0x48, 0xcf,                   // iretq
  });
  put(M, kUser, {0xb8, 0x05, 0x00, 0x00, 0x00, 0xf4}); // mov eax, 5 ; hlt (#GP at CPL 3)
  EXPECT_EQ(M.run(6), StopReason::InsnLimit);
  EXPECT_EQ(M.S.cpl(), 3u);
  EXPECT_EQ(M.S.cs().Selector, kSelUserCode64);
  EXPECT_EQ(M.S.ss().Selector, kSelUserData);
  EXPECT_EQ(M.S.Gpr[RSP], 0x70000u);
  EXPECT_EQ(M.S.Rip, kUser);
  EXPECT_EQ(M.S.Rflags, 0x202u);
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], 5u);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::GP) + 1);
  EXPECT_EQ(M.read64(0x88000 - 48), 0u);          // #GP(0)
  EXPECT_EQ(M.read64(0x88000 - 40), kUser + 5);   // the HLT
  EXPECT_EQ(M.read64(0x88000 - 32), kSelUserCode64);
}

TEST(Protection, SyscallSysretRoundTrip) {
  TestMachine M;
  M.setupLongMode();
  longModeIdt(M);
  MsrState &Msr = *M.Cpu_.Msrs;
  Msr[MsrSlot::IA32_STAR] = (uint64_t(0x18) << 48) | (uint64_t(kSelCode64) << 32);
  Msr[MsrSlot::IA32_LSTAR] = kKernel;
  Msr[MsrSlot::IA32_FMASK] = rflags::IF;
  M.loadCode({
      0x48, 0xc7, 0xc1, 0x00, 0x01, 0x10, 0x00, // mov rcx, 0x100100
      0x49, 0xc7, 0xc3, 0x02, 0x02, 0x00, 0x00, // mov r11, 0x202
      0x48, 0x0f, 0x07,                         // sysretq
  });
  put(M, kUser, {0x0f, 0x05}); // syscall
  put(M, kKernel, {0xf4});     // hlt
  EXPECT_EQ(M.run(3), StopReason::InsnLimit);
  EXPECT_EQ(M.S.cs().Selector, 0x2bu);
  EXPECT_EQ(M.S.ss().Selector, 0x23u);
  EXPECT_EQ(M.S.cpl(), 3u);
  EXPECT_EQ(M.S.Rip, kUser);
  EXPECT_EQ(M.S.Rflags, 0x202u);
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kKernel + 1);
  EXPECT_EQ(M.S.Gpr[RCX], kUser + 2);
  EXPECT_EQ(M.S.Gpr[R11], 0x202u);
  EXPECT_EQ(M.S.cs().Selector, kSelCode64);
  EXPECT_EQ(M.S.ss().Selector, kSelData);
  EXPECT_EQ(M.S.cpl(), 0u);
  EXPECT_EQ(M.S.Rflags, 0x2u);
}

TEST(Protection, SysretToNonCanonicalRcxRaisesGpAtCpl0) {
  TestMachine M;
  M.setupLongMode();
  longModeIdt(M);
  // mov rcx, 0x800000000000 ; sysretq
  M.loadCode({0x48, 0xb9, 0, 0, 0, 0, 0, 0x80, 0, 0, 0x48, 0x0f, 0x07});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::GP) + 1);
  EXPECT_EQ(M.read64(0x80000 - 40), kCodeBase + 10);
  EXPECT_EQ(M.read64(0x80000 - 32), kSelCode64);
}

TEST(Protection, SyscallWithSceClearRaisesUd) {
  TestMachine M;
  M.setupLongMode();
  longModeIdt(M);
  M.S.Efer &= ~efer::SCE;
  M.loadCode({0x0f, 0x05});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::UD) + 1);
}

TEST(Protection, SysexitSysenterRoundTrip) {
  TestMachine M;
  M.setupProtected32();
  MsrState &Msr = *M.Cpu_.Msrs;
  Msr[MsrSlot::IA32_SYSENTER_CS] = kSelCode32;
  Msr[MsrSlot::IA32_SYSENTER_ESP] = 0x88000;
  Msr[MsrSlot::IA32_SYSENTER_EIP] = kKernel;
  M.loadCode({
      0xba, 0x00, 0x01, 0x10, 0x00, // mov edx, 0x100100
      0xb9, 0x00, 0x00, 0x07, 0x00, // mov ecx, 0x70000
      0x0f, 0x35,                   // sysexit
  });
  put(M, kUser, {0x0f, 0x34}); // sysenter
  put(M, kKernel, {0xf4});
  EXPECT_EQ(M.run(3), StopReason::InsnLimit);
  EXPECT_EQ(M.S.cs().Selector, 0x2bu);
  EXPECT_EQ(M.S.ss().Selector, 0x33u);
  EXPECT_EQ(M.S.cpl(), 3u);
  EXPECT_EQ(M.S.Gpr[RSP], 0x70000u);
  EXPECT_EQ(M.S.Rip, kUser);
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.cs().Selector, kSelCode32);
  EXPECT_EQ(M.S.ss().Selector, 0x20u);
  EXPECT_EQ(M.S.Gpr[RSP], 0x88000u);
  EXPECT_EQ(M.S.Rip, kKernel + 1);
  EXPECT_EQ(M.S.cpl(), 0u);
}

namespace {
// 32-bit protected mode at CPL 3 with a 32-bit TSS (SS0:ESP0 = data:0x88000) and a call
// gate at GDT selector 0x50 (DPL 3, two parameters) to kKernel in the DPL-0 code segment.
struct CallGateFixture {
  TestMachine M;
  CallGateFixture() {
    M.setupProtected32();
    write64(M, kGdtBase + 0x50, gate32(kSelCode32, uint32_t(kKernel), 0xc, 3, true, 2));
    M.S.Gdtr.Limit = 0x57;
    write32(M, kTss + 4, 0x88000);
    write16(M, kTss + 8, kSelData);
    M.S.Tr = Segment{kSelTss, kTss, 0x67, 0x8b};
    M.loadCode({
        0x68, 0x11, 0x11, 0x11, 0x11,             // push 0x11111111
        0x68, 0x22, 0x22, 0x22, 0x22,             // push 0x22222222
        0x9a, 0x00, 0x00, 0x00, 0x00, 0x53, 0x00, // call 0x53:0
        0xbb, 0x77, 0x00, 0x00, 0x00,             // mov ebx, 0x77
        0xeb, 0xfe,                               // jmp $
    });
    put(M, kKernel, {0xf4, 0xca, 0x08, 0x00}); // hlt ; retf 8
    M.S.seg(SegReg::CS) = Segment{kSelUserCode32, 0, 0xffffffff, 0xfb | Segment::DB | Segment::G};
    M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
    M.S.seg(SegReg::DS) = Segment{kSelData, 0, 0xffffffff, 0x93 | Segment::DB | Segment::G};
    M.S.Gpr[RSP] = 0x70000;
    M.Cpu_.modeChanged();
  }
};
} // namespace

TEST(Protection, FarCallThroughCallGateToInnerLevelCopiesParameters) {
  CallGateFixture F;
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.cpl(), 0u);
  EXPECT_EQ(F.M.S.cs().Selector, kSelCode32);
  EXPECT_EQ(F.M.S.ss().Selector, kSelData);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x88000u - 24);
  EXPECT_EQ(read32(F.M, 0x88000 - 24), kCodeBase + 17); // return EIP
  EXPECT_EQ(read32(F.M, 0x88000 - 20), kSelUserCode32);
  EXPECT_EQ(read32(F.M, 0x88000 - 16), 0x22222222u);
  EXPECT_EQ(read32(F.M, 0x88000 - 12), 0x11111111u);
  EXPECT_EQ(read32(F.M, 0x88000 - 8), 0x70000u - 8); // caller ESP
  EXPECT_EQ(read32(F.M, 0x88000 - 4), kSelUserData);
}

TEST(Protection, FarReturnToOuterLevelRestoresStackAndNullsDataSegments) {
  CallGateFixture F;
  uint8_t Retf[] = {0xca, 0x08, 0x00};
  DecodedInsn I;
  if (!decodeOne(Retf, 3, CodeMode::Prot32, I) || I.Cost != costOf(CostClass::FarBranch))
    GTEST_SKIP() << "RET far is not routed to bindFarRet by the control family yet";
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  F.M.Cpu_.Activity = ActivityState::Active;
  EXPECT_EQ(F.M.run(3), StopReason::InsnLimit);
  EXPECT_EQ(F.M.S.cpl(), 3u);
  EXPECT_EQ(F.M.S.cs().Selector, kSelUserCode32);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x70000u);
  EXPECT_EQ(F.M.S.Gpr[RBX], 0x77u);
  // DS held a DPL-0 data segment: it cannot stay loaded at CPL 3.
  EXPECT_TRUE(F.M.S.seg(SegReg::DS).Attr & Segment::Unusable);
}

// The far-RET handler run directly (independent of the decoder routing above).
TEST(Protection, FarReturnHandlerPopsOuterStackAfterParameters) {
  CallGateFixture F;
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  DecodeInfo D;
  D.OpSize = 4;
  D.NumOps = 1;
  D.Ops[0].Kind = OperandKind::Imm;
  D.ImmRaw = 8;
  DecodedInsn I;
  I.Len = 3;
  ASSERT_TRUE(bindFarRet(D, I));
  EXPECT_EQ(I.Fn(F.M.Cpu_, I), Status::Ok);
  EXPECT_EQ(F.M.S.cpl(), 3u);
  EXPECT_EQ(F.M.S.cs().Selector, kSelUserCode32);
  EXPECT_EQ(F.M.S.ss().Selector, kSelUserData);
  EXPECT_EQ(F.M.S.Gpr[RSP], 0x70000u);
  EXPECT_EQ(F.M.S.Rip, kCodeBase + 17);
  EXPECT_TRUE(F.M.S.seg(SegReg::DS).Attr & Segment::Unusable);
}

TEST(Protection, FarCallGateBelowCplRaisesGpWithGateSelector) {
  CallGateFixture F;
  write64(F.M, kGdtBase + 0x50, gate32(kSelCode32, uint32_t(kKernel), 0xc, 0, true, 2));
  F.M.S.Idtr = TableReg{kIdtBase, 0x7ff};
  write64(F.M, kIdtBase + 8 * vec::GP, gate32(kSelCode32, uint32_t(kKernel + 0x800), 0xe, 0));
  put(F.M, kKernel + 0x800, {0xf4});
  EXPECT_EQ(F.M.run(), StopReason::Halted);
  EXPECT_EQ(F.M.S.Rip, kKernel + 0x801);
  EXPECT_EQ(read32(F.M, 0x88000 - 24), 0x50u);          // #GP(gate selector)
  EXPECT_EQ(read32(F.M, 0x88000 - 20), kCodeBase + 10); // the CALL
  EXPECT_EQ(read32(F.M, 0x88000 - 8), 0x70000u - 8);
}

TEST(Protection, FarJmpToNonConformingCodeAtOtherDplRaisesGp) {
  TestMachine M;
  M.setupProtected32();
  M.S.Idtr = TableReg{kIdtBase, 0x7ff};
  write64(M, kIdtBase + 8 * vec::GP, gate32(kSelCode32, uint32_t(kKernel), 0xe, 0));
  put(M, kKernel, {0xf4});
  M.loadCode({0xea, 0x00, 0x00, 0x10, 0x00, 0x3b, 0x00}); // jmp 0x3b:0x100000
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(read32(M, 0x80000 - 16), 0x38u); // #GP(selector), RPL dropped
  EXPECT_EQ(read32(M, 0x80000 - 12), kCodeBase);
}

TEST(Protection, MovSsNullSelectorAllowedInLongModeAtCpl0Only) {
  TestMachine M;
  M.setupLongMode();
  longModeIdt(M);
  M.S.Gpr[RAX] = 0;
  M.loadCode({0x8e, 0xd0, 0xf4}); // mov ss, ax ; hlt
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kCodeBase + 3);
  EXPECT_TRUE(M.S.ss().Attr & Segment::Unusable);
  EXPECT_EQ(M.S.cpl(), 0u);

  TestMachine U;
  U.setupLongMode();
  longModeIdt(U);
  U.loadCode({0x8e, 0xd0});
  userMode64(U);
  U.S.Gpr[RAX] = 3;
  EXPECT_EQ(U.run(), StopReason::Halted);
  EXPECT_EQ(U.S.Rip, handlerOf(vec::GP) + 1);
  EXPECT_EQ(U.read64(0x88000 - 48), 0u);
}

TEST(Protection, LoadingUserDataSegmentFromKernelSetsAccessedBit) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = kSelUserData;
  M.loadCode({0x8e, 0xd8, 0xf4}); // mov ds, ax ; hlt
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.seg(SegReg::DS).Selector, kSelUserData);
  EXPECT_EQ(M.S.seg(SegReg::DS).Attr, 0xf3u | Segment::DB | Segment::G);
  EXPECT_EQ(M.S.seg(SegReg::DS).Limit, 0xffffffffu);
  EXPECT_TRUE(M.read64(kGdtBase + 0x30) & (1ull << 40));
}

TEST(Protection, LarLslVerrVerwReportAccessRights) {
  TestMachine M;
  M.setupLongMode();
  // lar eax, ebx ; lsl ecx, ebx ; hlt
  M.loadCode({0x0f, 0x02, 0xc3, 0x0f, 0x03, 0xcb, 0xf4});
  M.S.Gpr[RBX] = kSelUserData;
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], 0x00c0f300u); // bits 19:16 (limit) are masked
  EXPECT_EQ(M.S.Gpr[RCX], 0xffffffffu);
  EXPECT_TRUE(M.S.Rflags & rflags::ZF);

  TestMachine V;
  V.setupLongMode();
  // verr bx ; hlt
  V.loadCode({0x0f, 0x00, 0xe3, 0xf4});
  V.S.Gpr[RBX] = 0x48; // beyond the GDT limit: ZF=0, no fault
  V.S.Rflags |= rflags::ZF;
  EXPECT_EQ(V.run(), StopReason::Halted);
  EXPECT_FALSE(V.S.Rflags & rflags::ZF);

  TestMachine W;
  W.setupLongMode();
  W.loadCode({0x0f, 0x00, 0xeb, 0xf4}); // verw bx: a code segment is never writable
  W.S.Gpr[RBX] = kSelCode64;
  W.S.Rflags |= rflags::ZF;
  EXPECT_EQ(W.run(), StopReason::Halted);
  EXPECT_FALSE(W.S.Rflags & rflags::ZF);
}

TEST(Protection, LtrLoadsTssAndMarksItBusy) {
  TestMachine M;
  M.setupLongMode();
  uint64_t Tss[2] = {segDesc(uint32_t(kTss), 0x67, 0x89, 0), 0};
  M.write(kGdtBase + kSelTss, Tss, 16);
  M.S.Gpr[RBX] = kSelTss;
  M.loadCode({0x0f, 0x00, 0xdb, 0x0f, 0x00, 0xc8, 0xf4}); // ltr bx ; str eax ; hlt
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Tr.Selector, kSelTss);
  EXPECT_EQ(M.S.Tr.Base, kTss);
  EXPECT_EQ(M.S.Tr.Limit, 0x67u);
  EXPECT_EQ(M.S.Tr.Attr & 0xf, 0xbu);
  EXPECT_EQ((M.read64(kGdtBase + kSelTss) >> 40) & 0xf, 0xbu);
  EXPECT_EQ(M.S.Gpr[RAX], kSelTss);
}

TEST(Protection, UmipMakesSgdtFaultAtCpl3) {
  TestMachine M;
  M.setupLongMode();
  longModeIdt(M);
  M.S.Cr4 |= cr4::UMIP;
  M.loadCode({0x0f, 0x01, 0x04, 0x25, 0x00, 0x30, 0x00, 0x00}); // sgdt [0x3000]
  userMode64(M);
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::GP) + 1);
}

TEST(Protection, SgdtStoresLimitAndBaseIn64BitMode) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode({0x0f, 0x01, 0x04, 0x25, 0x00, 0x30, 0x00, 0x00, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(read16(M, 0x3000), 79u);
  EXPECT_EQ(M.read64(0x3002), kGdtBase);
}

TEST(Protection, CliAtCpl3WithIoplZeroRaisesGp) {
  TestMachine M;
  M.setupLongMode();
  longModeIdt(M);
  M.loadCode({0xfa});
  userMode64(M);
  M.S.Rflags |= rflags::IF;
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::GP) + 1);
}

TEST(Protection, PopfAtCpl3KeepsIoplAndIf) {
  TestMachine M;
  M.setupLongMode();
  longModeIdt(M);
  // popfq ; ud2  (the stack holds IOPL=3, IF, CF, AC, RF)
  M.loadCode({0x9d, 0x0f, 0x0b});
  userMode64(M);
  write64(M, 0x70000, rflags::IOPL | rflags::IF | rflags::CF | rflags::AC | rflags::RF);
  EXPECT_EQ(M.run(1), StopReason::InsnLimit);
  EXPECT_EQ(M.S.Rflags, rflags::Fixed1 | rflags::CF | rflags::AC);
  EXPECT_EQ(M.S.Gpr[RSP], 0x70008u);
}

TEST(Protection, PushfClearsVmAndRfInImage) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode({0x9c, 0xf4}); // pushfq ; hlt
  M.S.Rflags |= rflags::RF | rflags::CF;
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.read64(0x80000 - 8), rflags::Fixed1 | rflags::CF);
}

namespace {
class PortLog : public PortDevice {
public:
  uint32_t ioRead(uint16_t Port, unsigned Size) override {
    Reads.push_back(Port);
    return 0x40 + Size;
  }
  void ioWrite(uint16_t Port, unsigned, uint32_t V) override {
    Writes.push_back((uint32_t(Port) << 16) | (V & 0xffff));
  }
  std::vector<uint16_t> Reads;
  std::vector<uint32_t> Writes;
};
} // namespace

TEST(Protection, IoPermissionBitmapGrantsOnlyClearedPorts) {
  TestMachine M;
  M.setupProtected32();
  PortLog Dev;
  M.Io.add(0x80, 16, &Dev);
  // 32-bit TSS with an I/O bitmap at offset 0x68: port 0x80 allowed, 0x81 denied.
  write16(M, kTss + 102, 0x68);
  uint8_t Bitmap[32]; // the processor reads two bytes: the bitmap must extend past 0x80/8
  std::fill(std::begin(Bitmap), std::end(Bitmap), 0xff);
  Bitmap[0x80 / 8] = 0xfe;
  M.write(kTss + 0x68, Bitmap, sizeof(Bitmap));
  M.S.Tr = Segment{kSelTss, kTss, 0x68 + 31, 0x8b};
  M.S.Idtr = TableReg{kIdtBase, 0x7ff};
  write64(M, kIdtBase + 8 * vec::GP, gate32(kSelCode32, uint32_t(kKernel), 0xe, 0));
  write32(M, kTss + 4, 0x88000);
  write16(M, kTss + 8, kSelData);
  put(M, kKernel, {0xf4});
  M.loadCode({0xe4, 0x80, 0xe4, 0x81}); // in al, 0x80 ; in al, 0x81
  M.S.seg(SegReg::CS) = Segment{kSelUserCode32, 0, 0xffffffff, 0xfb | Segment::DB | Segment::G};
  M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
  M.S.Gpr[RSP] = 0x70000;
  M.Cpu_.modeChanged();
  EXPECT_EQ(M.run(), StopReason::Halted);
  ASSERT_EQ(Dev.Reads.size(), 1u);
  EXPECT_EQ(Dev.Reads[0], 0x80u);
  EXPECT_EQ(M.S.Gpr[RAX] & 0xff, 0x41u);
  EXPECT_EQ(read32(M, 0x88000 - 24), 0u);            // #GP(0)
  EXPECT_EQ(read32(M, 0x88000 - 20), kCodeBase + 2); // the second IN
}

TEST(Protection, RepOutsbWritesEveryByteAndRepInsbStoresThem) {
  TestMachine M;
  M.setupLongMode();
  PortLog Dev;
  M.Io.add(0x80, 16, &Dev);
  M.write(kDataBase, "abc", 3);
  M.S.Gpr[RSI] = kDataBase;
  M.S.Gpr[RDI] = kDataBase + 0x100;
  M.S.Gpr[RCX] = 3;
  M.S.Gpr[RDX] = 0x80;
  // rep outsb ; mov ecx, 2 ; rep insb ; hlt
  M.loadCode({0xf3, 0x6e, 0xb9, 0x02, 0x00, 0x00, 0x00, 0xf3, 0x6c, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  ASSERT_EQ(Dev.Writes.size(), 3u);
  EXPECT_EQ(Dev.Writes[0], 0x800061u);
  EXPECT_EQ(Dev.Writes[2], 0x800063u);
  EXPECT_EQ(M.S.Gpr[RSI], kDataBase + 3);
  EXPECT_EQ(M.S.Gpr[RCX], 0u);
  EXPECT_EQ(M.S.Gpr[RDI], kDataBase + 0x102);
  EXPECT_EQ(M.read64(kDataBase + 0x100) & 0xffff, 0x4141u);
}

TEST(Protection, SwapgsExchangesGsBaseWithKernelGsBase) {
  TestMachine M;
  M.setupLongMode();
  (*M.Cpu_.Msrs)[MsrSlot::IA32_KERNEL_GS_BASE] = 0xffff800000001000ull;
  M.S.seg(SegReg::GS).Base = 0x1234;
  M.loadCode({0x0f, 0x01, 0xf8, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.seg(SegReg::GS).Base, 0xffff800000001000ull);
  EXPECT_EQ((*M.Cpu_.Msrs)[MsrSlot::IA32_KERNEL_GS_BASE], 0x1234u);
}

TEST(Protection, FsGsBaseInstructionsNeedCr4Fsgsbase) {
  TestMachine M;
  M.setupLongMode();
  longModeIdt(M);
  M.S.Gpr[RBX] = 0x5555;
  // wrgsbase rbx ; rdfsbase rax ; hlt
  M.loadCode({0xf3, 0x48, 0x0f, 0xae, 0xdb, 0xf3, 0x48, 0x0f, 0xae, 0xc0, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, handlerOf(vec::UD) + 1);

  TestMachine N;
  N.setupLongMode();
  N.S.Cr4 |= cr4::FSGSBASE;
  N.S.Gpr[RBX] = 0x5555;
  N.S.seg(SegReg::FS).Base = 0x7777;
  N.loadCode({0xf3, 0x48, 0x0f, 0xae, 0xdb, 0xf3, 0x48, 0x0f, 0xae, 0xc0, 0xf4});
  EXPECT_EQ(N.run(), StopReason::Halted);
  EXPECT_EQ(N.S.seg(SegReg::GS).Base, 0x5555u);
  EXPECT_EQ(N.S.Gpr[RAX], 0x7777u);
}
