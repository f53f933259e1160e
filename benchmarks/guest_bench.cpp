// Guest speed on the project's own images (issue: "Report guest MIPS on a tight integer
// loop and on compiled C code, with the decoded-instruction cache on ... Run the loop
// image on QEMU TCG with -icount shift=0 in the same benchmark run and print the ratio").
//
// MIPS are computed from differences of two runs (N and 5N loop iterations), so image
// start-up — and QEMU's firmware boot — cancels out: exactly 5 * 4N instructions separate
// the two runs (hvm/images/loop: loopRun retires 5 * iters + 7 instructions).
#include "benchmarks/bench_support.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace vmxsim;
using bench::imagePath;
using bench::secondsSince;

namespace {

/// Runs an image on vmxsim; returns wall seconds and sets Retired.
double runVmxsim(const char *Image, const std::string &Append, uint64_t &Retired,
                 bool &Ok) {
  const bench::TimedRun T = bench::timeImage(Image, Append);
  Retired = T.Retired;
  Ok = T.Ok;
  return T.Seconds;
}

/// Runs the loop image under QEMU TCG with -icount shift=0 (its deterministic mode);
/// returns wall seconds, or a negative value if QEMU is not installed or failed.
double runQemu(uint64_t Iters) {
  std::string Cmd = "qemu-system-x86_64 -nodefaults -display none -no-reboot -serial null "
                    "-device isa-debug-exit,iobase=0xf4,iosize=4 -cpu max -icount shift=0 "
                    "-kernel " +
                    imagePath("loop") + " -append iters=" + std::to_string(Iters) +
                    " >/dev/null 2>&1";
  auto T0 = std::chrono::steady_clock::now();
  int Rc = std::system(Cmd.c_str());
  double S = secondsSince(T0);
  // isa-debug-exit value 0 -> QEMU exit status 1.
  return (Rc != -1 && WIFEXITED(Rc) && WEXITSTATUS(Rc) == 1) ? S : -1;
}

bool haveQemu() { return std::system("command -v qemu-system-x86_64 >/dev/null 2>&1") == 0; }

// Tight integer loop on vmxsim: 4N iterations' worth of difference between two runs.
void BM_LoopImageVmxsim(benchmark::State &St) {
  const uint64_t N = uint64_t(St.range(0));
  double Mips = 0;
  for (auto _ : St) {
    uint64_t RSmall = 0, RLarge = 0;
    bool Ok1 = true, Ok2 = true;
    double TSmall = runVmxsim("loop", "iters=" + std::to_string(N), RSmall, Ok1);
    double TLarge = runVmxsim("loop", "iters=" + std::to_string(5 * N), RLarge, Ok2);
    if (!Ok1 || !Ok2) {
      St.SkipWithError("loop image did not exit with 0 (is build/hvm/loop.elf built?)");
      return;
    }
    Mips = double(RLarge - RSmall) / (TLarge - TSmall) / 1e6;
  }
  St.counters["guest_MIPS"] = Mips;
}
BENCHMARK(BM_LoopImageVmxsim)->Arg(10'000'000)->Unit(benchmark::kMillisecond)->Iterations(1);

// Compiled C (the selftest suite: sorting, hashing, strings, printf, ...), boot included.
void BM_SelftestImageVmxsim(benchmark::State &St) {
  double Mips = 0;
  for (auto _ : St) {
    uint64_t Retired = 0;
    bool Ok = true;
    double T = runVmxsim("selftest", "", Retired, Ok);
    if (!Ok) {
      St.SkipWithError("selftest image did not pass");
      return;
    }
    Mips = double(Retired) / T / 1e6;
  }
  St.counters["guest_MIPS"] = Mips;
}
BENCHMARK(BM_SelftestImageVmxsim)->Unit(benchmark::kMillisecond)->Iterations(5);

// The same loop on vmxsim and on QEMU TCG -icount shift=0, measured back to back in one
// iteration; the ratio is what compares across noisy machines.
void BM_LoopImageVmxsimVsQemuIcount(benchmark::State &St) {
  if (!haveQemu()) {
    St.SkipWithError("qemu-system-x86_64 not installed (scripts/peers/install-qemu.sh)");
    return;
  }
  const uint64_t N = uint64_t(St.range(0));
  double VMips = 0, QMips = 0;
  for (auto _ : St) {
    uint64_t RSmall = 0, RLarge = 0;
    bool Ok1 = true, Ok2 = true;
    double VSmall = runVmxsim("loop", "iters=" + std::to_string(N), RSmall, Ok1);
    double VLarge = runVmxsim("loop", "iters=" + std::to_string(5 * N), RLarge, Ok2);
    double QSmall = runQemu(N), QLarge = runQemu(5 * N);
    if (!Ok1 || !Ok2 || QSmall < 0 || QLarge < 0) {
      St.SkipWithError("a run failed");
      return;
    }
    const double Insns = 5.0 * 4.0 * double(N); // exactly, on both
    VMips = Insns / (VLarge - VSmall) / 1e6;
    QMips = Insns / (QLarge - QSmall) / 1e6;
  }
  St.counters["vmxsim_MIPS"] = VMips;
  St.counters["qemu_icount_MIPS"] = QMips;
  St.counters["ratio_vmxsim_over_qemu"] = QMips > 0 ? VMips / QMips : 0;
}
BENCHMARK(BM_LoopImageVmxsimVsQemuIcount)
    ->Arg(20'000'000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

} // namespace

BENCHMARK_MAIN();
