// A decoder-neutral view of one decoded instruction, handed to the per-family binders
// (declared in the insns_*.def tables) that choose a handler and fill the DecodedInsn.
// It keeps Zydis types inside cpu/decode.cpp.
#pragma once
#include "cpu/decoded_insn.h"

namespace vmxsim {

enum class OperandKind : uint8_t { None, Reg, Mem, Imm, Ptr };
enum class RegClass : uint8_t { Gpr, Seg, Cr, Dr, Xmm, Mmx, X87, Other };

struct OperandInfo {
  OperandKind Kind = OperandKind::None;
  RegClass Class = RegClass::Gpr;
  uint8_t SizeBytes = 0; ///< operand size; for Imm, the size it applies at
  uint8_t Reg = kRegNone; ///< Gpr: 0..15, 16..19 = AH..BH; Seg: SegReg; Cr/Dr/Xmm: number
  bool Implicit = false;  ///< not written in the instruction text (e.g. the AL of AAA)
  SegReg Seg = SegReg::None; ///< Mem: segment after overrides (string instructions)
};

/// Mode the instruction was decoded in.
enum class CodeMode : uint8_t { Real16, Prot16, Prot32, Long64 };

struct DecodeInfo {
  uint16_t Mnemonic = 0;
  uint8_t Len = 0;
  uint8_t OpSize = 0;   ///< the instruction's effective operand size in bytes
  uint8_t AddrSize = 0;
  CodeMode Mode = CodeMode::Long64;
  uint8_t Opcode = 0;    ///< last opcode byte
  uint8_t OpcodeMap = 0; ///< 0: one-byte, 1: 0F, 2: 0F38, 3: 0F3A
  uint8_t ModRmReg = 0;
  uint8_t ModRm = 0;     ///< the whole ModR/M byte (x87 forms), 0 without one
  uint8_t NumOps = 0;   ///< all operands, visible first then implicit
  uint8_t NumVisible = 0;
  OperandInfo Ops[5];
  uint64_t Imm = 0;     ///< first immediate, sign-extended to 64 bits when signed
  uint64_t ImmRaw = 0;  ///< first immediate, zero-extended raw value
  uint8_t ImmSize = 0;  ///< encoded size of the first immediate in bytes
  uint64_t Imm2 = 0;    ///< second immediate (ENTER)
  bool ImmRelative = false; ///< first immediate is a branch displacement
  uint8_t Prefixes = 0; ///< insnflag::Lock/Rep/Repne/OpSizeOverride/RexW
  bool RepPrefixIsRepe = false;
};

/// A binder chooses the handler for one mnemonic. It returns false when the operand form
/// is not one vmxsim executes; the decoder then binds the #UD handler.
using Binder = bool (*)(const DecodeInfo &, DecodedInsn &);

} // namespace vmxsim
