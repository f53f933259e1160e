// The vmxsim command: a thin client of libvmxsim (harness/machine.h).
//
//   vmxsim run [--kernel] IMAGE [--initrd "M1 args,M2"] [--append STR] [-m SIZE]
//              [--smp N] [--max-insns N] [--serial SPEC] [--debugcon SPEC]
//              [--serial-in FILE|-] [--serial2 SPEC] [--serial2-in FILE|-]
//              [--trace-insns FILE] [--flat ADDR [--entry-mode real|prot32|long]]
//              [--rtc-base YYYY-MM-DDTHH:MM:SS|SECONDS] [-q]
//
// Option names follow QEMU's where QEMU has one, so scripts port by changing the program
// name. Exit status: the guest's isa-debug-exit status ((V << 1) | 1, odd), 0 for the
// power-off port or a reset request (port 0x92, 0xcf9 or the i8042: a reset always ends
// the run, as QEMU's -no-reboot, since there is no firmware to reboot into), 2 for a bad command line / bad image / host failure,
// 4 instruction limit, 6 all CPUs halted, 8 triple fault, 10 unimplemented feature, 12 stopped
// by a signal, 14 an output lost bytes, 16 a snapshot problem, 18 a lockstep mismatch, 20 an
// input-log problem (harness/machine.h: kExit*).
// Subcommands: run, bisect (harness/bisect.h), trace, xcheck, vmx-profiles.
#include "cpu/jit/translator.h"
#include "cpu/vmx/profile_table.h"
#include "harness/bisect.h"
#include "harness/exit_run.h"
#include "harness/gdb_stub.h"
#include "harness/machine.h"
#include "harness/kvm/fuzz.h"
#include "harness/progress.h"
#include "harness/whole_number.h"
#include "harness/xen_trace_drain.h"
#include "trace/check.h"
#include "trace/check_kvm.h"
#include "trace/diff.h"
#include "trace/dump.h"
#include "trace/ftrace_import.h"
#include "trace/stream_import.h"
#include "trace/xen_console_import.h"
#include "trace/report.h"
#include "trace/summary.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <fmt/format.h>
#include <string>
#include <vector>

namespace {

using namespace vmxsim;

[[noreturn]] void fail(const std::string &Msg) {
  std::fprintf(stderr, "vmxsim: error: %s\n", Msg.c_str());
  std::fflush(stdout);
  std::exit(kExitUsage);
}

/// QEMU's -m syntax: "[size=]N[suffix]", suffix B/K/M/G/T (case-insensitive, optional
/// trailing "B"/"iB"), no suffix = MiB.
bool parseSize(std::string S, uint64_t &Out) {
  if (S.rfind("size=", 0) == 0)
    S = S.substr(5);
  size_t I = 0;
  uint64_t V = 0;
  while (I < S.size() && S[I] >= '0' && S[I] <= '9') {
    if (V > (~uint64_t(0) - 9) / 10)
      return false;
    V = V * 10 + uint64_t(S[I++] - '0');
  }
  if (I == 0)
    return false;
  std::string Suffix = S.substr(I);
  for (char &C : Suffix)
    C = char(std::toupper(static_cast<unsigned char>(C)));
  unsigned Shift;
  if (Suffix.empty() || Suffix == "M" || Suffix == "MB" || Suffix == "MIB")
    Shift = 20;
  else if (Suffix == "B")
    Shift = 0;
  else if (Suffix == "K" || Suffix == "KB" || Suffix == "KIB")
    Shift = 10;
  else if (Suffix == "G" || Suffix == "GB" || Suffix == "GIB")
    Shift = 30;
  else if (Suffix == "T" || Suffix == "TB" || Suffix == "TIB")
    Shift = 40;
  else
    return false;
  if (Shift && V > (~uint64_t(0) >> Shift))
    return false;
  Out = V << Shift;
  return true;
}

/// A whole number (harness/whole_number.h).
bool parseWhole(const std::string &S, uint64_t &Out) { return parseWholeNumber(S, Out); }

/// Adds a whole-number option to App: Var receives it if it parses (parseWhole) and lies
/// in [Min, Max]; anything else (negative, too large, trailing text) is a command-line
/// error, status 2.
template <typename T>
CLI::Option *addWhole(CLI::App *App, const std::string &Name, T &Var, const std::string &Help,
                      uint64_t Min = 0, uint64_t Max = std::numeric_limits<T>::max()) {
  std::string Flag = Name.substr(0, Name.find(','));
  return App->add_option_function<std::string>(
                Name,
                [&Var, Flag, Min, Max](const std::string &S) {
                  uint64_t V;
                  if (!parseWhole(S, V) || V < Min || V > Max)
                    throw CLI::ValidationError(
                        Flag, fmt::format("'{}' is not a whole number in {}..{}", S, Min, Max));
                  Var = T(V);
                },
                Help)
      ->type_name("N");
}

/// "stdio", "none"/"null", "file:PATH", or a bare PATH.
OutputSpec parseOutput(const std::string &S) {
  if (S == "stdio" || S == "-")
    return OutputSpec::stdoutSpec();
  if (S == "none" || S == "null")
    return OutputSpec::discard();
  if (S.rfind("file:", 0) == 0)
    return OutputSpec::file(S.substr(5));
  return OutputSpec::file(S);
}

/// QEMU's -initrd list: comma-separated, ",," is a literal comma.
std::vector<std::string> splitModules(const std::string &S) {
  std::vector<std::string> Out;
  std::string Cur;
  for (size_t I = 0; I < S.size(); ++I) {
    if (S[I] == ',') {
      if (I + 1 < S.size() && S[I + 1] == ',') {
        Cur += ',';
        ++I;
        continue;
      }
      Out.push_back(Cur);
      Cur.clear();
      continue;
    }
    Cur += S[I];
  }
  Out.push_back(Cur);
  return Out;
}

// Stopping a run from the outside (SIGINT, SIGTERM, SIGHUP): the first signal raises the
// machine's stop flag, so the run ends at the next poll (MachineConfig::StopFlag) with
// every output flushed and the summary printed, status kExitInterrupted; a second one
// ends the process at once with the same status. SA_RESTART keeps the guest's output
// writes (to a pipe or a terminal) from failing with EINTR.
std::atomic<bool> StopRun{false};
volatile std::sig_atomic_t StopSignal = 0;

void onStopSignal(int Sig) {
  if (StopSignal)
    ::_exit(kExitInterrupted);
  StopSignal = Sig;
  StopRun.store(true, std::memory_order_relaxed);
}

void installStopHandlers() {
  struct sigaction Sa;
  std::memset(&Sa, 0, sizeof(Sa));
  Sa.sa_handler = onStopSignal;
  Sa.sa_flags = SA_RESTART;
  sigemptyset(&Sa.sa_mask);
  for (int Sig : {SIGINT, SIGTERM, SIGHUP})
    sigaction(Sig, &Sa, nullptr);
  // A reader that goes away (a FIFO, a pipe) makes writes fail with EPIPE, which the
  // outputs report, instead of killing the process before it can flush anything.
  std::signal(SIGPIPE, SIG_IGN);
}

const char *signalName(int Sig) {
  switch (Sig) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  case SIGHUP:
    return "SIGHUP";
  }
  return "a signal";
}

/// An output that names an existing FIFO with no reader yet: opening it waits until one
/// comes, so say so first (the run has not started).
void sayIfFifoWaits(const char *Option, const std::string &Path) {
  struct stat St;
  if (Path.empty() || ::stat(Path.c_str(), &St) != 0 || !S_ISFIFO(St.st_mode))
    return;
  int Fd = ::open(Path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (Fd >= 0) {
    ::close(Fd);
    return;
  }
  if (errno == ENXIO)
    std::fprintf(stderr, "vmxsim: %s %s is a FIFO with no reader yet: waiting for one\n",
                 Option, Path.c_str());
}

struct RunOptions {
  std::string Image, Kernel, Initrd, Append, Mem = "256", Serial = "stdio",
                                              Debugcon = "stdio", TraceInsns, Flat,
                                              EntryMode = "prot32", VmxProfile = "full",
                                              Serial2 = "none", SerialIn, Serial2In;
  unsigned Smp = 1;
  uint64_t MaxInsns = ~uint64_t(0);
  std::optional<uint64_t> Seed;
  bool Quiet = false;
  std::string GroundTruth;
  bool GroundTruthInsns = false;
  std::string Xentrace;
  std::string XenTrace, XenSyms;
  uint64_t XenTraceEvery = 1'000'000;
  std::string RtcBase;
  std::string Gdb; ///< --gdb [HOST]:PORT
  bool GdbWait = false;
  /// Snapshots (harness/machine.h, Machine::saveSnapshot): at these totals of retired
  /// instructions, every N of them, into this folder; and the snapshot to start from.
  std::vector<uint64_t> SnapshotAt;
  uint64_t SnapshotEvery = 0;
  std::string SnapshotDir = ".";
  std::string Restore;
  std::string Exec = "interp";
  bool JitStats = false;
  bool JitPerfMap = false;
  /// The input log (harness/input_log.h).
  std::string RecordInput, ReplayInput;
  /// --set-at-exit N:REG=VALUE (harness/exit_run.h).
  std::vector<std::string> SetAtExit;
};

/// A snapshot's file name: DIR/vmxsim-<total retired instructions>.snap.
std::string snapshotPath(const std::string &Dir, uint64_t Retired) {
  return fmt::format("{}/vmxsim-{}.snap", Dir, Retired);
}

[[noreturn]] void failSnapshot(const std::string &Msg) {
  std::fprintf(stderr, "vmxsim: error: %s\n", Msg.c_str());
  std::fflush(stdout);
  std::exit(kExitSnapshot);
}

/// The machine a run's options describe (a bad option: fail(), status 2). Model receives
/// the processor model, which Cfg.Model may point to.
MachineConfig configFromOptions(const RunOptions &O, CpuModel &Model) {
  MachineConfig Cfg;
  if (!O.Image.empty() && !O.Kernel.empty())
    fail("give the image either as IMAGE or with --kernel, not both");
  Cfg.Kernel = O.Image.empty() ? O.Kernel : O.Image;
  if (Cfg.Kernel.empty())
    fail("run: no image (give IMAGE or --kernel FILE)");
  if (!parseSize(O.Mem, Cfg.RamBytes))
    fail(fmt::format("-m: invalid size '{}'", O.Mem));
  Cfg.NumCpus = O.Smp;
  Cfg.Vmx = VmxProfile::byName(O.VmxProfile);
  if (!Cfg.Vmx)
    fail(fmt::format("--vmx-profile: unknown profile '{}' (full, kvm-nested, minimal)",
                     O.VmxProfile));
  Cfg.MaxInsns = O.MaxInsns;
  Cfg.Exec = O.Exec == "translate"  ? ExecMode::Translate
             : O.Exec == "lockstep" ? ExecMode::Lockstep
                                    : ExecMode::Interp;
  // The processor model with the RDRAND/RDSEED seed the run asked for (cpu/exec_random.cpp);
  // the machine copies it.
  Model = CpuModel::defaultModel();
  if (O.Seed) {
    Model.RandomSeed = *O.Seed;
    Cfg.Model = &Model;
  }
  if (!O.RtcBase.empty()) {
    std::string Why;
    if (!Rtc146818::parseBase(O.RtcBase, Cfg.RtcBaseSeconds, Why)) {
      std::string Shown = O.RtcBase; // one line, whatever was given
      for (char &Ch : Shown)
        if (static_cast<unsigned char>(Ch) < 0x20 || Ch == 0x7f)
          Ch = '?';
      fail(fmt::format("--rtc-base: invalid value '{}': {}", Shown, Why));
    }
  }
  Cfg.Append = O.Append;
  if (!O.Initrd.empty())
    Cfg.Modules = splitModules(O.Initrd);
  Cfg.Serial = parseOutput(O.Serial);
  Cfg.Debugcon = parseOutput(O.Debugcon);
  Cfg.Serial2 = parseOutput(O.Serial2);
  Cfg.SerialIn = O.SerialIn;
  Cfg.Serial2In = O.Serial2In;
  Cfg.RecordInput = O.RecordInput;
  Cfg.ReplayInput = O.ReplayInput;
  if (!O.RecordInput.empty() && !O.ReplayInput.empty())
    fail("--record-input and --replay-input do not combine");
  if (!O.Gdb.empty() && !O.ReplayInput.empty())
    fail("--replay-input does not combine with --gdb: a replay is the recorded run, which "
         "gdb's writes would leave (record the gdb session with --record-input, then replay "
         "it without --gdb)");
  if (!O.TraceInsns.empty())
    Cfg.TraceInsns = O.TraceInsns == "-" ? OutputSpec::stdoutSpec() : OutputSpec::file(O.TraceInsns);
  Cfg.GroundTruthFile = O.GroundTruth;
  Cfg.GroundTruthInsns = O.GroundTruthInsns;
  if (Cfg.GroundTruthInsns && Cfg.GroundTruthFile.empty())
    fail("--trace-ground-truth-insns needs --trace-ground-truth FILE");
  Cfg.XentraceFile = O.Xentrace;
  Cfg.XenTraceFile = O.XenTrace;
  Cfg.XenSymsFile = O.XenSyms;
  Cfg.XenTraceEvery = O.XenTraceEvery;
  if (!O.Flat.empty()) {
    uint64_t A;
    if (!parseWhole(O.Flat, A))
      fail(fmt::format("--flat: invalid address '{}'", O.Flat));
    Cfg.FlatAddr = A;
    Cfg.FlatMode = O.EntryMode == "real"   ? EntryMode::Real
                   : O.EntryMode == "long" ? EntryMode::Long
                                           : EntryMode::Prot32;
  }
  return Cfg;
}

/// --set-at-exit N:REG=VALUE, each (harness/exit_run.h).
std::vector<RegisterPoke> pokesFromOptions(const RunOptions &O) {
  std::vector<RegisterPoke> Pokes;
  for (const std::string &S : O.SetAtExit) {
    RegisterPoke P;
    std::string Why;
    if (!parseRegisterPoke(S, P, Why))
      fail("--set-at-exit: " + Why);
    Pokes.push_back(P);
  }
  return Pokes;
}

int runCommand(const RunOptions &O) {
  CpuModel Model;
  MachineConfig Cfg = configFromOptions(O, Model);
  const std::vector<RegisterPoke> Pokes = pokesFromOptions(O);
  if (!Pokes.empty() && (!O.Gdb.empty() || !O.SnapshotAt.empty() || O.SnapshotEvery))
    fail("--set-at-exit does not combine with --gdb, --snapshot-at or --snapshot-every");

  GdbServerOptions GdbOpts;
  if (O.GdbWait && O.Gdb.empty())
    fail("--gdb-wait needs --gdb [HOST]:PORT");
  if (!O.Gdb.empty() && (!O.SnapshotAt.empty() || O.SnapshotEvery))
    fail("--snapshot-at and --snapshot-every do not combine with --gdb: under gdb, 'monitor "
         "snapshot save FILE' takes one");
  // The folder is made now if it is missing, and a folder that cannot hold the snapshots
  // is refused now, not at the first snapshot, minutes into the run.
  if (!O.SnapshotAt.empty() || O.SnapshotEvery) {
    std::error_code Ec;
    std::filesystem::create_directories(O.SnapshotDir, Ec);
    if (Ec || !std::filesystem::is_directory(O.SnapshotDir) ||
        access(O.SnapshotDir.c_str(), W_OK | X_OK) != 0)
      fail(fmt::format("--snapshot-dir: '{}' is not a folder snapshots can be written to{}",
                       O.SnapshotDir, Ec ? " (" + Ec.message() + ")" : ""));
  }
  if (!O.Gdb.empty()) {
    std::string Why;
    if (!GdbServer::parseAddress(O.Gdb, GdbOpts, Why))
      fail("--gdb: " + Why);
    GdbOpts.Wait = O.GdbWait;
  }

  installStopHandlers();
  Cfg.StopFlag = &StopRun;
  for (auto [Option, Spec] : {std::pair{"--serial", &Cfg.Serial}, std::pair{"--serial2", &Cfg.Serial2},
                              std::pair{"--debugcon", &Cfg.Debugcon}})
    if (Spec->K == OutputSpec::Kind::File)
      sayIfFifoWaits(Option, Spec->Path);
  if (Cfg.TraceInsns && Cfg.TraceInsns->K == OutputSpec::Kind::File)
    sayIfFifoWaits("--trace-insns", Cfg.TraceInsns->Path);
  sayIfFifoWaits("--trace-ground-truth", Cfg.GroundTruthFile);
  sayIfFifoWaits("--xentrace", Cfg.XentraceFile);

  Error Err;
  std::unique_ptr<Machine> M = Machine::create(Cfg, Err);
  if (!M && (Err.Code == ErrorCode::BadInputLog || Err.Code == ErrorCode::InputLogMismatch)) {
    std::fprintf(stderr, "vmxsim: error: %s\n", Err.str().c_str());
    return kExitInputLog;
  }
  if (!M && Err.Code == ErrorCode::BadSymbolFile) {
    std::fprintf(stderr, "vmxsim: error: --xen-syms: %s\n", Err.str().c_str());
    return kExitXenTrace;
  }
  if (!M)
    fail(Err.str());
  // Names of the translations for Linux perf (docs/TRANSLATOR.md, "Profiling translated
  // code"); closed when the command ends.
  std::unique_ptr<std::FILE, int (*)(std::FILE *)> PerfMap(nullptr, &std::fclose);
  if (O.JitPerfMap) {
    if (Cfg.Exec == ExecMode::Interp)
      fail("--jit-perf-map: nothing is translated with --exec interp");
    const std::string Path = fmt::format("/tmp/perf-{}.map", getpid());
    PerfMap.reset(std::fopen(Path.c_str(), "w"));
    if (!PerfMap)
      fail(fmt::format("--jit-perf-map: cannot write {}: {}", Path, std::strerror(errno)));
    std::setvbuf(PerfMap.get(), nullptr, _IOLBF, 0);
    std::fprintf(stderr, "vmxsim: naming the translations in %s\n", Path.c_str());
    for (unsigned I = 0; I < M->numCpus(); ++I)
      if (Translator *T = M->cpu(I).Jit.get())
        T->PerfMap = PerfMap.get();
  }
  if (!O.Restore.empty()) {
    if (Error E = M->restoreSnapshot(O.Restore))
      failSnapshot(E.str());
    if (!O.Quiet) {
      const Machine::OutputOffsets &Off = M->outputOffsets();
      uint64_t Retired = 0;
      for (unsigned I = 0; I < M->numCpus(); ++I)
        Retired += M->cpu(I).Retired;
      std::fprintf(stderr,
                   "vmxsim: restored %s at %llu instructions; the outputs continue at byte "
                   "%llu (serial), %llu (ground truth), %llu (hypervisor trace)\n",
                   O.Restore.c_str(), (unsigned long long)Retired,
                   (unsigned long long)Off.Serial, (unsigned long long)Off.GroundTruth,
                   (unsigned long long)Off.Xentrace);
    }
  }
  // Progress on stderr for long runs, when it is a terminal and the guest's output does
  // not go to that same terminal (harness/progress.h).
  const bool GuestOnTerminal =
      isatty(STDOUT_FILENO) && (O.Serial == "stdio" || O.Serial2 == "stdio" || O.Debugcon == "stdio");
  ProgressLine Progress(stderr, !O.Quiet && !GuestOnTerminal && O.Gdb.empty());
  std::unique_ptr<GdbServer> Gdb;
  if (!O.Gdb.empty()) {
    Gdb = GdbServer::listen(*M, GdbOpts, Err);
    if (!Gdb)
      fail(Err.str());
    // One line a test or a script can read the port from (port 0: the one chosen).
    std::fprintf(stderr, "vmxsim: gdb stub listening on %s:%u%s\n", GdbOpts.Host.c_str(),
                 unsigned(Gdb->port()),
                 GdbOpts.Wait ? "; waiting for gdb to attach" : "");
    std::fflush(stderr);
  }
  const Machine::ProgressFn ShowProgress = [&](uint64_t N) {
    Progress.show(ProgressLine::runText(N, Progress.elapsed()));
  };
  const Machine::ProgressFn *ProgressPtr = Progress.enabled() ? &ShowProgress : nullptr;
  // Snapshots at instruction totals: the run stops there (a stop that changes nothing the
  // guest or the traces see), is saved, and goes on.
  std::vector<uint64_t> Points = O.SnapshotAt;
  std::sort(Points.begin(), Points.end());
  auto retired = [&] {
    uint64_t N = 0;
    for (unsigned I = 0; I < M->numCpus(); ++I)
      N += M->cpu(I).Retired;
    return N;
  };
  auto nextPoint = [&](uint64_t Now) {
    uint64_t Next = ~uint64_t(0);
    for (uint64_t P : Points)
      if (P > Now) {
        Next = P;
        break;
      }
    if (O.SnapshotEvery)
      Next = std::min(Next, (Now / O.SnapshotEvery + 1) * O.SnapshotEvery);
    return Next;
  };
  RunResult R;
  // gdb's writes of the input log, each at its stop (harness/input_log.h); then the run
  // goes on as any other.
  if (!M->replayedGdbStops().empty()) {
    if (!O.Restore.empty() || !O.SnapshotAt.empty() || O.SnapshotEvery || !Pokes.empty())
      fail("--replay-input of a log with gdb's writes does not combine with --restore, "
           "--snapshot-at, --snapshot-every or --set-at-exit");
    std::optional<RunResult> End;
    if (Error E = replayGdbWrites(*M, End)) {
      if (E.Code == ErrorCode::BadInputLog)
        E.Path = O.ReplayInput;
      M->finishOutputs();
      std::fprintf(stderr, "vmxsim: error: %s\n", E.str().c_str());
      return kExitInputLog;
    }
  }
  if (Gdb) {
    R = Gdb->run();
  } else if (!Pokes.empty()) {
    // Counted in VM exits (from the start, or from the snapshot of --restore).
    ExitRun Run(*M, Pokes);
    ErrorOr<RunResult> X = Run.run();
    if (!X)
      fail(X.error().str());
    R = *X;
  }
  for (; !Gdb && Pokes.empty();) {
    const uint64_t Next = nextPoint(retired());
    if (Next >= Cfg.MaxInsns) {
      R = ProgressPtr ? M->run(*ProgressPtr, uint64_t(1) << 24) : M->run();
      break;
    }
    R = M->runToRetired(Next, ProgressPtr, uint64_t(1) << 24);
    if (R.Reason != RunReason::Stopped)
      break;
    const std::string Path = snapshotPath(O.SnapshotDir, R.Retired);
    if (Error E = M->saveSnapshot(Path))
      failSnapshot(E.str());
    if (!O.Quiet) {
      Progress.done();
      std::fprintf(stderr, "vmxsim: snapshot %s\n", Path.c_str());
    }
  }
  Progress.done();
  std::fflush(stdout);
  if (R.Reason == RunReason::Interrupted && (StopSignal || R.What.empty()))
    R.What = signalName(StopSignal);
  switch (R.Reason) {
  case RunReason::TripleFault:
  case RunReason::Unimplemented:
  case RunReason::LockstepMismatch:
    std::fprintf(stderr, "vmxsim: %s\n%s\n", R.describe().c_str(),
                 formatCpuState(M->cpu(R.CpuId).S).c_str());
    break;
  case RunReason::InsnLimit:
  case RunReason::Halted:
    std::fprintf(stderr, "vmxsim: %s\n", R.describe().c_str());
    break;
  case RunReason::Interrupted: // the summary below says it, even with -q
  case RunReason::GuestExit:
  case RunReason::PowerOff:
  case RunReason::Reset:
  case RunReason::Stopped: // only runUntil stops so; the command never calls it
    break;
  }
  if (const TraceBufferDrain *D = M->traceBuffers())
    for (const std::string &P : D->problems())
      std::fprintf(stderr, "vmxsim: warning: %s; its records were not drained\n", P.c_str());
  if (O.JitStats)
    for (unsigned I = 0; I < M->numCpus(); ++I) {
      // The decoder's count in every mode: blocks decoded again (evicted from the
      // decoded-block cache, or invalidated by a write) cost in all of them.
      std::fprintf(stderr, "vmxsim: CPU %u decoder: %" PRIu64 " blocks decoded\n", I,
                   M->cpu(I).Mmu.blocksDecoded());
      if (const Translator *T = M->cpu(I).Jit.get()) {
        char Line[1024];
        T->describe(Line, sizeof Line);
        std::fprintf(stderr, "vmxsim: CPU %u %s\n", I, Line);
      }
    }
  if (!O.Quiet || R.Reason == RunReason::Interrupted)
    std::fprintf(stderr, "%s\n", R.summary().c_str());
  // Every output was flushed by run(); one that lost bytes makes the run fail even if
  // the guest succeeded: its result is not what the files say.
  const std::vector<std::string> Lost = M->outputProblems();
  for (const std::string &P : Lost)
    std::fprintf(stderr, "vmxsim: error: %s\n", P.c_str());
  // An input log that lost events, or a replay that left the log: the run is not the
  // recorded one, whatever the guest said.
  if (const std::string P = M->inputLogProblem(); !P.empty() && Lost.empty()) {
    std::fprintf(stderr, "vmxsim: error: %s\n", P.c_str());
    return kExitInputLog;
  }
  // Xen's own trace drain: a trace that is not what Xen wrote (or none) fails the run.
  if (const XenTraceDrain *D = M->xenTraceDrain(); D && Lost.empty()) {
    if (const std::string P = D->problem(); !P.empty()) {
      std::fprintf(stderr, "vmxsim: error: --xen-trace: %s\n", P.c_str());
      return kExitXenTrace;
    }
  }
  return Lost.empty() ? R.ExitStatus : kExitOutputFailed;
}

struct TraceDumpOptions {
  std::string File;
  bool FileOrder = false;
};

/// `vmxsim trace dump FILE`: every record, one line each (trace/dump.h). A corrupt or
/// truncated file prints the records before the problem, then the error; status 2.
int traceDumpCommand(const TraceDumpOptions &O) {
  trace::TraceReader Reader(O.FileOrder ? trace::ReadOrder::File : trace::ReadOrder::Merged);
  std::string Why;
  if (!Reader.open(O.File, Why))
    fail(Why);
  const bool Clean = trace::dumpTrace(Reader, stdout);
  std::fflush(stdout);
  if (!Clean)
    fail(fmt::format("{}: {}", O.File, Reader.error().str()));
  return 0;
}

struct TraceCheckOptions {
  std::string Hypervisor, GroundTruth;
};

/// `vmxsim trace check HV GT`: the hypervisor's trace against the ground truth
/// (trace/check.h). Status 0 when they agree, 1 when not, 2 when a file cannot be read
/// or is corrupt (the records before the problem are still checked). A trace made by
/// `trace import --ftrace` (KVM's) is checked by trace/check_kvm.h, with the same statuses.
int traceCheckCommand(const TraceCheckOptions &O,
                      const trace::TraceReader::ProgressFn &Progress) {
  trace::TraceReader Hv, Gt;
  Hv.setProgress(Progress);
  Gt.setProgress(Progress);
  std::string Why;
  if (!Hv.open(O.Hypervisor, Why) || !Gt.open(O.GroundTruth, Why))
    fail(Why);
  if (trace::isImportedKvmTrace(O.Hypervisor)) {
    const trace::KvmCheckResult R = trace::checkKvmAgainstGroundTruth(Hv, Gt);
    trace::printKvmCheck(R, stdout);
    if (R.ReadError) {
      std::fflush(stdout);
      std::fprintf(stderr, "vmxsim: error: %s\n", R.Problem.c_str());
      return kExitUsage;
    }
    return R.Ok ? 0 : 1;
  }
  const trace::CheckResult R = trace::checkAgainstGroundTruth(Hv, Gt);
  trace::printCheck(R, stdout);
  if (R.ReadError || R.WrongKind) {
    std::fflush(stdout);
    std::fprintf(stderr, "vmxsim: error: %s\n", R.Problem.c_str());
    return kExitUsage;
  }
  return R.Ok ? 0 : 1;
}

struct XcheckOptions {
  std::string Image, Mode = "long", Addr, Mem = "16";
  uint64_t MaxInsns = 50'000'000;
  unsigned TimeoutMs = 10'000;
};

/// `vmxsim xcheck IMAGE`: the flat image under KVM and under vmxsim (harness/kvm/xcheck.h).
/// Status 0 identical, 1 different, 2 when KVM is missing or refuses, or a bad image.
int xcheckCommand(const XcheckOptions &O) {
  kvm::XcheckConfig Cfg;
  Cfg.Image = O.Image;
  Cfg.Mode = O.Mode == "real" ? kvm::XMode::Real : O.Mode == "prot32" ? kvm::XMode::Prot32 : kvm::XMode::Long;
  if (!O.Addr.empty()) {
    uint64_t A;
    if (!parseWhole(O.Addr, A))
      fail(fmt::format("--addr: invalid address '{}'", O.Addr));
    Cfg.LoadAddr = A;
  }
  if (!parseSize(O.Mem, Cfg.Side.RamBytes) || Cfg.Side.RamBytes < (1u << 20) ||
      Cfg.Side.RamBytes > (3ull << 30))
    fail(fmt::format("-m: invalid size '{}' (1M..3G)", O.Mem));
  Cfg.Side.StopPort = 0xf4; // isa-debug-exit, as in `vmxsim run`
  Cfg.Limits.MaxInsns = O.MaxInsns;
  Cfg.Limits.TimeoutMs = O.TimeoutMs;
  kvm::XcheckResult R = kvm::runXcheck(Cfg);
  if (R.HostProblem)
    fail(R.Report);
  std::printf("%s\n", R.Report.c_str());
  return R.Identical ? 0 : 1;
}

/// Creates Path with Text, checking every step; a failure is one line and status 2.
void writeWholeFile(const std::string &Path, const std::string &Text) {
  std::FILE *F = std::fopen(Path.c_str(), "w");
  if (!F)
    fail(fmt::format("cannot create '{}': {}", Path, std::strerror(errno)));
  errno = 0;
  const bool Written = std::fwrite(Text.data(), 1, Text.size(), F) == Text.size();
  int E = Written ? 0 : errno;
  if (std::fclose(F) != 0 && !E)
    E = errno;
  if (!Written || E)
    fail(fmt::format("{}: cannot write: {}", Path, std::strerror(E ? E : EIO)));
}

struct FuzzCliOptions {
  kvm::FuzzOptions F;
  std::string Cpl = "both", Coverage, Regressions;
  bool NoCapstone = false;
};

/// `vmxsim xcheck fuzz`: the differential instruction fuzzer (harness/kvm/fuzz.h).
/// Status 0 no divergence, 1 divergences (minimised, optionally written as regression
/// cases), 2 without a usable /dev/kvm.
int xcheckFuzzCommand(FuzzCliOptions &O) {
  O.F.Cpl0 = O.Cpl != "3";
  O.F.Cpl3 = O.Cpl != "0";
  O.F.Capstone = !O.NoCapstone;
  kvm::FuzzResult R = kvm::runFuzz(O.F);
  if (R.HostProblem)
    fail(R.Why);
  std::printf("seed %llu: %llu streams compared (%llu at CPL 3 on the host CPU, %llu at CPL 0 "
              "in the host kernel's emulator) in %.1f s; %llu divergent\n",
              (unsigned long long)O.F.Seed, (unsigned long long)R.Compared,
              (unsigned long long)R.Cpl3Streams, (unsigned long long)R.Cpl0Streams, R.Seconds,
              (unsigned long long)R.Divergent);
  if (R.CapstoneChecked)
    std::printf("Capstone vs vmxsim's decoder: %llu instructions, %llu disagreements (%llu of the "
                "known F2/F3+66 prefix-order class, tests/cpu/decoder_test.cpp)\n",
                (unsigned long long)R.CapstoneChecked, (unsigned long long)R.CapstoneDisagree,
                (unsigned long long)R.CapstoneKnown);
  if (R.KvmCannot)
    std::printf("%llu streams not compared (host kernel's emulator lacks an instruction, or single-step past the end)\n",
                (unsigned long long)R.KvmCannot);
  if (R.Unreproducible)
    std::printf("%llu differences did not reproduce when the stream ran again (not counted "
                "as divergent), e.g. %s\n",
                (unsigned long long)R.Unreproducible, R.UnreproducibleExamples.front().c_str());
  for (const std::string &E : R.CapstoneExamples)
    std::printf("  decoder disagreement: %s\n", E.c_str());
  unsigned N = 0;
  for (const kvm::FuzzDivergence &D : R.Divergences) {
    std::printf("divergence %u: %s\n%s\n", N, D.Diff.c_str(), D.Detail.c_str());
    if (!O.Regressions.empty()) {
      std::string Path = fmt::format("{}/seed{}_{}.txt", O.Regressions, O.F.Seed, N);
      writeWholeFile(Path, kvm::formatRegression(D));
      std::printf("  written to %s\n", Path.c_str());
    }
    ++N;
  }
  if (!O.Coverage.empty()) {
    writeWholeFile(O.Coverage, kvm::formatCoverage(R));
  }
  return R.Divergent ? 1 : 0;
}

/// What a command printed on stdout must have reached it: a failed write (a full disk,
/// a closed pipe) is one line and FailStatus instead of the command's own status.
int checkedStdout(int Status, int FailStatus) {
  // A write that failed inside the command left the error flag (and dropped its buffer,
  // so this flush may succeed); errno is known only if this flush fails.
  const bool Earlier = std::ferror(stdout);
  errno = 0;
  const bool Now = std::fflush(stdout) != 0;
  if (!Earlier && !Now)
    return Status;
  if (Now)
    std::fprintf(stderr, "vmxsim: error: standard output: cannot write: %s\n",
                 std::strerror(errno ? errno : EIO));
  else
    std::fprintf(stderr, "vmxsim: error: standard output: cannot write (output was lost)\n");
  return FailStatus;
}

/// The options of `vmxsim run` (also the run descriptions of `vmxsim bisect`).
void addRunOptions(CLI::App *Run, RunOptions &O) {
  Run->add_option("IMAGE", O.Image,
                  "Multiboot kernel (ELF32, ELF64, a.out kludge), Linux bzImage or flat binary");
  Run->add_option("--kernel", O.Kernel, "the image (same as IMAGE)");
  Run->add_option("--initrd", O.Initrd,
                  "Multiboot modules: \"file1 args,file2\" (',,' is a literal comma); for "
                  "a Linux bzImage, its one initrd file");
  Run->add_option("--append", O.Append,
                  "kernel command line (Multiboot: after the image name; Linux: all of it)");
  Run->add_option("-m,--mem", O.Mem, "RAM size: N[K|M|G|T], plain N = MiB (default 256)");
  addWhole(Run, "--smp,--cpus", O.Smp, "number of CPUs, 1..64 (APs start on INIT-SIPI-SIPI)", 1,
           kMaxCpus);
  Run->add_option("--vmx-profile", O.VmxProfile,
                  "VMX features: full (default), kvm-nested (what KVM offers an L1), minimal "
                  "(first-generation VT-x: no EPT, VPID or unrestricted guest)");
  addWhole(Run, "--max-insns", O.MaxInsns, "stop after N retired instructions (status 4)");
  Run->add_option_function<std::string>(
         "--seed",
         [&O](const std::string &S) {
           uint64_t V;
           if (!parseWhole(S, V))
             throw CLI::ValidationError("--seed", fmt::format("'{}' is not a whole number", S));
           O.Seed = V;
         },
         "seed of the RDRAND/RDSEED streams (default 0x766d7873696d0001): the same seed "
         "gives the same values, run after run")
      ->type_name("N");
  Run->add_option("--serial", O.Serial, "COM1 output: stdio, none, file:PATH or PATH");
  Run->add_option("--serial-in", O.SerialIn,
                  "COM1 input: the bytes of FILE, sent at the programmed baud rate while "
                  "the guest asserts RTS (deterministic); '-' = standard input "
                  "(interactive, not deterministic)");
  Run->add_option("--serial2", O.Serial2,
                  "COM2 (0x2f8, IRQ 3) output: stdio, none (default), file:PATH or PATH");
  Run->add_option("--serial2-in", O.Serial2In, "COM2 input: FILE or '-', as --serial-in");
  Run->add_option("--debugcon", O.Debugcon, "port 0xe9 output: stdio, none, file:PATH or PATH");
  Run->add_option("--trace-insns", O.TraceInsns, "write an instruction trace to FILE ('-': stdout)");
  Run->add_option("--trace-ground-truth", O.GroundTruth,
                  "record every VM exit and VM entry (XenTrace, vmxsim's ground-truth class) to FILE");
  Run->add_option("--xentrace", O.Xentrace,
                  "drain the hypervisor's per-CPU trace buffers (trace/tbuf.h) into this "
                  "XenTrace FILE, as xentrace does");
  CLI::Option *XenTrace = Run->add_option(
      "--xen-trace", O.XenTrace,
      "drain an unmodified Xen 4.17's own per-CPU trace buffers from guest memory into this "
      "XenTrace FILE, as xentrace in dom0 would (needs --xen-syms; docs/xen-trace.md)");
  Run->add_option("--xen-syms", O.XenSyms,
                  "Xen's symbol file for --xen-trace (xen-syms of xen-hypervisor-4.17-amd64-dbg, "
                  "the same build as the running Xen)")
      ->needs(XenTrace);
  Run->add_option("--xen-trace-every", O.XenTraceEvery,
                  "drain Xen's buffers at every multiple of N retired instructions (all CPUs; "
                  "default 1000000), and at the end")
      ->type_name("N")
      ->check(CLI::Range(uint64_t(1), ~uint64_t(0)))
      ->needs(XenTrace);
  Run->add_flag("--trace-ground-truth-insns", O.GroundTruthInsns,
                "also record every instruction into the ground truth");
  CLI::Option *Flat =
      Run->add_option("--flat", O.Flat, "load IMAGE as a flat binary at guest-physical ADDR");
  Run->add_option("--entry-mode", O.EntryMode, "flat entry mode: real, prot32 or long")
      ->check(CLI::IsMember({"real", "prot32", "long"}))
      ->needs(Flat);
  Run->add_flag("-q,--quiet", O.Quiet, "no run summary on stderr");
  Run->add_option("--exec", O.Exec,
                  "how guest code runs: interp (the interpreter, default), translate (hot "
                  "blocks as translated host code, docs/TRANSLATOR.md) or lockstep (each "
                  "translated block run both ways and compared; a difference stops the run, "
                  "status 18)")
      ->check(CLI::IsMember({"interp", "translate", "lockstep"}));
  Run->add_flag("--jit-stats", O.JitStats,
                "print the decoder's and the translator's counters per CPU at the end "
                "(blocks decoded, blocks translated, instructions run translated, why "
                "blocks were refused)");
  Run->add_flag("--jit-perf-map", O.JitPerfMap,
                "with --exec translate or lockstep: name every translation in "
                "/tmp/perf-PID.map, where Linux perf finds the names of JIT code");
  Run->add_option("--gdb", O.Gdb,
                  "serve gdb's remote protocol on [HOST]:PORT (default host 127.0.0.1; "
                  "port 0: any free one, named on stderr)");
  Run->add_flag("--gdb-wait", O.GdbWait,
                "with --gdb: run nothing until gdb attaches (and continues)");
  Run->add_option("--snapshot-at", O.SnapshotAt,
                  "save a snapshot when the instructions retired by all CPUs reach N "
                  "(repeatable; file DIR/vmxsim-N.snap)")
      ->delimiter(',');
  Run->add_option("--snapshot-every", O.SnapshotEvery,
                  "save a snapshot every N retired instructions (all CPUs together)")
      ->check(CLI::PositiveNumber);
  Run->add_option("--snapshot-dir", O.SnapshotDir, "where snapshots go (default: .)");
  Run->add_option("--restore", O.Restore,
                  "start from this snapshot (the run must have the snapshotting run's "
                  "options; every output receives the bytes after the snapshot)");
  Run->add_option("--record-input", O.RecordInput,
                  "write every input read from the host's standard input (--serial-in -) "
                  "and every register and memory write gdb makes (--gdb), with the point "
                  "of the run it came at, into this input log");
  Run->add_option("--replay-input", O.ReplayInput,
                  "feed the inputs of this input log at exactly their recorded times (the "
                  "run is then the recorded one, byte for byte; status 20 if it is not)");
  Run->add_option("--set-at-exit", O.SetAtExit,
                  "N:REG=VALUE: after the N-th VM exit (all CPUs together, from the start), "
                  "write the exiting CPU's register REG (a divergence injected at a chosen "
                  "exit, for bisect); repeatable")
      ->type_name("N:REG=VALUE");
  Run->add_option("--rtc-base", O.RtcBase,
                  "RTC date-time at virtual time 0: YYYY-MM-DDTHH:MM:SS (UTC) or seconds "
                  "since 1970 (default 2026-01-01T00:00:00)");
}

/// A run description of `vmxsim bisect`: the words of ARGS parsed as `vmxsim run`'s.
/// The words of a run description (split at spaces; '...' and "..." group, a backslash
/// escapes the next character). Opt names the option in errors.
std::vector<std::string> splitWords(const std::string &Args, const std::string &Opt) {
  std::vector<std::string> Words;
  std::string Cur;
  bool InWord = false;
  char Quote = 0;
  for (size_t I = 0; I < Args.size(); ++I) {
    const char C = Args[I];
    if (Quote) {
      if (C == Quote)
        Quote = 0;
      else
        Cur += C;
    } else if (C == '\'' || C == '"') {
      Quote = C;
      InWord = true;
    } else if (C == '\\' && I + 1 < Args.size()) {
      Cur += Args[++I];
      InWord = true;
    } else if (C == ' ' || C == '\t' || C == '\n') {
      if (InWord)
        Words.push_back(Cur);
      Cur.clear();
      InWord = false;
    } else {
      Cur += C;
      InWord = true;
    }
  }
  if (Quote)
    fail(fmt::format("{}: an unclosed {} quote", Opt, Quote));
  if (InWord)
    Words.push_back(Cur);
  return Words;
}

BisectSide bisectSide(const std::string &Label, const std::string &Args, CpuModel &Model) {
  const std::string Opt = Label == "A" ? "--a" : "--b";
  std::vector<std::string> Words = splitWords(Args, Opt);
  CLI::App Sub{"run", "run"};
  RunOptions O;
  addRunOptions(&Sub, O);
  std::vector<std::string> Rev(Words.rbegin(), Words.rend());
  try {
    Sub.parse(Rev);
  } catch (const CLI::ParseError &E) {
    std::string Msg = E.what();
    for (char &C : Msg)
      if (C == '\n')
        C = ' ';
    fail(Opt + ": " + Msg);
  }
  if (!O.Gdb.empty() || !O.SnapshotAt.empty() || O.SnapshotEvery || !O.Restore.empty() ||
      !O.RecordInput.empty() || O.SerialIn == "-" || O.Serial2In == "-")
    fail(Opt + ": a bisected run cannot use --gdb, --snapshot-at, --snapshot-every, --restore, "
               "--record-input or standard input (record it, then give --replay-input)");
  BisectSide S;
  S.Label = Label;
  S.Cfg = configFromOptions(O, Model);
  S.Pokes = pokesFromOptions(O);
  return S;
}

} // namespace

int main(int Argc, char **Argv) {
  CLI::App App{"vmxsim: a deterministic x86-64 emulator with Intel VMX in software", "vmxsim"};
  App.set_version_flag("--version", std::string("vmxsim ") + VMXSIM_VERSION);
  App.require_subcommand(1);

  RunOptions O;
  CLI::App *Run = App.add_subcommand("run", "boot an image and run it to completion");
  addRunOptions(Run, O);

  std::string BisectA, BisectB, BisectTrace, BisectBinary;
  BisectOptions BisO;
  CLI::App *Bisect = App.add_subcommand(
      "bisect", "replay two runs to their first diverging VM exit and print both machines' "
                "state there (status 0 no divergence, 1 divergence found, 2 bad input)");
  Bisect->add_option("--a", BisectA, "side A: the arguments of `vmxsim run`, in one string")
      ->required();
  Bisect->add_option("--b", BisectB,
                     "side B: the arguments of `vmxsim run` (with --b-binary: of that "
                     "program's run)");
  Bisect->add_option("--b-trace", BisectTrace,
                     "side B is this trace, told by its records: vmxsim's ground truth (a "
                     "run's --trace-ground-truth from another host or build), or a "
                     "hypervisor's trace (`trace import` of another machine's console, or a "
                     "run's --xentrace), which is compared with A's hypervisor trace (A's "
                     "--xentrace, else the trace its image streams on COM1 with tstream=auto; "
                     "add --ignore-tsc for another machine); only B's records are shown");
  Bisect->add_option("--b-binary", BisectBinary,
                     "side B is run by this other vmxsim program (another build) as "
                     "'PATH run ARGS --trace-ground-truth FILE': only its records are shown");
  Bisect->add_flag("--ignore-tsc", BisO.IgnoreTsc,
                   "compare all but TSC values (trace diff's --ignore-tsc)");
  addWhole(Bisect, "--snapshot-every-exits", BisO.SnapshotEveryExits,
           "snapshot a run side every K VM exits (all CPUs; default 10000)", 1);
  addWhole(Bisect, "--last-insns", BisO.LastInsns,
           "instructions shown before the exit (default 32)", 1, 100000);
  Bisect->add_option("--work-dir", BisO.WorkDir,
                     "keep the traces and snapshots in DIR (default: a temporary folder, "
                     "removed at the end)");
  Bisect->add_flag("--keep", BisO.Keep, "do not remove the temporary folder (it is named)");

  TraceDumpOptions DumpO;
  CLI::App *Trace = App.add_subcommand("trace", "read XenTrace files");
  Trace->require_subcommand(1);
  CLI::App *Dump = Trace->add_subcommand("dump", "print every record of a XenTrace file");
  Dump->add_option("FILE", DumpO.File, "the trace file")->required();
  Dump->add_flag("--file-order", DumpO.FileOrder,
                 "file order with the window headers (default: CPUs merged by TSC)");

  TraceCheckOptions CheckO;
  CLI::App *Check = Trace->add_subcommand(
      "check", "check a hypervisor's trace against vmxsim's ground truth of the same run");
  Check->add_option("HV", CheckO.Hypervisor,
                    "the hypervisor's trace (run --xentrace FILE, or trace import --ftrace)")
      ->required();
  Check->add_option("GT", CheckO.GroundTruth, "the ground truth (run --trace-ground-truth FILE)")
      ->required();

  std::string ImportFtrace, ImportXenConsole, ImportCapture, ImportOut;
  CLI::App *Import = Trace->add_subcommand(
      "import", "rebuild a XenTrace file from a serial-console capture of a hypervisor's "
                "trace stream (CAPTURE: status 0 done, 2 damaged or missing frames, kept "
                "out, or bad input), from Xen's trace written on the console by the Xen kit "
                "(--xen-console: 0 done, 2 bad input), or from KVM's ftrace text output "
                "(--ftrace: 0 done, 2 bad input, 3 clock not x86-tsc)");
  Import->add_option("CAPTURE", ImportCapture,
                     "a console capture with \"@XT1 ...\" frames (trace/tbuf.h)");
  CLI::Option *FtraceOpt = Import->add_option(
      "--ftrace", ImportFtrace, "ftrace's text output (tracefs's trace file)");
  CLI::Option *XenConsoleOpt = Import->add_option(
      "--xen-console", ImportXenConsole,
      "console output holding xentrace's file in base64 (docs/xen-trace.md)");
  FtraceOpt->excludes(XenConsoleOpt);
  Import->add_option("-o,--output", ImportOut, "the XenTrace file to write")->required();

  std::string ReportFile, ReportOut;
  trace::ReportOptions ReportO;
  CLI::App *Report = Trace->add_subcommand(
      "report", "write a self-contained HTML page with plots of a XenTrace file's exits");
  Report->add_option("FILE", ReportFile, "the trace file")->required();
  Report->add_option("-o,--output", ReportOut, "the HTML file to write ('-': stdout)")->required();
  addWhole(Report, "--max-points", ReportO.MaxTimelinePoints,
           "timeline points kept (default 20000); past it every k-th exit is shown", 1,
           uint64_t(1) << 24);
  Report->add_option("--title", ReportO.Title, "the page's heading (default: FILE)");

  std::string SummaryFile, SummaryOut = "-", SummaryFormatName = "text";
  CLI::App *Summary = Trace->add_subcommand(
      "summary", "VM exits per CPU and per vCPU: reasons, cycles, guest/hypervisor time, ports, MSRs");
  Summary->add_option("FILE", SummaryFile, "the trace file")->required();
  Summary->add_option("--format", SummaryFormatName, "text (default), json or csv")
      ->check(CLI::IsMember({"text", "json", "csv"}));
  Summary->add_option("-o,--output", SummaryOut, "write to this file ('-': stdout, the default)");

  std::string DiffA, DiffB;
  trace::DiffOptions DiffO;
  CLI::App *Diff = Trace->add_subcommand(
      "diff", "the first divergence of two XenTrace files (status 0 identical, 1 different, 2 error)");
  Diff->add_option("A", DiffA, "the first trace file")->required();
  Diff->add_option("B", DiffB, "the second trace file")->required();
  Diff->add_flag("--ignore-tsc", DiffO.IgnoreTsc,
                 "compare all but TSC values, time payload words and LOST_RECORDS (other "
                 "implementations, real hardware)");
  Diff->add_flag("--cycles", DiffO.Cycles,
                 "print, per exit reason, both sides' exits and mean handler cycles and their "
                 "ratio (status 0)");
  Diff->add_flag("--distribution", DiffO.Distribution,
                 "compare per-CPU/per-vCPU exit counts per reason instead of records");
  Diff->add_option_function<std::string>(
          "--tolerance",
          [&DiffO](const std::string &S) {
            // strtod accepts "nan" and "inf", which would pass any range check made of
            // comparisons (NaN compares false): only finite values in range count.
            char *End = nullptr;
            errno = 0;
            const double V = std::strtod(S.c_str(), &End);
            if (S.empty() || errno || *End || !std::isfinite(V) || V < 0 || V > 1e9)
              throw CLI::ValidationError(
                  "--tolerance", fmt::format("'{}' is not a finite number in 0..1e9", S));
            DiffO.Tolerance = V;
          },
          "with --distribution: also compare avg/median/p99 cycles within this "
          "relative tolerance (e.g. 0.05)")
      ->type_name("R");
  addWhole(Diff, "--context", DiffO.Context,
           "equal records shown before the divergence (default 3)", 0, 1000000);

  XcheckOptions XO;
  CLI::App *Xcheck = App.add_subcommand(
      "xcheck", "run a flat image under KVM and under vmxsim and compare exits, registers and memory");
  Xcheck->add_option("IMAGE", XO.Image, "flat binary (entered at --addr in --mode)");
  Xcheck->add_option("--mode", XO.Mode, "entry mode: real, prot32 or long (default long)")
      ->check(CLI::IsMember({"real", "prot32", "long"}));
  Xcheck->add_option("--addr", XO.Addr, "load and entry address (default 0x7c00 real, 0x100000 otherwise)");
  Xcheck->add_option("-m,--mem", XO.Mem, "RAM of both sides (default 16M)");
  addWhole(Xcheck, "--max-insns", XO.MaxInsns, "vmxsim's instruction bound (default 50000000)", 1);
  addWhole(Xcheck, "--timeout-ms", XO.TimeoutMs, "KVM's wall-clock bound (default 10000)", 1,
           3600u * 1000u);
  CLI::App *Profiles = App.add_subcommand(
      "vmx-profiles", "print every VMX control and capability of each --vmx-profile (Markdown)");
  FuzzCliOptions FO;
  CLI::App *Fuzz = Xcheck->add_subcommand(
      "fuzz", "differential instruction fuzzer: random streams under KVM and vmxsim");
  addWhole(Fuzz, "--seed", FO.F.Seed, "random seed (default 1)");
  addWhole(Fuzz, "--streams", FO.F.Streams, "instruction streams to compare (default 20000)");
  addWhole(Fuzz, "--max-insns", FO.F.MaxInsns, "instructions per stream, 1..N (default 6)", 1, 64);
  Fuzz->add_option("--cpl", FO.Cpl, "3 (host CPU), 0 (host kernel's emulator) or both (default)")
      ->check(CLI::IsMember({"0", "3", "both"}));
  Fuzz->add_option("--coverage", FO.Coverage,
                   "write 'kind<TAB>name<TAB>count' lines (instruction forms, exits, exceptions)");
  Fuzz->add_option("--regressions", FO.Regressions,
                   "write each minimised divergence as a regression case into this directory");
  addWhole(Fuzz, "--max-reported", FO.F.MaxReported, "divergences minimised and shown (default 10)");
  Fuzz->add_flag("--no-capstone", FO.NoCapstone, "skip the Capstone decoder cross-check");

  try {
    App.parse(Argc, Argv);
  } catch (const CLI::ParseError &E) {
    if (E.get_exit_code() == 0) // --help, --version
      return App.exit(E);
    std::string Msg = E.what();
    for (char &C : Msg)
      if (C == '\n')
        C = ' ';
    fail(Msg);
  }
  if (Run->parsed())
    return checkedStdout(runCommand(O), kExitOutputFailed);
  if (Bisect->parsed()) {
    if (!BisectTrace.empty() + !BisectBinary.empty() + !BisectB.empty() == 0 ||
        (!BisectTrace.empty() && (!BisectB.empty() || !BisectBinary.empty())))
      fail("bisect: give side B as --b ARGS, --b-trace FILE, or --b-binary PATH --b ARGS");
    if (!BisectBinary.empty() && BisectB.empty())
      fail("bisect: --b-binary needs --b ARGS (that program's run arguments)");
    CpuModel ModelA, ModelB;
    BisectSide A = bisectSide("A", BisectA, ModelA), B;
    if (!BisectTrace.empty()) {
      B.Label = "B";
      B.TraceFile = BisectTrace;
    } else if (!BisectBinary.empty()) {
      B.Label = "B";
      B.Binary = BisectBinary;
      CpuModel Unused;
      (void)bisectSide("B", BisectB, Unused); // the arguments must at least be ours
      B.BinaryArgs = splitWords(BisectB, "--b");
    } else {
      B = bisectSide("B", BisectB, ModelB);
    }
    return checkedStdout(bisectCommand(A, B, BisO, stdout, stderr), kExitUsage);
  }
  if (Fuzz->parsed())
    return checkedStdout(xcheckFuzzCommand(FO), kExitUsage);
  if (Profiles->parsed()) {
    const std::string T = vmxProfilesReport();
    std::fwrite(T.data(), 1, T.size(), stdout);
    return checkedStdout(0, kExitUsage);
  }
  if (Xcheck->parsed()) {
    if (XO.Image.empty())
      fail("xcheck: no image (give IMAGE, or use 'xcheck fuzz')");
    return checkedStdout(xcheckCommand(XO), kExitUsage);
  }
  if (Dump->parsed())
    return checkedStdout(traceDumpCommand(DumpO), kExitUsage);
  if (Import->parsed()) {
    if (int(!ImportFtrace.empty()) + int(!ImportXenConsole.empty()) +
            int(!ImportCapture.empty()) != 1)
      fail("trace import: give one of CAPTURE, --ftrace FILE or --xen-console FILE");
    if (!ImportXenConsole.empty())
      return checkedStdout(trace::traceImportXenConsoleCommand(ImportXenConsole, ImportOut,
                                                               stdout, stderr),
                           kExitUsage);
    if (!ImportFtrace.empty())
      return checkedStdout(
          trace::traceImportFtraceCommand(ImportFtrace, ImportOut, stdout, stderr), kExitUsage);
    return checkedStdout(
        trace::traceImportStreamCommand(ImportCapture, ImportOut, stdout, stderr), kExitUsage);
  }
  // Reading a long trace shows how far it got (not for dump, whose output is the
  // progress); the line is erased once the whole file has been read.
  ProgressLine TraceProgress(stderr);
  trace::TraceReader::ProgressFn ReadProgress;
  if (TraceProgress.enabled())
    ReadProgress = [&TraceProgress](uint64_t Done, uint64_t Total) {
      if (Done >= Total)
        return TraceProgress.done();
      TraceProgress.show(ProgressLine::bytesText("reading trace", Done, Total,
                                                 TraceProgress.elapsed()));
    };
  if (Report->parsed())
    return checkedStdout(
        trace::traceReportCommand(ReportFile, ReportOut, ReportO, stderr, ReadProgress),
        kExitUsage);
  if (Check->parsed())
    return checkedStdout(traceCheckCommand(CheckO, ReadProgress), kExitUsage);
  if (Summary->parsed()) {
    const trace::SummaryFormat F = SummaryFormatName == "json"  ? trace::SummaryFormat::Json
                                   : SummaryFormatName == "csv" ? trace::SummaryFormat::Csv
                                                                : trace::SummaryFormat::Text;
    std::FILE *Out = stdout;
    if (SummaryOut != "-" && !(Out = std::fopen(SummaryOut.c_str(), "w")))
      fail(fmt::format("cannot create '{}': {}", SummaryOut, std::strerror(errno)));
    errno = 0;
    const int Status = trace::traceSummaryCommand(SummaryFile, F, Out, stderr, ReadProgress);
    if (Out != stdout) {
      // ferror first: a failed flush inside the command drops the buffer, after which
      // fclose itself succeeds; errno still says why the flush failed.
      const bool Bad = std::ferror(Out);
      int E = Bad ? errno : 0;
      if (std::fclose(Out) != 0 && !Bad)
        E = errno;
      if (Bad || E)
        fail(fmt::format("{}: cannot write: {}", SummaryOut, std::strerror(E ? E : EIO)));
    }
    return checkedStdout(Status, kExitUsage);
  }
  if (Diff->parsed())
    return checkedStdout(
        trace::traceDiffCommand(DiffA, DiffB, DiffO, stdout, stderr, ReadProgress), kExitUsage);
  return kExitUsage;
}
