// VM exit + VM entry round trips per second (issue 3): the vmx_bench image's guest runs
// CPUID, OUT and VMCALL in a loop, each an exit handled by a minimal in-image handler
// (read reason, RIP and length; write RIP; VMRESUME). The difference of two runs (N and
// 5N iterations: exactly 3 * 4N exits apart) cancels boot and set-up.
//
// VMREAD and VMWRITE of a cached field (issue 17): a host loop of N VMREADs (VMWRITEs)
// of guest RIP in VMX root operation on a VmxTestMachine; items are VMREADs (VMWRITEs),
// each timed with its loop's DEC and JNZ (three guest instructions per item).
#include "benchmarks/bench_support.h"
#include "tests/support/vmx_test_machine.h"

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

using namespace vmxsim;

namespace {

bench::TimedRun runBench(uint64_t Iters, const VmxProfile &P) {
  MachineConfig Cfg;
  Cfg.Vmx = &P;
  return bench::timeImage("vmx_bench", "iters=" + std::to_string(Iters), Cfg);
}

// round_trips_per_s is wall-clock; round_trips_per_cpu_s divides by process CPU time
// instead, which a loaded shared machine does not inflate.
void roundTrips(benchmark::State &St, const VmxProfile &P) {
  const uint64_t N = uint64_t(St.range(0));
  double PerSecond = 0, PerCpuSecond = 0;
  for (auto _ : St) {
    const bench::TimedRun Small = runBench(N, P), Large = runBench(5 * N, P);
    if (!Small.Ok || !Large.Ok) {
      St.SkipWithError("vmx_bench image failed (is build/hvm/vmx_bench.elf built?)");
      return;
    }
    PerSecond = 3.0 * 4.0 * double(N) / (Large.Seconds - Small.Seconds);
    PerCpuSecond = 3.0 * 4.0 * double(N) / (Large.CpuSeconds - Small.CpuSeconds);
  }
  St.counters["round_trips_per_s"] = PerSecond;
  St.counters["us_per_round_trip"] = PerSecond > 0 ? 1e6 / PerSecond : 0;
  St.counters["round_trips_per_cpu_s"] = PerCpuSecond;
}

// The hypervisor enables VPID when offered (full profile): no TLB flush per transition.
void BM_VmExitEntryRoundTripsFull(benchmark::State &St) { roundTrips(St, VmxProfile::full()); }
// First-generation VT-x: no VPID, so every VM entry and exit flushes the TLB.
void BM_VmExitEntryRoundTripsMinimal(benchmark::State &St) {
  roundTrips(St, VmxProfile::minimal());
}
BENCHMARK(BM_VmExitEntryRoundTripsFull)->Arg(100'000)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_VmExitEntryRoundTripsMinimal)->Arg(100'000)->Unit(benchmark::kMillisecond)->Iterations(1);

/// mov ecx, N; 1: INSN; dec ecx; jnz 1b; hlt. INSN is three bytes.
std::vector<uint8_t> loopOf(const std::vector<uint8_t> &Insn, uint32_t N) {
  return {0xb9,    uint8_t(N), uint8_t(N >> 8), uint8_t(N >> 16), uint8_t(N >> 24),
          Insn[0], Insn[1],    Insn[2],         0xff,             0xc9,
          0x75,    0xf9,       0xf4};
}

void vmxInsnLoop(benchmark::State &St, const std::vector<uint8_t> &Insn, bool IsRead) {
  const uint32_t N = uint32_t(St.range(0));
  test::VmxTestMachine M;
  const std::vector<uint8_t> Code = loopOf(Insn, N);
  for (auto _ : St) {
    M.S.Gpr[RAX] = encodingOf(VmcsField::GuestRip);
    M.S.Gpr[RBX] = IsRead ? 0 : 0x140123; // VMREAD fills it, VMWRITE stores it
    M.Cpu_.Activity = ActivityState::Active;
    test::StepResult R = M.exec(Code, 3 * uint64_t(N) + 3);
    if (R.Faulted || R.Why != StopReason::Halted || M.S.Gpr[RBX] == 0 ||
        M.S.Gpr[RBX] != M.vmcs().get(VmcsField::GuestRip)) {
      St.SkipWithError("the VMREAD/VMWRITE loop did not run to its HLT");
      return;
    }
  }
  St.SetItemsProcessed(int64_t(St.iterations()) * N);
}

void BM_VmreadCachedField(benchmark::State &St) { vmxInsnLoop(St, test::enc::VmreadRbxRax, true); }
void BM_VmwriteCachedField(benchmark::State &St) { vmxInsnLoop(St, test::enc::VmwriteRaxRbx, false); }
BENCHMARK(BM_VmreadCachedField)->Arg(100'000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_VmwriteCachedField)->Arg(100'000)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
