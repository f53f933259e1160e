// The file handling the `trace import` commands share (trace/ftrace_import.h,
// trace/xen_console_import.h, trace/stream_import.h): the input read whole, the output
// written whole once the input was understood (a bad input leaves no file).
#pragma once
#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>

namespace vmxsim::trace {

/// The bytes of Path; nullopt after one line on Err ("vmxsim: error: cannot open 'P': ...").
std::optional<std::string> readImportInput(const std::string &Path, std::FILE *Err);
/// Creates or truncates Path with Bytes; false after one line on Err naming the failure.
bool writeImportOutput(const std::string &Path, const void *Data, size_t Bytes, std::FILE *Err);

} // namespace vmxsim::trace
