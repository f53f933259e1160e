// Printing a TraceSummary (trace/summary.h) as text tables in the manner of xenalyze
// --summary, as one JSON object, or as CSV.
//
// JSON: keys in a fixed order; counts and cycles are exact integers; share and avg are
// shortest round-trip decimals. CSV: one header line, then one row per scope ("all"),
// per (scope, reason) ("reason"), per port ("port") and per MSR ("msr"); columns that do
// not apply to a row kind are empty.
#include "trace/summary.h"

#include "trace/vmx_names.h"

#include <fmt/format.h>

namespace vmxsim::trace {

namespace {

const char *kindName(TraceKind K, bool Json) {
  switch (K) {
  case TraceKind::Empty:
    return "empty";
  case TraceKind::Hypervisor:
    return "hypervisor";
  case TraceKind::GroundTruth:
    return Json ? "ground_truth" : "ground truth";
  case TraceKind::Mixed:
    return "mixed";
  }
  return "?";
}

std::string reasonLabel(uint32_t Reason) {
  if (Reason == kUnknownExitReason)
    return "unknown";
  const char *N = exitReasonEnumName(Reason);
  return N ? N : "";
}

/// The reason's number as text and CSV show it ("?" for the unknown row).
std::string reasonNumber(uint32_t Reason) {
  return Reason == kUnknownExitReason ? "?" : std::to_string(Reason);
}

void put(std::FILE *Out, const std::string &S) { std::fwrite(S.data(), 1, S.size(), Out); }

// --- text ---

std::string percent(uint64_t Part, uint64_t Whole) {
  return Whole ? fmt::format("{:.2f}%", 100.0 * double(Part) / double(Whole)) : "-";
}

std::string statsColumns(const CycleStats &C) {
  if (!C.Count)
    return fmt::format("{:>7} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10}", 0, "-", "-", "-",
                       "-", "-", "-");
  return fmt::format("{:>7} {:>12} {:>12.2f} {:>10} {:>10} {:>10} {:>10}", C.Count, C.Total,
                     C.Avg, C.Min, C.Median, C.P99, C.Max);
}

void printAccessTable(std::string &T, const char *Title, const std::vector<AccessRow> &Rows) {
  if (Rows.empty())
    return;
  T += fmt::format("  {:<12} {:>8} {:>8} {:>12}\n", Title, "reads", "writes", "cycles");
  for (const AccessRow &A : Rows)
    T += fmt::format("  {:<12} {:>8} {:>8} {:>12}\n", fmt::format("{:#x}", A.Key), A.Reads,
                     A.Writes, A.Cycles);
}

void printScopeText(std::string &T, const char *What, const ScopeSummary &S) {
  const uint64_t Time = S.GuestCycles + S.HypervisorCycles;
  T += fmt::format("\n{} {}: {} exits; guest {} cycles ({}), hypervisor {} cycles ({})\n", What,
                   S.Name, S.Exits, S.GuestCycles, percent(S.GuestCycles, Time),
                   S.HypervisorCycles, percent(S.HypervisorCycles, Time));
  if (!S.Exits)
    return;
  T += fmt::format("  {:<32} {:>8} {:>8} {:>7} {:>12} {:>12} {:>10} {:>10} {:>10} {:>10}\n",
                   "exit reason", "exits", "share", "timed", "total", "avg", "min", "median",
                   "p99", "max");
  for (const ReasonRow &R : S.Reasons)
    T += fmt::format("  {:<32} {:>8} {:>7.2f}% {}\n",
                     fmt::format("{:>2} {}", reasonNumber(R.Reason), reasonLabel(R.Reason)), R.Exits,
                     100.0 * R.Share, statsColumns(R.Cycles));
  T += fmt::format("  {:<32} {:>8} {:>7.2f}% {}\n", "all", S.Exits, 100.0,
                   statsColumns(S.AllExits));
  printAccessTable(T, "I/O port", S.Ports);
  printAccessTable(T, "MSR", S.Msrs);
}

void printText(const TraceSummary &S, std::FILE *Out) {
  // The flavour is named when it is not the default one (docs/trace-flavours.md).
  std::string T = fmt::format("Trace summary: {} trace{}, {} records, {} lost",
                              kindName(S.Kind, false),
                              S.Flavour == TraceFlavour::Xen30 ? " (xen-3.0)" : "", S.Records,
                              S.LostRecords);
  if (S.LastTsc >= S.FirstTsc && S.Records)
    T += fmt::format(", TSC {}..{} ({} cycles)", S.FirstTsc, S.LastTsc, S.LastTsc - S.FirstTsc);
  T += '\n';
  if (S.Failed)
    T += fmt::format("The trace ends at an error (offset {:#x}: {}); the records before it are "
                     "summarised.\n",
                     S.Error.Offset, S.Error.Message);
  T += "Cycles: exit to next VM entry (\"timed\" exits; an exit never closed has none).\n";
  for (const ScopeSummary &C : S.Cpus)
    printScopeText(T, "CPU", C);
  for (const ScopeSummary &V : S.Vcpus)
    printScopeText(T, "vCPU", V);
  put(Out, T);
}

// --- JSON ---

std::string jsonString(std::string_view S) {
  std::string Out = "\"";
  for (char Ch : S) {
    const unsigned char C = static_cast<unsigned char>(Ch);
    if (C == '"' || C == '\\')
      Out += fmt::format("\\{}", Ch);
    else if (C < 0x20)
      Out += fmt::format("\\u{:04x}", C);
    else
      Out += Ch;
  }
  return Out + "\"";
}

std::string jsonStats(const CycleStats &C) {
  return fmt::format(R"({{"count":{},"total":{},"avg":{},"min":{},"median":{},"p99":{},"max":{}}})",
                     C.Count, C.Total, C.Avg, C.Min, C.Median, C.P99, C.Max);
}

std::string jsonAccesses(const char *KeyName, const std::vector<AccessRow> &Rows) {
  std::string J = "[";
  for (size_t I = 0; I < Rows.size(); ++I)
    J += fmt::format(R"({}{{"{}":{},"reads":{},"writes":{},"cycles":{}}})", I ? "," : "",
                     KeyName, Rows[I].Key, Rows[I].Reads, Rows[I].Writes, Rows[I].Cycles);
  return J + "]";
}

std::string jsonScopes(const std::vector<ScopeSummary> &Scopes) {
  std::string J = "[";
  for (size_t I = 0; I < Scopes.size(); ++I) {
    const ScopeSummary &S = Scopes[I];
    J += fmt::format(R"({}{{"name":{},"exits":{},"guest_cycles":{},"hypervisor_cycles":{},)"
                     R"("all_exits":{},"reasons":[)",
                     I ? "," : "", jsonString(S.Name), S.Exits, S.GuestCycles,
                     S.HypervisorCycles, jsonStats(S.AllExits));
    for (size_t K = 0; K < S.Reasons.size(); ++K) {
      const ReasonRow &R = S.Reasons[K];
      J += fmt::format(R"({}{{"reason":{},"name":{},"exits":{},"share":{},"cycles":{}}})",
                       K ? "," : "",
                       R.Reason == kUnknownExitReason ? std::string("null")
                                                      : std::to_string(R.Reason),
                       jsonString(reasonLabel(R.Reason)), R.Exits,
                       R.Share, jsonStats(R.Cycles));
    }
    J += fmt::format(R"(],"ports":{},"msrs":{}}})", jsonAccesses("port", S.Ports),
                     jsonAccesses("msr", S.Msrs));
  }
  return J + "]";
}

void printJson(const TraceSummary &S, std::FILE *Out) {
  std::string J = fmt::format(
      R"({{"kind":"{}","records":{},"lost_records":{},"first_tsc":{},"last_tsc":{},"failed":{},)",
      kindName(S.Kind, true), S.Records, S.LostRecords, S.FirstTsc, S.LastTsc,
      S.Failed ? "true" : "false");
  J += S.Failed ? fmt::format(R"("error":{{"offset":{},"message":{}}},)", S.Error.Offset,
                              jsonString(S.Error.Message))
                : std::string(R"("error":null,)");
  J += fmt::format(R"("cpus":{},"vcpus":{}}})", jsonScopes(S.Cpus), jsonScopes(S.Vcpus));
  J += '\n';
  put(Out, J);
}

// --- CSV ---

std::string csvField(std::string_view S) {
  if (S.find_first_of(",\"\n") == std::string_view::npos)
    return std::string(S);
  std::string Out = "\"";
  for (char C : S)
    Out += C == '"' ? std::string("\"\"") : std::string(1, C);
  return Out + "\"";
}

std::string csvStats(const CycleStats &C) {
  return fmt::format("{},{},{},{},{},{},{}", C.Count, C.Total, C.Avg, C.Min, C.Median, C.P99,
                     C.Max);
}

void csvScopes(std::string &T, const char *Kind, const std::vector<ScopeSummary> &Scopes) {
  for (const ScopeSummary &S : Scopes) {
    const std::string Name = csvField(S.Name);
    T += fmt::format("{},{},all,,,{},1,{},,,{},{}\n", Kind, Name, S.Exits, csvStats(S.AllExits),
                     S.GuestCycles, S.HypervisorCycles);
    for (const ReasonRow &R : S.Reasons)
      T += fmt::format("{},{},reason,{},{},{},{},{},,,,\n", Kind, Name, reasonNumber(R.Reason),
                       reasonLabel(R.Reason), R.Exits, R.Share, csvStats(R.Cycles));
    for (const AccessRow &A : S.Ports)
      T += fmt::format("{},{},port,{},,,,,{},,,,,,{},{},,\n", Kind, Name, A.Key, A.Cycles,
                       A.Reads, A.Writes);
    for (const AccessRow &A : S.Msrs)
      T += fmt::format("{},{},msr,{},,,,,{},,,,,,{},{},,\n", Kind, Name, A.Key, A.Cycles,
                       A.Reads, A.Writes);
  }
}

void printCsv(const TraceSummary &S, std::FILE *Out) {
  std::string T = "scope,name,row,key,label,exits,share,count,total,avg,min,median,p99,max,"
                  "reads,writes,guest_cycles,hypervisor_cycles\n";
  csvScopes(T, "cpu", S.Cpus);
  csvScopes(T, "vcpu", S.Vcpus);
  put(Out, T);
}

} // namespace

void printSummary(const TraceSummary &S, SummaryFormat F, std::FILE *Out) {
  switch (F) {
  case SummaryFormat::Text:
    return printText(S, Out);
  case SummaryFormat::Json:
    return printJson(S, Out);
  case SummaryFormat::Csv:
    return printCsv(S, Out);
  }
}

} // namespace vmxsim::trace
