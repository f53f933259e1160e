// Exchange and compare-exchange: XCHG, XADD, CMPXCHG, CMPXCHG8B, CMPXCHG16B (SDM Vol. 2A,
// CMPXCHG; CMPXCHG8B/CMPXCHG16B; Vol. 2B, XADD; XCHG). One processor executes at a time,
// so a locked read-modify-write is a plain one: the operand is translated for writing
// first, then read and written through the same mapping.
#include "cpu/exec.h"

namespace vmxsim {

namespace {

template <typename T, bool IsMem> Status execXchg(Cpu &C, const DecodedInsn &I) {
  if constexpr (IsMem) {
    // XCHG with memory is always locked (SDM Vol. 2B, XCHG); operand 0 is the memory.
    RmwRef Ref;
    VMX_TRY(mapRmw<T>(C, SegReg(I.Seg), effectiveAddress(C, I), Ref));
    T M;
    VMX_TRY(rmwRead(C, Ref, M));
    VMX_TRY(rmwWrite(C, Ref, getReg<T>(C, I.Reg[1])));
    setReg<T>(C, I.Reg[1], M);
  } else {
    T A = getReg<T>(C, I.Reg[0]), B = getReg<T>(C, I.Reg[1]);
    setReg<T>(C, I.Reg[0], B);
    setReg<T>(C, I.Reg[1], A);
  }
  return next(C, I);
}

// XADD (SDM Vol. 2B): TEMP <- SRC + DEST; SRC <- DEST; DEST <- TEMP.
template <typename T, bool IsMem> Status execXadd(Cpu &C, const DecodedInsn &I) {
  T Src = getReg<T>(C, I.Reg[1]);
  if constexpr (IsMem) {
    RmwRef Ref;
    VMX_TRY(mapRmw<T>(C, SegReg(I.Seg), effectiveAddress(C, I), Ref));
    T D;
    VMX_TRY(rmwRead(C, Ref, D));
    T R = T(D + Src);
    VMX_TRY(rmwWrite(C, Ref, R));
    setArithFlags(C, flagsAdd<T>(D, Src, R, false));
    setReg<T>(C, I.Reg[1], D);
  } else {
    T D = getReg<T>(C, I.Reg[0]);
    T R = T(D + Src);
    setArithFlags(C, flagsAdd<T>(D, Src, R, false));
    setReg<T>(C, I.Reg[1], D);
    setReg<T>(C, I.Reg[0], R); // same register for both: the sum wins
  }
  return next(C, I);
}

// CMPXCHG (SDM Vol. 2A): compares the accumulator with DEST; equal: DEST <- SRC, else
// the accumulator <- DEST. A memory destination is written in both cases (with its own
// value on failure: "the destination operand is written back if the comparison fails").
// A register destination is written only on success, so a failing 32-bit CMPXCHG leaves
// the upper half of the destination register as it was, and a succeeding one leaves the
// upper half of RAX (processors behave so; the pseudocode's DEST <- TEMP is a no-op for
// them).
template <typename T, bool IsMem> Status execCmpxchg(Cpu &C, const DecodedInsn &I) {
  const T Acc = getReg<T>(C, RAX), Src = getReg<T>(C, I.Reg[1]);
  T D;
  RmwRef Ref;
  if constexpr (IsMem) {
    VMX_TRY(mapRmw<T>(C, SegReg(I.Seg), effectiveAddress(C, I), Ref));
    VMX_TRY(rmwRead(C, Ref, D));
  } else {
    D = getReg<T>(C, I.Reg[0]);
  }
  const bool Equal = Acc == D;
  if constexpr (IsMem)
    VMX_TRY(rmwWrite(C, Ref, Equal ? Src : D));
  setArithFlags(C, flagsSub<T>(Acc, D, T(Acc - D), false));
  if (Equal) {
    if constexpr (!IsMem)
      setReg<T>(C, I.Reg[0], Src);
  } else {
    setReg<T>(C, RAX, D);
  }
  return next(C, I);
}

struct U128 {
  uint64_t Lo, Hi;
};

// CMPXCHG8B m64 / CMPXCHG16B m128 (SDM Vol. 2A): compares EDX:EAX (RDX:RAX) with the
// memory operand; equal: memory <- ECX:EBX (RCX:RBX), ZF=1; else EDX:EAX <- memory,
// ZF=0. Memory is written in both cases. CMPXCHG16B requires a 16-byte aligned operand:
// #GP(0) otherwise.
template <bool Is16> Status execCmpxchgNb(Cpu &C, const DecodedInsn &I) {
  using Half = std::conditional_t<Is16, uint64_t, uint32_t>;
  using Whole = std::conditional_t<Is16, U128, uint64_t>;
  const uint64_t Ea = effectiveAddress(C, I);
  if constexpr (Is16) {
    uint64_t La;
    VMX_TRY(segmentToLinear(C, SegReg(I.Seg), Ea, 16, Access::Write, La));
    if (La & 15)
      return C.raiseGp(0);
  }
  RmwRef Ref;
  VMX_TRY(mapRmw<Whole>(C, SegReg(I.Seg), Ea, Ref));
  Whole M;
  VMX_TRY(rmwRead(C, Ref, M));
  Half Lo, Hi;
  if constexpr (Is16) {
    Lo = M.Lo;
    Hi = M.Hi;
  } else {
    Lo = Half(M);
    Hi = Half(M >> 32);
  }
  const bool Equal = Lo == getReg<Half>(C, RAX) && Hi == getReg<Half>(C, RDX);
  Whole New = M;
  if (Equal) {
    if constexpr (Is16)
      New = U128{C.S.Gpr[RBX], C.S.Gpr[RCX]};
    else
      New = (uint64_t(getReg<uint32_t>(C, RCX)) << 32) | getReg<uint32_t>(C, RBX);
  }
  VMX_TRY(rmwWrite(C, Ref, New));
  if (Equal) {
    C.S.Rflags |= rflags::ZF;
  } else {
    C.S.Rflags &= ~rflags::ZF;
    setReg<Half>(C, RAX, Lo);
    setReg<Half>(C, RDX, Hi);
  }
  return next(C, I);
}

/// LOCK is allowed on these only with a memory destination (SDM Vol. 2A, LOCK).
bool lockOk(const DecodeInfo &D) {
  return !(D.Prefixes & insnflag::Lock) || D.Ops[0].Kind == OperandKind::Mem;
}

} // namespace

bool bindXchg(const DecodeInfo &D, DecodedInsn &I) {
  // The memory operand may be either operand; normalise it to operand 0.
  DecodeInfo N = D;
  if (N.Ops[1].Kind == OperandKind::Mem)
    std::swap(N.Ops[0], N.Ops[1]);
  if (!lockOk(N))
    return false;
  copyOperandRegs(N, I);
  const bool Mem = N.Ops[0].Kind == OperandKind::Mem;
  const unsigned Size = N.Ops[0].SizeBytes;
  I.Fn = Mem ? VMX_BY_SIZE(Size, execXchg, true) : VMX_BY_SIZE(Size, execXchg, false);
  I.Cost = costOf(Mem ? CostClass::Memory : CostClass::Simple);
  return true;
}

bool bindXadd(const DecodeInfo &D, DecodedInsn &I) {
  if (!lockOk(D))
    return false;
  copyOperandRegs(D, I);
  const bool Mem = D.Ops[0].Kind == OperandKind::Mem;
  I.Fn = Mem ? VMX_BY_SIZE(D.Ops[0].SizeBytes, execXadd, true)
             : VMX_BY_SIZE(D.Ops[0].SizeBytes, execXadd, false);
  I.Cost = costOf(Mem ? CostClass::Memory : CostClass::Simple);
  return true;
}

bool bindCmpxchg(const DecodeInfo &D, DecodedInsn &I) {
  if (!lockOk(D))
    return false;
  copyOperandRegs(D, I);
  const bool Mem = D.Ops[0].Kind == OperandKind::Mem;
  I.Fn = Mem ? VMX_BY_SIZE(D.Ops[0].SizeBytes, execCmpxchg, true)
             : VMX_BY_SIZE(D.Ops[0].SizeBytes, execCmpxchg, false);
  I.Cost = costOf(Mem ? CostClass::Memory : CostClass::Simple);
  return true;
}

bool bindCmpxchg8b(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Ops[0].Kind != OperandKind::Mem)
    return false;
  I.Fn = &execCmpxchgNb<false>;
  I.Cost = costOf(CostClass::Memory);
  return true;
}
bool bindCmpxchg16b(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Ops[0].Kind != OperandKind::Mem)
    return false;
  I.Fn = &execCmpxchgNb<true>;
  I.Cost = costOf(CostClass::Memory);
  return true;
}

} // namespace vmxsim
