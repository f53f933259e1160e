// What tracing costs (issue 6: "trace writing costs at most 5% of emulation speed with
// tracing on for every exit"). The vmx_bench image's exit loop (CPUID, OUT, VMCALL: every
// instruction of the loop but three is an exit) is timed with tracing off and on; each
// figure is exits per second from the difference of two runs (N and 5N iterations,
// 12N exits apart), so boot and set-up cancel: exits_per_s in wall-clock time (exit
// throughput), exits_per_cpu_s in the process's CPU time (all its threads: the trace
// files' writer threads, trace/async_output.h, count there and not in the wall-clock
// figure while a core is free for them).
//   Untraced          trace=0, no trace files: the baseline
//   GroundTruth       trace=0, --trace-ground-truth FILE: the emulator records every VM
//                     exit and entry (GT_EXIT, GT_RESUME; GT_VMEXIT_EVENT when non-zero)
//   HypervisorRings   trace=1, --xentrace /dev/null: the hypervisor writes VMX_EXIT64,
//                     a handler record and VMENTRY per exit into its ring (guest
//                     instructions) and the machine drains it (copies, no file)
//   Everything        trace=1, --xentrace FILE and --trace-ground-truth FILE
//   GroundTruthOneThread, EverythingOneThread: the same with the files written on the
//                     emulation thread (MachineConfig::TraceFileThreads false)
// The emulator's trace writing is GroundTruth vs Untraced and Everything vs
// HypervisorRings; HypervisorRings vs Untraced is what the traced hypervisor itself
// costs (instructions it executes, as Xen's tracing costs Xen).
#include "benchmarks/bench_support.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>
#include <unistd.h>

using namespace vmxsim;

namespace {

struct Variant {
  bool HypervisorTrace, Drain, DrainToFile, GroundTruth;
  bool Threads = true;
};

std::string tempFile(const char *What) {
  return "/tmp/vmxsim-tracing-bench-" + std::to_string(getpid()) + "-" + What + ".xt";
}

bench::TimedRun runOnce(uint64_t Iters, const Variant &V, bool &Ok) {
  MachineConfig Cfg;
  if (V.Drain)
    Cfg.XentraceFile = V.DrainToFile ? tempFile("hv") : "/dev/null";
  if (V.GroundTruth)
    Cfg.GroundTruthFile = tempFile("gt");
  Cfg.TraceFileThreads = V.Threads;
  // The trace files are complete when run() returns (it flushes and drains them).
  const bench::TimedRun T = bench::timeImage(
      "vmx_bench", "iters=" + std::to_string(Iters) + (V.HypervisorTrace ? " trace=1" : ""), Cfg);
  Ok = T.Ok;
  std::remove(tempFile("hv").c_str());
  std::remove(tempFile("gt").c_str());
  return T;
}

void exitsPerSecond(benchmark::State &St, Variant V) {
  const uint64_t N = uint64_t(St.range(0));
  double PerSecond = 0, PerCpuSecond = 0;
  for (auto _ : St) {
    bool Ok1 = true, Ok2 = true;
    const bench::TimedRun Small = runOnce(N, V, Ok1), Large = runOnce(5 * N, V, Ok2);
    if (!Ok1 || !Ok2) {
      St.SkipWithError("vmx_bench image failed (is build/hvm/vmx_bench.elf built?)");
      return;
    }
    PerSecond = 3.0 * 4.0 * double(N) / (Large.Seconds - Small.Seconds);
    PerCpuSecond = 3.0 * 4.0 * double(N) / (Large.CpuSeconds - Small.CpuSeconds);
  }
  St.counters["exits_per_s"] = PerSecond;
  St.counters["exits_per_cpu_s"] = PerCpuSecond;
}

void BM_ExitsUntraced(benchmark::State &St) { exitsPerSecond(St, {false, false, false, false}); }
void BM_ExitsGroundTruth(benchmark::State &St) { exitsPerSecond(St, {false, false, false, true}); }
void BM_ExitsHypervisorRings(benchmark::State &St) {
  exitsPerSecond(St, {true, true, false, false});
}
void BM_ExitsEverything(benchmark::State &St) { exitsPerSecond(St, {true, true, true, true}); }
void BM_ExitsGroundTruthOneThread(benchmark::State &St) {
  exitsPerSecond(St, {false, false, false, true, false});
}
void BM_ExitsEverythingOneThread(benchmark::State &St) {
  exitsPerSecond(St, {true, true, true, true, false});
}

BENCHMARK(BM_ExitsUntraced)->Arg(50'000)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_ExitsGroundTruth)->Arg(50'000)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_ExitsHypervisorRings)->Arg(50'000)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_ExitsEverything)->Arg(50'000)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_ExitsGroundTruthOneThread)->Arg(50'000)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_ExitsEverythingOneThread)->Arg(50'000)->Unit(benchmark::kMillisecond)->Iterations(1);

} // namespace

BENCHMARK_MAIN();
