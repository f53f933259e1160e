// Far control transfer: far JMP/CALL (direct, through call gates), far RET, IRET in
// every mode, INT n / INT3 / INTO / INT1, SYSCALL/SYSRET and SYSENTER/SYSEXIT
// (SDM Vol. 2, the instruction pages of each; Vol. 3A, Privilege Level Checking When
// Transferring Program Control Between Code Segments; Calling Procedures Using Call Gates).
#include "cpu/exceptions.h"
#include "cpu/exec.h"
#include "cpu/msrs.h"
#include "cpu/segmentation.h"
#include "cpu/task_switch.h"
#include "cpu/vmx/vmx_events.h"

namespace vmxsim {

namespace {

bool protectedMode(const Cpu &C) {
  return (C.S.Cr0 & cr0::PE) && !(C.S.Rflags & rflags::VM);
}

// Target offset checks of a code segment being entered: canonical for 64-bit code,
// within the limit otherwise (SDM Vol. 2A, JMP: "IF tempEIP not in code segment limit
// THEN #GP(0)").
Status checkTargetOffset(Cpu &C, uint64_t Lo, uint64_t &Off, unsigned OpSize) {
  if (C.S.longMode() && desc::longCode(Lo)) {
    if (!isCanonical(C, Off))
      return C.raiseGp(0);
    return Status::Ok;
  }
  Off = maskToSize(Off, OpSize == 8 ? 4 : OpSize);
  if (Off > desc::limit(Lo))
    return C.raiseGp(0);
  return Status::Ok;
}

// Direct code-segment target checks for JMP/CALL (SDM Vol. 2A, JMP/CALL:
// CONFORMING-CODE-SEGMENT and NONCONFORMING-CODE-SEGMENT).
Status checkDirectCode(Cpu &C, uint16_t Sel, uint64_t Lo) {
  unsigned Cpl = C.S.cpl();
  if (desc::conforming(Lo)) {
    if (desc::dpl(Lo) > Cpl)
      return C.raiseGp(selectorError(Sel));
  } else if ((Sel & 3u) > Cpl || desc::dpl(Lo) != Cpl) {
    return C.raiseGp(selectorError(Sel));
  }
  if (C.S.longMode() && desc::longCode(Lo) && desc::defaultBig(Lo))
    return C.raiseGp(selectorError(Sel));
  if (!desc::present(Lo))
    return C.raise(vec::NP, selectorError(Sel));
  return Status::Ok;
}

/// A resolved call gate (SDM Vol. 3A, Call Gates).
struct GateTarget {
  uint16_t CodeSel;
  uint64_t CodeLo;
  uint64_t Offset;
  unsigned Width;      ///< 2 (16-bit gate), 4 (32-bit) or 8 (64-bit)
  unsigned ParamCount; ///< 32/16-bit gates: parameters copied on a privilege change
};

Status resolveCallGate(Cpu &C, uint16_t GateSel, uint64_t Lo, bool IsCall,
                       GateTarget &G) {
  const unsigned Cpl = C.S.cpl();
  unsigned Type = desc::type(Lo);
  const bool Long = C.S.longMode();
  if (Long ? Type != desc::CallGate32 : (Type != desc::CallGate16 && Type != desc::CallGate32))
    return C.raiseGp(selectorError(GateSel));
  if (desc::dpl(Lo) < Cpl || desc::dpl(Lo) < (GateSel & 3u))
    return C.raiseGp(selectorError(GateSel));
  if (!desc::present(Lo))
    return C.raise(vec::NP, selectorError(GateSel));
  G.CodeSel = uint16_t(Lo >> 16);
  G.Width = Long ? 8 : (Type == desc::CallGate32 ? 4 : 2);
  G.ParamCount = Long ? 0 : unsigned(Lo >> 32) & 0x1f;
  G.Offset = (Lo & 0xffff) | (G.Width >= 4 ? ((Lo >> 48) << 16) : 0);
  if (Long) {
    uint64_t Hi;
    VMX_TRY(readDescriptorHigh(C, GateSel, Hi));
    if (((Hi >> 40) & 0x1f) != 0)
      return C.raiseGp(selectorError(GateSel));
    G.Offset |= (Hi & 0xffffffffull) << 32;
  }
  if ((G.CodeSel & 0xfffc) == 0)
    return C.raiseGp(0);
  VMX_TRY(readDescriptor(C, G.CodeSel, G.CodeLo));
  uint64_t CLo = G.CodeLo;
  if (!desc::isCode(CLo) || desc::dpl(CLo) > Cpl)
    return C.raiseGp(selectorError(G.CodeSel));
  // JMP through a gate keeps the CPL: non-conforming targets must have DPL = CPL.
  if (!IsCall && !desc::conforming(CLo) && desc::dpl(CLo) != Cpl)
    return C.raiseGp(selectorError(G.CodeSel));
  if (Long && (!desc::longCode(CLo) || desc::defaultBig(CLo)))
    return C.raiseGp(selectorError(G.CodeSel));
  if (!desc::present(CLo))
    return C.raise(vec::NP, selectorError(G.CodeSel));
  return Status::Ok;
}

Status farJmp(Cpu &C, const DecodedInsn &I, uint16_t Sel, uint64_t Off) {
  unsigned OpSize = I.OpSize;
  if (!protectedMode(C)) {
    Off = maskToSize(Off, OpSize);
    if (Off > C.S.cs().Limit)
      return C.raiseGp(0);
    loadRealSegment(C, SegReg::CS, Sel);
    C.S.Rip = Off;
    C.modeChanged();
    return Status::Ok;
  }
  if ((Sel & 0xfffc) == 0)
    return C.raiseGp(0);
  uint64_t Lo;
  VMX_TRY(readDescriptor(C, Sel, Lo));
  if (desc::isCode(Lo)) {
    VMX_TRY(checkDirectCode(C, Sel, Lo));
    VMX_TRY(checkTargetOffset(C, Lo, Off, OpSize));
    VMX_TRY(setAccessed(C, Sel, Lo));
    loadCodeSegment(C, Sel, Lo, C.S.cpl());
    C.S.Rip = Off;
    return Status::Ok;
  }
  if (!desc::isSystem(Lo))
    return C.raiseGp(selectorError(Sel));
  unsigned Type = desc::type(Lo);
  if (!C.S.longMode() && (Type == desc::TaskGate || Type == desc::Tss16Avail ||
                          Type == desc::Tss32Avail)) {
    if (C.NonRoot) // task switches cause VM exits (SDM Vol. 3C, "Task Switches")
      return vmxFarTaskSwitch(C, Sel, Lo, TaskSwitchSource::Jmp, I.Len);
    uint16_t TssSel;
    uint64_t TssLo;
    VMX_TRY(taskSwitchInitialChecks(C, Sel, Lo, TssSel, TssLo));
    return switchTasks(C, TssSel, TssLo, TaskSwitchSource::Jmp, nextRip(C, I));
  }
  GateTarget G;
  VMX_TRY(resolveCallGate(C, Sel, Lo, false, G));
  uint64_t Target = G.Offset;
  VMX_TRY(checkTargetOffset(C, G.CodeLo, Target, G.Width));
  VMX_TRY(setAccessed(C, G.CodeSel, G.CodeLo));
  loadCodeSegment(C, G.CodeSel, G.CodeLo, C.S.cpl());
  C.S.Rip = Target;
  return Status::Ok;
}

Status farCall(Cpu &C, const DecodedInsn &I, uint16_t Sel, uint64_t Off) {
  CpuState &S = C.S;
  const unsigned OpSize = I.OpSize;
  const uint64_t Ret = nextRip(C, I);
  const unsigned Sas = stackAddrSize(C);
  if (!protectedMode(C)) {
    Off = maskToSize(Off, OpSize);
    if (Off > S.cs().Limit)
      return C.raiseGp(0);
    StackRef R{S.ss(), Sas, maskToSize(S.Gpr[RSP], Sas), S.cpl() < 3, vec::SS, 0};
    VMX_TRY(stackPush(C, R, S.cs().Selector, OpSize));
    VMX_TRY(stackPush(C, R, Ret, OpSize));
    setStackPointer(C, R.Sp);
    loadRealSegment(C, SegReg::CS, Sel);
    S.Rip = Off;
    C.modeChanged();
    return Status::Ok;
  }
  if ((Sel & 0xfffc) == 0)
    return C.raiseGp(0);
  uint64_t Lo;
  VMX_TRY(readDescriptor(C, Sel, Lo));
  const unsigned Cpl = S.cpl();
  if (desc::isCode(Lo)) {
    VMX_TRY(checkDirectCode(C, Sel, Lo));
    VMX_TRY(checkTargetOffset(C, Lo, Off, OpSize));
    StackRef R{S.ss(), Sas, maskToSize(S.Gpr[RSP], Sas), Cpl < 3, vec::SS, 0};
    VMX_TRY(stackPush(C, R, S.cs().Selector, OpSize));
    VMX_TRY(stackPush(C, R, Ret, OpSize));
    VMX_TRY(setAccessed(C, Sel, Lo));
    setStackPointer(C, R.Sp);
    loadCodeSegment(C, Sel, Lo, Cpl);
    S.Rip = Off;
    return Status::Ok;
  }
  if (!desc::isSystem(Lo))
    return C.raiseGp(selectorError(Sel));
  unsigned Type = desc::type(Lo);
  if (!S.longMode() && (Type == desc::TaskGate || Type == desc::Tss16Avail ||
                        Type == desc::Tss32Avail)) {
    if (C.NonRoot) // task switches cause VM exits (SDM Vol. 3C, "Task Switches")
      return vmxFarTaskSwitch(C, Sel, Lo, TaskSwitchSource::Call, I.Len);
    uint16_t TssSel;
    uint64_t TssLo;
    VMX_TRY(taskSwitchInitialChecks(C, Sel, Lo, TssSel, TssLo));
    return switchTasks(C, TssSel, TssLo, TaskSwitchSource::Call, Ret);
  }
  GateTarget G;
  VMX_TRY(resolveCallGate(C, Sel, Lo, true, G));
  uint64_t Target = G.Offset;
  VMX_TRY(checkTargetOffset(C, G.CodeLo, Target, G.Width));
  const bool ToInner = !desc::conforming(G.CodeLo) && desc::dpl(G.CodeLo) < Cpl;
  if (!ToInner) {
    // SAME-PRIVILEGE through a gate: pushes use the gate size.
    StackRef R{S.ss(), Sas, maskToSize(S.Gpr[RSP], Sas), Cpl < 3, vec::SS, 0};
    VMX_TRY(stackPush(C, R, S.cs().Selector, G.Width));
    VMX_TRY(stackPush(C, R, Ret, G.Width));
    VMX_TRY(setAccessed(C, G.CodeSel, G.CodeLo));
    setStackPointer(C, R.Sp);
    loadCodeSegment(C, G.CodeSel, G.CodeLo, Cpl);
    S.Rip = Target;
    return Status::Ok;
  }
  // MORE-PRIVILEGE (SDM Vol. 3A, Stack Switching): the new stack comes from the TSS;
  // old SS:ESP, the parameters and CS:EIP are pushed on it.
  const unsigned NewCpl = desc::dpl(G.CodeLo);
  if (S.longMode()) {
    uint64_t NewSp;
    VMX_TRY(readTss(C, 4 + 8 * NewCpl, 8, NewSp, 0));
    if (!isCanonical(C, NewSp))
      return C.raise(vec::SS, 0);
    StackRef R{S.ss(), 8, NewSp, true, vec::SS, 0};
    VMX_TRY(stackPush(C, R, S.ss().Selector, 8));
    VMX_TRY(stackPush(C, R, S.Gpr[RSP], 8));
    VMX_TRY(stackPush(C, R, S.cs().Selector, 8));
    VMX_TRY(stackPush(C, R, Ret, 8));
    VMX_TRY(setAccessed(C, G.CodeSel, G.CodeLo));
    S.seg(SegReg::SS) = nullStackSegment(0, NewCpl);
    S.Gpr[RSP] = R.Sp;
  } else {
    bool Tss32 = (S.Tr.Attr & Segment::Type) >= desc::Tss32Avail;
    uint64_t NewSp, SsSel;
    if (Tss32) {
      VMX_TRY(readTss(C, 4 + 8 * NewCpl, 4, NewSp, 0));
      VMX_TRY(readTss(C, 8 + 8 * NewCpl, 2, SsSel, 0));
    } else {
      VMX_TRY(readTss(C, 2 + 4 * NewCpl, 2, NewSp, 0));
      VMX_TRY(readTss(C, 4 + 4 * NewCpl, 2, SsSel, 0));
    }
    uint64_t SsLo;
    VMX_TRY(checkStackSegment(C, uint16_t(SsSel), NewCpl, SsLo, vec::TS, 0, false));
    Segment NewSs = segmentFromDescriptor(uint16_t(SsSel), SsLo);
    unsigned NewSas = (NewSs.Attr & Segment::DB) ? 4 : 2;
    StackRef R{NewSs, NewSas, maskToSize(NewSp, NewSas), true, vec::SS,
               selectorError(uint16_t(SsSel))};
    VMX_TRY(stackPush(C, R, S.ss().Selector, G.Width));
    VMX_TRY(stackPush(C, R, S.Gpr[RSP], G.Width));
    // Parameters are copied from the caller's stack, highest address first.
    StackRef Old{S.ss(), Sas, maskToSize(S.Gpr[RSP], Sas), Cpl < 3, vec::SS, 0};
    for (unsigned K = G.ParamCount; K-- > 0;) {
      uint64_t V;
      VMX_TRY(stackRead(C, Old, uint64_t(K) * G.Width, V, G.Width));
      VMX_TRY(stackPush(C, R, V, G.Width));
    }
    VMX_TRY(stackPush(C, R, S.cs().Selector, G.Width));
    VMX_TRY(stackPush(C, R, Ret, G.Width));
    VMX_TRY(setAccessed(C, G.CodeSel, G.CodeLo));
    VMX_TRY(setAccessed(C, uint16_t(SsSel), SsLo));
    NewSs.Attr |= 1;
    S.seg(SegReg::SS) = NewSs;
    if (NewSas == 4)
      S.Gpr[RSP] = uint32_t(R.Sp);
    else
      S.Gpr[RSP] = (S.Gpr[RSP] & ~uint64_t(0xffff)) | uint16_t(R.Sp);
  }
  loadCodeSegment(C, G.CodeSel, G.CodeLo, NewCpl);
  S.Rip = Target;
  return Status::Ok;
}

// Reads a far pointer m16:16/m16:32/m16:64: offset first, selector after it.
Status readFarPointer(Cpu &C, const DecodedInsn &I, uint16_t &Sel, uint64_t &Off) {
  uint64_t Ea = effectiveAddress(C, I);
  SegReg Seg = SegReg(I.Seg);
  if (I.OpSize == 2) {
    uint16_t V;
    VMX_TRY(readMem(C, Seg, Ea, V));
    Off = V;
  } else if (I.OpSize == 4) {
    uint32_t V;
    VMX_TRY(readMem(C, Seg, Ea, V));
    Off = V;
  } else {
    VMX_TRY(readMem(C, Seg, Ea, Off));
  }
  return readMem(C, Seg, maskToSize(Ea + I.OpSize, I.AddrSize), Sel);
}

template <bool IsMem> Status execJmpFar(Cpu &C, const DecodedInsn &I) {
  uint16_t Sel = I.Imm2;
  uint64_t Off = I.Imm;
  if constexpr (IsMem)
    VMX_TRY(readFarPointer(C, I, Sel, Off));
  return farJmp(C, I, Sel, Off);
}
template <bool IsMem> Status execCallFar(Cpu &C, const DecodedInsn &I) {
  uint16_t Sel = I.Imm2;
  uint64_t Off = I.Imm;
  if constexpr (IsMem)
    VMX_TRY(readFarPointer(C, I, Sel, Off));
  return farCall(C, I, Sel, Off);
}

// The checks on a CS selector popped by RET/IRET (SDM Vol. 2A, RET: "RETURN-TO-
// OTHER-PRIVILEGE-LEVEL"; IRET: "PROTECTED-MODE-RETURN").
Status checkReturnCs(Cpu &C, uint16_t Sel, uint64_t &Lo) {
  if ((Sel & 0xfffc) == 0)
    return C.raiseGp(0);
  VMX_TRY(readDescriptor(C, Sel, Lo));
  unsigned Rpl = Sel & 3;
  if (!desc::isCode(Lo) || Rpl < C.S.cpl())
    return C.raiseGp(selectorError(Sel));
  if (desc::conforming(Lo) ? desc::dpl(Lo) > Rpl : desc::dpl(Lo) != Rpl)
    return C.raiseGp(selectorError(Sel));
  if (C.S.longMode() && desc::longCode(Lo) && desc::defaultBig(Lo))
    return C.raiseGp(selectorError(Sel));
  if (!desc::present(Lo))
    return C.raise(vec::NP, selectorError(Sel));
  return Status::Ok;
}

// The popped SS of a return to an outer level (or of IRET in 64-bit mode).
Status checkReturnSs(Cpu &C, uint16_t SsSel, uint16_t CsSel, uint64_t CsLo, uint64_t &Lo) {
  unsigned Rpl = CsSel & 3;
  // SDM Vol. 2A, IRET: a null SS is allowed when returning to 64-bit code at CPL < 3.
  bool NullOk = C.S.longMode() && desc::longCode(CsLo) && Rpl < 3;
  if ((SsSel & 0xfffc) == 0) {
    if (NullOk && (SsSel & 3) == Rpl)
      return Status::Ok;
    return C.raiseGp(0);
  }
  VMX_TRY(readDescriptor(C, SsSel, Lo));
  if ((SsSel & 3u) != Rpl || !desc::writableData(Lo) || desc::dpl(Lo) != Rpl)
    return C.raiseGp(selectorError(SsSel));
  if (!desc::present(Lo))
    return C.raise(vec::SS, selectorError(SsSel));
  return Status::Ok;
}

void commitStack(Cpu &C, uint16_t SsSel, uint64_t SsLo, unsigned Cpl, uint64_t Sp) {
  CpuState &S = C.S;
  if ((SsSel & 0xfffc) == 0) {
    S.seg(SegReg::SS) = nullStackSegment(SsSel, Cpl);
  } else {
    Segment Ss = segmentFromDescriptor(SsSel, SsLo);
    Ss.Attr |= 1;
    S.seg(SegReg::SS) = Ss;
  }
  if (C.S.longMode() && (S.cs().Attr & Segment::L))
    S.Gpr[RSP] = Sp;
  else if (S.ss().Attr & Segment::DB)
    S.Gpr[RSP] = uint32_t(Sp);
  else
    S.Gpr[RSP] = (S.Gpr[RSP] & ~uint64_t(0xffff)) | uint16_t(Sp);
}

template <typename T> Status execRetFar(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  const unsigned W = sizeof(T);
  const unsigned Sas = stackAddrSize(C);
  StackRef R{S.ss(), Sas, maskToSize(S.Gpr[RSP], Sas), S.cpl() < 3, vec::SS, 0};
  uint64_t Off, CsV;
  VMX_TRY(stackRead(C, R, 0, Off, W));
  VMX_TRY(stackRead(C, R, W, CsV, W));
  const uint16_t Sel = uint16_t(CsV);
  const uint64_t Pop = 2 * W + I.Imm;
  if (!protectedMode(C)) {
    Off = maskToSize(Off, W);
    if (Off > S.cs().Limit)
      return C.raiseGp(0);
    setStackPointer(C, R.Sp + Pop);
    loadRealSegment(C, SegReg::CS, Sel);
    S.Rip = Off;
    C.modeChanged();
    return Status::Ok;
  }
  uint64_t Lo;
  VMX_TRY(checkReturnCs(C, Sel, Lo));
  const unsigned Rpl = Sel & 3;
  if (Rpl == S.cpl()) {
    VMX_TRY(checkTargetOffset(C, Lo, Off, W));
    VMX_TRY(setAccessed(C, Sel, Lo));
    setStackPointer(C, R.Sp + Pop);
    loadCodeSegment(C, Sel, Lo, Rpl);
    S.Rip = Off;
    return Status::Ok;
  }
  // RETURN-TO-OUTER-PRIVILEGE-LEVEL.
  uint64_t NewSp, SsV, SsLo = 0;
  VMX_TRY(stackRead(C, R, Pop, NewSp, W));
  VMX_TRY(stackRead(C, R, Pop + W, SsV, W));
  VMX_TRY(checkReturnSs(C, uint16_t(SsV), Sel, Lo, SsLo));
  VMX_TRY(checkTargetOffset(C, Lo, Off, W));
  VMX_TRY(setAccessed(C, Sel, Lo));
  if (uint16_t(SsV) & 0xfffc)
    VMX_TRY(setAccessed(C, uint16_t(SsV), SsLo));
  loadCodeSegment(C, Sel, Lo, Rpl);
  commitStack(C, uint16_t(SsV), SsLo, Rpl, NewSp + I.Imm);
  nullInaccessibleDataSegments(C);
  S.Rip = Off;
  return Status::Ok;
}

// New RFLAGS after IRET/POPF-like loads: which bits the CPL and IOPL allow to change
// (SDM Vol. 2A, IRET: "IF CPL = 0 THEN EFLAGS(IOPL,VIF,VIP) ← tempEFLAGS; IF CPL ≤
// IOPL THEN EFLAGS(IF) ← tempEFLAGS").
uint64_t mergeIretFlags(uint64_t Old, uint64_t New, unsigned Cpl, unsigned OpSize) {
  uint64_t Mask = rflags::Arith | rflags::TF | rflags::DF | rflags::NT | rflags::RF |
                  rflags::AC | rflags::ID;
  unsigned Iopl = unsigned(Old >> 12) & 3;
  if (Cpl == 0)
    Mask |= rflags::IOPL | rflags::VIF | rflags::VIP;
  if (Cpl <= Iopl)
    Mask |= rflags::IF;
  if (OpSize == 2)
    Mask &= 0xffff;
  return ((Old & ~Mask) | (New & Mask) | rflags::Fixed1) & ~uint64_t(0xffc08028);
}

template <typename T> Status execIret(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  const unsigned W = sizeof(T);
  const unsigned Sas = stackAddrSize(C);
  // IRET ends NMI blocking (SDM Vol. 3A, NMI Handling); in VMX non-root operation the
  // NMI controls decide which blocking it ends.
  if (C.NonRoot) [[unlikely]]
    vmxIretUnblocksNmis(C);
  else
    C.NmiBlocked = false;
  StackRef R{S.ss(), Sas, maskToSize(S.Gpr[RSP], Sas), S.cpl() < 3, vec::SS, 0};
  if (!(S.Cr0 & cr0::PE) || (S.Rflags & rflags::VM)) {
    // REAL-ADDRESS-MODE and virtual-8086 mode (IOPL 3 only, SDM Vol. 2A, IRET).
    const bool V86 = S.Rflags & rflags::VM;
    if (V86 && ((S.Rflags >> 12) & 3) != 3)
      return C.raiseGp(0);
    uint64_t Off, CsV, F;
    VMX_TRY(stackRead(C, R, 0, Off, W));
    VMX_TRY(stackRead(C, R, W, CsV, W));
    VMX_TRY(stackRead(C, R, 2 * W, F, W));
    if (Off > S.cs().Limit)
      return C.raiseGp(0);
    uint64_t Keep = rflags::VM | rflags::VIF | rflags::VIP | (V86 ? rflags::IOPL : 0);
    uint64_t Mask = (W == 2 ? 0xffffull : 0x257fd5ull) & ~Keep;
    S.Rflags = (S.Rflags & ~Mask) | (F & Mask) | rflags::Fixed1;
    setStackPointer(C, R.Sp + 3 * W);
    loadRealSegment(C, SegReg::CS, uint16_t(CsV));
    S.Rip = Off;
    C.modeChanged();
    return Status::Ok;
  }
  if (S.Rflags & rflags::NT) {
    if (S.longMode())
      return C.raiseGp(0);
    if (C.NonRoot) // task switches cause VM exits (SDM Vol. 3C, "Task Switches")
      return vmxIretTaskSwitch(C, I.Len);
    return taskReturn(C, nextRip(C, I));
  }
  uint64_t Off, CsV, F;
  VMX_TRY(stackRead(C, R, 0, Off, W));
  VMX_TRY(stackRead(C, R, W, CsV, W));
  VMX_TRY(stackRead(C, R, 2 * W, F, W));
  const unsigned Cpl = S.cpl();
  if (!S.longMode() && (F & rflags::VM) && Cpl == 0 && W == 4) {
    // RETURN-TO-VIRTUAL-8086-MODE: pops ESP, SS, ES, DS, FS, GS after EFLAGS.
    uint64_t V[6];
    for (unsigned K = 0; K < 6; ++K)
      VMX_TRY(stackRead(C, R, 3 * W + K * 4, V[K], 4));
    S.Rflags = (F & 0x3f7fd5ull) | rflags::Fixed1 | rflags::VM;
    S.Rip = Off & 0xffff;
    loadRealSegment(C, SegReg::CS, uint16_t(CsV));
    const SegReg Order[] = {SegReg::SS, SegReg::ES, SegReg::DS, SegReg::FS, SegReg::GS};
    for (unsigned K = 0; K < 5; ++K)
      loadRealSegment(C, Order[K], uint16_t(V[K + 1]));
    S.Gpr[RSP] = uint32_t(V[0]);
    C.modeChanged();
    return Status::Ok;
  }
  const uint16_t Sel = uint16_t(CsV);
  uint64_t Lo;
  VMX_TRY(checkReturnCs(C, Sel, Lo));
  const unsigned Rpl = Sel & 3;
  const bool PopStack = Rpl > Cpl || S.in64BitMode();
  uint64_t NewSp = 0, SsV = 0, SsLo = 0;
  if (PopStack) {
    VMX_TRY(stackRead(C, R, 3 * W, NewSp, W));
    VMX_TRY(stackRead(C, R, 4 * W, SsV, W));
    VMX_TRY(checkReturnSs(C, uint16_t(SsV), Sel, Lo, SsLo));
  }
  VMX_TRY(checkTargetOffset(C, Lo, Off, W));
  VMX_TRY(setAccessed(C, Sel, Lo));
  if (PopStack && (uint16_t(SsV) & 0xfffc))
    VMX_TRY(setAccessed(C, uint16_t(SsV), SsLo));
  uint64_t NewFlags = mergeIretFlags(S.Rflags, F, Cpl, W);
  S.Rflags = NewFlags;
  loadCodeSegment(C, Sel, Lo, Rpl);
  if (PopStack)
    commitStack(C, uint16_t(SsV), SsLo, Rpl, NewSp);
  else
    setStackPointer(C, R.Sp + 3 * W);
  if (Rpl > Cpl)
    nullInaccessibleDataSegments(C);
  S.Rip = Off;
  C.modeChanged();
  return Status::Ok;
}

// INT n, INT3, INTO, INT1 (SDM Vol. 2A, INT n/INTO/INT3/INT1).
Status execIntN(Cpu &C, const DecodedInsn &I) {
  // Virtual-8086 mode without VME: INT n is IOPL-sensitive.
  if ((C.S.Rflags & rflags::VM) && ((C.S.Rflags >> 12) & 3) != 3)
    return C.raiseGp(0);
  return deliverEvent(C, EventKind::SoftwareInt, uint8_t(I.Imm), false, 0, nextRip(C, I));
}
Status execInt3(Cpu &C, const DecodedInsn &I) {
  return deliverEvent(C, EventKind::SoftwareException, vec::BP, false, 0, nextRip(C, I));
}
Status execInto(Cpu &C, const DecodedInsn &I) {
  if (!(C.S.Rflags & rflags::OF))
    return next(C, I);
  return deliverEvent(C, EventKind::SoftwareException, vec::OF, false, 0, nextRip(C, I));
}
/// BOUND r16/r32, m16&16/m32&32 (SDM Vol. 2A, BOUND—Check Array Index Against Bounds):
/// the signed index must lie within [lower, upper], the two words or doublewords at the
/// memory operand (lower first); otherwise #BR, a fault (RIP stays on BOUND).
template <typename T> Status execBound(Cpu &C, const DecodedInsn &I) {
  using S = std::make_signed_t<T>;
  const uint64_t Ea = effectiveAddress(C, I);
  const uint64_t EaHigh = I.AddrSize == 4 ? uint32_t(Ea + sizeof(T)) : uint16_t(Ea + sizeof(T));
  T Lower, Upper;
  VMX_TRY(readMem(C, SegReg(I.Seg), Ea, Lower));
  VMX_TRY(readMem(C, SegReg(I.Seg), EaHigh, Upper));
  const S Index = S(getReg<T>(C, I.Reg[0]));
  if (Index < S(Lower) || Index > S(Upper))
    return C.raise(vec::BR);
  return next(C, I);
}

Status execInt1(Cpu &C, const DecodedInsn &I) {
  return deliverEvent(C, EventKind::PrivSoftwareException, vec::DB, false, 0,
                      nextRip(C, I));
}

// Flat segments loaded by SYSCALL/SYSRET/SYSENTER/SYSEXIT (SDM Vol. 2B, the "fixed
// values" in each instruction's operation).
Segment flatCode(uint16_t Sel, unsigned Dpl, bool Long) {
  return Segment{Sel, 0, 0xffffffff,
                 0xb | Segment::S | Segment::P | (Dpl << Segment::DplShift) | Segment::G |
                     (Long ? Segment::L : Segment::DB)};
}
Segment flatData(uint16_t Sel, unsigned Dpl) {
  return Segment{Sel, 0, 0xffffffff,
                 0x3 | Segment::S | Segment::P | (Dpl << Segment::DplShift) | Segment::G |
                     Segment::DB};
}

Status execSyscall(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  if (!(S.Efer & efer::SCE) || !S.in64BitMode())
    return C.raiseUd();
  const MsrState &M = *C.Msrs;
  S.Gpr[RCX] = nextRip(C, I);
  S.Gpr[R11] = S.Rflags & ~rflags::RF;
  S.Rflags = (S.Rflags & ~(M[MsrSlot::IA32_FMASK] | rflags::RF)) | rflags::Fixed1;
  uint16_t Sel = uint16_t(M[MsrSlot::IA32_STAR] >> 32);
  S.seg(SegReg::CS) = flatCode(Sel & 0xfffc, 0, true);
  S.seg(SegReg::SS) = flatData(uint16_t(Sel + 8), 0);
  S.Rip = M[MsrSlot::IA32_LSTAR];
  C.modeChanged();
  return Status::Ok;
}

Status execSysret(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  if (!(S.Efer & efer::SCE) || !S.in64BitMode())
    return C.raiseUd();
  if (S.cpl() != 0)
    return C.raiseGp(0);
  const bool To64 = I.OpSize == 8;
  // SDM Vol. 2B, SYSRET: "IF (operand size is 64-bit) THEN (* Return to 64-Bit Mode *)
  // IF (RCX is not canonical) THEN #GP(0)".
  if (To64 && !isCanonical(C, S.Gpr[RCX]))
    return C.raiseGp(0);
  uint16_t Sel = uint16_t((*C.Msrs)[MsrSlot::IA32_STAR] >> 48);
  S.Rflags = (S.Gpr[R11] & 0x3c7fd7) | rflags::Fixed1;
  if (To64) {
    S.seg(SegReg::CS) = flatCode(uint16_t((Sel + 16) | 3), 3, true);
    S.Rip = S.Gpr[RCX];
  } else {
    S.seg(SegReg::CS) = flatCode(uint16_t(Sel | 3), 3, false);
    S.Rip = uint32_t(S.Gpr[RCX]);
  }
  // SS.selector = STAR[63:48]+8 with RPL 3; Intel leaves the hidden base/limit flat.
  S.seg(SegReg::SS) = flatData(uint16_t((Sel + 8) | 3), 3);
  C.modeChanged();
  return Status::Ok;
}

Status execSysenter(Cpu &C, const DecodedInsn &) {
  CpuState &S = C.S;
  const MsrState &M = *C.Msrs;
  if (!(S.Cr0 & cr0::PE) || (M[MsrSlot::IA32_SYSENTER_CS] & 0xfffc) == 0)
    return C.raiseGp(0);
  const bool Long = S.longMode();
  S.Rflags &= ~(rflags::VM | rflags::IF | rflags::RF);
  uint16_t Sel = uint16_t(M[MsrSlot::IA32_SYSENTER_CS]);
  S.seg(SegReg::CS) = flatCode(Sel & 0xfffc, 0, Long);
  S.seg(SegReg::SS) = flatData(uint16_t((Sel + 8) & 0xfffc), 0);
  S.Rip = Long ? M[MsrSlot::IA32_SYSENTER_EIP] : uint32_t(M[MsrSlot::IA32_SYSENTER_EIP]);
  S.Gpr[RSP] = Long ? M[MsrSlot::IA32_SYSENTER_ESP] : uint32_t(M[MsrSlot::IA32_SYSENTER_ESP]);
  C.modeChanged();
  return Status::Ok;
}

Status execSysexit(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  const MsrState &M = *C.Msrs;
  if (!(S.Cr0 & cr0::PE) || (S.Rflags & rflags::VM) || S.cpl() != 0 ||
      (M[MsrSlot::IA32_SYSENTER_CS] & 0xfffc) == 0)
    return C.raiseGp(0);
  const bool To64 = I.OpSize == 8;
  uint16_t Sel = uint16_t(M[MsrSlot::IA32_SYSENTER_CS]);
  if (To64) {
    if (!isCanonical(C, S.Gpr[RDX]) || !isCanonical(C, S.Gpr[RCX]))
      return C.raiseGp(0);
    S.seg(SegReg::CS) = flatCode(uint16_t((Sel + 32) | 3), 3, true);
    S.seg(SegReg::SS) = flatData(uint16_t((Sel + 40) | 3), 3);
    S.Rip = S.Gpr[RDX];
    S.Gpr[RSP] = S.Gpr[RCX];
  } else {
    S.seg(SegReg::CS) = flatCode(uint16_t((Sel + 16) | 3), 3, false);
    S.seg(SegReg::SS) = flatData(uint16_t((Sel + 24) | 3), 3);
    S.Rip = uint32_t(S.Gpr[RDX]);
    S.Gpr[RSP] = uint32_t(S.Gpr[RCX]);
  }
  C.modeChanged();
  return Status::Ok;
}

void endsBlock(DecodedInsn &I, CostClass Cost) {
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(Cost);
}

} // namespace

bool bindFarJmp(const DecodeInfo &D, DecodedInsn &I) {
  endsBlock(I, CostClass::FarBranch);
  if (D.Ops[0].Kind == OperandKind::Ptr) {
    I.Fn = &execJmpFar<false>;
    return true;
  }
  I.Fn = &execJmpFar<true>;
  return D.Ops[0].Kind == OperandKind::Mem;
}

bool bindFarCall(const DecodeInfo &D, DecodedInsn &I) {
  endsBlock(I, CostClass::FarBranch);
  if (D.Ops[0].Kind == OperandKind::Ptr) {
    I.Fn = &execCallFar<false>;
    return true;
  }
  I.Fn = &execCallFar<true>;
  return D.Ops[0].Kind == OperandKind::Mem;
}

bool bindFarRet(const DecodeInfo &D, DecodedInsn &I) {
  endsBlock(I, CostClass::FarBranch);
  I.Imm = D.Ops[0].Kind == OperandKind::Imm ? uint16_t(D.ImmRaw) : 0;
  I.Fn = VMX_BY_SIZE(D.OpSize, execRetFar);
  return D.OpSize != 1;
}

bool bindIret(const DecodeInfo &D, DecodedInsn &I) {
  endsBlock(I, CostClass::FarBranch);
  I.Fn = VMX_BY_SIZE(D.OpSize, execIret);
  return D.OpSize != 1;
}

bool bindInt(const DecodeInfo &D, DecodedInsn &I) {
  endsBlock(I, CostClass::Interrupt);
  I.Imm = uint8_t(D.ImmRaw);
  I.Fn = &execIntN;
  return true;
}
bool bindInt3(const DecodeInfo &, DecodedInsn &I) {
  endsBlock(I, CostClass::Interrupt);
  I.Fn = &execInt3;
  return true;
}
bool bindInto(const DecodeInfo &D, DecodedInsn &I) {
  endsBlock(I, CostClass::Interrupt);
  I.Fn = &execInto;
  return D.Mode != CodeMode::Long64; // INTO is #UD in 64-bit mode
}
bool bindBound(const DecodeInfo &D, DecodedInsn &I) {
  // A register second operand is #UD; 0x62 is the EVEX prefix in 64-bit mode.
  if (D.Mode == CodeMode::Long64 || D.NumOps < 2 || D.Ops[1].Kind != OperandKind::Mem)
    return false;
  copyOperandRegs(D, I);
  I.Cost = costOf(CostClass::Memory);
  I.Fn = D.OpSize == 2 ? &execBound<uint16_t> : &execBound<uint32_t>;
  return D.OpSize == 2 || D.OpSize == 4;
}
bool bindInt1(const DecodeInfo &, DecodedInsn &I) {
  endsBlock(I, CostClass::Interrupt);
  I.Fn = &execInt1;
  return true;
}
bool bindSyscall(const DecodeInfo &, DecodedInsn &I) {
  endsBlock(I, CostClass::FarBranch);
  I.Fn = &execSyscall;
  return true;
}
bool bindSysret(const DecodeInfo &D, DecodedInsn &I) {
  endsBlock(I, CostClass::FarBranch);
  I.OpSize = (D.Prefixes & insnflag::RexW) ? 8 : 4;
  I.Fn = &execSysret;
  return true;
}
bool bindSysenter(const DecodeInfo &, DecodedInsn &I) {
  endsBlock(I, CostClass::FarBranch);
  I.Fn = &execSysenter;
  return true;
}
bool bindSysexit(const DecodeInfo &D, DecodedInsn &I) {
  endsBlock(I, CostClass::FarBranch);
  I.OpSize = (D.Prefixes & insnflag::RexW) ? 8 : 4;
  I.Fn = &execSysexit;
  return true;
}

} // namespace vmxsim
