// `vmxsim bisect` (harness/bisect.h) and `run --set-at-exit` (harness/exit_run.h), run as
// the command: a divergence injected at a chosen exit of vmx_bench is found at the next
// exit with both sides' state; two VMX profiles of the hv image diverge; identical runs
// agree; a ground-truth file and another vmxsim binary as side B; bad input is status 2.
#include "tests/support/files.h"
#include "trace/reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using vmxsim::test::readFile;

namespace {

using CmdResult = vmxsim::test::CommandResult;

std::string tempPath(const std::string &Name) {
  return vmxsim::test::tempPath("vmxsim_bisect_test", Name);
}

/// A folder of this test's own holding the images as bench.elf and hv.elf: the runs name
/// them so, and since a Multiboot kernel's command line starts with its name, the counts
/// and clocks below do not depend on where the build is.
const std::string &workDir() {
  static const std::string Dir = [] {
    const std::string D = tempPath("dir");
    std::filesystem::create_directories(D);
    std::filesystem::copy_file(std::string(VMXSIM_IMAGE_DIR) + "/vmx_bench.elf", D + "/bench.elf",
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(std::string(VMXSIM_IMAGE_DIR) + "/hv.elf", D + "/hv.elf",
                               std::filesystem::copy_options::overwrite_existing);
    return D;
  }();
  return Dir;
}

/// Removes the folder when the tests end.
class WorkDirCleanup : public ::testing::Environment {
public:
  void TearDown() override { std::filesystem::remove_all(tempPath("dir")); }
};
[[maybe_unused]] ::testing::Environment *const Cleanup =
    ::testing::AddGlobalTestEnvironment(new WorkDirCleanup);

CmdResult runCmd(const std::string &Args) {
  return vmxsim::test::runShell("cd " + workDir() + " && " + VMXSIM_BINARY_DIR + "/vmxsim " +
                                    Args,
                                tempPath("out"), tempPath("err"));
}

const std::string Bench = "bench.elf";
const std::string Hv = "hv.elf";

/// The line of Text that starts with Prefix (without its newline), or "".
std::string lineStarting(const std::string &Text, const std::string &Prefix) {
  for (size_t At = 0; At < Text.size();) {
    const size_t Nl = Text.find('\n', At);
    const std::string L = Text.substr(At, Nl == std::string::npos ? Nl : Nl - At);
    if (L.rfind(Prefix, 0) == 0)
      return L;
    if (Nl == std::string::npos)
      break;
    At = Nl + 1;
  }
  return "";
}

/// vmx_bench with 10 iterations: exits 3k+1 CPUID, 3k+2 OUT, 3k+3 VMCALL (k = 0..9),
/// then the ending VMCALL. B sets the guest's RAX to 1 at its 9th exit (a VMCALL):
/// vmx_bench's handler takes that as the guest's end.
const std::string PokedArgs = "--a '" + Bench + " --append iters=10' --b '" + Bench +
                              " --append iters=10 --set-at-exit 9:rax=1'";

} // namespace

TEST(Bisect, AnInjectedDivergenceIsFoundAtTheNextExitWithBothStates) {
  const CmdResult R = runCmd("bisect " + PokedArgs + " --snapshot-every-exits 4 --last-insns 3");
  ASSERT_EQ(R.Status, 1) << R.Err;
  EXPECT_EQ(R.Err, "");
  // Up to the VM entry after exit 9 the two runs agree; A resumes the guest, B ends.
  EXPECT_EQ(R.Out.substr(0, R.Out.find("registers of CPU 0")),
            "bisect: A and B diverge at VM exit 10 of CPU 0 (the first difference: record 24 "
            "of CPU 0, counted from 0)\n"
            "  A record: CPU0 294254 +329 GT_RESUME\n"
            "  B record: (none: B has 24 records of CPU 0)\n"
            "  A exit 10: CPU0 294277 +23 GT_EXIT reason=10(Cpuid) rip=0x109607 len=2\n"
            "  B exit 10: (none: CPU 0 made 9 VM exits)\n"
            "A: re-run from snapshot A-8.snap (after VM exit 8 of all CPUs) to VM exit 10 of "
            "CPU 0\n"
            "B: re-run from snapshot B-8.snap (after VM exit 8 of all CPUs) to its end: guest "
            "exit 0x1 (status 3)\n");
  EXPECT_EQ(lineStarting(R.Out, "registers of CPU 0"),
            "registers of CPU 0 (A: the guest's at VM exit 10; B: where its run ended; * "
            "differs):");
  // A: the guest at its CPUID with RAX 0 and 7 iterations left (R12); B: the
  // hypervisor's last OUT to isa-debug-exit, RAX = the status 1.
  EXPECT_EQ(lineStarting(R.Out, "  rax "), "  rax      0x0                  0x1                  *");
  EXPECT_EQ(lineStarting(R.Out, "  r12 "), "  r12      0x7                  0x0                  *");
  EXPECT_EQ(lineStarting(R.Out, "  rip "), "  rip      0x109607             0x10061c             *");
  EXPECT_EQ(lineStarting(R.Out, "  cr3 "), "  cr3      0x10c000             0x10c000            ");
  EXPECT_EQ(lineStarting(R.Out, "VMCS fields"),
            "VMCS fields: not compared (B has no current VMCS on CPU 0)");
  // The last three instructions of each: A's guest loop up to the CPUID's XOR, B's OUT.
  const std::string Insns = R.Out.substr(R.Out.find("last instructions of CPU 0:\n"));
  EXPECT_NE(Insns.find("  A:\n"), std::string::npos);
  EXPECT_NE(Insns.find("0008:0000000000109613 75 f0"), std::string::npos) << Insns;
  EXPECT_NE(Insns.find("0008:0000000000109605 31 c0"), std::string::npos) << Insns;
  EXPECT_NE(Insns.find("0008:000000000010061a e7 f4"), std::string::npos) << Insns;
  EXPECT_EQ(std::count(Insns.begin(), Insns.end(), '\n'), 1 + 2 * (1 + 3));
  // Deterministic, and the snapshot interval changes only where the re-run starts.
  const CmdResult Again =
      runCmd("bisect " + PokedArgs + " --snapshot-every-exits 4 --last-insns 3");
  EXPECT_EQ(Again.Out, R.Out);
  const CmdResult Sparse = runCmd("bisect " + PokedArgs + " --snapshot-every-exits 100 --last-insns 3");
  EXPECT_EQ(Sparse.Status, 1);
  EXPECT_EQ(lineStarting(Sparse.Out, "A: "),
            "A: re-run from the start to VM exit 10 of CPU 0");
  EXPECT_EQ(Sparse.Out.substr(Sparse.Out.find("registers of CPU 0")),
            R.Out.substr(R.Out.find("registers of CPU 0")));
}

TEST(Bisect, TwoVmxProfilesDiverge) {
  // minimal has no secondary controls: the hv core runs without EPT and VPID, so its
  // first VMCS set-up differs; the first exit both make is the guest's first CPUID.
  const CmdResult R = runCmd("bisect --a '" + Hv + " --append scenario=cpuid' --b '" + Hv +
                             " --append scenario=cpuid --vmx-profile minimal' --last-insns 2");
  ASSERT_EQ(R.Status, 1) << R.Err;
  // The core publishes its trace slots later under full (more set-up before it): the
  // first difference is a TSC; the exits are the same CPUIDs at other times.
  EXPECT_EQ(R.Out.substr(0, R.Out.find("registers of CPU 0")),
            "bisect: A and B diverge at VM exit 1 of CPU 0 (the first difference: record 1 of "
            "CPU 0, counted from 0)\n"
            "  A record: CPU0 532666 +532666 GT_SLOT_PUBLISH owner=0 slots_pa=0x1bf000\n"
            "  B record: CPU0 528240 +528240 GT_SLOT_PUBLISH owner=0 slots_pa=0x1bf000\n"
            "  A exit 1: CPU0 545186 +41 GT_EXIT reason=10(Cpuid) rip=0x109ee8 len=2\n"
            "  B exit 1: CPU0 538376 +41 GT_EXIT reason=10(Cpuid) rip=0x109ee8 len=2\n"
            "A: re-run from the start to VM exit 1 of CPU 0\n"
            "B: re-run from the start to VM exit 1 of CPU 0\n");
  // Fields minimal does not have are '-'; EPT is on under full only.
  EXPECT_EQ(lineStarting(R.Out, "  EptPointer "),
            "  EptPointer                               0x12a01e             -");
  EXPECT_EQ(lineStarting(R.Out, "  TscOffset "),
            "  TscOffset                                0xfffffffffff7b9bd   0xfffffffffff7d457");
  EXPECT_EQ(lineStarting(R.Out, "  rip "), "  rip      0x109ee8             0x109ee8            ");
}

TEST(Bisect, IdenticalRunsAgree) {
  const CmdResult R = runCmd("bisect --a '" + Bench + " --append iters=10' --b '" + Bench +
                             " --append iters=10'");
  EXPECT_EQ(R.Status, 0) << R.Err;
  EXPECT_EQ(R.Out, "bisect: no divergence: A and B agree on all 69 records\n");
  // A poke that changes nothing the guest or the traces see (RBX is free in vmx_bench's
  // guest and restored by nothing it reads) is no divergence either.
  const CmdResult P = runCmd("bisect --a '" + Bench + " --append iters=10' --b '" + Bench +
                             " --append iters=10 --set-at-exit 5:r13=0'");
  EXPECT_EQ(P.Status, 0) << P.Err << P.Out;
}

TEST(Bisect, SideBCanBeAGroundTruthFileOrAnotherBinary) {
  const std::string Gt = tempPath("b.gt");
  ASSERT_EQ(runCmd("run -q --debugcon none --trace-ground-truth " + Gt + " " + Bench +
                   " --append iters=10 --set-at-exit 9:rax=1")
                .Status,
            3);
  CmdResult R = runCmd("bisect --a '" + Bench + " --append iters=10' --b-trace " + Gt +
                       " --last-insns 1");
  ASSERT_EQ(R.Status, 1) << R.Err;
  EXPECT_EQ(R.Out.substr(0, R.Out.find('\n')),
            "bisect: A and B diverge at VM exit 10 of CPU 0 (the first difference: record 24 "
            "of CPU 0, counted from 0)");
  EXPECT_EQ(lineStarting(R.Out, "B: "), "B: a trace, not a run here: only its records are known");
  EXPECT_EQ(lineStarting(R.Out, "  rax "), "  rax      0x0                  -                   ");
  // Another vmxsim program (here this one) as B's run: the same divergence.
  R = runCmd("bisect --a '" + Bench + " --append iters=10' --b-binary " + VMXSIM_BINARY_DIR +
             "/vmxsim --b '" + Bench + " --append iters=10 --set-at-exit 9:rax=1' --last-insns 1");
  ASSERT_EQ(R.Status, 1) << R.Err;
  EXPECT_EQ(lineStarting(R.Out, "  A exit 10: "),
            "  A exit 10: CPU0 294277 +23 GT_EXIT reason=10(Cpuid) rip=0x109607 len=2");
  EXPECT_EQ(lineStarting(R.Out, "B: "), "B: a trace, not a run here: only its records are known");
  std::remove(Gt.c_str());
}

TEST(Bisect, BadInputIsOneLineAndStatus2) {
  const std::string Garbage = tempPath("garbage.gt");
  { std::FILE *F = std::fopen(Garbage.c_str(), "w"); std::fputs("not a trace at all", F); std::fclose(F); }
  struct Case {
    std::string Args, Err;
  } Cases[] = {
      {"bisect --b x", "vmxsim: error: --a is required\n"},
      {"bisect --a '" + Bench + "'",
       "vmxsim: error: bisect: give side B as --b ARGS, --b-trace FILE, or --b-binary PATH "
       "--b ARGS\n"},
      {"bisect --a '" + Bench + "' --b '" + Bench + " --bogus'",
       "vmxsim: error: --b: The following argument was not expected: --bogus\n"},
      {"bisect --a '" + Bench + " --gdb :0' --b '" + Bench + "'",
       "vmxsim: error: --a: a bisected run cannot use --gdb, --snapshot-at, --snapshot-every, "
       "--restore, --record-input or standard input (record it, then give --replay-input)\n"},
      {"bisect --a '" + Bench + "' --b '" + Bench + " --set-at-exit 0:rax=1'",
       "vmxsim: error: --set-at-exit: '0:rax=1': the exit number must be a whole number from "
       "1\n"},
      {"bisect --a '" + Bench + "' --b '" + Bench + " --set-at-exit 3:rax'",
       "vmxsim: error: --set-at-exit: '3:rax' is not N:REG=VALUE\n"},
      {"bisect --a '" + Bench + "' --b \"'" + Bench + "\"",
       "vmxsim: error: --b: an unclosed ' quote\n"},
      {"bisect --a '" + Bench + "' --b-trace /nonexistent/vmxsim.gt",
       "vmxsim: error: B: cannot open '/nonexistent/vmxsim.gt': No such file or directory\n"},
      {"bisect --a '" + Bench + " --append iters=2' --b-trace " + Garbage,
       "vmxsim: error: B: " + Garbage + ": offset 0x0: "},
      {"bisect --a '" + Bench + "' --b '" + Bench + " --set-at-exit 2:nosuchreg=1'",
       "vmxsim: error: B: --set-at-exit 2:nosuchreg: no register \"nosuchreg\"\n"},
      {"bisect --a '/nonexistent/x.elf' --b '" + Bench + "'",
       "vmxsim: error: A: /nonexistent/x.elf: cannot open: No such file or directory\n"},
      {"bisect --a '" + Bench + "' --b '" + Bench + "' --snapshot-every-exits 0",
       "vmxsim: error: --snapshot-every-exits: '0' is not a whole number in "
       "1..18446744073709551615\n"},
  };
  for (const Case &C : Cases) {
    const CmdResult R = runCmd(C.Args);
    EXPECT_EQ(R.Status, 2) << C.Args << "\n" << R.Err;
    EXPECT_EQ(R.Err.substr(0, C.Err.size()), C.Err) << C.Args;
    EXPECT_EQ(std::count(R.Err.begin(), R.Err.end(), '\n'), 1) << R.Err;
    EXPECT_EQ(R.Out, "") << C.Args;
  }
  std::remove(Garbage.c_str());
  // run --set-at-exit: the same checks, and it does not combine with snapshots.
  CmdResult R = runCmd("run " + Bench + " --set-at-exit 1:rax");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: --set-at-exit: '1:rax' is not N:REG=VALUE\n");
  R = runCmd("run " + Bench + " --set-at-exit 1:rax=1 --snapshot-every 1000");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: --set-at-exit does not combine with --gdb, --snapshot-at or "
                   "--snapshot-every\n");
}

TEST(Bisect, SetAtExitChangesTheRunAtThatExit) {
  // The poke at exit 9 ends vmx_bench's guest: 9 exits and the status 1 it then reports
  // (3); without it, 31 exits and status 0 (1).
  const CmdResult A = runCmd("run -q --debugcon none " + Bench + " --append iters=10");
  EXPECT_EQ(A.Status, 1) << A.Err;
  const CmdResult B =
      runCmd("run -q " + Bench + " --append iters=10 --set-at-exit 9:rax=1");
  EXPECT_EQ(B.Status, 3) << B.Err;
}

// --- Side B a hypervisor's trace (from another machine) ---

namespace {

/// The hypervisor core's `mixed` scenario on 2 CPUs with its trace streamed on COM1, as
/// on Bochs (tstream=auto: no drain here either).
const std::string MixedArgs = Hv + " --smp 2 --append \"scenario=mixed tstream=auto\"";

/// The committed Bochs capture (tests/hvm/golden/bochs_hv_mixed_2cpu.txt) imported.
const std::string &bochsTrace() {
  static const std::string Path = [] {
    const std::string P = tempPath("dir") + "/bochs.xt";
    const CmdResult R = runCmd("trace import " + std::string(VMXSIM_SOURCE_DIR) +
                               "/tests/hvm/golden/bochs_hv_mixed_2cpu.txt -o " + P);
    EXPECT_EQ(R.Status, 0) << R.Err;
    return P;
  }();
  return Path;
}

/// The trace the core streams on COM1 in a vmxsim run of MixedArgs, imported as a capture
/// from another machine would be.
const std::string &selfTrace() {
  static const std::string Path = [] {
    const std::string Capture = tempPath("dir") + "/self.txt", P = tempPath("dir") + "/self.xt";
    EXPECT_EQ(runCmd("run -q --debugcon none --serial file:" + Capture + " " + MixedArgs).Status,
              1);
    EXPECT_EQ(runCmd("trace import " + Capture + " -o " + P).Status, 0);
    return P;
  }();
  return Path;
}

/// A copy of the trace file From at To with the exit reason of CPU Cpu's N-th VMX_EXIT64
/// record set to Reason; returns the reason it had.
uint32_t changeExitReason(const std::string &From, const std::string &To, unsigned Cpu,
                          uint64_t N, uint32_t Reason) {
  vmxsim::trace::TraceReader R(vmxsim::trace::ReadOrder::File);
  std::string Why;
  EXPECT_TRUE(R.open(From, Why)) << Why;
  std::string Bytes = readFile(From);
  uint64_t Seen = 0;
  vmxsim::trace::TraceRecord Rec;
  while (R.next(Rec)) {
    if (Rec.Cpu != Cpu || Rec.Event != XT_EV_VmxExit64 || ++Seen != N)
      continue;
    const size_t At = size_t(Rec.Offset + 4 + (Rec.HasTsc ? 8 : 0));
    uint32_t Old;
    std::memcpy(&Old, Bytes.data() + At, 4);
    std::memcpy(Bytes.data() + At, &Reason, 4);
    std::ofstream(To, std::ios::binary) << Bytes;
    return Old;
  }
  ADD_FAILURE() << "no exit " << N << " of CPU " << Cpu << " in " << From;
  return 0;
}

} // namespace

// The trace the core streams on COM1, imported as from another machine, against the same
// run: no divergence, TSCs and all.
TEST(Bisect, AnImportedHypervisorTraceOfTheSameRunAgrees) {
  const CmdResult R = runCmd("bisect --a '" + MixedArgs + "' --b-trace " + selfTrace());
  EXPECT_EQ(R.Status, 0) << R.Err << R.Out;
  EXPECT_EQ(R.Out, "bisect: no divergence: the hypervisor traces of A and B agree on all "
                   "1038 records\n");
  EXPECT_EQ(R.Err, "");
}

// Bochs 2.7 running the image (the committed capture; `trace diff --ignore-tsc` finds the
// same first difference): the capture is of an older build of the core, whose guest code
// sat elsewhere, so CPU 1's first exit, the same port read, has another RIP. A is re-run
// to that exit; B's state is unknown.
TEST(Bisect, ABochsCaptureOfMixedAgainstTheSameImage) {
  const CmdResult R =
      runCmd("bisect --a '" + MixedArgs + "' --b-trace " + bochsTrace() + " --ignore-tsc --last-insns 2");
  EXPECT_EQ(R.Status, 1) << R.Err;
  EXPECT_EQ(R.Err, "");
  EXPECT_EQ(R.Out.substr(0, R.Out.find("registers of CPU")),
            "bisect: the hypervisor traces of A and B diverge at VM exit 1 of CPU 1 (the "
            "first difference: record 2 of CPU 1, counted from 0; TSCs not compared)\n"
            "  A record: CPU1 547375 +605 VMX_EXIT64 reason=30(IoInstruction) rip=0x1098d2\n"
            "  B record: CPU1 233150675 +240 VMX_EXIT64 reason=30(IoInstruction) rip=0x1093c2\n"
            "  A exit 1:\n"
            "    CPU1 547375 +605 VMX_EXIT64 reason=30(IoInstruction) rip=0x1098d2\n"
            "    CPU1 547375 - IOPORT_READ port=0x3fd data=0x60\n"
            "    CPU1 547840 +465 VMENTRY\n"
            "  B exit 1:\n"
            "    CPU1 233150675 +240 VMX_EXIT64 reason=30(IoInstruction) rip=0x1093c2\n"
            "    CPU1 233150675 - IOPORT_READ port=0x3fd data=0x60\n"
            "    CPU1 233151060 +385 VMENTRY\n"
            "  A exit 1 in its ground truth: CPU1 547077 +66 GT_EXIT "
            "reason=30(IoInstruction) rip=0x1098d2 len=1 qual=0x3fd0008\n"
            "A: re-run from the start to VM exit 1 of CPU 1\n"
            "B: a hypervisor trace (" +
                bochsTrace() +
                "), from another machine or run: its machine state is unknown, only its "
                "records are known\n");
  // A's whole state at the exit: the guest's registers, its current VMCS, its last
  // instructions (the port read's MOV and IN); B's columns are unknown.
  EXPECT_EQ(lineStarting(R.Out, "registers of CPU 1"),
            "registers of CPU 1 (A: the guest's at VM exit 1; B: unknown; * differs):");
  EXPECT_EQ(lineStarting(R.Out, "  rip "), "  rip      0x1098d2             -                   ");
  EXPECT_EQ(lineStarting(R.Out, "  rdx "), "  rdx      0x3fd                -                   ");
  EXPECT_EQ(lineStarting(R.Out, "VMCS fields"),
            "VMCS fields of A (CPU 1's current VMCS; B's are unknown):");
  EXPECT_EQ(lineStarting(R.Out, "  ExitQualification "),
            "  ExitQualification                        0x3fd0008");
  EXPECT_EQ(lineStarting(R.Out, "  HostRip "), "  HostRip                                  0x101a20");
  const std::string Insns = R.Out.substr(R.Out.find("last instructions of CPU 1:\n"));
  EXPECT_EQ(std::count(Insns.begin(), Insns.end(), '\n'), 1 + 1 + 2) << Insns;
  EXPECT_NE(Insns.find("0008:00000000001098d0 89 ca"), std::string::npos) << Insns;
}

// One exit's record changed in a copy of an imported trace: found at exactly that exit.
// (The copy is of the core's own stream imported, which agrees with the run to its last
// record; the Bochs capture already differs at the first exit.)
TEST(Bisect, AnExitChangedInAnImportedTraceIsFoundThere) {
  const std::string Changed = tempPath("dir") + "/changed.xt";
  // CPU 1's 150th exit, an XSETBV, made a CPUID.
  EXPECT_EQ(changeExitReason(selfTrace(), Changed, 1, 150, 10), 55u);
  const CmdResult R = runCmd("bisect --a '" + MixedArgs + "' --b-trace " + Changed +
                             " --ignore-tsc --last-insns 1");
  EXPECT_EQ(R.Status, 1) << R.Err;
  EXPECT_EQ(R.Out.substr(0, R.Out.find("B: ")),
            "bisect: the hypervisor traces of A and B diverge at VM exit 150 of CPU 1 (the "
            "first difference: record 448 of CPU 1, counted from 0; TSCs not compared)\n"
            "  A record: CPU1 1425753 +548 VMX_EXIT64 reason=55(Xsetbv) rip=0x109b18\n"
            "  B record: CPU1 1425753 +548 VMX_EXIT64 reason=10(Cpuid) rip=0x109b18\n"
            "  A exit 150:\n"
            "    CPU1 1425753 +548 VMX_EXIT64 reason=55(Xsetbv) rip=0x109b18\n"
            "    CPU1 1426121 +368 VMENTRY\n"
            "  B exit 150:\n"
            "    CPU1 1425753 +548 VMX_EXIT64 reason=10(Cpuid) rip=0x109b18\n"
            "    CPU1 1426121 +368 VMENTRY\n"
            "  A exit 150 in its ground truth: CPU1 1425455 +24 GT_EXIT "
            "reason=55(Xsetbv) rip=0x109b18 len=3\n"
            "A: re-run from the start to VM exit 150 of CPU 1\n");
  EXPECT_EQ(lineStarting(R.Out, "  ExitReason "), "  ExitReason                               0x37");
  // Without --ignore-tsc too (the clocks agree): the same exit.
  const CmdResult T = runCmd("bisect --a '" + MixedArgs + "' --b-trace " + Changed);
  EXPECT_EQ(T.Status, 1);
  EXPECT_EQ(T.Out.substr(0, T.Out.find(" (the first")),
            "bisect: the hypervisor traces of A and B diverge at VM exit 150 of CPU 1");
  std::remove(Changed.c_str());
}

TEST(Bisect, ABadTraceAsSideBIsOneLineAndStatus2) {
  const std::string Truncated = tempPath("dir") + "/truncated.xt",
                    Empty = tempPath("dir") + "/empty.xt", Kvm = tempPath("dir") + "/kvm.xt";
  const std::string Bochs = readFile(bochsTrace());
  std::ofstream(Truncated, std::ios::binary) << Bochs.substr(0, Bochs.size() - 3);
  std::ofstream(Empty, std::ios::binary) << "";
  std::filesystem::copy_file(std::string(VMXSIM_SOURCE_DIR) + "/tests/trace/golden/kvm_2cpu/kvm.xt",
                             Kvm, std::filesystem::copy_options::overwrite_existing);
  const std::string Capture =
      std::string(VMXSIM_SOURCE_DIR) + "/tests/hvm/golden/bochs_hv_mixed_2cpu.txt";
  struct Case {
    std::string File, Err;
  } Cases[] = {
      {Truncated, "vmxsim: error: B: " + Truncated + ": offset 0x4ed8: file ends inside a "
                  "record (13 of its bytes present) in the window of CPU 0 (window header at "
                  "0x4e74, 104 bytes announced)\n"},
      {Empty, "vmxsim: error: B: " + Empty + ": an empty trace (no records)\n"},
      // The capture itself, not imported.
      {Capture, "vmxsim: error: B: " + Capture + ": offset 0x0: neither trace flavour: the "
                "first word 0x4f432023 is not a TRACE_CPU_CHANGE header (0x2001f003, modern) "
                "nor a pcpu number below 256 (xen-3.0)\n"},
      {Kvm, "vmxsim: error: B: " + Kvm + ": KVM's events imported from ftrace (trace import "
            "--ftrace): bisect takes vmxsim's ground truth or the trace of a hypervisor the "
            "run side drains (--xentrace) or streams (tstream=auto)\n"},
  };
  for (const Case &C : Cases) {
    const CmdResult R = runCmd("bisect --a '" + MixedArgs + "' --b-trace " + C.File + " --ignore-tsc");
    EXPECT_EQ(R.Status, 2) << C.File;
    EXPECT_EQ(R.Err, C.Err);
    EXPECT_EQ(R.Out, "");
  }
  // A side A that writes no hypervisor trace (no drain, no stream).
  const CmdResult R = runCmd("bisect --a '" + Hv + " --smp 2 --append scenario=mixed' --b-trace " +
                             bochsTrace() + " --ignore-tsc");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: A: its run wrote no hypervisor trace to compare with B's: "
                   "give it --xentrace FILE, or tstream=auto on the image's command line (the "
                   "core then streams its trace through COM1)\n");
  for (const std::string &F : {Truncated, Empty, Kvm})
    std::remove(F.c_str());
}

// A side whose input log holds gdb's writes: bisect does not replay them (one line, 2).
TEST(Bisect, ASideReplayingGdbWritesIsRefused) {
  const std::string Log = tempPath("dir") + "/gdb.log";
  ASSERT_EQ(runCmd("run -q --debugcon none --record-input " + Log + " " + Bench +
                   " --append iters=10")
                .Status,
            1);
  std::string Text = readFile(Log);
  ASSERT_NE(Text.find("end events=0\n"), std::string::npos) << Text;
  Text.replace(Text.find("end events=0\n"), std::string::npos,
               "gdb stop insns=5 cycles=100\ngdb reg cpu=0 name=rax bytes=0100000000000000\n"
               "end events=2\n");
  std::ofstream(Log, std::ios::binary) << Text;
  const CmdResult R = runCmd("bisect --a '" + Bench + " --append iters=10' --b '" + Bench +
                             " --append iters=10 --replay-input " + Log + "'");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: B: its input log holds gdb's writes, which bisect does not "
                   "replay (`vmxsim run --replay-input` does)\n");
  EXPECT_EQ(R.Out, "");
  std::remove(Log.c_str());
}
