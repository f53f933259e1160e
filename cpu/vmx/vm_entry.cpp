// VM entry after the instruction checks of VMLAUNCH/VMRESUME (SDM Vol. 3C, "VM
// Entries"): the VM-entry checks (vm_entry_checks.cpp), loading guest state, the
// VM-entry MSR-load area, and event injection.
#include "cpu/vmx/vm_entry.h"

#include "cpu/cost_model.h"
#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "cpu/exceptions.h"
#include "cpu/inline_records.h"
#include "cpu/msrs.h"
#include "cpu/perfmon.h"
#include "cpu/vmx/apic_virtualization.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_entry_checks.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmcs_controls.h"
#include "cpu/vmx/vmcs_segments.h"
#include "cpu/vmx/vmx_events.h"
#include "cpu/vmx/vmx_instructions.h"
#include "cpu/vmx/vmx_state.h"

#include <algorithm>
#include <iterator>

namespace vmxsim {

namespace {

using F = VmcsField;

Segment loadSegment(const VmcsData &V, const GuestSegmentFields &Fl) {
  return Segment{uint16_t(V.get(Fl.Selector)), V.get(Fl.Base), uint32_t(V.get(Fl.Limit)),
                 uint32_t(V.get(Fl.AccessRights)) & kAccessRightsMask};
}

// SDM Vol. 3C, "Loading Guest Control Registers, Debug Registers, and MSRs" and "Loading
// Guest Segment Registers and Descriptor-Table Registers" and "Loading Guest RIP, RSP,
// and RFLAGS".
void loadGuestRegisters(Cpu &C, const VmcsData &V) {
  CpuState &S = C.S;
  // CR0.ET, CD, NW and reserved bits 15:6, 17, 28:19 are never modified on VM entry.
  const uint64_t Cr0Keep = cr0::ET | cr0::CD | cr0::NW | 0xffc0ull | (1u << 17) | 0x1ff80000ull;
  S.Cr0 = (S.Cr0 & Cr0Keep) | (V.get(F::GuestCr0) & ~Cr0Keep);
  S.Cr3 = V.get(F::GuestCr3);
  S.Cr4 = V.get(F::GuestCr4);
  if (controlSet(V, VmxControl::LoadDebugControls)) {
    // DR7 bits 12, 15:14 are always 0 and bit 10 is always 1.
    S.Dr[7] = (V.get(F::GuestDr7) & ~uint64_t(0xd000)) | 0x400;
    (*C.Msrs)[MsrSlot::IA32_DEBUGCTL] = V.get(F::GuestIa32Debugctl);
  }
  MsrState &M = *C.Msrs;
  M[MsrSlot::IA32_SYSENTER_CS] = uint32_t(V.get(F::GuestIa32SysenterCs));
  M[MsrSlot::IA32_SYSENTER_ESP] = V.get(F::GuestIa32SysenterEsp);
  M[MsrSlot::IA32_SYSENTER_EIP] = V.get(F::GuestIa32SysenterEip);
  if (controlSet(V, VmxControl::LoadIa32PerfGlobalCtrlOnEntry))
    C.Pmu->loadGlobalCtrl(C, V.get(F::GuestIa32PerfGlobalCtrl));
  if (controlSet(V, VmxControl::LoadIa32PatOnEntry))
    M[MsrSlot::IA32_PAT] = V.get(F::GuestIa32Pat);
  if (controlSet(V, VmxControl::LoadIa32EferOnEntry)) {
    S.Efer = V.get(F::GuestIa32Efer);
  } else {
    // LMA and LME follow "IA-32e mode guest"; the other bits are unchanged.
    S.Efer &= ~(efer::LMA | efer::LME);
    if (controlSet(V, VmxControl::Ia32eModeGuest))
      S.Efer |= efer::LMA | efer::LME;
  }

  for (unsigned R = 0; R < kNumSegRegs; ++R)
    S.Seg[R] = loadSegment(V, kGuestSegFields[R]);
  S.Ldtr = loadSegment(V, kGuestLdtrFields);
  S.Tr = loadSegment(V, kGuestTrFields);
  S.Gdtr = TableReg{V.get(F::GuestGdtrBase), uint16_t(V.get(F::GuestGdtrLimit))};
  S.Idtr = TableReg{V.get(F::GuestIdtrBase), uint16_t(V.get(F::GuestIdtrLimit))};

  S.Rip = V.get(F::GuestRip);
  S.Gpr[RSP] = V.get(F::GuestRsp);
  S.Rflags = V.get(F::GuestRflags);
}

// PDPTEs of a PAE guest (SDM Vol. 3C, "Loading Page-Directory-Pointer-Table Entries"
// and "Checks on Guest Page-Directory-Pointer-Table Entries"): from the VMCS with EPT,
// else from CR3, where a present entry with reserved bits set fails the VM entry.
bool loadGuestPdptes(Cpu &C, const VmcsData &V) {
  CpuState &S = C.S;
  if (!(S.Cr0 & cr0::PG) || !(S.Cr4 & cr4::PAE) || (S.Efer & efer::LMA))
    return true;
  if (controlSet(V, VmxControl::EnableEpt)) {
    const F Fields[] = {F::GuestPdpte0, F::GuestPdpte1, F::GuestPdpte2, F::GuestPdpte3};
    for (unsigned K = 0; K < 4; ++K)
      S.Pdpte[K] = V.get(Fields[K]);
    return true;
  }
  const uint64_t Reserved = 0x1e6 | ~((uint64_t(1) << C.Model.MaxPhysAddrBits) - 1);
  uint64_t E[4];
  for (unsigned K = 0; K < 4; ++K) {
    E[K] = C.Mem.read(Hpa((S.Cr3 & 0xffffffe0) + 8 * K), 8);
    if ((E[K] & 1) && (E[K] & Reserved))
      return false;
  }
  for (unsigned K = 0; K < 4; ++K)
    S.Pdpte[K] = E[K];
  return true;
}

// SDM Vol. 3C, "Loading Guest Non-Register State": activity state, interruptibility,
// pending debug exceptions, the VMX-preemption timer.
void loadGuestNonRegisterState(Cpu &C, const VmcsData &V) {
  VmxState &X = *C.Vmx;
  const VmxProfile &P = *C.Model.Vmx;
  // HLT, shutdown and wait-for-SIPI wait for an event; the event window wakes them.
  mwaitSettle(C); // an HLT state loaded now is not an MWAIT's wait
  C.Activity = ActivityState(V.get(F::GuestActivityState));
  uint32_t Intr = uint32_t(V.get(F::GuestInterruptibilityState));
  if (Intr & (interruptibility::BlockingBySti | interruptibility::BlockingByMovSs)) {
    // The blocking covers the first guest instruction; Retired counts VMLAUNCH after
    // this returns, hence + 2 (as MOV SS does in cpu/exec_seg.cpp).
    C.ShadowUntil = C.Retired + 2;
    C.ShadowIsMovSs = Intr & interruptibility::BlockingByMovSs;
  } else {
    C.ShadowUntil = 0;
    C.ShadowIsMovSs = false;
  }
  X.BlockingBySmi = Intr & interruptibility::BlockingBySmi;
  bool NmiBlocking = Intr & interruptibility::BlockingByNmi;
  if (controlSet(V, VmxControl::VirtualNmis))
    X.VirtualNmiBlocked = NmiBlocking;
  else
    C.NmiBlocked = NmiBlocking;
  X.PendingDebugExceptions = V.get(F::GuestPendingDebugExceptions);
  // The first PAUSE at CPL 0 after VM entry starts a PAUSE loop (SDM Vol. 3C, PAUSE-loop
  // exiting; cpu/vmx/nonroot.cpp).
  X.PleValid = false;
  X.PreemptionTimerActive = controlSet(V, VmxControl::ActivateVmxPreemptionTimer) &&
                            fieldSupported(P, F::VmxPreemptionTimerValue);
  if (X.PreemptionTimerActive) {
    // The timer counts down by 1 each time TSC bit "rate" changes (SDM Vol. 3C,
    // "VMX-Preemption Timer"), so it expires at that many rate boundaries from now.
    unsigned Rate = P.PreemptionTimerRate;
    X.PreemptionTimerDeadline = ((C.Cycles >> Rate) + V.get(F::VmxPreemptionTimerValue)) << Rate;
  }
}

// SDM Vol. 3C, "Event Injection": delivers the event of the VM-entry interruption-
// information field through the guest IDT as if it had occurred after the entry.
Status injectEvent(Cpu &C, VmcsData &V) {
  uint32_t Info = uint32_t(V.get(F::VmEntryInterruptionInformation));
  if (!(Info & intinfo::Valid))
    return Status::Ok;
  // VM entry clears the valid bit (SDM Vol. 3C, "Event Injection").
  V.set(F::VmEntryInterruptionInformation, Info & ~intinfo::Valid);
  const uint8_t Vector = uint8_t(intinfo::vector(Info));
  const uint32_t Type = intinfo::type(Info);
  bool HasError = Info & intinfo::DeliverErrorCode;
  uint32_t Error = uint32_t(V.get(F::VmEntryExceptionErrorCode));
  uint64_t Rip = C.S.Rip;
  uint64_t NextRip = Rip + V.get(F::VmEntryInstructionLength);
  // "If the VM entry is vectoring, the logical processor is in the active state after
  // VM entry"; a pending MTF VM exit (type 7) is not vectoring, so the guest keeps the
  // activity state of the guest-state area (SDM Vol. 3C, "Activity State" in "Special
  // Features of VM Entry"), and an MTF VM exit from HLT saves HLT.
  if (Type != intinfo::OtherEvent)
    C.Activity = ActivityState::Active;
  switch (Type) {
  case intinfo::ExternalInterrupt:
    return deliverEvent(C, EventKind::External, Vector, false, 0, Rip);
  case intinfo::Nmi:
    return deliverEvent(C, EventKind::Nmi, Vector, false, 0, Rip);
  case intinfo::HardwareException:
    return deliverEvent(C, EventKind::Exception, Vector, HasError, Error, Rip);
  case intinfo::SoftwareInterrupt:
    return deliverEvent(C, EventKind::SoftwareInt, Vector, false, 0, NextRip);
  case intinfo::PrivilegedSoftwareException:
    return deliverEvent(C, EventKind::PrivSoftwareException, Vector, false, 0, NextRip);
  case intinfo::SoftwareException:
    return deliverEvent(C, EventKind::SoftwareException, Vector, HasError, Error, NextRip);
  case intinfo::OtherEvent:
    // Vector 0: pending MTF VM exit (SDM Vol. 3C, "Injection of Pending MTF VM Exit
    // Events"), armed by vmxEventsOnEntry (cpu/vmx/vmx_events.cpp).
    return Status::Ok;
  default:
    return Status::Ok; // type 1 is reserved and refused by the entry checks
  }
}

Status entryFailure(Cpu &C, ExitReason Reason, uint64_t Qualification) {
  VmExitInfo E;
  E.Reason = Reason;
  E.EntryFailure = true;
  E.Qualification = Qualification;
  return vmExit(C, E);
}

} // namespace

/// Tells the transition observer (if any) that this VM entry failed.
static void reportEntryFailure(const Cpu &C, VmEntryFailOutcome Outcome, uint32_t Number,
                               uint32_t CheckId, uint64_t Qualification) {
  if (VmxTransitionObserver *O = C.Transitions) [[unlikely]]
    O->vmEntryFailure({C.Id, C.Cycles, Outcome, Number, CheckId, Qualification});
}

VmEntryEvent entryEventOf(const Cpu &C, bool IsLaunch, uint32_t Info) {
  // The error code only with "deliver error code" (SDM Vol. 3C, "Format of the VM-Entry
  // Interruption-Information Field").
  return VmEntryEvent{
      .Cpu = C.Id,
      .Tsc = C.Cycles,
      .Rip = C.S.Rip,
      .IsLaunch = IsLaunch,
      .InjectedInfo = Info,
      .InjectedErrorCode = Info & intinfo::DeliverErrorCode
                               ? uint32_t(C.Vmx->Vmcs.get(F::VmEntryExceptionErrorCode))
                               : 0,
      .Gpr = C.S.Gpr,
  };
}

Status vmEntry(Cpu &C, const DecodedInsn &I, bool IsLaunch) {
  VmxState &X = *C.Vmx;
  VmcsData &V = X.Vmcs;
  VmEntryCheckResult R = checkVmEntryMemo(C, V, *C.Model.Vmx, X.EntryCheckMemo);
  if (!R.ok() && C.Transitions) [[unlikely]] {
    const bool Fail = R.Kind == VmEntryCheckResult::Outcome::VmFailValid;
    reportEntryFailure(C, Fail ? VmEntryFailOutcome::VmFailValid : VmEntryFailOutcome::GuestStateCheck,
                       Fail ? R.ErrorNumber : R.ExitReason, uint32_t(R.CheckId), R.Qualification);
  }
  if (R.Kind == VmEntryCheckResult::Outcome::VmFailValid)
    return vmFailValid(C, I, R.ErrorNumber);
  if (R.Kind == VmEntryCheckResult::Outcome::EntryFailure)
    return entryFailure(C, ExitReason(R.ExitReason), R.Qualification);

  // A guest IA32_DEBUGCTL loaded with features vmxsim does not model (as WRMSR would
  // report them; cpu/msrs.cpp) stops the run before anything of the guest is loaded.
  if (controlSet(V, VmxControl::LoadDebugControls) &&
      (V.get(F::GuestIa32Debugctl) & ~debugctl::Modelled))
    return C.unimplemented(kDebugctlUnimplemented);
  // From here the processor is committed to the guest: failures are VM exits that load
  // host state (SDM Vol. 3C, "VM-Entry Failures During or After Loading Guest State").
  C.Cycles += costOf(CostClass::VmTransition);
  loadGuestRegisters(C, V);
  C.NonRoot = true;
  if (!loadGuestPdptes(C, V)) {
    constexpr uint64_t Qual = uint64_t(EntryFailureQualification::PdpteLoading);
    reportEntryFailure(C, VmEntryFailOutcome::LoadingGuestState,
                       uint32_t(ExitReason::VmEntryFailureInvalidGuestState), kNoVmEntryCheck, Qual);
    return entryFailure(C, ExitReason::VmEntryFailureInvalidGuestState, Qual);
  }
  loadGuestNonRegisterState(C, V);
  // SDM Vol. 3C, "VPID and VM Entry"/"Operations that Invalidate Cached Mappings": with
  // "enable VPID" the guest's cached translations are those of its VPID and survive;
  // without it, VM entry invalidates the mappings of VPID 0000H.
  // With "enable EPT" the guest's translations are combined mappings of its (VPID,
  // EP4TA) context (SDM Vol. 3C, "Information That May Be Cached"); without "enable
  // VPID" its VPID is 0000H, whose mappings (of every EP4TA) are invalidated.
  const bool EnableVpid = controlSet(V, VmxControl::EnableVpid);
  const uint16_t Vpid = EnableVpid ? uint16_t(V.get(F::VirtualProcessorIdentifier)) : 0;
  if (!EnableVpid)
    C.Mmu.flushTlbVpid(0);
  if (controlSet(V, VmxControl::EnableEpt))
    C.Mmu.switchTlbContextEpt(Vpid, V.get(F::EptPointer));
  else if (EnableVpid)
    C.Mmu.switchTlbContext(Vpid);
  C.modeChanged();
  // The guest's DR7 and CR4.DE arm its breakpoints; debug traps pending in root
  // operation do not follow into the guest, whose own are the pending debug exceptions.
  C.Debug.Traps = C.Debug.Hits = 0;
  debugRegistersChanged(C);
  bool Unimplemented = false;
  if (uint32_t Bad = loadMsrArea(C, V.get(F::VmEntryMsrLoadAddress),
                                 uint32_t(V.get(F::VmEntryMsrLoadCount)), Unimplemented)) {
    if (Unimplemented)
      return Status::Unimplemented;
    reportEntryFailure(C, VmEntryFailOutcome::LoadingGuestState,
                       uint32_t(ExitReason::VmEntryFailureMsrLoading), kNoVmEntryCheck, Bad);
    return entryFailure(C, ExitReason::VmEntryFailureMsrLoading, Bad);
  }
  if (IsLaunch) {
    X.CurrentLaunch = LaunchState::Launched;
    C.Mem.write(Hpa(X.CurrentVmcsPointer + vmcs_layout::LaunchStateOffset), 4,
                uint32_t(LaunchState::Launched), StoreAgent::Processor);
  }
  // Again after the MSR loads, which may change the mode; with none, nothing it reads
  // changed since the call above, so it would repeat that call's results exactly (with
  // the performance counters running it would also accrue their counts: kept then).
  if (V.get(F::VmEntryMsrLoadCount) != 0 || C.PmuActive)
    C.modeChanged();
  // MTF, NMI-blocking and injection bookkeeping of the event machinery; a nested fault
  // while delivering the injected event goes through the exception bitmap there.
  vmxEventsOnEntry(C);
  apicv::onVmEntry(C);
  // Ground truth: the processor now runs the guest (the injected event, if any, is
  // delivered next).
  if (VmxTransitionObserver *O = C.Transitions) [[unlikely]] {
    // Only a valid field injects (SDM Vol. 3C, "Format of the VM-Entry
    // Interruption-Information Field").
    const uint32_t Info = uint32_t(V.get(F::VmEntryInterruptionInformation));
    if (!entryRecordInPlace(C, IsLaunch, Info & intinfo::Valid ? Info : 0))
      O->vmEntryDone(C, IsLaunch, Info & intinfo::Valid ? Info : 0);
  }
  return injectEvent(C, V);
}

} // namespace vmxsim
