// Per-processor bookkeeping of the event machinery of VMX non-root operation
// (cpu/vmx/vmx_events.cpp): the event whose delivery is in progress (for the IDT-vectoring
// fields), a pending MTF VM exit, and the IRET that unblocked NMIs. Lives in VmxState.
#pragma once
#include <cstdint>

namespace vmxsim {

struct VmxEventState {
  /// The event being delivered through the guest IDT, in the IDT-vectoring format (0 =
  /// none): a VM exit caused by a nested exception or an IDT task gate reports it (SDM
  /// Vol. 3C, "Information for VM Exits That Occur During Event Delivery").
  uint32_t DeliveringInfo = 0;
  uint32_t DeliveringErrorCode = 0;
  /// Length of the INT n / INT3 / INTO / INT1 being delivered (VM-exit instruction length).
  uint32_t DeliveringInsnLength = 0;
  /// The next delivery is VM-entry event injection: it consults no exception bitmap.
  bool InjectingEvent = false;
  /// An MTF VM exit is pending on the next instruction boundary (SDM Vol. 3C, "Monitor
  /// Trap Flag").
  bool MtfPending = false;
  /// Cpu::Retired at the previous event window: a change means an instruction retired.
  uint64_t MtfRetiredMark = 0;
  /// Cpu::Retired + 1 when an IRET removed (virtual-)NMI blocking and has not yet
  /// retired: a fault on it reports "NMI unblocking due to IRET". 0 = none.
  uint64_t IretNmiMark = 0;
  /// The current operation virtualized a write to the APIC-access page: APIC-write
  /// emulation for ApicWriteOffset is due at the next instruction boundary (SDM Vol. 3C,
  /// "APIC-Write Emulation"; cpu/vmx/apic_virtualization.cpp).
  bool ApicWritePending = false;
  uint16_t ApicWriteOffset = 0;
  /// The last evaluation of pending virtual interrupts recognized one (SDM Vol. 3C,
  /// "Evaluation of Pending Virtual Interrupts"): it is delivered at the first boundary
  /// that allows it ("Virtual-Interrupt Delivery").
  bool VirtualInterruptRecognized = false;
};

} // namespace vmxsim
