// The reader on damaged files: deterministic truncations, bit flips, huge lengths and
// random byte changes of a valid trace of each flavour, modern and xen-3.0 (a few
// seconds; CI runs it under ASan+UBSan). It
// never crashes, every record it returns lies before the error it reports, and a
// truncated file yields exactly the records that are complete in it.
#include "trace_test_util.h"

#include "trace/dump.h"

#include <gtest/gtest.h>

#include <chrono>

using namespace vmxsim::trace;
using namespace vmxsim::trace::testing;

namespace {

// Reads Bytes in both orders and checks the invariants that hold for any input.
void checkAnyInput(const std::vector<uint8_t> &Bytes) {
  for (ReadOrder Order : {ReadOrder::File, ReadOrder::Merged}) {
    TraceError E;
    bool Failed = false;
    auto Recs = readAll(Bytes, Order, &E, &Failed);
    ASSERT_LE(Recs.size(), Bytes.size() / 4 + 1);
    if (Failed) {
      ASSERT_LE(E.Offset, Bytes.size());
      ASSERT_FALSE(E.Message.empty());
    }
    for (const TraceRecord &R : Recs) {
      ASSERT_LT(R.Offset, Bytes.size());
      if (Failed) {
        ASSERT_LT(R.Offset, E.Offset) << E.str();
      }
      ASSERT_LE(R.NumWords, XT_MAX_WORDS);
      (void)formatRecord(R, 0); // the printer copes with anything the reader returns
    }
  }
}

} // namespace

TEST(TraceReaderFuzz, EveryTruncationKeepsExactlyTheCompleteRecords) {
  const std::vector<uint8_t> File = everyShapeTrace();
  const auto All = readAll(File, ReadOrder::File);
  for (size_t Len = 0; Len <= File.size(); ++Len) {
    std::vector<uint8_t> Cut(File.begin(), File.begin() + long(Len));
    bool Failed = false;
    TraceError E;
    auto Recs = readAll(Cut, ReadOrder::File, &E, &Failed);
    std::vector<TraceRecord> Expected;
    for (const TraceRecord &R : All) {
      const uint64_t Size = R.Event == XT_EV_TraceCpuChange
                                ? 12
                                : 4 * uint64_t(1 + (R.HasTsc ? 2 : 0) + R.NumWords);
      if (R.Offset + Size <= Len)
        Expected.push_back(R);
    }
    ASSERT_EQ(Recs, Expected) << "length " << Len;
    // Only the cuts at window boundaries are clean.
    bool AtBoundary = Len == 0 || Len == File.size();
    for (const TraceRecord &R : All)
      AtBoundary |= R.Event == XT_EV_TraceCpuChange && R.Offset == Len;
    ASSERT_EQ(Failed, !AtBoundary) << "length " << Len << ": " << E.str();
    checkAnyInput(Cut);
  }
}

static void everyBitFlip(const std::vector<uint8_t> &File) {
  const auto Start = std::chrono::steady_clock::now();
  for (size_t Bit = 0; Bit < File.size() * 8; Bit += 3) {
    std::vector<uint8_t> M = File;
    M[Bit / 8] ^= uint8_t(1u << (Bit % 8));
    checkAnyInput(M);
    if (std::chrono::steady_clock::now() - Start > std::chrono::seconds(3))
      break; // bounded time under sanitizers
  }
}

static void hugeValues(const std::vector<uint8_t> &File) {
  const uint32_t Values[] = {0xffffffff, 0xfffffffc, 0x7ffffffc, 0x80000000, 0x10000, 4, 0};
  // Overwrite each of the first 64 words (window lengths, CPU numbers, headers).
  for (size_t W = 0; W < 64 && 4 * W + 4 <= File.size(); ++W)
    for (uint32_t V : Values) {
      std::vector<uint8_t> M = File;
      for (unsigned I = 0; I < 4; ++I)
        M[4 * W + I] = uint8_t(V >> (8 * I));
      checkAnyInput(M);
    }
}

static void randomByteChanges(const std::vector<uint8_t> &File) {
  uint64_t State = 0x9e3779b97f4a7c15ull; // fixed seed: deterministic
  auto Next = [&] {
    State ^= State << 13;
    State ^= State >> 7;
    State ^= State << 17;
    return State;
  };
  const auto Start = std::chrono::steady_clock::now();
  for (unsigned Iter = 0; Iter < 3000; ++Iter) {
    std::vector<uint8_t> M = File;
    const unsigned Changes = 1 + unsigned(Next() % 8);
    for (unsigned C = 0; C < Changes; ++C)
      M[Next() % M.size()] = uint8_t(Next());
    if (Next() % 4 == 0)
      M.resize(Next() % (M.size() + 1));
    checkAnyInput(M);
    if (std::chrono::steady_clock::now() - Start > std::chrono::seconds(3))
      break;
  }
}

TEST(TraceReaderFuzz, EveryBitFlipNeverCrashes) { everyBitFlip(everyShapeTrace()); }
TEST(TraceReaderFuzz, HugeLengthsAndWordCountsNeverCrash) { hugeValues(everyShapeTrace()); }
TEST(TraceReaderFuzz, RandomByteChangesNeverCrash) { randomByteChanges(everyShapeTrace()); }

// The xen-3.0 framing: fixed 60-byte records, each behind its pcpu number.
TEST(TraceReaderFuzz, Xen30EveryTruncationKeepsExactlyTheCompleteRecords) {
  const std::vector<uint8_t> File = xen30Trace();
  const auto All = readAll(File, ReadOrder::File);
  ASSERT_EQ(All.size(), File.size() / XT30_FILE_RECORD_BYTES);
  for (size_t Len = 0; Len <= File.size(); ++Len) {
    std::vector<uint8_t> Cut(File.begin(), File.begin() + long(Len));
    bool Failed = false;
    TraceError E;
    auto Recs = readAll(Cut, ReadOrder::File, &E, &Failed);
    std::vector<TraceRecord> Expected;
    for (const TraceRecord &R : All)
      if (R.Offset + XT30_FILE_RECORD_BYTES <= Len)
        Expected.push_back(R);
    ASSERT_EQ(Recs, Expected) << "length " << Len;
    ASSERT_EQ(Failed, Len % XT30_FILE_RECORD_BYTES != 0) << "length " << Len << ": " << E.str();
    if (Failed) {
      ASSERT_EQ(E.Offset, Len - Len % XT30_FILE_RECORD_BYTES);
    }
    checkAnyInput(Cut);
  }
}

TEST(TraceReaderFuzz, Xen30EveryBitFlipNeverCrashes) { everyBitFlip(xen30Trace()); }
TEST(TraceReaderFuzz, Xen30HugeValuesNeverCrash) { hugeValues(xen30Trace()); }
TEST(TraceReaderFuzz, Xen30RandomByteChangesNeverCrash) { randomByteChanges(xen30Trace()); }
