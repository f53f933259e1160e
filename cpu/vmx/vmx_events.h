// VMX non-root operation, the event side (SDM Vol. 3C, "VMX Non-Root Operation" > "Other
// Causes of VM Exits", "Changes to Event Blocking", "Features of VMX Non-Root Operation";
// "VM Entries" > "Special Features of VM Entry"; "VM Exits" > "Information for VM Exits
// Due to Vectored Events" and "Information for VM Exits That Occur During Event
// Delivery"): which exceptions, NMIs and interrupts cause VM exits, the interrupt and NMI
// windows, MTF, the VMX-preemption timer, guest activity states and task-switch exits.
//
// Hooks, each called only when Cpu::NonRoot is set, so root operation pays nothing:
//   event window (cpu/cpu.cpp)   vmxWindowOpens, vmxBeforeNmi, vmxNmiExit,
//                                vmxInterruptWindowExit, vmxExternalInterruptExiting/Exit,
//                                vmxWaitForTimer, vmxWindowDue
//   scheduler (harness/)         vmxWakeCycle
//   delivery (cpu/exceptions.cpp) vmxBeforeDelivery, vmxAfterDelivery,
//                                 vmxExceptionCausesExit/vmxExceptionExit, vmxTripleFaultExit
//   instructions (exec_far.cpp)  vmxIretUnblocksNmis, vmxFarTaskSwitch, vmxIretTaskSwitch
//   VM entry (vm_entry.cpp)      vmxEventsOnEntry
#pragma once
#include "cpu/cpu.h"
#include "cpu/exceptions.h"
#include "cpu/status.h"

#include <cstdint>

namespace vmxsim {

struct VmExitInfo;

/// Called by VM entry after loading guest state and before event injection (SDM Vol. 3C,
/// "Event Injection", "Special Features of VM Entry"): arms a pending MTF VM exit for an
/// injected "other event" 0, marks the injection so it skips the exception bitmap, and
/// applies the NMI blocking rules of the "virtual NMIs" control.
void vmxEventsOnEntry(Cpu &C);

/// The VMX layer of the processor's event window (Cpu::eventWindow, cpu/cpu.cpp), which
/// takes events in the priority order of SDM Vol. 3A, "Priority Among Concurrent
/// Events", with the VM exits of SDM Vol. 3C placed as given beside each control: MTF VM
/// exit, pending debug traps, VMX-preemption timer, NMI window, NMI, interrupt window,
/// external interrupt. An inactive guest (HLT, shutdown, wait-for-SIPI) only wakes for
/// what its state allows.
///
/// Opens the window: an instruction retired since the last one makes an MTF VM exit
/// pending when MTF is on.
void vmxWindowOpens(Cpu &C);
/// The events above NMIs, in order: MTF VM exit, pending debug traps (#DB pending in C,
/// St = Fault, for the caller to deliver), preemption-timer exit, NMI-window exit. True
/// when one was taken; St holds its status.
bool vmxBeforeNmi(Cpu &C, Status &St);
/// A deliverable NMI with "NMI exiting": the VM exit (exit reason 0, type NMI), which
/// blocks NMIs. False when the NMI goes through the guest IDT.
bool vmxNmiExit(Cpu &C, Status &St);
/// The interrupt-window exit, between NMIs and external interrupts. True when taken.
bool vmxInterruptWindowExit(Cpu &C, Status &St);
/// "External-interrupt exiting": a pending interrupt causes a VM exit instead of being
/// delivered, and RFLAGS.IF does not block it (SDM Vol. 3C, "Changes to Event Blocking").
bool vmxExternalInterruptExiting(const Cpu &C);
/// That VM exit (exit reason 1), acknowledging the controller with "acknowledge
/// interrupt on exit".
Status vmxExternalInterruptExit(Cpu &C);
/// An inactive guest with nothing to wake it: with the preemption timer counting (HLT,
/// active), time advances to its expiry (Again: look at the window again) or to
/// UntilCycle (Stop, Deadline); otherwise Stop, Halted.
EventWindow vmxWaitForTimer(Cpu &C, uint64_t UntilCycle, StopReason &Why);
/// The cycle at which the VMX layer itself wakes a waiting guest, ~0 if never: the
/// VMX-preemption timer's expiry in the HLT activity state (it "counts down in HLT",
/// SDM Vol. 3C, "VMX-Preemption Timer"), or now for a pending MTF VM exit or debug trap
/// that the HLT state takes. Shutdown and wait-for-SIPI wait for outside events only.
uint64_t vmxWakeCycle(const Cpu &C);
/// The cycle at which the run loop must next open the window: now when MTF is on or a
/// shadow/pending debug trap covers the next instruction, else the earlier of UntilCycle
/// and the preemption timer's expiry.
uint64_t vmxWindowDue(const Cpu &C, uint64_t UntilCycle);

/// Before an event is delivered through the guest IDT: INT3/INTO/INT1 consult the
/// exception bitmap (true: St holds the VM exit); records the event for IDT-vectoring.
bool vmxBeforeDelivery(Cpu &C, EventKind Kind, uint8_t Vector, bool HasErrorCode,
                       uint32_t ErrorCode, uint64_t ReturnRip, Status &St);
/// After a successful delivery: activity state active, NMI blocking, MTF pending.
void vmxAfterDelivery(Cpu &C, EventKind Kind);
/// Whether a hardware exception causes a VM exit: its bit in the exception bitmap, and
/// for #PF the error-code mask/match rule (SDM Vol. 3C, "Exceptions" in "Other Causes of
/// VM Exits").
bool vmxExceptionCausesExit(const Cpu &C, uint8_t Vector, uint32_t ErrorCode);
/// VM exit for an exception (exit reason 0). Type is the intinfo interruption type;
/// InsnLength is the length of INT3/INTO/INT1 for software exceptions, else 0.
Status vmxExceptionExit(Cpu &C, const PendingEvent &E, uint32_t Type, uint32_t InsnLength);
/// A nested exception became #DF: a VM exit #DF causes is not "during event delivery".
void vmxAfterDoubleFault(Cpu &C);
/// VM exit for a triple fault (exit reason 2) instead of shutdown.
Status vmxTripleFaultExit(Cpu &C);
/// Fills the IDT-vectoring fields of an exit that happens during event delivery (for
/// other exits raised while delivering, e.g. future EPT violations).
void vmxFillIdtVectoring(const Cpu &C, VmExitInfo &Info);

/// IRET's NMI unblocking in non-root operation (SDM Vol. 3C, "Changes to Instruction
/// Behavior in VMX Non-Root Operation", IRET): none with "NMI exiting", virtual-NMI
/// blocking with "virtual NMIs"; remembered for bit 12 of the exit interruption info.
void vmxIretUnblocksNmis(Cpu &C);

/// Source of a task switch, bits 31:30 of the exit qualification (SDM Vol. 3C, Table
/// "Exit Qualification for Task Switches").
enum class TaskSwitchSource : uint32_t { Call = 0, Iret = 1, Jmp = 2, IdtTaskGate = 3 };
/// A far JMP/CALL to a TSS descriptor or task gate in non-root operation: the initial
/// checks of the task switch, then exit reason 9 (SDM Vol. 3C, "Task Switches").
Status vmxFarTaskSwitch(Cpu &C, uint16_t Sel, uint64_t DescLo, TaskSwitchSource Src,
                        uint32_t InsnLength);
/// IRET with NT=1 (task return) in non-root operation: exit 9 with the TSS back link.
Status vmxIretTaskSwitch(Cpu &C, uint32_t InsnLength);
/// Delivery through a task gate in the guest IDT: exit 9 with IDT-vectoring information.
Status vmxIdtTaskSwitch(Cpu &C, uint16_t TssSel);

/// An INIT signal in non-root operation: exit reason 3, blocked in wait-for-SIPI (SDM
/// Vol. 3C, "Other Causes of VM Exits"). Returns Ok when blocked.
Status vmxInitSignal(Cpu &C);
/// A start-up IPI: exit reason 4 with the vector as qualification in wait-for-SIPI;
/// discarded (Ok) in every other activity state.
Status vmxStartupIpi(Cpu &C, uint8_t Vector);

} // namespace vmxsim
