// Streaming reader of XenTrace files (/work/shared/docs/xentrace-format.md, sections
// 1-2): per-CPU windows, records merged across CPUs by TSC as xenalyze does (or in file
// order, as xentrace_format did), untimed records carrying the time of their CPU's
// previous timed record. Memory is bounded by a chunk buffer per CPU and the window
// descriptors not yet consumed (16 bytes per window), never by the file size.
//
// Errors: the file is checked window by window before any record of a window is
// returned: the framing (every window starts with a well-formed TRACE_CPU_CHANGE, every
// record lies inside its window, the file does not end inside a window) and the order of
// each CPU's TSCs. The first problem ends the trace: next() returns every record that
// lies before it in the file and then false, and error() says where and what.
//
// Two flavours (docs/trace-flavours.md), told apart by the file's first 32-bit word: a
// modern file starts with a TRACE_CPU_CHANGE header (0x2001f003), a xen-3.0 file with the
// pcpu number (below XT_MAX_CPUS) of its first fixed-size record; any other first word is
// an error at offset 0. A xen-3.0 record is returned with Flavour Xen30, its five items
// in Items and no payload words; its Offset is that of its pcpu number. The empty file
// is an empty modern trace. A xen-3.0 file has no windows; for the merge, a run of one
// CPU's consecutive records stands for one (Xen 3.0.3's xentrace, too, copied a CPU's
// new records in one go), cut every kXen30RunRecords records so that memory stays
// bounded on a long run of one CPU.
#pragma once
#include "trace/xentrace.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace vmxsim::trace {

namespace reader_detail {
/// kKeepPairs[n][j]: the mask of words 2j and 2j+1 (a little-endian 64-bit load of them)
/// that keeps the words a record of n words has and clears the others: a record's words
/// are copied whole and the tail masked, in four operations.
inline constexpr auto kKeepPairs = [] {
  std::array<std::array<uint64_t, 4>, XT_MAX_WORDS + 1> M{};
  for (unsigned N = 0; N <= XT_MAX_WORDS; ++N)
    for (unsigned I = 0; I < XT_MAX_WORDS; ++I)
      if (I < N)
        M[N][I / 2] |= uint64_t(0xffffffff) << (32 * (I % 2));
  return M;
}();
static_assert(XT_MAX_WORDS == 7, "the masked copy below moves 3 pairs and a word");
/// The NumWords payload words at P into Words, the others 0; P must have room for the
/// largest payload (XT_MAX_WORDS words). Little-endian hosts.
inline void copyWordsMasked(const uint8_t *P, unsigned NumWords, uint32_t *Words) {
  const auto &Keep = kKeepPairs[NumWords];
  uint64_t W01, W23, W45;
  uint32_t W6;
  std::memcpy(&W01, P, 8);
  std::memcpy(&W23, P + 8, 8);
  std::memcpy(&W45, P + 16, 8);
  std::memcpy(&W6, P + 24, 4);
  W01 &= Keep[0];
  W23 &= Keep[1];
  W45 &= Keep[2];
  W6 &= uint32_t(Keep[3]);
  std::memcpy(&Words[0], &W01, 8);
  std::memcpy(&Words[2], &W23, 8);
  std::memcpy(&Words[4], &W45, 8);
  Words[6] = W6;
}
} // namespace reader_detail

enum class TraceFlavour : uint8_t {
  Modern, ///< Xen 3.2+ variable-size records in TRACE_CPU_CHANGE windows
  Xen30,  ///< Xen 3.0.3's fixed-size records, each behind its pcpu number
};
/// "modern" or "xen-3.0", as on the image command line (trace=).
const char *flavourName(TraceFlavour F);

struct TraceRecord {
  uint64_t Offset = 0; ///< file offset of the header word (xen-3.0: of the pcpu number)
  uint64_t Tsc = 0;    ///< the record's TSC, or (HasTsc false) its CPU's previous one
  uint32_t Event = 0;  ///< id, bits 0-27 of the header
  uint16_t Cpu = 0;    ///< the window's CPU
  uint8_t NumWords = 0;
  bool HasTsc = false;
  TraceFlavour Flavour = TraceFlavour::Modern;
  uint32_t Words[XT_MAX_WORDS] = {};
  uint64_t Items[XT30_ITEMS] = {}; ///< xen-3.0 only: data[0..4]
  bool operator==(const TraceRecord &O) const;
};

/// A record as TraceReader::nextRawOf hands it over: a modern record's words where they
/// lie in the reader's buffer (little-endian, as in the file), without a copy into a
/// TraceRecord. Valid until the next read of the same CPU.
struct RawRecord {
  uint64_t Offset = 0; ///< file offset of the header word
  uint64_t Tsc = 0;    ///< the record's TSC, or (HasTsc false) its CPU's previous one
  uint32_t Event = 0;
  uint8_t NumWords = 0;
  bool HasTsc = false;
  const uint8_t *Words = nullptr; ///< NumWords words
  /// Set when the record came through the general path (a xen-3.0 record, a record
  /// across a buffer boundary, WRAP_BUFFER's and LOST_RECORDS' bookkeeping): the whole
  /// record, whose Words the field above points into.
  const TraceRecord *Full = nullptr;

  uint32_t word(unsigned I) const {
    uint32_t V;
    std::memcpy(&V, Words + 4 * I, 4); // host order: the fast path runs on little-endian hosts
    return V;
  }
  uint64_t quad(unsigned I) const { return uint64_t(word(I)) | uint64_t(word(I + 1)) << 32; }
};

struct TraceError {
  uint64_t Offset = 0;
  std::string Message;
  /// "offset 0x1c: <Message>".
  std::string str() const;
};

/// Random-access bytes: a host file (read with pread, in chunks) or memory.
class ByteSource {
public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  /// Reads exactly Len bytes at Offset (which the caller keeps within size()).
  virtual bool read(uint64_t Offset, void *Buf, size_t Len) = 0;
};

enum class ReadOrder : uint8_t {
  Merged, ///< all CPUs merged by TSC; TRACE_CPU_CHANGE and WRAP_BUFFER are not returned
  File,   ///< file order, including the TRACE_CPU_CHANGE headers and WRAP_BUFFER records
};

class TraceReader {
public:
  /// Records of one CPU's run that the merge treats as one window (xen-3.0 files).
  static constexpr uint32_t kXen30RunRecords = 4096;

  /// ChunkBytes: the reads' size. The default holds a whole window of vmxsim's writers
  /// (256 KiB buffers), so that a window the scan has just read is handed to its CPU's
  /// cursor instead of being read again.
  explicit TraceReader(ReadOrder Order = ReadOrder::Merged, size_t ChunkBytes = 256 << 10);
  ~TraceReader();
  TraceReader(const TraceReader &) = delete;
  TraceReader &operator=(const TraceReader &) = delete;

  /// Opens a file; false with Error set when the host cannot open it.
  bool open(const std::string &Path, std::string &Error);
  /// Reads Size bytes at Data (which must outlive the reader).
  void openMemory(const void *Data, size_t Size);

  /// The next record; false at the end of the trace or at the first error.
  bool next(TraceRecord &R);
  /// The same without a copy: the next record, valid until the next call of next() or
  /// nextRecord(); null at the end of the trace or at the first error.
  const TraceRecord *nextRecord() {
    // Fast path, inline: a merged trace of one CPU so far whose next record lies whole
    // in the cursor's buffer inside the current window, needs no bookkeeping (not
    // WRAP_BUFFER nor LOST_RECORDS), and is what the merge returns (untimed, or no
    // window left to scan can start before it): decoded as fetch() does.
    if (std::endian::native == std::endian::little && Order == ReadOrder::Merged &&
        LastCpu >= 0 && Flavour == TraceFlavour::Modern && KnownCpus.size() == 1)
        [[likely]] {
      Cursor &C = Cursors[unsigned(LastCpu)];
      if (!C.HaveHead && !C.Exhausted && C.Pos < C.End && C.Pos >= C.BufOff &&
          C.Pos + XT_MAX_RECORD_WORDS * 4 <= C.BufOff + C.BufLen) [[likely]] {
        const uint8_t *P = C.Buf.data() + (C.Pos - C.BufOff);
        uint32_t Header;
        std::memcpy(&Header, P, 4);
        const uint32_t Event = xt_header_event(Header);
        const bool HasTsc = xt_header_has_tsc(Header);
        uint64_t Tsc = ReadLastTsc[unsigned(LastCpu)];
        if (HasTsc)
          std::memcpy(&Tsc, P + 4, 8);
        if (Event != XT_EV_WrapBuffer && Event != XT_EV_LostRecords &&
            (!HasTsc || ScanDone || FrontierTsc > Tsc)) [[likely]] {
          TraceRecord &R = C.Head;
          R.Offset = C.Pos;
          R.Tsc = ReadLastTsc[unsigned(LastCpu)] = Tsc;
          R.Event = Event;
          R.Cpu = uint16_t(LastCpu);
          R.NumWords = uint8_t(xt_header_words(Header));
          R.HasTsc = HasTsc;
          reader_detail::copyWordsMasked(P + (HasTsc ? 12 : 4), R.NumWords, R.Words);
          C.Pos += uint64_t(xt_record_words(Header)) * 4;
          return &R;
        }
      }
    }
    return nextRecordSlow();
  }
  /// Merged readers only, instead of nextRecord(): CPU Cpu's next record (its records in
  /// TSC order; no merge across CPUs), valid until the next call for the same CPU; null
  /// at that CPU's end or at the first error. Windows of other CPUs met on the way are
  /// queued (their descriptors only). For a consumer that works CPU by CPU (trace check's
  /// ground truth); a reader is read with this or with nextRecord(), not both.
  const TraceRecord *nextRecordOf(uint16_t Cpu);
  /// The same as nextRecordOf, without copying the record: false at that CPU's end or at
  /// the first error.
  bool nextRawOf(uint16_t Cpu, RawRecord &R) {
    // Fast path, inline: a modern record of the current window, whole in the cursor's
    // buffer, that needs no bookkeeping (fetch's common case, without the copy).
    if (std::endian::native == std::endian::little && Order == ReadOrder::Merged &&
        Flavour == TraceFlavour::Modern && Cpu < XT_MAX_CPUS && Src) [[likely]] {
      Cursor &C = Cursors[Cpu];
      const uint64_t Rel = C.Pos - C.BufOff;
      if (C.Pos < C.End && C.Pos >= C.BufOff && Rel + 4 <= C.BufLen) [[likely]] {
        const uint8_t *P = C.Buf.data() + Rel;
        uint32_t Header;
        std::memcpy(&Header, P, 4);
        const uint32_t Bytes = xt_record_words(Header) * 4;
        const uint32_t Event = xt_header_event(Header);
        if (Rel + Bytes <= C.BufLen && Event != XT_EV_WrapBuffer &&
            Event != XT_EV_LostRecords) [[likely]] {
          R.Offset = C.Pos;
          R.Event = Event;
          R.NumWords = uint8_t(xt_header_words(Header));
          R.HasTsc = xt_header_has_tsc(Header);
          R.Full = nullptr;
          uint64_t &Last = ReadLastTsc[Cpu];
          if (R.HasTsc) {
            std::memcpy(&Last, P + 4, 8);
            R.Words = P + 12;
          } else {
            R.Words = P + 4;
          }
          R.Tsc = Last;
          C.Pos += Bytes;
          return true;
        }
      }
    }
    return nextRawSlow(Cpu, R);
  }
  /// For a consumer of runs of one kind of record (trace check's slot stores): takes CPU
  /// Cpu's next records, as nextRawOf would return them, while each has exactly the
  /// header word Header (event id, word count and TSC flag), lies whole in the reader's
  /// buffer inside the current window, and Take(the record's bytes from its header word
  /// on, little-endian as in the file; its file offset) returns true; the record Take
  /// refused stays next. Returns how many it took;
  /// 0 whenever nextRawOf would take its general path (a record across a buffer
  /// boundary, the window's end, a xen-3.0 file, a big-endian host), which the caller
  /// then calls. Header must not be WRAP_BUFFER's or LOST_RECORDS' (a constant: the
  /// records' size is one).
  template <uint32_t Header, class Fn> uint64_t takeRun(uint16_t Cpu, Fn &&Take) {
    static_assert((Header & XT_EVENT_MASK) != XT_EV_WrapBuffer &&
                  (Header & XT_EVENT_MASK) != XT_EV_LostRecords);
    constexpr bool Timed = (Header & XT_TSC_FLAG) != 0;
    constexpr uint32_t Bytes = (1u + (Timed ? 2u : 0u) + (Header >> XT_WORDS_SHIFT & 7u)) * 4;
    if (std::endian::native != std::endian::little || Order != ReadOrder::Merged ||
        Flavour != TraceFlavour::Modern || Cpu >= XT_MAX_CPUS || !Src)
      return 0;
    Cursor &C = Cursors[Cpu];
    if (C.Pos >= C.End || C.Pos < C.BufOff)
      return 0;
    const uint64_t Stop = std::min<uint64_t>(C.End, C.BufOff + C.BufLen);
    const uint8_t *const Buf = C.Buf.data();
    const uint8_t *Last = nullptr;
    uint64_t Pos = C.Pos;
    while (Pos + Bytes <= Stop) {
      const uint8_t *P = Buf + (Pos - C.BufOff);
      uint32_t H;
      std::memcpy(&H, P, 4);
      if (H != Header || !Take(P, Pos))
        break;
      Last = P;
      Pos += Bytes;
    }
    if (!Last)
      return 0;
    if constexpr (Timed)
      std::memcpy(&ReadLastTsc[Cpu], Last + 4, 8);
    const uint64_t Taken = (Pos - C.Pos) / Bytes;
    C.Pos = Pos;
    return Taken;
  }
  /// Merged readers: scans the rest of the file (window descriptors only) and returns the
  /// CPUs that have windows, ascending.
  const std::vector<uint16_t> &allCpus();
  /// Whether the trace ended at an error (valid once next() returned false).
  bool failed() const { return HasError; }
  const TraceError &error() const { return Err; }
  /// Sum of the counts of the LOST_RECORDS records returned so far.
  uint64_t lostRecords() const { return Lost; }
  /// The file's flavour, known once next() has been called (Modern before, and for an
  /// empty file or one whose first word is neither flavour's).
  TraceFlavour flavour() const { return Flavour; }

  /// Called with (bytes read so far, file size) about every 16 MiB this reader reads (the
  /// vmxsim command's progress display, harness/progress.h); empty = none. Host-side
  /// display only; each reader has its own.
  using ProgressFn = std::function<void(uint64_t Done, uint64_t Total)>;
  void setProgress(ProgressFn Fn) { Progress = std::move(Fn); }

private:
  struct Window {
    uint64_t Header; ///< offset of the TRACE_CPU_CHANGE record
    uint64_t Data;   ///< offset of the first record
    uint32_t Bytes;  ///< bytes of complete, checked records
    uint32_t Announced;
    uint16_t Cpu;
  };
  struct Cursor {
    std::deque<Window> Pending;
    Window Cur{};
    uint64_t Pos = 0, End = 0; ///< next record and end of the current window's records
    std::vector<uint8_t> Buf;
    uint64_t BufOff = 0;
    size_t BufLen = 0;
    bool HaveHead = false, Exhausted = false, Known = false;
    TraceRecord Head;
  };

  void start(std::unique_ptr<ByteSource> Src);
  /// nextRecord's general path.
  const TraceRecord *nextRecordSlow();
  /// nextRawOf's general path: through nextRecordOf.
  bool nextRawSlow(uint16_t Cpu, RawRecord &R);
  /// Checks and queues the next window; false when the scan has ended (EOF or error).
  bool scanWindow();
  bool scanRecords(Window &W, uint64_t &LastTsc, uint64_t &FirstTsc);
  /// Recognises the flavour from the first word; false (an error) when it is neither.
  bool detectFlavour();
  /// Checks and queues the next xen-3.0 record as a window of its own.
  bool scanXen30Record();
  void queue(const Window &W);
  void fail(uint64_t Offset, std::string Message);
  bool readAt(uint64_t Offset, void *Buf, size_t Len);
  /// Decodes the next record of cursor C into R; false when C has no more records.
  bool fetch(Cursor &C, TraceRecord &R);
  /// fetch's rare steps: moving to the cursor's next window (and, in file order,
  /// returning its header), reading the next chunk, a xen-3.0 record.
  enum class WindowStep : uint8_t { End, Header, Records };
  WindowStep nextWindow(Cursor &C, TraceRecord &R);
  bool refill(Cursor &C);
  void decodeXen30(Cursor &C, TraceRecord &R);
  const TraceRecord *nextMerged();

  ReadOrder Order;
  size_t ChunkBytes;
  TraceFlavour Flavour = TraceFlavour::Modern;
  bool FlavourKnown = false;
  uint64_t Xen30BufOff = 0; ///< the scanner's cached bytes of a xen-3.0 file
  size_t Xen30BufLen = 0;
  int Xen30RunCpu = -1;     ///< CPU of the run of records the scanner is in
  uint32_t Xen30RunLength = 0;
  std::unique_ptr<ByteSource> Src;
  uint64_t Size = 0;
  // Scanner.
  uint64_t ScanPos = 0;
  bool ScanDone = false;
  uint64_t FrontierTsc = 0; ///< first TSC of the last window scanned
  std::vector<uint64_t> ScanLastTsc, ReadLastTsc;
  std::vector<uint16_t> KnownCpus; ///< CPUs with windows (Merged), ascending
  std::vector<uint8_t> ScanBuf;
  /// What ScanBuf holds after a modern window's scan: the file's bytes [ScanHeldOff,
  /// ScanHeldOff + ScanHeldLen) (0 bytes once a cursor has taken the buffer).
  uint64_t ScanHeldOff = 0;
  size_t ScanHeldLen = 0;
  // Readers: one cursor per CPU (Merged) or cursor 0 for everything (File).
  std::vector<Cursor> Cursors;
  TraceRecord FileRecord; ///< File order: the record nextRecord() returned
  int LastCpu = -1;
  bool PendingHeader = false; ///< File order: the current window's header is next
  bool HasError = false;
  ProgressFn Progress;
  uint64_t ProgressMark = 0;
  TraceError Err;
  uint64_t Lost = 0;
};

} // namespace vmxsim::trace
