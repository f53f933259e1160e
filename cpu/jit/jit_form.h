// What the translator (cpu/jit/translator.h) needs to know about a decoded instruction:
// which operation its bound handler performs, in which form. The handlers are private to
// their family's file (cpu/exec_*.cpp), so each family that has translatable forms answers
// for its own handlers by comparing the handler pointer with its instantiations: the
// handler bound at decode time stays the one definition of what the instruction does.
#pragma once
#include "cpu/decoded_insn.h"

#include <cstdint>
#include <initializer_list>

namespace vmxsim {

enum class JitOp : uint8_t {
  None, ///< not a form the translator knows
  // Two-operand arithmetic and logic, in the order of cpu/exec_alu.cpp's AluOp.
  Add, Or, Adc, Sbb, And, Sub, Xor, Cmp, Test,
  Inc, Dec, Neg, Not,
  Mov, Lea, MovZx, MovSx,
  Rol, Ror, Shl, Shr, Sar,
  JmpRel, JccRel, Nop,
  Push, Pop, CallRel, Ret,
  Imul, Setcc, Cmov, ///< register forms: IMUL r, r / r, r, imm; SETcc r8; CMOVcc r, r
};

/// Where the operands are: register-only forms are emitted inline; a memory form is
/// executed by calling its own handler from the translated code (cpu/jit/translator.cpp).
enum class JitShape : uint8_t { RegReg, RegImm, Reg, Mem, None };

struct JitForm {
  JitOp Op = JitOp::None;
  JitShape Shape = JitShape::None;
  uint8_t Size = 0;    ///< operand size in bytes
  uint8_t SrcSize = 0; ///< MOVZX/MOVSX: the source's size
  /// PUSH r64, POP r64, CALL rel32 and RET of 64-bit mode: handlers with a TLB-hit fast
  /// path of their own (cpu/exec_data.cpp execPushReg64, cpu/exec_control.cpp callTo),
  /// which the translation emits inline.
  bool Stack64 = false;
};

/// The first of Forms that names an operation (a family's answers per operand size).
inline JitForm firstKnown(std::initializer_list<JitForm> Forms) {
  for (JitForm F : Forms)
    if (F.Op != JitOp::None)
      return F;
  return {};
}

/// Each family's answer (cpu/exec_alu.cpp, exec_data.cpp, exec_shift.cpp,
/// exec_control.cpp, exec_system.cpp, exec_muldiv.cpp, exec_flags.cpp): the form of I when its handler is one of the family's, else
/// Op == JitOp::None.
JitForm aluJitForm(const DecodedInsn &I);
JitForm dataJitForm(const DecodedInsn &I);
JitForm shiftJitForm(const DecodedInsn &I);
JitForm controlJitForm(const DecodedInsn &I);
JitForm systemJitForm(const DecodedInsn &I);
JitForm muldivJitForm(const DecodedInsn &I);
JitForm flagsJitForm(const DecodedInsn &I);

/// The first family that knows I's handler.
inline JitForm jitFormOf(const DecodedInsn &I) {
  for (JitForm (*F)(const DecodedInsn &) :
       {aluJitForm, dataJitForm, shiftJitForm, controlJitForm, systemJitForm, muldivJitForm,
        flagsJitForm}) {
    JitForm R = F(I);
    if (R.Op != JitOp::None)
      return R;
  }
  return {};
}

} // namespace vmxsim
