// The GoogleTest helpers (harness/gtest/vmxsim_gtest.h) on real runs: the vmx_e2e image's
// 40 exits (hvm/images/vmx_e2e/README.md lists them) matched one by one, as sequences,
// as counts and as cycle budgets; VM-entry failures of a broken known-good VMCS by check
// and by VM-instruction error; and the exact text of the failure messages.
#include "harness/gtest/vmxsim_gtest.h"
#include "harness/machine.h"
#include "tests/support/files.h"
#include "tests/support/traced_run.h"
#include "tests/support/vmx_test_machine.h"

#include <gmock/gmock.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

using namespace vmxsim;
using namespace vmxsim::testing;
using ::testing::Contains;
using ::testing::Not;

namespace {

/// vmx_e2e run to its end with the ground truth in a temporary file, parsed.
struct E2e {
  std::unique_ptr<Machine> M;
  std::string Gt = vmxsim::test::tracedTempPath("matchers", "e2e.gt.xt");
  GroundTruth T;
  E2e() {
    MachineConfig Cfg;
    // The image's bytes under a fixed name: the guest parses its command line, which
    // starts with the kernel's name, so a build directory's path would move every TSC.
    const std::string Image =
        vmxsim::test::readFile(std::string(VMXSIM_IMAGE_DIR) + "/vmx_e2e.elf");
    Cfg.KernelImage.assign(Image.begin(), Image.end());
    Cfg.Kernel = "vmx_e2e.elf";
    Cfg.Serial = OutputSpec::capture();
    Cfg.Debugcon = OutputSpec::discard();
    Cfg.GroundTruthFile = Gt;
    Cfg.MaxInsns = 10'000'000;
    Error Err;
    M = Machine::create(Cfg, Err);
    EXPECT_TRUE(M) << Err.str();
    if (!M)
      return;
    M->run();
    auto R = GroundTruth::read(*M);
    EXPECT_TRUE(R) << R.error().str();
    if (R)
      T = *R;
    M.reset();
    std::remove(Gt.c_str());
  }
};

const E2e &e2e() {
  static E2e *Run = new E2e; // one run for every test of this file
  return *Run;
}

template <class M, class V> std::string explain(const M &Matcher, const V &Value) {
  ::testing::StringMatchResultListener L;
  EXPECT_FALSE(::testing::ExplainMatchResult(Matcher, Value, &L));
  return L.str();
}

template <class T, class M> std::string description(const M &Matcher) {
  return ::testing::DescribeMatcher<T>(Matcher);
}

} // namespace

TEST(GtestMatchers, VmxE2eExitsMatchOneByOne) {
  const std::vector<ExitInfo> &X = e2e().T.exits();
  ASSERT_EQ(X.size(), 40u);
  EXPECT_THAT(X[0], ExitedWith(ExitReason::Cpuid).length(2));
  EXPECT_THAT(X, Contains(ExitedWith(ExitReason::IoInstruction).port(0x3f8).write().size(1)));
  EXPECT_THAT(X, Contains(ExitedWith(ExitReason::IoInstruction).port(0x3fd).read()));
  EXPECT_THAT(X, Not(Contains(ExitedWith(ExitReason::IoInstruction).port(0x3f8).read())));
  EXPECT_THAT(X, Contains(ExitedWith(ExitReason::ControlRegisterAccesses).cr(3).movToCr()));
  EXPECT_THAT(X, Contains(ExitedWith(ExitReason::ControlRegisterAccesses).cr(8).movFromCr()));
  EXPECT_THAT(X, Contains(ExitedWith(ExitReason::Wrmsr).msr(0xc0000103)));
  EXPECT_THAT(X, Contains(ExitedWith(ExitReason::Rdmsr).msr(0xc0000103)));
  EXPECT_THAT(X.back(), ExitedWith(ExitReason::Hlt));
}

TEST(GtestMatchers, VmxE2eExitSequencesAndCounts) {
  const std::vector<ExitInfo> &X = e2e().T.exits();
  EXPECT_THAT(X, ContainsExitsInOrder({ExitReason::Cpuid, ExitReason::Cpuid,
                                       ExitedWith(ExitReason::IoInstruction).port(0x3fd),
                                       ExitedWith(ExitReason::IoInstruction).port(0x3f8),
                                       ExitReason::Wrmsr, ExitReason::Rdmsr, ExitReason::Hlt}));
  EXPECT_THAT(X, Not(ContainsExitsInOrder({ExitReason::Hlt, ExitReason::Cpuid})));
  EXPECT_THAT(X, ExitCountsAre({{ExitReason::Cpuid, 2}, {ExitReason::Hlt, 1},
                                {ExitReason::TripleFault, 0}}));
  // All 40, exactly (hvm/images/vmx_e2e/README.md; VMCALL 0 follows each check).
  using R = ExitReason;
  const ExitMatcher Poll = ExitedWith(R::IoInstruction).port(0x3fd).in().size(1);
  const ExitMatcher Put = ExitedWith(R::IoInstruction).port(0x3f8).out().size(1);
  EXPECT_THAT(X, ExitsInOrder({R::Cpuid, R::Vmcall, R::Vmcall, R::Vmcall, R::Cpuid, R::Vmcall,
                               Poll, Put, Poll, Put, Poll, Put, Poll, Put, Poll, Put, Poll, Put,
                               ExitedWith(R::IoInstruction).port(0x1234).in().size(2),
                               R::Vmcall,
                               ExitedWith(R::IoInstruction).port(0x1234).out().size(4),
                               ExitedWith(R::Wrmsr).msr(0xc0000103),
                               ExitedWith(R::Rdmsr).msr(0xc0000103), R::Vmcall, R::Rdmsr,
                               R::Vmcall, R::Wrmsr, R::Vmcall,
                               ExitedWith(R::ControlRegisterAccesses).cr(3).movToCr().gpr(15),
                               ExitedWith(R::ControlRegisterAccesses).cr(0).movToCr().gpr(0),
                               R::Vmcall,
                               ExitedWith(R::ControlRegisterAccesses).cr(0).movToCr().gpr(14),
                               R::Vmcall,
                               ExitedWith(R::ControlRegisterAccesses).cr(8).movToCr().gpr(0),
                               ExitedWith(R::ControlRegisterAccesses).cr(8).movFromCr().gpr(3),
                               R::Vmcall, R::Vmcall, R::Vmcall, R::Vmcall,
                               ExitedWith(R::Hlt).rip(0x10938e).length(1)}));
}

TEST(GtestMatchers, FailureMessagesAreExact) {
  const std::vector<ExitInfo> &X = e2e().T.exits();
  ASSERT_EQ(X.size(), 40u);
  const ExitMatcher Put = ExitedWith(ExitReason::IoInstruction).port(0x3f8).write();
  EXPECT_EQ(description<const ExitInfo &>(::testing::Matcher<const ExitInfo &>(Put)),
            "is a VM exit I/O instruction (30) with port 0x3f8, direction OUT");
  EXPECT_EQ(explain(::testing::Matcher<const ExitInfo &>(Put), X[6]), "port is 0x3fd, not 0x3f8\n"
            "VMCS fields:\n"
            "  Exit reason: 0x1e (I/O instruction)\n"
            "  Exit qualification: 0x3fd0008\n"
            "  Guest RIP: 0x10939c\n"
            "  VM-exit instruction length: 1\n"
            "Ground-truth records:\n"
            "  #87 CPU0 402113 +0 GT_SLOT_OWN slot=3 rip=0x1083ed value=0x0\n"
            "  #88 CPU0 402114 +1 GT_SLOT_OWN slot=4 rip=0x1083f8 value=0x0\n"
            "  #89 CPU0 402236 +122 GT_RESUME\n"
            "> #90 CPU0 402262 +26 GT_EXIT reason=30(IoInstruction) rip=0x10939c len=1 "
            "qual=0x3fd0008\n"
            "  #91 CPU0 402262 - GT_VMEXIT_REGS rax=0x0 rcx=0x68 rdx=0x78b03fd\n"
            "  #92 CPU0 402560 +298 GT_ROOT_RDTSC rip=0x108986\n"
            "  #93 CPU0 402687 +127 GT_SLOT_OWN slot=0 rip=0x101daf value=0x1e\n");
  EXPECT_EQ(explain(::testing::Matcher<const ExitInfo &>(ExitedWith(ExitReason::Cpuid)), X[39]),
            "exit reason is HLT (12), not CPUID (10)\n"
            "VMCS fields:\n"
            "  Exit reason: 0xc (HLT)\n"
            "  Exit qualification: 0x0\n"
            "  Guest RIP: 0x10938e\n"
            "  VM-exit instruction length: 1\n"
            "Ground-truth records:\n"
            "  #571 CPU0 952053 +0 GT_SLOT_OWN slot=3 rip=0x1083ed value=0x0\n"
            "  #572 CPU0 952054 +1 GT_SLOT_OWN slot=4 rip=0x1083f8 value=0x0\n"
            "  #573 CPU0 952176 +122 GT_RESUME\n"
            "> #574 CPU0 952196 +20 GT_EXIT reason=12(Hlt) rip=0x10938e len=1\n"
            "  #575 CPU0 952494 +298 GT_ROOT_RDTSC rip=0x108986\n"
            "  #576 CPU0 952621 +127 GT_SLOT_OWN slot=0 rip=0x101daf value=0xc\n"
            "  #577 CPU0 966606 +13985 GT_ROOT_RDTSC rip=0x108986\n");
  EXPECT_EQ(explain(ExitCountsAre({{ExitReason::Cpuid, 3}, {ExitReason::Hlt, 1}}), X),
            "CPUID (10): 2, not 3");
  EXPECT_EQ(explain(ContainsExitsInOrder({ExitReason::Hlt, ExitReason::Cpuid}), X),
            "found the first 1 of 2 in order; no exit after them is a VM exit CPUID (10)");
  const std::vector<ExitInfo> First2(X.begin(), X.begin() + 2);
  EXPECT_EQ(explain(ExitsInOrder({ExitReason::Cpuid}), First2), "there are 2 exits, not 1; the first extra one is VM exit VMCALL (18) on CPU 0 at "
            "RIP 0x109262\n"
            "VMCS fields:\n"
            "  Exit reason: 0x12 (VMCALL)\n"
            "  Exit qualification: 0x0\n"
            "  Guest RIP: 0x109262\n"
            "  VM-exit instruction length: 3\n"
            "Ground-truth records:\n"
            "  #19 CPU0 312911 +0 GT_RESUME\n"
            "  #20 CPU0 312911 - GT_VMENTRY_REGS rax=0x40000000 rcx=0x56486d69 rdx=0x4d\n"
            "  #21 CPU0 312911 - GT_GPR cpu=0 reg=3 value=0x73786d76\n"
            "> #22 CPU0 312935 +24 GT_EXIT reason=18(Vmcall) rip=0x109262 len=3\n"
            "  #23 CPU0 312935 - GT_VMEXIT_REGS rax=0x0 rcx=0x56486d69 rdx=0x4d\n"
            "  #24 CPU0 313233 +298 GT_ROOT_RDTSC rip=0x108986\n"
            "  #25 CPU0 313360 +127 GT_SLOT_OWN slot=0 rip=0x101daf value=0x12\n");
  EXPECT_NONFATAL_FAILURE(EXPECT_THAT(e2e().T, HandlerCycles(ExitReason::Cpuid) <= 10),
                          "the slowest of 2 CPUID (10) exits took 15395 cycles to the next VM entry: VM exit "
                          "CPUID (10) on CPU 0 at RIP 0x109255\nVMCS fields:\n"
                          "  Exit reason: 0xa (CPUID)\n");
}

TEST(GtestMatchers, VmxE2eHandlerCycleBudgets) {
  EXPECT_THAT(e2e().T, HandlerCycles(ExitReason::Cpuid) <= 100000);
  EXPECT_THAT(e2e().T, Not(HandlerCycles(ExitReason::Cpuid) < 10));
  EXPECT_THAT(e2e().T, Not(HandlerCycles(ExitReason::TripleFault) <= 100000));
}

TEST(GtestMatchers, LastExitReadsTheVmcsAtAStop) {
  MachineConfig Cfg;
  Cfg.Kernel = std::string(VMXSIM_IMAGE_DIR) + "/vmx_e2e.elf";
  Cfg.Serial = OutputSpec::discard();
  Cfg.Debugcon = OutputSpec::discard();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  auto R = M->runUntil({StopWhen::vmExit().reason(ExitReason::IoInstruction).nth(2)});
  ASSERT_TRUE(R);
  ErrorOr<ExitInfo> E = lastExit(*M, 0);
  ASSERT_TRUE(E) << E.error().str();
  EXPECT_THAT(*E, ExitedWith(ExitReason::IoInstruction).port(0x3f8).write().size(1));
  EXPECT_EQ(E->Rax & 0xff, uint64_t('h'));
  EXPECT_EQ(lastExit(*M, 1).error().str(), "the machine has no CPU 1 (it has 1)");
}

namespace {

/// One CPU in VMX root operation with the known-good VMCS (tests/support/
/// vmx_test_machine.h) and the stub "VMLAUNCH; isa-debug-exit 0xee" at its RIP; the
/// ground truth in a temporary file.
struct LaunchStub {
  std::unique_ptr<Machine> M;
  std::string Gt = vmxsim::test::tracedTempPath("matchers", "launch.gt.xt");
  LaunchStub() {
    MachineConfig Cfg;
    Cfg.Vmx = &VmxProfile::full();
    Cfg.Serial = OutputSpec::discard();
    Cfg.Debugcon = OutputSpec::discard();
    Cfg.GroundTruthFile = Gt;
    Cfg.MaxInsns = 1000;
    Error Err;
    M = Machine::create(Cfg, Err);
    EXPECT_TRUE(M) << Err.str();
    vmxsim::test::writeFlatGdt(M->mem());
    vmxsim::test::KnownGoodLayout L;
    L.GuestRip = 0x400000;
    L.HostRip = 0x500000;
    EXPECT_TRUE(vmxsim::test::enterVmxRootOperation(M->cpu(0), M->mem(), VmxProfile::full(),
                                                    L, 0x300000, 0x301000, 0x302000));
    const uint8_t Hlt = 0xf4;
    M->mem().copyIn(Hpa(L.GuestRip), &Hlt, 1);
    M->mem().copyIn(Hpa(L.HostRip), &Hlt, 1);
    const uint8_t Stub[] = {0x0f, 0x01, 0xc2, 0xb0, 0xee, 0xe6, 0xf4, 0xf4};
    M->mem().copyIn(Hpa(0x303000), Stub, sizeof(Stub));
    M->cpu(0).S.Rip = 0x303000;
    M->cpu(0).Mmu.flushDecodeCache();
  }
  ~LaunchStub() {
    M.reset();
    std::remove(Gt.c_str());
  }
  /// Runs to the failed VMLAUNCH; its GT_VMENTRY_FAIL.
  EntryFailureInfo launch() {
    auto R = M->runUntil({StopWhen::vmEntryFailure()});
    EXPECT_TRUE(R && R->Reason == RunReason::Stopped);
    auto T = GroundTruth::read(*M);
    EXPECT_TRUE(T) << T.error().str();
    EXPECT_EQ(T->entryFailures().size(), 1u);
    return T && !T->entryFailures().empty() ? T->entryFailures()[0] : EntryFailureInfo{};
  }
};

} // namespace

TEST(GtestMatchers, VmEntryFailureOfAControlCheckIsVmFailValidWithError7) {
  LaunchStub S;
  ASSERT_TRUE(S.M);
  ASSERT_FALSE(S.M->writeVmcs(0, "PinBasedVmExecutionControls", 0));
  const EntryFailureInfo F = S.launch();
  EXPECT_THAT(F, FailedEntryCheck(VmEntryCheckId::PinBasedReserved));
  EXPECT_THAT(F, FailedWithVmInstructionError(VmInstructionError::EntryInvalidControlFields));
  EXPECT_THAT(*S.M, HasVmInstructionError(0, VmInstructionError::EntryInvalidControlFields));
  // Stopped right after the VMLAUNCH, still in root operation.
  EXPECT_FALSE(S.M->cpu(0).NonRoot);
  EXPECT_EQ(S.M->cpu(0).S.Rip, 0x303003u);
}

TEST(GtestMatchers, VmEntryFailureOfAGuestStateCheckIsExit33) {
  LaunchStub S;
  ASSERT_TRUE(S.M);
  const uint64_t Cr4 = *S.M->readVmcs(0, "GuestCr4");
  ASSERT_FALSE(S.M->writeVmcs(0, "GuestCr4", Cr4 & ~uint64_t(0x2000)));
  const EntryFailureInfo F = S.launch();
  EXPECT_THAT(F, FailedEntryCheck(VmEntryCheckId::GuestCr4Fixed));
  EXPECT_EQ(explain(FailedEntryCheck(VmEntryCheckId::GuestCr0Fixed), F), "the failing check is GuestCr4Fixed\n"
            "Ground-truth records:\n"
            "> #0 CPU0 62 +0 GT_VMENTRY_FAIL cpu=0 outcome=2 number=33 check=104(GuestCr4Fixed) "
            "qual=0x0\n"
            "  #1 CPU0 62 +0 GT_EXIT reason=33(VmEntryFailureInvalidGuestState)"
            "|EntryFailure rip=0x303000 len=0\n");
  EXPECT_EQ(explain(FailedWithVmInstructionError(VmInstructionError::EntryInvalidControlFields),
                    F),
            "it failed with a VM exit (basic reason 33), not VMfailValid\n"
            "Ground-truth records:\n"
            "> #0 CPU0 62 +0 GT_VMENTRY_FAIL cpu=0 outcome=2 number=33 check=104(GuestCr4Fixed) "
            "qual=0x0\n"
            "  #1 CPU0 62 +0 GT_EXIT reason=33(VmEntryFailureInvalidGuestState)"
            "|EntryFailure rip=0x303000 len=0\n");
  EXPECT_EQ(explain(HasVmInstructionError(0, VmInstructionError::VmlaunchNonClearVmcs), *S.M),
            "CPU 0's current VMCS has VM-instruction error: 0 (none)");
  EXPECT_EQ(F.Outcome, VmEntryFailOutcome::GuestStateCheck);
  EXPECT_EQ(F.Number, 33u);
  EXPECT_EQ(*S.M->readVmcs(0, "ExitReason"), 0x80000021u);
  EXPECT_EQ(S.M->cpu(0).S.Rip, 0x500000u); // the failure's exit loaded the host state
}
