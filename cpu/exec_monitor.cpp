// MONITOR and MWAIT (SDM Vol. 2B, MONITOR—Set Up Monitor Address, MWAIT—Monitor Wait;
// Vol. 3A, "MONITOR/MWAIT Instruction"; the model is described in cpu/monitor.h).
#include "cpu/monitor.h"

#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "cpu/cpuid.h"
#include "cpu/exec.h"
#include "cpu/memory.h"
#include "cpu/msrs.h"
#include "cpu/vmx/nonroot.h"

namespace vmxsim {

namespace {

constexpr uint64_t kMiscEnableMonitorFsm = uint64_t(1) << 18;
// CPUID.5:ECX[1]: "supports treating interrupts as break-event for MWAIT, even when
// interrupts disabled" (ECX[0] of MWAIT may be 1).
constexpr uint32_t kCpuid5InterruptBreakEvent = 1u << 1;

void stopWatching(Cpu &C) {
  C.Mem.unwatchWrites(Hpa(C.Monitor.Line), kMonitorLineBytes);
}

void disarm(Cpu &C) {
  MonitorState &M = C.Monitor;
  if (M.State == MonitorState::Phase::Armed)
    stopWatching(C);
  M.State = MonitorState::Phase::Idle;
  M.Waiting = false;
}

// An MWAIT that waited and was woken by anything other than its monitor (an interrupt,
// an NMI, a VM exit, ...) has completed: the processor is no longer in the HLT state
// it waited in. Its monitor is disarmed then (cpu/monitor.h), found out here, lazily,
// so that the paths that wake HLT need not know about MWAIT.
void settle(Cpu &C) {
  if (C.Monitor.Waiting && C.Activity != ActivityState::Hlt)
    disarm(C);
}

// The operand of MONITOR: DS:rAX (a segment override applies), rAX of the address
// size; checked and translated as a read of one byte (SDM Vol. 2B, MONITOR: "The
// content of EAX is an effective address ... By default, the DS segment is used"; the
// address "is treated as a read" for segmentation, paging and EPT faults).
Status monitorLine(Cpu &C, const DecodedInsn &I, uint64_t &Line) {
  const uint64_t Off = I.AddrSize == 8   ? C.S.Gpr[RAX]
                       : I.AddrSize == 4 ? uint32_t(C.S.Gpr[RAX])
                                         : uint16_t(C.S.Gpr[RAX]);
  uint64_t La;
  VMX_TRY(segmentToLinear(C, SegReg(I.Seg), Off, 1, Access::Read, La));
  Hpa Pa;
  VMX_TRY(C.Mmu.translate(Gla(La), Access::Read, false, Pa));
  Line = Pa.value() & ~(kMonitorLineBytes - 1);
  return Status::Ok;
}

// SDM Vol. 2B, MONITOR, "Protected Mode Exceptions" (and the other modes): #UD when
// CPUID.01H:ECX.MONITOR is 0 or CPL > 0 (virtual-8086 mode is CPL 3); in VMX non-root
// operation "MONITOR exiting" next (faults based on privilege level come before VM
// exits, SDM Vol. 3C, "Relative Priority of Faults and VM Exits"); then #GP(0) for
// non-zero ECX (RCX in 64-bit mode: no extensions are defined), then the operand's
// segmentation, paging and EPT faults. EDX holds hints; none are defined, so any value
// is accepted and ignored.
Status execMonitor(Cpu &C, const DecodedInsn &I) {
  if (!monitorEnabled(C) || C.S.cpl() != 0)
    return C.raiseUd();
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onMonitor(C, I));
  const uint64_t Extensions =
      C.S.in64BitMode() ? C.S.Gpr[RCX] : uint64_t(uint32_t(C.S.Gpr[RCX]));
  if (Extensions != 0)
    return C.raiseGp(0);
  uint64_t Line;
  VMX_TRY(monitorLine(C, I, Line));
  settle(C);
  disarm(C);
  MonitorState &M = C.Monitor;
  M.State = MonitorState::Phase::Armed;
  M.Line = Line;
  // A watched page has no fast write mapping on any processor (PhysMem::watchWrites),
  // so every store into the line reaches Mmu::watchedWrite.
  C.Mem.watchWrites(Hpa(Line), kMonitorLineBytes);
  C.Mmu.dropWriteMappingsEverywhere(Line >> 12);
  return next(C, I);
}

// SDM Vol. 2B, MWAIT: #UD as for MONITOR; "MWAIT exiting" (exit qualification bit 0:
// the monitor is armed) next; #GP(0) if ECX (RCX) has a bit set above bit 0, or bit 0
// while CPUID.05H:ECX[1] is 0. EAX is the C-state hint: every hint is accepted and
// waits as C1 (cpu/monitor.h). With the monitor armed and not triggered the processor
// waits after the instruction completes (RIP is past MWAIT: the VM exits and event
// deliveries that wake it save that RIP); otherwise MWAIT falls through.
Status execMwait(Cpu &C, const DecodedInsn &I) {
  if (!monitorEnabled(C) || C.S.cpl() != 0)
    return C.raiseUd();
  settle(C);
  MonitorState &M = C.Monitor;
  const bool Armed = M.State == MonitorState::Phase::Armed;
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onMwait(C, I, Armed));
  const uint64_t Extensions =
      C.S.in64BitMode() ? C.S.Gpr[RCX] : uint64_t(uint32_t(C.S.Gpr[RCX]));
  const bool BreakOnMasked = Extensions & 1;
  if ((Extensions >> 1) != 0 ||
      (BreakOnMasked && !(cpuidQuery(C, 5, 0).Ecx & kCpuid5InterruptBreakEvent)))
    return C.raiseGp(0);
  if (!Armed) {
    disarm(C); // a triggered monitor is consumed
    return next(C, I);
  }
  C.Activity = ActivityState::Hlt;
  M.Waiting = true;
  M.BreakOnMaskedInterrupt = BreakOnMasked;
  C.breakBlock();
  return next(C, I);
}

} // namespace

bool monitorEnabled(const Cpu &C) {
  return modelHas(C, 1, 2, cpuidbit::Monitor) &&
         ((*C.Msrs)[MsrSlot::IA32_MISC_ENABLE] & kMiscEnableMonitorFsm);
}

bool mwaitWaiting(const Cpu &C) {
  return C.Monitor.Waiting && C.Activity == ActivityState::Hlt;
}

bool mwaitWakesOnMaskedInterrupt(const Cpu &C) {
  return mwaitWaiting(C) && C.Monitor.BreakOnMaskedInterrupt;
}

void mwaitWake(Cpu &C) {
  C.Activity = ActivityState::Active;
  disarm(C);
}

void monitorSawStore(Cpu &C, Hpa Pa, uint64_t SizeBytes, uint64_t Now) {
  MonitorState &M = C.Monitor;
  if (M.State != MonitorState::Phase::Armed || Pa.value() >= M.Line + kMonitorLineBytes ||
      M.Line >= Pa.value() + SizeBytes)
    return;
  if (mwaitWaiting(C)) {
    // The wake-up: the waiting processor resumes after MWAIT at the store's time (its
    // own, if that is later: a waiting processor's clock never goes back).
    C.waitUntil(Now);
    mwaitWake(C);
    return;
  }
  settle(C);
  if (M.State != MonitorState::Phase::Armed)
    return;
  stopWatching(C);
  M.State = MonitorState::Phase::Triggered;
}

void monitorReset(Cpu &C) { disarm(C); }

void mwaitSettle(Cpu &C) { settle(C); }

bool bindMonitor(const DecodeInfo &, DecodedInsn &I) {
  I.Fn = &execMonitor;
  I.Cost = costOf(CostClass::System);
  return true;
}

bool bindMwait(const DecodeInfo &, DecodedInsn &I) {
  I.Fn = &execMwait;
  I.Cost = costOf(CostClass::Halt);
  I.Flags |= insnflag::EndsBlock;
  return true;
}

} // namespace vmxsim
