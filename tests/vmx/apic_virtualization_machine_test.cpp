// SDM Vol. 3C, "APIC Virtualization and Virtual Interrupts" on the whole machine: a guest
// takes a local-APIC timer interrupt and two IPIs from another CPU, once on the physical
// local APIC and once as virtual interrupts ("virtual-interrupt delivery" with "process
// posted interrupts": the timer and the IPIs arrive as the notification vector, the
// vectors come from the posted-interrupt descriptor, the guest's EOI through the
// APIC-access page is virtualized). The guest code, its handlers and their log are the
// same in both runs; the log (the vectors in the order taken) must be identical, and the
// virtual run must not leave non-root operation.
#include "cpu/vmx/capabilities.h"
#include "harness/machine.h"
#include "tests/support/vmx_test_machine.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace vmxsim::test {
namespace {

using F = VmcsField;
using Code = std::vector<uint8_t>;

constexpr uint64_t kRegions = 0x300000; ///< + 0x10000 * CPU: VMXON, VMCS, scratch, stub
constexpr uint64_t kGuest = 0x400000;   ///< CPU 0's guest code
constexpr uint64_t kSender = 0x410000;  ///< CPU 1's code
constexpr uint64_t kHost = 0x500000;    ///< CPU 0's host code (a VM exit ends the run)
constexpr uint64_t kLog = 0x600000;     ///< count, then the vectors taken
constexpr uint64_t kVirtualApic = 0x620000;
constexpr uint64_t kDescriptor = 0x621000;
constexpr uint64_t kHandlers = 0x700000; ///< + 0x40 per vector
constexpr uint64_t kApicBase = 0xfee00000;
constexpr uint8_t kTimerVector = 0x40, kIpi1 = 0x50, kIpi2 = 0x60, kNotification = 0xf2;
constexpr uint8_t kDone = 0x55; ///< isa-debug-exit value after the third interrupt

const VmxProfile &apicvProfile() {
  static const VmxProfile P = [] {
    VmxProfile Q = VmxProfile::full();
    for (VmxFeature Feat :
         {VmxFeature::TprShadow, VmxFeature::VirtualizeApicAccesses,
          VmxFeature::VirtualInterruptDelivery, VmxFeature::PostedInterrupts})
      Q.Features |= uint64_t(1) << unsigned(Feat);
    return Q;
  }();
  return P;
}

void put(Code &C, std::initializer_list<uint8_t> Bytes) { C.insert(C.end(), Bytes); }
void put32(Code &C, uint32_t V) {
  for (unsigned I = 0; I < 4; ++I)
    C.push_back(uint8_t(V >> (8 * I)));
}
/// mov dword [rbx + Offset], V (rbx = the local APIC's base).
void apicWrite(Code &C, uint32_t Offset, uint32_t V) {
  put(C, {0xc7, 0x83});
  put32(C, Offset);
  put32(C, V);
}
/// mov ecx, Iterations; L: dec ecx; jnz L.
void delay(Code &C, uint32_t Iterations) {
  put(C, {0xb9});
  put32(C, Iterations);
  put(C, {0xff, 0xc9, 0x75, 0xfc});
}
/// mov eax, Bit; lock bts [kDescriptor], eax.
void postBit(Code &C, uint32_t Bit) {
  put(C, {0xb8});
  put32(C, Bit);
  put(C, {0xf0, 0x0f, 0xab, 0x04, 0x25});
  put32(C, uint32_t(kDescriptor));
}

/// The guest: rbx = the APIC page, STI, then HLT in a loop. The same bytes in both runs.
Code guestCode() {
  Code G;
  put(G, {0xbb, 0x00, 0x00, 0xe0, 0xfe}); // mov ebx, 0xfee00000
  put(G, {0xfb, 0xf4, 0xeb, 0xfd});       // sti; L: hlt; jmp L
  return G;
}

/// The handler of Vector: appends it to the log, EOIs (mov [rbx + 0xb0], 0), and after
/// the third interrupt stops the machine; else IRETQ.
Code handler(uint8_t Vector) {
  Code H;
  put(H, {0xb8, Vector, 0, 0, 0}); // mov eax, Vector
  put(H, {0x8b, 0x0c, 0x25});      // mov ecx, [kLog]
  put32(H, uint32_t(kLog));
  put(H, {0x89, 0x04, 0x8d}); // mov [kLog + 4 + rcx * 4], eax
  put32(H, uint32_t(kLog + 4));
  put(H, {0xff, 0xc1});       // inc ecx
  put(H, {0x89, 0x0c, 0x25}); // mov [kLog], ecx
  put32(H, uint32_t(kLog));
  apicWrite(H, 0xb0, 0);            // EOI
  put(H, {0x83, 0xf9, 0x03});       // cmp ecx, 3
  put(H, {0x75, 0x05});             // jne iretq
  put(H, {0xb0, kDone, 0xe6, 0xf4, 0xf4}); // mov al, kDone; out 0xf4, al; hlt
  put(H, {0x48, 0xcf});             // iretq
  return H;
}

/// CPU 1: enables its local APIC, then twice waits and sends an IPI to APIC ID 0: the
/// vector itself (physical run), or the vector posted in CPU 0's descriptor with ON set
/// and the notification vector as the IPI (virtual run). Then it halts.
Code senderCode(bool Posted) {
  Code S;
  put(S, {0xbb, 0x00, 0x00, 0xe0, 0xfe}); // mov ebx, 0xfee00000
  apicWrite(S, 0xf0, 0x1ff);              // SVR: enabled
  for (uint8_t Vector : {kIpi1, kIpi2}) {
    delay(S, 20000);
    if (Posted) {
      postBit(S, Vector);
      postBit(S, 256); // ON
    }
    apicWrite(S, 0x310, 0);                                   // ICR high: APIC ID 0
    apicWrite(S, 0x300, Posted ? kNotification : Vector);    // ICR low: fixed, send
  }
  put(S, {0xfa, 0xf4, 0xeb, 0xfd}); // cli; L: hlt; jmp L
  return S;
}

/// CPU 0 in root operation before the guest or its VM entry: enables its local APIC
/// and arms its timer (one-shot, divide by 1, 5000 cycles) with TimerVector.
Code armTimer(uint8_t TimerVector) {
  Code A;
  put(A, {0xbb, 0x00, 0x00, 0xe0, 0xfe});
  apicWrite(A, 0xf0, 0x1ff);
  apicWrite(A, 0x320, TimerVector);
  apicWrite(A, 0x3e0, 0xb);
  apicWrite(A, 0x380, 5000);
  return A;
}

struct Outcome {
  RunResult Run;
  std::vector<uint32_t> Log;
};

Outcome runGuest(bool Virtual) {
  Outcome Out;
  MachineConfig Cfg;
  Cfg.NumCpus = 2;
  Cfg.Vmx = &apicvProfile();
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Cfg.MaxInsns = 10'000'000;
  Error Err;
  std::unique_ptr<Machine> M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  if (!M)
    return Out;
  PhysMem &Mem = M->mem();
  writeFlatGdt(Mem);
  auto write = [&](uint64_t Addr, const Code &Bytes) {
    EXPECT_TRUE(Mem.copyIn(Hpa(Addr), Bytes.data(), Bytes.size()));
  };
  const std::vector<uint8_t> Zero(4096, 0);
  write(kLog, Zero);
  write(kVirtualApic, Zero);
  write(kDescriptor, Zero);
  unsigned Slot = 0;
  for (uint8_t V : {kTimerVector, kIpi1, kIpi2}) {
    const uint64_t Target = kHandlers + 0x40 * Slot++;
    write(Target, handler(V));
    const uint64_t Lo = (Target & 0xffff) | (uint64_t(kSelCode64) << 16) |
                        (uint64_t(0x8e) << 40) | (((Target >> 16) & 0xffff) << 48);
    const uint64_t Hi = 0;
    EXPECT_TRUE(Mem.copyIn(Hpa(kIdtBase + 16 * V), &Lo, 8));
    EXPECT_TRUE(Mem.copyIn(Hpa(kIdtBase + 16 * V + 8), &Hi, 8));
  }
  write(kGuest, guestCode());
  Code Host;
  put(Host, {0xb0, 0x10, 0xe6, 0xf4, 0xf4}); // a VM exit: debug exit 0x10
  write(kHost, Host);

  for (unsigned I = 0; I < 2; ++I) {
    Cpu &C = M->cpu(I);
    KnownGoodLayout L;
    L.GuestRip = kGuest;
    L.HostRip = kHost;
    L.GuestRsp = 0x60000 - 0x2000 * I;
    L.HostRsp = 0x70000 - 0x2000 * I;
    const uint64_t R = kRegions + 0x10000 * I;
    EXPECT_TRUE(enterVmxRootOperation(C, Mem, apicvProfile(), L, R, R + 0x1000, R + 0x2000));
    C.Activity = ActivityState::Active;
    C.Mmu.flushDecodeCache();
  }
  // CPU 1 sends from root operation.
  write(kSender, senderCode(Virtual));
  M->cpu(1).S.Rip = kSender;

  Cpu &C0 = M->cpu(0);
  Code Stub = armTimer(Virtual ? kNotification : kTimerVector);
  if (!Virtual) {
    // The guest on the physical local APIC, in root operation: its IDT, then its code.
    C0.S.Idtr.Base = kIdtBase;
    C0.S.Idtr.Limit = 0xfff;
    C0.S.Gpr[RSP] = 0x60000;
    put(Stub, {0x48, 0xb8}); // mov rax, kGuest; jmp rax
    for (unsigned I = 0; I < 8; ++I)
      Stub.push_back(uint8_t(kGuest >> (8 * I)));
    put(Stub, {0xff, 0xe0});
  } else {
    // The timer's vector is posted before VM entry; its expiry is the notification.
    VmcsData &V = C0.Vmx->Vmcs;
    auto Or = [&](F Field, VmxControl Ctl) { V.set(Field, V.get(Field) | controlBit(Ctl)); };
    Or(F::PinBasedVmExecutionControls, VmxControl::ExternalInterruptExiting);
    Or(F::PinBasedVmExecutionControls, VmxControl::ProcessPostedInterrupts);
    Or(F::PrimaryProcessorBasedVmExecutionControls, VmxControl::UseTprShadow);
    Or(F::PrimaryProcessorBasedVmExecutionControls, VmxControl::ActivateSecondaryControls);
    Or(F::SecondaryProcessorBasedVmExecutionControls, VmxControl::VirtualizeApicAccesses);
    Or(F::SecondaryProcessorBasedVmExecutionControls, VmxControl::VirtualInterruptDelivery);
    Or(F::PrimaryVmExitControls, VmxControl::AcknowledgeInterruptOnExit);
    V.set(F::VirtualApicAddress, kVirtualApic);
    V.set(F::ApicAccessAddress, kApicBase);
    V.set(F::PostedInterruptNotificationVector, kNotification);
    V.set(F::PostedInterruptDescriptorAddress, kDescriptor);
    V.set(F::GuestIdtrLimit, 0xfff);
    V.set(F::GuestRflags, 0x2);
    postBit(Stub, kTimerVector);
    postBit(Stub, 256);
    put(Stub, {0x0f, 0x01, 0xc2});             // vmlaunch
    put(Stub, {0xb0, 0xee, 0xe6, 0xf4, 0xf4}); // failed: debug exit 0xee
  }
  write(kRegions + 0x3000, Stub);
  C0.S.Rip = kRegions + 0x3000;

  Out.Run = M->run();
  uint32_t Count = 0;
  EXPECT_TRUE(Mem.copyOut(Hpa(kLog), &Count, 4));
  for (uint32_t K = 0; K < Count && K < 16; ++K) {
    uint32_t V = 0;
    EXPECT_TRUE(Mem.copyOut(Hpa(kLog + 4 + 4 * K), &V, 4));
    Out.Log.push_back(V);
  }
  if (Virtual) {
    EXPECT_TRUE(C0.NonRoot) << "exit reason " << C0.Vmx->Vmcs.get(F::ExitReason);
    // Every virtual interrupt delivered and EOIed; the descriptor drained.
    EXPECT_EQ(C0.Vmx->Vmcs.get(F::GuestInterruptStatus), 0u);
    uint8_t Desc[64];
    EXPECT_TRUE(Mem.copyOut(Hpa(kDescriptor), Desc, 64));
    for (uint8_t B : Desc)
      EXPECT_EQ(B, 0u);
    // The notifications were dismissed at the local APIC: nothing in service.
    for (unsigned W = 0; W < 8; ++W)
      EXPECT_EQ(M->localApic(0).readReg(LocalApic::Isr0 + 0x10 * W), 0u);
  }
  return Out;
}

TEST(ApicVirtualization, GuestTakesTheSameInterruptsVirtualAsOnThePhysicalApic) {
  const Outcome Physical = runGuest(false);
  ASSERT_EQ(Physical.Run.Reason, RunReason::GuestExit) << Physical.Run.describe();
  EXPECT_EQ(Physical.Run.ExitValue, kDone);
  const Outcome Virtual = runGuest(true);
  ASSERT_EQ(Virtual.Run.Reason, RunReason::GuestExit) << Virtual.Run.describe();
  EXPECT_EQ(Virtual.Run.ExitValue, kDone);
  const std::vector<uint32_t> Expected{kTimerVector, kIpi1, kIpi2};
  EXPECT_EQ(Physical.Log, Expected);
  EXPECT_EQ(Virtual.Log, Physical.Log);
}

} // namespace
} // namespace vmxsim::test
