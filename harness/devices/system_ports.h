// Motherboard odds and ends a PC guest touches:
// - 0x92, "System Control Port A" (PS/2): bit 1 is the A20 gate (always enabled here:
//   addresses are never masked, the bit only reads back); writing bit 0 = 1 requests a
//   fast reset, which stops the machine with StopCause::Reset (status 0, like QEMU's
//   -no-reboot).
// - 0x61, "System Control Port B": bits 0-3 read back; bit 4 (refresh toggle) flips on
//   every read so delay loops that poll it terminate deterministically; bit 5 (PIT
//   channel 2 output) reads 0 — there is no PIT yet.
// - 0x8900, the Bochs/QEMU power-off port: the bytes "Shutdown" written in sequence stop
//   the machine with StopCause::PowerOff and status 0 (a guest that asks for power-off has
//   finished normally; Bochs itself exits with 1 here — see docs/reference-peers.md).
// Port 0x80 (POST codes) is deliberately left unassigned: writes are ignored, reads 0xff.
#pragma once
#include "harness/devices/stop_latch.h"

namespace vmxsim {

class SystemControlA : public PortDevice {
public:
  static constexpr uint16_t kPort = 0x92;
  explicit SystemControlA(StopLatch &Latch) : Latch(Latch) {}
  uint32_t ioRead(uint16_t, unsigned SizeBytes) override {
    return uint32_t(Value | 0x02) | (SizeBytes > 1 ? 0xffffff00u : 0);
  }
  void ioWrite(uint16_t, unsigned, uint32_t V) override {
    Value = uint8_t(V & 0xfe);
    if (V & 1)
      Latch.request(StopCause::Reset, 0, 0);
  }

private:
  StopLatch &Latch;
  uint8_t Value = 0x02;
};

class SystemControlB : public PortDevice {
public:
  static constexpr uint16_t kPort = 0x61;
  uint32_t ioRead(uint16_t, unsigned SizeBytes) override {
    Refresh ^= 0x10;
    return uint32_t((Value & 0x0f) | Refresh) | (SizeBytes > 1 ? 0xffffff00u : 0);
  }
  void ioWrite(uint16_t, unsigned, uint32_t V) override { Value = uint8_t(V & 0x0f); }

private:
  uint8_t Value = 0, Refresh = 0;
};

class PowerOffPort : public PortDevice {
public:
  static constexpr uint16_t kPort = 0x8900;
  explicit PowerOffPort(StopLatch &Latch) : Latch(Latch) {}
  uint32_t ioRead(uint16_t, unsigned SizeBytes) override {
    return SizeBytes == 4 ? 0xffffffffu : (1u << (8 * SizeBytes)) - 1;
  }
  void ioWrite(uint16_t, unsigned, uint32_t V) override {
    static constexpr char Word[] = "Shutdown";
    char C = char(V & 0xff);
    Matched = C == Word[Matched] ? Matched + 1 : (C == Word[0] ? 1 : 0);
    if (Matched == sizeof(Word) - 1) {
      Matched = 0;
      Latch.request(StopCause::PowerOff, 0, 0);
    }
  }

private:
  StopLatch &Latch;
  unsigned Matched = 0;
};

} // namespace vmxsim
