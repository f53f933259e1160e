/* XenTrace record layout and event ids, for both the host tools (C++) and the
 * freestanding hypervisor core (hvm/, C11 -ffreestanding): plain C, <stdint.h> only.
 * The ids come from trace/events.def (STYLE 2.1); the format is
 * /work/shared/docs/xentrace-format.md, sections 1-3:
 *
 *   header word: bits 0-27 event id, bits 28-30 payload word count n (0..7),
 *                bit 31 a 64-bit TSC follows (low word first)
 *   record:      header [TSC low, TSC high] word 1 .. word n   (little-endian words)
 *
 * A file is a concatenation of per-CPU windows: a TRACE_CPU_CHANGE record (header
 * 0x2001f003, cpu, byte count) followed by that many bytes of that CPU's records. */
#ifndef VMXSIM_TRACE_XENTRACE_H
#define VMXSIM_TRACE_XENTRACE_H

#include <stdint.h>

#define XT_MAX_WORDS 7u
#define XT_EVENT_MASK 0x0fffffffu
#define XT_WORDS_SHIFT 28
#define XT_TSC_FLAG 0x80000000u
#define XT_CLASS_SHIFT 16
#define XT_SUBCLASS_SHIFT 12
/* Largest record: header, TSC and seven payload words. */
#define XT_MAX_RECORD_WORDS (1u + 2u + XT_MAX_WORDS)
/* pcpu numbers of TRACE_CPU_CHANGE must be below this (xenalyze's limit). */
#define XT_MAX_CPUS 256u

/* Class bits (the 12-bit class field), e.g. XT_CLASS_Hvm = 0x008. */
enum xt_class {
#define TRACE_CLASS(Name, Bits, Desc) XT_CLASS_##Name = (Bits),
#include "trace/events.def"
};

/* Event ids, e.g. XT_EV_VmxExit64 = 0x00081102. */
enum xt_event {
#define TRACE_EVENT(Name, Class, Subclass, Number, Tsc, MinWords, MaxWords, Str, Layout) \
  XT_EV_##Name = ((Class) << XT_CLASS_SHIFT) | ((Subclass) << XT_SUBCLASS_SHIFT) | (Number),
#include "trace/events.def"
};

/* Payload word counts, e.g. XT_WORDS_VmxExit64 = 3 (the maximum of the row). */
enum xt_event_words {
#define TRACE_EVENT(Name, Class, Subclass, Number, Tsc, MinWords, MaxWords, Str, Layout) \
  XT_WORDS_##Name = (MaxWords),
#include "trace/events.def"
};

/* Whether a producer stamps the record with the TSC. */
enum xt_tsc_rule { XT_TSC_Always = 0, XT_TSC_Never = 1, XT_TSC_Optional = 2 };
enum xt_event_tsc {
#define TRACE_EVENT(Name, Class, Subclass, Number, Tsc, MinWords, MaxWords, Str, Layout) \
  XT_TSCRULE_##Name = XT_TSC_##Tsc,
#include "trace/events.def"
};

/* The header word of a record with n payload words. */
static inline uint32_t xt_header(uint32_t event, unsigned n, int has_tsc) {
  return (event & XT_EVENT_MASK) | ((uint32_t)(n & 7u) << XT_WORDS_SHIFT) |
         (has_tsc ? XT_TSC_FLAG : 0u);
}
static inline uint32_t xt_header_event(uint32_t header) { return header & XT_EVENT_MASK; }
static inline unsigned xt_header_words(uint32_t header) {
  return (header >> XT_WORDS_SHIFT) & 7u;
}
static inline int xt_header_has_tsc(uint32_t header) { return (header & XT_TSC_FLAG) != 0; }
/* Size in 32-bit words of the record that starts with this header (1..10). */
static inline unsigned xt_record_words(uint32_t header) {
  return 1u + (xt_header_has_tsc(header) ? 2u : 0u) + xt_header_words(header);
}

/* Encodes one record at p (which must have room for xt_record_words words) and returns
 * the word after it. n > 7 is truncated to 7 (the hypervisor refuses such records). */
static inline uint32_t *xt_put(uint32_t *p, uint32_t event, int has_tsc, uint64_t tsc,
                               const uint32_t *words, unsigned n) {
  unsigned i;
  if (n > XT_MAX_WORDS)
    n = XT_MAX_WORDS;
  *p++ = xt_header(event, n, has_tsc);
  if (has_tsc) {
    *p++ = (uint32_t)tsc;
    *p++ = (uint32_t)(tsc >> 32);
  }
  for (i = 0; i < n; ++i)
    *p++ = words[i];
  return p;
}

/* The xen-3.0 flavour (format doc, section 11; docs/trace-flavours.md): Xen 3.0.3's
 * struct t_rec as a 64-bit hypervisor lays it out, 56 bytes, all little-endian:
 *   offset 0  TSC (64 bits)   8  event id (32 bits)   12  padding, 0
 *          16 five items of 64 bits (data[0] .. data[4])
 * In the hypervisor's ring the records follow each other; in a file each one is preceded
 * by the 32-bit pcpu number whose ring it came from (60 bytes a record), as Xen 3.0.3's
 * xentrace wrote them. No windows, no variable sizes, every record timed. */
#define XT30_ITEMS 5u
#define XT30_RECORD_BYTES 56u
#define XT30_FILE_RECORD_BYTES (4u + XT30_RECORD_BYTES)
#define XT30_RECORD_WORDS (XT30_RECORD_BYTES / 4u)
/* What Xen 3.0.3's vmx_trace_vmentry reset the trace_values slots to after each entry. */
#define XT30_SLOT_MARKER 9u

/* Event ids, e.g. XT30_EV_VmxVmentry = 0x00081002. */
enum xt30_event {
#define TRACE_XEN30_EVENT(Name, Class, Subclass, Number, Str, Layout) \
  XT30_EV_##Name = ((Class) << XT_CLASS_SHIFT) | ((Subclass) << XT_SUBCLASS_SHIFT) | (Number),
#include "trace/events.def"
};

/* Encodes one xen-3.0 record at p (XT30_RECORD_WORDS words) and returns the word after it. */
static inline uint32_t *xt30_put(uint32_t *p, uint32_t event, uint64_t tsc,
                                 const uint64_t *items) {
  unsigned i;
  *p++ = (uint32_t)tsc;
  *p++ = (uint32_t)(tsc >> 32);
  *p++ = event & XT_EVENT_MASK;
  *p++ = 0;
  for (i = 0; i < XT30_ITEMS; ++i) {
    *p++ = (uint32_t)items[i];
    *p++ = (uint32_t)(items[i] >> 32);
  }
  return p;
}

#endif /* VMXSIM_TRACE_XENTRACE_H */
