/* The per-exit trace values of Xen 3.0.3's VMX exit handler.
 *
 * Xen 3.0.3 (xen/arch/x86/hvm/vmx/vmx.c) defined
 *   #define TRACE_VMEXIT(index, value) this_cpu(trace_values)[index] = value
 * and kept five per-CPU slots. A hook at VM exit wrote a timed record; while the exit
 * was handled, TRACE_VMEXIT filled the slots (0: exit reason; 1..4: reason-specific
 * data); a hook just before the next VM entry wrote a second timed record carrying the
 * five slots and reset them. The two timestamps give the cycles spent per exit type.
 *
 * Here the two hooks are vmxTraceVmexit and vmxTraceVmentry, and they write XenTrace
 * records into the CPU's trace buffer (vmx/tracebuf.h) the way a modern Xen does, so
 * xenalyze and `vmxsim trace summary` read them (format doc, section 11, last
 * paragraph): the exit hook writes VMX_EXIT64 (timed: reason, RIP); the entry hook
 * writes the handler record built from slots 1..4 (and the registers the handler
 * produced), INJ_EXC when an exception is being injected, then VMENTRY (timed), and
 * resets the slots. vmxTraceGuestEnd closes the last exit with a runstate change to
 * offline instead of a VMENTRY. The mapping per exit reason is in vmx/README.md. The
 * vmx_e2e exit log line is printed by the entry hook too. Slots are reset to 0 (Xen
 * 3.0.4's choice; 3.0.3 used the marker 9).
 *
 * "trace=xen-3.0" on the image's command line selects the other flavour
 * (docs/trace-flavours.md): the records of Xen 3.0.3 itself, fixed-size, in a ring set to
 * XT_TBUF_FORMAT_XEN30. vmxTrace30Vmexit writes TRC_VMX_VMEXIT (0x00081001) with its
 * items all 0; vmxTrace30Vmentry writes TRC_VMX_VMENTRY (0x00081002) carrying the five
 * slots and resets them to the marker 9 (XT30_SLOT_MARKER), as 3.0.3's
 * vmx_trace_vmentry did; the first entry carries the slots as boot left them (0). No
 * handler, injection or runstate records exist in that design; when the guest will not
 * be entered again nothing is written, as Xen 3.0.3 wrote nothing for a dying domain.
 */
#ifndef HVM_VMX_TRACE_H
#define HVM_VMX_TRACE_H

#include <stdbool.h>

#include "vmx/percpu.h"

/// Stores Value in trace slot Index (a constant 0..4) of the current CPU.
#define TRACE_VMEXIT(Index, Value)                                                  \
  do {                                                                              \
    _Static_assert((Index) >= 0 && (Index) < HVM_TRACE_VALUES, "trace_values slot"); \
    thisCpu()->TraceValues[(Index)] = (uint64_t)(Value);                            \
  } while (0)

/// At the start of the exit handler, once the exit information has been read.
void vmxTraceVmexit(struct PerCpu *Cpu);
/// Just before VM entry: the exit line (when Cpu->LogExits), the handler record, INJ_EXC,
/// VMENTRY; then resets the slots.
void vmxTraceVmentry(struct PerCpu *Cpu);
/// Instead of vmxTraceVmentry when the guest will not be entered again (it ended, or
/// the handler stops): the handler record and RUNSTATE_RUNNING_TO_OFFLINE.
void vmxTraceGuestEnd(struct PerCpu *Cpu);
/// Before the first VM entry: RUNSTATE_RUNNABLE_TO_RUNNING for d1v<cpu> (xenalyze
/// needs it before the first HVM record; format doc, section 8), then VMENTRY. In the
/// xen-3.0 flavour: TRC_VMX_VMENTRY with the slots, as before every entry.
void vmxTraceLaunch(struct PerCpu *Cpu);

/// The xen-3.0 flavour's hooks, in place of vmxTraceVmexit, vmxTraceVmentry and
/// vmxTraceGuestEnd.
void vmxTrace30Vmexit(struct PerCpu *Cpu);
void vmxTrace30Vmentry(struct PerCpu *Cpu);
void vmxTrace30GuestEnd(struct PerCpu *Cpu);

/// The trace flavours "trace=" names on an image's command line.
enum VmxTraceFlavour {
  VmxTrace_Modern = XT_TBUF_FORMAT_MODERN, /* "modern", the default */
  VmxTrace_Xen30 = XT_TBUF_FORMAT_XEN30,   /* "xen-3.0" */
};

/// Reads "trace=" from an image's command line: *Flavour is set for "modern" or
/// "xen-3.0", left alone when the word is absent. Returns false for any other value (the
/// image prints one line and stops with HVM_EXIT_FAILURE).
bool vmxTraceFlavourOption(const char *Cmdline, enum VmxTraceFlavour *Flavour);

/// Sets up the CPU's ring for Flavour; before the first record (after perCpuInit).
void vmxTraceSetFlavour(struct PerCpu *Cpu, enum VmxTraceFlavour Flavour);

#endif
