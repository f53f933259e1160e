// VMX non-root operation, the event side: exception, NMI and external-interrupt VM exits,
// the interrupt/NMI windows, MTF, the VMX-preemption timer, activity states, triple-fault
// and task-switch exits (see vmx_events.h for the SDM sections and the hook points).
#include "cpu/vmx/vmx_events.h"

#include "cpu/cpu_model.h"
#include "cpu/memory.h"
#include "cpu/segmentation.h"
#include "cpu/task_switch.h"
#include "cpu/vmx/apic_virtualization.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmcs_controls.h"
#include "cpu/vmx/vmx_state.h"

#include <algorithm>

namespace vmxsim {

namespace {

using F = VmcsField;


// Bits of the pending-debug-exceptions field that name a debug trap to deliver: B3-B0
// and BS (SDM Vol. 3C, Table "Format of Pending-Debug-Exceptions"). The same positions
// are DR6's and the #DB exit qualification's (Table "Exit Qualification for Debug
// Exceptions": B3-B0 in bits 3:0, BD in 13, BS in 14).
constexpr uint64_t kPendingDebugTraps = 0xf | (1u << 14);
constexpr uint64_t kDebugQualificationBits = 0xf | (1u << 13) | (1u << 14);
constexpr uint64_t kSingleStepBit = 1u << 14;

// "There are valid pending debug exceptions if either the BS bit (bit 14) or the
// enable-breakpoint bit (bit 12) is 1" (SDM Vol. 3C, "Delivery of Pending Debug
// Exceptions after VM Entry"); B3-B0 alone deliver nothing.
bool validPendingDebug(uint64_t P) {
  return P & (kSingleStepBit | kPendingDebugEnabledBreakpoint);
}

uint32_t interruptionType(EventKind K) {
  switch (K) {
  case EventKind::External:
    return intinfo::ExternalInterrupt;
  case EventKind::Nmi:
    return intinfo::Nmi;
  case EventKind::Exception:
    return intinfo::HardwareException;
  case EventKind::SoftwareInt:
    return intinfo::SoftwareInterrupt;
  case EventKind::SoftwareException:
    return intinfo::SoftwareException;
  case EventKind::PrivSoftwareException:
    return intinfo::PrivilegedSoftwareException;
  }
  return intinfo::HardwareException;
}

uint32_t makeIntInfo(uint8_t Vector, uint32_t Type, bool HasErrorCode) {
  return intinfo::Valid | (Type << intinfo::TypeShift) | Vector |
         (HasErrorCode ? intinfo::DeliverErrorCode : 0);
}

bool inShadow(const Cpu &C) { return C.Retired < C.ShadowUntil; }
bool blockedByMovSs(const Cpu &C) { return inShadow(C) && C.ShadowIsMovSs; }

// HLT and the active state take interrupts, windows, MTF and the timer; shutdown and
// wait-for-SIPI block them (SDM Vol. 3C, "Activity State" in "Special Features of VM
// Entry", and "Monitor Trap Flag").
bool activeOrHlt(const Cpu &C) {
  return C.Activity == ActivityState::Active || C.Activity == ActivityState::Hlt;
}

// Every VM exit the event machinery performs goes through here: the exit ends any
// delivery in progress and drops the pending MTF VM exit.
Status eventExit(Cpu &C, const VmExitInfo &Info) {
  VmxEventState &E = C.Vmx->Events;
  E.DeliveringInfo = E.DeliveringErrorCode = E.DeliveringInsnLength = 0;
  E.InjectingEvent = E.MtfPending = false;
  E.IretNmiMark = 0;
  return vmExit(C, Info);
}

Status simpleExit(Cpu &C, ExitReason Reason, uint64_t Qualification = 0) {
  VmExitInfo Info;
  Info.Reason = Reason;
  Info.Qualification = Qualification;
  return eventExit(C, Info);
}

} // namespace

void vmxEventsOnEntry(Cpu &C) {
  VmxState &X = *C.Vmx;
  VmxEventState &E = X.Events;
  E = VmxEventState{};
  const uint32_t Info = uint32_t(X.Vmcs.get(F::VmEntryInterruptionInformation));
  const uint32_t Type = intinfo::type(Info);
  const bool Valid = Info & intinfo::Valid;
  // SDM Vol. 3C, "Injection of Pending MTF VM Exits": type 7 (other event), vector 0.
  if (Valid && Type == intinfo::OtherEvent && intinfo::vector(Info) == 0)
    E.MtfPending = true;
  const bool Vectoring = Valid && Type != intinfo::OtherEvent;
  E.InjectingEvent = Vectoring;
  // VMLAUNCH/VMRESUME itself retires after VM entry returns: that is not a guest
  // instruction for MTF.
  E.MtfRetiredMark = C.Retired + 1;
  // "If the 'virtual NMIs' VM-execution control is 1, NMIs are not blocked after VM
  // entry" (SDM Vol. 3C, "Interruptibility State" in "Special Features of VM Entry").
  if (controlSet(C.Vmx->Vmcs, VmxControl::VirtualNmis))
    C.NmiBlocked = false;
  // Pending debug exceptions are not delivered after a vectoring VM entry (SDM Vol. 3C,
  // "Delivery of Pending Debug Exceptions after VM Entry"; the INT3/INTO-after-MOV-SS
  // corner is not modelled).
  if (Vectoring)
    X.PendingDebugExceptions = 0;
}

void vmxWindowOpens(Cpu &C) {
  VmxEventState &E = C.Vmx->Events;
  // An instruction retired since the last window: with MTF on, an MTF VM exit is pending
  // (SDM Vol. 3C, "Monitor Trap Flag").
  if (C.Retired != E.MtfRetiredMark && controlSet(C.Vmx->Vmcs, VmxControl::MonitorTrapFlag))
    E.MtfPending = true;
  E.MtfRetiredMark = C.Retired;
}

bool vmxBeforeNmi(Cpu &C, Status &St) {
  VmxState &X = *C.Vmx;
  VmxEventState &E = X.Events;
  const bool Awake = activeOrHlt(C);
  // APIC-write emulation completes the operation that virtualized a write to the
  // APIC-access page, before anything else happens at the boundary after it (SDM Vol.
  // 3C, "APIC-Write Emulation").
  // (The pending flag is tested here, inline: the common case costs no call.)
  if (E.ApicWritePending && apicv::pendingApicWrite(C, St))
    return true;
  // 0. An INIT held while in VMX root operation is unblocked by the VM entry: it causes a
  // VM exit (SDM Vol. 3C, "Restrictions on VMX Operation", "Other Causes of VM Exits")
  // with INIT's priority, above MTF (SDM Vol. 3A, "Priority Among Concurrent Events").
  // Wait-for-SIPI blocks INIT (SDM Vol. 3C, "Activity State"): it stays held.
  if (X.InitBlocked && C.Activity != ActivityState::WaitForSipi) {
    X.InitBlocked = false;
    St = simpleExit(C, ExitReason::InitSignal);
    return true;
  }
  // 1. MTF VM exits: below SMI/INIT, above debug traps. Not in shutdown or wait-for-
  // SIPI; in HLT the exit saves the HLT activity state.
  if (E.MtfPending) {
    if (Awake) {
      St = simpleExit(C, ExitReason::MonitorTrapFlag);
      return true;
    }
    E.MtfPending = false;
  }
  // 2. Debug traps on the previous instruction (single step, or pending debug
  // exceptions loaded by VM entry): #DB, which the exception bitmap may turn into a VM
  // exit with the DR6-style bits as qualification (SDM Vol. 3C, "Delivery of Pending
  // Debug Exceptions after VM Entry"). Blocked by MOV SS.
  if (validPendingDebug(X.PendingDebugExceptions) && Awake && !blockedByMovSs(C)) {
    const uint64_t Traps = X.PendingDebugExceptions & kPendingDebugTraps;
    X.PendingDebugExceptions = 0;
    C.Pending = PendingEvent{vec::DB, false, 0, Traps};
    St = Status::Fault;
    return true;
  }
  // 3. VMX-preemption timer (SDM Vol. 3C, "VMX-Preemption Timer"): below debug traps,
  // above the NMI window. It exits from the active and HLT states; shutdown and
  // wait-for-SIPI are treated as blocking it (vmxsim's reading of "if it is not
  // blocked by activity state").
  if (X.PreemptionTimerActive && C.Cycles >= X.PreemptionTimerDeadline && Awake) {
    St = simpleExit(C, ExitReason::VmxPreemptionTimerExpired);
    return true;
  }
  // 4. NMI window (SDM Vol. 3C, "NMI-Window Exiting"): no (virtual-)NMI blocking and
  // no blocking by MOV SS; blocking by STI does not hold it off here. Wakes HLT and
  // shutdown, not wait-for-SIPI.
  const bool VirtualNmis = controlSet(X.Vmcs, VmxControl::VirtualNmis);
  if (controlSet(X.Vmcs, VmxControl::NmiWindowExiting) &&
      !(VirtualNmis ? X.VirtualNmiBlocked : C.NmiBlocked) && !blockedByMovSs(C) &&
      C.Activity != ActivityState::WaitForSipi) {
    St = simpleExit(C, ExitReason::NmiWindow);
    return true;
  }
  return false;
}

bool vmxNmiExit(Cpu &C, Status &St) {
  if (!controlSet(C.Vmx->Vmcs, VmxControl::NmiExiting))
    return false;
  VmExitInfo Info;
  Info.Reason = ExitReason::ExceptionOrNmi;
  Info.InterruptionInfo = makeIntInfo(vec::NMI, intinfo::Nmi, false);
  St = eventExit(C, Info);
  // "VM exits caused directly by non-maskable interrupts (NMIs) cause blocking by NMI"
  // (SDM Vol. 3C, "Updating Non-Register State").
  if (St == Status::VmExit)
    C.NmiBlocked = true;
  return true;
}

bool vmxInterruptWindowExit(Cpu &C, Status &St) {
  // 6. Interrupt window (SDM Vol. 3C, "Interrupt-Window Exiting"): RFLAGS.IF = 1 and no
  // blocking by STI or MOV SS. Wakes HLT, not shutdown or wait-for-SIPI.
  if (controlSet(C.Vmx->Vmcs, VmxControl::InterruptWindowExiting) &&
      (C.S.Rflags & rflags::IF) && !inShadow(C) && activeOrHlt(C)) {
    St = simpleExit(C, ExitReason::InterruptWindow);
    return true;
  }
  // Virtual-interrupt delivery has the interrupt window's priority: below NMIs, above
  // external interrupts (SDM Vol. 3C, "Virtual-Interrupt Delivery").
  return C.Vmx->Events.VirtualInterruptRecognized && apicv::virtualInterruptDelivery(C, St);
}

bool vmxExternalInterruptExiting(const Cpu &C) {
  return controlSet(C.Vmx->Vmcs, VmxControl::ExternalInterruptExiting);
}

Status vmxExternalInterruptExit(Cpu &C) {
  VmExitInfo Info;
  Info.Reason = ExitReason::ExternalInterrupt;
  // "Acknowledge interrupt on exit": the processor acknowledges the controller and
  // records the vector; otherwise the interrupt stays pending and the field is invalid
  // (SDM Vol. 3C, "Information for VM Exits Due to Vectored Events").
  if (controlSet(C.Vmx->Vmcs, VmxControl::AcknowledgeInterruptOnExit)) {
    const uint8_t Vector = C.Intr->acknowledge();
    // "Process posted interrupts": the notification vector is processed, not an exit
    // (SDM Vol. 3C, "Posted-Interrupt Processing").
    if (apicv::postedInterrupt(C, Vector))
      return Status::Ok;
    Info.InterruptionInfo = makeIntInfo(Vector, intinfo::ExternalInterrupt, false);
  }
  return eventExit(C, Info);
}

EventWindow vmxWaitForTimer(Cpu &C, uint64_t UntilCycle, StopReason &Why) {
  const VmxState &X = *C.Vmx;
  if (!X.PreemptionTimerActive || !activeOrHlt(C)) {
    Why = StopReason::Halted;
    return EventWindow::Stop;
  }
  // The preemption timer keeps counting in HLT, so time advances to its expiry (or to
  // the end of this run call).
  if (X.PreemptionTimerDeadline > UntilCycle) {
    C.waitUntil(UntilCycle);
    Why = StopReason::Deadline;
    return EventWindow::Stop;
  }
  C.waitUntil(X.PreemptionTimerDeadline);
  return EventWindow::Again;
}

uint64_t vmxWakeCycle(const Cpu &C) {
  const VmxState &X = *C.Vmx;
  if (!activeOrHlt(C))
    return ~uint64_t(0);
  // Both are taken in the HLT state by the event window (vmxBeforeNmi; VM entry
  // refuses HLT with blocking by MOV SS, so a debug trap is never held off there).
  if (X.Events.MtfPending || validPendingDebug(X.PendingDebugExceptions) ||
      apicv::virtualInterruptDue(C))
    return C.Cycles;
  if (X.PreemptionTimerActive)
    return std::max(C.Cycles, X.PreemptionTimerDeadline);
  return ~uint64_t(0);
}

uint64_t vmxWindowDue(const Cpu &C, uint64_t UntilCycle) {
  const VmxState &X = *C.Vmx;
  // MTF needs the window after every instruction; a shadow or a pending debug trap
  // after the next one.
  if (inShadow(C) || controlSet(C.Vmx->Vmcs, VmxControl::MonitorTrapFlag) ||
      validPendingDebug(X.PendingDebugExceptions))
    return C.Cycles;
  if (X.PreemptionTimerActive)
    return std::min(UntilCycle, X.PreemptionTimerDeadline);
  return UntilCycle;
}

bool vmxBeforeDelivery(Cpu &C, EventKind Kind, uint8_t Vector, bool HasErrorCode,
                       uint32_t ErrorCode, uint64_t ReturnRip, Status &St) {
  VmxState &X = *C.Vmx;
  VmxEventState &E = X.Events;
  const bool Injected = E.InjectingEvent;
  E.InjectingEvent = false;
  const bool Software = Kind == EventKind::SoftwareInt ||
                        Kind == EventKind::SoftwareException ||
                        Kind == EventKind::PrivSoftwareException;
  const uint32_t Length = Software ? uint32_t((ReturnRip - C.S.Rip) & C.RipMask) : 0;
  // INT3, INTO (#BP, #OF: software exceptions) and INT1 (#DB: privileged software
  // exception) consult the exception bitmap; INT n never does (SDM Vol. 3C, "Exceptions"
  // in "Other Causes of VM Exits"). Injected events never do (SDM Vol. 3C, "Event
  // Injection").
  if (!Injected &&
      (Kind == EventKind::SoftwareException || Kind == EventKind::PrivSoftwareException) &&
      ((X.Vmcs.get(F::ExceptionBitmap) >> Vector) & 1)) {
    St = vmxExceptionExit(C, PendingEvent{Vector, false, 0, 0}, interruptionType(Kind),
                          Length);
    return true;
  }
  const bool ErrorCodeDelivered = HasErrorCode && (C.S.Cr0 & cr0::PE);
  E.DeliveringInfo = makeIntInfo(Vector, interruptionType(Kind), ErrorCodeDelivered);
  E.DeliveringErrorCode = ErrorCodeDelivered ? ErrorCode : 0;
  E.DeliveringInsnLength = Length;
  // An NMI blocks NMIs (virtual NMIs: virtual-NMI blocking) before a VM exit its
  // delivery may cause (SDM Vol. 3C, "Architectural State Before a VM Exit").
  if (Kind == EventKind::Nmi) {
    if (controlSet(C.Vmx->Vmcs, VmxControl::VirtualNmis))
      X.VirtualNmiBlocked = true;
    else
      C.NmiBlocked = true;
  }
  return false;
}

void vmxAfterDelivery(Cpu &C, EventKind Kind) {
  (void)Kind; // NMI blocking was set before delivery
  VmxState &X = *C.Vmx;
  VmxEventState &E = X.Events;
  E.DeliveringInfo = E.DeliveringErrorCode = E.DeliveringInsnLength = 0;
  E.IretNmiMark = 0;
  // A delivered event wakes an inactive guest (SDM Vol. 3C, "Activity State"): the
  // delivery made the processor active (cpu/exceptions.cpp).
  // "an MTF VM exit is pending on the instruction boundary following delivery of the
  // event (or any nested exception)" (SDM Vol. 3C, "Monitor Trap Flag").
  if (controlSet(C.Vmx->Vmcs, VmxControl::MonitorTrapFlag))
    E.MtfPending = true;
}

bool vmxExceptionCausesExit(const Cpu &C, uint8_t Vector, uint32_t ErrorCode) {
  const VmcsData &V = C.Vmx->Vmcs;
  const bool Bit = Vector < 32 && ((V.get(F::ExceptionBitmap) >> Vector) & 1);
  if (Vector != vec::PF)
    return Bit;
  // #PF: "if PFEC & PFEC_MASK = PFEC_MATCH, the page fault causes a VM exit if and only
  // if bit 14 of the exception bitmap is 1; otherwise if and only if it is 0" (SDM Vol.
  // 3C, "Exceptions" in "Other Causes of VM Exits").
  const uint32_t Mask = uint32_t(V.get(F::PageFaultErrorCodeMask));
  const uint32_t Match = uint32_t(V.get(F::PageFaultErrorCodeMatch));
  return ((ErrorCode & Mask) == Match) ? Bit : !Bit;
}

void vmxFillIdtVectoring(const Cpu &C, VmExitInfo &Info) {
  const VmxEventState &E = C.Vmx->Events;
  Info.IdtVectoringInfo = E.DeliveringInfo;
  Info.IdtVectoringErrorCode = E.DeliveringErrorCode;
  if (E.DeliveringInfo && !Info.InstructionLength)
    Info.InstructionLength = E.DeliveringInsnLength;
}

Status vmxExceptionExit(Cpu &C, const PendingEvent &P, uint32_t Type, uint32_t InsnLength) {
  const VmxEventState &E = C.Vmx->Events;
  VmExitInfo Info;
  Info.Reason = ExitReason::ExceptionOrNmi;
  // The error code "that would have been pushed on the stack": none in real mode.
  const bool HasErr = P.HasErrorCode && (C.S.Cr0 & cr0::PE);
  Info.InterruptionInfo = makeIntInfo(P.Vector, Type, HasErr);
  Info.InterruptionErrorCode = HasErr ? P.ErrorCode : 0;
  // Exit qualification (SDM Vol. 3C, "Exit Qualification for ... Exceptions"): the
  // linear address for #PF (CR2 is not loaded), the DR6-style bits for #DB (DR6 is not
  // written); zero otherwise.
  if (Type == intinfo::HardwareException && P.Vector == vec::PF)
    Info.Qualification = P.FaultAddr;
  else if (Type == intinfo::HardwareException && P.Vector == vec::DB)
    Info.Qualification = P.FaultAddr & kDebugQualificationBits;
  Info.InstructionLength = InsnLength;
  // "If the VM exit is caused directly by an event that would normally be delivered
  // through the IDT, the value saved [for RFLAGS.RF] is that which would appear in the
  // saved RFLAGS image" (SDM Vol. 3C, "Saving RIP, RSP, RFLAGS, and SSP"): 1 for a fault
  // other than an instruction breakpoint. During the delivery of another event the
  // image would be that event's, which RF already is. (The guest's RFLAGS is saved here
  // and then replaced by the host's, so the bit set now is seen by nothing else.)
  if (Type == intinfo::HardwareException && !E.DeliveringInfo &&
      exceptionImageSetsRf(P.Vector, P.FaultAddr))
    C.S.Rflags |= rflags::RF;
  vmxFillIdtVectoring(C, Info);
  // Bit 12, "NMI unblocking due to IRET": the exit is due to a fault on an IRET that
  // removed (virtual-)NMI blocking; undefined (left 0) when IDT-vectoring is valid or
  // for #DF (SDM Vol. 3C, "Information for VM Exits Due to Vectored Events").
  if (!E.DeliveringInfo && P.Vector != vec::DF && E.IretNmiMark == C.Retired + 1)
    Info.InterruptionInfo |= intinfo::NmiUnblockingDueToIret;
  return eventExit(C, Info);
}

void vmxAfterDoubleFault(Cpu &C) {
  // "The original event results in a double-fault exception that causes the VM exit
  // directly" is not an exit during event delivery (SDM Vol. 3C, "Information for VM
  // Exits That Occur During Event Delivery").
  VmxEventState &E = C.Vmx->Events;
  E.DeliveringInfo = E.DeliveringErrorCode = E.DeliveringInsnLength = 0;
}

Status vmxTripleFaultExit(Cpu &C) {
  // "The logical processor encountered an exception while attempting to call the
  // double-fault handler and that exception did not itself cause a VM exit due to the
  // exception bitmap" (SDM Vol. 3D, "VMX Basic Exit Reasons"): not delivery-time info.
  VmxEventState &E = C.Vmx->Events;
  E.DeliveringInfo = 0;
  return simpleExit(C, ExitReason::TripleFault);
}

void vmxIretUnblocksNmis(Cpu &C) {
  VmxState &X = *C.Vmx;
  bool WasBlocked = false;
  if (controlSet(C.Vmx->Vmcs, VmxControl::VirtualNmis)) {
    WasBlocked = X.VirtualNmiBlocked;
    X.VirtualNmiBlocked = false;
  } else if (!controlSet(C.Vmx->Vmcs, VmxControl::NmiExiting)) {
    WasBlocked = C.NmiBlocked;
    C.NmiBlocked = false;
  }
  // The IRET retires at Retired + 1; a fault before that is "a fault on the IRET".
  X.Events.IretNmiMark = WasBlocked ? C.Retired + 1 : 0;
}

namespace {

Status taskSwitchExit(Cpu &C, uint16_t Sel, TaskSwitchSource Src, uint32_t InsnLength,
                      bool DuringDelivery) {
  VmExitInfo Info;
  Info.Reason = ExitReason::TaskSwitch;
  // SDM Vol. 3C, Table "Exit Qualification for Task Switches": selector in 15:0, source
  // in 31:30.
  Info.Qualification = uint64_t(Sel) | (uint64_t(Src) << 30);
  Info.InstructionLength = InsnLength;
  if (DuringDelivery)
    vmxFillIdtVectoring(C, Info);
  return eventExit(C, Info);
}

} // namespace

Status vmxFarTaskSwitch(Cpu &C, uint16_t Sel, uint64_t Lo, TaskSwitchSource Src,
                        uint32_t InsnLength) {
  // The VM exit happens "only after the initial checks of the task switch pass" (SDM
  // Vol. 3C, "Task Switches" in "Other Causes of VM Exits"): the privilege, presence and
  // TSS checks of JMP/CALL, as in root operation (cpu/task_switch.h).
  uint16_t TssSel;
  uint64_t TssLo;
  VMX_TRY(taskSwitchInitialChecks(C, Sel, Lo, TssSel, TssLo));
  return taskSwitchExit(C, TssSel, Src, InsnLength, false);
}

Status vmxIretTaskSwitch(Cpu &C, uint32_t InsnLength) {
  // IRET with NT=1 returns to the task in the back-link field at offset 0 of the current
  // TSS (SDM Vol. 3A, "Task Linking").
  uint16_t Link;
  VMX_TRY(readLinear(C, C.S.Tr.Base, Link, true));
  return taskSwitchExit(C, Link, TaskSwitchSource::Iret, InsnLength, false);
}

Status vmxIdtTaskSwitch(Cpu &C, uint16_t TssSel) {
  // A task gate in the IDT: the exit occurs during event delivery, so the IDT-vectoring
  // fields describe the event (SDM Vol. 3C, "Information for VM Exits That Occur During
  // Event Delivery").
  return taskSwitchExit(C, TssSel, TaskSwitchSource::IdtTaskGate, 0, true);
}

Status vmxInitSignal(Cpu &C) {
  // INIT signals cause VM exits, except in wait-for-SIPI, which blocks them (SDM Vol. 3C,
  // "Other Causes of VM Exits" and "Activity State").
  if (C.Activity == ActivityState::WaitForSipi)
    return Status::Ok;
  return simpleExit(C, ExitReason::InitSignal);
}

Status vmxStartupIpi(Cpu &C, uint8_t Vector) {
  // A SIPI causes a VM exit only in wait-for-SIPI; its vector is the exit qualification
  // (SDM Vol. 3C, Table "Exit Qualification for SIPIs"). Elsewhere it is discarded.
  if (C.Activity != ActivityState::WaitForSipi)
    return Status::Ok;
  return simpleExit(C, ExitReason::StartUpIpi, Vector);
}

} // namespace vmxsim
