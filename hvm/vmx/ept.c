#include "vmx/ept.h"

#include "lib/cpu.h"
#include "vmx/arch.h"

/* SDM Vol. 3C, "EPT Translation Mechanism", tables "Format of an EPT PML4 Entry" ...
   "Format of an EPT Page-Table Entry": bits 0-2 read, write, execute; in a leaf, bits
   5:3 the memory type and (PDE) bit 7 "maps a 2 MiB page". */
#define EPT_RWX 7ull
#define EPT_MEMTYPE_WB (6ull << 3)
#define EPT_LARGE (1ull << 7)
/* SDM Vol. 3D, A.10 "VPID and EPT Capabilities" (IA32_VMX_EPT_VPID_CAP). */
#define EPT_CAP_WALK4 (1ull << 6)
#define EPT_CAP_WB (1ull << 14)
#define EPT_CAP_2MB (1ull << 16)

static uint64_t Pml4[512] __attribute__((aligned(4096)));
static uint64_t Pdpt[512] __attribute__((aligned(4096)));
static uint64_t Pd[EPT_IDENTITY_BYTES >> 30][512] __attribute__((aligned(4096)));
static volatile uint64_t LazyPt[EPT_LAZY_BYTES >> 12] __attribute__((aligned(4096)));
static uint64_t LazyStart;
/* The 4 KiB page of the guest's local APIC (eptMapApicPage): the PD of the GiB at 3 GiB
   and one page table. */
static uint64_t ApicPd[512] __attribute__((aligned(4096)));
static uint64_t ApicPt[512] __attribute__((aligned(4096)));

static uint64_t pa(const volatile void *P) { return (uint64_t)(uintptr_t)P; }

uint64_t eptInit(uint64_t LazyBase) {
  uint64_t True = rdmsr(MSR_IA32_VMX_BASIC) & VMX_BASIC_TRUE_CONTROLS;
  uint64_t ProcCap = rdmsr(True ? MSR_IA32_VMX_TRUE_PROCBASED_CTLS : MSR_IA32_VMX_PROCBASED_CTLS);
  if (!((ProcCap >> 32) & VMX_CTL(Proc_ActivateSecondaryControls)) ||
      !((rdmsr(MSR_IA32_VMX_PROCBASED_CTLS2) >> 32) & VMX_CTL(Proc2_EnableEpt)))
    return 0;
  uint64_t Cap = rdmsr(MSR_IA32_VMX_EPT_VPID_CAP);
  if ((Cap & (EPT_CAP_WALK4 | EPT_CAP_WB | EPT_CAP_2MB)) !=
      (EPT_CAP_WALK4 | EPT_CAP_WB | EPT_CAP_2MB))
    return 0;
  LazyStart = LazyBase;
  Pml4[0] = pa(Pdpt) | EPT_RWX;
  for (uint64_t G = 0; G < (EPT_IDENTITY_BYTES >> 30); ++G) {
    Pdpt[G] = pa(Pd[G]) | EPT_RWX;
    for (uint64_t I = 0; I < 512; ++I) {
      uint64_t Base = (G << 30) | (I << 21);
      Pd[G][I] = Base == LazyBase ? pa(LazyPt) | EPT_RWX
                                  : Base | EPT_RWX | EPT_MEMTYPE_WB | EPT_LARGE;
    }
  }
  /* SDM Vol. 3C, "Extended-Page-Table Pointer (EPTP)": bits 2:0 the memory type of the
     paging structures (6 = WB), bits 5:3 the walk length minus 1. */
  return pa(Pml4) | 6 | (3 << 3);
}

void eptMapApicPage(uint64_t Gpa) {
  uint64_t Gib = Gpa >> 30, Page = Gpa & ~0xfffull;
  if (Gib < (EPT_IDENTITY_BYTES >> 30) || Gib >= 512 || Pdpt[Gib])
    return;
  /* Memory type 0 (UC), as the page of a device; the processor's APIC virtualization
     replaces the accesses anyway (SDM Vol. 3C, "Virtualizing Memory-Mapped APIC
     Accesses": the physical address after EPT is compared with the APIC-access
     address). */
  ApicPt[(Page >> 12) & 511] = Page | EPT_RWX;
  ApicPd[(Page >> 21) & 511] = pa(ApicPt) | EPT_RWX;
  Pdpt[Gib] = pa(ApicPd) | EPT_RWX;
}

bool eptMapLazy(uint64_t Gpa, uint64_t *Frame) {
  if (Gpa < LazyStart || Gpa >= LazyStart + EPT_LAZY_BYTES || !LazyStart)
    return false;
  uint64_t Page = Gpa & ~0xfffull;
  /* One 8-byte store: vCPUs map disjoint pages of the region concurrently. No INVEPT:
     the EPT violation itself invalidated what the processor may have cached for this
     address (SDM Vol. 3C, "Operations that Invalidate Cached Mappings"). */
  LazyPt[(Page - LazyStart) >> 12] = Page | EPT_RWX | EPT_MEMTYPE_WB;
  *Frame = Page >> 12;
  return true;
}
