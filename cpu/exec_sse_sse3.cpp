// SSE3 (SDM Vol. 2, the instruction page of each): the floating-point ADDSUBPS/ADDSUBPD,
// HADDPS/HADDPD, HSUBPS/HSUBPD and the data moves MOVSLDUP, MOVSHDUP, MOVDDUP, LDDQU.
// FISTTP, also SSE3, is an x87 instruction (cpu/insns_sse.def); MONITOR/MWAIT have their
// own CPUID bit.
//
// As for SSE/SSE2 (cpu/exec_sse_fp.cpp), the host's SSE unit computes the floating-point
// forms with the guest's RC, FTZ and DAZ and every exception masked; reportFp then
// applies the guest's masks. Each of their result lanes is one addition or subtraction
// with one rounding, so an unmasked overflow or underflow is answered lane by lane with
// scalarLaneFlags. Packed m128 sources must be 16-byte aligned (SDM Vol. 2A, Exceptions
// Type 2 and 4); MOVDDUP's m64 and LDDQU's m128 have no alignment rule.
#include "cpu/exec_sse_fp.h"

namespace vmxsim {

bool bindMovUnaligned(const DecodeInfo &D, DecodedInsn &I);

using namespace sse;

namespace {

using XmmFn = uint32_t (*)(Xmm &, const Xmm &, uint32_t);

VMX_FP_XX(hostAddsubps, "addsubps")
VMX_FP_XX(hostAddsubpd, "addsubpd")
VMX_FP_XX(hostHaddps, "haddps")
VMX_FP_XX(hostHaddpd, "haddpd")
VMX_FP_XX(hostHsubps, "hsubps")
VMX_FP_XX(hostHsubpd, "hsubpd")
#undef VMX_FP_XX
#undef VMX_FP_CMP

// --- ADDSUB / HADD / HSUB ---------------------------------------------------------------

/// Which source lanes and operation give result lane K (SDM Vol. 2A, ADDSUBPS: even lanes
/// subtract, odd lanes add; HADDPS/HSUBPS: the low half of the result pairs up the
/// destination's lanes, the high half the source's).
enum class Pairing : uint8_t { AddSub, HAdd, HSub };

template <Pairing P>
void laneOperands(const Xmm &A, const Xmm &B, unsigned Bytes, unsigned K, WideOp &Op,
                  uint64_t &X, uint64_t &Y) {
  const unsigned N = 16 / Bytes;
  if constexpr (P == Pairing::AddSub) {
    Op = (K & 1) ? WideOp::Add : WideOp::Sub;
    X = fpLane(A, Bytes, K);
    Y = fpLane(B, Bytes, K);
  } else {
    Op = P == Pairing::HAdd ? WideOp::Add : WideOp::Sub;
    const Xmm &S = K < N / 2 ? A : B;
    const unsigned J = K % (N / 2);
    X = fpLane(S, Bytes, 2 * J);
    Y = fpLane(S, Bytes, 2 * J + 1);
  }
}

/// xmm1 <- Op(xmm1, xmm2/m128), each result lane one addition or subtraction.
template <XmmFn Op, Src S, Pairing P, unsigned Bytes>
Status execPairwise(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  if constexpr (!kHostFp)
    return C.unimplemented(kNoHostFp);
  Xmm B;
  VMX_TRY(loadSource<S>(C, I, B));
  const Xmm A = C.S.XmmReg[I.Reg[0]];
  Xmm R = A;
  const uint32_t Guest = C.S.Mxcsr;
  uint32_t Raised = Op(R, B, hostCsr(Guest)) & mxcsr::Flags;
  // With underflow unmasked a tiny result signals even when exact (SDM Vol. 1, Numeric
  // Underflow Exception (#U)); the masked run only flags inexact ones.
  if (!(Guest & mxcsr::UM) && anyDenormalLane(R, Bytes))
    Raised |= mxcsr::UE;
  const uint32_t Unmasked = Raised & ~(Guest >> mxcsr::MaskShift);
  if ((Unmasked & (mxcsr::OE | mxcsr::UE)) && !(Unmasked & kPreComputation)) [[unlikely]] {
    Raised = 0;
    for (unsigned K = 0; K < 16 / Bytes; ++K) {
      WideOp LOp;
      uint64_t X, Y;
      laneOperands<P>(A, B, Bytes, K, LOp, X, Y);
      Raised |= scalarLaneFlags(LOp, X, Y, Bytes, Guest);
    }
  }
  VMX_TRY(reportFp(C, Raised));
  C.S.XmmReg[I.Reg[0]] = R;
  return next(C, I);
}

// --- SSE3 moves -------------------------------------------------------------------------

/// MOVSLDUP (High = false) duplicates the even dwords, MOVSHDUP the odd ones.
template <bool High> Xmm opMovDup32(const Xmm &, const Xmm &B, uint8_t) {
  Lanes<uint32_t> S = lanes<uint32_t>(B), R;
  for (unsigned K = 0; K < 4; K += 2)
    R.V[K] = R.V[K + 1] = S.V[K + (High ? 1 : 0)];
  return toXmm(R);
}
Xmm opMovddup(const Xmm &, const Xmm &B, uint8_t) { return Xmm{B.Lo, B.Lo}; }

/// MOVDDUP xmm, m64: the quadword read has no alignment rule (Exceptions Type 5).
Status execMovddupMem(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  uint64_t V;
  VMX_TRY(loadOperand(C, I, V));
  C.S.XmmReg[I.Reg[0]] = Xmm{V, V};
  return next(C, I);
}

template <XmmFn Op, Pairing P, unsigned Bytes>
bool bindPairwise(const DecodeInfo &D, DecodedInsn &I) {
  return bindXmmOrMem(D, I, &execPairwise<Op, Src::Xmm, P, Bytes>,
                      &execPairwise<Op, Src::M128, P, Bytes>);
}

} // namespace

// Binders: one per mnemonic row of cpu/insns_sse_ext.def.
#define VMX_BINDER(Name, ...)                                                             \
  bool Name(const DecodeInfo &D, DecodedInsn &I) { return __VA_ARGS__(D, I); }
VMX_BINDER(bindAddsubps, bindPairwise<&hostAddsubps, Pairing::AddSub, 4>)
VMX_BINDER(bindAddsubpd, bindPairwise<&hostAddsubpd, Pairing::AddSub, 8>)
VMX_BINDER(bindHaddps, bindPairwise<&hostHaddps, Pairing::HAdd, 4>)
VMX_BINDER(bindHaddpd, bindPairwise<&hostHaddpd, Pairing::HAdd, 8>)
VMX_BINDER(bindHsubps, bindPairwise<&hostHsubps, Pairing::HSub, 4>)
VMX_BINDER(bindHsubpd, bindPairwise<&hostHsubpd, Pairing::HSub, 8>)
VMX_BINDER(bindMovsldup, bindPacked<&opMovDup32<false>>)
VMX_BINDER(bindMovshdup, bindPacked<&opMovDup32<true>>)
#undef VMX_BINDER

bool bindMovddup(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Ops[1].Kind != OperandKind::Mem)
    return bindPacked<&opMovddup>(D, I);
  if (D.Ops[0].Kind != OperandKind::Reg || D.Ops[0].Class != RegClass::Xmm)
    return false;
  copyOperandRegs(D, I);
  I.Fn = &execMovddupMem;
  I.Cost = costOf(CostClass::Sse);
  return true;
}

/// LDDQU exists only with a memory source, which has no alignment rule (SDM Vol. 2A,
/// LDDQU); its result is that of MOVDQU.
bool bindLddqu(const DecodeInfo &D, DecodedInsn &I) {
  return D.Ops[1].Kind == OperandKind::Mem && bindMovUnaligned(D, I);
}

} // namespace vmxsim
