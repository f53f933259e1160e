// SDM Vol. 3C, "Virtual-Processor Identifiers (VPIDs)" and "Maintenance of Paging
// Structures" / "Invalidation of Cached Information": with "enable VPID", the guest's
// cached translations are tagged with its VPID and may survive VM exits and entries, so
// a guest page-table change the hypervisor makes without invalidation stays invisible
// until INVVPID; without VPID, VM entry and exit invalidate VPID 0000H's mappings and the
// change is seen at once. (Caching is permitted, not required; vmxsim caches, so a test
// can show the tagging works.)
#include "tests/support/vmx_test_machine.h"

#include "cpu/vmx/capabilities.h"

#include <gtest/gtest.h>

namespace vmxsim::test {
namespace {

using F = VmcsField;

// Linear 32 MiB, in a 2 MiB page of TestMachine's identity map (PD 0, entry 16). Its TLB
// slot (0) is used by nothing else these tests run.
constexpr uint64_t kProbe = 0x2000000;
constexpr uint64_t kPdeOfProbe = kPml4Base + 0x2000 + 16 * 8;
constexpr uint64_t kOtherPage = 0x2200000; // where the PDE is redirected
constexpr uint64_t kValueA = 0xaaaa'0000'0000'000aull, kValueB = 0xbbbb'0000'0000'000bull;

// Guest: mov rbx, [kProbe]; vmcall; mov rcx, [kProbe]; vmcall; mov rdx, [kProbe]; vmcall
const std::vector<uint8_t> kGuest = {
    0x48, 0x8b, 0x1c, 0x25, 0x00, 0x00, 0x00, 0x02, 0x0f, 0x01, 0xc1,
    0x48, 0x8b, 0x0c, 0x25, 0x00, 0x00, 0x00, 0x02, 0x0f, 0x01, 0xc1,
    0x48, 0x8b, 0x14, 0x25, 0x00, 0x00, 0x00, 0x02, 0x0f, 0x01, 0xc1};
constexpr uint64_t kGuestStep = 11; // bytes per mov + vmcall

void setUp(VmxTestMachine &M, bool Vpid) {
  M.write(kGuestCode, kGuest.data(), kGuest.size());
  const uint8_t Hlt = 0xf4;
  M.write(kHostCode, &Hlt, 1);
  M.write(kProbe, &kValueA, 8);
  M.write(kOtherPage, &kValueB, 8);
  if (Vpid) {
    VmcsData &V = M.vmcs();
    V.set(F::PrimaryProcessorBasedVmExecutionControls,
          V.get(F::PrimaryProcessorBasedVmExecutionControls) |
              controlBit(VmxControl::ActivateSecondaryControls));
    V.set(F::SecondaryProcessorBasedVmExecutionControls,
          V.get(F::SecondaryProcessorBasedVmExecutionControls) |
              controlBit(VmxControl::EnableVpid));
    V.set(F::VirtualProcessorIdentifier, 1);
  }
}

// The hypervisor's page-table edit: no INVLPG, no INVVPID (a host write to memory).
void redirectProbe(VmxTestMachine &M) {
  uint64_t Pde = kOtherPage | 0x87;
  M.write(kPdeOfProbe, &Pde, 8);
}

void resumeAfterVmcall(VmxTestMachine &M) {
  ASSERT_EQ(M.vmcs().get(F::ExitReason), 18u);
  M.vmcs().set(F::GuestRip, M.vmcs().get(F::GuestRip) + 3);
  M.Cpu_.Activity = ActivityState::Active;
  M.exec(enc::Vmresume, 10);
}

TEST(VirtualProcessorIdentifiers, StaleTranslationSurvivesExitAndEntryWithSameVpid) {
  VmxTestMachine M;
  setUp(M, /*Vpid=*/true);
  M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(M.S.Gpr[RBX], kValueA);
  redirectProbe(M);
  resumeAfterVmcall(M);
  EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode + kGuestStep + 8);
  EXPECT_EQ(M.S.Gpr[RCX], kValueA) << "the VPID-tagged translation was not kept";
}

TEST(VirtualProcessorIdentifiers, InvvpidSingleContextMakesTheNewTranslationVisible) {
  VmxTestMachine M;
  setUp(M, /*Vpid=*/true);
  M.exec(enc::Vmlaunch, 10);
  redirectProbe(M);
  resumeAfterVmcall(M);
  ASSERT_EQ(M.S.Gpr[RCX], kValueA);
  // INVVPID type 1 (single-context) with descriptor {VPID 1, 0}: invvpid rbx, [rax]
  uint64_t Desc[2] = {1, 0};
  M.write(kPointerSlot, Desc, 16);
  M.S.Gpr[RBX] = 1;
  M.S.Gpr[RAX] = kPointerSlot;
  M.Cpu_.Activity = ActivityState::Active; // the host stopped at its HLT after the exit
  uint64_t RetiredBefore = M.Cpu_.Retired;
  StepResult R = M.exec({0x66, 0x0f, 0x38, 0x81, 0x18});
  ASSERT_EQ(M.Cpu_.Retired, RetiredBefore + 1) << "INVVPID did not execute";
  ASSERT_FALSE(R.Faulted);
  ASSERT_EQ(M.arith(), 0u) << "INVVPID did not VMsucceed";
  resumeAfterVmcall(M);
  EXPECT_EQ(M.S.Gpr[RDX], kValueB);
}

TEST(VirtualProcessorIdentifiers, WithoutVpidEntryAndExitFlushTheGuestTranslation) {
  VmxTestMachine M;
  setUp(M, /*Vpid=*/false);
  M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(M.S.Gpr[RBX], kValueA);
  redirectProbe(M);
  resumeAfterVmcall(M);
  EXPECT_EQ(M.S.Gpr[RCX], kValueB);
}

TEST(VirtualProcessorIdentifiers, GuestTranslationsDoNotLeakIntoTheHost) {
  // The host (VPID 0000H) reads the probe after the guest (VPID 1) cached it and the
  // mapping changed: the host walks its own tables.
  VmxTestMachine M;
  setUp(M, /*Vpid=*/true);
  M.exec(enc::Vmlaunch, 10);
  redirectProbe(M);
  M.Cpu_.Activity = ActivityState::Active;
  M.exec({0x48, 0x8b, 0x34, 0x25, 0x00, 0x00, 0x00, 0x02}); // mov rsi, [kProbe]
  EXPECT_EQ(M.S.Gpr[RSI], kValueB);
}

// The hypervisor reading the same linear page between the exit and the entry (VPID 0)
// must not evict the guest's VPID-tagged translation: both contexts' entries for the
// page stay cached (the software TLB keeps a displaced entry in a victim slot), so the
// guest still sees the stale mapping, exactly as when the host does not touch the page.
TEST(VirtualProcessorIdentifiers, HostUseOfTheSamePageKeepsTheGuestTranslation) {
  VmxTestMachine M;
  setUp(M, /*Vpid=*/true);
  M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(M.S.Gpr[RBX], kValueA);
  redirectProbe(M);
  // Root operation: mov rax, [kProbe] — a fresh walk in VPID 0's context sees the edit.
  const std::vector<uint8_t> HostRead = {0x48, 0x8b, 0x04, 0x25, 0x00, 0x00, 0x00, 0x02};
  M.Cpu_.Activity = ActivityState::Active; // the host stub's HLT after the exit
  M.exec(HostRead);
  EXPECT_EQ(M.S.Gpr[RAX], kValueB);
  resumeAfterVmcall(M);
  EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode + kGuestStep + 8);
  EXPECT_EQ(M.S.Gpr[RCX], kValueA) << "the host's fill evicted the guest's translation";
}

} // namespace
} // namespace vmxsim::test
