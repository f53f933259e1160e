// SDM Vol. 3C, "VMX Support for Address Translation": the EPT walk (4-KByte, 2-MByte
// and 1-GByte pages), EPT violations (exit reason 48, the qualification bit by bit, the
// guest-physical and guest-linear address fields), EPT misconfigurations (exit reason
// 49), accessed and dirty flags for EPT, guest paging-structure accesses through EPT,
// and the TLB tagging of combined mappings by EP4TA (INVEPT, EPTP changes).
//
// Every test launches the known-good VMCS with "enable EPT". The guest uses
// TestMachine's identity paging (CR3 = 0x10000, 2-MByte pages over 0..4 GiB); EPT maps
// guest-physical 0..2 MiB identity with 4-KByte pages (code, stack, guest page tables)
// plus the data pages each test sets up. The host halts at kHostCode.
#include "tests/support/vmx_test_machine.h"

#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/exit_qualification.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/ept_translation.h"

#include <gtest/gtest.h>

#include <vector>

namespace vmxsim::test {
namespace {

using F = VmcsField;
using Bytes = std::vector<uint8_t>;

constexpr uint64_t kEptRoot = 0x1000000; ///< EPT tables are allocated from here
constexpr uint64_t kEptp4Wb = kEptRoot | (3u << 3) | 6; ///< WB, 4-level walk
constexpr uint64_t kEptAd = 1u << 6;

// Data pages: guest-linear = guest-physical (identity guest paging); EPT maps them to
// other host-physical addresses so a test sees which memory was reached.
constexpr uint64_t kGpa4K = 0x2a5000, kHpa4K = 0x6a5000;       // 4-KByte EPT page
constexpr uint64_t kGpa2M = 0x400000, kHpa2M = 0x800000;       // 2-MByte EPT page
constexpr uint64_t kGpa1G = 0x40000000, kHpa1G = 0;            // 1-GByte EPT page
constexpr uint64_t kOff = 0x238;
constexpr uint64_t kOff1G = 0x5a5238; ///< inside the 1-GByte page: host 0x5a5238
constexpr uint64_t kValue = 0x1122334455667788ull, kNewValue = 0x99aabbccddeeff00ull;

constexpr uint64_t kRwx = 7, kWb = 6u << 3;

/// The full profile without advanced VM-exit information for EPT violations, so that
/// the tests of bits 0-8 and 12 see 0 in bits 9-11 ("undefined" without it; vmxsim writes
/// 0). The tests of mode-based execute control and of bits 9-11 use the full profile.
const VmxProfile &eptProfile(bool ExecuteOnly = true, bool Pages1G = true) {
  static VmxProfile Profiles[4];
  VmxProfile &P = Profiles[(ExecuteOnly ? 1 : 0) | (Pages1G ? 2 : 0)];
  P = VmxProfile::full();
  P.Features |= uint64_t(1) << unsigned(VmxFeature::Ept);
  P.Features &= ~(uint64_t(1) << unsigned(VmxFeature::AdvancedEptViolationInformation));
  P.EptExecuteOnly = ExecuteOnly;
  P.Ept1GPages = Pages1G;
  return P;
}

/// Builds EPT paging structures in host memory (bump-allocated 4-KByte tables).
class EptBuilder {
public:
  explicit EptBuilder(VmxTestMachine &M) : M(M) { zero(kEptRoot); }

  /// The host-physical address of the entry of Level (4 = PML4E .. 1 = PTE) for Gpa,
  /// creating RWX non-leaf entries down to Level.
  uint64_t entryAddress(uint64_t Gpa, int Level) {
    uint64_t Table = kEptRoot;
    for (int L = 4;; --L) {
      uint64_t Addr = Table + ((Gpa >> (12 + 9 * (L - 1))) & 0x1ff) * 8;
      if (L == Level)
        return Addr;
      uint64_t E = M.read64(Addr);
      if (!(E & 7)) {
        Next += 0x1000;
        zero(Next);
        E = Next | kRwx;
        M.write(Addr, &E, 8);
      }
      Table = E & 0xffffffffff000ull;
    }
  }
  void set(uint64_t Addr, uint64_t E) { M.write(Addr, &E, 8); }
  /// Maps the page of Level (1 = 4 KiB, 2 = 2 MiB, 3 = 1 GiB) at Gpa to Hpa with Flags.
  uint64_t map(uint64_t Gpa, uint64_t Hpa, int Level, uint64_t Flags) {
    uint64_t Addr = entryAddress(Gpa, Level);
    set(Addr, Hpa | Flags | (Level > 1 ? eptentry::LargePage : 0));
    return Addr;
  }

private:
  void zero(uint64_t Hpa) {
    static const uint8_t Zero[4096] = {};
    M.write(Hpa, Zero, sizeof(Zero));
  }
  VmxTestMachine &M;
  uint64_t Next = kEptRoot;
};

/// Enables EPT with Eptp, maps guest-physical 0..2 MiB identity (RWX, WB), and writes
/// the guest code and a host HLT.
void setUp(VmxTestMachine &M, EptBuilder &B, const Bytes &Guest, uint64_t Eptp = kEptp4Wb) {
  VmcsData &V = M.vmcs();
  V.set(F::PrimaryProcessorBasedVmExecutionControls,
        V.get(F::PrimaryProcessorBasedVmExecutionControls) |
            controlBit(VmxControl::ActivateSecondaryControls));
  V.set(F::SecondaryProcessorBasedVmExecutionControls,
        V.get(F::SecondaryProcessorBasedVmExecutionControls) |
            controlBit(VmxControl::EnableEpt));
  V.set(F::EptPointer, Eptp);
  for (uint64_t Page = 0; Page < 0x200000; Page += 0x1000)
    B.map(Page, Page, 1, kRwx | kWb);
  M.write(kGuestCode, Guest.data(), Guest.size());
  const uint8_t Hlt = 0xf4;
  M.write(kHostCode, &Hlt, 1);
}

void enableVpid(VmxTestMachine &M, uint16_t Vpid) {
  VmcsData &V = M.vmcs();
  V.set(F::SecondaryProcessorBasedVmExecutionControls,
        V.get(F::SecondaryProcessorBasedVmExecutionControls) |
            controlBit(VmxControl::EnableVpid));
  V.set(F::VirtualProcessorIdentifier, Vpid);
}

// Guest programs: the access at [rbx], then HLT.
const Bytes kRead = {0x48, 0x8b, 0x03, 0xf4};  // mov rax, [rbx]; hlt
const Bytes kWrite = {0x48, 0x89, 0x03, 0xf4}; // mov [rbx], rax; hlt
const Bytes kFetch = {0xff, 0xe3};             // jmp rbx (the target holds HLT)

StepResult launch(VmxTestMachine &M, uint64_t Rbx, uint64_t Rax = kNewValue) {
  M.S.Gpr[RBX] = Rbx;
  M.S.Gpr[RAX] = Rax;
  return M.exec(enc::Vmlaunch, 10);
}

void expectHostAfterExit(VmxTestMachine &M, const StepResult &R) {
  EXPECT_FALSE(R.Faulted) << "vector " << unsigned(R.Vector);
  EXPECT_FALSE(M.Cpu_.NonRoot);
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kHostCode + 1);
}

void expectViolation(VmxTestMachine &M, const StepResult &R, uint64_t Qual, uint64_t Gpa,
                     uint64_t Gla, uint64_t GuestRip) {
  expectHostAfterExit(M, R);
  const VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::EptViolation));
  EXPECT_EQ(V.get(F::ExitQualification), Qual);
  EXPECT_EQ(V.get(F::GuestPhysicalAddress), Gpa);
  EXPECT_EQ(V.get(F::GuestLinearAddress), Gla);
  EXPECT_EQ(V.get(F::GuestRip), GuestRip);
  EXPECT_EQ(V.get(F::IdtVectoringInformation), 0u);
}

void expectMisconfiguration(VmxTestMachine &M, const StepResult &R, uint64_t Gpa,
                            uint64_t GuestRip = kGuestCode) {
  expectHostAfterExit(M, R);
  const VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::EptMisconfiguration));
  EXPECT_EQ(V.get(F::ExitQualification), 0u);
  EXPECT_EQ(V.get(F::GuestPhysicalAddress), Gpa);
  EXPECT_EQ(V.get(F::GuestRip), GuestRip);
}

// --- The walk: every page size x permission x access type -----------------------------

struct PageCase {
  const char *Name;
  uint64_t Gpa, Hpa, Off;
  int Level;
};
const PageCase kPages[] = {
    {"4K", kGpa4K, kHpa4K, kOff, 1},
    {"2M", kGpa2M, kHpa2M, kOff, 2},
    {"1G", kGpa1G, kHpa1G, kOff1G, 3},
};

TEST(VmxSupportForAddressTranslation, EveryPageSizePermissionAndAccessGivesExactOutcome) {
  const uint64_t Perms[] = {0, 1, 3, 4, 5, 7}; // none, R, RW, X-only, RX, RWX
  const Access Kinds[] = {Access::Read, Access::Write, Access::Fetch};
  for (const PageCase &P : kPages)
    for (uint64_t Perm : Perms)
      for (Access K : Kinds) {
        SCOPED_TRACE(testing::Message() << P.Name << " perm " << Perm << " access "
                                        << unsigned(K));
        VmxTestMachine M(eptProfile());
        EptBuilder B(M);
        const Bytes &Code = K == Access::Read ? kRead : K == Access::Write ? kWrite : kFetch;
        setUp(M, B, Code);
        B.map(P.Gpa, P.Hpa, P.Level, Perm | kWb);
        const uint64_t La = P.Gpa + P.Off, Hpa = P.Hpa + P.Off;
        M.write(Hpa, &kValue, 8);
        if (K == Access::Fetch) {
          const uint8_t Hlt = 0xf4;
          M.write(Hpa, &Hlt, 1);
        }
        StepResult R = launch(M, La);
        const bool Allowed = K == Access::Read    ? (Perm & 1)
                             : K == Access::Write ? (Perm & 2)
                                                  : (Perm & 4);
        if (Allowed) {
          EXPECT_FALSE(R.Faulted);
          EXPECT_TRUE(M.Cpu_.NonRoot);
          EXPECT_EQ(R.Why, StopReason::Halted);
          if (K == Access::Read) {
            EXPECT_EQ(M.S.Gpr[RAX], kValue);
            EXPECT_EQ(M.S.Rip, kGuestCode + 4);
          } else if (K == Access::Write) {
            EXPECT_EQ(M.read64(Hpa), kNewValue);
            EXPECT_EQ(M.S.Rip, kGuestCode + 4);
          } else {
            EXPECT_EQ(M.S.Rip, La + 1);
          }
          continue;
        }
        // Bits 2:0 the access, 5:3 the AND of the entries' R/W/X (upper levels RWX),
        // bit 7 guest-linear address valid, bit 8 the access is the translation of it.
        const uint64_t Access = K == Access::Read ? 1 : K == Access::Write ? 2 : 4;
        const uint64_t Qual = Access | (Perm << 3) | (1u << 7) | (1u << 8);
        expectViolation(M, R, Qual, La, La, K == Access::Fetch ? La : kGuestCode);
        // Fault-like: the guest's memory was not written.
        EXPECT_EQ(M.read64(Hpa) & ~uint64_t(0xff), kValue & ~uint64_t(0xff));
      }
}

TEST(VmxSupportForAddressTranslation, NotPresentUpperLevelReportsNoPermissions) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kRead);
  B.map(kGpa2M, kHpa2M, 2, kRwx | kWb);
  B.set(B.entryAddress(kGpa2M, 2), 0); // the PDE: not present
  StepResult R = launch(M, kGpa2M + kOff);
  expectViolation(M, R, 0x181, kGpa2M + kOff, kGpa2M + kOff, kGuestCode);
}

TEST(VmxSupportForAddressTranslation, PermissionIsTheAndOfAllLevels) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kWrite);
  B.map(kGpa4K, kHpa4K, 1, kRwx | kWb);
  B.set(B.entryAddress(kGpa4K, 2), (M.read64(B.entryAddress(kGpa4K, 2)) & ~7ull) | 5); // PDE RX
  StepResult R = launch(M, kGpa4K + kOff);
  expectViolation(M, R, 0x2 | (5u << 3) | 0x180, kGpa4K + kOff, kGpa4K + kOff, kGuestCode);
}

TEST(VmxSupportForAddressTranslation, TranslationReportsMemoryTypeAndPageLevel) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kRead);
  B.map(kGpa2M, kHpa2M, 2, kRwx | (4u << 3) | eptentry::IgnorePat);
  EptWalk W = eptWalk(M.Cpu_, kEptp4Wb, Gpa(kGpa2M + 0x12345), EptAccess{Access::Read});
  EXPECT_EQ(W.Outcome, EptOutcome::Translated);
  EXPECT_EQ(W.Address.value(), kHpa2M + 0x12345);
  EXPECT_EQ(W.MemType, 4);
  EXPECT_TRUE(W.IgnorePat);
  EXPECT_EQ(W.PageLevel, 2);
  EXPECT_EQ(W.Rights, eptright::R | eptright::W | eptright::X);
}

TEST(VmxSupportForAddressTranslation, ModeBasedExecuteSeparatesUserAndSupervisorFetch) {
  VmxProfile P = eptProfile();
  P.Features |= uint64_t(1) << unsigned(VmxFeature::ModeBasedExecute);
  VmxTestMachine M(P);
  EptBuilder B(M);
  setUp(M, B, kRead);
  M.vmcs().set(F::SecondaryProcessorBasedVmExecutionControls,
               M.vmcs().get(F::SecondaryProcessorBasedVmExecutionControls) |
                   controlBit(VmxControl::ModeBasedExecuteControlForEpt));
  // Upper levels allow both kinds of execute; the page only user-mode execute (bit 10
  // alone makes the entry present with mode-based execute control).
  B.map(kGpa4K, kHpa4K, 1, eptentry::UserExecute | kWb);
  for (int L = 2; L <= 4; ++L) {
    const uint64_t A = B.entryAddress(kGpa4K, L);
    B.set(A, M.read64(A) | eptentry::UserExecute);
  }
  EptAccess Fetch{Access::Fetch, false, true, kGpa4K, true};
  EptWalk W = eptWalk(M.Cpu_, kEptp4Wb, Gpa(kGpa4K), Fetch);
  EXPECT_EQ(W.Outcome, EptOutcome::Translated);
  EXPECT_EQ(W.Rights, eptright::UserX);
  Fetch.UserAddress = false;
  W = eptWalk(M.Cpu_, kEptp4Wb, Gpa(kGpa4K), Fetch);
  ASSERT_EQ(W.Outcome, EptOutcome::Violation);
  // Bit 2 fetch, bit 5 (supervisor execute) 0, bit 6 user execute 1, bits 7 and 8.
  EXPECT_EQ(eptViolationQualification(M.Cpu_, W, kEptp4Wb, Fetch), 0x4 | 0x40 | 0x180);
}

TEST(VmxSupportForAddressTranslation, UserExecuteBitAloneIsNotPresentWithoutModeBasedExecute) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kRead);
  B.map(kGpa4K, kHpa4K, 1, eptentry::UserExecute | kWb);
  EptWalk W = eptWalk(M.Cpu_, kEptp4Wb, Gpa(kGpa4K), EptAccess{Access::Fetch, false, true, 0, true});
  EXPECT_EQ(W.Outcome, EptOutcome::Violation);
  EXPECT_EQ(W.Rights, 0);
}

// --- Mode-based execute control for EPT (SDM Vol. 3C, "EPT Violations") ------------------

/// The full profile advertises mode-based execute control and advanced VM-exit
/// information; M's VMCS turns the control on.
void enableModeBasedExecute(VmxTestMachine &M) {
  M.vmcs().set(F::SecondaryProcessorBasedVmExecutionControls,
               M.vmcs().get(F::SecondaryProcessorBasedVmExecutionControls) |
                   controlBit(VmxControl::ModeBasedExecuteControlForEpt));
}

/// The guest's 2-MByte PDE for linear 0x200000-0x3fffff (TestMachine's page directory at
/// 0x12000, identity paging), with U/S as given: it decides whether kGpa4K is a user-mode
/// or a supervisor-mode linear address.
void setGuestPageUser(VmxTestMachine &M, bool User) {
  const uint64_t Pde = 0x200000 | 0x83 | (User ? 0x4 : 0); // P RW PS, U/S
  M.write(0x12008, &Pde, 8);
}

// A fetch from a supervisor-mode linear address needs bit 2 in every EPT entry used, one
// from a user-mode linear address bit 10 (whatever the CPL: the guest fetches at CPL 0).
// The violation reports bit 5 = AND of bit 2, bit 6 = AND of bit 10, and the advanced
// information: bit 9 the user-mode address, bit 10 the read/write page, bit 11 = 0 (XD 0).
TEST(VmxSupportForAddressTranslation, ModeBasedExecuteEveryAddressModeAndExecuteBit) {
  for (bool User : {false, true})
    for (uint64_t Xs : {0, 1})
      for (uint64_t Xu : {0, 1}) {
        SCOPED_TRACE(testing::Message() << "user " << User << " bit2 " << Xs << " bit10 " << Xu);
        VmxTestMachine M(VmxProfile::full());
        EptBuilder B(M);
        setUp(M, B, kFetch);
        enableModeBasedExecute(M);
        setGuestPageUser(M, User);
        B.map(kGpa4K, kHpa4K, 1,
              eptentry::Read | (Xs ? eptentry::Execute : 0) |
                  (Xu ? eptentry::UserExecute : 0) | kWb);
        for (int L = 2; L <= 4; ++L) {
          const uint64_t A = B.entryAddress(kGpa4K, L);
          B.set(A, M.read64(A) | eptentry::UserExecute);
        }
        // The guest's code (JMP RBX) is a user-mode address too: its whole EPT path gets
        // bit 10 as well as bit 2.
        for (int L = 1; L <= 4; ++L) {
          const uint64_t A = B.entryAddress(kGuestCode, L);
          B.set(A, M.read64(A) | eptentry::UserExecute);
        }
        const uint8_t Hlt = 0xf4;
        M.write(kHpa4K + kOff, &Hlt, 1);
        const uint64_t La = kGpa4K + kOff;
        StepResult R = launch(M, La);
        if (User ? Xu : Xs) {
          EXPECT_FALSE(R.Faulted);
          EXPECT_TRUE(M.Cpu_.NonRoot);
          EXPECT_EQ(R.Why, StopReason::Halted);
          EXPECT_EQ(M.S.Rip, La + 1);
          continue;
        }
        const uint64_t Qual = 0x4 | 0x8 | (Xs << 5) | (Xu << 6) | 0x180 |
                              (User ? 0x200u : 0u) | 0x400;
        expectViolation(M, R, Qual, La, La, La);
      }
}

// Without the control, bit 10 is ignored and bit 2 decides for every address; bit 6 of
// the qualification is 0 (vmxsim's value for "undefined").
TEST(VmxSupportForAddressTranslation, WithoutModeBasedExecuteBit2DecidesForUserAddresses) {
  VmxTestMachine M(VmxProfile::full());
  EptBuilder B(M);
  setUp(M, B, kFetch);
  setGuestPageUser(M, true);
  B.map(kGpa4K, kHpa4K, 1, eptentry::Read | eptentry::UserExecute | kWb);
  const uint64_t La = kGpa4K + kOff;
  StepResult R = launch(M, La);
  expectViolation(M, R, 0x4 | 0x8 | 0x180 | 0x200 | 0x400, La, La, La);
}

// Bits 9-11 describe the guest's translation: a read-only (R/W = 0), execute-disable
// (XD = 1) supervisor page read by the guest, EPT refusing the read.
TEST(VmxSupportForAddressTranslation, AdvancedInformationReportsReadOnlyExecuteDisablePage) {
  VmxTestMachine M(VmxProfile::full());
  EptBuilder B(M);
  setUp(M, B, kRead);
  const uint64_t Pde = 0x200000 | 0x81 | (uint64_t(1) << 63); // P PS XD; R/W = U/S = 0
  M.write(0x12008, &Pde, 8);
  B.map(kGpa4K, kHpa4K, 1, eptentry::Execute | kWb); // execute-only
  const uint64_t La = kGpa4K + kOff;
  StepResult R = launch(M, La);
  expectViolation(M, R, 0x1 | (4u << 3) | 0x180 | 0x800, La, La, kGuestCode);
}

// A guest paging-structure access (bit 8 = 0) has no advanced information: bits 9-11 0.
TEST(VmxSupportForAddressTranslation, AdvancedInformationAbsentForPagingStructureAccess) {
  VmxTestMachine M(VmxProfile::full());
  EptBuilder B(M);
  setUp(M, B, kRead);
  // The guest's page directory (guest-physical 0x12000) is execute-only in EPT: the
  // first access is the walk for the fetch of the guest's first instruction, whose read
  // of the PDE at 0x12000 violates (bit 0, bits 3-5 = X only, bit 7, bit 8 = 0).
  B.map(0x12000, 0x12000, 1, kWb | eptentry::Execute);
  StepResult R = launch(M, kGpa4K + kOff);
  expectViolation(M, R, 0x1 | (4u << 3) | 0x80, 0x12000, kGuestCode, kGuestCode);
}

TEST(VmxSupportForAddressTranslation, ViolationDuringEventDeliveryReportsIdtVectoring) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kRead);
  // The guest IDT sits in a guest-physical page EPT does not map; VM entry injects
  // external interrupt 0x20, whose gate read is the violating access.
  M.vmcs().set(F::GuestIdtrBase, kGpa4K);
  M.vmcs().set(F::GuestIdtrLimit, 0xfff);
  M.vmcs().set(F::VmEntryInterruptionInformation, 0x80000020);
  M.vmcs().set(F::GuestRflags, M.vmcs().get(F::GuestRflags) | rflags::IF);
  StepResult R = launch(M, kGpa4K + kOff);
  const uint64_t Gate = kGpa4K + 0x20 * 16;
  expectHostAfterExit(M, R);
  const VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::EptViolation));
  EXPECT_EQ(V.get(F::ExitQualification), 0x181u);
  EXPECT_EQ(V.get(F::GuestPhysicalAddress), Gate);
  EXPECT_EQ(V.get(F::GuestLinearAddress), Gate);
  EXPECT_EQ(V.get(F::IdtVectoringInformation), 0x80000020u);
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode);
}

TEST(VmxSupportForAddressTranslation, EffectiveMemoryTypeCombinesEptAndPatTypes) {
  using namespace memtype;
  // Ignore PAT: the EPT type; CR0.CD: UC.
  EXPECT_EQ(eptEffectiveMemoryType(Wt, true, Uc, false), Wt);
  EXPECT_EQ(eptEffectiveMemoryType(Wb, true, Wb, true), Uc);
  // The EPT type as the MTRR type of SDM Vol. 3A's table, row by row.
  const uint8_t Pat[] = {Uc, Wc, Wt, Wp, Wb, UcMinus};
  const uint8_t Expected[5][6] = {{Uc, Wc, Uc, Uc, Uc, Uc},
                                  {Uc, Wc, Uc, Uc, Wc, Wc},
                                  {Uc, Wc, Wt, Wp, Wt, Uc},
                                  {Uc, Wc, Wt, Wp, Wp, Wc},
                                  {Uc, Wc, Wt, Wp, Wb, Uc}};
  const uint8_t Ept[] = {Uc, Wc, Wt, Wp, Wb};
  for (unsigned R = 0; R < 5; ++R)
    for (unsigned C = 0; C < 6; ++C)
      EXPECT_EQ(eptEffectiveMemoryType(Ept[R], false, Pat[C], false), Expected[R][C])
          << "EPT " << unsigned(Ept[R]) << " PAT " << unsigned(Pat[C]);
}

TEST(VmxSupportForAddressTranslation, FiveLevelWalkUsesPml5Entry) {
  VmxProfile P = eptProfile();
  P.Ept5Level = true;
  VmxTestMachine M(P);
  EptBuilder B(M);
  setUp(M, B, kRead);
  B.map(kGpa4K, kHpa4K, 1, kRwx | kWb);
  constexpr uint64_t kPml5 = 0x1800000;
  static const uint8_t Zero[4096] = {};
  M.write(kPml5, Zero, sizeof(Zero));
  B.set(kPml5, kEptRoot | kRwx);
  const uint64_t Eptp5 = kPml5 | (4u << 3) | 6;
  EptWalk W = eptWalk(M.Cpu_, Eptp5, Gpa(kGpa4K + kOff), EptAccess{Access::Read});
  EXPECT_EQ(W.Outcome, EptOutcome::Translated);
  EXPECT_EQ(W.Address.value(), kHpa4K + kOff);
  // Guest-physical bit 48 selects PML5 entry 1: not present.
  W = eptWalk(M.Cpu_, Eptp5, Gpa((uint64_t(1) << 48) | kGpa4K), EptAccess{Access::Read});
  EXPECT_EQ(W.Outcome, EptOutcome::Violation);
  // Bits 7:3 of a PML5 entry are reserved.
  B.set(kPml5, kEptRoot | kRwx | (1u << 5));
  W = eptWalk(M.Cpu_, Eptp5, Gpa(kGpa4K), EptAccess{Access::Read});
  EXPECT_EQ(W.Outcome, EptOutcome::Misconfiguration);
}

TEST(VmxSupportForAddressTranslation, ViolationOnIretThatUnblockedNmisSetsBit12) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  const uint64_t Stack = kGpa4K + kOff;
  // mov rsp, Stack; iretq — the IRET frame is in a page EPT does not map.
  Bytes Code = {0x48, 0xbc};
  for (unsigned K = 0; K < 8; ++K)
    Code.push_back(uint8_t(Stack >> (8 * K)));
  Code.insert(Code.end(), {0x48, 0xcf});
  setUp(M, B, Code);
  M.vmcs().set(F::GuestInterruptibilityState, 1u << 3); // blocking by NMI
  StepResult R = launch(M, 0);
  expectViolation(M, R, 0x1 | 0x180 | 0x1000, Stack, Stack, kGuestCode + 10);
}

// --- Guest paging-structure accesses --------------------------------------------------

// La 0x40500238 is mapped by the guest's PD for 1..2 GiB (guest-physical 0x13000, entry
// 2 at 0x13010).
constexpr uint64_t kLaViaPd1 = 0x40500238, kPd1 = 0x13000, kPd1Entry = 0x13010;

TEST(VmxSupportForAddressTranslation, UnmappedGuestPagingStructureIsViolationWithBit8Clear) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kRead);
  B.map(kGpa1G, kHpa1G, 3, kRwx | kWb);
  B.set(B.entryAddress(kPd1, 1), 0);
  StepResult R = launch(M, kLaViaPd1);
  // Data read, no permissions, guest-linear address valid, access to a paging structure.
  expectViolation(M, R, 0x81, kPd1Entry, kLaViaPd1, kGuestCode);
}

TEST(VmxSupportForAddressTranslation, GuestPagingStructureReadIsWriteWithEptAccessedDirty) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kRead, kEptp4Wb | kEptAd);
  B.map(kGpa1G, kHpa1G, 3, kRwx | kWb);
  B.set(B.entryAddress(kPd1, 1), kPd1 | 1 | kWb); // read-only
  StepResult R = launch(M, kLaViaPd1);
  // "Treated as writes": bits 0 and 1 both set; the page was readable.
  expectViolation(M, R, 0x3 | (1u << 3) | 0x80, kPd1Entry, kLaViaPd1, kGuestCode);
}

TEST(VmxSupportForAddressTranslation, GuestAccessedFlagUpdateNeedsEptWrite) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kRead);
  B.map(kGpa1G, kHpa1G, 3, kRwx | kWb);
  B.set(B.entryAddress(kPd1, 1), kPd1 | 1 | kWb); // read-only; the guest PDE has A = 0
  StepResult R = launch(M, kLaViaPd1);
  expectViolation(M, R, 0x2 | (1u << 3) | 0x80, kPd1Entry, kLaViaPd1, kGuestCode);
  EXPECT_EQ(M.read64(kPd1Entry) & (1u << 5), 0u); // the guest's A flag was not set
}

// Table-driven: the guest's own 4-level tables for La kLaOwn, each level in its own
// guest-physical page (kOwnTable[4 - Level]), and every combination of EPT permissions
// (bits 2:0) for the page holding one level, with and without EPT A/D flags, with the
// guest's accessed flags already set or clear, for a data read and a data write. The
// expected outcome comes from the SDM's rules, applied to the guest-physical accesses the
// walks make in order (the instruction fetch's walk reads PML4E 0 in the same PML4 page):
// each entry read, and each accessed/dirty update, "considered to be data writes" (SDM
// Vol. 3C, "EPT Violations"); with EPT A/D flags every paging-structure access is "treated
// as a write", reported with bits 0 and 1 both set (Table "Exit Qualification for EPT
// Violations", note 1); write-only and write/execute entries are misconfigurations, and
// execute-only (supported by this profile) permits no read ("EPT Misconfigurations",
// "EPT Violations"). The first access EPT refuses ends the guest's instruction with exit 48
// (qualification, guest-physical address of the entry, guest-linear address, bit 8 clear
// for a paging-structure access) or exit 49; otherwise the guest reaches its HLT with
// the accessed flags of every level set and the dirty flag of its PTE set for a write.
constexpr uint64_t kOwnTable[4] = {0x20000, 0x21000, 0x22000, 0x23000}; // PML4 .. PT
constexpr uint64_t kOwnData = 0x30000;
constexpr uint64_t kLaOwn = 0x8000005238ull; // PML4E 1, PDPTE 0, PDE 0, PTE 5
constexpr uint64_t kGuestA = 1u << 5, kGuestD = 1u << 6;

struct PagingStructureCase {
  int Level;      ///< the level whose page EPT restricts: 4 = PML4 .. 1 = PT
  uint64_t Perms; ///< EPT bits 2:0 of that page
  bool Ad;        ///< EPTP bit 6
  bool ASet;      ///< the guest's entries already have A = 1
  bool Write;     ///< the guest's data access
};

/// One guest-physical access to a guest paging-structure entry, in walk order.
struct EntryAccess {
  int Level;
  uint64_t Gpa, Gla;
  bool Write;
};

std::vector<EntryAccess> entryAccesses(const PagingStructureCase &K) {
  std::vector<EntryAccess> Out;
  // The fetch of the guest's first instruction: PML4E 0 (the PDPT and PD it leads to are
  // TestMachine's, mapped RWX).
  Out.push_back({4, kOwnTable[0], kGuestCode, false});
  if (!K.ASet)
    Out.push_back({4, kOwnTable[0], kGuestCode, true});
  const uint64_t Index[4] = {1, 0, 0, 5};
  for (int L = 4; L >= 1; --L) {
    const uint64_t Gpa = kOwnTable[4 - L] + 8 * Index[4 - L];
    Out.push_back({L, Gpa, kLaOwn, false});
    // Non-leaf levels set A; the PTE sets A, and D for a write (D starts clear).
    if (!K.ASet || (L == 1 && K.Write))
      Out.push_back({L, Gpa, kLaOwn, true});
  }
  return Out;
}

TEST(VmxSupportForAddressTranslation, GuestPagingStructureAccessesUnderEveryEptPermission) {
  const Bytes Guest[2] = {kRead, kWrite};
  unsigned Cases = 0, Violations = 0, Misconfigurations = 0, Completed = 0;
  for (int Level = 4; Level >= 1; --Level)
    for (uint64_t Perms = 0; Perms < 8; ++Perms)
      for (bool Ad : {false, true})
        for (bool ASet : {false, true})
          for (bool Write : {false, true}) {
            const PagingStructureCase K{Level, Perms, Ad, ASet, Write};
            SCOPED_TRACE(testing::Message() << "level " << Level << " perms " << Perms
                                            << " A/D " << Ad << " A set " << ASet
                                            << " write " << Write);
            ++Cases;
            VmxTestMachine M(eptProfile());
            EptBuilder B(M);
            setUp(M, B, Guest[Write], kEptp4Wb | (Ad ? kEptAd : 0));
            // The guest's tables: PML4E 0 is TestMachine's PDPT (code and stack).
            const uint64_t A = ASet ? kGuestA : 0;
            auto put = [&](uint64_t Addr, uint64_t E) { M.write(Addr, &E, 8); };
            put(kOwnTable[0], (kPml4Base + 0x1000) | 7 | A);
            put(kOwnTable[0] + 8, kOwnTable[1] | 7 | A);
            put(kOwnTable[1], kOwnTable[2] | 7 | A);
            put(kOwnTable[2], kOwnTable[3] | 7 | A);
            put(kOwnTable[3] + 8 * 5, kOwnData | 7 | A);
            M.vmcs().set(F::GuestCr3, kOwnTable[0]);
            const uint64_t Page = kOwnTable[4 - Level];
            B.map(Page, Page, 1, Perms | kWb);
            StepResult R = launch(M, kLaOwn);

            // The expected outcome: the first entry access EPT refuses.
            const bool Misconfigured = (Perms & 2) && !(Perms & 1);
            const std::vector<EntryAccess> Accesses = entryAccesses(K);
            const EntryAccess *Refused = nullptr;
            for (const EntryAccess &E : Accesses) {
              if (E.Level != Level)
                continue;
              const bool IsWrite = E.Write || Ad;
              if (Misconfigured || !(Perms & 1) || (IsWrite && !(Perms & 2))) {
                Refused = &E;
                break;
              }
            }
            if (Misconfigured) {
              ++Misconfigurations;
              ASSERT_NE(Refused, nullptr);
              expectMisconfiguration(M, R, Refused->Gpa);
              continue;
            }
            if (Refused) {
              ++Violations;
              const bool AsWrite = Refused->Write || Ad;
              const uint64_t Qual = uint64_t(!Refused->Write || Ad) | (AsWrite ? 2 : 0) |
                                    (Perms << 3) | 0x80;
              expectViolation(M, R, Qual, Refused->Gpa, Refused->Gla, kGuestCode);
              continue;
            }
            ++Completed;
            EXPECT_EQ(R.Why, StopReason::Halted);
            ASSERT_TRUE(M.Cpu_.NonRoot);
            EXPECT_EQ(M.S.Rip, kGuestCode + 4);
            EXPECT_EQ(M.read64(kOwnTable[0]), (kPml4Base + 0x1000) | 7 | kGuestA);
            EXPECT_EQ(M.read64(kOwnTable[0] + 8), kOwnTable[1] | 7 | kGuestA);
            EXPECT_EQ(M.read64(kOwnTable[1]), kOwnTable[2] | 7 | kGuestA);
            EXPECT_EQ(M.read64(kOwnTable[2]), kOwnTable[3] | 7 | kGuestA);
            EXPECT_EQ(M.read64(kOwnTable[3] + 8 * 5),
                      kOwnData | 7 | kGuestA | (Write ? kGuestD : 0));
            if (Write) {
              EXPECT_EQ(M.read64(kOwnData + (kLaOwn & 0xfff)), kNewValue);
            }
          }
  // The table's shape: 256 cases; R-only pages complete unless a write is needed.
  EXPECT_EQ(Cases, 256u);
  EXPECT_EQ(Misconfigurations, 4u * 2 * 2 * 2 * 2); // perms 2 and 6
  EXPECT_EQ(Violations + Completed + Misconfigurations, Cases);
}

// --- Accessed and dirty flags for EPT -------------------------------------------------

TEST(VmxSupportForAddressTranslation, AccessedAndDirtyFlagsSetExactly) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kWrite, kEptp4Wb | kEptAd);
  const uint64_t Leaf = B.map(kGpa4K, kHpa4K, 1, kRwx | kWb);
  StepResult R = launch(M, kGpa4K + kOff);
  ASSERT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(R.Why, StopReason::Halted);
  const uint64_t A = eptentry::Accessed, D = eptentry::Dirty;
  EXPECT_EQ(M.read64(Leaf), kHpa4K | kRwx | kWb | A | D);
  for (int L = 2; L <= 4; ++L)
    EXPECT_EQ(M.read64(B.entryAddress(kGpa4K, L)) & (A | D), A) << "level " << L;
  // The code page was fetched (A), never written.
  EXPECT_EQ(M.read64(B.entryAddress(kGuestCode, 1)) & (A | D), A);
  // Guest paging-structure accesses are writes for EPT A/D: the guest PD page is dirty.
  EXPECT_EQ(M.read64(B.entryAddress(kPml4Base + 0x2000, 1)) & (A | D), A | D);
  // A page never touched stays clean.
  EXPECT_EQ(M.read64(B.entryAddress(0x1f0000, 1)) & (A | D), 0u);
}

TEST(VmxSupportForAddressTranslation, ReadSetsAccessedNotDirty) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kRead, kEptp4Wb | kEptAd);
  const uint64_t Leaf = B.map(kGpa2M, kHpa2M, 2, kRwx | kWb);
  launch(M, kGpa2M + kOff);
  ASSERT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.read64(Leaf), kHpa2M | kRwx | kWb | eptentry::LargePage | eptentry::Accessed);
}

TEST(VmxSupportForAddressTranslation, NoAccessedDirtyFlagsWithoutEptpBit6) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kWrite);
  const uint64_t Leaf = B.map(kGpa4K, kHpa4K, 1, kRwx | kWb);
  launch(M, kGpa4K + kOff);
  ASSERT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.read64(Leaf), kHpa4K | kRwx | kWb);
}

// --- EPT misconfigurations ------------------------------------------------------------

struct MisconfigCase {
  const char *Name;
  uint64_t Gpa;
  int MapLevel;   ///< page size mapped at Gpa
  int EntryLevel; ///< the entry changed
  uint64_t Entry; ///< its new value (0: keep it and OR Bits)
  uint64_t Bits;
  bool ExecuteOnly = true, Pages1G = true;
};

TEST(VmxSupportForAddressTranslation, EachMisconfigurationConditionExitsWithReason49) {
  const MisconfigCase Cases[] = {
      {"write-only leaf", kGpa4K, 1, 1, kHpa4K | 2 | kWb, 0},
      {"write/execute leaf", kGpa4K, 1, 1, kHpa4K | 6 | kWb, 0},
      {"execute-only unsupported", kGpa4K, 1, 1, kHpa4K | 4 | kWb, 0, false},
      {"write-only non-leaf", kGpa4K, 1, 2, 0, 0},
      {"bit 51 of PTE", kGpa4K, 1, 1, 0, 1ull << 51},
      {"MAXPHYADDR bit of PTE", kGpa4K, 1, 1, 0, 1ull << 46},
      {"memory type 2", kGpa4K, 1, 1, kHpa4K | kRwx | (2u << 3), 0},
      {"memory type 3", kGpa2M, 2, 2, kHpa2M | kRwx | (3u << 3) | eptentry::LargePage, 0},
      {"memory type 7", kGpa1G, 3, 3, kHpa1G | kRwx | (7u << 3) | eptentry::LargePage, 0},
      {"bit 3 of non-leaf PDE", kGpa4K, 1, 2, 0, 1u << 3},
      {"bit 7 of PML4E", kGpa1G, 3, 4, 0, 1u << 7},
      {"bit 12 of 2M PDE", kGpa2M, 2, 2, 0, 1u << 12},
      {"bit 20 of 2M PDE", kGpa2M, 2, 2, 0, 1u << 20},
      {"bit 29 of 1G PDPTE", kGpa1G, 3, 3, 0, 1u << 29},
      {"1G page unsupported", kGpa1G, 3, 3, 0, 0, true, false},
  };
  for (const MisconfigCase &C : Cases) {
    SCOPED_TRACE(C.Name);
    VmxTestMachine M(eptProfile(C.ExecuteOnly, C.Pages1G));
    EptBuilder B(M);
    setUp(M, B, kRead);
    const uint64_t Hpa = C.MapLevel == 1 ? kHpa4K : C.MapLevel == 2 ? kHpa2M : kHpa1G;
    B.map(C.Gpa, Hpa, C.MapLevel, kRwx | kWb);
    const uint64_t Addr = B.entryAddress(C.Gpa, C.EntryLevel);
    uint64_t E = C.Entry ? C.Entry : M.read64(Addr) | C.Bits;
    if (!C.Entry && !C.Bits && C.EntryLevel == 2 && C.MapLevel == 1)
      E = (M.read64(Addr) & ~7ull) | 2; // write-only non-leaf
    B.set(Addr, E);
    const uint64_t La = C.Gpa + (C.MapLevel == 3 ? kOff1G : kOff);
    // An EPT PML4E covers the guest's own paging structures only for GPA < 512 GiB
    // index 0; the 1 GiB case uses index 0 too, so the first walk that uses the broken
    // entry is the guest paging walk's read of its PML4 (guest-physical 0x10000).
    const uint64_t Gpa = C.EntryLevel == 4 ? kPml4Base : La;
    expectMisconfiguration(M, launch(M, La), Gpa);
  }
}

TEST(VmxSupportForAddressTranslation, EntryOutsideRamIsMisconfiguration) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kRead);
  B.map(kGpa4K, kHpa4K, 1, kRwx | kWb);
  // The PDE references a table beyond RAM (1 GiB): its entries read all-ones.
  B.set(B.entryAddress(kGpa4K, 2), 0x40000000 | kRwx);
  expectMisconfiguration(M, launch(M, kGpa4K + kOff), kGpa4K + kOff);
}

// --- TLB: combined mappings tagged by EP4TA -------------------------------------------

// Guest: mov rax, [rbx]; vmcall. The test re-enters at the same RIP.
const Bytes kReadVmcall = {0x48, 0x8b, 0x03, 0x0f, 0x01, 0xc1};

void reenter(VmxTestMachine &M) {
  M.vmcs().set(F::GuestRip, kGuestCode);
  M.Cpu_.Activity = ActivityState::Active;
  M.S.Gpr[RAX] = 0;
  M.exec(enc::Vmresume, 10);
}

TEST(VmxSupportForAddressTranslation, TlbHitGivesSameDataUntilInveptSingleContext) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kReadVmcall);
  enableVpid(M, 1);
  const uint64_t Leaf = B.map(kGpa4K, kHpa4K, 1, kRwx | kWb);
  M.write(kHpa4K + kOff, &kValue, 8);
  launch(M, kGpa4K + kOff, 0);
  ASSERT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.S.Gpr[RAX], kValue);
  // The hypervisor removes the mapping without INVEPT: the cached combined mapping
  // still serves the read (caching is permitted).
  B.set(Leaf, 0);
  reenter(M);
  ASSERT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.S.Gpr[RAX], kValue);
  // INVEPT single-context with this EPTP: the next read walks and violates.
  uint64_t Desc[2] = {kEptp4Wb, 0};
  M.write(kPointerSlot, Desc, 16);
  M.S.Gpr[RBX] = 1;
  M.S.Gpr[RAX] = kPointerSlot;
  M.Cpu_.Activity = ActivityState::Active;
  M.exec(enc::InveptRbxRax);
  EXPECT_EQ(M.S.Rflags & rflags::Arith, 0u);
  M.S.Gpr[RBX] = kGpa4K + kOff;
  reenter(M);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::EptViolation));
  EXPECT_EQ(M.vmcs().get(F::GuestPhysicalAddress), kGpa4K + kOff);
}

TEST(VmxSupportForAddressTranslation, InveptOfAnotherEptpKeepsMappings) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kReadVmcall);
  enableVpid(M, 1);
  const uint64_t Leaf = B.map(kGpa4K, kHpa4K, 1, kRwx | kWb);
  M.write(kHpa4K + kOff, &kValue, 8);
  launch(M, kGpa4K + kOff, 0);
  B.set(Leaf, 0);
  uint64_t Desc[2] = {0x2000000 | (3u << 3) | 6, 0};
  M.write(kPointerSlot, Desc, 16);
  M.S.Gpr[RBX] = 1;
  M.S.Gpr[RAX] = kPointerSlot;
  M.Cpu_.Activity = ActivityState::Active;
  M.exec(enc::InveptRbxRax);
  M.S.Gpr[RBX] = kGpa4K + kOff;
  reenter(M);
  ASSERT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.S.Gpr[RAX], kValue);
}

TEST(VmxSupportForAddressTranslation, EptpChangeDoesNotReuseCombinedMappings) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kReadVmcall);
  enableVpid(M, 1);
  B.map(kGpa4K, kHpa4K, 1, kRwx | kWb);
  M.write(kHpa4K + kOff, &kValue, 8);
  launch(M, kGpa4K + kOff, 0);
  EXPECT_EQ(M.S.Gpr[RAX], kValue);
  // A second EPT hierarchy: a copy of the first (its tables are shared below the
  // PML4) except that the data page maps to other host memory.
  constexpr uint64_t kRoot2 = 0x2000000, kOtherHpa = 0x7a5000;
  for (uint64_t I = 0; I < 512; ++I) {
    uint64_t E = M.read64(kEptRoot + I * 8);
    M.write(kRoot2 + I * 8, &E, 8);
  }
  // Give root 2 its own PDPT/PD/PT chain for the data page.
  const uint64_t Pdpt2 = kRoot2 + 0x1000, Pd2 = kRoot2 + 0x2000, Pt2 = kRoot2 + 0x3000;
  const uint64_t Pdpt1 = M.read64(kEptRoot) & ~0xfffull;
  const uint64_t Pd1 = M.read64(Pdpt1) & ~0xfffull;
  const uint64_t Pt1 = M.read64(Pd1 + 8) & ~0xfffull;
  for (uint64_t I = 0; I < 512; ++I) {
    uint64_t E1 = M.read64(Pdpt1 + I * 8), E2 = M.read64(Pd1 + I * 8),
             E3 = M.read64(Pt1 + I * 8);
    M.write(Pdpt2 + I * 8, &E1, 8);
    M.write(Pd2 + I * 8, &E2, 8);
    M.write(Pt2 + I * 8, &E3, 8);
  }
  uint64_t E = Pdpt2 | kRwx;
  M.write(kRoot2, &E, 8);
  E = Pd2 | kRwx;
  M.write(Pdpt2, &E, 8);
  E = Pt2 | kRwx;
  M.write(Pd2 + 8, &E, 8);
  E = kOtherHpa | kRwx | kWb;
  M.write(Pt2 + ((kGpa4K >> 12) & 0x1ff) * 8, &E, 8);
  M.write(kOtherHpa + kOff, &kNewValue, 8);
  M.vmcs().set(F::EptPointer, kRoot2 | (3u << 3) | 6);
  reenter(M);
  ASSERT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.S.Gpr[RAX], kNewValue);
  // Back to the first EPTP: its context's cached mapping is still valid.
  M.vmcs().set(F::EptPointer, kEptp4Wb);
  reenter(M);
  ASSERT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Vmcall));
  EXPECT_EQ(M.S.Gpr[RAX], kValue);
}

TEST(VmxSupportForAddressTranslation, UnassignedHostPhysicalPageReadsAllOnes) {
  VmxTestMachine M(eptProfile());
  EptBuilder B(M);
  setUp(M, B, kRead);
  B.map(kGpa4K, 0x100000000ull, 1, kRwx | kWb); // 4 GiB: beyond the 64 MiB of RAM
  StepResult R = launch(M, kGpa4K + kOff);
  EXPECT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], ~uint64_t(0));
}

} // namespace
} // namespace vmxsim::test
