// A VMCS that passes every VM-entry check (SDM Vol. 3C, "Checks on VMX Controls and
// Host-State Area" and "Checks on the Guest State Area") for a 64-bit host and a 64-bit
// guest, with every control at its minimum allowed setting. Tests start from it and break
// exactly one thing, so each test reads like one bullet of the SDM's lists.
//
// The builder is pure: it depends only on the profile and the layout below, not on a
// Cpu, so the VM-entry-check tests can use it without performing VMXON.
#pragma once
#include "cpu/vmx/vmcs.h"
#include "cpu/vmx/vmx_features.h"

#include <cstdint>

namespace vmxsim::test {

/// Where the host and guest live. The defaults match TestMachine::setupLongMode (GDT at
/// 0x1000 with code64 0x08, data 0x10, TSS slot 0x40; IDT at 0x2000; identity-mapped
/// 4-level tables at 0x10000), so one machine can be both host and guest.
struct KnownGoodLayout {
  uint64_t HostRip = 0x180000, HostRsp = 0x70000;
  uint64_t GuestRip = 0x100000, GuestRsp = 0x60000;
  uint64_t Cr3 = 0x10000;
  uint64_t GdtBase = 0x1000;
  uint16_t GdtLimit = 10 * 8 - 1;
  uint64_t IdtBase = 0x2000;
  uint16_t IdtLimit = 0;
  uint64_t TrBase = 0x3000;
  uint16_t CodeSelector = 0x08, DataSelector = 0x10, TrSelector = 0x40;
};

/// Guest/host CR0 and CR4 of the known-good VMCS: PE, NE, PG as IA32_VMX_CR0_FIXED0
/// requires, VMXE as IA32_VMX_CR4_FIXED0 requires, PAE for 4-level paging.
inline constexpr uint64_t kKnownGoodCr0 = 0x80010033; // PG WP NE ET MP PE
inline constexpr uint64_t kKnownGoodCr4 = 0x2620;     // VMXE OSXMMEXCPT OSFXSR PAE
inline constexpr uint64_t kKnownGoodEfer = 0xd01;     // NXE LMA LME SCE
/// Guest access rights (VMCS format): 64-bit code (accessed, readable), flat data,
/// 64-bit busy TSS, LDTR unusable.
inline constexpr uint32_t kArCode64 = 0xa09b, kArData = 0xc093, kArTss64Busy = 0x8b,
                          kArUnusable = 0x10000;

/// The known-good VMCS for profile P (see the file comment).
VmcsData knownGoodVmcs(const VmxProfile &P, const KnownGoodLayout &L = {});

} // namespace vmxsim::test
