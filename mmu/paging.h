// Linear-address translation by the guest's own paging structures (SDM Vol. 3A,
// Paging): no paging, 32-bit, PAE, 4-level and 5-level, with A/D updates and exact #PF
// error codes.
//
// The walker knows the processor only through PagingContext (the paging registers and
// the model facts it reads) and, under EPT, through PagingStructureTranslator (how a
// guest-physical address of a paging-structure entry becomes a machine-physical one).
// It returns what it found as a value (PagingWalk): the translation, a page fault with
// its error code, or the EPT violation/misconfiguration of a paging-structure access
// with everything the exit qualification needs. The processor's MMU (cpu/mmu.h) raises
// the #PF, and cpu/vmx/ept_translation.h performs the VM exit.
#pragma once
#include "mmu/access.h"
#include "mmu/address.h"
#include "mmu/ept.h"

#include <cstdint>

namespace vmxsim {

class PhysMem;

/// #PF error-code bits (SDM Vol. 3A, Interrupt 14—Page-Fault Exception (#PF)).
namespace pferr {
inline constexpr uint32_t P = 1u << 0, W = 1u << 1, U = 1u << 2, Rsvd = 1u << 3,
                          I = 1u << 4, Pk = 1u << 5, Ss = 1u << 6;
}

/// What the walker reads of the processor.
struct PagingContext {
  uint64_t Cr3 = 0;
  bool Paging = false;       ///< CR0.PG
  bool WriteProtect = false; ///< CR0.WP
  bool Pse = false;          ///< CR4.PSE
  bool Pae = false;          ///< CR4.PAE
  bool Pge = false;          ///< CR4.PGE
  bool La57 = false;         ///< CR4.LA57
  bool Smep = false;         ///< CR4.SMEP
  bool Smap = false;         ///< CR4.SMAP
  bool LongMode = false;     ///< IA32_EFER.LMA
  bool Nxe = false;          ///< IA32_EFER.NXE
  /// The PDPTE registers (PAE paging only).
  uint64_t Pdpte[4] = {};
  /// CPL is 3: a supervisor-mode access is then an implicit one, which SMAP always checks.
  bool Cpl3 = false;
  /// RFLAGS.AC (SMAP lets explicit supervisor accesses to user pages through when set).
  bool Ac = false;
  unsigned MaxPhysAddrBits = 36; ///< MAXPHYADDR
  bool Page1G = false;           ///< 1-GByte pages (CPUID.80000001H:EDX[26])
  /// ANDed into the physical address of every paging-structure access: bit 20 clear
  /// while the platform asserts A20M# (PhysMem::a20Mask; the processor passes all-ones
  /// in VMX operation, where A20M# is disabled).
  uint64_t A20Mask = ~uint64_t(0);
  /// A look from outside the machine (harness/run_control.h: a debugger reading guest
  /// memory): the walk sets no accessed or dirty flag, so looking changes nothing the
  /// guest can see.
  bool Probe = false;
};

/// Under EPT, paging-structure entries are at guest-physical addresses and each access
/// to one is translated by EPT (SDM Vol. 3C, "EPT Translation Mechanism": "guest paging
/// structures ... are accessed using guest-physical addresses").
class PagingStructureTranslator {
public:
  virtual ~PagingStructureTranslator() = default;
  /// The EPT walk of one access to a paging-structure entry (no VM exit).
  virtual EptWalk translate(Gpa Entry, const EptAccess &A) = 0;
};

enum class PagingOutcome : uint8_t { Translated, PageFault, EptFault };

/// Result of one walk.
struct PagingWalk {
  PagingOutcome Outcome = PagingOutcome::Translated;
  // Translated:
  Gpa Address;           ///< the guest-physical address of the linear address
  bool Writable = false; ///< a write with the same privilege would succeed
  bool User = false;     ///< user-mode accessible at every level
  /// R/W = 1 at every level: a read/write page whatever CR0.WP (true with CR0.PG = 0).
  bool ReadWrite = false;
  bool Executable = true;
  bool Global = false;
  // PageFault:
  uint32_t ErrorCode = 0; ///< the #PF error code (pferr bits); CR2 is the linear address
  // EptFault: the paging-structure access that EPT refused, and EPT's walk of it.
  Gpa EptAddress;
  EptAccess EptAccessKind{Access::Read};
  EptWalk Ept;
};

/// Translates La for an access of the given kind. User is true for CPL-3 accesses that
/// are not implicit supervisor accesses (descriptor tables, TSS). A/D bits are set as
/// the SDM says. Ept is null outside EPT; otherwise every entry access goes through it
/// and Mem is addressed with what it returns.
PagingWalk walkGuestPaging(PhysMem &Mem, const PagingContext &Ctx, Gla La, Access Kind,
                           bool User, PagingStructureTranslator *Ept);

/// Reads the four PDPTEs of PAE paging from the page-directory-pointer table at Table
/// (SDM Vol. 3A, PDPTE Registers). False, with nothing meaningful in Out, when a present
/// one has reserved bits set (the caller raises #GP(0) and loads nothing).
bool readPdptes(PhysMem &Mem, Hpa Table, unsigned MaxPhysAddrBits, uint64_t (&Out)[4]);

} // namespace vmxsim
