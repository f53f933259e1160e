#include "vmx/trace_layout.h"

/* The symbol vmxsim's loader looks up (XT_SLOT_LAYOUT_SYMBOL); the header fields are
   static, so the table is valid in the image file before the core runs. Not static:
   the symbol must stay in the ELF symbol table under this name. */
volatile struct xt_slot_layout vmxTraceLayout = {
    .magic = XT_SLOT_LAYOUT_MAGIC,
    .version = XT_SLOT_LAYOUT_VERSION,
    .slot_count = XT_SLOT_LAYOUT_SLOTS,
    .max_cpus = XT_SLOT_LAYOUT_MAX_CPUS,
};

void vmxTracePublishCpu(struct PerCpu *Cpu) {
  if (Cpu->CpuNumber >= XT_SLOT_LAYOUT_MAX_CPUS)
    return;
  /* The core runs identity-mapped: the linear address is the physical one. */
  vmxTraceLayout.slots_pa[Cpu->CpuNumber] = (uint64_t)(uintptr_t)Cpu->TraceValues;
}
