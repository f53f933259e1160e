// MMX technology (SDM Vol. 1, Programming with Intel MMX Technology; SDM Vol. 2, the
// instruction page of each): the availability rules, EMMS, the MMX data moves (MOVD/MOVQ
// to and from MM registers, MOVNTQ, MASKMOVQ, MOVQ2DQ/MOVDQ2Q) and the SSE additions on MM
// registers that are not lane-wise packed operations (PSHUFW, PEXTRW/PINSRW, PMOVMSKB).
// The packed arithmetic, logic, compare, pack, unpack and shift instructions share their
// XMM handlers' operations through bindPacked (cpu/exec_sse.h); the MMX-register
// conversions CVTPI2PS & co. are with the SSE conversions (cpu/exec_sse_fp.cpp).
//
// The MM registers alias the x87 registers (cpu/exec_sse.h, namespace mmx). Every MMX
// instruction switches the x87 unit to MMX state only once it cannot fault any more, so a
// faulting instruction leaves TOP and the tags as they were.
#include "cpu/exec_sse.h"

namespace vmxsim {

using namespace sse;

Status mmx::checkAvailable(Cpu &C) {
  if (C.S.Cr0 & cr0::EM) [[unlikely]]
    return C.raiseUd();
  if (C.S.Cr0 & cr0::TS) [[unlikely]]
    return C.raise(vec::NM);
  // A pending unmasked x87 exception (FSW.ES) is reported before the instruction runs
  // (SDM Vol. 1, MMX Instructions and x87 FPU exceptions: "#MF If there is a pending FPU
  // exception").
  if (C.S.Fsw & 0x80) [[unlikely]] {
    if (!(C.S.Cr0 & cr0::NE))
      return C.unimplemented("x87 error reporting through FERR# (CR0.NE = 0)");
    return C.raise(vec::MF);
  }
  return Status::Ok;
}

Status mmx::checkSseAvailable(Cpu &C) {
  VMX_TRY(sse::checkAvailable(C));
  if (C.S.Fsw & 0x80) [[unlikely]] {
    if (!(C.S.Cr0 & cr0::NE))
      return C.unimplemented("x87 error reporting through FERR# (CR0.NE = 0)");
    return C.raise(vec::MF);
  }
  return Status::Ok;
}

namespace {


// --- EMMS -------------------------------------------------------------------------------

/// EMMS: all tags empty (SDM Vol. 2A, EMMS). Its exceptions are those of MMX
/// instructions.
Status execEmms(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkAvailable(C));
  C.S.Ftw = 0;
  return next(C, I);
}

// --- MOVD / MOVQ ------------------------------------------------------------------------

/// The forms of MOVD/MOVQ with an MM register (SDM Vol. 2B, MOVD/MOVQ): T is the moved
/// width. MM <- r/m32 zero-extends; r32 <- MM keeps the low doubleword.
enum class MoveForm : uint8_t { MmFromMm, MmFromMem, MmFromGpr, MemFromMm, GprFromMm };

template <typename T, MoveForm F> Status execMovMm(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkAvailable(C));
  if constexpr (F == MoveForm::MmFromMm || F == MoveForm::MmFromMem ||
                F == MoveForm::MmFromGpr) {
    T V;
    if constexpr (F == MoveForm::MmFromMm)
      V = T(mmx::read(C.S, I.Reg[1]));
    else if constexpr (F == MoveForm::MmFromMem)
      VMX_TRY(loadOperand(C, I, V));
    else
      V = getReg<T>(C, I.Reg[1]);
    mmx::enter(C.S);
    mmx::write(C.S, I.Reg[0], V);
  } else {
    const T V = T(mmx::read(C.S, I.Reg[1]));
    if constexpr (F == MoveForm::MemFromMm)
      VMX_TRY(storeOperand(C, I, V));
    else
      setReg<T>(C, I.Reg[0], V);
    mmx::enter(C.S);
  }
  return next(C, I);
}

template <typename T> bool bindMovMmT(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &A = D.Ops[0], &B = D.Ops[1];
  if (isMm(A) && isMm(B))
    return bindSimd(D, I, &execMovMm<T, MoveForm::MmFromMm>);
  if (isMm(A) && isMem(B))
    return bindSimd(D, I, &execMovMm<T, MoveForm::MmFromMem>);
  if (isMm(A) && isGpr(B))
    return bindSimd(D, I, &execMovMm<T, MoveForm::MmFromGpr>);
  if (isMem(A) && isMm(B))
    return bindSimd(D, I, &execMovMm<T, MoveForm::MemFromMm>);
  if (isGpr(A) && isMm(B))
    return bindSimd(D, I, &execMovMm<T, MoveForm::GprFromMm>);
  return false;
}

// --- MOVQ2DQ / MOVDQ2Q (SSE2) -----------------------------------------------------------

Status execMovq2dq(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkSseAvailable(C));
  C.S.XmmReg[I.Reg[0]] = Xmm{mmx::read(C.S, I.Reg[1]), 0};
  mmx::enter(C.S);
  return next(C, I);
}
Status execMovdq2q(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkSseAvailable(C));
  mmx::enter(C.S);
  mmx::write(C.S, I.Reg[0], C.S.XmmReg[I.Reg[1]].Lo);
  return next(C, I);
}

// --- PSHUFW, PEXTRW, PINSRW, PMOVMSKB on MM registers (SSE) ----------------------------

template <bool FromMem> Status execPshufw(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkAvailable(C));
  uint64_t S;
  if constexpr (FromMem)
    VMX_TRY(loadOperand(C, I, S));
  else
    S = mmx::read(C.S, I.Reg[1]);
  const uint8_t Imm = uint8_t(I.Imm);
  uint64_t R = 0;
  for (unsigned K = 0; K < 4; ++K)
    R |= ((S >> (16 * ((Imm >> (2 * K)) & 3))) & 0xffff) << (16 * K);
  mmx::enter(C.S);
  mmx::write(C.S, I.Reg[0], R);
  return next(C, I);
}

/// PEXTRW r32/r64, mm, imm8: word imm8[1:0], zero-extended.
Status execPextrwMm(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkAvailable(C));
  C.S.Gpr[I.Reg[0]] = (mmx::read(C.S, I.Reg[1]) >> (16 * (I.Imm & 3))) & 0xffff;
  mmx::enter(C.S);
  return next(C, I);
}

/// PINSRW mm, r32/m16, imm8: word imm8[1:0] replaced.
template <bool FromMem> Status execPinsrwMm(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkAvailable(C));
  uint16_t W;
  if constexpr (FromMem)
    VMX_TRY(loadOperand(C, I, W));
  else
    W = uint16_t(C.S.Gpr[I.Reg[1]]);
  const unsigned Shift = 16 * (I.Imm & 3);
  const uint64_t V = mmx::read(C.S, I.Reg[0]);
  mmx::enter(C.S);
  mmx::write(C.S, I.Reg[0], (V & ~(0xffffull << Shift)) | (uint64_t(W) << Shift));
  return next(C, I);
}

/// PMOVMSKB r32/r64, mm: the top bit of each byte, zero-extended.
Status execPmovmskbMm(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkAvailable(C));
  const uint64_t V = mmx::read(C.S, I.Reg[1]);
  uint64_t Mask = 0;
  for (unsigned K = 0; K < 8; ++K)
    Mask |= ((V >> (8 * K + 7)) & 1) << K;
  C.S.Gpr[I.Reg[0]] = Mask;
  mmx::enter(C.S);
  return next(C, I);
}

// --- MOVNTQ, MASKMOVQ -------------------------------------------------------------------

/// MOVNTQ m64, mm: a store; the non-temporal hint has no cache model to affect.
Status execMovntq(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkAvailable(C));
  VMX_TRY(storeOperand(C, I, mmx::read(C.S, I.Reg[1])));
  mmx::enter(C.S);
  return next(C, I);
}

/// MASKMOVQ mm1, mm2: the bytes of mm1 whose byte in mm2 has its top bit set are stored
/// at DS:rDI (segment overridable); the other bytes are not accessed. The eight bytes are
/// probed for writing first, so a fault leaves memory unchanged (the SDM leaves faults
/// with an all-zero mask implementation-specific; vmxsim checks them alike).
Status execMaskmovq(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkAvailable(C));
  const uint64_t Mask = mmx::read(C.S, I.Reg[1]), V = mmx::read(C.S, I.Reg[0]);
  uint64_t La;
  VMX_TRY(sse::operandLinear<false>(C, I, 8, Access::Write, La));
  VMX_TRY(probeWrite(C, La, 8));
  // Outside 64-bit mode linear addresses wrap at 4 GiB.
  const uint64_t Wrap = C.DecodeMode == uint8_t(CodeMode::Long64) ? ~0ull : 0xffffffffull;
  for (unsigned K = 0; K < 8; ++K)
    if ((Mask >> (8 * K + 7)) & 1)
      VMX_TRY(writeLinear(C, (La + K) & Wrap, uint8_t(V >> (8 * K))));
  mmx::enter(C.S);
  return next(C, I);
}

} // namespace

// Binders: one per mnemonic row of the MMX section of cpu/insns_sse_ext.def, and the MMX
// forms handed over by the SSE binders (cpu/exec_sse_move.cpp).
bool bindEmms(const DecodeInfo &D, DecodedInsn &I) { return bindSimd(D, I, &execEmms); }
bool bindMovdMm(const DecodeInfo &D, DecodedInsn &I) { return bindMovMmT<uint32_t>(D, I); }
bool bindMovqMm(const DecodeInfo &D, DecodedInsn &I) { return bindMovMmT<uint64_t>(D, I); }

bool bindMovq2dq(const DecodeInfo &D, DecodedInsn &I) {
  return isXmm(D.Ops[0]) && isMm(D.Ops[1]) && bindSimd(D, I, &execMovq2dq);
}
bool bindMovdq2q(const DecodeInfo &D, DecodedInsn &I) {
  return isMm(D.Ops[0]) && isXmm(D.Ops[1]) && bindSimd(D, I, &execMovdq2q);
}
bool bindPshufw(const DecodeInfo &D, DecodedInsn &I) {
  if (!isMm(D.Ops[0]))
    return false;
  if (isMm(D.Ops[1]))
    return bindSimd(D, I, &execPshufw<false>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execPshufw<true>);
  return false;
}
bool bindPextrwMm(const DecodeInfo &D, DecodedInsn &I) {
  return isGpr(D.Ops[0]) && isMm(D.Ops[1]) && bindSimd(D, I, &execPextrwMm);
}
bool bindPinsrwMm(const DecodeInfo &D, DecodedInsn &I) {
  if (!isMm(D.Ops[0]))
    return false;
  if (isGpr(D.Ops[1]))
    return bindSimd(D, I, &execPinsrwMm<false>);
  if (isMem(D.Ops[1]))
    return bindSimd(D, I, &execPinsrwMm<true>);
  return false;
}
bool bindPmovmskbMm(const DecodeInfo &D, DecodedInsn &I) {
  return isGpr(D.Ops[0]) && isMm(D.Ops[1]) && bindSimd(D, I, &execPmovmskbMm);
}
bool bindMovntq(const DecodeInfo &D, DecodedInsn &I) {
  return isMem(D.Ops[0]) && isMm(D.Ops[1]) && bindSimd(D, I, &execMovntq);
}
bool bindMaskmovq(const DecodeInfo &D, DecodedInsn &I) {
  // Operand 2 is the implicit DS:rDI destination (the DecodedInsn's memory operand).
  return isMm(D.Ops[0]) && isMm(D.Ops[1]) && bindSimd(D, I, &execMaskmovq);
}

} // namespace vmxsim
