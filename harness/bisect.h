// `vmxsim bisect`: where two runs stop agreeing, and both machines' state there (the
// "Replay to a divergence" section of README.md).
//
// 1. Each side that is a vmxsim run (a MachineConfig with its --set-at-exit pokes) runs
//    to its end writing its ground truth (trace/ground_truth.h) into the work folder,
//    with a snapshot after every K-th VM exit (all CPUs together: harness/exit_run.h).
//    A side may instead be a trace file (a ground truth written elsewhere: another host,
//    another build), or another vmxsim binary run as a child process that writes its
//    ground truth (its state cannot be inspected from here: its snapshot format may
//    differ, so only its trace's records are printed).
//    Side B's trace file may also be a hypervisor's trace (told apart by its records:
//    HVM exit records, no ground-truth class), e.g. imported from another machine's
//    console (trace/stream_import.h). Then what is compared in step 2 is A's hypervisor
//    trace (its --xentrace file, else the core's stream on its COM1, imported) with B's,
//    and the diverging exit is the one whose exit record is the last at or before the
//    first differing record on its CPU; A is re-run to its exit of that number (its ground
//    truth's) and B's machine state is printed as unknown.
// 2. The two traces are compared with `trace diff`'s record comparison
//    (trace/diff.h: per CPU, event, TSC unless IgnoreTsc, payload). The first diverging
//    record belongs to a VM exit: the last GT_EXIT (GT_VMEXIT) of that CPU at or before it (the
//    exit record itself, or one of the records its handling produced), or the CPU's
//    first exit when the divergence comes before any.
// 3. Each run side is re-run from its last snapshot before that exit (the CPU's exits
//    before a snapshot are those of its ground truth stamped before the CPU's clock at
//    the snapshot: an exit costs cycles, so none is stamped at the clock it left) with
//    the run control stopping at exactly that exit of that CPU (StopWhen::vmExit), and
//    with an instruction tracer (harness/insn_trace.h) keeping the last instructions of
//    that CPU in a ring.
// 4. Printed: the exit's index and CPU, the diverging records and both exits' records,
//    the registers of that CPU at the exit (the guest's: general registers from the CPU,
//    RIP, RSP, RFLAGS and control registers from the VMCS's guest-state area), the VMCS
//    fields that differ (cpu/vmx/vmcs_fields.def's names), and the last instructions.
//
// Space and time: K exits between snapshots means (exits / K) snapshot files and a
// re-run of at most K exits, one instruction at a time (the tracer listens); each
// snapshot holds the RAM pages that are not zero. The default K = 10,000.
#pragma once
#include "harness/exit_run.h"
#include "harness/machine.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace vmxsim {

struct BisectSide {
  /// What the side is called in the output ("A", "B").
  std::string Label;
  /// A vmxsim run: its configuration (bisect replaces the outputs: the guest's serial
  /// and debug-console output are discarded, the traces go to the work folder) and pokes.
  MachineConfig Cfg;
  std::vector<RegisterPoke> Pokes;
  /// Or: a trace file to compare (no machine): a ground truth or a hypervisor's trace.
  std::string TraceFile;
  /// Or: another vmxsim program, run as `BINARY run ARGS... --trace-ground-truth FILE`.
  std::string Binary;
  std::vector<std::string> BinaryArgs;

  bool isRun() const { return TraceFile.empty() && Binary.empty(); }
};

struct BisectOptions {
  bool IgnoreTsc = false;
  /// Snapshots every K VM exits (all CPUs together) of a run side.
  uint64_t SnapshotEveryExits = 10000;
  /// Where the traces and snapshots go; removed at the end unless Keep.
  std::string WorkDir;
  bool Keep = false;
  /// Instructions shown before the exit, per side.
  unsigned LastInsns = 32;
};

/// Runs the bisection and prints its result to Out. Status: 0 no divergence, 1 a
/// divergence (printed), 2 bad input (a side that cannot be built or run, a trace that
/// cannot be read or is neither a ground truth nor a hypervisor's trace, a side A with no
/// hypervisor trace to compare with B's, a side whose input log holds gdb's writes: one
/// line "vmxsim: error: ..." on Err).
int bisectCommand(const BisectSide &A, const BisectSide &B, const BisectOptions &O,
                  std::FILE *Out, std::FILE *Err);

} // namespace vmxsim
