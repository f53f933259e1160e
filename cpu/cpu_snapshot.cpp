// Cpu::save / Cpu::load: one processor's state in a snapshot (state/snapshot_io.h). Every
// field of Cpu, CpuState, MsrState, VmxState (with the cached current VMCS) and
// VmxEventState that is not derived is listed here; what is derived (the mode, RIP mask
// and TLB user bit: modeChanged; the armed breakpoints: debugRegistersChanged; the
// decoded blocks) is recomputed by load(); the TLBs are saved (Mmu::save says why). The run loop's own deadlines (WindowDue,
// BlockStop, RunUntil) are not state between run() calls: run() sets them.
#include "cpu/cpu.h"
#include "cpu/msrs.h"
#include "cpu/perfmon.h"
#include "cpu/vmx/vmx_state.h"

namespace vmxsim {

namespace {
template <class Ar, class Seg> void segmentFields(Ar &A, Seg &S) {
  A.all(S.Selector, S.Base, S.Limit, S.Attr);
}

template <class Ar, class St> void cpuStateFields(Ar &A, St &S) {
  A.io(S.Gpr);
  A.all(S.Rip, S.Rflags);
  for (auto &Sg : S.Seg)
    segmentFields(A, Sg);
  segmentFields(A, S.Ldtr);
  segmentFields(A, S.Tr);
  A.all(S.Gdtr.Base, S.Gdtr.Limit, S.Idtr.Base, S.Idtr.Limit);
  A.all(S.Cr0, S.Cr2, S.Cr3, S.Cr4, S.Cr8, S.Xcr0, S.Dr, S.Efer, S.Pdpte);
  for (auto &X : S.XmmReg)
    A.all(X.Lo, X.Hi);
  A.all(S.Mxcsr, S.Fcw, S.Fsw, S.Ftw, S.Fop, S.Fip, S.Fdp, S.St);
}

template <class Ar, class V> void vmxStateFields(Ar &A, V &X) {
  A.all(X.InVmxOperation, X.VmxonPointer, X.CurrentVmcsPointer, X.Vmcs.Values,
        X.CurrentLaunch, X.CurrentIsShadow, X.PendingDebugExceptions, X.BlockingBySmi,
        X.VirtualNmiBlocked, X.InitBlocked, X.PreemptionTimerActive,
        X.PreemptionTimerDeadline);
  auto &E = X.Events;
  A.all(E.DeliveringInfo, E.DeliveringErrorCode, E.DeliveringInsnLength, E.InjectingEvent,
        E.MtfPending, E.MtfRetiredMark, E.IretNmiMark, E.ApicWritePending, E.ApicWriteOffset,
        E.VirtualInterruptRecognized);
  A.all(X.PleValid, X.PleLastPause, X.PleLoopStart);
}

template <class Ar, class C> void cpuFields(Ar &A, C &Self) {
  cpuStateFields(A, Self.S);
  A.all(Self.NonRoot, Self.Cycles, Self.Retired, Self.HaltedCycles, Self.RandomDraws);
  A.all(Self.Pending.Vector, Self.Pending.HasErrorCode, Self.Pending.ErrorCode,
        Self.Pending.FaultAddr);
  A.all(Self.Activity, Self.ShadowUntil, Self.ShadowIsMovSs, Self.NmiBlocked,
        Self.NmiPending, Self.DeliveryDepth, Self.LastStop);
  // The monitor (cpu/monitor.h); its line's write watch is PhysMem's to save.
  A.all(Self.Monitor.State, Self.Monitor.Line, Self.Monitor.Waiting,
        Self.Monitor.BreakOnMaskedInterrupt);
  A.all(Self.Ignne); // the chipset drives it (cpu/x87.h); the processor holds its level
  A.all(Self.Debug.Hits, Self.Debug.Traps, Self.Debug.HeldRf);
  A.all(Self.Msrs->Value, Self.Msrs->TscOffset);
  vmxStateFields(A, *Self.Vmx);
}
} // namespace

void Cpu::save(SnapshotWriter &W) const {
  // The tables whose sizes shape the record: a build with other tables cannot read it.
  W.all(uint32_t(Id), uint32_t(kNumMsrs), uint32_t(kNumVmcsFields));
  cpuFields(W, *this);
  Mmu.save(W);
  Pmu->save(W);
}

bool Cpu::load(SnapshotReader &R) {
  uint32_t SavedId = 0, Msrs = 0, Fields = 0;
  R.all(SavedId, Msrs, Fields);
  if (R.ok() && (SavedId != Id || Msrs != kNumMsrs || Fields != kNumVmcsFields)) {
    R.fail("CPU " + std::to_string(Id) + ": the snapshot's record (CPU " +
           std::to_string(SavedId) + ", " + std::to_string(Msrs) + " MSRs, " +
           std::to_string(Fields) + " VMCS fields) is not this build's");
    return false;
  }
  cpuFields(R, *this);
  // Values the code switches over or indexes with: a snapshot this build wrote has
  // them in range; anything else is refused rather than run.
  if (R.ok() && (unsigned(Activity) > unsigned(ActivityState::WaitForSipi) ||
                 unsigned(LastStop) > unsigned(StopReason::Unimplemented) ||
                 unsigned(Monitor.State) > unsigned(MonitorState::Phase::Triggered) ||
                 unsigned(Vmx->CurrentLaunch) > unsigned(LaunchState::Launched) ||
                 DeliveryDepth > 3 ||
                 (NonRoot && !Vmx->InVmxOperation))) {
    R.fail("CPU " + std::to_string(Id) + ": the snapshot's processor state is inconsistent");
    reset();
    return false;
  }
  // The VMCS values were stored into place: VM entry must not trust a check it remembers
  // from before (cpu/vmx/vmcs.h, VmcsData::Written), and the memo is derived state.
  Vmx->Vmcs.markAllWritten();
  Vmx->EntryCheckMemo = VmEntryCheckMemo{};
  Mmu.load(R);
  PmuActive = false; // modeChanged must not fold counts before the counters are back
  modeChanged();
  Pmu->load(*this, R);
  debugRegistersChanged(*this);
  breakBlock();
  return R.ok();
}

} // namespace vmxsim
