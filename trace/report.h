// `vmxsim trace report FILE -o report.html`: one self-contained HTML page (no network
// fetch, no external script, font or style sheet; a Content-Security-Policy forbids them)
// with the summary tables and three plots drawn as SVG by a small inline script:
// - the exit-reason distribution, for all CPUs together and for each CPU;
// - a histogram of the exit-to-entry cycles of each exit reason;
// - a timeline of exits, one lane per CPU, coloured by exit reason.
//
// Everything the script draws comes from ONE JSON block in the page
// (<script type="application/json" id="vmxsim-data">). Its "summary" member is the text
// printSummary(..., SummaryFormat::Json) prints for the same trace, embedded verbatim
// (only escaped for a <script> element), and the distribution bars are drawn from it, so
// the plots and `vmxsim trace summary --format json` agree by construction.
//
// The summary has no samples, so the histograms and the timeline are built from the
// summary's own pass (collectReportData), from every exit as the summary pairs it
// (SummaryOptions::OnExit): one pass, one set of pairing rules. Its memory: the cycle
// samples per exit reason (as the summary's) and at most
// ReportOptions::MaxTimelinePoints timeline points.
#pragma once
#include "trace/summary.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vmxsim::trace {

struct ReportOptions {
  /// Timeline points kept over all CPUs; past it, every k-th exit is kept (k doubling).
  size_t MaxTimelinePoints = 20000;
  /// Histogram bins per exit reason (at most; fewer when the samples span fewer values).
  unsigned HistogramBins = 24;
  /// Shown as the page's heading, e.g. the trace file's name.
  std::string Title;
  /// Tests only: the page's script throws after it has drawn everything, to prove that
  /// the headless-browser check catches script errors.
  bool InjectScriptError = false;
};

/// Cycle histogram of the closed exits of one basic exit reason, over all CPUs. Bin I
/// counts cycles in [Edges[I], Edges[I + 1]); Edges.back() is the maximum + 1.
struct ReasonHistogram {
  uint32_t Reason = 0;
  uint64_t Exits = 0;    ///< every exit with this reason, closed or not
  uint64_t Unclosed = 0; ///< exits with no VM entry after them (no cycles)
  bool LogBins = false;  ///< bin widths grow geometrically (samples span >= 32x)
  std::vector<uint64_t> Edges;
  std::vector<uint64_t> Counts; ///< Edges.size() - 1 bins; sum = Exits - Unclosed
};

/// One exit on the timeline.
struct TimelinePoint {
  uint64_t Tsc = 0;    ///< TSC of the exit record
  uint64_t Cycles = 0; ///< exit to entry; meaningful only when Closed
  uint32_t Reason = 0; ///< basic exit reason
  uint16_t Cpu = 0;
  bool Closed = false;
};

struct ReportData {
  std::vector<ReasonHistogram> Histograms; ///< ascending reason
  std::vector<TimelinePoint> Timeline;     ///< ascending (Cpu, Tsc)
  uint64_t Exits = 0;       ///< every exit of the trace
  uint64_t Stride = 1;      ///< the timeline holds the exits whose ordinal % Stride == 0
  size_t MaxPoints = 0;     ///< the cap the timeline was built with
  uint64_t FirstTsc = 0, LastTsc = 0;
  std::vector<uint16_t> Cpus; ///< CPUs with at least one record, ascending
  bool Failed = false;        ///< the trace ended at an error (as the summary's)
  TraceError Error;
};

/// One pass over Reader (merged order): the summary (stored in *Summary when given) and
/// the report's data, from the exits as the summary pairs them.
ReportData collectReportData(TraceReader &Reader, const ReportOptions &O = {},
                             TraceSummary *Summary = nullptr);

/// The whole HTML page.
std::string renderReport(const TraceSummary &S, const ReportData &D, const ReportOptions &O = {});

/// `vmxsim trace report FILE -o OUT`: writes the page for the trace at Path to OutPath
/// ("-": standard output). A file that cannot be opened or written prints one line
/// "vmxsim: error: ..." to Err; a trace that ends at an error still gets its page (with
/// the error shown in it), then the error line. Returns the exit status: 0, or 2 for any
/// error. O.Title defaults to Path.
int traceReportCommand(const std::string &Path, const std::string &OutPath,
                       const ReportOptions &O, std::FILE *Err,
                       const TraceReader::ProgressFn &Progress = {});

/// printSummary(S, SummaryFormat::Json) as a string (what the page embeds verbatim).
std::string summaryJsonText(const TraceSummary &S);

/// Makes JSON text safe inside a <script> element without changing its value: every '<'
/// (which valid JSON holds only inside strings) becomes \u003c, so neither "</script>"
/// nor "<!--" can appear, and U+2028/U+2029 become \u2028/\u2029.
std::string escapeJsonForScript(std::string_view Json);

/// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string escapeHtml(std::string_view Text);

/// The id and marker of the data block, for tests and tools that read a report.
inline constexpr std::string_view kReportDataOpen =
    "<script type=\"application/json\" id=\"vmxsim-data\">";
inline constexpr std::string_view kReportDataClose = "</script>";

} // namespace vmxsim::trace
