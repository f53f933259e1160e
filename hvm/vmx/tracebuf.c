#include "vmx/tracebuf.h"

#include "lib/io.h"

/* The ring passed half full: tell the machine's drain, or consume it here. */
static void notify(struct TraceBuffer *B) {
  if (B->Consume)
    B->Consume(B);
  else
    outl(XT_TBUF_PORT_NOTIFY, B->Shared->cpu);
}

static uint32_t recordBytes(int Timed, unsigned NumWords) {
  return 4u * (1u + (Timed ? 2u : 0u) + NumWords);
}

void tbufInit(struct TraceBuffer *B, void *Mem, uint32_t Cpu) {
  volatile struct xt_tbuf *T = (volatile struct xt_tbuf *)Mem;
  T->magic = XT_TBUF_MAGIC;
  T->cpu = Cpu;
  T->size = HVM_TBUF_DATA_BYTES;
  T->format = XT_TBUF_FORMAT_MODERN;
  T->prod = 0;
  T->cons = 0;
  for (unsigned I = 0; I < 4; ++I)
    T->reserved1[I] = 0;
  B->Shared = T;
  B->Data = (uint32_t *)((uint8_t *)Mem + XT_TBUF_DATA_OFFSET);
  B->Size = HVM_TBUF_DATA_BYTES;
  B->Off = 0;
  B->Prod = 0;
  B->LastTsc = 0;
  B->NotifiedCons = ~0ull;
  B->Lost = 0;
  B->FirstLostTsc = 0;
  B->Who = 1u | (Cpu << 16); /* d1v<cpu>: one vCPU of domain 1 per pcpu */
  B->Format = XT_TBUF_FORMAT_MODERN;
  B->Consume = 0;
  outl(XT_TBUF_PORT_REGISTER, (uint32_t)(uintptr_t)Mem);
}

/* Writes one record at the producer position, which the caller has checked has room
   before the end of the ring. The consumer sees it only when prod is published. */
static void emit(struct TraceBuffer *B, uint32_t Event, int Timed, uint64_t Tsc,
                 const uint32_t *Words, unsigned NumWords) {
  uint32_t *End = xt_put(B->Data + B->Off / 4u, Event, Timed, Tsc, Words, NumWords);
  uint32_t Bytes = 4u * (uint32_t)(End - (B->Data + B->Off / 4u));
  B->Prod += Bytes;
  B->Off += Bytes;
  if (B->Off == B->Size)
    B->Off = 0;
}

/* Room for Bytes at the producer position: padding to the end of the ring first if the
   record would straddle it. Returns 0 when the free space is too small. */
static int makeRoom(struct TraceBuffer *B, uint64_t Cons, uint32_t Bytes) {
  uint32_t ToEnd = B->Size - B->Off;
  uint32_t Pad = Bytes > ToEnd ? ToEnd : 0;
  if (B->Prod - Cons + Pad + Bytes > B->Size)
    return 0;
  if (Pad) {
    /* A WRAP_BUFFER record of exactly Pad bytes (4..36): with the TSC flag when 7
       words are not enough; its TSC repeats the last one, so TSCs never go back. */
    static const uint32_t Zero[XT_MAX_WORDS];
    int Timed = Pad > 4u * (1u + XT_MAX_WORDS);
    emit(B, XT_EV_WrapBuffer, Timed, B->LastTsc, Zero, (Pad - recordBytes(Timed, 0)) / 4u);
  }
  return 1;
}

void tbufPut(struct TraceBuffer *B, uint32_t Event, int Timed, const uint32_t *Words,
             unsigned NumWords) {
  volatile struct xt_tbuf *T = B->Shared;
  if (!T)
    return;
  uint64_t Cons = T->cons;
  uint64_t Tsc;
  if (B->Lost) {
    /* Xen's LOST_RECORDS: count, who, TSC of the first lost record; timed. */
    uint32_t W[4] = {(uint32_t)B->Lost, B->Who, (uint32_t)B->FirstLostTsc,
                     (uint32_t)(B->FirstLostTsc >> 32)};
    Tsc = rdtsc();
    if (!makeRoom(B, Cons, recordBytes(1, 4)))
      goto drop;
    emit(B, XT_EV_LostRecords, 1, Tsc, W, 4);
    B->LastTsc = Tsc;
    B->Lost = 0;
  }
  /* Read after LOST_RECORDS's, so a CPU's TSCs never decrease. */
  Tsc = Timed ? rdtsc() : B->LastTsc;
  if (!makeRoom(B, Cons, recordBytes(Timed, NumWords)))
    goto drop;
  emit(B, Event, Timed, Tsc, Words, NumWords);
  if (Timed)
    B->LastTsc = Tsc;
  /* Publish the record, then tell the consumer once per consumer position when the
     ring is half full. */
  __asm__ volatile("" ::: "memory");
  T->prod = B->Prod;
  if (B->Prod - Cons >= B->Size / 2 && B->NotifiedCons != Cons) {
    B->NotifiedCons = Cons;
    notify(B);
  }
  return;
drop:
  if (B->Lost++ == 0)
    B->FirstLostTsc = Tsc;
  __asm__ volatile("" ::: "memory");
  T->prod = B->Prod; /* a LOST_RECORDS or padding written before the failure is valid */
}

void tbufSetFormat(struct TraceBuffer *B, uint32_t Format) {
  volatile struct xt_tbuf *T = B->Shared;
  if (!T)
    return;
  /* Fixed-size records never straddle the end of a ring that holds a whole number of
     them, so the xen-3.0 ring needs no padding records. */
  uint32_t Size = HVM_TBUF_DATA_BYTES;
  if (Format == XT_TBUF_FORMAT_XEN30)
    Size -= HVM_TBUF_DATA_BYTES % XT30_RECORD_BYTES;
  T->format = Format;
  T->size = Size;
  B->Format = Format;
  B->Size = Size;
  outl(XT_TBUF_PORT_REGISTER, (uint32_t)(uintptr_t)T);
}

static void emit30(struct TraceBuffer *B, uint32_t Event, const uint64_t *Items) {
  uint64_t Tsc = rdtsc();
  xt30_put(B->Data + B->Off / 4u, Event, Tsc, Items);
  B->Prod += XT30_RECORD_BYTES;
  B->Off += XT30_RECORD_BYTES;
  if (B->Off == B->Size)
    B->Off = 0;
}

void tbufPut30(struct TraceBuffer *B, uint32_t Event, const uint64_t *Items) {
  volatile struct xt_tbuf *T = B->Shared;
  if (!T)
    return;
  uint64_t Cons = T->cons;
  uint64_t Need = XT30_RECORD_BYTES * (B->Lost ? 2u : 1u);
  if (B->Prod - Cons + Need > B->Size) {
    ++B->Lost;
    return;
  }
  if (B->Lost) {
    const uint64_t L[XT30_ITEMS] = {B->Lost, 0, 0, 0, 0};
    emit30(B, XT30_EV_LostRecords, L);
    B->Lost = 0;
  }
  emit30(B, Event, Items);
  __asm__ volatile("" ::: "memory");
  T->prod = B->Prod;
  if (B->Prod - Cons >= B->Size / 2 && B->NotifiedCons != Cons) {
    B->NotifiedCons = Cons;
    notify(B);
  }
}
