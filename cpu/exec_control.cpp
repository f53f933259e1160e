// Near control transfer: JMP, Jcc, CALL, RET, LOOP/LOOPE/LOOPNE, JCXZ/JECXZ/JRCXZ, and
// the procedure-frame instructions ENTER/LEAVE (SDM Vol. 2, instruction pages of each).
// Far transfers, gates and IRET are in cpu/exec_far.cpp.
#include "cpu/exec.h"
#include "cpu/jit/jit_form.h"

#include <array>
#include <utility>

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
// The 64-bit forms (64-bit mode: cpu/exec.h, "64-bit operand size"); Jcc is bound per
// condition, so the condition is a constant.
Status execJmpRel64(Cpu &C, const DecodedInsn &I) {
  return branchTo64(C, nextRip64(C, I) + I.Imm);
}
template <uint8_t Cc> Status execJccRel64(Cpu &C, const DecodedInsn &I) {
  if (testCond(C.S.Rflags, Cc))
    return branchTo64(C, nextRip64(C, I) + I.Imm);
  return next64(C, I);
}
template <size_t... Cc>
constexpr std::array<Handler, 16> jcc64Table(std::index_sequence<Cc...>) {
  return {&execJccRel64<uint8_t(Cc)>...};
}
constexpr std::array<Handler, 16> kJccRel64 = jcc64Table(std::make_index_sequence<16>());

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
  if constexpr (sizeof(T) == 8) {
    // 64-bit mode: a target sharing RIP's upper half and a store that hits the TLB.
    const uint64_t Sp = C.S.Gpr[RSP] - 8;
    if (sameCanonicalHalf(C, Target)) [[likely]] {
      if (uint8_t *H; stackWriteHit64(C, Sp, H)) [[likely]] {
        const uint64_t Ret = nextRip64(C, I);
        std::memcpy(H, &Ret, 8);
        C.S.Gpr[RSP] = Sp;
        C.S.Rip = Target;
        return Status::Ok;
      }
    }
  }
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
// Flat: a flat 64-bit memory operand (cpu/memory.h, flat64Operand), e.g. a hypervisor's
// CALL through a handler pointer on its stack.
template <typename T, bool IsMem, bool Flat = false>
Status execCallInd(Cpu &C, const DecodedInsn &I) {
  T Target;
  if constexpr (IsMem)
    VMX_TRY(readMemOp<Flat>(C, I, Target));
  else
    Target = getReg<T>(C, I.Reg[0]);
  return callTo<T>(C, I, Target);
}

template <typename T> Status execRet(Cpu &C, const DecodedInsn &I) {
  if constexpr (sizeof(T) == 8) {
    // 64-bit mode: a load that hits the TLB and a target sharing RIP's upper half.
    const uint64_t Sp = C.S.Gpr[RSP];
    if (const uint8_t *H; stackReadHit64(C, Sp, H)) [[likely]] {
      uint64_t Target;
      std::memcpy(&Target, H, 8);
      if (sameCanonicalHalf(C, Target)) [[likely]] {
        C.S.Rip = Target;
        C.S.Gpr[RSP] = Sp + 8 + I.Imm;
        return Status::Ok;
      }
    }
  }
  T Target;
  VMX_TRY(peek(C, Target));
  VMX_TRY(branchTo(C, Target, sizeof(T)));
  popCommit(C, sizeof(T) + I.Imm);
  return Status::Ok;
}

// LOOP/LOOPE/LOOPNE (SDM Vol. 2A, LOOP/LOOPcc): the counter is CX, ECX or RCX by the
// address size. The decremented counter is committed only after the branch target
// passed its checks, so a #GP leaves the counter as it was.
enum class LoopKind : uint8_t { Loop, Loope, Loopne, Jcxz };

template <typename T, typename A, LoopKind K> Status execLoop(Cpu &C, const DecodedInsn &I) {
  A Count = getReg<A>(C, RCX);
  bool Taken;
  if constexpr (K == LoopKind::Jcxz) {
    Taken = Count == 0;
  } else {
    --Count;
    Taken = Count != 0;
    if constexpr (K == LoopKind::Loope)
      Taken = Taken && (C.S.Rflags & rflags::ZF);
    if constexpr (K == LoopKind::Loopne)
      Taken = Taken && !(C.S.Rflags & rflags::ZF);
  }
  if (Taken)
    VMX_TRY(branchTo(C, nextRip(C, I) + I.Imm, sizeof(T)));
  else
    (void)next(C, I);
  if constexpr (K != LoopKind::Jcxz)
    setReg<A>(C, RCX, Count);
  return Status::Ok;
}

template <LoopKind K, typename T> Handler pickLoopAddr(unsigned AddrSize) {
  return AddrSize == 2   ? &execLoop<T, uint16_t, K>
         : AddrSize == 4 ? &execLoop<T, uint32_t, K>
                         : &execLoop<T, uint64_t, K>;
}

// LEAVE (SDM Vol. 2A): rSP <- rBP (stack-address size), then pops rBP. The load is done
// before anything is committed.
template <typename T> Status execLeave(Cpu &C, const DecodedInsn &I) {
  const unsigned S = stackAddrSize(C);
  const uint64_t Bp = maskToSize(C.S.Gpr[RBP], S);
  T V;
  VMX_TRY(readMem(C, SegReg::SS, Bp, V));
  setStackPointer(C, Bp + sizeof(T));
  setReg<T>(C, RBP, V);
  return next(C, I);
}

// ENTER imm16, imm8 (SDM Vol. 2A, ENTER): pushes rBP, copies NestingLevel-1 frame
// pointers from the enclosing frame, pushes the new frame pointer when the level is not
// zero, then allocates imm16 bytes. Every store is done before rSP/rBP are committed.
template <typename T> Status execEnter(Cpu &C, const DecodedInsn &I) {
  const unsigned S = stackAddrSize(C);
  const unsigned Level = I.Imm2 & 31; // NestingLevel <- imm8 MOD 32
  const uint64_t AllocSize = uint16_t(I.Imm);
  uint64_t Sp = C.S.Gpr[RSP];
  uint64_t Bp = C.S.Gpr[RBP];
  Sp = maskToSize(Sp - sizeof(T), S);
  VMX_TRY(writeMem(C, SegReg::SS, Sp, getReg<T>(C, RBP)));
  const uint64_t FrameTemp = Sp;
  if (Level > 0) {
    for (unsigned K = 1; K < Level; ++K) {
      Bp = maskToSize(Bp - sizeof(T), S);
      T V;
      VMX_TRY(readMem(C, SegReg::SS, Bp, V));
      Sp = maskToSize(Sp - sizeof(T), S);
      VMX_TRY(writeMem(C, SegReg::SS, Sp, V));
    }
    Sp = maskToSize(Sp - sizeof(T), S);
    VMX_TRY(writeMem(C, SegReg::SS, Sp, T(FrameTemp)));
  }
  setReg<T>(C, RBP, T(FrameTemp));
  setStackPointer(C, Sp - AllocSize);
  return next(C, I);
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
                                                         : &execJmpRel64;
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
                                                       : kJccRel64[I.Cond];
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
    I.Fn = Size == 2   ? &execCallInd<uint16_t, true>
           : Size == 4 ? &execCallInd<uint32_t, true>
           : flat64Operand(D.Mode, I) ? &execCallInd<uint64_t, true, true>
                                      : &execCallInd<uint64_t, true>;
  else
    I.Fn = Size == 2 ? &execCallInd<uint16_t, false>
           : Size == 4 ? &execCallInd<uint32_t, false>
                       : &execCallInd<uint64_t, false>;
  return true;
}

bool bindRet(const DecodeInfo &D, DecodedInsn &I) {
  // Zydis names near and far returns alike; CA/CB are RET FAR (SDM Vol. 2B, RET).
  if (D.OpcodeMap == 0 && (D.Opcode == 0xca || D.Opcode == 0xcb))
    return bindFarRet(D, I);
  unsigned Size = branchSize(D);
  I.Imm = D.Ops[0].Kind == OperandKind::Imm ? uint16_t(D.ImmRaw) : 0;
  I.Fn = Size == 2 ? &execRet<uint16_t> : Size == 4 ? &execRet<uint32_t> : &execRet<uint64_t>;
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::Branch);
  return true;
}

template <LoopKind K> static bool bindLoopOp(const DecodeInfo &D, DecodedInsn &I) {
  unsigned Size = branchSize(D);
  I.Fn = Size == 2   ? pickLoopAddr<K, uint16_t>(D.AddrSize)
         : Size == 4 ? pickLoopAddr<K, uint32_t>(D.AddrSize)
                     : pickLoopAddr<K, uint64_t>(D.AddrSize);
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::Branch);
  return true;
}
bool bindLoop(const DecodeInfo &D, DecodedInsn &I) { return bindLoopOp<LoopKind::Loop>(D, I); }
bool bindLoope(const DecodeInfo &D, DecodedInsn &I) { return bindLoopOp<LoopKind::Loope>(D, I); }
bool bindLoopne(const DecodeInfo &D, DecodedInsn &I) {
  return bindLoopOp<LoopKind::Loopne>(D, I);
}
bool bindJcxz(const DecodeInfo &D, DecodedInsn &I) { return bindLoopOp<LoopKind::Jcxz>(D, I); }

bool bindEnter(const DecodeInfo &D, DecodedInsn &I) {
  unsigned Size = D.OpSize;
  I.Imm = D.ImmRaw;
  I.Imm2 = uint16_t(D.Imm2);
  I.Fn = Size == 2 ? &execEnter<uint16_t> : Size == 4 ? &execEnter<uint32_t> : &execEnter<uint64_t>;
  I.Cost = costOf(CostClass::Memory);
  return true;
}
bool bindLeave(const DecodeInfo &D, DecodedInsn &I) {
  unsigned Size = D.OpSize;
  I.Fn = Size == 2 ? &execLeave<uint16_t> : Size == 4 ? &execLeave<uint32_t> : &execLeave<uint64_t>;
  I.Cost = costOf(CostClass::Memory);
  return true;
}

/// Relative JMP/Jcc with the 64-bit operand size are emitted inline (64-bit mode); so
/// are the TLB-hit paths of the near relative CALL and RET (Stack64), whose handlers run
/// on anything else.
JitForm controlJitForm(const DecodedInsn &I) {
  // The 64-bit JMP and Jcc are bound to handlers of their own (Jcc one per condition,
  // with the condition also in I.Cond, which the translation reads).
  if (I.Fn == &execJmpRel64)
    return JitForm{JitOp::JmpRel, JitShape::None, 8, 8};
  if (I.Fn == kJccRel64[I.Cond & 15])
    return JitForm{JitOp::JccRel, JitShape::None, 8, 8};
  if (I.Fn == &execCallRel<uint64_t>)
    return JitForm{JitOp::CallRel, JitShape::Mem, 8, 8, true};
  if (I.Fn == &execRet<uint64_t>)
    return JitForm{JitOp::Ret, JitShape::Mem, 8, 8, true};
  return {};
}

} // namespace vmxsim
