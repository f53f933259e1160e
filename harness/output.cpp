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

Error OutputSink::open(const OutputSpec &Spec) {
  switch (Spec.K) {
  case OutputSpec::Kind::Stdout:
    Stream = stdout;
    break;
  case OutputSpec::Kind::File:
    Stream = std::fopen(Spec.Path.c_str(), "wb");
    if (!Stream)
      return Error(ErrorCode::HostFailure, std::string("cannot create: ") + std::strerror(errno),
                   Spec.Path);
    OwnsStream = true;
    break;
  case OutputSpec::Kind::Capture:
    Captured = true;
    break;
  case OutputSpec::Kind::Discard:
    break;
  }
  return Error::success();
}

} // namespace vmxsim
