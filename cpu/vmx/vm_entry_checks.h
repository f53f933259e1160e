// The VM-entry checks on the VMCS (SDM Vol. 3C, "VM Entries" > "Checks on VMX Controls
// and Host-State Area" and "Checks on the Guest State Area"): one ID per check, generated
// from vm_entry_checks.def, and the function VMLAUNCH/VMRESUME call after their own
// "Basic VM-Entry Checks" (CPL, current VMCS, MOV-SS blocking, launch state) have passed.
#pragma once
#include "cpu/vmx/vmcs.h"
#include "cpu/vmx/vmx_features.h"

#include <cstdint>

namespace vmxsim {

class Cpu;

/// Every check of vm_entry_checks.def, in the order VM entry performs them.
enum class VmEntryCheckId : uint16_t {
#define VM_ENTRY_CHECK(Id, Group, Qualification, Break, Desc) Id,
#include "cpu/vmx/vm_entry_checks.def"
  None, ///< no check failed
};
inline constexpr unsigned kNumVmEntryChecks = unsigned(VmEntryCheckId::None);

/// The SDM subsection a check belongs to; it decides the outcome of a failure.
enum class VmEntryCheckGroup : uint8_t {
#define VM_ENTRY_CHECK_GROUP(Group, Outcome, Number, Section) Group,
#include "cpu/vmx/vm_entry_checks.def"
};

/// The outcome of the checks. The first failing check decides it.
struct VmEntryCheckResult {
  enum class Outcome : uint8_t {
    Ok,           ///< every check passed: VM entry goes on to load guest state
    VmFailValid,  ///< VMfailValid(ErrorNumber): control (7) or host-state (8) checks
    EntryFailure, ///< VM exit with ExitReason (bit 31 set by the exit) and Qualification
  };
  Outcome Kind = Outcome::Ok;
  uint32_t ErrorNumber = 0;   ///< VM-instruction error (VmFailValid only)
  uint32_t ExitReason = 0;    ///< basic exit reason, 33 (EntryFailure only)
  uint64_t Qualification = 0; ///< the exit qualification (EntryFailure only)
  VmEntryCheckId CheckId = VmEntryCheckId::None;
  bool ok() const { return Kind == Outcome::Ok; }
};
using VmEntryCheckKind = VmEntryCheckResult::Outcome;

/// The exit qualification of a VM-entry failure (SDM Vol. 3C, "VM-Entry Failures During
/// or After Loading Guest State").
enum class EntryFailureQualification : uint8_t {
  None = 0,
  PdpteLoading = 2,    ///< a problem loading the PDPTEs
  NmiBlockedBySti = 3, ///< NMI injection into a guest blocking events by STI
  VmcsLinkPointer = 4, ///< an invalid VMCS link pointer
};

struct VmEntryCheckInfo {
  const char *Name; ///< the enumerator name (also the ID traced on failure)
  VmEntryCheckGroup Group;
  VmEntryCheckKind Kind; ///< outcome of a failure, from the group
  uint32_t Number;       ///< VM-instruction error or basic exit reason, from the group
  uint8_t Qualification;
  const char *Section;     ///< SDM section title, from the group
  const char *Description; ///< the SDM bullet
};
const VmEntryCheckInfo &vmEntryCheckInfo(VmEntryCheckId Id);

/// Performs the checks of SDM Vol. 3C, "Checks on VMX Controls and Host-State Area" and
/// "Checks on the Guest State Area", in the order of vm_entry_checks.def, on the VMCS
/// data V of the processor C (whose current IA32_EFER.LMA, CR4 capabilities, physical-
/// and linear-address widths the checks read, and whose memory holds the virtual-APIC
/// page, the VMCS named by the link pointer and, without EPT, the guest PDPTEs) with
/// capabilities P. Nothing is modified. The first failing check decides the result.
/// The current-VMCS pointer (which the VMCS link pointer must differ from) is C.Vmx's.
/// IsLaunch tells VMLAUNCH from VMRESUME; no check of these sections depends on it.
VmEntryCheckResult checkVmEntry(const Cpu &C, const VmcsData &V, const VmxProfile &P,
                                bool IsLaunch);

/// The checks on an EPTP value (memory type, walk length, accessed/dirty enable,
/// reserved bits), given IA32_VMX_EPT_VPID_CAP and the physical-address width: the
/// failing check, or VmEntryCheckId::None for a valid EPTP. Shared by VM entry and by
/// VMFUNC EPTP switching ("a valid EPTP value (it would not cause VM entry to fail)").
VmEntryCheckId checkEptp(uint64_t Eptp, uint64_t EptVpidCap, unsigned PhysBits);

} // namespace vmxsim
