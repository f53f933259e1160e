// The named VMX profiles (`--vmx-profile`). A profile advertises only features vmxsim
// implements: "a model that advertises a feature implements it; one that does not
// refuses its control bits at VM entry".
#include "cpu/vmx/vmx_features.h"

#include <initializer_list>

namespace vmxsim {

namespace {
constexpr uint64_t features(std::initializer_list<VmxFeature> L) {
  uint64_t M = 0;
  for (VmxFeature F : L)
    if (F != VmxFeature::None)
      M |= uint64_t(1) << unsigned(F);
  return M;
}
} // namespace

const VmxProfile &VmxProfile::full() {
  // A modern Intel core as the default CPU model: the controls a current hypervisor
  // uses, with APIC virtualization ("virtualize APIC accesses", "virtualize x2APIC
  // mode", "APIC-register virtualization", "virtual-interrupt delivery", "process posted
  // interrupts": cpu/vmx/apic_virtualization.cpp), VMCS shadowing (with IA32_VMX_MISC[29],
  // VMWRITE to any field), PML (with EPT accessed and dirty flags), EPT-violation #VE,
  // mode-based execute control for EPT and advanced VM-exit information for EPT
  // violations (cpu/vmx/ept_translation.cpp) and the "load IA32_PERF_GLOBAL_CTRL"
  // controls (cpu/perfmon.h), and 5-level EPT (IA32_VMX_EPT_VPID_CAP[7]: mmu/ept.cpp walks
  // four or five levels). The processor it follows is the reference below, a Sapphire
  // Rapids core; vmxSapphireRapidsDifferences (cpu/vmx/profile_table.h) lists where
  // "full" differs from it and why.
  static const VmxProfile P{
      "full",
      features({VmxFeature::SecondaryControls, VmxFeature::Vpid, VmxFeature::PreemptionTimer,
                VmxFeature::MsrBitmaps, VmxFeature::TprShadow, VmxFeature::MonitorTrapFlag,
                VmxFeature::PauseLoopExiting, VmxFeature::DescriptorTableExiting,
                VmxFeature::Rdtscp, VmxFeature::WbinvdExiting, VmxFeature::RdrandExiting,
                VmxFeature::RdseedExiting, VmxFeature::Invpcid,
                VmxFeature::TscScaling, VmxFeature::PatControls, VmxFeature::EferControls,
                VmxFeature::Ept, VmxFeature::UnrestrictedGuest, VmxFeature::VmFunctions,
                VmxFeature::EptpSwitching, VmxFeature::VmcsShadowing, VmxFeature::Pml,
                VmxFeature::EptViolationVe, VmxFeature::VirtualizeApicAccesses,
                VmxFeature::VirtualizeX2apic, VmxFeature::ApicRegisterVirtualization,
                VmxFeature::VirtualInterruptDelivery, VmxFeature::PostedInterrupts,
                VmxFeature::ModeBasedExecute,
                VmxFeature::AdvancedEptViolationInformation, VmxFeature::PerfGlobalCtrl}),
      /*PreemptionTimerRate=*/5,
      /*Cr3TargetCount=*/4,
      /*MaxMsrListEntries=*/0,
      /*VmwriteAnyField=*/true,
      /*EptAccessedDirty=*/true,
      /*EptExecuteOnly=*/true,
      /*Ept1GPages=*/true,
      /*Ept5Level=*/true};
  return P;
}

const VmxProfile &VmxProfile::kvmNested() {
  // What Linux KVM's nested VMX reports to an L1 hypervisor on a recent Intel host
  // (arch/x86/kvm/vmx/nested.c, nested_vmx_setup_ctls_msrs and the helpers it calls),
  // restricted to what vmxsim models: no PLE, emulated preemption timer at rate 5,
  // VMWRITE to any field, VMCS shadowing (KVM emulates it for L1 whatever the host has:
  // nested_vmx_setup_secondary_ctls sets SECONDARY_EXEC_SHADOW_VMCS), PML (emulated for
  // L1 when EPT A/D bits are on: SECONDARY_EXEC_ENABLE_PML with VMX_EPT_AD_BIT); no
  // EPT-violation #VE (not in KVM's list); "virtualize APIC accesses" with flexpriority
  // (KVM's default when the host has it), "virtualize x2APIC mode", "APIC-register
  // virtualization" and "virtual-interrupt delivery" (in its mask of secondary controls,
  // offered when the host has them), and "process posted interrupts" (with enable_apicv).
  // No mode-based execute control (SECONDARY_EXEC_MODE_BASED_EPT_EXEC is not in the mask
  // of secondary controls KVM offers L1) and no advanced EPT-violation information (not
  // in the EPT capabilities it builds for L1). The "load IA32_PERF_GLOBAL_CTRL" entry
  // and exit controls: nested_vmx_pmu_refresh offers both when the vCPU's PMU has
  // version > 1, as it has on such a host (KVM reports version 2 to its guests, and
  // vmxsim's CPUID.0AH reports version 2: cpu/perfmon.h). 5-level EPT: KVM's list of EPT
  // capabilities for L1 includes the 5-level page walk and is masked by the host's, which
  // ("full") has it.
  static const VmxProfile P{
      "kvm-nested",
      features({VmxFeature::SecondaryControls, VmxFeature::Vpid, VmxFeature::PreemptionTimer,
                VmxFeature::MsrBitmaps, VmxFeature::TprShadow, VmxFeature::MonitorTrapFlag,
                VmxFeature::DescriptorTableExiting, VmxFeature::Rdtscp,
                VmxFeature::WbinvdExiting, VmxFeature::RdrandExiting,
                VmxFeature::RdseedExiting, VmxFeature::Invpcid,
                VmxFeature::TscScaling, VmxFeature::PatControls, VmxFeature::EferControls,
                VmxFeature::Ept, VmxFeature::UnrestrictedGuest, VmxFeature::VmFunctions,
                VmxFeature::EptpSwitching, VmxFeature::VmcsShadowing, VmxFeature::Pml,
                VmxFeature::VirtualizeApicAccesses, VmxFeature::VirtualizeX2apic,
                VmxFeature::ApicRegisterVirtualization, VmxFeature::VirtualInterruptDelivery,
                VmxFeature::PostedInterrupts, VmxFeature::PerfGlobalCtrl}),
      5, 4, 0, true, true, true, true, true};
  return P;
}

const VmxProfile &VmxProfile::minimal() {
  // First-generation VT-x (2005): no secondary controls at all, so no EPT, no VPID, no
  // unrestricted guest; no preemption timer, no MSR bitmaps, no TPR shadow.
  static const VmxProfile P{"minimal", features({}), 0, 4, 0, false, false, false, false,
                            false};
  return P;
}

const VmxProfile &VmxProfile::sapphireRapidsReference() {
  // The VMX capability words of QEMU's "SapphireRapids" CPU model (target/i386/cpu.c: a 4th
  // Gen Xeon Scalable core, family 6 model 143, stepping 4), facts only: its
  // FEAT_VMX_PINBASED_CTLS, _PROCBASED_CTLS, _SECONDARY_CTLS, _EXIT_CTLS, _ENTRY_CTLS,
  // _EPT_VPID_CAPS, _MISC and _VMFUNC words. That model lists the controls QEMU passes to
  // a guest hypervisor under KVM, so it leaves out what KVM's nested VMX does not offer
  // (PAUSE-loop exiting, TSC scaling, #VE, mode-based execute control), which the
  // processor itself has; the differences table says so row by row. Not selectable with
  // --vmx-profile: it offers XSAVES/XRSTORS, which vmxsim does not implement.
  static const VmxProfile P{
      "Sapphire Rapids (QEMU model)",
      features({VmxFeature::SecondaryControls, VmxFeature::Vpid, VmxFeature::PreemptionTimer,
                VmxFeature::MsrBitmaps, VmxFeature::TprShadow, VmxFeature::MonitorTrapFlag,
                VmxFeature::DescriptorTableExiting, VmxFeature::Rdtscp,
                VmxFeature::WbinvdExiting, VmxFeature::RdrandExiting,
                VmxFeature::RdseedExiting, VmxFeature::Invpcid, VmxFeature::PatControls,
                VmxFeature::EferControls, VmxFeature::Ept, VmxFeature::UnrestrictedGuest,
                VmxFeature::VmFunctions, VmxFeature::EptpSwitching, VmxFeature::VmcsShadowing,
                VmxFeature::Pml, VmxFeature::VirtualizeApicAccesses,
                VmxFeature::VirtualizeX2apic, VmxFeature::ApicRegisterVirtualization,
                VmxFeature::VirtualInterruptDelivery, VmxFeature::PostedInterrupts,
                VmxFeature::Xsaves, VmxFeature::PerfGlobalCtrl}),
      // QEMU's model sets no preemption-timer rate, CR3-target count or MSR-list size of
      // its own (it takes them from the host); these are the values "full" reports.
      5, 4, 0, /*VmwriteAnyField=*/true, /*EptAccessedDirty=*/true, /*EptExecuteOnly=*/true,
      /*Ept1GPages=*/true, /*Ept5Level=*/true};
  return P;
}

const VmxProfile *VmxProfile::byName(std::string_view Name) {
  for (const VmxProfile *P : {&full(), &kvmNested(), &minimal()})
    if (Name == P->Name)
      return P;
  return nullptr;
}

} // namespace vmxsim
