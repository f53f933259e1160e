// The compact decoded form of one instruction (STYLE 2.2). The decoder (cpu/decode.cpp,
// the only Zydis user) fills it once per instruction address; the handler pointer is
// bound at decode time so execution is one indirect call.
#pragma once
#include "cpu/registers.h"
#include "cpu/status.h"
#include <cstdint>

namespace vmxsim {

class Cpu;
struct DecodedInsn;
using Handler = Status (*)(Cpu &, const DecodedInsn &);

namespace insnflag {
inline constexpr uint8_t HasMem = 1 << 0;   ///< one operand is memory (Seg/Base/Index/Disp)
inline constexpr uint8_t Lock = 1 << 1;     ///< LOCK prefix
inline constexpr uint8_t Rep = 1 << 2;      ///< REP/REPE prefix (F3)
inline constexpr uint8_t Repne = 1 << 3;    ///< REPNE prefix (F2)
inline constexpr uint8_t EndsBlock = 1 << 4; ///< control transfer or state change: last in block
inline constexpr uint8_t OpSizeOverride = 1 << 5; ///< 66 prefix present (SSE forms)
inline constexpr uint8_t RexW = 1 << 6;
} // namespace insnflag

struct DecodedInsn {
  Handler Fn = nullptr;
  uint64_t Imm = 0;    ///< immediate, sign- or zero-extended as the instruction defines;
                       ///< for direct branches the target offset relative to the next RIP
  int64_t Disp = 0;    ///< memory displacement (or the absolute moffs of MOV AL, [moffs])
  uint16_t Imm2 = 0;   ///< far-pointer selector, ENTER nesting level
  uint16_t Mnemonic = 0; ///< decoder's mnemonic number: for traces and messages only
  uint8_t Len = 0;
  uint8_t OpSize = 0;    ///< effective operand size in bytes (1, 2, 4, 8; 16 for XMM)
  uint8_t AddrSize = 0;  ///< effective address size in bytes (2, 4, 8)
  uint8_t Seg = 0;       ///< SegReg of the memory operand, after overrides
  uint8_t Base = kRegNone, Index = kRegNone, ScaleLog2 = 0;
  uint8_t Reg[3] = {kRegNone, kRegNone, kRegNone}; ///< register of operand 0..2 (kRegNone:
                                                  ///< not a register, i.e. memory/immediate)
  uint8_t SrcSize = 0;   ///< size of the source operand where it differs (MOVZX, imm)
  uint8_t Cond = 0;      ///< condition code 0..15 (Jcc, SETcc, CMOVcc)
  uint8_t Flags = 0;     ///< insnflag bits
  uint8_t Cost = 1;      ///< virtual cycles, from the cost model
  /// Virtual cycles of this instruction and of the rest of its block (the sum of their
  /// Cost), filled by the decoder: the run loop's one stop check per block
  /// (Cpu::runBlocks) needs where the block ends on the virtual clock.
  uint16_t CostToEnd = 1;

  bool hasMem() const { return Flags & insnflag::HasMem; }
};
static_assert(sizeof(DecodedInsn) <= 48, "keep the decoded form compact");

/// Condition codes in opcode order (SDM Vol. 1, Jcc/SETcc/CMOVcc condition table).
enum Cond : uint8_t { O, NO, B, AE, E, NE, BE, A, S, NS, P, NP, L, GE, LE, G };

} // namespace vmxsim
