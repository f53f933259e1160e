/* The per-exit trace values of Xen 3.0.3's VMX exit handler.
 *
 * Xen 3.0.3 (xen/arch/x86/hvm/vmx/vmx.c) defined
 *   #define TRACE_VMEXIT(index, value) this_cpu(trace_values)[index] = value
 * and kept five per-CPU slots. A hook at VM exit wrote a timed record; while the exit
 * was handled, TRACE_VMEXIT filled the slots (0: exit reason; 1..4: reason-specific
 * data); a hook just before the next VM entry wrote a second timed record carrying the
 * five slots and reset them. The two timestamps give the cycles spent per exit type.
 *
 * Here the two hooks are vmxTraceVmexit and vmxTraceVmentry. Today the entry hook
 * prints the exit line of vmx_e2e; the per-CPU XenTrace buffers (a later step) slot in
 * behind the same two hooks: the exit hook writes VMX_EXIT64 (reason, RIP), the entry
 * hook writes the handler record built from slots 1..4, then VMENTRY (see
 * vmx/README.md for the mapping). Slots are reset to 0 (Xen 3.0.4's choice; 3.0.3
 * used the marker 9).
 */
#ifndef HVM_VMX_TRACE_H
#define HVM_VMX_TRACE_H

#include "vmx/percpu.h"

/// Stores Value in trace slot Index (a constant 0..4) of the current CPU.
#define TRACE_VMEXIT(Index, Value)                                                  \
  do {                                                                              \
    _Static_assert((Index) >= 0 && (Index) < HVM_TRACE_VALUES, "trace_values slot"); \
    thisCpu()->TraceValues[(Index)] = (uint64_t)(Value);                            \
  } while (0)

/// At the start of the exit handler, once the exit information has been read.
void vmxTraceVmexit(struct PerCpu *Cpu);
/// Just before VM entry: emits the exit's record (today: the exit line, when
/// Cpu->LogExits), then resets the slots.
void vmxTraceVmentry(struct PerCpu *Cpu);

#endif
