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
};

} // namespace vmxsim
