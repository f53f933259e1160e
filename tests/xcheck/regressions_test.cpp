// Regression cases of the KVM differential fuzzer (tests/xcheck/regressions/*.txt):
// each is a minimised stream with the outcome KVM recorded; vmxsim alone must reproduce
// it (no /dev/kvm needed). Cases under regressions/open/ are divergences not fixed yet:
// they must still differ, so that fixing one is noticed and the case moved up.
#include "harness/kvm/fuzz.h"
#include "tests/support/files.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

using namespace vmxsim::kvm;

using vmxsim::test::readFile;

namespace {
std::vector<std::filesystem::path> cases(const std::string &Dir) {
  std::vector<std::filesystem::path> Out;
  std::error_code Ec;
  for (const auto &E : std::filesystem::directory_iterator(Dir, Ec))
    if (E.path().extension() == ".txt")
      Out.push_back(E.path());
  std::sort(Out.begin(), Out.end());
  return Out;
}
const std::string kDir = std::string(VMXSIM_SOURCE_DIR) + "/tests/xcheck/regressions";
} // namespace

TEST(KvmCrossCheck, RegressionCasesReplayUnderVmxsim) {
  unsigned N = 0;
  for (const auto &P : cases(kDir)) {
    ++N;
    EXPECT_EQ(replayRegression(readFile(P)), "") << P;
  }
  std::printf("[ xcheck ] %u regression cases replayed\n", N);
}

TEST(KvmCrossCheck, OpenDivergencesStillDiffer) {
  unsigned N = 0;
  for (const auto &P : cases(kDir + "/open")) {
    ++N;
    const std::string D = replayRegression(readFile(P));
    EXPECT_NE(D, "") << P << ": vmxsim now matches KVM; move the case to regressions/";
    EXPECT_EQ(D.find("cannot parse"), std::string::npos) << D;
  }
  std::printf("[ xcheck ] %u open divergence cases\n", N);
}

TEST(KvmCrossCheck, MalformedRegressionCaseIsReported) {
  EXPECT_NE(replayRegression("cpl 3\ninsn zz\nbogus line\n").find("cannot parse"), std::string::npos);
  EXPECT_EQ(replayRegression("# nothing\n"), "no instructions");
}
