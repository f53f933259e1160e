// VMX capability reporting (SDM Vol. 3D, Appendix A "VMX Capability Reporting
// Facility"): the IA32_VMX_* MSR values, generated from vmx_controls.def and a profile.
#pragma once
#include "cpu/msrs.h"
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
  VmxFeature Feature; ///< the profile capability that allows the 1-setting
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
namespace detail {
inline constexpr VmxControlWord kControlWords[] = {
#define VMX_CONTROL(Word, Bit, Name, Default, Feature, SdmName) VmxControlWord::Word,
#include "cpu/vmx/vmx_controls.def"
#undef VMX_CONTROL
};
} // namespace detail
/// The control word a control lives in (the Word column of vmx_controls.def).
constexpr VmxControlWord controlWord(VmxControl C) {
  return detail::kControlWords[unsigned(C)];
}


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
