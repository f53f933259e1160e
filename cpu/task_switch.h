// Task switches in protected mode outside VMX non-root operation (SDM Vol. 3A, "Task
// Management": "Task Switching", "Task Linking"; Vol. 2A/2B, the TASK-GATE,
// TASK-STATE-SEGMENT and TASK-RETURN paths of JMP, CALL, INT n and IRET). In non-root
// operation every task switch is a VM exit instead (cpu/vmx/vmx_events.h).
#pragma once
#include "cpu/cpu.h"
#include "cpu/vmx/vmx_events.h"

#include <cstdint>

namespace vmxsim {

/// The checks a far JMP or CALL makes before it switches tasks through Sel, a TSS
/// descriptor or a task gate (descriptor Lo): privilege, presence, a TSS that is
/// available and in the GDT, and its limit (SDM Vol. 2A, JMP and CALL). On success
/// TssSel/TssLo name the TSS to switch to. VMX non-root operation makes the same checks
/// before its VM exit.
Status taskSwitchInitialChecks(Cpu &C, uint16_t Sel, uint64_t Lo, uint16_t &TssSel,
                               uint64_t &TssLo);

/// An event delivered through a task gate: its error code is pushed on the new task's
/// stack, and faults while loading the new task carry its EXT bit.
struct TaskSwitchEvent {
  bool HasErrorCode = false;
  uint32_t ErrorCode = 0;
  uint32_t Ext = 0;
  /// Flags set in the EFLAGS image saved in the old TSS (RF for a fault, as an
  /// interrupt gate would push it).
  uint64_t SavedFlagsSet = 0;
};

/// Switches to the task of the TSS TssSel/TssLo (its checks done: available for JMP, CALL
/// and events, busy for IRET). SavedRip is the EIP stored in the old TSS (the next
/// instruction, or the event's return address). Faults before the commit point leave
/// the old task as it was; faults after it are raised in the new task's context (SDM
/// Vol. 3A, Table "Exception Conditions Checked During a Task Switch").
Status switchTasks(Cpu &C, uint16_t TssSel, uint64_t TssLo, TaskSwitchSource Src,
                   uint64_t SavedRip, const TaskSwitchEvent &Ev = {});

/// IRET with EFLAGS.NT = 1: returns to the task named by the current TSS's back link
/// (SDM Vol. 2A, IRET, TASK-RETURN). NextRip is the IRET's next instruction.
Status taskReturn(Cpu &C, uint64_t NextRip);

/// Delivery through a task gate in the IDT whose TSS selector is TssSel (SDM Vol. 2A,
/// INT n, TASK-GATE).
Status taskGateDelivery(Cpu &C, uint16_t TssSel, uint64_t ReturnRip,
                        const TaskSwitchEvent &Ev);

} // namespace vmxsim
