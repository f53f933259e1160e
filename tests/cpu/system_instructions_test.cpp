// SDM Vol. 3A, System Architecture Overview (Control Registers; System Instruction
// Summary) and Vol. 1, Processor Identification and Feature Determination (CPUID).
#include "tests/cpu/system_test_support.h"

#include "cpu/cpuid.h"
#include "cpu/msrs.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {
constexpr uint64_t kGpHandler = 0x101000;

// 64-bit mode with #GP, #UD and #DB delivered to "hlt" handlers at kGpHandler + 16*v.
void withHandlers(TestMachine &M) {
  M.S.Idtr = TableReg{kIdtBase, 0xfff};
  for (unsigned V = 0; V < 32; ++V) {
    gate64(M, kIdtBase + 16 * V, kSelCode64, kGpHandler + 16 * V, 0xe, 0);
    uint8_t Hlt = 0xf4;
    M.write(kGpHandler + 16 * V, &Hlt, 1);
  }
}
uint64_t handlerOf(uint8_t V) { return kGpHandler + 16 * V + 1; }

uint64_t runOne(std::initializer_list<uint8_t> Code, uint64_t Rax, uint64_t Cr4 = 0) {
  TestMachine M;
  M.setupLongMode();
  withHandlers(M);
  M.S.Cr4 |= Cr4;
  M.S.Gpr[RAX] = Rax;
  std::vector<uint8_t> V(Code);
  V.push_back(0xf4);
  M.loadCode(V);
  M.run();
  return M.S.Rip;
}
} // namespace

TEST(ProcessorIdentificationAndFeatureDetermination, Leaf0ReportsGenuineIntel) {
  TestMachine M;
  CpuidResult R = cpuidQuery(M.Cpu_, 0, 0);
  EXPECT_EQ(R.Eax, 0xdu);
  char Vendor[13] = {};
  std::memcpy(Vendor, &R.Ebx, 4);
  std::memcpy(Vendor + 4, &R.Edx, 4);
  std::memcpy(Vendor + 8, &R.Ecx, 4);
  EXPECT_STREQ(Vendor, "GenuineIntel");
}

TEST(ProcessorIdentificationAndFeatureDetermination, Leaf1ReportsVmxApicIdAndBaseline) {
  TestMachine M;
  M.Cpu_.Id = 3;
  CpuidResult R = cpuidQuery(M.Cpu_, 1, 0);
  EXPECT_EQ(R.Eax, 0x000806f8u);
  EXPECT_EQ(R.Ebx >> 24, 3u);
  EXPECT_TRUE(R.Ecx & cpuidbit::Vmx);
  EXPECT_TRUE(R.Ecx & cpuidbit::Sse3);
  EXPECT_TRUE(R.Ecx & cpuidbit::Monitor); // cpu/monitor.h
  EXPECT_FALSE(R.Ecx & cpuidbit::Osxsave);
  EXPECT_TRUE(R.Ecx & cpuidbit::Xsave);
  EXPECT_EQ(R.Edx & (cpuidbit::Fpu | cpuidbit::Fxsr | cpuidbit::Sse | cpuidbit::Sse2 |
                     cpuidbit::Pae | cpuidbit::Msr | cpuidbit::Tsc | cpuidbit::Apic),
            cpuidbit::Fpu | cpuidbit::Fxsr | cpuidbit::Sse | cpuidbit::Sse2 | cpuidbit::Pae |
                cpuidbit::Msr | cpuidbit::Tsc | cpuidbit::Apic);
  M.S.Cr4 |= cr4::OSXSAVE; // state poke: the bit reflects CR4
  EXPECT_TRUE(cpuidQuery(M.Cpu_, 1, 0).Ecx & cpuidbit::Osxsave);
}

TEST(ProcessorIdentificationAndFeatureDetermination, AddressSizesMatchTheModel) {
  TestMachine M;
  EXPECT_EQ(cpuidQuery(M.Cpu_, 0x80000008, 0).Eax, 0x302eu);
  CpuidResult E = cpuidQuery(M.Cpu_, 0x80000001, 0);
  EXPECT_TRUE(E.Edx & cpuidbit::Lm);
  EXPECT_TRUE(E.Edx & cpuidbit::Nx);
  EXPECT_TRUE(E.Edx & cpuidbit::Syscall);
}

TEST(ProcessorIdentificationAndFeatureDetermination, OutOfRangeLeafReturnsHighestBasicLeaf) {
  TestMachine M;
  CpuidResult Hi = cpuidQuery(M.Cpu_, 0xd, 0);
  CpuidResult R = cpuidQuery(M.Cpu_, 0x40000000, 0);
  EXPECT_EQ(R.Eax, Hi.Eax);
  EXPECT_EQ(R.Ecx, Hi.Ecx);
  EXPECT_EQ(Hi.Ecx, 576u);
}

TEST(ProcessorIdentificationAndFeatureDetermination, CpuidInstructionFillsFourRegisters) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0x80000008;
  M.S.Gpr[RCX] = ~uint64_t(0);
  M.loadCode({0x0f, 0xa2, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], 0x302eu);
  EXPECT_EQ(M.S.Gpr[RCX], 0u);
}

TEST(SystemArchitectureOverview, MovCr0ReservedHighBitsRaiseGp) {
  EXPECT_EQ(runOne({0x0f, 0x22, 0xc0}, uint64_t(1) << 32), handlerOf(vec::GP));
}

TEST(SystemArchitectureOverview, MovCr0NwWithoutCdRaisesGp) {
  TestMachine M;
  M.setupLongMode();
  withHandlers(M);
  M.S.Gpr[RAX] = M.S.Cr0 | cr0::NW;
  M.loadCode({0x0f, 0x22, 0xc0, 0xf4});
  M.run();
  EXPECT_EQ(M.S.Rip, handlerOf(vec::GP));
}

TEST(SystemArchitectureOverview, ClearingPgIn64BitModeRaisesGp) {
  TestMachine M;
  M.setupLongMode();
  withHandlers(M);
  M.S.Gpr[RAX] = M.S.Cr0 & ~cr0::PG;
  M.loadCode({0x0f, 0x22, 0xc0, 0xf4});
  M.run();
  EXPECT_EQ(M.S.Rip, handlerOf(vec::GP));
  EXPECT_TRUE(M.S.Efer & efer::LMA);
}

TEST(SystemArchitectureOverview, MovCr4ReservedOrUnsupportedBitRaisesGp) {
  TestMachine M;
  M.setupLongMode();
  uint64_t Base = M.S.Cr4;
  EXPECT_EQ(runOne({0x0f, 0x22, 0xe0}, Base | (1u << 15)), handlerOf(vec::GP));
  EXPECT_EQ(runOne({0x0f, 0x22, 0xe0}, Base | cr4::LA57), handlerOf(vec::GP));
  EXPECT_EQ(runOne({0x0f, 0x22, 0xe0}, Base & ~cr4::PAE), handlerOf(vec::GP));
  EXPECT_EQ(runOne({0x0f, 0x22, 0xe0}, Base | cr4::PCIDE), kCodeBase + 4);
  // SMEP is accepted; the next fetch (every page here is a user page) then faults.
  EXPECT_NE(runOne({0x0f, 0x22, 0xe0}, Base | cr4::SMEP), handlerOf(vec::GP));
}

TEST(SystemArchitectureOverview, PcideNeedsCr3PcidZero) {
  TestMachine M;
  M.setupLongMode();
  withHandlers(M);
  M.S.Cr3 |= 5;
  M.S.Gpr[RAX] = M.S.Cr4 | cr4::PCIDE;
  M.loadCode({0x0f, 0x22, 0xe0, 0xf4});
  M.run();
  EXPECT_EQ(M.S.Rip, handlerOf(vec::GP));
}

TEST(SystemArchitectureOverview, MovCr3WithPcidNoFlushBitStoresPcid) {
  TestMachine M;
  M.setupLongMode();
  M.S.Cr4 |= cr4::PCIDE;
  M.S.Gpr[RAX] = (uint64_t(1) << 63) | kPml4Base | 7;
  // mov cr3, rax ; mov rbx, cr3 (0f 20 db) ; hlt
  M.loadCode({0x0f, 0x22, 0xd8, 0x0f, 0x20, 0xdb, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Cr3, kPml4Base | 7);
  EXPECT_EQ(M.S.Gpr[RBX], kPml4Base | 7);
}

TEST(SystemArchitectureOverview, MovCr3AboveMaxPhysAddrRaisesGp) {
  EXPECT_EQ(runOne({0x0f, 0x22, 0xd8}, uint64_t(1) << 46 | kPml4Base), handlerOf(vec::GP));
}

TEST(SystemArchitectureOverview, Cr8HoldsTheTaskPriorityAndRejectsHighBits) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 9;
  // mov cr8, rax ; mov rbx, cr8 (44 0f 20 c3) ; hlt
  M.loadCode({0x44, 0x0f, 0x22, 0xc0, 0x44, 0x0f, 0x20, 0xc3, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Cr8, 9u);
  EXPECT_EQ(M.S.Gpr[RBX], 9u);
  EXPECT_EQ(runOne({0x44, 0x0f, 0x22, 0xc0}, 16), handlerOf(vec::GP));
}

TEST(SystemArchitectureOverview, PaePagingActivationLoadsPdptesOrRaisesGp) {
  TestMachine M;
  M.setupProtected32();
  // PDPT at 0x10000: entry 0 present, entry 1 with reserved bit 5.
  write64(M, 0x10000, 0x11000 | 1);
  write64(M, 0x10008, 0x12000 | 1 | (1u << 5));
  M.S.Cr3 = 0x10000;
  M.S.Cr4 |= cr4::PAE;
  M.S.Idtr = TableReg{kIdtBase, 0};
  M.S.Gpr[RAX] = M.S.Cr0 | cr0::PG;
  M.loadCode({0x0f, 0x22, 0xc0}); // mov cr0, eax
  EXPECT_EQ(M.run(), StopReason::Shutdown);
  EXPECT_FALSE(M.S.Cr0 & cr0::PG);
  EXPECT_EQ(M.S.Rip, kCodeBase);
}

TEST(SystemArchitectureOverview, MovDrWithGeneralDetectRaisesDbWithBd) {
  TestMachine M;
  M.setupLongMode();
  withHandlers(M);
  M.S.Dr[7] |= 1u << 13;
  M.loadCode({0x0f, 0x21, 0xf0, 0xf4}); // mov rax, dr6
  M.run();
  EXPECT_EQ(M.S.Rip, handlerOf(vec::DB));
  EXPECT_TRUE(M.S.Dr[6] & (1u << 13));
  EXPECT_FALSE(M.S.Dr[7] & (1u << 13));
  EXPECT_EQ(M.read64(0x80000 - 40), kCodeBase); // a fault: RIP of the MOV
}

TEST(SystemArchitectureOverview, Dr4AliasesDr6UnlessCr4De) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode({0x0f, 0x21, 0xe0, 0xf4}); // mov rax, dr4
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], 0xffff0ff0u);
  EXPECT_EQ(runOne({0x0f, 0x21, 0xe0}, 0, cr4::DE), handlerOf(vec::UD));
}

TEST(SystemArchitectureOverview, MovToDr7KeepsFixedBits) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0xffffff00u;
  M.loadCode({0x0f, 0x23, 0xf8, 0xf4}); // mov dr7, rax
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Dr[7], 0xffff2700u);
}

// Enabling breakpoints in DR7, and what they do: tests/cpu/debug_features_test.cpp.

TEST(SystemArchitectureOverview, RdtscAtCpl3WithTsdRaisesGp) {
  TestMachine M;
  M.setupLongMode();
  withHandlers(M);
  write64(M, 0x5000 + 4, 0x88000);
  M.S.Tr = Segment{kSelTss, 0x5000, 0x67, 0x8b};
  M.S.Cr4 |= cr4::TSD;
  M.loadCode({0x0f, 0x31});
  M.S.seg(SegReg::CS) = Segment{kSelUserCode64, 0, 0xffffffff, 0xfb | Segment::L | Segment::G};
  M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
  M.Cpu_.modeChanged();
  M.run();
  EXPECT_EQ(M.S.Rip, handlerOf(vec::GP));
}

TEST(SystemArchitectureOverview, RdtscpReturnsVirtualClockAndTscAux) {
  TestMachine M;
  M.setupLongMode();
  (*M.Cpu_.Msrs)[MsrSlot::IA32_TSC_AUX] = 7;
  M.Cpu_.Cycles = 0x123456789ull;
  M.loadCode({0x0f, 0x01, 0xf9, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], 0x23456789u);
  EXPECT_EQ(M.S.Gpr[RDX], 0x1u);
  EXPECT_EQ(M.S.Gpr[RCX], 7u);
}

TEST(SystemArchitectureOverview, XgetbvWithoutOsxsaveRaisesUd) {
  EXPECT_EQ(runOne({0x0f, 0x01, 0xd0}, 0), handlerOf(vec::UD));
}

TEST(SystemArchitectureOverview, XsetbvXgetbvRoundTripOnceOsxsaveIsSet) {
  TestMachine M;
  M.setupLongMode();
  withHandlers(M);
  M.S.Gpr[RAX] = M.S.Cr4 | cr4::OSXSAVE;
  // mov cr4, rax ; xor ecx, ecx ; mov eax, 3 ; xor edx, edx ; xsetbv ; xor eax, eax ;
  // xgetbv ; hlt
  M.loadCode({0x0f, 0x22, 0xe0, 0x31, 0xc9, 0xb8, 0x03, 0x00, 0x00, 0x00, 0x31, 0xd2,
              0x0f, 0x01, 0xd1, 0x31, 0xc0, 0x0f, 0x01, 0xd0, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Xcr0, 3u);
  EXPECT_EQ(M.S.Gpr[RAX], 3u);
  EXPECT_TRUE(cpuidQuery(M.Cpu_, 1, 0).Ecx & cpuidbit::Osxsave);
}

TEST(SystemArchitectureOverview, XsetbvRejectsUnsupportedComponentsAndClearedX87) {
  for (uint32_t Xcr0 : {0x2u, 0x7u}) {
    TestMachine M;
    M.setupLongMode();
    withHandlers(M);
    M.S.Cr4 |= cr4::OSXSAVE;
    M.S.Gpr[RAX] = Xcr0;
    M.loadCode({0x31, 0xc9, 0x31, 0xd2, 0x0f, 0x01, 0xd1, 0xf4}); // xor ecx,ecx; xor edx,edx; xsetbv
    M.run();
    EXPECT_EQ(M.S.Rip, handlerOf(vec::GP));
    EXPECT_EQ(M.S.Xcr0, 1u);
  }
}

TEST(SystemArchitectureOverview, CltsLmswSmswEditCr0LowBits) {
  TestMachine M;
  M.setupLongMode();
  M.S.Cr0 |= cr0::TS;
  M.S.Gpr[RAX] = 0x0008; // LMSW: TS=1, PE=0 (PE cannot be cleared)
  // clts ; smsw ebx (0f 01 e3) ; lmsw ax ; smsw ecx (0f 01 e1) ; hlt
  M.loadCode({0x0f, 0x06, 0x0f, 0x01, 0xe3, 0x0f, 0x01, 0xf0, 0x0f, 0x01, 0xe1, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RBX], 0x80010033u);
  EXPECT_EQ(M.S.Gpr[RCX], 0x80010039u); // MP loaded as 0, TS as 1
  EXPECT_TRUE(M.S.Cr0 & cr0::PE);
}

TEST(SystemArchitectureOverview, HltAtCpl3RaisesGp) {
  TestMachine M;
  M.setupLongMode();
  withHandlers(M);
  write64(M, 0x5000 + 4, 0x88000);
  M.S.Tr = Segment{kSelTss, 0x5000, 0x67, 0x8b};
  M.loadCode({0xf4});
  M.S.seg(SegReg::CS) = Segment{kSelUserCode64, 0, 0xffffffff, 0xfb | Segment::L | Segment::G};
  M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
  M.Cpu_.modeChanged();
  M.run();
  EXPECT_EQ(M.S.Rip, handlerOf(vec::GP));
}

TEST(SystemArchitectureOverview, InvlpgDropsStaleTranslation) {
  TestMachine M;
  M.setupLongMode();
  write64(M, kDataBase, 0x1111);
  write64(M, kDataBase + 0x200000, 0x2222);
  M.S.Gpr[RBX] = kDataBase;
  // mov rax, [rbx] ; (the test remaps the page) ; invlpg [rbx] ; mov rcx, [rbx] ; hlt
  M.loadCode({0x48, 0x8b, 0x03, 0x0f, 0x01, 0x3b, 0x48, 0x8b, 0x0b, 0xf4});
  EXPECT_EQ(M.run(1), StopReason::InsnLimit);
  EXPECT_EQ(M.S.Gpr[RAX], 0x1111u);
  // Remap the 2 MiB page at kDataBase to the next one.
  write64(M, kPml4Base + 0x2000 + 8, (kDataBase + 0x200000) | 0x87);
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RCX], 0x2222u);
}

TEST(SystemArchitectureOverview, LidtIn32BitModeLoadsFourByteBase) {
  TestMachine M;
  M.setupProtected32();
  write16(M, 0x3000, 0x7ff);
  write32(M, 0x3002, 0x12345678);
  M.loadCode({0x0f, 0x01, 0x1d, 0x00, 0x30, 0x00, 0x00, 0xf4}); // lidt [0x3000]
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Idtr.Base, 0x12345678u);
  EXPECT_EQ(M.S.Idtr.Limit, 0x7ffu);
}
