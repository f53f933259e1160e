// The input log (`vmxsim run --record-input FILE`, `--replay-input FILE`; the "Input log"
// section of README.md): every input from outside the machine that its configuration
// does not fix, each with the exact point of the run it was consumed at, so that a run fed
// by the host (a person typing, a pipe, a person at gdb) can be run again byte for byte.
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
//   - gdb's register and memory writes (`--gdb`, harness/gdb_stub.h: packets G, P, M, X):
//     logged and replayed. gdb writes while the machine is stopped; the stop is named by
//     the instructions all CPUs have retired and each CPU's virtual clock (Cpu::Cycles)
//     there, which together tell every stop of a run from every other (each step of a CPU
//     retires an instruction or advances its clock: an event delivery, a VM exit or entry,
//     a wait). A replay (GdbWriteReplay, harness/gdb_stub.h) runs the machine to the
//     instruction count, then on from stop to stop of the run control (VM exits and
//     entries, each CPU reaching its logged clock) until every clock is the logged one,
//     and makes the writes there as the stub made them. A stop it runs past is a run that
//     is not the recorded one (InputLogMismatch). `--replay-input` itself refuses `--gdb`.
//   - libvmxsim's write functions (Machine::writeRegister, writeLinear, ...): called by the
//     embedding program between runs, so as deterministic as that program; not logged.
//     The library has no function that injects an interrupt.
//
// The file is text, one record a line:
//   vmxsim-input-log 1
//   machine image-crc=1a2b3c4d cpus=1
//   input com1                               (a port that read standard input; 0-2 lines)
//   serial com1 poll=12 cycle=1234567 byte=0x61
//   gdb stop insns=5000 cycles=2345678       (where gdb wrote: one clock per CPU)
//   gdb reg cpu=0 name=rdi bytes=5a00000000000000   (P: gdb's register, little-endian)
//   gdb regs cpu=0 bytes=...                 (G: every register, in gdb's order)
//   gdb mem cpu=0 la=0x10a2c0 bytes=58       (M, X: at a linear address of that CPU)
//   serial com1 poll=40 cycle=3456789 end    (the host's input ended there)
//   end events=6
// The machine line ties the log to one image (the CRC-32C of the image, its modules and
// command line, as a snapshot's) and CPU count. The last line is written when the run
// ends (it is rewritten if the run is continued): a log without it is truncated. Register
// names and sizes are checked when a replay starts, memory when it is written (a range
// the CPU's paging does not map or that is not RAM): both are errors of the log
// (BadInputLog), as a line that does not parse is.
#pragma once
#include "harness/error.h"

#include <cstdint>
#include <cstdio>
#include <optional>
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

/// A write gdb made (GdbStub: packets P, G, M, X).
struct GdbWrite {
  enum class Kind : uint8_t { Register, AllRegisters, Memory };
  Kind K = Kind::Register;
  unsigned Cpu = 0;
  std::string Reg;   ///< Register: gdb's name of it (GdbStub's target description)
  uint64_t La = 0;   ///< Memory: the linear address, through Cpu's paging
  std::string Bytes; ///< the register's little-endian bytes, G's payload, or the memory's
  uint64_t Line = 0; ///< where it is in the log (for errors; 0 when not read from a file)
  bool operator==(const GdbWrite &O) const {
    return K == O.K && Cpu == O.Cpu && Reg == O.Reg && La == O.La && Bytes == O.Bytes;
  }
};

/// Where the run was stopped when gdb wrote, and what it wrote there.
struct GdbStopPoint {
  uint64_t Retired = 0;        ///< instructions retired by all CPUs together
  std::vector<uint64_t> Cycles; ///< each CPU's virtual clock (Cpu::Cycles)
  std::vector<GdbWrite> Writes;
  uint64_t Line = 0;
  bool operator==(const GdbStopPoint &O) const {
    return Retired == O.Retired && Cycles == O.Cycles && Writes == O.Writes;
  }
};

/// "gdb stop insns=N cycles=C0,C1", "gdb reg cpu=0 name=rax bytes=..." (no newline).
std::string formatGdbStop(const GdbStopPoint &S);
std::string formatGdbWrite(const GdbWrite &W);

struct InputLog {
  static constexpr unsigned kVersion = 1;
  /// A larger file is refused (about 2 million logged bytes of input).
  static constexpr size_t kMaxFileBytes = 128ull << 20;
  /// The most bytes one gdb write line may carry (gdb's packets are smaller: the stub's
  /// PacketSize, harness/gdb_packet.h).
  static constexpr size_t kMaxGdbWriteBytes = 0x4000;
  uint32_t ImageCrc = 0;
  unsigned NumCpus = 0;
  /// Bit P-1: port P (1 = COM1, 2 = COM2) read the host's standard input.
  unsigned Ports = 0;
  std::vector<InputEvent> Events;
  /// gdb's writes, stop by stop in the order of the run.
  std::vector<GdbStopPoint> Gdb;

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
  /// A write gdb made, after the stop line of where the machine is (written when it is
  /// not the previous write's stop).
  void addGdbWrite(const GdbStopPoint &Where, const GdbWrite &W);
  /// Writes the end line (after the events so far; a later add() replaces it).
  void finish();
  /// "<path>: cannot write: <errno text>", or empty.
  const std::string &failure() const { return Failure; }

private:
  void write(const std::string &S);
  void addLine(const std::string &Line);
  std::FILE *F = nullptr;
  std::optional<GdbStopPoint> LastStop; ///< the stop of the last gdb write (no writes)
  std::string Path, Failure;
  uint64_t Count = 0;
  long EndAt = -1; ///< file offset of the end line, when written
};

} // namespace vmxsim
