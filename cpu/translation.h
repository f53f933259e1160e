// The processor's side of linear-address translation: the guest's paging (mmu/paging.h)
// fed with this CPU's registers, then EPT (cpu/vmx/ept_translation.h) in VMX non-root
// operation, and the fault of a failed walk raised: #PF pending in the Cpu, or the
// EPT-violation/misconfiguration VM exit.
#pragma once
#include "cpu/status.h"
#include "mmu/access.h"
#include "mmu/address.h"
#include "mmu/paging.h"

namespace vmxsim {

class Cpu;

/// A linear address translated for one access: where it is in the machine's memory and
/// the rights of the mapping (combined with EPT's under EPT).
struct Translation {
  Hpa Pa;
  bool Writable = false; ///< a write with the same privilege would succeed
  bool User = false;     ///< user-mode accessible at every level
  bool Executable = true;
  bool Global = false;
};

/// The walker's view of C's paging registers and model.
PagingContext pagingContext(const Cpu &C);
/// The mask ANDed into every physical address C translates: PhysMem's A20 mask outside
/// VMX operation, all-ones in it (A20M# is disabled by VMXON).
uint64_t a20Mask(const Cpu &C);

/// Translates La for an access of the given kind. User is true for CPL-3 accesses that
/// are not implicit supervisor accesses (descriptor tables, TSS). On a page fault the
/// #PF is pending in C and Status::Fault is returned; on an EPT violation or
/// misconfiguration the VM exit is performed and Status::VmExit returned.
Status translateLinear(Cpu &C, Gla La, Access Kind, bool User, Translation &Out);

/// Loads the four PDPTEs from CR3 for PAE paging: #GP(0) if one has reserved bits set
/// (SDM Vol. 3A, PDPTE Registers), or the EPT VM exit of the load; nothing is loaded then.
Status loadPdptes(Cpu &C);

} // namespace vmxsim
