// The processor's VMX state (SDM Vol. 3C, "Introduction to Virtual Machine Extensions"
// and "VMX Operation"): whether it is in VMX operation, the VMXON and current-VMCS
// pointers, the cached data of the current VMCS, and per-VMCS bookkeeping that VM entry
// and VM exit carry across the transition. Cpu owns one (Cpu::Vmx); Cpu::NonRoot is the
// hot-path copy of "in VMX non-root operation".
#pragma once
#include "cpu/registers.h"
#include "cpu/vmx/vm_entry_checks.h"
#include "cpu/vmx/vmcs.h"
#include "cpu/vmx/vmx_event_state.h"

#include <cstdint>

namespace vmxsim {

/// The "invalid" value of the current-VMCS pointer (SDM Vol. 3C, VMPTRST: "FFFFFFFF_
/// FFFFFFFFH if there is no current VMCS").
inline constexpr uint64_t kInvalidVmcsPointer = ~uint64_t(0);

/// Launch state of a VMCS (SDM Vol. 3C, "VMCS Data ... launch state": clear or
/// launched), as stored at vmcs_layout::LaunchStateOffset of its region.
enum class LaunchState : uint32_t { Clear = 0, Launched = 1 };

/// Bits of the guest interruptibility-state field (SDM Vol. 3C, Table "Format of
/// Interruptibility State").
namespace interruptibility {
inline constexpr uint32_t BlockingBySti = 1u << 0, BlockingByMovSs = 1u << 1,
                          BlockingBySmi = 1u << 2, BlockingByNmi = 1u << 3;
}

struct VmxState {
  bool InVmxOperation = false;
  uint64_t VmxonPointer = kInvalidVmcsPointer;
  uint64_t CurrentVmcsPointer = kInvalidVmcsPointer;
  /// Cached data of the current VMCS; authoritative while CurrentVmcsPointer is valid
  /// (written back to the region by VMCLEAR and by VMPTRLD of another VMCS).
  VmcsData Vmcs;
  /// Launch state of the current VMCS (also in its region at LaunchStateOffset).
  LaunchState CurrentLaunch = LaunchState::Clear;
  /// The shadow-VMCS indicator (bit 31 of the revision word) of the current VMCS, as
  /// VMPTRLD found it (SDM Vol. 3C, "VMCS Types: Ordinary and Shadow": software must not
  /// change it while the VMCS is active). VM entry with a shadow VMCS fails.
  bool CurrentIsShadow = false;

  /// Guest state VM entry loads that has no other home in the core yet; VM exit saves
  /// it back (SDM Vol. 3C, "Loading Guest Non-Register State", "Saving Non-Register
  /// State"). The interrupt and timer machinery (VMX-C) consumes it. (The activity
  /// state lives in the processor: Cpu::Activity.)
  uint64_t PendingDebugExceptions = 0;
  bool BlockingBySmi = false;
  /// Virtual-NMI blocking when the "virtual NMIs" control is 1.
  bool VirtualNmiBlocked = false;
  /// An INIT signal that arrived in VMX root operation: "The INIT signal is blocked
  /// whenever a logical processor is in VMX root operation. It is not blocked in VMX
  /// non-root operation. Instead, INITs cause VM exits" (SDM Vol. 3C, "Restrictions on
  /// VMX Operation"). The local APIC hands it here; the next VM entry turns it into exit
  /// 3 at the guest's first instruction boundary (cpu/vmx/vmx_events.cpp), and VMXOFF
  /// hands it back to the APIC, which then performs the INIT (harness/devices/local_apic.cpp).
  bool InitBlocked = false;

  /// VMX-preemption timer (SDM Vol. 3C, "VMX-Preemption Timer"): when active, the timer
  /// reaches zero at this value of Cpu::Cycles.
  bool PreemptionTimerActive = false;
  uint64_t PreemptionTimerDeadline = 0;

  /// Event machinery of non-root operation (cpu/vmx/vmx_events.cpp).
  VmxEventState Events;

  /// PAUSE-loop exiting (SDM Vol. 3C, "Instructions That Cause VM Exits Conditionally"
  /// > PAUSE; cpu/vmx/nonroot.cpp): virtual-TSC times (Cpu::Cycles) of the last PAUSE at
  /// CPL 0 and of the PAUSE that began the current loop. VM entry clears PleValid so the
  /// first PAUSE at CPL 0 after it starts a loop.
  bool PleValid = false;
  uint64_t PleLastPause = 0, PleLoopStart = 0;

  /// The VM-entry checks that passed at earlier entries, with their inputs (VM entry's
  /// fast path; cpu/vmx/vm_entry_checks.h). Not architectural state: every input is
  /// compared before a check is skipped, so it needs no saving and no invalidation.
  VmEntryCheckMemo EntryCheckMemo;

  bool haveCurrentVmcs() const { return CurrentVmcsPointer != kInvalidVmcsPointer; }
};

} // namespace vmxsim
