/* Entering VMX operation and building the VMCS (SDM Vol. 3C, "Introduction to
 * Virtual Machine Extensions" > "Enabling and Entering VMX Operation", and "VM
 * Entries" > "Checks on VMX Controls and Host-State Area" / "Checking and Loading Guest
 * State": every value written here is chosen to pass those checks).
 */
#include "lib/cpu.h"
#include "lib/printf.h"
#include "lib/string.h"
#include "vmx/arch.h"
#include "vmx/exit.h"
#include "vmx/trace.h"
#include "vmx/vmx.h"

bool VmxVerbose;

/* Counts failed VMWRITEs during setup; each one is printed. */
static unsigned SetupErrors;

static void vmw(enum VmcsField Field, uint64_t Value) {
  enum VmxStatus S = vmwriteChecked(Field, Value);
  if (S != VmSucceed) {
    uint64_t Err = 0;
    if (S == VmFailValid)
      vmreadChecked(Vmcs_VmInstructionError, &Err);
    printf("vmx: VMWRITE 0x%04x = 0x%lx failed: status %d error %lu\n", (unsigned)Field,
           Value, (int)S, Err);
    ++SetupErrors;
  }
}

struct __attribute__((packed)) TableRegister {
  uint16_t Limit;
  uint64_t Base;
};

static struct TableRegister readGdtr(void) {
  struct TableRegister R;
  __asm__ volatile("sgdt %0" : "=m"(R));
  return R;
}

static struct TableRegister readIdtr(void) {
  struct TableRegister R;
  __asm__ volatile("sidt %0" : "=m"(R));
  return R;
}

static uint16_t readTr(void) {
  uint16_t Sel;
  __asm__ volatile("str %0" : "=r"(Sel));
  return Sel;
}

static void writeCr0(uint64_t V) { __asm__ volatile("mov %0, %%cr0" : : "r"(V) : "memory"); }
static void writeCr4(uint64_t V) { __asm__ volatile("mov %0, %%cr4" : : "r"(V) : "memory"); }

/* The MSR bitmaps of the system exits (SDM Vol. 3C, "MSR-Bitmap Address"): four 1 KiB
   bitmaps (read low, read high, write low, write high MSRs), a set bit makes the access
   exit. Every MSR exits except IA32_PAT, whose reads and writes the guest does itself
   (the PAT load/save controls switch it). The same for every vCPU, so one page, filled
   by whichever CPU sets up first (the same bytes each time). */
static uint8_t MsrBitmaps[4096] __attribute__((aligned(4096)));

static void msrBitmapsInit(void) {
  memset(MsrBitmaps, 0xff, sizeof(MsrBitmaps));
  MsrBitmaps[MSR_IA32_PAT / 8] &= (uint8_t)~(1u << (MSR_IA32_PAT % 8));
  MsrBitmaps[2048 + MSR_IA32_PAT / 8] &= (uint8_t)~(1u << (MSR_IA32_PAT % 8));
}

/* SDM Vol. 2A, CPUID: CPUID.1:ECX.XSAVE[bit 26]; Vol. 3A, "Control Registers". */
#define CPUID1_ECX_XSAVE (1u << 26)
#define CR4_OSXSAVE (1ull << 18)

/* The base of the 64-bit system descriptor Sel in the GDT at GdtBase (SDM Vol. 3A,
   "TSS Descriptor in 64-bit mode"). */
static uint64_t systemDescriptorBase(uint64_t GdtBase, uint16_t Sel) {
  const uint64_t *D = (const uint64_t *)(uintptr_t)(GdtBase + (Sel & ~7u));
  return ((D[0] >> 16) & 0xffffff) | (((D[0] >> 56) & 0xff) << 24) | (D[1] << 32);
}

bool vmxEnable(struct PerCpu *Cpu) {
  /* SDM Vol. 3C, "Discovering Support for VMX": CPUID.1:ECX.VMX[bit 5]. */
  if (!(cpuid(1, 0).Ecx & CPUID1_ECX_VMX)) {
    printf("vmx: no VMX (CPUID.1:ECX[5] = 0)\n");
    return false;
  }

  /* SDM Vol. 3C, "Enabling and Entering VMX Operation": VMXON outside SMX needs
     IA32_FEATURE_CONTROL bits 0 (lock) and 2 set. Firmware normally locks it; if it
     is still unlocked, enable and lock it ourselves. */
  uint64_t Fc = rdmsr(MSR_IA32_FEATURE_CONTROL);
  if (!(Fc & FEATURE_CONTROL_LOCK)) {
    Fc |= FEATURE_CONTROL_LOCK | FEATURE_CONTROL_VMXON_OUTSIDE_SMX;
    wrmsr(MSR_IA32_FEATURE_CONTROL, Fc);
  } else if (!(Fc & FEATURE_CONTROL_VMXON_OUTSIDE_SMX)) {
    printf("vmx: VMX disabled by firmware (IA32_FEATURE_CONTROL locked, bit 2 = 0)\n");
    return false;
  }

  /* SDM Vol. 3D, A.1 "Basic VMX Information". */
  Cpu->VmxBasic = rdmsr(MSR_IA32_VMX_BASIC);
  if (VMX_BASIC_REGION_SIZE(Cpu->VmxBasic) > sizeof(struct VmxRegion)) {
    printf("vmx: VMCS region of %lu bytes does not fit in 4 KiB\n",
           VMX_BASIC_REGION_SIZE(Cpu->VmxBasic));
    return false;
  }
  /* Our regions are ordinary write-back memory (the identity map has no PAT or MTRR
     tricks); SDM A.1 says software should map them with the reported type. */
  if (VMX_BASIC_MEMORY_TYPE(Cpu->VmxBasic) != VMX_MEMORY_TYPE_WB) {
    printf("vmx: VMCS memory type %lu is not write-back\n",
           VMX_BASIC_MEMORY_TYPE(Cpu->VmxBasic));
    return false;
  }

  /* SDM Vol. 3C, "Restrictions on VMX Operation" and Vol. 3D, A.7/A.8 "VMX-Fixed Bits
     in CR0/CR4": bits set in FIXED0 must be 1, bits clear in FIXED1 must be 0, in VMX
     operation and at VMXON. */
  Cpu->Cr0Fixed0 = rdmsr(MSR_IA32_VMX_CR0_FIXED0);
  Cpu->Cr0Fixed1 = rdmsr(MSR_IA32_VMX_CR0_FIXED1);
  Cpu->Cr4Fixed0 = rdmsr(MSR_IA32_VMX_CR4_FIXED0);
  Cpu->Cr4Fixed1 = rdmsr(MSR_IA32_VMX_CR4_FIXED1);
  if (VmxVerbose)
    printf("vmx: IA32_VMX_BASIC=0x%lx CR0 fixed 0x%lx/0x%lx CR4 fixed 0x%lx/0x%lx\n",
           Cpu->VmxBasic, Cpu->Cr0Fixed0, Cpu->Cr0Fixed1, Cpu->Cr4Fixed0, Cpu->Cr4Fixed1);
  writeCr0((readCr0() | Cpu->Cr0Fixed0) & Cpu->Cr0Fixed1);
  writeCr4((readCr4() | CR4_VMXE | Cpu->Cr4Fixed0) & Cpu->Cr4Fixed1);

  /* SDM Vol. 3C, "VMXON Region": the revision identifier in the first 4 bytes (bit 31
     clear), the rest zero; VMXON takes its physical address (identity-mapped here). */
  memset(&Cpu->VmxonRegion, 0, sizeof(Cpu->VmxonRegion));
  Cpu->VmxonRegion.RevisionId = (uint32_t)(Cpu->VmxBasic & VMX_BASIC_REVISION_MASK);
  enum VmxStatus S = vmxon((uint64_t)(uintptr_t)&Cpu->VmxonRegion);
  if (S != VmSucceed) {
    /* No current VMCS yet: VMXON can only report VMfailInvalid. */
    vmxPrintVmFail("VMXON", -(int)S);
    return false;
  }
  return true;
}

/* SDM Vol. 3D, A.3-A.5 "VM-Execution/VM-Exit/VM-Entry Controls" and A.2 "Reserved
   Controls and Default Settings": bits 31:0 of the capability MSR are the allowed
   0-settings (a 1 there means the control must be 1), bits 63:32 the allowed
   1-settings. Controls we want are ANDed with allowed-1 and ORed with allowed-0. */
static bool adjustControls(const char *Name, uint32_t Msr, uint32_t Want, uint32_t *Out) {
  uint64_t Cap = rdmsr(Msr);
  uint32_t Allowed0 = (uint32_t)Cap, Allowed1 = (uint32_t)(Cap >> 32);
  uint32_t V = (Want & Allowed1) | Allowed0;
  if (VmxVerbose)
    printf("vmx: %s MSR 0x%x = 0x%lx -> controls 0x%x\n", Name, Msr, Cap, V);
  if ((V & Want) != Want) {
    printf("vmx: %s controls 0x%x not supported (allowed-1 0x%x)\n", Name, Want & ~V,
           Allowed1);
    return false;
  }
  *Out = V;
  return true;
}

/* The guest's segment registers, each with its four VMCS fields. */
struct SegmentFields {
  enum VmcsField Selector, Base, Limit, AccessRights;
};
static const struct SegmentFields GuestEs = {Vmcs_GuestEsSelector, Vmcs_GuestEsBase, Vmcs_GuestEsLimit, Vmcs_GuestEsAccessRights};
static const struct SegmentFields GuestCs = {Vmcs_GuestCsSelector, Vmcs_GuestCsBase, Vmcs_GuestCsLimit, Vmcs_GuestCsAccessRights};
static const struct SegmentFields GuestSs = {Vmcs_GuestSsSelector, Vmcs_GuestSsBase, Vmcs_GuestSsLimit, Vmcs_GuestSsAccessRights};
static const struct SegmentFields GuestDs = {Vmcs_GuestDsSelector, Vmcs_GuestDsBase, Vmcs_GuestDsLimit, Vmcs_GuestDsAccessRights};
static const struct SegmentFields GuestFs = {Vmcs_GuestFsSelector, Vmcs_GuestFsBase, Vmcs_GuestFsLimit, Vmcs_GuestFsAccessRights};
static const struct SegmentFields GuestGs = {Vmcs_GuestGsSelector, Vmcs_GuestGsBase, Vmcs_GuestGsLimit, Vmcs_GuestGsAccessRights};
static const struct SegmentFields GuestLdtr = {Vmcs_GuestLdtrSelector, Vmcs_GuestLdtrBase, Vmcs_GuestLdtrLimit, Vmcs_GuestLdtrAccessRights};
static const struct SegmentFields GuestTr = {Vmcs_GuestTrSelector, Vmcs_GuestTrBase, Vmcs_GuestTrLimit, Vmcs_GuestTrAccessRights};

static void guestSegment(const struct SegmentFields *F, uint16_t Sel, uint64_t Base,
                         uint32_t Limit, uint32_t Ar) {
  vmw(F->Selector, Sel);
  vmw(F->Base, Base);
  vmw(F->Limit, Limit);
  vmw(F->AccessRights, Ar);
}

static bool setupControls(struct PerCpu *Cpu, const struct GuestSetup *G) {
  /* SDM Vol. 3D, A.2: when IA32_VMX_BASIC[55] is 1, the TRUE_ MSRs say which default1
     controls may be 0 (we want CR3-store exiting off). */
  bool True = (Cpu->VmxBasic & VMX_BASIC_TRUE_CONTROLS) != 0;
  uint32_t Pin, Proc, Exit, Entry;
  /* Exits we handle: HLT; every I/O instruction (no bitmaps); MOV to CR3 (with a
     CR3-target count of 0 every MOV to CR3 exits: SDM Vol. 3C, "Instructions That
     Cause VM Exits Conditionally" > MOV to CR3); MOV to/from CR8, since "use TPR
     shadow" stays 0 so every peer takes the same exits; RDMSR/WRMSR always exit
     without MSR bitmaps; CPUID and VMCALL exit unconditionally. */
  uint32_t WantProc = VMX_CTL(Proc_HltExiting) | VMX_CTL(Proc_UnconditionalIoExiting) |
                      VMX_CTL(Proc_Cr3LoadExiting) | VMX_CTL(Proc_Cr8LoadExiting) |
                      VMX_CTL(Proc_Cr8StoreExiting);
  uint32_t WantExit = VMX_CTL(Exit_HostAddressSpaceSize);
  uint32_t WantEntry = G->RealMode ? 0 : VMX_CTL(Entry_Ia32eModeGuest);
  /* The system exits (GuestSetup.SystemExits): INVLPG, MOV DR and PAUSE exiting (SDM
     Vol. 3C, "Primary Processor-Based VM-Execution Controls") and TSC offsetting, which
     every processor with VMX has; MSR bitmaps and the PAT controls when offered (SDM
     Vol. 3D, A.3.2, A.4, A.5: allowed-1 bits 28, 18/19 and 14). */
  uint64_t ExitCap = rdmsr(True ? MSR_IA32_VMX_TRUE_EXIT_CTLS : MSR_IA32_VMX_EXIT_CTLS);
  uint64_t EntryCap = rdmsr(True ? MSR_IA32_VMX_TRUE_ENTRY_CTLS : MSR_IA32_VMX_ENTRY_CTLS);
  uint64_t ProcCap = rdmsr(True ? MSR_IA32_VMX_TRUE_PROCBASED_CTLS : MSR_IA32_VMX_PROCBASED_CTLS);
  Cpu->SystemExits = G->SystemExits;
  Cpu->PatInVmcs = 0;
  Cpu->RdtscExiting = 0;
  Cpu->TscOffset = 0;
  if (G->SystemExits) {
    WantProc |= VMX_CTL(Proc_InvlpgExiting) | VMX_CTL(Proc_MovDrExiting) |
                VMX_CTL(Proc_PauseExiting) | VMX_CTL(Proc_UseTscOffsetting);
    uint32_t PatExit = VMX_CTL(Exit_SaveIa32Pat) | VMX_CTL(Exit_LoadIa32PatOnExit);
    uint32_t PatEntry = VMX_CTL(Entry_LoadIa32PatOnEntry);
    if (((ExitCap >> 32) & PatExit) == PatExit && ((EntryCap >> 32) & PatEntry) == PatEntry) {
      WantExit |= PatExit;
      WantEntry |= PatEntry;
      Cpu->PatInVmcs = 1;
      if ((ProcCap >> 32) & VMX_CTL(Proc_UseMsrBitmaps)) {
        WantProc |= VMX_CTL(Proc_UseMsrBitmaps);
        msrBitmapsInit();
        vmw(Vmcs_MsrBitmapsAddress, (uint64_t)(uintptr_t)MsrBitmaps);
      }
    }
    /* The host's IA32_PAT, which the guest starts with (in the VMCS or emulated). */
    Cpu->GuestPat = rdmsr(MSR_IA32_PAT);
    if (Cpu->PatInVmcs) {
      vmw(Vmcs_GuestIa32Pat, Cpu->GuestPat);
      vmw(Vmcs_HostIa32Pat, Cpu->GuestPat);
    }
    /* XSETBV is emulated by executing it here, in VMX root operation (the processor
       does not switch XCR0 at VM entry or exit), which needs CR4.OSXSAVE (SDM Vol. 2C,
       XSETBV: #UD otherwise). The guest's own CR4.OSXSAVE is separate (owned; exit_cr.c). */
    if (cpuid(1, 0).Ecx & CPUID1_ECX_XSAVE)
      writeCr4(readCr4() | CR4_OSXSAVE);
    Cpu->GuestXcr0 = 1; /* x87 only: XCR0 at reset (SDM Vol. 1, "XSAVE-Supported Features") */
    Cpu->GuestDr6 = 0xffff0ff0;
    Cpu->GuestDr7 = 0x400;
  }
  /* The VMX-preemption timer, for time slices and to wake a vCPU blocked in HLT, when
     the processor offers it (SDM Vol. 3C, "VMX-Preemption Timer"; Vol. 3D, A.3.1:
     allowed-1 bit 6 of the pin-based capability MSR). */
  /* With the system exits: external-interrupt exiting with "acknowledge interrupt on
     exit", NMI exiting and virtual NMIs (for the NMI window), which every processor with
     VMX offers (SDM Vol. 3D, A.3.1, A.4). */
  uint32_t WantPin = G->SystemExits ? VMX_CTL(Pin_ExternalInterruptExiting) |
                                          VMX_CTL(Pin_NmiExiting) | VMX_CTL(Pin_VirtualNmis)
                                    : 0;
  /* APIC virtualization (GuestSetup.Apicv): CR8 goes through the TPR shadow instead of
     exiting; posted interrupts need external-interrupt exiting and "acknowledge
     interrupt on exit" (SDM Vol. 3C, "Checks on VM-Execution Control Fields"), which the
     system exits give. */
  if (G->Apicv) {
    if (!G->SystemExits) {
      printf("vmx: APIC virtualization needs the system exits\n");
      return false;
    }
    WantProc = (WantProc & ~(VMX_CTL(Proc_Cr8LoadExiting) | VMX_CTL(Proc_Cr8StoreExiting))) |
               VMX_CTL(Proc_UseTprShadow) | VMX_CTL(Proc_ActivateSecondaryControls);
    WantPin |= VMX_CTL(Pin_ProcessPostedInterrupts);
  }
  if (G->SystemExits)
    WantExit |= VMX_CTL(Exit_AcknowledgeInterruptOnExit);
  uint64_t PinCap = rdmsr(True ? MSR_IA32_VMX_TRUE_PINBASED_CTLS : MSR_IA32_VMX_PINBASED_CTLS);
  Cpu->PreemptionTimer = 0;
  if ((G->SliceCycles || G->Timers) &&
      ((PinCap >> 32) & VMX_CTL(Pin_ActivateVmxPreemptionTimer))) {
    WantPin |= VMX_CTL(Pin_ActivateVmxPreemptionTimer);
    Cpu->PreemptionTimer = 1;
    /* SDM Vol. 3D, A.6 "Miscellaneous Data": IA32_VMX_MISC[4:0] = the rate: the timer
       counts down by 1 every time bit X of the TSC changes, X = that value. */
    Cpu->PreemptionRate = (uint8_t)(rdmsr(MSR_IA32_VMX_MISC) & 0x1f);
    uint64_t Ticks = G->SliceCycles >> Cpu->PreemptionRate;
    Cpu->SliceTicks = !G->SliceCycles ? ~0u : Ticks == 0 ? 1 : Ticks > ~0u ? ~0u : (uint32_t)Ticks;
  }
  if (!adjustControls("pin-based",
                      True ? MSR_IA32_VMX_TRUE_PINBASED_CTLS : MSR_IA32_VMX_PINBASED_CTLS,
                      WantPin, &Pin) ||
      !adjustControls("processor-based",
                      True ? MSR_IA32_VMX_TRUE_PROCBASED_CTLS : MSR_IA32_VMX_PROCBASED_CTLS,
                      WantProc, &Proc) ||
      /* A 64-bit host needs "host address-space size" (SDM Vol. 3C, "Checks on
         VM-Exit Control Fields" and "Checks Related to Address-Space Size"). */
      !adjustControls("VM-exit", True ? MSR_IA32_VMX_TRUE_EXIT_CTLS : MSR_IA32_VMX_EXIT_CTLS,
                      WantExit, &Exit) ||
      !adjustControls("VM-entry",
                      True ? MSR_IA32_VMX_TRUE_ENTRY_CTLS : MSR_IA32_VMX_ENTRY_CTLS,
                      WantEntry, &Entry))
    return false;
  /* Tag the guest's translations with a VPID when the processor can, as production
     hypervisors do, so VM entries and exits need not flush the TLB (SDM Vol. 3C,
     "Virtual-Processor Identifiers (VPIDs)"): one per vCPU, CPU number + 1 (VPID 0 is
     the host's). EPT when the image asks for it and the processor offers it (SDM
     Vol. 3C, "The Extended Page Table Mechanism (EPT)"). "Unrestricted guest" only for
     a guest that starts in real mode (GuestSetup.RealMode). */
  bool Unrestricted = false;
  Cpu->InvvpidTypes = 0;
  if ((ProcCap >> 32) & VMX_CTL(Proc_ActivateSecondaryControls)) {
    uint64_t Proc2Cap = rdmsr(MSR_IA32_VMX_PROCBASED_CTLS2);
    uint32_t Proc2 = 0;
    if ((Proc2Cap >> 32) & VMX_CTL(Proc2_EnableVpid)) {
      Proc2 |= VMX_CTL(Proc2_EnableVpid);
      vmw(Vmcs_VirtualProcessorIdentifier, Cpu->CpuNumber + 1);
      /* SDM Vol. 3D, A.10: IA32_VMX_EPT_VPID_CAP bit 32 INVVPID, bits 40-43 its types. */
      uint64_t EptVpidCap = rdmsr(MSR_IA32_VMX_EPT_VPID_CAP);
      if (EptVpidCap & (1ull << 32))
        Cpu->InvvpidTypes = (uint8_t)((EptVpidCap >> 40) & 0xf);
    }
    /* WBINVD exiting (secondary bit 6) with the system exits, when offered. */
    if (G->SystemExits && ((Proc2Cap >> 32) & VMX_CTL(Proc2_WbinvdExiting)))
      Proc2 |= VMX_CTL(Proc2_WbinvdExiting);
    if (G->Eptp && ((Proc2Cap >> 32) & VMX_CTL(Proc2_EnableEpt))) {
      Proc2 |= VMX_CTL(Proc2_EnableEpt);
      vmw(Vmcs_EptPointer, G->Eptp);
    }
    /* SDM Vol. 3C, "Checks on VM-Execution Control Fields": "unrestricted guest" needs
       "enable EPT". */
    if (G->RealMode && (Proc2 & VMX_CTL(Proc2_EnableEpt)) &&
        ((Proc2Cap >> 32) & VMX_CTL(Proc2_UnrestrictedGuest))) {
      Proc2 |= VMX_CTL(Proc2_UnrestrictedGuest);
      Unrestricted = true;
    }
    /* APIC virtualization: the four secondary controls (SDM Vol. 3D, A.3.3: allowed-1
       bits 0, 8 and 9 of IA32_VMX_PROCBASED_CTLS2). */
    const uint32_t ApicvProc2 = VMX_CTL(Proc2_VirtualizeApicAccesses) |
                                VMX_CTL(Proc2_ApicRegisterVirtualization) |
                                VMX_CTL(Proc2_VirtualInterruptDelivery);
    if (G->Apicv) {
      if (((Proc2Cap >> 32) & ApicvProc2) != ApicvProc2) {
        printf("vmx: the processor does not offer APIC-access, APIC-register or "
               "virtual-interrupt virtualization\n");
        return false;
      }
      Proc2 |= ApicvProc2;
    }
    if (Proc2) {
      Proc |= VMX_CTL(Proc_ActivateSecondaryControls);
      vmw(Vmcs_SecondaryProcessorBasedVmExecutionControls, (uint32_t)Proc2Cap | Proc2);
    }
  }
  if (G->Apicv && !(Proc & VMX_CTL(Proc_ActivateSecondaryControls))) {
    printf("vmx: the processor has no secondary controls for APIC virtualization\n");
    return false;
  }
  if (G->Apicv && !vmxApicvSetup(Cpu))
    return false;
  if (G->RealMode && !Unrestricted) {
    printf("vmx: a real-mode guest needs EPT and \"unrestricted guest\"\n");
    return false;
  }
  if (Cpu->PreemptionTimer)
    vmw(Vmcs_VmxPreemptionTimerValue, Cpu->SliceTicks);
  vmw(Vmcs_PinBasedVmExecutionControls, Pin);
  vmw(Vmcs_PrimaryProcessorBasedVmExecutionControls, Proc);
  vmw(Vmcs_PrimaryVmExitControls, Exit);
  vmw(Vmcs_VmEntryControls, Entry);
  vmw(Vmcs_ExceptionBitmap, G->ExceptionBitmap);
  vmw(Vmcs_PageFaultErrorCodeMask, 0);
  vmw(Vmcs_PageFaultErrorCodeMatch, 0);
  vmw(Vmcs_Cr3TargetCount, 0);
  vmw(Vmcs_VmExitMsrStoreCount, 0);
  vmw(Vmcs_VmExitMsrLoadCount, 0);
  vmw(Vmcs_VmEntryMsrLoadCount, 0);
  vmw(Vmcs_VmEntryInterruptionInformation, 0);
  vmw(Vmcs_VmEntryExceptionErrorCode, 0);
  vmw(Vmcs_VmEntryInstructionLength, 0);
  if (G->SystemExits) {
    /* SDM Vol. 3C, "Time-Stamp Counter Offset and Multiplier": the guest reads TSC +
       offset; the offset makes its TSC 0 here, at its setup (Xen gives a new domain's
       TSC the same start). */
    Cpu->TscOffset = 0 - rdtsc();
  }
  vmw(Vmcs_TscOffset, Cpu->TscOffset);
  return true;
}

static void setupHostState(struct PerCpu *Cpu) {
  /* SDM Vol. 3C, "Checks on Host Control Registers and MSRs" and "Checks on Host
     Segment and Descriptor-Table Registers": the current CR0/CR3/CR4 (already
     adjusted to the fixed bits, VMXE set), selectors with RPL = TI = 0, TR != 0,
     canonical bases. */
  struct TableRegister Gdtr = readGdtr(), Idtr = readIdtr();
  uint16_t Tr = readTr();
  vmw(Vmcs_HostCr0, readCr0());
  vmw(Vmcs_HostCr3, readCr3());
  vmw(Vmcs_HostCr4, readCr4());
  vmw(Vmcs_HostCsSelector, SEL_CODE64);
  vmw(Vmcs_HostSsSelector, SEL_DATA);
  vmw(Vmcs_HostDsSelector, SEL_DATA);
  vmw(Vmcs_HostEsSelector, SEL_DATA);
  vmw(Vmcs_HostFsSelector, SEL_DATA);
  vmw(Vmcs_HostGsSelector, SEL_DATA);
  vmw(Vmcs_HostTrSelector, Tr);
  vmw(Vmcs_HostFsBase, rdmsr(MSR_IA32_FS_BASE));
  /* thisCpu() reads the per-CPU area through GS. */
  vmw(Vmcs_HostGsBase, (uint64_t)(uintptr_t)Cpu);
  vmw(Vmcs_HostTrBase, systemDescriptorBase(Gdtr.Base, Tr));
  vmw(Vmcs_HostGdtrBase, Gdtr.Base);
  vmw(Vmcs_HostIdtrBase, Idtr.Base);
  vmw(Vmcs_HostIa32SysenterCs, rdmsr(MSR_IA32_SYSENTER_CS));
  vmw(Vmcs_HostIa32SysenterEsp, rdmsr(MSR_IA32_SYSENTER_ESP));
  vmw(Vmcs_HostIa32SysenterEip, rdmsr(MSR_IA32_SYSENTER_EIP));
  /* The exit stub pushes the guest's registers into Regs, just below this address. */
  vmw(Vmcs_HostRsp, (uint64_t)(uintptr_t)(&Cpu->Regs + 1));
  extern char vmxExitEntry[];
  vmw(Vmcs_HostRip, (uint64_t)(uintptr_t)vmxExitEntry);
}

/* An unrestricted guest in real mode (SDM Vol. 3C, "Unrestricted Guests" and "Checks on
   Guest Control Registers, Debug Registers, and MSRs" / "Checks on Guest Segment
   Registers" for CR0.PE = 0): CR0.PE and PG may be 0, the other fixed bits still hold;
   CR4 keeps only what VMX fixes; 16-bit segments with limit 0xffff (CS: execute/read,
   accessed; the others read/write, accessed); TR a busy 32-bit TSS, as the checks for a
   guest outside IA-32e mode require of a usable TR; the real-mode IDT at 0. Overrides
   what setupGuestState wrote for a 64-bit guest. */
static void setupRealModeState(struct PerCpu *Cpu, const struct GuestSetup *G) {
  uint64_t Cr0 = ((CR0_NE | (1ull << 4) /* ET */ | Cpu->Cr0Fixed0) & ~(CR0_PE | CR0_PG)) &
                 Cpu->Cr0Fixed1;
  uint64_t Cr4 = (Cpu->Cr4Fixed0 | CR4_VMXE) & Cpu->Cr4Fixed1;
  vmw(Vmcs_GuestCr0, Cr0);
  vmw(Vmcs_GuestCr4, Cr4);
  Cpu->Cr0Shadow = Cr0;
  vmw(Vmcs_Cr0ReadShadow, Cr0);
  Cpu->Cr4Shadow = Cr4 & ~CR4_VMXE;
  vmw(Vmcs_Cr4ReadShadow, Cpu->Cr4Shadow);
  guestSegment(&GuestCs, 0, G->RealCsBase, 0xffff, 0x9b);
  guestSegment(&GuestSs, 0, 0, 0xffff, 0x93);
  guestSegment(&GuestDs, 0, 0, 0xffff, 0x93);
  guestSegment(&GuestEs, 0, 0, 0xffff, 0x93);
  guestSegment(&GuestFs, 0, 0, 0xffff, 0x93);
  guestSegment(&GuestGs, 0, 0, 0xffff, 0x93);
  guestSegment(&GuestTr, 0, 0, 0xffff, 0x8b);
  vmw(Vmcs_GuestGdtrBase, 0);
  vmw(Vmcs_GuestGdtrLimit, 0xffff);
  vmw(Vmcs_GuestIdtrBase, 0);
  vmw(Vmcs_GuestIdtrLimit, 0x3ff);
  vmw(Vmcs_GuestRip, G->Rip - G->RealCsBase);
  vmw(Vmcs_GuestRsp, 0);
}

static void setupGuestState(struct PerCpu *Cpu, const struct GuestSetup *G) {
  /* SDM Vol. 3C, "Checking and Loading Guest State": a 64-bit guest ("IA-32e mode
     guest" = 1) needs CR0.PG = CR0.PE = 1 (no unrestricted guest), CR4.PAE = 1, the
     fixed bits (so CR4.VMXE = 1 in the real CR4), CS.L = 1 with CS.D = 0, a usable
     64-bit busy TSS in TR, LDTR unusable, canonical bases. */
  uint64_t Cr0 = readCr0(), Cr4 = readCr4();
  vmw(Vmcs_GuestCr0, Cr0);
  vmw(Vmcs_GuestCr3, readCr3());
  vmw(Vmcs_GuestCr4, Cr4);
  /* SDM Vol. 3C, "Guest/Host Masks and Read Shadows for CR0 and CR4": bits set in a
     mask are owned by the hypervisor; the guest reads them from the shadow, and a MOV
     to CR0/CR4 that would change one of them (relative to the shadow) exits. Owned in
     CR0: PE, NE and PG (the guest must keep them), CD and NW (the guest may set them,
     it sees its value, the processor keeps caching on) and every bit fixed by VMX. */
  Cpu->Cr0Mask = (CR0_PE | CR0_NE | CR0_PG | CR0_CD | CR0_NW | Cpu->Cr0Fixed0 |
                  ~Cpu->Cr0Fixed1) & 0xffffffffull;
  Cpu->Cr0Shadow = Cr0;
  vmw(Vmcs_Cr0GuestHostMask, Cpu->Cr0Mask);
  vmw(Vmcs_Cr0ReadShadow, Cpu->Cr0Shadow);
  /* CR4.VMXE is ours: the guest reads 0 (it has no VMX: CPUID says so too). With the
     system exits CR4.OSXSAVE is ours too: the guest starts with it clear, in the real
     CR4 as in the shadow (the host's is set for XSETBV), and setting it exits. */
  Cpu->Cr4Mask = CR4_VMXE | (G->SystemExits ? CR4_OSXSAVE : 0);
  if (G->SystemExits) {
    Cr4 &= ~CR4_OSXSAVE;
    vmw(Vmcs_GuestCr4, Cr4);
  }
  Cpu->Cr4Shadow = Cr4 & ~CR4_VMXE;
  vmw(Vmcs_Cr4GuestHostMask, Cpu->Cr4Mask);
  vmw(Vmcs_Cr4ReadShadow, Cpu->Cr4Shadow);
  vmw(Vmcs_GuestDr7, 0x400);
  vmw(Vmcs_GuestRsp, G->Rsp);
  vmw(Vmcs_GuestRip, G->Rip);
  vmw(Vmcs_GuestRflags, 0x2); /* IF = 0: the guest takes no interrupts */

  uint64_t Tss = (uint64_t)(uintptr_t)&G->Tables->Tss;
  guestSegment(&GuestCs, SEL_CODE64, 0, 0xffffffff, AR_CODE64);
  guestSegment(&GuestSs, SEL_DATA, 0, 0xffffffff, AR_DATA);
  guestSegment(&GuestDs, SEL_DATA, 0, 0xffffffff, AR_DATA);
  guestSegment(&GuestEs, SEL_DATA, 0, 0xffffffff, AR_DATA);
  guestSegment(&GuestFs, SEL_DATA, 0, 0xffffffff, AR_DATA);
  guestSegment(&GuestGs, SEL_DATA, 0, 0xffffffff, AR_DATA);
  guestSegment(&GuestLdtr, 0, 0, 0, AR_UNUSABLE);
  guestSegment(&GuestTr, SEL_TSS, Tss, TSS64_LIMIT, AR_TSS_BUSY);
  vmw(Vmcs_GuestGdtrBase, (uint64_t)(uintptr_t)G->Tables->Gdt);
  vmw(Vmcs_GuestGdtrLimit, sizeof(G->Tables->Gdt) - 1);
  vmw(Vmcs_GuestIdtrBase, (uint64_t)(uintptr_t)G->Tables->Idt);
  vmw(Vmcs_GuestIdtrLimit, sizeof(G->Tables->Idt) - 1);
  /* The guest's GDT describes the TSS as busy, as LTR would have left it, so an
     IRET or a task lookup in the guest sees consistent tables. */
  G->Tables->Gdt[SEL_TSS / 8] |= 2ull << 40;

  vmw(Vmcs_GuestIa32Debugctl, 0);
  vmw(Vmcs_GuestIa32SysenterCs, 0);
  vmw(Vmcs_GuestIa32SysenterEsp, 0);
  vmw(Vmcs_GuestIa32SysenterEip, 0);
  vmw(Vmcs_GuestActivityState, 0); /* active */
  vmw(Vmcs_GuestInterruptibilityState, 0);
  vmw(Vmcs_GuestPendingDebugExceptions, 0);
  /* SDM Vol. 3C, "Checks on Guest Non-Register State": without VMCS shadowing the
     link pointer must be all ones. */
  vmw(Vmcs_VmcsLinkPointer, ~0ull);

  if (G->RealMode)
    setupRealModeState(Cpu, G);

  memset(&Cpu->Regs, 0, sizeof(Cpu->Regs));
  Cpu->Regs.Rdi = G->Rdi;
  Cpu->Regs.Rsi = G->Rsi;
}

bool vmxSetupVmcs(struct PerCpu *Cpu, const struct GuestSetup *Guest) {
  SetupErrors = 0;
  /* SDM Vol. 3C, "VMCS Data Format": revision identifier first, then VMCLEAR to
     initialise the region and set its launch state to clear, then make it current. */
  memset(&Cpu->Vmcs, 0, sizeof(Cpu->Vmcs));
  Cpu->Vmcs.RevisionId = (uint32_t)(Cpu->VmxBasic & VMX_BASIC_REVISION_MASK);
  uint64_t Pa = (uint64_t)(uintptr_t)&Cpu->Vmcs;
  enum VmxStatus S = vmclear(Pa);
  if (S != VmSucceed) {
    vmxPrintVmFail("VMCLEAR", -(int)S);
    return false;
  }
  S = vmptrld(Pa);
  if (S != VmSucceed) {
    vmxPrintVmFail("VMPTRLD", -(int)S);
    return false;
  }
  if (!setupControls(Cpu, Guest))
    return false;
  setupHostState(Cpu);
  setupGuestState(Cpu, Guest);
  Cpu->ExitCount = 0;
  Cpu->GuestTscAux = 0;
  Cpu->GuestTpr = 0;
  Cpu->ReportedCount = 0;
  Cpu->TimerDeadline = 0;
  Cpu->Blocked = 0;
  Cpu->SliceEnds = Cpu->TimerWakeups = Cpu->LazyMaps = Cpu->Reflected = 0;
  Cpu->MmioAccesses = Cpu->MmioScratch = Cpu->MmioCounter = 0;
  Cpu->UartLineLen = 0;
  Cpu->Note[0] = 0;
  Cpu->RipBase = Guest->RipBase;
  Cpu->VirqsLeft = 0;
  Cpu->VirqPending = Cpu->NmiPending = Cpu->IntrWindowOpened = 0;
  Cpu->VirqsInjected = Cpu->NmisInjected = 0;
  if (SetupErrors) {
    printf("vmx: %u VMWRITEs failed\n", SetupErrors);
    return false;
  }
  vmxTraceLaunch(Cpu);
  return true;
}

void vmxDisable(struct PerCpu *Cpu) {
  /* SDM Vol. 3C, "VMXOFF": leave VMX operation; VMCLEAR first so the VMCS data is
     written back to memory and its launch state is clear. */
  enum VmxStatus S = vmclear((uint64_t)(uintptr_t)&Cpu->Vmcs);
  if (S != VmSucceed)
    vmxPrintVmFail("VMCLEAR", -(int)S);
  S = vmxoff();
  if (S != VmSucceed)
    vmxPrintVmFail("VMXOFF", -(int)S);
  writeCr4(readCr4() & ~CR4_VMXE);
}

void vmxPrintVmFail(const char *What, int Status) {
  if (Status == -VmFailInvalid) {
    printf("vmx: %s failed: VMfailInvalid\n", What);
    return;
  }
  uint64_t Err = 0;
  vmreadChecked(Vmcs_VmInstructionError, &Err);
  printf("vmx: %s failed: VMfailValid, error %lu (%s)\n", What, Err,
         vmInstructionErrorName((uint32_t)Err));
}
