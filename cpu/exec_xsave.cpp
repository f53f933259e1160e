// The XSAVE feature set for the state components vmxsim supports, 0 (x87) and 1 (SSE):
// XSAVE, XSAVEOPT and XSAVEC (and their REX.W forms) and XRSTOR in the standard and the
// compacted format (SDM Vol. 1, Managing State Using the XSAVE Feature Set; SDM Vol. 2C,
// XSAVE, XSAVEOPT, XSAVEC, XRSTOR). XSETBV/XGETBV live in cpu/exec_cr.cpp.
//
// Simplifications the SDM allows:
// - XINUSE is all ones: "If XINUSE[i] = 1, state component i may or may not be in its
//   initial configuration" (SDM Vol. 1, Processor Tracking of XSAVE-Managed State), so
//   every requested component is saved and XSTATE_BV reports it in use.
// - XSAVEOPT never uses the modified optimisation and behaves as XSAVE (SDM Vol. 1,
//   Operation of XSAVEOPT: the optimisations are permitted, not required).
// With only components 0 and 1, which always live in the legacy region, the standard and
// compacted formats place state at the same offsets; they differ in the header.
#include "cpu/cpuid.h"
#include "cpu/exec_sse.h"
#include "cpu/x87.h"

namespace vmxsim {

using namespace sse;

namespace {

/// The XSAVE area: 512-byte legacy region then the 64-byte XSAVE header (SDM Vol. 1,
/// XSAVE Area; XSAVE Header). 576 bytes is also what CPUID.(EAX=0DH,ECX=0):EBX/ECX report.
namespace xarea {
inline constexpr unsigned XstateBv = 512, XcompBv = 520, HeaderEnd = 576, Size = 576;
inline constexpr uint64_t X87 = 1, Sse = 2, Compacted = 1ull << 63;
} // namespace xarea

struct Area {
  uint8_t B[xarea::Size];
};

bool allZero(const uint8_t *B, unsigned From, unsigned To) {
  for (unsigned K = From; K < To; ++K)
    if (B[K])
      return false;
  return true;
}

enum class Save : uint8_t { Standard, Opt, Compacted };

/// CPUID.(EAX=0DH,ECX=1):EAX: bit 0 XSAVEOPT, bit 1 XSAVEC.
bool hasXsaveSubfeature(const Cpu &C, uint32_t Bit) {
  return cpuidQuery(C, 0xd, 1).Eax & Bit;
}
inline constexpr uint32_t kXsaveopt = 1u << 0, kXsavec = 1u << 1;

/// "#UD If CPUID.01H:ECX.XSAVE[bit 26] = 0. If CR4.OSXSAVE[bit 18] = 0." then "#NM If
/// CR0.TS[bit 3] = 1." (SDM Vol. 2C, XSAVE, Protected Mode Exceptions). CR4.OSXSAVE can
/// only be set when the model reports XSAVE (cr4ValidBits), so it stands for both. CR0.EM
/// does not matter to the XSAVE feature set.
Status checkXsave(Cpu &C, uint32_t Subfeature) {
  if (!(C.S.Cr4 & cr4::OSXSAVE)) [[unlikely]]
    return C.raiseUd();
  if (Subfeature && !hasXsaveSubfeature(C, Subfeature)) [[unlikely]]
    return C.raiseUd();
  if (C.S.Cr0 & cr0::TS) [[unlikely]]
    return C.raise(vec::NM);
  return Status::Ok;
}

/// "#GP(0) If a memory operand is not aligned on a 64-byte boundary, regardless of
/// segment" (SDM Vol. 2C, XSAVE and XRSTOR).
Status areaLinear(Cpu &C, const DecodedInsn &I, Access Kind, uint64_t &La) {
  VMX_TRY(segmentToLinear(C, SegReg(I.Seg), effectiveAddress(C, I), xarea::Size, Kind, La));
  if (La & 63) [[unlikely]]
    return C.raiseGp(0);
  return Status::Ok;
}

/// The initial configuration of x87 state (SDM Vol. 1, XSAVE-Supported Features and
/// State-Component Bitmaps): FCW 037FH, everything else 0, all registers empty.
void initX87(CpuState &S) {
  S.Fcw = 0x37f;
  S.Fsw = S.Ftw = S.Fop = 0;
  S.Fip = S.Fdp = 0;
  std::memset(S.St, 0, sizeof(S.St));
}

/// XSAVE, XSAVEOPT and XSAVEC (SDM Vol. 1, Operation of XSAVE; Operation of XSAVEOPT;
/// Operation of XSAVEC). RFBM = XCR0 AND EDX:EAX.
template <Save K, bool Wide> Status execXsave(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkXsave(C, K == Save::Opt         ? kXsaveopt
                        : K == Save::Compacted ? kXsavec
                                               : 0));
  uint64_t La;
  VMX_TRY(areaLinear(C, I, Access::Write, La));
  // Translate for writing first so that a fault reports a write, then read the bytes
  // the instruction leaves alone and write the whole area back.
  VMX_TRY(probeWrite(C, La, xarea::Size));
  Area A;
  VMX_TRY(readLinear(C, La, A));
  const CpuState &S = C.S;
  const uint64_t Rfbm = S.Xcr0 & ((uint64_t(uint32_t(S.Gpr[RDX])) << 32) | uint32_t(S.Gpr[RAX]));
  uint8_t *B = A.B;
  if (Rfbm & xarea::X87)
    storeX87Area(S, B, Wide);
  // MXCSR and MXCSR_MASK are saved when RFBM[1] (or RFBM[2], AVX, not modelled) is set.
  if (Rfbm & xarea::Sse)
    storeSseArea(C, B);
  const uint64_t Xinuse = ~0ull;
  if constexpr (K == Save::Compacted) {
    // XSTATE_BV <- XINUSE AND RFBM; XCOMP_BV <- 8000000000000000H OR RFBM.
    putField<uint64_t>(B, xarea::XstateBv, Xinuse & Rfbm);
    putField<uint64_t>(B, xarea::XcompBv, xarea::Compacted | Rfbm);
  } else {
    // Only the XSTATE_BV bits of requested components change; the rest of the header is
    // not written.
    uint64_t Old = getField<uint64_t>(B, xarea::XstateBv);
    putField<uint64_t>(B, xarea::XstateBv, (Old & ~Rfbm) | (Xinuse & Rfbm));
  }
  VMX_TRY(writeLinearSlow(C, La, xarea::Size, B, false));
  return next(C, I);
}

/// XRSTOR (SDM Vol. 1, Operation of XRSTOR > Standard Form of XRSTOR; Compacted Form of
/// XRSTOR). Every #GP condition is checked before any state changes.
template <bool Wide> Status execXrstor(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkXsave(C, 0));
  uint64_t La;
  VMX_TRY(areaLinear(C, I, Access::Read, La));
  Area A;
  VMX_TRY(readLinear(C, La, A));
  const uint8_t *B = A.B;
  CpuState &S = C.S;
  const uint64_t Rfbm = S.Xcr0 & ((uint64_t(uint32_t(S.Gpr[RDX])) << 32) | uint32_t(S.Gpr[RAX]));
  const uint64_t XstateBv = getField<uint64_t>(B, xarea::XstateBv);
  const uint64_t XcompBv = getField<uint64_t>(B, xarea::XcompBv);
  const bool Compacted = XcompBv & xarea::Compacted;
  if (Compacted) {
    // #GP if compaction is not supported, XCOMP_BV[62:0] names a component not enabled
    // in XCR0, XSTATE_BV names one XCOMP_BV does not, or header bytes 63:16 are not zero.
    if (!hasXsaveSubfeature(C, kXsavec) || (XcompBv & ~xarea::Compacted & ~S.Xcr0) ||
        (XstateBv & ~(XcompBv & ~xarea::Compacted)) ||
        !allZero(B, xarea::XstateBv + 16, xarea::HeaderEnd))
      return C.raiseGp(0);
  } else {
    // #GP if XSTATE_BV names a component not enabled in XCR0 or header bytes 23:8 are not
    // zero (which covers XCOMP_BV).
    if ((XstateBv & ~S.Xcr0) || !allZero(B, xarea::XstateBv + 8, xarea::XstateBv + 24))
      return C.raiseGp(0);
  }
  // MXCSR: the standard form loads it from memory whenever RFBM[1] is set, whatever
  // XSTATE_BV[1] says; the compacted form treats it as part of component 1 and
  // initialises it to 1F80H when XSTATE_BV[1] = 0. Loading a reserved bit is #GP.
  uint32_t Mxcsr = S.Mxcsr;
  if (Rfbm & xarea::Sse) {
    Mxcsr = (!Compacted || (XstateBv & xarea::Sse)) ? getField<uint32_t>(B, fxarea::Mxcsr)
                                                    : mxcsr::Initial;
    if (Mxcsr & ~kMxcsrMask)
      return C.raiseGp(0);
  }
  if (Rfbm & xarea::X87) {
    if (XstateBv & xarea::X87)
      loadX87Area(S, B, Wide);
    else
      initX87(S);
  }
  if (Rfbm & xarea::Sse) {
    S.Mxcsr = Mxcsr;
    if (XstateBv & xarea::Sse)
      loadXmmArea(C, B);
    else
      for (unsigned N = numAreaXmm(C), R = 0; R < N; ++R)
        S.XmmReg[R] = Xmm{};
  }
  x87::esMayHaveCleared(C);
  return next(C, I);
}

bool bindArea(const DecodeInfo &D, DecodedInsn &I, Handler Fn) {
  if (D.NumVisible < 1 || D.Ops[0].Kind != OperandKind::Mem)
    return false;
  copyOperandRegs(D, I);
  I.Fn = Fn;
  I.Cost = costOf(CostClass::Serializing);
  return true;
}

} // namespace

bool bindXsave(const DecodeInfo &D, DecodedInsn &I) {
  return bindArea(D, I, &execXsave<Save::Standard, false>);
}
bool bindXsave64(const DecodeInfo &D, DecodedInsn &I) {
  return bindArea(D, I, &execXsave<Save::Standard, true>);
}
bool bindXsaveopt(const DecodeInfo &D, DecodedInsn &I) {
  return bindArea(D, I, &execXsave<Save::Opt, false>);
}
bool bindXsaveopt64(const DecodeInfo &D, DecodedInsn &I) {
  return bindArea(D, I, &execXsave<Save::Opt, true>);
}
bool bindXsavec(const DecodeInfo &D, DecodedInsn &I) {
  return bindArea(D, I, &execXsave<Save::Compacted, false>);
}
bool bindXsavec64(const DecodeInfo &D, DecodedInsn &I) {
  return bindArea(D, I, &execXsave<Save::Compacted, true>);
}
bool bindXrstor(const DecodeInfo &D, DecodedInsn &I) {
  return bindArea(D, I, &execXrstor<false>);
}
bool bindXrstor64(const DecodeInfo &D, DecodedInsn &I) {
  return bindArea(D, I, &execXrstor<true>);
}

} // namespace vmxsim
