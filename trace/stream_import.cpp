// Rebuilding a hypervisor trace from the UART stream (trace/stream_import.h).
#include "trace/stream_import.h"

#include "trace/import_files.h"

#include "trace/tbuf.h"
#include "trace/writer.h"
#include "trace/xentrace.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

namespace vmxsim::trace {

namespace {

/// zlib's CRC-32 (IEEE 802.3, reflected 0xedb88320, initial and final ~0), as the
/// producer computes it (hvm/vmx/tracestream.c).
uint32_t crc32Update(uint32_t Crc, const uint8_t *P, size_t Len) {
  for (size_t I = 0; I < Len; ++I) {
    Crc ^= P[I];
    for (unsigned K = 0; K < 8; ++K)
      Crc = (Crc >> 1) ^ (0xedb88320u & (0u - (Crc & 1u)));
  }
  return Crc;
}

int hexDigit(char C) {
  if (C >= '0' && C <= '9')
    return C - '0';
  if (C >= 'a' && C <= 'f')
    return C - 'a' + 10;
  return -1;
}

/// A hex number of 1..Max lower-case digits up to the next space.
std::optional<uint32_t> hexField(std::string_view &S, size_t Max) {
  const size_t Sp = S.find(' ');
  if (Sp == std::string_view::npos || Sp == 0 || Sp > Max)
    return std::nullopt;
  uint32_t V = 0;
  for (size_t I = 0; I < Sp; ++I) {
    const int D = hexDigit(S[I]);
    if (D < 0)
      return std::nullopt;
    V = V << 4 | uint32_t(D);
  }
  S.remove_prefix(Sp + 1);
  return V;
}

struct Frame {
  uint32_t Cpu = 0, Seq = 0, Format = 0;
  std::vector<uint8_t> Payload;
};

/// One frame from the text after the magic; false with Why when it is damaged.
bool parseFrame(std::string_view S, Frame &F, std::string &Why) {
  const auto Cpu = hexField(S, 8), Seq = hexField(S, 8), Format = hexField(S, 8);
  if (!Cpu || !Seq || !Format) {
    Why = "its cpu, sequence or format field is not hex";
    return false;
  }
  const size_t Sp = S.find(' ');
  if (Sp == std::string_view::npos || Sp % 8 || Sp == 0 || Sp / 2 > XT_STREAM_MAX_PAYLOAD) {
    Why = "its payload is not 4 to 192 bytes in whole words";
    return false;
  }
  F.Payload.resize(Sp / 2);
  for (size_t I = 0; I < Sp / 2; ++I) {
    const int Hi = hexDigit(S[2 * I]), Lo = hexDigit(S[2 * I + 1]);
    if (Hi < 0 || Lo < 0) {
      Why = "its payload is not hex";
      return false;
    }
    F.Payload[I] = uint8_t(Hi << 4 | Lo);
  }
  S.remove_prefix(Sp + 1);
  if (S.size() != 8) {
    Why = "its checksum is not 8 hex digits at the end of the line";
    return false;
  }
  uint32_t Crc = 0;
  for (char C : S) {
    const int D = hexDigit(C);
    if (D < 0) {
      Why = "its checksum is not hex";
      return false;
    }
    Crc = Crc << 4 | uint32_t(D);
  }
  F.Cpu = *Cpu;
  F.Seq = *Seq;
  F.Format = *Format;
  const uint32_t Head[3] = {F.Cpu, F.Seq, F.Format}; // little-endian host (x86-64)
  uint32_t Want = crc32Update(~0u, reinterpret_cast<const uint8_t *>(Head), sizeof(Head));
  Want = ~crc32Update(Want, F.Payload.data(), F.Payload.size());
  if (Crc != Want) {
    Why = fmt::format("its checksum is {:08x}, its contents give {:08x}", Crc, Want);
    return false;
  }
  if (F.Cpu >= XT_MAX_CPUS) {
    Why = fmt::format("cpu {} is beyond the {} a trace can have", F.Cpu, XT_MAX_CPUS);
    return false;
  }
  if (F.Format != XT_TBUF_FORMAT_MODERN && F.Format != XT_TBUF_FORMAT_XEN30) {
    Why = fmt::format("format {} is neither 0 (modern) nor 1 (xen-3.0)", F.Format);
    return false;
  }
  if (F.Format == XT_TBUF_FORMAT_XEN30 && F.Payload.size() % XT30_RECORD_BYTES) {
    Why = "its payload is not whole xen-3.0 records";
    return false;
  }
  return true;
}

} // namespace

StreamImportResult importStream(std::string_view Capture, TraceOutput &Out) {
  StreamImportResult R;
  constexpr std::string_view Magic = XT_STREAM_MAGIC;
  // The good frames in capture order, and the problems.
  std::vector<Frame> Frames;
  std::map<uint32_t, uint32_t> NextSeq;
  std::optional<uint32_t> FileFormat;
  for (size_t Pos = 0; Pos < Capture.size();) {
    size_t End = Capture.find('\n', Pos);
    if (End == std::string_view::npos)
      End = Capture.size();
    std::string_view Line = Capture.substr(Pos, End - Pos);
    if (!Line.empty() && Line.back() == '\r')
      Line.remove_suffix(1);
    const size_t M = Line.find(Magic);
    if (M != std::string_view::npos) {
      const uint64_t Offset = Pos + M;
      Frame F;
      std::string Why;
      if (!parseFrame(Line.substr(M + Magic.size()), F, Why)) {
        R.Problems.push_back(fmt::format("offset {:#x}: damaged frame: {}", Offset, Why));
      } else if (FileFormat && F.Format != *FileFormat) {
        R.Problems.push_back(fmt::format("offset {:#x}: damaged frame: format {} in a trace "
                                         "of format {}",
                                         Offset, F.Format, *FileFormat));
      } else {
        uint32_t &Next = NextSeq[F.Cpu];
        if (F.Seq < Next) {
          R.Problems.push_back(fmt::format("offset {:#x}: damaged frame: cpu {} frame {} "
                                           "comes after frame {}",
                                           Offset, F.Cpu, F.Seq, Next - 1));
        } else {
          if (F.Seq > Next)
            R.Problems.push_back(fmt::format("offset {:#x}: cpu {} frames {}..{} are missing",
                                             Offset, F.Cpu, Next, F.Seq - 1));
          Next = F.Seq + 1;
          FileFormat = F.Format;
          R.Cpus = std::max<unsigned>(R.Cpus, F.Cpu + 1);
          R.Bytes += F.Payload.size();
          ++R.Frames;
          Frames.push_back(std::move(F));
        }
      }
    }
    Pos = End + 1;
  }
  if (Frames.empty()) {
    R.Problems.push_back("the capture holds no trace frame (\"@XT1 ...\" lines: run the "
                         "image with tstream=auto or tstream=uart)");
    R.Status = 2;
    return R;
  }
  R.Format = *FileFormat;
  // Consecutive frames of one CPU become one window, as the drain writes a ring's bytes.
  TraceWriter W(Out, R.Cpus);
  std::vector<uint8_t> Run;
  for (size_t I = 0; I < Frames.size(); ++I) {
    const Frame &F = Frames[I];
    Run.insert(Run.end(), F.Payload.begin(), F.Payload.end());
    if (I + 1 < Frames.size() && Frames[I + 1].Cpu == F.Cpu)
      continue;
    if (R.Format == XT_TBUF_FORMAT_XEN30)
      W.writeXen30Records(F.Cpu, Run.data(), uint32_t(Run.size()));
    else
      W.writeWindow(F.Cpu, Run.data(), uint32_t(Run.size()));
    Run.clear();
  }
  W.flush();
  R.Status = R.Problems.empty() ? 0 : 2;
  return R;
}

int traceImportStreamCommand(const std::string &CapturePath, const std::string &OutPath,
                             std::FILE *Out, std::FILE *Err) {
  const std::optional<std::string> Text = readImportInput(CapturePath, Err);
  if (!Text)
    return 2;
  MemoryOutput Mem;
  const StreamImportResult R = importStream(*Text, Mem);
  for (const std::string &P : R.Problems)
    fmt::print(Err, "vmxsim: {}: {}\n", CapturePath, P);
  if (R.Frames == 0)
    return 2;
  if (!writeImportOutput(OutPath, Mem.Bytes.data(), Mem.Bytes.size(), Err))
    return 2;
  fmt::print(Out, "imported {} frames ({} bytes of {} records) of {} CPU(s){}\n", R.Frames,
             R.Bytes, R.Format == XT_TBUF_FORMAT_XEN30 ? "xen-3.0" : "modern", R.Cpus,
             R.Problems.empty() ? "" : fmt::format("; {} problem(s)", R.Problems.size()));
  return R.Status;
}

} // namespace vmxsim::trace
