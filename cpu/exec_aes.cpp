// AES-NI (AESENC, AESENCLAST, AESDEC, AESDECLAST, AESIMC, AESKEYGENASSIST) and PCLMULQDQ
// on XMM registers (SDM Vol. 2A, the instruction page of each; the AES transformations
// are those of FIPS-197, which the SDM's pseudocode names). Computed in software, so the
// result does not depend on the host. The m128 source must be 16-byte aligned (SDM Vol.
// 2A, Exceptions Type 4).
//
// The state is the register's 16 bytes in FIPS-197 column order: byte 4c + r is row r of
// column c.
#include "cpu/exec_sse.h"

#include <array>

namespace vmxsim {

using namespace sse;

namespace {

// --- GF(2^8) and the S-boxes ------------------------------------------------------------

/// Multiplication in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1.
constexpr uint8_t gfMul(uint8_t A, uint8_t B) {
  uint8_t P = 0;
  for (unsigned K = 0; K < 8; ++K) {
    if (B & 1)
      P ^= A;
    const bool Hi = A & 0x80;
    A = uint8_t(A << 1);
    if (Hi)
      A ^= 0x1b;
    B >>= 1;
  }
  return P;
}

constexpr uint8_t rotl8(uint8_t V, unsigned N) { return uint8_t((V << N) | (V >> (8 - N))); }

/// FIPS-197 5.1.1: the multiplicative inverse (0 for 0), then the affine transformation.
constexpr std::array<uint8_t, 256> makeSbox() {
  std::array<uint8_t, 256> S{};
  for (unsigned X = 0; X < 256; ++X) {
    uint8_t Inv = 0;
    if (X) { // X^254 = X^-1
      uint8_t P = 1;
      for (unsigned K = 0; K < 254; ++K)
        P = gfMul(P, uint8_t(X));
      Inv = P;
    }
    S[X] = uint8_t(Inv ^ rotl8(Inv, 1) ^ rotl8(Inv, 2) ^ rotl8(Inv, 3) ^ rotl8(Inv, 4) ^ 0x63);
  }
  return S;
}
constexpr std::array<uint8_t, 256> makeInvSbox(const std::array<uint8_t, 256> &S) {
  std::array<uint8_t, 256> R{};
  for (unsigned X = 0; X < 256; ++X)
    R[S[X]] = uint8_t(X);
  return R;
}
constexpr std::array<uint8_t, 256> kSbox = makeSbox();
constexpr std::array<uint8_t, 256> kInvSbox = makeInvSbox(kSbox);
static_assert(kSbox[0x00] == 0x63 && kSbox[0x53] == 0xed && kSbox[0xff] == 0x16,
              "FIPS-197 Figure 7");

// --- round transformations --------------------------------------------------------------

using State = std::array<uint8_t, 16>;

inline State toState(const Xmm &X) {
  State S;
  std::memcpy(S.data(), &X, 16);
  return S;
}
inline Xmm fromState(const State &S) {
  Xmm X;
  std::memcpy(&X, S.data(), 16);
  return X;
}

/// ShiftRows (Inverse = false) moves row r left by r columns; InvShiftRows right.
template <bool Inverse> State shiftRows(const State &S) {
  State R;
  for (unsigned C = 0; C < 4; ++C)
    for (unsigned Row = 0; Row < 4; ++Row)
      R[4 * C + Row] = S[4 * ((Inverse ? C + 4 - Row : C + Row) % 4) + Row];
  return R;
}
template <bool Inverse> State subBytes(State S) {
  for (uint8_t &B : S)
    B = Inverse ? kInvSbox[B] : kSbox[B];
  return S;
}
/// MixColumns multiplies each column by {03}x^3 + {01}x^2 + {01}x + {02}; the inverse by
/// {0b}x^3 + {0d}x^2 + {09}x + {0e} (FIPS-197 5.1.3, 5.3.3).
template <bool Inverse> State mixColumns(const State &S) {
  constexpr uint8_t K0 = Inverse ? 0x0e : 2, K1 = Inverse ? 0x0b : 3, K2 = Inverse ? 0x0d : 1,
                    K3 = Inverse ? 0x09 : 1;
  State R;
  for (unsigned C = 0; C < 4; ++C) {
    const uint8_t *A = &S[4 * C];
    for (unsigned Row = 0; Row < 4; ++Row)
      R[4 * C + Row] = gfMul(K0, A[Row]) ^ gfMul(K1, A[(Row + 1) % 4]) ^
                       gfMul(K2, A[(Row + 2) % 4]) ^ gfMul(K3, A[(Row + 3) % 4]);
  }
  return R;
}

inline Xmm xorKey(const State &S, const Xmm &Key) {
  const Xmm X = fromState(S);
  return Xmm{X.Lo ^ Key.Lo, X.Hi ^ Key.Hi};
}

/// AESENC/AESENCLAST (Decrypt = false) and AESDEC/AESDECLAST: one round of the state in
/// the destination with the round key in the source; the last round has no (Inv)MixColumns.
template <bool Decrypt, bool Last> Xmm opAesRound(const Xmm &A, const Xmm &Key, uint8_t) {
  State S = subBytes<Decrypt>(shiftRows<Decrypt>(toState(A)));
  if constexpr (!Last)
    S = mixColumns<Decrypt>(S);
  return xorKey(S, Key);
}
Xmm opAesimc(const Xmm &, const Xmm &B, uint8_t) {
  return fromState(mixColumns<true>(toState(B)));
}

inline uint32_t subWord(uint32_t W) {
  return uint32_t(kSbox[W & 0xff]) | (uint32_t(kSbox[(W >> 8) & 0xff]) << 8) |
         (uint32_t(kSbox[(W >> 16) & 0xff]) << 16) | (uint32_t(kSbox[W >> 24]) << 24);
}
inline uint32_t rotWord(uint32_t W) { return (W >> 8) | (W << 24); }

/// AESKEYGENASSIST: SubWord and RotWord of dwords 1 and 3 of the source, the round
/// constant imm8 XORed into the rotated words.
Xmm opAeskeygenassist(const Xmm &, const Xmm &B, uint8_t Imm) {
  const Lanes<uint32_t> X = lanes<uint32_t>(B);
  const uint32_t S1 = subWord(X.V[1]), S3 = subWord(X.V[3]);
  Lanes<uint32_t> R;
  R.V[0] = S1;
  R.V[1] = rotWord(S1) ^ Imm;
  R.V[2] = S3;
  R.V[3] = rotWord(S3) ^ Imm;
  return toXmm(R);
}

// --- PCLMULQDQ --------------------------------------------------------------------------

/// The carry-less product of the quadword of the destination selected by imm8[0] and that
/// of the source selected by imm8[4].
Xmm opPclmulqdq(const Xmm &A, const Xmm &B, uint8_t Imm) {
  const uint64_t X = (Imm & 0x01) ? A.Hi : A.Lo, Y = (Imm & 0x10) ? B.Hi : B.Lo;
  uint64_t Lo = 0, Hi = 0;
  for (unsigned K = 0; K < 64; ++K)
    if ((Y >> K) & 1) {
      Lo ^= X << K;
      if (K)
        Hi ^= X >> (64 - K);
    }
  return Xmm{Lo, Hi};
}

} // namespace

// Binders: one per mnemonic row of cpu/insns_sse_ext.def.
#define VMX_PACKED(Name, ...)                                                           \
  bool Name(const DecodeInfo &D, DecodedInsn &I) { return bindPacked<__VA_ARGS__>(D, I); }
VMX_PACKED(bindAesenc, &opAesRound<false, false>)
VMX_PACKED(bindAesenclast, &opAesRound<false, true>)
VMX_PACKED(bindAesdec, &opAesRound<true, false>)
VMX_PACKED(bindAesdeclast, &opAesRound<true, true>)
VMX_PACKED(bindAesimc, &opAesimc)
VMX_PACKED(bindAeskeygenassist, &opAeskeygenassist)
VMX_PACKED(bindPclmulqdq, &opPclmulqdq)
#undef VMX_PACKED

} // namespace vmxsim
