#include "trace/report.h"

#include "trace/vmx_names.h"
#include "trace/events.h"
#include "trace/report_assets.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>

namespace vmxsim::trace {

namespace {

std::string reasonLabel(uint32_t Reason) {
  if (Reason == kUnknownExitReason)
    return "unknown (exit record without entry record)";
  const char *N = exitReasonName(Reason);
  return N ? N : fmt::format("reason {}", Reason);
}

/// Bins for the samples of one reason: one per value when they span few values,
/// geometric when they span 32x or more (exit costs are long-tailed), linear otherwise.
void binSamples(const std::vector<uint64_t> &Samples, unsigned Bins, ReasonHistogram &H) {
  if (Samples.empty())
    return;
  Bins = std::max(Bins, 2u);
  const auto [MinIt, MaxIt] = std::minmax_element(Samples.begin(), Samples.end());
  const uint64_t Min = *MinIt, Max = *MaxIt;
  // End is one past the largest sample; saturating, the clamp below keeps UINT64_MAX in
  // the last bin.
  const uint64_t End = Max == UINT64_MAX ? Max : Max + 1;
  const uint64_t Span = End - Min;
  auto &E = H.Edges;
  if (Span == 0) { // every sample is UINT64_MAX
    E = {Min, End};
  } else if (Span <= Bins) {
    for (uint64_t V = Min; V <= End && E.size() <= Span; ++V)
      E.push_back(V);
  } else if (Max / 32 >= std::max<uint64_t>(Min, 1)) {
    H.LogBins = true;
    E.push_back(Min);
    if (Min == 0) {
      E.push_back(1); // [0, 1): a zero-cycle bin, then geometric from 1
      --Bins;
    }
    const double Lo = std::log(double(std::max<uint64_t>(Min, 1))), Hi = std::log(double(End));
    for (unsigned I = 1; I < Bins; ++I) {
      const double V = std::round(std::exp(Lo + (Hi - Lo) * I / Bins));
      if (V >= double(End))
        break;
      const uint64_t U = uint64_t(V);
      if (U > E.back())
        E.push_back(U);
    }
    E.push_back(End);
  } else {
    const uint64_t Width = (Span + Bins - 1) / Bins;
    for (uint64_t V = Min; V < End; V += Width) {
      E.push_back(V);
      if (End - V <= Width)
        break;
    }
    E.push_back(End);
  }
  H.Counts.assign(E.size() - 1, 0);
  for (uint64_t S : Samples) {
    size_t I = size_t(std::upper_bound(E.begin(), E.end(), S) - E.begin());
    I = I == 0 ? 0 : std::min(I - 1, H.Counts.size() - 1);
    ++H.Counts[I];
  }
}

/// Appends JSON string text for S (UTF-8 passed through; control characters escaped).
void jsonString(std::string &Out, std::string_view S) {
  Out += '"';
  for (unsigned char C : S) {
    if (C == '"' || C == '\\') {
      Out += '\\';
      Out += char(C);
    } else if (C < 0x20) {
      Out += fmt::format("\\u{:04x}", C);
    } else {
      Out += char(C);
    }
  }
  Out += '"';
}

template <typename T, typename F> void jsonArray(std::string &Out, const std::vector<T> &V, F Fn) {
  Out += '[';
  for (size_t I = 0; I < V.size(); ++I) {
    if (I)
      Out += ',';
    Fn(V[I]);
  }
  Out += ']';
}

std::string dataJson(const TraceSummary &S, const ReportData &D, const ReportOptions &O) {
  std::string J = "{\"format\":\"vmxsim-report-1\",\"title\":";
  jsonString(J, O.Title);
  J += ",\"summary\":";
  std::string Summary = summaryJsonText(S);
  while (!Summary.empty() && (Summary.back() == '\n' || Summary.back() == ' '))
    Summary.pop_back();
  J += Summary;

  // Names of every reason the summary or the histograms mention.
  std::map<uint32_t, std::string> Names;
  for (const auto *Scopes : {&S.Cpus, &S.Vcpus})
    for (const ScopeSummary &Sc : *Scopes)
      for (const ReasonRow &R : Sc.Reasons)
        Names.emplace(R.Reason, reasonLabel(R.Reason));
  for (const ReasonHistogram &H : D.Histograms)
    Names.emplace(H.Reason, reasonLabel(H.Reason));
  J += ",\"reasonNames\":{";
  bool First = true;
  for (const auto &[Reason, Name] : Names) {
    J += First ? "" : ",";
    First = false;
    J += fmt::format("\"{}\":", Reason);
    jsonString(J, Name);
  }
  J += "},\"histograms\":";
  jsonArray(J, D.Histograms, [&](const ReasonHistogram &H) {
    J += fmt::format("{{\"reason\":{},\"exits\":{},\"unclosed\":{},\"log\":{},\"edges\":", H.Reason,
                     H.Exits, H.Unclosed, H.LogBins ? "true" : "false");
    jsonArray(J, H.Edges, [&](uint64_t V) { J += std::to_string(V); });
    J += ",\"counts\":";
    jsonArray(J, H.Counts, [&](uint64_t V) { J += std::to_string(V); });
    J += '}';
  });
  // Timeline: columns per CPU, TSCs relative to the first record's so that they stay
  // exact in a JavaScript number for any trace shorter than 2^53 cycles.
  J += fmt::format(",\"timeline\":{{\"firstTsc\":{},\"lastTsc\":{},\"exits\":{},\"stride\":{},"
                   "\"maxPoints\":{},\"points\":{},\"cpus\":[",
                   D.FirstTsc, D.LastTsc, D.Exits, D.Stride, D.MaxPoints, D.Timeline.size());
  size_t I = 0;
  for (uint16_t Cpu : D.Cpus) {
    std::string Tsc, Reason, Cycles;
    for (; I < D.Timeline.size() && D.Timeline[I].Cpu == Cpu; ++I) {
      const TimelinePoint &P = D.Timeline[I];
      const char *Sep = Tsc.empty() ? "" : ",";
      Tsc += fmt::format("{}{}", Sep, P.Tsc - D.FirstTsc);
      Reason += fmt::format("{}{}", Sep, P.Reason);
      Cycles += P.Closed ? fmt::format("{}{}", Sep, P.Cycles) : fmt::format("{}null", Sep);
    }
    J += fmt::format("{}{{\"cpu\":{},\"tsc\":[{}],\"reason\":[{}],\"cycles\":[{}]}}",
                     Cpu == D.Cpus.front() ? "" : ",", Cpu, Tsc, Reason, Cycles);
  }
  J += "]}}";
  return J;
}

std::string cyclesCell(uint64_t V, bool Valid) { return Valid ? std::to_string(V) : "-"; }

void scopeTable(std::string &H, const ScopeSummary &Sc) {
  const uint64_t Busy = Sc.GuestCycles + Sc.HypervisorCycles;
  H += fmt::format("<h3>{}</h3>\n<p class=\"scope\">{} exits; guest {} cycles, hypervisor {} "
                   "cycles ({:.1f}% in the hypervisor)</p>\n",
                   escapeHtml(Sc.Name), Sc.Exits, Sc.GuestCycles, Sc.HypervisorCycles,
                   Busy ? 100.0 * double(Sc.HypervisorCycles) / double(Busy) : 0.0);
  H += "<table><thead><tr><th>reason</th><th class=\"name\">name</th><th>exits</th><th>share</th>"
       "<th>closed</th><th>total</th><th>avg</th><th>min</th><th>median</th><th>p99</th>"
       "<th>max</th></tr></thead><tbody>\n";
  auto Row = [&](const std::string &Reason, const std::string &Name, uint64_t Exits,
                 double Share, const CycleStats &C) {
    const bool V = C.Count != 0;
    H += fmt::format("<tr><td>{}</td><td class=\"name\">{}</td><td>{}</td><td>{:.1f}%</td>"
                     "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                     "<td>{}</td></tr>\n",
                     Reason, escapeHtml(Name), Exits, 100.0 * Share, C.Count,
                     cyclesCell(C.Total, V), V ? fmt::format("{:.1f}", C.Avg) : "-",
                     cyclesCell(C.Min, V), cyclesCell(C.Median, V), cyclesCell(C.P99, V),
                     cyclesCell(C.Max, V));
  };
  for (const ReasonRow &R : Sc.Reasons)
    Row(std::to_string(R.Reason), reasonLabel(R.Reason), R.Exits, R.Share, R.Cycles);
  Row("", "all", Sc.Exits, Sc.Exits ? 1.0 : 0.0, Sc.AllExits);
  H += "</tbody></table>\n";
  auto Accesses = [&](const char *What, const std::vector<AccessRow> &Rows) {
    if (Rows.empty())
      return;
    H += fmt::format("<table class=\"access\"><thead><tr><th>{}</th><th>reads</th>"
                     "<th>writes</th><th>cycles</th></tr></thead><tbody>\n",
                     What);
    for (const AccessRow &A : Rows)
      H += fmt::format("<tr><td>{:#x}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", A.Key,
                       A.Reads, A.Writes, A.Cycles);
    H += "</tbody></table>\n";
  };
  Accesses("I/O port", Sc.Ports);
  Accesses("MSR", Sc.Msrs);
}

const char *kindName(TraceKind K) {
  switch (K) {
  case TraceKind::Empty:
    return "empty (no exits)";
  case TraceKind::Hypervisor:
    return "hypervisor trace";
  case TraceKind::GroundTruth:
    return "vmxsim ground truth";
  case TraceKind::Mixed:
    return "mixed (hypervisor and ground-truth records)";
  }
  return "?";
}

} // namespace

ReportData collectReportData(TraceReader &Reader, const ReportOptions &O,
                             TraceSummary *Summary) {
  ReportData D;
  D.MaxPoints = std::max<size_t>(O.MaxTimelinePoints, 1);
  struct Point {
    TimelinePoint P;
    uint64_t Ordinal;
  };
  struct Acc {
    uint64_t Exits = 0, Unclosed = 0;
    std::vector<uint64_t> Samples;
  };
  std::map<uint32_t, Acc> ByReason;
  std::vector<Point> Points;

  // Exits arrive from the summary's pass once paired (trace/summary.h, OnExit). Keeps
  // the exits whose ordinal is a multiple of the stride; when the cap is passed the
  // stride doubles and every other kept point goes, so the timeline stays an even
  // sample ("every k-th exit") whatever the trace's length.
  SummaryOptions SO;
  SO.OnExit = [&](const ExitEvent &E) {
    const uint64_t Ordinal = D.Exits++;
    Acc &A = ByReason[E.Reason];
    ++A.Exits;
    if (E.Closed)
      A.Samples.push_back(E.Cycles);
    else
      ++A.Unclosed;
    if (Ordinal % D.Stride)
      return;
    Points.push_back({{E.ExitTsc, E.Closed ? E.Cycles : 0, E.Reason, E.Cpu, E.Closed}, Ordinal});
    while (Points.size() > D.MaxPoints) { // once, unless the kept ones were all even
      D.Stride *= 2;
      std::erase_if(Points, [&](const Point &P) { return P.Ordinal % D.Stride != 0; });
    }
  };
  TraceSummary S = summarizeTrace(Reader, SO);
  D.FirstTsc = S.FirstTsc;
  D.LastTsc = S.LastTsc;
  for (const ScopeSummary &C : S.Cpus)
    D.Cpus.push_back(C.Cpu);
  D.Failed = S.Failed;
  D.Error = S.Error;

  std::sort(Points.begin(), Points.end(), [](const Point &A, const Point &B) {
    return A.P.Cpu != B.P.Cpu ? A.P.Cpu < B.P.Cpu : A.Ordinal < B.Ordinal;
  });
  D.Timeline.reserve(Points.size());
  for (const Point &P : Points)
    D.Timeline.push_back(P.P);
  for (auto &[Reason, A] : ByReason) {
    ReasonHistogram H;
    H.Reason = Reason;
    H.Exits = A.Exits;
    H.Unclosed = A.Unclosed;
    binSamples(A.Samples, O.HistogramBins, H);
    D.Histograms.push_back(std::move(H));
  }
  if (Summary)
    *Summary = std::move(S);
  return D;
}

int traceReportCommand(const std::string &Path, const std::string &OutPath,
                       const ReportOptions &O, std::FILE *Err,
                       const TraceReader::ProgressFn &Progress) {
  TraceReader Reader;
  Reader.setProgress(Progress);
  std::string Why;
  if (!Reader.open(Path, Why)) {
    std::fprintf(Err, "vmxsim: error: %s\n", Why.c_str());
    return 2;
  }
  ReportOptions Opts = O;
  if (Opts.Title.empty())
    Opts.Title = Path;
  TraceSummary S;
  const ReportData D = collectReportData(Reader, Opts, &S);
  const std::string Page = renderReport(S, D, Opts);
  const bool ToStdout = OutPath == "-";
  std::FILE *Out = ToStdout ? stdout : std::fopen(OutPath.c_str(), "wb");
  if (!Out) {
    std::fprintf(Err, "vmxsim: error: cannot create %s: %s\n", OutPath.c_str(),
                 std::strerror(errno));
    return 2;
  }
  bool Written = std::fwrite(Page.data(), 1, Page.size(), Out) == Page.size();
  Written = (ToStdout ? std::fflush(Out) : std::fclose(Out)) == 0 && Written;
  if (!Written) {
    std::fprintf(Err, "vmxsim: error: cannot write %s\n", OutPath.c_str());
    return 2;
  }
  if (S.Failed) {
    std::fprintf(Err, "vmxsim: error: %s: %s\n", Path.c_str(), S.Error.str().c_str());
    return 2;
  }
  return 0;
}

std::string summaryJsonText(const TraceSummary &S) {
  char *Buf = nullptr;
  size_t Len = 0;
  std::FILE *F = open_memstream(&Buf, &Len);
  if (!F)
    return "null";
  printSummary(S, SummaryFormat::Json, F);
  std::fclose(F);
  std::string Text(Buf, Len);
  std::free(Buf);
  return Text;
}

std::string escapeJsonForScript(std::string_view Json) {
  std::string Out;
  Out.reserve(Json.size() + Json.size() / 16);
  for (size_t I = 0; I < Json.size(); ++I) {
    const char C = Json[I];
    if (C == '<') {
      Out += "\\u003c";
    } else if (C == '\xe2' && I + 2 < Json.size() && Json[I + 1] == '\x80' &&
               (Json[I + 2] == '\xa8' || Json[I + 2] == '\xa9')) {
      // U+2028 LINE SEPARATOR / U+2029 PARAGRAPH SEPARATOR, UTF-8 E2 80 A8/A9.
      Out += Json[I + 2] == '\xa8' ? "\\u2028" : "\\u2029";
      I += 2;
    } else {
      Out += C;
    }
  }
  return Out;
}

std::string escapeHtml(std::string_view Text) {
  std::string Out;
  Out.reserve(Text.size());
  for (char C : Text) {
    switch (C) {
    case '&':
      Out += "&amp;";
      break;
    case '<':
      Out += "&lt;";
      break;
    case '>':
      Out += "&gt;";
      break;
    case '"':
      Out += "&quot;";
      break;
    case '\'':
      Out += "&#39;";
      break;
    default:
      Out += C;
    }
  }
  return Out;
}

std::string renderReport(const TraceSummary &S, const ReportData &D, const ReportOptions &O) {
  const std::string Title = O.Title.empty() ? "trace" : O.Title;
  std::string H = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  // Self-containment is enforced, not just intended: the browser refuses every fetch.
  H += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n";
  H += fmt::format("<title>vmxsim trace report: {}</title>\n<style>\n{}</style>\n</head>\n",
                   escapeHtml(Title), detail::kReportCss);
  H += fmt::format("<body data-vmxsim-status=\"loading\">\n<h1>vmxsim trace report: {}</h1>\n",
                   escapeHtml(Title));
  H += fmt::format("<p class=\"meta\">{}; {} records, {} lost; TSC {} .. {}; {} exits</p>\n",
                   kindName(S.Kind), S.Records, S.LostRecords, S.FirstTsc, S.LastTsc, D.Exits);
  if (S.Failed || D.Failed)
    H += fmt::format("<p class=\"error\">The trace ends at an error: {}. Everything below "
                     "covers the records before it.</p>\n",
                     escapeHtml((S.Failed ? S.Error : D.Error).str()));
  H += "<noscript><p class=\"error\">The plots need JavaScript; the tables below do not."
       "</p></noscript>\n";
  H += "<section><h2>Exit-reason distribution</h2><div id=\"distribution\" "
       "class=\"charts\"></div></section>\n";
  H += "<section><h2>Cycles per exit (exit to next entry), by exit reason</h2>"
       "<p class=\"note\" id=\"hist-note\"></p><div id=\"histograms\" class=\"charts\">"
       "</div></section>\n";
  H += "<section><h2>Timeline of exits</h2><p class=\"note\" id=\"timeline-note\"></p>"
       "<div id=\"timeline\"></div></section>\n";
  H += "<section><h2>Summary</h2>\n<p class=\"note\">The numbers of <code>vmxsim trace "
       "summary</code>; cycles are exit-to-entry cycles of the closed exits.</p>\n<h2>Per "
       "CPU</h2>\n";
  for (const ScopeSummary &Sc : S.Cpus)
    scopeTable(H, Sc);
  if (!S.Vcpus.empty()) {
    H += "<h2>Per vCPU</h2>\n";
    for (const ScopeSummary &Sc : S.Vcpus)
      scopeTable(H, Sc);
  }
  H += "</section>\n<footer>Generated by vmxsim. The plots are drawn from the JSON block "
       "<code>#vmxsim-data</code> in this page; its <code>summary</code> member is the output "
       "of <code>vmxsim trace summary --format json</code>.</footer>\n";
  H += kReportDataOpen;
  H += escapeJsonForScript(dataJson(S, D, O));
  H += kReportDataClose;
  H += "\n<script>\n";
  H += detail::kReportScript;
  if (O.InjectScriptError)
    H += "vmxsimInjectedErrorForTests();\n";
  H += "</script>\n</body>\n</html>\n";
  return H;
}

} // namespace vmxsim::trace
