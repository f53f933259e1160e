// SSE/SSE2 floating-point arithmetic, compares and conversions: ADD/SUB/MUL/DIV/SQRT/MIN/
// MAX in their SS/SD/PS/PD forms, CMPSS/CMPSD/CMPPS/CMPPD, COMISS/COMISD/UCOMISS/UCOMISD,
// and the CVT family between single, double and 32/64-bit integers (SDM Vol. 2, the
// instruction page of each).
//
// How results are computed: each handler runs the very same instruction on the host's SSE
// unit, with the guest's rounding control, FTZ and DAZ loaded into the host MXCSR and all
// exceptions masked, then reads the host's exception flags back and restores the host
// MXCSR. IEEE 754 basic operations, conversions and compares are fully specified, so any
// x86-64 host gives the bits an Intel processor gives; the guest's unmasked exceptions are
// then applied by reportFp from the masked flags. Two things the masked run cannot show
// are derived separately: exact tiny results (underflow when unmasked, tinyExactResult)
// and, for an unmasked overflow or underflow, the per-element precision flag of the
// unbounded-exponent result (unmaskedPostFlags, a rare path). RCPSS/RCPPS/RSQRTSS/RSQRTPS are
// approximations whose bits differ between implementations (Intel and AMD disagree): the
// host's would make a run depend on the machine, so they are computed in software
// (cpu/sse_approx.h), the same on every host.
//
// On a host that is not x86-64 every handler here returns Status::Unimplemented after the
// availability checks.
#include "cpu/binders.h"
#include "cpu/exec_sse_fp.h"
#include "cpu/sse_approx.h"

namespace vmxsim {

using namespace sse;

namespace {

#if defined(__x86_64__)
/// xmm <- convert(r32/r64); %z picks the l/q suffix from the integer's size.
#define VMX_FP_FROM_INT(Name, Insn)                                                       \
  template <typename T> uint32_t Name(Xmm &A, T G, uint32_t Csr) {                        \
    V128 X = toV(A);                                                                      \
    uint32_t Save, Out;                                                                   \
    asm volatile(VMX_FP_ENTER Insn "%z[g] %[g], %[x]" VMX_FP_LEAVE                        \
                 : [x] "+x"(X), VMX_FP_CSR_OUT                                            \
                 : [g] "r"(G), [csr] "m"(Csr));                                           \
    A = fromV(X);                                                                         \
    return Out;                                                                           \
  }
/// r32/r64 <- convert(xmm).
#define VMX_FP_TO_INT(Name, Insn)                                                         \
  template <typename T> uint32_t Name(T &G, const Xmm &B, uint32_t Csr) {                 \
    V128 Y = toV(B);                                                                      \
    uint32_t Save, Out;                                                                   \
    asm volatile(VMX_FP_ENTER Insn " %[y], %[g]" VMX_FP_LEAVE                             \
                 : [g] "=r"(G), VMX_FP_CSR_OUT                                            \
                 : [y] "x"(Y), [csr] "m"(Csr));                                           \
    return Out;                                                                           \
  }
/// EFLAGS <- compare(xmm, xmm): the ZF, PF and CF the host produced.
#define VMX_FP_COMI(Name, Insn)                                                           \
  uint32_t Name(const Xmm &A, const Xmm &B, uint32_t Csr, uint64_t &Bits) {               \
    V128 X = toV(A), Y = toV(B);                                                          \
    uint32_t Save, Out;                                                                   \
    bool Z, P, Cf;                                                                        \
    asm volatile(VMX_FP_ENTER Insn " %[y], %[x]" VMX_FP_LEAVE                             \
                 : "=@ccz"(Z), "=@ccp"(P), "=@ccc"(Cf), VMX_FP_CSR_OUT                    \
                 : [x] "x"(X), [y] "x"(Y), [csr] "m"(Csr));                               \
    Bits = (Z ? rflags::ZF : 0) | (P ? rflags::PF : 0) | (Cf ? rflags::CF : 0);           \
    return Out;                                                                           \
  }
#else
#define VMX_FP_FROM_INT(Name, Insn)                                                       \
  template <typename T> uint32_t Name(Xmm &, T, uint32_t) { return 0; }
#define VMX_FP_TO_INT(Name, Insn)                                                         \
  template <typename T> uint32_t Name(T &G, const Xmm &, uint32_t) {                      \
    G = 0;                                                                                \
    return 0;                                                                             \
  }
#define VMX_FP_COMI(Name, Insn)                                                           \
  uint32_t Name(const Xmm &, const Xmm &, uint32_t, uint64_t &Bits) {                     \
    Bits = 0;                                                                             \
    return 0;                                                                             \
  }
#endif

// Arithmetic (SDM Vol. 2: ADDPS ... SQRTSD, MINPS ... MAXSD).
VMX_FP_XX(hostAddss, "addss")
VMX_FP_XX(hostAddsd, "addsd")
VMX_FP_XX(hostAddps, "addps")
VMX_FP_XX(hostAddpd, "addpd")
VMX_FP_XX(hostSubss, "subss")
VMX_FP_XX(hostSubsd, "subsd")
VMX_FP_XX(hostSubps, "subps")
VMX_FP_XX(hostSubpd, "subpd")
VMX_FP_XX(hostMulss, "mulss")
VMX_FP_XX(hostMulsd, "mulsd")
VMX_FP_XX(hostMulps, "mulps")
VMX_FP_XX(hostMulpd, "mulpd")
VMX_FP_XX(hostDivss, "divss")
VMX_FP_XX(hostDivsd, "divsd")
VMX_FP_XX(hostDivps, "divps")
VMX_FP_XX(hostDivpd, "divpd")
VMX_FP_XX(hostSqrtss, "sqrtss")
VMX_FP_XX(hostSqrtsd, "sqrtsd")
VMX_FP_XX(hostSqrtps, "sqrtps")
VMX_FP_XX(hostSqrtpd, "sqrtpd")
VMX_FP_XX(hostMinss, "minss")
VMX_FP_XX(hostMinsd, "minsd")
VMX_FP_XX(hostMinps, "minps")
VMX_FP_XX(hostMinpd, "minpd")
VMX_FP_XX(hostMaxss, "maxss")
VMX_FP_XX(hostMaxsd, "maxsd")
VMX_FP_XX(hostMaxps, "maxps")
VMX_FP_XX(hostMaxpd, "maxpd")
// Compares (CMPPS, CMPPD, CMPSS, CMPSD; COMISS, COMISD, UCOMISS, UCOMISD).
VMX_FP_CMP(hostCmpss, "cmpss")
VMX_FP_CMP(hostCmpsd, "cmpsd")
VMX_FP_CMP(hostCmpps, "cmpps")
VMX_FP_CMP(hostCmppd, "cmppd")
VMX_FP_COMI(hostComiss, "comiss")
VMX_FP_COMI(hostComisd, "comisd")
VMX_FP_COMI(hostUcomiss, "ucomiss")
VMX_FP_COMI(hostUcomisd, "ucomisd")
// Conversions between floating-point formats and packed doublewords.
VMX_FP_XX(hostCvtss2sd, "cvtss2sd")
VMX_FP_XX(hostCvtsd2ss, "cvtsd2ss")
VMX_FP_XX(hostCvtps2pd, "cvtps2pd")
VMX_FP_XX(hostCvtpd2ps, "cvtpd2ps")
VMX_FP_XX(hostCvtdq2ps, "cvtdq2ps")
VMX_FP_XX(hostCvtps2dq, "cvtps2dq")
VMX_FP_XX(hostCvttps2dq, "cvttps2dq")
VMX_FP_XX(hostCvtdq2pd, "cvtdq2pd")
VMX_FP_XX(hostCvtpd2dq, "cvtpd2dq")
VMX_FP_XX(hostCvttpd2dq, "cvttpd2dq")
// Conversions to and from general-purpose registers.
VMX_FP_FROM_INT(hostCvtsi2ss, "cvtsi2ss")
VMX_FP_FROM_INT(hostCvtsi2sd, "cvtsi2sd")
VMX_FP_TO_INT(hostCvtss2si, "cvtss2si")
VMX_FP_TO_INT(hostCvttss2si, "cvttss2si")
VMX_FP_TO_INT(hostCvtsd2si, "cvtsd2si")
VMX_FP_TO_INT(hostCvttsd2si, "cvttsd2si")

#undef VMX_FP_XX
#undef VMX_FP_CMP
#undef VMX_FP_FROM_INT
#undef VMX_FP_TO_INT
#undef VMX_FP_COMI

using XmmFn = uint32_t (*)(Xmm &, const Xmm &, uint32_t);
using ComiFn = uint32_t (*)(const Xmm &, const Xmm &, uint32_t, uint64_t &);

// --- exceptions -------------------------------------------------------------------------

/// What an instruction computes that can overflow or underflow: the lane width of its
/// source elements, how many result lanes it computes, and the operation, which the
/// unmasked-exception path re-evaluates with an unbounded exponent. Narrow is a
/// double-to-single conversion (its result lanes are 4 bytes wide).
struct Post {
  uint8_t SrcBytes = 0;
  uint8_t Lanes = 0;
  WideOp Op = WideOp::None;
  constexpr unsigned resultBytes() const { return Op == WideOp::Narrow ? 4 : SrcBytes; }
};
inline constexpr Post kNoPost{};

/// Lane K of X as a bit pattern of Bytes (4 or 8) bytes.
inline uint64_t laneBits(const Xmm &X, unsigned Bytes, unsigned K) {
  if (Bytes == 8)
    return K ? X.Hi : X.Lo;
  const uint64_t Q = K >= 2 ? X.Hi : X.Lo;
  return uint32_t(Q >> (32 * (K & 1)));
}
inline bool isDenormal(uint64_t Bits, unsigned Bytes) {
  return Bytes == 8 ? !(Bits & 0x7ff0000000000000ull) && (Bits & 0x000fffffffffffffull)
                    : !(Bits & 0x7f800000u) && (Bits & 0x007fffffu);
}

/// True when a computed lane is a nonzero denormal. With underflow unmasked, "the
/// underflow exception is signaled whenever the result is tiny, regardless of inexactness"
/// (SDM Vol. 1, Numeric Underflow Exception (#U)); the masked host run only flags tiny
/// results that are also inexact, so an exact denormal result is detected here.
template <Post P> bool tinyExactResult(const Xmm &R, unsigned First = 0, unsigned Count = P.Lanes) {
  for (unsigned K = First; K < First + Count; ++K)
    if (isDenormal(laneBits(R, P.resultBytes(), K), P.resultBytes()))
      return true;
  return false;
}

/// The value of a source lane as a double (exact for both widths), with DAZ applied.
inline double laneValue(uint64_t Bits, unsigned Bytes, bool Daz) {
  if (Daz && isDenormal(Bits, Bytes))
    Bits &= Bytes == 8 ? 1ull << 63 : 1u << 31;
  if (Bytes == 8) {
    double D;
    std::memcpy(&D, &Bits, 8);
    return D;
  }
  float F;
  const uint32_t W = uint32_t(Bits);
  std::memcpy(&F, &W, 4);
  return F;
}

/// Whether rounding the exact result of Op(A, B) to Bits significant bits with an
/// unbounded exponent is inexact: the precision exception an unmasked overflow or
/// underflow reports (SDM Vol. 1, Numeric Overflow Exception (#O) and Numeric Underflow
/// Exception (#U): the unmasked response rounds to the destination precision with an
/// adjusted exponent). The host's x87 unit computes the result with a 64-bit significand
/// and an exponent range wide enough for any single or double operation: if that is
/// inexact so is the narrower rounding, otherwise the significant bits are counted.
bool inexactUnbounded(WideOp Op, double A, double B, unsigned Bits) {
  long double R = A;
  uint16_t Sw = 0;
#if defined(__x86_64__)
  const uint16_t Cw = 0x37f; // all masked, 64-bit precision, round to nearest
  uint16_t SavedCw;
  switch (Op) {
#define VMX_X87(Insn)                                                                       asm volatile("fnstcw %[saved]\n\tfldcw %[cw]\n\tfnclex\n\t"                                         "fldl %[b]\n\tfldl %[a]\n\t" Insn "\n\t"                                                "fstpt %[r]\n\tfstp %%st(0)\n\tfnstsw %[sw]\n\tfldcw %[saved]"                         : [r] "=m"(R), [sw] "=m"(Sw), [saved] "=m"(SavedCw)                                         : [a] "m"(A), [b] "m"(B), [cw] "m"(Cw)                                                    : "st", "st(1)")
  // With st(0) = A and st(1) = B, "op %st(1), %st" computes st(0) <- A op B.
  case WideOp::Add: VMX_X87("fadd %%st(1), %%st"); break;
  case WideOp::Sub: VMX_X87("fsub %%st(1), %%st"); break;
  case WideOp::Mul: VMX_X87("fmul %%st(1), %%st"); break;
  case WideOp::Div: VMX_X87("fdiv %%st(1), %%st"); break;
  default: break;
#undef VMX_X87
  }
#else
  (void)Op;
  (void)B;
#endif
  if (Sw & 0x20)
    return true;
  uint64_t Significand;
  std::memcpy(&Significand, &R, 8); // explicit 64-bit significand of the 80-bit format
  return Significand && unsigned(64 - __builtin_ctzll(Significand)) > Bits;
}

/// The flags of an instruction whose masked run raised an unmasked overflow or
/// underflow (and no unmasked pre-computation exception): each computed lane is re-run
/// alone (the other lanes hold 1.0, which raises nothing), and a lane whose overflow or
/// underflow is unmasked reports the precision exception of its unbounded-exponent
/// result instead of that of the masked response.
template <XmmFn Op, Post P>
uint32_t unmaskedPostFlags(const Xmm &A, const Xmm &B, uint32_t Guest) {
  const uint32_t Unmasked = ~(Guest >> mxcsr::MaskShift) & mxcsr::Flags;
  const bool Daz = Guest & mxcsr::DAZ;
  const unsigned SrcLanes = P.Lanes; // one source lane per computed result lane
  uint32_t Raised = 0;
  for (unsigned K = 0; K < SrcLanes; ++K) {
    Xmm A1 = A, B1 = B;
    if (P.Lanes > 1) { // packed: isolate lane K
      const uint64_t One = P.SrcBytes == 8 ? 0x3ff0000000000000ull : 0x3f8000003f800000ull;
      A1 = B1 = Xmm{One, One};
      const uint64_t Mask = P.SrcBytes == 8 ? ~0ull : 0xffffffffull << (32 * (K & 1));
      const unsigned Half = P.SrcBytes == 8 ? K : K / 2;
      uint64_t &AQ = Half ? A1.Hi : A1.Lo, &BQ = Half ? B1.Hi : B1.Lo;
      AQ = (AQ & ~Mask) | ((Half ? A.Hi : A.Lo) & Mask);
      BQ = (BQ & ~Mask) | ((Half ? B.Hi : B.Lo) & Mask);
    }
    Xmm R = A1;
    uint32_t F = Op(R, B1, hostCsr(Guest)) & mxcsr::Flags;
    if ((Unmasked & mxcsr::UE) && tinyExactResult<P>(R, K, 1))
      F |= mxcsr::UE;
    if (F & Unmasked & (mxcsr::OE | mxcsr::UE)) {
      const double X = laneValue(laneBits(A, P.SrcBytes, K), P.SrcBytes, Daz);
      const double Y = laneValue(laneBits(B, P.SrcBytes, K), P.SrcBytes, Daz);
      const unsigned Bits = P.resultBytes() == 8 ? 53 : 24;
      const bool Inexact = P.Op == WideOp::Narrow ? inexactUnbounded(WideOp::None, Y, Y, Bits)
                                                  : inexactUnbounded(P.Op, X, Y, Bits);
      F = (F & ~mxcsr::PE) | (Inexact ? mxcsr::PE : 0);
    }
    Raised |= F;
  }
  return Raised;
}

/// Records the exceptions an instruction raised and decides whether it completes (SDM
/// Vol. 1, Generating SIMD Floating-Point Exceptions > Handling Masked Exceptions,
/// Handling Unmasked Exceptions, Handling Combinations of Masked and Unmasked
/// Exceptions). Invalid, denormal and divide-by-zero are pre-computation exceptions: when
/// one of them is unmasked the processor sets the pre-computation flags of all elements
/// and stops before computing, so no post-computation flag is set. Otherwise all flags
/// are set. In both unmasked cases "the source and destination operands" are left
/// unaltered and the processor raises #XM if CR4.OSXMMEXCPT = 1, else #UD (SDM Vol. 3A,
/// Interrupt 19—SIMD Floating-Point Exception (#XM)). Returns Ok when the caller may
/// write its destination.
} // namespace

Status sse::reportFp(Cpu &C, uint32_t Raised) {
  constexpr uint32_t Pre = mxcsr::IE | mxcsr::DE | mxcsr::ZE;
  uint32_t Unmasked = Raised & ~(C.S.Mxcsr >> mxcsr::MaskShift) & mxcsr::Flags;
  if (!Unmasked) [[likely]] {
    C.S.Mxcsr |= Raised;
    return Status::Ok;
  }
  if (Unmasked & Pre)
    Raised &= Pre;
  C.S.Mxcsr |= Raised;
  return (C.S.Cr4 & cr4::OSXMMEXCPT) ? C.raise(vec::XM) : C.raiseUd();
}

uint32_t sse::scalarLaneFlags(WideOp Op, uint64_t X, uint64_t Y, unsigned Bytes,
                              uint32_t Guest) {
  const bool Single = Bytes == 4;
  const uint32_t Unmasked = ~(Guest >> mxcsr::MaskShift) & mxcsr::Flags;
  Xmm R{X, 0};
  const Xmm B{Y, 0};
  const uint32_t Csr = hostCsr(Guest);
  uint32_t F;
  switch (Op) {
  case WideOp::Sub: F = Single ? hostSubss(R, B, Csr) : hostSubsd(R, B, Csr); break;
  case WideOp::Mul: F = Single ? hostMulss(R, B, Csr) : hostMulsd(R, B, Csr); break;
  default: F = Single ? hostAddss(R, B, Csr) : hostAddsd(R, B, Csr); break;
  }
  F &= mxcsr::Flags;
  if ((Unmasked & mxcsr::UE) && isDenormal(Single ? uint32_t(R.Lo) : R.Lo, Bytes))
    F |= mxcsr::UE;
  if (F & Unmasked & (mxcsr::OE | mxcsr::UE)) {
    const bool Daz = Guest & mxcsr::DAZ;
    const bool Inexact = inexactUnbounded(Op, laneValue(X, Bytes, Daz),
                                          laneValue(Y, Bytes, Daz), Single ? 24 : 53);
    F = (F & ~mxcsr::PE) | (Inexact ? mxcsr::PE : 0);
  }
  return F;
}

namespace {

// --- operands and handlers --------------------------------------------------------------

/// xmm1 <- Op(xmm1, xmm2/m): arithmetic, CMPxx and the XMM-to-XMM conversions.
template <XmmFn Op, Src S, Post P> Status execFp(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  if constexpr (!kHostFp)
    return C.unimplemented(kNoHostFp);
  Xmm B;
  VMX_TRY(loadSource<S>(C, I, B));
  const Xmm A = C.S.XmmReg[I.Reg[0]];
  Xmm R = A;
  const uint32_t Guest = C.S.Mxcsr;
  uint32_t Raised = Op(R, B, hostCsr(Guest)) & mxcsr::Flags;
  if constexpr (P.Op != WideOp::None) {
    if (!(Guest & mxcsr::UM) && tinyExactResult<P>(R))
      Raised |= mxcsr::UE;
    // Rare path: an unmasked overflow or underflow with no unmasked pre-computation
    // exception needs per-element flags (see unmaskedPostFlags).
    const uint32_t Unmasked = Raised & ~(Guest >> mxcsr::MaskShift);
    constexpr uint32_t Pre = mxcsr::IE | mxcsr::DE | mxcsr::ZE;
    if ((Unmasked & (mxcsr::OE | mxcsr::UE)) && !(Unmasked & Pre)) [[unlikely]]
      Raised = unmaskedPostFlags<Op, P>(A, B, Guest);
  }
  VMX_TRY(reportFp(C, Raised));
  C.S.XmmReg[I.Reg[0]] = R;
  return next(C, I);
}

/// COMISS/COMISD/UCOMISS/UCOMISD: ZF, PF, CF from the compare; OF, SF, AF cleared.
template <ComiFn Op, Src S> Status execComi(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  if constexpr (!kHostFp)
    return C.unimplemented(kNoHostFp);
  Xmm B;
  VMX_TRY(loadSource<S>(C, I, B));
  uint64_t Bits;
  VMX_TRY(reportFp(C, Op(C.S.XmmReg[I.Reg[0]], B, hostCsr(C.S.Mxcsr), Bits) & mxcsr::Flags));
  setArithFlags(C, Bits);
  return next(C, I);
}

/// CVTSI2SS/CVTSI2SD xmm, r/m32 or r/m64: the upper lanes of xmm are kept.
template <typename T, uint32_t (*Op)(Xmm &, T, uint32_t), bool FromMem>
Status execCvtFromInt(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  if constexpr (!kHostFp)
    return C.unimplemented(kNoHostFp);
  T V;
  if constexpr (FromMem)
    VMX_TRY(loadOperand(C, I, V));
  else
    V = getReg<T>(C, I.Reg[1]);
  Xmm R = C.S.XmmReg[I.Reg[0]];
  VMX_TRY(reportFp(C, Op(R, V, hostCsr(C.S.Mxcsr)) & mxcsr::Flags));
  C.S.XmmReg[I.Reg[0]] = R;
  return next(C, I);
}

/// CVT(T)SS2SI/CVT(T)SD2SI r32/r64, xmm/m: out-of-range and NaN sources give the integer
/// indefinite value with IE, and nothing is written when IE is unmasked.
template <typename T, uint32_t (*Op)(T &, const Xmm &, uint32_t), Src S>
Status execCvtToInt(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  if constexpr (!kHostFp)
    return C.unimplemented(kNoHostFp);
  Xmm B;
  VMX_TRY(loadSource<S>(C, I, B));
  T V;
  VMX_TRY(reportFp(C, Op(V, B, hostCsr(C.S.Mxcsr)) & mxcsr::Flags));
  setReg<T>(C, I.Reg[0], V);
  return next(C, I);
}

/// RCPSS/RCPPS/RSQRTSS/RSQRTPS (cpu/sse_approx.h): Lanes single-precision elements of
/// the source, each through Fn, into the destination; the other lanes are unchanged. No
/// exception is raised and MXCSR is neither read nor written (SDM Vol. 2B, RCPPS: "SIMD
/// Floating-Point Exceptions: None").
template <uint32_t (*Fn)(uint32_t), unsigned Lanes, Src S>
Status execApprox(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  Xmm B;
  VMX_TRY(loadSource<S>(C, I, B));
  Xmm &D = C.S.XmmReg[I.Reg[0]];
  uint64_t *Dst[2] = {&D.Lo, &D.Hi};
  const uint64_t SrcW[2] = {B.Lo, B.Hi};
  for (unsigned K = 0; K < Lanes; ++K) {
    const unsigned Shift = 32 * (K & 1);
    const uint32_t R = Fn(uint32_t(SrcW[K / 2] >> Shift));
    *Dst[K / 2] = (*Dst[K / 2] & ~(0xffffffffull << Shift)) | (uint64_t(R) << Shift);
  }
  return next(C, I);
}

// --- binders ----------------------------------------------------------------------------


/// xmm, xmm/m forms; MemSrc is the memory operand's size (and alignment rule).
template <XmmFn Op, Src MemSrc, Post T = kNoPost>
bool bindFp(const DecodeInfo &D, DecodedInsn &I) {
  if (!isXmm(D.Ops[0]))
    return false;
  if (isXmm(D.Ops[1]))
    return bindSimd(D, I, &execFp<Op, Src::Xmm, T>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execFp<Op, MemSrc, T>);
  return false;
}

/// CMPxx xmm, xmm/m, imm8: one handler per predicate. Legacy-SSE encodings use imm8[2:0]
/// (SDM Vol. 2A, CMPPS: "bits 7:3 of the immediate are reserved" for the 128-bit legacy
/// SSE version).
template <Src MemSrc, XmmFn... Fns> bool bindCmp(const DecodeInfo &D, DecodedInsn &I) {
  static_assert(sizeof...(Fns) == 8);
  static constexpr Handler RegForms[] = {&execFp<Fns, Src::Xmm, kNoPost>...};
  static constexpr Handler MemForms[] = {&execFp<Fns, MemSrc, kNoPost>...};
  if (!isXmm(D.Ops[0]))
    return false;
  const unsigned P = D.ImmRaw & 7;
  if (isXmm(D.Ops[1]))
    return bindSimd(D, I, RegForms[P]);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, MemForms[P]);
  return false;
}
#define VMX_PREDICATES(Fn) Fn<0>, Fn<1>, Fn<2>, Fn<3>, Fn<4>, Fn<5>, Fn<6>, Fn<7>

template <ComiFn Op, Src MemSrc> bool bindComi(const DecodeInfo &D, DecodedInsn &I) {
  if (!isXmm(D.Ops[0]))
    return false;
  if (isXmm(D.Ops[1]))
    return bindSimd(D, I, &execComi<Op, Src::Xmm>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execComi<Op, MemSrc>);
  return false;
}

/// CVTSI2SS/CVTSI2SD: the integer's width is the r/m operand size (REX.W selects 64).
template <uint32_t (*Op32)(Xmm &, int32_t, uint32_t), uint32_t (*Op64)(Xmm &, int64_t, uint32_t)>
bool bindCvtFromInt(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &S = D.Ops[1];
  if (!isXmm(D.Ops[0]) || !(isGpr(S) || isMem(S)))
    return false;
  const bool Wide = S.SizeBytes == 8;
  if (isMem(S))
    return bindSimd(D, I, Wide ? &execCvtFromInt<int64_t, Op64, true> : &execCvtFromInt<int32_t, Op32, true>);
  return bindSimd(D, I, Wide ? &execCvtFromInt<int64_t, Op64, false> : &execCvtFromInt<int32_t, Op32, false>);
}

/// CVT(T)SS2SI/CVT(T)SD2SI: the destination GPR's width selects the integer size.
template <uint32_t (*Op32)(int32_t &, const Xmm &, uint32_t),
          uint32_t (*Op64)(int64_t &, const Xmm &, uint32_t), Src MemSrc>
bool bindCvtToInt(const DecodeInfo &D, DecodedInsn &I) {
  if (!isGpr(D.Ops[0]))
    return false;
  const bool Wide = D.Ops[0].SizeBytes == 8;
  if (isXmm(D.Ops[1]))
    return bindSimd(D, I, Wide ? &execCvtToInt<int64_t, Op64, Src::Xmm> : &execCvtToInt<int32_t, Op32, Src::Xmm>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, Wide ? &execCvtToInt<int64_t, Op64, MemSrc> : &execCvtToInt<int32_t, Op32, MemSrc>);
  return false;
}

} // namespace

// One binder per mnemonic row of cpu/insns_sse_fp.def.
#define VMX_BINDER(Name, ...)                                                             \
  bool Name(const DecodeInfo &D, DecodedInsn &I) { return __VA_ARGS__(D, I); }
VMX_BINDER(bindAddss, bindFp<&hostAddss, Src::M32, Post{4, 1, WideOp::Add}>)
VMX_BINDER(bindAddsd, bindFp<&hostAddsd, Src::M64, Post{8, 1, WideOp::Add}>)
VMX_BINDER(bindAddps, bindFp<&hostAddps, Src::M128, Post{4, 4, WideOp::Add}>)
VMX_BINDER(bindAddpd, bindFp<&hostAddpd, Src::M128, Post{8, 2, WideOp::Add}>)
VMX_BINDER(bindSubss, bindFp<&hostSubss, Src::M32, Post{4, 1, WideOp::Sub}>)
VMX_BINDER(bindSubsd, bindFp<&hostSubsd, Src::M64, Post{8, 1, WideOp::Sub}>)
VMX_BINDER(bindSubps, bindFp<&hostSubps, Src::M128, Post{4, 4, WideOp::Sub}>)
VMX_BINDER(bindSubpd, bindFp<&hostSubpd, Src::M128, Post{8, 2, WideOp::Sub}>)
VMX_BINDER(bindMulss, bindFp<&hostMulss, Src::M32, Post{4, 1, WideOp::Mul}>)
VMX_BINDER(bindMulsd, bindFp<&hostMulsd, Src::M64, Post{8, 1, WideOp::Mul}>)
VMX_BINDER(bindMulps, bindFp<&hostMulps, Src::M128, Post{4, 4, WideOp::Mul}>)
VMX_BINDER(bindMulpd, bindFp<&hostMulpd, Src::M128, Post{8, 2, WideOp::Mul}>)
VMX_BINDER(bindDivss, bindFp<&hostDivss, Src::M32, Post{4, 1, WideOp::Div}>)
VMX_BINDER(bindDivsd, bindFp<&hostDivsd, Src::M64, Post{8, 1, WideOp::Div}>)
VMX_BINDER(bindDivps, bindFp<&hostDivps, Src::M128, Post{4, 4, WideOp::Div}>)
VMX_BINDER(bindDivpd, bindFp<&hostDivpd, Src::M128, Post{8, 2, WideOp::Div}>)
// Square roots of finite values are never tiny; MIN/MAX only select an operand.
VMX_BINDER(bindSqrtss, bindFp<&hostSqrtss, Src::M32>)
VMX_BINDER(bindSqrtsd, bindFp<&hostSqrtsd, Src::M64>)
VMX_BINDER(bindSqrtps, bindFp<&hostSqrtps, Src::M128>)
VMX_BINDER(bindSqrtpd, bindFp<&hostSqrtpd, Src::M128>)
VMX_BINDER(bindMinss, bindFp<&hostMinss, Src::M32>)
VMX_BINDER(bindMinsd, bindFp<&hostMinsd, Src::M64>)
VMX_BINDER(bindMinps, bindFp<&hostMinps, Src::M128>)
VMX_BINDER(bindMinpd, bindFp<&hostMinpd, Src::M128>)
VMX_BINDER(bindMaxss, bindFp<&hostMaxss, Src::M32>)
VMX_BINDER(bindMaxsd, bindFp<&hostMaxsd, Src::M64>)
VMX_BINDER(bindMaxps, bindFp<&hostMaxps, Src::M128>)
VMX_BINDER(bindMaxpd, bindFp<&hostMaxpd, Src::M128>)
VMX_BINDER(bindCmpss, bindCmp<Src::M32, VMX_PREDICATES(&hostCmpss)>)
VMX_BINDER(bindCmpsdXmm, bindCmp<Src::M64, VMX_PREDICATES(&hostCmpsd)>)
VMX_BINDER(bindCmpps, bindCmp<Src::M128, VMX_PREDICATES(&hostCmpps)>)
VMX_BINDER(bindCmppd, bindCmp<Src::M128, VMX_PREDICATES(&hostCmppd)>)
VMX_BINDER(bindComiss, bindComi<&hostComiss, Src::M32>)
VMX_BINDER(bindComisd, bindComi<&hostComisd, Src::M64>)
VMX_BINDER(bindUcomiss, bindComi<&hostUcomiss, Src::M32>)
VMX_BINDER(bindUcomisd, bindComi<&hostUcomisd, Src::M64>)
// Conversions. CVTPS2PD and CVTDQ2PD read an m64 (Exceptions Type 3, no alignment rule);
// the other packed conversions read an aligned m128. Only narrowing to single precision
// can underflow.
VMX_BINDER(bindCvtss2sd, bindFp<&hostCvtss2sd, Src::M32>)
VMX_BINDER(bindCvtsd2ss, bindFp<&hostCvtsd2ss, Src::M64, Post{8, 1, WideOp::Narrow}>)
VMX_BINDER(bindCvtps2pd, bindFp<&hostCvtps2pd, Src::M64>)
VMX_BINDER(bindCvtpd2ps, bindFp<&hostCvtpd2ps, Src::M128, Post{8, 2, WideOp::Narrow}>)
VMX_BINDER(bindCvtdq2ps, bindFp<&hostCvtdq2ps, Src::M128>)
VMX_BINDER(bindCvtps2dq, bindFp<&hostCvtps2dq, Src::M128>)
VMX_BINDER(bindCvttps2dq, bindFp<&hostCvttps2dq, Src::M128>)
VMX_BINDER(bindCvtdq2pd, bindFp<&hostCvtdq2pd, Src::M64>)
VMX_BINDER(bindCvtpd2dq, bindFp<&hostCvtpd2dq, Src::M128>)
VMX_BINDER(bindCvttpd2dq, bindFp<&hostCvttpd2dq, Src::M128>)
VMX_BINDER(bindCvtsi2ss, bindCvtFromInt<&hostCvtsi2ss<int32_t>, &hostCvtsi2ss<int64_t>>)
VMX_BINDER(bindCvtsi2sd, bindCvtFromInt<&hostCvtsi2sd<int32_t>, &hostCvtsi2sd<int64_t>>)
VMX_BINDER(bindCvtss2si,
           bindCvtToInt<&hostCvtss2si<int32_t>, &hostCvtss2si<int64_t>, Src::M32>)
VMX_BINDER(bindCvttss2si,
           bindCvtToInt<&hostCvttss2si<int32_t>, &hostCvttss2si<int64_t>, Src::M32>)
VMX_BINDER(bindCvtsd2si,
           bindCvtToInt<&hostCvtsd2si<int32_t>, &hostCvtsd2si<int64_t>, Src::M64>)
VMX_BINDER(bindCvttsd2si,
           bindCvtToInt<&hostCvttsd2si<int32_t>, &hostCvttsd2si<int64_t>, Src::M64>)
#undef VMX_BINDER
#undef VMX_PREDICATES

// --- conversions with an MM register ---------------------------------------------------
//
// CVTPI2PS, CVTPS2PI, CVTTPS2PI, CVTPI2PD, CVTPD2PI and CVTTPD2PI convert two elements as
// their all-XMM counterparts CVTDQ2PS, CVTPS2DQ, CVTTPS2DQ, CVTDQ2PD, CVTPD2DQ, CVTTPD2DQ
// do; the host runs those on the two elements with zero lanes beside them, which convert
// exactly and raise nothing. They take the SSE checks, then the pending x87 exception
// (#MF), and switch the x87 unit to MMX state (TOP = 0, all tags valid) -- except
// CVTPI2PD with a memory source, which neither takes x87 exceptions nor makes the
// transition (SDM Vol. 2A, CVTPI2PS, CVTPI2PD, ...: "This instruction causes a transition
// from x87 FPU to MMX technology operation"; SDM Vol. 3B, Exception Conditions for Legacy
// SIMD/MMX Instructions with XMM and FP Exception).

namespace {

/// xmm <- convert(mm/m64): CVTPI2PS keeps the destination's high quadword, CVTPI2PD
/// (Wide) writes the whole register.
template <XmmFn Op, bool Wide, bool FromMm> Status execCvtFromMm(Cpu &C, const DecodedInsn &I) {
  constexpr bool Transition = FromMm || !Wide;
  if constexpr (Transition)
    VMX_TRY(mmx::checkSseAvailable(C));
  else
    VMX_TRY(checkAvailable(C));
  if constexpr (!kHostFp)
    return C.unimplemented(kNoHostFp);
  uint64_t V;
  if constexpr (FromMm)
    V = mmx::read(C.S, I.Reg[1]);
  else
    VMX_TRY(loadOperand(C, I, V));
  Xmm R{0, 0};
  VMX_TRY(reportFp(C, Op(R, Xmm{V, 0}, hostCsr(C.S.Mxcsr)) & mxcsr::Flags));
  Xmm &D = C.S.XmmReg[I.Reg[0]];
  D = Wide ? R : Xmm{R.Lo, D.Hi};
  if constexpr (Transition)
    mmx::enter(C.S);
  return next(C, I);
}

/// mm <- convert(xmm/m): two singles (Singles; the low quadword or an m64) or two doubles
/// (the register or an aligned m128).
template <XmmFn Op, Src S, bool Singles> Status execCvtToMm(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkSseAvailable(C));
  if constexpr (!kHostFp)
    return C.unimplemented(kNoHostFp);
  Xmm B;
  VMX_TRY(loadSource<S>(C, I, B));
  if constexpr (Singles)
    B.Hi = 0;
  Xmm R{0, 0};
  VMX_TRY(reportFp(C, Op(R, B, hostCsr(C.S.Mxcsr)) & mxcsr::Flags));
  mmx::enter(C.S);
  mmx::write(C.S, I.Reg[0], R.Lo);
  return next(C, I);
}


template <XmmFn Op, bool Wide> bool bindCvtFromMm(const DecodeInfo &D, DecodedInsn &I) {
  if (!isXmm(D.Ops[0]))
    return false;
  if (isMm(D.Ops[1]))
    return bindSimd(D, I, &execCvtFromMm<Op, Wide, true>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execCvtFromMm<Op, Wide, false>);
  return false;
}
template <XmmFn Op, Src MemSrc> bool bindCvtToMm(const DecodeInfo &D, DecodedInsn &I) {
  constexpr bool Singles = MemSrc == Src::M64;
  if (!isMm(D.Ops[0]))
    return false;
  if (isXmm(D.Ops[1]))
    return bindSimd(D, I, &execCvtToMm<Op, Src::Xmm, Singles>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execCvtToMm<Op, MemSrc, Singles>);
  return false;
}

} // namespace

bool bindCvtpi2ps(const DecodeInfo &D, DecodedInsn &I) {
  return bindCvtFromMm<&hostCvtdq2ps, false>(D, I);
}
bool bindCvtpi2pd(const DecodeInfo &D, DecodedInsn &I) {
  return bindCvtFromMm<&hostCvtdq2pd, true>(D, I);
}
bool bindCvtps2pi(const DecodeInfo &D, DecodedInsn &I) {
  return bindCvtToMm<&hostCvtps2dq, Src::M64>(D, I);
}
bool bindCvttps2pi(const DecodeInfo &D, DecodedInsn &I) {
  return bindCvtToMm<&hostCvttps2dq, Src::M64>(D, I);
}
bool bindCvtpd2pi(const DecodeInfo &D, DecodedInsn &I) {
  return bindCvtToMm<&hostCvtpd2dq, Src::M128>(D, I);
}
bool bindCvttpd2pi(const DecodeInfo &D, DecodedInsn &I) {
  return bindCvtToMm<&hostCvttpd2dq, Src::M128>(D, I);
}

/// xmm, xmm/m32 (scalar: one lane, unaligned) or xmm, xmm/m128 (packed: four lanes, the
/// m128 aligned, Exceptions Type 4).
template <uint32_t (*Fn)(uint32_t), bool Packed>
bool bindApprox(const DecodeInfo &D, DecodedInsn &I) {
  constexpr unsigned Lanes = Packed ? 4 : 1;
  constexpr Src Mem = Packed ? Src::M128 : Src::M32;
  if (!isXmm(D.Ops[0]))
    return false;
  if (isXmm(D.Ops[1]))
    return bindSimd(D, I, &execApprox<Fn, Lanes, Src::Xmm>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execApprox<Fn, Lanes, Mem>);
  return false;
}
bool bindRcpss(const DecodeInfo &D, DecodedInsn &I) {
  return bindApprox<&approxReciprocal, false>(D, I);
}
bool bindRcpps(const DecodeInfo &D, DecodedInsn &I) {
  return bindApprox<&approxReciprocal, true>(D, I);
}
bool bindRsqrtss(const DecodeInfo &D, DecodedInsn &I) {
  return bindApprox<&approxReciprocalSqrt, false>(D, I);
}
bool bindRsqrtps(const DecodeInfo &D, DecodedInsn &I) {
  return bindApprox<&approxReciprocalSqrt, true>(D, I);
}

} // namespace vmxsim
