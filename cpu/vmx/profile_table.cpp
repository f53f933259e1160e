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

} // namespace

std::string vmxProfileTable() {
  const VmxProfile *Profiles[] = {&VmxProfile::full(), &VmxProfile::kvmNested(),
                                  &VmxProfile::minimal()};
  std::string T = "| control word | bit | control (SDM name) |";
  for (const VmxProfile *P : Profiles)
    T += fmt::format(" {} |", P->Name);
  T += "\n|---|---|---|---|---|---|\n";
  for (unsigned I = 0; I < kNumControls; ++I) {
    const VmxControlInfo &C = controlInfo(VmxControl(I));
    T += fmt::format("| {} | {} | {} |", wordName(C.Word), C.Bit, C.SdmName);
    for (const VmxProfile *P : Profiles) {
      // SDM Vol. 3D, A.3-A.5: the TRUE_ MSR's allowed-0 and allowed-1 settings.
      const ControlCaps Caps = controlCaps(*P, C.Word, true);
      const uint32_t Bit = 1u << C.Bit;
      T += (Caps.MustBe1 & Bit) ? " 1 |" : (Caps.MayBe1 & Bit) ? " 0/1 |" : " 0 |";
    }
    T += "\n";
  }
  auto Row = [&](const char *What, auto Cell) {
    T += fmt::format("| capability | | {} |", What);
    for (const VmxProfile *P : Profiles)
      T += fmt::format(" {} |", Cell(*P));
    T += "\n";
  };
  auto YesNo = [](bool B) { return B ? "yes" : "no"; };
  Row("IA32_VMX_MISC[4:0]: the preemption timer counts every 2^N TSC cycles",
      [](const VmxProfile &P) { return fmt::format("{}", P.PreemptionTimerRate); });
  Row("IA32_VMX_MISC[24:16]: CR3-target values",
      [](const VmxProfile &P) { return fmt::format("{}", P.Cr3TargetCount); });
  Row("IA32_VMX_MISC[27:25]: MSR-list entries, 512 × (N + 1)",
      [](const VmxProfile &P) { return fmt::format("{}", 512 * (P.MaxMsrListEntries + 1)); });
  Row("IA32_VMX_MISC[29]: VMWRITE to any field, exit-information fields too",
      [&](const VmxProfile &P) { return YesNo(P.VmwriteAnyField); });
  Row("IA32_VMX_EPT_VPID_CAP[0]: execute-only EPT translations",
      [&](const VmxProfile &P) { return YesNo(P.has(VmxFeature::Ept) && P.EptExecuteOnly); });
  Row("IA32_VMX_EPT_VPID_CAP[7]: 5-level EPT",
      [&](const VmxProfile &P) { return YesNo(P.has(VmxFeature::Ept) && P.Ept5Level); });
  Row("IA32_VMX_EPT_VPID_CAP[17]: 1-GiB EPT pages",
      [&](const VmxProfile &P) { return YesNo(P.has(VmxFeature::Ept) && P.Ept1GPages); });
  Row("IA32_VMX_EPT_VPID_CAP[21]: EPT accessed and dirty flags",
      [&](const VmxProfile &P) { return YesNo(P.has(VmxFeature::Ept) && P.EptAccessedDirty); });
  Row("IA32_VMX_EPT_VPID_CAP[22]: advanced VM-exit information for EPT violations",
      [&](const VmxProfile &P) {
        return YesNo(P.has(VmxFeature::Ept) &&
                     P.has(VmxFeature::AdvancedEptViolationInformation));
      });
  Row("IA32_VMX_VMFUNC[0]: EPTP switching",
      [&](const VmxProfile &P) { return YesNo(P.has(VmxFeature::EptpSwitching)); });
  return T;
}

} // namespace vmxsim
