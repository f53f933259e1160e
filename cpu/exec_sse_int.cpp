// SSE/SSE2 packed-integer and bitwise instructions on XMM registers, and the MMX and SSE
// ones on MM registers: logic, add/subtract (wrapping and saturating), compares, min/max,
// multiplies, averages, PSADBW, shuffles, unpacks, packs and shifts (SDM Vol. 2,
// instruction pages of each). Only what compilers
// emit for memcpy/memset, string functions and integer vector code; no floating-point
// arithmetic (the *PS/*PD logic and shuffle forms are bit operations).
//
// Every instruction here has the shape  dst = Op(dst, src, imm8)  with dst an XMM
// register and src an XMM register, a 16-byte memory operand (always 16-byte aligned in
// legacy SSE encodings) or absent (shift-by-immediate forms). The binder picks
// execPacked<Op, Source> once; the Op is inlined into the handler. The MM-register forms
// run the same operation on 64 bits (bindPacked, cpu/exec_sse.h).
#include "cpu/exec_sse.h"

#include <algorithm>
#include <limits>

namespace vmxsim {

using namespace sse;

namespace {

// --- bitwise (SDM Vol. 2: PAND, PANDN, POR, PXOR, ANDPS, ANDNPS, ORPS, XORPS, *PD) -------

Xmm opAnd(const Xmm &A, const Xmm &B, uint8_t) { return Xmm{A.Lo & B.Lo, A.Hi & B.Hi}; }
Xmm opAndN(const Xmm &A, const Xmm &B, uint8_t) { return Xmm{~A.Lo & B.Lo, ~A.Hi & B.Hi}; }
Xmm opOr(const Xmm &A, const Xmm &B, uint8_t) { return Xmm{A.Lo | B.Lo, A.Hi | B.Hi}; }
Xmm opXor(const Xmm &A, const Xmm &B, uint8_t) { return Xmm{A.Lo ^ B.Lo, A.Hi ^ B.Hi}; }

// --- add/subtract (PADDx, PSUBx, PADDSx, PADDUSx, PSUBSx, PSUBUSx) ---------------------

template <typename L> Xmm opAdd(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<L>(A, B, [](L X, L Y) { return L(X + Y); });
}
template <typename L> Xmm opSub(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<L>(A, B, [](L X, L Y) { return L(X - Y); });
}
template <typename L> Xmm opAddSat(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<L>(A, B, [](L X, L Y) { return saturate<int32_t, L>(int32_t(X) + Y); });
}
template <typename L> Xmm opSubSat(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<L>(A, B, [](L X, L Y) { return saturate<int32_t, L>(int32_t(X) - Y); });
}

// --- compares, min/max (PCMPEQx, PCMPGTx signed, PMINUB/PMAXUB, PMINSW/PMAXSW) ---------

template <typename L> Xmm opCmpEq(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<L>(A, B, [](L X, L Y) { return X == Y ? L(~L(0)) : L(0); });
}
template <typename L> Xmm opCmpGt(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<L>(A, B, [](L X, L Y) { return X > Y ? L(~L(0)) : L(0); });
}
template <typename L> Xmm opMin(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<L>(A, B, [](L X, L Y) { return std::min(X, Y); });
}
template <typename L> Xmm opMax(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<L>(A, B, [](L X, L Y) { return std::max(X, Y); });
}

// --- multiplies and averages (PMULLW, PMULHW, PMULHUW, PMULUDQ, PMADDWD, PAVGB/W) ------

Xmm opMulLow(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<int16_t>(A, B, [](int16_t X, int16_t Y) { return int16_t(int32_t(X) * Y); });
}
Xmm opMulHigh(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<int16_t>(A, B,
                           [](int16_t X, int16_t Y) { return int16_t((int32_t(X) * Y) >> 16); });
}
Xmm opMulHighU(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<uint16_t>(
      A, B, [](uint16_t X, uint16_t Y) { return uint16_t((uint32_t(X) * Y) >> 16); });
}
Xmm opMulUdq(const Xmm &A, const Xmm &B, uint8_t) {
  return Xmm{uint64_t(uint32_t(A.Lo)) * uint32_t(B.Lo), uint64_t(uint32_t(A.Hi)) * uint32_t(B.Hi)};
}
Xmm opMaddWd(const Xmm &A, const Xmm &B, uint8_t) {
  Lanes<int16_t> X = lanes<int16_t>(A), Y = lanes<int16_t>(B);
  Lanes<uint32_t> R;
  for (unsigned K = 0; K < 4; ++K)
    R.V[K] = uint32_t(int32_t(X.V[2 * K]) * Y.V[2 * K]) +
             uint32_t(int32_t(X.V[2 * K + 1]) * Y.V[2 * K + 1]);
  return toXmm(R);
}
template <typename L> Xmm opAvg(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<L>(A, B, [](L X, L Y) { return L((uint32_t(X) + Y + 1) >> 1); });
}
Xmm opSadBw(const Xmm &A, const Xmm &B, uint8_t) {
  Lanes<uint8_t> X = lanes<uint8_t>(A), Y = lanes<uint8_t>(B);
  uint64_t Sum[2] = {0, 0};
  for (unsigned K = 0; K < 16; ++K)
    Sum[K / 8] += X.V[K] > Y.V[K] ? X.V[K] - Y.V[K] : Y.V[K] - X.V[K];
  return Xmm{Sum[0], Sum[1]};
}

// --- shuffles (PSHUFD, PSHUFLW, PSHUFHW, SHUFPS, SHUFPD) --------------------------------

Xmm opPshufd(const Xmm &, const Xmm &B, uint8_t Imm) {
  Lanes<uint32_t> S = lanes<uint32_t>(B), R;
  for (unsigned K = 0; K < 4; ++K)
    R.V[K] = S.V[(Imm >> (2 * K)) & 3];
  return toXmm(R);
}
Xmm opPshuflw(const Xmm &, const Xmm &B, uint8_t Imm) {
  Lanes<uint16_t> S = lanes<uint16_t>(B), R = S;
  for (unsigned K = 0; K < 4; ++K)
    R.V[K] = S.V[(Imm >> (2 * K)) & 3];
  return toXmm(R);
}
Xmm opPshufhw(const Xmm &, const Xmm &B, uint8_t Imm) {
  Lanes<uint16_t> S = lanes<uint16_t>(B), R = S;
  for (unsigned K = 0; K < 4; ++K)
    R.V[4 + K] = S.V[4 + ((Imm >> (2 * K)) & 3)];
  return toXmm(R);
}
/// SHUFPS: the two low dwords come from the destination, the two high from the source.
Xmm opShufps(const Xmm &A, const Xmm &B, uint8_t Imm) {
  Lanes<uint32_t> X = lanes<uint32_t>(A), Y = lanes<uint32_t>(B), R;
  R.V[0] = X.V[Imm & 3];
  R.V[1] = X.V[(Imm >> 2) & 3];
  R.V[2] = Y.V[(Imm >> 4) & 3];
  R.V[3] = Y.V[(Imm >> 6) & 3];
  return toXmm(R);
}
Xmm opShufpd(const Xmm &A, const Xmm &B, uint8_t Imm) {
  return Xmm{(Imm & 1) ? A.Hi : A.Lo, (Imm & 2) ? B.Hi : B.Lo};
}

// --- unpacks (PUNPCKLx/PUNPCKHx, UNPCKLPS/HPS/LPD/HPD) ---------------------------------

/// Interleaves the low (High = false) or high halves of A and B, lane size L.
template <typename L, bool High> Xmm opUnpack(const Xmm &A, const Xmm &B, uint8_t) {
  Lanes<L> X = lanes<L>(A), Y = lanes<L>(B), R;
  constexpr unsigned Half = Lanes<L>::N / 2, Base = High ? Half : 0;
  for (unsigned K = 0; K < Half; ++K) {
    R.V[2 * K] = X.V[Base + K];
    R.V[2 * K + 1] = Y.V[Base + K];
  }
  return toXmm(R);
}

// --- packs (PACKSSWB, PACKSSDW, PACKUSWB) -----------------------------------------------

template <typename Wide, typename Narrow> Xmm opPack(const Xmm &A, const Xmm &B, uint8_t) {
  Lanes<Wide> X = lanes<Wide>(A), Y = lanes<Wide>(B);
  Lanes<Narrow> R;
  constexpr unsigned N = Lanes<Wide>::N;
  for (unsigned K = 0; K < N; ++K) {
    R.V[K] = saturate<int32_t, Narrow>(X.V[K]);
    R.V[N + K] = saturate<int32_t, Narrow>(Y.V[K]);
  }
  return toXmm(R);
}

// --- shifts (PSLLx, PSRLx, PSRAx by XMM/m128 or imm8; PSLLDQ, PSRLDQ) -------------------

enum class Shift : uint8_t { Left, RightLogical, RightArith };

/// Lane shift by Count: counts of the lane width or more give 0 (logical) or the sign
/// (arithmetic), per the SDM pseudocode ("IF (COUNT > 15) THEN DEST ← 00..0").
template <typename L, Shift K> inline Xmm shiftLanes(const Xmm &A, uint64_t Count) {
  constexpr unsigned Bits = sizeof(L) * 8;
  Lanes<L> X = lanes<L>(A);
  for (L &V : X.V) {
    if constexpr (K == Shift::RightArith) {
      using SL = std::make_signed_t<L>;
      V = L(SL(V) >> (Count >= Bits ? Bits - 1 : Count));
    } else if (Count >= Bits) {
      V = 0;
    } else {
      V = K == Shift::Left ? L(V << Count) : L(V >> Count);
    }
  }
  return toXmm(X);
}
/// Count from the low quadword of the source operand (XMM/m128 form).
template <typename L, Shift K> Xmm opShiftXmm(const Xmm &A, const Xmm &B, uint8_t) {
  return shiftLanes<L, K>(A, B.Lo);
}
/// Count from imm8 (the 66 0F 71/72/73 group forms).
template <typename L, Shift K> Xmm opShiftImm(const Xmm &A, const Xmm &, uint8_t Imm) {
  return shiftLanes<L, K>(A, Imm);
}
/// Whole-register byte shifts; counts above 15 clear the register.
template <bool Left> Xmm opShiftBytes(const Xmm &A, const Xmm &, uint8_t Imm) {
  uint8_t In[16], Out[16] = {};
  std::memcpy(In, &A, 16);
  for (unsigned K = 0; K < 16; ++K) {
    unsigned From = Left ? K - Imm : K + Imm; // wraps above 15 when out of range
    if (Imm < 16 && From < 16)
      Out[K] = In[From];
  }
  Xmm R;
  std::memcpy(&R, Out, 16);
  return R;
}

/// The shift mnemonics have two forms: count in an XMM/m128 operand or in imm8.
template <XmmOp ByXmm, XmmOp ByImm> bool bindShift(const DecodeInfo &D, DecodedInsn &I) {
  return D.Ops[1].Kind == OperandKind::Imm ? bindPacked<ByImm>(D, I) : bindPacked<ByXmm>(D, I);
}
template <typename L, Shift K> bool bindShiftLanes(const DecodeInfo &D, DecodedInsn &I) {
  return bindShift<&opShiftXmm<L, K>, &opShiftImm<L, K>>(D, I);
}

// --- MMX forms that are not lane-wise --------------------------------------------------

/// PUNPCKHxx on MM registers interleave the high halves of the two 64-bit operands: the
/// low interleave of those halves.
template <typename L> uint64_t mmUnpackHigh(uint64_t A, uint64_t B, uint8_t) {
  return opUnpack<L, false>(Xmm{A >> 32, 0}, Xmm{B >> 32, 0}, 0).Lo;
}

} // namespace

// Binders: one per mnemonic row of cpu/insns_sse.def.
#define VMX_PACKED(Name, ...)                                                           \
  bool Name(const DecodeInfo &D, DecodedInsn &I) { return bindPacked<__VA_ARGS__>(D, I); }
// The MMX forms are the lane-wise operation on 64 bits unless a row names its own.
VMX_PACKED(bindSseAnd, &opAnd)
VMX_PACKED(bindSseAndN, &opAndN)
VMX_PACKED(bindSseOr, &opOr)
VMX_PACKED(bindSseXor, &opXor)
VMX_PACKED(bindPaddb, &opAdd<uint8_t>)
VMX_PACKED(bindPaddw, &opAdd<uint16_t>)
VMX_PACKED(bindPaddd, &opAdd<uint32_t>)
VMX_PACKED(bindPaddq, &opAdd<uint64_t>)
VMX_PACKED(bindPsubb, &opSub<uint8_t>)
VMX_PACKED(bindPsubw, &opSub<uint16_t>)
VMX_PACKED(bindPsubd, &opSub<uint32_t>)
VMX_PACKED(bindPsubq, &opSub<uint64_t>)
VMX_PACKED(bindPaddsb, &opAddSat<int8_t>)
VMX_PACKED(bindPaddsw, &opAddSat<int16_t>)
VMX_PACKED(bindPaddusb, &opAddSat<uint8_t>)
VMX_PACKED(bindPaddusw, &opAddSat<uint16_t>)
VMX_PACKED(bindPsubsb, &opSubSat<int8_t>)
VMX_PACKED(bindPsubsw, &opSubSat<int16_t>)
VMX_PACKED(bindPsubusb, &opSubSat<uint8_t>)
VMX_PACKED(bindPsubusw, &opSubSat<uint16_t>)
VMX_PACKED(bindPcmpeqb, &opCmpEq<uint8_t>)
VMX_PACKED(bindPcmpeqw, &opCmpEq<uint16_t>)
VMX_PACKED(bindPcmpeqd, &opCmpEq<uint32_t>)
VMX_PACKED(bindPcmpgtb, &opCmpGt<int8_t>)
VMX_PACKED(bindPcmpgtw, &opCmpGt<int16_t>)
VMX_PACKED(bindPcmpgtd, &opCmpGt<int32_t>)
VMX_PACKED(bindPminub, &opMin<uint8_t>)
VMX_PACKED(bindPmaxub, &opMax<uint8_t>)
VMX_PACKED(bindPminsw, &opMin<int16_t>)
VMX_PACKED(bindPmaxsw, &opMax<int16_t>)
VMX_PACKED(bindPmullw, &opMulLow)
VMX_PACKED(bindPmulhw, &opMulHigh)
VMX_PACKED(bindPmulhuw, &opMulHighU)
VMX_PACKED(bindPmuludq, &opMulUdq)
VMX_PACKED(bindPmaddwd, &opMaddWd)
VMX_PACKED(bindPavgb, &opAvg<uint8_t>)
VMX_PACKED(bindPavgw, &opAvg<uint16_t>)
VMX_PACKED(bindPsadbw, &opSadBw)
VMX_PACKED(bindPshufd, &opPshufd)
VMX_PACKED(bindPshuflw, &opPshuflw)
VMX_PACKED(bindPshufhw, &opPshufhw)
VMX_PACKED(bindShufps, &opShufps)
VMX_PACKED(bindShufpd, &opShufpd)
VMX_PACKED(bindPunpcklbw, &opUnpack<uint8_t, false>)
VMX_PACKED(bindPunpcklwd, &opUnpack<uint16_t, false>)
VMX_PACKED(bindPunpckldq, &opUnpack<uint32_t, false>)
VMX_PACKED(bindPunpcklqdq, &opUnpack<uint64_t, false>)
VMX_PACKED(bindPunpckhbw, &opUnpack<uint8_t, true>, &mmUnpackHigh<uint8_t>)
VMX_PACKED(bindPunpckhwd, &opUnpack<uint16_t, true>, &mmUnpackHigh<uint16_t>)
VMX_PACKED(bindPunpckhdq, &opUnpack<uint32_t, true>, &mmUnpackHigh<uint32_t>)
VMX_PACKED(bindPunpckhqdq, &opUnpack<uint64_t, true>)
// Packs take dst:src as one register on MM registers.
#define VMX_PACK(Name, ...)                                                             \
  VMX_PACKED(Name, &opPack<__VA_ARGS__>, &mmPaired<&opPack<__VA_ARGS__>>)
VMX_PACK(bindPacksswb, int16_t, int8_t)
VMX_PACK(bindPackssdw, int32_t, int16_t)
VMX_PACK(bindPackuswb, int16_t, uint8_t)
VMX_PACKED(bindPslldq, &opShiftBytes<true>)
VMX_PACKED(bindPsrldq, &opShiftBytes<false>)
#undef VMX_PACK
#undef VMX_PACKED

#define VMX_SHIFT(Name, L, K)                                                            \
  bool Name(const DecodeInfo &D, DecodedInsn &I) { return bindShiftLanes<L, K>(D, I); }
VMX_SHIFT(bindPsllw, uint16_t, Shift::Left)
VMX_SHIFT(bindPslld, uint32_t, Shift::Left)
VMX_SHIFT(bindPsllq, uint64_t, Shift::Left)
VMX_SHIFT(bindPsrlw, uint16_t, Shift::RightLogical)
VMX_SHIFT(bindPsrld, uint32_t, Shift::RightLogical)
VMX_SHIFT(bindPsrlq, uint64_t, Shift::RightLogical)
VMX_SHIFT(bindPsraw, uint16_t, Shift::RightArith)
VMX_SHIFT(bindPsrad, uint32_t, Shift::RightArith)
#undef VMX_SHIFT

} // namespace vmxsim
