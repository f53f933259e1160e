// PhysMem's read-only range (setReadOnly): the BIOS area a PC firmware write-protects.
#include "tests/support/test_machine.h"

#include "mmu/phys_mem.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

constexpr uint64_t kRom = 0xe0000, kRomBytes = 0x20000;

TEST(PhysMem, ReadOnlyRangeReadsItsBytesAndIgnoresWrites) {
  PhysMem Mem(16ull << 20);
  const uint32_t Word = 0x11223344;
  ASSERT_TRUE(Mem.copyIn(Hpa(0xf0000), &Word, 4));
  ASSERT_TRUE(Mem.setReadOnly(Hpa(kRom), kRomBytes));
  EXPECT_EQ(Mem.read(Hpa(0xf0000), 4), 0x11223344u);
  Mem.write(Hpa(0xf0000), 4, 0xdeadbeef);
  EXPECT_EQ(Mem.read(Hpa(0xf0000), 4), 0x11223344u);
  EXPECT_FALSE(Mem.copyIn(Hpa(0xf0000), &Word, 4));
  EXPECT_FALSE(Mem.zeroRam(Hpa(0xf0000), 4096));
  EXPECT_EQ(Mem.ramPointer(Hpa(0xf0000)), nullptr);
  EXPECT_FALSE(Mem.isRam(Hpa(0xdf000), 0x2000));
  uint32_t Out = 0;
  ASSERT_TRUE(Mem.copyOut(Hpa(0xf0000), &Out, 4));
  EXPECT_EQ(Out, 0x11223344u);
  // A copy spanning RAM and the range reads both; past the range's end is not RAM.
  uint8_t Span[8];
  EXPECT_TRUE(Mem.copyOut(Hpa(kRom - 4), Span, 8));
  EXPECT_TRUE(Mem.copyOut(Hpa(kRom + kRomBytes - 4), Span, 8));
  // RAM around it is untouched.
  EXPECT_NE(Mem.ramPointer(Hpa(kRom - 1)), nullptr);
  EXPECT_NE(Mem.ramPointer(Hpa(kRom + kRomBytes)), nullptr);
}

TEST(PhysMem, ReadOnlyRangeRefusesBadArguments) {
  PhysMem Mem(16ull << 20);
  EXPECT_FALSE(Mem.setReadOnly(Hpa(0xe0800), 0x1000)); // not page-aligned
  EXPECT_FALSE(Mem.setReadOnly(Hpa(0xe0000), 0));
  EXPECT_FALSE(Mem.setReadOnly(Hpa(0xfff000), 0x2000)); // past the end of RAM
  ASSERT_TRUE(Mem.setReadOnly(Hpa(kRom), kRomBytes));
  EXPECT_FALSE(Mem.setReadOnly(Hpa(0x200000), 0x1000)); // only one range
}

TEST(PhysMem, ProcessorStoresToReadOnlyRangeAreIgnoredAndItsCodeRuns) {
  TestMachine M;
  M.setupLongMode();
  // At 0xf0000: mov eax, 0x5a5a5a5a; jmp back to the caller at kCodeBase + 14.
  const uint8_t Rom[] = {0xb8, 0x5a, 0x5a, 0x5a, 0x5a, 0xff, 0xe1}; // mov eax, imm; jmp rcx
  M.write(0xf0000, Rom, sizeof(Rom));
  const uint32_t Before = 0xcafef00d;
  M.write(0xf0100, &Before, 4);
  ASSERT_TRUE(M.Mem.setReadOnly(Hpa(kRom), kRomBytes));
  M.loadCode({
      0xbb, 0x00, 0x01, 0x0f, 0x00,       // mov ebx, 0xf0100
      0xc7, 0x03, 0x78, 0x56, 0x34, 0x12, // mov dword [rbx], 0x12345678 (ignored)
      0x8b, 0x13,                         // mov edx, [rbx]
      0x48, 0x8d, 0x0d, 0x07, 0x00, 0x00, 0x00, // lea rcx, [rip + 7] (the hlt)
      0xbe, 0x00, 0x00, 0x0f, 0x00,       // mov esi, 0xf0000
      0xff, 0xe6,                         // jmp rsi
      0xf4,                               // hlt
  });
  M.run(20);
  EXPECT_EQ(uint32_t(M.S.Gpr[2]), 0xcafef00du); // RDX: the store did not land
  EXPECT_EQ(uint32_t(M.S.Gpr[0]), 0x5a5a5a5au); // RAX: the code in the range ran
  EXPECT_EQ(M.Mem.read(Hpa(0xf0100), 4), 0xcafef00du);
}

} // namespace
