// The floating-point instructions of SSE4.1: DPPS/DPPD and ROUNDPS/ROUNDPD/ROUNDSS/ROUNDSD
// (SDM Vol. 2, the instruction page of each).
//
// As for SSE/SSE2 (cpu/exec_sse_fp.cpp), the host's SSE unit computes with the guest's
// RC, FTZ and DAZ and every exception masked; reportFp then applies the guest's masks.
// DPPS/DPPD are composed from the steps of their SDM pseudocode (multiply, then pairwise
// sums, each rounded), whose flags together are the instruction's; an unmasked exception
// stops at the step that raises it.
#include "cpu/exec_sse_fp.h"

namespace vmxsim {

using namespace sse;

namespace {

using XmmFn = uint32_t (*)(Xmm &, const Xmm &, uint32_t);

VMX_FP_XX(hostMulps, "mulps")
VMX_FP_XX(hostMulpd, "mulpd")
VMX_FP_XX(hostAddps, "addps")
VMX_FP_XX(hostAddpd, "addpd")
// ROUNDxx take their rounding control as imm8[3:0]; one primitive per value.
VMX_FP_CMP(hostRoundps, "roundps")
VMX_FP_CMP(hostRoundpd, "roundpd")
VMX_FP_CMP(hostRoundss, "roundss")
VMX_FP_CMP(hostRoundsd, "roundsd")
#undef VMX_FP_XX
#undef VMX_FP_CMP

// --- DPPS / DPPD ------------------------------------------------------------------------

/// The flags of one step of a dot product (Res = Op applied lane-wise to X and Y), as the
/// instruction reports them: an exactly tiny
/// result signals underflow when it is unmasked (SDM Vol. 1, Numeric Underflow Exception
/// (#U)), and an unmasked overflow or underflow gets the precision flag of the
/// unbounded-exponent result, lane by lane (scalarLaneFlags).
uint32_t stepFlags(uint32_t F, const Xmm &Res, WideOp Op, const Xmm &X, const Xmm &Y,
                   unsigned Bytes, uint32_t Guest) {
  F &= mxcsr::Flags;
  if (!(Guest & mxcsr::UM) && anyDenormalLane(Res, Bytes))
    F |= mxcsr::UE;
  const uint32_t Unmasked = F & ~(Guest >> mxcsr::MaskShift);
  if (!(Unmasked & (mxcsr::OE | mxcsr::UE)) || (Unmasked & kPreComputation)) [[likely]]
    return F;
  F = 0;
  const unsigned N = 16 / Bytes;
  for (unsigned K = 0; K < N; ++K)
    F |= scalarLaneFlags(Op, fpLane(X, Bytes, K), fpLane(Y, Bytes, K), Bytes, Guest);
  return F;
}

/// DPPS (Single) and DPPD, following DP_primitive (SDM Vol. 2A, DPPS/DPPD): the lanes
/// selected by imm8[7:4] are multiplied (unselected products are +0.0), the products
/// summed pairwise with a rounding per addition, and the sum written to the lanes selected
/// by imm8[3:0] (the others +0.0). Each step is one host operation whose exceptions are
/// reported before the next runs, so an unmasked exception stops the instruction at the
/// step that raised it, with the flags of the steps before it already set.
///
/// Which NaN a sum of two NaNs returns (its first operand's: SDM Vol. 1, "Operating on
/// SNaNs and QNaNs") is not said by the pseudocode, which sums once for every lane. Intel
/// processors sum for each destination lane K in an order of its own, measured on one
/// (an Intel Xeon host, the oracle tests of tests/cpu/simd_ext_oracle_test.cpp): DPPD
/// returns T0 + T1 in lane 0 and T1 + T0 in lane 1; DPPS pairs T1 + T0 and T3 + T2 for an
/// even K, T0 + T1 and T2 + T3 for an odd one, then adds the pair of T0 first for K < 2
/// and that of T2 first for K >= 2. (AMD processors return one sum in every lane.) Every
/// other result and every flag is the same in either order: the two orders of one sum
/// round alike and raise the same exceptions.
template <bool Single, Src S> Status execDp(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  if constexpr (!kHostFp)
    return C.unimplemented(kNoHostFp);
  Xmm B;
  VMX_TRY(loadSource<S>(C, I, B));
  constexpr unsigned Bytes = Single ? 4 : 8, N = 16 / Bytes;
  const uint8_t Imm = uint8_t(I.Imm);
  const uint32_t Guest = C.S.Mxcsr, Csr = hostCsr(Guest);
  const uint64_t LaneMask = Single ? 0xffffffffull : ~0ull;
  Xmm Sel{0, 0};
  for (unsigned K = 0; K < N; ++K)
    if (Imm & (0x10 << K))
      ((Bytes * K >= 8) ? Sel.Hi : Sel.Lo) |= LaneMask << (Single ? 32 * (K & 1) : 0);
  const Xmm &A = C.S.XmmReg[I.Reg[0]];
  const Xmm X{A.Lo & Sel.Lo, A.Hi & Sel.Hi}, Y{B.Lo & Sel.Lo, B.Hi & Sel.Hi};
  Xmm T = X;
  uint32_t F = Single ? hostMulps(T, Y, Csr) : hostMulpd(T, Y, Csr);
  VMX_TRY(reportFp(C, stepFlags(F, T, WideOp::Mul, X, Y, Bytes, Guest)));
  auto rot32 = [](uint64_t V) { return V >> 32 | V << 32; };
  // Single: V = {T1 + T0, T0 + T1, T3 + T2, T2 + T3}, then V + {V2, V3, V0, V1}; double:
  // {T0 + T1, T1 + T0}. Each lane K of the last sum is lane K's result.
  for (unsigned Step = 0; Step < (Single ? 2 : 1); ++Step) {
    Xmm First = Single && Step == 0 ? Xmm{rot32(T.Lo), rot32(T.Hi)} : T;
    const Xmm Second = Single && Step == 0 ? T : Xmm{T.Hi, T.Lo};
    const Xmm In = First;
    F = Single ? hostAddps(First, Second, Csr) : hostAddpd(First, Second, Csr);
    T = First;
    VMX_TRY(reportFp(C, stepFlags(F, T, WideOp::Add, In, Second, Bytes, Guest)));
  }
  Xmm R{0, 0};
  for (unsigned K = 0; K < N; ++K)
    if (Imm & (1u << K))
      ((Bytes * K >= 8) ? R.Hi : R.Lo) |=
          (fpLane(T, Bytes, K) & LaneMask) << (Single ? 32 * (K & 1) : 0);
  C.S.XmmReg[I.Reg[0]] = R;
  return next(C, I);
}

// --- ROUND ------------------------------------------------------------------------------

/// ROUNDxx: invalid for an SNaN, precision unless imm8[3] suppresses it; never overflow,
/// underflow or denormal (SDM Vol. 2B, ROUNDPS, SIMD Floating-Point Exceptions).
template <XmmFn Op, Src S> Status execRound(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  if constexpr (!kHostFp)
    return C.unimplemented(kNoHostFp);
  Xmm B;
  VMX_TRY(loadSource<S>(C, I, B));
  Xmm R = C.S.XmmReg[I.Reg[0]];
  VMX_TRY(reportFp(C, Op(R, B, hostCsr(C.S.Mxcsr)) & mxcsr::Flags));
  C.S.XmmReg[I.Reg[0]] = R;
  return next(C, I);
}

/// ROUNDxx: one handler per imm8[3:0] (the legacy encodings ignore imm8[7:4]).
template <Src MemSrc, XmmFn... Fns> bool bindRound(const DecodeInfo &D, DecodedInsn &I) {
  static_assert(sizeof...(Fns) == 16);
  static constexpr Handler RegForms[] = {&execRound<Fns, Src::Xmm>...};
  static constexpr Handler MemForms[] = {&execRound<Fns, MemSrc>...};
  const unsigned P = D.ImmRaw & 15;
  return bindXmmOrMem(D, I, RegForms[P], MemForms[P]);
}
#define VMX_ROUNDING(Fn)                                                                  \
  Fn<0>, Fn<1>, Fn<2>, Fn<3>, Fn<4>, Fn<5>, Fn<6>, Fn<7>, Fn<8>, Fn<9>, Fn<10>, Fn<11>,     \
      Fn<12>, Fn<13>, Fn<14>, Fn<15>

} // namespace

// Binders: one per mnemonic row of cpu/insns_sse_ext.def.
bool bindDpps(const DecodeInfo &D, DecodedInsn &I) {
  return bindXmmOrMem(D, I, &execDp<true, Src::Xmm>, &execDp<true, Src::M128>);
}
bool bindDppd(const DecodeInfo &D, DecodedInsn &I) {
  return bindXmmOrMem(D, I, &execDp<false, Src::Xmm>, &execDp<false, Src::M128>);
}
// ROUNDPS/ROUNDPD read an aligned m128, ROUNDSS an m32 and ROUNDSD an m64 (no alignment).
bool bindRoundps(const DecodeInfo &D, DecodedInsn &I) {
  return bindRound<Src::M128, VMX_ROUNDING(&hostRoundps)>(D, I);
}
bool bindRoundpd(const DecodeInfo &D, DecodedInsn &I) {
  return bindRound<Src::M128, VMX_ROUNDING(&hostRoundpd)>(D, I);
}
bool bindRoundss(const DecodeInfo &D, DecodedInsn &I) {
  return bindRound<Src::M32, VMX_ROUNDING(&hostRoundss)>(D, I);
}
bool bindRoundsd(const DecodeInfo &D, DecodedInsn &I) {
  return bindRound<Src::M64, VMX_ROUNDING(&hostRoundsd)>(D, I);
}
#undef VMX_ROUNDING

} // namespace vmxsim
