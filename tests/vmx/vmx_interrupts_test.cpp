// A local APIC timer driving a guest in VMX non-root operation (SDM Vol. 3C, "VMX
// Non-Root Operation" > "Other Causes of VM Exits" (external interrupts, interrupt-window
// exiting), "VM Exits" > "Information for VM Exits Due to Vectored Events", "VM Entries"
// > "Event Injection"; SDM Vol. 3A, APIC Timer).
//
// The machine is a VmxTestMachine whose CPU has a harness LocalApic as its interrupt
// source (INTR/INTA). The test plays the hypervisor: after each VM exit (the host halts
// at kHostCode), it reads the exit information, EOIs the APIC, programs VM-entry
// interruption information and executes VMRESUME. The run is driven like the machine's
// scheduler: the CPU stops exactly when the timer is due, so the timer's interrupt is
// seen at the first instruction boundary at or after its deadline. The guest spins on
// 1-cycle instructions, so that boundary is the deadline itself.
#include "cpu/cost_model.h"
#include "cpu/vmx/capabilities.h"
#include "harness/devices/local_apic.h"
#include "tests/support/vmx_test_machine.h"

#include <gtest/gtest.h>

namespace vmxsim::test {
namespace {

using F = VmcsField;

constexpr uint64_t kHandler = 0x150000; ///< the guest's handler for kVector
constexpr uint64_t kCounter = 0x160000; ///< the handler's interrupt count (dword)
constexpr uint8_t kVector = 0x40;
constexpr uint32_t kCount = 1000, kDivideCode = 0; ///< initial count C; divide by D = 2
constexpr uint64_t kPeriod = uint64_t(kCount) * 2;  ///< C x D bus (= virtual) cycles

class ApicVmxMachine : public VmxTestMachine {
public:
  ApicVmxMachine() : Apic(Cpu_, Bus, 0) {
    Bus.Apics.push_back(&Apic);
    Cpu_.Intr = &Apic;
    Cpu_.Apic = &Apic;
    const uint8_t Hlt = 0xf4;
    write(kHostCode, &Hlt, 1);
    // Handler: inc dword [kCounter]; iretq.
    const uint8_t Handler[] = {0xff, 0x04, 0x25, uint8_t(kCounter), uint8_t(kCounter >> 8),
                               uint8_t(kCounter >> 16), 0x00, 0x48, 0xcf};
    write(kHandler, Handler, sizeof(Handler));
    // A 64-bit interrupt gate for kVector.
    const uint64_t Lo = (kHandler & 0xffff) | (uint64_t(kSelCode64) << 16) |
                        (uint64_t(0x8e) << 40) | (((kHandler >> 16) & 0xffff) << 48);
    const uint64_t Hi = kHandler >> 32;
    write(kIdtBase + 16 * kVector, &Lo, 8);
    write(kIdtBase + 16 * kVector + 8, &Hi, 8);
    vmcs().set(F::GuestIdtrLimit, 0xfff);
    setControl(F::PinBasedVmExecutionControls, VmxControl::ExternalInterruptExiting);
    setControl(F::PrimaryVmExitControls, VmxControl::AcknowledgeInterruptOnExit);
  }
  void setControl(F Word, VmxControl Ctl, bool On = true) {
    uint64_t V = vmcs().get(Word);
    vmcs().set(Word, On ? V | controlBit(Ctl) : V & ~uint64_t(controlBit(Ctl)));
  }
  void guest(const std::vector<uint8_t> &Code) { write(kGuestCode, Code.data(), Code.size()); }
  /// Starts the periodic timer now (SDM Vol. 3A, APIC Timer: the count starts at the
  /// initial-count write); returns that cycle.
  uint64_t startPeriodicTimer() {
    Apic.writeReg(LocalApic::Svr, 0x1ff);
    Apic.writeReg(LocalApic::LvtTimer, (1u << 17) | kVector); // periodic
    Apic.writeReg(LocalApic::TimerDivide, kDivideCode);
    Apic.writeReg(LocalApic::TimerInitial, kCount);
    return Cpu_.Cycles;
  }
  /// Runs Code at kCodeBase (VMLAUNCH / VMRESUME) until the host halts after a VM exit,
  /// stopping at every timer deadline as the machine's scheduler does.
  StopReason go(const std::vector<uint8_t> &Code) {
    loadCode(Code);
    Cpu_.Mmu.flushDecodeCache();
    Cpu_.Activity = ActivityState::Active;
    for (unsigned K = 0; K < 1000; ++K) {
      const uint64_t T = Apic.nextTimerEvent();
      StopReason R = Cpu_.run(100000, T > Cpu_.Cycles ? T : ~uint64_t(0));
      if (R != StopReason::Deadline)
        return R;
    }
    return StopReason::InsnLimit;
  }
  uint64_t get(F Field) { return vmcs().get(Field); }
  uint32_t reason() { return uint32_t(get(F::ExitReason)); }
  bool exitedToHost() { return !Cpu_.NonRoot && S.Rip == kHostCode + 1; }
  uint32_t counter() { return uint32_t(Mem.read(Hpa(kCounter), 4)); }
  /// The host's end-of-interrupt for the acknowledged vector.
  void eoi() { Apic.writeReg(LocalApic::Eoi, 0); }
  /// VM-entry interruption information: valid, external interrupt (type 0), vector.
  void inject(uint8_t Vector) { vmcs().set(F::VmEntryInterruptionInformation, 0x80000000u | Vector); }

  ApicBus Bus;
  LocalApic Apic;
};

const uint64_t kExit = costOf(CostClass::VmTransition);
const uint64_t kHlt = costOf(CostClass::Halt);

} // namespace

TEST(VmxNonRootOperation, PeriodicApicTimerExitsAtEachPredictedCycleAndInjectionIsDelivered) {
  ApicVmxMachine M;
  M.guest({0xeb, 0xfe}); // jmp $ (1 cycle per iteration)
  M.vmcs().set(F::GuestRflags, 0x202);
  const uint64_t Start = M.startPeriodicTimer();
  ASSERT_EQ(M.go(enc::Vmlaunch), StopReason::Halted);
  for (unsigned K = 1; K <= 3; ++K) {
    ASSERT_TRUE(M.exitedToHost()) << K;
    EXPECT_EQ(M.reason(), 1u) << K;
    // Acknowledge interrupt on exit: valid, external interrupt, the timer's vector.
    EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000000u | kVector) << K;
    EXPECT_EQ(M.get(F::GuestRip), kGuestCode) << K;
    // The exit happened at the deadline Start + K x C x D; the host then spent the VM
    // exit's cost and its HLT.
    EXPECT_EQ(M.Cpu_.Cycles, Start + K * kPeriod + kExit + kHlt) << K;
    EXPECT_EQ(M.Apic.nextTimerEvent(), Start + (K + 1) * kPeriod) << K;
    EXPECT_EQ(M.Apic.readReg(LocalApic::Isr0 + 0x20), 1u) << K; // 0x40 in service
    EXPECT_EQ(M.counter(), K - 1) << K;
    M.eoi();
    M.inject(kVector);
    ASSERT_EQ(M.go(enc::Vmresume), StopReason::Halted) << K;
  }
  EXPECT_EQ(M.counter(), 3u); // each injected interrupt reached the guest's handler
  EXPECT_EQ(M.get(F::VmEntryInterruptionInformation) >> 31, 0u); // consumed by entry
}

TEST(VmxNonRootOperation, InterruptWindowExitFollowsGuestStiAfterTimerExitWithIfClear) {
  ApicVmxMachine M;
  // cli; mov ecx, 1500; L: dec ecx; jnz L; sti; nop; jmp $ — the loop (2 cycles per
  // iteration) spans the timer's first deadline and ends well before its second.
  M.guest({0xfa, 0xb9, 0xdc, 0x05, 0x00, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0xfb, 0x90, 0xeb,
           0xfe});
  M.vmcs().set(F::GuestRflags, 0x202);
  const uint64_t Start = M.startPeriodicTimer();
  ASSERT_EQ(M.go(enc::Vmlaunch), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 1u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0x80000000u | kVector);
  EXPECT_EQ(M.Cpu_.Cycles, Start + kPeriod + kExit + kHlt);
  // The guest is in its CLI loop: it cannot take the interrupt now.
  EXPECT_EQ(M.get(F::GuestRflags) & rflags::IF, 0u);
  const uint64_t LoopRip = M.get(F::GuestRip);
  EXPECT_TRUE(LoopRip == kGuestCode + 6 || LoopRip == kGuestCode + 8) << std::hex << LoopRip;
  M.eoi();
  M.setControl(F::PrimaryProcessorBasedVmExecutionControls,
               VmxControl::InterruptWindowExiting);
  ASSERT_EQ(M.go(enc::Vmresume), StopReason::Halted);
  ASSERT_TRUE(M.exitedToHost());
  // Exit 7 after the STI and the one instruction in its shadow (the NOP).
  EXPECT_EQ(M.reason(), 7u);
  EXPECT_EQ(M.get(F::GuestRip), kGuestCode + 12);
  EXPECT_EQ(M.get(F::GuestRflags) & rflags::IF, rflags::IF);
  EXPECT_EQ(M.get(F::GuestInterruptibilityState), 0u);
  EXPECT_EQ(M.get(F::VmExitInterruptionInformation), 0u);
  EXPECT_EQ(M.counter(), 0u);
  M.setControl(F::PrimaryProcessorBasedVmExecutionControls,
               VmxControl::InterruptWindowExiting, false);
  M.inject(kVector);
  ASSERT_EQ(M.go(enc::Vmresume), StopReason::Halted);
  EXPECT_EQ(M.counter(), 1u);
  // The next exit is the timer's second period.
  ASSERT_TRUE(M.exitedToHost());
  EXPECT_EQ(M.reason(), 1u);
  EXPECT_EQ(M.Cpu_.Cycles, Start + 2 * kPeriod + kExit + kHlt);
}

} // namespace vmxsim::test
