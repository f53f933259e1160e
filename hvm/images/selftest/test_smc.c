/* Self-modifying code: the CPU must execute what memory holds now, not what it
   decoded before (SDM Vol. 3A, Self-Modifying Code). Checks a patched immediate, code
   patched after it ran many times, a store into the very next instruction, and a
   patch written through a second linear mapping of the same physical page. */
#include "boot/boot.h"
#include "images/selftest/selftest.h"
#include "lib/cpu.h"

/* In .data, whose pages the boot page tables leave executable (no XD bits). */
static uint8_t SmcCode[64] __attribute__((aligned(64)));

typedef uint32_t (*SmcFn)(void);

/* mov eax, imm32; ret */
static void emitMovRet(uint8_t *P, uint32_t Imm) {
  P[0] = 0xb8;
  P[1] = (uint8_t)Imm;
  P[2] = (uint8_t)(Imm >> 8);
  P[3] = (uint8_t)(Imm >> 16);
  P[4] = (uint8_t)(Imm >> 24);
  P[5] = 0xc3;
}

static uint32_t call(void) {
  SmcFn F = (SmcFn)(uintptr_t)SmcCode;
  __asm__ volatile("" : "+r"(F) : : "memory");
  return F();
}

#define ALIAS_BASE (4ull << 30) /* PDPT[4]: the fifth GiB, unmapped at boot */

enum TestResult test_smc(void) {
  emitMovRet(SmcCode, 0x11111111);
  EXPECT_EQ(call(), 0x11111111);
  SmcCode[1] = 0x22; /* patch the immediate only */
  EXPECT_EQ(call(), 0x11111122);

  /* Run it often enough for any decoded-instruction cache to hold it, then patch. */
  emitMovRet(SmcCode, 0);
  uint64_t Sum = 0;
  for (int I = 0; I < 1000; ++I)
    Sum += call();
  EXPECT_EQ(Sum, 0);
  emitMovRet(SmcCode, 0x33333333);
  EXPECT_EQ(call(), 0x33333333);

  /* movb $0x44, 1(%rip)  -- writes the low immediate byte of the next instruction
     mov eax, 0x55555555; ret */
  static const uint8_t NextInsn[] = {0xc6, 0x05, 0x01, 0x00, 0x00, 0x00, 0x44,
                                     0xb8, 0x55, 0x55, 0x55, 0x55, 0xc3};
  for (unsigned I = 0; I < sizeof(NextInsn); ++I)
    SmcCode[I] = NextInsn[I];
  EXPECT_EQ(call(), 0x55555544);
  EXPECT_EQ(call(), 0x55555544);

  /* Map the first GiB a second time at 4 GiB (PDPT[4] -> the same page directory),
     patch through the alias, execute through the identity mapping. */
  emitMovRet(SmcCode, 0x66666666);
  EXPECT_EQ(call(), 0x66666666);
  BootPdpt[4] = BootPdpt[0];
  writeCr3(readCr3());
  volatile uint8_t *Alias = (volatile uint8_t *)(uintptr_t)(ALIAS_BASE + (uintptr_t)SmcCode);
  Alias[1] = 0x77;
  uint32_t Got = call();
  BootPdpt[4] = 0;
  writeCr3(readCr3());
  EXPECT_EQ(Got, 0x66666677);
  return TestPass;
}
