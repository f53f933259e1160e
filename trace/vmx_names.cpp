#include "trace/vmx_names.h"

namespace vmxsim::trace {

const char *exitReasonName(uint32_t Basic) {
  switch (Basic) {
#define EXIT_REASON(Name, Number, Kind, SdmName)                                          \
  case Number:                                                                           \
    return SdmName;
#include "cpu/vmx/exit_reasons.def"
#undef EXIT_REASON
  }
  return nullptr;
}

const char *exitReasonEnumName(uint32_t Basic) {
  switch (Basic) {
#define EXIT_REASON(Name, Number, Kind, SdmName)                                          \
  case Number:                                                                           \
    return #Name;
#include "cpu/vmx/exit_reasons.def"
#undef EXIT_REASON
  }
  return nullptr;
}

const char *vmEntryCheckName(uint32_t Id) {
  // The check IDs are the rows' positions (VmEntryCheckId in cpu/vmx/vm_entry_checks.h
  // is generated the same way).
  static const char *const Names[] = {
#define VM_ENTRY_CHECK_GROUP(Group, Outcome, Number, Section)
#define VM_ENTRY_CHECK(Id, Group, Qualification, Break, Text) #Id,
#include "cpu/vmx/vm_entry_checks.def"
#undef VM_ENTRY_CHECK
#undef VM_ENTRY_CHECK_GROUP
  };
  return Id < sizeof(Names) / sizeof(Names[0]) ? Names[Id] : nullptr;
}

} // namespace vmxsim::trace
