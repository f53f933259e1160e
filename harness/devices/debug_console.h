// Bochs/QEMU debug console port (0xe9): a byte written goes to the console output; a read
// returns 0xe9 so a guest can detect the port (Bochs "port_e9_hack", QEMU -debugcon).
#pragma once
#include "harness/output.h"
#include "mmu/io_bus.h"

namespace vmxsim {

class DebugConsole : public PortDevice {
public:
  static constexpr uint16_t kPort = 0xe9;
  explicit DebugConsole(OutputSink &Out) : Out(Out) {}
  uint32_t ioRead(uint16_t, unsigned) override { return kPort; }
  void ioWrite(uint16_t, unsigned, uint32_t Value) override { Out.put(uint8_t(Value)); }

private:
  OutputSink &Out;
};

} // namespace vmxsim
