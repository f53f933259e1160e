// Data movement: MOV (register, memory, immediate, moffs), LEA, PUSH, POP, NOP
// (SDM Vol. 2, instruction pages of each).
#include "cpu/exec.h"

namespace vmxsim {

namespace {

enum class Form : uint8_t { RR, RM, MR, RI, MI };

template <typename T, Form F> Status execMov(Cpu &C, const DecodedInsn &I) {
  if constexpr (F == Form::RR) {
    setReg<T>(C, I.Reg[0], getReg<T>(C, I.Reg[1]));
  } else if constexpr (F == Form::RI) {
    setReg<T>(C, I.Reg[0], T(I.Imm));
  } else if constexpr (F == Form::RM) {
    T V;
    VMX_TRY(readMem(C, SegReg(I.Seg), effectiveAddress(C, I), V));
    setReg<T>(C, I.Reg[0], V);
  } else if constexpr (F == Form::MR) {
    VMX_TRY(writeMem(C, SegReg(I.Seg), effectiveAddress(C, I), getReg<T>(C, I.Reg[1])));
  } else {
    VMX_TRY(writeMem(C, SegReg(I.Seg), effectiveAddress(C, I), T(I.Imm)));
  }
  return next(C, I);
}

template <typename T> Status execLea(Cpu &C, const DecodedInsn &I) {
  setReg<T>(C, I.Reg[0], T(effectiveAddress(C, I)));
  return next(C, I);
}

template <typename T, bool IsMem> Status execPush(Cpu &C, const DecodedInsn &I) {
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

template <typename T, bool IsMem> Status execPop(Cpu &C, const DecodedInsn &I) {
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

Status execNop(Cpu &C, const DecodedInsn &I) { return next(C, I); }

} // namespace

bool bindMov(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &Dst = D.Ops[0], &Src = D.Ops[1];
  // MOV to/from segment, control and debug registers are system instructions.
  if ((Dst.Kind == OperandKind::Reg && Dst.Class != RegClass::Gpr) ||
      (Src.Kind == OperandKind::Reg && Src.Class != RegClass::Gpr))
    return bindMovSystem(D, I);
  copyOperandRegs(D, I);
  unsigned Size = Dst.SizeBytes;
  if (Dst.Kind == OperandKind::Reg) {
    if (Src.Kind == OperandKind::Reg)
      I.Fn = VMX_BY_SIZE(Size, execMov, Form::RR);
    else if (Src.Kind == OperandKind::Imm)
      I.Fn = VMX_BY_SIZE(Size, execMov, Form::RI);
    else
      I.Fn = VMX_BY_SIZE(Size, execMov, Form::RM);
  } else {
    I.Fn = Src.Kind == OperandKind::Imm ? VMX_BY_SIZE(Size, execMov, Form::MI)
                                        : VMX_BY_SIZE(Size, execMov, Form::MR);
  }
  I.Cost = costOf(I.hasMem() ? CostClass::Memory : CostClass::Simple);
  return true;
}

bool bindLea(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Ops[1].Kind != OperandKind::Mem)
    return false;
  copyOperandRegs(D, I);
  I.Flags &= ~insnflag::HasMem; // LEA computes an address; it does not access memory
  I.Fn = VMX_BY_SIZE(D.Ops[0].SizeBytes, execLea);
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
                                                              : &execPush<uint64_t, false>;
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
                                                             : &execPop<uint64_t, false>;
  I.Cost = costOf(CostClass::Memory);
  return true;
}

bool bindNop(const DecodeInfo &, DecodedInsn &I) {
  I.Flags &= ~insnflag::HasMem; // multi-byte NOP has a ModRM memory form it never reads
  I.Fn = &execNop;
  I.Cost = costOf(CostClass::Simple);
  return true;
}

} // namespace vmxsim
