// The hypervisor core's trace-ring producer (hvm/vmx/tracebuf.c, protocol trace/tbuf.h),
// run on the host with a fake clock and port I/O, the test playing the consumer: every
// record arrives in order through many wraps; a consumer that drains late gets a
// LOST_RECORDS record with the exact count, who and first lost TSC (Xen's rule, format
// doc section 4); the padding before the ring's end is a valid WRAP_BUFFER record of
// every possible size (4 to 36 bytes) and the reader accepts the stream. The same for a
// ring switched to the xen-3.0 flavour's fixed-size records (docs/trace-flavours.md).
#include "trace/reader.h"
#include "trace/writer.h"
#include "vmx/tracebuf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace vmxsim::trace;

namespace {

alignas(64) uint8_t RingMem[XT_TBUF_DATA_OFFSET + HVM_TBUF_DATA_BYTES];
uint64_t Clock = 1000;
bool Draining = true;
unsigned Notifies = 0;
uint32_t RegisteredAt = 0;
MemoryOutput *Out = nullptr;
TraceWriter *Writer = nullptr;

xt_tbuf &header() { return *reinterpret_cast<xt_tbuf *>(RingMem); }

/// What the machine's drain does: [cons, prod) as one window, then cons = prod.
void drain() {
  xt_tbuf &H = header();
  const uint32_t Bytes = uint32_t(H.prod - H.cons);
  std::vector<uint8_t> Copy(Bytes);
  const uint8_t *Data = RingMem + XT_TBUF_DATA_OFFSET;
  for (uint32_t I = 0; I < Bytes; ++I)
    Copy[I] = Data[(H.cons + I) % H.size];
  if (H.format == XT_TBUF_FORMAT_XEN30)
    Writer->writeXen30Records(0, Copy.data(), Bytes);
  else
    Writer->writeWindow(0, Copy.data(), Bytes);
  H.cons = H.prod;
}

struct Fixture {
  TraceBuffer B{};
  MemoryOutput O;
  TraceWriter W{O, 1};
  Fixture() {
    std::memset(RingMem, 0xcc, sizeof(RingMem));
    Clock = 1000;
    Draining = true;
    Notifies = 0;
    Out = &O;
    Writer = &W;
    tbufInit(&B, RingMem, 0);
  }
  ~Fixture() {
    Out = nullptr;
    Writer = nullptr;
  }
  void put(uint32_t Event, bool Timed, std::initializer_list<uint32_t> Words) {
    std::vector<uint32_t> V(Words);
    tbufPut(&B, Event, Timed, V.data(), unsigned(V.size()));
  }
  std::vector<TraceRecord> records(ReadOrder Order, TraceError *Err = nullptr) {
    drain();
    W.flush();
    TraceReader R(Order);
    R.openMemory(O.Bytes.data(), O.Bytes.size());
    std::vector<TraceRecord> V;
    TraceRecord Rec;
    while (R.next(Rec))
      V.push_back(Rec);
    EXPECT_FALSE(R.failed()) << R.error().str();
    if (Err)
      *Err = R.error();
    return V;
  }
};

} // namespace

extern "C" uint64_t rdtsc(void) { return Clock += 10; }

extern "C" void outl(uint16_t Port, uint32_t Value) {
  if (Port == XT_TBUF_PORT_REGISTER)
    RegisteredAt = Value;
  if (Port == XT_TBUF_PORT_NOTIFY) {
    ++Notifies;
    if (Draining && Writer)
      drain();
  }
}

TEST(HypervisorTraceRing, RegistersAndEveryRecordArrivesInOrderThroughManyWraps) {
  Fixture F;
  EXPECT_EQ(RegisteredAt, uint32_t(uintptr_t(RingMem)));
  EXPECT_EQ(header().magic, XT_TBUF_MAGIC);
  EXPECT_EQ(header().size, HVM_TBUF_DATA_BYTES);
  // 6,000 exits of VMX_EXIT64 (24 bytes), CPUID (28) and VMENTRY (12), every 7th with a
  // HLT record (8) so that records straddle the ring's end: 390 KB, six times the ring.
  for (uint32_t I = 0; I < 6000; ++I) {
    F.put(XT_EV_VmxExit64, true, {10, I, 0});
    F.put(XT_EV_Cpuid, false, {I, 0, 1, 2, 3, 4});
    if (I % 7 == 0)
      F.put(XT_EV_Hlt, false, {I});
    F.put(XT_EV_VmEntry, true, {});
  }
  EXPECT_GE(Notifies, 10u);
  std::vector<TraceRecord> R = F.records(ReadOrder::Merged);
  ASSERT_EQ(R.size(), 18000u + 858u);
  std::erase_if(R, [](const TraceRecord &X) { return X.Event == XT_EV_Hlt; });
  uint64_t Tsc = 1000;
  for (uint32_t I = 0; I < 6000; ++I) {
    const TraceRecord &X = R[3 * I], &C = R[3 * I + 1], &E = R[3 * I + 2];
    ASSERT_EQ(X.Event, uint32_t(XT_EV_VmxExit64));
    EXPECT_EQ(X.Words[1], I);
    EXPECT_EQ(X.Tsc, Tsc += 10);
    ASSERT_EQ(C.Event, uint32_t(XT_EV_Cpuid));
    EXPECT_EQ(C.Words[0], I);
    EXPECT_FALSE(C.HasTsc);
    ASSERT_EQ(E.Event, uint32_t(XT_EV_VmEntry));
    EXPECT_EQ(E.Tsc, Tsc += 10);
  }
  // 390,864 bytes of records went round the 65,536-byte ring five times; once a record
  // straddled the end and was preceded by 8 bytes of padding, the other times the ring
  // ended on a record boundary.
  unsigned Pads = 0;
  for (const TraceRecord &W : F.records(ReadOrder::File))
    if (W.Event == XT_EV_WrapBuffer) {
      ++Pads;
      EXPECT_EQ(W.NumWords, 1u);
      EXPECT_FALSE(W.HasTsc);
    }
  EXPECT_EQ(Pads, 1u);
  EXPECT_EQ(header().prod, 6000u * 64u + 858u * 8u + 8u);
}

TEST(HypervisorTraceRing, LateConsumerGetsLostRecordsWithExactCountWhoAndFirstTsc) {
  Fixture F;
  Draining = false; // the consumer sleeps through the notification
  // 24-byte records: 2,730 fill 65,520 bytes; the next 16 bytes cannot hold one.
  for (uint32_t I = 0; I < 3000; ++I)
    F.put(XT_EV_VmxExit64, true, {10, I, 0});
  EXPECT_EQ(Notifies, 1u); // once per consumer position
  EXPECT_EQ(header().prod, 2730u * 24u);
  const uint64_t FirstLostTsc = 1000 + 10 * 2731;
  drain(); // the consumer wakes up
  Draining = true;
  F.put(XT_EV_VmEntry, true, {});
  const std::vector<TraceRecord> R = F.records(ReadOrder::File);
  // ... 2,730 exits, then (second window) 16 bytes of padding, LOST_RECORDS, VMENTRY.
  ASSERT_EQ(R.size(), 1u + 2730u + 1u + 1u + 1u + 1u);
  const TraceRecord &Pad = R[2732], &Lost = R[2733], &Entry = R[2734];
  EXPECT_EQ(Pad.Event, uint32_t(XT_EV_WrapBuffer));
  EXPECT_EQ(Pad.NumWords, 3u);
  EXPECT_FALSE(Pad.HasTsc);
  ASSERT_EQ(Lost.Event, uint32_t(XT_EV_LostRecords));
  EXPECT_EQ(Lost.Words[0], 270u);       // 3,000 - 2,730
  EXPECT_EQ(Lost.Words[1], 1u);         // domain 1, vcpu 0 (LOST_RECORDS: dom in 0-15)
  EXPECT_EQ(uint64_t(Lost.Words[2]) | uint64_t(Lost.Words[3]) << 32, FirstLostTsc);
  EXPECT_TRUE(Lost.HasTsc);
  EXPECT_EQ(Entry.Event, uint32_t(XT_EV_VmEntry));
  EXPECT_GT(Entry.Tsc, Lost.Tsc);
  TraceReader Reader;
  Reader.openMemory(F.O.Bytes.data(), F.O.Bytes.size());
  TraceRecord Rec;
  while (Reader.next(Rec)) {
  }
  EXPECT_EQ(Reader.lostRecords(), 270u);
}

TEST(HypervisorTraceRing, PaddingOfEverySizeIsAValidWrapRecord) {
  for (uint32_t Gap = 4; Gap <= 36; Gap += 4) {
    Fixture F;
    // 4-byte records (NMI) up to Gap bytes before the end, then a 40-byte record.
    const uint32_t Fill = (HVM_TBUF_DATA_BYTES - Gap) / 4;
    for (uint32_t I = 0; I < Fill; ++I)
      F.put(XT_EV_Nmi, false, {});
    F.put(XT_EV_VmxExit64, true, {1, 2, 3, 4, 5, 6, 7});
    TraceError Err;
    const std::vector<TraceRecord> R = F.records(ReadOrder::File, &Err);
    const TraceRecord *Pad = nullptr;
    for (const TraceRecord &X : R)
      if (X.Event == XT_EV_WrapBuffer)
        Pad = &X;
    ASSERT_NE(Pad, nullptr) << "gap " << Gap;
    const uint32_t Bytes = 4 + (Pad->HasTsc ? 8 : 0) + 4 * Pad->NumWords;
    EXPECT_EQ(Bytes, Gap);
    EXPECT_EQ(Pad->HasTsc, Gap == 36) << "7 words hold 32 bytes; 36 needs the TSC";
    EXPECT_EQ(R.back().Event, uint32_t(XT_EV_VmxExit64));
    EXPECT_EQ(R.back().NumWords, 7u);
  }
}

TEST(HypervisorTraceRing, Xen30RingHoldsWholeRecordsThroughManyWraps) {
  Fixture F;
  tbufSetFormat(&F.B, XT_TBUF_FORMAT_XEN30);
  EXPECT_EQ(RegisteredAt, uint32_t(uintptr_t(RingMem)));
  EXPECT_EQ(header().format, XT_TBUF_FORMAT_XEN30);
  EXPECT_EQ(header().size, 65520u); // 1,170 records of 56 bytes
  // 3,000 exits: 6,000 records, 336,000 bytes, five times round the ring.
  for (uint64_t I = 0; I < 3000; ++I) {
    const uint64_t Zero[XT30_ITEMS] = {}, Slots[XT30_ITEMS] = {30, I, 1, 2, ~I};
    tbufPut30(&F.B, XT30_EV_VmxVmexit, Zero);
    tbufPut30(&F.B, XT30_EV_VmxVmentry, Slots);
  }
  EXPECT_GE(Notifies, 10u);
  const std::vector<TraceRecord> R = F.records(ReadOrder::Merged);
  ASSERT_EQ(R.size(), 6000u);
  EXPECT_EQ(F.O.Bytes.size(), 6000u * XT30_FILE_RECORD_BYTES);
  uint64_t Tsc = 1000;
  for (uint64_t I = 0; I < 3000; ++I) {
    const TraceRecord &X = R[2 * I], &E = R[2 * I + 1];
    ASSERT_EQ(X.Flavour, TraceFlavour::Xen30);
    ASSERT_EQ(X.Event, uint32_t(XT30_EV_VmxVmexit));
    EXPECT_EQ(X.Tsc, Tsc += 10);
    EXPECT_EQ(X.Items[1], 0u);
    ASSERT_EQ(E.Event, uint32_t(XT30_EV_VmxVmentry));
    EXPECT_EQ(E.Tsc, Tsc += 10);
    EXPECT_EQ(E.Items[1], I);
    EXPECT_EQ(E.Items[4], ~I);
  }
  EXPECT_EQ(header().prod, 6000u * XT30_RECORD_BYTES);
}

TEST(HypervisorTraceRing, Xen30LateConsumerGetsLostRecordsWithExactCount) {
  Fixture F;
  tbufSetFormat(&F.B, XT_TBUF_FORMAT_XEN30);
  Draining = false;
  const uint64_t Zero[XT30_ITEMS] = {};
  for (unsigned I = 0; I < 1200; ++I)
    tbufPut30(&F.B, XT30_EV_VmxVmexit, Zero);
  EXPECT_EQ(Notifies, 1u);
  EXPECT_EQ(header().prod, 1170u * XT30_RECORD_BYTES);
  drain();
  Draining = true;
  const uint64_t Slots[XT30_ITEMS] = {12, 9, 9, 9, 9};
  tbufPut30(&F.B, XT30_EV_VmxVmentry, Slots);
  const std::vector<TraceRecord> R = F.records(ReadOrder::File);
  ASSERT_EQ(R.size(), 1170u + 2u);
  const TraceRecord &Lost = R[1170], &Entry = R[1171];
  ASSERT_EQ(Lost.Event, uint32_t(XT30_EV_LostRecords));
  EXPECT_EQ(Lost.Items[0], 30u); // 1,200 - 1,170
  EXPECT_EQ(Lost.Items[1], 0u);
  EXPECT_EQ(Entry.Event, uint32_t(XT30_EV_VmxVmentry));
  EXPECT_EQ(Entry.Items[0], 12u);
  EXPECT_GT(Entry.Tsc, Lost.Tsc);
}
