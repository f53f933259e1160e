// VM exit + VM entry round trips per second (issue 3): the vmx_bench image's guest runs
// CPUID, OUT and VMCALL in a loop, each an exit handled by a minimal in-image handler
// (read reason, RIP and length; write RIP; VMRESUME). The difference of two runs (N and
// 5N iterations: exactly 3 * 4N exits apart) cancels boot and set-up.
#include "benchmarks/bench_support.h"

#include <benchmark/benchmark.h>

#include <string>

using namespace vmxsim;

namespace {

double runBench(uint64_t Iters, const VmxProfile &P, bool &Ok) {
  MachineConfig Cfg;
  Cfg.Vmx = &P;
  const bench::TimedRun T = bench::timeImage("vmx_bench", "iters=" + std::to_string(Iters), Cfg);
  Ok = T.Ok;
  return T.Seconds;
}

void roundTrips(benchmark::State &St, const VmxProfile &P) {
  const uint64_t N = uint64_t(St.range(0));
  double PerSecond = 0;
  for (auto _ : St) {
    bool Ok1 = true, Ok2 = true;
    double TSmall = runBench(N, P, Ok1), TLarge = runBench(5 * N, P, Ok2);
    if (!Ok1 || !Ok2) {
      St.SkipWithError("vmx_bench image failed (is build/hvm/vmx_bench.elf built?)");
      return;
    }
    PerSecond = 3.0 * 4.0 * double(N) / (TLarge - TSmall);
  }
  St.counters["round_trips_per_s"] = PerSecond;
  St.counters["us_per_round_trip"] = PerSecond > 0 ? 1e6 / PerSecond : 0;
}

// The hypervisor enables VPID when offered (full profile): no TLB flush per transition.
void BM_VmExitEntryRoundTripsFull(benchmark::State &St) { roundTrips(St, VmxProfile::full()); }
// First-generation VT-x: no VPID, so every VM entry and exit flushes the TLB.
void BM_VmExitEntryRoundTripsMinimal(benchmark::State &St) {
  roundTrips(St, VmxProfile::minimal());
}
BENCHMARK(BM_VmExitEntryRoundTripsFull)->Arg(100'000)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_VmExitEntryRoundTripsMinimal)->Arg(100'000)->Unit(benchmark::kMillisecond)->Iterations(1);

} // namespace

BENCHMARK_MAIN();
