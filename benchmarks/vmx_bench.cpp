// VM exit + VM entry round trips per second (issue 3): the vmx_bench image's guest runs
// CPUID, OUT and VMCALL in a loop, each an exit handled by a minimal in-image handler
// (read reason, RIP and length; write RIP; VMRESUME). The difference of two runs (N and
// 5N iterations: exactly 3 * 4N exits apart) cancels boot and set-up.
#include "harness/machine.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

using namespace vmxsim;

namespace {

double runBench(uint64_t Iters, const VmxProfile &P, bool &Ok) {
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/vmx_bench.elf";
  Cfg.Append = "iters=" + std::to_string(Iters);
  Cfg.Vmx = &P;
  Cfg.Serial = OutputSpec::discard();
  Cfg.Debugcon = OutputSpec::discard();
  Error Err;
  auto T0 = std::chrono::steady_clock::now();
  auto M = Machine::create(Cfg, Err);
  if (!M) {
    Ok = false;
    return 0;
  }
  RunResult R = M->run();
  Ok = R.Reason == RunReason::GuestExit && R.ExitValue == 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - T0).count();
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
