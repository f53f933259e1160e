#include "cpu/vmx/vmcs.h"

namespace vmxsim {

namespace {
constexpr VmcsEncodingIndex makeEncodingIndex() {
  VmcsEncodingIndex Index{};
  for (uint16_t &V : Index.FieldOf)
    V = 0xffff;
  for (unsigned I = 0; I < kNumVmcsFields; ++I)
    Index.FieldOf[kVmcsFields[I].Encoding >> 1] = uint16_t(I);
  return Index;
}
} // namespace

// Constant-initialised (no initialisation guard on the VMREAD/VMWRITE path).
constexpr VmcsEncodingIndex kVmcsEncodingIndex = makeEncodingIndex();

const char *vmInstructionErrorText(unsigned Number) {
  switch (Number) {
#define VM_INSTRUCTION_ERROR(Name, Num, Desc)                                           \
  case Num:                                                                              \
    return Desc;
#include "cpu/vmx/vm_instruction_errors.def"
#undef VM_INSTRUCTION_ERROR
  }
  return "unknown VM-instruction error";
}

} // namespace vmxsim
