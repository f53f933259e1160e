// The table of every VMX control and capability per profile (`vmxsim vmx-profiles`),
// generated from vmx_controls.def and the profiles: the one the README shows, checked
// against it by a test so the README stays true.
#pragma once
#include <string>

namespace vmxsim {

/// A Markdown table: one row per control of vmx_controls.def (its word and bit, the
/// SDM's name, and per profile "1" when the TRUE_ capability MSR makes it 1, "0/1" when
/// software chooses, "0" when it must be 0), then the capability fields that differ
/// between profiles (IA32_VMX_MISC, IA32_VMX_EPT_VPID_CAP, VM functions).
/// A last column shows the processor "full" follows
/// (VmxProfile::sapphireRapidsReference).
std::string vmxProfileTable();

/// One Markdown list item per row of that table where "full" differs from the processor
/// it follows, each with the reason (a reason table in profile_table.cpp; a difference
/// without one says "no reason recorded").
std::string vmxSapphireRapidsDifferences();

/// What `vmxsim vmx-profiles` prints: the table, then the differences.
std::string vmxProfilesReport();

} // namespace vmxsim
