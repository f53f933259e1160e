#include "trace/async_output.h"

#include <algorithm>
#include <cstring>
#include <pthread.h>
#include <signal.h>

namespace vmxsim::trace {

ThreadedOutput::ThreadedOutput(TraceOutput &Inner, size_t BlockWords, unsigned NumBlocks)
    : Inner(Inner), BlockWords(std::max<size_t>(BlockWords, 16)),
      BlockBytes(this->BlockWords * 4) {
  NumBlocks = std::max(NumBlocks, 2u);
  Free.reserve(NumBlocks);
  for (unsigned I = 0; I < NumBlocks; ++I)
    Free.emplace_back(new uint32_t[this->BlockWords]);
  // One item per block in flight: a block is free, being filled, in a CPU buffer's
  // place, queued or being written, and only the last two hold items.
  Queue.resize(NumBlocks);
  WakeAt = std::max(NumBlocks / 2, 1u);
  // The thread blocks every signal (it inherits the mask it starts with): the program's
  // signal handlers (harness/main.cpp: SIGINT stops the run) run on its own threads, as
  // before the thread existed.
  sigset_t All, Old;
  sigfillset(&All);
  pthread_sigmask(SIG_SETMASK, &All, &Old);
  Thread = std::thread([this] { run(); });
  pthread_sigmask(SIG_SETMASK, &Old, nullptr);
}

ThreadedOutput::~ThreadedOutput() { finish(); }

void ThreadedOutput::run() {
  std::unique_lock<std::mutex> L(M);
  for (;;) {
    ToThread.wait(L, [this] { return QueueCount != 0 || Stop; });
    if (QueueCount == 0)
      return; // stopped, and everything handed over is written
    Item It = std::move(Queue[QueueHead]);
    QueueHead = (QueueHead + 1) % Queue.size();
    --QueueCount;
    Writing = true;
    const bool Discard = Failed.load(std::memory_order_relaxed);
    L.unlock();
    bool Ok = true;
    if (!Discard)
      Ok = (!It.HeadBytes || Inner.write(It.Head, It.HeadBytes)) &&
           (!It.Bytes || Inner.write(It.Block.get(), It.Bytes));
    std::string Why = Ok ? std::string() : Inner.failure();
    L.lock();
    if (!Ok && !Failed.load(std::memory_order_relaxed)) {
      Failure = Why.empty() ? std::string("cannot write a trace file") : std::move(Why);
      Failed.store(true, std::memory_order_relaxed);
    }
    Free.push_back(std::move(It.Block));
    Writing = false;
    ToProducer.notify_all();
  }
}

std::unique_ptr<uint32_t[]> ThreadedOutput::takeFree() {
  std::unique_lock<std::mutex> L(M);
  // Back-pressure: every block is queued or being written; the thread frees one.
  if (Free.empty())
    ToThread.notify_one();
  ToProducer.wait(L, [this] { return !Free.empty(); });
  std::unique_ptr<uint32_t[]> B = std::move(Free.back());
  Free.pop_back();
  return B;
}

void ThreadedOutput::submit(Item &&It) {
  bool Wake;
  {
    std::lock_guard<std::mutex> L(M);
    Queue[(QueueHead + QueueCount) % Queue.size()] = std::move(It);
    Wake = ++QueueCount >= WakeAt;
  }
  ++Handed;
  // Waking a waiting thread costs the kernel a few microseconds (an IPI on a virtual
  // machine): the thread is woken for half the blocks at once, or by takeFree and flush
  // when they wait for it. A thread that is not waiting picks the block up anyway.
  if (Wake)
    ToThread.notify_one();
}

void ThreadedOutput::submitFill() {
  if (!Fill || FillBytes == 0)
    return;
  Item It;
  It.Block = std::move(Fill);
  It.Bytes = FillBytes;
  FillBytes = 0;
  submit(std::move(It));
}

bool ThreadedOutput::write(const void *Data, size_t Bytes) {
  if (Finished || Failed.load(std::memory_order_relaxed))
    return false;
  const uint8_t *P = static_cast<const uint8_t *>(Data);
  while (Bytes) {
    if (!Fill)
      Fill = takeFree();
    const size_t N = std::min(Bytes, BlockBytes - FillBytes);
    std::memcpy(reinterpret_cast<uint8_t *>(Fill.get()) + FillBytes, P, N);
    FillBytes += N, P += N, Bytes -= N;
    if (FillBytes == BlockBytes)
      submitFill();
  }
  return true;
}

bool ThreadedOutput::writeBuffer(const void *Head, size_t HeadBytes,
                                 std::unique_ptr<uint32_t[]> &Words, size_t CapWords,
                                 size_t Bytes) {
  if (Finished || Failed.load(std::memory_order_relaxed))
    return false;
  // A buffer of another size cannot take a block's place, and a short one (the last of a
  // run, a window cut by a flush) is cheaper copied than a block spent on it.
  if (CapWords != BlockWords || HeadBytes > sizeof(Item::Head) || Bytes < BlockBytes / 2)
    return TraceOutput::writeBuffer(Head, HeadBytes, Words, CapWords, Bytes);
  submitFill(); // the bytes before this window
  Item It;
  std::memcpy(It.Head, Head, HeadBytes);
  It.HeadBytes = uint8_t(HeadBytes);
  It.Bytes = Bytes;
  std::unique_ptr<uint32_t[]> Next = takeFree();
  It.Block = std::move(Words);
  Words = std::move(Next);
  submit(std::move(It));
  ++Taken;
  return true;
}

bool ThreadedOutput::flush() {
  if (Finished)
    return !Failed.load(std::memory_order_relaxed);
  submitFill();
  std::unique_lock<std::mutex> L(M);
  ToThread.notify_one();
  ToProducer.wait(L, [this] { return QueueCount == 0 && !Writing; });
  if (Failed.load(std::memory_order_relaxed))
    return false;
  // The thread is idle and waits for M: Inner is this thread's until it is released.
  if (!Inner.flush()) {
    Failure = Inner.failure();
    if (Failure.empty())
      Failure = "cannot write a trace file";
    Failed.store(true, std::memory_order_relaxed);
    return false;
  }
  return true;
}

std::string ThreadedOutput::failure() const {
  std::lock_guard<std::mutex> L(M);
  return Failure;
}

bool ThreadedOutput::finish() {
  if (Finished)
    return !Failed.load(std::memory_order_relaxed);
  const bool Ok = flush();
  {
    std::lock_guard<std::mutex> L(M);
    Stop = true;
  }
  ToThread.notify_one();
  Thread.join();
  Finished = true;
  return Ok;
}

bool AsyncFileOutput::open(const std::string &Path, std::string &Error, bool Threaded) {
  close();
  CloseFailure.clear();
  if (!File.open(Path, Error))
    return false;
  if (Threaded)
    T = std::make_unique<ThreadedOutput>(File, BlockWords, NumBlocks);
  return true;
}

std::string AsyncFileOutput::failure() const {
  if (!T) // no thread: File's own (or the close's, kept)
    return CloseFailure.empty() ? File.failure() : CloseFailure;
  const std::string F = T->failure();
  return F.empty() ? CloseFailure : F;
}

bool AsyncFileOutput::close() {
  if (T)
    T->finish(); // the thread is gone: File is this thread's
  std::string F = T ? T->failure() : File.failure();
  if (!File.close() && F.empty())
    F = File.failure();
  if (CloseFailure.empty())
    CloseFailure = std::move(F); // kept for failure()
  T.reset();
  return CloseFailure.empty();
}

} // namespace vmxsim::trace
