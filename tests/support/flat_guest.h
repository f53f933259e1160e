// Set-up shared by the device tests that run a small 32-bit flat guest (loaded with
// MachineConfig::FlatAddr and EntryMode::Prot32) and take one device interrupt in it.
#pragma once
#include "harness/machine.h"

#include <cstdint>
#include <initializer_list>

namespace vmxsim::test {

/// A 32-bit interrupt gate (SDM Vol. 3A, IDT Descriptors) for Vector at Handler in an IDT
/// at 0x3000, IDTR pointing at it, and the stack at 0x9000. False if the gate cannot be
/// written.
inline bool installInterruptGate(Machine &M, uint8_t Vector, uint32_t Handler) {
  Cpu &C = M.bsp();
  const uint16_t Cs = C.S.seg(SegReg::CS).Selector;
  const uint8_t Gate[8] = {uint8_t(Handler), uint8_t(Handler >> 8), uint8_t(Cs),
                           uint8_t(Cs >> 8), 0, 0x8e, uint8_t(Handler >> 16),
                           uint8_t(Handler >> 24)};
  C.S.Idtr.Base = 0x3000;
  C.S.Idtr.Limit = 0x7ff;
  C.S.Gpr[4] = 0x9000;
  return M.mem().copyIn(Hpa(0x3000 + 8 * Vector), Gate, 8);
}

/// Initialises one 8259 (master at 0x20, slave at 0xa0) in 8086 mode: ICW1 (edge, cascade,
/// ICW4), ICW2 = VectorBase, ICW3 (the master's IR2 cascade, or the slave's ID 2), ICW4,
/// then the interrupt mask register (OCW1) = Mask.
inline void initPic(Machine &M, bool Slave, uint8_t VectorBase, uint8_t Mask) {
  const uint16_t Port = Slave ? 0xa0 : 0x20;
  IoBus &Io = M.io();
  Io.write(Port, 1, 0x11);
  for (uint8_t V : {VectorBase, uint8_t(Slave ? 0x02 : 0x04), uint8_t(0x01), Mask})
    Io.write(uint16_t(Port + 1), 1, V);
}

} // namespace vmxsim::test
