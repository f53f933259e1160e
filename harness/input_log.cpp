#include "harness/input_log.h"

#include "harness/loader.h"
#include "harness/whole_number.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <unistd.h>

namespace vmxsim {

namespace {

std::vector<std::string_view> words(std::string_view Line) {
  std::vector<std::string_view> W;
  size_t I = 0;
  while (I < Line.size()) {
    while (I < Line.size() && Line[I] == ' ')
      ++I;
    const size_t B = I;
    while (I < Line.size() && Line[I] != ' ')
      ++I;
    if (I > B)
      W.push_back(Line.substr(B, I - B));
  }
  return W;
}

/// "key=NUMBER".
bool keyed(std::string_view W, std::string_view Key, uint64_t &Out) {
  if (W.size() <= Key.size() + 1 || W.substr(0, Key.size()) != Key || W[Key.size()] != '=')
    return false;
  return parseWholeNumber(W.substr(Key.size() + 1), Out);
}

bool portName(std::string_view W, unsigned &Port) {
  if (W == "com1")
    Port = 1;
  else if (W == "com2")
    Port = 2;
  else
    return false;
  return true;
}

/// The line for an error message: printable, at most 60 characters.
std::string shown(std::string_view Line) {
  std::string S;
  for (char C : Line.substr(0, 60))
    S += (uint8_t(C) < 0x20 || uint8_t(C) >= 0x7f) ? '?' : C;
  return S;
}

} // namespace

std::string formatInputEvent(const InputEvent &E) {
  std::string S = fmt::format("serial com{} poll={} cycle={}", E.Port, E.Poll, E.Cycle);
  if (E.K == InputEvent::Kind::End)
    return S + " end";
  return S + fmt::format(" byte={:#04x}", E.Value);
}

std::string InputLog::text() const {
  std::string S = fmt::format("vmxsim-input-log {}\nmachine image-crc={:08x} cpus={}\n",
                              kVersion, ImageCrc, NumCpus);
  for (unsigned P = 1; P <= 2; ++P)
    if (Ports & (1u << (P - 1)))
      S += fmt::format("input com{}\n", P);
  for (const InputEvent &E : Events)
    S += formatInputEvent(E) + "\n";
  return S + fmt::format("end events={}\n", Events.size());
}

Error InputLog::parse(std::string_view Text, InputLog &Out) {
  Out = InputLog{};
  auto bad = [](std::string M) { return Error(ErrorCode::BadInputLog, std::move(M)); };
  uint64_t LineNo = 0;
  bool Machine = false, Ended = false;
  uint64_t LastPoll[2] = {0, 0};
  bool AnyPoll[2] = {false, false}, PortEnded[2] = {false, false};
  size_t Pos = 0;
  while (Pos < Text.size()) {
    size_t Nl = Text.find('\n', Pos);
    if (Nl == std::string_view::npos)
      return bad("truncated input log (the last line has no newline)");
    const std::string_view Line = Text.substr(Pos, Nl - Pos);
    Pos = Nl + 1;
    ++LineNo;
    auto lineErr = [&](const std::string &What) {
      return bad(fmt::format("line {}: {}: '{}'", LineNo, What, shown(Line)));
    };
    const std::vector<std::string_view> W = words(Line);
    if (LineNo == 1) {
      uint64_t V = 0;
      if (W.size() != 2 || W[0] != "vmxsim-input-log")
        return bad("not a vmxsim input log (the first line is not 'vmxsim-input-log 1')");
      if (!parseWholeNumber(W[1], V) || V != kVersion)
        return bad(fmt::format("input log version '{}' is not this vmxsim's ({})",
                               shown(W[1]), kVersion));
      continue;
    }
    if (Ended)
      return lineErr("a line after the end line");
    if (W.empty())
      return lineErr("an empty line");
    if (W[0] == "machine") {
      uint64_t Crc = 0, Cpus = 0;
      if (Machine || LineNo != 2 || W.size() != 3 || W[1].substr(0, 10) != "image-crc=" ||
          W[1].size() != 18 || !parseWholeNumber("0x" + std::string(W[1].substr(10)), Crc) ||
          !keyed(W[2], "cpus", Cpus) || Cpus < 1 || Cpus > 64)
        return lineErr("expected 'machine image-crc=XXXXXXXX cpus=N' (N 1..64) as line 2");
      Out.ImageCrc = uint32_t(Crc);
      Out.NumCpus = unsigned(Cpus);
      Machine = true;
      continue;
    }
    if (!Machine)
      return lineErr("expected the machine line as line 2");
    if (W[0] == "input") {
      unsigned P = 0;
      if (W.size() != 2 || !portName(W[1], P) || !Out.Events.empty())
        return lineErr("expected 'input com1' or 'input com2' before the events");
      if (Out.Ports & (1u << (P - 1)))
        return lineErr("the port is named twice");
      Out.Ports |= 1u << (P - 1);
      continue;
    }
    if (W[0] == "serial") {
      InputEvent E;
      uint64_t V = 0;
      if (W.size() != 5 || !portName(W[1], E.Port) || !keyed(W[2], "poll", E.Poll) ||
          !keyed(W[3], "cycle", E.Cycle))
        return lineErr("expected 'serial comN poll=P cycle=C byte=0xBB' or '... end'");
      if (W[4] == "end")
        E.K = InputEvent::Kind::End;
      else if (!keyed(W[4], "byte", V) || V > 0xff)
        return lineErr("expected 'byte=0xBB' (a byte) or 'end'");
      E.Value = uint8_t(V);
      const unsigned I = E.Port - 1;
      if (!(Out.Ports & (1u << I)))
        return lineErr("an event of a port the log has no 'input' line for");
      if (PortEnded[I])
        return lineErr("an event after the port's input ended");
      if (AnyPoll[I] && E.Poll <= LastPoll[I])
        return lineErr("poll numbers of a port must increase");
      AnyPoll[I] = true;
      LastPoll[I] = E.Poll;
      PortEnded[I] = E.K == InputEvent::Kind::End;
      Out.Events.push_back(E);
      continue;
    }
    if (W[0] == "end") {
      uint64_t N = 0;
      if (W.size() != 2 || !keyed(W[1], "events", N))
        return lineErr("expected 'end events=N'");
      if (N != Out.Events.size())
        return lineErr(fmt::format("the end line counts {} events, the log holds {}", N,
                                   Out.Events.size()));
      Ended = true;
      continue;
    }
    return lineErr("not a line of an input log");
  }
  if (LineNo == 0)
    return bad("not a vmxsim input log (the file is empty)");
  if (!Ended)
    return bad("truncated input log (no end line)");
  return Error::success();
}

Error InputLog::read(const std::string &Path, InputLog &Out) {
  ImageFile F;
  if (Error E = ImageFile::open(Path, kMaxFileBytes, F)) {
    E.Path = Path;
    return E;
  }
  const std::span<const uint8_t> B = F.bytes();
  Error E = parse(std::string_view(reinterpret_cast<const char *>(B.data()), B.size()), Out);
  E.Path = E ? Path : "";
  return E;
}

// --- The writer ---

InputLogWriter::~InputLogWriter() {
  if (F)
    std::fclose(F);
}

Error InputLogWriter::open(const std::string &P, uint32_t ImageCrc, unsigned NumCpus,
                           unsigned Ports) {
  Path = P;
  F = std::fopen(P.c_str(), "w");
  if (!F)
    return Error(ErrorCode::HostFailure,
                 fmt::format("cannot create input log: {}", std::strerror(errno)), P);
  InputLog Head;
  Head.ImageCrc = ImageCrc;
  Head.NumCpus = NumCpus;
  Head.Ports = Ports;
  std::string T = Head.text();
  T.resize(T.rfind("end events=")); // the end line comes when the run ends
  write(T);
  return Error::success();
}

void InputLogWriter::write(const std::string &S) {
  if (!F || !Failure.empty())
    return;
  if (std::fwrite(S.data(), 1, S.size(), F) != S.size() || std::fflush(F) != 0)
    Failure = fmt::format("{}: cannot write: {}", Path, std::strerror(errno ? errno : EIO));
}

void InputLogWriter::add(const InputEvent &E) {
  if (F && EndAt >= 0) {
    // The run goes on after an end line: the event replaces it.
    if (std::fseek(F, EndAt, SEEK_SET) != 0)
      Failure = fmt::format("{}: cannot write: {}", Path, std::strerror(errno));
    EndAt = -1;
  }
  ++Count;
  write(formatInputEvent(E) + "\n");
}

void InputLogWriter::finish() {
  if (!F || !Failure.empty())
    return;
  if (EndAt >= 0 && std::fseek(F, EndAt, SEEK_SET) != 0)
    return;
  EndAt = std::ftell(F);
  write(fmt::format("end events={}\n", Count));
  if (Failure.empty() && ::ftruncate(::fileno(F), std::ftell(F)) != 0)
    Failure = fmt::format("{}: cannot write: {}", Path, std::strerror(errno));
}

} // namespace vmxsim
