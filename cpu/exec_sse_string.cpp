// SSE4.2 packed string compares PCMPESTRI, PCMPESTRM, PCMPISTRI, PCMPISTRM, and PCMPGTQ
// (SDM Vol. 2B, the instruction page of each, and SDM Vol. 2B, Programming
// Considerations with 128-bit SIMD Instructions > Imm8 Control Byte Operation for
// PCMPESTRI / PCMPESTRM / PCMPISTRI / PCMPISTRM). CRC32 and POPCNT, also SSE4.2-era
// instructions, are general-purpose instructions (cpu/exec_bit.cpp).
//
// A string compare runs in four steps, each controlled by a field of imm8: the source
// format (imm8[1:0]: unsigned/signed bytes/words), the aggregation (imm8[3:2]: equal any,
// ranges, equal each, equal ordered) over the matrix of element compares with the
// forcing rules for invalid elements, the polarity (imm8[5:4]), and the output selection
// (imm8[6]). imm8[7] is reserved and ignored. The m128 operand has no alignment rule
// (SDM Vol. 2A, Exceptions Type 4: "PCMPESTRI ... do not cause #GP if the memory operand
// is not aligned").
#include "cpu/exec_sse.h"

namespace vmxsim {

using namespace sse;

namespace {

/// Element E of X in the format of imm8[1:0], as a signed integer.
inline int32_t element(const Xmm &X, uint8_t Imm, unsigned E) {
  uint8_t B[16];
  std::memcpy(B, &X, 16);
  if (Imm & 1) {
    const uint16_t W = uint16_t(B[2 * E] | (B[2 * E + 1] << 8));
    return (Imm & 2) ? int32_t(int16_t(W)) : int32_t(W);
  }
  return (Imm & 2) ? int32_t(int8_t(B[E])) : int32_t(B[E]);
}

/// The number of valid elements before the first zero one (implicit length).
inline unsigned implicitLength(const Xmm &X, uint8_t Imm, unsigned N) {
  for (unsigned E = 0; E < N; ++E)
    if (element(X, Imm, E) == 0)
      return E;
  return N;
}

/// The explicit length in RAX/EAX or RDX/EDX: its absolute value, saturated to N (SDM
/// Vol. 2B, Imm8 Control Byte Operation: "the absolute value of the length ... if the
/// value is greater than 16 (8), it is treated as 16 (8)").
inline unsigned explicitLength(uint64_t Reg, bool Wide, unsigned N) {
  const int64_t V = Wide ? int64_t(Reg) : int64_t(int32_t(uint32_t(Reg)));
  const uint64_t Abs = V < 0 ? 0 - uint64_t(V) : uint64_t(V);
  return Abs > N ? N : unsigned(Abs);
}

/// IntRes2 of the compare of A (xmm1, LenA valid elements) and B (xmm2/m128, LenB).
uint16_t compareStrings(const Xmm &A, unsigned LenA, const Xmm &B, unsigned LenB,
                        uint8_t Imm) {
  const unsigned N = (Imm & 1) ? 8 : 16;
  int32_t EA[16], EB[16];
  for (unsigned E = 0; E < N; ++E) {
    EA[E] = element(A, Imm, E);
    EB[E] = element(B, Imm, E);
  }
  uint16_t Res1 = 0;
  switch ((Imm >> 2) & 3) {
  case 0: // equal any: B[j] is one of the valid elements of A
    for (unsigned J = 0; J < LenB; ++J)
      for (unsigned I = 0; I < LenA; ++I)
        if (EB[J] == EA[I])
          Res1 |= uint16_t(1u << J);
    break;
  case 1: // ranges: A[2k] <= B[j] <= A[2k+1] for a valid pair k
    for (unsigned J = 0; J < LenB; ++J)
      for (unsigned I = 0; I + 1 < N; I += 2) {
        // Each bound compares false when it is invalid (forcing rule).
        const bool Ge = I < LenA && EB[J] >= EA[I];
        const bool Le = I + 1 < LenA && EB[J] <= EA[I + 1];
        if (Ge && Le)
          Res1 |= uint16_t(1u << J);
      }
    break;
  case 2: // equal each: both invalid compare true, one invalid false
    for (unsigned J = 0; J < N; ++J) {
      const bool VA = J < LenA, VB = J < LenB;
      if (VA != VB ? false : (!VA || EA[J] == EB[J]))
        Res1 |= uint16_t(1u << J);
    }
    break;
  case 3: // equal ordered: A, as far as it is valid, occurs in B at position j
    for (unsigned J = 0; J < N; ++J) {
      bool Match = true;
      for (unsigned I = 0; J + I < N && Match; ++I) {
        if (I >= LenA)
          break; // an invalid needle element compares true
        Match = J + I < LenB && EA[I] == EB[J + I];
      }
      if (Match)
        Res1 |= uint16_t(1u << J);
    }
    break;
  }
  const uint16_t All = uint16_t((1u << N) - 1);
  switch ((Imm >> 4) & 3) {
  case 1: // negative polarity
    return uint16_t(~Res1 & All);
  case 3: // masked negative: only the valid elements of B are negated
    return uint16_t((Res1 ^ ((1u << LenB) - 1)) & All);
  default:
    return Res1;
  }
}

/// Explicit (PCMPESTRx) or implicit (PCMPISTRx) lengths; Index selects the xSTRI output
/// (ECX) over the xSTRM output (XMM0).
template <bool Explicit, bool Index, bool FromMem>
Status execPcmpStr(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  Xmm B;
  if constexpr (FromMem)
    VMX_TRY((loadOperand<Xmm, false>(C, I, B)));
  else
    B = C.S.XmmReg[I.Reg[1]];
  const Xmm A = C.S.XmmReg[I.Reg[0]];
  const uint8_t Imm = uint8_t(I.Imm);
  const unsigned N = (Imm & 1) ? 8 : 16;
  unsigned LenA, LenB;
  if constexpr (Explicit) {
    const bool Wide = I.Flags & insnflag::RexW;
    LenA = explicitLength(C.S.Gpr[RAX], Wide, N);
    LenB = explicitLength(C.S.Gpr[RDX], Wide, N);
  } else {
    LenA = implicitLength(A, Imm, N);
    LenB = implicitLength(B, Imm, N);
  }
  const uint16_t Res2 = compareStrings(A, LenA, B, LenB, Imm);
  if constexpr (Index) {
    // Least (imm8[6] = 0) or most significant set bit; N when none is set.
    uint32_t Idx = N;
    if (Res2)
      Idx = (Imm & 0x40) ? 31 - __builtin_clz(Res2) : __builtin_ctz(Res2);
    setReg<uint32_t>(C, RCX, Idx);
  } else if (Imm & 0x40) {
    // Each result bit expanded to a byte or word mask.
    Xmm M{0, 0};
    const unsigned Bytes = 16 / N;
    for (unsigned E = 0; E < N; ++E)
      if ((Res2 >> E) & 1) {
        const unsigned Bit = E * Bytes * 8;
        const uint64_t Ones = Bytes == 1 ? 0xffull : 0xffffull;
        (Bit < 64 ? M.Lo : M.Hi) |= Ones << (Bit % 64);
      }
    C.S.XmmReg[0] = M;
  } else {
    C.S.XmmReg[0] = Xmm{Res2, 0};
  }
  // Flags (SDM Vol. 2B, PCMPESTRI, Flags Affected): CF when IntRes2 is nonzero, ZF/SF
  // when the xmm2/m128 / xmm1 string ends inside the register, OF = IntRes2[0], AF = PF
  // = 0.
  setArithFlags(C, (Res2 ? rflags::CF : 0) | (LenB < N ? rflags::ZF : 0) |
                       (LenA < N ? rflags::SF : 0) | ((Res2 & 1) ? rflags::OF : 0));
  return next(C, I);
}

template <bool Explicit, bool Index> bool bindPcmpStr(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &A = D.Ops[0], &B = D.Ops[1];
  if (A.Kind != OperandKind::Reg || A.Class != RegClass::Xmm)
    return false;
  if (B.Kind == OperandKind::Mem)
    I.Fn = &execPcmpStr<Explicit, Index, true>;
  else if (B.Kind == OperandKind::Reg && B.Class == RegClass::Xmm)
    I.Fn = &execPcmpStr<Explicit, Index, false>;
  else
    return false;
  copyOperandRegs(D, I);
  I.Cost = costOf(CostClass::Sse);
  return true;
}

Xmm opPcmpgtq(const Xmm &A, const Xmm &B, uint8_t) {
  return Xmm{int64_t(A.Lo) > int64_t(B.Lo) ? ~0ull : 0, int64_t(A.Hi) > int64_t(B.Hi) ? ~0ull : 0};
}

} // namespace

// Binders: one per mnemonic row of cpu/insns_sse_ext.def.
bool bindPcmpestri(const DecodeInfo &D, DecodedInsn &I) { return bindPcmpStr<true, true>(D, I); }
bool bindPcmpestrm(const DecodeInfo &D, DecodedInsn &I) { return bindPcmpStr<true, false>(D, I); }
bool bindPcmpistri(const DecodeInfo &D, DecodedInsn &I) { return bindPcmpStr<false, true>(D, I); }
bool bindPcmpistrm(const DecodeInfo &D, DecodedInsn &I) { return bindPcmpStr<false, false>(D, I); }
bool bindPcmpgtq(const DecodeInfo &D, DecodedInsn &I) { return bindPacked<&opPcmpgtq>(D, I); }

} // namespace vmxsim
