// The PC keyboard controller, an Intel 8042 running the IBM AT/PS/2 firmware, at ports 0x60
// (data) and 0x64 (status on reads, commands on writes) (IBM PS/2 Hardware Interface
// Technical Reference, "Keyboard/Auxiliary Device Controller"), with no keyboard and no
// mouse attached.
//
// Status (0x64): bit 0 output buffer full, 1 input buffer full (always 0: every write is
// processed at once), 2 system flag (command byte bit 2), 3 command/data (1 after a write
// to 0x64), 4 keyboard not inhibited (1), 5 the output buffer holds auxiliary-device data,
// 6 time-out (the last device byte got no answer), 7 parity error (0).
//
// Commands: 0x20-0x3f read controller RAM byte 0-31 (byte 0 is the command byte), 0x60-0x7f
// write one (the next data byte); 0xa7/0xa8 disable/enable the auxiliary interface
// (command byte bit 5), 0xa9 test it (0x00: no error), 0xaa controller self-test (0x55),
// 0xab keyboard interface test (0x00), 0xad/0xae disable/enable the keyboard (bit 4),
// 0xc0 read input port (0x80: keyboard not inhibited, jumpers 0), 0xd0 read output port,
// 0xd1 write output port (next data byte: bit 0 = 0 resets the CPU, bit 1 is the A20 gate
// input, harness/devices/a20_gate.h; the other bits read back as written), 0xd2/0xd3 put
// the next data byte in the output buffer as if from the keyboard / auxiliary device,
// 0xd4 send the next data byte to the auxiliary device, 0xe0 read test inputs (0x00),
// 0xf0-0xff pulse output port bits 3-0 low where the command's bit is 0: bit 0 is the CPU
// reset line, so 0xfe (and every even value) resets. Other command codes are ignored
// (reserved on the 8042 firmware: no response).
//
// Devices: none. A byte written to 0x60 that is not a command's parameter goes to the
// keyboard, and one after 0xd4 to the auxiliary device; with nothing there the controller
// answers as its firmware does on a transmit time-out: output buffer 0xfe with status
// bit 6 set (and bit 5 for the auxiliary device), which Linux's i8042 driver reports as
// "no device". Output for the keyboard port raises IRQ 1 when command byte bit 0 is set,
// for the auxiliary port IRQ 12 when bit 1 is set (an edge when the byte is placed).
//
// Reset: the CPU reset (output port bit 0 written 0, or a pulse of it) ends the run with
// StopCause::Reset, value 0x64, status 0, as the other reset paths (system_ports.h).
// Power-on state, as a BIOS leaves it: command byte 0x65 (keyboard interrupt, system flag,
// auxiliary interface disabled, scan-code translation); output port 0x01 (not in reset,
// A20 input off: SeaBIOS enables A20 through port 0x92).
#pragma once
#include "harness/devices/a20_gate.h"
#include "harness/devices/stop_latch.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <functional>

namespace vmxsim {

class I8042 : public PortDevice {
public:
  static constexpr uint16_t kDataPort = 0x60, kCommandPort = 0x64;
  // Status bits.
  static constexpr uint8_t kObf = 0x01, kSys = 0x04, kCmdData = 0x08, kUnlocked = 0x10,
                           kAuxObf = 0x20, kTimeout = 0x40;

  I8042(StopLatch &Latch, A20Gate &Gate) : Latch(Latch), Gate(Gate) {}
  /// An edge on ISA IRQ Irq (1: keyboard, 12: auxiliary device).
  std::function<void(unsigned Irq)> Pulse;

  uint32_t ioRead(uint16_t Port, unsigned SizeBytes) override;
  void ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) override;

  uint8_t status() const;
  uint8_t commandByte() const { return Ram[0]; }
  uint8_t outputPort() const { return OutPort; }

private:
  void command(uint8_t C);
  void data(uint8_t V);
  void output(uint8_t V, bool Aux, bool Timeout = false);
  void writeOutputPort(uint8_t V);

  StopLatch &Latch;
  A20Gate &Gate;
  uint8_t Ram[32] = {0x65};
  uint8_t OutPort = 0x01;
  uint8_t OutBuf = 0;
  bool Full = false, FromAux = false, TimedOut = false, LastWasCommand = false;
  uint8_t Pending = 0; ///< the command waiting for its data byte, or 0
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Ram, S.OutPort, S.OutBuf, S.Full, S.FromAux, S.TimedOut, S.LastWasCommand,
          S.Pending);
  }
};

} // namespace vmxsim
