// Scheduling overhead (issue 5: "Report the slowdown of the 4-CPU run over four
// single-CPU runs of the same work: at most 10% scheduling overhead").
//
// The same guest work both ways, in one benchmark run: four runs of the loop image on one
// CPU (loopRun(iters): 5 * iters + 7 instructions each), against one run of smp_work on
// four CPUs, where the BSP starts the APs with INIT-SIPI-SIPI and every CPU runs the same
// loopRun(iters) (hvm/images/smp_work). Each side is timed REPS times; the medians and
// their ratio are printed, the ratio as the counter "Slowdown" (1.10 = 10% overhead).
#include "benchmarks/bench_support.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

using namespace vmxsim;

namespace {

/// Wall seconds of one run (load included), or a negative value if it failed.
double timedRun(const char *Image, unsigned Cpus, uint64_t Iters, uint64_t &Retired) {
  MachineConfig Cfg;
  Cfg.NumCpus = Cpus;
  const bench::TimedRun T = bench::timeImage(Image, "iters=" + std::to_string(Iters), Cfg);
  Retired = T.Retired;
  return T.Ok ? T.Seconds : -1;
}

double median(std::vector<double> V) {
  std::sort(V.begin(), V.end());
  return V[V.size() / 2];
}

void BM_SmpSchedulingOverhead(benchmark::State &St) {
  const uint64_t Iters = uint64_t(St.range(0));
  constexpr unsigned kReps = 5;
  for (auto _ : St) {
    std::vector<double> Single, Four;
    uint64_t RetSingle = 0, RetFour = 0;
    for (unsigned Rep = 0; Rep < kReps; ++Rep) {
      double S = 0;
      for (unsigned K = 0; K < 4; ++K) {
        uint64_t R = 0;
        double T = timedRun("loop", 1, Iters, R);
        if (T < 0) {
          St.SkipWithError("loop image failed (is build/hvm/loop.elf built?)");
          return;
        }
        S += T;
        RetSingle = R;
      }
      Single.push_back(S);
      double T = timedRun("smp_work", 4, Iters, RetFour);
      if (T < 0) {
        St.SkipWithError("smp_work image failed (is build/hvm/smp_work.elf built?)");
        return;
      }
      Four.push_back(T);
    }
    const double MSingle = median(Single), MFour = median(Four);
    St.counters["FourSingleRunsMs"] = MSingle * 1e3;
    St.counters["OneFourCpuRunMs"] = MFour * 1e3;
    St.counters["Slowdown"] = MFour / MSingle;
    std::printf("smp_bench: iters=%llu; 4 x 1-CPU loop: median %.1f ms (%llu insns each); "
                "1 x 4-CPU smp_work: median %.1f ms (%llu insns); slowdown %.3f "
                "(overhead %.1f%%)\n",
                (unsigned long long)Iters, MSingle * 1e3, (unsigned long long)RetSingle,
                MFour * 1e3, (unsigned long long)RetFour, MFour / MSingle,
                (MFour / MSingle - 1) * 100);
  }
}
BENCHMARK(BM_SmpSchedulingOverhead)
    ->Arg(5'000'000)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

} // namespace

BENCHMARK_MAIN();
