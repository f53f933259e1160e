#include "harness/devices/i8042.h"

namespace vmxsim {

uint8_t I8042::status() const {
  return uint8_t((Full ? kObf : 0) | (Ram[0] & kSys) | (LastWasCommand ? kCmdData : 0) |
                 kUnlocked | (Full && FromAux ? kAuxObf : 0) | (TimedOut ? kTimeout : 0));
}

uint32_t I8042::ioRead(uint16_t Port, unsigned SizeBytes) {
  uint32_t V = 0;
  for (unsigned I = 0; I < SizeBytes; ++I) {
    const uint16_t P = uint16_t(Port + I);
    uint8_t B = 0xff;
    if (P == kCommandPort) {
      B = status();
    } else if (P == kDataPort) {
      B = OutBuf; // reads the last byte again when the buffer is empty
      Full = false;
    }
    V |= uint32_t(B) << (8 * I);
  }
  return V;
}

void I8042::ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) {
  for (unsigned I = 0; I < SizeBytes; ++I) {
    const uint16_t P = uint16_t(Port + I);
    if (P == kCommandPort)
      command(uint8_t(Value >> (8 * I)));
    else if (P == kDataPort)
      data(uint8_t(Value >> (8 * I)));
  }
}

void I8042::output(uint8_t V, bool Aux, bool Timeout) {
  OutBuf = V;
  Full = true;
  FromAux = Aux;
  TimedOut = Timeout;
  const bool Enabled = Aux ? (Ram[0] & 0x02) : (Ram[0] & 0x01);
  if (Enabled && Pulse)
    Pulse(Aux ? 12 : 1);
}

void I8042::writeOutputPort(uint8_t V) {
  OutPort = V;
  Gate.set(A20Gate::Input::Keyboard, V & 0x02);
  if (!(V & 0x01))
    Latch.request(StopCause::Reset, kCommandPort, 0);
}

void I8042::command(uint8_t C) {
  LastWasCommand = true;
  Pending = 0;
  if (C >= 0x20 && C <= 0x3f) {
    output(Ram[C & 0x1f], false);
    return;
  }
  if ((C >= 0x60 && C <= 0x7f) || C == 0xd1 || C == 0xd2 || C == 0xd3 || C == 0xd4) {
    Pending = C;
    return;
  }
  if (C >= 0xf0) {
    // Pulse the output port bits whose command bit is 0 (about 6 us low): bit 0 is the
    // CPU reset line.
    if (!(C & 0x01))
      Latch.request(StopCause::Reset, kCommandPort, 0);
    return;
  }
  switch (C) {
  case 0xa7:
    Ram[0] |= 0x20;
    return;
  case 0xa8:
    Ram[0] &= uint8_t(~0x20);
    return;
  case 0xa9: // auxiliary interface test: no error
  case 0xab: // keyboard interface test: no error
    output(0x00, false);
    return;
  case 0xaa: // controller self-test passed
    output(0x55, false);
    return;
  case 0xad:
    Ram[0] |= 0x10;
    return;
  case 0xae:
    Ram[0] &= uint8_t(~0x10);
    return;
  case 0xc0:
    output(0x80, false);
    return;
  case 0xd0:
    output(OutPort, false);
    return;
  case 0xe0:
    output(0x00, false);
    return;
  default:
    return; // reserved: ignored
  }
}

void I8042::data(uint8_t V) {
  LastWasCommand = false;
  const uint8_t C = Pending;
  Pending = 0;
  if (C >= 0x60 && C <= 0x7f) {
    Ram[C & 0x1f] = V;
    return;
  }
  switch (C) {
  case 0xd1:
    writeOutputPort(V);
    return;
  case 0xd2:
    output(V, false);
    return;
  case 0xd3:
    output(V, true);
    return;
  case 0xd4:
    output(0xfe, true, true); // no auxiliary device: transmit time-out
    return;
  default:
    // A byte for the keyboard; writing it also enables the keyboard interface (8042
    // firmware), and nothing answers: transmit time-out.
    Ram[0] &= uint8_t(~0x10);
    output(0xfe, false, true);
    return;
  }
}

} // namespace vmxsim
