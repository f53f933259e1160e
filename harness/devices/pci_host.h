// PCI configuration mechanism #1 (PCI Local Bus Specification 3.0, "Configuration
// Mechanism #1"): CONFIG_ADDRESS at 0xcf8 (32-bit accesses only) and CONFIG_DATA at
// 0xcfc-0xcff, with the two functions of QEMU's pc machine that a kernel reads:
//
//   00:00.0 host bridge, Intel 82441FX PMC (440FX data sheet, "PCI Configuration
//           Registers"): vendor 0x8086, device 0x1237, revision 0x02, class 0x060000,
//           header type 0x00; PAM0-PAM6 (0x59-0x5f) writable, read 0x33 (the BIOS areas
//           read/write RAM, as vmxsim's memory is), SMRAM (0x72) writable, 0x02.
//   00:01.0 ISA bridge, Intel 82371SB PIIX3 function 0 (PIIX3 data sheet, "PCI to ISA
//           Bridge Configuration Registers"): vendor 0x8086, device 0x7000, revision
//           0x00, class 0x060100, header type 0x80 (multi-function); PIRQRC[A:D]
//           (0x60-0x63) writable (bits 7 and 3:0), reading 0x0a, 0x0a, 0x0b, 0x0b: IRQ 10
//           for PIRQA/B and 11 for PIRQC/D, as SeaBIOS leaves them on QEMU.
//
// Both: command 0x0007 / 0x0006 (bits 0-2 writable; the rest read 0), status 0x0200
// (DEVSEL medium timing; read-only: no error bit is ever set), subsystem vendor 0x1af4 and
// subsystem 0x1100 (QEMU's), everything else 0 and read-only. Any other bus, device or
// function reads all-ones (no device) and drops writes.
//
// Accesses: with CONFIG_ADDRESS bit 31 set, a 1-, 2- or 4-byte access at 0xcfc + N reaches
// configuration byte (CONFIG_ADDRESS & 0xfc) + N onwards, bytes past 0xff wrapping within
// the function's 256; with bit 31 clear, data reads all-ones and writes are dropped.
// CONFIG_ADDRESS reads back exactly what was written, as on QEMU's i440FX. Non-32-bit
// accesses to 0xcf8-0xcfb are not configuration cycles: they read all-ones and are
// ignored — except a byte at 0xcf9, which is the PIIX3 reset control register
// (ResetControl, harness/devices/system_ports.h, registered over it).
#pragma once
#include "mmu/io_bus.h"
#include "state/snapshot_io.h"

#include <cstdint>

namespace vmxsim {

class PciHost : public PortDevice {
public:
  static constexpr uint16_t kAddressPort = 0xcf8, kDataPort = 0xcfc;

  PciHost() {
    // 00:00.0, 82441FX.
    initCommon(HostBridge, 0x1237, 0x02, 0x060000, 0x00, 0x0006);
    for (unsigned R = 0x59; R <= 0x5f; ++R)
      setWritable(HostBridge, R, 0x33, 0xff);
    setWritable(HostBridge, 0x72, 0x02, 0xff);
    // 00:01.0, PIIX3 PCI-to-ISA bridge.
    initCommon(IsaBridge, 0x7000, 0x00, 0x060100, 0x80, 0x0007);
    static constexpr uint8_t Pirq[4] = {0x0a, 0x0a, 0x0b, 0x0b};
    for (unsigned I = 0; I < 4; ++I)
      setWritable(IsaBridge, 0x60 + I, Pirq[I], 0x8f);
  }

  uint32_t ioRead(uint16_t Port, unsigned SizeBytes) override {
    if (Port == kAddressPort && SizeBytes == 4)
      return Address;
    const Function *F = Port >= kDataPort ? selected() : nullptr;
    uint32_t V = 0;
    for (unsigned I = 0; I < SizeBytes; ++I) {
      const uint8_t B = F ? F->Cfg[(configOffset(Port) + I) & 0xff] : 0xff;
      V |= uint32_t(B) << (8 * I);
    }
    return V;
  }
  void ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) override {
    if (Port == kAddressPort && SizeBytes == 4) {
      Address = Value;
      return;
    }
    Function *F = Port >= kDataPort ? selected() : nullptr;
    if (!F)
      return;
    for (unsigned I = 0; I < SizeBytes; ++I) {
      const unsigned Off = (configOffset(Port) + I) & 0xff;
      const uint8_t B = uint8_t(Value >> (8 * I));
      F->Cfg[Off] = uint8_t((F->Cfg[Off] & ~F->WriteMask[Off]) | (B & F->WriteMask[Off]));
    }
  }
  uint32_t address() const { return Address; }
  /// Configuration byte Offset of 00:Device.0 (Device 0 or 1), for tests.
  uint8_t configByte(unsigned Device, unsigned Offset) const {
    return Funcs[Device & 1].Cfg[Offset & 0xff];
  }

private:
  struct Function {
    uint8_t Cfg[256] = {};
    uint8_t WriteMask[256] = {};
  };
  enum : unsigned { HostBridge = 0, IsaBridge = 1 };

  void put16(Function &F, unsigned Off, uint16_t V) {
    F.Cfg[Off] = uint8_t(V);
    F.Cfg[Off + 1] = uint8_t(V >> 8);
  }
  void initCommon(unsigned Idx, uint16_t Device, uint8_t Revision, uint32_t Class,
                  uint8_t HeaderType, uint16_t Command) {
    Function &F = Funcs[Idx];
    put16(F, 0x00, 0x8086);
    put16(F, 0x02, Device);
    put16(F, 0x04, Command);
    F.WriteMask[0x04] = 0x07; // I/O space, memory space, bus master
    put16(F, 0x06, 0x0200);
    F.Cfg[0x08] = Revision;
    F.Cfg[0x09] = uint8_t(Class);
    F.Cfg[0x0a] = uint8_t(Class >> 8);
    F.Cfg[0x0b] = uint8_t(Class >> 16);
    F.Cfg[0x0e] = HeaderType;
    put16(F, 0x2c, 0x1af4);
    put16(F, 0x2e, 0x1100);
  }
  void setWritable(unsigned Idx, unsigned Off, uint8_t Value, uint8_t Mask) {
    Funcs[Idx].Cfg[Off] = Value;
    Funcs[Idx].WriteMask[Off] = Mask;
  }
  unsigned configOffset(uint16_t Port) const {
    return (Address & 0xfc) + unsigned(Port - kDataPort);
  }
  /// The function CONFIG_ADDRESS selects, or null (disabled, or no device there).
  Function *selected() {
    if (!(Address & 0x80000000u))
      return nullptr;
    const unsigned Bus = (Address >> 16) & 0xff, Dev = (Address >> 11) & 0x1f,
                   Fn = (Address >> 8) & 7;
    if (Bus != 0 || Fn != 0 || Dev > 1)
      return nullptr;
    return &Funcs[Dev];
  }

  uint32_t Address = 0;
  Function Funcs[2];
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Address);
    for (auto &F : S.Funcs)
      A.all(F.Cfg); // WriteMask is the chip's, set by the constructor
  }
};

} // namespace vmxsim
