// `vmxsim trace import CAPTURE -o OUT`: a hypervisor trace that left its machine through
// the serial console (the UART stream of trace/tbuf.h: "@XT1 cpu seq format payload crc"
// lines, which the bundled core writes with tstream=auto on Bochs, QEMU/KVM or hardware,
// or tstream=uart anywhere) rebuilt into the XenTrace file vmxsim's drain would have
// written: each CPU's frames, in order, as windows of that CPU (modern format) or as
// xen-3.0 records behind its CPU number.
//
// Everything else in the capture (the console's text, a line prefix a terminal program
// added before the magic, CR LF endings) is ignored. A frame whose fields or checksum
// are wrong is damaged: reported with its byte offset in the capture, left out; a gap in
// a CPU's frame numbers (frames lost, or damaged beyond recognition) is reported as the
// frames missing; every good frame is kept. The file holds one format: a frame of the
// other format is damaged.
//
// Exit status of the command: 0 every frame good; 2 the capture cannot be read, holds no
// frame, or had damaged or missing frames (the file is still written with the good
// ones, each problem on its own line); 2 also when the output cannot be written.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace vmxsim::trace {

class TraceOutput;

struct StreamImportResult {
  int Status = 0;                    ///< 0 or 2
  std::vector<std::string> Problems; ///< one line each: damaged frames, missing frames
  uint64_t Frames = 0, Bytes = 0;    ///< good frames and their payload bytes
  unsigned Cpus = 0;                 ///< highest CPU number + 1
  uint32_t Format = 0;               ///< XT_TBUF_FORMAT_MODERN or _XEN30
};

/// Parses Capture (Name for messages) and writes the trace to Out when it holds a frame.
StreamImportResult importStream(std::string_view Capture, TraceOutput &Out);

/// The command: reads CapturePath, writes OutPath, prints a one-line summary to Out and
/// the problems to Err; returns the status.
int traceImportStreamCommand(const std::string &CapturePath, const std::string &OutPath,
                             std::FILE *Out, std::FILE *Err);

} // namespace vmxsim::trace
