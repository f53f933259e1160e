// Issue 11: what bad input, full disks and interruptions get from the vmxsim command —
// one line and the documented status, never a hang, a crash or lost output. These run
// the real vmxsim program (VMXSIM_BINARY_DIR) as a user would, with a bound on every
// wait so that a regression shows as a failure, not as a hung test.
#include "harness/loader.h"
#include "harness/machine.h"
#include "harness/testing/multiboot_images.h"
#include "tests/support/files.h"
#include "trace/reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::testing;
using vmxsim::test::readFile;

namespace {

const std::string kVmxsim = std::string(VMXSIM_BINARY_DIR) + "/vmxsim";
const std::string kImages = VMXSIM_IMAGE_DIR;

std::string tempPath(const std::string &Name) {
  return (std::filesystem::temp_directory_path() /
          ("vmxsim_reliability_" + std::to_string(::getpid()) + "_" + Name))
      .string();
}

void writeBytes(const std::string &Path, const std::vector<uint8_t> &B) {
  std::ofstream(Path, std::ios::binary)
      .write(reinterpret_cast<const char *>(B.data()), std::streamsize(B.size()));
}

size_t lines(const std::string &S) { return size_t(std::count(S.begin(), S.end(), '\n')); }

/// A vmxsim process started with fork/exec: stdout and stderr go to files, stdin is
/// /dev/null.
struct Child {
  pid_t Pid = -1;
  std::string OutPath, ErrPath;
  int Status = -1; ///< exit status once reaped; -1 while running, -2 killed by a signal

  std::string out() const { return readFile(OutPath); }
  std::string err() const { return readFile(ErrPath); }

  /// Waits at most Seconds for the exit; kills the process (and returns false) past it.
  bool wait(double Seconds = 60) {
    const auto End = std::chrono::steady_clock::now() + std::chrono::duration<double>(Seconds);
    for (;;) {
      int St = 0;
      const pid_t R = ::waitpid(Pid, &St, WNOHANG);
      if (R == Pid) {
        Status = WIFEXITED(St) ? WEXITSTATUS(St) : -2;
        return true;
      }
      if (std::chrono::steady_clock::now() > End) {
        ::kill(Pid, SIGKILL);
        ::waitpid(Pid, &St, 0);
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  bool running() {
    int St = 0;
    const pid_t R = ::waitpid(Pid, &St, WNOHANG);
    if (R == Pid) {
      Status = WIFEXITED(St) ? WEXITSTATUS(St) : -2;
      return false;
    }
    return true;
  }
  ~Child() {
    if (Status == -1 && Pid > 0) {
      ::kill(Pid, SIGKILL);
      ::waitpid(Pid, nullptr, 0);
    }
    std::remove(OutPath.c_str());
    std::remove(ErrPath.c_str());
  }
};

void spawn(Child &C, const std::vector<std::string> &Args, const std::string &StdoutPath = {}) {
  static unsigned Seq = 0;
  ++Seq;
  C.OutPath = StdoutPath.empty() ? tempPath("out" + std::to_string(Seq)) : StdoutPath;
  C.ErrPath = tempPath("err" + std::to_string(Seq));
  std::vector<char *> Argv;
  Argv.push_back(const_cast<char *>(kVmxsim.c_str()));
  for (const std::string &A : Args)
    Argv.push_back(const_cast<char *>(A.c_str()));
  Argv.push_back(nullptr);
  C.Pid = ::fork();
  if (C.Pid == 0) {
    int In = ::open("/dev/null", O_RDONLY);
    int Out = ::open(C.OutPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int Err = ::open(C.ErrPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(In, 0);
    ::dup2(Out, 1);
    ::dup2(Err, 2);
    ::execv(kVmxsim.c_str(), Argv.data());
    ::_exit(127);
  }
}

/// Runs vmxsim to its end (bounded); Status -1 if it had to be killed.
struct Result {
  int Status;
  std::string Out, Err;
};
Result run(const std::vector<std::string> &Args, double Seconds = 60) {
  Child C;
  spawn(C, Args);
  const bool Ended = C.wait(Seconds);
  return {Ended ? C.Status : -1, C.out(), C.err()};
}

/// Polls until File contains Text (bounded).
bool waitForText(const std::string &File, const std::string &Text, double Seconds = 30) {
  const auto End = std::chrono::steady_clock::now() + std::chrono::duration<double>(Seconds);
  while (std::chrono::steady_clock::now() < End) {
    if (readFile(File).find(Text) != std::string::npos)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

/// Reads a trace file to its end: the number of records, and whether it ended cleanly.
struct TraceRead {
  uint64_t Records = 0;
  bool Clean = false;
  std::string Error;
};
TraceRead readTrace(const std::string &Path) {
  trace::TraceReader R;
  TraceRead Out;
  if (!R.open(Path, Out.Error))
    return Out;
  trace::TraceRecord Rec;
  while (R.next(Rec))
    ++Out.Records;
  Out.Clean = !R.failed();
  if (R.failed())
    Out.Error = R.error().str();
  return Out;
}

class TempFifo {
public:
  explicit TempFifo(const std::string &Name) : Path(tempPath(Name)) {
    std::remove(Path.c_str());
    EXPECT_EQ(::mkfifo(Path.c_str(), 0600), 0);
  }
  ~TempFifo() { std::remove(Path.c_str()); }
  const std::string Path;
};

} // namespace

// --- Hangs -----------------------------------------------------------------------------

TEST(Reliability, FifoAsImageOrModuleIsRefusedAtOnce) {
  TempFifo F("image_fifo");
  Result R = run({"run", F.Path}, 20);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: " + F.Path + ": is a FIFO, not a regular file\n");
  R = run({"run", kImages + "/selftest.elf", "--initrd", F.Path + " args"}, 20);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: " + F.Path + ": is a FIFO, not a regular file\n");
  R = run({"xcheck", F.Path}, 20);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: " + F.Path + ": is a FIFO, not a regular file\n");
}

TEST(Reliability, JitStatsPrintTheBlocksDecodedInEveryExecutionMode) {
  // --jit-stats: the decoder's count per CPU in every mode, the translator's line only
  // where there is a translator. loop.elf decodes 181 blocks whichever mode runs it.
  for (const char *Mode : {"interp", "translate"}) {
    SCOPED_TRACE(Mode);
    Result R = run({"run", "-q", "--jit-stats", "--exec", Mode, kImages + "/loop.elf",
                    "--append", "iters=1000"});
    EXPECT_EQ(R.Status, 1); // the guest's isa-debug-exit 0
    EXPECT_NE(R.Err.find("vmxsim: CPU 0 decoder: 181 blocks decoded\n"), std::string::npos)
        << R.Err;
    EXPECT_EQ(R.Err.find("vmxsim: CPU 0 jit: ") != std::string::npos,
              std::string(Mode) == "translate")
        << R.Err;
  }
}

// "START SIZE vmxsim_cpu0_rip_RIP_pa_PA_nCOUNT", hex but the count; written out by hand:
// GCC 12's <regex> trips -Wmaybe-uninitialized in the sanitizer build.
static bool isPerfMapLine(std::string_view L) {
  auto Run = [&L](const char *Digits) {
    const size_t N = std::min(L.find_first_not_of(Digits), L.size());
    L.remove_prefix(N);
    return N != 0;
  };
  auto Take = [&L](std::string_view Text) {
    if (L.substr(0, Text.size()) != Text)
      return false;
    L.remove_prefix(Text.size());
    return true;
  };
  const char *Hex = "0123456789abcdef";
  return Run(Hex) && Take(" ") && Run(Hex) && Take(" vmxsim_cpu0_rip_") && Run(Hex) &&
         Take("_pa_") && Run(Hex) && Take("_n") && Run("0123456789") && L.empty();
}

TEST(Reliability, JitPerfMapNamesEveryTranslation) {
  // --jit-perf-map: one line per translation in /tmp/perf-PID.map (the path is said on
  // stderr), as many as --jit-stats counts; refused in one line where nothing is
  // translated.
  Result R = run({"run", "-q", "--jit-stats", "--jit-perf-map", "--exec", "translate",
                  kImages + "/loop.elf", "--append", "iters=1000"});
  EXPECT_EQ(R.Status, 1); // the guest's isa-debug-exit 0
  const std::string Said = "vmxsim: naming the translations in ";
  const size_t At = R.Err.find(Said);
  ASSERT_NE(At, std::string::npos) << R.Err;
  const std::string Path = R.Err.substr(At + Said.size(), R.Err.find('\n', At) - At - Said.size());
  ASSERT_EQ(Path.rfind("/tmp/perf-", 0), 0u) << Path;
  const size_t T = R.Err.find(" blocks translated");
  ASSERT_NE(T, std::string::npos) << R.Err;
  const size_t From = R.Err.rfind(' ', T - 1) + 1;
  const unsigned long Translated = std::stoul(R.Err.substr(From, T - From));
  EXPECT_GT(Translated, 0u);
  std::ifstream In(Path);
  ASSERT_TRUE(In.good()) << Path;
  unsigned long Lines = 0;
  for (std::string L; std::getline(In, L); ++Lines)
    EXPECT_TRUE(isPerfMapLine(L)) << L;
  EXPECT_EQ(Lines, Translated);
  std::remove(Path.c_str());
  R = run({"run", "-q", "--jit-perf-map", kImages + "/loop.elf"});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: --jit-perf-map: nothing is translated with --exec interp\n");
}

TEST(Reliability, DirectoriesAndDevicesAreNotImages) {
  Result R = run({"run", "/dev/null"});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: /dev/null: is a character device, not a regular file\n");
  R = run({"run", "/tmp"});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: /tmp: is a directory, not a regular file\n");
}

TEST(Reliability, SerialFifoSaysThatItWaitsThenDeliversEverything) {
  TempFifo F("serial_fifo");
  Child C;
  spawn(C, {"run", kImages + "/selftest.elf", "--serial", F.Path, "-q"});
  ASSERT_TRUE(waitForText(C.ErrPath, "waiting")) << C.err();
  EXPECT_EQ(C.err(), "vmxsim: --serial " + F.Path + " is a FIFO with no reader yet: waiting for one\n");
  EXPECT_TRUE(C.running());
  // The reader comes: the run starts and the whole report arrives.
  std::string Got;
  {
    int Fd = ::open(F.Path.c_str(), O_RDONLY);
    ASSERT_GE(Fd, 0);
    char Buf[4096];
    for (ssize_t N; (N = ::read(Fd, Buf, sizeof(Buf))) > 0;)
      Got.append(Buf, size_t(N));
    ::close(Fd);
  }
  ASSERT_TRUE(C.wait());
  EXPECT_EQ(C.Status, 1); // the selftest's own exit: isa-debug-exit 0
  EXPECT_NE(Got.find("selftest: 19 passed, 0 failed\n"), std::string::npos) << Got;
}

TEST(Reliability, HugeBssCostsNothingAndClearsWhatAnEarlierSegmentWrote) {
  // 3 GiB of BSS after a few bytes of code: the pages must not be touched (the old
  // loader compared every page with zero, committing page tables and time for each).
  ElfImageOptions O;
  O.BssBytes = 3ull << 30;
  MachineConfig Cfg;
  Cfg.RamBytes = 3584ull << 20;
  Cfg.KernelImage = elf64Image({0xf4}, O);
  Cfg.Kernel = "huge_bss.elf";
  Cfg.Serial = Cfg.Debugcon = OutputSpec::discard();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  const uint64_t Begin = 0x102000, End = 0x100000 + Cfg.KernelImage.size() + O.BssBytes;
  uint8_t *Host = M->mem().ramPointer(Hpa(Begin));
  ASSERT_NE(Host, nullptr);
  const uint64_t Pages = (End - Begin) >> 12;
  std::vector<unsigned char> Resident(Pages);
  ASSERT_EQ(::mincore(Host, Pages << 12, Resident.data()), 0);
  EXPECT_EQ(std::count_if(Resident.begin(), Resident.end(), [](unsigned char V) { return V & 1; }), 0);

  // Two segments: the second one's BSS covers bytes the first one wrote; they read zero.
  // The first segment is the whole 0x900-byte file at 1 MiB, the second 4 KiB of zeros
  // at 0x100800.
  std::vector<uint8_t> Two = elf64CodeAndBss(0x100800, 0x1000, 0x900);
  Two[0x800] = 0x5a; // written by the first segment at 0x100800 ...
  Two[0x8ff] = 0xa5; // ... and 0x1008ff, inside the second one's BSS
  Cfg.RamBytes = 64ull << 20;
  Cfg.KernelImage = Two;
  auto M2 = Machine::create(Cfg, Err);
  ASSERT_TRUE(M2) << Err.str();
  EXPECT_EQ(M2->mem().read(Hpa(0x100800), 1), 0u);
  EXPECT_EQ(M2->mem().read(Hpa(0x1008ff), 1), 0u);
  EXPECT_EQ(M2->mem().read(Hpa(0x1000bc), 1), 0xf4u); // the code is still there
}

TEST(Reliability, HeaderIsCheckedBeforeTheFileIsRead) {
  // A 2 GiB file of zeros (sparse) has no Multiboot header: refusing it must not read
  // the file (the old loader read all of it first: 2 GiB of resident memory).
  const std::string Path = tempPath("big_image");
  {
    int Fd = ::open(Path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(Fd, 0);
    ASSERT_EQ(::ftruncate(Fd, 2ll << 30), 0);
    ::close(Fd);
  }
  struct rusage Before, After;
  ::getrusage(RUSAGE_SELF, &Before);
  ImageFile F;
  Error E = ImageFile::open(Path, 4ull << 30, F);
  ASSERT_FALSE(E) << E.str();
  ASSERT_EQ(F.bytes().size(), 2ull << 30);
  PhysMem Mem(64ull << 20);
  IoBus Io;
  Cpu C(Mem, Io, CpuModel::defaultModel());
  E = loadMultiboot(C, F.bytes(), MultibootParams{});
  EXPECT_EQ(E.Code, ErrorCode::NotAnImage);
  EXPECT_EQ(E.Message, "not an ELF file and no Multiboot header in the first 8192 bytes");
  ::getrusage(RUSAGE_SELF, &After);
  EXPECT_LT(After.ru_maxrss - Before.ru_maxrss, 64 * 1024) << "KiB of new resident memory";
  // The command says the same, quickly.
  Result R = run({"run", "-m", "4G", Path}, 20);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: " + Path +
                       ": not an ELF file and no Multiboot header in the first 8192 bytes\n");
  std::remove(Path.c_str());
}

// --- Output lost when a run is interrupted ------------------------------------------------

TEST(Reliability, SigintStopsTheRunWithEveryOutputFlushedAndValid) {
  const std::string Serial = tempPath("int_serial"), Hv = tempPath("int_hv.xt"),
                    Gt = tempPath("int_gt.xt");
  Child C;
  spawn(C, {"run", kImages + "/vmx_bench.elf", "--append", "iters=1000000000 trace=1",
            "--serial", Serial, "--xentrace", Hv, "--trace-ground-truth", Gt, "-q"});
  // The first line reaches the file as the guest writes it (not at the end).
  ASSERT_TRUE(waitForText(Serial, "\n")) << C.err();
  EXPECT_EQ(readFile(Serial), "vmx_bench: start iters=1000000000 trace=1\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ::kill(C.Pid, SIGINT);
  ASSERT_TRUE(C.wait(30));
  EXPECT_EQ(C.Status, 12);
  // The summary is printed even with -q: where it stopped, on which CPU.
  const std::string Err = C.err();
  EXPECT_EQ(lines(Err), 1u) << Err;
  EXPECT_EQ(Err.rfind("vmxsim: stopped by SIGINT at RIP=0x", 0), 0u) << Err;
  EXPECT_NE(Err.find(" (CPU 0); "), std::string::npos) << Err;
  EXPECT_NE(Err.find(" instructions, "), std::string::npos) << Err;
  // Both traces end cleanly and hold what was recorded up to the stop.
  const TraceRead H = readTrace(Hv), G = readTrace(Gt);
  EXPECT_TRUE(H.Clean) << H.Error;
  EXPECT_TRUE(G.Clean) << G.Error;
  EXPECT_GT(H.Records, 1000u);
  EXPECT_GT(G.Records, 1000u);
  for (const std::string &P : {Serial, Hv, Gt})
    std::remove(P.c_str());
}

TEST(Reliability, SigtermStopsSeveralCpusAndSighupOne) {
  const std::string Serial = tempPath("term_serial");
  {
    Child C;
    spawn(C, {"run", kImages + "/vmx_bench.elf", "--smp", "4", "--append", "iters=1000000000",
              "--serial", Serial});
    ASSERT_TRUE(waitForText(Serial, "\n")) << C.err();
    ::kill(C.Pid, SIGTERM);
    ASSERT_TRUE(C.wait(30));
    EXPECT_EQ(C.Status, 12);
    EXPECT_EQ(C.err().rfind("vmxsim: stopped by SIGTERM at RIP=0x", 0), 0u) << C.err();
  }
  std::remove(Serial.c_str());
  {
    Child C;
    spawn(C, {"run", kImages + "/loop.elf", "--append", "iters=100000000000", "--serial", Serial});
    ASSERT_TRUE(waitForText(Serial, "loop: start")) << C.err();
    EXPECT_EQ(readFile(Serial), "loop: start iters=100000000000\n");
    ::kill(C.Pid, SIGHUP);
    ASSERT_TRUE(C.wait(30));
    EXPECT_EQ(C.Status, 12);
    EXPECT_EQ(C.err().rfind("vmxsim: stopped by SIGHUP at RIP=0x", 0), 0u) << C.err();
  }
  std::remove(Serial.c_str());
}

TEST(Reliability, SecondSignalExitsAtOnce) {
  // Waiting for a FIFO's reader, the first SIGINT cannot stop a run that has not
  // started; the second ends the process at once.
  TempFifo F("second_sigint");
  Child C;
  spawn(C, {"run", kImages + "/selftest.elf", "--serial", F.Path});
  ASSERT_TRUE(waitForText(C.ErrPath, "waiting")) << C.err();
  ::kill(C.Pid, SIGINT);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(C.running());
  ::kill(C.Pid, SIGINT);
  ASSERT_TRUE(C.wait(10));
  EXPECT_EQ(C.Status, 12);
}

// --- Silent failures ----------------------------------------------------------------------

TEST(Reliability, OutputsThatCannotBeWrittenFailTheRun) {
  const std::string Full = "vmxsim: error: /dev/full: cannot write: No space left on device\n";
  Result R = run({"run", kImages + "/selftest.elf", "--serial", "/dev/full", "-q"});
  EXPECT_EQ(R.Status, 14);
  EXPECT_EQ(R.Err, Full);
  R = run({"run", kImages + "/vmx_e2e.elf", "--serial", "none", "--xentrace", "/dev/full", "-q"});
  EXPECT_EQ(R.Status, 14);
  EXPECT_EQ(R.Err, Full);
  R = run({"run", kImages + "/vmx_e2e.elf", "--serial", "none", "--trace-ground-truth",
           "/dev/full", "-q"});
  EXPECT_EQ(R.Status, 14);
  EXPECT_EQ(R.Err, Full);
  // Mid-run: the trace files' threads (trace/async_output.h) meet the error at their
  // first window, long before the run ends (vmx_bench's 60,001 traced exits write 27 MB
  // of ground truth and 3 MB of hypervisor trace); the run goes on to the guest's end,
  // the rest of the file is dropped, and the one line is the same.
  for (const char *Option : {"--trace-ground-truth", "--xentrace"}) {
    R = run({"run", kImages + "/vmx_bench.elf", "--append", "iters=20000 trace=1", "--serial",
             "none", Option, "/dev/full", "-q"});
    EXPECT_EQ(R.Status, 14) << Option;
    EXPECT_EQ(R.Err, Full) << Option;
  }
  R = run({"run", kImages + "/selftest.elf", "--serial", "none", "--trace-insns", "/dev/full",
           "--max-insns", "20000", "-q"});
  EXPECT_EQ(R.Status, 14); // takes precedence over the instruction limit's 4
  EXPECT_EQ(R.Err.rfind("vmxsim: instruction limit reached at RIP=0x", 0), 0u) << R.Err;
  EXPECT_EQ(R.Err.substr(R.Err.find('\n') + 1), Full);
  // The guest's output on a full stdout.
  Child C;
  spawn(C, {"run", kImages + "/selftest.elf", "-q"}, "/dev/full");
  C.OutPath.clear(); // not ours to remove
  ASSERT_TRUE(C.wait());
  EXPECT_EQ(C.Status, 14);
  EXPECT_EQ(C.err(), "vmxsim: error: standard output: cannot write: No space left on device\n");
}

// A reader that goes away mid-run (a closed pipe): the trace file's thread gets EPIPE
// (SIGPIPE is ignored, and blocked in that thread), the run goes on to the guest's end,
// and the one line names the file. The test's reader is open before vmxsim starts, reads
// until the first byte comes (vmxsim then waits on the full pipe: 27 MB to write), and
// closes: no timing decides the outcome.
TEST(Reliability, ATraceFileWhoseReaderLeavesFailsTheRun) {
  for (const char *Option : {"--trace-ground-truth", "--xentrace"}) {
    TempFifo F(std::string("reader_leaves") + (Option[2] == 't' ? "_gt" : "_hv"));
    const int Reader = ::open(F.Path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    ASSERT_GE(Reader, 0);
    Child C;
    spawn(C, {"run", kImages + "/vmx_bench.elf", "--append", "iters=20000 trace=1", "--serial",
              "none", Option, F.Path, "-q"});
    char Byte = 0;
    ssize_t Got = 0;
    while (Got != 1 && C.running()) {
      Got = ::read(Reader, &Byte, 1); // 0 before vmxsim opens the FIFO, -1 before bytes
      if (Got != 1)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ(Got, 1);
    ::close(Reader);
    if (C.Status == -1) { // not reaped by running()
      ASSERT_TRUE(C.wait());
    }
    EXPECT_EQ(C.Status, 14) << Option;
    EXPECT_EQ(C.err(), "vmxsim: error: " + F.Path + ": cannot write: Broken pipe\n") << Option;
  }
}

TEST(Reliability, TraceCommandsFailOnAFullDisk) {
  const std::string Hv = tempPath("full_hv.xt");
  ASSERT_EQ(run({"run", kImages + "/vmx_e2e.elf", "--serial", "none", "--xentrace", Hv, "-q"}).Status, 1);
  Result R = run({"trace", "summary", Hv, "-o", "/dev/full"});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: /dev/full: cannot write: No space left on device\n");
  R = run({"trace", "report", Hv, "-o", "/dev/full"});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(lines(R.Err), 1u) << R.Err;
  for (std::vector<std::string> Args :
       {std::vector<std::string>{"trace", "summary", Hv}, {"trace", "dump", Hv},
        {"trace", "diff", Hv, Hv}}) {
    Child C;
    spawn(C, Args, "/dev/full");
    C.OutPath.clear();
    ASSERT_TRUE(C.wait());
    EXPECT_EQ(C.Status, 2) << Args[1];
    EXPECT_EQ(lines(C.err()), 1u) << C.err();
    EXPECT_EQ(C.err().rfind("vmxsim: error: standard output: cannot write", 0), 0u) << C.err();
  }
  std::remove(Hv.c_str());
}

TEST(Reliability, NumbersOutOfRangeAreRefused) {
  const std::vector<std::vector<std::string>> Bad = {
      {"run", "--max-insns", "-1", "x.elf"},
      {"run", "--max-insns", "18446744073709551616", "x.elf"},
      {"run", "--max-insns", "12abc", "x.elf"},
      {"run", "--max-insns", "", "x.elf"},
      {"run", "--smp", "-1", "x.elf"},
      {"run", "--smp", "4294967297", "x.elf"},
      {"run", "--flat", "-1", "x.bin"},
      {"xcheck", "--max-insns", "-5", "x.bin"},
      {"xcheck", "--timeout-ms", "-1", "x.bin"},
      {"xcheck", "fuzz", "--seed", "-1"},
      {"xcheck", "fuzz", "--streams", "99999999999999999999"},
      {"xcheck", "fuzz", "--max-insns", "0"},
      {"trace", "report", "x.xt", "-o", "r.html", "--max-points", "0"},
      {"trace", "diff", "a.xt", "b.xt", "--context", "-3"},
      {"trace", "diff", "a.xt", "b.xt", "--distribution", "--tolerance", "nan"},
      {"trace", "diff", "a.xt", "b.xt", "--distribution", "--tolerance", "inf"},
      {"trace", "diff", "a.xt", "b.xt", "--distribution", "--tolerance", "-inf"},
      {"trace", "diff", "a.xt", "b.xt", "--distribution", "--tolerance", "-0.5"},
      {"trace", "diff", "a.xt", "b.xt", "--distribution", "--tolerance", "0.1x"},
  };
  for (const auto &Args : Bad) {
    Result R = run(Args);
    std::string Cmd;
    for (const std::string &A : Args)
      Cmd += A + " ";
    EXPECT_EQ(R.Status, 2) << Cmd;
    EXPECT_EQ(lines(R.Err), 1u) << Cmd << R.Err;
    EXPECT_EQ(R.Err.rfind("vmxsim: error: ", 0), 0u) << Cmd << R.Err;
  }
  EXPECT_EQ(run({"run", "--max-insns", "-1", "x.elf"}).Err,
            "vmxsim: error: --max-insns: '-1' is not a whole number in 0..18446744073709551615\n");
  EXPECT_EQ(run({"trace", "diff", "a", "b", "--distribution", "--tolerance", "nan"}).Err,
            "vmxsim: error: --tolerance: 'nan' is not a finite number in 0..1e9\n");
  // Hexadecimal and the largest value are fine.
  Result R = run({"run", "--max-insns", "0x10", kImages + "/selftest.elf"});
  EXPECT_EQ(R.Status, 4);
  EXPECT_EQ(R.Err.rfind("vmxsim: instruction limit reached at RIP=0x", 0), 0u) << R.Err;
  EXPECT_NE(R.Err.find("; 16 instructions, "), std::string::npos) << R.Err;
}

// --- Wrong statuses -----------------------------------------------------------------------

TEST(Reliability, TraceCheckStatusesFollowTheReadmeForEitherFile) {
  const std::string Hv = tempPath("chk_hv.xt"), Gt = tempPath("chk_gt.xt"),
                    Cut = tempPath("chk_cut.xt");
  ASSERT_EQ(run({"run", kImages + "/vmx_e2e.elf", "--serial", "none", "--xentrace", Hv,
                 "--trace-ground-truth", Gt, "-q"})
                .Status,
            1);
  Result R = run({"trace", "check", Hv, Gt});
  EXPECT_EQ(R.Status, 0) << R.Out << R.Err;
  EXPECT_EQ(R.Out.rfind("match: 40 exits and 40 entries on 1 CPU(s)", 0), 0u) << R.Out;

  // A truncated ground truth: status 2, the read error on stderr, no "mismatch".
  std::string GtBytes = readFile(Gt);
  writeBytes(Cut, std::vector<uint8_t>(GtBytes.begin(), GtBytes.begin() + 2990));
  R = run({"trace", "check", Hv, Cut});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Out.find("mismatch"), std::string::npos) << R.Out;
  EXPECT_EQ(lines(R.Err), 1u) << R.Err;
  EXPECT_NE(R.Err.find("(ground truth: offset 0xba8: file ends inside a record"), std::string::npos)
      << R.Err;

  // A corrupt hypervisor trace: status 2, the error on stderr.
  std::string HvBytes = readFile(Hv);
  writeBytes(Cut, std::vector<uint8_t>(HvBytes.begin(), HvBytes.end() - 2));
  R = run({"trace", "check", Cut, Gt});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Out.find("mismatch"), std::string::npos) << R.Out;
  EXPECT_EQ(lines(R.Err), 1u) << R.Err;
  EXPECT_EQ(R.Err.rfind("vmxsim: error: hypervisor trace: offset 0x", 0), 0u) << R.Err;

  // Swapped: each file must be of the kind its position expects.
  R = run({"trace", "check", Gt, Hv});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Out.find("match"), std::string::npos) << R.Out;
  EXPECT_EQ(R.Err.rfind("vmxsim: error: the hypervisor's trace holds a ground-truth record (", 0), 0u)
      << R.Err;
  R = run({"trace", "check", Hv, Hv});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err.rfind("vmxsim: error: the ground-truth file holds a hypervisor record (", 0), 0u)
      << R.Err;

  // Nothing paired: a run without a hypervisor gives two empty traces.
  ASSERT_EQ(run({"run", kImages + "/selftest.elf", "--serial", "none", "--xentrace", Hv,
                 "--trace-ground-truth", Gt, "-q"})
                .Status,
            1);
  R = run({"trace", "check", Hv, Gt});
  EXPECT_EQ(R.Status, 1);
  EXPECT_EQ(R.Out, "mismatch: nothing was checked: the hypervisor's trace holds no VMX_EXIT or "
                   "VMENTRY record (0 records read) and the ground truth no VM exit or entry (0 "
                   "records read)\n");
  for (const std::string &P : {Hv, Gt, Cut})
    std::remove(P.c_str());
}

TEST(Reliability, MultibootHeaderWithoutAddressesInANonElfFileSaysSo) {
  std::vector<uint8_t> B(64, 0);
  putMultibootHeader(B, 0, 0x3); // no a.out-kludge flag
  const std::string Path = tempPath("mb_not_elf");
  writeBytes(Path, B);
  Result R = run({"run", Path});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: " + Path +
                       ": Multiboot header at offset 0x0 has no address fields (flag bit 16 "
                       "clear) and the file is not ELF, so there is nothing to say where to "
                       "load it\n");
  std::remove(Path.c_str());
}

TEST(Reliability, XcheckLooksAtTheImageBeforeKvm) {
  Result R = run({"xcheck", "/nonexistent/vmxsim/image.bin"});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: /nonexistent/vmxsim/image.bin: cannot open: No such file or "
                   "directory\n");
  const std::string Path = tempPath("empty.bin");
  writeBytes(Path, {});
  R = run({"xcheck", Path});
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: " + Path +
                       ": an image of 0 bytes does not fit at 0x100000 (RAM 0x1000000, loader "
                       "data below 0x16000)\n");
  std::remove(Path.c_str());
}

// --- The stop flag itself (library level) -------------------------------------------------

namespace {
struct FlagRun {
  RunResult Result;
  std::string Serial, GroundTruth;
  std::vector<uint64_t> Cycles;
};
FlagRun runWithFlag(const std::string &Image, const std::string &Append, unsigned Cpus,
                    const std::atomic<bool> *Flag, uint64_t RaiseAt = 0,
                    std::atomic<bool> *ToRaise = nullptr) {
  FlagRun Out;
  const std::string Gt = tempPath("flag_gt.xt");
  MachineConfig Cfg;
  Cfg.Kernel = kImages + "/" + Image;
  Cfg.Append = Append;
  Cfg.NumCpus = Cpus;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.GroundTruthFile = Gt;
  Cfg.StopFlag = Flag;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  if (!M)
    return Out;
  // A progress callback plays the signal handler: it raises the flag mid-run.
  Out.Result = RaiseAt ? M->run([&](uint64_t) { ToRaise->store(true); }, RaiseAt) : M->run();
  Out.Serial = M->serialOutput();
  for (unsigned I = 0; I < M->numCpus(); ++I)
    Out.Cycles.push_back(M->cpu(I).Cycles);
  EXPECT_TRUE(M->outputProblems().empty());
  M.reset();
  Out.GroundTruth = readFile(Gt);
  const TraceRead R = readTrace(Gt);
  EXPECT_TRUE(R.Clean) << R.Error;
  std::remove(Gt.c_str());
  return Out;
}
} // namespace

TEST(Reliability, AWatchedRunIsTheSameRun) {
  // vmx_bench with 300,000 iterations retires about 3 M instructions: the watched run is
  // cut at every 2^20 of them to look at the flag, and must be the same run.
  const std::atomic<bool> Never{false};
  for (unsigned Cpus : {1u, 4u}) {
    const FlagRun Plain = runWithFlag("vmx_bench.elf", "iters=300000", Cpus, nullptr);
    const FlagRun Watched = runWithFlag("vmx_bench.elf", "iters=300000", Cpus, &Never);
    EXPECT_EQ(Plain.Result.Reason, RunReason::GuestExit);
    EXPECT_GT(Plain.Result.Retired, 3u * Scheduler::kStopPollInsns);
    EXPECT_EQ(Watched.Result.Reason, Plain.Result.Reason);
    EXPECT_EQ(Watched.Result.Retired, Plain.Result.Retired);
    EXPECT_EQ(Watched.Cycles, Plain.Cycles);
    EXPECT_EQ(Watched.Serial, Plain.Serial);
    EXPECT_TRUE(Watched.GroundTruth == Plain.GroundTruth);
  }
}

TEST(Reliability, ARaisedFlagStopsTheRunSoonAfter) {
  for (unsigned Cpus : {1u, 4u}) {
    std::atomic<bool> Flag{false};
    const FlagRun R =
        runWithFlag("vmx_bench.elf", "iters=100000000", Cpus, &Flag, 5'000'000, &Flag);
    EXPECT_EQ(R.Result.Reason, RunReason::Interrupted);
    EXPECT_EQ(R.Result.ExitStatus, kExitInterrupted);
    // Raised at the first progress call (5 M retired): seen at the next poll.
    EXPECT_GE(R.Result.Retired, 5'000'000u);
    EXPECT_LE(R.Result.Retired, 5'000'000u + Scheduler::kStopPollInsns + 1000);
    EXPECT_EQ(R.Serial, "vmx_bench: start iters=100000000 trace=0\n");
    EXPECT_GT(R.GroundTruth.size(), 100'000u);
  }
}
