// A one-line progress display on stderr for long runs and long traces: rewritten in
// place ("\r...", at most 4 times a second of host time) and erased when done. Only a
// terminal gets it: with stderr redirected (CI logs, tests, pipes) nothing is printed.
// Host time decides only when the line is redrawn, never anything the guest or a trace
// sees (DESIGN.md, Determinism).
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace vmxsim {

class ProgressLine {
public:
  /// Enabled only when Out is a terminal (isatty) and Allowed.
  explicit ProgressLine(std::FILE *Out = stderr, bool Allowed = true);
  /// Forced on or off (tests).
  ProgressLine(std::FILE *Out, bool Enabled, bool Forced);
  ~ProgressLine() { done(); }
  ProgressLine(const ProgressLine &) = delete;
  ProgressLine &operator=(const ProgressLine &) = delete;

  bool enabled() const { return Enabled; }
  /// Redraws the line with Text if the last redraw is 250 ms old (or Force).
  void show(const std::string &Text, bool Force = false);
  /// Erases the line (once).
  void done();

  /// "1.23 G instructions, 345 MIPS" style text for a run.
  static std::string runText(uint64_t Retired, double Seconds);
  /// "trace: 45% of 1.2 GB, 210 MB/s" for a file read.
  static std::string bytesText(const char *What, uint64_t Done, uint64_t Total,
                               double Seconds);
  /// Seconds since construction.
  double elapsed() const;

private:
  std::FILE *Out;
  bool Enabled;
  bool Shown = false;
  size_t LastLen = 0;
  std::chrono::steady_clock::time_point Start, Last;
};

} // namespace vmxsim
