#include "trace/check.h"

#include "trace/dump.h"
#include "trace/events.h"

#include <fmt/format.h>

#include <deque>

namespace vmxsim::trace {

void LagStats::add(uint64_t V) {
  Min = Count ? std::min(Min, V) : V;
  Max = Count ? std::max(Max, V) : V;
  Total += V;
  ++Count;
}

namespace {

constexpr uint32_t kIoReason = 30, kCrReason = 28, kExceptionReason = 0; // SDM Vol. 3C, App. C

/// A ground-truth VM transition.
struct GtEvent {
  TraceRecord Rec;
  bool IsExit = false;
  uint32_t Reason = 0;
  uint64_t Rip = 0, Qual = 0;
};

uint64_t word64(const TraceRecord &R, unsigned I) {
  return uint64_t(R.Words[I]) | uint64_t(R.Words[I + 1]) << 32;
}

class Checker {
public:
  Checker(TraceReader &Hv, TraceReader &Gt) : Hv(Hv), Gt(Gt) {}

  CheckResult run() {
    TraceRecord R;
    while (Res.Ok && Hv.next(R)) {
      ++Res.HypervisorRecords;
      hypervisorRecord(R);
    }
    if (Res.Ok && Hv.failed()) {
      fail("hypervisor trace: " + Hv.error().str());
      Res.ReadError = true;
    }
    // Whatever the ground truth still holds was not in the hypervisor's trace.
    if (Res.Ok) {
      GtEvent E;
      if (pullAny(E))
        fail(fmt::format("cpu{}: the ground truth has more: {} at offset {:#x} has no "
                         "hypervisor record",
                         E.Rec.Cpu, formatRecord(E.Rec, 0), E.Rec.Offset));
      else if (Gt.failed()) {
        fail("ground truth: " + Gt.error().str());
        Res.ReadError = true;
      }
    }
    for (CpuCheck &C : Cpus)
      if (C.Exits || C.Entries)
        Res.Cpus.push_back(C);
    // A record that found no partner because the other file ends early or is corrupt:
    // the cause is the read error, not a disagreement.
    if (!Res.Ok && !Res.WrongKind && (Hv.failed() || Gt.failed()))
      Res.ReadError = true;
    if (Res.Ok && Res.Cpus.empty())
      fail(fmt::format("nothing was checked: the hypervisor's trace holds no VMX_EXIT or "
                       "VMENTRY record ({} records read) and the ground truth no VM exit "
                       "or entry ({} records read)",
                       Res.HypervisorRecords, Res.GroundTruthRecords));
    return std::move(Res);
  }

private:
  void fail(std::string Why) {
    if (Res.Ok) {
      Res.Ok = false;
      Res.Problem = std::move(Why);
    }
  }
  void wrongKind(std::string Why) {
    if (Res.Ok)
      Res.WrongKind = true;
    fail(std::move(Why));
  }

  CpuCheck &cpu(uint16_t N) {
    if (N >= Cpus.size()) {
      const size_t Old = Cpus.size();
      Cpus.resize(N + 1);
      Pending.resize(N + 1);
      LastExit.resize(N + 1);
      for (size_t I = Old; I < Cpus.size(); ++I)
        Cpus[I].Cpu = uint16_t(I);
    }
    return Cpus[N];
  }

  /// Reads the ground truth until a transition of any CPU is queued; false at its end.
  bool readGt() {
    TraceRecord R;
    while (Gt.next(R)) {
      ++Res.GroundTruthRecords;
      if (R.Flavour == TraceFlavour::Xen30 || eventClass(R.Event) == XT_CLASS_Hvm) {
        wrongKind(fmt::format("the ground-truth file holds a hypervisor record ({} at offset "
                              "{:#x}): it is a hypervisor's trace, not vmxsim's ground truth "
                              "(the order is: trace check HV GT)",
                              formatRecord(R, 0), R.Offset));
        return false;
      }
      GtEvent E;
      E.Rec = R;
      if (R.Event == XT_EV_GtVmExit && R.NumWords >= 7) {
        E.IsExit = true;
        E.Reason = R.Words[1];
        E.Rip = word64(R, 2);
        E.Qual = word64(R, 4);
      } else if ((R.Event == XT_EV_GtVmEntry || R.Event == XT_EV_GtVmEntryFail) &&
                 R.NumWords >= 3) {
        E.Rip = R.Event == XT_EV_GtVmEntry ? word64(R, 1) : 0;
      } else {
        continue;
      }
      cpu(R.Cpu);
      Pending[R.Cpu].push_back(E);
      return true;
    }
    return false;
  }

  bool pull(uint16_t N, GtEvent &E) {
    cpu(N);
    while (Pending[N].empty())
      if (!readGt())
        return false;
    E = Pending[N].front();
    Pending[N].pop_front();
    return true;
  }

  bool pullAny(GtEvent &E) {
    for (auto &Q : Pending)
      if (!Q.empty()) {
        E = Q.front();
        return true;
      }
    if (!readGt())
      return false;
    return pullAny(E);
  }

  std::string missing(const TraceRecord &R, const char *What) {
    std::string S = fmt::format("cpu{}: {} at offset {:#x} has no {} in the ground truth",
                                R.Cpu, formatRecord(R, 0), R.Offset, What);
    if (Gt.failed())
      S += " (ground truth: " + Gt.error().str() + ")";
    return S;
  }

  std::string versus(const TraceRecord &R, const GtEvent &E, const std::string &Why) {
    return fmt::format("cpu{}: {}: hypervisor {} at offset {:#x}; ground truth {} at "
                       "offset {:#x}",
                       R.Cpu, Why, formatRecord(R, 0), R.Offset, formatRecord(E.Rec, 0),
                       E.Rec.Offset);
  }

  void exitRecord(const TraceRecord &R, bool Wide) {
    CpuCheck &C = cpu(R.Cpu);
    GtEvent E;
    if (!pull(R.Cpu, E))
      return fail(missing(R, "VM exit"));
    const std::string Nth = fmt::format("exit {}", C.Exits + 1);
    if (!E.IsExit)
      return fail(versus(R, E, Nth + " is a VM entry in the ground truth"));
    const uint32_t Reason = R.Words[0];
    const uint64_t Rip = Wide ? word64(R, 1) : R.Words[1];
    const uint64_t GtRip = Wide ? E.Rip : uint32_t(E.Rip);
    if (Reason != E.Reason)
      return fail(versus(R, E, Nth + ": exit reason differs"));
    if (Rip != GtRip)
      return fail(versus(R, E, Nth + ": guest RIP differs"));
    if (R.Tsc < E.Rec.Tsc)
      return fail(versus(R, E, Nth + ": the hypervisor's TSC is before the VM exit"));
    C.ExitLag.add(R.Tsc - E.Rec.Tsc);
    ++C.Exits;
    LastExit[R.Cpu] = E;
  }

  /// Pairs an entry record (either flavour) with the ground truth's next event on its
  /// CPU, which must be a VM entry at or after the record's TSC; false (the check failed)
  /// otherwise.
  bool pairEntry(const TraceRecord &R, GtEvent &E) {
    CpuCheck &C = cpu(R.Cpu);
    if (!pull(R.Cpu, E)) {
      fail(missing(R, "VM entry"));
      return false;
    }
    const std::string Nth = fmt::format("entry {}", C.Entries + 1);
    if (E.IsExit) {
      fail(versus(R, E, Nth + " is a VM exit in the ground truth"));
      return false;
    }
    if (R.Tsc > E.Rec.Tsc) {
      fail(versus(R, E, Nth + ": the hypervisor's TSC is after the VM entry"));
      return false;
    }
    return true;
  }

  /// The entry is paired: its lead, and the exit it closes is over.
  void entryPaired(const TraceRecord &R, const GtEvent &E) {
    CpuCheck &C = cpu(R.Cpu);
    C.EntryLead.add(E.Rec.Tsc - R.Tsc);
    ++C.Entries;
    LastExit[R.Cpu] = GtEvent{};
  }

  void entryRecord(const TraceRecord &R) {
    GtEvent E;
    if (pairEntry(R, E))
      entryPaired(R, E);
  }

  /// A handler record whose content the exit qualification also gives.
  void handlerRecord(const TraceRecord &R) {
    CpuCheck &C = cpu(R.Cpu);
    const GtEvent &E = LastExit[R.Cpu];
    const uint32_t Basic = E.Reason & 0xffff;
    auto Check = [&](bool Good, const char *Why) {
      if (!E.IsExit)
        return fail(fmt::format("cpu{}: {} at offset {:#x} is not inside an exit", R.Cpu,
                                formatRecord(R, 0), R.Offset));
      if (!Good)
        return fail(versus(R, E, fmt::format("exit {}: {}", C.Exits, Why)));
      ++C.HandlerRecords;
    };
    switch (R.Event) {
    case XT_EV_IoportRead:
    case XT_EV_IoportWrite: {
      // Exit qualification for I/O instructions: bits 31:16 port, bit 3 direction (1 = IN).
      const bool In = R.Event == XT_EV_IoportRead;
      Check(Basic == kIoReason && R.NumWords >= 1 &&
                R.Words[0] == ((E.Qual >> 16) & 0xffff) && In == bool(E.Qual & 8),
            "port or direction differs from the exit qualification");
      break;
    }
    case XT_EV_CrRead:
    case XT_EV_CrRead64:
    case XT_EV_CrWrite:
    case XT_EV_CrWrite64: {
      // Control-register accesses: bits 3:0 CR number, bits 5:4 type (0 to CR, 1 from).
      const uint64_t Type = R.Event == XT_EV_CrRead || R.Event == XT_EV_CrRead64 ? 1 : 0;
      Check(Basic == kCrReason && R.NumWords >= 1 && R.Words[0] == (E.Qual & 15) &&
                ((E.Qual >> 4) & 3) == Type,
            "CR number or access type differs from the exit qualification");
      break;
    }
    case XT_EV_Clts:
    case XT_EV_Lmsw:
    case XT_EV_Lmsw64: {
      const uint64_t Type = R.Event == XT_EV_Clts ? 2 : 3;
      Check(Basic == kCrReason && ((E.Qual >> 4) & 3) == Type,
            "access type differs from the exit qualification");
      break;
    }
    default:
      break;
    }
  }

  void xen30Exit(const TraceRecord &R) {
    CpuCheck &C = cpu(R.Cpu);
    for (unsigned I = 0; I < XT30_ITEMS; ++I)
      if (R.Items[I])
        return fail(fmt::format("cpu{}: malformed {} at offset {:#x}: its items must be 0",
                                R.Cpu, formatRecord(R, 0), R.Offset));
    GtEvent E;
    if (!pull(R.Cpu, E))
      return fail(missing(R, "VM exit"));
    const std::string Nth = fmt::format("exit {}", C.Exits + 1);
    if (!E.IsExit)
      return fail(versus(R, E, Nth + " is a VM entry in the ground truth"));
    if (R.Tsc < E.Rec.Tsc)
      return fail(versus(R, E, Nth + ": the hypervisor's TSC is before the VM exit"));
    C.ExitLag.add(R.Tsc - E.Rec.Tsc);
    ++C.Exits;
    LastExit[R.Cpu] = E;
  }

  /// The slots of the exit before a xen-3.0 entry record against its ground truth.
  void xen30Slots(const TraceRecord &R, const GtEvent &Exit, CpuCheck &C) {
    const std::string Nth = fmt::format("exit {}", C.Exits);
    const uint64_t *S = R.Items, Q = Exit.Qual;
    if (S[0] != Exit.Reason)
      return fail(versus(R, Exit, Nth + ": the exit reason in slot 0 differs"));
    bool Compared = true, Good = true;
    switch (Exit.Reason) {
    case kIoReason:
      // Exit qualification for I/O instructions: bits 2:0 size - 1, bit 3 direction (1 =
      // IN), bits 31:16 port.
      Good = S[1] == ((Q >> 16) & 0xffff) && S[2] == ((Q >> 3) & 1) && S[3] == (Q & 7) + 1;
      break;
    case kCrReason:
      // Control-register accesses: bits 3:0 CR number, 5:4 access type, 11:8 register.
      Good = S[1] == ((Q >> 4) & 3) && S[2] == (Q & 15) && S[3] == ((Q >> 8) & 15) &&
             S[4] == Q;
      break;
    case kExceptionReason:
      Good = S[4] == Q;
      break;
    default:
      Compared = false;
    }
    if (!Good)
      return fail(versus(R, Exit, Nth + ": slots 1-4 differ from the exit qualification"));
    if (Compared)
      ++C.HandlerRecords;
  }

  void xen30Entry(const TraceRecord &R) {
    GtEvent E;
    if (!pairEntry(R, E))
      return;
    if (LastExit[R.Cpu].IsExit) {
      xen30Slots(R, LastExit[R.Cpu], cpu(R.Cpu));
      if (!Res.Ok)
        return;
    }
    entryPaired(R, E);
  }

  void xen30Record(const TraceRecord &R) {
    switch (R.Event) {
    case XT30_EV_VmxVmexit:
      return xen30Exit(R);
    case XT30_EV_VmxVmentry:
      return xen30Entry(R);
    case XT30_EV_LostRecords:
      return fail(fmt::format("cpu{}: the hypervisor lost {} records (LOST_RECORDS at "
                              "offset {:#x}); nothing after it can be paired",
                              R.Cpu, R.Items[0], R.Offset));
    default:
      return; // an id the 2006 design did not write for VMX exits: nothing to pair
    }
  }

  void hypervisorRecord(const TraceRecord &R) {
    if (eventClass(R.Event) == XT_CLASS_GroundTruth)
      return wrongKind(fmt::format("the hypervisor's trace holds a ground-truth record ({} at "
                                   "offset {:#x}): it is vmxsim's ground truth, not a "
                                   "hypervisor's trace (the order is: trace check HV GT)",
                                   formatRecord(R, 0), R.Offset));
    if (R.Flavour == TraceFlavour::Xen30)
      return xen30Record(R);
    switch (R.Event) {
    case XT_EV_VmxExit:
    case XT_EV_VmxExit64:
      if (R.NumWords != (R.Event == XT_EV_VmxExit64 ? 3 : 2) || !R.HasTsc)
        return fail(fmt::format("cpu{}: malformed {} at offset {:#x}", R.Cpu,
                                formatRecord(R, 0), R.Offset));
      return exitRecord(R, R.Event == XT_EV_VmxExit64);
    case XT_EV_VmEntry:
      if (!R.HasTsc)
        return fail(fmt::format("cpu{}: VMENTRY without TSC at offset {:#x}", R.Cpu,
                                R.Offset));
      return entryRecord(R);
    case XT_EV_LostRecords:
      return fail(fmt::format("cpu{}: the hypervisor lost {} records (LOST_RECORDS at "
                              "offset {:#x}); nothing after it can be paired",
                              R.Cpu, R.Words[0], R.Offset));
    default:
      return handlerRecord(R);
    }
  }

  TraceReader &Hv, &Gt;
  CheckResult Res;
  std::vector<CpuCheck> Cpus;
  std::vector<std::deque<GtEvent>> Pending;
  std::vector<GtEvent> LastExit;
};

std::string lagText(const LagStats &L) {
  if (!L.Count)
    return "-";
  return fmt::format("{}/{:.1f}/{}", L.Min, double(L.Total) / double(L.Count), L.Max);
}

} // namespace

CheckResult checkAgainstGroundTruth(TraceReader &Hypervisor, TraceReader &GroundTruth) {
  return Checker(Hypervisor, GroundTruth).run();
}

void printCheck(const CheckResult &R, std::FILE *Out) {
  if (R.Ok) {
    uint64_t Exits = 0, Entries = 0;
    for (const CpuCheck &C : R.Cpus) {
      Exits += C.Exits;
      Entries += C.Entries;
    }
    fmt::print(Out, "match: {} exits and {} entries on {} CPU(s) agree with the ground "
                    "truth ({} hypervisor records, {} ground-truth records)\n",
               Exits, Entries, R.Cpus.size(), R.HypervisorRecords, R.GroundTruthRecords);
  } else if (!R.ReadError && !R.WrongKind) {
    fmt::print(Out, "mismatch: {}\n", R.Problem);
  }
  for (const CpuCheck &C : R.Cpus)
    fmt::print(Out,
               "cpu{}: {} exits, {} entries, {} handler records checked; cycles from VM "
               "exit to VMX_EXIT min/mean/max {}; from VMENTRY to VM entry {}\n",
               C.Cpu, C.Exits, C.Entries, C.HandlerRecords, lagText(C.ExitLag),
               lagText(C.EntryLead));
}

} // namespace vmxsim::trace
