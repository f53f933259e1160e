// `vmxsim trace report`: the page's data for hand-built traces (the embedded summary is
// printSummary's JSON, the histograms add up to the exit counts, the timeline is an even
// sample), its escaping and self-containment, the command, and — when Debian's chromium
// is installed — that the page renders in headless Chromium without a console error,
// with a check that is shown to fail on a page that throws.
#include "trace_test_util.h"

#include "trace/report.h"
#include "tests/support/files.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <numeric>
#include <sstream>
#include <unistd.h>

using namespace vmxsim::trace;
using namespace vmxsim::trace::testing;
using nlohmann::json;

using vmxsim::test::readFile;

namespace {

constexpr uint32_t kCpuid = 10, kHlt = 12, kIo = 30, kRdmsr = 31;

void exit64(TraceWriter &W, unsigned Cpu, uint64_t Tsc, uint32_t Reason) {
  const uint32_t Words[3] = {Reason, 0x81000000u + Reason, 0xffffffffu};
  W.recordTsc(Cpu, XT_EV_VmxExit64, Tsc, Words);
}

void entry(TraceWriter &W, unsigned Cpu, uint64_t Tsc) {
  W.recordTsc(Cpu, XT_EV_VmEntry, Tsc, nullptr, 0);
}

/// Two CPUs, d1v0 on CPU 0 and d1v1 on CPU 1. Exit cycles by reason:
///   CPUID (10): 100, 101, 103 on CPU 0     RDMSR (31): 50 on CPU 0
///   I/O (30): 10, 1000 on CPU 1            HLT (12): one exit with no entry, CPU 1
std::vector<uint8_t> hypervisorTrace() {
  MemoryOutput Out;
  {
    TraceWriter W(Out, 2, 4096);
    const uint32_t D1V0[1] = {0x00010000}, D1V1[1] = {0x00010001};
    // Untimed before any timed record of its CPU: TSC 0, outside the trace's time range.
    const uint32_t Vector[1] = {0x20};
    W.record(1, XT_EV_Intr, Vector);
    W.recordTsc(0, XT_EV_RunstateRunnableToRunning, 1000, D1V0);
    W.recordTsc(1, XT_EV_RunstateRunnableToRunning, 1000, D1V1);
    entry(W, 0, 1010);
    entry(W, 1, 1005);
    const uint64_t CpuidAt[3][2] = {{1100, 1200}, {1300, 1401}, {1500, 1603}};
    for (const auto &[Exit, Entry] : CpuidAt) {
      exit64(W, 0, Exit, kCpuid);
      const uint32_t Cpuid[6] = {1, 0, 0x906ea, 0, 0, 0};
      W.record(0, XT_EV_Cpuid, Cpuid);
      entry(W, 0, Entry);
    }
    exit64(W, 0, 1700, kRdmsr);
    const uint32_t Msr[3] = {0x1b, 0xfee00900, 0};
    W.record(0, XT_EV_MsrRead, Msr);
    entry(W, 0, 1750);
    exit64(W, 1, 1100, kIo);
    const uint32_t PortW[2] = {0x3f8, 0x41};
    W.record(1, XT_EV_IoportWrite, PortW);
    entry(W, 1, 1110);
    exit64(W, 1, 1200, kIo);
    const uint32_t PortR[2] = {0x60, 0};
    W.record(1, XT_EV_IoportRead, PortR);
    entry(W, 1, 2200);
    exit64(W, 1, 2300, kHlt);
    W.flush();
  }
  return Out.Bytes;
}

/// Ground truth on CPU 0: a CPUID exit closed by an entry after 40 cycles, an
/// invalid-guest-state entry failure (reason 33) closed by GT_VMENTRY_FAIL after 7.
std::vector<uint8_t> groundTruthTrace() {
  MemoryOutput Out;
  {
    TraceWriter W(Out, 1, 4096);
    const uint32_t Entry[6] = {0, 0x1000, 0, 1, 0, 0};
    W.recordTsc(0, XT_EV_GtVmEntry, 500, Entry);
    const uint32_t Exit[7] = {0, kCpuid, 0x1002, 0, 0, 0, 2};
    W.recordTsc(0, XT_EV_GtVmExit, 600, Exit);
    W.recordTsc(0, XT_EV_GtVmEntry, 640, Entry);
    const uint32_t Fail[7] = {0, 0x80000021u, 0x1004, 0, 0, 0, 3};
    W.recordTsc(0, XT_EV_GtVmExit, 700, Fail);
    const uint32_t Failed[6] = {0, 2, 33, 3, 0, 0};
    W.recordTsc(0, XT_EV_GtVmEntryFail, 707, Failed);
    W.flush();
  }
  return Out.Bytes;
}

struct Built {
  TraceSummary Summary;
  ReportData Data;
  std::string Page;
};

Built build(const std::vector<uint8_t> &Bytes, const ReportOptions &O = {}) {
  Built B;
  TraceReader R1, R2;
  R1.openMemory(Bytes.data(), Bytes.size());
  R2.openMemory(Bytes.data(), Bytes.size());
  B.Summary = summarizeTrace(R1);
  B.Data = collectReportData(R2, O);
  B.Page = renderReport(B.Summary, B.Data, O);
  return B;
}

/// The text of the page's JSON block.
std::string dataBlock(const std::string &Page) {
  const size_t Open = Page.find(kReportDataOpen);
  if (Open == std::string::npos)
    return "";
  const size_t Start = Open + kReportDataOpen.size();
  return Page.substr(Start, Page.find(kReportDataClose, Start) - Start);
}

void writeBytes(const std::string &Path, const std::string &Bytes) {
  std::ofstream(Path, std::ios::binary) << Bytes;
}

std::string tempPath(const std::string &Name) {
  return std::string(VMXSIM_BINARY_DIR) + "/tests/trace_report_" + Name;
}

} // namespace

TEST(TraceReport, EmbeddedSummaryIsPrintSummaryJsonVerbatim) {
  const Built B = build(hypervisorTrace());
  std::string Expected = summaryJsonText(B.Summary);
  ASSERT_EQ(Expected.back(), '\n');
  Expected.pop_back();
  const std::string Block = dataBlock(B.Page);
  // Textually: the block holds printSummary's text (escaping changes nothing here).
  EXPECT_NE(Block.find("\"summary\":" + escapeJsonForScript(Expected) + ",\"reasonNames\""),
            std::string::npos);
  // And as data: the value the page's script parses.
  const json Data = json::parse(Block);
  EXPECT_EQ(Data.at("summary"), json::parse(Expected));
  EXPECT_EQ(Data.at("format"), "vmxsim-report-1");
  EXPECT_EQ(Data.at("summary").at("cpus").size(), 2u);
  EXPECT_EQ(Data.at("reasonNames").at("10"), "CPUID");
  EXPECT_EQ(Data.at("reasonNames").at("30"), "I/O instruction");
}

TEST(TraceReport, HistogramsAddUpToTheSummaryExitCounts) {
  const Built B = build(hypervisorTrace());
  ASSERT_EQ(B.Data.Histograms.size(), 4u);
  uint64_t AllExits = 0;
  for (const ReasonHistogram &H : B.Data.Histograms) {
    uint64_t SummaryExits = 0, SummaryClosed = 0;
    for (const ScopeSummary &Cpu : B.Summary.Cpus)
      for (const ReasonRow &R : Cpu.Reasons)
        if (R.Reason == H.Reason) {
          SummaryExits += R.Exits;
          SummaryClosed += R.Cycles.Count;
        }
    const uint64_t Binned = std::accumulate(H.Counts.begin(), H.Counts.end(), uint64_t(0));
    EXPECT_EQ(Binned, SummaryClosed) << "reason " << H.Reason;
    EXPECT_EQ(Binned + H.Unclosed, SummaryExits) << "reason " << H.Reason;
    EXPECT_EQ(H.Exits, SummaryExits) << "reason " << H.Reason;
    EXPECT_EQ(H.Edges.size(), H.Counts.empty() ? 0 : H.Counts.size() + 1);
    AllExits += H.Exits;
  }
  EXPECT_EQ(AllExits, 7u);
  EXPECT_EQ(B.Data.Exits, 7u);
}

TEST(TraceReport, HistogramBinsOneValueEachWhenSamplesSpanFewValues) {
  const Built B = build(hypervisorTrace());
  const ReasonHistogram &Cpuid = B.Data.Histograms[0];
  ASSERT_EQ(Cpuid.Reason, kCpuid);
  EXPECT_FALSE(Cpuid.LogBins);
  EXPECT_EQ(Cpuid.Edges, (std::vector<uint64_t>{100, 101, 102, 103, 104}));
  EXPECT_EQ(Cpuid.Counts, (std::vector<uint64_t>{1, 1, 0, 1}));
  const ReasonHistogram &Hlt = B.Data.Histograms[1];
  ASSERT_EQ(Hlt.Reason, kHlt);
  EXPECT_EQ(Hlt.Exits, 1u);
  EXPECT_EQ(Hlt.Unclosed, 1u);
  EXPECT_TRUE(Hlt.Edges.empty());
  const ReasonHistogram &Rdmsr = B.Data.Histograms[3];
  ASSERT_EQ(Rdmsr.Reason, kRdmsr);
  EXPECT_EQ(Rdmsr.Edges, (std::vector<uint64_t>{50, 51}));
  EXPECT_EQ(Rdmsr.Counts, (std::vector<uint64_t>{1}));
}

TEST(TraceReport, HistogramBinsGeometricWhenSamplesSpan32xOrMore) {
  const Built B = build(hypervisorTrace());
  const ReasonHistogram &Io = B.Data.Histograms[2];
  ASSERT_EQ(Io.Reason, kIo);
  EXPECT_TRUE(Io.LogBins);
  ASSERT_EQ(Io.Counts.size(), 24u); // 10 .. 1001 in 24 geometric bins, all distinct
  EXPECT_EQ(Io.Edges.front(), 10u);
  EXPECT_EQ(Io.Edges[1], 12u); // round(10 * 100.1^(1/24)) = round(12.11)
  EXPECT_EQ(Io.Edges.back(), 1001u);
  EXPECT_EQ(Io.Counts.front(), 1u);
  EXPECT_EQ(Io.Counts.back(), 1u);
  EXPECT_EQ(std::accumulate(Io.Counts.begin(), Io.Counts.end(), uint64_t(0)), 2u);
  for (size_t I = 1; I < Io.Edges.size(); ++I)
    EXPECT_LT(Io.Edges[I - 1], Io.Edges[I]);
}

TEST(TraceReport, HistogramBinsLinearOtherwise) {
  // One CPU, CPUID exits of 100 and 200 cycles: 101 values, width ceil(101 / 24) = 5.
  MemoryOutput Out;
  {
    TraceWriter W(Out, 1, 4096);
    exit64(W, 0, 1000, kCpuid);
    entry(W, 0, 1100);
    exit64(W, 0, 2000, kCpuid);
    entry(W, 0, 2200);
    W.flush();
  }
  const Built B = build(Out.Bytes);
  ASSERT_EQ(B.Data.Histograms.size(), 1u);
  const ReasonHistogram &H = B.Data.Histograms[0];
  EXPECT_FALSE(H.LogBins);
  ASSERT_EQ(H.Edges.size(), 22u);
  EXPECT_EQ(H.Edges[0], 100u);
  EXPECT_EQ(H.Edges[1], 105u);
  EXPECT_EQ(H.Edges[20], 200u);
  EXPECT_EQ(H.Edges[21], 201u);
  EXPECT_EQ(H.Counts.front(), 1u);
  EXPECT_EQ(H.Counts.back(), 1u);
}

TEST(TraceReport, TimelineHoldsEveryExitWithItsCycles) {
  const Built B = build(hypervisorTrace());
  struct Expect {
    uint16_t Cpu;
    uint64_t Tsc, Cycles;
    uint32_t Reason;
    bool Closed;
  };
  const Expect E[] = {{0, 1100, 100, kCpuid, true}, {0, 1300, 101, kCpuid, true},
                      {0, 1500, 103, kCpuid, true}, {0, 1700, 50, kRdmsr, true},
                      {1, 1100, 10, kIo, true},     {1, 1200, 1000, kIo, true},
                      {1, 2300, 0, kHlt, false}};
  ASSERT_EQ(B.Data.Timeline.size(), std::size(E));
  for (size_t I = 0; I < std::size(E); ++I) {
    const TimelinePoint &P = B.Data.Timeline[I];
    EXPECT_EQ(P.Cpu, E[I].Cpu) << I;
    EXPECT_EQ(P.Tsc, E[I].Tsc) << I;
    EXPECT_EQ(P.Cycles, E[I].Cycles) << I;
    EXPECT_EQ(P.Reason, E[I].Reason) << I;
    EXPECT_EQ(P.Closed, E[I].Closed) << I;
  }
  EXPECT_EQ(B.Data.Stride, 1u);
  EXPECT_EQ(B.Data.FirstTsc, 1000u);
  EXPECT_EQ(B.Data.LastTsc, 2300u);
  EXPECT_EQ(B.Data.FirstTsc, B.Summary.FirstTsc);
  EXPECT_EQ(B.Data.LastTsc, B.Summary.LastTsc);
  EXPECT_EQ(B.Data.Cpus, (std::vector<uint16_t>{0, 1}));
  // In the page: TSCs relative to the first one, null cycles for the unclosed exit.
  const json Tl = json::parse(dataBlock(B.Page)).at("timeline");
  EXPECT_EQ(Tl.at("cpus").at(1).at("tsc"), json::parse("[100,200,1300]"));
  EXPECT_EQ(Tl.at("cpus").at(1).at("cycles"), json::parse("[10,1000,null]"));
  EXPECT_EQ(Tl.at("points"), 7);
  EXPECT_EQ(Tl.at("exits"), 7);
}

TEST(TraceReport, TimelineOverItsCapKeepsEveryKthExit) {
  // 100 exits: with at most 10 points the stride doubles to 16 (100 / 8 > 10 >= 100 / 16),
  // keeping exits 0, 16, ..., 96.
  MemoryOutput Out;
  {
    TraceWriter W(Out, 1, 1 << 16);
    for (uint64_t I = 0; I < 100; ++I) {
      exit64(W, 0, 1000 + 10 * I, kCpuid);
      entry(W, 0, 1000 + 10 * I + 3);
    }
    W.flush();
  }
  ReportOptions O;
  O.MaxTimelinePoints = 10;
  const Built B = build(Out.Bytes, O);
  EXPECT_EQ(B.Data.Stride, 16u);
  ASSERT_EQ(B.Data.Timeline.size(), 7u);
  for (size_t I = 0; I < 7; ++I) {
    EXPECT_EQ(B.Data.Timeline[I].Tsc, 1000 + 160 * I);
    EXPECT_EQ(B.Data.Timeline[I].Cycles, 3u);
  }
  EXPECT_EQ(B.Data.Histograms[0].Counts, (std::vector<uint64_t>{100}));
  EXPECT_NE(B.Page.find("\"stride\":16,\"maxPoints\":10,\"points\":7"), std::string::npos);
}

TEST(TraceReport, GroundTruthExitsCloseAtEntryAndEntryFailure) {
  const Built B = build(groundTruthTrace());
  ASSERT_EQ(B.Data.Histograms.size(), 2u);
  EXPECT_EQ(B.Data.Histograms[0].Reason, kCpuid);
  EXPECT_EQ(B.Data.Histograms[0].Edges, (std::vector<uint64_t>{40, 41}));
  EXPECT_EQ(B.Data.Histograms[1].Reason, 33u);
  EXPECT_EQ(B.Data.Histograms[1].Edges, (std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(B.Summary.Kind, TraceKind::GroundTruth);
  EXPECT_EQ(json::parse(dataBlock(B.Page)).at("summary"),
            json::parse(summaryJsonText(B.Summary)));
}

TEST(TraceReport, ScriptBlockEscapingKeepsTheJsonValue) {
  const std::string Raw = "{\"a\":\"</script><!-- \xe2\x80\xa8 \xe2\x80\xa9 \xe2\x80\xa7\"}";
  const std::string Esc = escapeJsonForScript(Raw);
  EXPECT_EQ(Esc, "{\"a\":\"\\u003c/script>\\u003c!-- \\u2028 \\u2029 \xe2\x80\xa7\"}");
  EXPECT_EQ(json::parse(Esc), json::parse(Raw));
  EXPECT_EQ(escapeHtml("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
}

TEST(TraceReport, PageIsSelfContainedAndEscapesItsTitle) {
  ReportOptions O;
  O.Title = "</script><script>alert(1)</script>\xe2\x80\xa8.xt";
  const Built B = build(hypervisorTrace(), O);
  // One data block and one script; the title never closes either.
  const std::string Block = dataBlock(B.Page);
  EXPECT_EQ(Block.find("</"), std::string::npos);
  EXPECT_EQ(json::parse(Block).at("title"), O.Title);
  EXPECT_EQ(B.Page.find("<script>alert"), std::string::npos);
  EXPECT_NE(B.Page.find("<h1>vmxsim trace report: &lt;/script&gt;"), std::string::npos);
  size_t Scripts = 0;
  for (size_t P = 0; (P = B.Page.find("<script", P)) != std::string::npos; ++P)
    ++Scripts;
  EXPECT_EQ(Scripts, 2u);
  // Nothing that could load anything; the policy forbids it anyway.
  for (const char *Loader : {"src=", "href=", "url(", "@import", "<link", "<iframe"})
    EXPECT_EQ(B.Page.find(Loader), std::string::npos) << Loader;
  EXPECT_NE(B.Page.find("Content-Security-Policy\" content=\"default-src 'none'"),
            std::string::npos);
}

TEST(TraceReport, SummaryTablesAreInThePage) {
  const Built B = build(hypervisorTrace());
  EXPECT_NE(B.Page.find("<h3>cpu0</h3>"), std::string::npos);
  EXPECT_NE(B.Page.find("<h3>d1v1</h3>"), std::string::npos);
  // CPUID on CPU 0: 3 exits, 75.0% of 4, 3 closed, total 304, avg 101.3, min 100,
  // median 101, p99 103, max 103.
  EXPECT_NE(B.Page.find("<tr><td>10</td><td class=\"name\">CPUID</td><td>3</td><td>75.0%</td>"
                        "<td>3</td><td>304</td><td>101.3</td><td>100</td><td>101</td>"
                        "<td>103</td><td>103</td></tr>"),
            std::string::npos);
  EXPECT_NE(B.Page.find("<td>0x3f8</td><td>0</td><td>1</td><td>10</td>"), std::string::npos);
  EXPECT_NE(B.Page.find("<td>0x1b</td><td>1</td><td>0</td><td>50</td>"), std::string::npos);
}

TEST(TraceReport, CommandWritesThePageAndFailsAfterACorruptTail) {
  std::vector<uint8_t> Bytes = hypervisorTrace();
  const std::string TracePath = tempPath("cmd.xt"), PagePath = tempPath("cmd.html");
  writeBytes(TracePath, std::string(Bytes.begin(), Bytes.end()));
  std::remove(PagePath.c_str());
  std::FILE *Err = std::tmpfile();
  ASSERT_NE(Err, nullptr);
  EXPECT_EQ(traceReportCommand(TracePath, PagePath, {}, Err), 0);
  ReportOptions O;
  O.Title = TracePath;
  EXPECT_EQ(readFile(PagePath), build(Bytes, O).Page);
  EXPECT_EQ(std::ftell(Err), 0);

  // Truncated inside the second window: the page covers the first, then the error.
  Bytes.resize(Bytes.size() - 6);
  writeBytes(TracePath, std::string(Bytes.begin(), Bytes.end()));
  EXPECT_EQ(traceReportCommand(TracePath, PagePath, {}, Err), 2);
  const std::string Page = readFile(PagePath);
  EXPECT_NE(Page.find("<p class=\"error\">The trace ends at an error: offset 0x"),
            std::string::npos);
  EXPECT_NE(Page.find("<h3>cpu0</h3>"), std::string::npos);
  std::rewind(Err);
  char Line[512] = {};
  ASSERT_NE(std::fgets(Line, sizeof Line, Err), nullptr);
  EXPECT_EQ(std::string(Line).rfind("vmxsim: error: " + TracePath + ": offset 0x", 0), 0u)
      << Line;
  EXPECT_EQ(traceReportCommand(tempPath("missing.xt"), PagePath, {}, Err), 2);
  std::fclose(Err);
}

// --- headless Chromium ---

namespace {

struct BrowserResult {
  int Status = -1;
  json Out;
};

bool haveBrowser() { return access("/usr/bin/chromium", X_OK) == 0 && access("/usr/bin/node", X_OK) == 0; }

/// Runs tests/trace/report_browser_check.mjs on Page (written to a file first).
BrowserResult checkInBrowser(const std::string &Name, const std::string &Page) {
  const std::string Path = tempPath(Name + ".html");
  writeBytes(Path, Page);
  const std::string Cmd = "/usr/bin/node " + std::string(VMXSIM_SOURCE_DIR) +
                          "/tests/trace/report_browser_check.mjs " + Path;
  BrowserResult R;
  std::FILE *P = popen(Cmd.c_str(), "r");
  if (!P)
    return R;
  std::string Text;
  char Buf[4096];
  size_t N;
  while ((N = std::fread(Buf, 1, sizeof Buf, P)) > 0)
    Text.append(Buf, N);
  const int Status = pclose(P);
  R.Status = WIFEXITED(Status) ? WEXITSTATUS(Status) : -1;
  R.Out = json::parse(Text, nullptr, false);
  return R;
}

#define REQUIRE_BROWSER()                                                                  \
  if (!haveBrowser())                                                                      \
  GTEST_SKIP() << "SKIPPED: /usr/bin/chromium or /usr/bin/node is missing (scripts/setup.sh " \
                  "installs Debian's chromium); the report is not checked in a browser"

std::string errorsOf(const BrowserResult &R) { return R.Out.is_discarded() ? "(no JSON)" : R.Out.dump(); }

} // namespace

TEST(TraceReport, PageRendersInHeadlessChromiumWithoutConsoleErrors) {
  REQUIRE_BROWSER();
  const Built B = build(hypervisorTrace());
  const BrowserResult R = checkInBrowser("hypervisor", B.Page);
  ASSERT_EQ(R.Status, 0) << errorsOf(R);
  EXPECT_EQ(R.Out.at("errors"), json::array());
  const json &Drawn = R.Out.at("drawn");
  EXPECT_EQ(Drawn.at("status"), "drawn");
  // Distribution bars: 4 reasons over all CPUs, 2 on each CPU.
  EXPECT_EQ(Drawn.at("bars"), 4 + 2 + 2);
  size_t Bins = 0;
  for (const ReasonHistogram &H : B.Data.Histograms)
    Bins += H.Counts.size();
  EXPECT_EQ(Drawn.at("hist"), Bins);
  EXPECT_EQ(Drawn.at("points"), B.Data.Timeline.size());
}

TEST(TraceReport, EmptyAndGroundTruthPagesRenderWithoutConsoleErrors) {
  REQUIRE_BROWSER();
  MemoryOutput Empty;
  {
    TraceWriter W(Empty, 1, 4096);
    W.flush();
  }
  for (const auto &[Name, Bytes] : {std::pair{"empty", Empty.Bytes},
                                    std::pair{"ground_truth", groundTruthTrace()}}) {
    const BrowserResult R = checkInBrowser(Name, build(Bytes).Page);
    EXPECT_EQ(R.Status, 0) << Name << ": " << errorsOf(R);
  }
}

TEST(TraceReport, BrowserCheckFailsOnAnInjectedScriptError) {
  REQUIRE_BROWSER();
  ReportOptions O;
  O.InjectScriptError = true;
  const BrowserResult R = checkInBrowser("injected", build(hypervisorTrace(), O).Page);
  EXPECT_EQ(R.Status, 1) << errorsOf(R);
  ASSERT_FALSE(R.Out.is_discarded());
  EXPECT_FALSE(R.Out.at("ok").get<bool>());
  ASSERT_EQ(R.Out.at("errors").size(), 1u) << errorsOf(R);
  EXPECT_NE(R.Out.at("errors").at(0).get<std::string>().find(
                "ReferenceError: vmxsimInjectedErrorForTests is not defined"),
            std::string::npos);
  // The error came after drawing: only the exception itself failed the check.
  EXPECT_EQ(R.Out.at("drawn").at("status"), "drawn");
}

TEST(TraceReport, BrowserCheckFailsOnAConsoleErrorAndABlockedFetch) {
  REQUIRE_BROWSER();
  std::string Page = build(hypervisorTrace()).Page;
  const std::string Body = "<body data-vmxsim-status=\"loading\">\n";
  const size_t At = Page.find(Body);
  ASSERT_NE(At, std::string::npos);
  Page.insert(At + Body.size(), "<img alt=\"\" src=\"http://192.0.2.1/x.png\">"
                                "<script>console.error('vmxsim test error');</script>\n");
  const BrowserResult R = checkInBrowser("fetch", Page);
  EXPECT_EQ(R.Status, 1) << errorsOf(R);
  ASSERT_FALSE(R.Out.is_discarded());
  const std::string Errors = R.Out.at("errors").dump();
  EXPECT_NE(Errors.find("console.error: vmxsim test error"), std::string::npos) << Errors;
  EXPECT_NE(Errors.find("Content Security Policy"), std::string::npos) << Errors;
}
