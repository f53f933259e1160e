#include "harness/scheduler.h"

#include "cpu/vmx/vmx_events.h"
#include "harness/devices/local_apic.h"

#include <algorithm>

namespace vmxsim {

Scheduler::Scheduler(std::vector<Cpu *> Cpus_, std::vector<LocalApic *> Apics_, ApicBus &Bus,
                     uint64_t QuantumCycles)
    : Cpus(std::move(Cpus_)), Apics(std::move(Apics_)), Bus(Bus), Quantum(QuantumCycles),
      Stuck(Cpus.size(), 0) {
  for (LocalApic *A : Apics)
    static_cast<TimerEventSource *>(A)->setRearmListener(&rearmed, this);
}

Scheduler::~Scheduler() {
  for (LocalApic *A : Apics)
    static_cast<TimerEventSource *>(A)->setRearmListener(nullptr, nullptr);
  for (TimerEventSource *S : Shared)
    S->setRearmListener(nullptr, nullptr);
}

void Scheduler::rearmed(void *Self, uint64_t T) {
  Scheduler &S = *static_cast<Scheduler *>(Self);
  const unsigned I = S.Bus.Current < S.Cpus.size() ? S.Bus.Current : 0;
  S.Cpus[I]->pullDeadline(T);
  if (S.Cur.Open && S.Cur.Cpu == I && T < S.Cur.Until)
    S.Cur.Until = T;
}

uint64_t Scheduler::totalRetired() const {
  uint64_t N = 0;
  for (const Cpu *C : Cpus)
    N += C->Retired;
  return N;
}

uint64_t Scheduler::nextEvent(unsigned I, bool WakeOnly) const {
  uint64_t Ev = static_cast<const TimerEventSource *>(Apics[I])->nextTimerEvent();
  for (const TimerEventSource *S : Shared)
    if (!WakeOnly || S->canWake())
      Ev = std::min(Ev, S->nextTimerEvent());
  return Ev;
}

Scheduler::Outcome Scheduler::run(uint64_t MaxTotalInsns) {
  constexpr uint64_t kNever = ~uint64_t(0);
  const bool Single = Cpus.size() == 1;
  const bool WithProgress = Progress && ProgressEvery;
  const bool WithLimits = !LimitInsns.empty();
  uint64_t NextProgress = WithProgress ? totalRetired() + ProgressEvery : kNever;
  uint64_t NextPoll = StopFlag && Single ? totalRetired() + kStopPollInsns : kNever;
  const bool WithDrain = DrainPoint && DrainEvery;
  uint64_t NextDrain = WithDrain ? (totalRetired() / DrainEvery + 1) * DrainEvery : kNever;
  unsigned Last = Cur.Cpu;
  for (;;) {
    if (StopFlag && StopFlag->load(std::memory_order_relaxed)) [[unlikely]]
      return {StopReason::InsnLimit, Last, true};
    const uint64_t Total = totalRetired();
    if (Total >= MaxTotalInsns)
      return {StopReason::InsnLimit, 0};
    if (Total >= NextProgress) [[unlikely]] {
      Progress(Total);
      NextProgress = Total + ProgressEvery;
    }
    if (Total >= NextPoll)
      NextPoll = Total + kStopPollInsns;
    if (Total >= NextDrain) [[unlikely]] {
      DrainPoint();
      NextDrain = (Total / DrainEvery + 1) * DrainEvery;
    }

    if (!Cur.Open) {
      // Pick the vCPU with the smallest time at which it can run; ties by CPU number.
      unsigned Pick = ~0u;
      uint64_t PickTime = kNever;
      for (unsigned I = 0; I < Cpus.size(); ++I) {
        Cpu &C = *Cpus[I];
        LocalApic &A = *Apics[I];
        A.applySignals(); // INIT/SIPI latched by other CPUs, at this CPU's boundary
        uint64_t T = kNever;
        if (C.shutDown())
          T = C.Cycles; // runs once more to report the shutdown
        // (hasWakeEvent is asked even of a stuck vCPU: it lets a timer that expired while
        // interrupts were masked set its IRR bit, which ends that timer's event.)
        else if (!C.waiting() || (A.hasWakeEvent() && !Stuck[I]))
          T = C.Cycles;
        else if (C.Activity != ActivityState::WaitForSipi || C.NonRoot) {
          // Its timers' events, and what its own state wakes it for (a guest's VMX-
          // preemption timer in the HLT activity state).
          const uint64_t Own = C.NonRoot ? vmxWakeCycle(C) : kNever;
          const uint64_t Ev = std::min(nextEvent(I, true), Own);
          if (Ev != kNever)
            T = Ev > C.Cycles ? Ev : C.Cycles;
        }
        if (T < PickTime) {
          PickTime = T;
          Pick = I;
        }
      }
      if (Pick == ~0u)
        return {StopReason::Halted, 0};

      Cpu &C = *Cpus[Pick];
      if (C.waiting())
        C.waitUntil(PickTime); // HLT: time jumps to the timer's expiry
      for (TimerEventSource *S : Shared)
        S->advanceTo(C.Cycles); // machine-wide interrupts due by now are raised now
      uint64_t Until = Single ? kNever : C.Cycles + Quantum;
      const uint64_t Timer = nextEvent(Pick);
      if (Timer > C.Cycles && Timer < Until)
        Until = Timer; // stop exactly when the timer is due, so it fires on time
      Cur = Slice{true, Pick, Until, C.Retired, C.waiting()};
    }

    const unsigned Pick = Cur.Cpu;
    Cpu &C = *Cpus[Pick];
    uint64_t Budget = MaxTotalInsns - Total;
    if (Single && NextProgress - Total < Budget)
      Budget = NextProgress - Total;
    if (Single && NextPoll - Total < Budget)
      Budget = NextPoll - Total;
    if (Single && NextDrain - Total < Budget)
      Budget = NextDrain - Total;
    if (WithLimits) [[unlikely]] {
      if (C.Retired >= LimitInsns[Pick])
        return {StopReason::InsnLimit, Pick, false, true};
      Budget = std::min(Budget, LimitInsns[Pick] - C.Retired);
    }
    Bus.Current = Pick;
    Last = Pick;
    StopReason Why = C.run(Budget, Cur.Until);
    Bus.Current = 0;
    // The slice ends at its deadline, when its vCPU waits with nothing to do, or when
    // the vCPU ended its run early at a boundary where the machine must look at it (a
    // deadline it pulled forward: VMXOFF unblocking a held INIT, which the local APIC
    // performs at the next pick); any other return (a budget, a limit, a stop) leaves it
    // open for the next round. (The deadline may have been brought forward: rearmed()
    // moved Cur.Until with it.)
    if (C.Cycles >= Cur.Until || Why == StopReason::Halted || Why == StopReason::Deadline) {
      Cur.Open = false;
      if (C.Retired != Cur.RetiredBefore || !C.waiting())
        std::fill(Stuck.begin(), Stuck.end(), 0);
      else if (Cur.WasHalted)
        Stuck[Pick] = 1;
    }
    if (WithLimits && C.Retired >= LimitInsns[Pick]) [[unlikely]]
      return {StopReason::InsnLimit, Pick, false, true};
    switch (Why) {
    case StopReason::Deadline:
    case StopReason::Halted:
      continue;
    case StopReason::InsnLimit:
      continue; // the loop head checks the total budget
    case StopReason::Shutdown:
    case StopReason::StopRequested:
    case StopReason::Unimplemented:
    case StopReason::LockstepMismatch:
      return {Why, Pick};
    }
  }
}

void Scheduler::save(SnapshotWriter &W) const {
  W.all(Cur.Open, Cur.Cpu, Cur.Until, Cur.RetiredBefore, Cur.WasHalted);
  W.u64(Stuck.size());
  for (uint8_t S : Stuck)
    W.io(S);
}

void Scheduler::load(SnapshotReader &R) {
  R.all(Cur.Open, Cur.Cpu, Cur.Until, Cur.RetiredBefore, Cur.WasHalted);
  const uint64_t N = R.u64();
  if (R.ok() && (N != Stuck.size() || Cur.Cpu >= Cpus.size())) {
    R.fail("the snapshot's scheduler has another number of CPUs");
    Cur = Slice{};
    return;
  }
  for (uint8_t &S : Stuck)
    R.io(S);
}

} // namespace vmxsim
