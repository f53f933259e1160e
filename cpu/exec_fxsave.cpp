// x87/SSE state management: FXSAVE/FXRSTOR (and the REX.W forms FXSAVE64/FXRSTOR64), and
// the x87 control instructions FNINIT, FNCLEX, FNSTCW, FLDCW, FNSTSW, FWAIT (SDM Vol. 2A,
// FXSAVE, FXRSTOR, FINIT/FNINIT, FCLEX/FNCLEX, FSTCW/FNSTCW, FLDCW, FSTSW/FNSTSW,
// WAIT/FWAIT). The other x87 instructions are cpu/exec_x87.cpp; the state rules they all
// share (tags, ES, FCW) are cpu/x87.h.
//
// CpuState::Ftw holds the abridged tag word (one bit per register, 1 = valid) exactly as
// FXSAVE stores it; the full tags are derived from it and the register contents.
#include "cpu/exec_sse.h"
#include "cpu/x87.h"

namespace vmxsim {

using namespace sse;

namespace {

struct FxImage {
  uint8_t B[fxarea::Size];
};

/// x87 availability (SDM Vol. 2A, FXSAVE and the x87 control instructions: "#NM If
/// CR0.TS[bit 3] = 1. If CR0.EM[bit 2] = 1."). Unlike SSE instructions, FXSAVE/FXRSTOR
/// do not depend on CR4.OSFXSR: without it, saving the XMM/MXCSR fields is
/// implementation dependent, and vmxsim saves and restores them anyway.
Status checkX87(Cpu &C) {
  if (C.S.Cr0 & (cr0::EM | cr0::TS))
    return C.raise(vec::NM);
  return Status::Ok;
}

/// The 512-byte region, 16-byte aligned: "#GP(0) If a memory operand is not aligned on
/// a 16-byte boundary, regardless of segment" (SDM Vol. 2A, FXSAVE).
Status imageLinear(Cpu &C, const DecodedInsn &I, Access Kind, uint64_t &La) {
  return operandLinear<true>(C, I, fxarea::Size, Kind, La);
}

template <bool Wide> Status execFxsave(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  uint64_t La;
  VMX_TRY(imageLinear(C, I, Access::Write, La));
  FxImage Img{};
  storeX87Area(C.S, Img.B, Wide);
  storeSseArea(C, Img.B);
  // Only the architectural fields are written: the reserved tail and bytes 464..511
  // ("available to software") keep their contents.
  VMX_TRY(writeLinearSlow(C, La, fxarea::Xmm + 16 * numAreaXmm(C), Img.B, false));
  return next(C, I);
}

template <bool Wide> Status execFxrstor(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  uint64_t La;
  VMX_TRY(imageLinear(C, I, Access::Read, La));
  FxImage Img;
  VMX_TRY(readLinear(C, La, Img));
  // "#GP(0) ... For an attempt to set reserved bits in MXCSR" (SDM Vol. 2A, FXRSTOR):
  // checked before any state changes.
  const uint32_t Mxcsr = getField<uint32_t>(Img.B, fxarea::Mxcsr);
  if (Mxcsr & ~kMxcsrMask)
    return C.raiseGp(0);
  loadX87Area(C.S, Img.B, Wide);
  C.S.Mxcsr = Mxcsr;
  loadXmmArea(C, Img.B);
  x87::esMayHaveCleared(C);
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
  x87::esMayHaveCleared(C);
  return next(C, I);
}
/// FNCLEX clears the exception flags (bits 0-5), SF, ES and B.
Status execFnclex(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  C.S.Fsw &= 0x7f00;
  x87::esMayHaveCleared(C);
  return next(C, I);
}
Status execFnstcw(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  VMX_TRY(storeOperand(C, I, C.S.Fcw));
  return next(C, I);
}
/// FLDCW loads the control word. It is a waiting instruction (a pending exception is
/// reported first); one that unmasks an exception already flagged in FSW makes it pending
/// (ES set), so the next waiting instruction raises it (SDM Vol. 2A, FLDCW). FLDCW is a
/// control instruction: FIP, FDP and FOP keep the last non-control instruction's.
Status execFldcw(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkX87(C));
  VMX_TRY(x87::checkPending(C));
  uint16_t V;
  VMX_TRY(loadOperand(C, I, V));
  x87::loadControlStatus(C.S, V, C.S.Fsw);
  x87::esMayHaveCleared(C);
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
/// FWAIT: "#NM If CR0.MP[bit 1] = 1 and CR0.TS[bit 3] = 1" (SDM Vol. 2B, WAIT/FWAIT),
/// then a pending unmasked x87 exception is reported (#MF, or the CR0.NE = 0 path).
Status execFwait(Cpu &C, const DecodedInsn &I) {
  if ((C.S.Cr0 & (cr0::MP | cr0::TS)) == (cr0::MP | cr0::TS))
    return C.raise(vec::NM);
  VMX_TRY(x87::checkPending(C));
  return next(C, I);
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

namespace sse {

void storeX87Area(const CpuState &S, uint8_t *B, bool Wide) {
  putField<uint16_t>(B, fxarea::Fcw, S.Fcw);
  putField<uint16_t>(B, fxarea::Fsw, S.Fsw);
  putField<uint8_t>(B, fxarea::Ftw, uint8_t(S.Ftw));
  putField<uint8_t>(B, fxarea::Ftw + 1, 0);
  putField<uint16_t>(B, fxarea::Fop, S.Fop);
  if (Wide) {
    putField<uint64_t>(B, fxarea::Fip, S.Fip);
    putField<uint64_t>(B, fxarea::Fdp, S.Fdp);
  } else {
    // FCS and FDS are stored as zero: the modelled processor reports "FPU CS and FPU DS
    // values deprecated" (CPUID.(EAX=07H,ECX=0):EBX[13]).
    putField<uint32_t>(B, fxarea::Fip, uint32_t(S.Fip));
    putField<uint32_t>(B, fxarea::Fcs, 0);
    putField<uint32_t>(B, fxarea::Fdp, uint32_t(S.Fdp));
    putField<uint32_t>(B, fxarea::Fds, 0);
  }
  for (unsigned K = 0; K < 8; ++K) {
    std::memcpy(B + fxarea::St + 16 * K, S.St[K], 10);
    std::memset(B + fxarea::St + 16 * K + 10, 0, 6);
  }
}

void loadX87Area(CpuState &S, const uint8_t *B, bool Wide) {
  // FCW's fixed bits and FSW's ES/B summary follow from the loaded words, as after FLDCW
  // (checked on the host: FXRSTOR of FCW FFFFH reads back 1F7FH, and of an unmasked flag
  // with ES clear reads back ES and B set).
  x87::loadControlStatus(S, getField<uint16_t>(B, fxarea::Fcw),
                         getField<uint16_t>(B, fxarea::Fsw));
  S.Ftw = getField<uint8_t>(B, fxarea::Ftw);
  S.Fop = getField<uint16_t>(B, fxarea::Fop) & 0x7ff;
  S.Fip = Wide ? getField<uint64_t>(B, fxarea::Fip) : getField<uint32_t>(B, fxarea::Fip);
  S.Fdp = Wide ? getField<uint64_t>(B, fxarea::Fdp) : getField<uint32_t>(B, fxarea::Fdp);
  for (unsigned K = 0; K < 8; ++K)
    std::memcpy(S.St[K], B + fxarea::St + 16 * K, 10);
}

void storeSseArea(const Cpu &C, uint8_t *B) {
  putField<uint32_t>(B, fxarea::Mxcsr, C.S.Mxcsr);
  putField<uint32_t>(B, fxarea::MxcsrMask, kMxcsrMask);
  for (unsigned N = numAreaXmm(C), R = 0; R < N; ++R)
    putField<Xmm>(B, fxarea::Xmm + 16 * R, C.S.XmmReg[R]);
}

void loadXmmArea(Cpu &C, const uint8_t *B) {
  for (unsigned N = numAreaXmm(C), R = 0; R < N; ++R)
    C.S.XmmReg[R] = getField<Xmm>(B, fxarea::Xmm + 16 * R);
}

} // namespace sse

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
} // namespace vmxsim
