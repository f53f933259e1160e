/* The hypervisor core's per-CPU XenTrace buffers (trace/tbuf.h has the layout and the
 * protocol shared with the machine that drains them).
 *
 * The producer side of Xen's trace buffers (xen/common/trace.c): records go into a
 * per-CPU ring in the hypervisor's own memory, each stamped with the TSC read in VMX
 * root operation when the caller asks for it; when the ring passes half full the
 * consumer is told (Xen raises VIRQ_TBUF for xentrace; here an OUT to
 * XT_TBUF_PORT_NOTIFY, which vmxsim services before the instruction completes). With
 * no consumer (Bochs, bare hardware) the ring fills and further records are dropped and
 * counted, as in Xen without a running xentrace.
 */
#ifndef HVM_VMX_TRACEBUF_H
#define HVM_VMX_TRACEBUF_H

#include <stdint.h>

#include "trace/tbuf.h"
#include "trace/xentrace.h"

/* Bytes of each CPU's ring (the data area after the 64-byte header). */
#define HVM_TBUF_DATA_BYTES (64u << 10)

struct TraceBuffer {
  volatile struct xt_tbuf *Shared; /* 0 until tbufInit */
  uint32_t *Data;        /* the ring (after the header) */
  uint32_t Size;         /* bytes of the ring, as in the header */
  uint32_t Off;          /* Prod % Size, kept without dividing */
  uint64_t Prod;         /* the producer index (only this CPU writes it) */
  uint64_t LastTsc;      /* TSC of the last timed record (for padding records) */
  uint64_t NotifiedCons; /* cons when the consumer was last told; ~0 = never */
  uint64_t Lost;         /* records dropped since the last LOST_RECORDS */
  uint64_t FirstLostTsc;
  uint32_t Who;          /* LOST_RECORDS "who": domain in bits 0-15, vcpu in 16-31 */
  uint32_t Format;       /* XT_TBUF_FORMAT_MODERN or XT_TBUF_FORMAT_XEN30 */
  /* When set, called instead of the OUT to XT_TBUF_PORT_NOTIFY: the producer consumes its
     own ring (vmx/tracestream.c, the UART stream of trace/tbuf.h). */
  void (*Consume)(struct TraceBuffer *B);
  uint32_t StreamSeq; /* frames streamed so far (vmx/tracestream.c) */
};

#ifdef __cplusplus
extern "C" {
#endif

/// Sets up the ring of pcpu Cpu in Mem (HVM_TBUF_DATA_BYTES + 64 bytes, 64-byte
/// aligned, identity-mapped below 4 GiB) and announces it to the machine.
void tbufInit(struct TraceBuffer *B, void *Mem, uint32_t Cpu);

/// Appends one record; Timed records carry the current TSC (RDTSC).
void tbufPut(struct TraceBuffer *B, uint32_t Event, int Timed, const uint32_t *Words,
             unsigned NumWords);

/// Switches the ring to Format (XT_TBUF_FORMAT_XEN30: fixed-size xen-3.0 records, and a
/// data area cut down to a whole number of them) and announces it again. Only before the
/// first record.
void tbufSetFormat(struct TraceBuffer *B, uint32_t Format);

/// Appends one xen-3.0 record {TSC, Event, Items[0..4]} (a ring set to
/// XT_TBUF_FORMAT_XEN30), always timed. A record that does not fit is dropped and
/// counted, as Xen 3.0.3's __trace_var did; the next one that fits together with a
/// TRC_LOST_RECORDS {count, 0, 0, 0, 0} is preceded by it.
void tbufPut30(struct TraceBuffer *B, uint32_t Event, const uint64_t *Items);

#ifdef HVM_HOST_TEST
/* tests/hvm/tracebuf_test.cpp runs this code on the host with its own clock and port
   I/O (tests/hvm/fake/lib/io.h). */
uint64_t rdtsc(void);
#else
static inline uint64_t rdtsc(void) {
  uint32_t Lo, Hi;
  __asm__ volatile("rdtsc" : "=a"(Lo), "=d"(Hi));
  return ((uint64_t)Hi << 32) | Lo;
}
#endif

#ifdef __cplusplus
}
#endif

#endif
