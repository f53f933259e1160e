// EPT as the processor uses it (SDM Vol. 3C, "EPT Violations", "EPT Misconfigurations"):
// the walker's configuration from the CPU's model and VMCS, the guest-physical mapping
// cache, and the VM exit (reason 48 or 49) for a walk that failed. The walker itself is
// mmu/ept.cpp.
#include "cpu/vmx/ept_translation.h"

#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/exit_qualification.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmcs_controls.h"
#include "cpu/vmx/vmx_events.h"
#include "cpu/vmx/vmx_features.h"
#include "cpu/vmx/vmx_state.h"

namespace vmxsim {

namespace {

using F = VmcsField;

/// Mode-based execute control for EPT is in effect (SDM Vol. 3C, "Mode-Based Execute
/// Control for EPT"): only when the processor supports it and the control is 1.
bool modeBasedExecute(const Cpu &C) {
  return C.Model.Vmx && C.Model.Vmx->has(VmxFeature::ModeBasedExecute) &&
         controlSet(C.Vmx->Vmcs, VmxControl::ModeBasedExecuteControlForEpt);
}

// --- Page-modification logging (SDM Vol. 3C, "VMX Support for Address Translation" >
// "Page-Modification Logging") ------------------------------------------------------------

/// "The page-modification log comprises 512 entries": a PML index outside 0-511 means
/// the log is full.
constexpr uint64_t kPmlEntries = 512;

bool pmlEnabled(const Cpu &C) { return controlSet(C.Vmx->Vmcs, VmxControl::EnablePml); }

/// "Before allowing a guest-physical access, the processor may determine that it first
/// needs to set an accessed or dirty flag for EPT. When this happens, the processor
/// examines the PML index. If the PML index is not in the range 0-511, there is a
/// page-modification log-full event": the walker is told not to set flags.
bool pmlLogFull(const Cpu &C) {
  return pmlEnabled(C) && C.Vmx->Vmcs.get(F::PmlIndex) >= kPmlEntries;
}

/// After a walk that changed a dirty flag for EPT from 0 to 1: the 4-KByte aligned
/// guest-physical address of the access goes to the physical address PML address + 8 *
/// PML index, and the index is decremented (from 0 to FFFFH, after which the next flag
/// update is a log-full event). The index is in range: the walk would have been refused
/// otherwise.
void pmlLog(Cpu &C, Gpa Address) {
  VmcsData &V = C.Vmx->Vmcs;
  const uint64_t Index = V.get(F::PmlIndex);
  C.Mem.write(Hpa(V.get(F::PmlAddress) + 8 * Index), 8, Address.value() & ~uint64_t(0xfff),
              StoreAgent::Processor);
  V.set(F::PmlIndex, Index - 1);
}

// --- Virtualization exceptions (SDM Vol. 3C, "VMX Non-Root Operation" > "Virtualization
// Exceptions") -----------------------------------------------------------------------------

/// Offsets in the virtualization-exception information area (SDM Vol. 3C, Table "Format
/// of the Virtualization-Exception Information Area"): what a VM exit would have saved
/// as exit reason, exit qualification, guest-linear and guest-physical address, the
/// word software clears to allow the next #VE, and the EPTP index.
namespace ve_info {
constexpr uint64_t ExitReason = 0, Busy = 4, Qualification = 8, GuestLinearAddress = 16,
                   GuestPhysicalAddress = 24, EptpIndex = 32;
}

/// A convertible EPT violation (the walk's "suppress #VE" bit is 0) causes a
/// virtualization exception instead of a VM exit if "EPT-violation #VE" is 1, CR0.PE =
/// 1, the processor is not delivering an event through the IDT, and the 32 bits at offset
/// 4 of the information area are 0 (SDM Vol. 3C, "Convertible EPT Violations").
bool eptViolationBecomesVe(const Cpu &C) {
  const VmxState &X = *C.Vmx;
  if (!controlSet(X.Vmcs, VmxControl::EptViolationVe) || !(C.S.Cr0 & cr0::PE) ||
      X.Events.DeliveringInfo)
    return false;
  const uint64_t Area = X.Vmcs.get(F::VirtualizationExceptionInformationAddress);
  return C.Mem.read(Hpa(Area + ve_info::Busy), 4) == 0;
}

/// Saves the virtualization-exception information of the EPT violation whose VM exit
/// would have recorded Info, then raises #VE (vector 20, a fault without error code),
/// which the caller delivers like any exception: a VM exit if bit 20 of the exception
/// bitmap is 1, else through IDT gate 20 (SDM Vol. 3C, "Virtualization-Exception
/// Information" and "Delivery of Virtualization Exceptions"). The guest-linear address
/// is undefined when the qualification's bit 7 is 0: vmxsim writes 0.
Status virtualizationException(Cpu &C, const VmExitInfo &Info) {
  const VmcsData &V = C.Vmx->Vmcs;
  const uint64_t Area = V.get(F::VirtualizationExceptionInformationAddress);
  C.Mem.write(Hpa(Area + ve_info::ExitReason), 4, uint32_t(Info.Reason),
              StoreAgent::Processor);
  C.Mem.write(Hpa(Area + ve_info::Busy), 4, 0xffffffffu, StoreAgent::Processor);
  C.Mem.write(Hpa(Area + ve_info::Qualification), 8, Info.Qualification,
              StoreAgent::Processor);
  C.Mem.write(Hpa(Area + ve_info::GuestLinearAddress), 8,
              Info.GuestLinearValid ? Info.GuestLinearAddress : 0, StoreAgent::Processor);
  C.Mem.write(Hpa(Area + ve_info::GuestPhysicalAddress), 8, Info.GuestPhysicalAddress,
              StoreAgent::Processor);
  C.Mem.write(Hpa(Area + ve_info::EptpIndex), 2, V.get(F::EptpIndex), StoreAgent::Processor);
  C.Pending = PendingEvent{vec::VE, false, 0, 0};
  return Status::Fault;
}

} // namespace

bool eptActive(const Cpu &C) {
  return C.NonRoot && controlSet(C.Vmx->Vmcs, VmxControl::EnableEpt);
}

EptWalkerConfig eptWalkerConfig(const Cpu &C) {
  EptWalkerConfig Cfg;
  const VmxProfile *P = C.Model.Vmx;
  Cfg.ExecuteOnly = P && P->EptExecuteOnly;
  Cfg.Pages1G = P && P->Ept1GPages;
  Cfg.ModeBasedExecute = modeBasedExecute(C);
  Cfg.MaxPhysAddrBits = C.Model.MaxPhysAddrBits;
  Cfg.AdUpdatesBlocked = C.NonRoot && pmlLogFull(C);
  return Cfg;
}

EptWalk eptWalk(Cpu &C, uint64_t Eptp, Gpa Address, const EptAccess &A) {
  return eptWalk(C.Mem, eptWalkerConfig(C), Eptp, Address, A);
}

uint64_t eptViolationQualification(const Cpu &C, const EptWalk &W, uint64_t Eptp,
                                   const EptAccess &A) {
  namespace Q = exitqual::ept_violation;
  const bool Ad = Eptp & eptp::AccessedDirty;
  uint64_t V = 0;
  // A guest paging-structure access under EPT A/D is "treated as a write": the
  // processor sets both bit 0 and bit 1 (SDM Vol. 3C, Table "Exit Qualification for
  // EPT Violations", note 1).
  V = Q::DataRead.set(V, A.Kind == Access::Read || (Ad && A.PagingStructure));
  V = Q::DataWrite.set(V, A.Kind == Access::Write || (Ad && A.PagingStructure));
  V = Q::InstructionFetch.set(V, A.Kind == Access::Fetch);
  V = Q::Readable.set(V, (W.Rights & eptright::R) != 0);
  V = Q::Writeable.set(V, (W.Rights & eptright::W) != 0);
  V = Q::Executable.set(V, (W.Rights & eptright::X) != 0);
  // Bit 6 is defined only with mode-based execute control, for every kind of access
  // (bit 5 is then the supervisor-mode execute permission).
  if (modeBasedExecute(C))
    V = Q::UserModeExecutable.set(V, (W.Rights & eptright::UserX) != 0);
  V = Q::GuestLinearAddressValid.set(V, A.LinearValid);
  if (A.LinearValid)
    V = Q::TranslatedLinearAddress.set(V, !A.PagingStructure);
  // Advanced VM-exit information for EPT violations: bits 9-11 describe the guest's
  // translation of the linear address, when bits 7 and 8 are 1 (the access is to the
  // translation of a linear address, not to a paging-structure entry).
  if (A.LinearValid && !A.PagingStructure && C.Model.Vmx &&
      C.Model.Vmx->has(VmxFeature::AdvancedEptViolationInformation)) {
    V = Q::UserModeLinearAddress.set(V, A.UserAddress);
    V = Q::ReadWritePage.set(V, A.ReadWritePage);
    V = Q::ExecuteDisablePage.set(V, A.ExecuteDisablePage);
  }
  return V;
}

EptWalk eptTranslateNoExit(Cpu &C, Gpa Address, const EptAccess &A) {
  const uint64_t Eptp = C.Vmx->Vmcs.get(F::EptPointer);
  const uint64_t G = Address.value();
  const bool Ad = Eptp & eptp::AccessedDirty;
  const bool IsWrite = A.Kind == Access::Write || (Ad && A.PagingStructure);
  // A cached guest-physical mapping of the current context serves any access it allows
  // and that needs no A/D update; anything else walks the EPT afresh, so violations,
  // misconfigurations and flag updates are always computed from the tables.
  const EptCacheEntry *Cached = C.Mmu.guestPhysical(Address);
  if (Cached && Cached->AccessedDirty == Ad && (!IsWrite || Cached->DirtyDone) &&
      eptAllows(modeBasedExecute(C), Cached->Rights, A, IsWrite)) {
    EptWalk Out;
    Out.Address = Hpa(Cached->HpaPage | (G & 0xfff));
    Out.Rights = Cached->Rights;
    Out.MemType = Cached->MemType;
    Out.IgnorePat = Cached->IgnorePat;
    Out.PageLevel = Cached->PageLevel;
    return Out;
  }
  EptWalk Out = eptWalk(C, Eptp, Address, A);
  if (Out.Outcome == EptOutcome::Translated) [[likely]] {
    C.Mmu.rememberGuestPhysical(Address, Out, Ad, !Ad || IsWrite);
    if (Out.DirtySet && pmlEnabled(C))
      pmlLog(C, Address);
  }
  return Out;
}

Status eptFaultExit(Cpu &C, Gpa Address, const EptAccess &A, const EptWalk &W) {
  const uint64_t Eptp = C.Vmx->Vmcs.get(F::EptPointer);
  VmExitInfo Info;
  Info.GuestPhysicalAddress = Address.value();
  Info.GuestPhysicalValid = true;
  if (W.Outcome == EptOutcome::Misconfiguration) {
    // SDM Vol. 3C, "EPT Misconfigurations": exit reason 49; the qualification is
    // undefined (0) and only the guest-physical address is reported.
    Info.Reason = ExitReason::EptMisconfiguration;
  } else if (W.Outcome == EptOutcome::AdUpdateBlocked) {
    // SDM Vol. 3C, "Page-Modification Logging": exit reason 62, page-modification log
    // full. Only bit 12 of the qualification is defined (below); the guest-physical and
    // guest-linear address fields are undefined for it and are left unchanged.
    Info.Reason = ExitReason::PageModificationLogFull;
    Info.GuestPhysicalValid = false;
  } else {
    Info.Reason = ExitReason::EptViolation;
    Info.Qualification = eptViolationQualification(C, W, Eptp, A);
    if (A.LinearValid) {
      Info.GuestLinearAddress = A.Gla;
      Info.GuestLinearValid = true;
    }
  }
  // All three are fault-like exits; during event delivery they report IDT-vectoring
  // information (SDM Vol. 3C, "Information for VM Exits That Occur During Event
  // Delivery").
  vmxFillIdtVectoring(C, Info);
  VmxEventState &E = C.Vmx->Events;
  // Bit 12, "NMI unblocking due to IRET": the EPT violation or log-full event is caused
  // by an IRET that unblocked NMIs, and not during event delivery (SDM Vol. 3C, "Exit
  // Qualification for EPT Violations" and "Exit Qualification" for page-modification
  // log-full events; same rule as for vectored events).
  if (Info.Reason != ExitReason::EptMisconfiguration && !E.DeliveringInfo &&
      E.IretNmiMark == C.Retired + 1)
    Info.Qualification =
        (Info.Reason == ExitReason::EptViolation
             ? exitqual::ept_violation::NmiUnblockingDueToIret
             : exitqual::page_modification_log_full::NmiUnblockingDueToIret)
            .set(Info.Qualification, 1);
  if (Info.Reason == ExitReason::EptViolation && !W.SuppressVe &&
      eptViolationBecomesVe(C))
    return virtualizationException(C, Info);
  E.DeliveringInfo = E.DeliveringErrorCode = E.DeliveringInsnLength = 0;
  E.InjectingEvent = E.MtfPending = false;
  E.IretNmiMark = 0;
  return vmExit(C, Info);
}

Status eptTranslate(Cpu &C, Gpa Address, const EptAccess &A, EptWalk &Out) {
  Out = eptTranslateNoExit(C, Address, A);
  if (Out.Outcome == EptOutcome::Translated) [[likely]]
    return Status::Ok;
  return eptFaultExit(C, Address, A, Out);
}

} // namespace vmxsim
