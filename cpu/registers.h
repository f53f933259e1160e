// Architectural state of one logical processor (SDM Vol. 1, Basic Execution Environment;
// Vol. 3A, System Architecture Overview). Plain data: behaviour lives in free functions.
#pragma once
#include <cstdint>

namespace vmxsim {

/// Activity state (SDM Vol. 3C, "Guest Non-Register State", Table "Format of the
/// Activity State"). The processor is in one of these states in root operation too: HLT,
/// shutdown (a triple fault, SDM Vol. 3A, "Interrupt 8—Double Fault Exception"; a VMX
/// abort) and wait-for-SIPI (an application processor after INIT, Vol. 3A, "MP
/// Initialization Protocol Algorithm").
enum class ActivityState : uint32_t { Active = 0, Hlt = 1, Shutdown = 2, WaitForSipi = 3 };

/// General-purpose register numbers, in ModRM/REX encoding order.
enum Gpr : uint8_t {
  RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15,
};
/// Register numbers 16..19 in a DecodedInsn name the legacy high-byte registers
/// AH, CH, DH, BH (byte 1 of RAX..RBX), valid only for 8-bit operands without REX.
inline constexpr uint8_t kRegAH = 16;
inline constexpr uint8_t kRegNone = 0xff;
inline constexpr uint8_t kRegRip = 0xfe; // base of a RIP-relative memory operand

enum class SegReg : uint8_t { ES, CS, SS, DS, FS, GS, None = 7 };
inline constexpr unsigned kNumSegRegs = 6;

/// RFLAGS bits (SDM Vol. 1, EFLAGS Register).
namespace rflags {
inline constexpr uint64_t CF = 1u << 0, Fixed1 = 1u << 1, PF = 1u << 2, AF = 1u << 4,
                          ZF = 1u << 6, SF = 1u << 7, TF = 1u << 8, IF = 1u << 9,
                          DF = 1u << 10, OF = 1u << 11, IOPL = 3u << 12, NT = 1u << 14,
                          RF = 1u << 16, VM = 1u << 17, AC = 1u << 18, VIF = 1u << 19,
                          VIP = 1u << 20, ID = 1u << 21;
inline constexpr uint64_t Arith = CF | PF | AF | ZF | SF | OF;
} // namespace rflags

namespace cr0 {
inline constexpr uint64_t PE = 1u << 0, MP = 1u << 1, EM = 1u << 2, TS = 1u << 3,
                          ET = 1u << 4, NE = 1u << 5, WP = 1u << 16, AM = 1u << 18,
                          NW = 1u << 29, CD = 1u << 30, PG = 1u << 31;
}
namespace cr4 {
inline constexpr uint64_t VME = 1u << 0, PVI = 1u << 1, TSD = 1u << 2, DE = 1u << 3,
                          PSE = 1u << 4, PAE = 1u << 5, MCE = 1u << 6, PGE = 1u << 7,
                          PCE = 1u << 8, OSFXSR = 1u << 9, OSXMMEXCPT = 1u << 10,
                          UMIP = 1u << 11, LA57 = 1u << 12, VMXE = 1u << 13,
                          SMXE = 1u << 14, FSGSBASE = 1u << 16, PCIDE = 1u << 17,
                          OSXSAVE = 1u << 18, SMEP = 1u << 20, SMAP = 1u << 21,
                          PKE = 1u << 22;
}
namespace efer {
inline constexpr uint64_t SCE = 1u << 0, LME = 1u << 8, LMA = 1u << 10, NXE = 1u << 11;
}

/// A segment register with its hidden descriptor cache (SDM Vol. 3A, Segment Registers).
/// Attr holds descriptor bits 40..47 in bits 0..7 and bits 52..55 (AVL, L, D/B, G) in
/// bits 12..15 — the same packing as the VMCS access-rights field, with bit 16 meaning
/// "unusable" (SDM Vol. 3C, Guest Register State).
struct Segment {
  uint16_t Selector = 0;
  uint64_t Base = 0;
  uint32_t Limit = 0xffff; // expanded byte limit (G already applied)
  uint32_t Attr = 0;

  static constexpr uint32_t Type = 0xf, S = 1u << 4, DplShift = 5, P = 1u << 7,
                            Avl = 1u << 12, L = 1u << 13, DB = 1u << 14, G = 1u << 15,
                            Unusable = 1u << 16;
  unsigned dpl() const { return (Attr >> DplShift) & 3; }
  bool present() const { return Attr & P; }
};

/// GDTR/IDTR.
struct TableReg {
  uint64_t Base = 0;
  uint16_t Limit = 0xffff;
};

struct Xmm {
  uint64_t Lo = 0, Hi = 0;
};

struct CpuState {
  uint64_t Gpr[16] = {};
  uint64_t Rip = 0;
  uint64_t Rflags = rflags::Fixed1;
  Segment Seg[kNumSegRegs];
  Segment Ldtr, Tr;
  TableReg Gdtr, Idtr;
  uint64_t Cr0 = cr0::ET | cr0::CD | cr0::NW;
  uint64_t Cr2 = 0, Cr3 = 0, Cr4 = 0, Cr8 = 0;
  uint64_t Xcr0 = 1;
  uint64_t Dr[8] = {0, 0, 0, 0, 0xffff0ff0, 0x400, 0xffff0ff0, 0x400};
  uint64_t Efer = 0;
  /// PAE page-directory-pointer-table entries, loaded from CR3 when PAE paging is
  /// activated or CR3 is written in PAE mode (SDM Vol. 3A, PAE Paging).
  uint64_t Pdpte[4] = {};

  // x87 and SSE state. The x87 FPU executes (cpu/exec_x87.cpp, rules in cpu/x87.h): St[i]
  // is ST(i) in stack order, TOP is FSW bits 11-13, and Ftw is the abridged tag word (bit p
  // set = physical register p not empty), from which the full tags are derived.
  Xmm XmmReg[16];
  uint32_t Mxcsr = 0x1f80;
  uint16_t Fcw = 0x37f, Fsw = 0, Ftw = 0, Fop = 0;
  uint64_t Fip = 0, Fdp = 0;
  uint8_t St[8][10] = {};

  const Segment &cs() const { return Seg[unsigned(SegReg::CS)]; }
  const Segment &ss() const { return Seg[unsigned(SegReg::SS)]; }
  Segment &seg(SegReg R) { return Seg[unsigned(R)]; }
  const Segment &seg(SegReg R) const { return Seg[unsigned(R)]; }

  /// Current privilege level: CS.RPL outside real mode (SDM Vol. 3A, Privilege Levels);
  /// kept in SS.DPL as the processor does, which also covers the conforming-code case.
  unsigned cpl() const {
    if (!(Cr0 & cr0::PE))
      return 0;
    if (Rflags & rflags::VM)
      return 3;
    return ss().dpl();
  }
  bool longMode() const { return Efer & efer::LMA; }
  bool in64BitMode() const { return longMode() && (cs().Attr & Segment::L); }
};

} // namespace vmxsim
