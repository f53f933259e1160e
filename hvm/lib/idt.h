/* A 64-bit IDT gate (SDM Vol. 3A, "Interrupt and Exception Handling" > "IDT Descriptors",
   64-bit mode): the one definition the runtime, the images and the hypervisor core use. */
#pragma once
#include <stdint.h>

struct IdtGate64 {
  uint16_t OffsetLow;
  uint16_t Selector;
  uint8_t Ist;
  uint8_t TypeAttr;
  uint16_t OffsetMid;
  uint32_t OffsetHigh;
  uint32_t Reserved;
};
_Static_assert(sizeof(struct IdtGate64) == 16, "64-bit IDT gates are 16 bytes");

/* Present, DPL 0, 64-bit interrupt gate: IF is cleared on entry. */
#define IDT_GATE_INTERRUPT 0x8e

/* An interrupt gate to Handler through code segment Selector, no IST. */
static inline struct IdtGate64 idtInterruptGate(uint64_t Handler, uint16_t Selector) {
  struct IdtGate64 G = {(uint16_t)Handler,         Selector, 0, IDT_GATE_INTERRUPT,
                        (uint16_t)(Handler >> 16), (uint32_t)(Handler >> 32), 0};
  return G;
}
