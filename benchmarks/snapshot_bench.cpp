// Snapshot size and save/restore time for the Debian Linux boot kit
// (scripts/fetch-guests.sh's cache): the kernel and its initramfs on one CPU with 512 MiB,
// stopped at 3e9 retired instructions (mid-boot: decompressed and initialising), saved
// to a file and restored into a fresh machine. Skipped without the cache. The boot to
// the snapshot point is not timed.
#include "harness/machine.h"
#include "tests/support/linux_kit_config.h"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <string>
#include <unistd.h>

using namespace vmxsim;

namespace {

constexpr uint64_t kSnapshotAt = 3'000'000'000;

/// The Linux boot kit as tests/harness/snapshot_test.cpp boots it (COM1 discarded).
bool linuxConfig(MachineConfig &Cfg) {
  return test::debianLinuxBootConfig(Cfg, OutputSpec::discard());
}

std::string snapshotFile() {
  return "/tmp/vmxsim-snapshot-bench-" + std::to_string(::getpid()) + ".snap";
}

/// The machine at the snapshot point, booted once per process.
Machine *bootedMachine(MachineConfig &Cfg) {
  static std::unique_ptr<Machine> M;
  if (!M) {
    Error Err;
    M = Machine::create(Cfg, Err);
    if (!M)
      return nullptr;
    if (M->runToRetired(kSnapshotAt).Reason != RunReason::Stopped)
      M.reset();
  }
  return M.get();
}

void BM_LinuxBootSnapshotSave(benchmark::State &St) {
  MachineConfig Cfg;
  if (!linuxConfig(Cfg)) {
    St.SkipWithError("no Debian kernel in the guest cache: run scripts/fetch-guests.sh");
    return;
  }
  Machine *M = bootedMachine(Cfg);
  if (!M) {
    St.SkipWithError("the Linux boot did not reach the snapshot point");
    return;
  }
  const std::string File = snapshotFile();
  for (auto _ : St) {
    if (Error E = M->saveSnapshot(File)) {
      St.SkipWithError(E.str().c_str());
      return;
    }
  }
  St.counters["snapshot_bytes"] = double(test::readFile(File).size());
  St.counters["ram_bytes"] = double(Cfg.RamBytes);
}
BENCHMARK(BM_LinuxBootSnapshotSave)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_LinuxBootSnapshotRestore(benchmark::State &St) {
  MachineConfig Cfg;
  if (!linuxConfig(Cfg)) {
    St.SkipWithError("no Debian kernel in the guest cache: run scripts/fetch-guests.sh");
    return;
  }
  Machine *M = bootedMachine(Cfg);
  const std::string File = snapshotFile();
  if (!M || M->saveSnapshot(File)) {
    St.SkipWithError("no snapshot of the Linux boot");
    return;
  }
  // Into a fresh machine each time (building it is not timed).
  for (auto _ : St) {
    St.PauseTiming();
    Error Err;
    auto Fresh = Machine::create(Cfg, Err);
    St.ResumeTiming();
    if (!Fresh || Fresh->restoreSnapshot(File)) {
      St.SkipWithError("restore failed");
      return;
    }
    St.PauseTiming();
    Fresh.reset();
    St.ResumeTiming();
  }
  std::remove(File.c_str());
}
BENCHMARK(BM_LinuxBootSnapshotRestore)->Unit(benchmark::kMillisecond)->Iterations(5);

} // namespace

BENCHMARK_MAIN();
