// `vmxsim trace diff` (trace/diff.h). Record mode reads both files in lockstep, one
// merged record of each at a time, and keeps per CPU the records one file has read and
// the other not yet (memory grows with how far the two merged orders drift apart, not
// with the file size, as long as both files hold the same CPUs). A mismatch is a
// candidate; records of A read earlier but still waiting for their partner in B may hold
// an earlier one, so B is read on until none of them is left (or B ends).
#include "trace/diff.h"

#include "trace/vmx_names.h"
#include "trace/dump.h"
#include "trace/events.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <set>

namespace vmxsim::trace {

namespace {

constexpr uint32_t kRunstateBase = 0x00021001, kRunstateStateBits = 0x330;
/// Candidates where A has no record sort after every record of A.
constexpr uint64_t kAbsentInA = uint64_t(1) << 63;

/// Payload words that are times (bit i = word i), left out by --ignore-tsc.
uint32_t timeWords(const TraceRecord &R) {
  if (R.Flavour == TraceFlavour::Xen30)
    return 0; // its ids are not the modern ones; no xen-3.0 item is a time
  if (R.Event == XT_EV_Rdtsc)
    return 0x3; // the 64-bit value returned to the guest
  if ((R.Event & ~kRunstateStateBits) == kRunstateBase)
    return 0x1e; // the two optional 64-bit counters
  return 0;
}

bool sameRecord(const TraceRecord &A, const TraceRecord &B, bool IgnoreTsc) {
  // The flavours' ids collide (0x00081001 is VMENTRY in one, VMX_VMEXIT in the other):
  // records of different flavours never agree.
  if (A.Flavour != B.Flavour || A.Event != B.Event || A.HasTsc != B.HasTsc ||
      A.NumWords != B.NumWords)
    return false;
  if (A.Flavour == TraceFlavour::Xen30)
    for (unsigned I = 0; I < XT30_ITEMS; ++I)
      if (A.Items[I] != B.Items[I])
        return false;
  // An untimed record's TSC is inherited from a record already compared.
  if (!IgnoreTsc && A.HasTsc && A.Tsc != B.Tsc)
    return false;
  const uint32_t Skip = IgnoreTsc ? timeWords(A) : 0;
  for (unsigned I = 0; I < A.NumWords && I < XT_MAX_WORDS; ++I)
    if (!(Skip >> I & 1) && A.Words[I] != B.Words[I])
      return false;
  return true;
}

struct Pending {
  DiffRecord R;
  uint64_t Pos; ///< index in its file's merged order
};

struct Side {
  explicit Side(TraceReader &Reader) : Reader(Reader) {}
  TraceReader &Reader;
  bool Ended = false;
  uint64_t Pos = 0;
  std::vector<uint64_t> PrevTsc = std::vector<uint64_t>(XT_MAX_CPUS, 0);
  std::vector<bool> SeenTsc = std::vector<bool>(XT_MAX_CPUS, false);
  std::vector<std::deque<Pending>> Queue = std::vector<std::deque<Pending>>(XT_MAX_CPUS);

  bool next(Pending &P, bool IgnoreTsc) {
    if (Ended)
      return false;
    TraceRecord &R = P.R.Rec;
    for (;;) {
      if (!Reader.next(R)) {
        Ended = true;
        return false;
      }
      if (!(IgnoreTsc && R.Event == XT_EV_LostRecords))
        break;
    }
    P.R.Delta = 0;
    if (R.HasTsc) {
      P.R.Delta = SeenTsc[R.Cpu] ? R.Tsc - PrevTsc[R.Cpu] : 0;
      PrevTsc[R.Cpu] = R.Tsc;
      SeenTsc[R.Cpu] = true;
    }
    P.Pos = Pos++;
    return true;
  }
};

struct CpuMatch {
  uint64_t Matched = 0;
  bool Diverged = false;
  std::deque<DiffRecord> CtxA, CtxB;
};

class RecordDiffer {
public:
  RecordDiffer(TraceReader &A, TraceReader &B, const DiffOptions &O)
      : SA(A), SB(B), O(O), Cpus(XT_MAX_CPUS) {}

  RecordDiff run() {
    for (;;) {
      const bool ReadA = !SA.Ended && !Best;
      const bool ReadB = !SB.Ended && (!Best || earlierWaitingInA());
      if (!ReadA && !ReadB)
        break;
      if (ReadA)
        step(SA, true);
      if (ReadB)
        step(SB, false);
    }
    RecordDiff D;
    D.RecordsA = SA.Pos;
    D.RecordsB = SB.Pos;
    D.FailedA = SA.Reader.failed();
    D.FailedB = SB.Reader.failed();
    if (D.FailedA)
      D.ErrorA = SA.Reader.error();
    if (D.FailedB)
      D.ErrorB = SB.Reader.error();
    if (Best) {
      D.Diverged = true;
      D.First = std::move(Best->Div);
    }
    return D;
  }

private:
  struct Candidate {
    uint64_t Key;
    RecordDivergence Div;
  };

  /// Records of A read before the best candidate and not yet compared: B may still hold
  /// an earlier divergence.
  bool earlierWaitingInA() const {
    for (uint16_t C : KnownCpus)
      if (!Cpus[C].Diverged && !SA.Queue[C].empty() && SA.Queue[C].front().Pos < Best->Key)
        return true;
    return false;
  }

  void step(Side &S, bool IsA) {
    Pending P;
    if (!S.next(P, O.IgnoreTsc)) {
      sideEnded(IsA);
      return;
    }
    const uint16_t C = P.R.Rec.Cpu;
    if (!Known.count(C)) {
      Known.insert(C);
      KnownCpus.push_back(C);
    }
    if (Cpus[C].Diverged)
      return;
    S.Queue[C].push_back(std::move(P));
    match(C);
  }

  void match(uint16_t C) {
    CpuMatch &M = Cpus[C];
    auto &QA = SA.Queue[C], &QB = SB.Queue[C];
    while (!M.Diverged && !QA.empty() && !QB.empty()) {
      if (!sameRecord(QA.front().R.Rec, QB.front().R.Rec, O.IgnoreTsc)) {
        candidate(C, &QA.front(), &QB.front());
        return;
      }
      M.CtxA.push_back(QA.front().R);
      M.CtxB.push_back(QB.front().R);
      while (M.CtxA.size() > O.Context) {
        M.CtxA.pop_front();
        M.CtxB.pop_front();
      }
      QA.pop_front();
      QB.pop_front();
      ++M.Matched;
    }
    // One file has ended cleanly: a record of the other without a partner diverges.
    if (!M.Diverged && QA.empty() != QB.empty()) {
      if (QA.empty() && SA.Ended && !SA.Reader.failed())
        candidate(C, nullptr, &QB.front());
      else if (QB.empty() && SB.Ended && !SB.Reader.failed())
        candidate(C, &QA.front(), nullptr);
    }
  }

  void sideEnded(bool IsA) {
    (void)IsA;
    for (uint16_t C : KnownCpus)
      match(C);
  }

  void candidate(uint16_t C, const Pending *A, const Pending *B) {
    CpuMatch &M = Cpus[C];
    M.Diverged = true;
    const uint64_t Key = A ? A->Pos : kAbsentInA + B->Pos;
    if (Best && Best->Key <= Key)
      return;
    Candidate N;
    N.Key = Key;
    RecordDivergence &D = N.Div;
    D.Cpu = C;
    D.Index = M.Matched;
    D.HaveA = A != nullptr;
    D.HaveB = B != nullptr;
    if (A)
      D.A = A->R;
    if (B)
      D.B = B->R;
    D.CountA = D.CountB = M.Matched;
    D.ContextA.assign(M.CtxA.begin(), M.CtxA.end());
    D.ContextB.assign(M.CtxB.begin(), M.CtxB.end());
    Best = std::move(N);
  }

  Side SA, SB;
  const DiffOptions &O;
  std::vector<CpuMatch> Cpus;
  std::set<uint16_t> Known;
  std::vector<uint16_t> KnownCpus;
  std::optional<Candidate> Best;
};

std::string offsetOf(const RecordDivergence &D, bool IsA) {
  const bool Have = IsA ? D.HaveA : D.HaveB;
  if (Have)
    return fmt::format("{:#x}", (IsA ? D.A : D.B).Rec.Offset);
  return fmt::format("none: {} ends after {} records of CPU {}", IsA ? "A" : "B",
                     IsA ? D.CountA : D.CountB, D.Cpu);
}

std::string recordLine(const char *Which, const DiffRecord &R) {
  return fmt::format("  {} {:#x}: {}\n", Which, R.Rec.Offset, formatRecord(R.Rec, R.Delta));
}

std::string scopeReasonName(uint32_t Reason) {
  const char *N = exitReasonEnumName(Reason);
  return N ? fmt::format("{} {}", Reason, N) : std::to_string(Reason);
}

} // namespace

RecordDiff diffRecords(TraceReader &A, TraceReader &B, const DiffOptions &O) {
  return RecordDiffer(A, B, O).run();
}

void printRecordDiff(const RecordDiff &D, std::FILE *Out) {
  std::string T;
  if (!D.Diverged) {
    if (!D.FailedA && !D.FailedB)
      T = fmt::format("identical ({} records)\n", D.RecordsA);
    else
      T = fmt::format("no divergence in the records before the error ({} records of A, {} of "
                      "B)\n",
                      D.RecordsA, D.RecordsB);
  } else {
    const RecordDivergence &V = D.First;
    T = fmt::format("first divergence: CPU {}, record {} of that CPU (A offset {}, B offset {})\n",
                    V.Cpu, V.Index, offsetOf(V, true), offsetOf(V, false));
    if (!V.ContextA.empty()) {
      T += fmt::format("the {} equal records of CPU {} before it:\n", V.ContextA.size(), V.Cpu);
      for (size_t I = 0; I < V.ContextA.size(); ++I) {
        T += recordLine("A", V.ContextA[I]);
        T += recordLine("B", V.ContextB[I]);
      }
    }
    T += "the records that differ:\n";
    for (bool IsA : {true, false}) {
      const char *Which = IsA ? "A" : "B";
      if (IsA ? V.HaveA : V.HaveB)
        T += recordLine(Which, IsA ? V.A : V.B);
      else
        T += fmt::format("  {}: ends (no record {} of CPU {})\n", Which, V.Index, V.Cpu);
    }
  }
  std::fwrite(T.data(), 1, T.size(), Out);
}

namespace {

/// Calls F(scope name, reason, row of A or null, row of B or null) for every reason of
/// every scope either summary has, scopes in first-seen order (A's, then B's new ones),
/// reasons ascending; CPUs first, then vCPUs.
template <typename Fn> void pairReasons(const TraceSummary &A, const TraceSummary &B, Fn &&F) {
  auto Pair = [&](const std::vector<ScopeSummary> &SA, const std::vector<ScopeSummary> &SB) {
    std::map<std::string, std::pair<const ScopeSummary *, const ScopeSummary *>> Scopes;
    std::vector<std::string> Order;
    for (const ScopeSummary &S : SA)
      if (Scopes.emplace(S.Name, std::pair{&S, nullptr}).second)
        Order.push_back(S.Name);
    for (const ScopeSummary &S : SB) {
      auto [It, New] = Scopes.emplace(S.Name, std::pair{nullptr, &S});
      if (New)
        Order.push_back(S.Name);
      else
        It->second.second = &S;
    }
    for (const std::string &Name : Order) {
      auto [PA, PB] = Scopes[Name];
      std::map<uint32_t, std::pair<const ReasonRow *, const ReasonRow *>> Rows;
      if (PA)
        for (const ReasonRow &R : PA->Reasons)
          Rows[R.Reason].first = &R;
      if (PB)
        for (const ReasonRow &R : PB->Reasons)
          Rows[R.Reason].second = &R;
      for (auto &[Reason, P] : Rows)
        F(Name, Reason, P.first, P.second);
    }
  };
  Pair(A.Cpus, B.Cpus);
  Pair(A.Vcpus, B.Vcpus);
}

} // namespace

std::vector<DistributionDifference> diffDistributions(const TraceSummary &A,
                                                      const TraceSummary &B,
                                                      const DiffOptions &O) {
  std::vector<DistributionDifference> Out;
  pairReasons(A, B, [&](const std::string &Name, uint32_t Reason, const ReasonRow *RA,
                        const ReasonRow *RB) {
    const uint64_t EA = RA ? RA->Exits : 0, EB = RB ? RB->Exits : 0;
    if (EA != EB)
      Out.push_back({Name, Reason, "exits", double(EA), double(EB)});
    if (O.Tolerance < 0 || !RA || !RB || !RA->Cycles.Count || !RB->Cycles.Count)
      return;
    const CycleStats &CA = RA->Cycles, &CB = RB->Cycles;
    const std::pair<const char *, std::pair<double, double>> Fields[] = {
        {"avg", {CA.Avg, CB.Avg}},
        {"median", {double(CA.Median), double(CB.Median)}},
        {"p99", {double(CA.P99), double(CB.P99)}}};
    for (auto &[Field, V] : Fields) {
      const double Hi = std::max(std::fabs(V.first), std::fabs(V.second));
      if (std::fabs(V.first - V.second) > O.Tolerance * Hi)
        Out.push_back({Name, Reason, Field, V.first, V.second});
    }
  });
  return Out;
}

void printCyclesView(const TraceSummary &A, const TraceSummary &B, std::FILE *Out) {
  std::string T = "handler cycles (exit to next entry) per exit reason; ratio = mean B / mean A\n";
  T += fmt::format("  {:<6} {:<34} {:>8} {:>8} {:>10} {:>10} {:>7}\n", "scope", "exit reason",
                   "exits A", "exits B", "mean A", "mean B", "ratio");
  pairReasons(A, B, [&](const std::string &Name, uint32_t Reason, const ReasonRow *RA,
                        const ReasonRow *RB) {
    auto Mean = [](const ReasonRow *R) {
      return R && R->Cycles.Count ? fmt::format("{:.1f}", R->Cycles.Avg) : std::string("-");
    };
    const bool Both = RA && RB && RA->Cycles.Count && RB->Cycles.Count && RA->Cycles.Avg > 0;
    T += fmt::format("  {:<6} {:<34} {:>8} {:>8} {:>10} {:>10} {:>7}\n", Name,
                     scopeReasonName(Reason), RA ? RA->Exits : 0, RB ? RB->Exits : 0, Mean(RA),
                     Mean(RB), Both ? fmt::format("{:.2f}", RB->Cycles.Avg / RA->Cycles.Avg)
                                    : std::string("-"));
  });
  std::fwrite(T.data(), 1, T.size(), Out);
}

void printDistributionDiff(const TraceSummary &A, const TraceSummary &B,
                           const std::vector<DistributionDifference> &D, std::FILE *Out) {
  uint64_t ExitsA = 0, ExitsB = 0;
  for (const ScopeSummary &S : A.Cpus)
    ExitsA += S.Exits;
  for (const ScopeSummary &S : B.Cpus)
    ExitsB += S.Exits;
  std::string T;
  if (D.empty()) {
    T = fmt::format("distributions equal ({} exits in A, {} in B)\n", ExitsA, ExitsB);
  } else {
    T = fmt::format("distributions differ ({} exits in A, {} in B):\n", ExitsA, ExitsB);
    for (const DistributionDifference &X : D)
      T += fmt::format("  {} reason {}: {} A {} B {}\n", X.Scope, scopeReasonName(X.Reason),
                       X.Field, X.A, X.B);
  }
  std::fwrite(T.data(), 1, T.size(), Out);
}

int traceDiffCommand(const std::string &PathA, const std::string &PathB, const DiffOptions &O,
                     std::FILE *Out, std::FILE *Err, const TraceReader::ProgressFn &Progress) {
  TraceReader A, B;
  A.setProgress(Progress);
  B.setProgress(Progress);
  std::string Why;
  if (!A.open(PathA, Why) || !B.open(PathB, Why)) {
    std::fprintf(Err, "vmxsim: error: %s\n", Why.c_str());
    return 2;
  }
  bool Differ = false;
  if (O.Cycles) {
    printCyclesView(summarizeTrace(A), summarizeTrace(B), Out);
  } else if (O.Distribution) {
    const TraceSummary SA = summarizeTrace(A), SB = summarizeTrace(B);
    const auto D = diffDistributions(SA, SB, O);
    printDistributionDiff(SA, SB, D, Out);
    Differ = !D.empty();
  } else {
    const RecordDiff D = diffRecords(A, B, O);
    printRecordDiff(D, Out);
    Differ = D.Diverged;
  }
  std::fflush(Out);
  bool Error = false;
  for (auto [R, Path] : {std::pair{&A, &PathA}, std::pair{&B, &PathB}})
    if (R->failed()) {
      std::fprintf(Err, "vmxsim: error: %s: %s\n", Path->c_str(), R->error().str().c_str());
      Error = true;
    }
  return Error ? 2 : Differ ? 1 : 0;
}

} // namespace vmxsim::trace
