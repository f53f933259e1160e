// The SSSE3 packed-integer instructions: PABSB/W/D, PALIGNR, PHADDW/D/SW, PHSUBW/D/SW,
// PMADDUBSW, PMULHRSW, PSHUFB, PSIGNB/W/D (SDM Vol. 2, the instruction page of each), on
// XMM registers and, through the MMX path of bindPacked (cpu/exec_sse.h), on MM registers.
//
// All have the execPacked shape dst = Op(dst, src, imm8) with an aligned m128 source (SDM
// Vol. 2A, Exceptions Type 4).
#include "cpu/exec_sse.h"

#include <cstdlib>

namespace vmxsim {

using namespace sse;

namespace {

// --- SSSE3 ------------------------------------------------------------------------------

template <typename L> Xmm opAbs(const Xmm &, const Xmm &B, uint8_t) {
  using S = std::make_signed_t<L>;
  Lanes<L> X = lanes<L>(B);
  for (L &V : X.V)
    V = S(V) < 0 ? L(0 - V) : V; // abs of the most negative value is its bit pattern
  return toXmm(X);
}

/// PALIGNR: the 32-byte concatenation dst:src shifted right by imm8 bytes, low 16 kept.
Xmm opPalignr(const Xmm &A, const Xmm &B, uint8_t Imm) {
  uint8_t Cat[32], Out[16] = {};
  std::memcpy(Cat, &B, 16);
  std::memcpy(Cat + 16, &A, 16);
  for (unsigned K = 0; K < 16; ++K)
    if (K + Imm < 32)
      Out[K] = Cat[K + Imm];
  Xmm R;
  std::memcpy(&R, Out, 16);
  return R;
}

/// PHADDx/PHSUBx: the low half of the result pairs up the destination's lanes, the high
/// half the source's; Sat selects the signed-saturating word forms.
template <typename L, bool Sub, bool Sat> Xmm opHorizontal(const Xmm &A, const Xmm &B, uint8_t) {
  Lanes<L> X = lanes<L>(A), Y = lanes<L>(B), R;
  constexpr unsigned Half = Lanes<L>::N / 2;
  auto pair = [](L P, L Q) -> L {
    if constexpr (Sat)
      return saturate<int32_t, L>(Sub ? int32_t(P) - Q : int32_t(P) + Q);
    else
      return L(Sub ? P - Q : P + Q);
  };
  for (unsigned K = 0; K < Half; ++K) {
    R.V[K] = pair(X.V[2 * K], X.V[2 * K + 1]);
    R.V[Half + K] = pair(Y.V[2 * K], Y.V[2 * K + 1]);
  }
  return toXmm(R);
}

/// PMADDUBSW: unsigned bytes of the destination times signed bytes of the source,
/// adjacent products added with signed saturation.
Xmm opPmaddubsw(const Xmm &A, const Xmm &B, uint8_t) {
  Lanes<uint8_t> X = lanes<uint8_t>(A);
  Lanes<int8_t> Y = lanes<int8_t>(B);
  Lanes<int16_t> R;
  for (unsigned K = 0; K < 8; ++K)
    R.V[K] = saturate<int32_t, int16_t>(int32_t(X.V[2 * K]) * Y.V[2 * K] +
                                        int32_t(X.V[2 * K + 1]) * Y.V[2 * K + 1]);
  return toXmm(R);
}

/// PMULHRSW: the 32-bit product shifted right by 14, plus 1, shifted right by 1.
Xmm opPmulhrsw(const Xmm &A, const Xmm &B, uint8_t) {
  return zipLanes<int16_t>(A, B, [](int16_t X, int16_t Y) {
    return int16_t((((int32_t(X) * Y) >> 14) + 1) >> 1);
  });
}

/// PSHUFB: each byte of the source selects a byte of the destination by its low four
/// bits, or zero when its bit 7 is set.
Xmm opPshufb(const Xmm &A, const Xmm &B, uint8_t) {
  Lanes<uint8_t> X = lanes<uint8_t>(A), Y = lanes<uint8_t>(B), R;
  for (unsigned K = 0; K < 16; ++K)
    R.V[K] = (Y.V[K] & 0x80) ? 0 : X.V[Y.V[K] & 15];
  return toXmm(R);
}

/// PSIGNx: negate, zero or keep each destination lane by the sign of the source lane.
template <typename L> Xmm opPsign(const Xmm &A, const Xmm &B, uint8_t) {
  using S = std::make_signed_t<L>;
  return zipLanes<L>(A, B, [](L X, L Y) { return S(Y) < 0 ? L(0 - X) : Y == 0 ? L(0) : X; });
}

// --- MMX forms that are not lane-wise --------------------------------------------------

/// PSHUFB on MM registers: the index is the low three bits; with the destination
/// duplicated into both halves, the XMM shuffle's four-bit index picks the same byte.
uint64_t mmPshufb(uint64_t A, uint64_t B, uint8_t) {
  return opPshufb(Xmm{A, A}, Xmm{B, 0}, 0).Lo;
}
/// PALIGNR on MM registers: the 16-byte concatenation dst:src shifted right by imm8 bytes.
uint64_t mmPalignr(uint64_t A, uint64_t B, uint8_t Imm) {
  if (Imm >= 16)
    return 0;
  const unsigned __int128 Cat = (static_cast<unsigned __int128>(A) << 64) | B;
  return uint64_t(Cat >> (8 * Imm));
}

} // namespace

// Binders: one per mnemonic row of cpu/insns_sse_ext.def. The MMX forms are the
// lane-wise operation on 64 bits unless a row names its own.
#define VMX_PACKED(Name, ...)                                                           \
  bool Name(const DecodeInfo &D, DecodedInsn &I) { return bindPacked<__VA_ARGS__>(D, I); }
VMX_PACKED(bindPabsb, &opAbs<uint8_t>)
VMX_PACKED(bindPabsw, &opAbs<uint16_t>)
VMX_PACKED(bindPabsd, &opAbs<uint32_t>)
VMX_PACKED(bindPalignr, &opPalignr, &mmPalignr)
// Horizontal adds and subtracts pair up dst:src as one register on MM registers.
#define VMX_HORIZONTAL(Name, ...)                                                       \
  VMX_PACKED(Name, &opHorizontal<__VA_ARGS__>, &mmPaired<&opHorizontal<__VA_ARGS__>>)
VMX_HORIZONTAL(bindPhaddw, int16_t, false, false)
VMX_HORIZONTAL(bindPhaddd, uint32_t, false, false)
VMX_HORIZONTAL(bindPhaddsw, int16_t, false, true)
VMX_HORIZONTAL(bindPhsubw, int16_t, true, false)
VMX_HORIZONTAL(bindPhsubd, uint32_t, true, false)
VMX_HORIZONTAL(bindPhsubsw, int16_t, true, true)
VMX_PACKED(bindPmaddubsw, &opPmaddubsw)
VMX_PACKED(bindPmulhrsw, &opPmulhrsw)
VMX_PACKED(bindPshufb, &opPshufb, &mmPshufb)
VMX_PACKED(bindPsignb, &opPsign<uint8_t>)
VMX_PACKED(bindPsignw, &opPsign<uint16_t>)
VMX_PACKED(bindPsignd, &opPsign<uint32_t>)
#undef VMX_HORIZONTAL
#undef VMX_PACKED

} // namespace vmxsim
