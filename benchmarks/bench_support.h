// What the benchmarks share: a guest image run on vmxsim and timed from the outside.
#pragma once
#include "harness/machine.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <time.h>

namespace vmxsim::bench {

/// build/hvm/NAME.elf.
inline std::string imagePath(const char *Name) {
  return std::string(VMXSIM_IMAGE_DIR) + "/" + Name + ".elf";
}

inline double secondsSince(std::chrono::steady_clock::time_point T0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - T0).count();
}
/// CPU time of this process (all threads), in seconds: on a shared machine it does not
/// count the time other processes held the cores.
inline double processCpuSeconds() {
  timespec T{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &T);
  return double(T.tv_sec) + double(T.tv_nsec) * 1e-9;
}

struct TimedRun {
  double Seconds = 0; ///< machine creation (image load included) and run
  double CpuSeconds = 0; ///< the same span in process CPU time
  uint64_t Retired = 0;
  bool Ok = false; ///< the guest ended through isa-debug-exit with value 0
};

/// Runs image Name with command line Append; Cfg supplies the rest (its Kernel, Append,
/// Serial and Debugcon are set here: output discarded).
inline TimedRun timeImage(const char *Name, const std::string &Append,
                          MachineConfig Cfg = {}) {
  Cfg.Kernel = imagePath(Name);
  Cfg.Append = Append;
  Cfg.Serial = OutputSpec::discard();
  Cfg.Debugcon = OutputSpec::discard();
  TimedRun T;
  Error Err;
  const auto T0 = std::chrono::steady_clock::now();
  const double Cpu0 = processCpuSeconds();
  auto M = Machine::create(Cfg, Err);
  if (!M)
    return T;
  const RunResult R = M->run();
  T.Seconds = secondsSince(T0);
  T.CpuSeconds = processCpuSeconds() - Cpu0;
  T.Retired = R.Retired;
  T.Ok = R.Reason == RunReason::GuestExit && R.ExitValue == 0;
  return T;
}

} // namespace vmxsim::bench
