// A guest image run with both traces written to temporary files: the hypervisor's
// XenTrace (--xentrace) and vmxsim's ground truth (--trace-ground-truth), for the tests
// that check one against the other (tests/hvm/).
#pragma once
#include "cpu/jit/translator.h"
#include "harness/machine.h"
#include "tests/support/files.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace vmxsim::test {

struct TracedRun {
  RunResult Result;
  std::string Hv, Gt; ///< file paths
  std::vector<std::string> Problems; ///< what the trace drain reported
  std::string Serial;                ///< COM1's output
};

/// A temporary file name of this process: $TMPDIR (or /tmp)/vmxsim-Prefix-PID-Name.
inline std::string tracedTempPath(const std::string &Prefix, const std::string &Name) {
  const char *Dir = std::getenv("TMPDIR");
  return std::string(Dir ? Dir : "/tmp") + "/vmxsim-" + Prefix + "-" +
         std::to_string(getpid()) + "-" + Name;
}

/// Runs VMXSIM_IMAGE_DIR/Image with Append on Cpus CPUs (at most MaxInsns instructions),
/// the traces going to files named after Tag.
inline TracedRun runTraced(const std::string &Image, const std::string &Append, unsigned Cpus,
                           uint64_t MaxInsns, const std::string &Tag) {
  TracedRun T;
  T.Hv = tracedTempPath("traced", Tag + ".hv.xt");
  T.Gt = tracedTempPath("traced", Tag + ".gt.xt");
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/" + Image;
  Cfg.Append = Append;
  Cfg.NumCpus = Cpus;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.MaxInsns = MaxInsns;
  Cfg.XentraceFile = T.Hv;
  Cfg.GroundTruthFile = T.Gt;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  if (!M)
    return T;
  T.Result = M->run();
  T.Problems = M->traceBuffers()->problems();
  T.Serial = M->serialOutput();
  return T;
}

inline void removeTraceFiles(const TracedRun &T) {
  std::remove(T.Hv.c_str());
  std::remove(T.Gt.c_str());
}

/// A machine running VMXSIM_IMAGE_DIR/Image with COM1 captured and, unless Traces is
/// off, both traces in temporary files named after Prefix and Tag; finish() runs it to
/// the end and returns what it wrote (the run-control and snapshot tests compare runs).
struct TracedMachineOptions {
  bool Traces = true;
  bool GroundTruthInsns = false;
  uint64_t RamBytes = 256ull << 20;
  ExecMode Exec = ExecMode::Interp;
};
struct TracedMachine {
  using Options = TracedMachineOptions;
  std::unique_ptr<Machine> M;
  std::string Gt, Hv;
  TracedMachine(const std::string &Image, const std::string &Append, unsigned Cpus,
                const std::string &Tag, const std::string &Prefix = "runctl",
                const Options &O = Options()) {
    Gt = tracedTempPath(Prefix, Tag + ".gt.xt");
    Hv = tracedTempPath(Prefix, Tag + ".hv.xt");
    MachineConfig Cfg;
    Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/" + Image;
    Cfg.Append = Append;
    Cfg.NumCpus = Cpus;
    Cfg.RamBytes = O.RamBytes;
    Cfg.Serial = OutputSpec::capture();
    Cfg.Debugcon = OutputSpec::discard();
    Cfg.MaxInsns = 50'000'000;
    Cfg.Exec = O.Exec;
    if (O.Traces) {
      Cfg.GroundTruthFile = Gt;
      Cfg.XentraceFile = Hv;
      Cfg.GroundTruthInsns = O.GroundTruthInsns;
    }
    Error Err;
    M = Machine::create(Cfg, Err);
    EXPECT_TRUE(M) << Err.str();
  }
  ~TracedMachine() {
    M.reset();
    std::remove(Gt.c_str());
    std::remove(Hv.c_str());
  }
  struct Outcome {
    RunResult Result;
    std::string Serial, GtBytes, HvBytes;
    std::vector<uint64_t> Cycles, Retired;
    uint64_t InsnsTranslated = 0; ///< by all CPUs' translators (ExecMode other than Interp)
    /// ExecMode::Lockstep, all CPUs: blocks compared, of those with stores compared, and
    /// blocks run translated alone (JitStats).
    uint64_t LockstepCompared = 0, LockstepComparedStores = 0, LockstepUncompared = 0;
  };
  /// Runs to the end; the outputs once the machine is gone (the files are complete).
  Outcome finish() {
    Outcome O;
    O.Result = M->run();
    O.Serial = M->serialOutput();
    for (unsigned I = 0; I < M->numCpus(); ++I) {
      O.Cycles.push_back(M->cpu(I).Cycles);
      O.Retired.push_back(M->cpu(I).Retired);
      if (const Translator *T = M->cpu(I).Jit.get()) {
        const JitStats &J = T->stats();
        O.InsnsTranslated += J.InsnsTranslated;
        O.LockstepCompared += J.LockstepCompared;
        O.LockstepComparedStores += J.LockstepComparedStores;
        for (uint64_t N : J.LockstepUncompared)
          O.LockstepUncompared += N;
      }
    }
    M.reset();
    O.GtBytes = readFile(Gt);
    O.HvBytes = readFile(Hv);
    return O;
  }
};

} // namespace vmxsim::test
