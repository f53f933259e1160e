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

/// True when an operand of the decoded instruction is an MMX register: the MMX forms of
/// the packed-integer mnemonics are not modelled.
inline bool usesMmx(const DecodeInfo &D) {
  for (unsigned K = 0; K < D.NumOps; ++K)
    if (D.Ops[K].Kind == OperandKind::Reg && D.Ops[K].Class == RegClass::Mmx)
      return true;
  return false;
}

/// Handler for the MMX forms: an emulator gap, reported loudly (never a silent #UD).
Status execMmxUnimplemented(Cpu &C, const DecodedInsn &I);

/// Binds the MMX form of a packed-integer mnemonic to execMmxUnimplemented.
inline bool bindMmx(DecodedInsn &I) {
  I.Fn = &execMmxUnimplemented;
  I.Cost = costOf(CostClass::Sse);
  return true;
}

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

template <XmmOp Op> bool bindPacked(const DecodeInfo &D, DecodedInsn &I) {
  if (usesMmx(D))
    return bindMmx(I);
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
