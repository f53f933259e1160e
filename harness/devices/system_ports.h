// Motherboard odds and ends a PC guest touches:
// - 0x92, "System Control Port A" (PS/2; PIIX3 "Port 92h"): bit 1 is the ALT_A20 input of
//   the A20 gate (harness/devices/a20_gate.h), read back as written; writing bit 0 = 1
//   requests a fast reset, which ends the run with StopCause::Reset (value 0x92, status 0,
//   like QEMU's -no-reboot: vmxsim has no firmware to reboot into). Bit 0 reads 0.
// - 0x61, "System Control Port B" (PIIX3 "NMI Status and Control Register"): bit 0 is the
//   8254's channel 2 GATE, bit 1 the speaker data enable (recorded; there is no speaker),
//   bits 2-3 the parity and channel-check enables (read back); bit 4 (refresh toggle)
//   flips on every read so delay loops that poll it terminate deterministically; bit 5 is
//   channel 2's OUT at the current virtual time; bits 6-7 (channel check, parity error)
//   read 0: nothing raises them.
// - 0xcf9, the PIIX3 "Reset Control Register": a write with bit 2 (reset CPU) set ends
//   the run with StopCause::Reset (value 0xcf9, status 0), whether bit 1 asks for a hard
//   (1) or soft (0) reset: with no firmware a soft reset (INIT) could only restart a
//   guest that never expects it. The FADT's reset register is this port with value 6.
//   Reads return bit 1 as last written (bit 2 reads 0). Only byte accesses reach it; a
//   dword at 0xcf8 is the PCI CONFIG_ADDRESS (harness/devices/pci_host.h).
// - 0x80, the POST-code port: writes are recorded (lastValue()) and otherwise ignored;
//   reads return 0xff, as the ISA bus's unclaimed port does on QEMU.
// - 0x8900, the Bochs/QEMU power-off port: the bytes "Shutdown" written in sequence stop
//   the machine with StopCause::PowerOff and status 0 (a guest that asks for power-off has
//   finished normally; Bochs itself exits with 1 here — see docs/reference-peers.md).
#pragma once
#include "harness/devices/a20_gate.h"
#include "harness/devices/pit8254.h"
#include "harness/devices/stop_latch.h"
#include "state/snapshot_io.h"

namespace vmxsim {

inline uint32_t unclaimedBytes(unsigned SizeBytes) {
  return SizeBytes == 4 ? 0xffffffffu : (1u << (8 * SizeBytes)) - 1;
}

class SystemControlA : public PortDevice {
public:
  static constexpr uint16_t kPort = 0x92;
  SystemControlA(StopLatch &Latch, A20Gate &Gate) : Latch(Latch), Gate(Gate) {}
  uint32_t ioRead(uint16_t, unsigned SizeBytes) override {
    return uint32_t(Value) | (unclaimedBytes(SizeBytes) & ~0xffu);
  }
  void ioWrite(uint16_t, unsigned, uint32_t V) override {
    Value = uint8_t(V & 0xfe);
    Gate.set(A20Gate::Input::Port92, V & 2);
    if (V & 1)
      Latch.request(StopCause::Reset, kPort, 0);
  }

private:
  StopLatch &Latch;
  A20Gate &Gate;
  uint8_t Value = 0x02;
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Value);
  }
};

class SystemControlB : public PortDevice {
public:
  static constexpr uint16_t kPort = 0x61;
  explicit SystemControlB(Pit8254 &Pit) : Pit(Pit) {}
  uint32_t ioRead(uint16_t, unsigned SizeBytes) override {
    Refresh ^= 0x10;
    const uint8_t Out2 = Pit.output(2) ? 0x20 : 0;
    return uint32_t((Value & 0x0f) | Refresh | Out2) | (unclaimedBytes(SizeBytes) & ~0xffu);
  }
  void ioWrite(uint16_t, unsigned, uint32_t V) override {
    Value = uint8_t(V & 0x0f);
    Pit.setGate(2, V & 1);
  }

private:
  Pit8254 &Pit;
  uint8_t Value = 0, Refresh = 0;
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Value, S.Refresh);
  }
};

class ResetControl : public PortDevice {
public:
  static constexpr uint16_t kPort = 0xcf9;
  explicit ResetControl(StopLatch &Latch) : Latch(Latch) {}
  uint32_t ioRead(uint16_t, unsigned SizeBytes) override {
    return uint32_t(Value) | (unclaimedBytes(SizeBytes) & ~0xffu);
  }
  void ioWrite(uint16_t, unsigned, uint32_t V) override {
    Value = uint8_t(V & 0x02);
    if (V & 0x04)
      Latch.request(StopCause::Reset, kPort, 0);
  }

private:
  StopLatch &Latch;
  uint8_t Value = 0;
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Value);
  }
};

class PostCodePort : public PortDevice {
public:
  static constexpr uint16_t kPort = 0x80;
  uint32_t ioRead(uint16_t, unsigned SizeBytes) override { return unclaimedBytes(SizeBytes); }
  void ioWrite(uint16_t, unsigned, uint32_t V) override { Last = uint8_t(V); }
  uint8_t lastValue() const { return Last; }

private:
  uint8_t Last = 0;
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Last);
  }
};

class PowerOffPort : public PortDevice {
public:
  static constexpr uint16_t kPort = 0x8900;
  explicit PowerOffPort(StopLatch &Latch) : Latch(Latch) {}
  uint32_t ioRead(uint16_t, unsigned SizeBytes) override { return unclaimedBytes(SizeBytes); }
  void ioWrite(uint16_t, unsigned, uint32_t V) override {
    static constexpr char Word[] = "Shutdown";
    char C = char(V & 0xff);
    Matched = C == Word[Matched] ? Matched + 1 : (C == Word[0] ? 1 : 0);
    if (Matched == sizeof(Word) - 1) {
      Matched = 0;
      Latch.request(StopCause::PowerOff, kPort, 0);
    }
  }

private:
  StopLatch &Latch;
  unsigned Matched = 0;
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Matched);
  }
};

} // namespace vmxsim
