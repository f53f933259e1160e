// Where a character device's output goes: the host's stdout, a file, an in-memory buffer
// (tests read it back), or nowhere. Bytes are written unchanged, in guest order.
#pragma once
#include "harness/error.h"

#include <cstdio>
#include <string>

namespace vmxsim {

struct OutputSpec {
  enum class Kind : uint8_t { Stdout, File, Capture, Discard };
  Kind K = Kind::Stdout;
  std::string Path; ///< for Kind::File

  static OutputSpec stdoutSpec() { return {Kind::Stdout, {}}; }
  static OutputSpec file(std::string P) { return {Kind::File, std::move(P)}; }
  static OutputSpec capture() { return {Kind::Capture, {}}; }
  static OutputSpec discard() { return {Kind::Discard, {}}; }
};

class OutputSink {
public:
  OutputSink() = default;
  ~OutputSink();
  OutputSink(const OutputSink &) = delete;
  OutputSink &operator=(const OutputSink &) = delete;

  /// Opens the destination (creates/truncates a file).
  Error open(const OutputSpec &Spec);
  void put(uint8_t Byte) {
    if (Captured)
      Buffer.push_back(char(Byte));
    else if (Stream)
      std::fputc(Byte, Stream);
  }
  void flush() {
    if (Stream)
      std::fflush(Stream);
  }
  /// Everything written so far when the spec was Capture; empty otherwise.
  const std::string &captured() const { return Buffer; }

private:
  std::FILE *Stream = nullptr;
  bool OwnsStream = false;
  bool Captured = false;
  std::string Buffer;
};

} // namespace vmxsim
