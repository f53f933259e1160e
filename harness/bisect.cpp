#include "harness/bisect.h"

#include "cpu/vmx/vmcs.h"
#include "harness/insn_trace.h"
#include "trace/diff.h"
#include "trace/dump.h"
#include "trace/events.h"
#include "trace/gt_records.h"
#include "trace/reader.h"
#include "trace/stream_import.h"
#include "trace/writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <optional>
#include <spawn.h>
#include <sys/wait.h>
#include <tuple>

extern char **environ;

namespace vmxsim {

namespace {

/// A snapshot of a run side: after its Exits-th VM exit, with each CPU's clock then.
struct Snap {
  uint64_t Exits = 0;
  std::vector<uint64_t> Cycles;
  std::string Path;
};

/// The last N instructions of one CPU, as the instruction tracer prints them, in a ring;
/// forwards every call to the CPU's previous observer.
class LastInsns final : public CpuObserver {
public:
  LastInsns(unsigned N, CpuObserver *Inner) : N(N), Inner(Inner) {
    (void)Sink.open(OutputSpec::discard());
    Sink.setTap(&LastInsns::byte, this);
    Tracer = std::make_unique<InsnTracer>(Sink);
  }
  void beforeInsn(const Cpu &C, const DecodedInsn &I) override {
    Tracer->beforeInsn(C, I);
    if (Inner)
      Inner->beforeInsn(C, I);
  }
  void afterInsn(const Cpu &C, const DecodedInsn &I) override {
    Tracer->afterInsn(C, I);
    if (Inner)
      Inner->afterInsn(C, I);
  }
  void onException(const Cpu &C, const PendingEvent &E) override {
    Tracer->onException(C, E);
    if (Inner)
      Inner->onException(C, E);
  }
  CpuObserver *inner() const { return Inner; }
  const std::deque<std::string> &lines() const { return Ring; }

private:
  static void byte(void *Self, uint8_t B) {
    LastInsns &L = *static_cast<LastInsns *>(Self);
    if (B != '\n') {
      L.Cur += char(B);
      return;
    }
    L.Ring.push_back(std::move(L.Cur));
    L.Cur.clear();
    if (L.Ring.size() > L.N)
      L.Ring.pop_front();
  }
  unsigned N;
  CpuObserver *Inner;
  OutputSink Sink;
  std::unique_ptr<InsnTracer> Tracer;
  std::deque<std::string> Ring;
  std::string Cur;
};

/// After a pass over a trace: false, with the read error in Why, when it ended at one.
bool readToEnd(const trace::TraceReader &R, std::string &Why) {
  if (!R.failed())
    return true;
  Why = R.error().str();
  return false;
}

/// What one side is, once it has run.
struct Side {
  const BisectSide *S = nullptr;
  std::string Trace; ///< the file compared (a ground truth, or B's hypervisor trace)
  /// Against a hypervisor trace: A's own (its --xentrace file, or its COM1 output's
  /// trace stream imported).
  std::string HvTrace, Com1;
  std::vector<Snap> Snaps;
  RunResult End;
  /// From the scan of its trace: its exit K of the divergence's CPU (if it has one), the
  /// CPU's exits before each snapshot, and how many exits the CPU made in all.
  std::optional<trace::TraceRecord> Exit;
  uint64_t ExitDelta = 0, ExitsOnCpu = 0;
  std::vector<uint64_t> BeforeSnap;
  /// From the re-run.
  bool ReRan = false, AtExit = false;
  std::string How;
  std::vector<std::pair<std::string, uint64_t>> Regs;
  std::vector<std::pair<std::string, uint64_t>> Vmcs; ///< every readable field
  std::deque<std::string> Insns;
};

std::string label(const Side &S) { return S.S->Label; }

/// The side's machine with bisect's outputs. HvStream: COM1 goes to DIR/TAG.com1, where
/// the hypervisor core streams its trace when the run has no --xentrace drain.
MachineConfig sideConfig(const BisectSide &S, const std::string &Dir, const std::string &Tag,
                         bool HvStream = false) {
  MachineConfig Cfg = S.Cfg;
  Cfg.Serial = Cfg.Serial2 = Cfg.Debugcon = OutputSpec::discard();
  if (HvStream && Cfg.XentraceFile.empty())
    Cfg.Serial = OutputSpec::file(fmt::format("{}/{}.com1", Dir, Tag));
  Cfg.TraceInsns.reset();
  Cfg.GroundTruthFile = fmt::format("{}/{}.gt", Dir, Tag);
  if (!Cfg.XentraceFile.empty()) // the drain ports are guest-visible: keep it, elsewhere
    Cfg.XentraceFile = fmt::format("{}/{}.xt", Dir, Tag);
  if (!Cfg.XenTraceFile.empty()) // Xen's drain writes guest memory too: the same
    Cfg.XenTraceFile = fmt::format("{}/{}.xen.xt", Dir, Tag);
  Cfg.StopFlag = nullptr;
  return Cfg;
}

Error sideError(const Side &S, Error E) {
  E.Message = fmt::format("{}: {}", label(S), E.Path.empty() ? E.Message : E.str());
  E.Path.clear();
  return E;
}

Error runChild(Side &S, const std::string &Dir) {
  const BisectSide &B = *S.S;
  S.Trace = fmt::format("{}/{}.gt", Dir, B.Label);
  std::vector<std::string> Args = {B.Binary, "run"};
  Args.insert(Args.end(), B.BinaryArgs.begin(), B.BinaryArgs.end());
  for (const char *A : {"--trace-ground-truth", "", "-q", "--serial", "none", "--debugcon", "none"})
    Args.push_back(*A ? A : S.Trace);
  std::vector<char *> Argv;
  for (std::string &A : Args)
    Argv.push_back(A.data());
  Argv.push_back(nullptr);
  pid_t Pid;
  const int Rc = ::posix_spawn(&Pid, B.Binary.c_str(), nullptr, nullptr, Argv.data(), environ);
  if (Rc != 0)
    return Error(ErrorCode::HostFailure,
                 fmt::format("{}: cannot run {}: {}", B.Label, B.Binary, std::strerror(Rc)));
  int St = 0;
  while (::waitpid(Pid, &St, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(St))
    return Error(ErrorCode::HostFailure,
                 fmt::format("{}: {} ended by signal {}", B.Label, B.Binary, WTERMSIG(St)));
  if (!std::filesystem::exists(S.Trace))
    return Error(ErrorCode::HostFailure,
                 fmt::format("{}: {} exited with {} and wrote no ground truth", B.Label,
                             B.Binary, WEXITSTATUS(St)));
  return Error::success();
}

/// A's hypervisor trace once its run ended: the --xentrace file it drained into, else the
/// trace stream the core wrote on COM1 (tstream=auto with no drain, as on another
/// machine) imported as `vmxsim trace import` does (trace/stream_import.h).
Error importHvStream(Side &S, const MachineConfig &Cfg, const std::string &Dir) {
  const std::string &L = S.S->Label;
  if (!Cfg.XentraceFile.empty()) {
    S.HvTrace = Cfg.XentraceFile;
    return Error::success();
  }
  S.Com1 = Cfg.Serial.Path;
  S.HvTrace = fmt::format("{}/{}.xt", Dir, L);
  std::error_code Ec;
  const uint64_t Size = std::filesystem::file_size(S.Com1, Ec);
  std::string Text;
  if (!Ec) {
    Text.resize(size_t(Size));
    std::FILE *F = std::fopen(S.Com1.c_str(), "rb");
    const bool Ok = F && std::fread(Text.data(), 1, Text.size(), F) == Text.size();
    if (F)
      std::fclose(F);
    if (!Ok)
      Ec = std::error_code(errno ? errno : EIO, std::generic_category());
  }
  if (Ec)
    return Error(ErrorCode::HostFailure,
                 fmt::format("{}: {}: cannot read: {}", L, S.Com1, Ec.message()));
  trace::MemoryOutput Mem;
  const trace::StreamImportResult R = trace::importStream(Text, Mem);
  if (R.Frames == 0)
    return Error(ErrorCode::HostFailure,
                 fmt::format("{}: its run wrote no hypervisor trace to compare with B's: give "
                             "it --xentrace FILE, or tstream=auto on the image's command line "
                             "(the core then streams its trace through COM1)",
                             L));
  if (!R.Problems.empty())
    return Error(ErrorCode::HostFailure,
                 fmt::format("{}: its COM1 trace stream: {}", L, R.Problems.front()));
  std::FILE *F = std::fopen(S.HvTrace.c_str(), "wb");
  const bool Ok = F && std::fwrite(Mem.Bytes.data(), 1, Mem.Bytes.size(), F) == Mem.Bytes.size();
  if ((F && std::fclose(F) != 0) || !Ok)
    return Error(ErrorCode::HostFailure,
                 fmt::format("{}: {}: cannot write: {}", L, S.HvTrace, std::strerror(errno)));
  return Error::success();
}

/// Step 1: the side's trace (and its snapshots). HvMode: B is a hypervisor trace, so a
/// run side also produces its own (importHvStream).
Error runSide(Side &S, const BisectOptions &O, bool HvMode) {
  const BisectSide &B = *S.S;
  if (!B.TraceFile.empty()) {
    S.Trace = B.TraceFile;
    return Error::success();
  }
  if (!B.Binary.empty())
    return runChild(S, O.WorkDir);
  const MachineConfig Cfg = sideConfig(B, O.WorkDir, B.Label, HvMode);
  S.Trace = Cfg.GroundTruthFile;
  Error E;
  std::unique_ptr<Machine> M = Machine::create(Cfg, E);
  if (!M)
    return sideError(S, E);
  if (!M->replayedGdbStops().empty())
    return Error(ErrorCode::BadInputLog,
                 fmt::format("{}: its input log holds gdb's writes, which bisect does not "
                             "replay (`vmxsim run --replay-input` does)",
                             B.Label));
  ExitRun Run(*M, B.Pokes);
  Run.EveryExits = O.SnapshotEveryExits;
  Run.AtEvery = [&](const RunResult &) -> Error {
    Snap P;
    P.Exits = Run.exits();
    P.Path = fmt::format("{}/{}-{}.snap", O.WorkDir, B.Label, P.Exits);
    for (unsigned I = 0; I < M->numCpus(); ++I)
      P.Cycles.push_back(M->cpu(I).Cycles);
    if (Error E = M->saveSnapshot(P.Path))
      return E;
    S.Snaps.push_back(std::move(P));
    return Error::success();
  };
  ErrorOr<RunResult> R = Run.run();
  if (!R)
    return sideError(S, R.error());
  S.End = *R;
  for (const std::string &P : M->outputProblems())
    return Error(ErrorCode::HostFailure, fmt::format("{}: {}", B.Label, P));
  if (const std::string P = M->inputLogProblem(); !P.empty())
    return Error(ErrorCode::InputLogMismatch, fmt::format("{}: {}", B.Label, P));
  if (HvMode) {
    M.reset(); // its outputs closed and complete
    return importHvStream(S, Cfg, O.WorkDir);
  }
  return Error::success();
}

/// Step 3's inputs: one pass over the side's trace.
bool scanSide(Side &S, unsigned Cpu, uint64_t K, std::string &Why) {
  trace::TraceReader R;
  if (!R.open(S.Trace, Why))
    return false;
  S.BeforeSnap.assign(S.Snaps.size(), 0);
  uint64_t PrevTsc = 0;
  while (const trace::TraceRecord *Rec = R.nextRecord()) {
    if (Rec->Cpu != Cpu)
      continue;
    if (trace::isGtExit(Rec->Event)) {
      if (++S.ExitsOnCpu == K) {
        S.Exit = *Rec;
        S.ExitDelta = Rec->Tsc - PrevTsc;
      }
      for (size_t J = 0; J < S.Snaps.size(); ++J)
        if (Cpu < S.Snaps[J].Cycles.size() && Rec->Tsc < S.Snaps[J].Cycles[Cpu])
          ++S.BeforeSnap[J];
    }
    if (Rec->HasTsc)
      PrevTsc = Rec->Tsc;
  }
  return readToEnd(R, Why);
}

/// The records a VM exit writes right after its GT_EXIT (or GT_VMEXIT; trace/events.def): they
/// describe that exit.
bool isExitDetail(uint32_t Id) {
  using trace::Event;
  for (Event E : {Event::GtVmExitEvent, Event::GtVmExitAddr, Event::GtVmExitRegs, Event::GtGpr,
                  Event::GtActivity})
    if (Id == uint32_t(E))
      return true;
  return false;
}

/// The first diverging VM exit of Cpu, from its Index-th record (0-based, LOST_RECORDS not
/// counted, as trace diff counts): the exit that record is or describes; else (a record
/// of the handling or of the guest after exit k, or before any exit) exit k + 1, the
/// first exit that comes after something that differs.
bool exitOfRecord(const std::string &Path, unsigned Cpu, uint64_t Index, uint64_t &K,
                  std::string &Why) {
  trace::TraceReader R;
  if (!R.open(Path, Why))
    return false;
  uint64_t N = 0, Exits = 0;
  bool InExit = false;
  K = 0;
  while (const trace::TraceRecord *Rec = R.nextRecord()) {
    if (Rec->Cpu != Cpu || Rec->Event == uint32_t(trace::Event::LostRecords))
      continue;
    const bool IsExit = trace::isGtExit(Rec->Event);
    InExit = IsExit || (InExit && isExitDetail(Rec->Event));
    Exits += IsExit;
    if (N++ == Index) {
      K = InExit ? Exits : Exits + 1;
      return true;
    }
  }
  if (!readToEnd(R, Why))
    return false;
  K = Exits + 1; // the divergence is past this file's last record of the CPU
  return true;
}

/// What a trace file given as side B holds.
enum class TraceKind : uint8_t { GroundTruth, Hypervisor };

/// A hypervisor's exit record: VMX_EXIT / VMX_EXIT64 (modern), VMX_VMEXIT (xen-3.0).
bool isHvExit(const trace::TraceRecord &R) {
  if (R.Flavour == trace::TraceFlavour::Xen30)
    return R.Event == XT30_EV_VmxVmexit;
  return R.Event == XT_EV_VmxExit64 || R.Event == XT_EV_VmxExit;
}

/// Reads the whole of Path (so that a damaged file is refused before anything runs) and
/// tells its kind: vmxsim's ground truth (records of its class), or a hypervisor's trace
/// (exit records of the HVM class, either flavour). Anything else, one line in Why.
bool traceKind(const std::string &Path, TraceKind &K, std::string &Why) {
  trace::TraceReader R;
  if (!R.open(Path, Why))
    return false;
  uint64_t N = 0;
  bool Gt = false, Hv = false, Kvm = false;
  while (const trace::TraceRecord *Rec = R.nextRecord()) {
    ++N;
    const uint32_t Class = trace::eventClass(Rec->Event);
    Gt |= Rec->Flavour == trace::TraceFlavour::Modern &&
          Class == trace::eventClass(XT_EV_GtExit);
    Kvm |= Rec->Flavour == trace::TraceFlavour::Modern &&
           Class == trace::eventClass(XT_EV_KvmFtrace);
    Hv |= isHvExit(*Rec);
  }
  if (R.failed()) {
    Why = fmt::format("{}: {}", Path, R.error().str());
    return false;
  }
  if (Gt) {
    K = TraceKind::GroundTruth;
    return true;
  }
  if (Kvm) {
    Why = fmt::format("{}: KVM's events imported from ftrace (trace import --ftrace): bisect "
                      "takes vmxsim's ground truth or the trace of a hypervisor the run "
                      "side drains (--xentrace) or streams (tstream=auto)",
                      Path);
    return false;
  }
  if (Hv) {
    K = TraceKind::Hypervisor;
    return true;
  }
  Why = N ? fmt::format("{}: {} records and no VM exit among them: neither vmxsim's ground "
                        "truth nor a hypervisor's trace",
                        Path, N)
          : fmt::format("{}: an empty trace (no records)", Path);
  return false;
}

/// In a hypervisor trace: the exit of Cpu that its Index-th record (counted as trace diff
/// counts them: LOST_RECORDS not, under IgnoreTsc) belongs to, counted from 1: the
/// hypervisor writes an exit's handler records and the VMENTRY that ends its handling
/// after the exit record, so a record belongs to the last exit record at or before it
/// (the first exit when it comes before any). Past the file's last record of the CPU:
/// the exit after its last.
bool hvExitOfRecord(const std::string &Path, unsigned Cpu, uint64_t Index, bool IgnoreTsc,
                    uint64_t &K, std::string &Why) {
  trace::TraceReader R;
  if (!R.open(Path, Why))
    return false;
  uint64_t N = 0, Exits = 0;
  while (const trace::TraceRecord *Rec = R.nextRecord()) {
    if (Rec->Cpu != Cpu || (IgnoreTsc && Rec->Event == XT_EV_LostRecords))
      continue;
    Exits += isHvExit(*Rec);
    if (N++ == Index) {
      K = std::max<uint64_t>(Exits, 1);
      return true;
    }
  }
  if (!readToEnd(R, Why))
    return false;
  K = Exits + 1;
  return true;
}

/// The records of Cpu's exit K in a hypervisor trace: its exit record and what follows it
/// up to the next exit record (at most Max), each with its TSC delta; Lost: the CPU had
/// LOST_RECORDS before it (then exit K of the trace need not be exit K of the CPU).
struct HvExitRecords {
  std::vector<trace::DiffRecord> Recs;
  uint64_t Exits = 0; ///< the CPU's exit records in the file
  bool Lost = false, More = false;
};

bool hvExitRecords(const std::string &Path, unsigned Cpu, uint64_t K, size_t Max,
                   HvExitRecords &Out, std::string &Why) {
  trace::TraceReader R;
  if (!R.open(Path, Why))
    return false;
  uint64_t PrevTsc = 0;
  while (const trace::TraceRecord *Rec = R.nextRecord()) {
    if (Rec->Cpu != Cpu)
      continue;
    const bool Exit = isHvExit(*Rec);
    Out.Exits += Exit;
    if (Out.Exits < K)
      Out.Lost |= Rec->Event == XT_EV_LostRecords;
    else if (Out.Exits == K) {
      if (Out.Recs.size() < Max)
        Out.Recs.push_back({*Rec, Rec->HasTsc ? Rec->Tsc - PrevTsc : 0});
      else
        Out.More = true;
    }
    if (Rec->HasTsc)
      PrevTsc = Rec->Tsc;
  }
  return readToEnd(R, Why);
}

/// Step 3: the side re-run to its exit K of Cpu (or to its end, when it has no such
/// exit), and its state there.
Error reRun(Side &S, const BisectOptions &O, unsigned Cpu, uint64_t K) {
  const BisectSide &B = *S.S;
  // The last snapshot before the exit (any, when the side never makes it).
  int J = -1;
  for (size_t I = 0; I < S.Snaps.size(); ++I)
    if (!S.Exit || S.BeforeSnap[I] < K)
      J = int(I);
  const MachineConfig Cfg = sideConfig(B, O.WorkDir, B.Label + "-rerun", !S.HvTrace.empty());
  Error E;
  std::unique_ptr<Machine> M = Machine::create(Cfg, E);
  if (!M)
    return sideError(S, E);
  if (J >= 0)
    if (Error E = M->restoreSnapshot(S.Snaps[size_t(J)].Path))
      return sideError(S, E);
  if (Cpu >= M->numCpus())
    return Error(ErrorCode::NoSuchCpu,
                 fmt::format("{}: the divergence is on CPU {}, this side has {} CPUs",
                             label(S), Cpu, M->numCpus()));
  ExitRun Run(*M, B.Pokes, J >= 0 ? S.Snaps[size_t(J)].Exits : 0);
  LastInsns Ring(O.LastInsns, M->cpu(Cpu).Observer);
  M->cpu(Cpu).Observer = &Ring;
  std::vector<StopWhen> Until;
  if (S.Exit)
    Until.push_back(StopWhen::vmExit().onCpu(Cpu).nth(K - (J >= 0 ? S.BeforeSnap[size_t(J)] : 0)));
  ErrorOr<RunResult> R = Run.run(Until);
  M->cpu(Cpu).Observer = Ring.inner();
  if (!R)
    return sideError(S, R.error());
  S.ReRan = true;
  S.AtExit = S.Exit && R->Reason == RunReason::Stopped;
  const std::string From =
      J >= 0 ? fmt::format("snapshot {} (after VM exit {} of all CPUs)",
                           std::filesystem::path(S.Snaps[size_t(J)].Path).filename().string(),
                           S.Snaps[size_t(J)].Exits)
             : std::string("the start");
  S.How = S.AtExit ? fmt::format("re-run from {} to VM exit {} of CPU {}", From, K, Cpu)
                   : fmt::format("re-run from {} to its end: {}", From, R->describe());
  S.Insns = Ring.lines();
  for (const VmcsFieldInfo &F : kVmcsFields)
    if (ErrorOr<uint64_t> V = M->readVmcs(Cpu, F.Name))
      S.Vmcs.emplace_back(F.Name, *V);
  // The guest's registers at the exit: the general registers are still the guest's
  // (SDM Vol. 3C, "Loading Host State" loads only RSP, RIP and RFLAGS of them); the rest
  // from the guest-state area the exit saved.
  for (const char *Name : {"rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10",
                           "r11", "r12", "r13", "r14", "r15"})
    if (ErrorOr<uint64_t> V = M->readRegister(Cpu, Name))
      S.Regs.emplace_back(Name, *V);
  const std::pair<const char *, const char *> Guest[] = {
      {"rsp", "GuestRsp"}, {"rip", "GuestRip"}, {"rflags", "GuestRflags"},
      {"cr0", "GuestCr0"}, {"cr3", "GuestCr3"}, {"cr4", "GuestCr4"}};
  for (auto [Reg, Field] : Guest) {
    ErrorOr<uint64_t> V = S.AtExit ? M->readVmcs(Cpu, Field) : M->readRegister(Cpu, Reg);
    if (V)
      S.Regs.emplace_back(Reg, *V);
  }
  if (S.AtExit && S.Exit) {
    // The run control's stop and the trace agree on which exit this is.
    ErrorOr<uint64_t> Reason = M->readVmcs(Cpu, "ExitReason");
    ErrorOr<uint64_t> Rip = M->readVmcs(Cpu, "GuestRip");
    trace::GtExitFields X;
    if (!trace::gtExitOf(*S.Exit, X) || !Reason || !Rip || uint32_t(*Reason) != X.Reason || *Rip != X.Rip)
      S.How += " (warning: the re-run's exit differs from the trace's: the run is not "
               "deterministic?)";
  }
  return Error::success();
}

std::string value(const std::vector<std::pair<std::string, uint64_t>> &L, const std::string &N,
                  bool &Have, uint64_t &V) {
  for (const auto &[Name, Val] : L)
    if (Name == N) {
      Have = true;
      V = Val;
      return fmt::format("{:#x}", Val);
    }
  Have = false;
  return "-";
}

/// The one error line of the command; its status.
int failLine(std::FILE *Err, const std::string &Msg) {
  std::fprintf(Err, "vmxsim: error: %s\n", Msg.c_str());
  return kExitUsage;
}

/// Both sides' first differing records (or how many the side that ran out has).
void printDivergingRecords(const Side &A, const Side &B, const trace::RecordDivergence &F,
                           std::FILE *Out) {
  auto line = [&](const Side &S, bool Have, const trace::DiffRecord &R, uint64_t Count) {
    if (Have)
      return trace::formatRecord(R.Rec, R.Delta);
    return fmt::format("(none: {} has {} records of CPU {})", label(S), Count, F.Cpu);
  };
  std::fprintf(Out, "  %s record: %s\n", label(A).c_str(),
               line(A, F.HaveA, F.A, F.CountA).c_str());
  std::fprintf(Out, "  %s record: %s\n", label(B).c_str(),
               line(B, F.HaveB, F.B, F.CountB).c_str());
}

/// Step 2: PathA (side A's trace) against PathB as trace diff compares them; false with
/// one line in Why when one cannot be read to its end.
bool diffSides(const Side &A, const std::string &PathA, const Side &B, const std::string &PathB,
               bool IgnoreTsc, trace::RecordDiff &D, std::string &Why) {
  trace::TraceReader RA, RB;
  for (auto [S, R, P] : {std::tuple{&A, &RA, &PathA}, std::tuple{&B, &RB, &PathB}})
    if (!R->open(*P, Why)) {
      Why = fmt::format("{}: {}", label(*S), Why);
      return false;
    }
  trace::DiffOptions DO;
  DO.IgnoreTsc = IgnoreTsc;
  DO.Context = 0;
  D = trace::diffRecords(RA, RB, DO);
  if (D.FailedA || D.FailedB) {
    Why = D.FailedA ? fmt::format("{}: {}: {}", label(A), PathA, D.ErrorA.str())
                    : fmt::format("{}: {}: {}", label(B), PathB, D.ErrorB.str());
    return false;
  }
  return true;
}

/// "bisect: no divergence: [What]A and B agree on all N records"; status 0.
int noDivergence(const Side &A, const Side &B, const trace::RecordDiff &D,
                 const BisectOptions &O, const char *What, std::FILE *Out) {
  std::fprintf(Out, "bisect: no divergence: %s%s and %s agree on all %llu records%s\n", What,
               label(A).c_str(), label(B).c_str(), (unsigned long long)D.RecordsA,
               O.IgnoreTsc ? " (TSCs not compared)" : "");
  return 0;
}

/// NotRun: what a side that was not re-run here is (its state is unknown).
void printState(const Side &A, const Side &B, unsigned Cpu, uint64_t K, std::FILE *Out,
                const std::string &NotRun = "a trace, not a run here: only its records are "
                                            "known") {
  for (const Side *S : {&A, &B}) {
    if (S->ReRan)
      std::fprintf(Out, "%s: %s\n", label(*S).c_str(), S->How.c_str());
    else
      std::fprintf(Out, "%s: %s\n", label(*S).c_str(), NotRun.c_str());
  }
  auto where = [&](const Side &S) {
    return !S.ReRan   ? std::string("unknown")
           : S.AtExit ? fmt::format("the guest's at VM exit {}", K)
                      : std::string("where its run ended");
  };
  std::fprintf(Out, "registers of CPU %u (%s: %s; %s: %s; * differs):\n", Cpu,
               label(A).c_str(), where(A).c_str(), label(B).c_str(), where(B).c_str());
  const Side &Names = A.ReRan ? A : B;
  for (const auto &[Name, Unused] : Names.Regs) {
    (void)Unused;
    bool HaveA, HaveB;
    uint64_t VA = 0, VB = 0;
    const std::string SA = value(A.Regs, Name, HaveA, VA), SB = value(B.Regs, Name, HaveB, VB);
    std::fprintf(Out, "  %-8s %-20s %-20s%s\n", Name.c_str(), SA.c_str(), SB.c_str(),
                 HaveA && HaveB && VA != VB ? " *" : "");
  }
  if (A.ReRan != B.ReRan) {
    // One machine only: its whole current VMCS (the other side's is unknown).
    const Side &R = A.ReRan ? A : B;
    if (R.Vmcs.empty())
      std::fprintf(Out, "VMCS fields: %s has no current VMCS on CPU %u\n", label(R).c_str(),
                   Cpu);
    else
      std::fprintf(Out, "VMCS fields of %s (CPU %u's current VMCS; %s's are unknown):\n",
                   label(R).c_str(), Cpu, label(A.ReRan ? B : A).c_str());
    for (const auto &[Name, V] : R.Vmcs)
      std::fprintf(Out, "  %-40s %s\n", Name.c_str(), fmt::format("{:#x}", V).c_str());
  } else if (A.ReRan && B.ReRan && (A.Vmcs.empty() || B.Vmcs.empty())) {
    std::fprintf(Out, "VMCS fields: not compared (%s has no current VMCS on CPU %u)\n",
                 label(A.Vmcs.empty() ? A : B).c_str(), Cpu);
  } else if (A.ReRan && B.ReRan) {
    std::fprintf(Out, "VMCS fields that differ (CPU %u's current VMCS):\n", Cpu);
    unsigned N = 0;
    for (const VmcsFieldInfo &F : kVmcsFields) {
      bool HaveA, HaveB;
      uint64_t VA = 0, VB = 0;
      const std::string SA = value(A.Vmcs, F.Name, HaveA, VA),
                        SB = value(B.Vmcs, F.Name, HaveB, VB);
      if (HaveA != HaveB || VA != VB) {
        std::fprintf(Out, "  %-40s %-20s %s\n", F.Name, SA.c_str(), SB.c_str());
        ++N;
      }
    }
    if (!N)
      std::fprintf(Out, "  (none)\n");
  }
  std::fprintf(Out, "last instructions of CPU %u:\n", Cpu);
  for (const Side *S : {&A, &B}) {
    if (!S->ReRan)
      continue;
    std::fprintf(Out, "  %s:\n", label(*S).c_str());
    for (const std::string &L : S->Insns)
      std::fprintf(Out, "    %s\n", L.c_str());
  }
}

/// B is a hypervisor's trace (from another machine: `trace import` of its console, or a
/// run's --xentrace): compared with A's hypervisor trace as `trace diff` compares; A is
/// re-run to the exit of the first difference through its ground truth.
int bisectHypervisorTraces(Side &A, Side &B, const BisectOptions &O, std::FILE *Out,
                           std::FILE *Err) {
  auto fail = [Err](const std::string &Msg) { return failLine(Err, Msg); };
  std::string Why;
  trace::RecordDiff D;
  if (!diffSides(A, A.HvTrace, B, B.Trace, O.IgnoreTsc, D, Why))
    return fail(Why);
  if (!D.Diverged)
    return noDivergence(A, B, D, O, "the hypervisor traces of ", Out);
  const trace::RecordDivergence &F = D.First;
  const unsigned Cpu = F.Cpu;
  uint64_t K = 0;
  if (!hvExitOfRecord(F.HaveA ? A.HvTrace : B.Trace, Cpu, F.Index, O.IgnoreTsc, K, Why))
    return fail(Why);
  HvExitRecords HA, HB;
  constexpr size_t kMaxShown = 16;
  if (!hvExitRecords(A.HvTrace, Cpu, K, kMaxShown, HA, Why))
    return fail(fmt::format("{}: {}", label(A), Why));
  if (!hvExitRecords(B.Trace, Cpu, K, kMaxShown, HB, Why))
    return fail(fmt::format("{}: {}", label(B), Why));
  if (!scanSide(A, Cpu, K, Why))
    return fail(fmt::format("{}: {}", label(A), Why));

  std::fprintf(Out,
               "bisect: the hypervisor traces of %s and %s diverge at VM exit %llu of CPU %u "
               "(the first difference: record %llu of CPU %u, counted from 0%s)\n",
               label(A).c_str(), label(B).c_str(), (unsigned long long)K, Cpu,
               (unsigned long long)F.Index, Cpu, O.IgnoreTsc ? "; TSCs not compared" : "");
  printDivergingRecords(A, B, F, Out);
  for (auto [S, H] : {std::pair<const Side *, const HvExitRecords *>{&A, &HA}, {&B, &HB}}) {
    if (H->Recs.empty()) {
      std::fprintf(Out, "  %s exit %llu: (none: its trace has %llu exits of CPU %u)\n",
                   label(*S).c_str(), (unsigned long long)K, (unsigned long long)H->Exits, Cpu);
      continue;
    }
    std::fprintf(Out, "  %s exit %llu%s:\n", label(*S).c_str(), (unsigned long long)K,
                 H->Lost ? " (records of this CPU were lost before it: it may be another "
                           "exit of the CPU)"
                         : "");
    for (const trace::DiffRecord &R : H->Recs)
      std::fprintf(Out, "    %s\n", trace::formatRecord(R.Rec, R.Delta).c_str());
    if (H->More)
      std::fprintf(Out, "    ...\n");
  }
  std::fprintf(Out, "  %s exit %llu in its ground truth: %s\n", label(A).c_str(),
               (unsigned long long)K,
               A.Exit ? trace::formatRecord(*A.Exit, A.ExitDelta).c_str()
                      : fmt::format("(none: CPU {} made {} VM exits)", Cpu, A.ExitsOnCpu)
                            .c_str());
  // The hypervisor's exit record names the reason the processor gave it (modern flavour).
  trace::GtExitFields AX;
  if (A.Exit && trace::gtExitOf(*A.Exit, AX) && !HA.Recs.empty() &&
      HA.Recs.front().Rec.Flavour == trace::TraceFlavour::Modern &&
      HA.Recs.front().Rec.Words[0] != AX.Reason)
    std::fprintf(Out, "  warning: %s's hypervisor trace and its ground truth disagree on this "
                      "exit's reason: its trace lost records?\n",
                 label(A).c_str());
  if (Error E = reRun(A, O, Cpu, K))
    return fail(E.str());
  printState(A, B, Cpu, K, Out,
             fmt::format("a hypervisor trace ({}), from another machine or run: its machine "
                         "state is unknown, only its records are known",
                         B.Trace));
  return 1;
}

/// A work folder of our own under TMPDIR (or /tmp).
bool makeWorkDir(std::string &Dir, std::string &Why) {
  const char *T = std::getenv("TMPDIR");
  std::string Tmpl = std::string(T && *T ? T : "/tmp") + "/vmxsim-bisect-XXXXXX";
  if (!::mkdtemp(Tmpl.data())) {
    Why = fmt::format("cannot create a work folder: {}", std::strerror(errno));
    return false;
  }
  Dir = Tmpl;
  return true;
}

} // namespace

int bisectCommand(const BisectSide &BA, const BisectSide &BB, const BisectOptions &Opt,
                  std::FILE *Out, std::FILE *Err) {
  auto fail = [Err](const std::string &Msg) { return failLine(Err, Msg); };
  BisectOptions O = Opt;
  const bool OwnDir = O.WorkDir.empty();
  std::string Why;
  if (OwnDir && !makeWorkDir(O.WorkDir, Why))
    return fail(Why);
  if (OwnDir && O.Keep)
    std::fprintf(Err, "vmxsim: bisect: work folder %s (kept)\n", O.WorkDir.c_str());
  struct Cleanup {
    const BisectOptions &O;
    bool Own;
    ~Cleanup() {
      std::error_code Ec;
      if (Own && !O.Keep)
        std::filesystem::remove_all(O.WorkDir, Ec);
    }
  } Clean{O, OwnDir};
  if (!OwnDir) {
    std::error_code Ec;
    std::filesystem::create_directories(O.WorkDir, Ec);
    if (Ec)
      return fail(fmt::format("{}: cannot create: {}", O.WorkDir, Ec.message()));
  }

  // A trace as side B: its kind decides what is compared; a damaged one is refused now.
  TraceKind Kind = TraceKind::GroundTruth;
  if (!BB.TraceFile.empty() && !traceKind(BB.TraceFile, Kind, Why))
    return fail(fmt::format("{}: {}", BB.Label, Why));
  const bool HvMode = Kind == TraceKind::Hypervisor;

  Side A, B;
  A.S = &BA;
  B.S = &BB;
  for (Side *S : {&A, &B})
    if (Error E = runSide(*S, O, HvMode))
      return fail(E.str());
  if (HvMode)
    return bisectHypervisorTraces(A, B, O, Out, Err);

  trace::RecordDiff D;
  if (!diffSides(A, A.Trace, B, B.Trace, O.IgnoreTsc, D, Why))
    return fail(Why);
  if (!D.Diverged)
    return noDivergence(A, B, D, O, "", Out);

  const trace::RecordDivergence &F = D.First;
  const unsigned Cpu = F.Cpu;
  uint64_t K = 0;
  if (!exitOfRecord(F.HaveA ? A.Trace : B.Trace, Cpu, F.Index, K, Why))
    return fail(Why);
  for (Side *S : {&A, &B})
    if (!scanSide(*S, Cpu, K, Why))
      return fail(fmt::format("{}: {}", label(*S), Why));

  std::fprintf(Out,
               "bisect: %s and %s diverge at VM exit %llu of CPU %u (the first difference: "
               "record %llu of CPU %u, counted from 0)\n",
               label(A).c_str(), label(B).c_str(), (unsigned long long)K, Cpu,
               (unsigned long long)F.Index, Cpu);
  printDivergingRecords(A, B, F, Out);
  for (const Side *S : {&A, &B})
    std::fprintf(Out, "  %s exit %llu: %s\n", label(*S).c_str(), (unsigned long long)K,
                 S->Exit ? trace::formatRecord(*S->Exit, S->ExitDelta).c_str()
                         : fmt::format("(none: CPU {} made {} VM exits)", Cpu, S->ExitsOnCpu)
                               .c_str());
  for (Side *S : {&A, &B})
    if (S->S->isRun())
      if (Error E = reRun(*S, O, Cpu, K))
        return fail(E.str());
  printState(A, B, Cpu, K, Out);
  return 1;
}

} // namespace vmxsim
