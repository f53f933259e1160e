#include "harness/progress.h"

#include <fmt/format.h>

#include <unistd.h>

namespace vmxsim {

ProgressLine::ProgressLine(std::FILE *Out, bool Allowed)
    : ProgressLine(Out, Allowed && Out && isatty(fileno(Out)), true) {}

ProgressLine::ProgressLine(std::FILE *Out, bool Enabled, bool)
    : Out(Out), Enabled(Enabled), Start(std::chrono::steady_clock::now()), Last(Start) {}

double ProgressLine::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - Start).count();
}

void ProgressLine::show(const std::string &Text, bool Force) {
  if (!Enabled)
    return;
  const auto Now = std::chrono::steady_clock::now();
  if (!Force && Shown && Now - Last < std::chrono::milliseconds(250))
    return;
  Last = Now;
  // Pad over the previous text so a shorter line leaves nothing behind.
  const size_t Pad = LastLen > Text.size() ? LastLen - Text.size() : 0;
  fmt::print(Out, "\r{}{:{}}", Text, "", Pad);
  std::fflush(Out);
  LastLen = Text.size();
  Shown = true;
}

void ProgressLine::done() {
  if (!Enabled || !Shown)
    return;
  fmt::print(Out, "\r{:{}}\r", "", LastLen);
  std::fflush(Out);
  Shown = false;
}

namespace {
/// "1.23 G<Unit>", "5.0 M<Unit>", "12 <Unit>" ("12" without a unit).
std::string scaled(double V, const char *Unit) {
  if (V >= 1e9)
    return fmt::format("{:.2f} G{}", V / 1e9, Unit);
  if (V >= 1e6)
    return fmt::format("{:.1f} M{}", V / 1e6, Unit);
  if (V >= 1e3)
    return fmt::format("{:.1f} k{}", V / 1e3, Unit);
  return fmt::format("{:.0f}{}{}", V, *Unit ? " " : "", Unit);
}
} // namespace

std::string ProgressLine::runText(uint64_t Retired, double Seconds) {
  const double Mips = Seconds > 0 ? double(Retired) / Seconds / 1e6 : 0;
  return fmt::format("vmxsim: {} instructions, {:.0f} MIPS, {:.1f} s",
                     scaled(double(Retired), ""), Mips, Seconds);
}

std::string ProgressLine::bytesText(const char *What, uint64_t Done, uint64_t Total,
                                    double Seconds) {
  const double Pct = Total ? 100.0 * double(Done) / double(Total) : 100.0;
  const double Rate = Seconds > 0 ? double(Done) / Seconds : 0;
  return fmt::format("vmxsim: {} {:.0f}% of {}, {}/s", What, Pct, scaled(double(Total), "B"),
                     scaled(Rate, "B"));
}

} // namespace vmxsim
