// Distinct address types (STYLE 2.5): a guest-linear, guest-physical or machine-physical
// address never crosses a module boundary as a raw integer.
#pragma once
#include <compare>
#include <cstdint>

namespace vmxsim {

template <typename Tag> struct Address {
  uint64_t Value = 0;
  constexpr Address() = default;
  constexpr explicit Address(uint64_t V) : Value(V) {}
  constexpr uint64_t value() const { return Value; }
  constexpr Address operator+(uint64_t Off) const { return Address(Value + Off); }
  constexpr uint64_t pageNumber() const { return Value >> 12; }
  constexpr uint64_t pageOffset() const { return Value & 0xfff; }
  constexpr auto operator<=>(const Address &) const = default;
};

struct GlaTag {};
struct GpaTag {};
struct HpaTag {};
/// Guest-linear address (after segmentation, before paging).
using Gla = Address<GlaTag>;
/// Guest-physical address (after guest paging, before EPT).
using Gpa = Address<GpaTag>;
/// Machine-physical address: an address in the machine's memory (PhysMem), after EPT;
/// equals the Gpa when EPT is off.
using Hpa = Address<HpaTag>;

inline constexpr uint64_t kPageSize = 4096;
inline constexpr uint64_t kPageMask = ~uint64_t(0xfff);

} // namespace vmxsim
