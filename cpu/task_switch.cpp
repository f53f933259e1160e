// Task switches in protected mode (SDM Vol. 3A, "Task Management"; Vol. 2A/2B, JMP,
// CALL, INT n and IRET). See cpu/task_switch.h.
#include "cpu/task_switch.h"

#include "cpu/exec.h"
#include "cpu/memory.h"
#include "cpu/segmentation.h"

namespace vmxsim {

Status writeCr3(Cpu &C, uint64_t V); // cpu/exec_cr.cpp

namespace {

// TSS layouts (SDM Vol. 3A, "32-Bit Task-State Segment (TSS)", "16-Bit Task-State
// Segment (TSS)"): the dynamic fields a task switch saves, and the static ones it reads.
namespace tss32 {
constexpr uint32_t Cr3 = 0x1c, Eip = 0x20, Eflags = 0x24, Eax = 0x28, Es = 0x48, Ldt = 0x60,
                   Trap = 0x64, MinLimit = 0x67, SavedEnd = 0x5f;
}
namespace tss16 {
constexpr uint32_t Ip = 0x0e, Flags = 0x10, Ax = 0x12, Es = 0x22, Ldt = 0x2a, MinLimit = 0x2b,
                   SavedEnd = 0x29;
}

bool is32(unsigned Type) { return Type == desc::Tss32Avail || Type == desc::Tss32Busy; }

/// The TSS's fields at linear Base + Off: implicit supervisor accesses, 32-bit addresses
/// (task switches exist only outside IA-32e mode).
template <typename T> Status rd(Cpu &C, uint64_t Base, uint32_t Off, T &V) {
  return readLinear(C, (Base + Off) & 0xffffffffull, V, true);
}
template <typename T> Status wr(Cpu &C, uint64_t Base, uint32_t Off, T V) {
  return writeLinear(C, (Base + Off) & 0xffffffffull, V, true);
}

/// Sets or clears the busy bit (type bit 1) of the TSS descriptor Sel in the GDT.
Status setBusy(Cpu &C, uint16_t Sel, uint64_t Lo, bool Busy) {
  uint8_t Byte5 = uint8_t(Lo >> 40);
  Byte5 = Busy ? uint8_t(Byte5 | 2) : uint8_t(Byte5 & ~2);
  return wr(C, C.S.Gdtr.Base, (Sel & 0xfff8) + 5, Byte5);
}

/// The new task's state, read before the commit point.
struct TaskImage {
  uint32_t Cr3 = 0, Eip = 0, Eflags = 0, Gpr[8] = {};
  uint16_t Sel[6] = {}; // ES, CS, SS, DS, FS, GS
  uint16_t Ldt = 0;
  bool Trap = false;
};

Status readImage(Cpu &C, uint64_t Base, bool Is32, TaskImage &T) {
  if (Is32) {
    VMX_TRY(rd(C, Base, tss32::Cr3, T.Cr3));
    VMX_TRY(rd(C, Base, tss32::Eip, T.Eip));
    VMX_TRY(rd(C, Base, tss32::Eflags, T.Eflags));
    for (unsigned I = 0; I < 8; ++I)
      VMX_TRY(rd(C, Base, tss32::Eax + 4 * I, T.Gpr[I]));
    for (unsigned I = 0; I < 6; ++I)
      VMX_TRY(rd(C, Base, tss32::Es + 4 * I, T.Sel[I]));
    VMX_TRY(rd(C, Base, tss32::Ldt, T.Ldt));
    uint16_t Trap;
    VMX_TRY(rd(C, Base, tss32::Trap, Trap));
    T.Trap = Trap & 1;
    return Status::Ok;
  }
  // A 16-bit TSS: the upper halves of EIP and EFLAGS become 0 and those of the general
  // registers are left undefined by the SDM ("modified and not maintained"); like Intel
  // processors as Bochs documents them, vmxsim sets them to FFFFH. FS and GS are null.
  uint16_t V;
  VMX_TRY(rd(C, Base, tss16::Ip, V));
  T.Eip = V;
  VMX_TRY(rd(C, Base, tss16::Flags, V));
  T.Eflags = V;
  for (unsigned I = 0; I < 8; ++I) {
    VMX_TRY(rd(C, Base, tss16::Ax + 2 * I, V));
    T.Gpr[I] = 0xffff0000u | V;
  }
  for (unsigned I = 0; I < 4; ++I)
    VMX_TRY(rd(C, Base, tss16::Es + 2 * I, T.Sel[I]));
  VMX_TRY(rd(C, Base, tss16::Ldt, T.Ldt));
  return Status::Ok;
}

constexpr SegReg kTssOrder[6] = {SegReg::ES, SegReg::CS, SegReg::SS,
                                 SegReg::DS, SegReg::FS, SegReg::GS};

Status saveOldTask(Cpu &C, uint64_t SavedRip, uint64_t SavedFlags) {
  const CpuState &S = C.S;
  const uint64_t Base = S.Tr.Base;
  if (is32(S.Tr.Attr & Segment::Type)) {
    VMX_TRY(wr(C, Base, tss32::Eip, uint32_t(SavedRip)));
    VMX_TRY(wr(C, Base, tss32::Eflags, uint32_t(SavedFlags)));
    for (unsigned I = 0; I < 8; ++I)
      VMX_TRY(wr(C, Base, tss32::Eax + 4 * I, uint32_t(S.Gpr[I])));
    for (unsigned I = 0; I < 6; ++I)
      VMX_TRY(wr(C, Base, tss32::Es + 4 * I, S.seg(kTssOrder[I]).Selector));
    return Status::Ok;
  }
  VMX_TRY(wr(C, Base, tss16::Ip, uint16_t(SavedRip)));
  VMX_TRY(wr(C, Base, tss16::Flags, uint16_t(SavedFlags)));
  for (unsigned I = 0; I < 8; ++I)
    VMX_TRY(wr(C, Base, tss16::Ax + 2 * I, uint16_t(S.Gpr[I])));
  for (unsigned I = 0; I < 4; ++I)
    VMX_TRY(wr(C, Base, tss16::Es + 2 * I, S.seg(kTssOrder[I]).Selector));
  return Status::Ok;
}

/// Loads and qualifies LDTR and the segment registers of the new task (SDM Vol. 3A,
/// Table "Exception Conditions Checked During a Task Switch"): every fault here is #TS
/// with the selector, or #NP (#SS for SS) for a segment not present.
Status loadTaskSegments(Cpu &C, const TaskImage &T, uint32_t Ext) {
  CpuState &S = C.S;
  // LDT: null is allowed; otherwise a present LDT descriptor in the GDT.
  if ((T.Ldt & 0xfffc) != 0) {
    if (T.Ldt & 4)
      return C.raise(vec::TS, selectorError(T.Ldt, Ext));
    uint64_t Lo;
    VMX_TRY(readDescriptor(C, T.Ldt, Lo, Ext, vec::TS));
    if (!desc::isSystem(Lo) || desc::type(Lo) != desc::Ldt || !desc::present(Lo))
      return C.raise(vec::TS, selectorError(T.Ldt, Ext));
    S.Ldtr = segmentFromDescriptor(T.Ldt, Lo);
  }
  if (S.Rflags & rflags::VM) {
    // A virtual-8086 task: every segment register is loaded as in real mode.
    for (unsigned I = 0; I < 6; ++I)
      loadRealSegment(C, kTssOrder[I], T.Sel[I]);
    C.modeChanged();
    return Status::Ok;
  }
  const uint16_t CsSel = T.Sel[1], SsSel = T.Sel[2];
  const unsigned Cpl = CsSel & 3;
  // CS: a present code segment; non-conforming with DPL = RPL, conforming with DPL <= RPL.
  if ((CsSel & 0xfffc) == 0)
    return C.raise(vec::TS, Ext);
  uint64_t CsLo;
  VMX_TRY(readDescriptor(C, CsSel, CsLo, Ext, vec::TS));
  if (!desc::isCode(CsLo) || (desc::conforming(CsLo) ? desc::dpl(CsLo) > Cpl
                                                      : desc::dpl(CsLo) != Cpl))
    return C.raise(vec::TS, selectorError(CsSel, Ext));
  if (!desc::present(CsLo))
    return C.raise(vec::NP, selectorError(CsSel, Ext));
  // SS: a present writable data segment with DPL = RPL = CPL.
  uint64_t SsLo;
  VMX_TRY(checkStackSegment(C, SsSel, Cpl, SsLo, vec::TS, Ext, false));
  VMX_TRY(setAccessed(C, CsSel, CsLo));
  VMX_TRY(setAccessed(C, SsSel, SsLo));
  S.seg(SegReg::SS) = segmentFromDescriptor(SsSel, SsLo);
  S.seg(SegReg::SS).Attr |= 1;
  loadCodeSegment(C, CsSel, CsLo, Cpl);
  // DS, ES, FS, GS: null, or a present data or readable code segment whose DPL admits
  // the CPL and the RPL unless it is conforming code.
  for (unsigned I : {0u, 3u, 4u, 5u}) {
    const uint16_t Sel = T.Sel[I];
    if ((Sel & 0xfffc) == 0) {
      S.seg(kTssOrder[I]) = Segment{Sel, 0, 0, Segment::Unusable};
      continue;
    }
    uint64_t Lo;
    VMX_TRY(readDescriptor(C, Sel, Lo, Ext, vec::TS));
    if (!desc::readable(Lo) || desc::isSystem(Lo) ||
        (!desc::conforming(Lo) && (desc::dpl(Lo) < Cpl || desc::dpl(Lo) < (Sel & 3u))))
      return C.raise(vec::TS, selectorError(Sel, Ext));
    if (!desc::present(Lo))
      return C.raise(vec::NP, selectorError(Sel, Ext));
    VMX_TRY(setAccessed(C, Sel, Lo));
    S.seg(kTssOrder[I]) = segmentFromDescriptor(Sel, Lo);
  }
  return Status::Ok;
}

} // namespace

Status taskSwitchInitialChecks(Cpu &C, uint16_t Sel, uint64_t Lo, uint16_t &TssSel,
                               uint64_t &TssLo) {
  // SDM Vol. 2A, JMP/CALL: "TASK-GATE" and "TASK-STATE-SEGMENT". The gate's or the TSS
  // descriptor's DPL must admit CPL and RPL, and it must be present.
  const unsigned Cpl = C.S.cpl();
  if (desc::dpl(Lo) < Cpl || desc::dpl(Lo) < (Sel & 3u))
    return C.raiseGp(selectorError(Sel));
  TssSel = Sel;
  TssLo = Lo;
  if (desc::type(Lo) == desc::TaskGate) {
    if (!desc::present(Lo))
      return C.raise(vec::NP, selectorError(Sel));
    TssSel = uint16_t(Lo >> 16);
    // A TSS descriptor lives in the GDT only (SDM Vol. 3A, "TSS Descriptor").
    if (TssSel & 4)
      return C.raiseGp(selectorError(TssSel));
    VMX_TRY(readDescriptor(C, TssSel, TssLo));
  } else if (Sel & 4) {
    return C.raiseGp(selectorError(Sel));
  }
  const unsigned T = desc::type(TssLo);
  if (!desc::isSystem(TssLo) || (T != desc::Tss16Avail && T != desc::Tss32Avail))
    return C.raiseGp(selectorError(TssSel));
  if (!desc::present(TssLo))
    return C.raise(vec::NP, selectorError(TssSel));
  // A TSS limit below the minimum (67H for 32-bit, 2BH for 16-bit) is #TS(selector).
  if (desc::limit(TssLo) < (is32(T) ? tss32::MinLimit : tss16::MinLimit))
    return C.raise(vec::TS, selectorError(TssSel));
  return Status::Ok;
}

Status switchTasks(Cpu &C, uint16_t TssSel, uint64_t TssLo, TaskSwitchSource Src,
                   uint64_t SavedRip, const TaskSwitchEvent &Ev) {
  CpuState &S = C.S;
  const uint32_t Ext = Ev.Ext;
  const bool New32 = is32(desc::type(TssLo));
  if (desc::limit(TssLo) < (New32 ? tss32::MinLimit : tss16::MinLimit))
    return C.raise(vec::TS, selectorError(TssSel, Ext));
  // The old TSS must hold the dynamic fields the switch saves into it.
  const bool Old32 = is32(S.Tr.Attr & Segment::Type);
  if (S.Tr.Limit < (Old32 ? tss32::SavedEnd : tss16::SavedEnd))
    return C.raise(vec::TS, selectorError(S.Tr.Selector, Ext));
  const uint64_t NewBase = desc::base(TssLo);
  TaskImage T;
  VMX_TRY(readImage(C, NewBase, New32, T));

  // SDM Vol. 3A, "Task Switching", steps 7-11, in the old task's context.
  const bool Nest = Src == TaskSwitchSource::Call || Src == TaskSwitchSource::IdtTaskGate;
  uint64_t SavedFlags = S.Rflags | Ev.SavedFlagsSet;
  if (Src == TaskSwitchSource::Iret)
    SavedFlags &= ~rflags::NT;
  if (Src == TaskSwitchSource::Jmp || Src == TaskSwitchSource::Iret) {
    uint64_t OldLo;
    VMX_TRY(readDescriptor(C, S.Tr.Selector, OldLo, Ext, vec::TS));
    VMX_TRY(setBusy(C, S.Tr.Selector, OldLo, false));
  }
  VMX_TRY(saveOldTask(C, SavedRip, SavedFlags));
  if (Nest)
    VMX_TRY(wr(C, NewBase, 0, S.Tr.Selector)); // the previous-task link
  if (Src != TaskSwitchSource::Iret)
    VMX_TRY(setBusy(C, TssSel, TssLo, true));

  // The commit point: TR, CR0.TS and the new task's registers. From here on faults
  // belong to the new task (its EIP is the return address they push).
  Segment Tr = segmentFromDescriptor(TssSel, TssLo | (uint64_t(2) << 40));
  S.Tr = Tr;
  S.Cr0 |= cr0::TS;
  uint64_t Flags = (T.Eflags & 0x3f7fd5u) | rflags::Fixed1;
  if (Nest)
    Flags |= rflags::NT;
  S.Rflags = Flags;
  S.Rip = T.Eip;
  for (unsigned I = 0; I < 8; ++I)
    S.Gpr[I] = T.Gpr[I];
  // The selectors are loaded first and their descriptors qualified after (step 13):
  // until then they are unusable, with SS's DPL (the CPL) taken from CS's RPL.
  const unsigned NewCpl = (Flags & rflags::VM) ? 3 : (T.Sel[1] & 3u);
  S.Ldtr = Segment{T.Ldt, 0, 0, Segment::Unusable};
  for (unsigned I = 0; I < 6; ++I)
    S.seg(kTssOrder[I]) =
        Segment{T.Sel[I], 0, 0, Segment::Unusable | (NewCpl << Segment::DplShift)};
  C.modeChanged();
  // Local breakpoint enables are cleared by every task switch (SDM Vol. 3B, Debug
  // Control Register (DR7): L0-L3 and LE).
  S.Dr[7] &= ~uint64_t(0x155);
  debugRegistersChanged(C);
  if (New32 && (S.Cr0 & cr0::PG))
    VMX_TRY(writeCr3(C, T.Cr3));
  else if (New32)
    S.Cr3 = T.Cr3;
  VMX_TRY(loadTaskSegments(C, T, Ext));
  C.breakBlock();

  if (Ev.HasErrorCode) {
    // An exception's error code goes on the new task's stack (SDM Vol. 2A, INT n:
    // TASK-GATE), a doubleword for a 32-bit TSS and a word for a 16-bit one.
    const unsigned Size = New32 ? 4 : 2;
    const unsigned Sas = (S.ss().Attr & Segment::DB) ? 4 : 2;
    StackRef R{S.ss(), Sas, maskToSize(S.Gpr[RSP], Sas), NewCpl < 3, vec::SS, Ext};
    VMX_TRY(stackPush(C, R, Ev.ErrorCode, Size));
    if (Sas == 4)
      S.Gpr[RSP] = uint32_t(R.Sp);
    else
      S.Gpr[RSP] = (S.Gpr[RSP] & ~uint64_t(0xffff)) | uint16_t(R.Sp);
  }
  if (!(Flags & rflags::VM) && S.Rip > S.cs().Limit)
    return C.raiseGp(Ext);
  if (T.Trap) {
    // The T flag of the new TSS: a debug trap before the task's first instruction, with
    // DR6.BT (SDM Vol. 3B, "Task-Switch Exception Condition").
    C.Pending = PendingEvent{vec::DB, false, 0, 1u << 15};
    return Status::Fault;
  }
  return Status::Ok;
}

Status taskReturn(Cpu &C, uint64_t NextRip) {
  // SDM Vol. 2A, IRET, TASK-RETURN: the back link must name a busy TSS in the GDT.
  uint16_t Link;
  VMX_TRY(rd(C, C.S.Tr.Base, 0, Link));
  if ((Link & 4) || (Link & 0xfffc) == 0 || !selectorInTable(C, Link))
    return C.raise(vec::TS, selectorError(Link));
  uint64_t Lo;
  VMX_TRY(readDescriptor(C, Link, Lo, 0, vec::TS));
  const unsigned T = desc::type(Lo);
  if (!desc::isSystem(Lo) || (T != desc::Tss16Busy && T != desc::Tss32Busy))
    return C.raise(vec::TS, selectorError(Link));
  if (!desc::present(Lo))
    return C.raise(vec::NP, selectorError(Link));
  return switchTasks(C, Link, Lo, TaskSwitchSource::Iret, NextRip);
}

Status taskGateDelivery(Cpu &C, uint16_t TssSel, uint64_t ReturnRip,
                        const TaskSwitchEvent &Ev) {
  // SDM Vol. 2A, INT n, TASK-GATE: an available TSS in the GDT, present.
  if ((TssSel & 4) || !selectorInTable(C, TssSel))
    return C.raiseGp(selectorError(TssSel, Ev.Ext));
  uint64_t Lo;
  VMX_TRY(readDescriptor(C, TssSel, Lo, Ev.Ext));
  const unsigned T = desc::type(Lo);
  if (!desc::isSystem(Lo) || (T != desc::Tss16Avail && T != desc::Tss32Avail))
    return C.raiseGp(selectorError(TssSel, Ev.Ext));
  if (!desc::present(Lo))
    return C.raise(vec::NP, selectorError(TssSel, Ev.Ext));
  return switchTasks(C, TssSel, Lo, TaskSwitchSource::IdtTaskGate, ReturnRip, Ev);
}

} // namespace vmxsim
