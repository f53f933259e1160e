// PCI configuration mechanism #1 (PCI Local Bus Specification 3.0, "Configuration
// Mechanism #1"): CONFIG_ADDRESS at 0xcf8 (32-bit accesses only) and CONFIG_DATA at
// 0xcfc-0xcff. The bus is empty: every configuration read returns all-ones, which is how
// software sees "no device" (vendor ID 0xffff), and writes are dropped. CONFIG_ADDRESS
// reads back exactly what was written, as on QEMU's i440FX. Non-32-bit accesses to
// 0xcf8-0xcfb are not configuration cycles: they read all-ones and are ignored.
#pragma once
#include "mmu/io_bus.h"

namespace vmxsim {

class PciHost : public PortDevice {
public:
  static constexpr uint16_t kAddressPort = 0xcf8, kDataPort = 0xcfc;
  uint32_t ioRead(uint16_t Port, unsigned SizeBytes) override {
    if (Port == kAddressPort && SizeBytes == 4)
      return Address;
    return SizeBytes == 4 ? 0xffffffffu : (1u << (8 * SizeBytes)) - 1;
  }
  void ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) override {
    if (Port == kAddressPort && SizeBytes == 4)
      Address = Value;
  }
  uint32_t address() const { return Address; }

private:
  uint32_t Address = 0;
};

} // namespace vmxsim
