#include "vmx/trace.h"

#include "lib/printf.h"
#include "vmx/arch.h"

void vmxTraceVmexit(struct PerCpu *Cpu) {
  /* The place of Xen 3.0.3's vmx_trace_vmexit (a timed record written before the exit
     is handled). Nothing to write until the per-CPU trace buffers exist; the slots are
     already 0 from the previous entry (or from setup). */
  (void)Cpu;
}

void vmxTraceVmentry(struct PerCpu *Cpu) {
  /* The place of Xen 3.0.3's vmx_trace_vmentry: the record with the five slots. One
     line per exit, in a fixed format that peers' logs are compared on, so nothing
     model-specific (no TSC, no host CPUID values) may appear in it. */
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
    printf("  %s\n", Cpu->Note);
    Cpu->Note[0] = 0;
  }
  for (unsigned I = 0; I < HVM_TRACE_VALUES; ++I)
    Cpu->TraceValues[I] = 0;
}
