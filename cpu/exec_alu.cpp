// Two-operand integer arithmetic and logic: ADD OR ADC SBB AND SUB XOR CMP TEST
// (SDM Vol. 2, instruction pages of each), and INC/DEC/NEG/NOT.
#include "cpu/exec.h"
#include "cpu/jit/jit_form.h"

namespace vmxsim {

namespace {

enum class AluOp : uint8_t { Add, Or, Adc, Sbb, And, Sub, Xor, Cmp, Test };
/// Operand forms: destination register or memory, source register, memory or immediate.
enum class Form : uint8_t { RR, RM, MR, RI, MI };

template <AluOp Op> inline constexpr bool kWritesDest = Op != AluOp::Cmp && Op != AluOp::Test;

template <AluOp Op, typename T> inline T alu(Cpu &C, T A, T B) {
  T R;
  uint64_t F;
  switch (Op) {
  case AluOp::Add:
    R = T(A + B);
    F = flagsAdd<T>(A, B, R, false);
    break;
  case AluOp::Adc: {
    bool Cin = C.S.Rflags & rflags::CF;
    R = T(A + B + Cin);
    F = flagsAdd<T>(A, B, R, Cin);
    break;
  }
  case AluOp::Sub:
  case AluOp::Cmp:
    R = T(A - B);
    F = flagsSub<T>(A, B, R, false);
    break;
  case AluOp::Sbb: {
    bool Bin = C.S.Rflags & rflags::CF;
    R = T(A - B - Bin);
    F = flagsSub<T>(A, B, R, Bin);
    break;
  }
  case AluOp::And:
  case AluOp::Test:
    R = A & B;
    F = flagsLogic<T>(R);
    break;
  case AluOp::Or:
    R = A | B;
    F = flagsLogic<T>(R);
    break;
  case AluOp::Xor:
    R = A ^ B;
    F = flagsLogic<T>(R);
    break;
  }
  setArithFlags(C, F);
  return R;
}

// Flat: a flat 64-bit memory operand (cpu/memory.h, flat64Operand).
template <typename T, AluOp Op, Form F, bool Flat = false>
Status execAlu(Cpu &C, const DecodedInsn &I) {
  if constexpr (F == Form::RR || F == Form::RI || F == Form::RM) {
    T A = getReg<T>(C, I.Reg[0]);
    T B;
    if constexpr (F == Form::RR)
      B = getReg<T>(C, I.Reg[1]);
    else if constexpr (F == Form::RI)
      B = T(I.Imm);
    else
      VMX_TRY(readMemOp<Flat>(C, I, B));
    T R = alu<Op, T>(C, A, B);
    if constexpr (kWritesDest<Op>)
      setReg<T>(C, I.Reg[0], R);
  } else {
    T B = F == Form::MR ? getReg<T>(C, I.Reg[1]) : T(I.Imm);
    if constexpr (kWritesDest<Op>) {
      RmwRef Ref;
      VMX_TRY((mapRmwOp<Flat, T>(C, I, Ref)));
      T A;
      VMX_TRY(rmwRead(C, Ref, A));
      T R = alu<Op, T>(C, A, B);
      VMX_TRY(rmwWrite(C, Ref, R));
    } else {
      T A;
      VMX_TRY(readMemOp<Flat>(C, I, A));
      (void)alu<Op, T>(C, A, B);
    }
  }
  return nextOp<Flat>(C, I);
}

template <AluOp Op> bool bindAluOp(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  const OperandInfo &Dst = D.Ops[0], &Src = D.Ops[1];
  const unsigned Size = Dst.SizeBytes;
  const bool Locked = D.Prefixes & insnflag::Lock;
  // LOCK is only valid with a memory destination of a writing op (SDM Vol. 2A, LOCK).
  if (Locked && (Dst.Kind != OperandKind::Mem || !kWritesDest<Op>))
    return false;
  Form F;
  if (Dst.Kind == OperandKind::Reg)
    F = Src.Kind == OperandKind::Reg ? Form::RR
        : Src.Kind == OperandKind::Imm ? Form::RI
                                       : Form::RM;
  else
    F = Src.Kind == OperandKind::Imm ? Form::MI : Form::MR;
  const bool Flat = flat64Operand(D.Mode, I); // only asked of the memory forms
  switch (F) {
  case Form::RR: I.Fn = VMX_BY_SIZE(Size, execAlu, Op, Form::RR); break;
  case Form::RM:
    I.Fn = Flat ? VMX_BY_SIZE(Size, execAlu, Op, Form::RM, true)
                : VMX_BY_SIZE(Size, execAlu, Op, Form::RM);
    break;
  case Form::MR:
    I.Fn = Flat ? VMX_BY_SIZE(Size, execAlu, Op, Form::MR, true)
                : VMX_BY_SIZE(Size, execAlu, Op, Form::MR);
    break;
  case Form::RI: I.Fn = VMX_BY_SIZE(Size, execAlu, Op, Form::RI); break;
  case Form::MI:
    I.Fn = Flat ? VMX_BY_SIZE(Size, execAlu, Op, Form::MI, true)
                : VMX_BY_SIZE(Size, execAlu, Op, Form::MI);
    break;
  }
  I.Cost = costOf(F == Form::RR || F == Form::RI ? CostClass::Simple : CostClass::Memory);
  return true;
}

// INC/DEC leave CF unchanged; NEG sets CF unless the operand was 0; NOT changes no flags.
enum class UnOp : uint8_t { Inc, Dec, Neg, Not };

template <UnOp Op, typename T> inline T unary(Cpu &C, T A) {
  switch (Op) {
  case UnOp::Inc: {
    T R = T(A + 1);
    setArithFlags(C, flagsAdd<T>(A, 1, R, false), rflags::Arith & ~rflags::CF);
    return R;
  }
  case UnOp::Dec: {
    T R = T(A - 1);
    setArithFlags(C, flagsSub<T>(A, 1, R, false), rflags::Arith & ~rflags::CF);
    return R;
  }
  case UnOp::Neg: {
    T R = T(T(0) - A);
    setArithFlags(C, flagsSub<T>(0, A, R, false));
    return R;
  }
  case UnOp::Not:
    return T(~A);
  }
  return A;
}

template <typename T, UnOp Op, bool IsMem> Status execUnary(Cpu &C, const DecodedInsn &I) {
  if constexpr (IsMem) {
    RmwRef Ref;
    VMX_TRY(mapRmw<T>(C, SegReg(I.Seg), effectiveAddress(C, I), Ref));
    T A;
    VMX_TRY(rmwRead(C, Ref, A));
    VMX_TRY(rmwWrite(C, Ref, unary<Op, T>(C, A)));
  } else {
    setReg<T>(C, I.Reg[0], unary<Op, T>(C, getReg<T>(C, I.Reg[0])));
  }
  return next(C, I);
}

template <UnOp Op> bool bindUnaryOp(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  const OperandInfo &Dst = D.Ops[0];
  bool Mem = Dst.Kind == OperandKind::Mem;
  if ((D.Prefixes & insnflag::Lock) && !Mem)
    return false;
  I.Fn = Mem ? VMX_BY_SIZE(Dst.SizeBytes, execUnary, Op, true)
             : VMX_BY_SIZE(Dst.SizeBytes, execUnary, Op, false);
  I.Cost = costOf(Mem ? CostClass::Memory : CostClass::Simple);
  return true;
}

} // namespace

bool bindAdd(const DecodeInfo &D, DecodedInsn &I) { return bindAluOp<AluOp::Add>(D, I); }
bool bindOr(const DecodeInfo &D, DecodedInsn &I) { return bindAluOp<AluOp::Or>(D, I); }
bool bindAdc(const DecodeInfo &D, DecodedInsn &I) { return bindAluOp<AluOp::Adc>(D, I); }
bool bindSbb(const DecodeInfo &D, DecodedInsn &I) { return bindAluOp<AluOp::Sbb>(D, I); }
bool bindAnd(const DecodeInfo &D, DecodedInsn &I) { return bindAluOp<AluOp::And>(D, I); }
bool bindSub(const DecodeInfo &D, DecodedInsn &I) { return bindAluOp<AluOp::Sub>(D, I); }
bool bindXor(const DecodeInfo &D, DecodedInsn &I) { return bindAluOp<AluOp::Xor>(D, I); }
bool bindCmp(const DecodeInfo &D, DecodedInsn &I) { return bindAluOp<AluOp::Cmp>(D, I); }
bool bindTest(const DecodeInfo &D, DecodedInsn &I) { return bindAluOp<AluOp::Test>(D, I); }
bool bindInc(const DecodeInfo &D, DecodedInsn &I) { return bindUnaryOp<UnOp::Inc>(D, I); }
bool bindDec(const DecodeInfo &D, DecodedInsn &I) { return bindUnaryOp<UnOp::Dec>(D, I); }
bool bindNeg(const DecodeInfo &D, DecodedInsn &I) { return bindUnaryOp<UnOp::Neg>(D, I); }
bool bindNot(const DecodeInfo &D, DecodedInsn &I) { return bindUnaryOp<UnOp::Not>(D, I); }

namespace {
/// The (size, form) of Fn when it is execAlu<T, Op, F> or execUnary<T, Op, IsMem>.
template <typename T> JitForm aluFormSized(Handler Fn) {
  constexpr uint8_t N = sizeof(T);
  JitForm R;
  auto Try = [&](Handler H, JitOp Op, JitShape Shape) {
    if (Fn == H)
      R = JitForm{Op, Shape, N, N};
  };
#define VMX_JIT_ALU(Name)                                                                \
  Try(&execAlu<T, AluOp::Name, Form::RR>, JitOp::Name, JitShape::RegReg);                \
  Try(&execAlu<T, AluOp::Name, Form::RI>, JitOp::Name, JitShape::RegImm);                \
  Try(&execAlu<T, AluOp::Name, Form::RM>, JitOp::Name, JitShape::Mem);                   \
  Try(&execAlu<T, AluOp::Name, Form::MR>, JitOp::Name, JitShape::Mem);                   \
  Try(&execAlu<T, AluOp::Name, Form::MI>, JitOp::Name, JitShape::Mem);                   \
  Try(&execAlu<T, AluOp::Name, Form::RM, true>, JitOp::Name, JitShape::Mem);             \
  Try(&execAlu<T, AluOp::Name, Form::MR, true>, JitOp::Name, JitShape::Mem);             \
  Try(&execAlu<T, AluOp::Name, Form::MI, true>, JitOp::Name, JitShape::Mem);
  VMX_JIT_ALU(Add) VMX_JIT_ALU(Or) VMX_JIT_ALU(Adc) VMX_JIT_ALU(Sbb) VMX_JIT_ALU(And)
  VMX_JIT_ALU(Sub) VMX_JIT_ALU(Xor) VMX_JIT_ALU(Cmp) VMX_JIT_ALU(Test)
#undef VMX_JIT_ALU
#define VMX_JIT_UNARY(Name)                                                              \
  Try(&execUnary<T, UnOp::Name, false>, JitOp::Name, JitShape::Reg);                     \
  Try(&execUnary<T, UnOp::Name, true>, JitOp::Name, JitShape::Mem);
  VMX_JIT_UNARY(Inc) VMX_JIT_UNARY(Dec) VMX_JIT_UNARY(Neg) VMX_JIT_UNARY(Not)
#undef VMX_JIT_UNARY
  return R;
}
} // namespace

JitForm aluJitForm(const DecodedInsn &I) {
  return firstKnown({aluFormSized<uint8_t>(I.Fn), aluFormSized<uint16_t>(I.Fn),
                     aluFormSized<uint32_t>(I.Fn), aluFormSized<uint64_t>(I.Fn)});
}

} // namespace vmxsim
