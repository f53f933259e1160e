// `vmxsim trace summary`: one streaming pass over the merged records (trace/summary.h
// gives the rules). State is per CPU (the open exit, the running vCPU) and per (CPU,
// vCPU) pair (counters, exit cycles per reason, accessed ports and MSRs); the scopes
// printed — CPUs and vCPUs — are sums of pairs, built once at the end. Only the exit
// cycles are kept sample by sample (4 bytes each, 8 for the rare one above 2^32), for the
// exact median and p99.
#include "trace/summary.h"

#include "trace/events.h"
#include "trace/gt_records.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <unordered_map>

namespace vmxsim::trace {

namespace {

// Exit-qualification bits of an I/O-instruction exit (SDM Vol. 3C, "Exit Qualification
// for I/O Instructions"): bit 3 direction (1 = IN), bits 31:16 the port.
constexpr uint64_t kIoQualIn = 1u << 3;
constexpr unsigned kIoQualPortShift = 16;
constexpr uint32_t kReasonIoInstruction = 30;
constexpr uint32_t kBasicReasonMask = 0xffff;

// Runstate ids are 0x00021001 | old << 8 | new << 4 (format doc, section 5).
constexpr uint32_t kRunstateBase = 0x00021001, kRunstateStateBits = 0x330;
constexpr uint32_t kStateRunning = 0;

// vCPU keys: domain above bit 16, vCPU below. Real domains are 16-bit; the two
// pseudo-domains sort after them.
constexpr uint32_t kUnknownDomain = 0x10000;     ///< hypervisor trace, no runstate known
constexpr uint32_t kGroundTruthDomain = 0x20000; ///< ground truth: the vCPU is the CPU
uint64_t vcpuKey(uint32_t Domain, uint32_t Vcpu) { return uint64_t(Domain) << 16 | (Vcpu & 0xffff); }

/// Exit cycles, compactly: nearly every exit fits 32 bits.
struct SampleSet {
  std::vector<uint32_t> Small;
  std::vector<uint64_t> Large; ///< every value here exceeds every value in Small
  void add(uint64_t V) {
    if (V <= UINT32_MAX)
      Small.push_back(uint32_t(V));
    else
      Large.push_back(V);
  }
  uint64_t size() const { return Small.size() + Large.size(); }
  void append(const SampleSet &O) {
    Small.insert(Small.end(), O.Small.begin(), O.Small.end());
    Large.insert(Large.end(), O.Large.begin(), O.Large.end());
  }
};

/// The sample of 1-based rank K (1 <= K <= size); reorders S. Ranks below From (a rank
/// asked for before, so its sample is in place and nothing above it is smaller) are
/// left alone: asking in ascending rank order partitions ever smaller ranges.
uint64_t sampleOfRank(SampleSet &S, uint64_t K, uint64_t From = 1) {
  if (K <= S.Small.size()) {
    auto It = S.Small.begin() + ptrdiff_t(K - 1);
    std::nth_element(S.Small.begin() + ptrdiff_t(From - 1), It, S.Small.end());
    return *It;
  }
  const uint64_t Base = S.Small.size() + 1;
  auto It = S.Large.begin() + ptrdiff_t(K - Base);
  std::nth_element(S.Large.begin() + ptrdiff_t(From > Base ? From - Base : 0), It,
                   S.Large.end());
  return *It;
}

// Nearest-rank: rank ceil(q * N), q = 1/2 and 99/100, in integers.
uint64_t medianRank(uint64_t N) { return (N + 1) / 2; }
uint64_t p99Rank(uint64_t N) { return (99 * N + 99) / 100; }

CycleStats statsOf(SampleSet &S) {
  CycleStats C;
  C.Count = S.size();
  if (!C.Count)
    return C;
  C.Min = ~uint64_t(0);
  for (uint32_t V : S.Small) {
    C.Total += V;
    C.Min = std::min<uint64_t>(C.Min, V);
    C.Max = std::max<uint64_t>(C.Max, V);
  }
  for (uint64_t V : S.Large) {
    C.Total += V;
    C.Min = std::min(C.Min, V);
    C.Max = std::max(C.Max, V);
  }
  C.Avg = double(C.Total) / double(C.Count);
  const uint64_t MedianRank = medianRank(C.Count);
  C.Median = sampleOfRank(S, MedianRank);
  C.P99 = sampleOfRank(S, p99Rank(C.Count), MedianRank);
  return C;
}

struct Cell {
  uint32_t Reason = 0;
  uint64_t Exits = 0;
  SampleSet Samples;
};

struct Access {
  uint64_t Reads = 0, Writes = 0, Cycles = 0;
};

/// Everything counted for one vCPU on one CPU.
struct Pair {
  uint16_t Cpu = 0;
  uint64_t Vcpu = 0; ///< vcpuKey
  uint64_t Exits = 0, GuestCycles = 0, HypervisorCycles = 0;
  std::vector<Cell> Cells;
  std::array<int32_t, 128> FastCell; ///< Cells index of reasons below 128, -1 if none
  std::unordered_map<uint32_t, uint32_t> SlowCell;
  std::unordered_map<uint32_t, Access> Ports, Msrs;

  Pair() { FastCell.fill(-1); }
  Cell &cell(uint32_t Reason) {
    int32_t *Fast = Reason < FastCell.size() ? &FastCell[Reason] : nullptr;
    if (Fast && *Fast >= 0)
      return Cells[size_t(*Fast)];
    if (!Fast) {
      auto It = SlowCell.find(Reason);
      if (It != SlowCell.end())
        return Cells[It->second];
      SlowCell.emplace(Reason, uint32_t(Cells.size()));
    } else {
      *Fast = int32_t(Cells.size());
    }
    Cells.emplace_back();
    Cells.back().Reason = Reason;
    return Cells.back();
  }
};

/// An exit in progress and the guest interval in progress of one CPU, for one kind of
/// record (hypervisor or ground truth: a mixed trace keeps them apart).
struct Transitions {
  bool Open = false;
  uint64_t ExitTsc = 0;
  uint32_t Reason = 0;
  Pair *ExitPair = nullptr;
  Access *Port = nullptr, *Msr = nullptr; ///< first of the exit (unordered_map nodes stay put)
  bool ReasonPending = false; ///< xen-3.0: the reason comes with the entry record
  bool InGuest = false;
  uint64_t EntryTsc = 0;
  Pair *GuestPair = nullptr;
};

struct CpuState {
  bool Seen = false;
  uint64_t Running = 0; ///< vcpuKey of the running vCPU (hypervisor traces)
  bool RunningKnown = false;
  Pair *HvPair = nullptr; ///< cache: the pair of Running (or of the unknown vCPU)
  Transitions Hv, Gt;
};

class Summarizer {
public:
  explicit Summarizer(const SummaryOptions &O) : Opts(O), Cpus(XT_MAX_CPUS) {}

  void add(const TraceRecord &R) {
    ++S.Records;
    if (R.HasTsc) {
      if (!HaveTsc || R.Tsc < S.FirstTsc)
        S.FirstTsc = R.Tsc;
      if (!HaveTsc || R.Tsc > S.LastTsc)
        S.LastTsc = R.Tsc;
      HaveTsc = true;
    }
    CpuState &C = Cpus[R.Cpu];
    C.Seen = true;
    if (R.Flavour == TraceFlavour::Xen30)
      return addXen30(C, R);
    switch (R.Event) {
    case XT_EV_VmxExit:
    case XT_EV_VmxExit64:
      SawHv = true;
      if (R.NumWords >= 1)
        openExit(C.Hv, hvPair(C, R.Cpu), R.Words[0] & kBasicReasonMask, R.Tsc);
      return;
    case XT_EV_VmEntry:
      SawHv = true;
      closeExit(C.Hv, R.Tsc);
      enterGuest(C.Hv, hvPair(C, R.Cpu), R.Tsc);
      return;
    case XT_EV_IoportRead:
    case XT_EV_IoportWrite:
      if (C.Hv.Open && R.NumWords >= 1)
        access(C.Hv.ExitPair->Ports, C.Hv.Port, R.Words[0], R.Event == XT_EV_IoportWrite);
      return;
    case XT_EV_MsrRead:
    case XT_EV_MsrWrite:
      if (C.Hv.Open && R.NumWords >= 1)
        access(C.Hv.ExitPair->Msrs, C.Hv.Msr, R.Words[0], R.Event == XT_EV_MsrWrite);
      return;
    // KVM's, imported from ftrace (trace/ftrace_import.h): {write, port, ...}, {write, msr, ...}.
    case XT_EV_KvmPio:
      if (C.Hv.Open && R.NumWords >= 2)
        access(C.Hv.ExitPair->Ports, C.Hv.Port, R.Words[1] & 0xffff, R.Words[0] == 1);
      return;
    case XT_EV_KvmMsr:
      if (C.Hv.Open && R.NumWords >= 2)
        access(C.Hv.ExitPair->Msrs, C.Hv.Msr, R.Words[1], R.Words[0] == 1);
      return;
    case XT_EV_ContinueRunning:
      if (R.NumWords >= 1)
        setRunning(C, R.Words[0]);
      return;
    case XT_EV_GtExit:
    case XT_EV_GtVmExit: {
      SawGt = true;
      GtExitFields X;
      if (gtExitOf(R, X)) {
        const uint32_t Reason = X.Reason & kBasicReasonMask;
        openExit(C.Gt, gtPair(C, R.Cpu), Reason, R.Tsc);
        if (Reason == kReasonIoInstruction)
          access(C.Gt.ExitPair->Ports, C.Gt.Port, uint32_t(X.Qual >> kIoQualPortShift) & 0xffff,
                 !(X.Qual & kIoQualIn));
      }
      return;
    }
    case XT_EV_GtResume:
    case XT_EV_GtVmEntry:
      SawGt = true;
      closeExit(C.Gt, R.Tsc);
      enterGuest(C.Gt, gtPair(C, R.Cpu), R.Tsc);
      return;
    case XT_EV_GtVmEntryFail:
      // The hypervisor's time ends at the failed VMLAUNCH/VMRESUME; the guest never ran.
      SawGt = true;
      closeExit(C.Gt, R.Tsc);
      return;
    default:
      if ((R.Event & ~kRunstateStateBits) == kRunstateBase && R.NumWords >= 1) {
        const uint32_t Old = (R.Event >> 8) & 0xf, New = (R.Event >> 4) & 0xf;
        if (New == kStateRunning)
          setRunning(C, R.Words[0]);
        else if (Old == kStateRunning && C.RunningKnown &&
                 C.Running == vcpuKey(R.Words[0] >> 16, R.Words[0] & 0xffff)) {
          // X running -> Y: nobody is known to run here until the next -> running.
          C.RunningKnown = false;
          C.HvPair = nullptr;
        }
      }
      return;
    }
  }

  /// A xen-3.0 record (trace/summary.h: the reason and the ports come with the entry).
  void addXen30(CpuState &C, const TraceRecord &R) {
    constexpr uint32_t kRdmsr = 31, kWrmsr = 32;
    switch (R.Event) {
    case XT30_EV_VmxVmexit:
      SawHv = true;
      openExit(C.Hv, hvPair(C, R.Cpu), kUnknownExitReason, R.Tsc, /*ReasonPending=*/true);
      return;
    case XT30_EV_VmxVmentry: {
      SawHv = true;
      Transitions &T = C.Hv;
      if (T.Open && T.ReasonPending) {
        T.ReasonPending = false;
        T.Reason = uint32_t(R.Items[0]) & kBasicReasonMask;
        ++T.ExitPair->cell(T.Reason).Exits;
        const uint32_t What = uint32_t(R.Items[1]);
        if (T.Reason == kReasonIoInstruction)
          access(T.ExitPair->Ports, T.Port, What & 0xffff, R.Items[2] == 0);
        else if (T.Reason == kRdmsr || T.Reason == kWrmsr)
          access(T.ExitPair->Msrs, T.Msr, What, T.Reason == kWrmsr);
      }
      closeExit(T, R.Tsc);
      enterGuest(T, hvPair(C, R.Cpu), R.Tsc);
      return;
    }
    default:
      return;
    }
  }

  TraceSummary finish(TraceReader &Reader) {
    for (CpuState &C : Cpus)
      settleReason(C.Hv);
    S.Kind = SawHv && SawGt ? TraceKind::Mixed
             : SawHv        ? TraceKind::Hypervisor
             : SawGt        ? TraceKind::GroundTruth
                            : TraceKind::Empty;
    if (Opts.OnExit)
      for (unsigned Cpu = 0; Cpu < XT_MAX_CPUS; ++Cpu)
        for (const Transitions *T : {&Cpus[Cpu].Hv, &Cpus[Cpu].Gt})
          if (T->Open)
            Opts.OnExit({uint16_t(Cpu), T->Reason, T->ExitTsc, false, 0});
    S.LostRecords = Reader.lostRecords();
    S.Flavour = Reader.flavour();
    S.Failed = Reader.failed();
    if (S.Failed)
      S.Error = Reader.error();
    std::sort(Pairs.begin(), Pairs.end(), [](const auto &A, const auto &B) {
      return A->Cpu != B->Cpu ? A->Cpu < B->Cpu : A->Vcpu < B->Vcpu;
    });
    for (unsigned Cpu = 0; Cpu < XT_MAX_CPUS; ++Cpu) {
      if (!Cpus[Cpu].Seen)
        continue;
      std::vector<Pair *> Of;
      for (auto &P : Pairs)
        if (P->Cpu == Cpu)
          Of.push_back(P.get());
      S.Cpus.push_back(scope(fmt::format("cpu{}", Cpu), Of));
      S.Cpus.back().Cpu = uint16_t(Cpu);
    }
    std::map<uint64_t, std::vector<Pair *>> ByVcpu;
    for (auto &P : Pairs)
      ByVcpu[P->Vcpu].push_back(P.get());
    for (auto &[Key, Of] : ByVcpu) {
      const uint32_t Domain = uint32_t(Key >> 16), Vcpu = uint32_t(Key & 0xffff);
      std::string Name = Domain == kGroundTruthDomain ? fmt::format("v{}", Vcpu)
                         : Domain == kUnknownDomain   ? fmt::format("d?v{}", Vcpu)
                                                      : fmt::format("d{}v{}", Domain, Vcpu);
      S.Vcpus.push_back(scope(std::move(Name), Of));
    }
    return std::move(S);
  }

private:
  Pair *pairOf(uint16_t Cpu, uint64_t Vcpu) {
    auto [It, New] = PairIndex.try_emplace(uint64_t(Cpu) << 40 | Vcpu, nullptr);
    if (New) {
      Pairs.push_back(std::make_unique<Pair>());
      Pairs.back()->Cpu = Cpu;
      Pairs.back()->Vcpu = Vcpu;
      It->second = Pairs.back().get();
    }
    return It->second;
  }
  Pair *hvPair(CpuState &C, uint16_t Cpu) {
    if (!C.HvPair)
      C.HvPair = pairOf(Cpu, C.RunningKnown ? C.Running : vcpuKey(kUnknownDomain, Cpu));
    return C.HvPair;
  }
  Pair *gtPair(CpuState &, uint16_t Cpu) {
    if (!GtPairs[Cpu])
      GtPairs[Cpu] = pairOf(Cpu, vcpuKey(kGroundTruthDomain, Cpu));
    return GtPairs[Cpu];
  }
  void setRunning(CpuState &C, uint32_t DomVcpu) {
    const uint64_t Key = vcpuKey(DomVcpu >> 16, DomVcpu & 0xffff);
    if (C.RunningKnown && C.Running == Key)
      return;
    C.Running = Key;
    C.RunningKnown = true;
    C.HvPair = nullptr;
  }

  /// An exit that stays unclosed with its reason still unknown goes to the unknown row.
  void settleReason(Transitions &T) {
    if (T.Open && T.ReasonPending) {
      T.ReasonPending = false;
      ++T.ExitPair->cell(kUnknownExitReason).Exits;
    }
  }
  void openExit(Transitions &T, Pair *P, uint32_t Reason, uint64_t Tsc,
                bool ReasonPending = false) {
    // An exit still open stays unclosed: it is counted, without cycles.
    settleReason(T);
    if (T.Open && Opts.OnExit)
      Opts.OnExit({T.ExitPair->Cpu, T.Reason, T.ExitTsc, false, 0});
    if (T.InGuest) {
      T.GuestPair->GuestCycles += Tsc - T.EntryTsc;
      T.InGuest = false;
    }
    T.Open = true;
    T.ExitTsc = Tsc;
    T.Reason = Reason;
    T.ExitPair = P;
    T.Port = T.Msr = nullptr;
    T.ReasonPending = ReasonPending;
    ++P->Exits;
    if (!ReasonPending)
      ++P->cell(Reason).Exits;
  }
  void closeExit(Transitions &T, uint64_t Tsc) {
    T.InGuest = false;
    if (!T.Open)
      return;
    T.Open = false;
    const uint64_t Cycles = Tsc - T.ExitTsc;
    Pair *P = T.ExitPair;
    P->HypervisorCycles += Cycles;
    P->cell(T.Reason).Samples.add(Cycles);
    if (Opts.OnExit)
      Opts.OnExit({P->Cpu, T.Reason, T.ExitTsc, true, Cycles});
    if (T.Port)
      T.Port->Cycles += Cycles;
    if (T.Msr)
      T.Msr->Cycles += Cycles;
  }
  void enterGuest(Transitions &T, Pair *P, uint64_t Tsc) {
    T.InGuest = true;
    T.EntryTsc = Tsc;
    T.GuestPair = P;
  }
  /// A port or MSR access of the open exit; the exit's cycles go to its first one.
  void access(std::unordered_map<uint32_t, Access> &Map, Access *&First, uint32_t What,
              bool Write) {
    Access &A = Map[What];
    ++(Write ? A.Writes : A.Reads);
    if (!First)
      First = &A;
  }

  std::vector<AccessRow> accessRows(const std::vector<Pair *> &Of,
                                    std::unordered_map<uint32_t, Access> Pair::*Which) {
    std::map<uint32_t, Access> Sum;
    for (Pair *P : Of)
      for (auto &[Key, A] : P->*Which) {
        Access &T = Sum[Key];
        T.Reads += A.Reads;
        T.Writes += A.Writes;
        T.Cycles += A.Cycles;
      }
    std::vector<AccessRow> Rows;
    for (auto &[Key, A] : Sum)
      Rows.push_back({Key, A.Reads, A.Writes, A.Cycles});
    std::stable_sort(Rows.begin(), Rows.end(), [](const AccessRow &X, const AccessRow &Y) {
      return X.Reads + X.Writes > Y.Reads + Y.Writes;
    });
    if (Rows.size() > Opts.TopAccesses)
      Rows.resize(Opts.TopAccesses);
    return Rows;
  }

  /// Statistics of the union of Cells' samples; computed in place for a single cell.
  static CycleStats unionStats(const std::vector<Cell *> &Cells) {
    if (Cells.size() == 1)
      return statsOf(Cells[0]->Samples);
    SampleSet All;
    for (Cell *C : Cells)
      All.append(C->Samples);
    return statsOf(All);
  }

  ScopeSummary scope(std::string Name, const std::vector<Pair *> &Of) {
    ScopeSummary Sc;
    Sc.Name = std::move(Name);
    std::map<uint32_t, std::vector<Cell *>> ByReason;
    std::vector<Cell *> AllCells;
    for (Pair *P : Of) {
      Sc.Exits += P->Exits;
      Sc.GuestCycles += P->GuestCycles;
      Sc.HypervisorCycles += P->HypervisorCycles;
      for (Cell &C : P->Cells) {
        ByReason[C.Reason].push_back(&C);
        AllCells.push_back(&C);
      }
    }
    for (auto &[Reason, Cells] : ByReason) {
      ReasonRow Row;
      Row.Reason = Reason;
      for (Cell *C : Cells)
        Row.Exits += C->Exits;
      Row.Share = Sc.Exits ? double(Row.Exits) / double(Sc.Exits) : 0;
      Row.Cycles = unionStats(Cells);
      Sc.Reasons.push_back(Row);
    }
    std::stable_sort(Sc.Reasons.begin(), Sc.Reasons.end(),
                     [](const ReasonRow &A, const ReasonRow &B) { return A.Exits > B.Exits; });
    if (!AllCells.empty())
      Sc.AllExits = unionStats(AllCells);
    Sc.Ports = accessRows(Of, &Pair::Ports);
    Sc.Msrs = accessRows(Of, &Pair::Msrs);
    return Sc;
  }

  const SummaryOptions &Opts;
  TraceSummary S;
  bool HaveTsc = false, SawHv = false, SawGt = false;
  std::vector<CpuState> Cpus;
  std::array<Pair *, XT_MAX_CPUS> GtPairs{};
  std::vector<std::unique_ptr<Pair>> Pairs;
  std::unordered_map<uint64_t, Pair *> PairIndex;
};

} // namespace

CycleStats cycleStats(std::vector<uint64_t> &Samples) {
  SampleSet S;
  S.Large = std::move(Samples); // Small empty: ranks index Large directly
  CycleStats C = statsOf(S);
  Samples = std::move(S.Large);
  return C;
}

TraceSummary summarizeTrace(TraceReader &Reader, const SummaryOptions &O) {
  Summarizer Sum(O);
  TraceRecord R;
  while (Reader.next(R))
    Sum.add(R);
  return Sum.finish(Reader);
}

int traceSummaryCommand(const std::string &Path, SummaryFormat F, std::FILE *Out,
                        std::FILE *Err, const TraceReader::ProgressFn &Progress) {
  TraceReader Reader;
  Reader.setProgress(Progress);
  std::string Why;
  if (!Reader.open(Path, Why)) {
    std::fprintf(Err, "vmxsim: error: %s\n", Why.c_str());
    return 2;
  }
  TraceSummary S = summarizeTrace(Reader);
  printSummary(S, F, Out);
  std::fflush(Out);
  if (S.Failed) {
    std::fprintf(Err, "vmxsim: error: %s: %s\n", Path.c_str(), S.Error.str().c_str());
    return 2;
  }
  return 0;
}

} // namespace vmxsim::trace
