// Shared helpers of the SSE/SSE2 handlers (cpu/exec_sse_move.cpp, cpu/exec_sse_int.cpp,
// cpu/exec_sse_fp.cpp) and of FXSAVE/FXRSTOR and XSAVE/XRSTOR (cpu/exec_fxsave.cpp,
// cpu/exec_xsave.cpp): the availability checks every legacy SSE instruction makes first,
// 16-byte memory operands with their alignment rule, lane views of an XMM register, and
// the 512-byte legacy save region.
#pragma once
#include "cpu/exec.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace vmxsim::sse {

// Lane views copy the register's bytes; lane 0 is the least significant, which is the
// host's memory order only on a little-endian host.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "lane views assume little endian");
static_assert(sizeof(Xmm) == 16);

/// MXCSR bits a guest may set: all 16 architectural bits, DAZ included. FXSAVE reports
/// it as MXCSR_MASK (SDM Vol. 1, Guidelines for Writing to the MXCSR Register).
inline constexpr uint32_t kMxcsrMask = 0xffff;

/// MXCSR fields (SDM Vol. 1, MXCSR Control and Status Register): exception flags in bits
/// 0-5, DAZ, exception masks in bits 7-12 (flag bit K is masked by bit K + 7), rounding
/// control, flush-to-zero.
namespace mxcsr {
inline constexpr uint32_t IE = 1u << 0, DE = 1u << 1, ZE = 1u << 2, OE = 1u << 3,
                          UE = 1u << 4, PE = 1u << 5, DAZ = 1u << 6, UM = 1u << 11,
                          RC = 3u << 13, FTZ = 1u << 15;
inline constexpr uint32_t Flags = 0x3f, Masks = 0x3f << 7, MaskShift = 7;
/// The power-up and initial-configuration value (SDM Vol. 1, MXCSR State Management).
inline constexpr uint32_t Initial = 0x1f80;
} // namespace mxcsr

/// Offsets in the 512-byte legacy region shared by FXSAVE and XSAVE (SDM Vol. 2A, FXSAVE,
/// tables "Non-64-bit-Mode Layout of FXSAVE and FXRSTOR Memory Region" and "Layout of the
/// 64-bit-mode FXSAVE64 Map"; SDM Vol. 1, Legacy Region of an XSAVE Area).
namespace fxarea {
inline constexpr unsigned Fcw = 0, Fsw = 2, Ftw = 4, Fop = 6, Fip = 8, Fcs = 12, Fdp = 16,
                          Fds = 20, Mxcsr = 24, MxcsrMask = 28, St = 32, Xmm = 160,
                          Size = 512;
}

/// A field of a save area, stored little-endian at byte offset Off.
template <typename T> inline void putField(uint8_t *B, unsigned Off, T V) {
  std::memcpy(B + Off, &V, sizeof(T));
}
template <typename T> inline T getField(const uint8_t *B, unsigned Off) {
  T V;
  std::memcpy(&V, B + Off, sizeof(T));
  return V;
}

/// XMM registers in the legacy region: 16 in 64-bit mode, 8 otherwise.
inline unsigned numAreaXmm(const Cpu &C) {
  return C.DecodeMode == uint8_t(CodeMode::Long64) ? 16 : 8;
}

// Saving and restoring the legacy region, one implementation for FXSAVE/FXRSTOR
// (cpu/exec_fxsave.cpp) and for state components 0 and 1 of XSAVE/XRSTOR
// (cpu/exec_xsave.cpp). Wide selects the REX.W forms (64-bit FPU IP and DP).

/// x87 state, bytes 0-23 and 32-159 (SDM Vol. 1, x87 State); reserved bytes among them are
/// written as zero.
void storeX87Area(const CpuState &S, uint8_t *B, bool Wide);
void loadX87Area(CpuState &S, const uint8_t *B, bool Wide);
/// SSE state: MXCSR, MXCSR_MASK and the XMM registers of the current mode (SDM Vol. 1,
/// SSE State).
void storeSseArea(const Cpu &C, uint8_t *B);
/// The XMM registers of the current mode. MXCSR is not loaded: its reserved bits must be
/// checked before any state changes, so the caller loads it.
void loadXmmArea(Cpu &C, const uint8_t *B);

/// The checks every legacy SSE/SSE2 instruction makes before anything else (SDM Vol. 2A,
/// Exception Classifications of SIMD Instructions > Exceptions Type 4 and Type 5):
/// #UD if CR0.EM = 1 or CR4.OSFXSR = 0, then #NM if CR0.TS = 1.
inline Status checkAvailable(Cpu &C) {
  if ((C.S.Cr0 & cr0::EM) || !(C.S.Cr4 & cr4::OSFXSR)) [[unlikely]]
    return C.raiseUd();
  if (C.S.Cr0 & cr0::TS) [[unlikely]]
    return C.raise(vec::NM);
  return Status::Ok;
}

/// Linear address of the memory operand for an access of SizeBytes, with the 16-byte
/// alignment rule of the aligned forms: "#GP(0) If a memory operand is not aligned on a
/// 16-byte boundary" (SDM Vol. 2A, Exceptions Type 1 and Type 4; legacy SSE memory
/// operands of arithmetic instructions are checked like MOVAPS).
template <bool Aligned>
inline Status operandLinear(Cpu &C, const DecodedInsn &I, unsigned SizeBytes, Access Kind,
                            uint64_t &La) {
  VMX_TRY(segmentToLinear(C, SegReg(I.Seg), effectiveAddress(C, I), SizeBytes, Kind, La));
  if constexpr (Aligned)
    if (La & 15) [[unlikely]]
      return C.raiseGp(0);
  return Status::Ok;
}

template <typename T, bool Aligned = false>
inline Status loadOperand(Cpu &C, const DecodedInsn &I, T &V) {
  uint64_t La;
  VMX_TRY(operandLinear<Aligned>(C, I, sizeof(T), Access::Read, La));
  return readLinear(C, La, V);
}
template <typename T, bool Aligned = false>
inline Status storeOperand(Cpu &C, const DecodedInsn &I, T V) {
  uint64_t La;
  VMX_TRY(operandLinear<Aligned>(C, I, sizeof(T), Access::Write, La));
  return writeLinear(C, La, V);
}

/// The register as an array of N lanes of type L.
template <typename L> struct Lanes {
  static constexpr unsigned N = 16 / sizeof(L);
  L V[N];
};
template <typename L> inline Lanes<L> lanes(const Xmm &X) {
  Lanes<L> R;
  std::memcpy(R.V, &X, 16);
  return R;
}
template <typename L> inline Xmm toXmm(const Lanes<L> &R) {
  Xmm X;
  std::memcpy(&X, R.V, 16);
  return X;
}

// --- what the SIMD binders test of an operand, and how they finish a binding ----------
inline bool isXmm(const OperandInfo &O) {
  return O.Kind == OperandKind::Reg && O.Class == RegClass::Xmm;
}
inline bool isMm(const OperandInfo &O) {
  return O.Kind == OperandKind::Reg && O.Class == RegClass::Mmx;
}
inline bool isGpr(const OperandInfo &O) {
  return O.Kind == OperandKind::Reg && O.Class == RegClass::Gpr;
}
inline bool isMem(const OperandInfo &O) { return O.Kind == OperandKind::Mem; }
/// Binds handler Fn with the operands' registers and the SIMD cost class.
inline bool bindSimd(const DecodeInfo &D, DecodedInsn &I, Handler Fn) {
  I.Fn = Fn;
  copyOperandRegs(D, I);
  I.Cost = costOf(CostClass::Sse);
  return true;
}

/// True when an operand of the decoded instruction is an MMX register.
inline bool usesMmx(const DecodeInfo &D) {
  for (unsigned K = 0; K < D.NumOps; ++K)
    if (D.Ops[K].Kind == OperandKind::Reg && D.Ops[K].Class == RegClass::Mmx)
      return true;
  return false;
}

// --- MMX state (SDM Vol. 1, MMX Technology Programming Environment) ---------------------
//
// MM0-MM7 alias the significands of the x87 physical registers R0-R7: MMi is bytes 0-7
// of CpuState::St[i]. Writing MMi sets that register's exponent and sign (bytes 8-9) to
// all ones; every MMX instruction except EMMS sets TOP (FSW bits 13:11) to 0 and all
// tags valid, EMMS sets them all empty (SDM Vol. 1, Effect of MMX, x87 FPU, FXSAVE, and
// FXRSTOR Instructions on the x87 FPU Tag Word). CpuState::Ftw is the abridged tag word
// FXSAVE stores (one bit per register, 1 = valid; cpu/exec_fxsave.cpp), so "all valid"
// is 0xff and "all empty" 0.
namespace mmx {
inline uint64_t read(const CpuState &S, unsigned R) {
  uint64_t V;
  std::memcpy(&V, S.St[R], 8);
  return V;
}
inline void write(CpuState &S, unsigned R, uint64_t V) {
  std::memcpy(S.St[R], &V, 8);
  S.St[R][8] = S.St[R][9] = 0xff;
}
/// The x87 state every MMX instruction but EMMS leaves: TOP = 0, all tags valid.
inline void enter(CpuState &S) {
  S.Fsw &= uint16_t(~0x3800);
  S.Ftw = 0xff;
}
/// Availability of the MMX instructions and the MMX-register forms of SSE instructions
/// (SDM Vol. 3A, Table "Effect of the MP, EM, and TS Flags on x87 FPU/MMX/SSE/SSE2/SSE3
/// Execution"; SDM Vol. 2A, Exception Conditions for Legacy SIMD/MMX Instructions): #UD if
/// CR0.EM = 1, #NM if CR0.TS = 1, then #MF for a pending unmasked x87 exception.
/// Assumption: the pending state is FSW.ES (bit 7), as an x87 instruction leaves it; the
/// MS-DOS compatible reporting (CR0.NE = 0, FERR#) is not modelled and stops the run.
Status checkAvailable(Cpu &C);
/// The same for an SSE instruction with an MMX register operand (MOVQ2DQ, CVTPI2PS, ...):
/// the SSE checks (CR4.OSFXSR included) then the pending x87 exception.
Status checkSseAvailable(Cpu &C);
} // namespace mmx

/// The packed operations of the form  dst = Op(dst, src, imm8)  (cpu/exec_sse_int.cpp and
/// the SSSE3/SSE4 integer files): dst an XMM register, src an XMM register, a 16-byte
/// memory operand (16-byte aligned in legacy SSE encodings) or absent (shift-by-immediate
/// forms). The binder picks execPacked<Op, Source> once; the Op is inlined into it.
using XmmOp = Xmm (*)(const Xmm &, const Xmm &, uint8_t);

enum class Source : uint8_t { Reg, Mem, None };

template <XmmOp Op, Source S> Status execPacked(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  Xmm B{};
  if constexpr (S == Source::Reg)
    B = C.S.XmmReg[I.Reg[1]];
  else if constexpr (S == Source::Mem)
    VMX_TRY((loadOperand<Xmm, true>(C, I, B)));
  Xmm &D = C.S.XmmReg[I.Reg[0]];
  D = Op(D, B, uint8_t(I.Imm));
  return next(C, I);
}

/// The MMX form of a packed operation, on 64-bit MMX registers or an m64 (no alignment
/// rule): MmOp(dst, src, imm8).
using MmOp = uint64_t (*)(uint64_t, uint64_t, uint8_t);

/// Most packed operations act on each lane alone, so their MMX form is the XMM operation
/// on registers whose upper half is zero.
template <XmmOp Op> uint64_t mmLanewise(uint64_t A, uint64_t B, uint8_t Imm) {
  return Op(Xmm{A, 0}, Xmm{B, 0}, Imm).Lo;
}
/// Packs and horizontal adds combine the destination's and the source's lanes in that
/// order: the XMM operation on dst:src as one register gives them in its low half.
template <XmmOp Op> uint64_t mmPaired(uint64_t A, uint64_t B, uint8_t Imm) {
  return Op(Xmm{A, B}, Xmm{0, 0}, Imm).Lo;
}

template <MmOp Op, Source S> Status execMmxPacked(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(mmx::checkAvailable(C));
  uint64_t B = 0;
  if constexpr (S == Source::Reg)
    B = mmx::read(C.S, I.Reg[1]);
  else if constexpr (S == Source::Mem)
    VMX_TRY(loadOperand(C, I, B));
  const uint64_t R = Op(mmx::read(C.S, I.Reg[0]), B, uint8_t(I.Imm));
  mmx::enter(C.S);
  mmx::write(C.S, I.Reg[0], R);
  return next(C, I);
}

template <MmOp Op> bool bindMmxPacked(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &Dst = D.Ops[0], &Src = D.Ops[1];
  if (Dst.Kind != OperandKind::Reg || Dst.Class != RegClass::Mmx)
    return false;
  copyOperandRegs(D, I);
  if (Src.Kind == OperandKind::Mem)
    I.Fn = &execMmxPacked<Op, Source::Mem>;
  else if (Src.Kind == OperandKind::Reg && Src.Class == RegClass::Mmx)
    I.Fn = &execMmxPacked<Op, Source::Reg>;
  else if (Src.Kind == OperandKind::Imm)
    I.Fn = &execMmxPacked<Op, Source::None>;
  else
    return false;
  I.Cost = costOf(CostClass::Sse);
  return true;
}

/// Binds the XMM form of a packed operation, or its MMX form (Mm) when the operands are
/// MMX registers.
template <XmmOp Op, MmOp Mm = &mmLanewise<Op>>
bool bindPacked(const DecodeInfo &D, DecodedInsn &I) {
  if (usesMmx(D))
    return bindMmxPacked<Mm>(D, I);
  const OperandInfo &Dst = D.Ops[0], &Src = D.Ops[1];
  if (Dst.Kind != OperandKind::Reg || Dst.Class != RegClass::Xmm)
    return false;
  copyOperandRegs(D, I);
  if (Src.Kind == OperandKind::Mem)
    I.Fn = &execPacked<Op, Source::Mem>;
  else if (Src.Kind == OperandKind::Reg && Src.Class == RegClass::Xmm)
    I.Fn = &execPacked<Op, Source::Reg>;
  else if (Src.Kind == OperandKind::Imm)
    I.Fn = &execPacked<Op, Source::None>;
  else
    return false;
  I.Cost = costOf(CostClass::Sse);
  return true;
}

/// Lane-wise Fn(a, b) over lanes of type L.
template <typename L, typename F> inline Xmm zipLanes(const Xmm &A, const Xmm &B, F Fn) {
  Lanes<L> X = lanes<L>(A), Y = lanes<L>(B);
  for (unsigned K = 0; K < Lanes<L>::N; ++K)
    X.V[K] = L(Fn(X.V[K], Y.V[K]));
  return toXmm(X);
}

/// V clamped to the range of Narrow (signed or unsigned saturation).
template <typename Wide, typename Narrow> inline Narrow saturate(Wide V) {
  constexpr Wide Lo = std::numeric_limits<Narrow>::min(), Hi = std::numeric_limits<Narrow>::max();
  return Narrow(std::clamp<Wide>(V, Lo, Hi));
}

} // namespace vmxsim::sse
