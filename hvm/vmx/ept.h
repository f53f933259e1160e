/* The guest's extended page tables (SDM Vol. 3C, "The Extended Page Table Mechanism
 * (EPT)"): one shared, identity-mapped EPT for every vCPU of the domain, with a 2 MiB
 * region that starts unmapped and is mapped 4 KiB page by 4 KiB page at the guest's
 * first touch (lazy mapping: exit_ept.c).
 */
#ifndef HVM_VMX_EPT_H
#define HVM_VMX_EPT_H

#include <stdbool.h>
#include <stdint.h>

/* Guest-physical memory the EPT maps 1:1 with 2 MiB pages. */
#define EPT_IDENTITY_BYTES (1ull << 30)
/* The lazily mapped region's size. */
#define EPT_LAZY_BYTES (2ull << 20)

/* An emulated MMIO page (exit_ept.c): guest-physical, above what the EPT maps, so every
   access is an EPT violation; within the boot page tables' identity map of 4 GiB.
   Registers, 8 bytes apart, one set per vCPU: */
#define EPT_MMIO_BASE 0xd0000000ull
#define EPT_MMIO_ID 0x00      /* reads EPT_MMIO_ID_VALUE; writes are ignored */
#define EPT_MMIO_SCRATCH 0x08 /* reads what was last written (0 at first) */
#define EPT_MMIO_COUNTER 0x10 /* reads how often it was read before; writes are ignored */
#define EPT_MMIO_ID_VALUE 0x4f494d48u /* "HMIO" */
/* Xen's p2m types in the NPF record: ordinary RAM, and MMIO emulated by the device
   model (p2m_mmio_dm). */
#define P2M_RAM_RW 0
#define P2M_MMIO_DM 4

/// Builds the EPT (on the calling CPU, before any vCPU uses it): [0, EPT_IDENTITY_BYTES)
/// identity-mapped with write-back 2 MiB pages, except [LazyBase, LazyBase +
/// EPT_LAZY_BYTES) (2 MiB-aligned, below EPT_IDENTITY_BYTES), whose 4 KiB entries are
/// all not present. Returns the EPT pointer, or 0 if the processor's EPT lacks what this
/// needs (IA32_VMX_EPT_VPID_CAP: 4-level walks, write-back, 2 MiB pages) or the
/// secondary "enable EPT" control.
uint64_t eptInit(uint64_t LazyBase);

/// Maps the 4 KiB page at Gpa (above EPT_IDENTITY_BYTES, alone in its GiB) 1:1 with
/// uncached memory type: the guest's local APIC page, for APIC virtualization
/// (exit_apic.c). Call after eptInit, before any vCPU uses the EPT.
void eptMapApicPage(uint64_t Gpa);

/// Maps the 4 KiB page holding guest-physical Gpa 1:1 if it lies in the lazy region and
/// returns true with the host frame number in *Frame; false for any other address.
bool eptMapLazy(uint64_t Gpa, uint64_t *Frame);

#endif
