// Single-bit flips of real traces (issue 11): the hypervisor core's own trace and the
// ground truth of a vmx_e2e run, every bit of each flipped in turn (of the ground truth,
// which holds every trace-slot store, a seeded sample of 16,000), through `trace check`,
// `summary` and `dump`. Every mutant ends with status 0, 1 or 2 and, when not 0,
// a one-line message; nothing crashes or hangs (CI runs this under ASan+UBSan). A seeded
// sample also goes through the vmxsim program itself, with a bound on its run time.
#include "harness/machine.h"
#include "tests/support/files.h"
#include "trace/check.h"
#include "trace/dump.h"
#include "trace/reader.h"
#include "trace/summary.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <signal.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace vmxsim;
using namespace vmxsim::trace;
using vmxsim::test::readFile;

namespace {

std::string tempPath(const std::string &Name) {
  return (std::filesystem::temp_directory_path() /
          ("vmxsim_mutation_" + std::to_string(::getpid()) + "_" + Name))
      .string();
}

std::vector<uint8_t> bytesOf(const std::string &Path) {
  const std::string S = readFile(Path);
  return std::vector<uint8_t>(S.begin(), S.end());
}

struct RealTraces {
  std::vector<uint8_t> Hv, Gt;
};

/// The hypervisor trace and the ground truth of one vmx_e2e run (40 exits).
const RealTraces &realTraces() {
  static const RealTraces T = [] {
    RealTraces Out;
    const std::string Hv = tempPath("hv.xt"), Gt = tempPath("gt.xt");
    MachineConfig Cfg;
    Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/vmx_e2e.elf";
    Cfg.Serial = Cfg.Debugcon = OutputSpec::discard();
    Cfg.XentraceFile = Hv;
    Cfg.GroundTruthFile = Gt;
    {
      Error Err;
      auto M = Machine::create(Cfg, Err);
      EXPECT_TRUE(M) << Err.str();
      if (M) {
        EXPECT_EQ(M->run().ExitStatus, 1);
      }
    }
    Out.Hv = bytesOf(Hv);
    Out.Gt = bytesOf(Gt);
    std::remove(Hv.c_str());
    std::remove(Gt.c_str());
    return Out;
  }();
  return T;
}

/// The status `vmxsim trace check` gives (harness/main.cpp): 0 agree, 1 disagree, 2 bad
/// input; Message is what it prints about a non-zero status.
int checkStatus(const std::vector<uint8_t> &Hv, const std::vector<uint8_t> &Gt,
                std::string &Message) {
  TraceReader H, G;
  H.openMemory(Hv.data(), Hv.size());
  G.openMemory(Gt.data(), Gt.size());
  const CheckResult R = checkAgainstGroundTruth(H, G);
  Message = R.Problem;
  if (R.ReadError || R.WrongKind)
    return 2;
  return R.Ok ? 0 : 1;
}

struct Tally {
  unsigned Status[3] = {0, 0, 0};
};

/// At most this many bits of one file are flipped; a larger file gets a seeded sample.
/// The ground truth of vmx_e2e holds every store to the core's trace slots (26 KB,
/// 213,000 bits, minutes under ASan); the hypervisor's trace is flipped whole.
constexpr size_t kMaxFlips = 16000;

/// The bits to flip: every bit of a file of up to kMaxFlips bits, else kMaxFlips bits
/// drawn by a fixed-seed generator (the same every run).
std::vector<size_t> bitsToFlip(size_t Bits) {
  std::vector<size_t> Out;
  if (Bits <= kMaxFlips) {
    for (size_t Bit = 0; Bit < Bits; ++Bit)
      Out.push_back(Bit);
    return Out;
  }
  uint64_t State = 0x736c6f7473ull;
  for (size_t I = 0; I < kMaxFlips; ++I) {
    State = State * 6364136223846793005ull + 1442695040888963407ull;
    Out.push_back(size_t((State >> 17) % Bits));
  }
  return Out;
}

/// Flips every bit (or a sample: bitsToFlip) of one side in turn; the other side stays
/// as recorded.
Tally flipEveryBit(bool FlipHypervisor) {
  const RealTraces &T = realTraces();
  Tally Out;
  std::FILE *Null = std::fopen("/dev/null", "w");
  const std::vector<uint8_t> &Base = FlipHypervisor ? T.Hv : T.Gt;
  for (size_t Bit : bitsToFlip(Base.size() * 8)) {
    std::vector<uint8_t> M = Base;
    M[Bit / 8] ^= uint8_t(1u << (Bit % 8));
    std::string Message;
    const int S = FlipHypervisor ? checkStatus(M, T.Gt, Message) : checkStatus(T.Hv, M, Message);
    ++Out.Status[S];
    if (S != 0) {
      EXPECT_FALSE(Message.empty()) << "bit " << Bit;
      EXPECT_EQ(Message.find('\n'), std::string::npos) << "bit " << Bit;
    }
    // summary and dump of every 4th mutant (bits 0 and 4 of every byte): whatever
    // they read, an error is one message. (All of them take minutes under ASan.)
    if (Bit % 4)
      continue;
    TraceReader R1;
    R1.openMemory(M.data(), M.size());
    const TraceSummary Sum = summarizeTrace(R1);
    if (Sum.Failed) {
      EXPECT_FALSE(Sum.Error.Message.empty()) << "bit " << Bit;
    }
    printSummary(Sum, SummaryFormat::Json, Null);
    TraceReader R2;
    R2.openMemory(M.data(), M.size());
    const bool Clean = dumpTrace(R2, Null);
    EXPECT_EQ(Clean, !R2.failed());
    EXPECT_EQ(Clean, !Sum.Failed) << "bit " << Bit;
  }
  std::fclose(Null);
  return Out;
}

/// The counts depend on the image's code (its addresses and timings are in the traces),
/// so they are printed, not pinned; what every mutant must satisfy is checked in
/// flipEveryBit.
void expectEveryBitEnded(bool FlipHypervisor) {
  const RealTraces &T = realTraces();
  const std::vector<uint8_t> &Base = FlipHypervisor ? T.Hv : T.Gt;
  ASSERT_GT(Base.size(), 1000u);
  const Tally N = flipEveryBit(FlipHypervisor);
  EXPECT_EQ(N.Status[0] + N.Status[1] + N.Status[2], std::min(Base.size() * 8, kMaxFlips));
  // Both kinds of failure occur: disagreements and broken files.
  EXPECT_GT(N.Status[1], 0u);
  EXPECT_GT(N.Status[2], 0u);
  std::printf("%s: %zu bits flipped (of %zu): %u still agree, %u disagree (status 1), %u "
              "broken (status 2)\n",
              FlipHypervisor ? "hypervisor trace" : "ground truth",
              std::min(Base.size() * 8, kMaxFlips), Base.size() * 8, N.Status[0], N.Status[1],
              N.Status[2]);
}

} // namespace

TEST(RealTraceMutation, EveryBitOfTheHypervisorTraceEndsWithAStatusAndAMessage) {
  expectEveryBitEnded(true);
}

TEST(RealTraceMutation, EveryBitOfTheGroundTruthEndsWithAStatusAndAMessage) {
  expectEveryBitEnded(false);
}

TEST(RealTraceMutation, SampledMutantsThroughTheCommandNeverHang) {
  // 60 mutants (30 of each side, bits chosen by a fixed seed) through `vmxsim trace
  // check`, `summary` and `dump`: status 0, 1 or 2, a message with 1 and 2, within a
  // bound.
  const RealTraces &T = realTraces();
  const std::string Hv = tempPath("m_hv.xt"), Gt = tempPath("m_gt.xt"), Out = tempPath("m_out"),
                    Err = tempPath("m_err");
  auto Write = [](const std::string &P, const std::vector<uint8_t> &B) {
    std::ofstream(P, std::ios::binary)
        .write(reinterpret_cast<const char *>(B.data()), std::streamsize(B.size()));
  };
  auto Run = [&](std::vector<std::string> Args) {
    const std::string Bin = std::string(VMXSIM_BINARY_DIR) + "/vmxsim";
    std::vector<char *> Argv{const_cast<char *>(Bin.c_str())};
    for (std::string &A : Args)
      Argv.push_back(A.data());
    Argv.push_back(nullptr);
    const pid_t P = ::fork();
    if (P == 0) {
      FILE *O = std::freopen(Out.c_str(), "w", stdout);
      FILE *E = std::freopen(Err.c_str(), "w", stderr);
      (void)O, (void)E;
      ::execv(Bin.c_str(), Argv.data());
      ::_exit(127);
    }
    const auto End = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    int St = 0;
    while (::waitpid(P, &St, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > End) {
        ::kill(P, SIGKILL);
        ::waitpid(P, &St, 0);
        ADD_FAILURE() << "hung: " << Args[1];
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return WIFEXITED(St) ? WEXITSTATUS(St) : -2;
  };
  uint64_t State = 0x6d7574616e7473ull;
  unsigned Statuses[3] = {0, 0, 0};
  for (unsigned I = 0; I < 60; ++I) {
    State = State * 6364136223846793005ull + 1442695040888963407ull;
    const bool FlipHv = I % 2 == 0;
    std::vector<uint8_t> H = T.Hv, G = T.Gt;
    std::vector<uint8_t> &M = FlipHv ? H : G;
    const uint64_t Bit = (State >> 17) % (M.size() * 8);
    M[Bit / 8] ^= uint8_t(1u << (Bit % 8));
    Write(Hv, H);
    Write(Gt, G);
    const int S = Run({"trace", "check", Hv, Gt});
    ASSERT_TRUE(S >= 0 && S <= 2) << "bit " << Bit << " status " << S;
    ++Statuses[S];
    if (S == 1) {
      EXPECT_EQ(readFile(Out).rfind("mismatch: ", 0), 0u) << readFile(Out);
    }
    if (S == 2) {
      EXPECT_EQ(readFile(Err).rfind("vmxsim: error: ", 0), 0u) << readFile(Err);
    }
    for (const char *Cmd : {"summary", "dump"}) {
      const int S2 = Run({"trace", Cmd, FlipHv ? Hv : Gt});
      EXPECT_TRUE(S2 == 0 || S2 == 2) << Cmd << " bit " << Bit << " status " << S2;
      if (S2 == 2) {
        EXPECT_NE(readFile(Err).find("vmxsim: error: "), std::string::npos) << readFile(Err);
      }
    }
  }
  EXPECT_EQ(Statuses[0] + Statuses[1] + Statuses[2], 60u);
  for (const std::string &P : {Hv, Gt, Out, Err})
    std::remove(P.c_str());
}
