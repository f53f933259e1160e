// Writing XenTrace files (/work/shared/docs/xentrace-format.md, sections 1-2): one
// record buffer per CPU, sized up front, drained as TRACE_CPU_CHANGE windows in
// ascending CPU order, exactly as Xen's xentrace daemon lays them out. Recording a
// record never allocates (STYLE 2.4).
#pragma once
#include "state/snapshot_io.h"
#include "trace/xentrace.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace vmxsim::trace {

/// Where drained windows go. Called once per window (not per record).
class TraceOutput {
public:
  virtual ~TraceOutput() = default;
  /// Appends Bytes bytes; false on a host I/O error.
  virtual bool write(const void *Data, size_t Bytes) = 0;
  /// A drained CPU buffer: HeadBytes bytes of Head (its window header), then Bytes bytes
  /// of Words, a buffer of CapWords words. An output may keep Words and leave in its
  /// place another buffer of CapWords words (trace/async_output.h: no copy); this one
  /// writes both and leaves it.
  virtual bool writeBuffer(const void *Head, size_t HeadBytes,
                           std::unique_ptr<uint32_t[]> &Words, size_t CapWords, size_t Bytes) {
    (void)CapWords;
    return write(Head, HeadBytes) && write(Words.get(), Bytes);
  }
  /// Every byte written so far is in the output's file (or wherever it goes).
  virtual bool flush() { return true; }
  /// After a failed write or flush: one line saying what failed ("<path>: cannot
  /// write: <errno text>"); empty before.
  virtual std::string failure() const { return {}; }
};

/// A file on the host.
class FileOutput : public TraceOutput {
public:
  FileOutput() = default;
  ~FileOutput() override;
  /// Creates or truncates Path; false with Error set when it cannot.
  bool open(const std::string &Path, std::string &Error);
  bool write(const void *Data, size_t Bytes) override;
  bool flush() override;
  std::string failure() const override { return Failure; }
  /// Flushes and closes the file; false (with failure() set) if that fails.
  bool close();

private:
  bool fail();
  std::FILE *F = nullptr;
  std::string Path, Failure;
};

/// Bytes in memory (tests, embedders).
class MemoryOutput : public TraceOutput {
public:
  bool write(const void *Data, size_t Bytes) override;
  std::vector<uint8_t> Bytes;
};

/// What to do when a record does not fit in its CPU's buffer.
enum class FullPolicy : uint8_t {
  Flush, ///< drain that CPU's buffer as a window now (like xentrace woken by a full ring)
  Drop,  ///< drop the record and count it; LOST_RECORDS precedes the next one that fits
};

class TraceWriter {
public:
  /// Each CPU's buffer unless the constructor is told otherwise.
  static constexpr size_t kDefaultBufferBytes = 256 << 10;
  /// NumCpus buffers (1..XT_MAX_CPUS) of BufferBytes each (rounded down to words; at
  /// least room for the largest record and a LOST_RECORDS record).
  TraceWriter(TraceOutput &Out, unsigned NumCpus, size_t BufferBytes = kDefaultBufferBytes,
              FullPolicy Policy = FullPolicy::Flush);
  ~TraceWriter();
  TraceWriter(const TraceWriter &) = delete;
  TraceWriter &operator=(const TraceWriter &) = delete;

  /// A record stamped with Tsc (TSCs of one CPU must not decrease).
  void recordTsc(unsigned Cpu, uint32_t Event, uint64_t Tsc, const uint32_t *Words,
                 unsigned NumWords) {
    put(Cpu, Event, true, Tsc, Words, NumWords);
  }
  /// A record without TSC (it has the time of the CPU's previous timed record).
  void record(unsigned Cpu, uint32_t Event, const uint32_t *Words, unsigned NumWords) {
    put(Cpu, Event, false, 0, Words, NumWords);
  }
  template <unsigned N>
  void recordTsc(unsigned Cpu, uint32_t Event, uint64_t Tsc, const uint32_t (&Words)[N]) {
    static_assert(N <= XT_MAX_WORDS, "at most 7 payload words");
    put(Cpu, Event, true, Tsc, Words, N);
  }
  template <unsigned N> void record(unsigned Cpu, uint32_t Event, const uint32_t (&Words)[N]) {
    static_assert(N <= XT_MAX_WORDS, "at most 7 payload words");
    put(Cpu, Event, false, 0, Words, N);
  }

  /// One CPU's buffer. The fast path below reaches it through a pointer its caller
  /// keeps (lane), stable for the writer's life; its members are the writer's alone.
  /// Words may be another buffer after each drain (TraceOutput::writeBuffer).
  struct Lane {
    std::unique_ptr<uint32_t[]> Words;
    uint32_t Used = 0;
    /// The words the fast paths may fill: the capacity, or 0 while a LOST_RECORDS is
    /// pending (one test for both; makeRoom and load keep it).
    uint32_t Limit = 0;
    uint64_t LastTsc = 0;
    uint64_t Lost = 0, LostPending = 0, FirstLostTsc = 0;
    uint32_t Who = 0; ///< domain in bits 0-15, vcpu in bits 16-31 (LOST_RECORDS order)
  };
  /// Cpu's lane; null for a CPU out of range.
  Lane *lane(unsigned Cpu) { return Cpu < NumCpus ? &Cpus[Cpu] : nullptr; }

  /// The fast path of a timed record whose payload its caller stores in place (the
  /// ground truth's records of every VM exit and entry): when the lane's buffer has room
  /// for MaxWords payload words and no LOST_RECORDS is pending, writes the header (of
  /// NumWords <= MaxWords payload words) and Tsc, counts the record's 3 + NumWords words
  /// and returns where its payload goes. The caller then stores its NumWords words there
  /// and may store up to MaxWords: words past NumWords are room, not records. Null
  /// otherwise (a full buffer, a pending LOST_RECORDS): the caller writes the record
  /// with recordTsc, whose slow path handles those.
  template <unsigned MaxWords>
  static uint32_t *placeTsc(Lane &B, uint32_t Event, uint64_t Tsc, unsigned NumWords) {
    static_assert(MaxWords <= XT_MAX_WORDS, "at most 7 payload words");
    if (B.Used + 3 + MaxWords > B.Limit) [[unlikely]]
      return nullptr;
    uint32_t *P = B.Words.get() + B.Used;
    B.Used += 3 + NumWords;
    B.LastTsc = Tsc;
    P[0] = xt_header(Event, NumWords, 1);
    P[1] = uint32_t(Tsc);
    P[2] = uint32_t(Tsc >> 32);
    return P + 3;
  }

  /// Who runs on Cpu, for the domain/vcpu word of LOST_RECORDS.
  void setCurrent(unsigned Cpu, uint16_t Domain, uint16_t Vcpu);

  /// Drains every CPU's buffer that holds records, in ascending CPU order.
  void flush();
  /// Drains one CPU's buffer (if it holds records) as one window.
  void flushCpu(unsigned Cpu);
  /// Appends to Out the windows flush() would write now, draining nothing (a look at
  /// the records so far that leaves the file as it would have been).
  void peekPending(std::vector<uint8_t> &Out) const;
  /// Writes Bytes bytes of already-encoded records of Cpu as one window (e.g. a
  /// hypervisor's own trace ring). Cpu's buffered records are drained first.
  void writeWindow(unsigned Cpu, const void *Data, uint32_t Bytes);
  /// Writes Bytes bytes of xen-3.0 records of Cpu (a whole number of
  /// XT30_RECORD_BYTES; trace/xentrace.h), each behind the 32-bit Cpu as Xen 3.0.3's
  /// xentrace wrote them (docs/trace-flavours.md). A file holds one flavour: the caller
  /// never mixes these with windows or records().
  void writeXen30Records(unsigned Cpu, const void *Data, uint32_t Bytes);

  unsigned numCpus() const { return NumCpus; }
  /// Records dropped on Cpu so far (FullPolicy::Drop).
  uint64_t lostRecords(unsigned Cpu) const;
  /// False once the output failed (later records are still accepted and discarded).
  bool ok() const { return Ok; }
  /// Bytes handed to the output so far (in a restored writer: since the start of the
  /// run the snapshot was taken in).
  uint64_t bytesWritten() const { return Written; }

  /// Snapshot (harness/snapshot.h): every CPU's buffered records and counters and the
  /// bytes written so far, so that a restored writer emits exactly the rest of the file.
  /// load() fails (R's error) when the CPU count or buffer size differs.
  void save(SnapshotWriter &W) const;
  void load(SnapshotReader &R);

private:
  using CpuBuffer = Lane;

  void put(unsigned Cpu, uint32_t Event, bool HasTsc, uint64_t Tsc, const uint32_t *Words,
           unsigned NumWords) {
    if (Cpu >= NumCpus) [[unlikely]]
      return;
    CpuBuffer &B = Cpus[Cpu];
    unsigned Need = 1 + (HasTsc ? 2 : 0) + (NumWords > XT_MAX_WORDS ? XT_MAX_WORDS : NumWords);
    if (B.Used + Need > B.Limit) [[unlikely]] { // full, or a LOST_RECORDS pending
      if (!makeRoom(Cpu, Need, HasTsc ? Tsc : B.LastTsc))
        return;
    }
    if (HasTsc)
      B.LastTsc = Tsc;
    B.Used = uint32_t(xt_put(&B.Words[B.Used], Event, HasTsc, Tsc, Words, NumWords) -
                      B.Words.get());
  }
  /// Slow path: a full buffer or pending LOST_RECORDS. False when the record is dropped.
  bool makeRoom(unsigned Cpu, unsigned Need, uint64_t Tsc);
  void emit(const void *Data, size_t Bytes);

  TraceOutput &Out;
  unsigned NumCpus;
  uint32_t CapWords;
  FullPolicy Policy;
  bool Ok = true;
  uint64_t Written = 0;
  std::unique_ptr<CpuBuffer[]> Cpus;
};

} // namespace vmxsim::trace
