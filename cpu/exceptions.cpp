// Event delivery (SDM Vol. 3A, Interrupt and Exception Handling): the real-mode IVT,
// 16/32-bit IDT gates (with stack switch from the TSS and returns from virtual-8086
// mode), 64-bit IDT gates with IST, #DF escalation and triple fault.
#include "cpu/exceptions.h"

#include "cpu/cpu.h"
#include "cpu/cost_model.h"
#include "cpu/exec.h"
#include "cpu/msrs.h"
#include "cpu/segmentation.h"
#include "cpu/task_switch.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmx_events.h"

namespace vmxsim {

namespace {

struct Event {
  EventKind Kind;
  uint8_t Vector;
  bool HasErr;
  uint32_t Err;
  uint64_t ReturnRip;
  /// EXT bit of error codes raised while delivering (SDM Vol. 3A, Error Code): set for
  /// events external to the program (exceptions, NMI, INTR, INT1), clear for INT n,
  /// INT3 and INTO.
  uint32_t Ext;
  /// Software interrupts check the gate DPL against the CPL (SDM Vol. 3A, Protection of
  /// Exception- and Interrupt-Handler Procedures).
  bool DplCheck;
};

// Fault-class exceptions push RFLAGS with RF=1 so that IRET back to the faulting
// instruction does not re-trigger an instruction breakpoint (SDM Vol. 3A, Resume Flag;
// KVM and Bochs do the same). #DB is left alone: its fault/trap class depends on cause.
bool isFaultClass(uint8_t V) {
  switch (V) {
  case vec::DE: case vec::BR: case vec::UD: case vec::NM: case vec::TS: case vec::NP:
  case vec::SS: case vec::GP: case vec::PF: case vec::MF: case vec::AC: case vec::XM:
  case vec::VE: case vec::CP:
    return true;
  default:
    return false;
  }
}

uint32_t idtError(const Event &E) { return uint32_t(E.Vector) * 8 + 2 + E.Ext; }

uint64_t pushedFlags(const Cpu &C, const Event &E) {
  uint64_t F = C.S.Rflags;
  if (E.Kind == EventKind::Exception && isFaultClass(E.Vector))
    F |= rflags::RF;
  return F;
}

// SDM Vol. 3A, Exception and Interrupt Handling in Real-Address Mode (Interrupt Vector
// Table); Vol. 2A, INT n: REAL-ADDRESS-MODE pseudocode.
Status deliverReal(Cpu &C, const Event &E) {
  CpuState &S = C.S;
  uint32_t Off = uint32_t(E.Vector) * 4;
  if (Off + 3 > S.Idtr.Limit)
    return C.raiseGp(0);
  uint32_t Vector;
  VMX_TRY(readLinear(C, (S.Idtr.Base + Off) & 0xffffffffull, Vector, true));
  StackRef R{S.ss(), stackAddrSize(C), maskToSize(S.Gpr[RSP], stackAddrSize(C)), true,
             vec::SS, 0};
  VMX_TRY(stackPush(C, R, pushedFlags(C, E), 2));
  VMX_TRY(stackPush(C, R, S.cs().Selector, 2));
  VMX_TRY(stackPush(C, R, E.ReturnRip, 2));
  setStackPointer(C, R.Sp);
  S.Rflags &= ~(rflags::IF | rflags::TF | rflags::AC | rflags::RF);
  loadRealSegment(C, SegReg::CS, uint16_t(Vector >> 16));
  S.Rip = Vector & 0xffff;
  C.modeChanged();
  return Status::Ok;
}

// The code-segment checks shared by legacy and 64-bit gates (SDM Vol. 2A, INT n:
// PROTECTED-MODE pseudocode, "IF new code segment selector is NULL ...").
Status checkGateTarget(Cpu &C, const Event &E, uint16_t Sel, uint64_t &Lo) {
  if ((Sel & 0xfffc) == 0)
    return C.raiseGp(E.Ext);
  VMX_TRY(readDescriptor(C, Sel, Lo, E.Ext));
  if (!desc::isCode(Lo) || desc::dpl(Lo) > C.S.cpl())
    return C.raiseGp(selectorError(Sel, E.Ext));
  if (!desc::present(Lo))
    return C.raise(vec::NP, selectorError(Sel, E.Ext));
  return Status::Ok;
}

// SDM Vol. 3A, Exception and Interrupt Handling (protected mode); Vol. 2A, INT n:
// INTER-PRIVILEGE-LEVEL-INTERRUPT, INTRA-PRIVILEGE-LEVEL-INTERRUPT, and
// INTERRUPT-FROM-VIRTUAL-8086-MODE.
Status deliverProtected(Cpu &C, const Event &E) {
  CpuState &S = C.S;
  const unsigned Cpl = S.cpl();
  const bool FromV86 = S.Rflags & rflags::VM;
  uint32_t Off = uint32_t(E.Vector) * 8;
  if (Off + 7 > S.Idtr.Limit)
    return C.raiseGp(idtError(E));
  uint64_t Gate;
  VMX_TRY(readLinear(C, (S.Idtr.Base + Off) & 0xffffffffull, Gate, true));
  unsigned Type = desc::type(Gate);
  bool ValidType = desc::isSystem(Gate) &&
                   (Type == desc::TaskGate || Type == desc::IntGate16 ||
                    Type == desc::TrapGate16 || Type == desc::IntGate32 ||
                    Type == desc::TrapGate32);
  if (!ValidType)
    return C.raiseGp(idtError(E));
  if (E.DplCheck && desc::dpl(Gate) < Cpl)
    return C.raiseGp(idtError(E));
  if (!desc::present(Gate))
    return C.raise(vec::NP, idtError(E));
  if (Type == desc::TaskGate) {
    // Task switches always cause VM exits in VMX non-root operation (SDM Vol. 3C, "Task
    // Switches" in "Other Causes of VM Exits").
    if (C.NonRoot)
      return vmxIdtTaskSwitch(C, uint16_t(Gate >> 16));
    TaskSwitchEvent Ev{E.HasErr, E.Err, E.Ext, pushedFlags(C, E) & rflags::RF};
    return taskGateDelivery(C, uint16_t(Gate >> 16), E.ReturnRip, Ev);
  }

  const bool Gate32 = Type & 8;
  const unsigned W = Gate32 ? 4 : 2;
  uint16_t CodeSel = uint16_t(Gate >> 16);
  uint64_t Target = (Gate & 0xffff) | (Gate32 ? ((Gate >> 48) << 16) : 0);
  uint64_t CLo;
  VMX_TRY(checkGateTarget(C, E, CodeSel, CLo));
  const bool ToInner = !desc::conforming(CLo) && desc::dpl(CLo) < Cpl;
  const unsigned NewCpl = ToInner ? desc::dpl(CLo) : Cpl;
  if (FromV86 && (!ToInner || NewCpl != 0))
    return C.raiseGp(selectorError(CodeSel, E.Ext));
  if (Target > desc::limit(CLo))
    return C.raiseGp(E.Ext);

  const uint64_t OldFlags = pushedFlags(C, E);
  StackRef R;
  Segment NewSs = S.ss();
  uint16_t NewSsSel = 0;
  uint64_t SsLo = 0;
  if (ToInner) {
    // New stack from the TSS (SDM Vol. 3A, Task-State Segment): 32-bit TSS holds
    // ESPn/SSn at 4+8n/8+8n, a 16-bit TSS SPn/SSn at 2+4n/4+4n.
    bool Tss32 = (S.Tr.Attr & Segment::Type) >= desc::Tss32Avail;
    uint64_t NewSp, SsSel;
    if (Tss32) {
      VMX_TRY(readTss(C, 4 + 8 * NewCpl, 4, NewSp, E.Ext));
      VMX_TRY(readTss(C, 8 + 8 * NewCpl, 2, SsSel, E.Ext));
    } else {
      VMX_TRY(readTss(C, 2 + 4 * NewCpl, 2, NewSp, E.Ext));
      VMX_TRY(readTss(C, 4 + 4 * NewCpl, 2, SsSel, E.Ext));
    }
    NewSsSel = uint16_t(SsSel);
    VMX_TRY(checkStackSegment(C, NewSsSel, NewCpl, SsLo, vec::TS, E.Ext, false));
    NewSs = segmentFromDescriptor(NewSsSel, SsLo);
    unsigned SsSize = (NewSs.Attr & Segment::DB) ? 4 : 2;
    R = StackRef{NewSs, SsSize, maskToSize(NewSp, SsSize), true, vec::SS,
                 selectorError(NewSsSel, E.Ext)};
    if (FromV86) {
      if (!Gate32)
        return C.raiseGp(selectorError(CodeSel, E.Ext));
      for (SegReg G : {SegReg::GS, SegReg::FS, SegReg::DS, SegReg::ES})
        VMX_TRY(stackPush(C, R, S.seg(G).Selector, 4));
    }
    VMX_TRY(stackPush(C, R, S.ss().Selector, W));
    VMX_TRY(stackPush(C, R, S.Gpr[RSP], W));
  } else {
    unsigned SsSize = stackAddrSize(C);
    R = StackRef{S.ss(), SsSize, maskToSize(S.Gpr[RSP], SsSize), NewCpl < 3, vec::SS,
                 E.Ext};
  }
  VMX_TRY(stackPush(C, R, OldFlags, W));
  VMX_TRY(stackPush(C, R, S.cs().Selector, W));
  VMX_TRY(stackPush(C, R, E.ReturnRip, W));
  if (E.HasErr)
    VMX_TRY(stackPush(C, R, E.Err, W));
  VMX_TRY(setAccessed(C, CodeSel, CLo));
  if (ToInner)
    VMX_TRY(setAccessed(C, NewSsSel, SsLo));

  // Commit.
  if (ToInner) {
    NewSs.Attr |= 1;
    S.seg(SegReg::SS) = NewSs;
  }
  if (R.AddrSize == 4)
    S.Gpr[RSP] = uint32_t(R.Sp);
  else
    S.Gpr[RSP] = (S.Gpr[RSP] & ~uint64_t(0xffff)) | uint16_t(R.Sp);
  if (FromV86)
    for (SegReg G : {SegReg::GS, SegReg::FS, SegReg::DS, SegReg::ES})
      S.seg(G) = Segment{0, 0, 0, Segment::Unusable};
  S.Rflags &= ~(rflags::TF | rflags::NT | rflags::RF | rflags::VM);
  if (!(Type & 1)) // interrupt gate, not trap gate
    S.Rflags &= ~rflags::IF;
  loadCodeSegment(C, CodeSel, CLo, NewCpl);
  S.Rip = Target;
  return Status::Ok;
}

// SDM Vol. 3A, 64-Bit Mode Exception and Interrupt Handling (and its subsections on
// stack alignment, stack switching and the Interrupt Stack Table).
Status deliverLong(Cpu &C, const Event &E) {
  CpuState &S = C.S;
  const unsigned Cpl = S.cpl();
  uint32_t Off = uint32_t(E.Vector) * 16;
  if (Off + 15 > S.Idtr.Limit)
    return C.raiseGp(idtError(E));
  uint64_t Lo, Hi;
  VMX_TRY(readLinear(C, S.Idtr.Base + Off, Lo, true));
  VMX_TRY(readLinear(C, S.Idtr.Base + Off + 8, Hi, true));
  unsigned Type = desc::type(Lo);
  if (!desc::isSystem(Lo) || (Type != desc::IntGate32 && Type != desc::TrapGate32) ||
      ((Hi >> 40) & 0x1f) != 0)
    return C.raiseGp(idtError(E));
  if (E.DplCheck && desc::dpl(Lo) < Cpl)
    return C.raiseGp(idtError(E));
  if (!desc::present(Lo))
    return C.raise(vec::NP, idtError(E));
  uint16_t CodeSel = uint16_t(Lo >> 16);
  uint64_t CLo;
  VMX_TRY(checkGateTarget(C, E, CodeSel, CLo));
  if (!desc::longCode(CLo) || desc::defaultBig(CLo))
    return C.raiseGp(selectorError(CodeSel, E.Ext));
  uint64_t Target = (Lo & 0xffff) | (((Lo >> 48) & 0xffff) << 16) | (Hi << 32);
  if (!isCanonical(C, Target))
    return C.raiseGp(E.Ext);
  const bool ToInner = !desc::conforming(CLo) && desc::dpl(CLo) < Cpl;
  const unsigned NewCpl = ToInner ? desc::dpl(CLo) : Cpl;
  const unsigned Ist = unsigned(Lo >> 32) & 7;

  uint64_t NewSp = S.Gpr[RSP];
  if (Ist) {
    VMX_TRY(readTss(C, 36 + 8 * (Ist - 1), 8, NewSp, E.Ext));
  } else if (ToInner) {
    VMX_TRY(readTss(C, 4 + 8 * NewCpl, 8, NewSp, E.Ext));
  }
  if ((Ist || ToInner) && !isCanonical(C, NewSp))
    return C.raise(vec::SS, E.Ext);
  NewSp &= ~uint64_t(15);
  StackRef R{S.ss(), 8, NewSp, NewCpl < 3, vec::SS, E.Ext};
  VMX_TRY(stackPush(C, R, S.ss().Selector, 8));
  VMX_TRY(stackPush(C, R, S.Gpr[RSP], 8));
  VMX_TRY(stackPush(C, R, pushedFlags(C, E), 8));
  VMX_TRY(stackPush(C, R, S.cs().Selector, 8));
  VMX_TRY(stackPush(C, R, E.ReturnRip, 8));
  if (E.HasErr)
    VMX_TRY(stackPush(C, R, E.Err, 8));
  VMX_TRY(setAccessed(C, CodeSel, CLo));

  if (ToInner)
    S.seg(SegReg::SS) = nullStackSegment(0, NewCpl);
  S.Gpr[RSP] = R.Sp;
  S.Rflags &= ~(rflags::TF | rflags::NT | rflags::RF | rflags::VM);
  if (Type == desc::IntGate32)
    S.Rflags &= ~rflags::IF;
  loadCodeSegment(C, CodeSel, CLo, NewCpl);
  S.Rip = Target;
  return Status::Ok;
}

// A #DB about to be delivered through the IDT (not one the exception bitmap turned into
// a VM exit, which leaves DR6 and DR7 alone: SDM Vol. 3C, "Exit Qualification for Debug
// Exceptions"). Its DR6 bits ride in PendingEvent::FaultAddr. SDM Vol. 3B, "Debug Status
// Register (DR6)": B0-B3 are replaced by the cause's ("certain debug exceptions may clear
// bits 0-3"), "the remaining contents of DR6 are never cleared by the processor"; "the
// processor clears the GD flag upon entering to the debug exception handler" ("Debug
// Control Register (DR7)"); "the processor clears the BTF flag when it generates a debug
// exception" ("Single-Stepping on Branches"). A general-detect #DB is a fault other than
// an instruction breakpoint, so the EFLAGS image carries RF = 1 ("Instruction-Breakpoint
// Exception Condition"): setting RF now puts it in the image, and delivery clears it.
void enterDebugHandler(Cpu &C, uint32_t Bits) {
  CpuState &S = C.S;
  S.Dr[6] = (S.Dr[6] & ~uint64_t(dr6::B0toB3)) | (Bits & (dr6::B0toB3 | dr6::BD | dr6::BS | dr6::BT));
  S.Dr[7] &= ~dr7::GD;
  (*C.Msrs)[MsrSlot::IA32_DEBUGCTL] &= ~debugctl::BTF;
  if (Bits & dr6::BD)
    S.Rflags |= rflags::RF;
}

// Contributory exceptions (SDM Vol. 3A, Interrupt 8—Double Fault Exception (#DF),
// table "Interrupt and Exception Classes").
bool isContributory(uint8_t V) {
  return V == vec::DE || V == vec::TS || V == vec::NP || V == vec::SS || V == vec::GP ||
         V == vec::CP;
}
// The "page faults" class of the same table: #PF and #VE (the virtualization exception
// of "EPT-violation #VE", SDM Vol. 3A, Interrupt 20—Virtualization Exception (#VE)).
bool isPageFaultClass(uint8_t V) { return V == vec::PF || V == vec::VE; }

} // namespace

bool exceptionImageSetsRf(uint8_t Vector, uint64_t Dr6Bits) {
  // A general-detect #DB (BD) is a fault; the other #DBs are traps or instruction
  // breakpoints.
  return isFaultClass(Vector) || (Vector == vec::DB && (Dr6Bits & dr6::BD));
}

Status deliverEvent(Cpu &C, EventKind Kind, uint8_t Vector, bool HasErrorCode,
                    uint32_t ErrorCode, uint64_t ReturnRip) {
  const bool Soft = Kind == EventKind::SoftwareInt || Kind == EventKind::SoftwareException;
  Event E{Kind, Vector, HasErrorCode, ErrorCode, ReturnRip, Soft ? 0u : 1u, Soft};
  CpuState &S = C.S;
  Status St;
  // VMX non-root operation: INT3/INTO/INT1 may exit through the exception bitmap, and
  // the event is recorded for the IDT-vectoring fields (cpu/vmx/vmx_events.cpp).
  if (C.NonRoot) [[unlikely]] {
    if (vmxBeforeDelivery(C, Kind, Vector, HasErrorCode, ErrorCode, ReturnRip, St))
      return St;
  }
  if (!(S.Cr0 & cr0::PE)) {
    E.HasErr = false; // real mode pushes no error code
    St = deliverReal(C, E);
  } else if (S.longMode()) {
    St = deliverLong(C, E);
  } else {
    St = deliverProtected(C, E);
  }
  if (St != Status::Ok)
    return St;
  // Delivery ends any STI/MOV SS shadow; an NMI blocks further NMIs until IRET (SDM
  // Vol. 3A, NMI Handling).
  C.ShadowUntil = 0;
  C.Activity = ActivityState::Active;
  if (C.NonRoot) [[unlikely]]
    vmxAfterDelivery(C, Kind); // NMI blocking was set by vmxBeforeDelivery
  else if (Kind == EventKind::Nmi)
    C.NmiBlocked = true;
  if (!Soft && Kind != EventKind::PrivSoftwareException)
    C.Cycles += costOf(CostClass::Interrupt);
  C.breakBlock();
  return Status::Ok;
}

Status deliverPendingException(Cpu &C) {
  // Double-fault conditions (SDM Vol. 3A, Interrupt 8—Double Fault Exception (#DF),
  // table "Conditions for Generating a Double Fault"): a contributory exception during
  // delivery of a contributory one, or a contributory/#PF during delivery of a #PF or
  // #VE, becomes #DF; any fault while delivering #DF is a triple fault (shutdown). Every
  // other combination is handled serially. Delivery can only fault with #TS, #NP, #SS,
  // #GP or #PF (an EPT violation during delivery is never a #VE), so the loop is
  // bounded; the counter guards emulator bugs.
  //
  // In VMX non-root operation the exception bitmap is consulted for each exception
  // before it is delivered, a nested exception before it is merged into #DF, and a
  // triple fault is a VM exit (SDM Vol. 3C, "Exceptions" in "Other Causes of VM Exits";
  // "Information for VM Exits That Occur During Event Delivery").
  for (unsigned Round = 0; Round < 8; ++Round) {
    const PendingEvent E = C.Pending;
    if (C.NonRoot && vmxExceptionCausesExit(C, E.Vector, E.ErrorCode)) [[unlikely]]
      return vmxExceptionExit(C, E, intinfo::HardwareException, 0);
    if (E.Vector == vec::PF)
      C.S.Cr2 = E.FaultAddr; // CR2 is loaded as the #PF is delivered
    if (E.Vector == vec::DB)
      enterDebugHandler(C, uint32_t(E.FaultAddr));
    ++C.DeliveryDepth;
    Status St = deliverEvent(C, EventKind::Exception, E.Vector, E.HasErrorCode,
                             E.ErrorCode, C.S.Rip);
    --C.DeliveryDepth;
    if (St != Status::Fault)
      return St;
    const uint8_t Second = C.Pending.Vector;
    if (C.NonRoot && vmxExceptionCausesExit(C, Second, C.Pending.ErrorCode)) [[unlikely]]
      return vmxExceptionExit(C, C.Pending, intinfo::HardwareException, 0);
    if (E.Vector == vec::DF)
      return C.NonRoot ? vmxTripleFaultExit(C) : Status::Shutdown;
    bool Df = (isContributory(E.Vector) && isContributory(Second)) ||
              (isPageFaultClass(E.Vector) &&
               (isContributory(Second) || isPageFaultClass(Second)));
    if (Df) {
      // A #DF that exits does so directly: not "during event delivery".
      if (C.NonRoot)
        vmxAfterDoubleFault(C);
      C.Pending = PendingEvent{vec::DF, true, 0, 0};
    }
  }
  return Status::Shutdown;
}

} // namespace vmxsim
