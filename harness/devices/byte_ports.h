// Base for devices whose registers are bytes at consecutive ports (the UART, the PIC). A
// 16- or 32-bit access is split into byte accesses at Port, Port+1, ... as the ISA bus
// does for an 8-bit device; bytes past the device's own range read 0xff.
#pragma once
#include "mmu/io_bus.h"

#include <cstdint>

namespace vmxsim {

class BytePortDevice : public PortDevice {
public:
  BytePortDevice(uint16_t Base, uint16_t Count) : Base(Base), Count(Count) {}
  uint32_t ioRead(uint16_t Port, unsigned SizeBytes) override {
    uint32_t V = 0;
    for (unsigned I = 0; I < SizeBytes; ++I) {
      uint16_t P = uint16_t(Port + I);
      uint32_t B = uint16_t(P - Base) < Count ? readByte(uint16_t(P - Base)) : 0xff;
      V |= B << (8 * I);
    }
    return V;
  }
  void ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) override {
    for (unsigned I = 0; I < SizeBytes; ++I) {
      uint16_t P = uint16_t(Port + I);
      if (uint16_t(P - Base) < Count)
        writeByte(uint16_t(P - Base), uint8_t(Value >> (8 * I)));
    }
  }
  uint16_t base() const { return Base; }

protected:
  /// Offset is relative to the device's first port.
  virtual uint8_t readByte(uint16_t Offset) = 0;
  virtual void writeByte(uint16_t Offset, uint8_t Value) = 0;

private:
  uint16_t Base, Count;
};

} // namespace vmxsim
