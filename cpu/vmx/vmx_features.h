// VMX features a modelled processor may advertise, and the named VMX profiles
// (`--vmx-profile`): the sets of features a hypervisor really meets.
#pragma once
#include <cstdint>
#include <string_view>

namespace vmxsim {

/// Every name used in the Feature column of vmcs_fields.def and vmx_controls.def.
enum class VmxFeature : uint8_t {
  Always,
  Never,
  None,
  Vpid,
  Ept,
  UnrestrictedGuest,
  PreemptionTimer,
  PostedInterrupts,
  MsrBitmaps,
  TprShadow,
  VirtualizeApicAccesses,
  VirtualizeX2apic,
  ApicRegisterVirtualization,
  VirtualInterruptDelivery,
  SecondaryControls,
  TertiaryControls,
  MonitorTrapFlag,
  PauseLoopExiting,
  DescriptorTableExiting,
  Rdtscp,
  WbinvdExiting,
  RdrandExiting,
  RdseedExiting,
  Invpcid,
  VmFunctions,
  EptpSwitching,
  VmcsShadowing,
  Pml,
  EptViolationVe,
  Xsaves,
  ModeBasedExecute,
  /// IA32_VMX_EPT_VPID_CAP[22]: bits 9-11 of the EPT-violation exit qualification.
  AdvancedEptViolationInformation,
  TscScaling,
  PatControls,
  EferControls,
  /// The "load IA32_PERF_GLOBAL_CTRL" VM-entry and VM-exit controls and their fields
  /// (the performance-monitoring model of cpu/perfmon.h).
  PerfGlobalCtrl,
  Count
};

/// A named set of advertised VMX features plus the numeric capabilities that vary
/// between processors (SDM Vol. 3D, Appendix A "VMX Capability Reporting Facility").
struct VmxProfile {
  const char *Name;
  uint64_t Features; ///< bit (1 << VmxFeature) set when advertised
  uint8_t PreemptionTimerRate; ///< IA32_VMX_MISC[4:0]: timer ticks every 2^rate TSC
  uint8_t Cr3TargetCount;      ///< IA32_VMX_MISC[24:16]
  uint8_t MaxMsrListEntries;   ///< IA32_VMX_MISC[27:25]: 512 * (N + 1) entries
  bool VmwriteAnyField;        ///< IA32_VMX_MISC[29]
  bool EptAccessedDirty;       ///< IA32_VMX_EPT_VPID_CAP[21]
  bool EptExecuteOnly;         ///< IA32_VMX_EPT_VPID_CAP[0]
  bool Ept1GPages;             ///< IA32_VMX_EPT_VPID_CAP[17]
  bool Ept5Level;              ///< IA32_VMX_EPT_VPID_CAP[7]

  bool has(VmxFeature F) const {
    if (F == VmxFeature::Always || F == VmxFeature::None)
      return true;
    if (F == VmxFeature::Never)
      return false;
    return Features & (uint64_t(1) << unsigned(F));
  }

  /// The default: a modern Intel core (EPT with A/D, execute-only and 1 GiB pages,
  /// VPID, unrestricted guest, EPTP switching, preemption timer, MSR/I-O bitmaps, TPR
  /// shadow, MTF, PLE, RDTSCP/INVPCID/RDRAND/RDSEED controls, TSC offsetting and
  /// scaling, VMWRITE to any field, VMCS shadowing, PML, EPT-violation #VE, APIC
  /// virtualization with virtual-interrupt delivery and posted interrupts, mode-based
  /// execute control, advanced EPT-violation information, load IA32_PERF_GLOBAL_CTRL).
  static const VmxProfile &full();
  /// What KVM's nested VMX offers an L1 hypervisor.
  static const VmxProfile &kvmNested();
  /// First-generation VT-x: no EPT, no VPID, no unrestricted guest.
  static const VmxProfile &minimal();
  /// The processor "full" follows, for the table of differences only (never a
  /// --vmx-profile: it offers controls vmxsim does not implement).
  static const VmxProfile &sapphireRapidsReference();
  /// Looks a profile up by name ("full", "kvm-nested", "minimal"); nullptr if unknown.
  static const VmxProfile *byName(std::string_view Name);
};

} // namespace vmxsim
