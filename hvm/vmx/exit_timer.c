/* The vCPU's virtual timer and time slices, both on the VMX-preemption timer (SDM Vol.
 * 3C, "VMX-Preemption Timer"): it counts down from the value in the VMCS, loaded at
 * every VM entry, once every 2^rate TSC cycles, and exits when it reaches 0, from the
 * active and the HLT activity states. All of it runs on the virtual TSC, so the exits
 * come at the same instructions run after run.
 *
 * - Time slice: while the vCPU runs, the value is Cpu->SliceTicks; its expiry (exit 52
 *   in the active state) ends the slice. With one vCPU per pcpu there is nobody else to
 *   run: the same vCPU gets the next slice.
 * - Blocking HLT: a vCPU whose timer is armed (hypercall 2) and executes HLT is entered
 *   again in the HLT activity state (SDM Vol. 3C, "Guest Non-Register State") with the
 *   value that reaches its deadline; the expiry in the HLT state wakes it (activity
 *   state active again, RIP already after the HLT).
 */
#include "vmx/exit.h"
#include "vmx/insn.h"
#include "vmx/tracebuf.h"

/* SDM Vol. 3C, Table "Format of Activity State". */
#define ACTIVITY_ACTIVE 0
#define ACTIVITY_HLT 1

/* Preemption-timer ticks from now until Deadline (at least 1): the exit comes at the
   first tick boundary at or after it. */
static uint32_t ticksUntil(const struct PerCpu *Cpu, uint64_t Deadline) {
  uint64_t Now = rdtsc();
  uint64_t Left = Deadline > Now ? Deadline - Now : 0;
  uint64_t Ticks = (Left >> Cpu->PreemptionRate) + 1;
  return Ticks > ~0u ? ~0u : (uint32_t)Ticks;
}

enum ExitAction vcpuBlock(struct PerCpu *Cpu) {
  if (!Cpu->PreemptionTimer || !Cpu->TimerDeadline)
    return Action_GuestDone;
  if (rdtsc() >= Cpu->TimerDeadline) {
    /* Already due: HLT completes at once, as with a pending interrupt. */
    Cpu->TimerDeadline = 0;
    ++Cpu->TimerWakeups;
    return Action_Advance;
  }
  Cpu->Blocked = 1;
  vmwrite(Vmcs_GuestActivityState, ACTIVITY_HLT);
  vmwrite(Vmcs_VmxPreemptionTimerValue, ticksUntil(Cpu, Cpu->TimerDeadline));
  return Action_Advance;
}

enum ExitAction handleRdtsc(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  /* RDTSC exiting (hypercall 4): the guest reads what it would have read with TSC
     offsetting (SDM Vol. 3C, "Time-Stamp Counter Offset and Multiplier"), here; EDX:EAX,
     with the high halves of RAX and RDX cleared (SDM Vol. 2B, RDTSC). */
  uint64_t Value = rdtsc() + Cpu->TscOffset;
  TRACE_VMEXIT(1, Value);
  Regs->Rax = (uint32_t)Value;
  Regs->Rdx = Value >> 32;
  return Action_Advance;
}

enum ExitAction handlePreemptionTimer(struct PerCpu *Cpu, struct GuestRegs *Regs) {
  (void)Regs;
  /* The activity state the exit saved: 1 (HLT) when a blocked vCPU's timer fired, 0 when
     a running vCPU's slice ended. */
  uint64_t Activity = vmread(Vmcs_GuestActivityState);
  TRACE_VMEXIT(1, Activity);
  if (!Cpu->Blocked) {
    ++Cpu->SliceEnds;
    return Action_Resume;
  }
  if (rdtsc() < Cpu->TimerDeadline) {
    /* Not due yet (a tick boundary before the deadline): keep waiting. */
    vmwrite(Vmcs_VmxPreemptionTimerValue, ticksUntil(Cpu, Cpu->TimerDeadline));
    return Action_Resume;
  }
  Cpu->Blocked = 0;
  Cpu->TimerDeadline = 0;
  ++Cpu->TimerWakeups;
  vmwrite(Vmcs_GuestActivityState, ACTIVITY_ACTIVE);
  vmwrite(Vmcs_VmxPreemptionTimerValue, Cpu->SliceTicks);
  return Action_Resume;
}
