// Guest-physical address translation by the extended page tables (SDM Vol. 3C, "VMX
// Support for Address Translation" > "The Extended Page Table Mechanism (EPT)"): the
// walker, EPT misconfigurations and violations, EPT accessed/dirty flags and the EPT
// memory type. Used on TLB misses only: a TLB hit never reaches this code.
//
// The walker knows the processor only through EptWalkerConfig and returns what it found
// as a value (EptWalk: the translation, or a violation with the rights the qualification
// reports, or a misconfiguration); cpu/vmx/ept_translation.h turns a failed walk into
// the VM exit (reason 48 or 49).
#pragma once
#include "mmu/access.h"
#include "mmu/address.h"

#include <cstdint>

namespace vmxsim {

class PhysMem;

/// EPT paging-structure entry bits (SDM Vol. 3C, "EPT Translation Mechanism", tables
/// "Format of an EPT PML4 Entry" .. "Format of an EPT Page-Table Entry").
namespace eptentry {
inline constexpr uint64_t Read = 1u << 0, Write = 1u << 1, Execute = 1u << 2,
                          MemTypeMask = 7u << 3, IgnorePat = 1u << 6, LargePage = 1u << 7,
                          Accessed = 1u << 8, Dirty = 1u << 9, UserExecute = 1u << 10,
                          SuppressVe = uint64_t(1) << 63;
inline constexpr unsigned MemTypeShift = 3;
} // namespace eptentry

/// EPTP bits (SDM Vol. 3C, "Extended-Page-Table Pointer (EPTP)").
namespace eptp {
inline constexpr uint64_t MemTypeMask = 7, WalkLengthShift = 3, WalkLengthMask = 7u << 3,
                          AccessedDirty = 1u << 6;
} // namespace eptp

/// Permission bits of a translation: the logical AND over every EPT entry used (bit 2
/// is "supervisor-mode execute" with mode-based execute control).
namespace eptright {
inline constexpr uint8_t R = 1, W = 2, X = 4, UserX = 8;
}

/// One guest-physical access as EPT sees it (SDM Vol. 3C, "EPT Violations").
struct EptAccess {
  Access Kind;
  /// A read of a guest paging-structure entry or its A/D update (qualification bit 8 = 0).
  bool PagingStructure = false;
  /// A guest-linear address is associated with the access (qualification bit 7).
  bool LinearValid = false;
  uint64_t Gla = 0;
  /// The linear address is a user-mode address: U/S = 1 at every level of the guest's
  /// translation, or CR0.PG = 0 (mode-based execute control; qualification bit 9).
  bool UserAddress = false;
  /// Of the translation of a linear address (qualification bits 10 and 11): the page is
  /// read/write (R/W = 1 at every level, or CR0.PG = 0), or execute-disable (XD = 1 at
  /// some level with IA32_EFER.NXE = 1 and PAE or 4-level paging).
  bool ReadWritePage = false;
  bool ExecuteDisablePage = false;
};

/// AdUpdateBlocked: the translation needed an accessed or dirty flag set while the
/// walker was told not to set any (EptWalkerConfig::AdUpdatesBlocked); nothing was set
/// and the access does not occur (the processor's page-modification log is full).
/// ApicAccess is never produced by eptWalk: the processor's translator of guest
/// paging-structure accesses reports with it a translation that lands on the APIC-access
/// page, which causes an APIC-access VM exit instead (cpu/vmx/apic_virtualization.h).
enum class EptOutcome : uint8_t { Translated, Violation, Misconfiguration, AdUpdateBlocked, ApicAccess };

/// Result of one walk. For a violation Rights holds the AND of the entries used up to
/// the one that stopped the walk (0 past a not-present entry), as qualification bits
/// 3-6 report it.
struct EptWalk {
  EptOutcome Outcome = EptOutcome::Translated;
  Hpa Address;            ///< machine-physical address (Translated)
  uint8_t Rights = 0;      ///< eptright bits
  uint8_t MemType = 0;     ///< EPT memory type of the page (leaf bits 5:3)
  bool IgnorePat = false;  ///< leaf bit 6
  uint8_t PageLevel = 0;   ///< 1 = 4 KiB, 2 = 2 MiB, 3 = 1 GiB
  bool DirtySet = false;   ///< the walk set the leaf's dirty flag (it was 0)
  /// Of a violation: bit 63 ("suppress #VE") of the one entry that decides whether it is
  /// convertible — the entry that is not present, or the entry that maps the page (SDM
  /// Vol. 3C, "Convertible EPT Violations").
  bool SuppressVe = false;
};

/// What the walker needs of the processor: its VMX capabilities and the controls in
/// effect (cpu/vmx/ept_translation.h builds it from a Cpu).
struct EptWalkerConfig {
  bool ExecuteOnly = false;      ///< execute-only translations (IA32_VMX_EPT_VPID_CAP[0])
  bool Pages1G = false;          ///< 1-GByte pages (IA32_VMX_EPT_VPID_CAP[17])
  bool ModeBasedExecute = false; ///< mode-based execute control in effect
  unsigned MaxPhysAddrBits = 46; ///< MAXPHYADDR
  /// A walk that would set an EPT accessed or dirty flag sets none and ends with
  /// EptOutcome::AdUpdateBlocked (page-modification logging with a full log).
  bool AdUpdatesBlocked = false;
  /// A look from outside the machine (harness/run_control.h): the walk sets no EPT
  /// accessed or dirty flag and is never blocked for wanting to.
  bool Probe = false;
};

/// Walks the EPT paging structures of Eptp, in Mem, for Address (no VM exit; sets EPT A/D
/// flags when Eptp[6] = 1 and the translation succeeds, unless Cfg.AdUpdatesBlocked).
EptWalk eptWalk(PhysMem &Mem, const EptWalkerConfig &Cfg, uint64_t Eptp, Gpa Address,
                const EptAccess &A);

/// SDM Vol. 3C, "EPT Violations": whether Rights (the AND of the entries used) allow the
/// access; IsWrite includes guest paging-structure accesses under EPT A/D.
bool eptAllows(bool ModeBasedExecute, uint8_t Rights, const EptAccess &A, bool IsWrite);

/// Memory-type encodings (SDM Vol. 3A, "Memory Types That Can Be Encoded With PAT").
namespace memtype {
inline constexpr uint8_t Uc = 0, Wc = 1, Wt = 4, Wp = 5, Wb = 6, UcMinus = 7;
}

/// The effective memory type of an access translated by EPT (SDM Vol. 3C, "EPT and
/// Memory Typing"): UC when CR0.CD = 1; the EPT memory type when the leaf's "ignore
/// PAT" bit is 1; otherwise the EPT memory type combined with the PAT memory type as
/// if it were the MTRR type (SDM Vol. 3A, Table "Effective Page-Level Memory Types for
/// Pentium III and More Recent Processor Families"). Types outside the table give UC.
uint8_t eptEffectiveMemoryType(uint8_t EptType, bool IgnorePat, uint8_t PatType, bool Cr0Cd);

} // namespace vmxsim
