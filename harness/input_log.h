// The input log (`vmxsim run --record-input FILE`, `--replay-input FILE`; the "Input log"
// section of README.md): every input from outside the machine that its configuration
// does not fix, each with the exact virtual time it was consumed at, so that a run fed by
// the host (a person typing, a pipe) can be run again byte for byte.
//
// What reaches guest-visible state from outside, and what the log does with it:
//   - a serial port's input from the host's standard input (`--serial-in -`): logged and
//     replayed (SerialInput, harness/devices/uart16550.h). The terminal polls the host
//     once per character time while it may send; the log holds every poll that found a
//     byte or the end of the input, by the port's poll number and the virtual cycle of
//     the poll. Polls that found nothing are not written: in a replay, a poll the log does
//     not name finds nothing.
//   - a `--serial-in FILE` is read whole when the machine is built: part of the
//     configuration, deterministic, not logged.
//   - gdb's register and memory writes (`--gdb`): not logged; `--record-input` and
//     `--replay-input` refuse `--gdb` (one line, status 2).
//   - libvmxsim's write functions (Machine::writeRegister, writeLinear, ...): called by the
//     embedding program between runs, so as deterministic as that program; not logged.
//     The library has no function that injects an interrupt.
//
// The file is text, one record a line:
//   vmxsim-input-log 1
//   machine image-crc=1a2b3c4d cpus=1
//   input com1                               (a port that read standard input; 0-2 lines)
//   serial com1 poll=12 cycle=1234567 byte=0x61
//   serial com1 poll=40 cycle=3456789 end    (the host's input ended there)
//   end events=2
// The machine line ties the log to one image (the CRC-32C of the image, its modules and
// command line, as a snapshot's) and CPU count. The last line is written when the run
// ends (it is rewritten if the run is continued): a log without it is truncated.
#pragma once
#include "harness/error.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace vmxsim {

/// One input the machine consumed.
struct InputEvent {
  enum class Kind : uint8_t { Byte, End };
  unsigned Port = 1;  ///< 1 = COM1, 2 = COM2
  uint64_t Poll = 0;  ///< the port's input poll it answered (0-based; every poll counts)
  uint64_t Cycle = 0; ///< the virtual cycle of that poll (the UART's clock)
  Kind K = Kind::Byte;
  uint8_t Value = 0;
  bool operator==(const InputEvent &) const = default;
};

struct InputLog {
  static constexpr unsigned kVersion = 1;
  /// A larger file is refused (about 2 million logged bytes of input).
  static constexpr size_t kMaxFileBytes = 128ull << 20;
  uint32_t ImageCrc = 0;
  unsigned NumCpus = 0;
  /// Bit P-1: port P (1 = COM1, 2 = COM2) read the host's standard input.
  unsigned Ports = 0;
  std::vector<InputEvent> Events;

  /// Parses a whole log. Errors (ErrorCode::BadInputLog), one line: "line N: what", or
  /// "truncated input log (no end line)", "not a vmxsim input log", "input log version N
  /// is not this vmxsim's (1)".
  static Error parse(std::string_view Text, InputLog &Out);
  /// Reads and parses Path (FileUnreadable if it cannot be read).
  static Error read(const std::string &Path, InputLog &Out);
  /// The log as text (what InputLogWriter writes).
  std::string text() const;
};

/// "serial com1 poll=12 cycle=1234567 byte=0x61" (no newline).
std::string formatInputEvent(const InputEvent &E);

/// Writes a log as the run consumes its inputs; each event is flushed to the file at
/// once, so that a run that is killed leaves every input it consumed (then without the
/// end line).
class InputLogWriter {
public:
  InputLogWriter() = default;
  ~InputLogWriter();
  InputLogWriter(const InputLogWriter &) = delete;
  InputLogWriter &operator=(const InputLogWriter &) = delete;
  Error open(const std::string &Path, uint32_t ImageCrc, unsigned NumCpus, unsigned Ports);
  void add(const InputEvent &E);
  /// Writes the end line (after the events so far; a later add() replaces it).
  void finish();
  /// "<path>: cannot write: <errno text>", or empty.
  const std::string &failure() const { return Failure; }

private:
  void write(const std::string &S);
  std::FILE *F = nullptr;
  std::string Path, Failure;
  uint64_t Count = 0;
  long EndAt = -1; ///< file offset of the end line, when written
};

} // namespace vmxsim
