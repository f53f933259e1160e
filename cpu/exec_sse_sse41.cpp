// The SSE4.1 integer and data-movement instructions on XMM registers (SDM Vol. 2, the
// instruction page of each): blends (BLENDPS/PD, PBLENDW with imm8; BLENDVPS/PD, PBLENDVB
// with XMM0), PACKUSDW, PCMPEQQ, PMULDQ, PMULLD, PMAX/PMIN SB/SD/UW/UD, MPSADBW,
// PHMINPOSUW, PTEST, the element moves EXTRACTPS, INSERTPS, PEXTRB/D/Q, PINSRB/D/Q, the
// widening moves PMOVSX*/PMOVZX*, and MOVNTDQA. DPPS/DPPD and ROUNDxx are floating point
// (cpu/exec_sse_sse41_fp.cpp); PEXTRW's SSE4.1 m16 form is with PEXTRW
// (cpu/exec_sse_move.cpp).
//
// Packed forms with an m128 source require it 16-byte aligned (SDM Vol. 2A, Exceptions
// Type 4); the element moves and PMOVSX/PMOVZX read or write only their element
// (Exceptions Type 5, no alignment rule).
#include "cpu/exec_sse.h"

namespace vmxsim {

bool bindMovAligned(const DecodeInfo &D, DecodedInsn &I);

using namespace sse;

namespace {


// --- blends -----------------------------------------------------------------------------

/// BLENDPS/BLENDPD/PBLENDW: lane K comes from the source when imm8 bit K is set.
template <typename L> Xmm opBlendImm(const Xmm &A, const Xmm &B, uint8_t Imm) {
  Lanes<L> X = lanes<L>(A), Y = lanes<L>(B);
  for (unsigned K = 0; K < Lanes<L>::N; ++K)
    if ((Imm >> K) & 1)
      X.V[K] = Y.V[K];
  return toXmm(X);
}

/// BLENDVPS/BLENDVPD/PBLENDVB: lane K comes from the source when the top bit of lane K of
/// the implicit XMM0 is set.
template <typename L, Source S> Status execBlendv(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  Xmm B;
  if constexpr (S == Source::Reg)
    B = C.S.XmmReg[I.Reg[1]];
  else
    VMX_TRY((loadOperand<Xmm, true>(C, I, B)));
  using SL = std::make_signed_t<L>;
  Lanes<L> X = lanes<L>(C.S.XmmReg[I.Reg[0]]), Y = lanes<L>(B),
           Mask = lanes<L>(C.S.XmmReg[0]);
  for (unsigned K = 0; K < Lanes<L>::N; ++K)
    if (SL(Mask.V[K]) < 0)
      X.V[K] = Y.V[K];
  C.S.XmmReg[I.Reg[0]] = toXmm(X);
  return next(C, I);
}

template <typename L> bool bindBlendv(const DecodeInfo &D, DecodedInsn &I) {
  if (!isXmm(D.Ops[0]))
    return false;
  if (isXmm(D.Ops[1]))
    return bindSimd(D, I, &execBlendv<L, Source::Reg>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execBlendv<L, Source::Mem>);
  return false;
}

// --- arithmetic, compares, min/max ------------------------------------------------------

Xmm opPackusdw(const Xmm &A, const Xmm &B, uint8_t) {
  Lanes<int32_t> X = lanes<int32_t>(A), Y = lanes<int32_t>(B);
  Lanes<uint16_t> R;
  for (unsigned K = 0; K < 4; ++K) {
    R.V[K] = saturate<int32_t, uint16_t>(X.V[K]);
    R.V[4 + K] = saturate<int32_t, uint16_t>(Y.V[K]);
  }
  return toXmm(R);
}
Xmm opPcmpeqq(const Xmm &A, const Xmm &B, uint8_t) {
  return Xmm{A.Lo == B.Lo ? ~0ull : 0, A.Hi == B.Hi ? ~0ull : 0};
}
/// PMULDQ: signed products of dwords 0 and 2.
Xmm opPmuldq(const Xmm &A, const Xmm &B, uint8_t) {
  return Xmm{uint64_t(int64_t(int32_t(A.Lo)) * int32_t(B.Lo)),
             uint64_t(int64_t(int32_t(A.Hi)) * int32_t(B.Hi))};
}
Xmm opPmulld(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<uint32_t>(A, B, [](uint32_t X, uint32_t Y) { return X * Y; });
}
template <typename L> Xmm opMin(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<L>(A, B, [](L X, L Y) { return std::min(X, Y); });
}
template <typename L> Xmm opMax(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<L>(A, B, [](L X, L Y) { return std::max(X, Y); });
}

/// MPSADBW: eight sums of absolute differences between the 4-byte source block selected
/// by imm8[1:0] and the eight overlapping 4-byte destination windows starting at byte
/// 4 * imm8[2].
Xmm opMpsadbw(const Xmm &A, const Xmm &B, uint8_t Imm) {
  Lanes<uint8_t> X = lanes<uint8_t>(A), Y = lanes<uint8_t>(B);
  Lanes<uint16_t> R;
  const unsigned AOff = (Imm & 4) ? 4 : 0, BOff = 4 * (Imm & 3);
  for (unsigned K = 0; K < 8; ++K) {
    unsigned Sum = 0;
    for (unsigned J = 0; J < 4; ++J) {
      const int Diff = int(X.V[AOff + K + J]) - int(Y.V[BOff + J]);
      Sum += unsigned(Diff < 0 ? -Diff : Diff);
    }
    R.V[K] = uint16_t(Sum);
  }
  return toXmm(R);
}

/// PHMINPOSUW: the smallest unsigned word of the source (the lowest index on ties) in
/// word 0, its index in bits 18:16, zero above.
Xmm opPhminposuw(const Xmm &, const Xmm &B, uint8_t) {
  Lanes<uint16_t> Y = lanes<uint16_t>(B);
  unsigned Index = 0;
  for (unsigned K = 1; K < 8; ++K)
    if (Y.V[K] < Y.V[Index])
      Index = K;
  return Xmm{uint64_t(Y.V[Index]) | (uint64_t(Index) << 16), 0};
}

// --- PTEST ------------------------------------------------------------------------------

/// PTEST: ZF when dst AND src is zero, CF when (NOT dst) AND src is zero; AF, OF, PF, SF
/// cleared.
template <Source S> Status execPtest(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  Xmm B;
  if constexpr (S == Source::Reg)
    B = C.S.XmmReg[I.Reg[1]];
  else
    VMX_TRY((loadOperand<Xmm, true>(C, I, B)));
  const Xmm &A = C.S.XmmReg[I.Reg[0]];
  const bool Z = !((A.Lo & B.Lo) | (A.Hi & B.Hi));
  const bool Cf = !((~A.Lo & B.Lo) | (~A.Hi & B.Hi));
  setArithFlags(C, (Z ? rflags::ZF : 0) | (Cf ? rflags::CF : 0));
  return next(C, I);
}

// --- element moves ----------------------------------------------------------------------

/// PEXTRB/PEXTRD/PEXTRQ/EXTRACTPS r/m, xmm, imm8: element imm8 mod N of type T. A
/// register destination receives it zero-extended (PEXTRB, EXTRACTPS write r32 or, with
/// REX.W, r64; SDM Vol. 2B, PEXTRB: "the upper bits of the destination are zeroed").
template <typename T, bool ToMem> Status execExtract(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  const T V = lanes<T>(C.S.XmmReg[I.Reg[1]]).V[I.Imm & (Lanes<T>::N - 1)];
  if constexpr (ToMem)
    VMX_TRY(storeOperand(C, I, V));
  else
    C.S.Gpr[I.Reg[0]] = V;
  return next(C, I);
}
template <typename T> bool bindExtract(const DecodeInfo &D, DecodedInsn &I) {
  if (!isXmm(D.Ops[1]))
    return false;
  if (isGpr(D.Ops[0]))
    return bindSimd(D, I, &execExtract<T, false>);
  if (isMem(D.Ops[0]))
    return bindSimd(D, I, &execExtract<T, true>);
  return false;
}

/// PINSRB/PINSRD/PINSRQ xmm, r/m, imm8: element imm8 mod N of type T replaced by the low
/// bits of the GPR or by the memory element.
template <typename T, bool FromMem> Status execInsert(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  T V;
  if constexpr (FromMem)
    VMX_TRY(loadOperand(C, I, V));
  else
    V = T(C.S.Gpr[I.Reg[1]]);
  Lanes<T> X = lanes<T>(C.S.XmmReg[I.Reg[0]]);
  X.V[I.Imm & (Lanes<T>::N - 1)] = V;
  C.S.XmmReg[I.Reg[0]] = toXmm(X);
  return next(C, I);
}
template <typename T> bool bindInsert(const DecodeInfo &D, DecodedInsn &I) {
  if (!isXmm(D.Ops[0]))
    return false;
  if (isGpr(D.Ops[1]))
    return bindSimd(D, I, &execInsert<T, false>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execInsert<T, true>);
  return false;
}

/// INSERTPS xmm1, xmm2/m32, imm8: the source dword (imm8[7:6] of a register, the m32
/// itself from memory) goes to lane imm8[5:4], then lanes set in imm8[3:0] are zeroed.
template <bool FromMem> Status execInsertps(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  const uint8_t Imm = uint8_t(I.Imm);
  uint32_t V;
  if constexpr (FromMem)
    VMX_TRY(loadOperand(C, I, V));
  else
    V = lanes<uint32_t>(C.S.XmmReg[I.Reg[1]]).V[Imm >> 6];
  Lanes<uint32_t> X = lanes<uint32_t>(C.S.XmmReg[I.Reg[0]]);
  X.V[(Imm >> 4) & 3] = V;
  for (unsigned K = 0; K < 4; ++K)
    if ((Imm >> K) & 1)
      X.V[K] = 0;
  C.S.XmmReg[I.Reg[0]] = toXmm(X);
  return next(C, I);
}

/// PMOVSX/PMOVZX: the low 16/(sizeof W) narrow elements of type N widened to W (sign- or
/// zero-extension by N's signedness). The memory form reads exactly those elements.
template <typename N, typename W, bool FromMem> Status execPmovx(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  constexpr unsigned Count = 16 / sizeof(W), Bytes = Count * sizeof(N);
  uint8_t Raw[16] = {};
  if constexpr (FromMem) {
    uint64_t La;
    VMX_TRY((operandLinear<false>(C, I, Bytes, Access::Read, La)));
    if constexpr (Bytes == 8) {
      uint64_t V;
      VMX_TRY(readLinear(C, La, V));
      std::memcpy(Raw, &V, 8);
    } else if constexpr (Bytes == 4) {
      uint32_t V;
      VMX_TRY(readLinear(C, La, V));
      std::memcpy(Raw, &V, 4);
    } else {
      uint16_t V;
      VMX_TRY(readLinear(C, La, V));
      std::memcpy(Raw, &V, 2);
    }
  } else {
    std::memcpy(Raw, &C.S.XmmReg[I.Reg[1]], Bytes);
  }
  Lanes<W> R;
  for (unsigned K = 0; K < Count; ++K) {
    N V;
    std::memcpy(&V, Raw + K * sizeof(N), sizeof(N));
    R.V[K] = W(V);
  }
  C.S.XmmReg[I.Reg[0]] = toXmm(R);
  return next(C, I);
}
template <typename N, typename W> bool bindPmovx(const DecodeInfo &D, DecodedInsn &I) {
  if (!isXmm(D.Ops[0]))
    return false;
  if (isXmm(D.Ops[1]))
    return bindSimd(D, I, &execPmovx<N, W, false>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execPmovx<N, W, true>);
  return false;
}

} // namespace

// Binders: one per mnemonic row of cpu/insns_sse_ext.def.
#define VMX_PACKED(Name, ...)                                                           \
  bool Name(const DecodeInfo &D, DecodedInsn &I) { return bindPacked<__VA_ARGS__>(D, I); }
VMX_PACKED(bindBlendps, &opBlendImm<uint32_t>)
VMX_PACKED(bindBlendpd, &opBlendImm<uint64_t>)
VMX_PACKED(bindPblendw, &opBlendImm<uint16_t>)
VMX_PACKED(bindPackusdw, &opPackusdw)
VMX_PACKED(bindPcmpeqq, &opPcmpeqq)
VMX_PACKED(bindPmuldq, &opPmuldq)
VMX_PACKED(bindPmulld, &opPmulld)
VMX_PACKED(bindPminsb, &opMin<int8_t>)
VMX_PACKED(bindPminsd, &opMin<int32_t>)
VMX_PACKED(bindPminuw, &opMin<uint16_t>)
VMX_PACKED(bindPminud, &opMin<uint32_t>)
VMX_PACKED(bindPmaxsb, &opMax<int8_t>)
VMX_PACKED(bindPmaxsd, &opMax<int32_t>)
VMX_PACKED(bindPmaxuw, &opMax<uint16_t>)
VMX_PACKED(bindPmaxud, &opMax<uint32_t>)
VMX_PACKED(bindMpsadbw, &opMpsadbw)
VMX_PACKED(bindPhminposuw, &opPhminposuw)
#undef VMX_PACKED

bool bindBlendvps(const DecodeInfo &D, DecodedInsn &I) { return bindBlendv<uint32_t>(D, I); }
bool bindBlendvpd(const DecodeInfo &D, DecodedInsn &I) { return bindBlendv<uint64_t>(D, I); }
bool bindPblendvb(const DecodeInfo &D, DecodedInsn &I) { return bindBlendv<uint8_t>(D, I); }

bool bindPtest(const DecodeInfo &D, DecodedInsn &I) {
  if (!isXmm(D.Ops[0]))
    return false;
  if (isXmm(D.Ops[1]))
    return bindSimd(D, I, &execPtest<Source::Reg>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execPtest<Source::Mem>);
  return false;
}

bool bindPextrb(const DecodeInfo &D, DecodedInsn &I) { return bindExtract<uint8_t>(D, I); }
bool bindPextrd(const DecodeInfo &D, DecodedInsn &I) { return bindExtract<uint32_t>(D, I); }
bool bindPextrq(const DecodeInfo &D, DecodedInsn &I) { return bindExtract<uint64_t>(D, I); }
bool bindExtractps(const DecodeInfo &D, DecodedInsn &I) { return bindExtract<uint32_t>(D, I); }
bool bindPinsrb(const DecodeInfo &D, DecodedInsn &I) { return bindInsert<uint8_t>(D, I); }
bool bindPinsrd(const DecodeInfo &D, DecodedInsn &I) { return bindInsert<uint32_t>(D, I); }
bool bindPinsrq(const DecodeInfo &D, DecodedInsn &I) { return bindInsert<uint64_t>(D, I); }

bool bindInsertps(const DecodeInfo &D, DecodedInsn &I) {
  if (!isXmm(D.Ops[0]))
    return false;
  if (isXmm(D.Ops[1]))
    return bindSimd(D, I, &execInsertps<false>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execInsertps<true>);
  return false;
}

#define VMX_PMOVX(Name, N, W)                                                            \
  bool Name(const DecodeInfo &D, DecodedInsn &I) { return bindPmovx<N, W>(D, I); }
VMX_PMOVX(bindPmovsxbw, int8_t, int16_t)
VMX_PMOVX(bindPmovsxbd, int8_t, int32_t)
VMX_PMOVX(bindPmovsxbq, int8_t, int64_t)
VMX_PMOVX(bindPmovsxwd, int16_t, int32_t)
VMX_PMOVX(bindPmovsxwq, int16_t, int64_t)
VMX_PMOVX(bindPmovsxdq, int32_t, int64_t)
VMX_PMOVX(bindPmovzxbw, uint8_t, uint16_t)
VMX_PMOVX(bindPmovzxbd, uint8_t, uint32_t)
VMX_PMOVX(bindPmovzxbq, uint8_t, uint64_t)
VMX_PMOVX(bindPmovzxwd, uint16_t, uint32_t)
VMX_PMOVX(bindPmovzxwq, uint16_t, uint64_t)
VMX_PMOVX(bindPmovzxdq, uint32_t, uint64_t)
#undef VMX_PMOVX

/// MOVNTDQA exists only as a load from memory, aligned like MOVDQA (SDM Vol. 2B,
/// MOVNTDQA); the non-temporal hint has no cache model to affect.
bool bindMovntdqa(const DecodeInfo &D, DecodedInsn &I) {
  return isMem(D.Ops[1]) && bindMovAligned(D, I);
}

} // namespace vmxsim
