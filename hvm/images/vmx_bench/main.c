/* vmx_bench: the VM exit/entry round-trip workload. The guest (guest.S) runs "iters=N"
 * iterations (default 100000) of CPUID, OUT and VMCALL, each an exit handled by a
 * minimal handler: read the exit reason, guest RIP and instruction length, write RIP
 * past the instruction, VMRESUME. No emulation. Prints the number of exits (3 * N + 1)
 * and exits with 0. The emulator's benchmark times it from the outside.
 *
 * "trace=1": the handler also traces every exit as the core's handler does (VMX_EXIT64,
 * the handler record from TRACE_VMEXIT slots, VMENTRY into the per-CPU trace buffer;
 * vmx/trace.h), for the tracing-cost benchmark and the trace-buffer tests. "trace=modern"
 * is the same; "trace=xen-3.0" traces in Xen 3.0.3's records instead (vmx/trace.h).
 */
#include <stdint.h>

#include "boot/boot.h"
#include "lib/exit.h"
#include "lib/multiboot.h"
#include "lib/printf.h"
#include "vmx/trace.h"
#include "vmx/vmx.h"

#define BENCH_DEFAULT_ITERS 100000ull

extern char vmxBenchGuest[];

static struct DescriptorTables GuestTables;
static uint8_t GuestStack[0x1000] __attribute__((aligned(16)));
static uint64_t BenchExits;

static void benchExitHandler(struct GuestRegs *Regs) {
  uint32_t Reason = (uint32_t)vmread(Vmcs_ExitReason);
  uint64_t Rip = vmread(Vmcs_GuestRip);
  uint64_t Len = vmread(Vmcs_VmExitInstructionLength);
  ++BenchExits;
  if (Reason == Reason_Vmcall && Regs->Rax == 1)
    vmxGuestDone(perCpuFromRegs(Regs));
  if (Reason != Reason_Cpuid && Reason != Reason_IoInstruction && Reason != Reason_Vmcall) {
    printf("vmx_bench: unexpected exit reason 0x%x (%s) at rip 0x%lx\n", Reason,
           exitReasonName(EXIT_REASON_BASIC(Reason)), Rip);
    hvmExit(HVM_EXIT_FAILURE);
  }
  vmwrite(Vmcs_GuestRip, Rip + Len);
}

/* The same work, traced: Exit holds what the trace hooks read. Xen30 is a constant in
   each caller (as in vmx/exit.c). */
static inline __attribute__((always_inline)) void tracedExit(struct GuestRegs *Regs,
                                                             bool Xen30) {
  struct PerCpu *Cpu = perCpuFromRegs(Regs);
  struct ExitInfo *E = &Cpu->Exit;
  E->Reason = (uint32_t)vmread(Vmcs_ExitReason);
  E->GuestRip = vmread(Vmcs_GuestRip);
  E->InstructionLength = (uint32_t)vmread(Vmcs_VmExitInstructionLength);
  ++BenchExits;
  if (Xen30)
    vmxTrace30Vmexit(Cpu);
  else
    vmxTraceVmexit(Cpu);
  TRACE_VMEXIT(0, E->Reason);
  if (E->Reason == Reason_IoInstruction) {
    E->Qualification = vmread(Vmcs_ExitQualification);
    TRACE_VMEXIT(1, EXIT_QUAL(E->Qualification, io, PortNumber));
    TRACE_VMEXIT(2, EXIT_QUAL(E->Qualification, io, Direction));
    TRACE_VMEXIT(3, EXIT_QUAL(E->Qualification, io, SizeOfAccess) + 1);
    TRACE_VMEXIT(4, Regs->Rax & 0xff);
  } else if (E->Reason == Reason_Vmcall) {
    /* Number and argument, as vmx/exit_vmcall.c (vmx/README.md, "Exit handling"). */
    TRACE_VMEXIT(1, Regs->Rax);
    TRACE_VMEXIT(2, Regs->Rbx);
    if (Regs->Rax == 1) {
      if (Xen30)
        vmxTrace30GuestEnd(Cpu);
      else
        vmxTraceGuestEnd(Cpu);
      vmxGuestDone(Cpu);
    }
  } else if (E->Reason == Reason_Cpuid) {
    /* CPUID reads EAX and ECX only (SDM Vol. 2A, CPUID), as vmx/exit_cpuid.c records. */
    TRACE_VMEXIT(1, (uint32_t)Regs->Rax);
    TRACE_VMEXIT(2, (uint32_t)Regs->Rcx);
  } else {
    printf("vmx_bench: unexpected exit reason 0x%x (%s) at rip 0x%lx\n", E->Reason,
           exitReasonName(EXIT_REASON_BASIC(E->Reason)), E->GuestRip);
    hvmExit(HVM_EXIT_FAILURE);
  }
  vmwrite(Vmcs_GuestRip, E->GuestRip + E->InstructionLength);
  if (Xen30)
    vmxTrace30Vmentry(Cpu);
  else
    vmxTraceVmentry(Cpu);
}

static void tracedExitHandler(struct GuestRegs *Regs) { tracedExit(Regs, false); }
static void tracedExitHandlerXen30(struct GuestRegs *Regs) { tracedExit(Regs, true); }

void kmain(uint32_t Magic, uint32_t MbiAddr) {
  (void)Magic;
  const char *Cmdline = multibootCmdline(multibootInfo(MbiAddr));
  uint64_t Iters = BENCH_DEFAULT_ITERS, Trace = 0;
  enum VmxTraceFlavour Flavour = VmxTrace_Modern;
  int TraceNumber = cmdlineGetU64(Cmdline, "trace", &Trace);
  if (TraceNumber < 0) {
    /* Not 0 or 1: a flavour name. */
    Trace = 1;
    if (!vmxTraceFlavourOption(Cmdline, &Flavour))
      TraceNumber = 2;
  }
  if (cmdlineGetU64(Cmdline, "iters", &Iters) < 0 || TraceNumber > 1 || Trace > 1) {
    printf("vmx_bench: bad iters= or trace= in command line \"%s\" (trace=0, 1, modern "
           "or xen-3.0)\n",
           Cmdline);
    hvmExit(HVM_EXIT_FAILURE);
  }
  printf("vmx_bench: start iters=%lu trace=%lu\n", Iters, Trace);
  struct PerCpu *Cpu = perCpuInit(0);
  vmxTraceSetFlavour(Cpu, Flavour);
  /* Chosen before vmxSetupVmcs writes the launch records (vmx_e2e/main.c says why). */
  ExitHandlerFn Handler = !Trace                      ? benchExitHandler
                          : Flavour == VmxTrace_Xen30 ? tracedExitHandlerXen30
                                                      : tracedExitHandler;
  if (!vmxEnable(Cpu))
    hvmExit(HVM_EXIT_FAILURE);
  descriptorTablesInit(&GuestTables);
  struct GuestSetup Guest = {
      .Rip = (uint64_t)(uintptr_t)vmxBenchGuest,
      .Rsp = (uint64_t)(uintptr_t)(GuestStack + sizeof(GuestStack)),
      .Rdi = Iters,
      .Tables = &GuestTables,
      .RipBase = (uint64_t)(uintptr_t)vmxBenchGuest,
  };
  if (!vmxSetupVmcs(Cpu, &Guest))
    hvmExit(HVM_EXIT_FAILURE);
  Cpu->ExitHandler = Handler;
  int Status = vmxRunGuest(Cpu);
  if (Status < 0) {
    vmxPrintVmFail("VMLAUNCH", Status);
    hvmExit(HVM_EXIT_FAILURE);
  }
  vmxDisable(Cpu);
  uint64_t Expected = 3 * Iters + 1;
  printf("vmx_bench: done iters=%lu exits=%lu (expected %lu)\n", Iters, BenchExits,
         Expected);
  hvmExit(BenchExits == Expected ? HVM_EXIT_SUCCESS : HVM_EXIT_FAILURE);
}
