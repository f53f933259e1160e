// Multiplication and division: MUL, IMUL (one-, two- and three-operand forms), DIV,
// IDIV and the BMI2 MULX (SDM Vol. 2A, DIV, IDIV, IMUL; Vol. 2B, MUL, MULX).
//
// Undefined flags get one fixed value (deterministic; pinned by insn_muldiv_test):
// MUL/IMUL set SF, ZF and PF from the low half of the product (the truncated result for
// the two- and three-operand IMUL) and clear AF; DIV/IDIV leave all flags unchanged.
#include "cpu/exec.h"
#include "cpu/jit/jit_form.h"

namespace vmxsim {

namespace {

template <typename T> using Wide = std::conditional_t<
    sizeof(T) == 1, uint16_t,
    std::conditional_t<sizeof(T) == 2, uint32_t,
                       std::conditional_t<sizeof(T) == 4, uint64_t, unsigned __int128>>>;
template <typename T> using SWide = std::conditional_t<
    sizeof(T) == 1, int16_t,
    std::conditional_t<sizeof(T) == 2, int32_t,
                       std::conditional_t<sizeof(T) == 4, int64_t, __int128>>>;

inline uint64_t mulFlags(uint64_t Szp, bool Overflow) {
  return Szp | (Overflow ? rflags::CF | rflags::OF : 0);
}

/// The implicit-accumulator operand pair: AX (8-bit: AH:AL), DX:AX, EDX:EAX, RDX:RAX.
template <typename T> inline void storeAccPair(Cpu &C, T Lo, T Hi) {
  if constexpr (sizeof(T) == 1) {
    setReg<uint16_t>(C, RAX, uint16_t(Lo | (uint16_t(Hi) << 8)));
  } else {
    setReg<T>(C, RAX, Lo);
    setReg<T>(C, RDX, Hi);
  }
}
template <typename T> inline Wide<T> loadAccPair(const Cpu &C) {
  if constexpr (sizeof(T) == 1)
    return getReg<uint16_t>(C, RAX);
  else
    return (Wide<T>(getReg<T>(C, RDX)) << kBits<T>) | getReg<T>(C, RAX);
}

template <typename T, bool IsMem> inline Status readSrc(Cpu &C, const DecodedInsn &I, T &V) {
  return readOp<T, IsMem, 0>(C, I, V);
}

// MUL r/m: unsigned accumulator * source (SDM Vol. 2B, MUL).
template <typename T, bool IsMem> Status execMul(Cpu &C, const DecodedInsn &I) {
  T B;
  VMX_TRY((readSrc<T, IsMem>(C, I, B)));
  Wide<T> P = Wide<T>(getReg<T>(C, RAX)) * B;
  T Lo = T(P), Hi = T(P >> kBits<T>);
  storeAccPair<T>(C, Lo, Hi);
  setArithFlags(C, mulFlags(flagsSzp(Lo), Hi != 0));
  return next(C, I);
}

// IMUL r/m: signed accumulator * source (SDM Vol. 2A, IMUL, one-operand form).
template <typename T, bool IsMem> Status execImul1(Cpu &C, const DecodedInsn &I) {
  using S = std::make_signed_t<T>;
  T B;
  VMX_TRY((readSrc<T, IsMem>(C, I, B)));
  SWide<T> P = SWide<T>(S(getReg<T>(C, RAX))) * SWide<T>(S(B));
  T Lo = T(P), Hi = T(Wide<T>(P) >> kBits<T>);
  storeAccPair<T>(C, Lo, Hi);
  setArithFlags(C, mulFlags(flagsSzp(Lo), SWide<T>(S(Lo)) != P));
  return next(C, I);
}

// IMUL r, r/m and IMUL r, r/m, imm: the product truncated to the destination size.
template <typename T, bool IsMem, bool HasImm> Status execImulN(Cpu &C, const DecodedInsn &I) {
  using S = std::make_signed_t<T>;
  T A, B;
  if constexpr (HasImm) {
    VMX_TRY((readOp<T, IsMem, 1>(C, I, A)));
    B = T(I.Imm);
  } else {
    A = getReg<T>(C, I.Reg[0]);
    VMX_TRY((readOp<T, IsMem, 1>(C, I, B)));
  }
  SWide<T> P = SWide<T>(S(A)) * SWide<T>(S(B));
  T R = T(P);
  setReg<T>(C, I.Reg[0], R);
  setArithFlags(C, mulFlags(flagsSzp(R), SWide<T>(S(R)) != P));
  return next(C, I);
}

// DIV r/m (SDM Vol. 2A, DIV): #DE on a zero divisor or a quotient that does not fit.
template <typename T, bool IsMem> Status execDiv(Cpu &C, const DecodedInsn &I) {
  T B;
  VMX_TRY((readSrc<T, IsMem>(C, I, B)));
  if (B == 0)
    return C.raise(vec::DE);
  Wide<T> N = loadAccPair<T>(C);
  Wide<T> Q = N / B;
  if (Q >> kBits<T>)
    return C.raise(vec::DE);
  storeAccPair<T>(C, T(Q), T(N % B));
  return next(C, I);
}

// IDIV r/m (SDM Vol. 2A, IDIV): #DE on a zero divisor or a quotient outside the signed
// range, which includes the most negative dividend divided by -1.
template <typename T, bool IsMem> Status execIdiv(Cpu &C, const DecodedInsn &I) {
  using S = std::make_signed_t<T>;
  T B;
  VMX_TRY((readSrc<T, IsMem>(C, I, B)));
  if (B == 0)
    return C.raise(vec::DE);
  SWide<T> N = SWide<T>(loadAccPair<T>(C));
  SWide<T> D = S(B);
  // MIN / -1 overflows the wide type as well: it never fits, so test it first.
  constexpr SWide<T> WideMin = SWide<T>(Wide<T>(1) << (2 * kBits<T> - 1));
  if (D == -1 && N == WideMin)
    return C.raise(vec::DE);
  SWide<T> Q = N / D, Rm = N % D;
  if (Q != SWide<T>(S(T(Q))))
    return C.raise(vec::DE);
  storeAccPair<T>(C, T(Q), T(Rm));
  return next(C, I);
}

// MULX r1, r2, r/m (SDM Vol. 2B, MULX): unsigned RDX/EDX * source, high half to the
// ModRM.reg destination, low half to VEX.vvvv; no flags. When both destinations are the
// same register it receives the high half.
template <typename T, bool IsMem> Status execMulx(Cpu &C, const DecodedInsn &I) {
  T B;
  VMX_TRY((readOp<T, IsMem, 2>(C, I, B)));
  Wide<T> P = Wide<T>(getReg<T>(C, RDX)) * B;
  setReg<T>(C, I.Reg[1], T(P));
  setReg<T>(C, I.Reg[0], T(P >> kBits<T>));
  return next(C, I);
}

bool lockedOrBad(const DecodeInfo &D) { return D.Prefixes & insnflag::Lock; }

} // namespace

bool bindMul(const DecodeInfo &D, DecodedInsn &I) {
  if (lockedOrBad(D))
    return false;
  copyOperandRegs(D, I);
  bool Mem = D.Ops[0].Kind == OperandKind::Mem;
  I.Fn = Mem ? VMX_BY_SIZE(D.Ops[0].SizeBytes, execMul, true)
             : VMX_BY_SIZE(D.Ops[0].SizeBytes, execMul, false);
  I.Cost = costOf(CostClass::Multiply);
  return true;
}

bool bindImul(const DecodeInfo &D, DecodedInsn &I) {
  if (lockedOrBad(D))
    return false;
  copyOperandRegs(D, I);
  const unsigned Size = D.Ops[0].SizeBytes;
  I.Cost = costOf(CostClass::Multiply);
  if (D.NumVisible == 1) {
    bool Mem = D.Ops[0].Kind == OperandKind::Mem;
    I.Fn = Mem ? VMX_BY_SIZE(Size, execImul1, true) : VMX_BY_SIZE(Size, execImul1, false);
    return true;
  }
  bool Mem = D.Ops[1].Kind == OperandKind::Mem;
  if (Size == 1)
    return false;
  if (D.NumVisible == 3)
    I.Fn = Mem ? VMX_BY_SIZE(Size, execImulN, true, true)
               : VMX_BY_SIZE(Size, execImulN, false, true);
  else
    I.Fn = Mem ? VMX_BY_SIZE(Size, execImulN, true, false)
               : VMX_BY_SIZE(Size, execImulN, false, false);
  return true;
}

/// IMUL r, r and IMUL r, r, imm are emitted inline by the translator (cpu/jit/
/// translator.cpp), with execImulN's flags.
JitForm muldivJitForm(const DecodedInsn &I) {
  JitForm R;
  auto Sized = [&](auto Zero) {
    using T = decltype(Zero);
    constexpr uint8_t N = sizeof(T);
    if (I.Fn == &execImulN<T, false, false>)
      R = JitForm{JitOp::Imul, JitShape::RegReg, N, N};
    else if (I.Fn == &execImulN<T, false, true>)
      R = JitForm{JitOp::Imul, JitShape::RegImm, N, N};
  };
  Sized(uint16_t{});
  Sized(uint32_t{});
  Sized(uint64_t{});
  return R;
}

bool bindDiv(const DecodeInfo &D, DecodedInsn &I) {
  if (lockedOrBad(D))
    return false;
  copyOperandRegs(D, I);
  bool Mem = D.Ops[0].Kind == OperandKind::Mem;
  I.Fn = Mem ? VMX_BY_SIZE(D.Ops[0].SizeBytes, execDiv, true)
             : VMX_BY_SIZE(D.Ops[0].SizeBytes, execDiv, false);
  I.Cost = costOf(CostClass::Divide);
  return true;
}

bool bindIdiv(const DecodeInfo &D, DecodedInsn &I) {
  if (lockedOrBad(D))
    return false;
  copyOperandRegs(D, I);
  bool Mem = D.Ops[0].Kind == OperandKind::Mem;
  I.Fn = Mem ? VMX_BY_SIZE(D.Ops[0].SizeBytes, execIdiv, true)
             : VMX_BY_SIZE(D.Ops[0].SizeBytes, execIdiv, false);
  I.Cost = costOf(CostClass::Divide);
  return true;
}

bool bindMulx(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  bool Mem = D.Ops[2].Kind == OperandKind::Mem;
  unsigned Size = D.Ops[0].SizeBytes;
  if (Size == 4)
    I.Fn = Mem ? &execMulx<uint32_t, true> : &execMulx<uint32_t, false>;
  else
    I.Fn = Mem ? &execMulx<uint64_t, true> : &execMulx<uint64_t, false>;
  I.Cost = costOf(CostClass::Multiply);
  return true;
}

} // namespace vmxsim
