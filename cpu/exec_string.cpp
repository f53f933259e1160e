// String instructions MOVS STOS LODS CMPS SCAS in every element size, with REP, REPE and
// REPNE (SDM Vol. 2B, MOVS/MOVSB/MOVSW/MOVSD/MOVSQ, STOS, LODS, CMPS, SCAS; Vol. 2B,
// REP/REPE/REPZ/REPNE/REPNZ).
//
// The source is seg:rSI (DS unless overridden), the destination ES:rDI (never
// overridable); rSI/rDI/rCX have the address size. A REP string instruction runs its
// iterations in a loop inside the handler and is restartable like the hardware: after
// each iteration the registers reflect the completed iterations, a fault leaves RIP at
// the instruction, and when the virtual clock reaches the run loop's deadline the handler
// returns early with RIP unchanged (an interrupt window between iterations, SDM Vol. 2B,
// REP: "...interrupts are recognized between iterations"). Each iteration costs
// CostClass::String; the run loop adds the instruction's own cost (CostClass::Simple)
// once.
#include "cpu/exec.h"

#include <algorithm>
#include <cstring>

namespace vmxsim {

namespace {

enum class StrOp : uint8_t { Movs, Stos, Lods, Cmps, Scas };
enum class RepKind : uint8_t { None, Rep, Repe, Repne };

template <StrOp Op> inline constexpr bool kUsesSrc =
    Op == StrOp::Movs || Op == StrOp::Lods || Op == StrOp::Cmps;
template <StrOp Op> inline constexpr bool kUsesDst = Op != StrOp::Lods;

/// One iteration; registers other than rSI/rDI (and RAX for LODS, flags for CMPS/SCAS)
/// are untouched. Nothing is committed unless every access succeeded.
template <typename T, typename A, StrOp Op>
inline Status stringStep(Cpu &C, const DecodedInsn &I, int64_t Delta) {
  const A Si = getReg<A>(C, RSI), Di = getReg<A>(C, RDI);
  T Src = 0, Dst = 0;
  if constexpr (kUsesSrc<Op>)
    VMX_TRY(readMem(C, SegReg(I.Seg), Si, Src));
  if constexpr (Op == StrOp::Movs)
    VMX_TRY(writeMem(C, SegReg::ES, Di, Src));
  else if constexpr (Op == StrOp::Stos)
    VMX_TRY(writeMem(C, SegReg::ES, Di, getReg<T>(C, RAX)));
  else if constexpr (Op == StrOp::Cmps || Op == StrOp::Scas)
    VMX_TRY(readMem(C, SegReg::ES, Di, Dst));
  if constexpr (Op == StrOp::Lods)
    setReg<T>(C, RAX, Src);
  if constexpr (Op == StrOp::Cmps) {
    T R = T(Src - Dst); // CMPS compares [rSI] with [rDI]: temp = SRC1 - SRC2
    setArithFlags(C, flagsSub<T>(Src, Dst, R, false));
  } else if constexpr (Op == StrOp::Scas) {
    T Acc = getReg<T>(C, RAX);
    setArithFlags(C, flagsSub<T>(Acc, Dst, T(Acc - Dst), false));
  }
  if constexpr (kUsesSrc<Op>)
    setReg<A>(C, RSI, A(Si + Delta));
  if constexpr (kUsesDst<Op>)
    setReg<A>(C, RDI, A(Di + Delta));
  return Status::Ok;
}

/// Host pointer for [La, La+Bytes) when one TLB entry maps it (same page), else null. A
/// destination in a page holding decoded code qualifies when its 64-byte lines hold none
/// (Mmu::writeHostBesideCode; nothing decodes during the chunk, so they stay free of code).
inline uint8_t *hostRange(Cpu &C, uint64_t La, uint64_t Bytes, bool Write) {
  if ((La & 0xfff) + Bytes > kPageSize)
    return nullptr;
  return Write ? C.Mmu.writeHostBesideCode(Gla(La), unsigned(Bytes), false)
               : C.Mmu.readHost(Gla(La), unsigned(Bytes), false);
}

/// Fast path for REP MOVS/STOS with DF=0: runs up to Count iterations that stay inside
/// the current source and destination pages through host pointers, with exactly the
/// effect of the element-by-element loop (overlapping moves copy forward element by
/// element). Returns the number of iterations done (0 when the pages are not mapped in
/// the TLB: the caller then takes the slow step, which fills the TLB).
template <typename T, typename A, StrOp Op>
inline uint64_t fastChunk(Cpu &C, const DecodedInsn &I, uint64_t Count) {
  const A Si = getReg<A>(C, RSI), Di = getReg<A>(C, RDI);
  // Stay clear of address-size wrap-around: the slow step handles it.
  const uint64_t AMax = sizeof(A) == 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * sizeof(A))) - 1;
  uint64_t DstLa;
  uint64_t N = std::min<uint64_t>(Count, (kPageSize - (Di & 0xfff)) / sizeof(T));
  if (Op == StrOp::Movs)
    N = std::min<uint64_t>(N, (kPageSize - (Si & 0xfff)) / sizeof(T));
  if (N == 0 || uint64_t(Di) + N * sizeof(T) - 1 > AMax ||
      (Op == StrOp::Movs && uint64_t(Si) + N * sizeof(T) - 1 > AMax))
    return 0;
  const uint64_t Bytes = N * sizeof(T);
  if (segmentToLinear(C, SegReg::ES, Di, unsigned(std::min<uint64_t>(Bytes, 0xffffffffu)),
                      Access::Write, DstLa) != Status::Ok ||
      ((DstLa & 0xfff) + Bytes > kPageSize))
    return 0;
  uint8_t *Dst = hostRange(C, DstLa, Bytes, true);
  if (!Dst)
    return 0;
  if constexpr (Op == StrOp::Movs) {
    uint64_t SrcLa;
    if (segmentToLinear(C, SegReg(I.Seg), Si, unsigned(std::min<uint64_t>(Bytes, 0xffffffffu)),
                        Access::Read, SrcLa) != Status::Ok ||
        ((SrcLa & 0xfff) + Bytes > kPageSize))
      return 0;
    const uint8_t *Src = hostRange(C, SrcLa, Bytes, false);
    if (!Src)
      return 0;
    if (Dst > Src && Dst < Src + Bytes) {
      // Forward overlapping copy: each element reads what earlier iterations wrote.
      for (uint64_t K = 0; K < N; ++K)
        std::memmove(Dst + K * sizeof(T), Src + K * sizeof(T), sizeof(T));
    } else {
      std::memmove(Dst, Src, Bytes);
    }
    setReg<A>(C, RSI, A(Si + Bytes));
  } else {
    T V = getReg<T>(C, RAX);
    if constexpr (sizeof(T) == 1) {
      std::memset(Dst, V, Bytes);
    } else {
      for (uint64_t K = 0; K < N; ++K)
        std::memcpy(Dst + K * sizeof(T), &V, sizeof(T));
    }
  }
  setReg<A>(C, RDI, A(Di + Bytes));
  return N;
}

/// A REP string instruction stopped between iterations, RIP still on it. An event taken
/// there pushes RF = 1, so that an instruction breakpoint on the REP is not taken again
/// when it resumes (SDM Vol. 3B, "Instruction-Breakpoint Exception Condition": "for any
/// interrupt arriving after any iteration of a repeated string instruction but the last
/// iteration, the value pushed for RF is 1"); the resumed iteration clears it.
inline Status resumeLater(Cpu &C) {
  C.S.Rflags |= rflags::RF;
  return Status::Ok;
}

template <typename T, typename A, StrOp Op, RepKind Rep>
Status execString(Cpu &C, const DecodedInsn &I) {
  const int64_t Delta = (C.S.Rflags & rflags::DF) ? -int64_t(sizeof(T)) : int64_t(sizeof(T));
  if constexpr (Rep == RepKind::None) {
    VMX_TRY((stringStep<T, A, Op>(C, I, Delta)));
    return next(C, I);
  } else {
    constexpr uint8_t Cost = costOf(CostClass::String);
    uint64_t Count = getReg<A>(C, RCX);
    // A count of 0 in ECX (address size 32) still writes ECX on Intel processors, which
    // zeroes RCX[63:32] in 64-bit mode, and MOVS writes ESI and EDI, STOS EDI, as they are
    // (zeroing bits 63:32); LODS, CMPS and SCAS leave RSI and RDI. Measured on an Intel
    // Xeon host (the oracle test of tests/cpu/insn_oracle_test.cpp, and
    // RepWithZeroEcxWritesWhatIntelsWrite); the SDM's REP pseudocode does not say, and AMD
    // processors leave all three as they were. With a count above 0 the iterations write
    // them anyway.
    if constexpr (sizeof(A) == 4)
      if (Count == 0) {
        setReg<A>(C, RCX, 0);
        if constexpr (Op == StrOp::Movs)
          setReg<A>(C, RSI, getReg<A>(C, RSI));
        if constexpr (Op == StrOp::Movs || Op == StrOp::Stos)
          setReg<A>(C, RDI, getReg<A>(C, RDI));
      }
    while (Count != 0) {
      if constexpr (Op == StrOp::Movs || Op == StrOp::Stos) {
        if (Delta > 0 && Count > 1) {
          // Never run past the deadline: stop where the slow loop would have stopped.
          uint64_t Budget = C.WindowDue > C.Cycles ? (C.WindowDue - C.Cycles - 1) / Cost + 1 : 1;
          if (uint64_t N = fastChunk<T, A, Op>(C, I, std::min(Count, Budget))) {
            Count -= N;
            setReg<A>(C, RCX, A(Count));
            C.Cycles += N * Cost;
            if (Count == 0)
              break;
            if (C.Cycles >= C.WindowDue)
              return resumeLater(C); // interrupt window: resume at this instruction
            continue;
          }
        }
      }
      VMX_TRY((stringStep<T, A, Op>(C, I, Delta)));
      setReg<A>(C, RCX, A(--Count));
      C.Cycles += Cost;
      if (Count == 0)
        break;
      if constexpr (Rep == RepKind::Repe)
        if (!(C.S.Rflags & rflags::ZF))
          break;
      if constexpr (Rep == RepKind::Repne)
        if (C.S.Rflags & rflags::ZF)
          break;
      // The window is due now after an iteration that matched a data breakpoint too
      // (cpu/debug.cpp): its trap follows that iteration.
      if (C.Cycles >= C.WindowDue)
        return resumeLater(C); // interrupt window: resume at this instruction
    }
    return next(C, I);
  }
}

template <typename T, StrOp Op, RepKind Rep> Handler pickByAddr(unsigned AddrSize) {
  return AddrSize == 2   ? &execString<T, uint16_t, Op, Rep>
         : AddrSize == 4 ? &execString<T, uint32_t, Op, Rep>
                         : &execString<T, uint64_t, Op, Rep>;
}
template <StrOp Op, RepKind Rep> Handler pickBySize(unsigned Size, unsigned AddrSize) {
  switch (Size) {
  case 1: return pickByAddr<uint8_t, Op, Rep>(AddrSize);
  case 2: return pickByAddr<uint16_t, Op, Rep>(AddrSize);
  case 4: return pickByAddr<uint32_t, Op, Rep>(AddrSize);
  default: return pickByAddr<uint64_t, Op, Rep>(AddrSize);
  }
}

template <StrOp Op> bool bindString(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Prefixes & insnflag::Lock)
    return false;
  // The source segment (after an override) is that of the rSI operand: operand 1 of
  // MOVS and LODS, operand 0 of CMPS; the destination is always ES.
  if constexpr (kUsesSrc<Op>)
    I.Seg = uint8_t(D.Ops[Op == StrOp::Cmps ? 0 : 1].Seg);
  else
    I.Seg = uint8_t(SegReg::ES);
  const unsigned Size = D.OpSize, Addr = D.AddrSize;
  const bool Rep = D.Prefixes & insnflag::Rep, Repne = D.Prefixes & insnflag::Repne;
  constexpr bool Compares = Op == StrOp::Cmps || Op == StrOp::Scas;
  if (!Rep && !Repne)
    I.Fn = pickBySize<Op, RepKind::None>(Size, Addr);
  else if (!Compares)
    I.Fn = pickBySize<Op, RepKind::Rep>(Size, Addr); // F2 acts as REP here
  else if (Repne)
    I.Fn = pickBySize<Op, RepKind::Repne>(Size, Addr);
  else
    I.Fn = pickBySize<Op, RepKind::Repe>(Size, Addr);
  I.Flags &= ~insnflag::HasMem;
  I.Cost = costOf((Rep || Repne) ? CostClass::Simple : CostClass::String);
  return true;
}

} // namespace

bool bindMovsString(const DecodeInfo &D, DecodedInsn &I) { return bindString<StrOp::Movs>(D, I); }
bool bindStos(const DecodeInfo &D, DecodedInsn &I) { return bindString<StrOp::Stos>(D, I); }
bool bindLods(const DecodeInfo &D, DecodedInsn &I) { return bindString<StrOp::Lods>(D, I); }
bool bindScas(const DecodeInfo &D, DecodedInsn &I) { return bindString<StrOp::Scas>(D, I); }
bool bindCmpsString(const DecodeInfo &D, DecodedInsn &I) { return bindString<StrOp::Cmps>(D, I); }

bool bindCmpsd(const DecodeInfo &D, DecodedInsn &I) {
  // Zydis names the SSE2 scalar compare and the string compare A7 (32-bit operand size)
  // both CMPSD; the XMM form belongs to the SSE family (see binders.h).
  if (D.NumOps > 0 && D.Ops[0].Kind == OperandKind::Reg && D.Ops[0].Class == RegClass::Xmm)
    return bindCmpsdXmm(D, I);
  return bindCmpsString(D, I);
}

} // namespace vmxsim
