// `vmxsim trace import --xen-console FILE -o OUT`: Xen's own trace (the file xentrace wrote
// in dom0), taken back out of the console output the Xen kit's /init wrote it to
// (scripts/fetch-guests.sh, initramfs-xen.cpio.gz; docs/xen-trace.md):
//
//     vmxsim-xentrace: begin <bytes> <sha256 of the file, 64 hex digits>
//     <the file in base64, 76 characters a line (busybox base64), the last line shorter>
//     vmxsim-xentrace: end
//
// Lines may end in CR LF or CR CR LF (dom0's tty turns LF into CR LF, and Xen's console
// does the same again on COM1) and there may be other text before the begin
// line and after the end line (Xen's and Linux's console). Between them every line must be
// base64 of the full width but the last; a line of anything else (a console message that
// landed inside) is refused, as are a byte count or SHA-256 that does not match what the
// lines decode to. The bytes are written out unchanged: they are xentrace's file (XenTrace
// records in per-CPU windows), which `trace summary`, `dump`, `check` and xenalyze read.
//
// Exit status of the command: 0 imported; 2 the file cannot be read or written, no begin
// line, no end line (the output was cut), a malformed line, a count or sum that does not
// match.
#pragma once
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace vmxsim::trace {

struct XenConsoleImport {
  int Status = 0;       ///< 0 or kImportBadInput (trace/ftrace_import.h)
  std::string Problem;  ///< one line when Status is not 0
  std::vector<uint8_t> Bytes;
  uint64_t Lines = 0;   ///< base64 lines
};

/// Finds and decodes the trace in console text Text (Name names it in messages).
XenConsoleImport importXenConsole(std::string_view Text, const std::string &Name);

/// SHA-256 (FIPS 180-4) of Data.
std::array<uint8_t, 32> sha256(const uint8_t *Data, size_t Size);

/// `vmxsim trace import --xen-console In -o OutPath`: reads In, writes OutPath, prints
/// "imported N bytes ..." to Out and a failure as one line "vmxsim: error: ..." to Err.
int traceImportXenConsoleCommand(const std::string &In, const std::string &OutPath,
                                 std::FILE *Out, std::FILE *Err);

} // namespace vmxsim::trace
