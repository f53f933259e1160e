/* The UART stream of the trace rings (trace/tbuf.h, "The UART stream"): on a machine
 * without vmxsim's drain (Bochs, QEMU/KVM, hardware) the core copies each ring's new
 * records out itself, as checksummed text frames on COM1, when the ring passes half full
 * and when the guest ends. `vmxsim trace import CAPTURE` rebuilds the XenTrace file.
 */
#include "vmx/tracestream.h"

#include "lib/io.h"
#include "lib/multiboot.h"
#include "lib/string.h"
#include "lib/spinlock.h"
#include "lib/uart.h"
#include "vmx/trace.h"
#include "vmx/vmx.h"

/* CRC-32, IEEE 802.3 polynomial reflected (0xedb88320), initial and final ~0: zlib's. */
static uint32_t crc32Update(uint32_t Crc, const uint8_t *P, uint32_t Len) {
  for (uint32_t I = 0; I < Len; ++I) {
    Crc ^= P[I];
    for (unsigned K = 0; K < 8; ++K)
      Crc = (Crc >> 1) ^ (0xedb88320u & (0u - (Crc & 1u)));
  }
  return Crc;
}

static void putHex(uint32_t V, unsigned MinDigits) {
  static const char Digits[] = "0123456789abcdef";
  char Buf[8];
  unsigned N = 0;
  do {
    Buf[N++] = Digits[V & 15];
    V >>= 4;
  } while (V && N < 8);
  while (N < MinDigits)
    Buf[N++] = '0';
  while (N)
    uartPutc(Buf[--N]);
}

/* Bytes of the record at P (trace/xentrace.h): the header's extra-word count and TSC
   flag; xen-3.0 records are all the same size. */
static uint32_t recordSize(const struct TraceBuffer *B, const uint32_t *P) {
  if (B->Format == XT_TBUF_FORMAT_XEN30)
    return XT30_RECORD_BYTES;
  uint32_t H = *P;
  return 4u * (1u + ((H >> 31) ? 2u : 0u) + ((H >> 28) & 7u));
}

static void frame(struct TraceBuffer *B, const uint8_t *Payload, uint32_t Len) {
  uint32_t Head[3] = {B->Shared->cpu, B->StreamSeq++, B->Format};
  uint32_t Crc = crc32Update(~0u, (const uint8_t *)Head, sizeof(Head));
  Crc = ~crc32Update(Crc, Payload, Len);
  uartWrite(XT_STREAM_MAGIC, sizeof(XT_STREAM_MAGIC) - 1);
  for (unsigned I = 0; I < 3; ++I) {
    putHex(Head[I], 1);
    uartPutc(' ');
  }
  for (uint32_t I = 0; I < Len; ++I)
    putHex(Payload[I], 2);
  uartPutc(' ');
  putHex(Crc, 8);
  uartPutc('\n');
}

void tbufStreamOut(struct TraceBuffer *B) {
  volatile struct xt_tbuf *T = B->Shared;
  if (!T)
    return;
  /* Whole records, at most XT_STREAM_MAX_PAYLOAD bytes a frame; a record never straddles
     the end of the ring (trace/tbuf.h), so a frame never needs to either. One frame at a
     time holds the console, so the lines of several CPUs never mix. */
  uint64_t Cons = T->cons, Prod = T->prod;
  const uint8_t *Data = (const uint8_t *)B->Data;
  while (Cons < Prod) {
    uint32_t Start = (uint32_t)(Cons % B->Size), Len = 0;
    while (Cons + Len < Prod && Start + Len < B->Size) {
      uint32_t R = recordSize(B, (const uint32_t *)(Data + Start + Len));
      if (Len + R > XT_STREAM_MAX_PAYLOAD)
        break;
      Len += R;
    }
    spinLock(&VmxConsoleLock);
    frame(B, Data + Start, Len);
    spinUnlock(&VmxConsoleLock);
    Cons += Len;
  }
  __asm__ volatile("" ::: "memory");
  T->cons = Cons;
}

void tbufStreamSetup(struct TraceBuffer *B, enum TraceStreamMode Mode) {
  B->StreamSeq = 0;
  bool NoDrain = inl(XT_TBUF_PORT_REGISTER) != XT_TBUF_DRAIN_ID;
  if (Mode == TraceStream_Uart || (Mode == TraceStream_Auto && NoDrain))
    B->Consume = tbufStreamOut;
}

bool tbufStreamOption(const char *Cmdline, enum TraceStreamMode *Mode) {
  static const struct {
    const char *Name;
    enum TraceStreamMode Mode;
  } Names[] = {{"off", TraceStream_Off}, {"auto", TraceStream_Auto}, {"uart", TraceStream_Uart}};
  const char *V;
  size_t Len;
  if (!cmdlineGetWord(Cmdline, "tstream", &V, &Len))
    return true;
  for (unsigned I = 0; I < sizeof(Names) / sizeof(Names[0]); ++I)
    if (strlen(Names[I].Name) == Len && !strncmp(V, Names[I].Name, Len)) {
      *Mode = Names[I].Mode;
      return true;
    }
  return false;
}
