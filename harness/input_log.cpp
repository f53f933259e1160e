#include "harness/input_log.h"

#include "harness/gdb_packet.h"
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

std::string formatGdbStop(const GdbStopPoint &S) {
  std::string C;
  for (uint64_t V : S.Cycles)
    C += (C.empty() ? "" : ",") + std::to_string(V);
  return fmt::format("gdb stop insns={} cycles={}", S.Retired, C);
}

std::string formatGdbWrite(const GdbWrite &W) {
  const std::string Hex = gdb::toHex(W.Bytes);
  switch (W.K) {
  case GdbWrite::Kind::Register:
    return fmt::format("gdb reg cpu={} name={} bytes={}", W.Cpu, W.Reg, Hex);
  case GdbWrite::Kind::AllRegisters:
    return fmt::format("gdb regs cpu={} bytes={}", W.Cpu, Hex);
  case GdbWrite::Kind::Memory:
    break;
  }
  return fmt::format("gdb mem cpu={} la={:#x} bytes={}", W.Cpu, W.La, Hex);
}

namespace {

/// The lines of the log's events that the end line counts.
uint64_t eventLines(const InputLog &L) {
  uint64_t N = L.Events.size();
  for (const GdbStopPoint &S : L.Gdb)
    N += 1 + S.Writes.size();
  return N;
}

/// A gdb line's words after "gdb" into Log (Words[0] is "gdb"); an error text, or empty.
std::string parseGdbLine(const std::vector<std::string_view> &W, InputLog &Log,
                         uint64_t LineNo) {
  if (W.size() < 2)
    return "expected 'gdb stop', 'gdb reg', 'gdb regs' or 'gdb mem'";
  if (W[1] == "stop") {
    GdbStopPoint S;
    S.Line = LineNo;
    if (W.size() != 4 || !keyed(W[2], "insns", S.Retired) ||
        W[3].substr(0, 7) != "cycles=")
      return "expected 'gdb stop insns=N cycles=C0,C1,...'";
    std::string_view Rest = W[3].substr(7);
    while (true) {
      const size_t Comma = Rest.find(',');
      uint64_t V = 0;
      if (!parseWholeNumber(Rest.substr(0, Comma), V))
        return "expected 'gdb stop insns=N cycles=C0,C1,...'";
      S.Cycles.push_back(V);
      if (Comma == std::string_view::npos)
        break;
      Rest.remove_prefix(Comma + 1);
    }
    if (S.Cycles.size() != Log.NumCpus)
      return fmt::format("{} clocks for {} CPUs", S.Cycles.size(), Log.NumCpus);
    if (!Log.Gdb.empty()) {
      // Later in the same run: no clock goes back, something moved.
      const GdbStopPoint &P = Log.Gdb.back();
      bool Back = S.Retired < P.Retired, Same = S.Retired == P.Retired;
      for (unsigned I = 0; I < Log.NumCpus; ++I) {
        Back |= S.Cycles[I] < P.Cycles[I];
        Same &= S.Cycles[I] == P.Cycles[I];
      }
      if (Back || Same)
        return "gdb stops must come in the order of the run, each after the last";
    }
    Log.Gdb.push_back(std::move(S));
    return {};
  }
  GdbWrite G;
  G.Line = LineNo;
  uint64_t Cpu = 0;
  std::string_view Hex;
  if (W[1] == "reg" && W.size() == 5 && keyed(W[2], "cpu", Cpu) &&
      W[3].substr(0, 5) == "name=" && W[3].size() > 5 && W[4].substr(0, 6) == "bytes=") {
    G.K = GdbWrite::Kind::Register;
    G.Reg = std::string(W[3].substr(5));
    Hex = W[4].substr(6);
  } else if (W[1] == "regs" && W.size() == 4 && keyed(W[2], "cpu", Cpu) &&
             W[3].substr(0, 6) == "bytes=") {
    G.K = GdbWrite::Kind::AllRegisters;
    Hex = W[3].substr(6);
  } else if (W[1] == "mem" && W.size() == 5 && keyed(W[2], "cpu", Cpu) &&
             keyed(W[3], "la", G.La) && W[4].substr(0, 6) == "bytes=") {
    G.K = GdbWrite::Kind::Memory;
    Hex = W[4].substr(6);
  } else {
    return "expected 'gdb reg cpu=N name=REG bytes=HEX', 'gdb regs cpu=N bytes=HEX' or "
           "'gdb mem cpu=N la=ADDR bytes=HEX'";
  }
  std::optional<std::string> Bytes = gdb::fromHex(Hex);
  if (!Bytes || Bytes->empty() || Bytes->size() > InputLog::kMaxGdbWriteBytes)
    return fmt::format("bytes= must be 1 to {} bytes in hex",
                       unsigned(InputLog::kMaxGdbWriteBytes));
  if (Cpu >= Log.NumCpus)
    return fmt::format("no CPU {} (the machine has {})", Cpu, Log.NumCpus);
  if (G.K == GdbWrite::Kind::Memory && G.La + (Bytes->size() - 1) < G.La)
    return "the memory range wraps around";
  if (Log.Gdb.empty())
    return "a gdb write before any 'gdb stop' line";
  G.Cpu = unsigned(Cpu);
  G.Bytes = std::move(*Bytes);
  Log.Gdb.back().Writes.push_back(std::move(G));
  return {};
}

} // namespace

std::string InputLog::text() const {
  std::string S = fmt::format("vmxsim-input-log {}\nmachine image-crc={:08x} cpus={}\n",
                              kVersion, ImageCrc, NumCpus);
  for (unsigned P = 1; P <= 2; ++P)
    if (Ports & (1u << (P - 1)))
      S += fmt::format("input com{}\n", P);
  for (const InputEvent &E : Events)
    S += formatInputEvent(E) + "\n";
  for (const GdbStopPoint &P : Gdb) {
    S += formatGdbStop(P) + "\n";
    for (const GdbWrite &W : P.Writes)
      S += formatGdbWrite(W) + "\n";
  }
  return S + fmt::format("end events={}\n", eventLines(*this));
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
    if (W[0] == "gdb") {
      if (const std::string Why = parseGdbLine(W, Out, LineNo); !Why.empty())
        return lineErr(Why);
      continue;
    }
    if (W[0] == "end") {
      uint64_t N = 0;
      if (W.size() != 2 || !keyed(W[1], "events", N))
        return lineErr("expected 'end events=N'");
      if (N != eventLines(Out))
        return lineErr(fmt::format("the end line counts {} events, the log holds {}", N,
                                   eventLines(Out)));
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

void InputLogWriter::addLine(const std::string &Line) {
  if (F && EndAt >= 0) {
    // The run goes on after an end line: the event replaces it.
    if (std::fseek(F, EndAt, SEEK_SET) != 0)
      Failure = fmt::format("{}: cannot write: {}", Path, std::strerror(errno));
    EndAt = -1;
  }
  ++Count;
  write(Line + "\n");
}

void InputLogWriter::add(const InputEvent &E) { addLine(formatInputEvent(E)); }

void InputLogWriter::addGdbWrite(const GdbStopPoint &Where, const GdbWrite &W) {
  if (!LastStop || !(LastStop->Retired == Where.Retired && LastStop->Cycles == Where.Cycles)) {
    addLine(formatGdbStop(Where));
    LastStop = Where;
  }
  addLine(formatGdbWrite(W));
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
