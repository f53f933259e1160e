#include "harness/output.h"

#include <cerrno>
#include <cstring>

namespace vmxsim {

OutputSink::~OutputSink() {
  if (OwnsStream)
    std::fclose(Stream);
  else
    flush();
}

void OutputSink::noteFailure() {
  const int E = errno;
  if (Failure.empty())
    Failure = Name + ": cannot write: " + std::strerror(E ? E : EIO);
  std::clearerr(Stream);
}

Error OutputSink::open(const OutputSpec &Spec, Buffering B) {
  switch (Spec.K) {
  case OutputSpec::Kind::Stdout:
    Stream = stdout;
    Name = "standard output";
    break;
  case OutputSpec::Kind::File:
    Stream = std::fopen(Spec.Path.c_str(), "wb");
    if (!Stream)
      return Error(ErrorCode::HostFailure, std::string("cannot create: ") + std::strerror(errno),
                   Spec.Path);
    OwnsStream = true;
    Name = Spec.Path;
    break;
  case OutputSpec::Kind::Capture:
    Captured = true;
    return Error::success();
  case OutputSpec::Kind::Discard:
    return Error::success();
  }
  // A device's text is flushed at every newline (one write a line); bulk output keeps
  // stdio's buffering and is flushed when the run stops.
  LineFlush = B == Buffering::LineBuffered;
  return Error::success();
}

void OutputSink::setTap(void (*Fn)(void *, uint8_t), void *Context) {
  if (Tap) { // the destination back
    Captured = ParkedCaptured;
    Stream = ParkedStream;
  }
  Tap = Fn;
  TapContext = Context;
  if (Tap) {
    ParkedCaptured = Captured;
    ParkedStream = Stream;
    Captured = false;
    Stream = nullptr;
  }
}

void OutputSink::putTapped(uint8_t Byte) {
  Tap(TapContext, Byte);
  // put() has counted the byte; it goes on to the parked destination, if there is one
  // (a discarding sink has none: the tap is all it has).
  if (ParkedCaptured) {
    Buffer.push_back(char(Byte));
  } else if (ParkedStream) {
    if (std::fputc(Byte, ParkedStream) == EOF)
      noteFailure();
    else if (Byte == '\n' && LineFlush)
      flush();
  }
}

} // namespace vmxsim
