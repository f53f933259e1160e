// Helpers for the system-architecture tests: descriptors, IDT gates, TSS images and a
// scriptable interrupt controller.
#pragma once
#include "cpu/cpu.h"
#include "tests/support/test_machine.h"

#include <cstdint>
#include <vector>

namespace vmxsim::test {

/// An 8-byte code/data/system descriptor (SDM Vol. 3A, Segment Descriptors).
inline uint64_t segDesc(uint32_t Base, uint32_t Limit, uint8_t Access, uint8_t Flags) {
  return (uint64_t(Limit & 0xffff)) | (uint64_t(Base & 0xffffff) << 16) |
         (uint64_t(Access) << 40) | (uint64_t((Limit >> 16) & 0xf) << 48) |
         (uint64_t(Flags & 0xf) << 52) | (uint64_t(Base >> 24) << 56);
}

/// A legacy (8-byte) gate: Type 0xE interrupt, 0xF trap, 0xC call gate (ParamCount).
inline uint64_t gate32(uint16_t Sel, uint32_t Off, uint8_t Type, unsigned Dpl,
                       bool Present = true, unsigned ParamCount = 0) {
  return (Off & 0xffff) | (uint64_t(Sel) << 16) | (uint64_t(ParamCount & 0x1f) << 32) |
         (uint64_t(Type) << 40) | (uint64_t(Dpl) << 45) | (uint64_t(Present) << 47) |
         (uint64_t(Off >> 16) << 48);
}

/// A 16-byte IA-32e gate (interrupt 0xE, trap 0xF, call 0xC).
inline void gate64(TestMachine &M, uint64_t At, uint16_t Sel, uint64_t Off, uint8_t Type,
                   unsigned Dpl, unsigned Ist = 0, bool Present = true) {
  uint64_t G[2] = {(Off & 0xffff) | (uint64_t(Sel) << 16) | (uint64_t(Ist & 7) << 32) |
                       (uint64_t(Type) << 40) | (uint64_t(Dpl) << 45) |
                       (uint64_t(Present) << 47) | (((Off >> 16) & 0xffff) << 48),
                   Off >> 32};
  M.write(At, G, 16);
}

/// An interrupt controller with one interrupt, vector 0x40, pending while Pending is set.
class OneInterrupt : public InterruptSource {
public:
  bool intrPending() override { return Pending; }
  uint8_t acknowledge() override {
    Pending = false;
    ++Acks;
    return 0x40;
  }
  bool Pending = false;
  unsigned Acks = 0;
};

inline void write64(TestMachine &M, uint64_t At, uint64_t V) { M.write(At, &V, 8); }
inline void write32(TestMachine &M, uint64_t At, uint32_t V) { M.write(At, &V, 4); }
inline void write16(TestMachine &M, uint64_t At, uint16_t V) { M.write(At, &V, 2); }
inline uint32_t read32(TestMachine &M, uint64_t At) { return uint32_t(M.read64(At)); }
inline uint16_t read16(TestMachine &M, uint64_t At) { return uint16_t(M.read64(At)); }

/// An interrupt controller that raises one vector once Cpu::Retired reaches a count.
class ScriptedIntr : public InterruptSource {
public:
  ScriptedIntr(const Cpu &C, uint64_t AtRetired, uint8_t Vector)
      : C(C), At(AtRetired), Vector(Vector) {}
  bool intrPending() override { return !Taken && C.Retired >= At; }
  uint8_t acknowledge() override {
    Taken = true;
    AckRetired = C.Retired;
    return Vector;
  }
  const Cpu &C;
  uint64_t At;
  uint8_t Vector;
  bool Taken = false;
  uint64_t AckRetired = 0;
};

} // namespace vmxsim::test
