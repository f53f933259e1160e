// Linear-address translation by the guest's own paging structures (SDM Vol. 3A,
// Paging): no paging, 32-bit, PAE, 4-level and 5-level, with A/D updates and exact #PF
// error codes. The software TLBs in Cpu cache the results.
#pragma once
#include "cpu/status.h"
#include <cstdint>

namespace vmxsim {

class Cpu;
enum class Access : uint8_t;

/// #PF error-code bits (SDM Vol. 3A, Interrupt 14—Page-Fault Exception (#PF)).
namespace pferr {
inline constexpr uint32_t P = 1u << 0, W = 1u << 1, U = 1u << 2, Rsvd = 1u << 3,
                          I = 1u << 4, Pk = 1u << 5, Ss = 1u << 6;
}

struct Translation {
  uint64_t Pa = 0;
  bool Writable = false; ///< a write with the same privilege would succeed
  bool User = false;     ///< user-mode accessible at every level
  bool Executable = true;
  bool Global = false;
};

/// Translates La for an access of the given kind. User is true for CPL-3 accesses that
/// are not implicit supervisor accesses (descriptor tables, TSS). On failure the #PF is
/// pending in the Cpu and Status::Fault is returned; A/D bits are set as the SDM says.
Status translateLinear(Cpu &C, uint64_t La, Access Kind, bool User, Translation &Out);

/// Loads the four PDPTEs from CR3 for PAE paging; false if one has reserved bits set
/// (the caller raises #GP(0), SDM Vol. 3A, PDPTE Registers).
Status loadPdptes(Cpu &C);

} // namespace vmxsim
