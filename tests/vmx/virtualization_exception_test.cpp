// SDM Vol. 3C, "VMX Non-Root Operation" > "Virtualization Exceptions": with "EPT-violation
// #VE" = 1, a convertible EPT violation (bit 63, "suppress #VE", of the deciding EPT
// entry is 0) becomes a virtualization exception (#VE, vector 20) when CR0.PE = 1, no
// event is being delivered through the IDT and the 32 bits at offset 4 of the
// virtualization-exception information area are 0: the area receives what the VM exit
// would have saved plus the EPTP index, and #VE is delivered like any exception (through
// IDT gate 20, or a VM exit if bit 20 of the exception bitmap is 1). EPTP switching loads
// the EPTP index. SDM Vol. 3A, Interrupt 20: a fault without error code, in the page-fault
// class for double faults. (The VM-entry checks on the information address are rows of
// vm_entry_checks.def.)
//
// The guest uses TestMachine's identity paging; EPT maps guest-physical 0..2 MiB identity
// with 4-KByte pages (code, stack, IDT, page tables), a read-only data page at 0x800000,
// and leaves 0x801000 and 0x802000 not present (the latter with "suppress #VE" set).
#include "tests/support/ept_builder.h"
#include "tests/support/vmx_test_machine.h"

#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_exit.h"
#include "mmu/ept.h"

#include <gtest/gtest.h>

#include <vector>

namespace vmxsim::test {
namespace {

using F = VmcsField;
using Bytes = std::vector<uint8_t>;

constexpr uint64_t kEptPool = 0x1000000, kEptPoolBytes = 0x100000;
constexpr uint64_t kVeArea = 0x330000;
constexpr uint64_t kEptpList = 0x331000;
constexpr uint64_t kReadOnly = 0x800000, kNotPresent = 0x801000, kSuppressed = 0x802000;
constexpr uint64_t kVeHandler = 0x150000; ///< the guest's #VE handler: vmcall
constexpr uint64_t kIntHandler = 0x151000; ///< a handler for INT 0x30: vmcall
constexpr uint8_t kVe = 20, kSoftInt = 0x30;

// mov [0x800008], rax; vmcall (the VMCALL follows only if the MOV completes)
const Bytes kWriteReadOnly{0x48, 0x89, 0x04, 0x25, 0x08, 0x00, 0x80, 0x00, 0x0f, 0x01, 0xc1};
// mov rax, [0x801010]; vmcall
const Bytes kReadNotPresent{0x48, 0x8b, 0x04, 0x25, 0x10, 0x10, 0x80, 0x00, 0x0f, 0x01, 0xc1};
// mov rax, [0x802010]; vmcall
const Bytes kReadSuppressed{0x48, 0x8b, 0x04, 0x25, 0x10, 0x20, 0x80, 0x00, 0x0f, 0x01, 0xc1};

void writeGate(VmxTestMachine &M, uint8_t Vector, uint64_t Handler) {
  const uint64_t Lo = (Handler & 0xffff) | (uint64_t(kSelCode64) << 16) |
                      (uint64_t(0x8e) << 40) | (((Handler >> 16) & 0xffff) << 48);
  const uint64_t Hi = Handler >> 32;
  M.write(kIdtBase + 16 * Vector, &Lo, 8);
  M.write(kIdtBase + 16 * Vector + 8, &Hi, 8);
}

struct VeMachine : VmxTestMachine {
  VeMachine() : VmxTestMachine(VmxProfile::full()), Ept(*this, kEptPool, kEptPoolBytes) {
    Ept.identity4K(0, 0x200000);
    Ept.map4K(kReadOnly, kReadOnly, ept::R);
    Ept.map4K(kNotPresent, kNotPresent); // creates the page table...
    setLeaf(kNotPresent, 0);             // ...then not present, suppress #VE 0
    setLeaf(kSuppressed, eptentry::SuppressVe);
    const std::vector<uint8_t> Zero(4096, 0);
    write(kVeArea, Zero.data(), Zero.size());
    const uint64_t List[2] = {Ept.eptp(), Ept.eptp()};
    write(kEptpList, List, sizeof(List));
    const uint8_t Vmcall[] = {0x0f, 0x01, 0xc1};
    write(kVeHandler, Vmcall, sizeof(Vmcall));
    write(kIntHandler, Vmcall, sizeof(Vmcall));
    writeGate(*this, kVe, kVeHandler);
    writeGate(*this, kSoftInt, kIntHandler);
    VmcsData &V = vmcs();
    V.set(F::GuestIdtrLimit, 0xfff);
    V.set(F::PrimaryProcessorBasedVmExecutionControls,
          V.get(F::PrimaryProcessorBasedVmExecutionControls) |
              controlBit(VmxControl::ActivateSecondaryControls));
    V.set(F::SecondaryProcessorBasedVmExecutionControls,
          controlBit(VmxControl::EnableEpt) | controlBit(VmxControl::EptViolationVe) |
              controlBit(VmxControl::EnableVmFunctions));
    V.set(F::EptPointer, Ept.eptp());
    V.set(F::VirtualizationExceptionInformationAddress, kVeArea);
    V.set(F::VmFunctionControls, 1); // EPTP switching
    V.set(F::EptpListAddress, kEptpList);
    V.set(F::EptpIndex, 7);
    const uint8_t Hlt = 0xf4;
    write(kHostCode, &Hlt, 1);
  }
  void setLeaf(uint64_t Gpa, uint64_t E) { write(Ept.leafAddress(Gpa), &E, 8); }
  /// Runs Guest until the host halts after the guest's VM exit; FirstException is the
  /// first exception the processor raised on the way (-1: none).
  void runGuest(const Bytes &Guest, int FirstException = -1) {
    write(kGuestCode, Guest.data(), Guest.size());
    StepResult R = exec(enc::Vmlaunch, 20);
    if (FirstException < 0) {
      EXPECT_FALSE(R.Faulted) << "vector " << unsigned(R.Vector);
    } else {
      EXPECT_TRUE(R.Faulted);
      EXPECT_EQ(R.Vector, FirstException);
      EXPECT_EQ(R.ErrorCode, 0u);
    }
    ASSERT_EQ(R.Why, StopReason::Halted);
    ASSERT_FALSE(Cpu_.NonRoot);
  }
  uint64_t exitReason() { return vmcs().get(F::ExitReason); }
  uint64_t area(uint64_t Offset, unsigned Size) { return Mem.read(Hpa(kVeArea + Offset), Size); }
  /// The #VE handler ran (its VMCALL exited) on the frame of a fault at FaultRip.
  void expectVeDelivered(uint64_t FaultRip) {
    EXPECT_EQ(exitReason(), uint64_t(ExitReason::Vmcall));
    EXPECT_EQ(vmcs().get(F::GuestRip), kVeHandler);
    // No error code: the frame starts with the return RIP (the faulting instruction).
    const uint64_t Rsp = vmcs().get(F::GuestRsp);
    EXPECT_EQ(read64(Rsp), FaultRip);
    EXPECT_EQ(read64(Rsp + 8), kSelCode64);
  }
  void expectEptViolationExit(uint64_t Gpa) {
    EXPECT_EQ(exitReason(), uint64_t(ExitReason::EptViolation));
    EXPECT_EQ(vmcs().get(F::GuestPhysicalAddress), Gpa);
  }

  EptBuilder Ept;
};

TEST(VmxNonRootOperation, ConvertibleEptViolationOnWriteDeliversVeWithInformation) {
  VeMachine M;
  M.runGuest(kWriteReadOnly, kVe);
  M.expectVeDelivered(kGuestCode);
  // Table "Format of the Virtualization-Exception Information Area".
  EXPECT_EQ(M.area(0, 4), 48u);           // exit reason: EPT violation
  EXPECT_EQ(M.area(4, 4), 0xffffffffu);   // set by the delivery
  // Data write; readable; guest-linear address valid and translated.
  // Bits 9 and 10: the advanced information of a user-mode read/write page.
  EXPECT_EQ(M.area(8, 8), 0x2u | 0x8u | 0x80u | 0x100u | 0x600u);
  EXPECT_EQ(M.area(16, 8), kReadOnly + 8); // guest-linear address
  EXPECT_EQ(M.area(24, 8), kReadOnly + 8); // guest-physical address
  EXPECT_EQ(M.area(32, 2), 7u);            // EPTP index
  EXPECT_EQ(M.read64(kReadOnly + 8), 0u);  // the write did not happen
}

TEST(VmxNonRootOperation, NotPresentEntryWithSuppressVeClearDeliversVe) {
  VeMachine M;
  M.runGuest(kReadNotPresent, kVe);
  M.expectVeDelivered(kGuestCode);
  EXPECT_EQ(M.area(8, 8), 0x1u | 0x80u | 0x100u | 0x600u); // data read, no rights
  EXPECT_EQ(M.area(24, 8), kNotPresent + 0x10);
}

TEST(VmxNonRootOperation, SuppressVeBitOfTheDecidingEntryKeepsTheVmExit) {
  // Not present with bit 63 set.
  VeMachine M;
  M.runGuest(kReadSuppressed);
  M.expectEptViolationExit(kSuppressed + 0x10);
  EXPECT_EQ(M.area(4, 4), 0u);
  // A page-mapping entry with bit 63 set.
  VeMachine M2;
  M2.setLeaf(kReadOnly, kReadOnly | ept::R | ept::MemTypeWb | eptentry::SuppressVe);
  M2.runGuest(kWriteReadOnly);
  M2.expectEptViolationExit(kReadOnly + 8);
  EXPECT_EQ(M2.area(4, 4), 0u);
}

TEST(VmxNonRootOperation, SuppressVeOfANonLeafEntryIsNotConsulted) {
  // Bit 63 of the PDE that references the page table does not matter.
  VeMachine M;
  const uint64_t PdeAddr = [&] {
    uint64_t T = M.Ept.eptp() & ~uint64_t(0xfff);
    for (int L = 4; L > 2; --L)
      T = M.read64(T + 8 * ((kReadOnly >> (12 + 9 * (L - 1))) & 511)) & 0xffffffffff000ull;
    return T + 8 * ((kReadOnly >> 21) & 511);
  }();
  const uint64_t E = M.read64(PdeAddr) | eptentry::SuppressVe;
  M.write(PdeAddr, &E, 8);
  M.runGuest(kWriteReadOnly, kVe);
  M.expectVeDelivered(kGuestCode);
}

TEST(VmxNonRootOperation, VeInformationWordNotZeroKeepsTheVmExit) {
  VeMachine M;
  const uint32_t Busy = 1;
  M.write(kVeArea + 4, &Busy, 4);
  M.runGuest(kReadNotPresent);
  M.expectEptViolationExit(kNotPresent + 0x10);
  EXPECT_EQ(M.area(0, 4), 0u); // nothing saved
  EXPECT_EQ(M.vmcs().get(F::ExitQualification), 0x781u);
}

TEST(VmxNonRootOperation, SecondVeWaitsUntilSoftwareClearsTheWord) {
  // The #VE handler itself makes a convertible access: the word is FFFFFFFFH now, so it
  // is an EPT-violation VM exit.
  VeMachine M;
  M.write(kVeHandler, kReadNotPresent.data(), kReadNotPresent.size());
  M.runGuest(kWriteReadOnly, kVe);
  M.expectEptViolationExit(kNotPresent + 0x10);
  EXPECT_EQ(M.vmcs().get(F::GuestRip), kVeHandler);
  EXPECT_EQ(M.area(24, 8), kReadOnly + 8); // the first #VE's information stays
}

TEST(VmxNonRootOperation, EptViolationVeControlClearKeepsTheVmExit) {
  VeMachine M;
  M.vmcs().set(F::SecondaryProcessorBasedVmExecutionControls,
               controlBit(VmxControl::EnableEpt));
  M.runGuest(kReadNotPresent);
  M.expectEptViolationExit(kNotPresent + 0x10);
  EXPECT_EQ(M.area(4, 4), 0u);
}

TEST(VmxNonRootOperation, EptViolationDuringEventDeliveryIsNotConverted) {
  // mov rsp, 0x801100; int 0x30 — the delivery's stack push hits the not-present page.
  VeMachine M;
  M.runGuest({0x48, 0xbc, 0x00, 0x11, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0xcd, kSoftInt});
  M.expectEptViolationExit(kNotPresent + 0x0f8);
  // IDT-vectoring information: valid, software interrupt (4), vector 0x30.
  EXPECT_EQ(M.vmcs().get(F::IdtVectoringInformation), 0x80000000u | (4u << 8) | kSoftInt);
  EXPECT_EQ(M.area(4, 4), 0u);
}

TEST(VmxNonRootOperation, VeWithExceptionBitmapBit20ExitsAfterSavingTheInformation) {
  VeMachine M;
  M.vmcs().set(F::ExceptionBitmap, 1u << kVe);
  M.runGuest(kReadNotPresent, kVe);
  const VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::ExceptionOrNmi));
  // Valid, hardware exception (3), vector 20, no error code.
  EXPECT_EQ(V.get(F::VmExitInterruptionInformation), 0x80000000u | (3u << 8) | kVe);
  EXPECT_EQ(V.get(F::ExitQualification), 0u);
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode);
  EXPECT_EQ(M.area(4, 4), 0xffffffffu);
  EXPECT_EQ(M.area(24, 8), kNotPresent + 0x10);
}

TEST(VmxNonRootOperation, FaultDuringVeDeliveryIsADoubleFault) {
  // #VE is in the page-fault class: a contributory #SS while delivering it (a
  // non-canonical stack) makes #DF, which exits through the exception bitmap. (Were #VE
  // benign, the #SS would be delivered on its own: its gate uses IST 1, a good stack,
  // and its handler's VMCALL would exit.)
  VeMachine M;
  const uint64_t Ist1 = 0x70000;
  M.write(M.Layout.TrBase + 36, &Ist1, 8);
  writeGate(M, 12, kIntHandler);
  uint8_t IstIndex = 1;
  M.write(kIdtBase + 16 * 12 + 4, &IstIndex, 1);
  M.vmcs().set(F::ExceptionBitmap, 1u << 8);
  M.vmcs().set(F::GuestRsp, 0x0000800000000010ull);
  M.runGuest(kReadNotPresent, kVe);
  const VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(ExitReason::ExceptionOrNmi));
  // Valid, hardware exception, error code valid, vector 8; error code 0.
  EXPECT_EQ(V.get(F::VmExitInterruptionInformation), 0x80000b08u);
  EXPECT_EQ(V.get(F::VmExitInterruptionErrorCode), 0u);
}

TEST(VmxNonRootOperation, EptpSwitchingLoadsTheEptpIndexThatVeSaves) {
  // xor eax, eax; mov ecx, 1; vmfunc; mov rax, [0x801010]; vmcall
  VeMachine M;
  M.runGuest({0x31, 0xc0, 0xb9, 0x01, 0x00, 0x00, 0x00, 0x0f, 0x01, 0xd4, 0x48, 0x8b, 0x04,
              0x25, 0x10, 0x10, 0x80, 0x00, 0x0f, 0x01, 0xc1}, kVe);
  M.expectVeDelivered(kGuestCode + 10);
  EXPECT_EQ(M.vmcs().get(F::EptpIndex), 1u);
  EXPECT_EQ(M.area(32, 2), 1u);
}

TEST(VmxCapabilities, FullProfileAdvertisesEptViolationVe) {
  const VmxProfile &P = VmxProfile::full();
  EXPECT_TRUE(P.has(VmxFeature::EptViolationVe));
  EXPECT_FALSE(VmxProfile::kvmNested().has(VmxFeature::EptViolationVe));
  const uint64_t Ctls2 = vmxCapabilityMsr(P, 0x48b, 0).value_or(0);
  EXPECT_TRUE((Ctls2 >> 32) & controlBit(VmxControl::EptViolationVe));
}

} // namespace
} // namespace vmxsim::test
