/* A small decoder for the instructions a guest uses on an emulated MMIO page: MOV
 * between a general register and memory (89 /r, 8B /r, with or without REX.W, and the
 * 16-bit operand-size prefix), between rAX and an absolute address (A1, A3) and MOV of
 * an immediate to memory (C7 /0). The VM-exit
 * instruction length is undefined for EPT violations (SDM Vol. 3C, "VM-Exit Instruction
 * Length" lists the exits that set it), so the length comes from here: prefixes, opcode,
 * ModR/M, SIB and displacement (SDM Vol. 2A, "Instruction Format" and Tables 2-2, 2-3).
 */
#ifndef HVM_VMX_MOVDECODE_H
#define HVM_VMX_MOVDECODE_H

#include <stdbool.h>
#include <stdint.h>

struct MovInsn {
  uint8_t Length; /* bytes of the whole instruction */
  uint8_t Size;   /* operand size in bytes: 2, 4 or 8 */
  bool Store;     /* memory is the destination */
  bool HasImm;    /* C7: the value is Imm, not a register */
  uint8_t Reg;    /* the general register (exit-qualification numbering), unless HasImm */
  uint64_t Imm;   /* C7: imm16/imm32, sign-extended to 64 bits for REX.W */
};

/// Decodes the instruction at Code (at most 15 bytes are read). False for anything else.
bool decodeMov(const uint8_t *Code, struct MovInsn *Out);

#endif
