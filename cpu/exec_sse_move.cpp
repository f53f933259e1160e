// SSE/SSE2 data movement: full-register moves (MOVAPS/MOVAPD/MOVDQA aligned,
// MOVUPS/MOVUPD/MOVDQU unaligned, MOVNTDQ/MOVNTPS/MOVNTPD non-temporal stores), MOVD and
// MOVQ between XMM, GPRs and memory, the scalar moves MOVSS/MOVSD, the half-register moves
// MOVLPS/MOVHPS/MOVLPD/MOVHPD/MOVHLPS/MOVLHPS, MOVNTI, the mask extractions
// PMOVMSKB/MOVMSKPS/MOVMSKPD, PEXTRW/PINSRW, and LDMXCSR/STMXCSR (SDM Vol. 2, the
// instruction page of each). Non-temporal hints have no cache model to affect here.
#include "cpu/exec_sse.h"

namespace vmxsim {

// The MM-register forms (cpu/exec_mmx.cpp).
bool bindMovdMm(const DecodeInfo &D, DecodedInsn &I);
bool bindMovqMm(const DecodeInfo &D, DecodedInsn &I);
bool bindPmovmskbMm(const DecodeInfo &D, DecodedInsn &I);
bool bindPextrwMm(const DecodeInfo &D, DecodedInsn &I);
bool bindPinsrwMm(const DecodeInfo &D, DecodedInsn &I);

using namespace sse;

namespace {

/// RR: XMM <- XMM; Load: XMM <- memory; Store: memory <- XMM; plus GPR forms.
enum class Form : uint8_t { RR, Load, Store, FromGpr, ToGpr };


/// The form of a two-operand move whose XMM side is operand 0 or operand 1.
bool moveForm(const DecodeInfo &D, Form &F) {
  const OperandInfo &A = D.Ops[0], &B = D.Ops[1];
  if (isXmm(A) && isXmm(B))
    F = Form::RR;
  else if (isXmm(A) && B.Kind == OperandKind::Mem)
    F = Form::Load;
  else if (A.Kind == OperandKind::Mem && isXmm(B))
    F = Form::Store;
  else if (isXmm(A) && isGpr(B))
    F = Form::FromGpr;
  else if (isGpr(A) && isXmm(B))
    F = Form::ToGpr;
  else
    return false;
  return true;
}

void finishBind(DecodeInfo const &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  I.Cost = costOf(CostClass::Sse);
}

// --- 128-bit moves ------------------------------------------------------------------

template <Form F, bool Aligned> Status execMov128(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  if constexpr (F == Form::RR) {
    C.S.XmmReg[I.Reg[0]] = C.S.XmmReg[I.Reg[1]];
  } else if constexpr (F == Form::Load) {
    Xmm V;
    VMX_TRY((loadOperand<Xmm, Aligned>(C, I, V)));
    C.S.XmmReg[I.Reg[0]] = V;
  } else {
    VMX_TRY((storeOperand<Xmm, Aligned>(C, I, C.S.XmmReg[I.Reg[1]])));
  }
  return next(C, I);
}

template <bool Aligned> bool bindMov128(const DecodeInfo &D, DecodedInsn &I) {
  Form F;
  if (!moveForm(D, F))
    return false;
  switch (F) {
  case Form::RR: I.Fn = &execMov128<Form::RR, Aligned>; break;
  case Form::Load: I.Fn = &execMov128<Form::Load, Aligned>; break;
  case Form::Store: I.Fn = &execMov128<Form::Store, Aligned>; break;
  default: return false;
  }
  finishBind(D, I);
  return true;
}

// --- MOVD / MOVQ ----------------------------------------------------------------------

/// T is the moved width (uint32_t for MOVD, uint64_t for MOVQ). Loads into an XMM
/// register zero the rest of it; stores to a GPR follow the GPR width rules.
template <typename T, Form F> Status execMovDq(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  if constexpr (F == Form::RR) {
    C.S.XmmReg[I.Reg[0]] = Xmm{T(C.S.XmmReg[I.Reg[1]].Lo), 0};
  } else if constexpr (F == Form::Load) {
    T V;
    VMX_TRY(loadOperand(C, I, V));
    C.S.XmmReg[I.Reg[0]] = Xmm{V, 0};
  } else if constexpr (F == Form::FromGpr) {
    C.S.XmmReg[I.Reg[0]] = Xmm{getReg<T>(C, I.Reg[1]), 0};
  } else if constexpr (F == Form::ToGpr) {
    setReg<T>(C, I.Reg[0], T(C.S.XmmReg[I.Reg[1]].Lo));
  } else {
    VMX_TRY(storeOperand(C, I, T(C.S.XmmReg[I.Reg[1]].Lo)));
  }
  return next(C, I);
}

template <typename T> bool bindMovDq(const DecodeInfo &D, DecodedInsn &I) {
  if (usesMmx(D))
    return sizeof(T) == 4 ? bindMovdMm(D, I) : bindMovqMm(D, I);
  Form F;
  if (!moveForm(D, F))
    return false;
  switch (F) {
  case Form::RR: I.Fn = &execMovDq<T, Form::RR>; break;
  case Form::Load: I.Fn = &execMovDq<T, Form::Load>; break;
  case Form::Store: I.Fn = &execMovDq<T, Form::Store>; break;
  case Form::FromGpr: I.Fn = &execMovDq<T, Form::FromGpr>; break;
  case Form::ToGpr: I.Fn = &execMovDq<T, Form::ToGpr>; break;
  }
  finishBind(D, I);
  return true;
}

// --- MOVSS / MOVSD (moves only) -------------------------------------------------------

/// Register-to-register merges the low element; a load zeroes the upper elements.
template <typename T, Form F> Status execMovScalar(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  if constexpr (F == Form::RR) {
    Xmm &D = C.S.XmmReg[I.Reg[0]];
    constexpr uint64_t Mask = T(~T(0));
    D.Lo = (D.Lo & ~Mask) | (C.S.XmmReg[I.Reg[1]].Lo & Mask);
  } else if constexpr (F == Form::Load) {
    T V;
    VMX_TRY(loadOperand(C, I, V));
    C.S.XmmReg[I.Reg[0]] = Xmm{V, 0};
  } else {
    VMX_TRY(storeOperand(C, I, T(C.S.XmmReg[I.Reg[1]].Lo)));
  }
  return next(C, I);
}

template <typename T> bool bindMovScalar(const DecodeInfo &D, DecodedInsn &I) {
  Form F;
  if (!moveForm(D, F))
    return false;
  switch (F) {
  case Form::RR: I.Fn = &execMovScalar<T, Form::RR>; break;
  case Form::Load: I.Fn = &execMovScalar<T, Form::Load>; break;
  case Form::Store: I.Fn = &execMovScalar<T, Form::Store>; break;
  default: return false;
  }
  finishBind(D, I);
  return true;
}

// --- MOVLPS/MOVHPS/MOVLPD/MOVHPD, MOVHLPS/MOVLHPS --------------------------------------

template <bool High, Form F> Status execMovHalf(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  if constexpr (F == Form::Load) {
    uint64_t V;
    VMX_TRY(loadOperand(C, I, V));
    (High ? C.S.XmmReg[I.Reg[0]].Hi : C.S.XmmReg[I.Reg[0]].Lo) = V;
  } else {
    const Xmm &S = C.S.XmmReg[I.Reg[1]];
    VMX_TRY(storeOperand(C, I, High ? S.Hi : S.Lo));
  }
  return next(C, I);
}
template <bool High> bool bindMovHalf(const DecodeInfo &D, DecodedInsn &I) {
  Form F;
  if (!moveForm(D, F))
    return false;
  if (F == Form::Load)
    I.Fn = &execMovHalf<High, Form::Load>;
  else if (F == Form::Store)
    I.Fn = &execMovHalf<High, Form::Store>;
  else
    return false;
  finishBind(D, I);
  return true;
}

/// MOVHLPS: low quadword <- source high; MOVLHPS: high quadword <- source low.
template <bool HighToLow> Status execMovHlLh(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  const Xmm S = C.S.XmmReg[I.Reg[1]];
  if constexpr (HighToLow)
    C.S.XmmReg[I.Reg[0]].Lo = S.Hi;
  else
    C.S.XmmReg[I.Reg[0]].Hi = S.Lo;
  return next(C, I);
}
template <bool HighToLow> bool bindMovHlLh(const DecodeInfo &D, DecodedInsn &I) {
  Form F;
  if (!moveForm(D, F) || F != Form::RR)
    return false;
  I.Fn = &execMovHlLh<HighToLow>;
  finishBind(D, I);
  return true;
}

// --- MOVNTI (a GPR store: no SSE availability checks, SDM Vol. 2B, MOVNTI) -------------
// MOVNTI m32/m64, r is bound to MOV's store handler (bindMovnti below): the non-temporal
// hint and the weak ordering it allows change nothing a single, in-order store can show,
// and its faults are MOV's (#UD for a register destination is the decoder's). So the
// translator emits it inline, as a MOV (Xen clears pages with it).

// --- MASKMOVDQU (SDM Vol. 2B, MASKMOVDQU) ----------------------------------------------

/// MASKMOVDQU xmm1, xmm2: the bytes of xmm1 whose byte in xmm2 has its top bit set are
/// stored at DS:rDI (segment overridable; the address size picks DI, EDI or RDI: the
/// DecodedInsn's implicit memory operand); the other bytes are not accessed. "The memory
/// location does not need to be aligned." As MASKMOVQ (cpu/exec_mmx.cpp), the 16 bytes
/// are probed for writing first, so a fault leaves memory unchanged and an all-zero mask
/// faults alike (the SDM leaves that implementation-dependent).
Status execMaskmovdqu(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  const Lanes<uint8_t> V = lanes<uint8_t>(C.S.XmmReg[I.Reg[0]]);
  const Lanes<uint8_t> Mask = lanes<uint8_t>(C.S.XmmReg[I.Reg[1]]);
  uint64_t La;
  VMX_TRY(operandLinear<false>(C, I, 16, Access::Write, La));
  VMX_TRY(probeWrite(C, La, 16));
  // Outside 64-bit mode linear addresses wrap at 4 GiB.
  const uint64_t Wrap = C.DecodeMode == uint8_t(CodeMode::Long64) ? ~0ull : 0xffffffffull;
  for (unsigned K = 0; K < 16; ++K)
    if (Mask.V[K] & 0x80)
      VMX_TRY(writeLinear(C, (La + K) & Wrap, V.V[K]));
  return next(C, I);
}

// --- PMOVMSKB / MOVMSKPS / MOVMSKPD ---------------------------------------------------

/// The sign bit of each lane of type L, zero-extended into the GPR (r32 or r64).
template <typename L> Status execMoveMask(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  Lanes<L> X = lanes<L>(C.S.XmmReg[I.Reg[1]]);
  uint64_t Mask = 0;
  for (unsigned K = 0; K < Lanes<L>::N; ++K)
    Mask |= uint64_t(X.V[K] >> (sizeof(L) * 8 - 1)) << K;
  C.S.Gpr[I.Reg[0]] = Mask;
  return next(C, I);
}
template <typename L> bool bindMoveMask(const DecodeInfo &D, DecodedInsn &I) {
  if (usesMmx(D)) // only PMOVMSKB has an MMX form
    return sizeof(L) == 1 && bindPmovmskbMm(D, I);
  if (!isGpr(D.Ops[0]) || !isXmm(D.Ops[1]))
    return false;
  I.Fn = &execMoveMask<L>;
  finishBind(D, I);
  return true;
}

// --- PEXTRW / PINSRW ------------------------------------------------------------------

template <bool ToMem> Status execPextrw(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  uint16_t W = lanes<uint16_t>(C.S.XmmReg[I.Reg[1]]).V[I.Imm & 7];
  if constexpr (ToMem)
    VMX_TRY(storeOperand(C, I, W));
  else
    C.S.Gpr[I.Reg[0]] = W; // zero-extended into r32/r64
  return next(C, I);
}
template <bool FromMem> Status execPinsrw(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  uint16_t W;
  if constexpr (FromMem)
    VMX_TRY(loadOperand(C, I, W));
  else
    W = uint16_t(C.S.Gpr[I.Reg[1]]);
  Lanes<uint16_t> X = lanes<uint16_t>(C.S.XmmReg[I.Reg[0]]);
  X.V[I.Imm & 7] = W;
  C.S.XmmReg[I.Reg[0]] = toXmm(X);
  return next(C, I);
}

// --- LDMXCSR / STMXCSR ----------------------------------------------------------------

Status execLdmxcsr(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  uint32_t V;
  VMX_TRY(loadOperand(C, I, V));
  // "#GP ... For an attempt to set reserved bits in MXCSR" (SDM Vol. 2A, LDMXCSR).
  if (V & ~kMxcsrMask)
    return C.raiseGp(0);
  C.S.Mxcsr = V;
  return next(C, I);
}
Status execStmxcsr(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  VMX_TRY(storeOperand(C, I, C.S.Mxcsr));
  return next(C, I);
}

} // namespace

bool bindMovAligned(const DecodeInfo &D, DecodedInsn &I) { return bindMov128<true>(D, I); }
bool bindMovUnaligned(const DecodeInfo &D, DecodedInsn &I) { return bindMov128<false>(D, I); }
bool bindMovNt(const DecodeInfo &D, DecodedInsn &I) {
  // MOVNTDQ/MOVNTPS/MOVNTPD exist only as stores to memory.
  return D.Ops[0].Kind == OperandKind::Mem && bindMov128<true>(D, I);
}
bool bindMaskmovdqu(const DecodeInfo &D, DecodedInsn &I) {
  // Operand 2 is the implicit DS:rDI destination (the DecodedInsn's memory operand).
  return isXmm(D.Ops[0]) && isXmm(D.Ops[1]) && bindSimd(D, I, &execMaskmovdqu);
}
bool bindMovd(const DecodeInfo &D, DecodedInsn &I) { return bindMovDq<uint32_t>(D, I); }
bool bindMovq(const DecodeInfo &D, DecodedInsn &I) { return bindMovDq<uint64_t>(D, I); }
bool bindMovss(const DecodeInfo &D, DecodedInsn &I) { return bindMovScalar<uint32_t>(D, I); }
bool bindMovsdXmm(const DecodeInfo &D, DecodedInsn &I) {
  return bindMovScalar<uint64_t>(D, I);
}
bool bindMovsd(const DecodeInfo &D, DecodedInsn &I) {
  // Zydis names both the SSE2 scalar move and the string move (A5 with a 32-bit operand
  // size) MOVSD. Only the XMM form belongs here; see binders.h.
  if (!isXmm(D.Ops[0]) && !isXmm(D.Ops[1]))
    return bindMovsString(D, I);
  return bindMovsdXmm(D, I);
}
bool bindMovLow(const DecodeInfo &D, DecodedInsn &I) { return bindMovHalf<false>(D, I); }
bool bindMovHigh(const DecodeInfo &D, DecodedInsn &I) { return bindMovHalf<true>(D, I); }
bool bindMovhlps(const DecodeInfo &D, DecodedInsn &I) { return bindMovHlLh<true>(D, I); }
bool bindMovlhps(const DecodeInfo &D, DecodedInsn &I) { return bindMovHlLh<false>(D, I); }

bool bindMov(const DecodeInfo &D, DecodedInsn &I); // cpu/exec_data.cpp
bool bindMovnti(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Ops[0].Kind != OperandKind::Mem || !isGpr(D.Ops[1]))
    return false;
  return bindMov(D, I);
}

bool bindPmovmskb(const DecodeInfo &D, DecodedInsn &I) { return bindMoveMask<uint8_t>(D, I); }
bool bindMovmskps(const DecodeInfo &D, DecodedInsn &I) { return bindMoveMask<uint32_t>(D, I); }
bool bindMovmskpd(const DecodeInfo &D, DecodedInsn &I) { return bindMoveMask<uint64_t>(D, I); }

bool bindPextrw(const DecodeInfo &D, DecodedInsn &I) {
  if (usesMmx(D))
    return bindPextrwMm(D, I);
  if (!isXmm(D.Ops[1]))
    return false;
  if (isGpr(D.Ops[0]))
    I.Fn = &execPextrw<false>;
  else if (D.Ops[0].Kind == OperandKind::Mem) // SSE4.1 66 0F 3A 15 m16 form
    I.Fn = &execPextrw<true>;
  else
    return false;
  finishBind(D, I);
  return true;
}
bool bindPinsrw(const DecodeInfo &D, DecodedInsn &I) {
  if (usesMmx(D))
    return bindPinsrwMm(D, I);
  if (!isXmm(D.Ops[0]))
    return false;
  if (isGpr(D.Ops[1]))
    I.Fn = &execPinsrw<false>;
  else if (D.Ops[1].Kind == OperandKind::Mem)
    I.Fn = &execPinsrw<true>;
  else
    return false;
  finishBind(D, I);
  return true;
}

bool bindLdmxcsr(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Ops[0].Kind != OperandKind::Mem)
    return false;
  I.Fn = &execLdmxcsr;
  finishBind(D, I);
  return true;
}
bool bindStmxcsr(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Ops[0].Kind != OperandKind::Mem)
    return false;
  I.Fn = &execStmxcsr;
  finishBind(D, I);
  return true;
}

} // namespace vmxsim
