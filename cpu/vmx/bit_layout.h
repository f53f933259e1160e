// Bit layouts of VMX information fields (STYLE 2.1: "Bit layouts ... are also tables:
// field name, low bit, width"): one BitField per row of exit_qualification.def and
// instruction_info.def, read and written through constexpr accessors instead of
// bit-field unions, whose layout is implementation-defined.
#pragma once
#include <cstdint>

namespace vmxsim {

/// A field of Width bits starting at bit Low of a 32- or 64-bit information word.
struct BitField {
  uint8_t Low;
  uint8_t Width;

  constexpr uint64_t mask() const {
    return (Width >= 64 ? ~uint64_t(0) : (uint64_t(1) << Width) - 1) << Low;
  }
  /// Word with this field replaced by V (truncated to the field's width).
  constexpr uint64_t set(uint64_t Word, uint64_t V) const {
    return (Word & ~mask()) | ((V << Low) & mask());
  }
  constexpr uint64_t get(uint64_t Word) const { return (Word & mask()) >> Low; }
};

/// Row of a bit-layout table, for the consistency checks and table-driven tests.
struct BitFieldRow {
  const char *Layout;
  const char *Field;
  BitField Bits;
  const char *SdmName;
};

namespace detail {
/// Every field fits in 64 bits and no two fields of one layout overlap.
template <unsigned N> constexpr bool layoutsAreConsistent(const BitFieldRow (&Rows)[N]) {
  for (unsigned I = 0; I < N; ++I) {
    if (Rows[I].Bits.Width == 0 || Rows[I].Bits.Low + Rows[I].Bits.Width > 64)
      return false;
    for (unsigned J = I + 1; J < N; ++J) {
      const char *A = Rows[I].Layout, *B = Rows[J].Layout;
      unsigned K = 0;
      while (A[K] && A[K] == B[K])
        ++K;
      if (A[K] == B[K] && (Rows[I].Bits.mask() & Rows[J].Bits.mask()))
        return false;
    }
  }
  return true;
}
} // namespace detail

} // namespace vmxsim
