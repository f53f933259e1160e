// The deterministic multi-processor scheduler (DESIGN.md, "Several vCPUs are interleaved
// by a deterministic scheduler").
//
// Each vCPU has its own virtual clock (Cpu::Cycles). The scheduler repeatedly picks the
// vCPU with the smallest local time (ties: lowest CPU number) and runs it for one quantum
// of virtual cycles, or until its next timer event is due, whichever is first; a timer
// the running vCPU programs meanwhile (an OUT to the PIT, a store to the HPET or its
// local APIC) brings that end forward to the new event (TimerEventSource::rearmed,
// Cpu::pullDeadline), so every timer interrupt is raised at its exact cycle, however the
// run is sliced. Timer
// events come from TimerEventSources (harness/timer_event.h): each vCPU's own local APIC
// timer, and machine-wide sources (the 8254 PIT, the RTC, the HPET) whose events concern
// every vCPU; the machine-wide sources are advanced to the picked vCPU's time before it
// runs, so their interrupts are raised at the exact virtual time the running vCPU
// reaches. The interleaving therefore depends only on the guest and the machine's inputs,
// never on the host, and memory is sequentially consistent: one vCPU executes at a time,
// and LOCK'd instructions are atomic because nothing else runs during an instruction.
//
// Waiting vCPUs (HLT, shutdown excluded, and wait-for-SIPI) are not run. A waiting vCPU
// with a wake event (NMI, INIT, SIPI, a deliverable interrupt) competes at its own time
// (an IPI's target has already been moved to the sender's time, local_apic.cpp); one
// whose only future event is its APIC timer (or a timer of its own state: a guest's
// VMX-preemption timer in the HLT activity state, vmxWakeCycle) competes at the
// timer's expiry, and when it is picked its clock jumps there ("HLT advances a vCPU's
// time to its next event"). When
// every vCPU waits and none has an event, the machine is halted for good.
//
// Quantum: kDefaultQuantumCycles = 1000 virtual cycles (about 1000 simple instructions
// with cpu/cost_model.def), so a vCPU spinning on a lock held by a descheduled vCPU wastes
// at most that much before the holder runs again; MachineConfig::QuantumCycles changes
// it. With one vCPU the quantum is unlimited, so a single-CPU machine runs exactly as it
// did before the scheduler existed.
#pragma once
#include "cpu/cpu.h"
#include "harness/timer_event.h"
#include "state/snapshot_io.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

namespace vmxsim {

class LocalApic;
class ApicBus;

inline constexpr uint64_t kDefaultQuantumCycles = 1000;

class Scheduler {
public:
  /// Listens to every timer source's re-arming (each local APIC's and, through
  /// addSharedSource, the machine-wide ones) until it is destroyed.
  Scheduler(std::vector<Cpu *> Cpus, std::vector<LocalApic *> Apics, ApicBus &Bus,
            uint64_t QuantumCycles);
  ~Scheduler();
  Scheduler(const Scheduler &) = delete;
  Scheduler &operator=(const Scheduler &) = delete;

  struct Outcome {
    StopReason Why = StopReason::InsnLimit;
    unsigned CpuId = 0; ///< the vCPU that stopped (for Halted: CPU 0)
    /// The stop flag was raised (setStopFlag); Why is then InsnLimit and CpuId the vCPU
    /// that ran last.
    bool Interrupted = false;
    /// A limit of setLimits was reached by vCPU CpuId (Why is then InsnLimit).
    bool Limit = false;
  };
  /// Runs until a vCPU stops the machine (device stop request, the harness's break,
  /// shutdown, unimplemented), the total of retired instructions over all vCPUs reaches
  /// MaxTotalInsns (InsnLimit), a limit of setLimits is reached, or every vCPU waits
  /// with nothing that can wake it (Halted).
  ///
  /// Continuing. A run that returns in the middle of a vCPU's slice (a budget, a limit,
  /// a stop request, the stop flag with one vCPU) leaves the slice open: the next run()
  /// continues that vCPU to the end the slice was given (brought forward by timers it
  /// programs, as always) before it picks again, without opening a new slice (no
  /// machine-wide timer is advanced, no INIT/SIPI applied in between). So a run that is
  /// stopped and continued any number of times interleaves the vCPUs exactly as the run
  /// that was never stopped (tests/harness/run_control_test.cpp checks byte-identity).
  Outcome run(uint64_t MaxTotalInsns);
  /// Per-vCPU limits of the harness's run control (harness/run_control.h): run()
  /// returns (Outcome::Limit) once vCPU I has retired InsnAt[I] instructions (~0 = no
  /// limit), cutting its run there as the total budget does. One entry per vCPU; empty
  /// = no limits (no cost). (A cycle limit would cut the run at a cycle deadline, which
  /// splits a REP string instruction where the unlimited run does not: the run control
  /// stops at a TSC value through CpuObserver::holdBefore instead.)
  void setLimits(std::vector<uint64_t> InsnAt) { LimitInsns = std::move(InsnAt); }
  /// Calls Fn(total retired) at the scheduler's loop head once EveryInsns more
  /// instructions have retired: between quanta with several vCPUs; with one vCPU (whose
  /// run has no quanta) its run is cut at exactly those instruction counts. Neither
  /// changes what the guest sees (the vCPU re-enters through the same event window it
  /// would reach at its next block anyway, and with one vCPU there is no interleaving
  /// to change); tests/harness/progress_test.cpp checks that traces stay identical.
  void setProgress(std::function<void(uint64_t)> Fn, uint64_t EveryInsns) {
    Progress = std::move(Fn);
    ProgressEvery = EveryInsns;
  }
  /// Calls Fn() at the scheduler's loop head once the total of retired instructions
  /// reaches a multiple of EveryInsns (counted from load, not from this run, so a run
  /// continued after a stop meets the same points): between quanta with several vCPUs;
  /// with one vCPU its run is cut at exactly those counts, as setProgress cuts it. For a
  /// consumer that changes guest memory at points that depend only on the guest's
  /// progress (harness/xen_trace_drain.h); null Fn or EveryInsns 0 = none.
  void setDrainPoints(std::function<void()> Fn, uint64_t EveryInsns) {
    DrainPoint = std::move(Fn);
    DrainEvery = EveryInsns;
  }
  /// Polls *Flag at the loop head (an atomic load, relaxed: a signal handler sets it) and
  /// returns Interrupted once it is true. With one vCPU its run is cut every
  /// kStopPollInsns instructions so that the flag is seen; as with setProgress, the cut
  /// changes nothing the guest sees.
  void setStopFlag(const std::atomic<bool> *Flag) { StopFlag = Flag; }
  static constexpr uint64_t kStopPollInsns = uint64_t(1) << 20;
  /// A machine-wide timer (e.g. the PIT): every vCPU stops at its events.
  void addSharedSource(TimerEventSource *S) {
    Shared.push_back(S);
    S->setRearmListener(&rearmed, this);
  }
  /// Instructions retired by all vCPUs.
  uint64_t totalRetired() const;
  /// The vCPU that ran last (0 before the first run).
  unsigned lastCpu() const { return Cur.Cpu; }
  /// Snapshot: the open slice and the stuck marks (the vCPUs and timers save their own
  /// state), so that a restored run continues the slice a stopped run would.
  void save(SnapshotWriter &W) const;
  void load(SnapshotReader &R);

private:
  std::vector<Cpu *> Cpus;
  std::vector<LocalApic *> Apics;
  /// The earliest event of vCPU I's own timer and the machine-wide sources.
  /// With WakeOnly, only the machine-wide sources that can wake a vCPU (canWake()).
  uint64_t nextEvent(unsigned I, bool WakeOnly = false) const;
  /// A timer source was programmed (by the running vCPU: only it executes): its next
  /// event at cycle T ends that vCPU's run, so the event is raised exactly on time.
  static void rearmed(void *Self, uint64_t T);

  ApicBus &Bus;
  uint64_t Quantum;
  std::function<void(uint64_t)> Progress;
  uint64_t ProgressEvery = 0;
  std::function<void()> DrainPoint;
  uint64_t DrainEvery = 0;
  const std::atomic<bool> *StopFlag = nullptr;
  std::vector<TimerEventSource *> Shared;
  std::vector<uint64_t> LimitInsns;
  /// The vCPU slice in progress: its vCPU, the cycle it runs to (the quantum's end or
  /// the next timer event; rearmed() brings it forward as it does the vCPU's deadline),
  /// and what it was at the start.
  struct Slice {
    bool Open = false;
    unsigned Cpu = 0;
    uint64_t Until = 0;
    uint64_t RetiredBefore = 0;
    bool WasHalted = false;
  } Cur;
  /// A waiting vCPU whose wake event its own event window then declines (e.g. an
  /// interrupt a guest in VMX non-root HLT cannot take) would be picked forever: it is
  /// skipped until some vCPU makes progress, which is what can change its situation.
  std::vector<uint8_t> Stuck;
};

} // namespace vmxsim
