// The VM-entry checks of SDM Vol. 3C, "VM Entries" > "Checks on VMX Controls and
// Host-State Area" and "Checks on the Guest State Area", one function per SDM subsection,
// each check in the order of vm_entry_checks.def (which is the order of the SDM's text;
// the SDM leaves the order implementation-specific). A check names its row; the row's
// group decides the outcome (VMfailValid 7 or 8, or VM exit 33 with the row's
// qualification), so no outcome is written twice.
//
// The checks only read: the VMCS data, the capability MSRs of the profile, the
// processor's IA32_EFER.LMA, CR4 capabilities, physical- and linear-address widths and
// current-VMCS pointer, and physical memory (VTPR, the VMCS the link pointer names, and
// the PDPTEs without EPT). Every input is guest-controlled, so nothing here asserts.
#include "cpu/vmx/vm_entry_checks.h"

#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "cpu/msrs.h"
#include "cpu/perfmon.h"
#include "cpu/registers.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmx_state.h"
#include "mmu/phys_mem.h"

#include <iterator>

namespace vmxsim {

uint64_t cr4ValidBits(const Cpu &C); // cpu/exec_cr.cpp: the CR4 bits the model supports

namespace {

using F = VmcsField;
using Id = VmEntryCheckId;
using Ctl = VmxControl;

struct GroupRow {
  VmEntryCheckKind Kind;
  uint32_t Number;
  const char *Section;
};
constexpr GroupRow kGroups[] = {
#define VM_ENTRY_CHECK_GROUP(Group, Outcome, Number, Section)                            \
  {VmEntryCheckKind::Outcome, Number, Section},
#include "cpu/vmx/vm_entry_checks.def"
};

constexpr VmEntryCheckInfo kChecks[] = {
#define VM_ENTRY_CHECK(CheckName, GroupName, Qual, Break, Desc)                           \
  {#CheckName,                                                                           \
   VmEntryCheckGroup::GroupName,                                                         \
   kGroups[unsigned(VmEntryCheckGroup::GroupName)].Kind,                                 \
   kGroups[unsigned(VmEntryCheckGroup::GroupName)].Number,                               \
   uint8_t(EntryFailureQualification::Qual),                                             \
   kGroups[unsigned(VmEntryCheckGroup::GroupName)].Section,                              \
   Desc},
#include "cpu/vmx/vm_entry_checks.def"
};
static_assert(std::size(kChecks) == kNumVmEntryChecks);

constexpr bool checksAreConsistent() {
  for (const VmEntryCheckInfo &I : kChecks) {
    // VMfailValid carries no qualification; an entry failure uses 0, 2, 3 or 4 (SDM Vol.
    // 3C, "VM-Entry Failures During or After Loading Guest State").
    if (I.Kind == VmEntryCheckKind::VmFailValid && I.Qualification != 0)
      return false;
    if (I.Qualification == 1 || I.Qualification > 4)
      return false;
  }
  return true;
}
static_assert(checksAreConsistent(), "vm_entry_checks.def: impossible qualification");

/// The control word of each row of vmx_controls.def, by enumerator.
constexpr VmxControlWord kControlWords[] = {
#define VMX_CONTROL(Word, Bit, Name, Default, Feature, SdmName) VmxControlWord::Word,
#include "cpu/vmx/vmx_controls.def"
#undef VMX_CONTROL
};

// IA32_VMX_EPT_VPID_CAP bits (SDM Vol. 3D, "VPID and EPT Capabilities").
constexpr uint64_t kEptCapWalk4 = 1u << 6, kEptCapWalk5 = 1u << 7, kEptCapUc = 1u << 8,
                   kEptCapWb = 1u << 14, kEptCapAccessedDirty = 1u << 21;
// The VM-entry interruption-information field (SDM Vol. 3C, "VM-Entry Controls for Event
// Injection") has the layout of cpu/vmx/vm_exit.h's intinfo.
using namespace intinfo;
// Pending debug exceptions (SDM Vol. 3C, "Guest Non-Register State"): B3-B0, enabled
// breakpoint (12), BS (14) and RTM (16) are defined; the rest is reserved.
constexpr uint64_t kPendingDebugReserved = 0xfffffffffffeaff0ull, kPendingDebugBs = 1u << 14,
                   kPendingDebugRtm = 1u << 16;
// RFLAGS reserved bits 63:22, 15, 5 and 3 (bit 1 is reserved as 1).
constexpr uint64_t kRflagsReserved0 = 0xffffffffffc08028ull;
// IA32_DEBUGCTL's reserved bits are its row's in cpu/msrs.def; BTF is bit 1 (SDM Vol. 3B,
// "IA32_DEBUGCTL MSR").
constexpr uint64_t kDebugctlBtf = 1u << 1;
// Guest access-rights layout (the VMCS packing of registers.h's Segment::Attr).
constexpr uint32_t kArType = 0xf, kArS = 1u << 4, kArP = 1u << 7, kArReservedLow = 0xf00,
                   kArL = 1u << 13, kArDb = 1u << 14, kArG = 1u << 15,
                   kArUnusable = 1u << 16, kArReservedHigh = 0xfffe0000;

bool validPatType(uint64_t T) { return T == 0 || T == 1 || T == 4 || T == 5 || T == 6 || T == 7; }
/// "Each of the 8 bytes in the field must have one of the values 0 (UC), 1 (WC), 4 (WT),
/// 5 (WP), 6 (WB), or 7 (UC-)" (SDM Vol. 3C, the IA32_PAT bullets).
bool validPat(uint64_t Pat) {
  for (unsigned I = 0; I < 8; ++I)
    if (!validPatType((Pat >> (8 * I)) & 0xff))
      return false;
  return true;
}
bool fixedOk(uint64_t V, uint64_t Fixed0, uint64_t Fixed1) {
  return (V & Fixed0) == Fixed0 && (V & ~Fixed1) == 0;
}
/// The G-bit rule of every segment's access rights: "If any bit in the limit field in
/// the range 11:0 is 0, G must be 0. If any bit in the limit field in the range 31:20 is
/// 1, G must be 1."
bool granularityOk(uint64_t Limit, uint32_t Ar) {
  if ((Limit & 0xfff) != 0xfff && (Ar & kArG))
    return false;
  if ((Limit >> 20) && !(Ar & kArG))
    return false;
  return true;
}

#define VMX_REQUIRE(Cond, CheckName)                                                     \
  do {                                                                                   \
    if (!(Cond))                                                                         \
      return Id::CheckName;                                                              \
  } while (false)
#define VMX_TRY_CHECKS(Expr)                                                             \
  do {                                                                                   \
    Id Failed_ = (Expr);                                                                 \
    if (Failed_ != Id::None)                                                             \
      return Failed_;                                                                    \
  } while (false)

/// A guest segment register's four fields.
struct SegFields {
  F Sel, Base, Limit, Ar;
};
enum SegIndex : unsigned { Cs, Ss, Ds, Es, Fs, Gs, NumDataSegs };
/// In the order the SDM's bullets name them: CS, SS, DS, ES, FS, GS.
constexpr SegFields kSegs[NumDataSegs] = {
    {F::GuestCsSelector, F::GuestCsBase, F::GuestCsLimit, F::GuestCsAccessRights},
    {F::GuestSsSelector, F::GuestSsBase, F::GuestSsLimit, F::GuestSsAccessRights},
    {F::GuestDsSelector, F::GuestDsBase, F::GuestDsLimit, F::GuestDsAccessRights},
    {F::GuestEsSelector, F::GuestEsBase, F::GuestEsLimit, F::GuestEsAccessRights},
    {F::GuestFsSelector, F::GuestFsBase, F::GuestFsLimit, F::GuestFsAccessRights},
    {F::GuestGsSelector, F::GuestGsBase, F::GuestGsLimit, F::GuestGsAccessRights}};
constexpr SegFields kTr = {F::GuestTrSelector, F::GuestTrBase, F::GuestTrLimit,
                           F::GuestTrAccessRights};
constexpr SegFields kLdtr = {F::GuestLdtrSelector, F::GuestLdtrBase, F::GuestLdtrLimit,
                             F::GuestLdtrAccessRights};

class Checker {
public:
  Checker(const Cpu &C, const VmcsData &V, const VmxProfile &P) : C(C), V(V), P(P) {
    Words[unsigned(VmxControlWord::Pin)] = uint32_t(get(F::PinBasedVmExecutionControls));
    Words[unsigned(VmxControlWord::Proc)] =
        uint32_t(get(F::PrimaryProcessorBasedVmExecutionControls));
    // "If the 'activate secondary controls' primary processor-based VM-execution control
    // is 0 ... the logical processor operates as if all the secondary processor-based
    // VM-execution controls were 0"; likewise for the tertiary controls.
    Words[unsigned(VmxControlWord::Proc2)] =
        on(Ctl::ActivateSecondaryControls)
            ? uint32_t(get(F::SecondaryProcessorBasedVmExecutionControls))
            : 0;
    Proc3 = on(Ctl::ActivateTertiaryControls)
                ? get(F::TertiaryProcessorBasedVmExecutionControls)
                : 0;
    Words[unsigned(VmxControlWord::Proc3)] = uint32_t(Proc3);
    Words[unsigned(VmxControlWord::Exit)] = uint32_t(get(F::PrimaryVmExitControls));
    Words[unsigned(VmxControlWord::Entry)] = uint32_t(get(F::VmEntryControls));
    PhysBits = C.Model.MaxPhysAddrBits;
    LinearBits = C.Model.La57 ? 57 : C.Model.MaxLinearAddrBits;
    Cr4Fixed1 = cr4ValidBits(C);
    Ug = on(Ctl::UnrestrictedGuest);
    Guest64 = on(Ctl::Ia32eModeGuest);
    // Every group reads the control words through on(): they are inputs of each.
    std::copy(std::begin(Read), std::end(Read), std::begin(ControlWordFields));
  }

  /// Every group in order; the first failing check decides.
  Id run() const {
    for (unsigned G = 0; G < kNumVmEntryCheckGroups; ++G)
      VMX_TRY_CHECKS(runGroup(G));
    return Id::None;
  }
  Id runMemo(VmEntryCheckMemo &M, VmcsData &Data) const;

private:
  const Cpu &C;
  const VmcsData &V;
  const VmxProfile &P;
  uint32_t Words[6] = {};
  uint64_t Proc3 = 0;
  unsigned PhysBits = 46, LinearBits = 48;
  uint64_t Cr4Fixed1 = 0;
  bool Ug = false, Guest64 = false;

  // The inputs of the group being run, for the memo: the VMCS fields read (a bit per
  // field index) and the physical-memory reads. A group that reads memory the memo
  // cannot re-read without side effects (MMIO), or more than it can hold, is not
  // memoised.
  mutable uint64_t Read[VmEntryCheckMemo::kMaskWords] = {};
  uint64_t ControlWordFields[VmEntryCheckMemo::kMaskWords] = {};
  mutable VmEntryCheckMemo::MemoryInput MemoryRead[VmEntryCheckMemo::kMaxMemoryInputs];
  mutable uint8_t NumMemoryReads = 0;
  mutable bool Unmemoisable = false;

  uint64_t get(F Field) const {
    const unsigned I = unsigned(Field);
    Read[I / 64] |= uint64_t(1) << (I % 64);
    return V.Values[I];
  }
  /// A read of guest-physical memory by a check (C.Mem.read), recorded as an input.
  uint64_t readPhys(uint64_t Addr, unsigned SizeBytes) const {
    const uint64_t Value = C.Mem.read(Hpa(Addr), SizeBytes);
    if (NumMemoryReads < VmEntryCheckMemo::kMaxMemoryInputs && !C.Mem.mmioAt(Addr))
      MemoryRead[NumMemoryReads++] = {Addr, Value, uint8_t(SizeBytes)};
    else
      Unmemoisable = true;
    return Value;
  }
  Id runGroup(unsigned G) const;
  bool memoryUnchanged(const VmEntryCheckMemo::Group &G) const;
  VmEntryCheckMemo::Env env() const;
  bool on(Ctl X) const {
    return Words[unsigned(kControlWords[unsigned(X)])] & controlBit(X);
  }
  uint64_t capability(uint32_t Msr) const {
    return vmxCapabilityMsr(P, Msr, Cr4Fixed1).value_or(0);
  }
  bool beyondPhys(uint64_t A) const { return PhysBits < 64 && (A >> PhysBits) != 0; }
  bool canonical(uint64_t A) const {
    return uint64_t(int64_t(A << (64 - LinearBits)) >> (64 - LinearBits)) == A;
  }
  uint64_t eferReserved() const {
    uint64_t R = findMsr(msr::IA32_EFER)->Reserved;
    return C.Model.Nx ? R : R | efer::NXE;
  }
  /// The three checks on a VM-exit MSR-store, VM-exit MSR-load or VM-entry MSR-load
  /// area when its count is not 0. "The arithmetic used for the computation uses more
  /// bits than the processor's physical-address width": 64 bits hold it exactly.
  Id msrArea(F Count, F Address, Id Alignment, Id Width, Id EndWidth) const {
    uint64_t N = get(Count), A = get(Address);
    if (N == 0)
      return Id::None;
    if (A & 0xf)
      return Alignment;
    if (beyondPhys(A))
      return Width;
    if (beyondPhys(A + N * 16 - 1))
      return EndWidth;
    return Id::None;
  }
  /// A page-aligned physical address of a control structure: alignment, then width.
  Id pageAddress(F Address, Id Alignment, Id Width) const {
    uint64_t A = get(Address);
    if (A & 0xfff)
      return Alignment;
    if (beyondPhys(A))
      return Width;
    return Id::None;
  }
  bool usable(const SegFields &S) const { return !(get(S.Ar) & kArUnusable); }

  Id executionControls() const;
  Id exitControls() const;
  Id entryControls() const;
  Id hostRegisters() const;
  Id hostSegments() const;
  Id addressSpaceSize() const;
  Id guestRegisters() const;
  Id guestSegments() const;
  Id guestSegmentAccessRights() const;
  Id guestDescriptorTables() const;
  Id guestRipRflags() const;
  Id guestNonRegisterState() const;
  Id guestPdptes() const;
};

// SDM Vol. 3C, Checks on VMX Controls > VM-Execution Control Fields.
Id Checker::executionControls() const {
  VMX_REQUIRE(controlCaps(P, VmxControlWord::Pin).allows(Words[unsigned(VmxControlWord::Pin)]),
              PinBasedReserved);
  VMX_REQUIRE(
      controlCaps(P, VmxControlWord::Proc).allows(Words[unsigned(VmxControlWord::Proc)]),
      ProcBasedReserved);
  if (on(Ctl::ActivateSecondaryControls))
    VMX_REQUIRE(controlCaps(P, VmxControlWord::Proc2)
                    .allows(Words[unsigned(VmxControlWord::Proc2)]),
                SecondaryReserved);
  if (on(Ctl::ActivateTertiaryControls))
    VMX_REQUIRE((Proc3 & ~capability(msr::IA32_VMX_PROCBASED_CTLS3)) == 0, TertiaryReserved);
  VMX_REQUIRE(get(F::Cr3TargetCount) <= P.Cr3TargetCount, Cr3TargetCount);
  if (on(Ctl::UseIoBitmaps)) {
    VMX_REQUIRE(!(get(F::IoBitmapAAddress) & 0xfff), IoBitmapAAlignment);
    VMX_REQUIRE(!(get(F::IoBitmapBAddress) & 0xfff), IoBitmapBAlignment);
    VMX_REQUIRE(!beyondPhys(get(F::IoBitmapAAddress)), IoBitmapAWidth);
    VMX_REQUIRE(!beyondPhys(get(F::IoBitmapBAddress)), IoBitmapBWidth);
  }
  if (on(Ctl::UseMsrBitmaps))
    VMX_TRY_CHECKS(pageAddress(F::MsrBitmapsAddress, Id::MsrBitmapAlignment,
                               Id::MsrBitmapWidth));
  if (on(Ctl::UseTprShadow)) {
    VMX_TRY_CHECKS(pageAddress(F::VirtualApicAddress, Id::VirtualApicAlignment,
                               Id::VirtualApicWidth));
    uint64_t Threshold = get(F::TprThreshold);
    if (!on(Ctl::VirtualInterruptDelivery))
      VMX_REQUIRE((Threshold >> 4) == 0, TprThresholdReserved);
    if (!on(Ctl::VirtualizeApicAccesses) && !on(Ctl::VirtualInterruptDelivery)) {
      // VTPR is byte 80H of the virtual-APIC page (SDM Vol. 3C, "Virtualized APIC
      // Registers").
      uint64_t Vtpr = readPhys(get(F::VirtualApicAddress) + 0x80, 1);
      VMX_REQUIRE((Threshold & 0xf) <= ((Vtpr >> 4) & 0xf), TprThresholdAboveVtpr);
    }
  }
  VMX_REQUIRE(on(Ctl::NmiExiting) || !on(Ctl::VirtualNmis), VirtualNmisWithoutNmiExiting);
  VMX_REQUIRE(on(Ctl::VirtualNmis) || !on(Ctl::NmiWindowExiting), NmiWindowWithoutVirtualNmis);
  if (on(Ctl::VirtualizeApicAccesses))
    VMX_TRY_CHECKS(pageAddress(F::ApicAccessAddress, Id::ApicAccessAlignment,
                               Id::ApicAccessWidth));
  if (!on(Ctl::UseTprShadow)) {
    VMX_REQUIRE(!on(Ctl::VirtualizeX2apicMode), X2apicWithoutTprShadow);
    VMX_REQUIRE(!on(Ctl::ApicRegisterVirtualization),
                ApicRegisterVirtualizationWithoutTprShadow);
    VMX_REQUIRE(!on(Ctl::VirtualInterruptDelivery), VirtualInterruptDeliveryWithoutTprShadow);
  }
  VMX_REQUIRE(!on(Ctl::VirtualizeX2apicMode) || !on(Ctl::VirtualizeApicAccesses),
              X2apicWithApicAccesses);
  VMX_REQUIRE(!on(Ctl::VirtualInterruptDelivery) || on(Ctl::ExternalInterruptExiting),
              VirtualInterruptDeliveryWithoutExternalInterruptExiting);
  if (on(Ctl::ProcessPostedInterrupts)) {
    VMX_REQUIRE(on(Ctl::VirtualInterruptDelivery),
                PostedInterruptsWithoutVirtualInterruptDelivery);
    VMX_REQUIRE(on(Ctl::AcknowledgeInterruptOnExit), PostedInterruptsWithoutAcknowledgeOnExit);
    VMX_REQUIRE((get(F::PostedInterruptNotificationVector) & 0xff00) == 0,
                PostedInterruptVector);
    VMX_REQUIRE(!(get(F::PostedInterruptDescriptorAddress) & 0x3f),
                PostedInterruptDescriptorAlignment);
    VMX_REQUIRE(!beyondPhys(get(F::PostedInterruptDescriptorAddress)),
                PostedInterruptDescriptorWidth);
  }
  if (on(Ctl::EnableVpid))
    VMX_REQUIRE(get(F::VirtualProcessorIdentifier) != 0, VpidZero);
  if (on(Ctl::EnableEpt)) {
    VMX_TRY_CHECKS(checkEptp(get(F::EptPointer), capability(msr::IA32_VMX_EPT_VPID_CAP),
                             PhysBits));
  }
  if (on(Ctl::EnablePml)) {
    VMX_REQUIRE(on(Ctl::EnableEpt), PmlWithoutEpt);
    VMX_TRY_CHECKS(pageAddress(F::PmlAddress, Id::PmlAddressAlignment, Id::PmlAddressWidth));
  }
  VMX_REQUIRE(!Ug || on(Ctl::EnableEpt), UnrestrictedGuestWithoutEpt);
  VMX_REQUIRE(!on(Ctl::ModeBasedExecuteControlForEpt) || on(Ctl::EnableEpt),
              ModeBasedExecuteWithoutEpt);
  if (on(Ctl::EnableVmFunctions)) {
    uint64_t Functions = get(F::VmFunctionControls);
    VMX_REQUIRE((Functions & ~capability(msr::IA32_VMX_VMFUNC)) == 0,
                VmFunctionControlsReserved);
    if (Functions & 1) { // EPTP switching (SDM Vol. 3C, "VM-Function Controls")
      VMX_REQUIRE(on(Ctl::EnableEpt), EptpSwitchingWithoutEpt);
      VMX_TRY_CHECKS(
          pageAddress(F::EptpListAddress, Id::EptpListAlignment, Id::EptpListWidth));
    }
  }
  if (on(Ctl::VmcsShadowing)) {
    VMX_TRY_CHECKS(pageAddress(F::VmreadBitmapAddress, Id::VmreadBitmapAlignment,
                               Id::VmreadBitmapWidth));
    VMX_TRY_CHECKS(pageAddress(F::VmwriteBitmapAddress, Id::VmwriteBitmapAlignment,
                               Id::VmwriteBitmapWidth));
  }
  if (on(Ctl::EptViolationVe))
    VMX_TRY_CHECKS(pageAddress(F::VirtualizationExceptionInformationAddress,
                               Id::VeInformationAlignment, Id::VeInformationWidth));
  return Id::None;
}

// SDM Vol. 3C, Checks on VMX Controls > VM-Exit Control Fields.
Id Checker::exitControls() const {
  VMX_REQUIRE(controlCaps(P, VmxControlWord::Exit).allows(Words[unsigned(VmxControlWord::Exit)]),
              ExitControlsReserved);
  VMX_REQUIRE(on(Ctl::ActivateVmxPreemptionTimer) || !on(Ctl::SaveVmxPreemptionTimerValue),
              SavePreemptionTimerWithoutActivate);
  VMX_TRY_CHECKS(msrArea(F::VmExitMsrStoreCount, F::VmExitMsrStoreAddress,
                         Id::ExitMsrStoreAlignment, Id::ExitMsrStoreWidth,
                         Id::ExitMsrStoreEndWidth));
  return msrArea(F::VmExitMsrLoadCount, F::VmExitMsrLoadAddress, Id::ExitMsrLoadAlignment,
                 Id::ExitMsrLoadWidth, Id::ExitMsrLoadEndWidth);
}

// SDM Vol. 3C, Checks on VMX Controls > VM-Entry Control Fields. The event-injection
// bullets follow the SDM edition whose deliver-error-code rule reads "(1) either (a) the
// 'unrestricted guest' VM-execution control is 0; or (b) bit 0 (corresponding to CR0.PE)
// is set in the CR0 field" and whose error-code rule names bits 31:15 (IA32_VMX_BASIC[56]
// is 0 in every profile).
Id Checker::entryControls() const {
  VMX_REQUIRE(
      controlCaps(P, VmxControlWord::Entry).allows(Words[unsigned(VmxControlWord::Entry)]),
      EntryControlsReserved);
  uint32_t Info = uint32_t(get(F::VmEntryInterruptionInformation));
  if (Info & Valid) {
    const unsigned Type = type(Info), Vector = vector(Info);
    bool MtfSupported =
        controlCaps(P, VmxControlWord::Proc).MayBe1 & controlBit(Ctl::MonitorTrapFlag);
    VMX_REQUIRE(Type != 1 && (Type != OtherEvent || MtfSupported), EventTypeReserved);
    VMX_REQUIRE(Type != Nmi || Vector == 2, EventNmiVector);
    VMX_REQUIRE(Type != HardwareException || Vector <= 31, EventHardwareExceptionVector);
    VMX_REQUIRE(Type != OtherEvent || Vector == 0, EventOtherVector);
    bool DeliversErrorCode =
        Vector == 8 || (Vector >= 10 && Vector <= 14) || Vector == 17; // #DF #TS-#PF #AC
    bool MustDeliver = (!Ug || (get(F::GuestCr0) & cr0::PE)) && Type == HardwareException &&
                       DeliversErrorCode;
    VMX_REQUIRE(bool(Info & DeliverErrorCode) == MustDeliver, EventDeliverErrorCode);
    VMX_REQUIRE(!(Info & EntryReserved), EventReservedBits);
    if (Info & DeliverErrorCode)
      VMX_REQUIRE(!(get(F::VmEntryExceptionErrorCode) & 0xffff8000), EventErrorCodeReserved);
    if (Type == SoftwareInterrupt || Type == PrivilegedSoftwareException ||
        Type == SoftwareException) {
      uint64_t Length = get(F::VmEntryInstructionLength);
      bool ZeroAllowed = capability(msr::IA32_VMX_MISC) & (1u << 30);
      VMX_REQUIRE(Length <= 15 && (Length != 0 || ZeroAllowed), EventInstructionLength);
    }
  }
  return msrArea(F::VmEntryMsrLoadCount, F::VmEntryMsrLoadAddress, Id::EntryMsrLoadAlignment,
                 Id::EntryMsrLoadWidth, Id::EntryMsrLoadEndWidth);
}

// SDM Vol. 3C, Checks on Host Control Registers, MSRs, and SSP.
Id Checker::hostRegisters() const {
  VMX_REQUIRE(fixedOk(get(F::HostCr0), capability(msr::IA32_VMX_CR0_FIXED0),
                      capability(msr::IA32_VMX_CR0_FIXED1)),
              HostCr0Fixed);
  VMX_REQUIRE(fixedOk(get(F::HostCr4), capability(msr::IA32_VMX_CR4_FIXED0),
                      capability(msr::IA32_VMX_CR4_FIXED1)),
              HostCr4Fixed);
  // "Bits 63:52 and bits in the range 51:32 beyond the processor's physical-address
  // width must be 0": with a width of at most 52, all bits from the width up.
  VMX_REQUIRE(!beyondPhys(get(F::HostCr3)), HostCr3Width);
  VMX_REQUIRE(canonical(get(F::HostIa32SysenterEsp)), HostSysenterEspCanonical);
  VMX_REQUIRE(canonical(get(F::HostIa32SysenterEip)), HostSysenterEipCanonical);
  // The reserved bits of IA32_PERF_GLOBAL_CTRL: those naming no counter (cpu/perfmon.h).
  if (on(Ctl::LoadIa32PerfGlobalCtrlOnExit))
    VMX_REQUIRE(!(get(F::HostIa32PerfGlobalCtrl) & ~perfmon::kCounterBits),
                HostPerfGlobalCtrlReserved);
  if (on(Ctl::LoadIa32PatOnExit))
    VMX_REQUIRE(validPat(get(F::HostIa32Pat)), HostPat);
  if (on(Ctl::LoadIa32EferOnExit)) {
    uint64_t Efer = get(F::HostIa32Efer);
    bool Host64 = on(Ctl::HostAddressSpaceSize);
    VMX_REQUIRE(!(Efer & eferReserved()), HostEferReserved);
    VMX_REQUIRE(bool(Efer & efer::LMA) == Host64, HostEferLma);
    VMX_REQUIRE(bool(Efer & efer::LME) == Host64, HostEferLme);
  }
  return Id::None;
}

// SDM Vol. 3C, Checks on Host Segment and Descriptor-Table Registers.
Id Checker::hostSegments() const {
  VMX_REQUIRE(!(get(F::HostEsSelector) & 7), HostEsSelectorRplTi);
  VMX_REQUIRE(!(get(F::HostCsSelector) & 7), HostCsSelectorRplTi);
  VMX_REQUIRE(!(get(F::HostSsSelector) & 7), HostSsSelectorRplTi);
  VMX_REQUIRE(!(get(F::HostDsSelector) & 7), HostDsSelectorRplTi);
  VMX_REQUIRE(!(get(F::HostFsSelector) & 7), HostFsSelectorRplTi);
  VMX_REQUIRE(!(get(F::HostGsSelector) & 7), HostGsSelectorRplTi);
  VMX_REQUIRE(!(get(F::HostTrSelector) & 7), HostTrSelectorRplTi);
  VMX_REQUIRE(get(F::HostCsSelector) != 0, HostCsSelectorZero);
  VMX_REQUIRE(get(F::HostTrSelector) != 0, HostTrSelectorZero);
  VMX_REQUIRE(on(Ctl::HostAddressSpaceSize) || get(F::HostSsSelector) != 0, HostSsSelectorZero);
  VMX_REQUIRE(canonical(get(F::HostFsBase)), HostFsBaseCanonical);
  VMX_REQUIRE(canonical(get(F::HostGsBase)), HostGsBaseCanonical);
  VMX_REQUIRE(canonical(get(F::HostGdtrBase)), HostGdtrBaseCanonical);
  VMX_REQUIRE(canonical(get(F::HostIdtrBase)), HostIdtrBaseCanonical);
  VMX_REQUIRE(canonical(get(F::HostTrBase)), HostTrBaseCanonical);
  return Id::None;
}

// SDM Vol. 3C, Checks Related to Address-Space Size.
Id Checker::addressSpaceSize() const {
  bool Host64 = on(Ctl::HostAddressSpaceSize);
  if (!(C.S.Efer & efer::LMA)) {
    VMX_REQUIRE(!Guest64, OutsideIa32eGuest);
    VMX_REQUIRE(!Host64, OutsideIa32eHostAddressSpace);
  } else {
    VMX_REQUIRE(Host64, InIa32eHostAddressSpace);
  }
  if (!Host64) {
    VMX_REQUIRE(!Guest64, Host32Ia32eGuest);
    VMX_REQUIRE(!(get(F::HostCr4) & cr4::PCIDE), Host32Pcide);
    VMX_REQUIRE((get(F::HostRip) >> 32) == 0, Host32RipHigh);
  } else {
    VMX_REQUIRE(get(F::HostCr4) & cr4::PAE, Host64Pae);
    VMX_REQUIRE(canonical(get(F::HostRip)), Host64RipCanonical);
  }
  return Id::None;
}

// SDM Vol. 3C, Checks on Guest Control Registers, Debug Registers, and MSRs.
Id Checker::guestRegisters() const {
  uint64_t Cr0 = get(F::GuestCr0), Cr4 = get(F::GuestCr4);
  // NW and CD are never checked ("the values of these bits are not changed by VM
  // entry"); PE and PG are not checked with "unrestricted guest".
  uint64_t Fixed0 = capability(msr::IA32_VMX_CR0_FIXED0) & ~(cr0::NW | cr0::CD);
  uint64_t Fixed1 = capability(msr::IA32_VMX_CR0_FIXED1) | cr0::NW | cr0::CD;
  if (Ug) {
    Fixed0 &= ~(cr0::PE | cr0::PG);
    Fixed1 |= cr0::PE | cr0::PG;
  }
  VMX_REQUIRE(fixedOk(Cr0, Fixed0, Fixed1), GuestCr0Fixed);
  VMX_REQUIRE(!(Cr0 & cr0::PG) || (Cr0 & cr0::PE), GuestCr0PgWithoutPe);
  VMX_REQUIRE(fixedOk(Cr4, capability(msr::IA32_VMX_CR4_FIXED0),
                      capability(msr::IA32_VMX_CR4_FIXED1)),
              GuestCr4Fixed);
  if (on(Ctl::LoadDebugControls))
    VMX_REQUIRE(!(get(F::GuestIa32Debugctl) &
                  kMsrTable[unsigned(MsrSlot::IA32_DEBUGCTL)].Reserved),
                GuestDebugctlReserved);
  if (Guest64) {
    VMX_REQUIRE(Cr0 & cr0::PG, GuestIa32eWithoutPg);
    VMX_REQUIRE(Cr4 & cr4::PAE, GuestIa32eWithoutPae);
  } else {
    VMX_REQUIRE(!(Cr4 & cr4::PCIDE), GuestPcideWithoutIa32e);
  }
  VMX_REQUIRE(!beyondPhys(get(F::GuestCr3)), GuestCr3Width);
  if (on(Ctl::LoadDebugControls))
    VMX_REQUIRE((get(F::GuestDr7) >> 32) == 0, GuestDr7High);
  VMX_REQUIRE(canonical(get(F::GuestIa32SysenterEsp)), GuestSysenterEspCanonical);
  VMX_REQUIRE(canonical(get(F::GuestIa32SysenterEip)), GuestSysenterEipCanonical);
  if (on(Ctl::LoadIa32PerfGlobalCtrlOnEntry))
    VMX_REQUIRE(!(get(F::GuestIa32PerfGlobalCtrl) & ~perfmon::kCounterBits),
                GuestPerfGlobalCtrlReserved);
  if (on(Ctl::LoadIa32PatOnEntry))
    VMX_REQUIRE(validPat(get(F::GuestIa32Pat)), GuestPat);
  if (on(Ctl::LoadIa32EferOnEntry)) {
    uint64_t Efer = get(F::GuestIa32Efer);
    VMX_REQUIRE(!(Efer & eferReserved()), GuestEferReserved);
    VMX_REQUIRE(bool(Efer & efer::LMA) == Guest64, GuestEferLma);
    VMX_REQUIRE(!(Cr0 & cr0::PG) || bool(Efer & efer::LMA) == bool(Efer & efer::LME),
                GuestEferLme);
  }
  return Id::None;
}

// SDM Vol. 3C, Checks on Guest Segment Registers: selector fields, base-address fields,
// limit fields, then access rights.
Id Checker::guestSegments() const {
  bool V8086 = get(F::GuestRflags) & rflags::VM;
  VMX_REQUIRE(!(get(kTr.Sel) & 4), GuestTrSelectorTi);
  if (usable(kLdtr))
    VMX_REQUIRE(!(get(kLdtr.Sel) & 4), GuestLdtrSelectorTi);
  if (!V8086 && !Ug)
    VMX_REQUIRE((get(kSegs[Ss].Sel) & 3) == (get(kSegs[Cs].Sel) & 3), GuestSsRplCs);

  if (V8086) {
    constexpr Id kBase[NumDataSegs] = {Id::GuestCsBaseV8086, Id::GuestSsBaseV8086,
                                       Id::GuestDsBaseV8086, Id::GuestEsBaseV8086,
                                       Id::GuestFsBaseV8086, Id::GuestGsBaseV8086};
    for (unsigned I = 0; I < NumDataSegs; ++I)
      if (get(kSegs[I].Base) != get(kSegs[I].Sel) << 4)
        return kBase[I];
  }
  VMX_REQUIRE(canonical(get(kTr.Base)), GuestTrBaseCanonical);
  VMX_REQUIRE(canonical(get(kSegs[Fs].Base)), GuestFsBaseCanonical);
  VMX_REQUIRE(canonical(get(kSegs[Gs].Base)), GuestGsBaseCanonical);
  if (usable(kLdtr))
    VMX_REQUIRE(canonical(get(kLdtr.Base)), GuestLdtrBaseCanonical);
  VMX_REQUIRE((get(kSegs[Cs].Base) >> 32) == 0, GuestCsBaseHigh);
  VMX_REQUIRE(!usable(kSegs[Ss]) || (get(kSegs[Ss].Base) >> 32) == 0, GuestSsBaseHigh);
  VMX_REQUIRE(!usable(kSegs[Ds]) || (get(kSegs[Ds].Base) >> 32) == 0, GuestDsBaseHigh);
  VMX_REQUIRE(!usable(kSegs[Es]) || (get(kSegs[Es].Base) >> 32) == 0, GuestEsBaseHigh);

  if (V8086) {
    constexpr Id kLimit[NumDataSegs] = {Id::GuestCsLimitV8086, Id::GuestSsLimitV8086,
                                        Id::GuestDsLimitV8086, Id::GuestEsLimitV8086,
                                        Id::GuestFsLimitV8086, Id::GuestGsLimitV8086};
    for (unsigned I = 0; I < NumDataSegs; ++I)
      if (get(kSegs[I].Limit) != 0xffff)
        return kLimit[I];
  }
  return guestSegmentAccessRights();
}

Id Checker::guestSegmentAccessRights() const {
  uint32_t Ar[NumDataSegs];
  for (unsigned I = 0; I < NumDataSegs; ++I)
    Ar[I] = uint32_t(get(kSegs[I].Ar));
  // CS is checked whether or not it is marked unusable.
  auto checked = [&](unsigned I) { return I == Cs || !(Ar[I] & kArUnusable); };
  auto type = [&](unsigned I) { return Ar[I] & kArType; };
  auto dpl = [&](unsigned I) { return (Ar[I] >> 5) & 3; };
  auto rpl = [&](unsigned I) { return unsigned(get(kSegs[I].Sel) & 3); };

  if (get(F::GuestRflags) & rflags::VM) {
    // "If the guest will be virtual-8086, the field must be 000000F3H."
    constexpr Id kAr[NumDataSegs] = {
        Id::GuestCsAccessRightsV8086, Id::GuestSsAccessRightsV8086,
        Id::GuestDsAccessRightsV8086, Id::GuestEsAccessRightsV8086,
        Id::GuestFsAccessRightsV8086, Id::GuestGsAccessRightsV8086};
    for (unsigned I = 0; I < NumDataSegs; ++I)
      if (Ar[I] != 0xf3)
        return kAr[I];
  } else {
    // Bits 3:0 (Type).
    unsigned CsType = type(Cs);
    VMX_REQUIRE(CsType == 9 || CsType == 11 || CsType == 13 || CsType == 15 ||
                    (Ug && CsType == 3),
                GuestCsType);
    VMX_REQUIRE(!checked(Ss) || type(Ss) == 3 || type(Ss) == 7, GuestSsType);
    constexpr Id kType[NumDataSegs] = {Id::None,        Id::None,        Id::GuestDsType,
                                       Id::GuestEsType, Id::GuestFsType, Id::GuestGsType};
    for (unsigned I = Ds; I < NumDataSegs; ++I)
      if (checked(I) && (!(type(I) & 1) || ((type(I) & 8) && !(type(I) & 2))))
        return kType[I];
    // Bit 4 (S): "If the register is CS or if the register is usable, S must be 1."
    constexpr Id kS[NumDataSegs] = {Id::GuestCsS, Id::GuestSsS, Id::GuestDsS,
                                    Id::GuestEsS, Id::GuestFsS, Id::GuestGsS};
    for (unsigned I = 0; I < NumDataSegs; ++I)
      if (checked(I) && !(Ar[I] & kArS))
        return kS[I];
    // Bits 6:5 (DPL).
    VMX_REQUIRE(CsType != 3 || dpl(Cs) == 0, GuestCsDplType3);
    VMX_REQUIRE((CsType != 9 && CsType != 11) || dpl(Cs) == dpl(Ss), GuestCsDplNonConforming);
    VMX_REQUIRE((CsType != 13 && CsType != 15) || dpl(Cs) <= dpl(Ss), GuestCsDplConforming);
    VMX_REQUIRE(Ug || dpl(Ss) == rpl(Ss), GuestSsDplRpl);
    VMX_REQUIRE((CsType != 3 && (get(F::GuestCr0) & cr0::PE)) || dpl(Ss) == 0, GuestSsDplZero);
    constexpr Id kDpl[NumDataSegs] = {Id::None,       Id::None,       Id::GuestDsDpl,
                                      Id::GuestEsDpl, Id::GuestFsDpl, Id::GuestGsDpl};
    for (unsigned I = Ds; I < NumDataSegs; ++I)
      if (!Ug && checked(I) && type(I) <= 11 && dpl(I) < rpl(I))
        return kDpl[I];
    // Bit 7 (P).
    constexpr Id kP[NumDataSegs] = {Id::GuestCsP, Id::GuestSsP, Id::GuestDsP,
                                    Id::GuestEsP, Id::GuestFsP, Id::GuestGsP};
    for (unsigned I = 0; I < NumDataSegs; ++I)
      if (checked(I) && !(Ar[I] & kArP))
        return kP[I];
    // Bits 11:8 (reserved).
    constexpr Id kLow[NumDataSegs] = {Id::GuestCsReservedLow, Id::GuestSsReservedLow,
                                      Id::GuestDsReservedLow, Id::GuestEsReservedLow,
                                      Id::GuestFsReservedLow, Id::GuestGsReservedLow};
    for (unsigned I = 0; I < NumDataSegs; ++I)
      if (checked(I) && (Ar[I] & kArReservedLow))
        return kLow[I];
    // Bit 14 (D/B).
    VMX_REQUIRE(!(Guest64 && (Ar[Cs] & kArL)) || !(Ar[Cs] & kArDb), GuestCsDb);
    // Bit 15 (G).
    constexpr Id kG[NumDataSegs] = {Id::GuestCsG, Id::GuestSsG, Id::GuestDsG,
                                    Id::GuestEsG, Id::GuestFsG, Id::GuestGsG};
    for (unsigned I = 0; I < NumDataSegs; ++I)
      if (checked(I) && !granularityOk(get(kSegs[I].Limit), Ar[I]))
        return kG[I];
    // Bits 31:17 (reserved).
    constexpr Id kHigh[NumDataSegs] = {Id::GuestCsReservedHigh, Id::GuestSsReservedHigh,
                                       Id::GuestDsReservedHigh, Id::GuestEsReservedHigh,
                                       Id::GuestFsReservedHigh, Id::GuestGsReservedHigh};
    for (unsigned I = 0; I < NumDataSegs; ++I)
      if (checked(I) && (Ar[I] & kArReservedHigh))
        return kHigh[I];
  }

  // TR.
  uint32_t Tr = uint32_t(get(kTr.Ar));
  unsigned TrType = Tr & kArType;
  VMX_REQUIRE(Guest64 ? TrType == 11 : (TrType == 3 || TrType == 11), GuestTrType);
  VMX_REQUIRE(!(Tr & kArS), GuestTrS);
  VMX_REQUIRE(Tr & kArP, GuestTrP);
  VMX_REQUIRE(!(Tr & kArReservedLow), GuestTrReservedLow);
  VMX_REQUIRE(granularityOk(get(kTr.Limit), Tr), GuestTrG);
  VMX_REQUIRE(!(Tr & kArUnusable), GuestTrUnusable);
  VMX_REQUIRE(!(Tr & kArReservedHigh), GuestTrReservedHigh);

  // LDTR: "The following checks on the different sub-fields apply only if LDTR is
  // usable."
  uint32_t Ldtr = uint32_t(get(kLdtr.Ar));
  if (!(Ldtr & kArUnusable)) {
    VMX_REQUIRE((Ldtr & kArType) == 2, GuestLdtrType);
    VMX_REQUIRE(!(Ldtr & kArS), GuestLdtrS);
    VMX_REQUIRE(Ldtr & kArP, GuestLdtrP);
    VMX_REQUIRE(!(Ldtr & kArReservedLow), GuestLdtrReservedLow);
    VMX_REQUIRE(granularityOk(get(kLdtr.Limit), Ldtr), GuestLdtrG);
    VMX_REQUIRE(!(Ldtr & kArReservedHigh), GuestLdtrReservedHigh);
  }
  return Id::None;
}

// SDM Vol. 3C, Checks on Guest Descriptor-Table Registers.
Id Checker::guestDescriptorTables() const {
  VMX_REQUIRE(canonical(get(F::GuestGdtrBase)), GuestGdtrBaseCanonical);
  VMX_REQUIRE(canonical(get(F::GuestIdtrBase)), GuestIdtrBaseCanonical);
  VMX_REQUIRE((get(F::GuestGdtrLimit) >> 16) == 0, GuestGdtrLimit);
  VMX_REQUIRE((get(F::GuestIdtrLimit) >> 16) == 0, GuestIdtrLimit);
  return Id::None;
}

// SDM Vol. 3C, Checks on Guest RIP, RFLAGS, and SSP.
Id Checker::guestRipRflags() const {
  uint64_t Rip = get(F::GuestRip), Rflags = get(F::GuestRflags);
  if (!Guest64 || !(get(F::GuestCsAccessRights) & kArL))
    VMX_REQUIRE((Rip >> 32) == 0, GuestRipHigh);
  else
    VMX_REQUIRE(canonical(Rip), GuestRipCanonical);
  VMX_REQUIRE(!(Rflags & kRflagsReserved0) && (Rflags & rflags::Fixed1), GuestRflagsReserved);
  if (Guest64 || !(get(F::GuestCr0) & cr0::PE))
    VMX_REQUIRE(!(Rflags & rflags::VM), GuestRflagsVm);
  uint32_t Info = uint32_t(get(F::VmEntryInterruptionInformation));
  if ((Info & Valid) && type(Info) == ExternalInterrupt)
    VMX_REQUIRE(Rflags & rflags::IF, GuestRflagsIf);
  return Id::None;
}

// SDM Vol. 3C, Checks on Guest Non-Register State: activity state, interruptibility
// state, pending debug exceptions, then the VMCS link pointer.
Id Checker::guestNonRegisterState() const {
  uint64_t Activity = get(F::GuestActivityState);
  uint64_t Intr = get(F::GuestInterruptibilityState);
  uint64_t Rflags = get(F::GuestRflags);
  uint32_t Info = uint32_t(get(F::VmEntryInterruptionInformation));
  const bool Injecting = Info & Valid;
  const unsigned Type = type(Info), Vector = vector(Info);
  constexpr uint64_t Sti = interruptibility::BlockingBySti,
                     MovSs = interruptibility::BlockingByMovSs;

  // Activity state: IA32_VMX_MISC[6 + state - 1] reports HLT, shutdown, wait-for-SIPI.
  VMX_REQUIRE(Activity == 0 ||
                  (Activity <= 3 && ((capability(msr::IA32_VMX_MISC) >> (5 + Activity)) & 1)),
              GuestActivityState);
  VMX_REQUIRE(Activity != uint64_t(ActivityState::Hlt) ||
                  ((get(F::GuestSsAccessRights) >> 5) & 3) == 0,
              GuestActivityHltDpl);
  VMX_REQUIRE(Activity == 0 || !(Intr & (Sti | MovSs)), GuestActivityBlocking);
  if (Injecting) {
    if (Activity == uint64_t(ActivityState::Hlt))
      VMX_REQUIRE(Type == ExternalInterrupt || Type == Nmi ||
                      (Type == HardwareException && (Vector == 1 || Vector == 18)) ||
                      (Type == OtherEvent && Vector == 0),
                  GuestActivityHltEvent);
    if (Activity == uint64_t(ActivityState::Shutdown))
      VMX_REQUIRE(Type == Nmi || (Type == HardwareException && Vector == 18),
                  GuestActivityShutdownEvent);
    VMX_REQUIRE(Activity != uint64_t(ActivityState::WaitForSipi), GuestActivityWaitForSipiEvent);
  }

  // Interruptibility state.
  VMX_REQUIRE(!(Intr & ~uint64_t(0x1f)), GuestInterruptibilityReserved);
  VMX_REQUIRE((Intr & (Sti | MovSs)) != (Sti | MovSs), GuestInterruptibilityStiAndMovSs);
  VMX_REQUIRE(!(Intr & Sti) || (Rflags & rflags::IF), GuestInterruptibilityStiWithoutIf);
  if (Injecting && Type == ExternalInterrupt)
    VMX_REQUIRE(!(Intr & (Sti | MovSs)), GuestInterruptibilityExternalInterrupt);
  if (Injecting && Type == Nmi)
    VMX_REQUIRE(!(Intr & MovSs), GuestInterruptibilityNmiMovSs);
  // vmxsim is never in SMM, so blocking by SMI must be 0 ("entry to SMM" is never
  // allowed, so its rule that bit 2 be 1 cannot apply).
  VMX_REQUIRE(!(Intr & interruptibility::BlockingBySmi), GuestInterruptibilitySmi);
  // "A processor may require bit 0 (blocking by STI) to be 0 if ... NMI": vmxsim does, as
  // the processors whose failures report exit qualification 3.
  if (Injecting && Type == Nmi)
    VMX_REQUIRE(!(Intr & Sti), GuestInterruptibilityNmiSti);
  if (on(Ctl::VirtualNmis) && Injecting && Type == Nmi)
    VMX_REQUIRE(!(Intr & interruptibility::BlockingByNmi), GuestInterruptibilityVirtualNmi);
  // Bit 4 (enclave interruption) needs SGX, which vmxsim does not model.
  VMX_REQUIRE(!(Intr & (1u << 4)), GuestInterruptibilityEnclave);

  // Pending debug exceptions.
  uint64_t Pending = get(F::GuestPendingDebugExceptions);
  VMX_REQUIRE(!(Pending & kPendingDebugReserved), GuestPendingDebugReserved);
  if ((Intr & (Sti | MovSs)) || Activity == uint64_t(ActivityState::Hlt)) {
    bool Tf = Rflags & rflags::TF, Btf = get(F::GuestIa32Debugctl) & kDebugctlBtf;
    if (Tf && !Btf)
      VMX_REQUIRE(Pending & kPendingDebugBs, GuestPendingDebugBsSet);
    else
      VMX_REQUIRE(!(Pending & kPendingDebugBs), GuestPendingDebugBsClear);
  }
  // RTM (bit 16) needs RTM support (CPUID.(EAX=07H,ECX=0):EBX[11]), which vmxsim does not
  // model; its other conditions cannot be reached.
  VMX_REQUIRE(!(Pending & kPendingDebugRtm), GuestPendingDebugRtm);

  // VMCS link pointer ("the following checks apply if the field contains a value other
  // than FFFFFFFF_FFFFFFFFH").
  uint64_t Link = get(F::VmcsLinkPointer);
  if (Link != ~uint64_t(0)) {
    VMX_REQUIRE(!(Link & 0xfff), GuestLinkPointerAlignment);
    VMX_REQUIRE(!beyondPhys(Link), GuestLinkPointerWidth);
    uint64_t Header = readPhys(Link + vmcs_layout::RevisionOffset, 4);
    VMX_REQUIRE((Header & 0x7fffffff) == kVmcsRevisionId, GuestLinkPointerRevision);
    VMX_REQUIRE(bool(Header & 0x80000000u) == on(Ctl::VmcsShadowing), GuestLinkPointerShadow);
    uint64_t Current = C.Vmx ? C.Vmx->CurrentVmcsPointer : kInvalidVmcsPointer;
    VMX_REQUIRE(Link != Current, GuestLinkPointerCurrentVmcs);
  }
  return Id::None;
}

/// A PDPTE passes the MOV-to-CR3 checks of PAE paging: if present, reserved bits 2:1,
/// 8:5 and those from the physical-address width up are 0 (SDM Vol. 3A, "PDPTE
/// Registers").
bool pdpteOk(uint64_t E, unsigned PhysBits) {
  if (!(E & 1))
    return true;
  return !(E & 0x1e6) && (PhysBits >= 64 || !(E >> PhysBits));
}

// SDM Vol. 3C, Checks on Guest Page-Directory-Pointer-Table Entries. Without EPT, VM
// entry "may check their validity even if" PAE paging was in use with the same CR3
// before; vmxsim always checks.
Id Checker::guestPdptes() const {
  uint64_t Cr0 = get(F::GuestCr0), Cr4 = get(F::GuestCr4);
  if (!(Cr0 & cr0::PG) || !(Cr4 & cr4::PAE) || Guest64)
    return Id::None;
  if (!on(Ctl::EnableEpt)) {
    uint64_t Table = get(F::GuestCr3) & 0xffffffe0u;
    for (unsigned I = 0; I < 4; ++I)
      VMX_REQUIRE(pdpteOk(readPhys(Table + 8 * I, 8), PhysBits), GuestPdpteFromCr3);
    return Id::None;
  }
  for (F Field : {F::GuestPdpte0, F::GuestPdpte1, F::GuestPdpte2, F::GuestPdpte3})
    VMX_REQUIRE(pdpteOk(get(Field), PhysBits), GuestPdpteFields);
  return Id::None;
}

Id Checker::runGroup(unsigned G) const {
  // In the order of the VmEntryCheckGroup rows of vm_entry_checks.def.
  using Fn = Id (Checker::*)() const;
  static constexpr Fn kGroupChecks[] = {
      &Checker::executionControls, &Checker::exitControls,        &Checker::entryControls,
      &Checker::hostRegisters,     &Checker::hostSegments,        &Checker::addressSpaceSize,
      &Checker::guestRegisters,    &Checker::guestSegments,       &Checker::guestDescriptorTables,
      &Checker::guestRipRflags,    &Checker::guestNonRegisterState, &Checker::guestPdptes};
  static_assert(std::size(kGroupChecks) == kNumVmEntryCheckGroups);
  static_assert(unsigned(VmEntryCheckGroup::ExecutionControls) == 0 &&
                unsigned(VmEntryCheckGroup::AddressSpaceSize) == 5 &&
                unsigned(VmEntryCheckGroup::GuestPdptes) == 11);
  std::copy(std::begin(ControlWordFields), std::end(ControlWordFields), std::begin(Read));
  NumMemoryReads = 0;
  Unmemoisable = false;
  return (this->*kGroupChecks[G])();
}

VmEntryCheckMemo::Env Checker::env() const {
  VmEntryCheckMemo::Env E;
  E.Profile = &P;
  E.Features = P.Features;
  E.PreemptionTimerRate = P.PreemptionTimerRate;
  E.Cr3TargetCount = P.Cr3TargetCount;
  E.MaxMsrListEntries = P.MaxMsrListEntries;
  E.VmwriteAnyField = P.VmwriteAnyField;
  E.EptAccessedDirty = P.EptAccessedDirty;
  E.EptExecuteOnly = P.EptExecuteOnly;
  E.Ept1GPages = P.Ept1GPages;
  E.Ept5Level = P.Ept5Level;
  E.Model = &C.Model;
  E.Cr4Fixed1 = Cr4Fixed1;
  E.PhysBits = uint8_t(PhysBits);
  E.LinearBits = uint8_t(LinearBits);
  E.Nx = C.Model.Nx;
  E.HostLma = C.S.Efer & efer::LMA;
  E.CurrentVmcsPointer = C.Vmx ? C.Vmx->CurrentVmcsPointer : kInvalidVmcsPointer;
  return E;
}

bool Checker::memoryUnchanged(const VmEntryCheckMemo::Group &G) const {
  for (unsigned K = 0; K < G.NumMemoryInputs; ++K) {
    const VmEntryCheckMemo::MemoryInput &In = G.Memory[K];
    // RAM reads have no side effects; a region that became MMIO is not re-read.
    if (C.Mem.mmioAt(In.Addr) || C.Mem.read(Hpa(In.Addr), In.SizeBytes) != In.Value)
      return false;
  }
  return true;
}

// Why skipping a memoised group gives exactly the result of running it (the VM-entry
// fast path of issue 17). The SDM's checks (SDM Vol. 3C, "VM Entries" > "Checks on VMX
// Controls and Host-State Area" and "Checks on the Guest State Area") are a function of
// the VMCS data, the capability MSRs, the processor's IA32_EFER.LMA, CR4 and address
// widths, the current-VMCS pointer and a few bytes of memory; they change nothing. Each
// group here is deterministic code that reads those inputs only through get() (VMCS
// fields), readPhys() (memory) and the values Env collects (everything else: the
// profile behind capability() and controlCaps(), the model's widths and CR4 bits,
// IA32_EFER.LMA, the current-VMCS pointer). If every field and memory location the group
// read when it last passed holds the same value now, and Env is unchanged, a run now
// would take the same branches, read the same inputs in the same order (by induction
// over its reads: each read returns what it returned then, so the next read is the same
// one) and pass again.
//
// Fields: every store into the VMCS data marks the field in V.Written (VmcsData::set
// and store, used by VMWRITE, VM exits and every other writer; VMPTRLD and copies mark
// all). This function consumes the marks: a group whose fields meet them (found through
// GroupsReading, which lists for each field the groups that read it when they last
// passed) is dropped before anything runs, whether or not this entry gets as far as the
// group. So a group still valid has had none of its fields written since it passed.
// Memory is compared by value; Env is compared whole, and a different VmcsData object
// starts over.
//
// A group is memoised only after it passed, so skipping it can neither hide a failure
// nor report one; the groups still run in the SDM order of vm_entry_checks.def, and the
// first failing one decides the result as in run().
namespace {
/// Calls Fn(I) for every field index I whose bit is set in Mask.
template <typename Fn> void forEachField(const uint64_t (&Mask)[VmEntryCheckMemo::kMaskWords], Fn F) {
  for (unsigned W = 0; W < VmEntryCheckMemo::kMaskWords; ++W)
    for (uint64_t B = Mask[W]; B; B &= B - 1)
      F(W * 64 + unsigned(__builtin_ctzll(B)));
}
/// Drops group GI from the memo. Its fields stay in GroupsReading (and in its Fields):
/// bits of groups not in Valid are ignored, and the next time the group passes only
/// the difference is applied (remember), which is nothing when it read the same fields.
void forget(VmEntryCheckMemo &M, unsigned GI) { M.Valid &= ~(uint32_t(1) << GI); }
/// Makes Groups[GI].Fields the fields in Read, keeping GroupsReading in step with it.
void remember(VmEntryCheckMemo &M, unsigned GI,
              const uint64_t (&Read)[VmEntryCheckMemo::kMaskWords]) {
  const uint16_t Bit = uint16_t(1u << GI);
  uint64_t(&Fields)[VmEntryCheckMemo::kMaskWords] = M.Groups[GI].Fields;
  // The usual case: the group read the same fields as when it last passed.
  if (std::memcmp(Fields, Read, sizeof(Fields)) == 0)
    return;
  for (unsigned W = 0; W < VmEntryCheckMemo::kMaskWords; ++W) {
    for (uint64_t B = Fields[W] & ~Read[W]; B; B &= B - 1)
      M.GroupsReading[W * 64 + unsigned(__builtin_ctzll(B))] &= uint16_t(~Bit);
    for (uint64_t B = Read[W] & ~Fields[W]; B; B &= B - 1)
      M.GroupsReading[W * 64 + unsigned(__builtin_ctzll(B))] |= Bit;
    Fields[W] = Read[W];
  }
}
} // namespace

Id Checker::runMemo(VmEntryCheckMemo &M, VmcsData &Data) const {
  const VmEntryCheckMemo::Env E = env();
  if (M.Tracked != &Data || !(M.Key == E)) {
    M.Valid = 0;
    std::fill(std::begin(M.GroupsReading), std::end(M.GroupsReading), 0);
    for (VmEntryCheckMemo::Group &G : M.Groups)
      std::fill(std::begin(G.Fields), std::end(G.Fields), 0);
    M.Key = E;
    M.Tracked = &Data;
  }
  // Consume the change marks: every memoised group that read a written field goes.
  uint32_t Stale = 0;
  forEachField(Data.Written, [&](unsigned I) { Stale |= M.GroupsReading[I]; });
  for (uint64_t &W : Data.Written)
    W = 0;
  M.Valid &= ~Stale;
  // The groups to look at, in SDM order: those not memoised, and memoised ones whose
  // memory must be read again; the rest are skipped.
  constexpr uint32_t kAll = (uint64_t(1) << kNumVmEntryCheckGroups) - 1;
  M.GroupsSkipped += kNumVmEntryCheckGroups;
  for (uint32_t Todo = (~M.Valid | M.ReadsMemory) & kAll; Todo; Todo &= Todo - 1) {
    const unsigned GI = unsigned(__builtin_ctz(Todo));
    const uint32_t Bit = 1u << GI;
    VmEntryCheckMemo::Group &G = M.Groups[GI];
    if ((M.Valid & Bit) && memoryUnchanged(G))
      continue;
    forget(M, GI);
    --M.GroupsSkipped;
    ++M.GroupsRun;
    VMX_TRY_CHECKS(runGroup(GI));
    if (Unmemoisable)
      continue;
    remember(M, GI, Read);
    G.NumMemoryInputs = NumMemoryReads;
    std::copy(MemoryRead, MemoryRead + NumMemoryReads, G.Memory);
    M.Valid |= Bit;
    M.ReadsMemory = NumMemoryReads ? M.ReadsMemory | Bit : M.ReadsMemory & ~Bit;
  }
  return Id::None;
}

#undef VMX_REQUIRE
#undef VMX_TRY_CHECKS

} // namespace

const VmEntryCheckInfo &vmEntryCheckInfo(VmEntryCheckId CheckId) {
  return kChecks[unsigned(CheckId)];
}

VmEntryCheckId checkEptp(uint64_t Eptp, uint64_t EptVpidCap, unsigned PhysBits) {
  // The "enable EPT" bullets of SDM Vol. 3C, "VM-Execution Control Fields" (checks on
  // VMX controls); VMFUNC EPTP switching applies the same rule to an EPTP-list entry.
  uint64_t Type = Eptp & 7, WalkMinus1 = (Eptp >> 3) & 7;
  if (!((Type == 0 && (EptVpidCap & kEptCapUc)) || (Type == 6 && (EptVpidCap & kEptCapWb))))
    return Id::EptpMemoryType;
  if (!((WalkMinus1 == 3 && (EptVpidCap & kEptCapWalk4)) ||
        (WalkMinus1 == 4 && (EptVpidCap & kEptCapWalk5))))
    return Id::EptpWalkLength;
  if ((Eptp & (1u << 6)) && !(EptVpidCap & kEptCapAccessedDirty))
    return Id::EptpAccessedDirty;
  if ((Eptp & 0xf80) || (PhysBits < 64 && (Eptp >> PhysBits) != 0))
    return Id::EptpReserved;
  return Id::None;
}

namespace {
VmEntryCheckResult resultOf(Id Failed) {
  VmEntryCheckResult R;
  if (Failed == Id::None)
    return R;
  const VmEntryCheckInfo &I = vmEntryCheckInfo(Failed);
  R.Kind = I.Kind;
  R.CheckId = Failed;
  if (I.Kind == VmEntryCheckKind::VmFailValid) {
    R.ErrorNumber = I.Number;
  } else {
    R.ExitReason = I.Number;
    R.Qualification = I.Qualification;
  }
  return R;
}

} // namespace

VmEntryCheckResult checkVmEntry(const Cpu &C, const VmcsData &V, const VmxProfile &P,
                                bool /*IsLaunch*/) {
  return resultOf(Checker(C, V, P).run());
}

VmEntryCheckResult checkVmEntryMemo(const Cpu &C, VmcsData &V, const VmxProfile &P,
                                    VmEntryCheckMemo &Memo) {
  return resultOf(Checker(C, V, P).runMemo(Memo, V));
}

} // namespace vmxsim
