// Observing exceptions in instruction tests, before and after IDT event delivery exists.
// runToFault installs an IDT whose vector V handler is a single HLT at kHandlerBase + V.
// With real delivery the run halts in that handler; with the bootstrap delivery stub
// (cpu/exceptions.cpp returning Shutdown) the run stops with StopReason::Shutdown and the
// pending event is still in Cpu::Pending. Both are reported the same way.
#pragma once
#include "tests/support/test_machine.h"

#include <cstdint>
#include <vector>

namespace vmxsim::test {

inline constexpr uint64_t kHandlerBase = kCodeBase + 0x8000;

struct FaultInfo {
  bool Faulted = false;
  uint8_t Vector = 0;
  uint64_t Rip = 0;     ///< RIP of the faulting instruction
  uint64_t Cr2 = 0;     ///< #PF linear address
  uint32_t ErrorCode = 0;
};

inline bool vectorHasErrorCode(uint8_t V) {
  return V == 8 || (V >= 10 && V <= 14) || V == 17 || V == 21;
}

/// Gates for vectors 0..31 (64-bit or 32-bit interrupt gates) and their HLT handlers.
inline void installFaultHandlers(TestMachine &M, bool Long) {
  std::vector<uint8_t> Hlt(32, 0xf4);
  M.write(kHandlerBase, Hlt.data(), Hlt.size());
  for (unsigned V = 0; V < 32; ++V) {
    uint64_t H = kHandlerBase + V;
    if (Long) {
      uint64_t Lo = (H & 0xffff) | (uint64_t(kSelCode64) << 16) | (uint64_t(0x8e) << 40) |
                    (((H >> 16) & 0xffff) << 48);
      uint64_t Hi = H >> 32;
      M.write(kIdtBase + 16 * V, &Lo, 8);
      M.write(kIdtBase + 16 * V + 8, &Hi, 8);
    } else {
      uint64_t G = (H & 0xffff) | (uint64_t(kSelCode32) << 16) | (uint64_t(0x8e) << 40) |
                   (((H >> 16) & 0xffff) << 48);
      M.write(kIdtBase + 8 * V, &G, 8);
    }
  }
  M.S.Idtr = TableReg{kIdtBase, uint16_t(Long ? 32 * 16 - 1 : 32 * 8 - 1)};
}

/// Runs until the code faults (or halts/stops otherwise: Faulted stays false).
inline FaultInfo runToFault(TestMachine &M, uint64_t MaxInsns = 1000) {
  const bool Long = M.S.longMode();
  installFaultHandlers(M, Long);
  StopReason Why = M.run(MaxInsns);
  FaultInfo F;
  if (Why == StopReason::Shutdown) { // bootstrap delivery: the event is still pending
    F.Faulted = true;
    F.Vector = M.Cpu_.Pending.Vector;
    F.Rip = M.S.Rip;
    F.Cr2 = M.Cpu_.Pending.FaultAddr;
    F.ErrorCode = M.Cpu_.Pending.ErrorCode;
    M.Cpu_.Activity = ActivityState::Active;
    return F;
  }
  if (Why == StopReason::Halted && M.S.Rip > kHandlerBase && M.S.Rip <= kHandlerBase + 32) {
    F.Faulted = true;
    F.Vector = uint8_t(M.S.Rip - kHandlerBase - 1);
    const unsigned Slot = Long ? 8 : 4;
    uint64_t Sp = M.S.Gpr[RSP];
    uint64_t Err = 0, Rip = 0;
    if (vectorHasErrorCode(F.Vector)) {
      M.Mem.copyOut(Hpa(Sp), &Err, Slot);
      Sp += Slot;
    }
    M.Mem.copyOut(Hpa(Sp), &Rip, Slot);
    F.Rip = Rip;
    F.ErrorCode = uint32_t(Err);
    F.Cr2 = M.S.Cr2;
    M.Cpu_.Activity = ActivityState::Active;
  }
  return F;
}

} // namespace vmxsim::test
