// QEMU's isa-debug-exit device (iobase 0xf4, iosize 4): any write of value V stops the
// machine with exit status (V << 1) | 1, so a guest exit is always odd and cannot be
// mistaken for QEMU's (or vmxsim's) own statuses. The write's width decides V (an OUT of
// AL passes one byte). Reads return 0, as in QEMU.
#pragma once
#include "harness/devices/stop_latch.h"

namespace vmxsim {

class DebugExit : public PortDevice {
public:
  static constexpr uint16_t kPort = 0xf4, kSize = 4;
  explicit DebugExit(StopLatch &Latch) : Latch(Latch) {}
  /// The process exit status for a written value: only the low 8 bits survive exit(2).
  static int exitStatusFor(uint32_t V) { return int(((uint64_t(V) << 1) | 1) & 0xff); }
  uint32_t ioRead(uint16_t, unsigned) override { return 0; }
  void ioWrite(uint16_t, unsigned, uint32_t Value) override {
    Latch.request(StopCause::DebugExit, Value, exitStatusFor(Value));
  }

private:
  StopLatch &Latch;
};

} // namespace vmxsim
