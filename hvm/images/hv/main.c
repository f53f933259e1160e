/* hv: the hypervisor core on every CPU of the machine. The BSP reads the MADT and wakes
 * every AP with INIT-SIPI-SIPI (lib/smp.h); every CPU then sets up its own per-CPU data
 * (perCpuInit: trace ring, GDT/TSS, GS base), enters VMX operation from the capability
 * MSRs (its own VMXON region and VMCS) and runs one vCPU of domain 1 (d1v<cpu>) with
 * EPT and VPID where the processor offers them and time slices on the VMX-preemption
 * timer. The vCPU runs the scenario chosen with "scenario=NAME" (README.md); when every
 * vCPU has ended, the BSP prints one line per CPU and "hv: ... PASS" (status 0) or
 * "... FAIL" (status 1). An unknown scenario prints one line and exits with status 1.
 *
 * "trace=xen-3.0" writes Xen 3.0.3's records instead of a modern Xen's (vmx/trace.h).
 * "tstream=auto" streams the trace rings through COM1 when the machine has no drain
 * (Bochs, QEMU/KVM, hardware), "tstream=uart" always (vmx/tracestream.h, trace/tbuf.h).
 */
#include <stdint.h>

#include "images/hv/scenarios.h"
#include "lib/cpu.h"
#include "lib/exit.h"
#include "lib/multiboot.h"
#include "lib/printf.h"
#include "lib/smp.h"
#include "lib/io.h"
#include "lib/spinlock.h"
#include "lib/string.h"
#include "vmx/arch.h"
#include "vmx/ept.h"
#include "vmx/exit.h"
#include "vmx/trace.h"
#include "vmx/tracestream.h"
#include "vmx/vmx.h"

static const struct {
  const char *Name;
  uint32_t Mask;
} Scenarios[] = {
    {"io", HV_SC_IO},          {"cpuid", HV_SC_CPUID},         {"msr", HV_SC_MSR},
    {"cr", HV_SC_CR},          {"hlt-timer", HV_SC_HLT_TIMER}, {"ept", HV_SC_EPT},
    {"exceptions", HV_SC_EXCEPTIONS}, {"mmio", HV_SC_MMIO}, {"system", HV_SC_SYSTEM},
    {"irq", HV_SC_IRQ},        {"apicv", HV_SC_APICV},
    {"mixed", HV_SC_ALL},
    {"realmode", HV_SC_REALMODE},      {"triple-fault", HV_SC_TRIPLE_FAULT},
};

/* Set by the BSP before any AP starts; read-only afterwards. */
static uint32_t Mask;
static enum VmxTraceFlavour Flavour = VmxTrace_Modern;
static enum TraceStreamMode StreamMode = TraceStream_Off;
static uint64_t Eptp;
static uint8_t Ids[SMP_MAX_CPUS];
static unsigned NumCpus;
static struct __attribute__((packed)) {
  uint16_t Limit;
  uint64_t Base;
} HostIdt;

/* Each vCPU's tables and stack. */
static struct DescriptorTables GuestTables[HVM_MAX_CPUS];
static uint8_t GuestStacks[HVM_MAX_CPUS][0x4000] __attribute__((aligned(16)));

/* What each CPU reports when its vCPU has ended. */
static struct {
  uint64_t Exits, Status, SliceEnds, TimerWakeups, LazyMaps, Reflected, Mmio;
} Results[HVM_MAX_CPUS];
static volatile uint32_t CpusDone;

static void fail(uint32_t N, const char *What) {
  spinLock(&VmxConsoleLock);
  printf("hv: cpu %u: %s\n", N, What);
  hvmExit(HVM_EXIT_FAILURE);
}

/* Everything one CPU does, BSP and APs alike. */
static void runVcpu(uint32_t N) {
  struct PerCpu *Cpu = perCpuInit(N);
  vmxTraceSetFlavour(Cpu, Flavour);
  tbufStreamSetup(&Cpu->Trace, StreamMode);
  ExitHandlerFn Handler = Flavour == VmxTrace_Xen30 ? vmxExitHandlerXen30 : vmxExitHandler;
  if (!vmxEnable(Cpu))
    fail(N, "VMXON failed");
  descriptorTablesInit(&GuestTables[N]);
  idtSetGate(&GuestTables[N], 3, (uint64_t)(uintptr_t)hvTrapNoError);
  idtSetGate(&GuestTables[N], 6, (uint64_t)(uintptr_t)hvTrapNoError);
  idtSetGate(&GuestTables[N], 13, (uint64_t)(uintptr_t)hvTrapError);
  idtSetGate(&GuestTables[N], 14, (uint64_t)(uintptr_t)hvTrapError);
  idtSetGate(&GuestTables[N], 2, (uint64_t)(uintptr_t)hvNmi);
  idtSetGate(&GuestTables[N], HV_VIRQ_VECTOR, (uint64_t)(uintptr_t)hvVirq);
  idtSetGate(&GuestTables[N], HV_APICV_SELF, (uint64_t)(uintptr_t)hvApicvSelf);
  idtSetGate(&GuestTables[N], HV_APICV_POSTED, (uint64_t)(uintptr_t)hvApicvPosted);
  struct GuestSetup Guest = {
      .Rip = (uint64_t)(uintptr_t)hvGuest,
      /* As if called: RSP + 8 16-byte aligned at the function's first instruction. */
      .Rsp = (uint64_t)(uintptr_t)(GuestStacks[N] + sizeof(GuestStacks[N])) - 8,
      .Rdi = Mask,
      .Rsi = N,
      .Tables = &GuestTables[N],
      .RipBase = (uint64_t)(uintptr_t)hvGuest,
      .Eptp = Eptp,
      .SliceCycles = HV_SLICE_CYCLES,
      .Timers = true,
      .ExceptionBitmap = Mask == HV_SC_TRIPLE_FAULT ? 0 : HV_EXCEPTION_BITMAP,
      .RealMode = Mask == HV_SC_REALMODE,
      .RealCsBase = (uint64_t)(uintptr_t)hvRealModeGuest,
      .SystemExits = Mask != HV_SC_REALMODE,
      .Apicv = Mask == HV_SC_APICV,
  };
  if (Guest.RealMode)
    Guest.Rip = Guest.RipBase = Guest.RealCsBase;
  if (!vmxSetupVmcs(Cpu, &Guest))
    fail(N, "VMCS setup failed");
  Cpu->ExitHandler = Handler;
  int Status = vmxRunGuest(Cpu);
  if (Status < 0) {
    spinLock(&VmxConsoleLock);
    vmxPrintVmFail("VMLAUNCH", Status);
    hvmExit(HVM_EXIT_FAILURE);
  }
  Results[N].Exits = Cpu->ExitCount;
  Results[N].Status = Cpu->GuestResult;
  /* The real-mode guest reports CPUID 0x40000000's EBX and its CR0 (realmode.S). */
  if (Guest.RealMode && (Cpu->ReportedCount != 2 || Cpu->Reported[0] != 0x73786d76 ||
                         Cpu->Reported[1] != 0x30))
    Results[N].Status |= HV_SC_REALMODE;
  Results[N].SliceEnds = Cpu->SliceEnds;
  Results[N].TimerWakeups = Cpu->TimerWakeups;
  Results[N].LazyMaps = Cpu->LazyMaps;
  Results[N].Reflected = Cpu->Reflected;
  Results[N].Mmio = Cpu->MmioAccesses;
  vmxDisable(Cpu);
  __atomic_add_fetch(&CpusDone, 1, __ATOMIC_SEQ_CST);
}

static uint32_t cpuNumber(void) {
  uint32_t Id = apicId();
  for (unsigned I = 0; I < NumCpus; ++I)
    if (Ids[I] == Id)
      return I;
  return ~0u;
}

static void apEntry(void) {
  __asm__ volatile("lidt %0" : : "m"(HostIdt));
  uint32_t N = cpuNumber();
  smpApStarted();
  if (N != ~0u)
    runVcpu(N);
  for (;;)
    __asm__ volatile("cli; hlt");
}

/* SDM Vol. 3D, A.3.1: allowed-1 bit 6 of the pin-based controls' capability MSR (the
   TRUE_ one when IA32_VMX_BASIC[55] says it exists; the allowed-1 bits are the same). */
static bool hasPreemptionTimer(void) {
  uint64_t Cap = rdmsr((rdmsr(MSR_IA32_VMX_BASIC) & VMX_BASIC_TRUE_CONTROLS)
                           ? MSR_IA32_VMX_TRUE_PINBASED_CTLS
                           : MSR_IA32_VMX_PINBASED_CTLS);
  return (Cap >> 32) & VMX_CTL(Pin_ActivateVmxPreemptionTimer);
}

static void parseCommandLine(const char *Cmdline) {
  if (!vmxTraceFlavourOption(Cmdline, &Flavour)) {
    printf("hv: bad trace= in command line \"%s\" (modern or xen-3.0)\n", Cmdline);
    hvmExit(HVM_EXIT_FAILURE);
  }
  if (!tbufStreamOption(Cmdline, &StreamMode)) {
    printf("hv: bad tstream= in command line \"%s\" (off, auto or uart)\n", Cmdline);
    hvmExit(HVM_EXIT_FAILURE);
  }
  const char *V = "mixed";
  size_t Len = 5;
  cmdlineGetWord(Cmdline, "scenario", &V, &Len);
  for (unsigned I = 0; I < sizeof(Scenarios) / sizeof(Scenarios[0]); ++I)
    if (strlen(Scenarios[I].Name) == Len && !strncmp(V, Scenarios[I].Name, Len)) {
      Mask = Scenarios[I].Mask;
      return;
    }
  printf("hv: unknown scenario \"%.*s\" (io, cpuid, msr, cr, hlt-timer, ept, exceptions, "
         "mmio, system, irq, mixed, realmode, triple-fault or apicv)\n",
         (int)Len, V);
  hvmExit(HVM_EXIT_FAILURE);
}

void kmain(uint32_t Magic, uint32_t MbiAddr) {
  (void)Magic;
  parseCommandLine(multibootCmdline(multibootInfo(MbiAddr)));

  NumCpus = smpFindCpus(Ids);
  if (NumCpus == 0) {
    printf("hv: no processors in the MADT\n");
    hvmExit(HVM_EXIT_FAILURE);
  }
  if (NumCpus > HVM_MAX_CPUS) {
    printf("hv: %u CPUs in the MADT, using the first %u\n", NumCpus, HVM_MAX_CPUS);
    NumCpus = HVM_MAX_CPUS;
  }
  uint32_t Bsp = cpuNumber();
  if (Bsp == ~0u) {
    printf("hv: the boot processor is not among the MADT's first %u\n", NumCpus);
    hvmExit(HVM_EXIT_FAILURE);
  }
  /* The legacy 8259 PICs masked, as a hypervisor that owns the local APICs does: with
     external-interrupt exiting every host interrupt exits, and a BIOS (Bochs', SeaBIOS)
     leaves the PIT ticking into IRQ 0 (8259A data sheet: OCW1, the interrupt mask
     register, at ports 0x21 and 0xa1). */
  outb(0x21, 0xff);
  outb(0xa1, 0xff);
  Eptp = eptInit(HV_LAZY_BASE);
  /* apicv: the guest's local APIC page reaches the APIC-access page through the EPT. */
  if (Eptp && Mask == HV_SC_APICV)
    eptMapApicPage(LAPIC_BASE);
  vmxApicvSetVcpuCount(NumCpus);
  bool Timer = hasPreemptionTimer();
  if ((!Eptp && (Mask & HV_SC_NEED_EPT)) || (!Timer && (Mask & HV_SC_HLT_TIMER))) {
    if (Mask != HV_SC_ALL) {
      printf("hv: this scenario needs %s\n",
             !Timer && (Mask & HV_SC_HLT_TIMER)
                 ? "the VMX-preemption timer"
                 : "EPT (2 MiB pages, write-back, 4-level walks)");
      hvmExit(HVM_EXIT_FAILURE);
    }
    /* mixed: what the processor can do. */
    if (!Eptp)
      Mask &= ~HV_SC_NEED_EPT;
    if (!Timer)
      Mask &= ~HV_SC_HLT_TIMER;
  }
  printf("hv: %u CPUs, scenarios 0x%x, EPT %s, preemption timer %s\n", NumCpus, Mask,
         Eptp ? "on" : "off", Timer ? "on" : "off");

  __asm__ volatile("sidt %0" : "=m"(HostIdt));
  smpStartAps(Ids, NumCpus, apEntry);
  runVcpu(Bsp);
  while (CpusDone != NumCpus)
    __builtin_ia32_pause();

  unsigned Failures = 0;
  for (unsigned I = 0; I < NumCpus; ++I) {
    printf("hv: cpu %u d1v%u: %lu exits, %lu slice ends, %lu timer wake-ups, %lu lazy "
           "maps, %lu exceptions reflected, %lu MMIO accesses, status 0x%lx\n",
           I, I, Results[I].Exits, Results[I].SliceEnds, Results[I].TimerWakeups,
           Results[I].LazyMaps, Results[I].Reflected, Results[I].Mmio, Results[I].Status);
    Failures += Results[I].Status != 0;
  }
  printf("hv: %s\n", Failures ? "FAIL" : "PASS");
  hvmExit(Failures ? HVM_EXIT_FAILURE : HVM_EXIT_SUCCESS);
}
