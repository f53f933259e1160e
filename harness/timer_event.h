// A device that raises interrupts at virtual times it knows in advance (the local APIC
// timer, the 8254 PIT, the RTC, the HPET). The scheduler (harness/scheduler.h) asks each
// source for its next event so that it can end a vCPU's run exactly then, and so that a
// halted vCPU's clock can jump to it ("HLT advances a vCPU's time to its next event").
#pragma once
#include <cstdint>

namespace vmxsim {

inline constexpr uint64_t kNoTimerEvent = ~uint64_t(0);

class TimerEventSource {
public:
  virtual ~TimerEventSource() = default;
  /// Virtual cycle at which the source next raises an interrupt, or kNoTimerEvent.
  virtual uint64_t nextTimerEvent() const = 0;
  /// Raises everything due at or before virtual cycle Now. Sources that check their
  /// deadline lazily on their own (the local APIC, in intrPending) need nothing here.
  virtual void advanceTo(uint64_t Now) { (void)Now; }
  /// Whether the source's interrupt can currently reach a processor (e.g. not masked
  /// at every controller). A halted vCPU's clock jumps only to events that can wake it,
  /// so that a masked periodic timer cannot keep a halted machine "busy" forever.
  virtual bool canWake() const { return true; }

  /// Who is told when the source's next event may have moved earlier: the scheduler,
  /// which brings the running vCPU's deadline forward to it (Cpu::pullDeadline), so the
  /// event is raised at its exact cycle and not at the end of a slice handed out before
  /// the guest armed it. Fn(Ctx, nextTimerEvent()).
  void setRearmListener(void (*Fn)(void *, uint64_t), void *Ctx) {
    Listener = Fn;
    ListenerCtx = Ctx;
  }

protected:
  /// A source calls this after every change of its programming by the guest (a register
  /// write), so that a timer armed during a vCPU's run is seen at once.
  void rearmed() const {
    if (Listener)
      Listener(ListenerCtx, nextTimerEvent());
  }

private:
  void (*Listener)(void *, uint64_t) = nullptr;
  void *ListenerCtx = nullptr;
};

} // namespace vmxsim
