// SDM Vol. 3C, "VMX Non-Root Operation" > "VM Functions" > "EPTP Switching", and the
// VMFUNC instruction (Vol. 3C, "VMX Instruction Reference"): a 64-bit guest under EPT
// switches between two EPT hierarchies that map one guest page to different host pages,
// and the VMFUNC VM exits (reason 59) and #UD cases.
#include "tests/support/ept_builder.h"
#include "tests/support/vmx_test_machine.h"

#include "cpu/exceptions.h"
#include "cpu/vmx/capabilities.h"

#include <gtest/gtest.h>

namespace vmxsim::test {
namespace {

using F = VmcsField;

constexpr uint64_t kEptPool0 = 0x400000, kEptPool1 = 0x440000, kPoolBytes = 0x40000;
constexpr uint64_t kEptpList = 0x3a7000;
/// The guest page that the two hierarchies map differently, and its two host pages.
constexpr uint64_t kDataGpa = 0x800000, kHostPage0 = 0x800000, kHostPage1 = 0x900000;
constexpr uint64_t kValue0 = 0x1111111111111111ull, kValue1 = 0x2222222222222222ull;

/// A machine whose current VMCS runs the known-good 64-bit guest under EPT hierarchy 0
/// with EPTP switching enabled; EPTP-list entries 0 and 1 name hierarchies 0 and 1.
struct VmfuncMachine : VmxTestMachine {
  VmfuncMachine()
      : VmxTestMachine(eptTestProfile()), Ept0(*this, kEptPool0, kPoolBytes),
        Ept1(*this, kEptPool1, kPoolBytes) {
    for (EptBuilder *E : {&Ept0, &Ept1}) {
      // Everything but the data page's 2 MiB region is identity-mapped with 2 MiB pages;
      // that region holds one 4 KiB page.
      for (uint64_t A = 0; A < (16ull << 20); A += 2ull << 20)
        if (A != (kDataGpa & ~uint64_t(0x1fffff)))
          E->map2M(A, A);
    }
    Ept0.map4K(kDataGpa, kHostPage0);
    Ept1.map4K(kDataGpa, kHostPage1);
    write(kHostPage0, &kValue0, 8);
    write(kHostPage1, &kValue1, 8);
    setListEntry(0, Ept0.eptp());
    setListEntry(1, Ept1.eptp());
    VmcsData &V = vmcs();
    V.set(F::PrimaryProcessorBasedVmExecutionControls,
          V.get(F::PrimaryProcessorBasedVmExecutionControls) |
              controlBit(VmxControl::ActivateSecondaryControls));
    V.set(F::SecondaryProcessorBasedVmExecutionControls,
          controlBit(VmxControl::EnableEpt) | controlBit(VmxControl::EnableVmFunctions));
    V.set(F::EptPointer, Ept0.eptp());
    V.set(F::VmFunctionControls, 1);
    V.set(F::EptpListAddress, kEptpList);
    const uint8_t Host[] = {0xf4}; // HLT
    write(kHostCode, Host, sizeof(Host));
  }
  void setListEntry(unsigned Index, uint64_t Eptp) { write(kEptpList + 8 * Index, &Eptp, 8); }
  void loadGuest(const std::vector<uint8_t> &Code) {
    write(kGuestCode, Code.data(), Code.size());
  }
  /// VMLAUNCH; the guest runs until its first VM exit and the host halts.
  void launch() {
    StepResult R = exec(enc::Vmlaunch, 100);
    ASSERT_EQ(R.Why, StopReason::Halted);
    ASSERT_FALSE(Cpu_.NonRoot);
  }
  uint64_t exitReason() { return vmcs().get(F::ExitReason); }

  EptBuilder Ept0, Ept1;
};

// mov rdx, [kDataGpa]; xor eax, eax; mov ecx, Index; vmfunc; mov rsi, [kDataGpa]; vmcall
std::vector<uint8_t> switchAndRead(uint32_t Index) {
  return {0x48, 0x8b, 0x14, 0x25, 0x00, 0x00, 0x80, 0x00, // mov rdx, [0x800000]
          0x31, 0xc0,                                     // xor eax, eax
          0xb9, uint8_t(Index), uint8_t(Index >> 8), uint8_t(Index >> 16),
          uint8_t(Index >> 24),                           // mov ecx, Index
          0x0f, 0x01, 0xd4,                               // vmfunc
          0x48, 0x8b, 0x34, 0x25, 0x00, 0x00, 0x80, 0x00, // mov rsi, [0x800000]
          0x0f, 0x01, 0xc1};                              // vmcall
}
constexpr uint64_t kVmfuncOffset = 15, kVmcallOffset = 26;

TEST(VmFunctions, EptpSwitchingChangesTheHostPageOfAGuestRead) {
  VmfuncMachine M;
  M.loadGuest(switchAndRead(1));
  M.launch();
  EXPECT_EQ(M.exitReason(), 18u); // VMCALL: VMFUNC itself did not exit
  EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode + kVmcallOffset);
  EXPECT_EQ(M.S.Gpr[RDX], kValue0);
  EXPECT_EQ(M.S.Gpr[RSI], kValue1);
  EXPECT_EQ(M.vmcs().get(F::EptPointer), M.Ept1.eptp());
  // No register is modified by the VM function; with "EPT-violation #VE" support the
  // EPTP index is loaded from ECX[15:0].
  EXPECT_EQ(M.S.Gpr[RAX], 0u);
  EXPECT_EQ(M.S.Gpr[RCX], 1u);
  EXPECT_EQ(M.vmcs().get(F::EptpIndex), 1u);
}

TEST(VmFunctions, EptpSwitchingBackAndForthSeesEachHierarchy) {
  VmfuncMachine M;
  // mov ecx, 1; xor eax, eax; vmfunc; mov rdx, [data]; dec ecx; vmfunc; mov rsi, [data];
  // vmcall
  M.loadGuest({0xb9, 0x01, 0x00, 0x00, 0x00, 0x31, 0xc0, 0x0f, 0x01, 0xd4, 0x48, 0x8b, 0x14,
               0x25, 0x00, 0x00, 0x80, 0x00, 0xff, 0xc9, 0x0f, 0x01, 0xd4, 0x48, 0x8b, 0x34,
               0x25, 0x00, 0x00, 0x80, 0x00, 0x0f, 0x01, 0xc1});
  M.launch();
  EXPECT_EQ(M.exitReason(), 18u);
  EXPECT_EQ(M.S.Gpr[RDX], kValue1);
  EXPECT_EQ(M.S.Gpr[RSI], kValue0);
  EXPECT_EQ(M.vmcs().get(F::EptPointer), M.Ept0.eptp());
}

TEST(VmFunctions, EptpSwitchingChangesTheCodeAGuestPageExecutes) {
  VmfuncMachine M;
  // The same guest-physical code address (kDataGpa + 0x100) holds different code in
  // the two host pages; the first call decodes and caches host page 0's code.
  const uint8_t Code0[] = {0xbe, 0xaa, 0xaa, 0x00, 0x00, 0xc3}; // mov esi, 0xaaaa; ret
  const uint8_t Code1[] = {0xbf, 0xbb, 0xbb, 0x00, 0x00, 0xc3}; // mov edi, 0xbbbb; ret
  M.write(kHostPage0 + 0x100, Code0, sizeof(Code0));
  M.write(kHostPage1 + 0x100, Code1, sizeof(Code1));
  // mov ebx, kDataGpa + 0x100; call rbx; xor eax, eax; mov ecx, 1; vmfunc; call rbx;
  // vmcall
  M.loadGuest({0xbb, 0x00, 0x01, 0x80, 0x00, 0xff, 0xd3, 0x31, 0xc0, 0xb9, 0x01, 0x00, 0x00,
               0x00, 0x0f, 0x01, 0xd4, 0xff, 0xd3, 0x0f, 0x01, 0xc1});
  M.launch();
  EXPECT_EQ(M.exitReason(), 18u);
  EXPECT_EQ(M.S.Gpr[RSI], 0xaaaau);
  EXPECT_EQ(M.S.Gpr[RDI], 0xbbbbu);
}

TEST(VmFunctions, EptpSwitchingWithVpidKeepsBothHierarchiesApart) {
  VmfuncMachine M;
  M.vmcs().set(F::SecondaryProcessorBasedVmExecutionControls,
               M.vmcs().get(F::SecondaryProcessorBasedVmExecutionControls) |
                   controlBit(VmxControl::EnableVpid));
  M.vmcs().set(F::VirtualProcessorIdentifier, 5);
  M.loadGuest(switchAndRead(1));
  M.launch();
  EXPECT_EQ(M.exitReason(), 18u);
  EXPECT_EQ(M.S.Gpr[RDX], kValue0);
  EXPECT_EQ(M.S.Gpr[RSI], kValue1);
}

TEST(VmFunctions, InvalidEptpListEntryExitsWithReason59AtTheVmfunc) {
  struct Case {
    const char *What;
    uint64_t Entry;
  };
  VmfuncMachine Probe;
  const uint64_t Good = Probe.Ept1.eptp();
  const Case Cases[] = {
      {"zero entry (memory type UC, walk length 1)", 0},
      {"memory type 1 (WC)", (Good & ~uint64_t(7)) | 1},
      {"walk length 2", (Good & ~uint64_t(0x38)) | (1u << 3)},
      {"reserved bit 7", Good | 0x80},
      {"reserved bit 11", Good | 0x800},
      {"address beyond the physical-address width", Good | (uint64_t(1) << 60)},
  };
  for (const Case &K : Cases) {
    SCOPED_TRACE(K.What);
    VmfuncMachine M;
    M.setListEntry(1, K.Entry);
    M.loadGuest(switchAndRead(1));
    M.launch();
    EXPECT_EQ(M.exitReason(), 59u);
    EXPECT_EQ(M.vmcs().get(F::ExitQualification), 0u);
    EXPECT_EQ(M.vmcs().get(F::VmExitInstructionLength), 3u);
    EXPECT_EQ(M.vmcs().get(F::VmExitInstructionInformation), 0u);
    EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode + kVmfuncOffset);
    EXPECT_EQ(M.vmcs().get(F::EptPointer), M.Ept0.eptp());
    EXPECT_EQ(M.S.Gpr[RDX], kValue0);
  }
}

TEST(VmFunctions, EptpIndex512ExitsWithReason59) {
  VmfuncMachine M;
  M.loadGuest(switchAndRead(512));
  M.launch();
  EXPECT_EQ(M.exitReason(), 59u);
  EXPECT_EQ(M.vmcs().get(F::VmExitInstructionLength), 3u);
  EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode + kVmfuncOffset);
  EXPECT_EQ(M.vmcs().get(F::EptPointer), M.Ept0.eptp());
}

TEST(VmFunctions, EptpIndex511IsTheLastListEntry) {
  VmfuncMachine M;
  M.setListEntry(511, M.Ept1.eptp());
  M.loadGuest(switchAndRead(511));
  M.launch();
  EXPECT_EQ(M.exitReason(), 18u);
  EXPECT_EQ(M.S.Gpr[RSI], kValue1);
}

TEST(VmFunctions, DisabledVmFunctionExitsWithReason59) {
  VmfuncMachine M;
  // mov eax, 1; vmfunc (function 1 is not enabled in the VM-function controls).
  M.loadGuest({0xb8, 0x01, 0x00, 0x00, 0x00, 0x0f, 0x01, 0xd4});
  M.launch();
  EXPECT_EQ(M.exitReason(), 59u);
  EXPECT_EQ(M.vmcs().get(F::VmExitInstructionLength), 3u);
  EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode + 5);
}

/// #UD in the guest, caught by the exception bitmap: exit 0 with a hardware exception,
/// vector 6, at the VMFUNC.
void expectUdExit(VmfuncMachine &M, uint64_t Rip) {
  EXPECT_EQ(M.exitReason(), 0u);
  EXPECT_EQ(M.vmcs().get(F::VmExitInterruptionInformation), 0x80000306u);
  EXPECT_EQ(M.vmcs().get(F::GuestRip), Rip);
}

TEST(VmFunctions, VmfuncWithEax64RaisesUd) {
  VmfuncMachine M;
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::UD);
  M.loadGuest({0xb8, 0x40, 0x00, 0x00, 0x00, 0x0f, 0x01, 0xd4}); // mov eax, 64; vmfunc
  M.launch();
  expectUdExit(M, kGuestCode + 5);
}

TEST(VmFunctions, VmfuncWithoutEnableVmFunctionsRaisesUd) {
  VmfuncMachine M;
  M.vmcs().set(F::SecondaryProcessorBasedVmExecutionControls,
               controlBit(VmxControl::EnableEpt));
  M.vmcs().set(F::ExceptionBitmap, 1u << vec::UD);
  M.loadGuest(switchAndRead(1));
  M.launch();
  expectUdExit(M, kGuestCode + kVmfuncOffset);
}

} // namespace
} // namespace vmxsim::test
