// The trace-buffer drain (harness/devices/trace_buffers.h): a hypervisor's per-CPU ring
// in guest memory (trace/tbuf.h) copied into a XenTrace file as TRACE_CPU_CHANGE
// windows, the consumer index written back, rings that wrap copied in two pieces, and
// guest nonsense refused with a reason instead of a crash or a bad copy; xen-3.0 rings
// (docs/trace-flavours.md) copied as records behind their CPU number, one flavour a file.
#include "harness/devices/trace_buffers.h"
#include "trace/tbuf.h"
#include "trace/writer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::trace;

namespace {

constexpr uint64_t kRing = 0x10000;
constexpr uint32_t kSize = 256;

struct DrainFixture {
  PhysMem Mem{1 << 20};
  MemoryOutput Out;
  TraceWriter Writer{Out, 2};
  TraceBufferDrain Drain{Mem, Writer};

  void header(uint32_t Cpu, uint32_t Size, uint64_t Prod, uint64_t Cons,
              uint32_t Magic = XT_TBUF_MAGIC, uint64_t At = kRing,
              uint32_t Format = XT_TBUF_FORMAT_MODERN) {
    xt_tbuf H{};
    H.format = Format;
    H.magic = Magic;
    H.cpu = Cpu;
    H.size = Size;
    H.prod = Prod;
    H.cons = Cons;
    ASSERT_TRUE(Mem.copyIn(Hpa(At), &H, sizeof(H)));
  }
  /// Writes Words at ring byte counter Pos (modulo the size).
  void data(uint64_t Pos, const std::vector<uint32_t> &Words, uint64_t At = kRing) {
    for (uint32_t W : Words) {
      ASSERT_TRUE(Mem.copyIn(Hpa(At + XT_TBUF_DATA_OFFSET + Pos % kSize), &W, 4));
      Pos += 4;
    }
  }
  uint64_t cons(uint64_t At = kRing) { return Mem.read(Hpa(At + XT_TBUF_OFF_CONS), 8); }
  void reg(uint64_t At = kRing) { Drain.ioWrite(XT_TBUF_PORT_REGISTER, 4, uint32_t(At)); }
  void notify(uint32_t Cpu) { Drain.ioWrite(XT_TBUF_PORT_NOTIFY, 4, Cpu); }
};

std::vector<uint32_t> words(const std::vector<uint8_t> &B) {
  std::vector<uint32_t> W(B.size() / 4);
  std::memcpy(W.data(), B.data(), W.size() * 4);
  return W;
}

} // namespace

TEST(TraceBuffers, NotifyCopiesPendingRecordsAsOneWindowAndAdvancesCons) {
  DrainFixture F;
  const std::vector<uint32_t> Rec = {xt_header(XT_EV_VmEntry, 0, 1), 0x1000, 0,
                                     xt_header(XT_EV_Vmmcall, 1, 0), 7};
  F.header(1, kSize, 20, 0);
  F.data(0, Rec);
  F.reg();
  EXPECT_TRUE(F.Out.Bytes.empty());
  F.notify(1);
  std::vector<uint32_t> Expect = {xt_header(XT_EV_TraceCpuChange, 2, 0), 1, 20};
  Expect.insert(Expect.end(), Rec.begin(), Rec.end());
  EXPECT_EQ(words(F.Out.Bytes), Expect);
  EXPECT_EQ(F.cons(), 20u);
  EXPECT_EQ(F.Drain.bytesDrained(), 20u);
  // Nothing new: no empty window.
  F.notify(1);
  EXPECT_EQ(F.Out.Bytes.size(), Expect.size() * 4);
  EXPECT_TRUE(F.Drain.problems().empty());
}

TEST(TraceBuffers, WrappedRingIsCopiedInTwoPiecesInProducerOrder) {
  DrainFixture F;
  // cons at counter 3 * kSize - 8: two words before the end, two after the start.
  const uint64_t Cons = 3 * kSize - 8;
  F.header(0, kSize, Cons + 16, Cons);
  F.data(Cons, {0x11, 0x22, 0x33, 0x44});
  F.reg();
  F.Drain.drainAll();
  EXPECT_EQ(words(F.Out.Bytes),
            (std::vector<uint32_t>{xt_header(XT_EV_TraceCpuChange, 2, 0), 0, 16, 0x11, 0x22,
                                   0x33, 0x44}));
  EXPECT_EQ(F.cons(), Cons + 16);
}

TEST(TraceBuffers, NotifyForUnregisteredOrUnknownCpuDoesNothing) {
  DrainFixture F;
  F.header(0, kSize, 8, 0);
  F.reg();
  F.notify(1);  // no ring
  F.notify(77); // no such CPU
  F.Drain.ioWrite(XT_TBUF_PORT_NOTIFY, 1, 0); // not a 32-bit write
  EXPECT_TRUE(F.Out.Bytes.empty());
  EXPECT_EQ(F.cons(), 0u);
}

TEST(TraceBuffers, BadRegistrationsAreRefusedWithAReason) {
  struct Case {
    uint32_t Magic, Cpu, Size;
    uint64_t At;
    const char *Why;
  } const Cases[] = {
      {0x12345678, 0, kSize, kRing, "trace buffer at 0x10000: magic 0x12345678, not 0x46425458"},
      {XT_TBUF_MAGIC, 2, kSize, kRing, "trace buffer at 0x10000: cpu 2 but the machine has 2"},
      {XT_TBUF_MAGIC, 0, 6, kRing,
       "trace buffer at 0x10000: data area of 6 bytes is not 64..67108864 bytes of RAM in "
       "whole words"},
      {XT_TBUF_MAGIC, 0, 4096, 0xfffc0,
       "trace buffer at 0xfffc0: data area of 4096 bytes is not 64..67108864 bytes of RAM "
       "in whole words"},
      {XT_TBUF_MAGIC, 0, kSize, kRing + 4, "trace buffer at 0x10004: not 64-byte aligned RAM"},
  };
  for (const Case &C : Cases) {
    DrainFixture F;
    F.header(C.Cpu, C.Size, 8, 0, C.Magic, C.At & ~63ull);
    F.reg(C.At);
    F.notify(0);
    F.Drain.drainAll();
    ASSERT_EQ(F.Drain.problems().size(), 1u) << C.Why;
    EXPECT_EQ(F.Drain.problems()[0], C.Why);
    EXPECT_TRUE(F.Out.Bytes.empty());
  }
  DrainFixture F;
  F.reg(0x20000000); // beyond RAM
  EXPECT_EQ(F.Drain.problems().at(0), "trace buffer at 0x20000000: not 64-byte aligned RAM");
}

TEST(TraceBuffers, CorruptIndicesAfterRegistrationGiveTheRingUp) {
  DrainFixture F;
  F.header(0, kSize, 8, 0);
  F.reg();
  F.header(0, kSize, 0, 8); // prod behind cons
  F.notify(0);
  ASSERT_EQ(F.Drain.problems().size(), 1u);
  EXPECT_EQ(F.Drain.problems()[0],
            "trace buffer at 0x10000: prod 0x0 and cons 0x8 are more than the size 0x100 apart");
  // Given up: a later, valid state is no longer drained.
  F.header(0, kSize, 8, 0);
  F.notify(0);
  EXPECT_TRUE(F.Out.Bytes.empty());

  DrainFixture G;
  G.header(0, kSize, 8, 0);
  G.reg();
  G.header(0, kSize, kSize + 4, 0); // more than the ring holds
  G.Drain.drainAll();
  EXPECT_EQ(G.Drain.problems().size(), 1u);
  DrainFixture H;
  H.header(0, kSize, 8, 0);
  H.reg();
  H.header(0, kSize, 6, 0); // not whole words
  H.Drain.drainAll();
  EXPECT_EQ(H.Drain.problems().at(0), "trace buffer at 0x10000: 6 bytes pending, not whole words");
  DrainFixture K;
  K.header(0, kSize, 8, 0);
  K.reg();
  K.header(1, kSize, 8, 0); // cpu changed
  K.Drain.drainAll();
  EXPECT_EQ(K.Drain.problems().at(0),
            "trace buffer at 0x10000: magic, cpu, size or format changed after registration");
}

TEST(TraceBuffers, ReRegisteringACpuDrainsTheOldRingFirst) {
  DrainFixture F;
  F.header(0, kSize, 4, 0);
  F.data(0, {xt_header(XT_EV_Nmi, 0, 0)});
  F.reg();
  const uint64_t Second = kRing + 0x1000;
  F.header(0, kSize, 0, 0, XT_TBUF_MAGIC, Second);
  F.reg(Second);
  EXPECT_EQ(words(F.Out.Bytes), (std::vector<uint32_t>{xt_header(XT_EV_TraceCpuChange, 2, 0),
                                                       0, 4, xt_header(XT_EV_Nmi, 0, 0)}));
  EXPECT_EQ(F.cons(), 4u);
}

TEST(TraceBuffers, Xen30RingIsCopiedAsRecordsEachBehindItsCpu) {
  DrainFixture F;
  constexpr uint32_t kSize30 = 4 * XT30_RECORD_BYTES;
  uint32_t Recs[2][XT30_RECORD_WORDS];
  const uint64_t Zero[XT30_ITEMS] = {}, Slots[XT30_ITEMS] = {10, 1, 0, 9, 9};
  xt30_put(Recs[0], XT30_EV_VmxVmexit, 0x1000, Zero);
  xt30_put(Recs[1], XT30_EV_VmxVmentry, 0x1400, Slots);
  F.header(1, kSize30, 2 * XT30_RECORD_BYTES, 0, XT_TBUF_MAGIC, kRing, XT_TBUF_FORMAT_XEN30);
  ASSERT_TRUE(F.Mem.copyIn(Hpa(kRing + XT_TBUF_DATA_OFFSET), Recs, sizeof(Recs)));
  F.reg();
  F.notify(1);
  std::vector<uint32_t> Expect;
  for (const auto &R : Recs) {
    Expect.push_back(1);
    Expect.insert(Expect.end(), std::begin(R), std::end(R));
  }
  EXPECT_EQ(words(F.Out.Bytes), Expect);
  EXPECT_EQ(F.cons(), 2u * XT30_RECORD_BYTES);
  EXPECT_TRUE(F.Drain.problems().empty());
}

TEST(TraceBuffers, Xen30RingOfBadSizeOrFormatOrSecondFlavourIsGivenUp) {
  {
    DrainFixture F;
    F.header(0, 256, 0, 0, XT_TBUF_MAGIC, kRing, XT_TBUF_FORMAT_XEN30);
    F.reg();
    ASSERT_EQ(F.Drain.problems().size(), 1u);
    EXPECT_EQ(F.Drain.problems()[0], "trace buffer at 0x10000: xen-3.0 data area of 256 "
                                     "bytes is not a whole number of 56-byte records");
  }
  {
    DrainFixture F;
    F.header(0, 256, 0, 0, XT_TBUF_MAGIC, kRing, 7);
    F.reg();
    ASSERT_EQ(F.Drain.problems().size(), 1u);
    EXPECT_EQ(F.Drain.problems()[0],
              "trace buffer at 0x10000: format 7 is neither 0 (modern) nor 1 (xen-3.0)");
  }
  {
    // CPU 0 modern, then CPU 1 xen-3.0: the second is refused, the file stays modern.
    DrainFixture F;
    F.header(0, kSize, 12, 0);
    F.data(0, {xt_header(XT_EV_VmEntry, 0, 1), 5, 0});
    F.reg();
    F.notify(0);
    const uint64_t Other = kRing + 0x1000;
    const uint64_t Zero[XT30_ITEMS] = {};
    uint32_t Rec[XT30_RECORD_WORDS];
    xt30_put(Rec, XT30_EV_VmxVmexit, 9, Zero);
    F.header(1, XT30_RECORD_BYTES * 2, XT30_RECORD_BYTES, 0, XT_TBUF_MAGIC, Other,
             XT_TBUF_FORMAT_XEN30);
    ASSERT_TRUE(F.Mem.copyIn(Hpa(Other + XT_TBUF_DATA_OFFSET), Rec, sizeof(Rec)));
    F.reg(Other);
    const size_t Before = F.Out.Bytes.size();
    F.notify(1);
    EXPECT_EQ(F.Out.Bytes.size(), Before);
    ASSERT_EQ(F.Drain.problems().size(), 1u);
    EXPECT_EQ(F.Drain.problems()[0], "trace buffer at 0x11000: ring of format 1 in a trace "
                                     "file of format 0: one file holds one flavour");
  }
}
