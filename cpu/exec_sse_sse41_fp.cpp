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
VMX_FP_XX(hostHaddps, "haddps")
VMX_FP_XX(hostHaddpd, "haddpd")
// ROUNDxx take their rounding control as imm8[3:0]; one primitive per value.
VMX_FP_CMP(hostRoundps, "roundps")
VMX_FP_CMP(hostRoundpd, "roundpd")
VMX_FP_CMP(hostRoundss, "roundss")
VMX_FP_CMP(hostRoundsd, "roundsd")
#undef VMX_FP_XX
#undef VMX_FP_CMP

// --- DPPS / DPPD ------------------------------------------------------------------------

/// The flags of one step of a dot product (Res = Op applied lane-wise to X and Y, or, when
/// Horizontal, to adjacent lanes of X), as the instruction reports them: an exactly tiny
/// result signals underflow when it is unmasked (SDM Vol. 1, Numeric Underflow Exception
/// (#U)), and an unmasked overflow or underflow gets the precision flag of the
/// unbounded-exponent result, lane by lane (scalarLaneFlags).
uint32_t stepFlags(uint32_t F, const Xmm &Res, WideOp Op, const Xmm &X, const Xmm &Y,
                   bool Horizontal, unsigned Bytes, uint32_t Guest) {
  F &= mxcsr::Flags;
  if (!(Guest & mxcsr::UM) && anyDenormalLane(Res, Bytes))
    F |= mxcsr::UE;
  const uint32_t Unmasked = F & ~(Guest >> mxcsr::MaskShift);
  if (!(Unmasked & (mxcsr::OE | mxcsr::UE)) || (Unmasked & kPreComputation)) [[likely]]
    return F;
  F = 0;
  const unsigned N = 16 / Bytes;
  for (unsigned K = 0; K < (Horizontal ? N / 2 : N); ++K)
    F |= Horizontal ? scalarLaneFlags(Op, fpLane(X, Bytes, 2 * K), fpLane(X, Bytes, 2 * K + 1),
                                      Bytes, Guest)
                    : scalarLaneFlags(Op, fpLane(X, Bytes, K), fpLane(Y, Bytes, K), Bytes, Guest);
  return F;
}

/// DPPS (Single) and DPPD, following DP_primitive (SDM Vol. 2A, DPPS/DPPD): the lanes
/// selected by imm8[7:4] are multiplied (unselected products are +0.0), the products
/// summed pairwise with a rounding per addition, and the sum written to the lanes selected
/// by imm8[3:0] (the others +0.0). Each step is one host operation whose exceptions are
/// reported before the next runs, so an unmasked exception stops the instruction at the
/// step that raised it, with the flags of the steps before it already set.
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
  VMX_TRY(reportFp(C, stepFlags(F, T, WideOp::Mul, X, Y, false, Bytes, Guest)));
  // Single: Temp2 and Temp3 in lanes 0 and 1, then Temp4 in lane 0; double: one sum.
  for (unsigned Step = 0; Step < (Single ? 2 : 1); ++Step) {
    const Xmm In = T;
    F = Single ? hostHaddps(T, In, Csr) : hostHaddpd(T, In, Csr);
    VMX_TRY(reportFp(C, stepFlags(F, T, WideOp::Add, In, In, true, Bytes, Guest)));
  }
  const uint64_t Sum = fpLane(T, Bytes, 0);
  Xmm R{0, 0};
  for (unsigned K = 0; K < N; ++K)
    if (Imm & (1u << K))
      ((Bytes * K >= 8) ? R.Hi : R.Lo) |= Sum << (Single ? 32 * (K & 1) : 0);
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
