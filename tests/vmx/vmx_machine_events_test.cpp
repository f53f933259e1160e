// Guests in VMX non-root operation on the whole machine: the deterministic scheduler, the
// local APICs and the I/O APIC (SDM Vol. 3C, "VMX Non-Root Operation" > "Other Causes of
// VM Exits" and "Changes to Event Blocking"; "VM Exits" > "Information for VM Exits Due
// to Vectored Events"; "VMX-Preemption Timer"; SDM Vol. 3A, APIC Timer).
//
// Each CPU the test uses is put in VMX root operation directly (enterVmxRootOperation,
// tests/support/vmx_test_machine.h) with the known-good VMCS; its host code records RDTSC
// and stops the machine through isa-debug-exit with 0x10 + its CPU number, so the test
// sees exactly which CPU exited and when. The guests spin on 1-cycle instructions, so
// every virtual cycle is an instruction boundary and the cycle of an event is exact.
#include "cpu/cost_model.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vmcs_controls.h"
#include "harness/machine.h"
#include "tests/support/vmx_test_machine.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace vmxsim::test {
namespace {

using F = VmcsField;

constexpr uint64_t kRegions = 0x300000; ///< + 0x10000 * CPU: VMXON, VMCS, scratch, stub
constexpr uint64_t kGuest = 0x400000;   ///< + 0x10000 * CPU: guest code
constexpr uint64_t kHost = 0x500000;    ///< + 0x10000 * CPU: host code
constexpr uint64_t kStamps = 0x600000;  ///< + 0x100 * CPU: host TSC, handler TSC, guest TSC
constexpr uint64_t kHandler = 0x700000; ///< the guest's handler for kVector
constexpr uint8_t kVector = 0x40;
constexpr uint8_t kHandlerExit = 0x40; ///< isa-debug-exit value of the guest's handler

const uint64_t kTransition = costOf(CostClass::VmTransition);
const uint64_t kDelivery = costOf(CostClass::Interrupt);
const uint64_t kRdtsc = costOf(CostClass::System);

void put(std::vector<uint8_t> &Code, std::initializer_list<uint8_t> Bytes) {
  Code.insert(Code.end(), Bytes);
}
void put32(std::vector<uint8_t> &Code, uint32_t V) {
  for (unsigned I = 0; I < 4; ++I)
    Code.push_back(uint8_t(V >> (8 * I)));
}
/// rdtsc; mov [Slot], eax; mov [Slot + 4], edx (Slot below 2 GiB).
void stampTsc(std::vector<uint8_t> &Code, uint32_t Slot) {
  put(Code, {0x0f, 0x31, 0x89, 0x04, 0x25});
  put32(Code, Slot);
  put(Code, {0x89, 0x14, 0x25});
  put32(Code, Slot + 4);
}
/// mov al, Value; out 0xf4, al; hlt.
void debugExit(std::vector<uint8_t> &Code, uint8_t Value) {
  put(Code, {0xb0, Value, 0xe6, 0xf4, 0xf4});
}

class VmxMachine {
public:
  explicit VmxMachine(unsigned Cpus) {
    MachineConfig Cfg;
    Cfg.NumCpus = Cpus;
    Cfg.Vmx = &VmxProfile::full();
    Cfg.Serial = OutputSpec::capture();
    Cfg.Debugcon = OutputSpec::capture();
    Cfg.MaxInsns = 10'000'000;
    Error Err;
    M = Machine::create(Cfg, Err);
    EXPECT_TRUE(M) << Err.str();
    writeFlatGdt(M->mem());
    // The guest's handler: stamp the TSC, stop the machine.
    std::vector<uint8_t> H;
    stampTsc(H, uint32_t(kStamps + 8)); // CPU 0's slot; the tests take it on CPU 0
    debugExit(H, kHandlerExit);
    write(kHandler, H);
    // A 64-bit interrupt gate for kVector in the known-good layout's IDT.
    const uint64_t Lo = (kHandler & 0xffff) | (uint64_t(kSelCode64) << 16) |
                        (uint64_t(0x8e) << 40) | (((kHandler >> 16) & 0xffff) << 48);
    const uint64_t Hi = kHandler >> 32;
    M->mem().copyIn(Hpa(kIdtBase + 16 * kVector), &Lo, 8);
    M->mem().copyIn(Hpa(kIdtBase + 16 * kVector + 8), &Hi, 8);
  }

  /// CPU I in VMX root operation with its own regions, host and guest code, stacks, and
  /// the launch stub (vmlaunch; on failure debug exit 0xee) at RIP.
  /// Root is executed before the VMLAUNCH (e.g. a wait for another CPU).
  void enterVmx(unsigned I, const std::vector<uint8_t> &GuestCode,
                const std::vector<uint8_t> &Root = {}) {
    Cpu &C = M->cpu(I);
    KnownGoodLayout L;
    L.GuestRip = kGuest + 0x10000 * I;
    L.HostRip = kHost + 0x10000 * I;
    L.GuestRsp = 0x60000 - 0x2000 * I;
    L.HostRsp = 0x70000 - 0x2000 * I;
    const uint64_t R = kRegions + 0x10000 * I;
    ASSERT_TRUE(enterVmxRootOperation(C, M->mem(), VmxProfile::full(), L, R, R + 0x1000,
                                      R + 0x2000));
    vmcs(I).set(F::GuestIdtrLimit, 0xfff);
    std::vector<uint8_t> Host;
    stampTsc(Host, uint32_t(kStamps + 0x100 * I));
    debugExit(Host, uint8_t(0x10 + I));
    write(L.HostRip, Host);
    write(L.GuestRip, GuestCode);
    std::vector<uint8_t> Stub = Root;
    put(Stub, {0x0f, 0x01, 0xc2});
    debugExit(Stub, 0xee);
    write(R + 0x3000, Stub);
    C.S.Rip = R + 0x3000;
    C.Activity = ActivityState::Active;
    C.Mmu.flushDecodeCache();
  }
  void write(uint64_t Addr, const std::vector<uint8_t> &Bytes) {
    ASSERT_TRUE(M->mem().copyIn(Hpa(Addr), Bytes.data(), Bytes.size()));
  }
  uint64_t read64(uint64_t Addr) {
    uint64_t V = 0;
    EXPECT_TRUE(M->mem().copyOut(Hpa(Addr), &V, 8));
    return V;
  }
  VmcsData &vmcs(unsigned I) { return M->cpu(I).Vmx->Vmcs; }
  void setControl(unsigned I, F Word, VmxControl Ctl) {
    vmcs(I).set(Word, vmcs(I).get(Word) | controlBit(Ctl));
  }
  uint64_t hostTsc(unsigned I) { return read64(kStamps + 0x100 * I); }
  uint64_t handlerTsc() { return read64(kStamps + 8); }
  uint64_t guestTsc(unsigned I) { return read64(kStamps + 0x100 * I + 16); }

  std::unique_ptr<Machine> M;
};

/// How the local APIC timer is armed: one-shot through the xAPIC page (initial count),
/// or in TSC-deadline mode through WRMSR IA32_TSC_DEADLINE (root operation only: the
/// known-good VMCS makes every guest WRMSR exit).
enum class Arming { OneShotMmio, TscDeadlineMsr };

/// Code that programs the local APIC (SVR enabled, LVT timer kVector in the mode of A,
/// divide by 1) to fire Count cycles after the TSC value it records, just before arming,
/// in its CPU's guest-TSC slot: for the initial count, the store that arms it follows
/// the RDTSC, so the count starts kRdtsc later.
std::vector<uint8_t> armApicTimer(unsigned CpuIndex, uint32_t Count, Arming A) {
  std::vector<uint8_t> G;
  const uint8_t LvtMode = A == Arming::TscDeadlineMsr ? 0x04 : 0x00; // bits 18:17
  put(G, {0xbb, 0x00, 0x00, 0xe0, 0xfe});                         // mov ebx, 0xfee00000
  put(G, {0xc7, 0x83, 0xf0, 0x00, 0x00, 0x00, 0xff, 0x01, 0, 0}); // SVR = 0x1ff
  put(G, {0xc7, 0x83, 0x20, 0x03, 0x00, 0x00, kVector, 0, LvtMode, 0}); // LVT timer
  put(G, {0xc7, 0x83, 0xe0, 0x03, 0x00, 0x00, 0x0b, 0, 0, 0});    // divide by 1
  put(G, {0xb9});                                                 // mov ecx, Count
  put32(G, Count);
  put(G, {0x0f, 0x31}); // rdtsc
  if (A == Arming::OneShotMmio) {
    put(G, {0x89, 0x8b, 0x80, 0x03, 0, 0}); // mov [rbx + 0x380], ecx: armed
  }
  put(G, {0x89, 0x04, 0x25}); // mov [slot], eax
  put32(G, uint32_t(kStamps + 0x100 * CpuIndex + 16));
  put(G, {0x89, 0x14, 0x25}); // mov [slot + 4], edx
  put32(G, uint32_t(kStamps + 0x100 * CpuIndex + 20));
  if (A == Arming::TscDeadlineMsr) {
    put(G, {0x01, 0xc8, 0x83, 0xd2, 0x00}); // add eax, ecx; adc edx, 0
    put(G, {0xb9, 0xe0, 0x06, 0x00, 0x00}); // mov ecx, IA32_TSC_DEADLINE
    put(G, {0x0f, 0x30});                   // wrmsr: armed
  }
  return G;
}

/// sti; L: nop; jmp L.
const std::vector<uint8_t> kNopLoop = {0xfb, 0x90, 0xeb, 0xfd};

} // namespace

// A local-APIC timer that expires while a guest runs a NOP loop after STI (not halted)
// is taken at the first instruction boundary at or after its deadline: through the
// guest IDT without external-interrupt exiting, as exit 1 carrying the vector with it
// and "acknowledge interrupt on exit" (SDM Vol. 3C, "Information for VM Exits Due to
// Vectored Events"). Armed by the guest (it owns the local APIC) or by the host before
// VMLAUNCH, one-shot or in TSC-deadline mode; on one CPU and on two (the scheduler's
// quanta).
TEST(VmxNonRootOperation, ApicTimerExpiringDuringAGuestNopLoopIsTakenOnTime) {
  constexpr uint32_t kCount = 5000;
  struct Case {
    const char *Name;
    bool ByGuest;
    Arming How;
  };
  for (const Case &K : {Case{"guest, one-shot", true, Arming::OneShotMmio},
                        Case{"host, one-shot", false, Arming::OneShotMmio},
                        Case{"host, TSC deadline", false, Arming::TscDeadlineMsr}}) {
    for (unsigned Cpus : {1u, 2u}) {
      for (bool Exiting : {false, true}) {
        SCOPED_TRACE(testing::Message() << K.Name << ", " << Cpus << " CPUs, exiting "
                                        << Exiting);
        VmxMachine V(Cpus);
        const std::vector<uint8_t> Arm = armApicTimer(0, kCount, K.How);
        if (K.ByGuest) {
          std::vector<uint8_t> Guest = Arm;
          Guest.insert(Guest.end(), kNopLoop.begin(), kNopLoop.end());
          V.enterVmx(0, Guest);
        } else {
          V.enterVmx(0, kNopLoop, Arm);
        }
        if (Exiting) {
          V.setControl(0, F::PinBasedVmExecutionControls,
                       VmxControl::ExternalInterruptExiting);
          V.setControl(0, F::PrimaryVmExitControls, VmxControl::AcknowledgeInterruptOnExit);
        }
        RunResult R = V.M->run();
        ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
        const uint64_t Deadline =
            V.guestTsc(0) + (K.How == Arming::OneShotMmio ? kRdtsc : 0) + kCount;
        if (!Exiting) {
          EXPECT_EQ(R.ExitValue, kHandlerExit);
          EXPECT_TRUE(V.M->cpu(0).NonRoot);
          EXPECT_EQ(V.handlerTsc(), Deadline + kDelivery);
          continue;
        }
        EXPECT_EQ(R.ExitValue, 0x10u);
        EXPECT_EQ(V.vmcs(0).get(F::ExitReason), 1u);
        EXPECT_EQ(V.vmcs(0).get(F::VmExitInterruptionInformation), 0x80000000u | kVector);
        EXPECT_EQ(V.hostTsc(0), Deadline + kTransition);
        // Acknowledged: in service, no longer requested.
        EXPECT_EQ(V.M->localApic(0).readReg(LocalApic::Isr0 + 0x20), 1u);
        EXPECT_EQ(V.M->localApic(0).readReg(LocalApic::Irr0 + 0x20), 0u);
      }
    }
  }
}

// A guest that executes HLT (HLT exiting off) with the VMX-preemption timer armed wakes
// at the timer's expiry with exit 52, the HLT activity state saved and RIP after the
// HLT (SDM Vol. 3C, "VMX-Preemption Timer": the timer counts in the HLT state), however
// many CPUs the machine has: the timer is a wake-up the scheduler knows.
TEST(VmxNonRootOperation, PreemptionTimerWakesAGuestInHltOnAnyNumberOfCpus) {
  constexpr uint64_t kTimer = 100;
  const unsigned Rate = VmxProfile::full().PreemptionTimerRate;
  for (unsigned Cpus : {1u, 2u, 3u}) {
    SCOPED_TRACE(testing::Message() << Cpus << " CPUs");
    VmxMachine V(Cpus);
    V.enterVmx(0, {0xf4, 0xeb, 0xfd}); // L: hlt; jmp L
    V.setControl(0, F::PinBasedVmExecutionControls, VmxControl::ActivateVmxPreemptionTimer);
    V.vmcs(0).set(F::VmxPreemptionTimerValue, kTimer);
    // VM entry loads the timer after the transition's cost (cpu/vmx/vm_entry.cpp).
    const uint64_t Entry = V.M->cpu(0).Cycles + kTransition;
    const uint64_t Expiry = ((Entry >> Rate) + kTimer) << Rate;
    RunResult R = V.M->run();
    ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
    EXPECT_EQ(R.ExitValue, 0x10u);
    EXPECT_EQ(V.vmcs(0).get(F::ExitReason), 52u);
    EXPECT_EQ(V.vmcs(0).get(F::GuestActivityState), 1u); // HLT
    EXPECT_EQ(V.vmcs(0).get(F::GuestRip), kGuest + 1);
    EXPECT_EQ(V.hostTsc(0), Expiry + kTransition);
  }
}

// The other VMX wake-ups of a guest entered in the HLT activity state, on several CPUs:
// a pending MTF VM exit injected at entry (type 7, vector 0: SDM Vol. 3C, "Injection of
// Pending MTF VM Exits") is not a vectoring entry, so the guest is in HLT after it, and
// the MTF VM exit comes at once with the HLT state saved ("If an MTF VM exit occurs in
// the HLT activity state, the logical processor returns to the active state only after
// the VM exit completes", SDM Vol. 3C, "Activity State" in "VM Exits"); an external interrupt
// injected at entry is delivered through the guest IDT, which makes the guest active
// (SDM Vol. 3C, "Event Injection", "Activity State").
TEST(VmxNonRootOperation, EventsInjectedIntoAHaltedGuestAreTakenOnAnyNumberOfCpus) {
  for (unsigned Cpus : {1u, 2u}) {
    SCOPED_TRACE(testing::Message() << Cpus << " CPUs");
    {
      VmxMachine V(Cpus);
      V.enterVmx(0, {0xf4, 0xeb, 0xfd});
      V.vmcs(0).set(F::GuestActivityState, 1);
      V.vmcs(0).set(F::VmEntryInterruptionInformation, 0x80000000u | (7u << 8));
      RunResult R = V.M->run();
      ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
      EXPECT_EQ(R.ExitValue, 0x10u);
      EXPECT_EQ(V.vmcs(0).get(F::ExitReason), 37u); // monitor trap flag
      EXPECT_EQ(V.vmcs(0).get(F::GuestActivityState), 1u);
      EXPECT_EQ(V.vmcs(0).get(F::GuestRip), kGuest);
    }
    {
      VmxMachine V(Cpus);
      V.enterVmx(0, {0xf4, 0xeb, 0xfd});
      V.vmcs(0).set(F::GuestActivityState, 1);
      V.vmcs(0).set(F::GuestRflags, 0x202); // an injected interrupt needs IF = 1
      V.vmcs(0).set(F::VmEntryInterruptionInformation, 0x80000000u | kVector);
      RunResult R = V.M->run();
      ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
      EXPECT_EQ(R.ExitValue, kHandlerExit);
      EXPECT_TRUE(V.M->cpu(0).NonRoot);
      EXPECT_EQ(V.M->cpu(0).Activity, ActivityState::Active);
    }
  }
}

namespace {

/// A device's interrupt line to an I/O APIC pin, driven by port kLinePort (bit 0 of
/// the value written): the guest's handler "acknowledges the device" by lowering it.
class InterruptLine : public PortDevice {
public:
  static constexpr uint16_t kLinePort = 0x700;
  InterruptLine(IoApic &A, unsigned Pin) : A(A), Pin(Pin) {}
  uint32_t ioRead(uint16_t, unsigned) override { return 0; }
  void ioWrite(uint16_t, unsigned, uint32_t V) override { A.setPin(Pin, V & 1); }

private:
  IoApic &A;
  unsigned Pin;
};

constexpr unsigned kLevelPin = 10;

/// The handler for a level-triggered interrupt: stores the pin's redirection entry
/// (low dword) in the handler-TSC slot, lowers the line, EOIs its local APIC, stores
/// the entry again 4 bytes further, and stops the machine with kHandlerExit.
std::vector<uint8_t> levelHandler() {
  std::vector<uint8_t> H;
  put(H, {0xbb, 0x00, 0x00, 0xc0, 0xfe}); // mov ebx, 0xfec00000
  put(H, {0xc7, 0x03});                   // mov dword [rbx], IOREDTBL low dword
  put32(H, IoApic::RedirIdx + 2 * kLevelPin);
  put(H, {0x8b, 0x43, 0x10, 0x89, 0x04, 0x25}); // mov eax, [rbx + 0x10]; mov [slot], eax
  put32(H, uint32_t(kStamps + 8));
  put(H, {0x66, 0xba});                               // mov dx, kLinePort
  put(H, {uint8_t(InterruptLine::kLinePort), uint8_t(InterruptLine::kLinePort >> 8)});
  put(H, {0x31, 0xc0, 0xee});                         // xor eax, eax; out dx, al
  put(H, {0xbe, 0x00, 0x00, 0xe0, 0xfe});             // mov esi, 0xfee00000
  put(H, {0xc7, 0x86, 0xb0, 0x00, 0x00, 0x00});       // mov dword [rsi + 0xb0], 0: EOI
  put32(H, 0);
  put(H, {0x8b, 0x43, 0x10, 0x89, 0x04, 0x25}); // mov eax, [rbx + 0x10]; mov [slot + 4], eax
  put32(H, uint32_t(kStamps + 12));
  debugExit(H, kHandlerExit);
  return H;
}

} // namespace

// A level-triggered I/O APIC interrupt taken through the IDT by software that owns the
// local APIC, in root operation and by a guest in VMX non-root operation without APIC
// virtualization: remote IRR is set while the interrupt is in service and cleared by the
// EOI's broadcast to the I/O APIC (82093AA data sheet, "I/O Redirection Table
// Registers"; SDM Vol. 3A, "EOI Register").
TEST(VmxNonRootOperation, LevelTriggeredIoApicInterruptSetsRemoteIrrUntilTheEoi) {
  for (bool Guest : {false, true}) {
    SCOPED_TRACE(Guest ? "non-root" : "root");
    VmxMachine V(1);
    V.write(kHandler, levelHandler());
    InterruptLine Line(V.M->ioApic(), kLevelPin);
    V.M->io().add(InterruptLine::kLinePort, 1, &Line);
    const std::vector<uint8_t> Spin = {0xfb, 0x90, 0xeb, 0xfd}; // sti; L: nop; jmp L
    if (Guest) {
      V.enterVmx(0, Spin);
    } else {
      Cpu &C = V.M->cpu(0);
      setupLongMode(C, V.M->mem());
      C.S.Idtr.Limit = 0xfff;
      V.write(kGuest, Spin);
      C.S.Rip = kGuest;
      C.Mmu.flushDecodeCache();
    }
    V.M->localApic(0).writeReg(LocalApic::Svr, 0x1ff);
    // Fixed, physical destination APIC 0, active high, level, unmasked.
    constexpr uint32_t kEntry = kVector | IoApic::kLevel;
    IoApic &A = V.M->ioApic();
    A.writeReg(IoApic::RedirIdx + 2 * kLevelPin + 1, 0);
    A.writeReg(IoApic::RedirIdx + 2 * kLevelPin, kEntry);
    A.setPin(kLevelPin, true);
    EXPECT_EQ(A.readReg(IoApic::RedirIdx + 2 * kLevelPin), kEntry | IoApic::kRemoteIrr);
    RunResult R = V.M->run();
    ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
    EXPECT_EQ(R.ExitValue, kHandlerExit);
    EXPECT_EQ(V.M->cpu(0).NonRoot, Guest);
    const uint64_t Seen = V.handlerTsc();
    EXPECT_EQ(uint32_t(Seen), kEntry | IoApic::kRemoteIrr); // in service
    EXPECT_EQ(uint32_t(Seen >> 32), kEntry);                 // after the EOI
    EXPECT_EQ(A.readReg(IoApic::RedirIdx + 2 * kLevelPin), kEntry);
    EXPECT_EQ(V.M->localApic(0).readReg(LocalApic::Isr0 + 0x20), 0u);
    EXPECT_EQ(V.M->localApic(0).readReg(LocalApic::Tmr0 + 0x20), 0u);
  }
}

namespace {

constexpr uint64_t kSender = 0x800000; ///< CPU 0's code in the INIT/SIPI tests
constexpr uint64_t kFlag = 0x810000;   ///< set to 1 by the sender after its first IPI
constexpr uint32_t kIcrInit = 0x4500;  ///< INIT, level assert, physical
constexpr uint32_t kIcrSipi = 0x4600;  ///< start-up, vector in bits 7:0

/// CPU 0's code: for each ICR value, send it to APIC 1 through the xAPIC page, after a
/// delay of DelayLoops iterations (2 cycles each) when it is not the first; set kFlag
/// right after the first; at the end halt with interrupts off.
std::vector<uint8_t> sender(std::initializer_list<uint32_t> Icrs, uint32_t DelayLoops = 0) {
  std::vector<uint8_t> S;
  put(S, {0xbb, 0x00, 0x00, 0xe0, 0xfe});              // mov ebx, 0xfee00000
  put(S, {0xc7, 0x83, 0x10, 0x03, 0x00, 0x00});        // mov dword [rbx + 0x310], dest 1
  put32(S, 0x01000000);
  bool First = true;
  for (uint32_t Icr : Icrs) {
    if (!First && DelayLoops) {
      put(S, {0xb9});                                  // mov ecx, DelayLoops
      put32(S, DelayLoops);
      put(S, {0xff, 0xc9, 0x75, 0xfc});                // L: dec ecx; jnz L
    }
    put(S, {0xc7, 0x83, 0x00, 0x03, 0x00, 0x00});      // mov dword [rbx + 0x300], Icr
    put32(S, Icr);
    if (First) {
      put(S, {0xc7, 0x04, 0x25});                      // mov dword [kFlag], 1
      put32(S, uint32_t(kFlag));
      put32(S, 1);
    }
    First = false;
  }
  put(S, {0xfa, 0xf4, 0xeb, 0xfd});                    // cli; L: hlt; jmp L
  return S;
}

/// Root-operation code that waits until kFlag is set: L: cmp dword [kFlag], 0; je L.
std::vector<uint8_t> waitForFlag() {
  std::vector<uint8_t> W = {0x83, 0x3c, 0x25};
  put32(W, uint32_t(kFlag));
  put(W, {0x00, 0x74, 0xf6});
  return W;
}

/// A machine of two CPUs: CPU 0 runs Sender in 64-bit root operation outside VMX.
std::unique_ptr<VmxMachine> senderMachine(const std::vector<uint8_t> &Sender) {
  auto V = std::make_unique<VmxMachine>(2);
  Cpu &C = V->M->cpu(0);
  setupLongMode(C, V->M->mem());
  V->write(kSender, Sender);
  C.S.Rip = kSender;
  C.Mmu.flushDecodeCache();
  return V;
}

} // namespace

// An INIT that another CPU sends to a guest in VMX non-root operation causes exit 3 with
// nothing else changed (SDM Vol. 3C, "Other Causes of VM Exits": "Such exits do not
// modify register state or clear pending events").
TEST(VmxNonRootOperation, InitFromAnotherCpuCausesExitThree) {
  auto V = senderMachine(sender({kIcrInit}));
  V->enterVmx(1, {0x90, 0xeb, 0xfd}); // L: nop; jmp L
  RunResult R = V->M->run();
  ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  EXPECT_EQ(R.ExitValue, 0x11u);
  VmcsData &Vmcs = V->vmcs(1);
  EXPECT_EQ(Vmcs.get(F::ExitReason), 3u);
  EXPECT_EQ(Vmcs.get(F::ExitQualification), 0u);
  EXPECT_EQ(Vmcs.get(F::VmExitInterruptionInformation), 0u);
  EXPECT_EQ(Vmcs.get(F::GuestActivityState), 0u);
  const uint64_t Rip = Vmcs.get(F::GuestRip);
  EXPECT_TRUE(Rip == kGuest + 0x10000 || Rip == kGuest + 0x10001) << std::hex << Rip;
  EXPECT_EQ(V->read64(kFlag), 1u);
}

// A guest in the wait-for-SIPI activity state: INIT is blocked (no exit), a SIPI causes
// exit 4 with its vector as the exit qualification and the activity state saved (SDM
// Vol. 3C, "Activity State", Table "Exit Qualification for SIPIs").
TEST(VmxNonRootOperation, SipiFromAnotherCpuWakesAWaitForSipiGuestWithExitFour) {
  auto V = senderMachine(sender({kIcrInit, kIcrSipi | 0x12}, 500));
  V->enterVmx(1, {0xf4});
  V->vmcs(1).set(F::GuestActivityState, 3);
  RunResult R = V->M->run();
  ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  EXPECT_EQ(R.ExitValue, 0x11u);
  VmcsData &Vmcs = V->vmcs(1);
  EXPECT_EQ(Vmcs.get(F::ExitReason), 4u);
  EXPECT_EQ(Vmcs.get(F::ExitQualification), 0x12u);
  EXPECT_EQ(Vmcs.get(F::GuestActivityState), 3u);
  EXPECT_EQ(Vmcs.get(F::GuestRip), kGuest + 0x10000);
  // The SIPI came after the sender's delay: the exit is no earlier than that.
  EXPECT_GE(V->hostTsc(1), 1000u + kTransition);
}

// An INIT that arrives in VMX root operation is blocked and held; the next VM entry
// unblocks it, and exit 3 comes at the guest's first instruction boundary, before any
// guest instruction (SDM Vol. 3C, "Restrictions on VMX Operation").
TEST(VmxNonRootOperation, InitHeldInVmxRootOperationExitsRightAfterTheNextVmEntry) {
  auto V = senderMachine(sender({kIcrInit}));
  V->enterVmx(1, {0x90, 0xeb, 0xfd}, waitForFlag());
  RunResult R = V->M->run();
  ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  EXPECT_EQ(R.ExitValue, 0x11u);
  VmcsData &Vmcs = V->vmcs(1);
  EXPECT_EQ(Vmcs.get(F::ExitReason), 3u);
  EXPECT_EQ(Vmcs.get(F::GuestRip), kGuest + 0x10000);
  EXPECT_FALSE(V->M->cpu(1).Vmx->InitBlocked);
}

// VMXOFF unblocks a held INIT: the processor takes it at once (the code after VMXOFF
// never runs), waits for a SIPI, and starts at the SIPI's vector.
TEST(VmxNonRootOperation, InitHeldInVmxRootOperationIsTakenAfterVmxoff) {
  auto V = senderMachine(sender({kIcrInit, kIcrSipi | 0x20}, 20000));
  std::vector<uint8_t> Root = waitForFlag();
  put(Root, {0x0f, 0x01, 0xc4}); // vmxoff
  debugExit(Root, 0x66);
  V->enterVmx(1, {0xf4}, Root);
  // Real mode at 0x20000 (SIPI vector 0x20): mov al, 0x55; out 0xf4, al.
  V->write(0x20000, {0xb0, 0x55, 0xe6, 0xf4, 0xf4});
  RunResult R = V->M->run();
  ASSERT_EQ(R.Reason, RunReason::GuestExit) << R.describe();
  EXPECT_EQ(R.ExitValue, 0x55u);
  EXPECT_EQ(R.CpuId, 1u);
  EXPECT_FALSE(V->M->cpu(1).Vmx->InVmxOperation);
}

} // namespace vmxsim::test
