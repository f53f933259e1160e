// The VM-entry checks on the VMCS (SDM Vol. 3C, "VM Entries" > "Checks on VMX Controls
// and Host-State Area" and "Checks on the Guest State Area"): one ID per check, generated
// from vm_entry_checks.def, and the function VMLAUNCH/VMRESUME call after their own
// "Basic VM-Entry Checks" (CPL, current VMCS, MOV-SS blocking, launch state) have passed.
#pragma once
#include "cpu/vmx/vmcs.h"
#include "cpu/vmx/vmx_features.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace vmxsim {

class Cpu;
struct CpuModel;

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

/// The number of VmEntryCheckGroup rows: the SDM subsections, checked in this order.
inline constexpr unsigned kNumVmEntryCheckGroups = 0
#define VM_ENTRY_CHECK_GROUP(Group, Outcome, Number, Section) +1
#include "cpu/vmx/vm_entry_checks.def"
    ;
static_assert(kNumVmEntryCheckGroups <= 32);

/// A memo of the VM-entry checks that passed (the VM-entry fast path, issue 17): for
/// each group (SDM subsection) whose checks all passed at an earlier VM entry, the
/// inputs they read then: the set of VMCS fields, the bytes of physical memory (VTPR, the
/// header of the VMCS the link pointer names, PDPTEs) with their values, and (for all
/// groups) the processor and profile properties the checks may read (Env). A group is
/// skipped while none of its fields has been written (VmcsData::Written, which every
/// VMWRITE, VMPTRLD, VM exit and other writer of the VMCS data marks), its memory reads
/// the same and Env is unchanged. It holds no architectural state: zeroing it (or
/// dropping it on a snapshot restore) only makes the next VM entry run every check.
struct VmEntryCheckMemo {
  static constexpr unsigned kMaskWords = VmcsData::kWrittenWords;
  static constexpr unsigned kMaxMemoryInputs = 4;
  /// What the groups read outside the VMCS data; any change drops the whole memo.
  /// Laid out without padding, so that comparing two is comparing their bytes (a few
  /// word compares on the VM-entry path instead of one per member).
  struct Env {
    const VmxProfile *Profile = nullptr;
    const CpuModel *Model = nullptr;
    uint64_t Features = 0;
    uint64_t Cr4Fixed1 = 0;
    uint64_t CurrentVmcsPointer = 0; ///< the link pointer must differ from it
    uint8_t PreemptionTimerRate = 0, Cr3TargetCount = 0, MaxMsrListEntries = 0;
    bool VmwriteAnyField = false, EptAccessedDirty = false, EptExecuteOnly = false,
         Ept1GPages = false, Ept5Level = false;
    uint8_t PhysBits = 0, LinearBits = 0;
    bool Nx = false;
    bool HostLma = false; ///< the processor's IA32_EFER.LMA (address-space-size checks)
    uint8_t Zero[4] = {}; ///< no padding: every byte is a member's
    bool operator==(const Env &O) const { return std::memcmp(this, &O, sizeof(Env)) == 0; }
  };
  static_assert(sizeof(Env) == 5 * 8 + 16 && std::has_unique_object_representations_v<Env>,
                "VmEntryCheckMemo::Env must have no padding (it is compared by its bytes)");
  struct MemoryInput {
    uint64_t Addr = 0, Value = 0;
    uint8_t SizeBytes = 0;
  };
  struct Group {
    uint64_t Fields[kMaskWords] = {}; ///< bit I: the checks read field I
    uint8_t NumMemoryInputs = 0;
    MemoryInput Memory[kMaxMemoryInputs];
  };
  /// The VMCS data whose Written bits this memo consumes (another object: start over).
  const VmcsData *Tracked = nullptr;
  Env Key;
  /// Bit G: group G passed and is memoised; of those, the groups that read memory.
  uint32_t Valid = 0, ReadsMemory = 0;
  Group Groups[kNumVmEntryCheckGroups];
  /// By field index: the groups that read the field (bit G set exactly when the field
  /// is in Groups[G].Fields, the fields group G read when it last passed; bits of groups
  /// not in Valid are ignored), so that a VM entry looks only at the fields written
  /// since the last one, and a group that passes again reading the same fields changes
  /// nothing here.
  uint16_t GroupsReading[kNumVmcsFields] = {};
  static_assert(kNumVmEntryCheckGroups <= 16);
  /// Statistics for tests and the profile: groups run and groups skipped.
  uint64_t GroupsRun = 0, GroupsSkipped = 0;
};

/// checkVmEntry with the memo: exactly its result (the same first failing check, or
/// none), but a group whose recorded inputs all still hold is skipped (the argument is
/// at its definition). Consumes (clears) V.Written.
VmEntryCheckResult checkVmEntryMemo(const Cpu &C, VmcsData &V, const VmxProfile &P,
                                    VmEntryCheckMemo &Memo);

/// The checks on an EPTP value (memory type, walk length, accessed/dirty enable,
/// reserved bits), given IA32_VMX_EPT_VPID_CAP and the physical-address width: the
/// failing check, or VmEntryCheckId::None for a valid EPTP. Shared by VM entry and by
/// VMFUNC EPTP switching ("a valid EPTP value (it would not cause VM entry to fail)").
VmEntryCheckId checkEptp(uint64_t Eptp, uint64_t EptVpidCap, unsigned PhysBits);

} // namespace vmxsim
