// A placeholder local APIC register page at 0xfee00000 (SDM Vol. 3A, Advanced
// Programmable Interrupt Controller (APIC) > Local APIC Register Address Map). What is
// modelled: a register file with one 32-bit register per 16-byte slot of the 4 KiB page.
// Reset values (SDM Vol. 3A, Local APIC State After Power-Up or Reset): ID (0x20) = APIC
// ID << 24, version (0x30) = 0x00050014 (version 0x14, max LVT entry 5), DFR (0xe0) =
// 0xffffffff, SVR (0xf0) = 0xff (software-disabled), the six LVT registers (0x320-0x370)
// = 0x00010000 (masked), everything else 0. Writes are stored and read back, except the
// version register and the read-only ISR/TMR/IRR/PPR/APR/current-count registers, which
// keep their value (0). Nothing else happens: no timer, no interrupt delivery, no IPIs,
// no EOI processing, no relocation through IA32_APIC_BASE, and one page serves the
// machine (it reports the BSP's ID). A full APIC is a later issue.
#pragma once
#include "mmu/phys_mem.h"

#include <cstdint>

namespace vmxsim {

class LocalApic : public MmioDevice {
public:
  static constexpr uint64_t kBase = 0xfee00000, kSize = 0x1000;
  enum Reg : uint32_t { Id = 0x20, Version = 0x30, Tpr = 0x80, Apr = 0x90, Ppr = 0xa0,
                        Eoi = 0xb0, Ldr = 0xd0, Dfr = 0xe0, Svr = 0xf0, Isr0 = 0x100,
                        Tmr0 = 0x180, Irr0 = 0x200, Esr = 0x280, IcrLo = 0x300,
                        IcrHi = 0x310, LvtTimer = 0x320, LvtThermal = 0x330,
                        LvtPerf = 0x340, LvtLint0 = 0x350, LvtLint1 = 0x360,
                        LvtError = 0x370, TimerInitial = 0x380, TimerCurrent = 0x390,
                        TimerDivide = 0x3e0 };

  explicit LocalApic(unsigned ApicId) : ApicId(ApicId) { reset(); }
  void reset();
  uint32_t reg(uint32_t Offset) const { return Regs[(Offset >> 4) & (kSize / 16 - 1)]; }

  uint64_t mmioRead(uint64_t Offset, unsigned SizeBytes) override;
  void mmioWrite(uint64_t Offset, unsigned SizeBytes, uint64_t Value) override;

private:
  static bool readOnly(uint32_t Offset);
  unsigned ApicId;
  uint32_t Regs[kSize / 16] = {}; // one per 16-byte slot of the page
};

} // namespace vmxsim
