// SDM Vol. 3C, "VM Entries" > "Checks on VMX Controls and Host-State Area" and "Checks on
// the Guest State Area": every check of cpu/vmx/vm_entry_checks.def fails, with its own
// ID and exact outcome, when its row's "break" is applied to the known-good VMCS
// (table-driven, one test per row); hand-written tests cover the other direction of
// two-sided rules, the accepted edge values, the profiles and the order of the checks.
#include "cpu/vmx/vm_entry_checks.h"

#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vmx_state.h"
#include "tests/support/known_good_vmcs.h"
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <set>
#include <string>
#include <vector>

namespace vmxsim::test {
namespace {

using F = VmcsField;
using Id = VmEntryCheckId;
using Kind = VmEntryCheckKind;

/// Named set-ups a row's break may start with (the Setup(Name) entries of the .def).
enum class SetupKind {
  Ept,                      ///< "enable EPT" with a valid 4-level WB EPTP
  UnrestrictedGuest,        ///< Ept plus "unrestricted guest"
  VirtualInterruptDelivery, ///< TPR shadow + virtual-interrupt delivery + ext-int exiting
  PostedInterrupts,         ///< the above + posted interrupts with valid fields
  NoEptAccessedDirty,       ///< the profile does not report EPT A/D flags
  VmcsShadowing,            ///< "VMCS shadowing" with valid bitmap addresses
  HostCpu32,                ///< the processor runs outside IA-32e mode (LMA = 0)
  Guest32,                  ///< a 32-bit protected-mode guest with PAE paging
  Host32,                   ///< "host address-space size" = 0
  V8086,                    ///< a virtual-8086 guest (32-bit paging)
  UserGuest,                ///< a CPL-3 64-bit guest
  ShadowLinkVmcs,           ///< a shadow VMCS (bit 31 set) at kLinkVmcs
  CurrentVmcsLink,          ///< the link pointer names the current VMCS
};
enum class MutOp { Set, Or, Clear, Setup };
struct Mutation {
  MutOp Op;
  VmcsField Field;
  uint64_t Value;
};
template <typename... Ms> std::vector<Mutation> breakList(Ms... M) { return {M...}; }

struct CheckRow {
  Id Check;
  const char *Name;
  std::vector<Mutation> Break;
};

// The .def's break column, expanded.
#define Set(Fl, Val) Mutation{MutOp::Set, VmcsField::Fl, uint64_t(Val)}
#define Or(Fl, Val) Mutation{MutOp::Or, VmcsField::Fl, uint64_t(Val)}
#define Clear(Fl, Val) Mutation{MutOp::Clear, VmcsField::Fl, uint64_t(Val)}
#define Setup(Name) Mutation{MutOp::Setup, VmcsField{}, uint64_t(SetupKind::Name)}
#define Ctl(Name) controlBit(VmxControl::Name)
const std::vector<CheckRow> &checkRows() {
  static const std::vector<CheckRow> Rows = {
#define VM_ENTRY_CHECK(CheckName, Group, Qual, Break, Desc)                               \
  {Id::CheckName, #CheckName, breakList Break},
#include "cpu/vmx/vm_entry_checks.def"
  };
  return Rows;
}
#undef Set
#undef Or
#undef Clear
#undef Setup
#undef Ctl

/// Checks that no break can reach: the two IA32_EFER.LMA rules decide every VMCS whose
/// "host address-space size" is 0 and "IA-32e mode guest" is 1 before this rule runs.
const std::set<Id> kUnreachable = {Id::Host32Ia32eGuest};

inline constexpr uint64_t kEptp = 0x38101e; // 4-level walk, WB
inline constexpr uint64_t kLinkVmcs = 0x3af000;
inline constexpr uint64_t kZeroPdpt = 0x3b0000; // four non-present PDPTEs

/// The profile of the table: "full" plus every feature whose checks vmxsim implements
/// (APIC virtualization, posted interrupts, PML, #VE, VMCS shadowing, mode-based execute
/// control, tertiary controls, and EPT with unrestricted guest and EPTP switching until
/// the EPT work implements them), so each check can be reached.
const VmxProfile &allFeatures() {
  static const VmxProfile P = [] {
    VmxProfile Q = VmxProfile::full();
    Q.Name = "all-features";
    for (VmxFeature X :
         {VmxFeature::PostedInterrupts, VmxFeature::VirtualizeApicAccesses,
          VmxFeature::VirtualizeX2apic, VmxFeature::ApicRegisterVirtualization,
          VmxFeature::VirtualInterruptDelivery, VmxFeature::Pml, VmxFeature::EptViolationVe,
          VmxFeature::VmcsShadowing, VmxFeature::ModeBasedExecute,
          VmxFeature::TertiaryControls, VmxFeature::Ept, VmxFeature::UnrestrictedGuest,
          VmxFeature::VmFunctions, VmxFeature::EptpSwitching})
      Q.Features |= uint64_t(1) << unsigned(X);
    return Q;
  }();
  return P;
}

/// A 64-bit processor and the known-good VMCS of a profile.
struct Env {
  explicit Env(const VmxProfile &Base = allFeatures()) : P(Base) {
    M.setupLongMode();
    V = knownGoodVmcs(P);
  }
  VmEntryCheckResult check() { return checkVmEntry(M.Cpu_, V, P, /*IsLaunch=*/true); }

  void set(F Field, uint64_t Value) { V.set(Field, Value); }
  void orBits(F Field, uint64_t Bits) { V.set(Field, V.get(Field) | Bits); }
  void clearBits(F Field, uint64_t Bits) { V.set(Field, V.get(Field) & ~Bits); }
  void control(F Word, VmxControl C) { orBits(Word, controlBit(C)); }
  void write32(uint64_t Pa, uint32_t Value) { M.write(Pa, &Value, 4); }

  void apply(const Mutation &Mu) {
    switch (Mu.Op) {
    case MutOp::Set:
      return set(Mu.Field, Mu.Value);
    case MutOp::Or:
      return orBits(Mu.Field, Mu.Value);
    case MutOp::Clear:
      return clearBits(Mu.Field, Mu.Value);
    case MutOp::Setup:
      return setup(SetupKind(Mu.Value));
    }
  }
  void apply(const std::vector<Mutation> &L) {
    for (const Mutation &Mu : L)
      apply(Mu);
  }

  void setup(SetupKind S) {
    using C = VmxControl;
    const F Proc = F::PrimaryProcessorBasedVmExecutionControls,
            Proc2 = F::SecondaryProcessorBasedVmExecutionControls,
            Pin = F::PinBasedVmExecutionControls;
    switch (S) {
    case SetupKind::Ept:
      control(Proc, C::ActivateSecondaryControls);
      control(Proc2, C::EnableEpt);
      set(F::EptPointer, kEptp);
      return;
    case SetupKind::UnrestrictedGuest:
      setup(SetupKind::Ept);
      control(Proc2, C::UnrestrictedGuest);
      return;
    case SetupKind::VirtualInterruptDelivery:
      control(Proc, C::ActivateSecondaryControls);
      control(Proc, C::UseTprShadow);
      set(F::VirtualApicAddress, 0x3a3000);
      control(Proc2, C::VirtualInterruptDelivery);
      control(Pin, C::ExternalInterruptExiting);
      return;
    case SetupKind::PostedInterrupts:
      setup(SetupKind::VirtualInterruptDelivery);
      control(Pin, C::ProcessPostedInterrupts);
      control(F::PrimaryVmExitControls, C::AcknowledgeInterruptOnExit);
      set(F::PostedInterruptDescriptorAddress, 0x3a5000);
      set(F::PostedInterruptNotificationVector, 0xf2);
      return;
    case SetupKind::NoEptAccessedDirty:
      P.EptAccessedDirty = false;
      return;
    case SetupKind::VmcsShadowing:
      control(Proc, C::ActivateSecondaryControls);
      control(Proc2, C::VmcsShadowing);
      set(F::VmreadBitmapAddress, 0x3a8000);
      set(F::VmwriteBitmapAddress, 0x3a9000);
      return;
    case SetupKind::HostCpu32:
      M.setupProtected32();
      return;
    case SetupKind::Guest32:
      clearBits(F::VmEntryControls, controlBit(C::Ia32eModeGuest));
      set(F::GuestCsAccessRights, 0xc09b);
      set(F::GuestCr3, kZeroPdpt);
      return;
    case SetupKind::Host32:
      clearBits(F::PrimaryVmExitControls, controlBit(C::HostAddressSpaceSize));
      return;
    case SetupKind::V8086: {
      clearBits(F::VmEntryControls, controlBit(C::Ia32eModeGuest));
      clearBits(F::GuestCr4, cr4::PAE);
      set(F::GuestRflags, rflags::VM | rflags::Fixed1);
      const F Segs[][4] = {
          {F::GuestCsSelector, F::GuestCsBase, F::GuestCsLimit, F::GuestCsAccessRights},
          {F::GuestSsSelector, F::GuestSsBase, F::GuestSsLimit, F::GuestSsAccessRights},
          {F::GuestDsSelector, F::GuestDsBase, F::GuestDsLimit, F::GuestDsAccessRights},
          {F::GuestEsSelector, F::GuestEsBase, F::GuestEsLimit, F::GuestEsAccessRights},
          {F::GuestFsSelector, F::GuestFsBase, F::GuestFsLimit, F::GuestFsAccessRights},
          {F::GuestGsSelector, F::GuestGsBase, F::GuestGsLimit, F::GuestGsAccessRights}};
      for (const auto &Seg : Segs) {
        set(Seg[0], 0x1000);
        set(Seg[1], 0x10000);
        set(Seg[2], 0xffff);
        set(Seg[3], 0xf3);
      }
      return;
    }
    case SetupKind::UserGuest:
      set(F::GuestCsSelector, kSelUserCode64);
      set(F::GuestCsAccessRights, 0xa0fb);
      set(F::GuestSsSelector, kSelUserData);
      set(F::GuestSsAccessRights, 0xc0f3);
      return;
    case SetupKind::ShadowLinkVmcs:
      write32(kLinkVmcs, kVmcsRevisionId | 0x80000000u);
      return;
    case SetupKind::CurrentVmcsLink:
      write32(kLinkVmcs, kVmcsRevisionId);
      set(F::VmcsLinkPointer, kLinkVmcs);
      M.Cpu_.Vmx->CurrentVmcsPointer = kLinkVmcs;
      return;
    }
  }

  VmxProfile P;
  TestMachine M;
  VmcsData V;
};

/// The outcome the SDM gives each group, written independently of the .def's group
/// rows: VMfailValid(7) for the controls, VMfailValid(8) for the host-state area and
/// address-space size, exit reason 33 for the guest-state area.
uint32_t sdmNumber(VmEntryCheckGroup G) {
  switch (G) {
  case VmEntryCheckGroup::ExecutionControls:
  case VmEntryCheckGroup::ExitControls:
  case VmEntryCheckGroup::EntryControls:
    return 7;
  case VmEntryCheckGroup::HostRegisters:
  case VmEntryCheckGroup::HostSegments:
  case VmEntryCheckGroup::AddressSpaceSize:
    return 8;
  default:
    return 33;
  }
}

std::string nameOf(Id C) {
  return C == Id::None ? std::string("None") : vmEntryCheckInfo(C).Name;
}

/// Asserts the exact outcome of failing check Expected.
void expectFails(const VmEntryCheckResult &R, Id Expected) {
  EXPECT_EQ(nameOf(R.CheckId), nameOf(Expected));
  const VmEntryCheckInfo &I = vmEntryCheckInfo(Expected);
  uint32_t Number = sdmNumber(I.Group);
  if (Number == 33) {
    EXPECT_EQ(R.Kind, Kind::EntryFailure);
    EXPECT_EQ(R.ExitReason, 33u);
    EXPECT_EQ(R.Qualification, I.Qualification);
    EXPECT_EQ(R.ErrorNumber, 0u);
  } else {
    EXPECT_EQ(R.Kind, Kind::VmFailValid);
    EXPECT_EQ(R.ErrorNumber, Number);
    EXPECT_EQ(R.ExitReason, 0u);
    EXPECT_EQ(R.Qualification, 0u);
  }
}

// --- One negative test per check, from the table ---

class VmEntriesCheckTable : public ::testing::TestWithParam<CheckRow> {};

TEST_P(VmEntriesCheckTable, BreakFailsExactlyThisCheck) {
  const CheckRow &Row = GetParam();
  if (kUnreachable.count(Row.Check)) {
    // Breaking it ("host address-space size" 0 with "IA-32e mode guest" 1) always fails
    // an earlier check of the same section, whatever IA32_EFER.LMA is.
    EXPECT_TRUE(Row.Break.empty());
    Env E;
    E.setup(SetupKind::Host32);
    expectFails(E.check(), Id::InIa32eHostAddressSpace);
    E.setup(SetupKind::HostCpu32);
    expectFails(E.check(), Id::OutsideIa32eGuest);
    return;
  }
  ASSERT_FALSE(Row.Break.empty()) << Row.Name << " has no break in vm_entry_checks.def";
  Env E;
  ASSERT_TRUE(E.check().ok()) << nameOf(E.check().CheckId);
  E.apply(Row.Break);
  expectFails(E.check(), Row.Check);
}

INSTANTIATE_TEST_SUITE_P(EveryCheck, VmEntriesCheckTable, ::testing::ValuesIn(checkRows()),
                         [](const ::testing::TestParamInfo<CheckRow> &Info) {
                           return std::string(Info.param.Name);
                         });

// --- The table itself ---

TEST(VmEntries, CheckTableRowsAreOnePerIdInOrder) {
  ASSERT_EQ(checkRows().size(), kNumVmEntryChecks);
  std::set<std::string> Names;
  for (unsigned I = 0; I < kNumVmEntryChecks; ++I) {
    EXPECT_EQ(unsigned(checkRows()[I].Check), I);
    const VmEntryCheckInfo &Info = vmEntryCheckInfo(Id(I));
    EXPECT_TRUE(Names.insert(Info.Name).second) << Info.Name;
    EXPECT_NE(std::string(Info.Description), "");
    EXPECT_NE(std::string(Info.Section), "");
  }
}

TEST(VmEntries, GroupOutcomesMatchSdm) {
  for (unsigned I = 0; I < kNumVmEntryChecks; ++I) {
    const VmEntryCheckInfo &Info = vmEntryCheckInfo(Id(I));
    uint32_t Number = sdmNumber(Info.Group);
    EXPECT_EQ(Info.Number, Number) << Info.Name;
    EXPECT_EQ(Info.Kind, Number == 33 ? Kind::EntryFailure : Kind::VmFailValid) << Info.Name;
  }
  // The non-zero qualifications (SDM Vol. 3C, "VM-Entry Failures During or After Loading
  // Guest State"): 2 for the PDPTEs, 3 for NMI injection under blocking by STI, 4 for the
  // VMCS link pointer.
  EXPECT_EQ(vmEntryCheckInfo(Id::GuestPdpteFromCr3).Qualification, 2);
  EXPECT_EQ(vmEntryCheckInfo(Id::GuestPdpteFields).Qualification, 2);
  EXPECT_EQ(vmEntryCheckInfo(Id::GuestInterruptibilityNmiSti).Qualification, 3);
  EXPECT_EQ(vmEntryCheckInfo(Id::GuestLinkPointerRevision).Qualification, 4);
  EXPECT_EQ(vmEntryCheckInfo(Id::GuestActivityState).Qualification, 0);
}

// --- Profiles ---

TEST(VmEntries, KnownGoodVmcsPassesForEveryProfile) {
  for (const VmxProfile *P : {&VmxProfile::full(), &VmxProfile::kvmNested(),
                              &VmxProfile::minimal(), &allFeatures()}) {
    Env E(*P);
    VmEntryCheckResult R = E.check();
    EXPECT_TRUE(R.ok()) << P->Name << ": " << nameOf(R.CheckId);
    EXPECT_EQ(R.CheckId, Id::None);
    EXPECT_EQ(R.ErrorNumber, 0u);
  }
}

TEST(VmEntries, EnableEptUnderMinimalProfileFailsWith7) {
  // "minimal" has no secondary controls: the 1-setting of "activate secondary controls"
  // is reserved, so the primary controls fail their capability check.
  Env E(VmxProfile::minimal());
  E.setup(SetupKind::Ept);
  expectFails(E.check(), Id::ProcBasedReserved);
}

TEST(VmEntries, UnadvertisedSecondaryControlFailsWith7) {
  // "full" does not advertise XSAVES/XRSTORS (the CPU model has no XSAVES).
  Env E(VmxProfile::full());
  E.setup(SetupKind::Ept);
  E.control(F::SecondaryProcessorBasedVmExecutionControls, VmxControl::EnableXsavesXrstors);
  expectFails(E.check(), Id::SecondaryReserved);
}

TEST(VmEntries, UnadvertisedPinControlFailsWith7) {
  // The full profile advertises every pin-based control: take it without posted
  // interrupts.
  static const VmxProfile NoPosted = [] {
    VmxProfile P = VmxProfile::full();
    P.Features &= ~(uint64_t(1) << unsigned(VmxFeature::PostedInterrupts));
    return P;
  }();
  Env E(NoPosted);
  E.control(F::PinBasedVmExecutionControls, VmxControl::ProcessPostedInterrupts);
  expectFails(E.check(), Id::PinBasedReserved);
}

TEST(VmEntries, PreemptionTimerUnderMinimalProfileFailsWith7) {
  Env E(VmxProfile::minimal());
  E.control(F::PinBasedVmExecutionControls, VmxControl::ActivateVmxPreemptionTimer);
  expectFails(E.check(), Id::PinBasedReserved);
}

TEST(VmEntries, TrueControlsAllowClearingDefault1Bits) {
  // IA32_VMX_BASIC[55] = 1: VM entry checks the TRUE capability MSRs, which let CR3-load
  // and CR3-store exiting be 0 (the known-good VMCS already clears them).
  Env E;
  EXPECT_FALSE(E.V.get(F::PrimaryProcessorBasedVmExecutionControls) &
               controlBit(VmxControl::Cr3LoadExiting));
  EXPECT_TRUE(E.check().ok());
}

// --- VM-execution control fields: accepted settings and second directions ---

TEST(VmEntries, ActivateSecondaryControlsZeroIgnoresSecondaryField) {
  Env E;
  E.set(F::SecondaryProcessorBasedVmExecutionControls, 0xffffffff);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, Cr3TargetCountFourPasses) {
  Env E;
  E.set(F::Cr3TargetCount, 4);
  EXPECT_TRUE(E.check().ok());
}

/// "Use TPR shadow" with TPR threshold 5 and the virtual-APIC page at 3A3000H, whose
/// VTPR (byte 80H) is set to Vtpr.
void useTprShadow(Env &E, uint8_t Vtpr) {
  E.control(F::PrimaryProcessorBasedVmExecutionControls, VmxControl::UseTprShadow);
  E.set(F::VirtualApicAddress, 0x3a3000);
  E.set(F::TprThreshold, 5);
  E.M.write(0x3a3080, &Vtpr, 1);
}

TEST(VmEntries, TprThresholdNotAboveVtprPasses) {
  Env E;
  useTprShadow(E, 0x50);
  EXPECT_TRUE(E.check().ok());
  E.set(F::TprThreshold, 6);
  expectFails(E.check(), Id::TprThresholdAboveVtpr);
}

TEST(VmEntries, TprThresholdHighBitsAllowedWithVirtualInterruptDelivery) {
  Env E;
  E.setup(SetupKind::VirtualInterruptDelivery);
  E.set(F::TprThreshold, 0xfff0);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, VirtualNmisWithNmiExitingAndNmiWindowPasses) {
  Env E;
  E.control(F::PinBasedVmExecutionControls, VmxControl::NmiExiting);
  E.control(F::PinBasedVmExecutionControls, VmxControl::VirtualNmis);
  E.control(F::PrimaryProcessorBasedVmExecutionControls, VmxControl::NmiWindowExiting);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, PostedInterruptsWithValidFieldsPass) {
  Env E;
  E.setup(SetupKind::PostedInterrupts);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, VpidNonZeroPasses) {
  Env E;
  E.control(F::PrimaryProcessorBasedVmExecutionControls, VmxControl::ActivateSecondaryControls);
  E.control(F::SecondaryProcessorBasedVmExecutionControls, VmxControl::EnableVpid);
  E.set(F::VirtualProcessorIdentifier, 1);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, EptpUncacheableAndAccessedDirtyPass) {
  Env E;
  E.setup(SetupKind::Ept);
  E.set(F::EptPointer, 0x381018); // UC, walk 4
  EXPECT_TRUE(E.check().ok());
  E.set(F::EptPointer, kEptp | 0x40); // A/D flags: IA32_VMX_EPT_VPID_CAP[21] = 1 in "full"
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, EptpFiveLevelWalkPassesOnlyWhenAdvertised) {
  Env E;
  E.setup(SetupKind::Ept);
  E.P.Ept5Level = false;
  E.set(F::EptPointer, 0x381026);
  expectFails(E.check(), Id::EptpWalkLength);
  E.P.Ept5Level = true; // as "full" and "kvm-nested" report
  EXPECT_TRUE(E.check().ok());
  E.set(F::EptPointer, 0x381016); // walk length 3
  expectFails(E.check(), Id::EptpWalkLength);
}

TEST(VmEntries, EptpBitAbovePhysicalWidthFails) {
  Env E;
  E.setup(SetupKind::Ept);
  E.set(F::EptPointer, kEptp | (uint64_t(1) << 46));
  expectFails(E.check(), Id::EptpReserved);
}

TEST(VmEntries, EptpSwitchingWithEptPasses) {
  Env E;
  E.setup(SetupKind::Ept);
  E.control(F::SecondaryProcessorBasedVmExecutionControls, VmxControl::EnableVmFunctions);
  E.set(F::VmFunctionControls, 1);
  E.set(F::EptpListAddress, 0x3a7000);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, UnrestrictedGuestRealModePasses) {
  // With "unrestricted guest", CR0.PE and CR0.PG are exempt from the fixed bits: a
  // real-mode guest enters.
  Env E;
  E.setup(SetupKind::UnrestrictedGuest);
  E.clearBits(F::VmEntryControls, controlBit(VmxControl::Ia32eModeGuest));
  E.set(F::GuestCr0, cr0::NE | cr0::ET);
  E.set(F::GuestCr4, cr4::VMXE);
  E.set(F::GuestCsAccessRights, 0x9b);
  for (F Sel : {F::GuestCsSelector, F::GuestSsSelector, F::GuestDsSelector, F::GuestEsSelector,
                F::GuestFsSelector, F::GuestGsSelector})
    E.set(Sel, 0);
  for (F Limit : {F::GuestCsLimit, F::GuestSsLimit, F::GuestDsLimit, F::GuestEsLimit,
                  F::GuestFsLimit, F::GuestGsLimit})
    E.set(Limit, 0xffff);
  for (F Ar : {F::GuestSsAccessRights, F::GuestDsAccessRights, F::GuestEsAccessRights,
               F::GuestFsAccessRights, F::GuestGsAccessRights})
    E.set(Ar, 0x93);
  E.set(F::GuestRip, 0xfff0);
  EXPECT_TRUE(E.check().ok()) << nameOf(E.check().CheckId);
  // "The DPL [of SS] must be 0 ... if bit 0 in the CR0 field (corresponding to CR0.PE) is
  // 0."
  E.set(F::GuestSsAccessRights, 0xb3);
  E.set(F::GuestCsAccessRights, 0xbb); // CS DPL = SS DPL keeps the CS rule quiet
  expectFails(E.check(), Id::GuestSsDplZero);
}

// --- VM-exit and VM-entry control fields ---

TEST(VmEntries, MsrAreaEndingAtPhysicalWidthPasses) {
  Env E;
  E.set(F::VmExitMsrStoreCount, 1);
  E.set(F::VmExitMsrStoreAddress, 0x3ffffffffff0); // last byte 2^46 - 1
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, MsrCountZeroIgnoresAddress) {
  Env E;
  E.set(F::VmEntryMsrLoadAddress, 0xfff);
  E.set(F::VmExitMsrLoadAddress, 0xfff);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, SavePreemptionTimerWithActivatePasses) {
  Env E;
  E.control(F::PinBasedVmExecutionControls, VmxControl::ActivateVmxPreemptionTimer);
  E.control(F::PrimaryVmExitControls, VmxControl::SaveVmxPreemptionTimerValue);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, InjectedGpWithoutErrorCodeFails) {
  Env E;
  E.set(F::VmEntryInterruptionInformation, 0x8000030d);
  expectFails(E.check(), Id::EventDeliverErrorCode);
  E.set(F::VmEntryInterruptionInformation, 0x80000b0d);
  E.set(F::VmEntryExceptionErrorCode, 0x7ff8);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, InjectedErrorCodeVectorsAreExactlyTheSdmList) {
  for (unsigned Vector = 0; Vector < 32; ++Vector) {
    bool HasCode = Vector == 8 || (Vector >= 10 && Vector <= 14) || Vector == 17;
    Env E;
    // An active guest can take any event; #DF/#MC/NMI rules do not interfere here.
    E.set(F::VmEntryInterruptionInformation, 0x80000300 | Vector | (HasCode ? 0x800 : 0));
    EXPECT_TRUE(E.check().ok()) << "vector " << Vector;
    E.set(F::VmEntryInterruptionInformation, 0x80000300 | Vector | (HasCode ? 0 : 0x800));
    expectFails(E.check(), Id::EventDeliverErrorCode);
  }
}

TEST(VmEntries, InjectedErrorCodeWithRealModeUnrestrictedGuestFails) {
  // "(1) either (a) the 'unrestricted guest' VM-execution control is 0; or (b) bit 0
  // (corresponding to CR0.PE) is set in the CR0 field".
  Env E;
  E.setup(SetupKind::UnrestrictedGuest);
  E.clearBits(F::GuestCr0, cr0::PE | cr0::PG);
  E.set(F::VmEntryInterruptionInformation, 0x80000b0d);
  expectFails(E.check(), Id::EventDeliverErrorCode);
  E.set(F::VmEntryInterruptionInformation, 0x8000030d);
  // The delivery rule passes; the guest state then fails elsewhere (IA-32e needs PG).
  expectFails(E.check(), Id::GuestIa32eWithoutPg);
}

TEST(VmEntries, SoftwareInterruptLengthZeroPassesWithMisc30) {
  // IA32_VMX_MISC[30] = 1 in every profile: length 0 is allowed.
  Env E;
  E.set(F::VmEntryInterruptionInformation, 0x80000403);
  E.set(F::VmEntryInstructionLength, 0);
  EXPECT_TRUE(E.check().ok());
  E.set(F::VmEntryInstructionLength, 15);
  EXPECT_TRUE(E.check().ok());
  E.set(F::VmEntryInterruptionInformation, 0x80000603); // software exception
  E.set(F::VmEntryInstructionLength, 16);
  expectFails(E.check(), Id::EventInstructionLength);
}

TEST(VmEntries, OtherEventReservedWithoutMonitorTrapFlag) {
  Env E(VmxProfile::minimal());
  E.set(F::VmEntryInterruptionInformation, 0x80000700);
  expectFails(E.check(), Id::EventTypeReserved);
}

TEST(VmEntries, InvalidInterruptionInformationIsIgnored) {
  Env E;
  E.set(F::VmEntryInterruptionInformation, 0x7fffffff); // valid bit clear
  EXPECT_TRUE(E.check().ok());
}

// --- Host state ---

TEST(VmEntries, HostEferLoadedWithMatchingBitsPasses) {
  Env E;
  E.control(F::PrimaryVmExitControls, VmxControl::LoadIa32EferOnExit);
  E.control(F::PrimaryVmExitControls, VmxControl::LoadIa32PatOnExit);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, HostCr0BitsAbove31Fail) {
  Env E;
  E.orBits(F::HostCr0, uint64_t(1) << 32);
  expectFails(E.check(), Id::HostCr0Fixed);
}

TEST(VmEntries, HostCr4UnsupportedBitFails) {
  Env E;
  E.orBits(F::HostCr4, uint64_t(1) << 24);
  expectFails(E.check(), Id::HostCr4Fixed);
}

TEST(VmEntries, Host32BitOutsideIa32ePasses) {
  Env E;
  E.setup(SetupKind::HostCpu32);
  E.setup(SetupKind::Guest32);
  E.setup(SetupKind::Host32);
  E.set(F::HostCr4, cr4::VMXE);
  EXPECT_TRUE(E.check().ok()) << nameOf(E.check().CheckId);
}

// --- Guest state: other directions and accepted values ---

TEST(VmEntries, GuestCr0NwCdNeverChecked) {
  Env E;
  E.orBits(F::GuestCr0, cr0::NW | cr0::CD);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, GuestEferLoadedWithMatchingBitsPasses) {
  Env E;
  E.control(F::VmEntryControls, VmxControl::LoadIa32EferOnEntry);
  E.control(F::VmEntryControls, VmxControl::LoadIa32PatOnEntry);
  E.control(F::VmEntryControls, VmxControl::LoadDebugControls);
  E.set(F::GuestIa32Debugctl, 0x3);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, ThirtyTwoBitPaeGuestPasses) {
  Env E;
  E.setup(SetupKind::Guest32);
  EXPECT_TRUE(E.check().ok()) << nameOf(E.check().CheckId);
}

TEST(VmEntries, V8086GuestPasses) {
  Env E;
  E.setup(SetupKind::V8086);
  EXPECT_TRUE(E.check().ok()) << nameOf(E.check().CheckId);
}

TEST(VmEntries, UserGuestPasses) {
  Env E;
  E.setup(SetupKind::UserGuest);
  EXPECT_TRUE(E.check().ok()) << nameOf(E.check().CheckId);
}

TEST(VmEntries, UnusableDataSegmentsSkipTheirChecks) {
  Env E;
  for (F Ar : {F::GuestDsAccessRights, F::GuestEsAccessRights, F::GuestFsAccessRights,
               F::GuestGsAccessRights, F::GuestSsAccessRights})
    E.set(Ar, 0x10000 | 0x1f00); // unusable; reserved bits and type ignored
  E.set(F::GuestDsBase, 0xffffffff00000000);
  EXPECT_TRUE(E.check().ok()) << nameOf(E.check().CheckId);
}

TEST(VmEntries, CompatibilityModeCsWithDbPasses) {
  Env E;
  E.set(F::GuestCsAccessRights, 0xc09b); // L = 0, D = 1 in an IA-32e guest
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, ConformingCsBelowSsDplPasses) {
  Env E;
  E.setup(SetupKind::UserGuest);
  E.set(F::GuestCsAccessRights, 0xa0df); // conforming, DPL 2 <= SS DPL 3
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, HaltedGuestAcceptsInterruptNmiDebugAndMachineCheck) {
  for (uint32_t Info : {0x80000020u, 0x80000202u, 0x80000301u, 0x80000312u, 0x80000700u}) {
    Env E;
    E.set(F::GuestRflags, 0x202);
    E.set(F::GuestActivityState, 1);
    E.set(F::VmEntryInterruptionInformation, Info);
    EXPECT_TRUE(E.check().ok()) << std::hex << Info << " " << nameOf(E.check().CheckId);
  }
}

TEST(VmEntries, ShutdownGuestAcceptsNmiAndMachineCheck) {
  for (uint32_t Info : {0x80000202u, 0x80000312u}) {
    Env E;
    E.set(F::GuestActivityState, 2);
    E.set(F::VmEntryInterruptionInformation, Info);
    EXPECT_TRUE(E.check().ok()) << std::hex << Info;
  }
}

TEST(VmEntries, StiBlockingWithIfPasses) {
  Env E;
  E.set(F::GuestRflags, 0x202);
  E.set(F::GuestInterruptibilityState, 1);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, BlockingByNmiWithoutVirtualNmisPasses) {
  // "If the 'virtual NMIs' VM-execution control is 0, there is no requirement that bit 3
  // be 0" when an NMI is injected.
  Env E;
  E.set(F::VmEntryInterruptionInformation, 0x80000202);
  E.set(F::GuestInterruptibilityState, 8);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, PendingBsMatchingTfPasses) {
  Env E;
  E.set(F::GuestActivityState, 1);
  E.set(F::GuestRflags, 0x102);
  E.set(F::GuestPendingDebugExceptions, 0x4000);
  EXPECT_TRUE(E.check().ok());
  // With DEBUGCTL.BTF = 1, BS must be 0 even though TF is 1.
  E.set(F::GuestIa32Debugctl, 2);
  expectFails(E.check(), Id::GuestPendingDebugBsClear);
  E.set(F::GuestPendingDebugExceptions, 0);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, ValidLinkPointerPasses) {
  Env E;
  E.write32(kLinkVmcs, kVmcsRevisionId);
  E.set(F::VmcsLinkPointer, kLinkVmcs);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, ShadowLinkPointerPassesWithVmcsShadowing) {
  Env E;
  E.setup(SetupKind::VmcsShadowing);
  E.setup(SetupKind::ShadowLinkVmcs);
  E.set(F::VmcsLinkPointer, kLinkVmcs);
  EXPECT_TRUE(E.check().ok());
  E.write32(kLinkVmcs, kVmcsRevisionId); // an ordinary VMCS under "VMCS shadowing"
  expectFails(E.check(), Id::GuestLinkPointerShadow);
}

TEST(VmEntries, PresentValidPdptesPass) {
  Env E;
  E.setup(SetupKind::Guest32);
  uint64_t Pdpte = 0x5001;
  E.M.write(kZeroPdpt + 8, &Pdpte, 8);
  EXPECT_TRUE(E.check().ok());
  Pdpte |= uint64_t(1) << 63; // XD is reserved in a PDPTE
  E.M.write(kZeroPdpt + 8, &Pdpte, 8);
  expectFails(E.check(), Id::GuestPdpteFromCr3);
}

TEST(VmEntries, EptPdpteFieldsIgnoreCr3Memory) {
  Env E;
  E.setup(SetupKind::Guest32);
  E.setup(SetupKind::Ept);
  E.set(F::GuestCr3, kPml4Base); // holds entries with PDPTE-reserved bits
  E.set(F::GuestPdpte0, 0x5001);
  EXPECT_TRUE(E.check().ok());
}

TEST(VmEntries, IdentifiedPdpteFailureHasQualification2) {
  Env E;
  E.setup(SetupKind::Guest32);
  E.set(F::GuestCr3, kPml4Base);
  VmEntryCheckResult R = E.check();
  EXPECT_EQ(R.Kind, Kind::EntryFailure);
  EXPECT_EQ(R.ExitReason, 33u);
  EXPECT_EQ(R.Qualification, 2u);
}

// --- Order ---

TEST(VmEntries, ControlFailureWinsOverHostAndGuestFailures) {
  Env E;
  E.clearBits(F::GuestCr0, cr0::NE);
  E.set(F::HostCsSelector, 0);
  E.set(F::Cr3TargetCount, 9);
  expectFails(E.check(), Id::Cr3TargetCount);
  E.set(F::Cr3TargetCount, 0);
  expectFails(E.check(), Id::HostCsSelectorZero);
  E.set(F::HostCsSelector, kSelCode64);
  expectFails(E.check(), Id::GuestCr0Fixed);
}

TEST(VmEntries, ChecksWithinASectionFollowTheSdmText) {
  // Both IA32_VMX_PINBASED and the VM-exit controls broken: the execution controls come
  // first; within the guest segments, the selector checks precede the base checks.
  Env E;
  E.set(F::PrimaryVmExitControls, 0);
  E.set(F::PinBasedVmExecutionControls, 0);
  expectFails(E.check(), Id::PinBasedReserved);
  Env G;
  G.set(F::GuestTrSelector, 0x44);
  G.set(F::GuestTrBase, 0x0000800000000000);
  expectFails(G.check(), Id::GuestTrSelectorTi);
}

TEST(VmEntries, ChecksReadButNeverModify) {
  Env E;
  VmcsData Before = E.V;
  E.set(F::GuestActivityState, 7);
  VmcsData Broken = E.V;
  (void)E.check();
  EXPECT_EQ(E.V.Values, Broken.Values);
  EXPECT_NE(Before.Values, Broken.Values);
}

// --- The memo of passed checks (VM entry's fast path, VmEntryCheckMemo) ---
//
// The memo must give exactly checkVmEntry's result however the checked state changed
// after a passing entry: a VMWRITE (VmcsData::set, as VMWRITE and VM exits store) of any
// group's field, memory a check reads, the processor's IA32_EFER.LMA, the current-VMCS
// pointer, the profile, a copy over the VMCS data, another VmcsData object.

struct MemoEnv : Env {
  using Env::Env;
  VmEntryCheckMemo Memo;
  VmEntryCheckResult memo() { return checkVmEntryMemo(M.Cpu_, V, P, Memo); }
  /// Passes twice, the second time skipping every group (all were memoised).
  void warm() {
    ASSERT_TRUE(memo().ok());
    const uint64_t Skipped = Memo.GroupsSkipped, Run = Memo.GroupsRun;
    ASSERT_TRUE(memo().ok());
    ASSERT_EQ(Memo.GroupsSkipped - Skipped, kNumVmEntryCheckGroups);
    ASSERT_EQ(Memo.GroupsRun, Run);
  }
};

class VmEntriesMemoTable : public ::testing::TestWithParam<CheckRow> {};

TEST_P(VmEntriesMemoTable, BreakAfterMemoisedPassFailsExactlyThisCheck) {
  const CheckRow &Row = GetParam();
  MemoEnv E;
  E.warm();
  if (kUnreachable.count(Row.Check)) {
    // As in VmEntriesCheckTable: an earlier check of the section decides.
    E.setup(SetupKind::Host32);
    expectFails(E.memo(), Id::InIa32eHostAddressSpace);
    E.setup(SetupKind::HostCpu32);
    expectFails(E.memo(), Id::OutsideIa32eGuest);
    return;
  }
  E.apply(Row.Break);
  expectFails(E.memo(), Row.Check);
  // The failing group is not memoised: the same failure again, as checkVmEntry says.
  expectFails(E.memo(), Row.Check);
  expectFails(E.check(), Row.Check);
}

INSTANTIATE_TEST_SUITE_P(EveryCheck, VmEntriesMemoTable, ::testing::ValuesIn(checkRows()),
                         [](const ::testing::TestParamInfo<CheckRow> &Info) {
                           return std::string(Info.param.Name);
                         });

TEST(VmEntriesMemo, OnlyGroupsReadingAWrittenFieldRunAgain) {
  MemoEnv E;
  E.warm();
  // Guest RIP is read by "Checks on Guest RIP, RFLAGS, and SSP" only.
  E.set(F::GuestRip, E.V.get(F::GuestRip) + 3);
  const uint64_t Run = E.Memo.GroupsRun;
  ASSERT_TRUE(E.memo().ok());
  EXPECT_EQ(E.Memo.GroupsRun - Run, 1u);
  // Storing the value a field already holds is no change.
  E.set(F::GuestRip, E.V.get(F::GuestRip));
  E.warm();
  // A control word is read by every group.
  E.set(F::PinBasedVmExecutionControls, E.V.get(F::PinBasedVmExecutionControls) ^
                                            controlBit(VmxControl::NmiExiting));
  const uint64_t Run2 = E.Memo.GroupsRun;
  ASSERT_TRUE(E.memo().ok());
  EXPECT_EQ(E.Memo.GroupsRun - Run2, kNumVmEntryCheckGroups);
}

TEST(VmEntriesMemo, WriteBeforeAnEarlierFailureIsStillSeenLater) {
  // An entry that fails in an early group does not reach the later ones; the writes to
  // their fields must still count at the next entry that does.
  MemoEnv E;
  E.warm();
  E.set(F::GuestCsAccessRights, 0xa093); // a data segment: GuestCsType
  // Read by the execution-control checks only, which fail first.
  E.set(F::Cr3TargetCount, E.P.Cr3TargetCount + 1);
  expectFails(E.memo(), Id::Cr3TargetCount);
  E.set(F::Cr3TargetCount, 0);
  expectFails(E.memo(), Id::GuestCsType);
}

TEST(VmEntriesMemo, VirtualApicPageChangeIsSeen) {
  MemoEnv E;
  useTprShadow(E, 0x50);
  E.warm();
  uint8_t Vtpr = 0x40; // VTPR[7:4] = 4 < threshold 5
  E.M.write(0x3a3080, &Vtpr, 1);
  expectFails(E.memo(), Id::TprThresholdAboveVtpr);
  Vtpr = 0x50;
  E.M.write(0x3a3080, &Vtpr, 1);
  EXPECT_TRUE(E.memo().ok());
}

TEST(VmEntriesMemo, LinkedVmcsHeaderChangeIsSeen) {
  MemoEnv E;
  E.write32(kLinkVmcs, kVmcsRevisionId);
  E.set(F::VmcsLinkPointer, kLinkVmcs);
  E.warm();
  E.write32(kLinkVmcs, kVmcsRevisionId + 1);
  expectFails(E.memo(), Id::GuestLinkPointerRevision);
  E.write32(kLinkVmcs, kVmcsRevisionId | 0x80000000u);
  expectFails(E.memo(), Id::GuestLinkPointerShadow);
}

TEST(VmEntriesMemo, PdpteChangeWithoutEptIsSeen) {
  MemoEnv E;
  E.setup(SetupKind::Guest32);
  E.warm();
  const uint64_t Bad = 0x1 | 0x6; // present with reserved bits 2:1
  E.M.write(kZeroPdpt + 16, &Bad, 8);
  expectFails(E.memo(), Id::GuestPdpteFromCr3);
}

TEST(VmEntriesMemo, ProcessorLeavingIa32eModeIsSeen) {
  MemoEnv E;
  E.warm();
  E.setup(SetupKind::HostCpu32); // IA32_EFER.LMA = 0 (a WRMSR or CR0.PG write in root)
  expectFails(E.memo(), Id::OutsideIa32eGuest);
}

TEST(VmEntriesMemo, CurrentVmcsBecomingTheLinkIsSeen) {
  MemoEnv E;
  E.write32(kLinkVmcs, kVmcsRevisionId);
  E.set(F::VmcsLinkPointer, kLinkVmcs);
  E.warm();
  E.M.Cpu_.Vmx->CurrentVmcsPointer = kLinkVmcs; // as VMPTRLD of that region would
  expectFails(E.memo(), Id::GuestLinkPointerCurrentVmcs);
}

TEST(VmEntriesMemo, ProfileChangeIsSeen) {
  MemoEnv E;
  E.setup(SetupKind::Ept);
  E.orBits(F::EptPointer, 1u << 6); // accessed/dirty flags
  E.warm();
  E.setup(SetupKind::NoEptAccessedDirty);
  expectFails(E.memo(), Id::EptpAccessedDirty);
}

/// V with a data segment in CS (GuestCsType) and no change marks at all.
VmcsData brokenCsWithoutMarks(const VmcsData &V) {
  VmcsData Broken = V;
  Broken.set(F::GuestCsAccessRights, 0xa093);
  std::fill(std::begin(Broken.Written), std::end(Broken.Written), 0);
  return Broken;
}

TEST(VmEntriesMemo, CopyOverTheVmcsDataIsSeen) {
  MemoEnv E;
  E.warm();
  const VmcsData Broken = brokenCsWithoutMarks(E.V);
  E.V = Broken; // a copy marks every field, whatever the source's marks
  expectFails(E.memo(), Id::GuestCsType);
}

TEST(VmEntriesMemo, AnotherVmcsDataObjectStartsOver) {
  MemoEnv E;
  E.warm();
  VmcsData Other = brokenCsWithoutMarks(E.V);
  std::fill(std::begin(Other.Written), std::end(Other.Written), 0); // the copy's marks
  expectFails(checkVmEntryMemo(E.M.Cpu_, Other, E.P, E.Memo), Id::GuestCsType);
}

TEST(VmEntriesMemo, SetMarksOnlyChangedFieldsAndCopiesMarkAll) {
  // "Every field" is exactly the table's fields: no bit past the last one (the memo
  // indexes per-field arrays with them).
  auto expectAllFieldsMarked = [](const VmcsData &D) {
    for (unsigned I = 0; I < 64 * VmcsData::kWrittenWords; ++I)
      EXPECT_EQ((D.Written[I / 64] >> (I % 64)) & 1, I < kNumVmcsFields ? 1u : 0u) << I;
  };
  VmcsData V;
  expectAllFieldsMarked(V);
  std::fill(std::begin(V.Written), std::end(V.Written), 0);
  V.set(F::GuestRip, 0);
  for (uint64_t W : V.Written)
    EXPECT_EQ(W, 0u);
  V.set(F::GuestRip, 0x1000);
  const unsigned I = unsigned(F::GuestRip);
  EXPECT_EQ(V.Written[I / 64], uint64_t(1) << (I % 64));
  // A VMWRITE of the high half of a 64-bit field.
  std::fill(std::begin(V.Written), std::end(V.Written), 0);
  vmcsWriteValue(V, lookupEncoding(encodingOf(F::TscOffset) | 1), 5);
  const unsigned T = unsigned(F::TscOffset);
  EXPECT_EQ(V.get(F::TscOffset), uint64_t(5) << 32);
  EXPECT_EQ(V.Written[T / 64], uint64_t(1) << (T % 64));
  VmcsData Copy(V);
  expectAllFieldsMarked(Copy);
}

} // namespace
} // namespace vmxsim::test
