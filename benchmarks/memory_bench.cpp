// The emulator's resident memory for a large guest that touches little (issue 17: "a 4 GiB
// guest that touches 64 MiB keeps the emulator's resident memory under 160 MiB").
//
// Each case runs the vmxsim program of this build as a child process, as a user would:
//   vmxsim run -q -m RAM_MIB build/hvm/loop.elf --append touch=TOUCH_MIB
// (loop.elf writes every quadword of TOUCH_MIB MiB from 64 MiB up and reads them back), and
// reports the child's peak resident set (getrusage's ru_maxrss, from wait4) as rss_mib.
// The process is what is measured: guest RAM, the emulator's per-page metadata, its
// caches, the program's own code and libraries. Guest RAM is reserved, not committed
// (mmu/phys_mem.cpp: MAP_NORESERVE, pages appear when first written), so RSS follows what
// the guest touches, not its size.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct ChildRun {
  bool Ok = false;   ///< exited with status 1 (isa-debug-exit value 0: the guest succeeded)
  long MaxRssKiB = 0;
};

ChildRun runVmxsim(const std::vector<std::string> &Args) {
  std::vector<char *> Argv;
  const std::string Prog = std::string(VMXSIM_BINARY_DIR) + "/vmxsim";
  Argv.push_back(const_cast<char *>(Prog.c_str()));
  for (const std::string &A : Args)
    Argv.push_back(const_cast<char *>(A.c_str()));
  Argv.push_back(nullptr);
  ChildRun R;
  const pid_t Pid = fork();
  if (Pid < 0)
    return R;
  if (Pid == 0) {
    const int Null = open("/dev/null", O_WRONLY);
    if (Null >= 0)
      dup2(Null, 1); // the guest's serial output
    execv(Prog.c_str(), Argv.data());
    _exit(127);
  }
  int Status = 0;
  rusage Use{};
  if (wait4(Pid, &Status, 0, &Use) != Pid)
    return R;
  R.Ok = WIFEXITED(Status) && WEXITSTATUS(Status) == 1;
  R.MaxRssKiB = Use.ru_maxrss; // KiB on Linux
  return R;
}

void BM_ResidentMemory(benchmark::State &State) {
  const long RamMiB = State.range(0), TouchMiB = State.range(1);
  const std::string Image = std::string(VMXSIM_IMAGE_DIR) + "/loop.elf";
  long Rss = 0;
  for (auto _ : State) {
    const ChildRun R = runVmxsim({"run", "-q", "-m", std::to_string(RamMiB), Image, "--append",
                                  "touch=" + std::to_string(TouchMiB)});
    if (!R.Ok) {
      State.SkipWithError("vmxsim run of loop.elf touch=N did not succeed");
      return;
    }
    Rss = R.MaxRssKiB;
  }
  State.counters["rss_mib"] = double(Rss) / 1024.0;
  State.counters["ram_mib"] = double(RamMiB);
  State.counters["touched_mib"] = double(TouchMiB);
}

// The case (4 GiB, 64 MiB touched), the same guest touching 1 MiB (the emulator's
// own footprint), and 64 MiB touched in a 128 MiB guest (RAM size does not matter).
BENCHMARK(BM_ResidentMemory)
    ->Args({4096, 64})
    ->Args({4096, 1})
    ->Args({128, 64})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

} // namespace

BENCHMARK_MAIN();
