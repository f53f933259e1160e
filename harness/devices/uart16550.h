// National Semiconductor PC16550D UART (COM1 at 0x3f8): the register file a driver probes
// and polls. Transmission is instantaneous: the holding and shift registers are always
// empty (LSR bits 5 and 6), so output is deterministic. There is no host input: the
// receiver only ever holds bytes looped back in loopback mode (MCR bit 4). Interrupt
// identification (IIR) is computed for the THRE and receive-data conditions, but no IRQ
// line is wired to the PIC yet.
#pragma once
#include "harness/devices/byte_ports.h"
#include "harness/output.h"

#include <deque>

namespace vmxsim {

class Uart16550 : public BytePortDevice {
public:
  static constexpr uint16_t kCom1 = 0x3f8;
  /// Register offsets (PC16550D data sheet, Table II "Register Addresses").
  enum Reg : uint16_t { RbrThr = 0, Ier = 1, IirFcr = 2, Lcr = 3, Mcr = 4, Lsr = 5, Msr = 6,
                        Scr = 7 };
  static constexpr uint8_t LcrDlab = 0x80, LsrDr = 0x01, LsrThre = 0x20, LsrTemt = 0x40,
                           McrLoop = 0x10, IerRda = 0x01, IerThre = 0x02;

  Uart16550(uint16_t Base, OutputSink &Out) : BytePortDevice(Base, 8), Out(Out) { reset(); }
  void reset();
  uint16_t divisor() const { return Divisor; }

protected:
  uint8_t readByte(uint16_t Offset) override;
  void writeByte(uint16_t Offset, uint8_t Value) override;

private:
  uint8_t iir() const;

  OutputSink &Out;
  std::deque<uint8_t> Rx; ///< loopback bytes not yet read
  uint16_t Divisor = 0;
  uint8_t IerV = 0, LcrV = 0, McrV = 0, ScrV = 0;
  bool FifoEnabled = false;
  uint8_t FcrTrigger = 0;
  bool ThrePending = false; ///< THRE interrupt condition, cleared by reading IIR
};

} // namespace vmxsim
