#include "trace/reader.h"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <utility>
#include <sys/stat.h>
#include <unistd.h>

namespace vmxsim::trace {

const char *flavourName(TraceFlavour F) {
  return F == TraceFlavour::Xen30 ? "xen-3.0" : "modern";
}

bool TraceRecord::operator==(const TraceRecord &O) const {
  if (Offset != O.Offset || Tsc != O.Tsc || Event != O.Event || Cpu != O.Cpu ||
      NumWords != O.NumWords || HasTsc != O.HasTsc || Flavour != O.Flavour)
    return false;
  if (Flavour == TraceFlavour::Xen30)
    for (unsigned I = 0; I < XT30_ITEMS; ++I)
      if (Items[I] != O.Items[I])
        return false;
  for (unsigned I = 0; I < NumWords; ++I)
    if (Words[I] != O.Words[I])
      return false;
  return true;
}

std::string TraceError::str() const { return fmt::format("offset {:#x}: {}", Offset, Message); }

namespace {

class FileSource : public ByteSource {
public:
  FileSource(int Fd, uint64_t Size) : Fd(Fd), Bytes(Size) {}
  ~FileSource() override { ::close(Fd); }
  uint64_t size() const override { return Bytes; }
  bool read(uint64_t Offset, void *Buf, size_t Len) override {
    uint8_t *P = static_cast<uint8_t *>(Buf);
    while (Len) {
      ssize_t N = ::pread(Fd, P, Len, off_t(Offset));
      if (N < 0 && errno == EINTR)
        continue;
      if (N <= 0)
        return false;
      P += N;
      Offset += uint64_t(N);
      Len -= size_t(N);
    }
    return true;
  }

private:
  int Fd;
  uint64_t Bytes;
};

class MemorySource : public ByteSource {
public:
  MemorySource(const void *Data, size_t Size)
      : Data(static_cast<const uint8_t *>(Data)), Bytes(Size) {}
  uint64_t size() const override { return Bytes; }
  bool read(uint64_t Offset, void *Buf, size_t Len) override {
    if (Offset > Bytes || Len > Bytes - Offset)
      return false;
    if (Len)
      std::memcpy(Buf, Data + Offset, Len);
    return true;
  }

private:
  const uint8_t *Data;
  size_t Bytes;
};

uint32_t loadWord(const uint8_t *P) {
  return uint32_t(P[0]) | uint32_t(P[1]) << 8 | uint32_t(P[2]) << 16 | uint32_t(P[3]) << 24;
}

uint64_t loadQuad(const uint8_t *P) { return uint64_t(loadWord(P)) | uint64_t(loadWord(P + 4)) << 32; }

} // namespace

TraceReader::TraceReader(ReadOrder Order, size_t ChunkBytes)
    : Order(Order), ChunkBytes(ChunkBytes < 4096 ? 4096 : ChunkBytes & ~size_t(3)) {}

TraceReader::~TraceReader() = default;

bool TraceReader::open(const std::string &Path, std::string &Error) {
  int Fd = ::open(Path.c_str(), O_RDONLY | O_CLOEXEC);
  if (Fd < 0) {
    Error = fmt::format("cannot open '{}': {}", Path, std::strerror(errno));
    return false;
  }
  struct stat St;
  if (::fstat(Fd, &St) != 0 || !S_ISREG(St.st_mode)) {
    Error = fmt::format("'{}' is not a regular file", Path);
    ::close(Fd);
    return false;
  }
  start(std::make_unique<FileSource>(Fd, uint64_t(St.st_size)));
  return true;
}

void TraceReader::openMemory(const void *Data, size_t Size) {
  start(std::make_unique<MemorySource>(Data, Size));
}

void TraceReader::start(std::unique_ptr<ByteSource> S) {
  Src = std::move(S);
  Size = Src->size();
  ScanPos = 0;
  ScanDone = false;
  FrontierTsc = 0;
  ScanLastTsc.assign(XT_MAX_CPUS, 0);
  ReadLastTsc.assign(XT_MAX_CPUS, 0);
  ScanBuf.assign(ChunkBytes, 0);
  ScanHeldOff = 0;
  ScanHeldLen = 0;
  Cursors.clear();
  Cursors.resize(Order == ReadOrder::Merged ? XT_MAX_CPUS : 1);
  KnownCpus.clear();
  LastCpu = -1;
  HasError = false;
  Err = TraceError{};
  Lost = 0;
  ProgressMark = 0;
  Flavour = TraceFlavour::Modern;
  FlavourKnown = false;
  Xen30BufOff = 0;
  Xen30BufLen = 0;
  Xen30RunCpu = -1;
  Xen30RunLength = 0;
}

void TraceReader::fail(uint64_t Offset, std::string Message) {
  if (HasError)
    return;
  HasError = true;
  Err.Offset = Offset;
  Err.Message = std::move(Message);
  ScanDone = true;
}

bool TraceReader::readAt(uint64_t Offset, void *Buf, size_t Len) {
  if (Progress && Offset + Len >= ProgressMark) [[unlikely]] {
    ProgressMark = Offset + Len + (16 << 20);
    Progress(Offset + Len, Size);
  }
  if (Src->read(Offset, Buf, Len))
    return true;
  fail(Offset, fmt::format("host read error ({} bytes)", Len));
  return false;
}

// Walks the records of W that lie in the file, checking that each lies inside the window
// and that the CPU's TSCs do not decrease (format doc, section 2). W.Bytes becomes the
// length of the records that passed.
bool TraceReader::scanRecords(Window &W, uint64_t &LastTsc, uint64_t &FirstTsc) {
  const uint64_t WinEnd = W.Data + W.Announced;
  const uint64_t End = WinEnd < Size ? WinEnd : Size;
  uint64_t BufOff = W.Data;
  size_t BufLen = 0;
  bool HaveFirst = false;
  FirstTsc = LastTsc;
  uint64_t Off = W.Data;
  auto Ensure = [&](uint64_t At, size_t Len) -> const uint8_t * {
    if (At >= BufOff && At + Len <= BufOff + BufLen)
      return &ScanBuf[At - BufOff];
    size_t N = size_t(End - At < ChunkBytes ? End - At : ChunkBytes);
    if (!readAt(At, ScanBuf.data(), N))
      return nullptr;
    BufOff = At;
    BufLen = N;
    return ScanBuf.data();
  };
  while (Off < End) {
    // Fast: the records that lie whole in the buffer with room for the largest one after
    // them (the buffer never runs past End, so each lies inside the window and the
    // file). Anything else, and any record that fails a check, takes the path below.
    // In locals: the buffer's bytes may alias anything, so members and references would
    // be reloaded and stored at every record.
    if (Off >= BufOff && BufLen >= XT_MAX_RECORD_WORDS * 4) {
      const uint8_t *const Buf = ScanBuf.data();
      const uint64_t Stop = BufLen - XT_MAX_RECORD_WORDS * 4;
      uint64_t Rel = Off - BufOff, Last = LastTsc, First = FirstTsc;
      bool Have = HaveFirst;
      while (Rel <= Stop) {
        const uint32_t Header = loadWord(Buf + Rel);
        if (xt_header_event(Header) == XT_EV_TraceCpuChange)
          break;
        if (xt_header_has_tsc(Header)) {
          const uint64_t Tsc = loadQuad(Buf + Rel + 4);
          if (Tsc < Last)
            break;
          Last = Tsc;
          if (!Have) [[unlikely]] {
            First = Tsc;
            Have = true;
          }
        }
        Rel += uint64_t(xt_record_words(Header)) * 4;
      }
      Off = BufOff + Rel;
      LastTsc = Last;
      FirstTsc = First;
      HaveFirst = Have;
    }
    if (Off >= End)
      break;
    if (End - Off < 4)
      break; // the file ends inside a header word: reported below
    const uint8_t *P = Ensure(Off, 4);
    if (!P)
      break;
    const uint32_t Header = loadWord(P);
    const uint64_t RecBytes = uint64_t(xt_record_words(Header)) * 4;
    if (Off + RecBytes > WinEnd) {
      fail(Off, fmt::format("record header {:#010x} ({} bytes) crosses the end of the window "
                            "of CPU {} at offset {:#x} (window header at {:#x})",
                            Header, RecBytes, W.Cpu, WinEnd, W.Header));
      break;
    }
    if (Off + RecBytes > End)
      break; // cut off by the end of the file: reported below
    if (xt_header_event(Header) == XT_EV_TraceCpuChange) {
      fail(Off, fmt::format("TRACE_CPU_CHANGE inside the window of CPU {} (window header at "
                            "{:#x}, {} bytes)",
                            W.Cpu, W.Header, W.Announced));
      break;
    }
    if (xt_header_has_tsc(Header)) {
      P = Ensure(Off, size_t(RecBytes));
      if (!P)
        break;
      const uint64_t Tsc = uint64_t(loadWord(P + 4)) | uint64_t(loadWord(P + 8)) << 32;
      if (Tsc < LastTsc) {
        fail(Off, fmt::format("TSC {:#x} of CPU {} is lower than its previous TSC {:#x}", Tsc,
                              W.Cpu, LastTsc));
        break;
      }
      LastTsc = Tsc;
      if (!HaveFirst) {
        FirstTsc = Tsc;
        HaveFirst = true;
      }
    }
    Off += RecBytes;
  }
  W.Bytes = uint32_t(Off - W.Data);
  ScanHeldOff = BufOff;
  ScanHeldLen = BufLen;
  if (!HasError && Off < WinEnd) {
    if (Off < End)
      fail(Off, fmt::format("file ends inside a record ({} of its bytes present) in the "
                            "window of CPU {} (window header at {:#x}, {} bytes announced)",
                            End - Off, W.Cpu, W.Header, W.Announced));
    else
      fail(Off, fmt::format("file ends inside the window of CPU {} (window header at {:#x}, "
                            "{} bytes announced, {} present)",
                            W.Cpu, W.Header, W.Announced, End - W.Data));
  }
  return !HasError;
}

bool TraceReader::detectFlavour() {
  FlavourKnown = true;
  if (Size < 4)
    return true; // empty, or shorter than a word: the modern scan reports it
  uint8_t Raw[4];
  if (!readAt(0, Raw, 4))
    return false;
  const uint32_t First = loadWord(Raw);
  if (xt_header_event(First) == XT_EV_TraceCpuChange)
    return true; // modern; scanWindow checks the header in full
  if (First < XT_MAX_CPUS) {
    Flavour = TraceFlavour::Xen30;
    return true;
  }
  fail(0, fmt::format("neither trace flavour: the first word {:#010x} is not a "
                      "TRACE_CPU_CHANGE header ({:#010x}, modern) nor a pcpu number below {} "
                      "(xen-3.0)",
                      First, xt_header(XT_EV_TraceCpuChange, 2, 0), XT_MAX_CPUS));
  return false;
}

void TraceReader::queue(const Window &W) {
  if (Order == ReadOrder::File) {
    Cursors[0].Pending.push_back(W);
    return;
  }
  if (!W.Bytes)
    return;
  Cursor &C = Cursors[W.Cpu];
  if (!C.Known) {
    C.Known = true;
    // Kept sorted: ties in TSC go to the lower CPU number.
    auto It = KnownCpus.begin();
    while (It != KnownCpus.end() && *It < W.Cpu)
      ++It;
    KnownCpus.insert(It, W.Cpu);
  }
  C.Pending.push_back(W);
}

// One xen-3.0 record: 32-bit pcpu, then TSC, event id, padding, five items (format doc,
// section 11). Checked: it lies whole in the file, the pcpu is below XT_MAX_CPUS, the id
// fits 28 bits, the pcpu's TSCs do not decrease. The padding is not looked at (Xen 3.0.3
// left it unwritten).
bool TraceReader::scanXen30Record() {
  const uint64_t H = ScanPos;
  if (H >= Size) {
    ScanDone = true;
    return false;
  }
  const uint64_t Rem = Size - H;
  if (Rem < XT30_FILE_RECORD_BYTES) {
    fail(H, fmt::format("file ends inside a xen-3.0 record ({} of {} bytes present)", Rem,
                        XT30_FILE_RECORD_BYTES));
    return false;
  }
  if (H < Xen30BufOff || H + XT30_FILE_RECORD_BYTES > Xen30BufOff + Xen30BufLen) {
    const size_t N = size_t(Rem < ChunkBytes ? Rem : ChunkBytes);
    if (!readAt(H, ScanBuf.data(), N))
      return false;
    Xen30BufOff = H;
    Xen30BufLen = N;
  }
  const uint8_t *P = &ScanBuf[H - Xen30BufOff];
  const uint32_t Cpu = loadWord(P);
  const uint64_t Tsc = loadQuad(P + 4);
  const uint32_t Event = loadWord(P + 12);
  if (Cpu >= XT_MAX_CPUS) {
    fail(H, fmt::format("pcpu number {:#x} of a xen-3.0 record is outside 0..{}", Cpu,
                        XT_MAX_CPUS - 1));
    return false;
  }
  if (Event & ~XT_EVENT_MASK) {
    fail(H + 12, fmt::format("event id {:#010x} of a xen-3.0 record of CPU {} has bits above "
                             "27 set",
                             Event, Cpu));
    return false;
  }
  uint64_t &Last = ScanLastTsc[Cpu];
  if (Tsc < Last) {
    fail(H + 4, fmt::format("TSC {:#x} of CPU {} is lower than its previous TSC {:#x}", Tsc,
                            Cpu, Last));
    return false;
  }
  Last = Tsc;
  // The merge scans on until a window starts after its candidate: a run of one CPU's
  // records is the window here, so the frontier is the first TSC of the run.
  if (int(Cpu) != Xen30RunCpu || Xen30RunLength == kXen30RunRecords) {
    Xen30RunCpu = int(Cpu);
    Xen30RunLength = 0;
    FrontierTsc = Tsc;
  }
  ++Xen30RunLength;
  ScanPos = H + XT30_FILE_RECORD_BYTES;
  queue(Window{H, H + 4, XT30_RECORD_BYTES, XT30_RECORD_BYTES, uint16_t(Cpu)});
  if (ScanPos >= Size)
    ScanDone = true;
  return true;
}

bool TraceReader::scanWindow() {
  if (ScanDone)
    return false;
  if (!FlavourKnown && !detectFlavour())
    return false;
  if (Flavour == TraceFlavour::Xen30)
    return scanXen30Record();
  const uint64_t H = ScanPos;
  if (H >= Size) {
    ScanDone = true;
    return false;
  }
  const uint64_t Rem = Size - H;
  uint8_t Raw[12];
  if (Rem < 4) {
    fail(H, fmt::format("file ends inside a record header ({} of 4 bytes present)", Rem));
    return false;
  }
  if (!readAt(H, Raw, 4))
    return false;
  const uint32_t Header = loadWord(Raw);
  const uint32_t Expected = xt_header(XT_EV_TraceCpuChange, 2, 0);
  if (xt_header_event(Header) != XT_EV_TraceCpuChange) {
    fail(H, fmt::format("expected a TRACE_CPU_CHANGE window header ({:#010x}), found record "
                        "header {:#010x}",
                        Expected, Header));
    return false;
  }
  if (Header != Expected) {
    fail(H, fmt::format("TRACE_CPU_CHANGE header {:#010x} must have 2 payload words and no "
                        "TSC ({:#010x})",
                        Header, Expected));
    return false;
  }
  if (Rem < 12) {
    fail(H, fmt::format("file ends inside a TRACE_CPU_CHANGE record ({} of 12 bytes present)",
                        Rem));
    return false;
  }
  if (!readAt(H, Raw, 12))
    return false;
  const int32_t Cpu = int32_t(loadWord(Raw + 4));
  const uint32_t Bytes = loadWord(Raw + 8);
  if (Cpu < 0 || uint32_t(Cpu) >= XT_MAX_CPUS) {
    fail(H + 4, fmt::format("CPU number {} of a TRACE_CPU_CHANGE record is outside 0..{}", Cpu,
                            XT_MAX_CPUS - 1));
    return false;
  }
  if (Bytes % 4) {
    fail(H + 8, fmt::format("window length {} of CPU {} is not a multiple of 4", Bytes, Cpu));
    return false;
  }
  Window W{H, H + 12, 0, Bytes, uint16_t(Cpu)};
  ScanPos = H + 12 + Bytes;
  uint64_t FirstTsc = 0;
  scanRecords(W, ScanLastTsc[unsigned(Cpu)], FirstTsc);
  FrontierTsc = FirstTsc;
  // The checked part of the window is readable even when the scan stopped inside it.
  queue(W);
  if (!HasError && ScanPos >= Size)
    ScanDone = true;
  return !HasError;
}

TraceReader::WindowStep TraceReader::nextWindow(Cursor &C, TraceRecord &R) {
  while (C.Pending.empty() && !ScanDone)
    scanWindow();
  if (C.Pending.empty())
    return WindowStep::End;
  C.Cur = C.Pending.front();
  C.Pending.pop_front();
  C.Pos = C.Cur.Data;
  C.End = C.Cur.Data + C.Cur.Bytes;
  // The scan has just read this window whole: the cursor takes its buffer (and gives
  // the scan its own) instead of reading the bytes again.
  if (Flavour == TraceFlavour::Modern && ScanHeldLen && C.Pos >= ScanHeldOff &&
      C.End <= ScanHeldOff + ScanHeldLen &&
      (C.Pos < C.BufOff || C.End > C.BufOff + C.BufLen)) {
    std::swap(C.Buf, ScanBuf);
    C.BufOff = ScanHeldOff;
    C.BufLen = ScanHeldLen;
    ScanHeldLen = 0;
    if (ScanBuf.size() < ChunkBytes)
      ScanBuf.resize(ChunkBytes);
  }
  if (Order == ReadOrder::File && Flavour == TraceFlavour::Modern) {
    // The window header itself, as xentrace_format showed it.
    R = TraceRecord{};
    R.Offset = C.Cur.Header;
    R.Event = XT_EV_TraceCpuChange;
    R.Cpu = C.Cur.Cpu;
    R.Tsc = ReadLastTsc[C.Cur.Cpu];
    R.NumWords = 2;
    R.Words[0] = C.Cur.Cpu;
    R.Words[1] = C.Cur.Announced;
    return WindowStep::Header;
  }
  return WindowStep::Records;
}

bool TraceReader::refill(Cursor &C) {
  // Every record of a queued window was checked by the scan: it is complete. A xen-3.0
  // window is one record; its chunk may run on past it (the next records of the file).
  const uint64_t Avail = Flavour == TraceFlavour::Xen30 ? Size - C.Pos : C.End - C.Pos;
  if (C.Buf.empty())
    C.Buf.resize(ChunkBytes);
  const size_t N = size_t(Avail < ChunkBytes ? Avail : ChunkBytes);
  if (!readAt(C.Pos, C.Buf.data(), N)) {
    C.Pos = C.End;
    C.Pending.clear();
    return false;
  }
  C.BufOff = C.Pos;
  C.BufLen = N;
  return true;
}

void TraceReader::decodeXen30(Cursor &C, TraceRecord &R) {
  const uint8_t *P = &C.Buf[C.Pos - C.BufOff];
  R = TraceRecord{};
  R.Offset = C.Cur.Header;
  R.Flavour = TraceFlavour::Xen30;
  R.Cpu = C.Cur.Cpu;
  R.HasTsc = true;
  R.Tsc = ReadLastTsc[C.Cur.Cpu] = loadQuad(P);
  R.Event = loadWord(P + 8);
  for (unsigned I = 0; I < XT30_ITEMS; ++I)
    R.Items[I] = loadQuad(P + 16 + 8 * I);
  C.Pos += XT30_RECORD_BYTES;
  if (R.Event == XT30_EV_LostRecords)
    Lost += R.Items[0];
}


bool TraceReader::fetch(Cursor &C, TraceRecord &R) {
  for (;;) {
    if (C.Pos >= C.End) [[unlikely]] {
      const WindowStep S = nextWindow(C, R);
      if (S == WindowStep::End)
        return false;
      if (S == WindowStep::Header)
        return true;
      continue;
    }
    if (Flavour == TraceFlavour::Xen30) [[unlikely]] {
      if ((C.Pos < C.BufOff || C.Pos + XT30_RECORD_BYTES > C.BufOff + C.BufLen) && !refill(C))
        return false;
      decodeXen30(C, R);
      return true;
    }
    // A modern record: the buffer holds the largest record's bytes from here, or the
    // rest of the window (the scan checked that the record lies inside it).
    const uint64_t Left = C.End - C.Pos;
    const size_t Want = Left < XT_MAX_RECORD_WORDS * 4 ? size_t(Left) : XT_MAX_RECORD_WORDS * 4;
    if ((C.Pos < C.BufOff || C.Pos + Want > C.BufOff + C.BufLen) && !refill(C)) [[unlikely]]
      return false;
    const uint8_t *P = &C.Buf[C.Pos - C.BufOff];
    const uint32_t Header = loadWord(P);
    R.Offset = C.Pos;
    R.Event = xt_header_event(Header);
    R.Cpu = C.Cur.Cpu;
    R.HasTsc = xt_header_has_tsc(Header);
    const unsigned NumWords = xt_header_words(Header);
    R.NumWords = uint8_t(NumWords);
    P += 4;
    uint64_t &Last = ReadLastTsc[C.Cur.Cpu];
    // The words it has, the others 0. Fast path: the buffer holds a record of the largest
    // size from here, so all seven words can be copied at once and the tail masked.
    if (std::endian::native == std::endian::little &&
        C.Pos + XT_MAX_RECORD_WORDS * 4 <= C.BufOff + C.BufLen) [[likely]] {
      if (R.HasTsc) {
        std::memcpy(&Last, P, 8);
        P += 8;
      }
      R.Tsc = Last;
      reader_detail::copyWordsMasked(P, NumWords, R.Words);
    } else {
      if (R.HasTsc) {
        Last = loadQuad(P);
        P += 8;
      }
      R.Tsc = Last;
      for (unsigned I = 0; I < XT_MAX_WORDS; ++I)
        R.Words[I] = I < NumWords ? loadWord(P + 4 * I) : 0;
    }
    C.Pos += uint64_t(xt_record_words(Header)) * 4;
    // WRAP_BUFFER is padding (format doc, section 4): merged readers skip it.
    if (Order == ReadOrder::Merged && R.Event == XT_EV_WrapBuffer) [[unlikely]]
      continue;
    if (R.Event == XT_EV_LostRecords && NumWords >= 1) [[unlikely]]
      Lost += R.Words[0];
    return true;
  }
}
const TraceRecord *TraceReader::nextMerged() {
  if (!Src)
    return nullptr;
  auto EnsureHead = [&](Cursor &C) {
    if (!C.HaveHead && !C.Exhausted) {
      if (fetch(C, C.Head))
        C.HaveHead = true;
      else
        C.Exhausted = true;
    }
  };
  // The record stays in its cursor's Head until that cursor fetches again, which is
  // not before the next call.
  auto Take = [&](Cursor &C) {
    C.HaveHead = false;
    LastCpu = C.Head.Cpu;
    return &C.Head;
  };
  // A trace of one CPU so far (a hypervisor's trace of one CPU, all of it): the loop
  // below returns the CPU's next record when it is untimed, or when no window left to
  // scan can start before it. Decided here without the loop's bookkeeping, once the
  // record is fetched (and the fetch has found no window of another CPU).
  if (LastCpu >= 0 && KnownCpus.size() == 1) {
    Cursor &C = Cursors[unsigned(LastCpu)];
    EnsureHead(C);
    if (C.HaveHead && KnownCpus.size() == 1 &&
        (!C.Head.HasTsc || ScanDone || FrontierTsc > C.Head.Tsc)) [[likely]]
      return Take(C);
  }
  for (;;) {
    // An untimed record belongs with the timed record before it (e.g. a handler record
    // after its VMX_EXIT): it follows it directly.
    if (LastCpu >= 0) {
      Cursor &C = Cursors[unsigned(LastCpu)];
      EnsureHead(C);
      if (C.HaveHead && !C.Head.HasTsc)
        return Take(C);
    }
    Cursor *Best = nullptr;
    const size_t Known = KnownCpus.size();
    for (size_t I = 0; I < KnownCpus.size(); ++I) {
      Cursor &C = Cursors[KnownCpus[I]];
      EnsureHead(C);
      if (C.HaveHead && (!Best || C.Head.Tsc < Best->Head.Tsc))
        Best = &C;
    }
    if (KnownCpus.size() != Known)
      continue; // a fetch scanned a window of a new CPU: compare again
    if (!Best) {
      if (ScanDone)
        return nullptr;
      scanWindow();
      continue;
    }
    // A window not yet scanned may hold earlier records (of a CPU not seen yet, too):
    // scan on until a window starts later than the candidate, as windows are written in
    // drain rounds (format doc, section 1).
    if (!ScanDone && FrontierTsc <= Best->Head.Tsc) {
      scanWindow();
      continue;
    }
    return Take(*Best);
  }
}

const TraceRecord *TraceReader::nextRecordOf(uint16_t Cpu) {
  if (!Src || Order != ReadOrder::Merged || Cpu >= Cursors.size())
    return nullptr;
  Cursor &C = Cursors[Cpu];
  if (C.Exhausted)
    return nullptr;
  if (fetch(C, C.Head))
    return &C.Head;
  C.Exhausted = true;
  return nullptr;
}

bool TraceReader::nextRawSlow(uint16_t Cpu, RawRecord &R) {
  const TraceRecord *T = nextRecordOf(Cpu);
  if (!T)
    return false;
  R.Offset = T->Offset;
  R.Tsc = T->Tsc;
  R.Event = T->Event;
  R.NumWords = T->NumWords;
  R.HasTsc = T->HasTsc;
  R.Words = reinterpret_cast<const uint8_t *>(T->Words);
  R.Full = T;
  return true;
}

const std::vector<uint16_t> &TraceReader::allCpus() {
  while (Src && !ScanDone)
    scanWindow();
  return KnownCpus;
}

const TraceRecord *TraceReader::nextRecordSlow() {
  if (Order == ReadOrder::Merged)
    return nextMerged();
  return Src && fetch(Cursors[0], FileRecord) ? &FileRecord : nullptr;
}

bool TraceReader::next(TraceRecord &R) {
  const TraceRecord *P = nextRecord();
  if (P)
    R = *P;
  return P != nullptr;
}

} // namespace vmxsim::trace
