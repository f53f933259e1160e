/* The published layout of the trace_values slots (trace/slot_layout.h has the table and
 * its rules): vmxsim finds the table by its ELF symbol and records every store to the
 * slots it lists in its ground truth, so `vmxsim trace check` can prove each value the
 * handler recorded. On any other machine the table is an ordinary variable.
 */
#ifndef HVM_VMX_TRACE_LAYOUT_H
#define HVM_VMX_TRACE_LAYOUT_H

#include "trace/slot_layout.h"
#include "vmx/percpu.h"

_Static_assert(XT_SLOT_LAYOUT_SLOTS == HVM_TRACE_VALUES, "the table's slot count");

/// Publishes Cpu's TraceValues in the table (slot i at &TraceValues[i]). perCpuInit
/// calls it for every CPU once its slots hold their boot value, before any trace record;
/// a CPU number beyond the table is not published (its stores are then not recorded).
void vmxTracePublishCpu(struct PerCpu *Cpu);

#endif
