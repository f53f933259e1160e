#include "cpu/vmx/profile_table.h"

#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vmx_features.h"

#include <fmt/format.h>

namespace vmxsim {

namespace {

const char *wordName(VmxControlWord W) {
  switch (W) {
  case VmxControlWord::Pin:
    return "pin-based";
  case VmxControlWord::Proc:
    return "primary processor-based";
  case VmxControlWord::Proc2:
    return "secondary processor-based";
  case VmxControlWord::Proc3:
    return "tertiary processor-based";
  case VmxControlWord::Exit:
    return "VM-exit";
  case VmxControlWord::Entry:
    return "VM-entry";
  }
  return "?";
}

constexpr unsigned kNumControls = 0
#define VMX_CONTROL(Word, Bit, Name, Default, Feature, SdmName) +1
#include "cpu/vmx/vmx_controls.def"
#undef VMX_CONTROL
    ;

// SDM Vol. 3D, A.3-A.5: the TRUE_ MSR's allowed-0 and allowed-1 settings of one control.
std::string controlCell(const VmxProfile &P, const VmxControlInfo &C) {
  const ControlCaps Caps = controlCaps(P, C.Word, true);
  const uint32_t Bit = 1u << C.Bit;
  return (Caps.MustBe1 & Bit) ? "1" : (Caps.MayBe1 & Bit) ? "0/1" : "0";
}

const char *yesNo(bool B) { return B ? "yes" : "no"; }

/// The capability fields that vary between processors, beside the control words.
struct CapabilityRow {
  const char *What;
  VmxFeature Feature; ///< the feature that decides the row, for the reasons below
  std::string (*Cell)(const VmxProfile &P);
};

const CapabilityRow kCapabilityRows[] = {
    {"IA32_VMX_MISC[4:0]: the preemption timer counts every 2^N TSC cycles",
     VmxFeature::PreemptionTimer,
     [](const VmxProfile &P) { return fmt::format("{}", P.PreemptionTimerRate); }},
    {"IA32_VMX_MISC[24:16]: CR3-target values", VmxFeature::Always,
     [](const VmxProfile &P) { return fmt::format("{}", P.Cr3TargetCount); }},
    {"IA32_VMX_MISC[27:25]: MSR-list entries, 512 × (N + 1)", VmxFeature::Always,
     [](const VmxProfile &P) { return fmt::format("{}", 512 * (P.MaxMsrListEntries + 1)); }},
    {"IA32_VMX_MISC[29]: VMWRITE to any field, exit-information fields too",
     VmxFeature::VmcsShadowing,
     [](const VmxProfile &P) { return std::string(yesNo(P.VmwriteAnyField)); }},
    {"IA32_VMX_EPT_VPID_CAP[0]: execute-only EPT translations", VmxFeature::Ept,
     [](const VmxProfile &P) {
       return std::string(yesNo(P.has(VmxFeature::Ept) && P.EptExecuteOnly));
     }},
    {"IA32_VMX_EPT_VPID_CAP[7]: 5-level EPT", VmxFeature::Ept,
     [](const VmxProfile &P) {
       return std::string(yesNo(P.has(VmxFeature::Ept) && P.Ept5Level));
     }},
    {"IA32_VMX_EPT_VPID_CAP[17]: 1-GiB EPT pages", VmxFeature::Ept,
     [](const VmxProfile &P) {
       return std::string(yesNo(P.has(VmxFeature::Ept) && P.Ept1GPages));
     }},
    {"IA32_VMX_EPT_VPID_CAP[21]: EPT accessed and dirty flags", VmxFeature::Ept,
     [](const VmxProfile &P) {
       return std::string(yesNo(P.has(VmxFeature::Ept) && P.EptAccessedDirty));
     }},
    {"IA32_VMX_EPT_VPID_CAP[22]: advanced VM-exit information for EPT violations",
     VmxFeature::AdvancedEptViolationInformation,
     [](const VmxProfile &P) {
       return std::string(yesNo(P.has(VmxFeature::Ept) &&
                                P.has(VmxFeature::AdvancedEptViolationInformation)));
     }},
    {"IA32_VMX_VMFUNC[0]: EPTP switching", VmxFeature::EptpSwitching,
     [](const VmxProfile &P) { return std::string(yesNo(P.has(VmxFeature::EptpSwitching))); }},
};

/// Why "full" differs from the processor it follows, per feature. A difference whose
/// feature has no row here prints "no reason recorded", which a test refuses.
struct DifferenceReason {
  VmxFeature Feature;
  const char *Why;
};

constexpr const char *kNotOfferedToL1 =
    "the processor has it; QEMU's model leaves it out because KVM's nested VMX does not "
    "offer it to an L1 hypervisor, and hypervisors running directly on the processor use it";

const DifferenceReason kDifferenceReasons[] = {
    {VmxFeature::PauseLoopExiting, kNotOfferedToL1},
    {VmxFeature::TscScaling,
     "the processor has it, and KVM's nested VMX offers it to L1 too; QEMU's model does not "
     "list it"},
    {VmxFeature::EptViolationVe, kNotOfferedToL1},
    {VmxFeature::ModeBasedExecute, kNotOfferedToL1},
    {VmxFeature::AdvancedEptViolationInformation,
     "not in QEMU's model (KVM does not offer it to L1), and not established here for the "
     "processor itself; vmxsim reports it because it implements bits 9-11 of the "
     "EPT-violation exit qualification exactly (SDM Vol. 3C, \"Exit Qualification for EPT "
     "Violations\")"},
    {VmxFeature::Xsaves,
     "vmxsim's processor has no XSAVES/XRSTORS (CPUID.(EAX=0DH,ECX=1):EAX[3] = 0), so the "
     "control that enables them in VMX non-root operation stays 0"},
};

const char *differenceReason(VmxFeature F) {
  for (const DifferenceReason &R : kDifferenceReasons)
    if (R.Feature == F)
      return R.Why;
  return "no reason recorded";
}

} // namespace

std::string vmxProfileTable() {
  const VmxProfile *Profiles[] = {&VmxProfile::full(), &VmxProfile::kvmNested(),
                                  &VmxProfile::minimal(),
                                  &VmxProfile::sapphireRapidsReference()};
  std::string T = "| control word | bit | control (SDM name) |";
  for (const VmxProfile *P : Profiles)
    T += fmt::format(" {} |", P->Name);
  T += "\n|---|---|---|---|---|---|---|\n";
  for (unsigned I = 0; I < kNumControls; ++I) {
    const VmxControlInfo &C = controlInfo(VmxControl(I));
    T += fmt::format("| {} | {} | {} |", wordName(C.Word), C.Bit, C.SdmName);
    for (const VmxProfile *P : Profiles)
      T += fmt::format(" {} |", controlCell(*P, C));
    T += "\n";
  }
  for (const CapabilityRow &R : kCapabilityRows) {
    T += fmt::format("| capability | | {} |", R.What);
    for (const VmxProfile *P : Profiles)
      T += fmt::format(" {} |", R.Cell(*P));
    T += "\n";
  }
  return T;
}

std::string vmxSapphireRapidsDifferences() {
  const VmxProfile &Full = VmxProfile::full();
  const VmxProfile &Ref = VmxProfile::sapphireRapidsReference();
  std::string T;
  for (unsigned I = 0; I < kNumControls; ++I) {
    const VmxControlInfo &C = controlInfo(VmxControl(I));
    const std::string A = controlCell(Full, C), B = controlCell(Ref, C);
    if (A != B)
      T += fmt::format("- {} bit {}, {}: full {}, Sapphire Rapids {}: {}.\n", wordName(C.Word),
                       C.Bit, C.SdmName, A, B, differenceReason(C.Feature));
  }
  for (const CapabilityRow &R : kCapabilityRows) {
    const std::string A = R.Cell(Full), B = R.Cell(Ref);
    if (A != B)
      T += fmt::format("- {}: full {}, Sapphire Rapids {}: {}.\n", R.What, A, B,
                       differenceReason(R.Feature));
  }
  return T;
}

std::string vmxProfilesReport() {
  return vmxProfileTable() + "\nWhere `full` differs from the Sapphire Rapids column:\n\n" +
         vmxSapphireRapidsDifferences();
}

} // namespace vmxsim
