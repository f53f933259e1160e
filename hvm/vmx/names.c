/* Names for log lines, generated from the emulator's tables (STYLE 2.1). */
#include "vmx/arch.h"
#include "vmx/vmx.h"

static const char *const ExitReasonNames[Reason_Count] = {
#define EXIT_REASON(Name, Number, Kind, SdmName) [Number] = SdmName,
#include "cpu/vmx/exit_reasons.def"
#undef EXIT_REASON
};

const char *exitReasonName(uint32_t Basic) {
  if (Basic < Reason_Count && ExitReasonNames[Basic])
    return ExitReasonNames[Basic];
  return "unknown";
}

struct VmErrName {
  uint32_t Number;
  const char *Name;
};
static const struct VmErrName VmErrNames[] = {
#define VM_INSTRUCTION_ERROR(Name, Number, SdmName) {Number, SdmName},
#include "cpu/vmx/vm_instruction_errors.def"
#undef VM_INSTRUCTION_ERROR
};

const char *vmInstructionErrorName(uint32_t Number) {
  for (unsigned I = 0; I < sizeof(VmErrNames) / sizeof(VmErrNames[0]); ++I)
    if (VmErrNames[I].Number == Number)
      return VmErrNames[I].Name;
  return "unknown";
}
