#include "vmx/percpu.h"

#include "lib/cpu.h"
#include "lib/string.h"
#include "vmx/arch.h"
#include "vmx/descriptors.h"
#include "vmx/trace_layout.h"

/* One per logical processor, indexed by CPU number (0 = the BSP). Page-aligned
   because the VMXON region and VMCS inside must be. */
static struct PerCpu PerCpus[HVM_MAX_CPUS] __attribute__((aligned(4096)));
/* Each CPU's GDT with a TSS: VM exits load TR from the host-state area, and the host
   TR selector must not be 0 (SDM Vol. 3C, "Checks on Host Segment and
   Descriptor-Table Registers"). One per CPU: LTR marks the TSS descriptor busy, and
   LTR of a busy TSS raises #GP (SDM Vol. 3A, "Task Register"). */
static struct DescriptorTables HostTables[HVM_MAX_CPUS];
/* Each CPU's trace ring: the trace/tbuf.h header, then the data. */
static uint8_t TraceRings[HVM_MAX_CPUS][XT_TBUF_DATA_OFFSET + HVM_TBUF_DATA_BYTES]
    __attribute__((aligned(64)));

uint64_t *guestGpr(struct GuestRegs *Regs, unsigned Number) {
  switch (Number & 15) {
  case 0: return &Regs->Rax;
  case 1: return &Regs->Rcx;
  case 2: return &Regs->Rdx;
  case 3: return &Regs->Rbx;
  case 5: return &Regs->Rbp;
  case 6: return &Regs->Rsi;
  case 7: return &Regs->Rdi;
  case 8: return &Regs->R8;
  case 9: return &Regs->R9;
  case 10: return &Regs->R10;
  case 11: return &Regs->R11;
  case 12: return &Regs->R12;
  case 13: return &Regs->R13;
  case 14: return &Regs->R14;
  case 15: return &Regs->R15;
  default: return 0; /* 4 = RSP: in the VMCS */
  }
}

struct PerCpu *perCpuInit(uint32_t CpuNumber) {
  struct PerCpu *Cpu = &PerCpus[CpuNumber];
  memset(Cpu, 0, sizeof(*Cpu));
  Cpu->Self = Cpu;
  Cpu->CpuNumber = CpuNumber;
  /* The slots hold their boot value (0, the memset): vmxsim records every store to
     them from here on (trace_layout.h). Before tbufInit, so before any trace record. */
  vmxTracePublishCpu(Cpu);
  tbufInit(&Cpu->Trace, TraceRings[CpuNumber], Cpu->CpuNumber);
  descriptorTablesInit(&HostTables[CpuNumber]);
  /* Reloading GS clears its base: set the base after. */
  hostLoadTables(&HostTables[CpuNumber]);
  wrmsr(MSR_IA32_GS_BASE, (uint64_t)(uintptr_t)Cpu);
  return Cpu;
}
