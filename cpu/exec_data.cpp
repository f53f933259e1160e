// Data movement: MOV (register, memory, immediate, moffs), LEA, PUSH, POP, NOP, CMOVcc,
// MOVZX/MOVSX/MOVSXD, CBW/CWDE/CDQE, CWD/CDQ/CQO, XLAT, PUSHA/POPA (SDM Vol. 2,
// instruction pages of each). XCHG and the compare-exchanges are in exec_atomic.cpp.
#include "cpu/exec.h"
#include "cpu/jit/jit_form.h"

namespace vmxsim {

namespace {

enum class Form : uint8_t { RR, RM, MR, RI, MI };

// Flat: a flat 64-bit memory operand (cpu/memory.h, flat64Operand).
template <typename T, Form F, bool Flat = false> Status execMov(Cpu &C, const DecodedInsn &I) {
  if constexpr (F == Form::RR) {
    setReg<T>(C, I.Reg[0], getReg<T>(C, I.Reg[1]));
  } else if constexpr (F == Form::RI) {
    setReg<T>(C, I.Reg[0], T(I.Imm));
  } else if constexpr (F == Form::RM) {
    T V;
    VMX_TRY(readMemOp<Flat>(C, I, V));
    setReg<T>(C, I.Reg[0], V);
  } else if constexpr (F == Form::MR) {
    VMX_TRY(writeMemOp<Flat>(C, I, getReg<T>(C, I.Reg[1])));
  } else {
    VMX_TRY(writeMemOp<Flat>(C, I, T(I.Imm)));
  }
  return nextOp<Flat>(C, I);
}

template <typename T, bool Flat = false> Status execLea(Cpu &C, const DecodedInsn &I) {
  setReg<T>(C, I.Reg[0], T(Flat ? flat64Address(C, I) : effectiveAddress(C, I)));
  return nextOp<Flat>(C, I);
}

template <typename T, bool IsMem>
[[gnu::noinline]] Status execPush(Cpu &C, const DecodedInsn &I) {
  T V;
  if constexpr (IsMem)
    VMX_TRY(readMem(C, SegReg(I.Seg), effectiveAddress(C, I), V));
  else
    V = getReg<T>(C, I.Reg[0]);
  VMX_TRY(push<T>(C, V));
  return next(C, I);
}
template <typename T> Status execPushImm(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(push<T>(C, T(I.Imm)));
  return next(C, I);
}

template <typename T, bool IsMem>
[[gnu::noinline]] Status execPop(Cpu &C, const DecodedInsn &I) {
  T V;
  VMX_TRY(peek(C, V));
  if constexpr (IsMem) {
    // POP to memory computes the address with RSP already incremented (SDM Vol. 2B,
    // POP: "If the ESP register is used as a base register ... computed after").
    uint64_t OldSp = C.S.Gpr[RSP];
    popCommit(C, sizeof(T));
    Status St = writeMem(C, SegReg(I.Seg), effectiveAddress(C, I), V);
    if (St != Status::Ok) {
      C.S.Gpr[RSP] = OldSp;
      return St;
    }
  } else {
    popCommit(C, sizeof(T));
    setReg<T>(C, I.Reg[0], V); // POP RSP: the popped value wins
  }
  return next(C, I);
}

// PUSH r64 and POP r64 (64-bit mode: cpu/exec.h, "64-bit operand size"): a store or load
// that hits the TLB, else the generic handler, which starts over in the architectural
// order (nothing is committed before the access). PUSH RSP stores the old value.
Status execPushReg64(Cpu &C, const DecodedInsn &I) {
  const uint64_t Sp = C.S.Gpr[RSP] - 8;
  if (uint8_t *H; stackWriteHit64(C, Sp, H)) [[likely]] {
    std::memcpy(H, &C.S.Gpr[I.Reg[0]], 8);
    C.S.Gpr[RSP] = Sp;
    return next64(C, I);
  }
  return execPush<uint64_t, false>(C, I);
}
Status execPopReg64(Cpu &C, const DecodedInsn &I) {
  const uint64_t Sp = C.S.Gpr[RSP];
  if (const uint8_t *H; stackReadHit64(C, Sp, H)) [[likely]] {
    uint64_t V;
    std::memcpy(&V, H, 8);
    C.S.Gpr[RSP] = Sp + 8;
    C.S.Gpr[I.Reg[0]] = V; // POP RSP: the popped value wins
    return next64(C, I);
  }
  return execPop<uint64_t, false>(C, I);
}

Status execNop(Cpu &C, const DecodedInsn &I) { return next(C, I); }

// CMOVcc (SDM Vol. 2A): the source is read whatever the condition (a memory source may
// fault), and a 32-bit destination is written (zero-extended) even when the condition
// is false.
template <typename T, bool IsMem> Status execCmov(Cpu &C, const DecodedInsn &I) {
  T V;
  VMX_TRY((readOp<T, IsMem, 1>(C, I, V)));
  if (testCond(C.S.Rflags, I.Cond))
    setReg<T>(C, I.Reg[0], V);
  else if constexpr (sizeof(T) == 4)
    setReg<T>(C, I.Reg[0], getReg<T>(C, I.Reg[0]));
  return next(C, I);
}

// MOVZX / MOVSX / MOVSXD (SDM Vol. 2B): Src is extended to Dst.
template <typename Dst, typename Src, bool Signed, bool IsMem, bool Flat = false>
Status execMovExt(Cpu &C, const DecodedInsn &I) {
  Src V;
  VMX_TRY((readOp<Src, IsMem, 1, Flat>(C, I, V)));
  if constexpr (Signed)
    setReg<Dst>(C, I.Reg[0], Dst(std::make_signed_t<Dst>(std::make_signed_t<Src>(V))));
  else
    setReg<Dst>(C, I.Reg[0], Dst(V));
  return nextOp<Flat>(C, I);
}

// CBW/CWDE/CDQE (SDM Vol. 2A): sign-extends the low half of the accumulator into it.
template <typename T> Status execCbw(Cpu &C, const DecodedInsn &I) {
  using Half = std::conditional_t<sizeof(T) == 2, int8_t,
                                  std::conditional_t<sizeof(T) == 4, int16_t, int32_t>>;
  setReg<T>(C, RAX, T(std::make_signed_t<T>(Half(getReg<T>(C, RAX)))));
  return next(C, I);
}
// CWD/CDQ/CQO (SDM Vol. 2A): rDX <- the sign of rAX.
template <typename T> Status execCwd(Cpu &C, const DecodedInsn &I) {
  setReg<T>(C, RDX, (getReg<T>(C, RAX) & kMsb<T>) ? T(~T(0)) : T(0));
  return next(C, I);
}

// XLAT (SDM Vol. 2B): AL <- [seg:rBX + zero-extended AL], in the address size.
Status execXlat(Cpu &C, const DecodedInsn &I) {
  uint64_t Off = maskToSize(C.S.Gpr[RBX] + getReg<uint8_t>(C, RAX), I.AddrSize);
  uint8_t V;
  VMX_TRY(readMem(C, SegReg(I.Seg), Off, V));
  setReg<uint8_t>(C, RAX, V);
  return next(C, I);
}

// PUSHA/PUSHAD (SDM Vol. 2B): pushes AX CX DX BX, the original SP, BP SI DI. All eight
// stores are done before SP is committed, so a fault leaves SP unchanged.
template <typename T> Status execPusha(Cpu &C, const DecodedInsn &I) {
  const unsigned S = stackAddrSize(C);
  const uint64_t Sp = C.S.Gpr[RSP];
  for (unsigned K = 0; K < 8; ++K) {
    uint64_t Slot = maskToSize(Sp - (K + 1) * sizeof(T), S);
    VMX_TRY(writeMem(C, SegReg::SS, Slot, getReg<T>(C, uint8_t(K))));
  }
  setStackPointer(C, Sp - 8 * sizeof(T));
  return next(C, I);
}
// POPA/POPAD (SDM Vol. 2B): pops DI SI BP, skips the saved SP, then BX DX CX AX.
template <typename T> Status execPopa(Cpu &C, const DecodedInsn &I) {
  T V[8];
  for (unsigned K = 0; K < 8; ++K)
    VMX_TRY(peek(C, V[K], K * sizeof(T)));
  for (unsigned K = 0; K < 8; ++K)
    if (7 - K != RSP)
      setReg<T>(C, uint8_t(7 - K), V[K]);
  popCommit(C, 8 * sizeof(T));
  return next(C, I);
}

} // namespace

bool bindMov(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &Dst = D.Ops[0], &Src = D.Ops[1];
  // MOV to/from segment, control and debug registers are system instructions.
  if ((Dst.Kind == OperandKind::Reg && Dst.Class != RegClass::Gpr) ||
      (Src.Kind == OperandKind::Reg && Src.Class != RegClass::Gpr))
    return bindMovSystem(D, I);
  copyOperandRegs(D, I);
  unsigned Size = Dst.SizeBytes;
  const bool Flat = I.hasMem() && flat64Operand(D.Mode, I);
  if (Dst.Kind == OperandKind::Reg) {
    if (Src.Kind == OperandKind::Reg)
      I.Fn = VMX_BY_SIZE(Size, execMov, Form::RR);
    else if (Src.Kind == OperandKind::Imm)
      I.Fn = VMX_BY_SIZE(Size, execMov, Form::RI);
    else
      I.Fn = Flat ? VMX_BY_SIZE(Size, execMov, Form::RM, true)
                  : VMX_BY_SIZE(Size, execMov, Form::RM);
  } else if (Src.Kind == OperandKind::Imm) {
    I.Fn = Flat ? VMX_BY_SIZE(Size, execMov, Form::MI, true)
                : VMX_BY_SIZE(Size, execMov, Form::MI);
  } else {
    I.Fn = Flat ? VMX_BY_SIZE(Size, execMov, Form::MR, true)
                : VMX_BY_SIZE(Size, execMov, Form::MR);
  }
  I.Cost = costOf(I.hasMem() ? CostClass::Memory : CostClass::Simple);
  return true;
}

bool bindLea(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Ops[1].Kind != OperandKind::Mem)
    return false;
  copyOperandRegs(D, I);
  const bool Flat = flat64Operand(D.Mode, I);
  I.Flags &= ~insnflag::HasMem; // LEA computes an address; it does not access memory
  I.Fn = Flat ? VMX_BY_SIZE(D.Ops[0].SizeBytes, execLea, true)
              : VMX_BY_SIZE(D.Ops[0].SizeBytes, execLea);
  I.Cost = costOf(CostClass::Simple);
  return true;
}

bool bindPush(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &Src = D.Ops[0];
  if (Src.Kind == OperandKind::Reg && Src.Class != RegClass::Gpr)
    return bindPushSeg(D, I);
  copyOperandRegs(D, I);
  unsigned Size = D.OpSize;
  if (Size == 1)
    return false;
  if (Src.Kind == OperandKind::Imm)
    I.Fn = Size == 2 ? &execPushImm<uint16_t> : Size == 4 ? &execPushImm<uint32_t>
                                                          : &execPushImm<uint64_t>;
  else if (Src.Kind == OperandKind::Mem)
    I.Fn = Size == 2 ? &execPush<uint16_t, true> : Size == 4 ? &execPush<uint32_t, true>
                                                             : &execPush<uint64_t, true>;
  else
    I.Fn = Size == 2 ? &execPush<uint16_t, false> : Size == 4 ? &execPush<uint32_t, false>
                                                              : &execPushReg64;
  I.Cost = costOf(CostClass::Memory);
  return true;
}

bool bindPop(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &Dst = D.Ops[0];
  if (Dst.Kind == OperandKind::Reg && Dst.Class != RegClass::Gpr)
    return bindPopSeg(D, I);
  copyOperandRegs(D, I);
  unsigned Size = D.OpSize;
  if (Size == 1)
    return false;
  if (Dst.Kind == OperandKind::Mem)
    I.Fn = Size == 2 ? &execPop<uint16_t, true> : Size == 4 ? &execPop<uint32_t, true>
                                                            : &execPop<uint64_t, true>;
  else
    I.Fn = Size == 2 ? &execPop<uint16_t, false> : Size == 4 ? &execPop<uint32_t, false>
                                                             : &execPopReg64;
  I.Cost = costOf(CostClass::Memory);
  return true;
}

bool bindNop(const DecodeInfo &, DecodedInsn &I) {
  I.Flags &= ~insnflag::HasMem; // multi-byte NOP has a ModRM memory form it never reads
  I.Fn = &execNop;
  I.Cost = costOf(CostClass::Simple);
  return true;
}

bool bindCmovcc(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Prefixes & insnflag::Lock)
    return false;
  copyOperandRegs(D, I);
  I.Cond = D.Opcode & 0xf; // 0F 40+cc
  const bool Mem = D.Ops[1].Kind == OperandKind::Mem;
  I.Fn = Mem ? VMX_BY_SIZE(D.Ops[0].SizeBytes, execCmov, true)
             : VMX_BY_SIZE(D.Ops[0].SizeBytes, execCmov, false);
  I.Cost = costOf(Mem ? CostClass::Memory : CostClass::Simple);
  return true;
}

template <typename Dst, typename Src, bool Signed>
static Handler pickMovExtFrom(bool Mem, bool Flat) {
  return !Mem ? &execMovExt<Dst, Src, Signed, false>
         : Flat ? &execMovExt<Dst, Src, Signed, true, true>
                : &execMovExt<Dst, Src, Signed, true>;
}
template <typename Dst, bool Signed>
static Handler pickMovExt(unsigned SrcSize, bool Mem, bool Flat) {
  switch (SrcSize) {
  case 1: return pickMovExtFrom<Dst, uint8_t, Signed>(Mem, Flat);
  case 2: return pickMovExtFrom<Dst, uint16_t, Signed>(Mem, Flat);
  case 4: return pickMovExtFrom<Dst, uint32_t, Signed>(Mem, Flat);
  default: return pickMovExtFrom<Dst, uint64_t, Signed>(Mem, Flat);
  }
}

template <bool Signed> static bool bindMovExt(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Prefixes & insnflag::Lock)
    return false;
  copyOperandRegs(D, I);
  const bool Mem = D.Ops[1].Kind == OperandKind::Mem;
  const bool Flat = Mem && flat64Operand(D.Mode, I);
  const unsigned Src = D.Ops[1].SizeBytes;
  switch (D.Ops[0].SizeBytes) {
  case 2: I.Fn = pickMovExt<uint16_t, Signed>(Src, Mem, Flat); break;
  case 4: I.Fn = pickMovExt<uint32_t, Signed>(Src, Mem, Flat); break;
  case 8: I.Fn = pickMovExt<uint64_t, Signed>(Src, Mem, Flat); break;
  default: return false;
  }
  I.Cost = costOf(Mem ? CostClass::Memory : CostClass::Simple);
  return true;
}
bool bindMovzx(const DecodeInfo &D, DecodedInsn &I) { return bindMovExt<false>(D, I); }
bool bindMovsx(const DecodeInfo &D, DecodedInsn &I) { return bindMovExt<true>(D, I); }
// MOVSXD without REX.W (a 16- or 32-bit destination) is a plain move of the low bits.
bool bindMovsxd(const DecodeInfo &D, DecodedInsn &I) { return bindMovExt<true>(D, I); }

bool bindCbw(const DecodeInfo &D, DecodedInsn &I) {
  I.Fn = D.OpSize == 2 ? &execCbw<uint16_t> : D.OpSize == 4 ? &execCbw<uint32_t>
                                                             : &execCbw<uint64_t>;
  I.Cost = costOf(CostClass::Simple);
  return true;
}
bool bindCwd(const DecodeInfo &D, DecodedInsn &I) {
  I.Fn = D.OpSize == 2 ? &execCwd<uint16_t> : D.OpSize == 4 ? &execCwd<uint32_t>
                                                             : &execCwd<uint64_t>;
  I.Cost = costOf(CostClass::Simple);
  return true;
}

bool bindXlat(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Prefixes & insnflag::Lock)
    return false;
  I.Flags &= ~insnflag::HasMem;
  I.Fn = &execXlat;
  I.Cost = costOf(CostClass::Memory);
  return true;
}

// PUSHA/POPA are invalid in 64-bit mode; the decoder reports them as #UD there.
bool bindPusha(const DecodeInfo &D, DecodedInsn &I) {
  I.Fn = D.OpSize == 2 ? &execPusha<uint16_t> : &execPusha<uint32_t>;
  I.Cost = costOf(CostClass::Memory);
  return true;
}
bool bindPopa(const DecodeInfo &D, DecodedInsn &I) {
  I.Fn = D.OpSize == 2 ? &execPopa<uint16_t> : &execPopa<uint32_t>;
  I.Cost = costOf(CostClass::Memory);
  return true;
}

namespace {
template <typename T> JitForm dataFormSized(Handler Fn) {
  constexpr uint8_t N = sizeof(T);
  JitForm R;
  auto Try = [&](Handler H, JitOp Op, JitShape Shape, uint8_t Src = sizeof(T)) {
    if (Fn == H)
      R = JitForm{Op, Shape, N, Src};
  };
  Try(&execMov<T, Form::RR>, JitOp::Mov, JitShape::RegReg);
  Try(&execMov<T, Form::RI>, JitOp::Mov, JitShape::RegImm);
  Try(&execMov<T, Form::RM>, JitOp::Mov, JitShape::Mem);
  Try(&execMov<T, Form::MR>, JitOp::Mov, JitShape::Mem);
  Try(&execMov<T, Form::MI>, JitOp::Mov, JitShape::Mem);
  Try(&execMov<T, Form::RM, true>, JitOp::Mov, JitShape::Mem);
  Try(&execMov<T, Form::MR, true>, JitOp::Mov, JitShape::Mem);
  Try(&execMov<T, Form::MI, true>, JitOp::Mov, JitShape::Mem);
  if constexpr (N >= 2) {
    Try(&execCmov<T, false>, JitOp::Cmov, JitShape::RegReg);
    Try(&execLea<T>, JitOp::Lea, JitShape::Reg);
    Try(&execLea<T, true>, JitOp::Lea, JitShape::Reg);
    Try(&execPush<T, false>, JitOp::Push, JitShape::Mem);
    Try(&execPush<T, true>, JitOp::Push, JitShape::Mem);
    Try(&execPushImm<T>, JitOp::Push, JitShape::Mem);
    Try(&execPop<T, false>, JitOp::Pop, JitShape::Mem);
    Try(&execPop<T, true>, JitOp::Pop, JitShape::Mem);
    auto Ext = [&](auto Src) {
      using S = decltype(Src);
      constexpr uint8_t M = sizeof(S);
      Try(&execMovExt<T, S, false, false>, JitOp::MovZx, JitShape::RegReg, M);
      Try(&execMovExt<T, S, true, false>, JitOp::MovSx, JitShape::RegReg, M);
      Try(&execMovExt<T, S, false, true>, JitOp::MovZx, JitShape::Mem, M);
      Try(&execMovExt<T, S, true, true>, JitOp::MovSx, JitShape::Mem, M);
      Try(&execMovExt<T, S, false, true, true>, JitOp::MovZx, JitShape::Mem, M);
      Try(&execMovExt<T, S, true, true, true>, JitOp::MovSx, JitShape::Mem, M);
    };
    Ext(uint8_t{});
    Ext(uint16_t{});
    Ext(uint32_t{});
    Ext(uint64_t{});
  }
  return R;
}
} // namespace

JitForm dataJitForm(const DecodedInsn &I) {
  if (I.Fn == &execNop)
    return JitForm{JitOp::Nop, JitShape::None, 0, 0};
  // The 64-bit register forms have handlers of their own (their TLB-hit fast path).
  if (I.Fn == &execPushReg64)
    return JitForm{JitOp::Push, JitShape::Mem, 8, 8, true};
  if (I.Fn == &execPopReg64)
    return JitForm{JitOp::Pop, JitShape::Mem, 8, 8, true};
  return firstKnown({dataFormSized<uint8_t>(I.Fn), dataFormSized<uint16_t>(I.Fn),
                     dataFormSized<uint32_t>(I.Fn), dataFormSized<uint64_t>(I.Fn)});
}

} // namespace vmxsim
