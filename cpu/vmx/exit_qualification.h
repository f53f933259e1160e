// Exit-qualification layouts generated from exit_qualification.def: one namespace per
// layout (exitqual::cr_access, exitqual::mov_dr, exitqual::io) holding a BitField per
// field, plus the enumerated values the SDM defines for them.
#pragma once
#include "cpu/decoded_insn.h"
#include "cpu/vmx/bit_layout.h"

namespace vmxsim::exitqual {

#define EXIT_QUALIFICATION_FIELD(Layout, Field, Low, Width, SdmName)                       \
  namespace Layout {                                                                     \
  inline constexpr BitField Field{Low, Width};                                           \
  }
#include "cpu/vmx/exit_qualification.def"
#undef EXIT_QUALIFICATION_FIELD

inline constexpr BitFieldRow kRows[] = {
#define EXIT_QUALIFICATION_FIELD(Layout, Field, Low, Width, SdmName)                       \
  {#Layout, #Field, BitField{Low, Width}, SdmName},
#include "cpu/vmx/exit_qualification.def"
#undef EXIT_QUALIFICATION_FIELD
};
static_assert(vmxsim::detail::layoutsAreConsistent(kRows),
              "exit_qualification.def: a field overlaps another of its layout or exceeds 64 bits");

/// cr_access::AccessType values (SDM Vol. 3C, "Exit Qualification for Control-Register
/// Accesses").
enum class CrAccessType : uint8_t { MovToCr = 0, MovFromCr = 1, Clts = 2, Lmsw = 3 };

/// apic_access::AccessType values (SDM Vol. 3C, Table "Exit Qualification for
/// APIC-Access VM Exits from Linear Accesses and Guest-Physical Accesses").
enum class ApicAccessType : uint8_t {
  LinearRead = 0,
  LinearWrite = 1,
  LinearFetch = 2,
  LinearEventDelivery = 3,
  GuestPhysicalEventDelivery = 10,
  GuestPhysicalInstruction = 15,
};

/// The exit qualification of instructions with a memory operand whose exit reports the
/// displacement (LGDT, LIDT, LLDT, LTR, SGDT, SIDT, SLDT, STR, INVEPT, INVPCID, INVVPID,
/// the VMCS-pointer instructions, VMREAD, VMWRITE): "the value of the instruction's
/// displacement field, which is sign-extended to 64 bits"; zero without a displacement
/// (register operands); for RIP-relative addressing, the displacement plus the RIP of
/// the next instruction (SDM Vol. 3C, "Exit Qualification for VM Exits Due to
/// Instruction Execution" ... "INVEPT, INVPCID, INVVPID, LGDT, ..."). Rip is the RIP of
/// the instruction itself.
inline uint64_t displacement(const DecodedInsn &I, uint64_t Rip) {
  if (!I.hasMem())
    return 0;
  if (I.Base == kRegRip)
    return uint64_t(I.Disp) + Rip + I.Len;
  return uint64_t(I.Disp);
}

} // namespace vmxsim::exitqual
