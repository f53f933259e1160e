// Shifts and rotates: SAL/SHL SHR SAR ROL ROR RCL RCR by 1, CL and imm8, and the double
// shifts SHLD/SHRD (SDM Vol. 2B, SAL/SAR/SHL/SHR; RCL/RCR/ROL/ROR; SHLD; SHRD).
//
// Flags the SDM leaves undefined are given one fixed, documented value so that runs are
// deterministic (the oracle tests mask them; tests/cpu/insn_shift_test.cpp pins them):
//  - OF for a masked count > 1 uses the count-1 formula on the final values:
//    SHL/SAL/ROL/RCL: MSB(result) XOR CF; SHR: MSB(original); SAR: 0;
//    ROR: XOR of the two top bits of the result; RCR: MSB(original) XOR original CF;
//    SHLD/SHRD: MSB(result) XOR MSB(original).
//  - AF is cleared by every shift with a non-zero count (rotates never touch it).
//  - SHL/SHR with a count >= the operand width (8- and 16-bit forms) follow the
//    bit-by-bit pseudocode: CF is the last bit shifted out, i.e. 0 once the count passes
//    the width.
//  - 16-bit SHLD/SHRD with a count of 17..31 (result undefined) shift the 48-bit
//    concatenation DEST:SRC:DEST, which continues the count <= 16 behaviour smoothly.
#include "cpu/exec.h"
#include "cpu/jit/jit_form.h"

namespace vmxsim {

namespace {

enum class ShOp : uint8_t { Rol, Ror, Rcl, Rcr, Shl, Shr, Sar };

/// Count mask: 5 bits, 6 with a 64-bit operand (SDM Vol. 2B, SAL/SAR/SHL/SHR: "The count
/// is masked to 5 bits (or 6 bits with a 64-bit operand)").
template <typename T> inline unsigned countMask() { return sizeof(T) == 8 ? 0x3f : 0x1f; }

/// Applies one shift or rotate with an already masked, non-zero count; returns the result
/// and updates RFLAGS.
template <ShOp Op, typename T> inline T shiftOp(Cpu &C, T A, unsigned Count) {
  constexpr unsigned N = kBits<T>;
  uint64_t F = C.S.Rflags;
  const bool CfIn = F & rflags::CF;
  T R;
  bool Cf, Of;
  switch (Op) {
  case ShOp::Shl:
    R = Count < N ? T(A << Count) : T(0);
    Cf = Count <= N ? (A >> (N - Count)) & 1 : false;
    Of = bool(R & kMsb<T>) != Cf;
    break;
  case ShOp::Shr:
    R = Count < N ? T(A >> Count) : T(0);
    Cf = Count <= N ? (A >> (Count - 1)) & 1 : false;
    Of = A & kMsb<T>;
    break;
  case ShOp::Sar: {
    using S = std::make_signed_t<T>;
    unsigned Sh = Count < N ? Count : N - 1;
    R = T(S(A) >> Sh);
    Cf = Count <= N ? (uint64_t(int64_t(S(A))) >> (Count - 1)) & 1 : bool(A & kMsb<T>);
    Of = false;
    break;
  }
  case ShOp::Rol: {
    unsigned Tc = Count % N;
    R = Tc ? T((A << Tc) | (A >> (N - Tc))) : A;
    Cf = R & 1;
    Of = bool(R & kMsb<T>) != Cf;
    setArithFlags(C, (Cf ? rflags::CF : 0) | (Of ? rflags::OF : 0), rflags::CF | rflags::OF);
    return R;
  }
  case ShOp::Ror: {
    unsigned Tc = Count % N;
    R = Tc ? T((A >> Tc) | (A << (N - Tc))) : A;
    Cf = R & kMsb<T>;
    Of = ((R >> (N - 1)) ^ (R >> (N - 2))) & 1;
    setArithFlags(C, (Cf ? rflags::CF : 0) | (Of ? rflags::OF : 0), rflags::CF | rflags::OF);
    return R;
  }
  case ShOp::Rcl:
  case ShOp::Rcr: {
    // Rotate through CF: an (N+1)-bit rotate, count taken modulo N+1 for the narrow
    // forms (SDM Vol. 2B, RCL/RCR/ROL/ROR: tempCOUNT <- (COUNT & COUNTMASK) MOD 9/17).
    unsigned Tc = N < 32 ? Count % (N + 1) : Count;
    using W = unsigned __int128;
    const W Mask = (W(1) << (N + 1)) - 1;
    W V = (W(CfIn) << N) | W(A);
    if (Tc) {
      if (Op == ShOp::Rcl)
        V = ((V << Tc) | (V >> (N + 1 - Tc))) & Mask;
      else
        V = ((V >> Tc) | (V << (N + 1 - Tc))) & Mask;
    }
    R = T(V);
    Cf = (V >> N) & 1;
    Of = Op == ShOp::Rcl ? bool(R & kMsb<T>) != Cf : bool(A & kMsb<T>) != CfIn;
    setArithFlags(C, (Cf ? rflags::CF : 0) | (Of ? rflags::OF : 0), rflags::CF | rflags::OF);
    return R;
  }
  }
  setArithFlags(C, flagsSzp(R) | (Cf ? rflags::CF : 0) | (Of ? rflags::OF : 0));
  return R;
}

template <typename T, ShOp Op, bool CountInCl, bool IsMem>
Status execShift(Cpu &C, const DecodedInsn &I) {
  unsigned Count = unsigned(CountInCl ? C.S.Gpr[RCX] : I.Imm) & countMask<T>();
  if constexpr (IsMem) {
    RmwRef Ref;
    VMX_TRY(mapRmw<T>(C, SegReg(I.Seg), effectiveAddress(C, I), Ref));
    T A;
    VMX_TRY(rmwRead(C, Ref, A));
    // A zero count changes neither the operand nor the flags (but still accesses memory).
    T R = Count ? shiftOp<Op, T>(C, A, Count) : A;
    VMX_TRY(rmwWrite(C, Ref, R));
  } else {
    T A = getReg<T>(C, I.Reg[0]);
    if (Count)
      setReg<T>(C, I.Reg[0], shiftOp<Op, T>(C, A, Count));
    else if constexpr (sizeof(T) == 4)
      setReg<T>(C, I.Reg[0], A); // a 32-bit destination is still written (zero-extended)
  }
  return next(C, I);
}

/// SHLD (Left) / SHRD: Count masked and non-zero.
template <bool Left, typename T> inline T doubleShift(Cpu &C, T A, T B, unsigned Count) {
  constexpr unsigned N = kBits<T>;
  T R;
  bool Cf;
  if (N == 16 && Count > 16) {
    uint64_t Wide = (uint64_t(A) << 32) | (uint64_t(B) << 16) | A;
    if (Left) {
      R = T((Wide << Count) >> 32);
      Cf = (Wide >> (48 - Count)) & 1;
    } else {
      R = T(Wide >> Count);
      Cf = (Wide >> (Count - 1)) & 1;
    }
  } else {
    using W = unsigned __int128;
    if (Left) {
      W V = (W(A) << N) | W(B);
      R = T((V << Count) >> N);
      Cf = (V >> (2 * N - Count)) & 1;
    } else {
      W V = (W(B) << N) | W(A);
      R = T(V >> Count);
      Cf = (V >> (Count - 1)) & 1;
    }
  }
  bool Of = bool((R ^ A) & kMsb<T>);
  setArithFlags(C, flagsSzp(R) | (Cf ? rflags::CF : 0) | (Of ? rflags::OF : 0));
  return R;
}

template <typename T, bool Left, bool CountInCl, bool IsMem>
Status execDoubleShift(Cpu &C, const DecodedInsn &I) {
  unsigned Count = unsigned(CountInCl ? C.S.Gpr[RCX] : I.Imm) & countMask<T>();
  T B = getReg<T>(C, I.Reg[1]);
  if constexpr (IsMem) {
    RmwRef Ref;
    VMX_TRY(mapRmw<T>(C, SegReg(I.Seg), effectiveAddress(C, I), Ref));
    T A;
    VMX_TRY(rmwRead(C, Ref, A));
    VMX_TRY(rmwWrite(C, Ref, Count ? doubleShift<Left, T>(C, A, B, Count) : A));
  } else {
    T A = getReg<T>(C, I.Reg[0]);
    setReg<T>(C, I.Reg[0], Count ? doubleShift<Left, T>(C, A, B, Count) : A);
  }
  return next(C, I);
}

template <ShOp Op> bool bindShiftOp(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Prefixes & insnflag::Lock)
    return false;
  copyOperandRegs(D, I);
  const unsigned Size = D.Ops[0].SizeBytes;
  const bool Mem = D.Ops[0].Kind == OperandKind::Mem;
  const bool Cl = D.Ops[1].Kind == OperandKind::Reg;
  I.Imm = D.ImmRaw;
  if (Mem)
    I.Fn = Cl ? VMX_BY_SIZE(Size, execShift, Op, true, true)
              : VMX_BY_SIZE(Size, execShift, Op, false, true);
  else
    I.Fn = Cl ? VMX_BY_SIZE(Size, execShift, Op, true, false)
              : VMX_BY_SIZE(Size, execShift, Op, false, false);
  I.Cost = costOf(Mem ? CostClass::Memory : CostClass::Simple);
  return true;
}

template <typename T, bool Left>
Handler pickDoubleShift(bool Cl, bool Mem) {
  if (Mem)
    return Cl ? &execDoubleShift<T, Left, true, true> : &execDoubleShift<T, Left, false, true>;
  return Cl ? &execDoubleShift<T, Left, true, false> : &execDoubleShift<T, Left, false, false>;
}

template <bool Left> bool bindDoubleShift(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Prefixes & insnflag::Lock)
    return false;
  copyOperandRegs(D, I);
  const unsigned Size = D.Ops[0].SizeBytes;
  const bool Mem = D.Ops[0].Kind == OperandKind::Mem;
  const bool Cl = D.Ops[2].Kind == OperandKind::Reg;
  I.Imm = D.ImmRaw;
  I.Fn = Size == 2   ? pickDoubleShift<uint16_t, Left>(Cl, Mem)
         : Size == 4 ? pickDoubleShift<uint32_t, Left>(Cl, Mem)
                     : pickDoubleShift<uint64_t, Left>(Cl, Mem);
  I.Cost = costOf(Mem ? CostClass::Memory : CostClass::Simple);
  return true;
}

} // namespace

bool bindRol(const DecodeInfo &D, DecodedInsn &I) { return bindShiftOp<ShOp::Rol>(D, I); }
bool bindRor(const DecodeInfo &D, DecodedInsn &I) { return bindShiftOp<ShOp::Ror>(D, I); }
bool bindRcl(const DecodeInfo &D, DecodedInsn &I) { return bindShiftOp<ShOp::Rcl>(D, I); }
bool bindRcr(const DecodeInfo &D, DecodedInsn &I) { return bindShiftOp<ShOp::Rcr>(D, I); }
bool bindShl(const DecodeInfo &D, DecodedInsn &I) { return bindShiftOp<ShOp::Shl>(D, I); }
bool bindShr(const DecodeInfo &D, DecodedInsn &I) { return bindShiftOp<ShOp::Shr>(D, I); }
bool bindSar(const DecodeInfo &D, DecodedInsn &I) { return bindShiftOp<ShOp::Sar>(D, I); }
bool bindShld(const DecodeInfo &D, DecodedInsn &I) { return bindDoubleShift<true>(D, I); }
bool bindShrd(const DecodeInfo &D, DecodedInsn &I) { return bindDoubleShift<false>(D, I); }

namespace {
/// Shifts and rotates by an immediate (register destination inline, memory through the
/// handler); the CL forms and the double shifts are not translated.
template <typename T> JitForm shiftFormSized(Handler Fn) {
  constexpr uint8_t N = sizeof(T);
  JitForm R;
  auto Try = [&](Handler H, JitOp Op, JitShape Shape) {
    if (Fn == H)
      R = JitForm{Op, Shape, N, N};
  };
#define VMX_JIT_SHIFT(Name)                                                              \
  Try(&execShift<T, ShOp::Name, false, false>, JitOp::Name, JitShape::RegImm);           \
  Try(&execShift<T, ShOp::Name, false, true>, JitOp::Name, JitShape::Mem);
  VMX_JIT_SHIFT(Rol) VMX_JIT_SHIFT(Ror) VMX_JIT_SHIFT(Shl) VMX_JIT_SHIFT(Shr)
  VMX_JIT_SHIFT(Sar)
#undef VMX_JIT_SHIFT
  return R;
}
} // namespace

JitForm shiftJitForm(const DecodedInsn &I) {
  return firstKnown({shiftFormSized<uint8_t>(I.Fn), shiftFormSized<uint16_t>(I.Fn),
                     shiftFormSized<uint32_t>(I.Fn), shiftFormSized<uint64_t>(I.Fn)});
}

} // namespace vmxsim
