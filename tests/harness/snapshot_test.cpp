// Snapshots (Machine::saveSnapshot / Machine::restoreSnapshot, harness/snapshot.cpp):
// a run saved at a point and restored into a fresh machine continues byte for byte as
// the run that was never saved (COM1's output, the ground truth, the hypervisor's own
// trace, the clocks and instruction counts), at instruction totals, in VMX non-root
// operation and in the middle of the hypervisor's exit handler; taking a snapshot
// changes nothing of the run it is taken in; every bad file is a one-line error that
// leaves the machine as it was.
#include "harness/devices/stop_latch.h"
#include "harness/machine.h"
#include "state/snapshot_io.h"
#include "tests/support/files.h"
#include "tests/support/linux_kit_config.h"
#include "tests/support/traced_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <sys/wait.h>

using namespace vmxsim;
using vmxsim::test::readFile;
using vmxsim::test::tracedTempPath;

namespace {

struct RunSetup {
  std::string Image, Append;
  unsigned Cpus = 1;
  bool Traces = true;
  bool GroundTruthInsns = false;
  uint64_t RamBytes = 256ull << 20;
};

/// A machine of RunSetup whose outputs go to files named after Tag (COM1 captured).
struct TestRun : vmxsim::test::TracedMachine {
  TestRun(const RunSetup &S, const std::string &Tag)
      : TracedMachine(S.Image, S.Append, S.Cpus, Tag, "snapshot",
                      Options{S.Traces, S.GroundTruthInsns, S.RamBytes}) {}
};

std::string snapshotPath(const std::string &Tag) {
  return tracedTempPath("snapshot", Tag + ".snap");
}

/// The uninterrupted run's output that a restored run must write: the bytes after the
/// snapshot's offset.
std::string after(const std::string &Whole, uint64_t Offset) {
  EXPECT_LE(Offset, Whole.size());
  return Offset <= Whole.size() ? Whole.substr(Offset) : std::string();
}

void expectSameEnd(const TestRun::Outcome &A, const TestRun::Outcome &B) {
  EXPECT_EQ(A.Result.Reason, B.Result.Reason);
  EXPECT_EQ(A.Result.ExitStatus, B.Result.ExitStatus);
  EXPECT_EQ(A.Result.Retired, B.Result.Retired);
  EXPECT_EQ(A.Cycles, B.Cycles);
  EXPECT_EQ(A.Retired, B.Retired);
}

/// Brings a machine to the point of the snapshot.
using StopFn = std::function<void(Machine &)>;

/// What a snapshot test found, for the tests' own checks of the point.
struct Checked {
  Machine::OutputOffsets Offsets;
  uint64_t SnapshotBytes = 0;
};

/// The whole property: the uninterrupted run A; the run S stopped by Stop, saved, and
/// continued (must be A: saving changes nothing); a fresh machine R restored from the
/// file and run to the end (must write exactly A's outputs after the offsets).
Checked checkRestoreIsTheUninterruptedRun(const RunSetup &S, const std::string &Tag,
                                          const StopFn &Stop,
                                          const std::function<void(Machine &)> &AtPoint = {}) {
  Checked C;
  TestRun A(S, Tag + "-whole");
  TestRun Saved(S, Tag + "-saved");
  TestRun Restored(S, Tag + "-restored");
  if (!A.M || !Saved.M || !Restored.M)
    return C;
  const TestRun::Outcome Whole = A.finish();
  Stop(*Saved.M);
  if (AtPoint)
    AtPoint(*Saved.M);
  const std::string File = snapshotPath(Tag);
  const Error E = Saved.M->saveSnapshot(File);
  EXPECT_FALSE(E) << E.str();
  C.Offsets = Saved.M->currentOutputOffsets();
  C.SnapshotBytes = readFile(File).size();
  const TestRun::Outcome Continued = Saved.finish();
  expectSameEnd(Whole, Continued);
  EXPECT_EQ(Whole.Serial, Continued.Serial);
  EXPECT_TRUE(Whole.GtBytes == Continued.GtBytes) << "saving changed the ground truth";
  EXPECT_TRUE(Whole.HvBytes == Continued.HvBytes) << "saving changed the hypervisor's trace";

  const Error RE = Restored.M->restoreSnapshot(File);
  EXPECT_FALSE(RE) << RE.str();
  std::remove(File.c_str());
  const Machine::OutputOffsets Off = Restored.M->outputOffsets();
  EXPECT_EQ(Off.Serial, C.Offsets.Serial);
  EXPECT_EQ(Off.GroundTruth, C.Offsets.GroundTruth);
  EXPECT_EQ(Off.Xentrace, C.Offsets.Xentrace);
  const TestRun::Outcome Rest = Restored.finish();
  expectSameEnd(Whole, Rest);
  EXPECT_EQ(Rest.Serial, after(Whole.Serial, Off.Serial));
  EXPECT_TRUE(Rest.GtBytes == after(Whole.GtBytes, Off.GroundTruth))
      << "the restored run's ground truth is not the rest of the uninterrupted one's ("
      << Rest.GtBytes.size() << " bytes from offset " << Off.GroundTruth << " of "
      << Whole.GtBytes.size() << ")";
  EXPECT_TRUE(Rest.HvBytes == after(Whole.HvBytes, Off.Xentrace))
      << "the restored run's hypervisor trace is not the rest of the uninterrupted one's";
  if (S.Traces) {
    EXPECT_GT(Whole.GtBytes.size(), 10000u);
    EXPECT_GT(Whole.HvBytes.size(), 10000u);
  }
  return C;
}

StopFn atRetired(uint64_t Total) {
  return [Total](Machine &M) {
    const RunResult R = M.runToRetired(Total);
    EXPECT_EQ(R.Reason, RunReason::Stopped);
    EXPECT_EQ(R.Retired, Total);
  };
}

StopFn until(std::vector<StopWhen> Conditions) {
  return [Conditions](Machine &M) {
    for (const StopWhen &W : Conditions) {
      const ErrorOr<RunResult> R = M.runUntil({W});
      ASSERT_TRUE(R) << R.error().str();
      EXPECT_EQ(R->Reason, RunReason::Stopped);
    }
  };
}

const RunSetup kMixed2{"hv.elf", "scenario=mixed", 2};

} // namespace

TEST(Snapshot, HypervisorCoreRestoredAtInstructionTotalsIsTheUninterruptedRun) {
  for (uint64_t N : {1ull, 100'000ull, 333'333ull, 900'000ull, 1'256'000ull}) {
    SCOPED_TRACE(N);
    checkRestoreIsTheUninterruptedRun(kMixed2, "total-" + std::to_string(N), atRetired(N));
  }
}

TEST(Snapshot, HypervisorCoreRestoredInVmxNonRootOperation) {
  // After CPU 1's 5th VM entry: its guest runs (non-root), CPU 0 is wherever it is.
  checkRestoreIsTheUninterruptedRun(
      kMixed2, "nonroot", until({StopWhen::vmEntry().onCpu(1).nth(5)}), [](Machine &M) {
        EXPECT_TRUE(M.cpu(1).NonRoot);
        EXPECT_TRUE(M.readVmcs(1, "GuestRip")); // a current VMCS, cached on the CPU
      });
}

TEST(Snapshot, HypervisorCoreRestoredInTheMiddleOfTheExitHandler) {
  // Seven instructions into CPU 0's handling of its 20th VM exit: root operation, with
  // a current VMCS, past the host RIP.
  checkRestoreIsTheUninterruptedRun(
      kMixed2, "handler",
      until({StopWhen::vmExit().onCpu(0).nth(20), StopWhen::instructions(7).onCpu(0)}),
      [](Machine &M) {
        EXPECT_FALSE(M.cpu(0).NonRoot);
        const ErrorOr<uint64_t> HostRip = M.readVmcs(0, "HostRip");
        ASSERT_TRUE(HostRip);
        EXPECT_NE(M.cpu(0).S.Rip, *HostRip);
      });
}

TEST(Snapshot, RestoredGroundTruthContinuesPastBytesAlreadyWritten) {
  // With every instruction recorded the ground truth's per-CPU buffers fill and are
  // written many times before the snapshot: the restored file starts at a real offset.
  const RunSetup S{"hv.elf", "scenario=mixed", 2, true, true};
  const Checked C =
      checkRestoreIsTheUninterruptedRun(S, "gt-insns", atRetired(700'000));
  EXPECT_GT(C.Offsets.GroundTruth, 1'000'000u);
}

TEST(Snapshot, LocalApicTimerAndUartKernelRestoredIsTheUninterruptedRun) {
  // smp.elf: four CPUs counting under a lock, then one-shot local APIC timer interrupts
  // while halted, then a report each on COM1 under a lock.
  const RunSetup S{"smp.elf", "", 4, false};
  for (uint64_t N : {5'000ull, 40'000ull, 120'000ull}) {
    SCOPED_TRACE(N);
    checkRestoreIsTheUninterruptedRun(S, "smp-" + std::to_string(N), atRetired(N));
  }
}

TEST(Snapshot, HoldsOnlyThePagesThatAreNotZero) {
  // Only pages that are not all zero are saved: far less than the 256 MiB of RAM.
  const Checked C = checkRestoreIsTheUninterruptedRun(kMixed2, "size", atRetired(500'000));
  EXPECT_GT(C.SnapshotBytes, 4096u);
  EXPECT_LT(C.SnapshotBytes, 8u << 20);
}

// --- Bad snapshots: one line, a documented error code, the machine unchanged ---

namespace {
std::vector<uint8_t> bytesOf(const std::string &S) { return {S.begin(), S.end()}; }
void writeBytes(const std::string &Path, const std::vector<uint8_t> &B) {
  std::ofstream(Path, std::ios::binary)
      .write(reinterpret_cast<const char *>(B.data()), std::streamsize(B.size()));
}
/// A valid snapshot of kMixed2 at 200,000 instructions.
std::vector<uint8_t> goodSnapshot() {
  TestRun R(kMixed2, "good");
  if (!R.M)
    return {};
  R.M->runToRetired(200'000);
  const std::string File = snapshotPath("good");
  const Error E = R.M->saveSnapshot(File);
  EXPECT_FALSE(E) << E.str();
  std::vector<uint8_t> B = bytesOf(readFile(File));
  std::remove(File.c_str());
  return B;
}
void fixChecksum(std::vector<uint8_t> &B) {
  const uint32_t C = crc32c(0, B.data(), B.size() - 4);
  std::memcpy(B.data() + B.size() - 4, &C, 4);
}
} // namespace

TEST(Snapshot, BadFilesAreOneLineErrorsAndChangeNothing) {
  const std::vector<uint8_t> Good = goodSnapshot();
  ASSERT_GT(Good.size(), 1000u);
  const std::string Total = std::to_string(Good.size());
  struct Case {
    const char *Name;
    std::function<std::vector<uint8_t>()> Bytes;
    ErrorCode Code;
    std::string Message;
  };
  const std::vector<Case> Cases = {
      {"empty", [] { return std::vector<uint8_t>{}; }, ErrorCode::BadSnapshot,
       "truncated snapshot (0 bytes, no header)"},
      {"magic only",
       [&] { return std::vector<uint8_t>(Good.begin(), Good.begin() + 8); },
       ErrorCode::BadSnapshot, "truncated snapshot (8 bytes, no header)"},
      {"truncated",
       [&] { return std::vector<uint8_t>(Good.begin(), Good.begin() + Good.size() / 2); },
       ErrorCode::BadSnapshot,
       "truncated snapshot (" + std::to_string(Good.size() / 2) + " of " + Total + " bytes)"},
      {"last byte missing",
       [&] { return std::vector<uint8_t>(Good.begin(), Good.end() - 1); },
       ErrorCode::BadSnapshot,
       "truncated snapshot (" + std::to_string(Good.size() - 1) + " of " + Total + " bytes)"},
      {"trailing byte",
       [&] {
         auto B = Good;
         B.push_back(0);
         return B;
       },
       ErrorCode::BadSnapshot, "snapshot has 1 trailing bytes after its checksum"},
      {"flipped byte",
       [&] {
         auto B = Good;
         B[B.size() / 3] ^= 0x10;
         return B;
       },
       ErrorCode::BadSnapshot, "snapshot checksum mismatch (the file is corrupt)"},
      {"wrong magic",
       [&] {
         auto B = Good;
         B[0] = 'X';
         return B;
       },
       ErrorCode::BadSnapshot, "not a vmxsim snapshot (wrong magic)"},
      {"an ELF file", [] { return std::vector<uint8_t>{0x7f, 'E', 'L', 'F', 2, 1, 1, 0}; },
       ErrorCode::BadSnapshot, "not a vmxsim snapshot (wrong magic)"},
      {"newer version",
       [&] {
         auto B = Good;
         B[8] = uint8_t(kSnapshotFormatVersion + 1);
         return B;
       },
       ErrorCode::BadSnapshot,
       "snapshot format version " + std::to_string(kSnapshotFormatVersion + 1) +
           " is newer than this vmxsim's (" + std::to_string(kSnapshotFormatVersion) + ")"},
      {"unknown section after a valid checksum",
       [&] {
         auto B = Good;
         // Rename the CONF section: the checksum is recomputed, the structure is wrong.
         std::memcpy(B.data() + kSnapshotHeaderBytes, "COMF", 4);
         fixChecksum(B);
         return B;
       },
       ErrorCode::BadSnapshot, "expected section CONF, found COMF"},
  };
  for (const Case &C : Cases) {
    SCOPED_TRACE(C.Name);
    TestRun R(kMixed2, "bad");
    ASSERT_TRUE(R.M);
    R.M->runToRetired(1000);
    const uint64_t Rip = R.M->cpu(0).S.Rip, Retired = R.M->cpu(0).Retired;
    const std::string File = snapshotPath("bad");
    writeBytes(File, C.Bytes());
    const Error E = R.M->restoreSnapshot(File);
    std::remove(File.c_str());
    EXPECT_EQ(E.Code, C.Code);
    EXPECT_EQ(E.Message, C.Message);
    EXPECT_EQ(E.Path, File);
    EXPECT_EQ(E.str().find('\n'), std::string::npos);
    EXPECT_EQ(R.M->cpu(0).S.Rip, Rip);
    EXPECT_EQ(R.M->cpu(0).Retired, Retired);
  }
  TestRun R(kMixed2, "missing");
  ASSERT_TRUE(R.M);
  const Error E = R.M->restoreSnapshot("/nonexistent/x.snap");
  EXPECT_EQ(E.Code, ErrorCode::FileUnreadable);
  EXPECT_EQ(E.str(), "/nonexistent/x.snap: cannot open snapshot: No such file or directory");
}

TEST(Snapshot, SnapshotOfAnotherConfigurationIsRefusedNamingTheDifference) {
  const std::vector<uint8_t> Good = goodSnapshot();
  ASSERT_GT(Good.size(), 1000u);
  const std::string File = snapshotPath("other");
  writeBytes(File, Good);
  struct Case {
    RunSetup S;
    std::string Message;
  };
  const std::string Hv = std::string(VMXSIM_IMAGE_DIR) + "/hv.elf";
  const std::vector<Case> Cases = {
      {{"hv.elf", "scenario=mixed", 2, true, false, 128ull << 20},
       "snapshot of another machine: memory 268435456 bytes, this machine has 134217728"},
      {{"hv.elf", "scenario=mixed", 1},
       "snapshot of another machine: 2 CPUs, this machine has 1"},
      {{"hv.elf", "scenario=mixed", 2, false},
       "snapshot of another machine: traces ground truth on, ground-truth instructions off, "
       "hypervisor trace on, instruction trace off; this machine has off, off, off, off"},
  };
  for (const Case &C : Cases) {
    SCOPED_TRACE(C.Message);
    TestRun R(C.S, "other");
    ASSERT_TRUE(R.M);
    const Error E = R.M->restoreSnapshot(File);
    EXPECT_EQ(E.Code, ErrorCode::SnapshotMismatch);
    EXPECT_EQ(E.Message, C.Message);
  }
  // Another image (and another command line of the same image): its CRC differs.
  for (const RunSetup &S : {RunSetup{"loop.elf", "", 2}, RunSetup{"hv.elf", "scenario=io", 2}}) {
    TestRun R(S, "other-image");
    ASSERT_TRUE(R.M);
    const Error E = R.M->restoreSnapshot(File);
    EXPECT_EQ(E.Code, ErrorCode::SnapshotMismatch);
    EXPECT_EQ(E.Message.rfind("snapshot of another machine: image '" + Hv + "' (CRC-32C ", 0),
              0u)
        << E.Message;
    EXPECT_NE(E.Message.find(", this machine runs '" + std::string(VMXSIM_IMAGE_DIR) + "/" +
                             S.Image + "' ("),
              std::string::npos)
        << E.Message;
  }
  std::remove(File.c_str());
}

TEST(Snapshot, CorruptSectionsWithAValidChecksumNeverCrash) {
  // Garbage inside the sections (the checksum recomputed, so every loader sees it):
  // each restore returns, with an error or with some machine state; nothing crashes.
  // A fixed seed: the same 120 mutations every time.
  const std::vector<uint8_t> Good = goodSnapshot();
  ASSERT_GT(Good.size(), 1000u);
  uint64_t Seed = 0x9e3779b97f4a7c15ull;
  auto next = [&Seed] {
    Seed ^= Seed << 13;
    Seed ^= Seed >> 7;
    Seed ^= Seed << 17;
    return Seed;
  };
  // The first 2 KiB of every section but the memory pages and the records the trace
  // writers buffer (where the state the loaders check is), section headers included.
  std::vector<size_t> Targets;
  for (size_t Pos = kSnapshotHeaderBytes; Pos + 12 <= Good.size() - 4;) {
    uint64_t Len;
    std::memcpy(&Len, Good.data() + Pos + 4, 8);
    const bool Memory = std::memcmp(Good.data() + Pos, "MEM ", 4) == 0;
    for (size_t I = Pos; I < Pos + 12 + std::min<uint64_t>(Memory ? 64 : 2048, Len); ++I)
      Targets.push_back(I);
    Pos += 12 + Len;
  }
  ASSERT_GT(Targets.size(), 1000u);
  const std::string File = snapshotPath("mutated");
  unsigned Refused = 0;
  for (unsigned I = 0; I < 120; ++I) {
    std::vector<uint8_t> B = Good;
    const size_t Pos = Targets[next() % Targets.size()];
    B[Pos] ^= uint8_t(1u << (next() % 8));
    fixChecksum(B);
    writeBytes(File, B);
    TestRun R(kMixed2, "mutated");
    ASSERT_TRUE(R.M);
    const Error E = R.M->restoreSnapshot(File);
    Refused += bool(E);
    if (E) {
      EXPECT_EQ(E.str().find('\n'), std::string::npos);
      continue;
    }
    R.M->setMaxInsns(R.M->cpu(0).Retired + R.M->cpu(1).Retired + 20'000);
    (void)R.M->run();
  }
  std::remove(File.c_str());
  EXPECT_GT(Refused, 0u);
}

TEST(Snapshot, InteractiveSerialInputCannotBeSaved) {
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/hv.elf";
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.SerialIn = "-";
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  const std::string File = snapshotPath("stdin");
  const Error E = M->saveSnapshot(File);
  EXPECT_EQ(E.Code, ErrorCode::NotSnapshottable);
  EXPECT_EQ(E.str(), "cannot snapshot: COM1's serial input is the host's standard input "
                     "(not deterministic)");
  EXPECT_TRUE(readFile(File).empty());
}

TEST(Snapshot, Crc32cIsTheCastagnoliChecksum) {
  EXPECT_EQ(crc32c(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(crc32c(0, "", 0), 0u);
  // In pieces: the same value.
  EXPECT_EQ(crc32c(crc32c(0, "12345", 5), "6789", 4), 0xE3069283u);
}

TEST(Snapshot, StopLatchKeepsTheNameOfAnUnimplementedStop) {
  IoBus Io;
  StopLatch Latch(Io);
  Latch.requestUnimplemented("I/O APIC delivery mode SMI");
  SnapshotWriter W;
  W.begin("LTCH");
  Latch.save(W);
  W.end();

  IoBus Io2;
  StopLatch Restored(Io2);
  SnapshotReader R;
  std::string Why;
  ASSERT_TRUE(R.open(W.finish(), Why)) << Why;
  ASSERT_TRUE(R.begin("LTCH"));
  Restored.load(R);
  ASSERT_TRUE(R.end()) << R.error();
  EXPECT_EQ(Restored.cause(), StopCause::Unimplemented);
  ASSERT_NE(Restored.what(), nullptr);
  EXPECT_STREQ(Restored.what(), "I/O APIC delivery mode SMI");

  // A latch that never stopped stays without a name.
  StopLatch Idle(Io2);
  SnapshotWriter W2;
  W2.begin("LTCH");
  Idle.save(W2);
  W2.end();
  SnapshotReader R2;
  ASSERT_TRUE(R2.open(W2.finish(), Why)) << Why;
  ASSERT_TRUE(R2.begin("LTCH"));
  Restored.load(R2);
  ASSERT_TRUE(R2.end());
  EXPECT_EQ(Restored.what(), nullptr);
}

// --- The Debian Linux boot (scripts/fetch-guests.sh's cache; skipped without it) ---

namespace {
/// The cached kernel and initramfs, 512 MiB, "console=ttyS0", COM1 captured; false when
/// the cache lacks them.
bool debianLinux(MachineConfig &Cfg) {
  if (!vmxsim::test::debianLinuxBootConfig(Cfg, OutputSpec::capture()))
    return false;
  Cfg.MaxInsns = 12'000'000'000;
  return true;
}
} // namespace

TEST(LinuxBootSnapshot, MidBootSnapshotRestoresToTheSameBootAndPowerOff) {
  MachineConfig Cfg;
  if (!debianLinux(Cfg))
    GTEST_SKIP() << "no Debian kernel in the guest cache '" << vmxsim::test::guestCache()
                 << "': run scripts/fetch-guests.sh";
  Error Err;
  auto Saved = Machine::create(Cfg, Err);
  ASSERT_TRUE(Saved) << Err.str();
  // 5e9 of the boot's 5.9e9 instructions: the kernel is printing its log on COM1 (it
  // starts after 4.5e9, once the console is registered).
  const RunResult At = Saved->runToRetired(5'000'000'000);
  ASSERT_EQ(At.Reason, RunReason::Stopped) << At.summary();
  const std::string File = snapshotPath("linux");
  const Error E = Saved->saveSnapshot(File);
  ASSERT_FALSE(E) << E.str();
  const uint64_t SerialAt = Saved->currentOutputOffsets().Serial;
  EXPECT_GT(SerialAt, 10000u); // the kernel has printed its log by then
  const uint64_t Bytes = readFile(File).size();
  EXPECT_LT(Bytes, 256u << 20); // the pages that are not zero, not all 512 MiB
  const RunResult Whole = Saved->run();
  ASSERT_EQ(Whole.Reason, RunReason::PowerOff) << Whole.summary();
  const std::string WholeSerial = Saved->serialOutput();
  const uint64_t WholeCycles = Saved->cpu(0).Cycles;
  Saved.reset();

  auto Restored = Machine::create(Cfg, Err);
  ASSERT_TRUE(Restored) << Err.str();
  const Error RE = Restored->restoreSnapshot(File);
  std::remove(File.c_str());
  ASSERT_FALSE(RE) << RE.str();
  EXPECT_EQ(Restored->outputOffsets().Serial, SerialAt);
  const RunResult Rest = Restored->run();
  EXPECT_EQ(Rest.Reason, RunReason::PowerOff);
  EXPECT_EQ(Rest.Retired, Whole.Retired);
  EXPECT_EQ(Restored->cpu(0).Cycles, WholeCycles);
  EXPECT_EQ(Restored->serialOutput(), after(WholeSerial, SerialAt));
  EXPECT_NE(Restored->serialOutput().find("reboot: Power down"), std::string::npos);
}

// --- The command: --snapshot-at, --restore, and status 16 for a bad snapshot ---

namespace {
struct Cmd {
  int Status;
  std::string Err;
};
Cmd vmxsimCommand(const std::string &Args) {
  const std::string Err = tracedTempPath("snapshot", "cmd.err");
  const std::string Line = std::string(VMXSIM_BINARY_DIR) + "/vmxsim " + Args + " 2>" + Err +
                           " >/dev/null </dev/null";
  const int St = std::system(Line.c_str());
  Cmd C{WIFEXITED(St) ? WEXITSTATUS(St) : -1, readFile(Err)};
  std::remove(Err.c_str());
  return C;
}
} // namespace

TEST(SnapshotCommand, RestoredRunWritesTheRestOfEveryOutput) {
  const std::string Dir = tracedTempPath("snapshot", "dir");
  std::filesystem::create_directories(Dir);
  const std::string Image = std::string(VMXSIM_IMAGE_DIR) + "/hv.elf";
  const std::string Common = "run " + Image + " --append scenario=mixed --smp 2 --debugcon none -q";
  const std::string Ser = Dir + "/whole.ser", Gt = Dir + "/whole.gt", Hv = Dir + "/whole.hv";
  Cmd A = vmxsimCommand(Common + " --serial " + Ser + " --trace-ground-truth " + Gt +
                        " --xentrace " + Hv + " --snapshot-at 300000,600000 --snapshot-dir " +
                        Dir);
  EXPECT_EQ(A.Status, 1) << A.Err; // the guest's exit 0 through isa-debug-exit
  for (const char *N : {"300000", "600000"}) {
    SCOPED_TRACE(N);
    const std::string Snap = Dir + "/vmxsim-" + N + ".snap";
    const std::string RSer = Dir + "/r.ser", RGt = Dir + "/r.gt", RHv = Dir + "/r.hv";
    Cmd R = vmxsimCommand(Common + " --serial " + RSer + " --trace-ground-truth " + RGt +
                          " --xentrace " + RHv + " --restore " + Snap);
    EXPECT_EQ(R.Status, 1) << R.Err;
    for (auto [W, Rest] : {std::pair{Ser, RSer}, std::pair{Gt, RGt}, std::pair{Hv, RHv}}) {
      const std::string Whole = readFile(W), Tail = readFile(Rest);
      ASSERT_LE(Tail.size(), Whole.size()) << W;
      EXPECT_TRUE(Whole.substr(Whole.size() - Tail.size()) == Tail) << W;
    }
    // Quiet, so nothing on stderr; without -q one line says where the outputs continue.
    EXPECT_EQ(R.Err, "");
  }
  // Every 500,000 instructions: the same outputs, and a snapshot at each multiple.
  const std::string Every = Dir + "/every";
  std::filesystem::create_directories(Every);
  Cmd E = vmxsimCommand(Common + " --serial " + Every + "/e.ser --trace-ground-truth " +
                        Every + "/e.gt --xentrace " + Every + "/e.hv --snapshot-every 500000 "
                        "--snapshot-dir " + Every);
  EXPECT_EQ(E.Status, 1) << E.Err;
  EXPECT_EQ(readFile(Every + "/e.ser"), readFile(Ser));
  EXPECT_TRUE(readFile(Every + "/e.gt") == readFile(Gt));
  EXPECT_TRUE(readFile(Every + "/e.hv") == readFile(Hv));
  std::vector<std::string> Names;
  for (const auto &F : std::filesystem::directory_iterator(Every))
    if (F.path().extension() == ".snap")
      Names.push_back(F.path().filename().string());
  std::sort(Names.begin(), Names.end());
  EXPECT_EQ(Names, (std::vector<std::string>{"vmxsim-1000000.snap", "vmxsim-500000.snap"}));
  // A flipped byte: one line, status 16.
  std::string Bytes = readFile(Dir + "/vmxsim-300000.snap");
  ASSERT_GT(Bytes.size(), 100u);
  Bytes[Bytes.size() / 2] ^= 1;
  const std::string Bad = Dir + "/bad.snap";
  writeBytes(Bad, bytesOf(Bytes));
  Cmd B = vmxsimCommand(Common + " --serial none --restore " + Bad);
  EXPECT_EQ(B.Status, kExitSnapshot);
  EXPECT_EQ(B.Err, "vmxsim: error: " + Bad + ": snapshot checksum mismatch (the file is corrupt)\n");
  // Another CPU count: one line naming it, status 16.
  Cmd C = vmxsimCommand("run " + Image + " --append scenario=mixed --smp 1 --debugcon none -q "
                        "--serial none --restore " + Dir + "/vmxsim-300000.snap");
  EXPECT_EQ(C.Status, kExitSnapshot);
  EXPECT_EQ(C.Err, "vmxsim: error: " + Dir +
                       "/vmxsim-300000.snap: snapshot of another machine: 2 CPUs, this machine "
                       "has 1\n");
  // A missing --snapshot-dir is made (nested); one that cannot be is refused before the
  // run, with status 2, not at the first snapshot.
  const std::string Made = Dir + "/made/deeper";
  Cmd D = vmxsimCommand(Common + " --serial none --snapshot-at 300000 --snapshot-dir " + Made);
  EXPECT_EQ(D.Status, 1) << D.Err;
  EXPECT_TRUE(std::filesystem::exists(Made + "/vmxsim-300000.snap"));
  const std::string NotDir = Dir + "/whole.ser/sub";
  Cmd F = vmxsimCommand(Common + " --serial none --snapshot-at 300000 --snapshot-dir " + NotDir);
  EXPECT_EQ(F.Status, 2);
  EXPECT_EQ(F.Err.rfind("vmxsim: error: --snapshot-dir: '" + NotDir +
                            "' is not a folder snapshots can be written to (",
                        0),
            0u)
      << F.Err;
  EXPECT_EQ(std::count(F.Err.begin(), F.Err.end(), '\n'), 1);
  std::filesystem::remove_all(Dir);
}
