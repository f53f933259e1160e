// VM exits (SDM Vol. 3C, "VM Exits"): recording exit information, saving guest state,
// the VM-exit MSR-store area, loading host state, the VM-exit MSR-load area, and VMX
// aborts. Also used for VM-entry failures after the guest-state checks (SDM Vol. 3C,
// "VM-Entry Failures During or After Loading Guest State"), which load host state
// without saving guest state.
#include "cpu/vmx/vm_exit.h"

#include "cpu/cost_model.h"
#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "cpu/inline_records.h"
#include "cpu/msrs.h"
#include "cpu/perfmon.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vmcs_controls.h"
#include "cpu/vmx/vmcs_segments.h"
#include "cpu/vmx/vmx_state.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace vmxsim {

namespace {

using F = VmcsField;

// The activity state a VM exit saves. MWAIT's wait is the HLT state here (cpu/monitor.h),
// but the field never shows it: "Execution of the MWAIT instruction may put a logical
// processor into an inactive state. However, this VMCS field never reflects this state"
// (SDM Vol. 3C, Table "Format of the Activity State"); the guest resumes after MWAIT.
ActivityState savedActivity(const Cpu &C) {
  // mwaitWaiting holds only in the HLT state: an active processor (every VM exit of a
  // running guest) needs no call.
  return C.Activity == ActivityState::Hlt && mwaitWaiting(C) ? ActivityState::Active
                                                             : C.Activity;
}

// SDM Vol. 3C, "Recording VM-Exit Information and Updating VM-Entry Control Fields".
void recordExitInformation(Cpu &C, VmcsData &V, const VmExitInfo &Info) {
  uint32_t Reason = uint32_t(Info.Reason) | (Info.EntryFailure ? kExitReasonEntryFailure : 0);
  V.set(F::ExitReason, Reason);
  V.set(F::ExitQualification, Info.Qualification);
  // A VM-entry failure records only the exit reason and qualification (SDM Vol. 3C,
  // "VM-Entry Failures During or After Loading Guest State").
  if (Info.EntryFailure)
    return;
  if (Info.GuestLinearValid)
    V.set(F::GuestLinearAddress, Info.GuestLinearAddress);
  if (Info.GuestPhysicalValid && fieldSupported(*C.Model.Vmx, F::GuestPhysicalAddress))
    V.set(F::GuestPhysicalAddress, Info.GuestPhysicalAddress);
  V.set(F::VmExitInterruptionInformation, Info.InterruptionInfo);
  V.set(F::VmExitInterruptionErrorCode, Info.InterruptionErrorCode);
  V.set(F::IdtVectoringInformation, Info.IdtVectoringInfo);
  V.set(F::IdtVectoringErrorCode, Info.IdtVectoringErrorCode);
  V.set(F::VmExitInstructionLength, Info.InstructionLength);
  V.set(F::VmExitInstructionInformation, Info.InstructionInfo);
}

// A segment register is unusable when it was loaded with a null selector in protected
// mode (SDM Vol. 3C, "Guest Register State": the unusable bit). The core marks every
// such load in Attr (cpu/segmentation.cpp, event delivery, VM entry and exit), and only
// such loads: a null selector loaded in real mode stays usable after the switch to
// protected mode (an "unrestricted guest" that sets CR0.PE keeps SS = 0 usable), and
// VM entry may establish a usable register with a null selector. Attr's unusable bit is
// bit 16 of the access-rights format and inside kAccessRightsMask, so the saved access
// rights carry it as they are; only LDTR adds it (saveGuestState).
static_assert(Segment::Unusable == (1u << 16) && (kAccessRightsMask & Segment::Unusable));

// Inlined with constant fields, so that each store is one compare (VmcsData::set marks
// only fields that change: a segment register rarely does between exits).
[[gnu::always_inline]] inline void saveSegment(VmcsData &V, const GuestSegmentFields &Fl,
                                               const Segment &G, bool AlsoUnusable = false) {
  V.set(Fl.Selector, G.Selector);
  V.set(Fl.Base, G.Base);
  V.set(Fl.Limit, G.Limit);
  V.set(Fl.AccessRights,
        (G.Attr & kAccessRightsMask) | (AlsoUnusable ? Segment::Unusable : 0));
}

// SDM Vol. 3C, "Saving Guest State" (control/debug registers and MSRs, segment and
// descriptor-table registers, RIP/RSP/RFLAGS, non-register state).
void saveGuestState(Cpu &C, VmcsData &V) {
  const VmxProfile &P = *C.Model.Vmx;
  CpuState &S = C.S;
  VmxState &X = *C.Vmx;
  V.set(F::GuestCr0, S.Cr0);
  V.set(F::GuestCr3, S.Cr3);
  V.set(F::GuestCr4, S.Cr4);
  if (controlSet(V, VmxControl::SaveDebugControls)) {
    V.set(F::GuestDr7, S.Dr[7]);
    V.set(F::GuestIa32Debugctl, (*C.Msrs)[MsrSlot::IA32_DEBUGCTL]);
  }
  V.set(F::GuestIa32SysenterCs, (*C.Msrs)[MsrSlot::IA32_SYSENTER_CS]);
  V.set(F::GuestIa32SysenterEsp, (*C.Msrs)[MsrSlot::IA32_SYSENTER_ESP]);
  V.set(F::GuestIa32SysenterEip, (*C.Msrs)[MsrSlot::IA32_SYSENTER_EIP]);
  if (controlSet(V, VmxControl::SaveIa32Pat) && fieldSupported(P, F::GuestIa32Pat))
    V.set(F::GuestIa32Pat, (*C.Msrs)[MsrSlot::IA32_PAT]);
  if (controlSet(V, VmxControl::SaveIa32Efer) && fieldSupported(P, F::GuestIa32Efer))
    V.set(F::GuestIa32Efer, S.Efer);

  [&]<unsigned... R>(std::integer_sequence<unsigned, R...>) {
    (saveSegment(V, kGuestSegFields[R], S.Seg[R]), ...);
  }(std::make_integer_sequence<unsigned, kNumSegRegs>{});
  // "Bit 16 is set to 1 if and only if the segment is unusable" (SDM Vol. 3C, "Saving
  // Segment Registers and Descriptor-Table Registers"): an LDTR with a null selector
  // counts as unusable whatever Attr says, as it always has here.
  saveSegment(V, kGuestLdtrFields, S.Ldtr, (S.Ldtr.Selector & ~3u) == 0);
  saveSegment(V, kGuestTrFields, S.Tr);
  V.set(F::GuestGdtrBase, S.Gdtr.Base);
  V.set(F::GuestGdtrLimit, S.Gdtr.Limit);
  V.set(F::GuestIdtrBase, S.Idtr.Base);
  V.set(F::GuestIdtrLimit, S.Idtr.Limit);

  V.set(F::GuestRip, S.Rip);
  V.set(F::GuestRsp, S.Gpr[RSP]);
  // An instruction that started with RF = 1 and causes the VM exit has not completed:
  // RF is saved as it was before it (SDM Vol. 3C, "Saving RIP, RSP, RFLAGS, and SSP").
  V.set(F::GuestRflags, S.Rflags | (C.Debug.HeldRf ? rflags::RF : 0));

  // Non-register state (SDM Vol. 3C, "Saving Non-Register State").
  V.set(F::GuestActivityState, uint32_t(savedActivity(C)));
  uint32_t Intr = 0;
  if (C.Retired < C.ShadowUntil)
    Intr |= C.ShadowIsMovSs ? interruptibility::BlockingByMovSs
                            : interruptibility::BlockingBySti;
  if (X.BlockingBySmi)
    Intr |= interruptibility::BlockingBySmi;
  const bool VirtualNmis = controlSet(V, VmxControl::VirtualNmis);
  if (VirtualNmis ? X.VirtualNmiBlocked : C.NmiBlocked)
    Intr |= interruptibility::BlockingByNmi;
  V.set(F::GuestInterruptibilityState, Intr);
  V.set(F::GuestPendingDebugExceptions, X.PendingDebugExceptions);
  if (controlSet(V, VmxControl::SaveVmxPreemptionTimerValue) &&
      fieldSupported(P, F::VmxPreemptionTimerValue)) {
    unsigned Rate = P.PreemptionTimerRate;
    uint64_t Now = C.Cycles >> Rate, End = X.PreemptionTimerDeadline >> Rate;
    V.set(F::VmxPreemptionTimerValue, X.PreemptionTimerActive && End > Now ? End - Now : 0);
  }
  // PDPTEs are saved when EPT is in use and the guest uses PAE paging (SDM Vol. 3C,
  // "Saving Non-Register State").
  const bool Ept = controlSet(V, VmxControl::EnableEpt);
  if (Ept && (S.Cr0 & cr0::PG) && (S.Cr4 & cr4::PAE) && !(S.Efer & efer::LMA)) {
    const F Pdptes[] = {F::GuestPdpte0, F::GuestPdpte1, F::GuestPdpte2, F::GuestPdpte3};
    for (unsigned K = 0; K < 4; ++K)
      V.set(Pdptes[K], S.Pdpte[K]);
  }
  // VM exits store IA32_EFER.LMA into the "IA-32e mode guest" entry control
  // (IA32_VMX_MISC[5]; SDM Vol. 3C, "Updating VM-Entry Control Fields").
  uint64_t Entry = V.get(F::VmEntryControls) & ~uint64_t(controlBit(VmxControl::Ia32eModeGuest));
  if (S.Efer & efer::LMA)
    Entry |= controlBit(VmxControl::Ia32eModeGuest);
  V.set(F::VmEntryControls, Entry);
}

// One 16-byte entry of an MSR area (SDM Vol. 3C, Table "Format of an MSR Entry").
struct MsrEntry {
  uint32_t Index, Reserved;
  uint64_t Data;
};

MsrEntry readMsrEntry(const Cpu &C, uint64_t Area, uint32_t I) {
  MsrEntry E;
  uint64_t A = Area + 16ull * I;
  E.Index = uint32_t(C.Mem.read(Hpa(A), 4));
  E.Reserved = uint32_t(C.Mem.read(Hpa(A + 4), 4));
  E.Data = C.Mem.read(Hpa(A + 8), 8);
  return E;
}

// SDM Vol. 3C, "Saving MSRs": RDMSR of each entry's MSR into its data; a failing read
// causes a VMX abort, and so does an entry beyond the list limit (msrListLimit).
bool storeGuestMsrs(Cpu &C, const VmcsData &V) {
  uint64_t Area = V.get(F::VmExitMsrStoreAddress);
  const uint32_t Limit = msrListLimit(C);
  for (uint32_t I = 0, N = uint32_t(V.get(F::VmExitMsrStoreCount)); I < N; ++I) {
    if (I >= Limit)
      return false;
    MsrEntry E = readMsrEntry(C, Area, I);
    uint64_t Value = 0;
    // IA32_SMBASE and the x2APIC MSRs (0x800-0x8ff) cannot be stored; bits 63:32 of
    // the entry's index word must be zero.
    if (E.Reserved || E.Index == 0x9e || (E.Index >> 8) == 0x8 ||
        readMsr(C, E.Index, Value) != Status::Ok) {
      C.Pending = PendingEvent{};
      return false;
    }
    C.Mem.write(Hpa(Area + 16ull * I + 8), 8, Value, StoreAgent::Processor);
  }
  return true;
}

} // namespace

uint32_t msrListLimit(const Cpu &C) {
  return 512u * (uint32_t(C.Model.Vmx->MaxMsrListEntries & 7) + 1u);
}

/// Loads MSRs from an MSR-load area (SDM Vol. 3C, "Loading MSRs" on VM entry and
/// "Loading Host MSRs" on VM exit); returns the 1-based index of the failing entry, or 0.
/// loadMsrArea (vm_exit.h) calls it for a list that is not empty.
/// The entry after the first msrListLimit(C) fails like an MSR that cannot be loaded.
uint32_t loadMsrAreaEntries(Cpu &C, uint64_t Area, uint32_t Count, bool &Unimplemented) {
  Unimplemented = false;
  const uint32_t Limit = msrListLimit(C);
  for (uint32_t I = 0; I < Count; ++I) {
    if (I >= Limit)
      return I + 1;
    MsrEntry E = readMsrEntry(C, Area, I);
    // FS/GS base, IA32_SMBASE, the x2APIC range with 0x800-0x8ff and the microcode
    // update MSRs may not be loaded this way, and bits 63:32 of the index word are
    // reserved (SDM Vol. 3C, "Loading MSRs").
    bool Refused = E.Reserved || E.Index == 0xc0000100 || E.Index == 0xc0000101 ||
                   E.Index == 0x9e || (E.Index >> 8) == 0x8 || E.Index == 0x79 ||
                   E.Index == 0x8b;
    const Status St = Refused ? Status::Fault : writeMsr(C, E.Index, E.Data);
    if (St == Status::Unimplemented) {
      Unimplemented = true;
      return I + 1;
    }
    if (St != Status::Ok) {
      C.Pending = PendingEvent{};
      return I + 1;
    }
  }
  return 0;
}

Status vmxAbort(Cpu &C, VmxAbortIndicator Indicator) {
  VmxState &X = *C.Vmx;
  if (X.haveCurrentVmcs())
    C.Mem.write(Hpa(X.CurrentVmcsPointer + vmcs_layout::AbortOffset), 4, uint32_t(Indicator),
                StoreAgent::Processor);
  // "the logical processor experiences a VMX abort ... and enters the VMX-abort
  // shutdown state" (SDM Vol. 3C, "VMX Aborts").
  C.NonRoot = false;
  C.Activity = ActivityState::Shutdown;
  C.breakBlock();
  return Status::Shutdown;
}

namespace {

// SDM Vol. 3C, "Loading Host State".
void loadHostState(Cpu &C, const VmcsData &V) {
  CpuState &S = C.S;
  const bool Host64 = controlSet(V, VmxControl::HostAddressSpaceSize);
  // SDM Vol. 3C, "Loading Host Control Registers, Debug Registers, MSRs": CR0 keeps ET,
  // CD, NW, bits 63:32, 28:19, 17, 15:6 and the VMX-fixed bits; CR4 keeps its fixed
  // bits; CR4.PAE is set for a 64-bit host.
  // The VMX-fixed CR0 bits (PE, NE, PG) are 1 in VMX root operation. An "unrestricted
  // guest" may have cleared PE and PG ("CR0.PE and CR0.PG may be 0 in VMX non-root
  // operation", SDM Vol. 3C, "Unrestricted Guests"), and "VM entry or VM exit cannot set
  // any of these bits to an unsupported value" (SDM Vol. 3C, "Restrictions on VMX
  // Operation"): the exit establishes their fixed value 1 rather than keeping the guest's.
  const uint64_t Cr0Fixed = cr0::PE | cr0::NE | cr0::PG;
  const uint64_t Cr0Keep = cr0::ET | cr0::CD | cr0::NW | 0xffffffff00000000ull |
                           0x1ff80000ull | (1u << 17) | 0xffc0ull;
  S.Cr0 = (S.Cr0 & Cr0Keep) | (V.get(F::HostCr0) & ~Cr0Keep & ~Cr0Fixed) | Cr0Fixed;
  S.Cr3 = V.get(F::HostCr3) & ((uint64_t(1) << C.Model.MaxPhysAddrBits) - 1);
  S.Cr4 = (V.get(F::HostCr4) & ~cr4::VMXE) | cr4::VMXE | (Host64 ? cr4::PAE : 0);
  // SDM Vol. 3C, "Loading Host Control Registers, Debug Registers, MSRs": DR7 is 400H
  // and IA32_DEBUGCTL 0, whatever the controls; no breakpoint stays armed.
  S.Dr[7] = 0x400;
  (*C.Msrs)[MsrSlot::IA32_DEBUGCTL] = 0;
  C.Debug.Traps = C.Debug.Hits = 0;
  debugRegistersChanged(C);
  MsrState &M = *C.Msrs;
  M[MsrSlot::IA32_SYSENTER_CS] = uint32_t(V.get(F::HostIa32SysenterCs));
  M[MsrSlot::IA32_SYSENTER_ESP] = V.get(F::HostIa32SysenterEsp);
  M[MsrSlot::IA32_SYSENTER_EIP] = V.get(F::HostIa32SysenterEip);
  if (controlSet(V, VmxControl::LoadIa32PerfGlobalCtrlOnExit))
    C.Pmu->loadGlobalCtrl(C, V.get(F::HostIa32PerfGlobalCtrl));
  if (controlSet(V, VmxControl::LoadIa32PatOnExit))
    M[MsrSlot::IA32_PAT] = V.get(F::HostIa32Pat);
  if (controlSet(V, VmxControl::LoadIa32EferOnExit)) {
    S.Efer = V.get(F::HostIa32Efer);
  } else {
    S.Efer &= ~(efer::LMA | efer::LME);
    if (Host64)
      S.Efer |= efer::LMA | efer::LME;
  }

  // SDM Vol. 3C, "Loading Host Segment and Descriptor-Table Registers".
  Segment &Cs = S.seg(SegReg::CS);
  Cs = Segment{uint16_t(V.get(F::HostCsSelector)), 0, 0xffffffff,
               0xb | Segment::S | Segment::P | Segment::G |
                   (Host64 ? Segment::L : Segment::DB)};
  const struct {
    SegReg R;
    F Sel;
  } Data[] = {{SegReg::SS, F::HostSsSelector}, {SegReg::DS, F::HostDsSelector},
              {SegReg::ES, F::HostEsSelector}, {SegReg::FS, F::HostFsSelector},
              {SegReg::GS, F::HostGsSelector}};
  for (const auto &D : Data) {
    Segment &G = S.seg(D.R);
    G.Selector = uint16_t(V.get(D.Sel));
    G.Base = D.R == SegReg::FS ? V.get(F::HostFsBase)
             : D.R == SegReg::GS ? V.get(F::HostGsBase)
                                 : 0;
    G.Limit = 0xffffffff;
    G.Attr = 0x3 | Segment::S | Segment::P | Segment::DB | Segment::G;
    // A null selector makes the register unusable (SS keeps DPL 0, so CPL is 0).
    if (D.R != SegReg::SS && (G.Selector & ~3u) == 0)
      G.Attr |= Segment::Unusable;
    if (D.R == SegReg::SS && G.Selector == 0)
      G.Attr |= Segment::Unusable;
  }
  S.Tr = Segment{uint16_t(V.get(F::HostTrSelector)), V.get(F::HostTrBase), 0x67,
                 0xb | Segment::P};
  S.Ldtr = Segment{0, 0, 0, Segment::Unusable};
  S.Gdtr = TableReg{V.get(F::HostGdtrBase), 0xffff};
  S.Idtr = TableReg{V.get(F::HostIdtrBase), 0xffff};

  S.Rip = V.get(F::HostRip);
  S.Gpr[RSP] = V.get(F::HostRsp);
  S.Rflags = rflags::Fixed1;

  // PAE host outside IA-32e mode: the PDPTEs are loaded from CR3 (SDM Vol. 3C,
  // "Loading Host Control Registers").
  if (!Host64 && (S.Cr0 & cr0::PG) && (S.Cr4 & cr4::PAE))
    for (unsigned K = 0; K < 4; ++K)
      S.Pdpte[K] = C.Mem.read(Hpa((S.Cr3 & ~uint64_t(0x1f)) + 8 * K), 8);

  // Non-register state (SDM Vol. 3C, "Updating Non-Register State"): no blocking by STI
  // or MOV SS; blocking by NMI is not changed by exits that are not caused by NMIs.
  C.ShadowUntil = 0;
  C.ShadowIsMovSs = false;
  C.Activity = ActivityState::Active;
  C.Vmx->PreemptionTimerActive = false;
}

} // namespace

VmExitEvent exitEventOf(const Cpu &C, const VmExitInfo &Info) {
  // Every member named, in order: nothing is zeroed first (a default-initialized event
  // cleared its whole 112 bytes before these stores, on every exit).
  return VmExitEvent{
      .Cpu = C.Id,
      .Tsc = C.Cycles,
      .Reason = uint32_t(Info.Reason) | (Info.EntryFailure ? kExitReasonEntryFailure : 0),
      .Rip = C.S.Rip,
      .Qualification = Info.Qualification,
      .InstructionLength = Info.InstructionLength,
      .InstructionInfo = Info.InstructionInfo,
      .InterruptionInfo = Info.InterruptionInfo,
      .InterruptionErrorCode = Info.InterruptionErrorCode,
      .IdtVectoringInfo = Info.IdtVectoringInfo,
      .IdtVectoringErrorCode = Info.IdtVectoringErrorCode,
      .GuestLinearValid = Info.GuestLinearValid,
      .GuestPhysicalValid = Info.GuestPhysicalValid,
      .GuestLinearAddress = Info.GuestLinearValid ? Info.GuestLinearAddress : 0,
      .GuestPhysicalAddress = Info.GuestPhysicalValid ? Info.GuestPhysicalAddress : 0,
      .Gpr = C.S.Gpr,
      .ActivityState = uint32_t(savedActivity(C)), // the value saveGuestState stores
  };
}

Status vmExit(Cpu &C, const VmExitInfo &Info) {
  // Lockstep's interpreter pass of a block (StoreLog, cpu/mmu.h) is discarded: it stops
  // here, before anything of the exit happens, and the block runs translated alone.
  if (C.Mmu.storeLogging()) [[unlikely]]
    return C.Mmu.refuseLogged(StoreLogRefusal::VmExit);
  VmxState &X = *C.Vmx;
  VmcsData &V = X.Vmcs;
  // The transition observer (the ground truth): guest state is still in C here.
  if (VmxTransitionObserver *O = C.Transitions) [[unlikely]]
    if (!exitRecordInPlace(C, Info))
      O->vmExitBegins(C, Info);
  recordExitInformation(C, V, Info);
  // VM exits clear the valid bit of the VM-entry interruption-information field (SDM
  // Vol. 3C, "Updating VM-Entry Control Fields").
  V.set(F::VmEntryInterruptionInformation,
        V.get(F::VmEntryInterruptionInformation) & ~uint64_t(intinfo::Valid));

  if (!Info.EntryFailure) {
    saveGuestState(C, V);
    if (!storeGuestMsrs(C, V))
      return vmxAbort(C, VmxAbortIndicator::SavingGuestMsrs);
  }
  loadHostState(C, V);
  C.NonRoot = false;
  // VM exit returns to VPID 0000H; without "enable VPID" it invalidates VPID 0000H's
  // mappings, which the guest used (SDM Vol. 3C, "Operations that Invalidate Cached
  // Mappings"). A guest's EPT context is never the host's (VM entry already flushed
  // VPID 0000H when the guest ran without VPID).
  if (C.Mmu.currentVpid() != 0 || C.Mmu.inEptContext())
    C.Mmu.switchTlbContext(0);
  else
    C.Mmu.flushTlb();
  C.modeChanged();
  C.Cycles += costOf(CostClass::VmTransition);

  bool Unimplemented = false;
  const uint32_t MsrLoadCount = uint32_t(V.get(F::VmExitMsrLoadCount));
  if (loadMsrArea(C, V.get(F::VmExitMsrLoadAddress), MsrLoadCount, Unimplemented))
    return Unimplemented ? Status::Unimplemented
                         : vmxAbort(C, VmxAbortIndicator::LoadingHostMsrs);
  // Again after the MSR loads, which may change the mode; with none, nothing it reads
  // changed since the call above (the performance counters, which would accrue the
  // transition's cycles here, keep the call).
  if (MsrLoadCount != 0 || C.PmuActive)
    C.modeChanged();
  return Status::VmExit;
}

} // namespace vmxsim
