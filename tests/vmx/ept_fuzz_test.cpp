// Fuzzing the EPT walker (SDM Vol. 3C, "EPT Translation Mechanism", "EPT-Induced VM
// Exits"): random EPT paging structures — random permissions, memory types, large-page
// bits, reserved bits, table addresses inside and outside RAM — and random accesses.
// Every walk must end in exactly one of translation, violation or misconfiguration, with
// the invariants the SDM implies, and a guest running over random EPT tables must never
// crash the emulator. Deterministic (SplitMix64 seeds); bounded to a few seconds under
// ASan.
#include "tests/support/random.h"
#include "tests/support/vmx_test_machine.h"

#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/ept_translation.h"

#include <gtest/gtest.h>

#include <vector>

namespace vmxsim::test {
namespace {

using F = VmcsField;

constexpr uint64_t kPool = 0x1000000; ///< random EPT tables live here
constexpr unsigned kPoolPages = 8;

const VmxProfile &fuzzProfile(bool ExecuteOnly, bool Pages1G, bool FiveLevel) {
  static VmxProfile Profiles[8];
  VmxProfile &P = Profiles[(ExecuteOnly ? 1 : 0) | (Pages1G ? 2 : 0) | (FiveLevel ? 4 : 0)];
  P = VmxProfile::full();
  P.Features |= uint64_t(1) << unsigned(VmxFeature::Ept);
  P.EptExecuteOnly = ExecuteOnly;
  P.Ept1GPages = Pages1G;
  P.Ept5Level = FiveLevel;
  return P;
}

/// A random EPT entry: mostly plausible (pointing into the pool or at RAM), sometimes
/// with reserved bits, odd permissions, or an address beyond RAM.
uint64_t randomEntry(SplitMix64 &R) {
  uint64_t E;
  switch (R.nextBelow(8)) {
  case 0:
    return 0;
  case 1:
    return R.next(); // anything at all
  case 2:
    E = 0x100000000ull + (R.nextBelow(64) << 12); // beyond the 64 MiB of RAM
    break;
  default:
    E = kPool + (R.nextBelow(kPoolPages) << 12);
    break;
  }
  // Half the entries are well-formed RWX/WB so that multi-level walks complete often.
  const bool Plain = R.nextBelow(2);
  E |= Plain ? 7 : R.nextBelow(8);         // R/W/X, including the reserved combinations
  E |= (Plain ? 6 : R.nextBelow(8)) << 3;  // memory type (reserved 2, 3, 7 too)
  if (R.nextBelow(4) == 0)
    E |= eptentry::LargePage;
  if (R.nextBelow(16) == 0)
    E |= uint64_t(1) << (12 + R.nextBelow(40)); // a stray address or reserved bit
  if (R.nextBelow(4) == 0)
    E |= R.nextBelow(16) << 8; // A, D, user-execute, ignored bit 11
  return E;
}

void fillPool(VmxTestMachine &M, SplitMix64 &R) {
  for (unsigned P = 0; P < kPoolPages; ++P)
    for (unsigned I = 0; I < 512; ++I) {
      uint64_t E = randomEntry(R);
      M.write(kPool + P * 0x1000 + I * 8, &E, 8);
    }
}

bool reservedType(uint8_t T) { return T == 2 || T == 3 || T == 7; }

TEST(VmxSupportForAddressTranslation, FuzzRandomEptTablesGiveOneOfThreeOutcomes) {
  unsigned Counts[3] = {};
  for (uint64_t Seed = 1; Seed <= 64; ++Seed) {
    SplitMix64 R(Seed);
    const bool ExecOnly = R.nextBelow(2), Pages1G = R.nextBelow(2), Five = R.nextBelow(2);
    VmxTestMachine M(fuzzProfile(ExecOnly, Pages1G, Five));
    fillPool(M, R);
    for (unsigned N = 0; N < 2000; ++N) {
      SCOPED_TRACE(testing::Message() << "seed " << Seed << " access " << N);
      const uint64_t Eptp = (kPool + (R.nextBelow(kPoolPages) << 12)) |
                            ((Five && R.nextBelow(2) ? 4u : 3u) << 3) | 6 |
                            (R.nextBelow(2) ? eptp::AccessedDirty : 0);
      // Guest-physical addresses that hit the pool's index patterns often.
      const uint64_t Gpa = R.nextBelow(2) ? (R.next() & ((uint64_t(1) << 46) - 1))
                                          : (R.nextBelow(1u << 20) << 12) | R.nextBelow(4096);
      EptAccess A{Access(R.nextBelow(3))};
      A.PagingStructure = A.Kind != Access::Fetch && R.nextBelow(4) == 0;
      A.LinearValid = R.nextBelow(2);
      A.Gla = R.next();
      const EptWalk W = eptWalk(M.Cpu_, Eptp, vmxsim::Gpa(Gpa), A);
      const bool Ad = Eptp & eptp::AccessedDirty;
      const bool IsWrite = A.Kind == Access::Write || (Ad && A.PagingStructure);
      switch (W.Outcome) {
      case EptOutcome::Translated:
        ++Counts[0];
        EXPECT_GE(W.PageLevel, 1);
        EXPECT_LE(W.PageLevel, Pages1G ? 3 : 2);
        EXPECT_FALSE(reservedType(W.MemType));
        EXPECT_LT(W.Address.value(), uint64_t(1) << 46);
        EXPECT_EQ(W.Address.pageOffset(), Gpa & 0xfff);
        if (A.Kind == Access::Fetch)
          EXPECT_TRUE(W.Rights & eptright::X);
        else
          EXPECT_TRUE((W.Rights & eptright::R) && (!IsWrite || (W.Rights & eptright::W)));
        // Never write-without-read: that is a misconfiguration.
        EXPECT_FALSE((W.Rights & eptright::W) && !(W.Rights & eptright::R));
        break;
      case EptOutcome::Violation: {
        ++Counts[1];
        const uint64_t Q = eptViolationQualification(M.Cpu_, W, Eptp, A);
        EXPECT_EQ(Q & ~uint64_t(0x1ff), 0u); // bits 9-12 never set by the walk itself
        EXPECT_EQ((Q >> 7) & 1, uint64_t(A.LinearValid));
        break;
      }
      case EptOutcome::Misconfiguration:
        ++Counts[2];
        break;
      default:
        ADD_FAILURE() << "outcome " << unsigned(W.Outcome);
      }
      // Walking again gives the same outcome (A/D updates change no outcome).
      const EptWalk W2 = eptWalk(M.Cpu_, Eptp, vmxsim::Gpa(Gpa), A);
      EXPECT_EQ(W2.Outcome, W.Outcome);
      EXPECT_EQ(W2.Address, W.Address);
    }
  }
  // The generator reaches all three outcomes.
  EXPECT_GT(Counts[0], 0u);
  EXPECT_GT(Counts[1], 0u);
  EXPECT_GT(Counts[2], 0u);
}

// A guest under random EPT permissions and mappings of its own code, stack and paging
// structures and of the data it touches: the run always ends in a defined state.
TEST(VmxSupportForAddressTranslation, FuzzGuestOverRandomEptNeverCrashes) {
  unsigned Exits48 = 0, Exits49 = 0;
  for (uint64_t Seed = 100; Seed < 400; ++Seed) {
    SCOPED_TRACE(testing::Message() << "seed " << Seed);
    SplitMix64 R(Seed);
    VmxTestMachine M(fuzzProfile(true, true, false));
    // EPT: PML4 at kPool, one PDPT, one PD, PTs for 0..2 MiB (identity) and for
    // 2..4 MiB (random host pages).
    const uint64_t Pml4 = kPool, Pdpt = kPool + 0x1000, Pd = kPool + 0x2000,
                   Pt0 = kPool + 0x3000, Pt1 = kPool + 0x4000;
    static const uint8_t Zero[0x5000] = {};
    M.write(kPool, Zero, sizeof(Zero));
    auto put = [&](uint64_t Addr, uint64_t E) { M.write(Addr, &E, 8); };
    put(Pml4, Pdpt | 7);
    put(Pdpt, Pd | 7);
    put(Pd, Pt0 | 7);
    put(Pd + 8, Pt1 | 7);
    for (uint64_t I = 0; I < 512; ++I) {
      uint64_t Perm = R.nextBelow(16) == 0 ? R.nextBelow(8) : 7; // mostly RWX
      put(Pt0 + I * 8, (I << 12) | Perm | (6u << 3));
      uint64_t E = R.nextBelow(4) == 0 ? randomEntry(R)
                                       : ((0x600000 + (I << 12)) | R.nextBelow(8) | (6u << 3));
      put(Pt1 + I * 8, E);
    }
    if (R.nextBelow(4) == 0)
      put(Pd + 8 * R.nextBelow(3), randomEntry(R)); // a random PDE, maybe a 2 MiB page
    VmcsData &V = M.vmcs();
    V.set(F::PrimaryProcessorBasedVmExecutionControls,
          V.get(F::PrimaryProcessorBasedVmExecutionControls) |
              controlBit(VmxControl::ActivateSecondaryControls));
    V.set(F::SecondaryProcessorBasedVmExecutionControls,
          V.get(F::SecondaryProcessorBasedVmExecutionControls) |
              controlBit(VmxControl::EnableEpt));
    V.set(F::EptPointer, Pml4 | (3u << 3) | 6 | (R.nextBelow(2) ? eptp::AccessedDirty : 0));
    // Guest: 16 random accesses [rbx + disp32] (read, write or a call/ret pair), then HLT.
    std::vector<uint8_t> Code;
    for (unsigned K = 0; K < 16; ++K) {
      const uint32_t Disp = uint32_t(0x200000 + R.nextBelow(0x200000 - 8));
      const uint8_t D[4] = {uint8_t(Disp), uint8_t(Disp >> 8), uint8_t(Disp >> 16),
                            uint8_t(Disp >> 24)};
      switch (R.nextBelow(3)) {
      case 0: // mov rax, [rbx + disp32]
        Code.insert(Code.end(), {0x48, 0x8b, 0x83, D[0], D[1], D[2], D[3]});
        break;
      case 1: // mov [rbx + disp32], rax
        Code.insert(Code.end(), {0x48, 0x89, 0x83, D[0], D[1], D[2], D[3]});
        break;
      default: // add rax, [rbx + disp32] (a different read path, same access)
        Code.insert(Code.end(), {0x48, 0x03, 0x83, D[0], D[1], D[2], D[3]});
        break;
      }
    }
    Code.push_back(0xf4);
    M.write(kGuestCode, Code.data(), Code.size());
    const uint8_t Hlt = 0xf4;
    M.write(kHostCode, &Hlt, 1);
    M.S.Gpr[RBX] = 0;
    StepResult Res = M.exec(enc::Vmlaunch, 200);
    EXPECT_NE(Res.Why, StopReason::Unimplemented);
    EXPECT_NE(Res.Why, StopReason::Shutdown);
    if (M.Cpu_.NonRoot) {
      EXPECT_EQ(Res.Why, StopReason::Halted);
      continue;
    }
    const uint64_t Reason = V.get(F::ExitReason) & 0xffff;
    EXPECT_TRUE(Reason == 48 || Reason == 49 || Reason == 2 || Reason == 0)
        << "exit reason " << Reason;
    Exits48 += Reason == 48;
    Exits49 += Reason == 49;
  }
  EXPECT_GT(Exits48, 0u);
  EXPECT_GT(Exits49, 0u);
}

} // namespace
} // namespace vmxsim::test
