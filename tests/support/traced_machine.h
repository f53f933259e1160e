// A Machine running a bundled image with both traces in temporary files, for the tests
// that stop and continue a run (run control, the gdb stub) and compare it with the run
// that never stopped, byte for byte.
#pragma once
#include "harness/machine.h"
#include "tests/support/files.h"
#include "tests/support/traced_run.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace vmxsim::test {

/// A machine running VMXSIM_IMAGE_DIR/Image with both traces in temporary files.
struct TracedMachine {
  std::unique_ptr<Machine> M;
  std::string Gt, Hv;
  TracedMachine(const std::string &Image, const std::string &Append, unsigned Cpus,
                const std::string &Tag) {
    Gt = tracedTempPath("runctl", Tag + ".gt.xt");
    Hv = tracedTempPath("runctl", Tag + ".hv.xt");
    MachineConfig Cfg;
    Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/" + Image;
    Cfg.Append = Append;
    Cfg.NumCpus = Cpus;
    Cfg.Serial = OutputSpec::capture();
    Cfg.Debugcon = OutputSpec::discard();
    Cfg.MaxInsns = 50'000'000;
    Cfg.GroundTruthFile = Gt;
    Cfg.XentraceFile = Hv;
    Error Err;
    M = Machine::create(Cfg, Err);
    EXPECT_TRUE(M) << Err.str();
  }
  ~TracedMachine() {
    M.reset();
    std::remove(Gt.c_str());
    std::remove(Hv.c_str());
  }
  /// Runs to the end; the outputs once the machine is gone.
  struct Outcome {
    RunResult Result;
    std::string Serial, GtBytes, HvBytes;
    std::vector<uint64_t> Cycles, Retired;
  };
  /// Ended: the run ended already with that result (else it is run to its end now).
  Outcome finish(std::optional<RunResult> Ended = std::nullopt) {
    Outcome O;
    O.Result = Ended ? *Ended : M->run();
    O.Serial = M->serialOutput();
    for (unsigned I = 0; I < M->numCpus(); ++I) {
      O.Cycles.push_back(M->cpu(I).Cycles);
      O.Retired.push_back(M->cpu(I).Retired);
    }
    M.reset();
    O.GtBytes = readFile(Gt);
    O.HvBytes = readFile(Hv);
    return O;
  }
};

/// A and B are the same run: result, clocks, serial output and both traces (each of at
/// least MinTraceBytes, so that an empty trace cannot pass).
inline void expectSameRun(const TracedMachine::Outcome &A, const TracedMachine::Outcome &B,
                          size_t MinTraceBytes = 10000) {
  EXPECT_EQ(A.Result.Reason, B.Result.Reason);
  EXPECT_EQ(A.Result.ExitStatus, B.Result.ExitStatus);
  EXPECT_EQ(A.Result.Retired, B.Result.Retired);
  EXPECT_EQ(A.Cycles, B.Cycles);
  EXPECT_EQ(A.Retired, B.Retired);
  EXPECT_EQ(A.Serial, B.Serial);
  EXPECT_GT(A.GtBytes.size(), MinTraceBytes);
  EXPECT_GT(A.HvBytes.size(), MinTraceBytes);
  EXPECT_TRUE(A.GtBytes == B.GtBytes) << "the ground truth differs";
  EXPECT_TRUE(A.HvBytes == B.HvBytes) << "the hypervisor's trace differs";
}

} // namespace vmxsim::test
