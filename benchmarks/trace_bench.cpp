// Trace tooling speed (issue 6): `vmxsim trace summary` must read at least 200 MB/s.
// BM_TraceCheck (issue 13): `trace check` of a real run's pair of traces, the bytes/s
// being the hypervisor's trace over the time (the ground truth, ~13x larger with every
// slot store, is read in the same time and reported as gt_MB).
// BM_TraceSummary writes a ~200 MB hypervisor-style trace (4 CPUs, runstate records, VM
// exits of mixed reasons with their handler records, deterministic pseudo-random cycle
// counts) to a temporary file once, then summarises that file per iteration through
// TraceReader, as the command does; bytes/s is the file size over the time.
#include "benchmarks/bench_support.h"
#include "trace/check.h"
#include "trace/summary.h"
#include "trace/writer.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace {

namespace summary_bench {

constexpr uint64_t kTargetBytes = 200ull << 20;
constexpr unsigned kCpus = 4;

/// The temporary trace, written on first use and removed at exit.
class SyntheticTrace {
public:
  SyntheticTrace() {
    Path = (std::filesystem::temp_directory_path() /
            ("vmxsim_trace_bench_" + std::to_string(::getpid()) + ".xt"))
               .string();
    vmxsim::trace::FileOutput Out;
    std::string Err;
    if (!Out.open(Path, Err)) {
      Error = Err;
      return;
    }
    {
      vmxsim::trace::TraceWriter W(Out, kCpus, 1 << 20);
      write(W);
    }
    std::error_code Ec;
    Bytes = std::filesystem::file_size(Path, Ec);
    if (Ec)
      Error = Ec.message();
  }
  ~SyntheticTrace() { std::remove(Path.c_str()); }

  std::string Path, Error;
  uint64_t Bytes = 0;

private:
  static void write(vmxsim::trace::TraceWriter &W) {
    uint64_t Seed = 0x9e3779b97f4a7c15ull;
    auto Next = [&] {
      Seed ^= Seed << 13;
      Seed ^= Seed >> 7;
      Seed ^= Seed << 17;
      return Seed;
    };
    uint64_t Tsc[kCpus];
    for (unsigned C = 0; C < kCpus; ++C) {
      Tsc[C] = 1000 + C;
      const uint32_t Who[1] = {1u << 16 | C}; // d1v<C> runnable -> running
      W.recordTsc(C, XT_EV_RunstateRunnableToRunning, Tsc[C], Who);
      W.recordTsc(C, XT_EV_VmEntry, Tsc[C] += 100, nullptr, 0);
    }
    // About 56 bytes per exit: VMX_EXIT64, a handler record, VMENTRY.
    const uint64_t Exits = kTargetBytes / 56;
    for (uint64_t I = 0; I < Exits; ++I) {
      const unsigned C = unsigned(I % kCpus);
      const uint64_t R = Next();
      Tsc[C] += 200 + R % 5000; // guest time
      const uint32_t Kind = uint32_t(R >> 20) % 8;
      static const uint32_t Reasons[8] = {10, 30, 30, 31, 32, 48, 1, 12};
      const uint32_t Exit[3] = {Reasons[Kind], uint32_t(R >> 32) | 0x1000, 0xffffffff};
      W.recordTsc(C, XT_EV_VmxExit64, Tsc[C], Exit);
      switch (Kind) {
      case 0: {
        const uint32_t Cpuid[6] = {uint32_t(R) & 0xf, 0, 1, 2, 3, 4};
        W.record(C, XT_EV_Cpuid, Cpuid);
        break;
      }
      case 1:
      case 2: {
        const uint32_t Io[2] = {0x3f8 + uint32_t(R >> 40) % 16, uint32_t(R)};
        W.record(C, Kind == 1 ? XT_EV_IoportWrite : XT_EV_IoportRead, Io);
        break;
      }
      case 3:
      case 4: {
        const uint32_t Msr[3] = {0xc0000080 + uint32_t(R >> 44) % 8, uint32_t(R), 0};
        W.record(C, Kind == 3 ? XT_EV_MsrRead : XT_EV_MsrWrite, Msr);
        break;
      }
      case 5: {
        const uint32_t Npf[6] = {uint32_t(R) & ~0xfffu, 0, 0x1234, 0, 0x181, 0};
        W.record(C, XT_EV_Npf, Npf);
        break;
      }
      case 6: {
        const uint32_t Vec[1] = {0xf0};
        W.record(C, XT_EV_Intr, Vec);
        break;
      }
      default: {
        const uint32_t Pending[1] = {0};
        W.record(C, XT_EV_Hlt, Pending);
        break;
      }
      }
      Tsc[C] += 300 + (R >> 48) % 3000; // exit handling
      W.recordTsc(C, XT_EV_VmEntry, Tsc[C], nullptr, 0);
    }
  }
};

const SyntheticTrace &syntheticTrace() {
  static SyntheticTrace T;
  return T;
}

} // namespace summary_bench

void BM_TraceSummary(benchmark::State &State) {
  const summary_bench::SyntheticTrace &T = summary_bench::syntheticTrace();
  if (!T.Error.empty()) {
    State.SkipWithError(T.Error.c_str());
    return;
  }
  uint64_t Exits = 0;
  for (auto _ : State) {
    vmxsim::trace::TraceReader Reader;
    std::string Why;
    if (!Reader.open(T.Path, Why)) {
      State.SkipWithError(Why.c_str());
      return;
    }
    vmxsim::trace::TraceSummary S = vmxsim::trace::summarizeTrace(Reader);
    if (S.Failed) {
      State.SkipWithError(S.Error.str().c_str());
      return;
    }
    Exits = 0;
    for (const auto &C : S.Cpus)
      Exits += C.Exits;
    benchmark::DoNotOptimize(S);
  }
  State.SetBytesProcessed(int64_t(State.iterations() * T.Bytes));
  State.counters["exits"] = double(Exits);
  State.counters["file_MB"] = double(T.Bytes) / 1e6;
}
BENCHMARK(BM_TraceSummary)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

/// vmx_bench with "iters=30000 trace=1" (90,001 exits through the CPUID, OUT and VMCALL
/// handlers, each traced with its handler record and checked slot by slot), both traces
/// written to temporary files once.
struct CheckedRun {
  CheckedRun() {
    const std::string Base = (std::filesystem::temp_directory_path() /
                              ("vmxsim_check_bench_" + std::to_string(::getpid())))
                                 .string();
    Hv = Base + ".hv.xt";
    Gt = Base + ".gt.xt";
    vmxsim::MachineConfig Cfg;
    Cfg.XentraceFile = Hv;
    Cfg.GroundTruthFile = Gt;
    if (!vmxsim::bench::timeImage("vmx_bench", "iters=30000 trace=1", Cfg).Ok) {
      Error = "vmx_bench did not pass";
      return;
    }
    std::error_code Ec;
    HvBytes = std::filesystem::file_size(Hv, Ec);
    GtBytes = std::filesystem::file_size(Gt, Ec);
    if (Ec)
      Error = Ec.message();
  }
  ~CheckedRun() {
    std::remove(Hv.c_str());
    std::remove(Gt.c_str());
  }
  std::string Hv, Gt, Error;
  uint64_t HvBytes = 0, GtBytes = 0;
};

void BM_TraceCheck(benchmark::State &State) {
  static CheckedRun T;
  if (!T.Error.empty()) {
    State.SkipWithError(T.Error.c_str());
    return;
  }
  uint64_t Exits = 0;
  for (auto _ : State) {
    vmxsim::trace::TraceReader Hv, Gt;
    std::string Why;
    if (!Hv.open(T.Hv, Why) || !Gt.open(T.Gt, Why)) {
      State.SkipWithError(Why.c_str());
      return;
    }
    vmxsim::trace::CheckResult R = vmxsim::trace::checkAgainstGroundTruth(Hv, Gt);
    if (!R.Ok) {
      State.SkipWithError(R.Problem.c_str());
      return;
    }
    Exits = R.Cpus.empty() ? 0 : R.Cpus[0].Exits;
    benchmark::DoNotOptimize(R);
  }
  State.SetBytesProcessed(int64_t(State.iterations() * T.HvBytes));
  State.counters["exits"] = double(Exits);
  State.counters["hv_MB"] = double(T.HvBytes) / 1e6;
  State.counters["gt_MB"] = double(T.GtBytes) / 1e6;
  State.counters["exits_per_s"] =
      benchmark::Counter(double(Exits), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TraceCheck)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);

} // namespace

BENCHMARK_MAIN();
