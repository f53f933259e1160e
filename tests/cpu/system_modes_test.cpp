// SDM Vol. 3A, Processor Management and Initialization: the guest itself switches from
// real mode to protected mode to IA-32e mode with paging, then back out of long mode
// (Switching to Protected Mode; Initializing IA-32e Mode; IA-32e Mode De-activation).
#include "tests/cpu/system_test_support.h"

#include "cpu/decode_info.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr uint64_t kProg = 0x30000;
constexpr uint64_t kTables = 0x20000; // PML4, PDPT, PD: identity 0..1 GiB in 2 MiB pages

void buildIdentityMap(TestMachine &M) {
  write64(M, kTables, (kTables + 0x1000) | 0x3);
  write64(M, kTables + 0x1000, (kTables + 0x2000) | 0x3);
  for (uint64_t J = 0; J < 512; ++J)
    write64(M, kTables + 0x2000 + 8 * J, (J << 21) | 0x83);
}

void put(TestMachine &M, uint64_t At, std::initializer_list<uint8_t> Bytes) {
  std::vector<uint8_t> V(Bytes);
  M.write(At, V.data(), V.size());
}

void loadModeSwitchProgram(TestMachine &M) {
  // GDTR image for LGDT at 0x3000: the test machine's GDT.
  write16(M, 0x3000, 10 * 8 - 1);
  write32(M, 0x3002, uint32_t(kGdtBase));
  put(M, kProg, {
      0xfa,                   // cli
      0x0f, 0x01, 0x16, 0x00, 0x30, // lgdt [0x3000]
      0x0f, 0x20, 0xc0,       // mov eax, cr0
      0x66, 0x83, 0xc8, 0x01, // or eax, 1
      0x0f, 0x22, 0xc0,       // mov cr0, eax
      0x66, 0xea, 0x00, 0x01, 0x03, 0x00, 0x18, 0x00, // jmp dword 0x18:0x30100
  });
  put(M, kProg + 0x100, {
      0x66, 0xb8, 0x10, 0x00,       // mov ax, 0x10
      0x8e, 0xd8,                   // mov ds, ax
      0x8e, 0xc0,                   // mov es, ax
      0x8e, 0xd0,                   // mov ss, ax
      0xbc, 0x00, 0x00, 0x08, 0x00, // mov esp, 0x80000
      0x0f, 0x20, 0xe0,             // mov eax, cr4
      0x83, 0xc8, 0x20,             // or eax, 0x20 (PAE)
      0x0f, 0x22, 0xe0,             // mov cr4, eax
      0xb8, 0x00, 0x00, 0x02, 0x00, // mov eax, 0x20000
      0x0f, 0x22, 0xd8,             // mov cr3, eax
      0xb9, 0x80, 0x00, 0x00, 0xc0, // mov ecx, 0xc0000080 (IA32_EFER)
      0x0f, 0x32,                   // rdmsr
      0x0d, 0x00, 0x01, 0x00, 0x00, // or eax, 0x100 (LME)
      0x0f, 0x30,                   // wrmsr
      0x0f, 0x20, 0xc0,             // mov eax, cr0
      0x0d, 0x00, 0x00, 0x00, 0x80, // or eax, 0x80000000 (PG)
      0x0f, 0x22, 0xc0,             // mov cr0, eax
      0xea, 0x00, 0x02, 0x03, 0x00, 0x08, 0x00, // jmp 0x08:0x30200
  });
  put(M, kProg + 0x200, {
      0x48, 0xb8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // mov rax, 0x1122334455667788
      0xff, 0x2d, 0x00, 0x00, 0x00, 0x00, // jmp fword ptr [rip + farptr]
      0x00, 0x03, 0x03, 0x00, 0x18, 0x00, // farptr: 0x18:0x30300 (32-bit code)
  });
  put(M, kProg + 0x300, {
      0x0f, 0x20, 0xc0,             // mov eax, cr0
      0x25, 0xff, 0xff, 0xff, 0x7f, // and eax, 0x7fffffff
      0x0f, 0x22, 0xc0,             // mov cr0, eax  (leaves IA-32e mode)
      0xb9, 0x80, 0x00, 0x00, 0xc0, // mov ecx, 0xc0000080
      0x0f, 0x32,                   // rdmsr
      0x25, 0xff, 0xfe, 0xff, 0xff, // and eax, 0xfffffeff (LME off)
      0x0f, 0x30,                   // wrmsr
      0xf4,                         // hlt
  });
  M.S.seg(SegReg::CS) = Segment{0x3000, kProg, 0xffff, 0x9b};
  M.S.Rip = 0;
  M.Cpu_.modeChanged();
}

} // namespace

TEST(ProcessorManagementAndInitialization, GuestSwitchesRealToProtectedToLongMode) {
  TestMachine M;
  M.setupReal();
  buildIdentityMap(M);
  loadModeSwitchProgram(M);
  EXPECT_EQ(M.run(6), StopReason::InsnLimit); // through the far jump
  EXPECT_EQ(M.Cpu_.DecodeMode, uint8_t(CodeMode::Prot32));
  EXPECT_EQ(M.S.cs().Selector, kSelCode32);
  EXPECT_EQ(M.S.Rip, 0x30100u);
  EXPECT_EQ(M.S.Gdtr.Base, kGdtBase);
  EXPECT_EQ(M.S.Gdtr.Limit, 79u);
  EXPECT_EQ(M.run(18), StopReason::InsnLimit); // through the jump to 64-bit code
  EXPECT_TRUE(M.S.Efer & efer::LMA);
  EXPECT_TRUE(M.S.in64BitMode());
  EXPECT_EQ(M.Cpu_.DecodeMode, uint8_t(CodeMode::Long64));
  EXPECT_EQ(M.S.Rip, 0x30200u);
  EXPECT_EQ(M.S.Cr0, cr0::PE | cr0::ET | cr0::PG | cr0::CD | cr0::NW);
  EXPECT_EQ(M.S.ss().Selector, kSelData);
  EXPECT_EQ(M.S.Gpr[RSP], 0x80000u);
  // The accessed bit of each descriptor loaded was set in the GDT.
  EXPECT_TRUE(M.read64(kGdtBase + kSelData) & (1ull << 40));
  EXPECT_TRUE(M.read64(kGdtBase + kSelCode64) & (1ull << 40));
  EXPECT_EQ(M.run(1), StopReason::InsnLimit);
  EXPECT_EQ(M.S.Gpr[RAX], 0x1122334455667788u);
}

TEST(ProcessorManagementAndInitialization, GuestLeavesLongModeThroughCompatibilityMode) {
  TestMachine M;
  M.setupReal();
  buildIdentityMap(M);
  loadModeSwitchProgram(M);
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ(M.S.Rip, 0x3031au);
  EXPECT_EQ(M.S.Efer, 0u);
  EXPECT_FALSE(M.S.Cr0 & cr0::PG);
  EXPECT_EQ(M.Cpu_.DecodeMode, uint8_t(CodeMode::Prot32));
  EXPECT_EQ(M.S.cs().Selector, kSelCode32);
  EXPECT_EQ(M.S.Gpr[RAX] >> 32, 0u); // compatibility mode wrote EAX
}

TEST(ProcessorManagementAndInitialization, PagingWithoutPaeInLongModeRaisesGp) {
  TestMachine M;
  M.setupProtected32();
  M.S.Efer = efer::LME;
  M.S.Cr3 = kTables;
  // mov eax, 0x80000011 ; mov cr0, eax
  M.loadCode({0xb8, 0x11, 0x00, 0x00, 0x80, 0x0f, 0x22, 0xc0});
  M.S.Idtr = TableReg{kIdtBase, 0};
  EXPECT_EQ(M.run(), StopReason::Shutdown); // #GP with no IDT escalates to a triple fault
  EXPECT_EQ(M.S.Rip, kCodeBase + 5);
  EXPECT_FALSE(M.S.Cr0 & cr0::PG);
}

TEST(ProcessorManagementAndInitialization, ResetStateMatchesSdmTable) {
  TestMachine M;
  M.Cpu_.reset();
  EXPECT_EQ(M.S.Rip, 0xfff0u);
  EXPECT_EQ(M.S.cs().Selector, 0xf000u);
  EXPECT_EQ(M.S.cs().Base, 0xffff0000u);
  EXPECT_EQ(M.S.Cr0, 0x60000010u);
  EXPECT_EQ(M.S.Gpr[RDX], 0x000806f8u);
  EXPECT_EQ(M.S.Rflags, 2u);
  EXPECT_EQ(M.S.Dr[6], 0xffff0ff0u);
  EXPECT_EQ(M.S.Dr[7], 0x400u);
}
