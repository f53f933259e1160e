// The differential instruction fuzzer against KVM (harness/kvm/fuzz.h; DESIGN.md
// "Correctness sources", item 3): a fixed-seed run of at least 20,000 compared streams
// must find no divergence, and a deliberately injected emulator bug must be caught.
// Without /dev/kvm these tests are skipped with a visible message.
#include "harness/kvm/fuzz.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

using namespace vmxsim;
using namespace vmxsim::kvm;

namespace {

bool kvmUsable(std::string &Why) { return KvmVm::available(Why); }

std::string report(const FuzzResult &R) {
  std::string Out;
  for (const FuzzDivergence &D : R.Divergences)
    Out += D.Diff + "\n" + D.Detail + "\nregression case:\n" + formatRegression(D) + "\n";
  return Out;
}

} // namespace

// SDM Vol. 2 (each instruction's Operation and Flags Affected sections), compared
// against the host CPU (CPL 3) and the host kernel's instruction emulator (CPL 0).
TEST(KvmCrossCheck, FixedSeedStreamsHaveNoDivergence) {
  std::string Why;
  if (!kvmUsable(Why))
    GTEST_SKIP() << "SKIPPED: no usable /dev/kvm here (" << Why
                 << "); the KVM differential run needs it";
  FuzzOptions O;
  O.Seed = 20240611;
  // 21,000 generated streams give >= 20,000 compared ones (a few are not comparable:
  // FuzzResult::KvmCannot). ~2 s, ~6 s under ASan+UBSan.
  O.Streams = 21000;
  FuzzResult R = runFuzz(O);
  ASSERT_FALSE(R.HostProblem) << R.Why;
  std::printf("[ xcheck ] seed %llu: %llu streams compared (%llu CPL 3 native, %llu CPL 0 "
              "emulated), %llu not comparable, %.1f s, %llu divergent\n",
              (unsigned long long)O.Seed, (unsigned long long)R.Compared,
              (unsigned long long)R.Cpl3Streams, (unsigned long long)R.Cpl0Streams,
              (unsigned long long)R.KvmCannot, R.Seconds, (unsigned long long)R.Divergent);
  EXPECT_GE(R.Compared, 20000u);
  EXPECT_GT(R.Cpl0Streams, 0u);
  EXPECT_GT(R.Cpl3Streams, 0u);
  EXPECT_EQ(R.Divergent, 0u) << report(R);
  // Differences that vanish on a second run are KVM-side noise under host load; they
  // must stay rare, or the comparison means little.
  EXPECT_LE(R.Unreproducible, R.Compared / 1000) << R.UnreproducibleExamples.front();
  // Exceptions of several kinds were compared, not only straight-line code.
  EXPECT_GE(R.Coverage["exception"].size(), 6u);
}

// The proof that the check can fail: with the test-only switch, BT* store the wrong CF.
TEST(KvmCrossCheck, InjectedBtCarryBugIsCaught) {
  std::string Why;
  if (!kvmUsable(Why))
    GTEST_SKIP() << "SKIPPED: no usable /dev/kvm here (" << Why << ")";
  FuzzOptions O;
  O.Seed = 7;
  O.Streams = 3000;
  O.MaxReported = 3;
  O.Capstone = false;
  O.InjectBtCarryBug = true;
  FuzzResult R = runFuzz(O);
  ASSERT_FALSE(R.HostProblem) << R.Why;
  EXPECT_GT(R.Divergent, 0u);
  ASSERT_FALSE(R.Divergences.empty());
  // Minimised to the BT* instruction alone (or with the instruction that feeds it), and
  // the difference is the carry flag.
  const FuzzDivergence &D = R.Divergences.front();
  EXPECT_LE(D.Stream.Insns.size(), 2u) << D.Diff;
  EXPECT_NE(D.Diff.find("rflags"), std::string::npos) << D.Diff << "\n" << D.Detail;
  // Its regression case replays clean once the bug is gone, and fails with the bug.
  const std::string Case = formatRegression(D);
  EXPECT_EQ(replayRegression(Case), "");
  const std::string WithBug = replayRegression(Case, true);
  EXPECT_NE(WithBug.find("rflags"), std::string::npos) << WithBug;
}

// Decoder cross-check on the generated streams: vmxsim's (Zydis) decoder and Capstone.
// Validity and length must agree except where Capstone 4 is known to mishandle
// prefixes (the classes of tests/cpu/decoder_test.cpp's kKnown: F3/66 order for
// POPCNT/LZCNT/TZCNT, which Capstone decodes as BSF/BSR or rejects).
TEST(KvmCrossCheck, CapstoneAgreesWithDecoderOnStreams) {
  std::string Why;
  if (!kvmUsable(Why))
    GTEST_SKIP() << "SKIPPED: no usable /dev/kvm here (" << Why << ")";
  FuzzOptions O;
  O.Seed = 99;
  O.Streams = 3000;
  FuzzResult R = runFuzz(O);
  ASSERT_FALSE(R.HostProblem) << R.Why;
  EXPECT_GT(R.CapstoneChecked, 5000u);
  EXPECT_EQ(R.CapstoneDisagree, R.CapstoneKnown);
  for (const std::string &E : R.CapstoneExamples)
    ADD_FAILURE() << "unexplained decoder disagreement: " << E;
}

// Coverage for the coverage report: "kind<TAB>name<TAB>count", sorted.
TEST(KvmCrossCheck, CoverageLinesAreSortedTriples) {
  std::string Why;
  if (!kvmUsable(Why))
    GTEST_SKIP() << "SKIPPED: no usable /dev/kvm here (" << Why << ")";
  FuzzOptions O;
  O.Seed = 3;
  O.Streams = 500;
  O.Capstone = false;
  FuzzResult R = runFuzz(O);
  ASSERT_FALSE(R.HostProblem) << R.Why;
  const std::string C = formatCoverage(R);
  std::string Prev;
  size_t Lines = 0, Pos = 0;
  while (Pos < C.size()) {
    size_t End = C.find('\n', Pos);
    std::string L = C.substr(Pos, End - Pos);
    EXPECT_EQ(std::count(L.begin(), L.end(), '\t'), 2) << L;
    EXPECT_LT(Prev, L);
    Prev = L;
    Pos = End + 1;
    ++Lines;
  }
  EXPECT_GT(Lines, 50u);
}
