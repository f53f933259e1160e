/* vmx_e2e: the hypervisor core end to end. Enters VMX operation, launches the guest of
 * guest.S, handles its exits with the core's handler (one log line per exit, the
 * trace_values included), checks what the guest reported, and prints
 * "vmx_e2e: N exits, PASS" (exit status 0) or "... FAIL" (status 1).
 *
 * Everything printed is deterministic and the same on every correct VMX implementation,
 * so the emulator's test can compare the log line for line with the one Bochs produced
 * (expected_bochs.log). "verbose=1" on the command line adds the capability MSRs,
 * which are model-specific. "trace=xen-3.0" writes the trace in Xen 3.0.3's records
 * instead of a modern Xen's ("trace=modern", the default; vmx/trace.h); the exit log then
 * shows the slots an exit did not fill as 0x9, Xen 3.0.3's marker.
 */
#include <stdint.h>

#include "boot/boot.h"
#include "lib/cpu.h"
#include "lib/exit.h"
#include "lib/multiboot.h"
#include "lib/printf.h"
#include "vmx/trace.h"
#include "vmx/vmx.h"

extern char vmxE2eGuest[];
extern char vmxE2eGuestGpHandler[];

static struct DescriptorTables GuestTables;
static uint8_t GuestStack[0x4000] __attribute__((aligned(16)));

/* What guest.S reports with hypercall 0, in order. */
static const uint64_t ExpectedReports[] = {
    0x73786d76,         /* CPUID 0x40000000 EBX "vmxs" */
    0x56486d69,         /* ECX "imHV" */
    0x4d,               /* EDX "M" */
    0x10,               /* CPUID.1:ECX: VMX 0, hypervisor 1 */
    0xffff,             /* IN from an unclaimed port */
    0x2a,               /* IA32_TSC_AUX read back */
    0x100000000ull,     /* one #GP, error code 0 */
    2,                  /* two #GPs */
    1,                  /* CR0.CD as the guest set it */
    0,                  /* CR0.CD cleared */
    5,                  /* CR8 */
    0xffffffffffffffffull, /* unknown hypercall */
    0,                  /* CR4.VMXE as the guest sees it */
};
#define EXPECTED_COUNT (sizeof(ExpectedReports) / sizeof(ExpectedReports[0]))

void kmain(uint32_t Magic, uint32_t MbiAddr) {
  (void)Magic;
  const char *Cmdline = multibootCmdline(multibootInfo(MbiAddr));
  uint64_t Verbose = 0;
  cmdlineGetU64(Cmdline, "verbose", &Verbose);
  VmxVerbose = Verbose != 0;
  enum VmxTraceFlavour Flavour = VmxTrace_Modern;
  if (!vmxTraceFlavourOption(Cmdline, &Flavour)) {
    printf("vmx_e2e: bad trace= in command line \"%s\" (modern or xen-3.0)\n", Cmdline);
    hvmExit(HVM_EXIT_FAILURE);
  }

  printf("vmx_e2e: start\n");
  struct PerCpu *Cpu = perCpuInit(0);
  vmxTraceSetFlavour(Cpu, Flavour);
  /* Chosen here, not between vmxSetupVmcs (which writes the launch's VMENTRY) and the
     launch: the modern trace's launch interval stays what it was. */
  ExitHandlerFn Handler = Flavour == VmxTrace_Xen30 ? vmxExitHandlerXen30 : vmxExitHandler;
  if (!vmxEnable(Cpu))
    hvmExit(HVM_EXIT_FAILURE);
  printf("vmx_e2e: VMXON done\n");

  descriptorTablesInit(&GuestTables);
  idtSetGate(&GuestTables, VECTOR_GP, (uint64_t)(uintptr_t)vmxE2eGuestGpHandler);
  struct GuestSetup Guest = {
      .Rip = (uint64_t)(uintptr_t)vmxE2eGuest,
      .Rsp = (uint64_t)(uintptr_t)(GuestStack + sizeof(GuestStack)),
      .Rdi = readCr3(),
      .Tables = &GuestTables,
      .RipBase = (uint64_t)(uintptr_t)vmxE2eGuest,
  };
  if (!vmxSetupVmcs(Cpu, &Guest))
    hvmExit(HVM_EXIT_FAILURE);
  Cpu->ExitHandler = Handler;
  Cpu->LogExits = 1;
  printf("vmx_e2e: VMCS ready, VMLAUNCH\n");

  int Status = vmxRunGuest(Cpu);
  if (Status < 0) {
    vmxPrintVmFail("VMLAUNCH", Status);
    hvmExit(HVM_EXIT_FAILURE);
  }
  uint64_t Exits = Cpu->ExitCount;
  printf("vmx_e2e: guest ended with %lu\n", Cpu->GuestResult);
  vmxDisable(Cpu);
  printf("vmx_e2e: VMXOFF done\n");

  unsigned Failures = 0;
  if (Cpu->ReportedCount != EXPECTED_COUNT) {
    printf("vmx_e2e: guest reported %u values, expected %u\n", Cpu->ReportedCount,
           (unsigned)EXPECTED_COUNT);
    ++Failures;
  }
  for (unsigned I = 0; I < EXPECTED_COUNT && I < Cpu->ReportedCount; ++I) {
    if (Cpu->Reported[I] != ExpectedReports[I]) {
      printf("vmx_e2e: report %u is 0x%lx, expected 0x%lx\n", I, Cpu->Reported[I],
             ExpectedReports[I]);
      ++Failures;
    }
  }
  printf("vmx_e2e: %lu exits, %s\n", Exits, Failures ? "FAIL" : "PASS");
  hvmExit(Failures ? HVM_EXIT_FAILURE : HVM_EXIT_SUCCESS);
}
