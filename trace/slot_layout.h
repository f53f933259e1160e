/* Where a hypervisor's per-CPU trace_values slots are: the table a hypervisor core
 * publishes so that vmxsim can record every store to them in its ground truth (each
 * store: CPU, slot, value, virtual TSC, guest RIP; trace/events.def, GT_SLOT_OWN and
 * GT_SLOT_STORE), and
 * `vmxsim trace check` can prove every word of the hypervisor's handler and entry
 * records against what it stored and against the architectural source of the exit.
 * Plain freestanding C11 like trace/tbuf.h: hvm/ includes it.
 *
 * The table is one object in the image, named by the ELF symbol XT_SLOT_LAYOUT_SYMBOL
 * (the loader finds it in the image's symbol table; identity-mapped, so its link
 * address is its physical address). Little-endian:
 *   offset 0   magic      XT_SLOT_LAYOUT_MAGIC (static: in the image file)
 *          4   version    XT_SLOT_LAYOUT_VERSION
 *          6   slot_count slots per CPU (5, as Xen 3.0.3's trace_values), each 8 bytes
 *          8   max_cpus   entries of slots_pa (XT_SLOT_LAYOUT_MAX_CPUS)
 *         12   reserved, 0
 *         16   slots_pa[max_cpus]  physical address of CPU n's first slot (8-byte
 *              aligned, slot i at + 8 * i); 0 until CPU n publishes it
 * The hypervisor stores slots_pa[n] once its CPU n's slots hold their boot value (0), and
 * before it writes any trace record on that CPU. vmxsim watches the table from the load
 * on (only when a ground truth is being written), and each slot range from the store
 * that publishes it on. A table whose magic, version, slot count or size differs is
 * ignored (no slot is watched; `trace check` then checks what it can without them).
 */
#ifndef VMXSIM_TRACE_SLOT_LAYOUT_H
#define VMXSIM_TRACE_SLOT_LAYOUT_H

#include <stdint.h>

#define XT_SLOT_LAYOUT_SYMBOL "vmxTraceLayout"
#define XT_SLOT_LAYOUT_MAGIC 0x544c5358u /* "XSLT" */
#define XT_SLOT_LAYOUT_VERSION 1u
#define XT_SLOT_LAYOUT_SLOTS 5u
#define XT_SLOT_LAYOUT_MAX_CPUS 64u

struct xt_slot_layout {
  uint32_t magic;
  uint16_t version;
  uint16_t slot_count;
  uint32_t max_cpus;
  uint32_t reserved;
  uint64_t slots_pa[XT_SLOT_LAYOUT_MAX_CPUS];
};

#define XT_SLOT_LAYOUT_OFF_SLOTS_PA 16u
#define XT_SLOT_LAYOUT_BYTES (XT_SLOT_LAYOUT_OFF_SLOTS_PA + 8u * XT_SLOT_LAYOUT_MAX_CPUS)

#ifdef __cplusplus
static_assert(sizeof(struct xt_slot_layout) == XT_SLOT_LAYOUT_BYTES, "slot layout size");
#else
_Static_assert(sizeof(struct xt_slot_layout) == XT_SLOT_LAYOUT_BYTES, "slot layout size");
#endif

#endif /* VMXSIM_TRACE_SLOT_LAYOUT_H */
