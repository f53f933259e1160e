// Where a character device's output goes: the host's stdout, a file, an in-memory buffer
// (tests read it back), or nowhere. Bytes are written unchanged, in guest order.
//
// Write-through: a device's output (the UART, the debug console) is line-buffered, so
// every line reaches its file as the guest finishes it, and Machine::run flushes every
// sink before it returns, so nothing is lost when a run is stopped (a signal, an error).
// A write that fails is remembered (the first error, with errno's text) and reported by
// Machine::outputProblems(); the guest keeps running (a full disk does not change what
// the guest sees).
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
  /// How bytes are grouped into host writes: LineBuffered for a device's text output
  /// (written at every newline), FullyBuffered for bulk output (the instruction trace).
  enum class Buffering : uint8_t { LineBuffered, FullyBuffered };

  OutputSink() = default;
  ~OutputSink();
  OutputSink(const OutputSink &) = delete;
  OutputSink &operator=(const OutputSink &) = delete;

  /// Opens the destination (creates/truncates a file). A FIFO is opened for writing
  /// like a file: the open waits for a reader (the vmxsim command says so first).
  Error open(const OutputSpec &Spec, Buffering B = Buffering::LineBuffered);
  void put(uint8_t Byte) {
    ++Produced;
    if (Captured)
      Buffer.push_back(char(Byte));
    else if (Stream) {
      if (std::fputc(Byte, Stream) == EOF) [[unlikely]]
        noteFailure();
      else if (Byte == '\n' && LineFlush)
        flush();
    } else if (Tap) [[unlikely]] {
      putTapped(Byte);
    }
  }
  void flush() {
    std::FILE *S = Stream ? Stream : ParkedStream; // ParkedStream: null without a tap
    if (S && std::fflush(S) != 0)
      noteFailure();
  }
  /// Everything written so far when the spec was Capture; empty otherwise.
  const std::string &captured() const { return Buffer; }
  /// Empty while every write succeeded; else "<name>: cannot write: <errno text>" for
  /// the first failure.
  const std::string &failure() const { return Failure; }
  /// Bytes put so far (a restored machine's sinks continue the count of the run its
  /// snapshot was taken in: harness/snapshot.h).
  uint64_t produced() const { return Produced; }
  void setProduced(uint64_t N) { Produced = N; }
  /// Also hands every byte to Fn(Context, Byte) (the run control's serial condition,
  /// harness/run_control.h); null = none. While a tap is set, the sink's destination is
  /// parked so that put() reaches putTapped through its last branch: a sink without a
  /// tap pays nothing for the feature.
  void setTap(void (*Fn)(void *, uint8_t), void *Context);

private:
  void putTapped(uint8_t Byte);
  void (*Tap)(void *, uint8_t) = nullptr;
  void *TapContext = nullptr;
  bool ParkedCaptured = false;
  std::FILE *ParkedStream = nullptr;
  void noteFailure();

  std::FILE *Stream = nullptr;
  uint64_t Produced = 0;
  bool OwnsStream = false;
  bool Captured = false;
  bool LineFlush = false;
  std::string Name; ///< the path, or "standard output"
  std::string Buffer;
  std::string Failure;
};

} // namespace vmxsim
