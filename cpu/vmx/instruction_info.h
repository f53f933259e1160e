// VM-exit instruction-information layouts generated from instruction_info.def: one
// namespace per layout (insninfo::memory_operand, descriptor_table, ldtr_tr,
// invalidation, rdrand_rdseed) holding a BitField per field, and the encoder of the
// memory-operand fields shared by every table that describes a memory operand.
#pragma once
#include "cpu/decoded_insn.h"
#include "cpu/vmx/bit_layout.h"

namespace vmxsim::insninfo {

#define INSTRUCTION_INFO_FIELD(Layout, Field, Low, Width, SdmName)                         \
  namespace Layout {                                                                     \
  inline constexpr BitField Field{Low, Width};                                           \
  }
#include "cpu/vmx/instruction_info.def"
#undef INSTRUCTION_INFO_FIELD

inline constexpr BitFieldRow kRows[] = {
#define INSTRUCTION_INFO_FIELD(Layout, Field, Low, Width, SdmName)                         \
  {#Layout, #Field, BitField{Low, Width}, SdmName},
#include "cpu/vmx/instruction_info.def"
#undef INSTRUCTION_INFO_FIELD
};
static_assert(vmxsim::detail::layoutsAreConsistent(kRows),
              "instruction_info.def: a field overlaps another of its layout or exceeds 64 bits");

/// The address-size code of the tables: 0 = 16-bit, 1 = 32-bit, 2 = 64-bit.
constexpr uint32_t addressSizeCode(unsigned AddrSizeBytes) {
  return AddrSizeBytes == 2 ? 0 : AddrSizeBytes == 4 ? 1 : 2;
}

/// Scaling, address size, segment, index and base of I's memory operand (Mem/Reg = 0).
/// A RIP-relative operand has no base register (bit 27 set).
constexpr uint32_t memoryOperand(const DecodedInsn &I) {
  using namespace memory_operand;
  const bool HasIndex = I.Index != kRegNone;
  const bool HasBase = I.Base != kRegNone && I.Base != kRegRip;
  uint64_t V = 0;
  V = Scaling.set(V, HasIndex ? I.ScaleLog2 : 0);
  V = AddressSize.set(V, addressSizeCode(I.AddrSize));
  V = SegmentRegister.set(V, I.Seg);
  V = HasIndex ? IndexReg.set(V, I.Index) : IndexRegInvalid.set(V, 1);
  V = HasBase ? BaseReg.set(V, I.Base) : BaseRegInvalid.set(V, 1);
  return uint32_t(V);
}

} // namespace vmxsim::insninfo
