/* The per-CPU trace buffers of a hypervisor running on vmxsim, and how the machine
 * drains them: the part of Xen's trace-buffer design (the hypervisor produces records
 * into per-CPU rings in its own memory, the xentrace daemon copies them out as
 * TRACE_CPU_CHANGE windows; /work/shared/docs/xentrace-format.md, section 1) that both
 * sides must agree on. Plain freestanding C11 like trace/xentrace.h: hvm/ includes it.
 *
 * Layout in guest-physical memory (little-endian, 64-byte aligned, below 4 GiB):
 *   offset 0   magic  XT_TBUF_MAGIC
 *          4   cpu    the pcpu number its records are written under (< XT_MAX_CPUS)
 *          8   size   bytes of the data area (a multiple of 4, 64 .. XT_TBUF_MAX_SIZE)
 *         12   format XT_TBUF_FORMAT_MODERN (0) or XT_TBUF_FORMAT_XEN30 (1): the records
 *                the ring holds (docs/trace-flavours.md)
 *         16   prod   bytes ever produced (free-running; the producer writes it)
 *         24   cons   bytes ever consumed (free-running; the consumer writes it)
 *         32   reserved, 0 (32 bytes)
 *         64   data   ring of `size` bytes: byte counter c lives at data[c % size]
 *
 * Rules (as Xen's __insert_record): a record never straddles the end of the ring; a
 * record that would is preceded by a WRAP_BUFFER padding record filling the rest of the
 * ring. prod is advanced after the record is complete. A record that does not fit in
 * the free space (size - (prod - cons)) is dropped and counted; the next record that
 * fits is preceded by LOST_RECORDS with the count. 0 <= prod - cons <= size always.
 * With XT_TBUF_FORMAT_XEN30 every record is a fixed-size xen-3.0 record
 * (XT30_RECORD_BYTES, trace/xentrace.h) and size is a multiple of it, so no record ever
 * straddles the end and there is no padding; a lost record is counted and reported in
 * Xen 3.0.3's TRC_LOST_RECORDS {count, 0, 0, 0, 0}. The machine writes each record into
 * the trace file behind the ring's cpu number instead of as a window.
 *
 * Ports (32-bit OUT; unassigned on other machines, so the same image runs anywhere):
 *   XT_TBUF_PORT_REGISTER  the physical address of a buffer: the machine drains it from
 *                          now on (at XT_TBUF_PORT_NOTIFY, and when the run ends)
 *   XT_TBUF_PORT_NOTIFY    a cpu number: its buffer passed half full; the machine copies
 *                          [cons, prod) into the trace file as one window and sets
 *                          cons = prod before the OUT instruction completes
 * A 32-bit IN from XT_TBUF_PORT_REGISTER returns XT_TBUF_DRAIN_ID when the machine drains
 * rings (vmxsim run --xentrace); an unassigned port reads all ones.
 *
 * The UART stream, for machines without the drain (Bochs, QEMU/KVM, hardware): the
 * producer copies [cons, prod) out itself, as text lines on its serial console, each
 * holding whole records of one ring:
 *   "@XT1 " cpu " " seq " " format " " payload " " crc "\n"
 * cpu, seq and format in lower-case hex without leading zeros (seq counts a CPU's frames
 * from 0), payload 2 lower-case hex digits per byte (at most XT_STREAM_MAX_PAYLOAD bytes,
 * a multiple of 4), crc the CRC-32 (IEEE 802.3, as zlib's crc32) of the 12 bytes cpu,
 * seq, format (32-bit little-endian each) followed by the payload, as 8 hex digits.
 * `vmxsim trace import CAPTURE` rebuilds the trace file from a capture of the console.
 */
#ifndef VMXSIM_TRACE_TBUF_H
#define VMXSIM_TRACE_TBUF_H

#include <stdint.h>

#define XT_TBUF_MAGIC 0x46425458u /* "XTBF" */
#define XT_TBUF_DATA_OFFSET 64u
#define XT_TBUF_MAX_SIZE (64u << 20)
#define XT_TBUF_PORT_REGISTER 0x0f10u
#define XT_TBUF_PORT_NOTIFY 0x0f14u
#define XT_TBUF_DRAIN_ID 0x4e524458u /* "XDRN" */
#define XT_STREAM_MAGIC "@XT1 "
#define XT_STREAM_MAX_PAYLOAD 192u
#define XT_TBUF_FORMAT_MODERN 0u
#define XT_TBUF_FORMAT_XEN30 1u

struct xt_tbuf {
  uint32_t magic;
  uint32_t cpu;
  uint32_t size;
  uint32_t format;
  uint64_t prod;
  uint64_t cons;
  uint64_t reserved1[4];
};

#define XT_TBUF_OFF_MAGIC 0u
#define XT_TBUF_OFF_CPU 4u
#define XT_TBUF_OFF_SIZE 8u
#define XT_TBUF_OFF_FORMAT 12u
#define XT_TBUF_OFF_PROD 16u
#define XT_TBUF_OFF_CONS 24u

#ifdef __cplusplus
static_assert(sizeof(struct xt_tbuf) == XT_TBUF_DATA_OFFSET, "trace buffer header size");
#else
_Static_assert(sizeof(struct xt_tbuf) == XT_TBUF_DATA_OFFSET, "trace buffer header size");
#endif

#endif /* VMXSIM_TRACE_TBUF_H */
