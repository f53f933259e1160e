#include "vmx/movdecode.h"

bool decodeMov(const uint8_t *Code, struct MovInsn *Out) {
  unsigned I = 0;
  bool OpSize16 = false;
  uint8_t Rex = 0;
  if (Code[I] == 0x66) {
    OpSize16 = true;
    ++I;
  }
  if ((Code[I] & 0xf0) == 0x40)
    Rex = Code[I++];
  uint8_t Op = Code[I++];
  if (Op == 0xa1 || Op == 0xa3) {
    /* MOV rAX, moffs / MOV moffs, rAX: the offset is 8 bytes in 64-bit mode (SDM Vol.
       2B, MOV, note on moffs; no address-size prefix is accepted here). */
    Out->Size = (Rex & 8) ? 8 : OpSize16 ? 2 : 4;
    Out->Store = Op == 0xa3;
    Out->HasImm = false;
    Out->Reg = 0;
    Out->Imm = 0;
    Out->Length = (uint8_t)(I + 8);
    return true;
  }
  if (Op != 0x89 && Op != 0x8b && Op != 0xc7)
    return false;
  uint8_t ModRm = Code[I++];
  unsigned Mod = ModRm >> 6, RegField = (ModRm >> 3) & 7, Rm = ModRm & 7;
  if (Mod == 3 || (Op == 0xc7 && RegField != 0))
    return false; /* register operands: no memory access; C7 /1-7 do not exist */
  /* SDM Vol. 2A, Table 2-2 "32-Bit Addressing Forms with the ModR/M Byte" (the same in
     64-bit mode, mod 00 r/m 101 being RIP-relative) and Table 2-3 (SIB). */
  if (Rm == 4) {
    uint8_t Sib = Code[I++];
    if (Mod == 0 && (Sib & 7) == 5)
      I += 4;
  } else if (Mod == 0 && Rm == 5) {
    I += 4;
  }
  I += Mod == 1 ? 1 : Mod == 2 ? 4 : 0;
  Out->Size = (Rex & 8) ? 8 : OpSize16 ? 2 : 4;
  Out->Store = Op != 0x8b;
  Out->HasImm = Op == 0xc7;
  Out->Reg = (uint8_t)(RegField | ((Rex & 4) ? 8 : 0));
  Out->Imm = 0;
  if (Out->HasImm) {
    if (Out->Size == 2) {
      Out->Imm = (uint64_t)(Code[I] | (Code[I + 1] << 8));
      I += 2;
    } else {
      uint32_t V = (uint32_t)Code[I] | ((uint32_t)Code[I + 1] << 8) |
                   ((uint32_t)Code[I + 2] << 16) | ((uint32_t)Code[I + 3] << 24);
      Out->Imm = Out->Size == 8 ? (uint64_t)(int64_t)(int32_t)V : V;
      I += 4;
    }
  }
  Out->Length = (uint8_t)I;
  return true;
}
