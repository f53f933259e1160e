// EPT as the processor uses it: the walker (mmu/ept.h) configured from a Cpu, the
// guest-physical mapping cache (Mmu::guestPhysical), and the VM exit of a failed walk.
#pragma once
#include "cpu/status.h"
#include "mmu/address.h"
#include "mmu/ept.h"

#include <cstdint>

namespace vmxsim {

class Cpu;

/// Whether guest-physical accesses are translated by EPT: VMX non-root operation with
/// "activate secondary controls" and "enable EPT" (SDM Vol. 3C, "Guest-Physical
/// Addresses").
bool eptActive(const Cpu &C);

/// The walker's view of C: its VMX profile's EPT capabilities, MAXPHYADDR and whether
/// mode-based execute control is in effect.
EptWalkerConfig eptWalkerConfig(const Cpu &C);

/// eptWalk (mmu/ept.h) in C's memory with C's configuration.
EptWalk eptWalk(Cpu &C, uint64_t Eptp, Gpa Address, const EptAccess &A);

/// Translates Address under the current EPTP through the guest-physical mapping cache
/// (Mmu::guestPhysical), filling it on a successful walk; a failed walk is returned, with no
/// VM exit.
EptWalk eptTranslateNoExit(Cpu &C, Gpa Address, const EptAccess &A);

/// The VM exit of a failed EPT walk W of access A to Address: exit reason 48 (violation,
/// with its qualification, guest-linear address and NMI-unblocking bit) or 49
/// (misconfiguration), with IDT-vectoring information; returns Status::VmExit.
Status eptFaultExit(Cpu &C, Gpa Address, const EptAccess &A, const EptWalk &W);

/// Translates Address under the current EPTP; on a violation or misconfiguration performs
/// the VM exit (exit reason 48 / 49, fault-like: RIP still at the instruction) and
/// returns Status::VmExit.
Status eptTranslate(Cpu &C, Gpa Address, const EptAccess &A, EptWalk &Out);

/// EPT-violation exit qualification of a failed walk (SDM Vol. 3C, Table "Exit
/// Qualification for EPT Violations"), without bit 12 (NMI unblocking).
uint64_t eptViolationQualification(const Cpu &C, const EptWalk &W, uint64_t Eptp,
                                   const EptAccess &A);

} // namespace vmxsim
