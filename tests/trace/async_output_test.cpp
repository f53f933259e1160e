// Trace files written by a thread of their own (trace/async_output.h): the bytes are
// exactly those of the synchronous output, whatever the sizes of the writer's buffers,
// the thread's blocks and the windows (each side of every block boundary); a write
// error is the inner output's one line, reported by the next flush, with the bytes
// before it written and nothing after it; and a file so written is the in-memory bytes.
// Nothing here depends on the thread's timing: which bytes make up a block is decided by
// the calls alone, and every assertion is made after flush() or finish().
#include "tests/support/files.h"
#include "trace/async_output.h"
#include "trace/writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

using namespace vmxsim::trace;
using vmxsim::test::readFile;

namespace {

/// An output that accepts whole writes while they fit in LimitBytes and fails the first
/// one that does not, as a full disk fails (FileOutput's line).
class FailingOutput : public TraceOutput {
public:
  explicit FailingOutput(size_t LimitBytes) : Limit(LimitBytes) {}
  bool write(const void *Data, size_t Bytes) override {
    if (!Failure.empty() || Got.size() + Bytes > Limit) {
      Failure = "test.xt: cannot write: " + std::string(std::strerror(ENOSPC));
      return false;
    }
    const uint8_t *P = static_cast<const uint8_t *>(Data);
    Got.insert(Got.end(), P, P + Bytes);
    return true;
  }
  std::string failure() const override { return Failure; }
  std::vector<uint8_t> Got;

private:
  size_t Limit;
  std::string Failure;
};

/// The same records and windows, in the same order, into W: timed and untimed records
/// of every payload size on three CPUs, windows of the hypervisor's kind (writeWindow)
/// of Sizes bytes, and explicit drains.
void writeEverything(TraceWriter &W, const std::vector<uint32_t> &Sizes) {
  std::vector<uint8_t> Window(Sizes.empty() ? 0 : *std::max_element(Sizes.begin(), Sizes.end()));
  for (size_t I = 0; I < Window.size(); ++I)
    Window[I] = uint8_t(I * 7 + 3);
  uint64_t Tsc = 1000;
  for (unsigned Round = 0; Round < 40; ++Round) {
    for (unsigned Cpu = 0; Cpu < 3; ++Cpu) {
      const uint32_t Words[7] = {Round, Cpu, 0xdead0000u + Round, 1, 2, 3, 4};
      W.recordTsc(Cpu, XT_EV_GtSlotStore, Tsc += 13, Words, (Round + Cpu) % 8);
      W.record(Cpu, XT_EV_GtGpr, Words, Round % 4);
    }
    if (Round % 7 == 3)
      W.flushCpu(Round % 3);
    if (!Sizes.empty())
      W.writeWindow(Round % 3, Window.data(), Sizes[Round % Sizes.size()]);
  }
  W.flush();
}

std::vector<uint8_t> synchronousBytes(size_t BufferBytes, const std::vector<uint32_t> &Sizes) {
  MemoryOutput Out;
  {
    TraceWriter W(Out, 3, BufferBytes);
    writeEverything(W, Sizes);
  }
  return Out.Bytes;
}

} // namespace

TEST(AsyncOutput, ThreadedBytesAreTheSynchronousBytesAtEveryBoundary) {
  // Blocks of 20 and 24 words; writer buffers of those sizes (drains handed over without
  // a copy: 20 words is the smallest buffer a writer has) and of others (copied);
  // windows each side of one and several blocks.
  for (size_t BlockWords : {size_t(20), size_t(24)}) {
    const uint32_t B = uint32_t(BlockWords * 4);
    const std::vector<uint32_t> Sizes = {1,         B - 4,     B - 1, B,         B + 1,
                                         B + 4,     2 * B - 1, 2 * B, 3 * B + 5, 7};
    for (size_t BufferWords : {BlockWords, size_t(22), size_t(40), size_t(1000)}) {
      for (bool Windows : {false, true}) {
        SCOPED_TRACE("block " + std::to_string(BlockWords) + " buffer " +
                     std::to_string(BufferWords) + (Windows ? " windows" : ""));
        const std::vector<uint32_t> S = Windows ? Sizes : std::vector<uint32_t>{};
        const std::vector<uint8_t> Expected = synchronousBytes(BufferWords * 4, S);
        MemoryOutput Inner;
        ThreadedOutput T(Inner, BlockWords, 2);
        {
          TraceWriter W(T, 3, BufferWords * 4);
          writeEverything(W, S);
          EXPECT_TRUE(W.ok());
        }
        EXPECT_TRUE(T.finish());
        EXPECT_EQ(T.failure(), "");
        EXPECT_GT(Expected.size(), 3000u);
        EXPECT_TRUE(Inner.Bytes == Expected) << Inner.Bytes.size() << " " << Expected.size();
        // A drain is handed over without a copy only when the buffer is a block's size
        // (and at least half full, as most drains here are).
        if (BufferWords == BlockWords) {
          EXPECT_GT(T.buffersTaken(), 0u);
        } else if (BufferWords != BlockWords) {
          EXPECT_EQ(T.buffersTaken(), 0u);
        }
      }
    }
  }
}

TEST(AsyncOutput, XenThreeRecordsAreTheSynchronousBytes) {
  std::vector<uint8_t> Records(XT30_RECORD_BYTES * 50);
  for (size_t I = 0; I < Records.size(); ++I)
    Records[I] = uint8_t(I);
  MemoryOutput Sync, Inner;
  {
    TraceWriter W(Sync, 2);
    for (unsigned I = 0; I < 10; ++I)
      W.writeXen30Records(I % 2, Records.data(), uint32_t(XT30_RECORD_BYTES * (I * 5 % 50)));
  }
  ThreadedOutput T(Inner, 16, 2); // a 64-byte block: a record and its CPU word cross it
  {
    TraceWriter W(T, 2);
    for (unsigned I = 0; I < 10; ++I)
      W.writeXen30Records(I % 2, Records.data(), uint32_t(XT30_RECORD_BYTES * (I * 5 % 50)));
  }
  EXPECT_TRUE(T.finish());
  EXPECT_EQ(Sync.Bytes.size(), 225u * (XT30_RECORD_BYTES + 4)); // 0 + 5 + ... + 45 records
  EXPECT_TRUE(Inner.Bytes == Sync.Bytes);
}

// The blocks are filled in call order, so which bytes each holds is fixed: with 64-byte
// blocks and writes of 40 bytes, the blocks are bytes 0-63, 64-127, ...; an output that
// takes 200 bytes takes three blocks (192 bytes), fails the fourth, and gets nothing
// after it, however far the writer went on.
TEST(AsyncOutput, AWriteErrorStopsTheFileAtABlockAndIsReportedByFlush) {
  FailingOutput Inner(200);
  ThreadedOutput T(Inner, 16, 2);
  std::vector<uint8_t> All;
  uint8_t Chunk[40];
  for (unsigned I = 0; I < 100; ++I) {
    for (unsigned J = 0; J < sizeof(Chunk); ++J)
      Chunk[J] = uint8_t(I + J);
    All.insert(All.end(), Chunk, Chunk + sizeof(Chunk));
    (void)T.write(Chunk, sizeof(Chunk)); // true or, once the thread failed, false
  }
  EXPECT_FALSE(T.flush());
  EXPECT_EQ(T.failure(), "test.xt: cannot write: No space left on device");
  ASSERT_EQ(Inner.Got.size(), 192u);
  EXPECT_TRUE(std::equal(Inner.Got.begin(), Inner.Got.end(), All.begin()));
  EXPECT_FALSE(T.write(Chunk, 1));
  EXPECT_FALSE(T.finish());
  EXPECT_EQ(T.failure(), "test.xt: cannot write: No space left on device");
  EXPECT_EQ(Inner.Got.size(), 192u);
}

// Through a TraceWriter, as the machine's files: the writer's ok() turns false by the
// end of the run (its flush) and the output's line is the inner one.
TEST(AsyncOutput, AWriteErrorMidRunFailsTheWritersFlush) {
  FailingOutput Inner(5000);
  ThreadedOutput T(Inner, 64, 2);
  {
    TraceWriter W(T, 3, 256);
    writeEverything(W, {100, 300});
    EXPECT_FALSE(W.ok());
  }
  EXPECT_EQ(T.failure(), "test.xt: cannot write: No space left on device");
  EXPECT_FALSE(T.finish());
  EXPECT_LE(Inner.Got.size(), 5000u);
  const std::vector<uint8_t> Expected = synchronousBytes(256, {100, 300});
  ASSERT_GT(Expected.size(), 5000u);
  EXPECT_TRUE(std::equal(Inner.Got.begin(), Inner.Got.end(), Expected.begin()));
}

TEST(AsyncOutput, AFileHasTheInMemoryBytesThreadedOrNot) {
  const std::vector<uint8_t> Expected = synchronousBytes(64 * 4, {1, 255, 256, 257, 1000});
  for (bool Threaded : {true, false}) {
    const std::string Path = std::string(VMXSIM_BINARY_DIR) + "/tests/async_output_" +
                             (Threaded ? "threaded" : "plain") + ".xt";
    AsyncFileOutput Out(64, 3);
    std::string Why;
    ASSERT_TRUE(Out.open(Path, Why, Threaded)) << Why;
    EXPECT_EQ(Out.thread() != nullptr, Threaded);
    {
      TraceWriter W(Out, 3, 64 * 4);
      writeEverything(W, {1, 255, 256, 257, 1000});
      EXPECT_TRUE(W.ok());
    }
    EXPECT_TRUE(Out.close());
    EXPECT_EQ(Out.failure(), "");
    const std::string Got = readFile(Path);
    EXPECT_TRUE(std::vector<uint8_t>(Got.begin(), Got.end()) == Expected);
  }
}

TEST(AsyncOutput, AFullDiskIsFileOutputsLineThreadedOrNot) {
  for (bool Threaded : {true, false}) {
    AsyncFileOutput Out(64, 2);
    std::string Why;
    ASSERT_TRUE(Out.open("/dev/full", Why, Threaded)) << Why;
    {
      TraceWriter W(Out, 1, 64 * 4);
      for (uint32_t I = 0; I < 1000; ++I)
        W.recordTsc(0, XT_EV_GtResume, I, nullptr, 0);
      W.flush();
      EXPECT_FALSE(W.ok());
    }
    EXPECT_FALSE(Out.close());
    EXPECT_EQ(Out.failure(), "/dev/full: cannot write: No space left on device");
  }
}
