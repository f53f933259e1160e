// Names of the architectural lists the trace tools print, generated from the data-only
// tables of the processor (cpu/vmx/exit_reasons.def, cpu/vmx/vm_entry_checks.def): trace/
// includes no C++ header of the emulator (docs/ARCHITECTURE.md, the layers).
#pragma once
#include <cstdint>

namespace vmxsim::trace {

/// The SDM name of a basic exit reason ("CPUID"), or nullptr for a reserved number.
const char *exitReasonName(uint32_t Basic);
/// The enumerator name of a basic exit reason in exit_reasons.def ("Cpuid"), or nullptr.
const char *exitReasonEnumName(uint32_t Basic);
/// The name of VM-entry check Id (its row in vm_entry_checks.def, as traced in
/// GT_VMENTRY_FAIL), or nullptr if there is no such row.
const char *vmEntryCheckName(uint32_t Id);

} // namespace vmxsim::trace
