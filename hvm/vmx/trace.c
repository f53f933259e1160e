#include "vmx/trace.h"

#include "lib/multiboot.h"
#include "lib/printf.h"
#include "lib/spinlock.h"
#include "lib/string.h"
#include "vmx/arch.h"
#include "vmx/ept.h"
#include "vmx/exit.h"
#include "vmx/insn.h"

/* d1v<cpu>: the scheduler records' "who" word, vcpu in bits 0-15, domain in bits 16-31
   (format doc, section 5). The guest is domain 1, one vCPU per pcpu. */
static uint32_t whoRunning(const struct PerCpu *Cpu) { return (1u << 16) | Cpu->CpuNumber; }

volatile uint32_t VmxConsoleLock;

static void xen30Entry(struct PerCpu *Cpu);

/* A function of its own, so the instructions from its VMENTRY to the VM entry are the
   same as before the xen-3.0 flavour existed (the modern trace's launch interval). */
static __attribute__((noinline)) void launchModern(struct PerCpu *Cpu) {
  /* Xen writes VMENTRY before every VM entry, the first one included. */
  uint32_t W[1] = {whoRunning(Cpu)};
  tbufPut(&Cpu->Trace, XT_EV_RunstateRunnableToRunning, 1, W, 1);
  tbufPut(&Cpu->Trace, XT_EV_VmEntry, 1, 0, 0);
}

void vmxTraceLaunch(struct PerCpu *Cpu) {
  if (Cpu->Trace.Format == XT_TBUF_FORMAT_XEN30)
    xen30Entry(Cpu);
  else
    launchModern(Cpu);
}

void vmxTraceVmexit(struct PerCpu *Cpu) {
  /* The place of Xen 3.0.3's vmx_trace_vmexit; what Xen 3.1+ writes there: VMX_EXIT64
     with the full exit-reason field and the guest RIP, timed. */
  const struct ExitInfo *E = &Cpu->Exit;
  uint32_t W[3] = {E->Reason, (uint32_t)E->GuestRip, (uint32_t)(E->GuestRip >> 32)};
  tbufPut(&Cpu->Trace, XT_EV_VmxExit64, 1, W, 3);
}

static void put(struct PerCpu *Cpu, uint32_t Event, const uint32_t *W, unsigned N) {
  tbufPut(&Cpu->Trace, Event, 0, W, N);
}

static void put64(struct PerCpu *Cpu, uint32_t Event, uint32_t First, uint64_t V) {
  uint32_t W[3] = {First, (uint32_t)V, (uint32_t)(V >> 32)};
  put(Cpu, Event, W, 3);
}

/* The handler record of the exit (format doc, section 7), from the trace_values slots
   (vmx/README.md, "Exit handling") and, where a slot does not hold the value Xen
   records, the guest registers as the handler left them. */
static void handlerRecord(struct PerCpu *Cpu) {
  const uint64_t *T = Cpu->TraceValues;
  struct GuestRegs *Regs = &Cpu->Regs;
  if (Cpu->Exit.Reason & EXIT_REASON_ENTRY_FAILURE)
    return;
  switch (EXIT_REASON_BASIC(Cpu->Exit.Reason)) {
  case Reason_ExceptionOrNmi:
    if (T[1] == 14) {
      put64(Cpu, XT_EV_PfXen64, (uint32_t)T[3], T[4]); /* error code, CR2 */
    } else {
      uint32_t W[1] = {(uint32_t)T[1]};
      put(Cpu, XT_EV_Trap, W, 1);
    }
    break;
  case Reason_Cpuid: {
    uint32_t W[6] = {(uint32_t)T[1], (uint32_t)T[2], (uint32_t)Regs->Rax,
                     (uint32_t)Regs->Rbx, (uint32_t)Regs->Rcx, (uint32_t)Regs->Rdx};
    put(Cpu, XT_EV_Cpuid, W, 6);
    break;
  }
  case Reason_Hlt: {
    uint32_t W[1] = {0};
    put(Cpu, XT_EV_Hlt, W, 1);
    break;
  }
  case Reason_Vmcall: {
    uint32_t W[1] = {(uint32_t)T[1]};
    put(Cpu, XT_EV_Vmmcall, W, 1);
    break;
  }
  case Reason_ControlRegisterAccesses: {
    /* Slot 1 access type, 2 CR number, 3 register number; the value is the register's
       (for MOV from CR: after the handler wrote it). */
    uint32_t Cr = (uint32_t)T[2];
    switch (T[1]) {
    case CrAccess_MovToCr:
      put64(Cpu, XT_EV_CrWrite64, Cr, readGuestGpr(Regs, (unsigned)T[3]));
      break;
    case CrAccess_MovFromCr:
      put64(Cpu, XT_EV_CrRead64, Cr, readGuestGpr(Regs, (unsigned)T[3]));
      break;
    case CrAccess_Clts:
      put(Cpu, XT_EV_Clts, 0, 0);
      break;
    default: {
      uint32_t W[2] = {EXIT_QUAL(Cpu->Exit.Qualification, cr_access, LmswSourceData), 0};
      put(Cpu, XT_EV_Lmsw64, W, 2);
    }
    }
    break;
  }
  case Reason_IoInstruction: {
    uint32_t W[2] = {(uint32_t)T[1], (uint32_t)T[4]}; /* port, data */
    put(Cpu, T[2] ? XT_EV_IoportRead : XT_EV_IoportWrite, W, 2);
    break;
  }
  case Reason_Rdmsr:
  case Reason_Wrmsr: {
    uint32_t W[3] = {(uint32_t)T[1], (uint32_t)T[2], (uint32_t)T[3]};
    put(Cpu, EXIT_REASON_BASIC(Cpu->Exit.Reason) == Reason_Rdmsr ? XT_EV_MsrRead
                                                                 : XT_EV_MsrWrite,
        W, 3);
    break;
  }
  case Reason_EptViolation: {
    /* Xen's NPF: guest-physical address (slot 1), the host frame (slot 2 for RAM; Xen's
       INVALID_MFN, all ones, for emulated MMIO), the qualification (slot 4), the p2m type
       (slot 3). */
    uint64_t Mfn = T[3] == P2M_MMIO_DM ? ~0ull : T[2];
    uint32_t W[6] = {(uint32_t)T[1], (uint32_t)(T[1] >> 32), (uint32_t)Mfn,
                     (uint32_t)(Mfn >> 32), (uint32_t)T[4], (uint32_t)T[3]};
    put(Cpu, XT_EV_Npf, W, 6);
    break;
  }
  case Reason_Invlpg:
    /* Xen's INVLPG64: 0 (INVLPG, not SVM's INVLPGA) and the address (slot 1). */
    put64(Cpu, XT_EV_Invlpg64, 0, T[1]);
    break;
  case Reason_Rdtsc: {
    /* Xen's RDTSC (written when it emulates the TSC): the value returned (slot 1). */
    uint32_t W[2] = {(uint32_t)T[1], (uint32_t)(T[1] >> 32)};
    put(Cpu, XT_EV_Rdtsc, W, 2);
    break;
  }
  case Reason_MovDr:
    /* Xen writes DR_WRITE, with no payload, for every MOV DR exit. */
    put(Cpu, XT_EV_DrWrite, 0, 0);
    break;
  case Reason_ExternalInterrupt: {
    /* Xen's INTR: the host vector (slot 1). */
    uint32_t W[1] = {(uint32_t)T[1]};
    put(Cpu, XT_EV_Intr, W, 1);
    break;
  }
  default:
    /* PAUSE, WBINVD, XSETBV and the interrupt and NMI windows have no handler record,
       as in Xen (format doc, section 7). */
    break;
  }
}

/* One line per exit, in a fixed format that peers' logs are compared on, so nothing
   model-specific (no TSC, no host CPUID values) may appear in it. */
static void logExit(struct PerCpu *Cpu) {
  if (Cpu->LogExits) {
    const struct ExitInfo *E = &Cpu->Exit;
    const uint64_t *T = Cpu->TraceValues;
    printf("exit n=%lu reason=%u%s qual=0x%lx rip=", Cpu->ExitCount,
           EXIT_REASON_BASIC(E->Reason),
           (E->Reason & EXIT_REASON_ENTRY_FAILURE) ? " entry-failure" : "",
           E->Qualification);
    if (E->GuestRip >= Cpu->RipBase)
      printf("guest+0x%lx", E->GuestRip - Cpu->RipBase);
    else
      printf("0x%lx", E->GuestRip);
    printf(" len=%u info=0x%x idtv=0x%x trace=[%lu,0x%lx,0x%lx,0x%lx,0x%lx]\n",
           E->InstructionLength, E->InterruptionInfo, E->IdtVectoringInfo, T[0], T[1],
           T[2], T[3], T[4]);
  }
  if (Cpu->Note[0]) {
    spinLock(&VmxConsoleLock);
    printf("  %s\n", Cpu->Note);
    spinUnlock(&VmxConsoleLock);
    Cpu->Note[0] = 0;
  }
}

static void resetSlots(struct PerCpu *Cpu) {
  for (unsigned I = 0; I < HVM_TRACE_VALUES; ++I)
    Cpu->TraceValues[I] = 0;
}

void vmxTraceVmentry(struct PerCpu *Cpu) {
  /* The place of Xen 3.0.3's vmx_trace_vmentry (the record with the five slots). */
  logExit(Cpu);
  handlerRecord(Cpu);
  /* SDM Vol. 3C, "VM-Entry Control Fields for Event Injection": the event the entry
     will inject; the processor clears the valid bit after a successful entry. */
  /* As Xen's vmx_intr_assist: INTR_WINDOW {vector waiting, its source (1: the virtual
     timer, Xen's hvm_intsrc_lapic), the vector being injected instead or ~0} when the
     interrupt window opens; INJ_VIRQ {vector, 0} for an external interrupt injected; no
     record for an NMI; INJ_EXC {vector, error code} for an exception. */
  uint32_t Inj = (uint32_t)vmread(Vmcs_VmEntryInterruptionInformation);
  if (Cpu->IntrWindowOpened) {
    uint32_t W[3] = {HV_GUEST_TIMER_VECTOR, 1, (Inj & INTR_INFO_VALID) ? (Inj & 0xff) : ~0u};
    put(Cpu, XT_EV_IntrWindow, W, 3);
  }
  if ((Inj & INTR_INFO_VALID) && INTR_INFO_TYPE(Inj) == 0) {
    uint32_t W[2] = {Inj & 0xff, 0};
    put(Cpu, XT_EV_InjVirq, W, 2);
  } else if ((Inj & INTR_INFO_VALID) && (Inj & (7u << 8)) != INTR_INFO_TYPE_NMI) {
    uint32_t W[2] = {Inj & 0xff,
                     (Inj & INTR_INFO_ERROR_CODE)
                         ? (uint32_t)vmread(Vmcs_VmEntryExceptionErrorCode)
                         : 0};
    put(Cpu, XT_EV_InjExc, W, 2);
  }
  tbufPut(&Cpu->Trace, XT_EV_VmEntry, 1, 0, 0);
  resetSlots(Cpu);
}

void vmxTraceGuestEnd(struct PerCpu *Cpu) {
  logExit(Cpu);
  handlerRecord(Cpu);
  uint32_t W[1] = {whoRunning(Cpu)};
  tbufPut(&Cpu->Trace, XT_EV_RunstateRunningToOffline, 1, W, 1);
  resetSlots(Cpu);
  if (Cpu->Trace.Consume)
    Cpu->Trace.Consume(&Cpu->Trace);
}

/* The xen-3.0 flavour: Xen 3.0.3's vmx_trace_vmexit / vmx_trace_vmentry. */

static void xen30Entry(struct PerCpu *Cpu) {
  tbufPut30(&Cpu->Trace, XT30_EV_VmxVmentry, Cpu->TraceValues);
  for (unsigned I = 0; I < HVM_TRACE_VALUES; ++I)
    Cpu->TraceValues[I] = XT30_SLOT_MARKER;
}

void vmxTrace30Vmexit(struct PerCpu *Cpu) {
  /* TRACE_3D(TRC_VMX_VMEXIT, 0, 0, 0): the record's only content is its TSC. */
  static const uint64_t Zero[XT30_ITEMS];
  tbufPut30(&Cpu->Trace, XT30_EV_VmxVmexit, Zero);
}

void vmxTrace30Vmentry(struct PerCpu *Cpu) {
  logExit(Cpu);
  xen30Entry(Cpu);
}

void vmxTrace30GuestEnd(struct PerCpu *Cpu) {
  logExit(Cpu);
  for (unsigned I = 0; I < HVM_TRACE_VALUES; ++I)
    Cpu->TraceValues[I] = XT30_SLOT_MARKER;
  if (Cpu->Trace.Consume)
    Cpu->Trace.Consume(&Cpu->Trace);
}

bool vmxTraceFlavourOption(const char *Cmdline, enum VmxTraceFlavour *Flavour) {
  static const struct {
    const char *Name;
    enum VmxTraceFlavour Flavour;
  } Names[] = {{"modern", VmxTrace_Modern}, {"xen-3.0", VmxTrace_Xen30}};
  const char *V;
  size_t Len;
  if (!cmdlineGetWord(Cmdline, "trace", &V, &Len))
    return true;
  for (unsigned I = 0; I < sizeof(Names) / sizeof(Names[0]); ++I)
    if (strlen(Names[I].Name) == Len && !strncmp(V, Names[I].Name, Len)) {
      *Flavour = Names[I].Flavour;
      return true;
    }
  return false;
}

void vmxTraceSetFlavour(struct PerCpu *Cpu, enum VmxTraceFlavour Flavour) {
  if ((uint32_t)Flavour != Cpu->Trace.Format)
    tbufSetFormat(&Cpu->Trace, (uint32_t)Flavour);
}
