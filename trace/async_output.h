// Trace files written off the emulation thread (issue 13: tracing costs at most 5% of
// exit throughput). Writing a trace file is mostly the kernel copying it into the page
// cache; as Xen's xentrace daemon copies the hypervisor's per-CPU buffers to disk off the
// hypervisor's path, a thread of the output's own does those writes here, and the
// emulation thread only hands it filled buffers.
//
// What reaches the file is exactly what the synchronous output would write, in the same
// order: the thread takes the buffers in the order they were handed over, and nothing it
// does (or when) reaches the emulation thread except back-pressure (waiting for a free
// buffer) and the first write error. So no thread timing reaches a trace's bytes or
// anything the guest sees.
//
// Bounded: NumBlocks blocks of BlockWords words, allocated up front. Handing over a full
// CPU buffer of BlockWords words swaps it for a free block (no copy); other bytes are
// copied into a block. With no block free the emulation thread waits; nothing is dropped.
// A write error is remembered (failure(), the inner output's one line) and reported by
// the next write or flush; the thread then discards what it is handed (still returning
// the blocks), as a synchronous output's writer discards what follows an error.
#pragma once
#include "trace/writer.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace vmxsim::trace {

/// Writes to Inner on a thread of its own (see the top of this file). Inner is touched by
/// that thread alone while it runs, and by flush() only once it is idle.
class ThreadedOutput final : public TraceOutput {
public:
  /// NumBlocks (at least 2) blocks of BlockWords words (at least 16): give it the
  /// buffer size of the TraceWriter that writes to it, so that its drains are not copied.
  ThreadedOutput(TraceOutput &Inner, size_t BlockWords = TraceWriter::kDefaultBufferBytes / 4,
                 unsigned NumBlocks = 8);
  /// finish().
  ~ThreadedOutput() override;
  ThreadedOutput(const ThreadedOutput &) = delete;
  ThreadedOutput &operator=(const ThreadedOutput &) = delete;

  /// Copies Data into the block being filled; false once a write has failed.
  bool write(const void *Data, size_t Bytes) override;
  /// Takes Words when CapWords is the block size (Words gets a free block), else copies.
  bool writeBuffer(const void *Head, size_t HeadBytes, std::unique_ptr<uint32_t[]> &Words,
                   size_t CapWords, size_t Bytes) override;
  /// Waits until the thread has written everything handed over, then flushes Inner;
  /// false if a write or the flush failed.
  bool flush() override;
  /// The first failure's line (Inner's failure()), empty before.
  std::string failure() const override;
  /// flush(), then ends the thread (later writes fail). Idempotent.
  bool finish();

  /// Blocks handed to the thread so far, and how many of them were a CPU buffer taken
  /// without a copy (tests).
  uint64_t blocksHandedOver() const { return Handed; }
  uint64_t buffersTaken() const { return Taken; }

private:
  struct Item {
    std::unique_ptr<uint32_t[]> Block;
    size_t Bytes = 0;     ///< of Block
    uint32_t Head[4] = {}; ///< written before Block (a window header)
    uint8_t HeadBytes = 0;
  };
  void run();
  /// A free block (waits for one). Emulation thread.
  std::unique_ptr<uint32_t[]> takeFree();
  /// Queues It for the thread (there is always room: one item per block in flight).
  void submit(Item &&It);
  /// Hands the block being filled to the thread, if it holds bytes.
  void submitFill();

  TraceOutput &Inner;
  const size_t BlockWords, BlockBytes;
  // The emulation thread's own: the block being filled and its bytes.
  std::unique_ptr<uint32_t[]> Fill;
  size_t FillBytes = 0;
  uint64_t Handed = 0, Taken = 0;
  bool Finished = false;

  // Shared, under M.
  mutable std::mutex M;
  std::condition_variable ToThread, ToProducer;
  std::vector<std::unique_ptr<uint32_t[]>> Free; ///< capacity NumBlocks, never grows
  std::vector<Item> Queue;                       ///< a ring of NumBlocks items
  size_t QueueHead = 0, QueueCount = 0;
  size_t WakeAt = 1; ///< blocks queued that wake the thread (submit)
  bool Writing = false; ///< the thread holds an item
  bool Stop = false;
  std::string Failure;
  /// Failure is set (read without M on the emulation thread's fast path).
  std::atomic<bool> Failed{false};
  std::thread Thread;
};

/// A trace file written by a ThreadedOutput (the machine's --trace-ground-truth,
/// --xentrace and --xen-trace files), or opened with Threaded false, by FileOutput on the
/// caller's thread: FileOutput's open, failure lines and errors either way.
class AsyncFileOutput final : public TraceOutput {
public:
  explicit AsyncFileOutput(size_t BlockWords = TraceWriter::kDefaultBufferBytes / 4,
                           unsigned NumBlocks = 8)
      : BlockWords(BlockWords), NumBlocks(NumBlocks) {}
  ~AsyncFileOutput() override { close(); }
  /// Creates or truncates Path and starts the thread (with Threaded); false with Error
  /// set when it cannot.
  bool open(const std::string &Path, std::string &Error, bool Threaded = true);
  bool write(const void *Data, size_t Bytes) override {
    return T ? T->write(Data, Bytes) : File.write(Data, Bytes);
  }
  bool writeBuffer(const void *Head, size_t HeadBytes, std::unique_ptr<uint32_t[]> &Words,
                   size_t CapWords, size_t Bytes) override {
    return T ? T->writeBuffer(Head, HeadBytes, Words, CapWords, Bytes)
             : File.writeBuffer(Head, HeadBytes, Words, CapWords, Bytes);
  }
  bool flush() override { return T ? T->flush() : File.flush(); }
  std::string failure() const override;
  /// Writes everything, ends the thread and closes the file; false (with failure() set)
  /// if that fails.
  bool close();
  /// The thread, or null (not open, or opened without one).
  const ThreadedOutput *thread() const { return T.get(); }

private:
  size_t BlockWords;
  unsigned NumBlocks;
  FileOutput File;
  std::unique_ptr<ThreadedOutput> T;
  std::string CloseFailure;
};

} // namespace vmxsim::trace
