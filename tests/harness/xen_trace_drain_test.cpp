// vmxsim's own drain of an unmodified Xen 4.17's trace buffers (harness/xen_trace_drain.h,
// docs/xen-trace.md "vmxsim's own drain"): xen-syms' symbols, the bad inputs (no symbol
// file, not an ELF, no trace symbols, the symbol file of another build, a kernel that is
// not Xen, Xen without tbuf_size=, nonsense in Xen's buffers), and Debian 12's Xen traced
// from boot with Debian's Linux as its PV dom0 and no tool stack: the drain's file parses
// with the exact record counts, on one CPU and on two, and two runs give byte-identical
// traces and consoles.
// The tests that boot Xen are skipped when the guest cache (scripts/fetch-guests.sh) lacks
// Xen, xen-syms or the kernel.
#include "harness/machine.h"
#include "harness/xen_trace_drain.h"
#include "tests/support/files.h"
#include "tests/support/random.h"
#include "trace/reader.h"
#include "trace/summary.h"

#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <gtest/gtest.h>
#include <unistd.h>

using namespace vmxsim;
using vmxsim::test::guestCache;
using vmxsim::test::readFile;
using vmxsim::test::tempPath;

namespace {

constexpr uint64_t kBuildIdVa = 0xffff82d0403b6ec8; // xen-syms' .note.gnu.build-id
const char *const kBuildId = "151b373fd64b321593bf987fd923cd10dabadac4";

std::string cached(const std::string &Name) {
  const std::string Cache = guestCache();
  const std::string P = Cache + "/" + Name;
  return !Cache.empty() && std::filesystem::exists(P) ? P : std::string();
}

void writeFile(const std::string &Path, const std::string &Bytes) {
  std::ofstream(Path, std::ios::binary) << Bytes;
}

/// A machine running the cached Xen alone (it panics "dom0 kernel not specified" before
/// it sets up trace buffers, and resets) for at most Insns, draining with Syms.
struct DrainRun {
  RunResult Result;
  std::string Problem, Serial, Trace;
};
/// The machine of Cfg, translated, draining Xen's trace into Out with the symbol file Syms.
std::unique_ptr<Machine> drainingMachine(MachineConfig Cfg, const std::string &Syms,
                                         const std::string &Out) {
  Cfg.XenTraceFile = Out;
  Cfg.XenSymsFile = Syms;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Exec = ExecMode::Translate;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_NE(M, nullptr) << Err.str();
  return M;
}
DrainRun runDrain(const MachineConfig &Cfg, const std::string &Syms, const std::string &Out) {
  auto M = drainingMachine(Cfg, Syms, Out);
  DrainRun D;
  if (!M)
    return D;
  D.Result = M->run();
  D.Problem = M->xenTraceDrain()->problem();
  D.Serial = M->serialOutput();
  D.Trace = readFile(Out);
  return D;
}

MachineConfig xenAlone(const std::string &Xen) {
  MachineConfig Cfg;
  Cfg.Kernel = Xen;
  Cfg.Append = "console=com1 com1=115200,8n1";
  Cfg.RamBytes = 1024ull << 20;
  Cfg.MaxInsns = 100'000'000;
  return Cfg;
}

} // namespace

TEST(XenTraceSymbols, ReadsXenTraceStateFromDebiansXenSyms) {
  const std::string Syms = cached("xen-syms-4.17-amd64");
  if (Syms.empty())
    GTEST_SKIP() << "no xen-syms-4.17-amd64 in the guest cache '" << guestCache()
                 << "': run scripts/fetch-guests.sh";
  const ErrorOr<XenTraceSymbols> S = readXenTraceSymbols(Syms);
  ASSERT_TRUE(S) << S.error().str();
  // readelf -sW xen-syms-4.17-amd64 (4.17.7+13-g2445b30a44-0+deb12u1).
  EXPECT_EQ(S->TInfo, 0xffff82d040588fc8u);
  EXPECT_EQ(S->TInfoPages, 0xffff82d040588fc4u);
  EXPECT_EQ(S->DataSize, 0xffff82d04045eab8u);
  EXPECT_EQ(S->TBufs, 0xffff82d04057b208u);
  EXPECT_EQ(S->PerCpuOffset, 0xffff82d040594420u);
  EXPECT_EQ(S->NrCpus, 256u);
  EXPECT_EQ(S->IdlePgTable, 0xffff82d04046e000u);
  EXPECT_EQ(S->BuildIdVa, kBuildIdVa);
  EXPECT_EQ(buildIdHex(S->BuildIdNote), kBuildId);
}

TEST(XenTraceSymbols, BadSymbolFilesAreOneLineErrors) {
  const std::string Missing = tempPath("XenTraceSymbols", "missing");
  ErrorOr<XenTraceSymbols> S = readXenTraceSymbols(Missing);
  ASSERT_FALSE(S);
  EXPECT_EQ(S.error().Code, ErrorCode::BadSymbolFile);
  EXPECT_EQ(S.error().str(),
            Missing + ": cannot read the Xen symbol file: cannot open: No such file or directory");

  const std::string Text = tempPath("XenTraceSymbols", "text");
  writeFile(Text, "not an ELF file at all\n");
  S = readXenTraceSymbols(Text);
  std::filesystem::remove(Text);
  ASSERT_FALSE(S);
  EXPECT_EQ(S.error().str(), Text + ": not a 64-bit little-endian ELF file (xen-syms of "
                                    "xen-hypervisor-4.17-amd64-dbg is one)");

  // An ELF with a symbol table but not Xen's: this test program.
  S = readXenTraceSymbols("/proc/self/exe");
  ASSERT_FALSE(S);
  EXPECT_EQ(S.error().str(),
            "/proc/self/exe: no symbol t_info of common/trace.c (not Xen 4.17's xen-syms?)");

  // The stripped Xen that is loaded (the 32-bit Multiboot ELF), and Linux's bzImage.
  if (const std::string Xen = cached("xen-4.17-amd64"); !Xen.empty()) {
    S = readXenTraceSymbols(Xen);
    ASSERT_FALSE(S);
    EXPECT_EQ(S.error().str(), Xen + ": not a 64-bit little-endian ELF file (xen-syms of "
                                     "xen-hypervisor-4.17-amd64-dbg is one)");
  }
  if (const std::string Busybox = cached("busybox"); !Busybox.empty()) {
    S = readXenTraceSymbols(Busybox);
    ASSERT_FALSE(S);
    EXPECT_EQ(S.error().str(), Busybox + ": no symbol table (a stripped Xen? the symbol file "
                                         "is xen-syms of xen-hypervisor-4.17-amd64-dbg)");
  }

  // The machine refuses --xen-trace without a symbol file, with the same error code.
  MachineConfig Cfg;
  Cfg.XenTraceFile = tempPath("XenTraceSymbols", "xt");
  Error Err;
  EXPECT_EQ(Machine::create(Cfg, Err), nullptr);
  EXPECT_EQ(Err.Code, ErrorCode::BadSymbolFile);
  EXPECT_EQ(Err.str(), "draining Xen's trace (--xen-trace) needs Xen's symbol file (--xen-syms "
                       "xen-syms, from xen-hypervisor-4.17-amd64-dbg)");
}

// The symbol file's reader on mutated copies of Debian's xen-syms: the ELF header, the
// section headers and the symbol and string tables' bytes changed (bits flipped, header
// fields set to edge values, the file truncated); every read returns the symbols or a
// one-line error, never a crash (CI runs the suite under ASan and UBSan too).
TEST(XenTraceSymbols, MutatedSymbolFilesAreReadOrRefusedInOneLine) {
  const std::string Syms = cached("xen-syms-4.17-amd64");
  if (Syms.empty())
    GTEST_SKIP() << "no xen-syms-4.17-amd64 in the guest cache '" << guestCache()
                 << "': run scripts/fetch-guests.sh";
  const std::string Original = readFile(Syms);
  ASSERT_GT(Original.size(), 4096u);
  // Where the reader looks (gABI ELF64): the header, the section headers (e_shoff,
  // e_shnum entries of e_shentsize bytes), and the sections they name.
  const auto U64 = [&](size_t Off) {
    uint64_t V;
    std::memcpy(&V, Original.data() + Off, 8);
    return V;
  };
  const auto U16 = [&](size_t Off) {
    uint16_t V;
    std::memcpy(&V, Original.data() + Off, 2);
    return V;
  };
  const uint64_t ShOff = U64(40), ShNum = U16(60), ShEnt = U16(58);
  std::vector<std::pair<uint64_t, uint64_t>> Regions = {{0, 64}, {ShOff, ShNum * ShEnt}};
  for (uint64_t K = 0; K < ShNum; ++K)
    Regions.push_back({U64(ShOff + K * ShEnt + 24), std::min<uint64_t>(U64(ShOff + K * ShEnt + 32), 1 << 16)});
  static const uint64_t kEdge[] = {0, 1, 0xff, 0xffff, 0x7fffffff, 0xffffffff,
                                   0x7fffffffffffffffull, ~0ull, 1ull << 32};
  SplitMix64 R{0x78656e2d73796d73ull};
  const std::string Path = tempPath("XenTraceSymbols", "mutated");
  unsigned Read = 0, Refused = 0;
  for (unsigned I = 0; I < 300; ++I) {
    std::string B = Original;
    for (unsigned M = 0, N = 1 + unsigned(R.nextBelow(4)); M < N; ++M) {
      const auto [At, Len] = Regions[R.nextBelow(Regions.size())];
      if (At >= B.size() || Len == 0)
        continue;
      const uint64_t Off = At + R.nextBelow(std::min<uint64_t>(Len, B.size() - At));
      switch (R.nextBelow(3)) {
      case 0:
        B[Off] = char(uint8_t(B[Off]) ^ uint8_t(1u << R.nextBelow(8)));
        break;
      case 1:
        if (const uint64_t V = R.pick(kEdge); Off + 8 <= B.size())
          std::memcpy(&B[Off & ~uint64_t(7)], &V, 8);
        break;
      default:
        B.resize(Off);
        break;
      }
    }
    writeFile(Path, B);
    const ErrorOr<XenTraceSymbols> S = readXenTraceSymbols(Path);
    if (S) {
      ++Read;
    } else {
      ++Refused;
      EXPECT_EQ(S.error().Code, ErrorCode::BadSymbolFile);
      EXPECT_EQ(S.error().str().find('\n'), std::string::npos) << S.error().str();
    }
  }
  std::filesystem::remove(Path);
  // Both outcomes occur (the counts are fixed by the seed).
  EXPECT_GT(Read, 20u);
  EXPECT_GT(Refused, 20u);
  std::printf("%u mutated symbol files read, %u refused\n", Read, Refused);
}

// Xen given no dom0 panics before it sets up trace buffers (create_dom0 precedes
// init_trace_bufs in __start_xen): the drain finds Xen (its build id matches) and says
// that no buffers ever appeared; the file is empty. With a xen-syms whose build id
// differs in one byte, the drain says the symbol file is not the running Xen's; with
// Linux as the kernel, that Xen never appeared.
TEST(XenTraceDrain, XenWithoutBuffersAnotherBuildAndNoXenAreReported) {
  const std::string Xen = cached("xen-4.17-amd64"), Syms = cached("xen-syms-4.17-amd64");
  if (Xen.empty() || Syms.empty())
    GTEST_SKIP() << "no Xen and xen-syms in the guest cache '" << guestCache()
                 << "': run scripts/fetch-guests.sh";
  const std::string Out = tempPath("XenTraceDrain", "xt");
  DrainRun D = runDrain(xenAlone(Xen), Syms, Out);
  EXPECT_EQ(D.Result.Reason, RunReason::Reset) << D.Result.describe();
  EXPECT_NE(D.Serial.find("(XEN) dom0 kernel not specified"), std::string::npos);
  EXPECT_EQ(D.Problem, "Xen never set up its trace buffers (t_info stayed NULL: no tbuf_size= "
                       "on Xen's command line?); the trace file holds no records");
  EXPECT_EQ(D.Trace, "");

  // Another build: the same file with the build id's last byte changed.
  std::string Bytes = readFile(Syms);
  const ErrorOr<XenTraceSymbols> S = readXenTraceSymbols(Syms);
  ASSERT_TRUE(S);
  const std::string Note(S->BuildIdNote.begin(), S->BuildIdNote.end());
  const size_t At = Bytes.find(Note);
  ASSERT_NE(At, std::string::npos);
  Bytes[At + Note.size() - 1] ^= 0x01;
  const std::string Other = tempPath("XenTraceDrain", "other-syms");
  writeFile(Other, Bytes);
  D = runDrain(xenAlone(Xen), Other, Out);
  std::filesystem::remove(Other);
  EXPECT_EQ(D.Problem, fmt::format("{} is not the symbol file of the running Xen: build id "
                                   "151b373fd64b321593bf987fd923cd10dabadac5 in the file, {} in "
                                   "memory at {:#x}",
                                   Other, kBuildId, kBuildIdVa));
  EXPECT_EQ(D.Trace, "");

  if (const std::string Linux = cached("vmlinuz"); !Linux.empty()) {
    MachineConfig Cfg;
    Cfg.Kernel = Linux;
    Cfg.Append = "console=ttyS0";
    Cfg.RamBytes = 512ull << 20;
    Cfg.MaxInsns = 50'000'000;
    D = runDrain(Cfg, Syms, Out);
    EXPECT_EQ(D.Problem,
              fmt::format("Xen's image never appeared at the address of {}'s build-id note "
                          "({:#x}): the kernel is not Xen, or the run ended before Xen turned "
                          "on long mode",
                          Syms, kBuildIdVa));
  }
  std::filesystem::remove(Out);
}

namespace {

/// Xen traced from boot (tbuf_size=16) with Debian's Linux as its PV dom0 (the plain
/// initramfs: no Xen tools at all), for Insns instructions, into Cfg; false (Cfg
/// unchanged) when the cache lacks them.
constexpr uint64_t kDom0Insns = 6'000'000'000;

bool xenWithDom0(uint64_t Insns, MachineConfig &Cfg) {
  const std::string Xen = cached("xen-4.17-amd64"), Kernel = cached("vmlinuz"),
                    Initrd = cached("initramfs.cpio.gz");
  if (Xen.empty() || Kernel.empty() || Initrd.empty())
    return false;
  Cfg.Kernel = Xen;
  Cfg.Modules = {Kernel + " console=hvc0 earlyprintk=xen", Initrd};
  Cfg.Append = "console=com1 com1=115200,8n1 loglvl=all guest_loglvl=all dom0_mem=256M "
               "tbuf_size=16";
  Cfg.RamBytes = 1024ull << 20;
  Cfg.MaxInsns = Insns;
  return true;
}

trace::TraceSummary summarize(const std::string &Bytes) {
  trace::TraceReader R;
  R.openMemory(Bytes.data(), Bytes.size());
  return trace::summarizeTrace(R);
}

} // namespace

// Xen allocates its buffers after building dom0 (about 5.3e9 instructions in: Xen
// decompresses Linux's xz payload itself); from there to 6e9 instructions, in dom0's
// early boot, Xen writes 28,749 records on its one CPU, PV and scheduler classes. Drained
// every 1e6 instructions, none is lost. Twice: the same trace and console, byte for byte.
TEST(XenTraceDrain, XenWithADom0AndNoToolStackIsDrainedIdenticallyTwice) {
  const std::string Syms = cached("xen-syms-4.17-amd64");
  MachineConfig Cfg;
  if (Syms.empty() || !xenWithDom0(kDom0Insns, Cfg))
    GTEST_SKIP() << "no Xen, xen-syms and Debian kernel in the guest cache '" << guestCache()
                 << "': run scripts/fetch-guests.sh";
  const std::string Out = tempPath("XenTraceDrain", "dom0.xt");
  const DrainRun First = runDrain(Cfg, Syms, Out);
  EXPECT_EQ(First.Result.Reason, RunReason::InsnLimit) << First.Result.describe();
  EXPECT_EQ(First.Problem, "");
  EXPECT_NE(First.Serial.find("(XEN) xentrace: initialised"), std::string::npos);
  const trace::TraceSummary S = summarize(First.Trace);
  EXPECT_FALSE(S.Failed) << S.Error.str();
  EXPECT_EQ(S.Records, 28749u);
  EXPECT_EQ(S.LostRecords, 0u);
  ASSERT_EQ(S.Cpus.size(), 1u);
  EXPECT_EQ(First.Trace.size(), 589200u);

  const DrainRun Second = runDrain(Cfg, Syms, Out);
  std::filesystem::remove(Out);
  EXPECT_TRUE(Second.Trace == First.Trace) << "the drained trace differs between two runs";
  EXPECT_TRUE(Second.Serial == First.Serial) << "the console differs between two runs";
  EXPECT_EQ(Second.Result.Cycles, First.Result.Cycles);
}

// The same on two CPUs (Xen brings up both; dom0 gets two vCPUs), to 7e9 instructions:
// the drain points are the scheduler's loop heads at or after each multiple of 1e6, which
// its deterministic interleaving fixes; both CPUs' buffers are drained, none loses a
// record, and two runs give the same trace and console.
TEST(XenTraceDrain, OnTwoCpusXenWithADom0IsDrainedIdenticallyTwice) {
  const std::string Syms = cached("xen-syms-4.17-amd64");
  MachineConfig Cfg;
  if (Syms.empty() || !xenWithDom0(7'000'000'000, Cfg))
    GTEST_SKIP() << "no Xen, xen-syms and Debian kernel in the guest cache '" << guestCache()
                 << "': run scripts/fetch-guests.sh";
  Cfg.NumCpus = 2;
  const std::string Out = tempPath("XenTraceDrain", "smp.xt");
  const DrainRun First = runDrain(Cfg, Syms, Out);
  EXPECT_EQ(First.Result.Reason, RunReason::InsnLimit) << First.Result.describe();
  EXPECT_EQ(First.Problem, "");
  const trace::TraceSummary S = summarize(First.Trace);
  EXPECT_FALSE(S.Failed) << S.Error.str();
  EXPECT_EQ(S.Records, 93235u);
  EXPECT_EQ(S.LostRecords, 0u);
  EXPECT_EQ(S.Cpus.size(), 2u);
  std::map<unsigned, uint64_t> PerCpu;
  trace::TraceReader R;
  R.openMemory(First.Trace.data(), First.Trace.size());
  for (trace::TraceRecord Rec; R.next(Rec);)
    ++PerCpu[Rec.Cpu];
  EXPECT_EQ(PerCpu, (std::map<unsigned, uint64_t>{{0, 90166}, {1, 3069}}));

  const DrainRun Second = runDrain(Cfg, Syms, Out);
  std::filesystem::remove(Out);
  EXPECT_TRUE(Second.Trace == First.Trace) << "the drained trace differs between two runs";
  EXPECT_TRUE(Second.Serial == First.Serial) << "the console differs between two runs";
}

// Nonsense in Xen's buffer: after a first run, the test stores a producer index that is
// not a multiple of 4 into CPU 0's struct t_buf (its MFN is in Xen's boot log). The next
// drain point stops the drain with one line; what was drained before stays in the file.
TEST(XenTraceDrain, NonsenseInXensBufferStopsTheDrainAndKeepsTheRecords) {
  const std::string Syms = cached("xen-syms-4.17-amd64");
  MachineConfig Cfg;
  if (Syms.empty() || !xenWithDom0(kDom0Insns, Cfg))
    GTEST_SKIP() << "no Xen, xen-syms and Debian kernel in the guest cache '" << guestCache()
                 << "': run scripts/fetch-guests.sh";
  const std::string Out = tempPath("XenTraceDrain", "nonsense.xt");
  Cfg.MaxInsns = kDom0Insns - 500'000'000;
  auto M = drainingMachine(Cfg, Syms, Out);
  ASSERT_NE(M, nullptr);
  ASSERT_EQ(M->run().Reason, RunReason::InsnLimit);
  ASSERT_EQ(M->xenTraceDrain()->problem(), "");
  const std::string Before = readFile(Out);
  const trace::TraceSummary S = summarize(Before);
  EXPECT_FALSE(S.Failed);
  EXPECT_GT(S.Records, 0u);
  // "(XEN) xentrace: p0 mfn 3ff3d offset 129" (alloc_trace_bufs).
  const std::string Serial = M->serialOutput();
  const size_t Mfn = Serial.find("(XEN) xentrace: p0 mfn ");
  ASSERT_NE(Mfn, std::string::npos);
  const uint64_t Buf = std::stoull(Serial.substr(Mfn + 23, 16), nullptr, 16) << 12;
  uint32_t Meta[2] = {};
  ASSERT_FALSE(M->readPhysical(Hpa(Buf), Meta, sizeof Meta));
  const uint32_t Bogus = 0x12345;
  ASSERT_FALSE(M->writePhysical(Hpa(Buf + 4), &Bogus, 4)); // prod
  M->setMaxInsns(kDom0Insns);
  M->run();
  EXPECT_EQ(M->xenTraceDrain()->problem(),
            fmt::format("CPU 0's trace buffer has cons {:#x} and prod 0x12345, not multiples of "
                        "4 below 2 * data_size (0x1fff0)",
                        Meta[0]));
  const std::string After = readFile(Out);
  std::filesystem::remove(Out);
  EXPECT_TRUE(After == Before) << "the records drained before the nonsense changed";
}
