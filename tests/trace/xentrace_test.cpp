// The XenTrace format (/work/shared/docs/xentrace-format.md): the writer's exact bytes,
// the round trip of every record shape through the reader, merging by TSC, lost records,
// and the reader's errors on corrupt, truncated and empty files.
#include "trace_test_util.h"

#include "trace/dump.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace vmxsim::trace;
using namespace vmxsim::trace::testing;

namespace {

std::vector<uint8_t> bytesOfWords(std::initializer_list<uint32_t> Words) {
  std::vector<uint8_t> B;
  for (uint32_t W : Words)
    for (unsigned I = 0; I < 4; ++I)
      B.push_back(uint8_t(W >> (8 * I)));
  return B;
}

// The worked example of the format doc, section 2.
std::vector<uint8_t> workedExample() {
  MemoryOutput Out;
  TraceWriter W(Out, 1);
  const uint32_t Who[1] = {0x00010000};
  W.recordTsc(0, XT_EV_RunstateRunnableToRunning, 0x12345670000, Who);
  W.recordTsc(0, XT_EV_VmEntry, 0x12345670100, nullptr, 0);
  const uint32_t Exit[3] = {10, 0x81001234, 0xffffffff};
  W.recordTsc(0, XT_EV_VmxExit64, 0x12345679000, Exit);
  const uint32_t Cpuid[6] = {1, 0, 0x000906ea, 0x00100800, 0x7ffafbbf, 0xbfebfbff};
  W.record(0, XT_EV_Cpuid, Cpuid);
  W.recordTsc(0, XT_EV_VmEntry, 0x12345679800, nullptr, 0);
  W.flush();
  return Out.Bytes;
}

} // namespace

TEST(XenTraceFormat, WriterProducesTheWorkedExampleByteForByte) {
  EXPECT_EQ(workedExample(),
            bytesOfWords({0x2001f003, 0, 0x5c,                                     //
                          0x90021101, 0x45670000, 0x123, 0x00010000,               //
                          0x80081001, 0x45670100, 0x123,                           //
                          0xb0081102, 0x45679000, 0x123, 10, 0x81001234, 0xffffffff, //
                          0x6008200e, 1, 0, 0x000906ea, 0x00100800, 0x7ffafbbf, 0xbfebfbff,
                          0x80081001, 0x45679800, 0x123}));
}

TEST(XenTraceFormat, ReaderDecodesTheWorkedExampleWithInheritedTsc) {
  bool Failed = true;
  auto Recs = readAll(workedExample(), ReadOrder::Merged, nullptr, &Failed);
  EXPECT_FALSE(Failed);
  ASSERT_EQ(Recs.size(), 5u);
  EXPECT_EQ(Recs[2].Event, uint32_t(XT_EV_VmxExit64));
  EXPECT_EQ(Recs[2].Offset, 0x28u);
  EXPECT_EQ(Recs[3].Event, uint32_t(XT_EV_Cpuid));
  EXPECT_FALSE(Recs[3].HasTsc);
  EXPECT_EQ(Recs[3].Tsc, 0x12345679000u);
  EXPECT_EQ(Recs[3].NumWords, 6);
  EXPECT_EQ(Recs[3].Words[5], 0xbfebfbffu);
  EXPECT_EQ(Recs[4].Tsc - Recs[2].Tsc, 2048u);
  EXPECT_EQ(formatRecord(Recs[2], 0x8f00),
            "CPU0 1250999898112 +36608 VMX_EXIT64 reason=10(Cpuid) rip=0xffffffff81001234");
}

TEST(XenTraceFormat, EveryRecordShapeRoundTripsInFileOrder) {
  // Re-encode what the reader returns and compare with the file: identical bytes mean
  // every header, TSC and payload word came back as written.
  std::vector<uint8_t> File = everyShapeTrace();
  bool Failed = true;
  auto Recs = readAll(File, ReadOrder::File, nullptr, &Failed);
  ASSERT_FALSE(Failed);
  std::vector<uint8_t> Again;
  for (const TraceRecord &R : Recs) {
    uint32_t Buf[XT_MAX_RECORD_WORDS];
    uint32_t *End = xt_put(Buf, R.Event, R.HasTsc, R.Tsc, R.Words, R.NumWords);
    ASSERT_EQ(R.Offset, Again.size());
    const uint8_t *P = reinterpret_cast<const uint8_t *>(Buf);
    Again.insert(Again.end(), P, reinterpret_cast<const uint8_t *>(End));
  }
  EXPECT_EQ(Again, File);
  // Every row of events.def appears, at every word count it allows.
  for (const EventInfo &E : kEvents)
    for (unsigned Count = E.MinWords; Count <= E.MaxWords; ++Count) {
      bool Found = false;
      for (const TraceRecord &R : Recs)
        Found |= R.Event == E.Id && R.NumWords == Count;
      EXPECT_TRUE(Found) << E.Name << " with " << Count << " words";
    }
}

TEST(XenTraceFormat, MergedOrderKeepsEachCpuInOrderAndTscNonDecreasing) {
  std::vector<uint8_t> File = everyShapeTrace();
  auto FileOrder = readAll(File, ReadOrder::File);
  auto Merged = readAll(File, ReadOrder::Merged);
  std::vector<TraceRecord> Data;
  for (const TraceRecord &R : FileOrder)
    if (R.Event != XT_EV_TraceCpuChange && R.Event != XT_EV_WrapBuffer)
      Data.push_back(R);
  ASSERT_EQ(Merged.size(), Data.size());
  for (size_t I = 1; I < Merged.size(); ++I)
    EXPECT_LE(Merged[I - 1].Tsc, Merged[I].Tsc) << "record " << I;
  for (unsigned Cpu = 0; Cpu < 4; ++Cpu) {
    std::vector<TraceRecord> A, B;
    for (const TraceRecord &R : Data)
      if (R.Cpu == Cpu)
        A.push_back(R);
    for (const TraceRecord &R : Merged)
      if (R.Cpu == Cpu)
        B.push_back(R);
    EXPECT_EQ(A, B) << "CPU " << Cpu;
  }
}

TEST(XenTraceFormat, UntimedRecordFollowsItsTimedRecordAcrossCpus) {
  MemoryOutput Out;
  {
    TraceWriter W(Out, 2);
    const uint32_t Exit[3] = {10, 0x1000, 0};
    const uint32_t Leaf[6] = {1, 0, 2, 3, 4, 5};
    W.recordTsc(0, XT_EV_VmxExit64, 100, Exit);
    W.record(0, XT_EV_Cpuid, Leaf);
    W.recordTsc(1, XT_EV_VmxExit64, 100, Exit);
    W.recordTsc(1, XT_EV_VmEntry, 150, nullptr, 0);
    W.recordTsc(0, XT_EV_VmEntry, 200, nullptr, 0);
  }
  auto Recs = readAll(Out.Bytes, ReadOrder::Merged);
  ASSERT_EQ(Recs.size(), 5u);
  EXPECT_EQ(Recs[0].Cpu, 0);
  EXPECT_EQ(Recs[1].Event, uint32_t(XT_EV_Cpuid));
  EXPECT_EQ(Recs[2].Cpu, 1);
  EXPECT_EQ(Recs[3].Tsc, 150u);
  EXPECT_EQ(Recs[4].Tsc, 200u);
}

TEST(XenTraceFormat, DroppingWriterWritesLostRecordsBeforeTheNextRecord) {
  MemoryOutput Out;
  TraceWriter W(Out, 1, 80, FullPolicy::Drop); // 20 words: five 4-word records
  W.setCurrent(0, 1, 2);
  const uint32_t One[1] = {7};
  for (unsigned I = 0; I < 8; ++I)
    W.recordTsc(0, XT_EV_ContinueRunning, 10 + I, One);
  EXPECT_EQ(W.lostRecords(0), 3u);
  W.flushCpu(0);
  W.recordTsc(0, XT_EV_VmEntry, 40, nullptr, 0);
  W.flush();
  TraceReader R;
  R.openMemory(Out.Bytes.data(), Out.Bytes.size());
  std::vector<TraceRecord> Recs;
  TraceRecord Rec;
  while (R.next(Rec))
    Recs.push_back(Rec);
  ASSERT_EQ(Recs.size(), 7u);
  EXPECT_EQ(Recs[5].Event, uint32_t(XT_EV_LostRecords));
  EXPECT_EQ(Recs[5].Tsc, 40u);
  // count 3; domain 1 in bits 0-15, vcpu 2 in bits 16-31; first lost at TSC 15.
  EXPECT_EQ(Recs[5].Words[0], 3u);
  EXPECT_EQ(Recs[5].Words[1], 0x00020001u);
  EXPECT_EQ(Recs[5].Words[2], 15u);
  EXPECT_EQ(Recs[5].Words[3], 0u);
  EXPECT_EQ(R.lostRecords(), 3u);
  EXPECT_EQ(formatFields(Recs[5]), "count=3 who=d1v2 first_tsc=15");
}

TEST(XenTraceFormat, FlushingWriterDrainsAFullBufferAsAnExtraWindow) {
  MemoryOutput Out;
  {
    TraceWriter W(Out, 1, 80);
    const uint32_t One[1] = {7};
    for (unsigned I = 0; I < 8; ++I)
      W.recordTsc(0, XT_EV_ContinueRunning, 10 + I, One);
  }
  // 8 records of 16 bytes: a window of 80 bytes (5 records), then one of 48.
  EXPECT_EQ(Out.Bytes.size(), 12u + 80 + 12 + 48);
  auto Recs = readAll(Out.Bytes, ReadOrder::File);
  ASSERT_EQ(Recs.size(), 10u);
  EXPECT_EQ(Recs[6].Event, uint32_t(XT_EV_TraceCpuChange));
  EXPECT_EQ(Recs[6].Offset, 92u);
}

TEST(XenTraceFormat, EmptyFileHasNoRecordsAndNoError) {
  bool Failed = true;
  EXPECT_TRUE(readAll({}, ReadOrder::Merged, nullptr, &Failed).empty());
  EXPECT_FALSE(Failed);
}

TEST(XenTraceFormat, FileNotStartingWithCpuChangeIsAnErrorAtOffsetZero) {
  TraceError E;
  bool Failed = false;
  auto Recs = readAll(bytesOfWords({0x80081001, 1, 0}), ReadOrder::Merged, &E, &Failed);
  EXPECT_TRUE(Recs.empty());
  EXPECT_TRUE(Failed);
  // Nor a xen-3.0 file (docs/trace-flavours.md): its first word would be a pcpu number.
  EXPECT_EQ(E.str(), "offset 0x0: neither trace flavour: the first word 0x80081001 is not a "
                     "TRACE_CPU_CHANGE header (0x2001f003, modern) nor a pcpu number below 256 "
                     "(xen-3.0)");
}

TEST(XenTraceFormat, TruncatedRecordKeepsTheRecordsBeforeIt) {
  std::vector<uint8_t> File = workedExample();
  File.resize(0x40 + 10); // inside the CPUID record
  TraceError E;
  bool Failed = false;
  auto Recs = readAll(File, ReadOrder::Merged, &E, &Failed);
  EXPECT_TRUE(Failed);
  ASSERT_EQ(Recs.size(), 3u);
  EXPECT_EQ(Recs[2].Event, uint32_t(XT_EV_VmxExit64));
  EXPECT_EQ(E.Offset, 0x40u);
  EXPECT_EQ(E.Message, "file ends inside a record (10 of its bytes present) in the window of "
                       "CPU 0 (window header at 0x0, 92 bytes announced)");
}

TEST(XenTraceFormat, FileEndingAtARecordBoundaryInsideAWindowIsAnError) {
  std::vector<uint8_t> File = workedExample();
  File.resize(0x40);
  TraceError E;
  auto Recs = readAll(File, ReadOrder::File, &E);
  EXPECT_EQ(Recs.size(), 4u); // the window header and three records
  EXPECT_EQ(E.str(), "offset 0x40: file ends inside the window of CPU 0 (window header at "
                     "0x0, 92 bytes announced, 52 present)");
}

TEST(XenTraceFormat, RecordCrossingItsWindowIsAnError) {
  // A window of 8 bytes holding a 12-byte VMENTRY.
  TraceError E;
  auto Recs = readAll(bytesOfWords({0x2001f003, 0, 8, 0x80081001, 1, 0}), ReadOrder::Merged, &E);
  EXPECT_TRUE(Recs.empty());
  EXPECT_EQ(E.str(), "offset 0xc: record header 0x80081001 (12 bytes) crosses the end of the "
                     "window of CPU 0 at offset 0x14 (window header at 0x0)");
}

TEST(XenTraceFormat, DecreasingTscOfOneCpuIsAnError) {
  TraceError E;
  auto Recs = readAll(bytesOfWords({0x2001f003, 1, 24, 0x80081001, 5, 0, 0x80081001, 4, 0}),
                      ReadOrder::Merged, &E);
  ASSERT_EQ(Recs.size(), 1u);
  EXPECT_EQ(Recs[0].Cpu, 1);
  EXPECT_EQ(E.str(), "offset 0x18: TSC 0x4 of CPU 1 is lower than its previous TSC 0x5");
}

TEST(XenTraceFormat, BadCpuNumberAndWindowLengthAreErrors) {
  TraceError E;
  readAll(bytesOfWords({0x2001f003, 300, 0}), ReadOrder::Merged, &E);
  EXPECT_EQ(E.str(), "offset 0x4: CPU number 300 of a TRACE_CPU_CHANGE record is outside 0..255");
  readAll(bytesOfWords({0x2001f003, 0, 6, 0}), ReadOrder::Merged, &E);
  EXPECT_EQ(E.str(), "offset 0x8: window length 6 of CPU 0 is not a multiple of 4");
  readAll(bytesOfWords({0x2001f003, 0, 4, 0x0001f003}), ReadOrder::Merged, &E);
  EXPECT_EQ(E.str(), "offset 0xc: TRACE_CPU_CHANGE inside the window of CPU 0 (window header "
                     "at 0x0, 4 bytes)");
}

TEST(XenTraceFormat, EventTableNamesEveryIdOnce) {
  EXPECT_EQ(findEvent(0x00081102)->Name, std::string("VMX_EXIT64"));
  EXPECT_EQ(findEvent(0x04001001)->Name, std::string("GT_VMEXIT"));
  EXPECT_EQ(findEvent(0x00123456), nullptr);
  EXPECT_EQ(eventClass(XT_EV_GtVmExit), 0x400u);
  for (const EventInfo &E : kEvents)
    EXPECT_EQ(findEvent(E.Id), &E) << E.Name;
}
