// Near control transfer: JMP, Jcc, CALL, RET (SDM Vol. 2, instruction pages of each).
// Far transfers, gates and IRET are in cpu/exec_far.cpp.
#include "cpu/exec.h"

namespace vmxsim {

namespace {

// Relative branches: Imm holds the signed displacement from the next instruction.
template <typename T> Status execJmpRel(Cpu &C, const DecodedInsn &I) {
  return branchTo(C, nextRip(C, I) + I.Imm, sizeof(T));
}
template <typename T> Status execJccRel(Cpu &C, const DecodedInsn &I) {
  if (testCond(C.S.Rflags, I.Cond))
    return branchTo(C, nextRip(C, I) + I.Imm, sizeof(T));
  return next(C, I);
}
template <typename T, bool IsMem> Status execJmpInd(Cpu &C, const DecodedInsn &I) {
  T Target;
  if constexpr (IsMem)
    VMX_TRY(readMem(C, SegReg(I.Seg), effectiveAddress(C, I), Target));
  else
    Target = getReg<T>(C, I.Reg[0]);
  return branchTo(C, Target, sizeof(T));
}

// CALL pushes the return address after the target is validated, so a bad target
// faults with nothing pushed (SDM Vol. 2A, CALL: the #GP check precedes Push).
template <typename T> Status callTo(Cpu &C, const DecodedInsn &I, uint64_t Target) {
  uint64_t Ret = nextRip(C, I);
  uint64_t OldRip = C.S.Rip;
  VMX_TRY(branchTo(C, Target, sizeof(T)));
  Status St = push<T>(C, T(Ret));
  if (St != Status::Ok)
    C.S.Rip = OldRip;
  return St;
}
template <typename T> Status execCallRel(Cpu &C, const DecodedInsn &I) {
  return callTo<T>(C, I, nextRip(C, I) + I.Imm);
}
template <typename T, bool IsMem> Status execCallInd(Cpu &C, const DecodedInsn &I) {
  T Target;
  if constexpr (IsMem)
    VMX_TRY(readMem(C, SegReg(I.Seg), effectiveAddress(C, I), Target));
  else
    Target = getReg<T>(C, I.Reg[0]);
  return callTo<T>(C, I, Target);
}

template <typename T> Status execRet(Cpu &C, const DecodedInsn &I) {
  T Target;
  VMX_TRY(peek(C, Target));
  VMX_TRY(branchTo(C, Target, sizeof(T)));
  popCommit(C, sizeof(T) + I.Imm);
  return Status::Ok;
}

} // namespace

// Branch operand size: 64 in 64-bit mode unless 66h gives 16 (Intel ignores REX.W-less
// 32-bit there); Zydis reports it as the operand width.
static unsigned branchSize(const DecodeInfo &D) { return D.OpSize; }

bool bindJmp(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &Op = D.Ops[0];
  unsigned Size = branchSize(D);
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::Branch);
  if (Op.Kind == OperandKind::Imm) {
    I.Fn = Size == 2 ? &execJmpRel<uint16_t> : Size == 4 ? &execJmpRel<uint32_t>
                                                         : &execJmpRel<uint64_t>;
    return true;
  }
  if (Op.Kind == OperandKind::Ptr || (Op.Kind == OperandKind::Mem && Op.SizeBytes > Size))
    return bindFarJmp(D, I);
  copyOperandRegs(D, I);
  if (Op.Kind == OperandKind::Mem)
    I.Fn = Size == 2 ? &execJmpInd<uint16_t, true> : Size == 4 ? &execJmpInd<uint32_t, true>
                                                               : &execJmpInd<uint64_t, true>;
  else
    I.Fn = Size == 2 ? &execJmpInd<uint16_t, false> : Size == 4 ? &execJmpInd<uint32_t, false>
                                                                : &execJmpInd<uint64_t, false>;
  return true;
}

bool bindJcc(const DecodeInfo &D, DecodedInsn &I) {
  // Condition from the low nibble of the opcode (7x and 0F 8x).
  I.Cond = D.Opcode & 0xf;
  unsigned Size = branchSize(D);
  I.Fn = Size == 2 ? &execJccRel<uint16_t> : Size == 4 ? &execJccRel<uint32_t>
                                                       : &execJccRel<uint64_t>;
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::Branch);
  return true;
}

bool bindCall(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &Op = D.Ops[0];
  unsigned Size = branchSize(D);
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::Branch);
  if (Op.Kind == OperandKind::Imm) {
    I.Fn = Size == 2 ? &execCallRel<uint16_t> : Size == 4 ? &execCallRel<uint32_t>
                                                          : &execCallRel<uint64_t>;
    return true;
  }
  if (Op.Kind == OperandKind::Ptr || (Op.Kind == OperandKind::Mem && Op.SizeBytes > Size))
    return bindFarCall(D, I);
  copyOperandRegs(D, I);
  if (Op.Kind == OperandKind::Mem)
    I.Fn = Size == 2 ? &execCallInd<uint16_t, true> : Size == 4 ? &execCallInd<uint32_t, true>
                                                                : &execCallInd<uint64_t, true>;
  else
    I.Fn = Size == 2 ? &execCallInd<uint16_t, false>
           : Size == 4 ? &execCallInd<uint32_t, false>
                       : &execCallInd<uint64_t, false>;
  return true;
}

bool bindRet(const DecodeInfo &D, DecodedInsn &I) {
  unsigned Size = branchSize(D);
  I.Imm = D.Ops[0].Kind == OperandKind::Imm ? uint16_t(D.ImmRaw) : 0;
  I.Fn = Size == 2 ? &execRet<uint16_t> : Size == 4 ? &execRet<uint32_t> : &execRet<uint64_t>;
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::Branch);
  return true;
}

} // namespace vmxsim
