// Shared by the SSE floating-point handlers (cpu/exec_sse_fp.cpp for SSE/SSE2,
// cpu/exec_sse_sse3.cpp and cpu/exec_sse_sse41_fp.cpp): running one instruction on the
// host's SSE unit under the guest's rounding controls, and turning the flags it raised
// into the guest's MXCSR update and #XM/#UD (see the file comment of cpu/exec_sse_fp.cpp).
#pragma once
#include "cpu/exec_sse.h"

namespace vmxsim::sse {

#if defined(__x86_64__)
constexpr bool kHostFp = true;
#else
constexpr bool kHostFp = false;
#endif
constexpr const char *kNoHostFp = "SSE floating point on a non-x86 host";

// --- host execution ---------------------------------------------------------------------

using V128 = long long __attribute__((vector_size(16)));
inline V128 toV(const Xmm &X) {
  V128 V;
  std::memcpy(&V, &X, 16);
  return V;
}
inline Xmm fromV(V128 V) { return Xmm{uint64_t(V[0]), uint64_t(V[1])}; }

/// The host MXCSR for executing a guest instruction: the guest's RC, FTZ and DAZ, every
/// exception masked, no flags. FTZ only acts while underflow is masked ("The FTZ bit ...
/// has no effect if the underflow exception is unmasked", SDM Vol. 1, Flush-To-Zero), so
/// with UM clear the host computes without it and reportFp sees the tiny result.
inline uint32_t hostCsr(uint32_t Guest) {
  uint32_t Csr = (Guest & (mxcsr::RC | mxcsr::FTZ | mxcsr::DAZ)) | mxcsr::Masks;
  if (!(Guest & mxcsr::UM))
    Csr &= ~mxcsr::FTZ;
  return Csr;
}

// Each primitive runs one instruction between "save host MXCSR; load Csr" and "store the
// resulting MXCSR; restore host MXCSR" inside a single asm statement, so no compiler-
// generated SSE code can run under the guest's MXCSR. It returns the MXCSR after the
// instruction (the caller keeps the flag bits).
#if defined(__x86_64__)
#define VMX_FP_ENTER "stmxcsr %[save]\n\tldmxcsr %[csr]\n\t"
#define VMX_FP_LEAVE "\n\tstmxcsr %[out]\n\tldmxcsr %[save]"
#define VMX_FP_CSR_OUT [save] "=m"(Save), [out] "=m"(Out)

/// xmm <- op(xmm, xmm): the instruction itself merges scalar results into the upper lanes.
#define VMX_FP_XX(Name, Insn)                                                             \
  uint32_t Name(Xmm &A, const Xmm &B, uint32_t Csr) {                                     \
    V128 X = toV(A), Y = toV(B);                                                          \
    uint32_t Save, Out;                                                                   \
    asm volatile(VMX_FP_ENTER Insn " %[y], %[x]" VMX_FP_LEAVE                             \
                 : [x] "+x"(X), VMX_FP_CSR_OUT                                            \
                 : [y] "x"(Y), [csr] "m"(Csr));                                           \
    A = fromV(X);                                                                         \
    return Out;                                                                           \
  }
/// xmm <- cmp(xmm, xmm) with predicate P.
#define VMX_FP_CMP(Name, Insn)                                                            \
  template <uint8_t P> uint32_t Name(Xmm &A, const Xmm &B, uint32_t Csr) {                \
    V128 X = toV(A), Y = toV(B);                                                          \
    uint32_t Save, Out;                                                                   \
    asm volatile(VMX_FP_ENTER Insn " %[p], %[y], %[x]" VMX_FP_LEAVE                       \
                 : [x] "+x"(X), VMX_FP_CSR_OUT                                            \
                 : [y] "x"(Y), [csr] "m"(Csr), [p] "i"(P));                               \
    A = fromV(X);                                                                         \
    return Out;                                                                           \
  }
#else
#define VMX_FP_XX(Name, Insn)                                                             \
  uint32_t Name(Xmm &, const Xmm &, uint32_t) { return 0; }
#define VMX_FP_CMP(Name, Insn)                                                            \
  template <uint8_t P> uint32_t Name(Xmm &, const Xmm &, uint32_t) { return 0; }
#endif

/// The source operand: an XMM register, or memory of 4, 8 or 16 bytes. Legacy SSE
/// packed operations take a 16-byte aligned m128 (SDM Vol. 2A, Exceptions Type 2 and 4);
/// scalar and 64-bit memory operands have no alignment rule (Exceptions Type 3 and 5).
enum class Src : uint8_t { Xmm, M32, M64, M128 };

template <Src S> inline Status loadSource(Cpu &C, const DecodedInsn &I, Xmm &B) {
  if constexpr (S == Src::Xmm) {
    B = C.S.XmmReg[I.Reg[1]];
  } else if constexpr (S == Src::M32) {
    uint32_t V;
    VMX_TRY(loadOperand(C, I, V));
    B = Xmm{V, 0};
  } else if constexpr (S == Src::M64) {
    uint64_t V;
    VMX_TRY(loadOperand(C, I, V));
    B = Xmm{V, 0};
  } else {
    VMX_TRY((loadOperand<Xmm, true>(C, I, B)));
  }
  return Status::Ok;
}

/// The basic operations whose unmasked overflow or underflow needs the precision flag of
/// the unbounded-exponent result (see unmaskedPostFlags in cpu/exec_sse_fp.cpp). Narrow is
/// a double-to-single conversion.
enum class WideOp : uint8_t { None, Add, Sub, Mul, Div, Narrow };

/// Records the exceptions an instruction raised and decides whether it completes; Ok when
/// the caller may write its destination (cpu/exec_sse_fp.cpp).
Status reportFp(Cpu &C, uint32_t Raised);

/// The flags one scalar addition, subtraction or multiplication (Op is Add, Sub or Mul) of
/// the Bytes-wide (4 or 8) operands X and Y raises under the guest's MXCSR, with an
/// unmasked overflow or underflow reporting the precision flag of the unbounded-exponent
/// result: the per-lane flags of an instruction whose masked run raised an unmasked
/// post-computation exception.
uint32_t scalarLaneFlags(WideOp Op, uint64_t X, uint64_t Y, unsigned Bytes, uint32_t Guest);

/// The exceptions detected before an operation computes (SDM Vol. 1, Handling Unmasked
/// Exceptions).
inline constexpr uint32_t kPreComputation = mxcsr::IE | mxcsr::DE | mxcsr::ZE;

/// Lane K (of Bytes = 4 or 8 bytes) of X as a bit pattern.
inline uint64_t fpLane(const Xmm &X, unsigned Bytes, unsigned K) {
  if (Bytes == 8)
    return K ? X.Hi : X.Lo;
  return uint32_t((K >= 2 ? X.Hi : X.Lo) >> (32 * (K & 1)));
}
/// True when a lane of R is a nonzero denormal: with underflow unmasked a tiny result
/// signals even when exact (SDM Vol. 1, Numeric Underflow Exception (#U)), which the
/// masked host run does not flag.
inline bool anyDenormalLane(const Xmm &R, unsigned Bytes) {
  for (unsigned K = 0; K < 16 / Bytes; ++K) {
    const uint64_t V = fpLane(R, Bytes, K);
    const bool Den = Bytes == 8 ? !(V & 0x7ff0000000000000ull) && (V & 0x000fffffffffffffull)
                                : !(V & 0x7f800000u) && (V & 0x007fffffu);
    if (Den)
      return true;
  }
  return false;
}

/// Binds an xmm, xmm/m form: RegFn for a register source, MemFn for memory.
inline bool bindXmmOrMem(const DecodeInfo &D, DecodedInsn &I, Handler RegFn, Handler MemFn) {
  const OperandInfo &Dst = D.Ops[0], &Src = D.Ops[1];
  if (Dst.Kind != OperandKind::Reg || Dst.Class != RegClass::Xmm)
    return false;
  if (Src.Kind == OperandKind::Reg && Src.Class == RegClass::Xmm)
    I.Fn = RegFn;
  else if (Src.Kind == OperandKind::Mem)
    I.Fn = MemFn;
  else
    return false;
  copyOperandRegs(D, I);
  I.Cost = costOf(CostClass::Sse);
  return true;
}

} // namespace vmxsim::sse
