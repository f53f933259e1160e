// SDM Vol. 3C, "APIC Virtualization and Virtual Interrupts": the virtual-APIC page and TPR
// virtualization, memory-mapped APIC accesses through the APIC-access page (which reads
// and writes are virtualized, which cause APIC-access VM exits and with which exit
// qualification, APIC-write emulation and APIC-write VM exits), guest-physical accesses
// to the APIC-access page under EPT, and MSR-based APIC accesses with "virtualize x2APIC
// mode". Every test asserts the exact exit information and virtual-APIC page contents.
//
// The guest runs the known-good VMCS (tests/support/known_good_vmcs.h) in 64-bit mode
// with the test machine's identity paging, so guest-linear = physical addresses.
#include "tests/support/ept_builder.h"
#include "tests/support/vmx_test_machine.h"

#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/exit_qualification.h"
#include "cpu/vmx/vm_exit.h"

#include <gtest/gtest.h>

#include <vector>

namespace vmxsim::test {
namespace {

using F = VmcsField;
using Bytes = std::vector<uint8_t>;
using exitqual::ApicAccessType;

constexpr uint64_t kMsrBitmap = 0x310000;
constexpr uint64_t kVirtualApic = 0x313000;
constexpr uint64_t kApicAccess = 0x314000;
constexpr uint64_t kHandler = 0x150000;

/// The full profile with the APIC-virtualization features under test (the same once
/// the profile advertises them).
const VmxProfile &apicvProfile() {
  static const VmxProfile P = [] {
    VmxProfile Q = eptTestProfile();
    for (VmxFeature Feat : {VmxFeature::VirtualizeApicAccesses, VmxFeature::VirtualizeX2apic,
                            VmxFeature::ApicRegisterVirtualization,
                            VmxFeature::VirtualInterruptDelivery, VmxFeature::PostedInterrupts})
      Q.Features |= uint64_t(1) << unsigned(Feat);
    return Q;
  }();
  return P;
}

/// One interrupt line with a vector; counts acknowledgments and EOIs.
class TestInterruptSource : public InterruptSource {
public:
  bool intrPending() override { return Pending; }
  uint8_t acknowledge() override {
    Pending = false;
    ++Acks;
    return Vector;
  }
  void endOfInterrupt() override { ++Eois; }
  bool Pending = false;
  uint8_t Vector = 0;
  unsigned Acks = 0, Eois = 0;
};

class ApicvMachine : public VmxTestMachine {
public:
  ApicvMachine() : VmxTestMachine(apicvProfile()) {
    Cpu_.Intr = &Intr;
    const uint8_t Hlt = 0xf4;
    write(kHostCode, &Hlt, 1);
    write(kHandler, &Hlt, 1);
    const std::vector<uint8_t> Zero(4096, 0);
    write(kVirtualApic, Zero.data(), Zero.size());
    write(kMsrBitmap, Zero.data(), Zero.size());
    vmcs().set(F::VirtualApicAddress, kVirtualApic);
    vmcs().set(F::ApicAccessAddress, kApicAccess);
    vmcs().set(F::MsrBitmapsAddress, kMsrBitmap);
    vmcs().set(F::TprThreshold, 0);
  }
  void enable(VmxControl Ctl) {
    auto Or = [&](F Field, uint32_t Bit) { vmcs().set(Field, vmcs().get(Field) | Bit); };
    switch (controlInfo(Ctl).Word) {
    case VmxControlWord::Pin:
      Or(F::PinBasedVmExecutionControls, controlBit(Ctl));
      break;
    case VmxControlWord::Proc:
      Or(F::PrimaryProcessorBasedVmExecutionControls, controlBit(Ctl));
      break;
    case VmxControlWord::Proc2:
      Or(F::PrimaryProcessorBasedVmExecutionControls,
         controlBit(VmxControl::ActivateSecondaryControls));
      Or(F::SecondaryProcessorBasedVmExecutionControls, controlBit(Ctl));
      break;
    default:
      FAIL() << "control word not used by these tests";
    }
  }
  /// "Use TPR shadow" and "virtualize APIC accesses".
  void flexPriority() {
    enable(VmxControl::UseTprShadow);
    enable(VmxControl::VirtualizeApicAccesses);
  }
  uint32_t vapic(uint32_t Offset) { return uint32_t(Mem.read(Hpa(kVirtualApic + Offset), 4)); }
  void setVapic(uint32_t Offset, uint32_t V) { write(kVirtualApic + Offset, &V, 4); }
  StepResult launch(const Bytes &Guest, uint64_t MaxInsns = 20) {
    write(kGuestCode, Guest.data(), Guest.size());
    return exec(enc::Vmlaunch, MaxInsns);
  }
  uint64_t get(F Field) { return vmcs().get(Field); }
  /// The host ran the exit: in root operation at its HLT.
  bool exitedToHost() { return !Cpu_.NonRoot && S.Rip == kHostCode + 1; }
  bool guestHaltedAt(uint64_t Rip) { return Cpu_.NonRoot && S.Rip == Rip; }

  /// Virtual-interrupt delivery with what it requires: TPR shadow, external-interrupt
  /// exiting; RFLAGS.IF = 1 and a guest IDT whose gates all lead to kHandler (HLT).
  void virtualInterruptDelivery() {
    enable(VmxControl::UseTprShadow);
    enable(VmxControl::ExternalInterruptExiting);
    enable(VmxControl::VirtualInterruptDelivery);
    vmcs().set(F::GuestRflags, 0x202);
    vmcs().set(F::GuestIdtrLimit, 0xfff);
    const uint64_t Lo = (kHandler & 0xffff) | (uint64_t(kSelCode64) << 16) |
                        (uint64_t(0x8e) << 40) | (((kHandler >> 16) & 0xffff) << 48);
    const uint64_t Hi = 0;
    for (unsigned V = 0; V < 256; ++V) {
      write(kIdtBase + 16 * V, &Lo, 8);
      write(kIdtBase + 16 * V + 8, &Hi, 8);
    }
  }
  void setBit(uint32_t Base, uint8_t Vector) {
    const uint64_t A = kVirtualApic + Base + ((Vector & 0xe0u) >> 1);
    const uint32_t W = uint32_t(Mem.read(Hpa(A), 4)) | (1u << (Vector & 31));
    write(A, &W, 4);
  }
  bool bit(uint32_t Base, uint8_t Vector) {
    return (Mem.read(Hpa(kVirtualApic + Base + ((Vector & 0xe0u) >> 1)), 4) >> (Vector & 31)) &
           1;
  }
  /// RVI (7:0) and SVI (15:8).
  void interruptStatus(uint8_t Rvi, uint8_t Svi) {
    vmcs().set(F::GuestInterruptStatus, Rvi | (uint32_t(Svi) << 8));
  }
  /// The guest took an interrupt: it halted in kHandler with the interrupted RIP on top
  /// of its stack.
  bool inHandler() { return Cpu_.NonRoot && S.Rip == kHandler + 1; }
  uint64_t stackedRip() { return Mem.read(Hpa(S.Gpr[RSP]), 8); }

  TestInterruptSource Intr;
};

uint64_t apicAccessQual(uint32_t Offset, ApicAccessType Type) {
  return Offset | (uint64_t(Type) << 12);
}

/// mov eax, [disp32] / mov [disp32], eax and friends, absolute (SIB, no base).
Bytes loadEax(uint32_t Addr) {
  return {0x8b, 0x04, 0x25, uint8_t(Addr), uint8_t(Addr >> 8), uint8_t(Addr >> 16),
          uint8_t(Addr >> 24)};
}
Bytes storeImm32(uint32_t Addr, uint32_t V) {
  return {0xc7, 0x04, 0x25, uint8_t(Addr), uint8_t(Addr >> 8), uint8_t(Addr >> 16),
          uint8_t(Addr >> 24), uint8_t(V), uint8_t(V >> 8), uint8_t(V >> 16), uint8_t(V >> 24)};
}
Bytes operator+(Bytes A, const Bytes &B) {
  A.insert(A.end(), B.begin(), B.end());
  return A;
}
const Bytes kHlt{0xf4};

// --- Virtualizing reads and writes of VTPR (SDM Vol. 3C, "Virtualizing Reads from the
// APIC-Access Page", "Virtualizing Writes to the APIC-Access Page", "TPR
// Virtualization") ---------------------------------------------------------------------

TEST(ApicVirtualization, ReadOfTprOffsetReturnsVtpr) {
  ApicvMachine M;
  M.flexPriority();
  M.setVapic(0x80, 0x5c);
  StepResult R = M.launch(loadEax(kApicAccess + 0x80) + kHlt);
  EXPECT_FALSE(R.Faulted);
  EXPECT_TRUE(M.guestHaltedAt(kGuestCode + 8));
  EXPECT_EQ(uint32_t(M.S.Gpr[RAX]), 0x5cu);
}

TEST(ApicVirtualization, OneByteReadOfTprOffsetIsVirtualized) {
  ApicvMachine M;
  M.flexPriority();
  M.setVapic(0x80, 0x1234a0);
  // movzx eax, byte [disp32]
  StepResult R = M.launch(Bytes{0x0f, 0xb6, 0x04, 0x25, 0x80, 0x40, 0x31, 0x00} + kHlt);
  EXPECT_FALSE(R.Faulted);
  EXPECT_TRUE(M.guestHaltedAt(kGuestCode + 9));
  EXPECT_EQ(uint32_t(M.S.Gpr[RAX]), 0xa0u);
}

TEST(ApicVirtualization, WriteOfTprOffsetStoresVtprAndClearsBytes81To83) {
  ApicvMachine M;
  M.flexPriority();
  M.setVapic(0x84, 0x77);
  StepResult R = M.launch(storeImm32(kApicAccess + 0x80, 0x12345660) + kHlt);
  EXPECT_FALSE(R.Faulted);
  EXPECT_TRUE(M.guestHaltedAt(kGuestCode + 12));
  EXPECT_EQ(M.vapic(0x80), 0x60u); // APIC-write emulation cleared bytes 081H-083H
  EXPECT_EQ(M.vapic(0x84), 0x77u);
  EXPECT_EQ(M.Mem.read(Hpa(kApicAccess + 0x80), 4), 0u); // the page itself untouched
}

TEST(ApicVirtualization, WriteOfTprBelowThresholdCausesTrapLikeTprBelowThresholdExit) {
  ApicvMachine M;
  M.flexPriority();
  M.vmcs().set(F::TprThreshold, 5);
  M.setVapic(0x80, 0x50);
  StepResult R = M.launch(storeImm32(kApicAccess + 0x80, 0x40) + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::TprBelowThreshold));
  EXPECT_EQ(M.get(F::ExitQualification), 0u);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 0u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 11); // trap-like: after the store
  EXPECT_EQ(M.vapic(0x80), 0x40u);
}

TEST(ApicVirtualization, WriteOfTprAtThresholdDoesNotExit) {
  ApicvMachine M;
  M.flexPriority();
  M.vmcs().set(F::TprThreshold, 4);
  StepResult R = M.launch(storeImm32(kApicAccess + 0x80, 0x40) + kHlt);
  EXPECT_FALSE(R.Faulted);
  EXPECT_TRUE(M.guestHaltedAt(kGuestCode + 12));
}

TEST(ApicVirtualization, MovToCr8BelowThresholdStillExitsThroughTprVirtualization) {
  ApicvMachine M;
  M.flexPriority();
  M.vmcs().set(F::TprThreshold, 4);
  M.S.Gpr[RCX] = 3;
  StepResult R = M.launch(Bytes{0x44, 0x0f, 0x22, 0xc1} + kHlt); // mov cr8, rcx
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::TprBelowThreshold));
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 4);
  EXPECT_EQ(M.vapic(0x80), 0x30u);
}

// --- APIC-access VM exits from linear accesses, table-driven over the SDM's rules ---

struct LinearCase {
  const char *What;
  bool TprShadow, RegisterVirtualization;
  Bytes Code;         ///< one instruction, then HLT
  uint32_t Offset;    ///< exit qualification bits 11:0
  ApicAccessType Type;
};

TEST(ApicVirtualization, LinearAccessesThatAreNotVirtualizedCauseApicAccessExits) {
  const uint32_t A = uint32_t(kApicAccess);
  const LinearCase Cases[] = {
      // "use TPR shadow" 0: every access exits, even to offset 080H.
      {"read TPR without TPR shadow", false, false, loadEax(A + 0x80), 0x80,
       ApicAccessType::LinearRead},
      // Without APIC-register virtualization only offset 080H is virtualized.
      {"read ID", true, false, loadEax(A + 0x20), 0x20, ApicAccessType::LinearRead},
      {"read TPR byte 1", true, false, {0x0f, 0xb6, 0x04, 0x25, 0x81, 0x40, 0x31, 0x00}, 0x81,
       ApicAccessType::LinearRead},
      {"write EOI", true, false, storeImm32(A + 0xb0, 0), 0xb0, ApicAccessType::LinearWrite},
      {"write TPR byte 2", true, false, {0xc6, 0x04, 0x25, 0x82, 0x40, 0x31, 0x00, 0x01}, 0x82,
       ApicAccessType::LinearWrite},
      // More than 32 bits.
      {"8-byte read of TPR", true, true, {0x48, 0x8b, 0x04, 0x25, 0x80, 0x40, 0x31, 0x00},
       0x80, ApicAccessType::LinearRead},
      // Not within the low 4 bytes of a 16-byte region.
      {"read at 084H", true, true, loadEax(A + 0x84), 0x84, ApicAccessType::LinearRead},
      {"read at 082H crossing 084H", true, true, loadEax(A + 0x82), 0x82,
       ApicAccessType::LinearRead},
      // With APIC-register virtualization, offsets outside the SDM's lists.
      {"read PPR", true, true, loadEax(A + 0xa0), 0xa0, ApicAccessType::LinearRead},
      {"read current count", true, true, loadEax(A + 0x390), 0x390,
       ApicAccessType::LinearRead},
      {"write version", true, true, storeImm32(A + 0x30, 1), 0x30, ApicAccessType::LinearWrite},
      {"write ISR", true, true, storeImm32(A + 0x100, 1), 0x100, ApicAccessType::LinearWrite},
      {"write IRR", true, true, storeImm32(A + 0x200, 1), 0x200, ApicAccessType::LinearWrite},
  };
  for (const LinearCase &K : Cases) {
    SCOPED_TRACE(K.What);
    ApicvMachine M;
    M.enable(VmxControl::VirtualizeApicAccesses);
    if (K.TprShadow)
      M.enable(VmxControl::UseTprShadow);
    if (K.RegisterVirtualization)
      M.enable(VmxControl::ApicRegisterVirtualization);
    StepResult R = M.launch(K.Code + kHlt);
    EXPECT_FALSE(R.Faulted);
    ASSERT_TRUE(M.exitedToHost());
    EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::ApicAccess));
    EXPECT_EQ(M.get(F::ExitQualification), apicAccessQual(K.Offset, K.Type));
    EXPECT_EQ(M.get(F::VmExitInstructionLength), K.Code.size());
    EXPECT_EQ(M.get(F::GuestRip), kGuestCode); // fault-like
    EXPECT_EQ(M.get(F::IdtVectoringInformation), 0u);
    EXPECT_EQ(M.get(F::GuestLinearAddress), 0u);
  }
}

TEST(ApicVirtualization, InstructionFetchFromApicAccessPageExits) {
  ApicvMachine M;
  M.flexPriority();
  // jmp rax, with rax = the APIC-access page + 0x10.
  M.S.Gpr[RAX] = kApicAccess + 0x10;
  StepResult R = M.launch(Bytes{0xff, 0xe0});
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::ApicAccess));
  EXPECT_EQ(M.get(F::ExitQualification), apicAccessQual(0x10, ApicAccessType::LinearFetch));
  EXPECT_EQ(M.get(F::GuestRip), kApicAccess + 0x10);
}

TEST(ApicVirtualization, AccessDuringEventDeliveryExitsWithIdtVectoringInformation) {
  // INT3 delivered through the guest IDT pushes its frame onto a stack in the
  // APIC-access page: access type 3, and the event in the IDT-vectoring fields.
  ApicvMachine M;
  M.flexPriority();
  M.vmcs().set(F::GuestIdtrLimit, 0xfff);
  const uint64_t Lo = (kHandler & 0xffff) | (uint64_t(kSelCode64) << 16) |
                      (uint64_t(0x8e) << 40) | (((kHandler >> 16) & 0xffff) << 48);
  const uint64_t Hi = 0;
  M.write(kIdtBase + 16 * 3, &Lo, 8);
  M.write(kIdtBase + 16 * 3 + 8, &Hi, 8);
  M.vmcs().set(F::GuestRsp, kApicAccess + 0x100);
  StepResult R = M.launch(Bytes{0xcc} + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::ApicAccess));
  // The first push, of SS, 8 bytes at offset 0F8H: more than 32 bits, never virtualized.
  EXPECT_EQ(M.get(F::ExitQualification),
            apicAccessQual(0xf8, ApicAccessType::LinearEventDelivery));
  EXPECT_EQ(M.get(F::IdtVectoringInformation), 0x80000603u); // valid, software exception, #BP
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 1u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
}

// --- APIC-register virtualization and APIC-write VM exits (SDM Vol. 3C, "APIC-Write
// Emulation", "APIC-Write VM Exits") ------------------------------------------------------

TEST(ApicVirtualization, RegisterVirtualizationReadsListedOffsetsFromVirtualApicPage) {
  struct Case {
    uint32_t Offset;
    uint32_t Value;
  };
  for (Case K : {Case{0x20, 0x01000000}, Case{0x30, 0x50014}, Case{0xf0, 0x1ff},
                 Case{0x170, 0x80000000}, Case{0x1f0, 5}, Case{0x270, 0x40}, Case{0x310, 7},
                 Case{0x370, 0x10000}, Case{0x3e0, 0xb}}) {
    SCOPED_TRACE(K.Offset);
    ApicvMachine M;
    M.flexPriority();
    M.enable(VmxControl::ApicRegisterVirtualization);
    M.setVapic(K.Offset, K.Value);
    StepResult R = M.launch(loadEax(uint32_t(kApicAccess) + K.Offset) + kHlt);
    EXPECT_FALSE(R.Faulted);
    EXPECT_TRUE(M.guestHaltedAt(kGuestCode + 8));
    EXPECT_EQ(uint32_t(M.S.Gpr[RAX]), K.Value);
  }
}

TEST(ApicVirtualization, VirtualizedWriteToLvtCausesTrapLikeApicWriteExit) {
  ApicvMachine M;
  M.flexPriority();
  M.enable(VmxControl::ApicRegisterVirtualization);
  StepResult R = M.launch(storeImm32(uint32_t(kApicAccess) + 0x320, 0x200ec) + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::ApicWrite));
  EXPECT_EQ(M.get(F::ExitQualification), 0x320u);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 0u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 11); // after the store
  EXPECT_EQ(M.vapic(0x320), 0x200ecu);          // the write went to the virtual-APIC page
}

TEST(ApicVirtualization, EoiAndIcrWritesWithoutVirtualInterruptDeliveryCauseApicWriteExits) {
  for (uint32_t Offset : {0xb0u, 0x300u, 0x20u, 0x3e0u}) {
    SCOPED_TRACE(Offset);
    ApicvMachine M;
    M.flexPriority();
    M.enable(VmxControl::ApicRegisterVirtualization);
    StepResult R = M.launch(storeImm32(uint32_t(kApicAccess) + Offset, 0x4041) + kHlt);
    EXPECT_FALSE(R.Faulted);
    ASSERT_TRUE(M.exitedToHost());
    EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::ApicWrite));
    EXPECT_EQ(M.get(F::ExitQualification), Offset);
    EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 11);
    EXPECT_EQ(M.vapic(Offset), 0x4041u);
  }
}

TEST(ApicVirtualization, WriteOfIcrHighClearsBytes2To0AndDoesNotExit) {
  ApicvMachine M;
  M.flexPriority();
  M.enable(VmxControl::ApicRegisterVirtualization);
  StepResult R = M.launch(storeImm32(uint32_t(kApicAccess) + 0x310, 0x03123456) + kHlt);
  EXPECT_FALSE(R.Faulted);
  EXPECT_TRUE(M.guestHaltedAt(kGuestCode + 12));
  EXPECT_EQ(M.vapic(0x310), 0x03000000u); // the destination byte stays
}

TEST(ApicVirtualization, RegisterVirtualizationWriteOfTprDoesNotCauseApicWriteExit) {
  ApicvMachine M;
  M.flexPriority();
  M.enable(VmxControl::ApicRegisterVirtualization);
  StepResult R = M.launch(storeImm32(uint32_t(kApicAccess) + 0x80, 0xff20) + kHlt);
  EXPECT_FALSE(R.Faulted);
  EXPECT_TRUE(M.guestHaltedAt(kGuestCode + 12));
  EXPECT_EQ(M.vapic(0x80), 0x20u);
}

// --- Guest-physical accesses (SDM Vol. 3C, "Guest-Physical Accesses to the APIC-Access
// Page") ----------------------------------------------------------------------------------

TEST(ApicVirtualization, GuestPagingStructureOnApicAccessPageCausesGuestPhysicalExit) {
  // Under EPT the guest's PML4 (guest-physical = host-physical kPml4Base) is the
  // APIC-access page: the page walk for the first fetch exits with access type 15.
  ApicvMachine M;
  EptBuilder B(M, 0x400000, 0x10000);
  B.identity2M(uint64_t(1) << 30);
  M.enable(VmxControl::EnableEpt);
  M.vmcs().set(F::EptPointer, B.eptp());
  M.flexPriority();
  M.vmcs().set(F::ApicAccessAddress, kPml4Base);
  StepResult R = M.launch(kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::ApicAccess));
  EXPECT_EQ(M.get(F::ExitQualification),
            apicAccessQual(0, ApicAccessType::GuestPhysicalInstruction));
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 0u);
}

TEST(ApicVirtualization, LinearAccessUnderEptComparesTheHostPhysicalAddress) {
  // Guest-physical kDataBase maps (EPT) to the APIC-access page: an access to it is an
  // APIC access; the guest-physical page equal to the APIC-access address is not.
  ApicvMachine M;
  EptBuilder B(M, 0x400000, 0x10000);
  B.identity4K(0, 0x400000);
  B.map4K(kDataBase, kApicAccess);
  B.map4K(kApicAccess, 0x315000);
  M.enable(VmxControl::EnableEpt);
  M.vmcs().set(F::EptPointer, B.eptp());
  M.flexPriority();
  M.setVapic(0x80, 0x90);
  const uint32_t Plain = 0x600d;
  M.write(0x315020, &Plain, 4);
  // mov ebx, [kDataBase + 0x80]; mov eax, [kApicAccess + 0x20]; hlt
  const uint32_t D = uint32_t(kDataBase) + 0x80;
  StepResult R = M.launch(Bytes{0x8b, 0x1c, 0x25, uint8_t(D), uint8_t(D >> 8), uint8_t(D >> 16),
                                uint8_t(D >> 24)} +
                          loadEax(uint32_t(kApicAccess) + 0x20) + kHlt);
  EXPECT_FALSE(R.Faulted);
  EXPECT_TRUE(M.guestHaltedAt(kGuestCode + 15));
  EXPECT_EQ(uint32_t(M.S.Gpr[RBX]), 0x90u); // virtualized: VTPR
  EXPECT_EQ(uint32_t(M.S.Gpr[RAX]), Plain); // ordinary memory
}

// --- MSR-based APIC accesses (SDM Vol. 3C, "Virtualizing MSR-Based APIC Accesses") ---

const Bytes kRdmsr{0x0f, 0x32}, kWrmsr{0x0f, 0x30};

TEST(ApicVirtualization, RdmsrOfTprReadsBytes87To80OfVirtualApicPage) {
  ApicvMachine M;
  M.enable(VmxControl::UseTprShadow);
  M.enable(VmxControl::UseMsrBitmaps);
  M.enable(VmxControl::VirtualizeX2apicMode);
  M.setVapic(0x80, 0x70);
  M.setVapic(0x84, 0xabcd);
  M.S.Gpr[RCX] = 0x808;
  StepResult R = M.launch(kRdmsr + kHlt);
  EXPECT_FALSE(R.Faulted);
  EXPECT_TRUE(M.guestHaltedAt(kGuestCode + 3));
  EXPECT_EQ(M.S.Gpr[RAX], 0x70u);
  EXPECT_EQ(M.S.Gpr[RDX], 0xabcdu);
}

TEST(ApicVirtualization, RdmsrWithRegisterVirtualizationReadsOffsetEcxTimes16) {
  for (uint32_t Msr : {0x802u, 0x830u, 0x839u, 0x8ffu}) {
    SCOPED_TRACE(Msr);
    ApicvMachine M;
    M.enable(VmxControl::UseTprShadow);
    M.enable(VmxControl::UseMsrBitmaps);
    M.enable(VmxControl::VirtualizeX2apicMode);
    M.enable(VmxControl::ApicRegisterVirtualization);
    const uint32_t Offset = (Msr & 0xff) << 4;
    M.setVapic(Offset, 0x11223344);
    M.setVapic(Offset + 4, 0x55667788);
    M.S.Gpr[RCX] = Msr;
    StepResult R = M.launch(kRdmsr + kHlt);
    EXPECT_FALSE(R.Faulted);
    EXPECT_TRUE(M.guestHaltedAt(kGuestCode + 3));
    EXPECT_EQ(M.S.Gpr[RAX], 0x11223344u);
    EXPECT_EQ(M.S.Gpr[RDX], 0x55667788u);
  }
}

TEST(ApicVirtualization, RdmsrBitmapExitTakesPriorityOverVirtualization) {
  ApicvMachine M;
  M.enable(VmxControl::UseTprShadow);
  M.enable(VmxControl::UseMsrBitmaps);
  M.enable(VmxControl::VirtualizeX2apicMode);
  const uint8_t Bit = 1u << (0x808 % 8);
  M.write(kMsrBitmap + 0x808 / 8, &Bit, 1);
  M.S.Gpr[RCX] = 0x808;
  StepResult R = M.launch(kRdmsr + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::Rdmsr));
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 2u);
}

TEST(ApicVirtualization, WrmsrOfTprWritesVtprAndPerformsTprVirtualization) {
  ApicvMachine M;
  M.enable(VmxControl::UseTprShadow);
  M.enable(VmxControl::UseMsrBitmaps);
  M.enable(VmxControl::VirtualizeX2apicMode);
  M.vmcs().set(F::TprThreshold, 3);
  M.setVapic(0x80, 0x50); // VM entry requires threshold <= VTPR[7:4] here
  M.setVapic(0x84, 0xffff);
  M.S.Gpr[RCX] = 0x808;
  M.S.Gpr[RAX] = 0x20;
  M.S.Gpr[RDX] = 0;
  StepResult R = M.launch(kWrmsr + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::TprBelowThreshold));
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 2);
  EXPECT_EQ(M.vapic(0x80), 0x20u);
  EXPECT_EQ(M.vapic(0x84), 0u); // bytes 087H:080H are EDX:EAX
}

TEST(ApicVirtualization, WrmsrOfTprWithReservedBitsIsGeneralProtection) {
  for (uint64_t Rdx : {uint64_t(0), uint64_t(1)}) {
    ApicvMachine M;
    M.enable(VmxControl::UseTprShadow);
    M.enable(VmxControl::UseMsrBitmaps);
    M.enable(VmxControl::VirtualizeX2apicMode);
    M.S.Gpr[RCX] = 0x808;
    M.S.Gpr[RAX] = Rdx ? 0x10 : 0x100;
    M.S.Gpr[RDX] = Rdx;
    M.setVapic(0x80, 0x50);
    StepResult R = M.launch(kWrmsr + kHlt);
    EXPECT_TRUE(R.Faulted);
    EXPECT_EQ(R.Vector, vec::GP);
    EXPECT_EQ(M.vapic(0x80), 0x50u);
  }
}

TEST(ApicVirtualization, X2apicMsrsAreNotVirtualizedWithoutVirtualizeX2apicMode) {
  // "Use TPR shadow" alone: RDMSR 808H operates normally (here, the bare test CPU's
  // storage for the MSR), not from the virtual-APIC page.
  ApicvMachine M;
  M.enable(VmxControl::UseTprShadow);
  M.enable(VmxControl::UseMsrBitmaps);
  M.setVapic(0x80, 0x70);
  M.S.Gpr[RCX] = 0x808;
  StepResult R = M.launch(kRdmsr + kHlt);
  (void)R;
  EXPECT_NE(M.S.Gpr[RAX], 0x70u);
}

// --- Virtual-interrupt delivery (SDM Vol. 3C, "Evaluation of Pending Virtual
// Interrupts", "Virtual-Interrupt Delivery", "PPR Virtualization", "EOI Virtualization",
// "Self-IPI Virtualization") -----------------------------------------------------------

TEST(ApicVirtualization, VmEntryEvaluatesAndDeliversThePendingVirtualInterrupt) {
  ApicvMachine M;
  M.virtualInterruptDelivery();
  M.setBit(0x200, 0x51);
  M.setBit(0x200, 0x31);
  M.interruptStatus(0x51, 0);
  StepResult R = M.launch(Bytes{0x90} + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.inHandler());
  EXPECT_EQ(M.stackedRip(), kGuestCode); // delivered before the first instruction
  EXPECT_TRUE(M.bit(0x100, 0x51));       // VISR
  EXPECT_FALSE(M.bit(0x200, 0x51));      // VIRR
  EXPECT_EQ(M.get(F::GuestInterruptStatus), 0x5131u); // SVI 51H, RVI the next: 31H
  EXPECT_EQ(M.vapic(0xa0), 0x50u);                   // VPPR = vector & F0H
}

TEST(ApicVirtualization, VirtualTprAtOrAboveRviHoldsDeliveryUntilMovToCr8LowersIt) {
  ApicvMachine M;
  M.virtualInterruptDelivery();
  M.setBit(0x200, 0x51);
  M.interruptStatus(0x51, 0);
  M.setVapic(0x80, 0x50); // VPPR 50H: RVI[7:4] = 5 is not above it
  M.S.Gpr[RAX] = 4;
  // nop; mov cr8, rax; hlt
  StepResult R = M.launch(Bytes{0x90, 0x44, 0x0f, 0x22, 0xc0} + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.inHandler());
  EXPECT_EQ(M.stackedRip(), kGuestCode + 5); // after the MOV to CR8
  EXPECT_EQ(M.vapic(0x80), 0x40u);
  EXPECT_EQ(M.get(F::GuestInterruptStatus), 0x5100u);
}

TEST(ApicVirtualization, VirtualInterruptWaitsForIfAndTheStiShadow) {
  ApicvMachine M;
  M.virtualInterruptDelivery();
  M.vmcs().set(F::GuestRflags, 0x2);
  M.setBit(0x200, 0x61);
  M.interruptStatus(0x61, 0);
  // nop; sti; nop; hlt: delivered after the instruction that follows STI.
  StepResult R = M.launch(Bytes{0x90, 0xfb, 0x90} + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.inHandler());
  EXPECT_EQ(M.stackedRip(), kGuestCode + 3);
}

TEST(ApicVirtualization, VirtualInterruptWakesAGuestEnteredInHlt) {
  ApicvMachine M;
  M.virtualInterruptDelivery();
  M.vmcs().set(F::GuestActivityState, 1);
  M.setBit(0x200, 0x61);
  M.interruptStatus(0x61, 0);
  StepResult R = M.launch(kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.inHandler());
  EXPECT_EQ(M.Cpu_.Activity, ActivityState::Hlt); // the handler's own HLT
  EXPECT_EQ(M.stackedRip(), kGuestCode);
}

TEST(ApicVirtualization, InterruptWindowExitingPreventsRecognitionOfVirtualInterrupts) {
  ApicvMachine M;
  M.virtualInterruptDelivery();
  M.enable(VmxControl::InterruptWindowExiting);
  M.setBit(0x200, 0x61);
  M.interruptStatus(0x61, 0);
  StepResult R = M.launch(kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::InterruptWindow));
  EXPECT_EQ(M.get(F::GuestInterruptStatus), 0x61u);
}

TEST(ApicVirtualization, EoiWriteVirtualizesEoiAndDeliversTheNextInterrupt) {
  ApicvMachine M;
  M.virtualInterruptDelivery();
  M.enable(VmxControl::VirtualizeApicAccesses);
  M.setBit(0x100, 0x51); // in service
  M.setBit(0x200, 0x41); // requested, below the in-service priority
  M.interruptStatus(0x41, 0x51);
  StepResult R = M.launch(storeImm32(uint32_t(kApicAccess) + 0xb0, 0) + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.inHandler());
  EXPECT_EQ(M.stackedRip(), kGuestCode + 11); // after the EOI write
  EXPECT_FALSE(M.bit(0x100, 0x51));
  EXPECT_TRUE(M.bit(0x100, 0x41));
  EXPECT_EQ(M.get(F::GuestInterruptStatus), 0x4100u);
}

TEST(ApicVirtualization, EoiOfAVectorInTheEoiExitBitmapCausesVirtualizedEoiExit) {
  ApicvMachine M;
  M.virtualInterruptDelivery();
  M.enable(VmxControl::VirtualizeApicAccesses);
  M.vmcs().set(F::EoiExitBitmap1, uint64_t(1) << (0x51 - 64));
  M.setBit(0x100, 0x51);
  M.setBit(0x100, 0x31);
  M.interruptStatus(0, 0x51);
  StepResult R = M.launch(storeImm32(uint32_t(kApicAccess) + 0xb0, 0) + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::VirtualizedEoi));
  EXPECT_EQ(M.get(F::ExitQualification), 0x51u);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 0u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 11); // trap-like
  EXPECT_FALSE(M.bit(0x100, 0x51));
  EXPECT_EQ(M.get(F::GuestInterruptStatus), 0x3100u); // SVI: the next in service
  EXPECT_EQ(M.vapic(0xa0), 0x30u);                   // VPPR from the new SVI
}

TEST(ApicVirtualization, SelfIpiThroughIcrLowIsVirtualized) {
  ApicvMachine M;
  M.virtualInterruptDelivery();
  M.enable(VmxControl::VirtualizeApicAccesses);
  // ICR low: destination shorthand self (01B), fixed, edge, vector 61H.
  StepResult R = M.launch(storeImm32(uint32_t(kApicAccess) + 0x300, 0x40061) + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.inHandler());
  EXPECT_EQ(M.stackedRip(), kGuestCode + 11);
  EXPECT_TRUE(M.bit(0x100, 0x61));
  EXPECT_EQ(M.get(F::GuestInterruptStatus), 0x6100u);
}

TEST(ApicVirtualization, IcrLowWritesThatAreNotVirtualizableSelfIpisCauseApicWriteExits) {
  for (uint32_t Icr : {0x61u,       // no shorthand
                       0xc0061u,    // all excluding self
                       0x48061u,    // level triggered
                       0x40461u,    // delivery mode lowest priority
                       0x4000fu,    // vector below 16
                       0x42061u,    // reserved bit 13
                       0x41061u}) { // delivery status (bit 12)
    SCOPED_TRACE(Icr);
    ApicvMachine M;
    M.virtualInterruptDelivery();
    M.enable(VmxControl::VirtualizeApicAccesses);
    StepResult R = M.launch(storeImm32(uint32_t(kApicAccess) + 0x300, Icr) + kHlt);
    EXPECT_FALSE(R.Faulted);
    ASSERT_TRUE(M.exitedToHost());
    EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::ApicWrite));
    EXPECT_EQ(M.get(F::ExitQualification), 0x300u);
    EXPECT_EQ(M.vapic(0x300), Icr);
  }
}

TEST(ApicVirtualization, X2apicSelfIpiAndEoiMsrsAreVirtualized) {
  ApicvMachine M;
  M.virtualInterruptDelivery();
  M.enable(VmxControl::UseMsrBitmaps);
  M.enable(VmxControl::VirtualizeX2apicMode);
  M.S.Gpr[RCX] = 0x83f;
  M.S.Gpr[RAX] = 0x71;
  M.S.Gpr[RDX] = 0;
  StepResult R = M.launch(kWrmsr + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.inHandler());
  EXPECT_EQ(M.stackedRip(), kGuestCode + 2);
  EXPECT_EQ(M.get(F::GuestInterruptStatus), 0x7100u);
  // The handler's EOI: WRMSR 80BH with 0.
  const Bytes Eoi = Bytes{0xb9, 0x0b, 0x08, 0, 0, 0x31, 0xc0, 0x31, 0xd2} + kWrmsr + kHlt;
  M.write(kHandler + 1, Eoi.data(), Eoi.size());
  M.Cpu_.Activity = ActivityState::Active;
  M.Cpu_.run(10);
  EXPECT_EQ(M.S.Rip, kHandler + 1 + Eoi.size());
  EXPECT_FALSE(M.bit(0x100, 0x71));
  EXPECT_EQ(M.get(F::GuestInterruptStatus), 0u);
}

TEST(ApicVirtualization, X2apicEoiWithNonZeroValueIsGeneralProtection) {
  ApicvMachine M;
  M.virtualInterruptDelivery();
  M.enable(VmxControl::UseMsrBitmaps);
  M.enable(VmxControl::VirtualizeX2apicMode);
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::GP);
  M.S.Gpr[RCX] = 0x80b;
  M.S.Gpr[RAX] = 1;
  StepResult R = M.launch(kWrmsr + kHlt);
  EXPECT_TRUE(R.Faulted); // the #GP, which the exception bitmap turns into the exit
  EXPECT_EQ(R.Vector, vec::GP);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::ExceptionOrNmi));
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000b0du);
}

// --- Posted-interrupt processing (SDM Vol. 3C, "Posted-Interrupt Processing") ---------

constexpr uint64_t kDescriptor = 0x316000;
constexpr uint8_t kNotification = 0xf2;

void setUpPostedInterrupts(ApicvMachine &M) {
  M.virtualInterruptDelivery();
  M.enable(VmxControl::ProcessPostedInterrupts);
  M.vmcs().set(F::PrimaryVmExitControls,
               M.get(F::PrimaryVmExitControls) |
                   controlBit(VmxControl::AcknowledgeInterruptOnExit));
  M.vmcs().set(F::PostedInterruptNotificationVector, kNotification);
  M.vmcs().set(F::PostedInterruptDescriptorAddress, kDescriptor);
  const std::vector<uint8_t> Zero(64, 0);
  M.write(kDescriptor, Zero.data(), Zero.size());
}

TEST(ApicVirtualization, NotificationVectorIsProcessedInsteadOfExiting) {
  ApicvMachine M;
  setUpPostedInterrupts(M);
  // PIR: vectors 45H and A3H; ON set.
  const uint32_t Pir2 = 1u << (0x45 - 64), Pir5 = 1u << (0xa3 - 160);
  M.write(kDescriptor + 8, &Pir2, 4);
  M.write(kDescriptor + 20, &Pir5, 4);
  const uint8_t On = 1;
  M.write(kDescriptor + 32, &On, 1);
  M.Intr.Pending = true;
  M.Intr.Vector = kNotification;
  StepResult R = M.launch(Bytes{0x90, 0x90} + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.inHandler());
  EXPECT_EQ(M.Intr.Acks, 1u);
  EXPECT_EQ(M.Intr.Eois, 1u); // dismissed at the local APIC
  EXPECT_EQ(M.Mem.read(Hpa(kDescriptor + 32), 1), 0u); // ON cleared
  for (unsigned W = 0; W < 8; ++W)
    EXPECT_EQ(M.Mem.read(Hpa(kDescriptor + 4 * W), 4), 0u); // PIR cleared
  // A3H, the highest, was delivered; 45H waits in VIRR.
  EXPECT_TRUE(M.bit(0x100, 0xa3));
  EXPECT_TRUE(M.bit(0x200, 0x45));
  EXPECT_EQ(M.get(F::GuestInterruptStatus), 0xa345u);
  EXPECT_EQ(M.stackedRip(), kGuestCode);
}

TEST(ApicVirtualization, OtherExternalInterruptsStillExitWithPostedInterrupts) {
  ApicvMachine M;
  setUpPostedInterrupts(M);
  M.Intr.Pending = true;
  M.Intr.Vector = 0x30;
  StepResult R = M.launch(Bytes{0x90} + kHlt);
  EXPECT_FALSE(R.Faulted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.get(F::ExitReason), uint64_t(ExitReason::ExternalInterrupt));
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000030u);
  EXPECT_EQ(M.Intr.Eois, 0u);
}

TEST(ApicVirtualization, PostedInterruptsAreNotProcessedAtVmEntry) {
  // Only the notification vector's arrival processes the descriptor: at VM entry an
  // outstanding notification stays in the PIR.
  ApicvMachine M;
  setUpPostedInterrupts(M);
  const uint32_t Pir2 = 1u << (0x45 - 64);
  M.write(kDescriptor + 8, &Pir2, 4);
  const uint8_t On = 1;
  M.write(kDescriptor + 32, &On, 1);
  StepResult R = M.launch(Bytes{0x90} + kHlt);
  EXPECT_FALSE(R.Faulted);
  EXPECT_TRUE(M.guestHaltedAt(kGuestCode + 2));
  EXPECT_EQ(M.Mem.read(Hpa(kDescriptor + 8), 4), Pir2);
  EXPECT_EQ(M.Mem.read(Hpa(kDescriptor + 32), 1), 1u);
}

} // namespace
} // namespace vmxsim::test
