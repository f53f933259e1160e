// x87/SSE state management without x87 arithmetic: FXSAVE/FXRSTOR (and the REX.W forms
// FXSAVE64/FXRSTOR64), and the x87 control instructions kernels run at boot — FNINIT,
// FNCLEX, FNSTCW, FLDCW, FNSTSW, FWAIT — as operations on the stored x87 fields (SDM
// Vol. 2A, FXSAVE, FXRSTOR, FINIT/FNINIT, FCLEX/FNCLEX, FSTCW/FNSTCW, FLDCW, FSTSW/FNSTSW,
// WAIT/FWAIT). Every other x87 instruction is an emulator gap reported loudly.
//
// CpuState::Ftw holds the abridged tag word (one bit per register, 1 = valid) exactly as
// FXSAVE stores it: with no x87 arithmetic the full two-bit tags are never needed.
#include "cpu/exec_sse.h"

namespace vmxsim {

using namespace sse;

namespace {

/// Offsets in the FXSAVE area (SDM Vol. 2A, FXSAVE, tables "Non-64-bit-Mode Layout of
/// FXSAVE and FXRSTOR Memory Region" and "Layout of the 64-bit-mode FXSAVE64 Map").
namespace fx {
inline constexpr unsigned Fcw = 0, Fsw = 2, Ftw = 4, Fop = 6, Fip = 8, Fcs = 12, Fdp = 16,
                          Fds = 20, Mxcsr = 24, MxcsrMask = 28, St = 32, Xmm = 160,
                          Size = 512;
}

struct FxImage {
  uint8_t B[fx::Size];
};

template <typename T> void put(uint8_t *B, unsigned Off, T V) { std::memcpy(B + Off, &V, sizeof(T)); }
template <typename T> T get(const uint8_t *B, unsigned Off) {
  T V;
  std::memcpy(&V, B + Off, sizeof(T));
  return V;
}

/// x87 availability (SDM Vol. 2A, FXSAVE and the x87 control instructions: "#NM If
/// CR0.TS[bit 3] = 1. If CR0.EM[bit 2] = 1."). Unlike SSE instructions, FXSAVE/FXRSTOR
/// do not depend on CR4.OSFXSR: without it, saving the XMM/MXCSR fields is
/// implementation dependent, and vmxsim saves and restores them anyway.
Status checkX87(Cpu &C) {
  if (C.S.Cr0 & (cr0::EM | cr0::TS))
    return C.raise(vec::NM);
  return Status::Ok;
}

/// XMM registers in the image: 16 in 64-bit mode, 8 otherwise.
unsigned numXmm(const Cpu &C) { return C.DecodeMode == uint8_t(CodeMode::Long64) ? 16 : 8; }

/// The 512-byte region, 16-byte aligned: "#GP(0) If a memory operand is not aligned on
/// a 16-byte boundary, regardless of segment" (SDM Vol. 2A, FXSAVE).
Status imageLinear(Cpu &C, const DecodedInsn &I, Access Kind, uint64_t &La) {
  return operandLinear<true>(C, I, fx::Size, Kind, La);
}

template <bool Wide> Status execFxsave(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  uint64_t La;
  VMX_TRY(imageLinear(C, I, Access::Write, La));
  const CpuState &S = C.S;
  FxImage Img{};
  uint8_t *B = Img.B;
  put<uint16_t>(B, fx::Fcw, S.Fcw);
  put<uint16_t>(B, fx::Fsw, S.Fsw);
  put<uint8_t>(B, fx::Ftw, uint8_t(S.Ftw));
  put<uint16_t>(B, fx::Fop, S.Fop);
  if constexpr (Wide) {
    put<uint64_t>(B, fx::Fip, S.Fip);
    put<uint64_t>(B, fx::Fdp, S.Fdp);
  } else {
    // FCS and FDS are stored as zero: the modelled processor reports "FPU CS and FPU DS
    // values deprecated" (CPUID.(EAX=07H,ECX=0):EBX[13]).
    put<uint32_t>(B, fx::Fip, uint32_t(S.Fip));
    put<uint16_t>(B, fx::Fcs, 0);
    put<uint32_t>(B, fx::Fdp, uint32_t(S.Fdp));
    put<uint16_t>(B, fx::Fds, 0);
  }
  put<uint32_t>(B, fx::Mxcsr, S.Mxcsr);
  put<uint32_t>(B, fx::MxcsrMask, kMxcsrMask);
  for (unsigned K = 0; K < 8; ++K)
    std::memcpy(B + fx::St + 16 * K, S.St[K], 10);
  const unsigned N = numXmm(C);
  for (unsigned K = 0; K < N; ++K)
    put<Xmm>(B, fx::Xmm + 16 * K, S.XmmReg[K]);
  // Only the architectural fields are written: the reserved tail and bytes 464..511
  // ("available to software") keep their contents.
  VMX_TRY(writeLinearSlow(C, La, fx::Xmm + 16 * N, B, false));
  return next(C, I);
}

template <bool Wide> Status execFxrstor(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  uint64_t La;
  VMX_TRY(imageLinear(C, I, Access::Read, La));
  FxImage Img;
  VMX_TRY(readLinear(C, La, Img));
  const uint8_t *B = Img.B;
  // "#GP(0) ... For an attempt to set reserved bits in MXCSR" (SDM Vol. 2A, FXRSTOR):
  // checked before any state changes.
  uint32_t Mxcsr = get<uint32_t>(B, fx::Mxcsr);
  if (Mxcsr & ~kMxcsrMask)
    return C.raiseGp(0);
  CpuState &S = C.S;
  S.Fcw = get<uint16_t>(B, fx::Fcw);
  S.Fsw = get<uint16_t>(B, fx::Fsw);
  S.Ftw = get<uint8_t>(B, fx::Ftw);
  S.Fop = get<uint16_t>(B, fx::Fop) & 0x7ff;
  if constexpr (Wide) {
    S.Fip = get<uint64_t>(B, fx::Fip);
    S.Fdp = get<uint64_t>(B, fx::Fdp);
  } else {
    S.Fip = get<uint32_t>(B, fx::Fip);
    S.Fdp = get<uint32_t>(B, fx::Fdp);
  }
  S.Mxcsr = Mxcsr;
  for (unsigned K = 0; K < 8; ++K)
    std::memcpy(S.St[K], B + fx::St + 16 * K, 10);
  const unsigned N = numXmm(C);
  for (unsigned K = 0; K < N; ++K)
    S.XmmReg[K] = get<Xmm>(B, fx::Xmm + 16 * K);
  return next(C, I);
}

// --- x87 control instructions -----------------------------------------------------------

/// FNINIT: the x87 initialisation values (SDM Vol. 1, x87 FPU Initialization): FCW 037FH,
/// FSW 0, all registers empty, instruction/data pointers and opcode cleared.
Status execFninit(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  C.S.Fcw = 0x37f;
  C.S.Fsw = 0;
  C.S.Ftw = 0;
  C.S.Fop = 0;
  C.S.Fip = C.S.Fdp = 0;
  return next(C, I);
}
/// FNCLEX clears the exception flags (bits 0-5), SF, ES and B.
Status execFnclex(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  C.S.Fsw &= 0x7f00;
  return next(C, I);
}
Status execFnstcw(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  VMX_TRY(storeOperand(C, I, C.S.Fcw));
  return next(C, I);
}
/// FLDCW loads the control word. Unmasking an exception flagged in FSW would make the
/// next waiting x87 instruction raise #MF; with no x87 arithmetic that cannot happen
/// except through FXRSTOR of such a state, which is not modelled.
Status execFldcw(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  uint16_t V;
  VMX_TRY(loadOperand(C, I, V));
  C.S.Fcw = V;
  return next(C, I);
}
template <bool ToAx> Status execFnstsw(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  if constexpr (ToAx)
    setReg<uint16_t>(C, RAX, C.S.Fsw);
  else
    VMX_TRY(storeOperand(C, I, C.S.Fsw));
  return next(C, I);
}
/// FWAIT: "#NM If CR0.MP[bit 1] = 1 and CR0.TS[bit 3] = 1" (SDM Vol. 2B, WAIT/FWAIT).
/// No unmasked x87 exception can be pending (see execFldcw), so it never raises #MF.
Status execFwait(Cpu &C, const DecodedInsn &I) {
  if ((C.S.Cr0 & (cr0::MP | cr0::TS)) == (cr0::MP | cr0::TS))
    return C.raise(vec::NM);
  return next(C, I);
}
Status execX87Unimplemented(Cpu &C, const DecodedInsn &) {
  VMX_TRY(checkX87(C));
  return C.unimplemented("x87 arithmetic");
}

bool bindWith(const DecodeInfo &, DecodedInsn &I, Handler Fn, CostClass Cost) {
  I.Fn = Fn;
  I.Cost = costOf(Cost);
  return true;
}
bool memOnly(const DecodeInfo &D) {
  return D.NumVisible >= 1 && D.Ops[0].Kind == OperandKind::Mem;
}

} // namespace

bool bindFxsave(const DecodeInfo &D, DecodedInsn &I) {
  return memOnly(D) && bindWith(D, I, &execFxsave<false>, CostClass::Serializing);
}
bool bindFxsave64(const DecodeInfo &D, DecodedInsn &I) {
  return memOnly(D) && bindWith(D, I, &execFxsave<true>, CostClass::Serializing);
}
bool bindFxrstor(const DecodeInfo &D, DecodedInsn &I) {
  return memOnly(D) && bindWith(D, I, &execFxrstor<false>, CostClass::Serializing);
}
bool bindFxrstor64(const DecodeInfo &D, DecodedInsn &I) {
  return memOnly(D) && bindWith(D, I, &execFxrstor<true>, CostClass::Serializing);
}
bool bindFninit(const DecodeInfo &D, DecodedInsn &I) {
  return bindWith(D, I, &execFninit, CostClass::Simple);
}
bool bindFnclex(const DecodeInfo &D, DecodedInsn &I) {
  return bindWith(D, I, &execFnclex, CostClass::Simple);
}
bool bindFnstcw(const DecodeInfo &D, DecodedInsn &I) {
  return memOnly(D) && bindWith(D, I, &execFnstcw, CostClass::Memory);
}
bool bindFldcw(const DecodeInfo &D, DecodedInsn &I) {
  return memOnly(D) && bindWith(D, I, &execFldcw, CostClass::Memory);
}
bool bindFnstsw(const DecodeInfo &D, DecodedInsn &I) {
  if (memOnly(D))
    return bindWith(D, I, &execFnstsw<false>, CostClass::Memory);
  return bindWith(D, I, &execFnstsw<true>, CostClass::Simple);
}
bool bindFwait(const DecodeInfo &D, DecodedInsn &I) {
  return bindWith(D, I, &execFwait, CostClass::Simple);
}
bool bindX87Arith(const DecodeInfo &D, DecodedInsn &I) {
  return bindWith(D, I, &execX87Unimplemented, CostClass::Simple);
}

} // namespace vmxsim
