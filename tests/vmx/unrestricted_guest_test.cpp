// SDM Vol. 3C, "VMX Non-Root Operation" > "Unrestricted Guests": with "unrestricted
// guest" (and EPT) a guest runs in real-address mode and in unpaged protected mode, its
// linear addresses going straight to EPT. The scenario: a real-mode guest that
// switches itself to protected mode, with every exit it causes asserted exactly —
// MOV to CR0 (reason 28, when CR0.PE is host-owned), CPUID (10) and HLT (12).
#include "tests/support/ept_builder.h"
#include "tests/support/vmx_test_machine.h"

#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vmcs_segments.h"

#include <gtest/gtest.h>

namespace vmxsim::test {
namespace {

using F = VmcsField;

constexpr uint64_t kEptPool = 0x400000, kPoolBytes = 0x40000;
/// The real-mode guest: CS = DS = 0x2000 (base 0x20000), SS = 0, SP = 0x8000.
constexpr uint16_t kRealSeg = 0x2000;
constexpr uint64_t kRealBase = 0x20000;
constexpr uint64_t kCr0Real = 0x30; // NE ET: PE = PG = 0
constexpr uint32_t kArRealCode = 0x9b, kArRealData = 0x93, kArTss32Busy = 0x8b;

// Guest code (offsets from kRealBase).
constexpr uint64_t kMovCr0Offset = 0x0d, kCode32Offset = 0x40, kGdtrOffset = 0x100,
                   kGdtOffset = 0x110;

std::vector<uint8_t> realModeGuest() {
  std::vector<uint8_t> Code(0x128, 0x90);
  const uint32_t Target = uint32_t(kRealBase + kCode32Offset);
  const uint8_t Real[] = {
      0x66, 0x0f, 0x01, 0x16, 0x00, 0x01, // 00: o32 lgdt [0x100]
      0x0f, 0x20, 0xc3,                   // 06: mov ebx, cr0
      0x66, 0x83, 0xcb, 0x01,             // 09: or ebx, 1
      0x0f, 0x22, 0xc3,                   // 0d: mov cr0, ebx
      0x66, 0xea, uint8_t(Target), uint8_t(Target >> 8), uint8_t(Target >> 16),
      uint8_t(Target >> 24), 0x08, 0x00}; // 10: o32 jmp far 0x08:Target
  std::copy(std::begin(Real), std::end(Real), Code.begin());
  const uint8_t Prot[] = {0x0f, 0xa2, 0xf4}; // 40: cpuid; 42: hlt
  std::copy(std::begin(Prot), std::end(Prot), Code.begin() + kCode32Offset);
  // 100: GDTR pseudo-descriptor: limit 0x17, base kRealBase + kGdtOffset.
  const uint32_t GdtBase = uint32_t(kRealBase + kGdtOffset);
  const uint8_t Gdtr[] = {0x17, 0x00, uint8_t(GdtBase), uint8_t(GdtBase >> 8),
                          uint8_t(GdtBase >> 16), uint8_t(GdtBase >> 24)};
  std::copy(std::begin(Gdtr), std::end(Gdtr), Code.begin() + kGdtrOffset);
  // 110: null; 0x08 flat 32-bit code (type 0xa, not yet accessed); 0x10 flat data.
  const uint8_t Gdt[] = {0, 0, 0, 0, 0, 0, 0, 0,
                         0xff, 0xff, 0, 0, 0, 0x9a, 0xcf, 0,
                         0xff, 0xff, 0, 0, 0, 0x92, 0xcf, 0};
  std::copy(std::begin(Gdt), std::end(Gdt), Code.begin() + kGdtOffset);
  return Code;
}

/// The known-good host with a real-mode guest at kRealSeg:0 under an identity EPT over
/// the first 16 MiB; HLT exiting on, CPUID exits unconditionally.
struct RealModeMachine : VmxTestMachine {
  RealModeMachine() : VmxTestMachine(eptTestProfile()), Ept(*this, kEptPool, kPoolBytes) {
    Ept.identity2M(16ull << 20);
    std::vector<uint8_t> Code = realModeGuest();
    write(kRealBase, Code.data(), Code.size());
    const uint8_t Host[] = {0xf4};
    write(kHostCode, Host, sizeof(Host));

    VmcsData &V = vmcs();
    V.set(F::PrimaryProcessorBasedVmExecutionControls,
          V.get(F::PrimaryProcessorBasedVmExecutionControls) |
              controlBit(VmxControl::ActivateSecondaryControls) |
              controlBit(VmxControl::HltExiting));
    V.set(F::SecondaryProcessorBasedVmExecutionControls,
          controlBit(VmxControl::EnableEpt) | controlBit(VmxControl::UnrestrictedGuest));
    V.set(F::EptPointer, Ept.eptp());
    V.set(F::VmEntryControls,
          V.get(F::VmEntryControls) & ~controlBit(VmxControl::Ia32eModeGuest));
    V.set(F::GuestCr0, kCr0Real);
    V.set(F::GuestCr3, 0);
    V.set(F::GuestCr4, cr4::VMXE);
    V.set(F::GuestIa32Efer, 0);
    V.set(F::Cr0ReadShadow, kCr0Real);
    setSegment(SegReg::CS, kRealSeg, kArRealCode);
    setSegment(SegReg::DS, kRealSeg, kArRealData);
    for (SegReg R : {SegReg::SS, SegReg::ES, SegReg::FS, SegReg::GS})
      setSegment(R, 0, kArRealData);
    V.set(F::GuestTrSelector, 0);
    V.set(F::GuestTrBase, 0);
    V.set(F::GuestTrLimit, 0xffff);
    V.set(F::GuestTrAccessRights, kArTss32Busy);
    V.set(F::GuestGdtrBase, 0);
    V.set(F::GuestGdtrLimit, 0xffff);
    V.set(F::GuestIdtrBase, 0);
    V.set(F::GuestIdtrLimit, 0x3ff);
    V.set(F::GuestRip, 0);
    V.set(F::GuestRsp, 0x8000);
    V.set(F::GuestRflags, 0x2);
  }

  /// A real-mode segment register: base = selector * 16, limit 0xffff.
  void setSegment(SegReg R, uint16_t Selector, uint32_t Ar) {
    const GuestSegmentFields &Fl = kGuestSegFields[unsigned(R)];
    vmcs().set(Fl.Selector, Selector);
    vmcs().set(Fl.Base, uint64_t(Selector) << 4);
    vmcs().set(Fl.Limit, 0xffff);
    vmcs().set(Fl.AccessRights, Ar);
  }

  /// VMLAUNCH or VMRESUME; the guest runs until its next VM exit and the host halts.
  void enter(bool Launch) {
    Cpu_.Activity = ActivityState::Active;
    // (A guest exception caught by the exception bitmap also shows up in R.Faulted.)
    StepResult R = exec(Launch ? enc::Vmlaunch : enc::Vmresume, 200);
    ASSERT_EQ(R.Why, StopReason::Halted);
    ASSERT_FALSE(Cpu_.NonRoot);
    ASSERT_EQ(vmcs().get(F::VmInstructionError), 0u);
  }
  /// The test hypervisor's "skip the instruction" step before VMRESUME.
  void skipInstruction() {
    vmcs().set(F::GuestRip, vmcs().get(F::GuestRip) + vmcs().get(F::VmExitInstructionLength));
  }
  uint64_t get(F Field) { return vmcs().get(Field); }

  EptBuilder Ept;
};

/// After the far jump: CS = 0x08 from the guest's GDT (flat 32-bit code, accessed bit
/// set by the descriptor load), CR0.PE = 1, PG = 0; then CPUID (exit 10) and HLT (12).
void expectProtectedModeExits(RealModeMachine &M) {
  EXPECT_EQ(M.get(F::ExitReason), 10u);
  EXPECT_EQ(M.get(F::ExitQualification), 0u);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 2u);
  EXPECT_EQ(M.get(F::GuestRip), kRealBase + kCode32Offset);
  EXPECT_EQ(M.get(F::GuestCr0), kCr0Real | cr0::PE);
  EXPECT_EQ(M.get(F::GuestCsSelector), 0x08u);
  EXPECT_EQ(M.get(F::GuestCsBase), 0u);
  EXPECT_EQ(M.get(F::GuestCsLimit), 0xffffffffu);
  EXPECT_EQ(M.get(F::GuestCsAccessRights), 0xc09bu);
  // The data segments keep their real-mode contents until reloaded.
  EXPECT_EQ(M.get(F::GuestDsSelector), kRealSeg);
  EXPECT_EQ(M.get(F::GuestDsBase), kRealBase);
  EXPECT_EQ(M.get(F::GuestDsAccessRights), kArRealData);
  EXPECT_EQ(M.get(F::GuestSsAccessRights), kArRealData);
  // The descriptor load set the accessed bit of the guest's code descriptor.
  EXPECT_EQ(M.read64(kRealBase + kGdtOffset + 8), 0x00cf9b000000ffffull);

  M.skipInstruction();
  M.enter(false);
  EXPECT_EQ(M.get(F::ExitReason), 12u);
  EXPECT_EQ(M.get(F::ExitQualification), 0u);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 1u);
  EXPECT_EQ(M.get(F::GuestRip), kRealBase + kCode32Offset + 2);
  EXPECT_EQ(M.get(F::GuestCsSelector), 0x08u);
  EXPECT_EQ(M.get(F::GuestCsBase), 0u);
  EXPECT_EQ(M.get(F::GuestCsAccessRights), 0xc09bu);
  EXPECT_EQ(M.get(F::GuestActivityState), 0u);
  EXPECT_EQ(M.get(F::GuestCr0), kCr0Real | cr0::PE);
}

TEST(UnrestrictedGuests, RealModeGuestSwitchesToProtectedModeWithCr0Exit) {
  RealModeMachine M;
  // CR0.PE is host-owned: the guest's MOV to CR0 that sets it exits.
  M.vmcs().set(F::Cr0GuestHostMask, cr0::PE);
  M.enter(true);
  // Exit 1: MOV to CR0 from EBX: CR number 0, access type 0, register 3 (SDM Vol. 3C,
  // "Exit Qualification for Control-Register Accesses"). Fault-like: the write did not
  // happen, RIP is at the instruction, still in real mode.
  EXPECT_EQ(M.get(F::ExitReason), 28u);
  EXPECT_EQ(M.get(F::ExitQualification), 0x300u);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 3u);
  EXPECT_EQ(M.get(F::GuestRip), kMovCr0Offset);
  EXPECT_EQ(M.get(F::GuestCr0), kCr0Real);
  EXPECT_EQ(M.get(F::GuestCsSelector), kRealSeg);
  EXPECT_EQ(M.get(F::GuestCsBase), kRealBase);
  EXPECT_EQ(M.get(F::GuestCsLimit), 0xffffu);
  EXPECT_EQ(M.get(F::GuestCsAccessRights), kArRealCode);
  EXPECT_EQ(M.get(F::GuestSsAccessRights), kArRealData);
  EXPECT_EQ(M.get(F::GuestGdtrBase), kRealBase + kGdtOffset);
  EXPECT_EQ(M.get(F::GuestGdtrLimit), 0x17u);
  EXPECT_EQ(M.S.Gpr[RBX] & 0xffffffff, kCr0Real | cr0::PE);
  EXPECT_EQ(M.get(F::VmEntryControls) & controlBit(VmxControl::Ia32eModeGuest), 0u);

  // The test hypervisor emulates the write: guest CR0 and the read shadow get PE; then
  // the guest executes the far jump into 32-bit protected mode.
  M.vmcs().set(F::GuestCr0, kCr0Real | cr0::PE);
  M.vmcs().set(F::Cr0ReadShadow, kCr0Real | cr0::PE);
  M.skipInstruction();
  M.enter(false);
  expectProtectedModeExits(M);
}

TEST(UnrestrictedGuests, RealModeGuestSwitchesToProtectedModeWithoutCr0Exit) {
  RealModeMachine M;
  M.vmcs().set(F::Cr0GuestHostMask, 0);
  M.enter(true);
  expectProtectedModeExits(M);
}

TEST(UnrestrictedGuests, UnpagedGuestLinearAddressesAreTranslatedByEpt) {
  RealModeMachine M;
  // Guest-physical page 0x30000 lives at host page 0x700000.
  const uint64_t Host = 0x700000, Value = 0x1234567887654321ull;
  M.Ept.identity4K(0, 2ull << 20); // 4 KiB pages over the first 2 MiB, then one remapped
  M.Ept.map4K(0x30000, Host);
  M.write(Host, &Value, 8);
  // Real mode: mov ax, 0x3000; mov es, ax; mov ecx, es:[0]; mov edx, es:[4]; hlt.
  const uint8_t Code[] = {0xb8, 0x00, 0x30, 0x8e, 0xc0, 0x26, 0x66, 0x8b, 0x0e, 0x00,
                          0x00, 0x26, 0x66, 0x8b, 0x16, 0x04, 0x00, 0xf4};
  M.write(kRealBase, Code, sizeof(Code));
  M.enter(true);
  EXPECT_EQ(M.get(F::ExitReason), 12u);
  EXPECT_EQ(M.S.Gpr[RCX] & 0xffffffff, 0x87654321u);
  EXPECT_EQ(M.S.Gpr[RDX] & 0xffffffff, 0x12345678u);
  EXPECT_EQ(M.get(F::GuestEsSelector), 0x3000u);
  EXPECT_EQ(M.get(F::GuestEsBase), 0x30000u);
}

TEST(UnrestrictedGuests, RealModeGuestRequiresUnrestrictedGuestAtVmEntry) {
  RealModeMachine M;
  M.vmcs().set(F::SecondaryProcessorBasedVmExecutionControls,
               controlBit(VmxControl::EnableEpt));
  M.enter(true);
  // VM-entry failure due to invalid guest state (CR0 fixed bits), exit reason 33.
  EXPECT_EQ(M.get(F::ExitReason), 0x80000000u | 33u);
}


// "If CR0.PE = 0, the following instructions cause invalid-opcode exceptions and do not
// cause VM exits: INVEPT, INVVPID, LLDT, LTR, SLDT, STR, VMCLEAR, VMLAUNCH, VMPTRLD,
// VMPTRST, VMREAD, VMRESUME, VMWRITE, VMXOFF, and VMXON" (SDM Vol. 3C, "Unrestricted
// Guests"); VMCALL still exits.
TEST(UnrestrictedGuests, RealModeVmcallExits) {
  RealModeMachine M;
  const uint8_t Code[] = {0x0f, 0x01, 0xc1}; // vmcall
  M.write(kRealBase, Code, sizeof(Code));
  M.enter(true);
  EXPECT_EQ(M.get(F::ExitReason), 18u);
  EXPECT_EQ(M.get(F::VmExitInstructionLength), 3u);
  EXPECT_EQ(M.get(F::GuestRip), 0u);
  EXPECT_EQ(M.get(F::GuestCr0), kCr0Real);
}

TEST(UnrestrictedGuests, RealModeVmxAndDescriptorTableInstructionsRaiseUdWithoutExiting) {
  struct Case {
    const char *What;
    std::vector<uint8_t> Code;
  };
  const Case Cases[] = {
      {"vmread ebx, eax", {0x0f, 0x78, 0xc3}},
      {"vmxoff", {0x0f, 0x01, 0xc4}},
      {"vmptrld [0]", {0x0f, 0xc7, 0x36, 0x00, 0x00}},
      {"invept eax, [0]", {0x66, 0x0f, 0x38, 0x80, 0x06, 0x00, 0x00}},
      {"sldt ax", {0x0f, 0x00, 0xc0}},
      {"str ax", {0x0f, 0x00, 0xc8}},
  };
  for (const Case &K : Cases) {
    SCOPED_TRACE(K.What);
    RealModeMachine M;
    // Descriptor-table exiting would make SLDT/STR exit in protected mode.
    M.vmcs().set(F::SecondaryProcessorBasedVmExecutionControls,
                 M.get(F::SecondaryProcessorBasedVmExecutionControls) |
                     controlBit(VmxControl::DescriptorTableExiting));
    M.vmcs().set(F::ExceptionBitmap, 1u << 6);
    M.write(kRealBase, K.Code.data(), K.Code.size());
    M.enter(true);
    EXPECT_EQ(M.get(F::ExitReason), 0u);
    EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000306u);
    EXPECT_EQ(M.get(F::GuestRip), 0u);
  }
}

TEST(UnrestrictedGuests, PaePdpteLoadGoesThroughEptAndItsViolationExits) {
  // A real-mode guest enables PAE paging in one MOV to CR0 (PE and PG together). The
  // PDPTE load reads the PDPT at the guest-physical address in CR3, through EPT (SDM
  // Vol. 3C, "EPT Violations": guest paging-structure accesses; Vol. 3A, PDPTE
  // Registers). EPT maps only the first 16 MiB, CR3 = 24 MiB: EPT violation, a read of a
  // paging structure with no guest-linear address, fault-like (RIP at the MOV to CR0,
  // which has not changed CR0).
  RealModeMachine M;
  M.vmcs().set(F::Cr0GuestHostMask, 0);
  // CR4 is all guest-owned here, so the guest keeps VMXE (fixed to 1 in VMX operation).
  const uint8_t Code[] = {
      0x66, 0xb8, 0x20, 0x20, 0x00, 0x00, // mov eax, 0x2020 (CR4.PAE | CR4.VMXE)
      0x0f, 0x22, 0xe0,                   // mov cr4, eax
      0x66, 0xb8, 0x00, 0x00, 0x80, 0x01, // mov eax, 0x1800000
      0x0f, 0x22, 0xd8,                   // mov cr3, eax (no PDPTE load: PG = 0)
      0x0f, 0x20, 0xc0,                   // mov eax, cr0
      0x66, 0x0d, 0x01, 0x00, 0x00, 0x80, // or eax, 0x80000001
      0x0f, 0x22, 0xc0,                   // mov cr0, eax   <- at offset 27
      0xf4};
  M.write(kRealBase, Code, sizeof(Code));
  M.enter(true);
  EXPECT_EQ(M.get(F::ExitReason), 48u);
  EXPECT_EQ(M.get(F::ExitQualification), 0x1u); // data read; not readable/writable/executable
  EXPECT_EQ(M.get(F::GuestPhysicalAddress), 0x1800000u);
  EXPECT_EQ(M.get(F::GuestRip), 27u);
  EXPECT_EQ(M.get(F::GuestCr0) & (cr0::PE | cr0::PG), 0u);
  EXPECT_EQ(M.get(F::GuestCr3), 0x1800000u);
  EXPECT_EQ(M.get(F::GuestCr4) & cr4::PAE, cr4::PAE);

  // Map the PDPT (with a present entry pointing at an identity-mapped PD) and resume:
  // the MOV to CR0 completes and the guest reaches HLT with paging on.
  M.Ept.map4K(0x1800000, 0x1800000);
  const uint64_t Pdpte0 = 0x1801000 | 1, Pd0 = 0x83; // 2 MiB page at 0 (PS | RW | P)
  M.write(0x1800000, &Pdpte0, 8);
  M.Ept.map4K(0x1801000, 0x1801000);
  M.write(0x1801000, &Pd0, 8);
  M.enter(false);
  EXPECT_EQ(M.get(F::ExitReason), 12u);
  EXPECT_EQ(M.get(F::GuestCr0) & (cr0::PE | cr0::PG), cr0::PE | cr0::PG);
  EXPECT_EQ(M.get(F::GuestPdpte0), Pdpte0);
}

TEST(UnrestrictedGuests, ConvertibleEptViolationWithCr0PeClearIsAVmExitNotVe) {
  // SDM Vol. 3C, "Convertible EPT Violations": a #VE needs CR0.PE = 1. The real-mode guest
  // reads guest-physical 0x90000, whose EPT entry is not present with "suppress #VE" 0,
  // with "EPT-violation #VE" on and the information area's word at offset 4 clear.
  RealModeMachine M;
  M.Ept.identity4K(0, 0x200000); // 4-KByte pages over the first 2 MiB
  const uint64_t NotPresent = 0;
  M.write(M.Ept.leafAddress(0x90000), &NotPresent, 8);
  constexpr uint64_t kVeArea = 0x330000;
  const std::vector<uint8_t> Zero(4096, 0);
  M.write(kVeArea, Zero.data(), Zero.size());
  VmcsData &V = M.vmcs();
  V.set(F::SecondaryProcessorBasedVmExecutionControls,
        V.get(F::SecondaryProcessorBasedVmExecutionControls) |
            controlBit(VmxControl::EptViolationVe));
  V.set(F::VirtualizationExceptionInformationAddress, kVeArea);
  // mov ax, 0x9000; mov ds, ax; mov al, [0]
  const uint8_t Code[] = {0xb8, 0x00, 0x90, 0x8e, 0xd8, 0xa0, 0x00, 0x00};
  M.write(kRealBase, Code, sizeof(Code));
  M.enter(true);
  EXPECT_EQ(M.get(F::ExitReason), 48u);
  EXPECT_EQ(M.get(F::GuestPhysicalAddress), 0x90000u);
  EXPECT_EQ(M.get(F::GuestRip), 5u);
  EXPECT_EQ(M.Mem.read(Hpa(kVeArea + 4), 4), 0u); // no #VE information saved
}

// SDM Vol. 3C, Table "Exit Qualification for EPT Violations", bit 9: "If CR0.PG = 0, the
// translation of every linear address is a user-mode linear address". With mode-based
// execute control a guest with paging off fetches under bit 10 of the EPT entries, not
// bit 2, at any CPL (SDM Vol. 3C, "EPT Violations").
TEST(UnrestrictedGuests, UnpagedFetchIsAUserModeFetchForModeBasedExecute) {
  RealModeMachine M;
  VmcsData &V = M.vmcs();
  V.set(F::SecondaryProcessorBasedVmExecutionControls,
        V.get(F::SecondaryProcessorBasedVmExecutionControls) |
            controlBit(VmxControl::ModeBasedExecuteControlForEpt));
  V.set(F::Cr0GuestHostMask, 0);
  // Supervisor-mode execute only: the first fetch (CS:IP = 0x2000:0) violates. Bits 2
  // (fetch), 3-5 (R W X), 6 = 0 (no bit 10), 7 and 8, and the advanced information: 9
  // (user-mode address) and 10 (read/write page), 11 = 0.
  M.Ept.map2M(0, 0, ept::R | ept::W | ept::X);
  M.enter(true);
  EXPECT_EQ(M.get(F::ExitReason), 48u);
  EXPECT_EQ(M.get(F::ExitQualification), 0x7bcu);
  EXPECT_EQ(M.get(F::GuestPhysicalAddress), kRealBase);
  EXPECT_EQ(M.get(F::GuestLinearAddress), kRealBase);
  EXPECT_EQ(M.get(F::GuestRip), 0u);
  // User-mode execute only, on the page and the levels above: the guest runs as it does
  // without the control, into protected mode (still unpaged) and to its CPUID and HLT.
  M.Ept.map2M(0, 0, ept::R | ept::W);
  M.Ept.orPathBits(0, ept::UserExecute);
  M.enter(false);
  expectProtectedModeExits(M);
}

} // namespace
} // namespace vmxsim::test
