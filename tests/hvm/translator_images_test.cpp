// The translation cache (docs/TRANSLATOR.md) on the bundled guest images: with
// `--exec translate` and `--exec lockstep` each image gives the interpreter's run byte
// for byte (COM1's output, the ground truth and the hypervisor's XenTrace, the exit
// status) and instruction for instruction, cycle for cycle on every CPU; lockstep finds no
// difference, comparing blocks with stores too; and a real share of the instructions ran
// translated.
#include "tests/support/traced_run.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

struct ImageCase {
  const char *Name;
  const char *Image;
  const char *Append;
  unsigned Cpus;
  uint64_t MinTranslated; ///< at least this many instructions ran translated
};

const ImageCase kImages[] = {
    {"Loop", "loop.elf", "iters=20000", 1, 100'000},
    {"LoopMem", "loop.elf", "mem=1 iters=20000", 1, 100'000},
    {"Selftest", "selftest.elf", "", 1, 3'000'000},
    {"VmxE2e", "vmx_e2e.elf", "", 1, 100'000},
    {"HvMixed1", "hv.elf", "scenario=mixed", 1, 100'000},
    {"HvMixed4", "hv.elf", "scenario=mixed", 4, 100'000},
    {"HvApicv4", "hv.elf", "scenario=apicv", 4, 10'000},
    {"HvIo2", "hv.elf", "scenario=io", 2, 10'000},
    {"HvCpuid2", "hv.elf", "scenario=cpuid", 2, 10'000},
    {"HvMsr2", "hv.elf", "scenario=msr", 2, 10'000},
    {"HvCr2", "hv.elf", "scenario=cr", 2, 10'000},
    {"HvHltTimer2", "hv.elf", "scenario=hlt-timer", 2, 10'000},
    {"HvEpt2", "hv.elf", "scenario=ept", 2, 10'000},
    {"HvExceptions2", "hv.elf", "scenario=exceptions", 2, 10'000},
    {"HvMmio2", "hv.elf", "scenario=mmio", 2, 10'000},
    {"HvSystem2", "hv.elf", "scenario=system", 2, 10'000},
    {"HvIrq2", "hv.elf", "scenario=irq", 2, 10'000},
    {"HvRealmode2", "hv.elf", "scenario=realmode", 2, 10'000},
    {"VmxBench", "vmx_bench.elf", "iters=20000 trace=1", 1, 1'000'000},
    {"Smp4", "smp.elf", "", 4, 1'000},
    {"SmpWork4", "smp_work.elf", "iters=20000", 4, 100'000},
};

class TranslatorImages : public testing::TestWithParam<ImageCase> {};

TracedMachine::Outcome runWith(const ImageCase &C, ExecMode Mode, const char *Tag) {
  TracedMachine::Options O;
  O.Exec = Mode;
  TracedMachine M(C.Image, C.Append, C.Cpus, std::string(C.Name) + Tag, "jit", O);
  return M.finish();
}

} // namespace

TEST_P(TranslatorImages, TranslatedAndLockstepRunsAreTheInterpretersByteForByte) {
  const ImageCase &C = GetParam();
  const auto Interp = runWith(C, ExecMode::Interp, "interp");
  ASSERT_NE(Interp.Result.Reason, RunReason::InsnLimit) << Interp.Result.describe();
  for (ExecMode Mode : {ExecMode::Translate, ExecMode::Lockstep}) {
    SCOPED_TRACE(Mode == ExecMode::Translate ? "translate" : "lockstep");
    const auto T = runWith(C, Mode, Mode == ExecMode::Translate ? "translate" : "lockstep");
    EXPECT_EQ(T.Result.Reason, Interp.Result.Reason) << T.Result.describe();
    EXPECT_EQ(T.Result.ExitStatus, Interp.Result.ExitStatus);
    EXPECT_EQ(T.Serial, Interp.Serial);
    EXPECT_EQ(T.GtBytes, Interp.GtBytes);
    EXPECT_EQ(T.HvBytes, Interp.HvBytes);
    EXPECT_EQ(T.Cycles, Interp.Cycles);
    EXPECT_EQ(T.Retired, Interp.Retired);
    EXPECT_GE(T.InsnsTranslated, C.MinTranslated);
    if (Mode == ExecMode::Lockstep) {
      // Lockstep compared blocks (stores included where the image stores from translated
      // code), and ran few translated alone (devices, VMREAD/VMWRITE, code).
      EXPECT_GT(T.LockstepCompared, 10 * T.LockstepUncompared);
      std::printf("%s: lockstep compared %llu blocks (%llu with stores), %llu alone\n", C.Name,
                  (unsigned long long)T.LockstepCompared,
                  (unsigned long long)T.LockstepComparedStores,
                  (unsigned long long)T.LockstepUncompared);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Images, TranslatorImages, testing::ValuesIn(kImages),
                         [](const testing::TestParamInfo<ImageCase> &I) {
                           return std::string(I.param.Name);
                         });
