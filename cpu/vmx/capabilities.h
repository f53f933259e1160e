// VMX capability reporting (SDM Vol. 3D, Appendix A "VMX Capability Reporting
// Facility"): the IA32_VMX_* MSR values, generated from vmx_controls.def and a profile.
#pragma once
#include "cpu/vmx/vmx_features.h"

#include <cstdint>
#include <optional>

namespace vmxsim {

enum class VmxControlWord : uint8_t { Pin, Proc, Proc2, Proc3, Exit, Entry };

enum class VmxControl : uint8_t {
#define VMX_CONTROL(Word, Bit, Name, Default, Feature, SdmName) Name,
#include "cpu/vmx/vmx_controls.def"
#undef VMX_CONTROL
};

struct VmxControlInfo {
  VmxControlWord Word;
  uint8_t Bit;
  const char *Name;
  const char *SdmName;
};
const VmxControlInfo &controlInfo(VmxControl C);

namespace detail {
inline constexpr uint8_t kControlBitNumbers[] = {
#define VMX_CONTROL(Word, Bit, Name, Default, Feature, SdmName) Bit,
#include "cpu/vmx/vmx_controls.def"
#undef VMX_CONTROL
};
} // namespace detail
/// The bit mask of a control within its control word.
constexpr uint32_t controlBit(VmxControl C) {
  return 1u << detail::kControlBitNumbers[unsigned(C)];
}

/// IA32_VMX_* MSR numbers (SDM Vol. 4, "IA32_VMX_BASIC" ... "IA32_VMX_PROCBASED_CTLS3").
namespace msr {
inline constexpr uint32_t IA32_VMX_BASIC = 0x480, IA32_VMX_PINBASED_CTLS = 0x481,
                          IA32_VMX_PROCBASED_CTLS = 0x482, IA32_VMX_EXIT_CTLS = 0x483,
                          IA32_VMX_ENTRY_CTLS = 0x484, IA32_VMX_MISC = 0x485,
                          IA32_VMX_CR0_FIXED0 = 0x486, IA32_VMX_CR0_FIXED1 = 0x487,
                          IA32_VMX_CR4_FIXED0 = 0x488, IA32_VMX_CR4_FIXED1 = 0x489,
                          IA32_VMX_VMCS_ENUM = 0x48a, IA32_VMX_PROCBASED_CTLS2 = 0x48b,
                          IA32_VMX_EPT_VPID_CAP = 0x48c,
                          IA32_VMX_TRUE_PINBASED_CTLS = 0x48d,
                          IA32_VMX_TRUE_PROCBASED_CTLS = 0x48e,
                          IA32_VMX_TRUE_EXIT_CTLS = 0x48f,
                          IA32_VMX_TRUE_ENTRY_CTLS = 0x490, IA32_VMX_VMFUNC = 0x491,
                          IA32_VMX_PROCBASED_CTLS3 = 0x492;
} // namespace msr

/// The value of an IA32_VMX_* capability MSR under a profile; nullopt for MSRs the
/// profile does not have (RDMSR of those raises #GP(0)). Cr4Fixed1 is the set of CR4
/// bits the CPU model supports.
std::optional<uint64_t> vmxCapabilityMsr(const VmxProfile &P, uint32_t Msr,
                                         uint64_t Cr4Fixed1);

/// allowed-0 (must-be-one) and allowed-1 (may-be-one) settings of a control word, as
/// VM entry checks them: from the TRUE_ MSRs when the processor has them (SDM Vol. 3D,
/// Appendix A.2: software that knows the TRUE MSRs may clear default1 bits they allow).
struct ControlCaps {
  uint32_t MustBe1, MayBe1;
  bool allows(uint32_t Value) const {
    return (Value & MustBe1) == MustBe1 && (Value & ~MayBe1) == 0;
  }
};
ControlCaps controlCaps(const VmxProfile &P, VmxControlWord W, bool True = true);

} // namespace vmxsim
