// The translator (cpu/jit/translator.h; rules and their reasons in docs/TRANSLATOR.md).
#include "cpu/jit/translator.h"

#include "cpu/cpu.h"
#include "cpu/decode.h"
#include "cpu/jit/emitter.h"
#include "cpu/jit/jit_form.h"

#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cpuid.h>
#include <cstring>
#include <iterator>
#include <new>

namespace vmxsim {

using namespace x64;

namespace {

// Labels of one block's code: the epilogue, then per instruction K the exits "hand the
// block to the interpreter before K" (kBail + K), "K's handler returned a status"
// (kStatus + K) and "the run loop's stop check after K" (kStop + K), then local labels.
constexpr unsigned kEpilogue = 0, kBail = 1, kStatus = 40, kStop = 80, kLocal = 120,
                   kMiss = kLocal + 16, kLoopExit = kMiss + 2 * kMaxBlockInsns,
                   kStackRun = kLoopExit + 1; // two per run of PUSHes or POPs
static_assert(kStatus - kBail > kMaxBlockInsns && kStop - kStatus > kMaxBlockInsns &&
              kLocal - kStop > kMaxBlockInsns && kStackRun + kMaxBlockInsns <= Emitter::kMaxLabels);

// Host condition codes (the low nibble of Jcc).
constexpr int kHostB = 2, kHostAE = 3, kHostE = 4, kHostNE = 5;

bool fitsInt32(int64_t V) { return V >= INT32_MIN && V <= INT32_MAX; }

/// R (holding a linear address's low 32 bits) = the byte offset of its TLB slot's entry
/// in a TLB array (Mmu::readSlot: slot = bits 19:12): (R >> 7) & 0x1fe0.
void slotOffset(Emitter &E, Reg R) {
  static_assert(kTlbEntries == 256 && sizeof(TlbEntry) == 32);
  E.shiftImm(Shift::Shr, 4, R, 12 - 5);
  E.aluImm(Alu::And, 4, R, (kTlbEntries - 1) << 5);
}

/// What one translation knows while it emits: the offsets into the Cpu, and the cycles
/// and instructions completed since the emitted code last added them to Cpu::Cycles and
/// Cpu::Retired.
struct BlockEmitter {
  Emitter &E;
  int32_t OffGpr, OffRip, OffRflags, OffCycles, OffRetired, OffBlockStop;
  uint32_t PendCycles = 0, PendInsns = 0;
  // Per instruction K: the pending counts before it (for its bail-out exit) and which
  // exits were used.
  uint32_t BailCycles[kMaxBlockInsns + 1] = {}, BailInsns[kMaxBlockInsns + 1] = {};
  int32_t Offset[kMaxBlockInsns + 1] = {};
  int32_t NextOff = 0; ///< offset of the instruction after the one being emitted
  bool UsedBail[kMaxBlockInsns + 1] = {}, UsedStatus[kMaxBlockInsns] = {},
       UsedStop[kMaxBlockInsns] = {};

  /// The guest register R as an operand of Size bytes (AH..BH: byte 1 of RAX..RBX).
  int32_t gpr(uint8_t R, unsigned Size) const {
    if (Size == 1 && R >= kRegAH)
      return OffGpr + 8 * (R - kRegAH) + 1;
    return OffGpr + 8 * R;
  }
  // Guest registers held in host registers (docs/TRANSLATOR.md, "Registers"): in a loop
  // of one block, the guest registers its inline code uses most and RFLAGS live in host
  // registers from the block's entry to each of its exits, and are written back to the
  // Cpu (spill) before anything else reads them there: a handler call (and loaded again
  // after it), an exit to the interpreter, the end of the block. HostOf[R]: the host
  // register of guest register R, or kInMemory.
  static constexpr uint8_t kInMemory = 0xff;
  uint8_t HostOf[16] = {kInMemory, kInMemory, kInMemory, kInMemory, kInMemory, kInMemory,
                        kInMemory, kInMemory, kInMemory, kInMemory, kInMemory, kInMemory,
                        kInMemory, kInMemory, kInMemory, kInMemory};
  uint8_t FlagsHost = kInMemory; ///< the host register of RFLAGS, or kInMemory
  /// Bit R: inline code may write guest register R (its held copy is written back).
  uint16_t Written = 0xffff;
  bool Holds = false; ///< holdsAny(), as holdRegisters left it
  /// RFLAGS.AC is known clear here: an inline access since the block's start (or its
  /// loop's head) or the last handler call has tested it.
  bool AcClear = false;
  /// The host registers of Cpu::Cycles and Cpu::Retired, or kInMemory.
  uint8_t CyclesHost = kInMemory, RetiredHost = kInMemory;
  /// Guest register R (as an operand of Size bytes) in a host register: AH..BH never are.
  bool held(uint8_t R, unsigned Size) const {
    (void)Size;
    return R < 16 && HostOf[R] != kInMemory;
  }
  Reg host(uint8_t R) const { return Reg(HostOf[R]); }
  /// X = guest register R as an operand of Size bytes (the bits of X above it: as a
  /// load of that size leaves them).
  void loadReg(unsigned Size, Reg X, uint8_t R) {
    if (held(R, Size))
      E.movRR(Size, X, host(R));
    else if (!stored(Size, X, R))
      E.load(Size, X, gpr(R, Size));
  }
  /// setReg has just stored X, whole or zero-extended from 32 bits, as guest register R
  /// (nothing emitted or bound since): a load of R's 4 or 8 bytes into X would give X.
  bool stored(unsigned Size, Reg X, uint8_t R) const {
    return (Size == 8 || Size == 4) && LastStore.At == E.size() && E.lastBind() != E.size() &&
           LastStore.R == R && LastStore.X == X;
  }
  struct StoreMark {
    size_t At = ~size_t(0);
    uint8_t R = 0;
    Reg X = HAX;
  };
  StoreMark LastStore = {};
  /// X = guest register R zero-extended (MOVZX) or sign-extended to 64 bits (MOVSX).
  void loadRegZx(unsigned Size, Reg X, uint8_t R) {
    if (held(R, Size))
      E.movZxRR(Size, X, host(R));
    else
      E.loadZx(Size, X, gpr(R, Size));
  }
  void loadRegSx64(unsigned Size, Reg X, uint8_t R) {
    if (held(R, Size))
      E.movSxRR(Size, X, host(R));
    else
      E.loadSx64(Size, X, gpr(R, Size));
  }
  /// Guest register R (64-bit) += Imm.
  void addReg64(uint8_t R, int32_t Imm) {
    if (held(R, 8))
      E.aluImm(Alu::Add, 8, host(R), uint32_t(Imm));
    else
      E.addMem64Imm(gpr(R, 8), Imm);
  }
  /// X = RFLAGS; BT RFLAGS, Bit.
  void loadFlags(Reg X) {
    if (FlagsHost != kInMemory)
      E.movRR(8, X, Reg(FlagsHost));
    else
      E.load(8, X, OffRflags);
  }
  void btFlags(uint8_t Bit) {
    if (FlagsHost != kInMemory)
      E.bt(8, Reg(FlagsHost), false, 0, Bit);
    else
      E.btMem64(OffRflags, Bit);
  }
  /// Cycles += Cost, Retired += Insns.
  void addCounts(int32_t Cost, int32_t Insns) {
    if (CyclesHost != kInMemory) {
      if (Cost)
        E.aluImm(Alu::Add, 8, Reg(CyclesHost), uint32_t(Cost));
      if (Insns)
        E.aluImm(Alu::Add, 8, Reg(RetiredHost), uint32_t(Insns));
      return;
    }
    if (Cost)
      E.addMem64Imm(OffCycles, Cost);
    if (Insns)
      E.addMem64Imm(OffRetired, Insns);
  }
  /// X = Cycles (Retired) + Add.
  void cyclesPlus(Reg X, int32_t Add) { countPlus(X, CyclesHost, OffCycles, Add); }
  void retiredPlus(Reg X, int32_t Add) { countPlus(X, RetiredHost, OffRetired, Add); }
  void countPlus(Reg X, uint8_t Host, int32_t Off, int32_t Add) {
    if (Host != kInMemory) {
      E.leaDisp32(X, Reg(Host), Add);
      return;
    }
    E.load(8, X, Off);
    if (Add)
      E.aluImm(Alu::Add, 8, X, uint32_t(Add));
  }
  /// Writes the held registers back to the Cpu (spill); loads them from it (reload).
  void spill() { transfer(true); }
  void reload() { transfer(false); }
  void transfer(bool Store) {
    if (!Holds)
      return;
    const auto One = [&](uint8_t H, int32_t Off) {
      if (H == kInMemory)
        return;
      if (Store)
        E.store(8, Reg(H), Off);
      else
        E.load(8, Reg(H), Off);
    };
    for (uint8_t R = 0; R < 16; ++R)
      if (!Store || (Written >> R & 1))
        One(HostOf[R], gpr(R, 8));
    One(FlagsHost, OffRflags);
    One(CyclesHost, OffCycles);
    One(RetiredHost, OffRetired);
  }
  bool holdsAny() const {
    if (FlagsHost != kInMemory || CyclesHost != kInMemory)
      return true;
    for (uint8_t H : HostOf)
      if (H != kInMemory)
        return true;
    return false;
  }
  /// Writes the Size-byte result in X to guest register R as setReg does (SDM Vol. 1,
  /// "General-Purpose Registers in 64-Bit Mode": 32-bit results zero-extend, 8- and
  /// 16-bit results merge). Zx: a 4-byte X is already zero-extended (the host's 32-bit
  /// operation that made it, or a 32-bit load, cleared bits 63:32); false after a
  /// 64-bit operation (MOVSX, LEA with 64-bit addresses).
  void setReg(unsigned Size, Reg X, uint8_t R, bool Zx = true) {
    if (held(R, Size)) {
      E.movRR(Size, host(R), X); // a 32-bit MOV zero-extends, 8 and 16 bits merge
    } else if (Size == 4) {
      if (!Zx)
        E.movRR(4, X, X);
      E.store(8, X, gpr(R, 8));
      LastStore = {E.size(), R, X};
    } else {
      E.store(Size, X, gpr(R, Size));
      if (Size == 8)
        LastStore = {E.size(), R, X};
    }
  }
  /// X = the source operand of a reg, reg or reg, imm form (register Reg[1] or Imm).
  void source(const DecodedInsn &I, const JitForm &F, Reg X) {
    if (F.Shape == JitShape::RegReg)
      loadReg(F.Size, X, I.Reg[1]);
    else if (F.Size == 8)
      E.movImm64(X, I.Imm);
    else
      E.movImm32(X, uint32_t(I.Imm));
  }
  /// Whether address() takes I's form.
  bool addressable(const DecodedInsn &I) const {
    if (I.AddrSize != 8 && I.AddrSize != 4)
      return false;
    if (I.Base == kRegRip)
      return fitsInt32(int64_t(NextOff) + I.Disp);
    return I.Base == kRegNone || fitsInt32(I.Disp);
  }
  /// RAX = I's effective address (cpu/memory.h effectiveAddress: displacement + base +
  /// index << scale, truncated to the address size); false for a form not taken (16-bit
  /// addresses, a displacement past 32 bits).
  bool address(const DecodedInsn &I) {
    if (I.AddrSize != 8 && I.AddrSize != 4)
      return false;
    if (I.Base == kRegRip) {
      const int64_t D = int64_t(NextOff) + I.Disp;
      if (!fitsInt32(D))
        return false;
      E.leaR12(HAX, int32_t(D));
    } else if (I.Base != kRegNone) {
      if (!fitsInt32(I.Disp))
        return false;
      // Base (and index) from their host registers when held, else loaded; one LEA.
      Reg B = HAX;
      if (held(I.Base, 8))
        B = host(I.Base);
      else
        loadReg(8, HAX, I.Base);
      if (I.Index != kRegNone) {
        Reg X = HCX;
        if (held(I.Index, 8))
          X = host(I.Index);
        else
          loadReg(8, HCX, I.Index);
        E.leaSib(HAX, B, X, I.ScaleLog2, int32_t(I.Disp));
      } else if (B != HAX) {
        E.leaDisp32(HAX, B, int32_t(I.Disp));
      } else if (I.Disp) {
        E.aluImm(Alu::Add, 8, HAX, uint32_t(int32_t(I.Disp)));
      }
      if (I.AddrSize == 4)
        E.movRR(4, HAX, HAX);
      return true;
    } else {
      E.movImm64(HAX, uint64_t(I.Disp));
    }
    if (I.Index != kRegNone) {
      loadReg(8, HCX, I.Index);
      if (I.ScaleLog2)
        E.shiftImm(Shift::Shl, 8, HCX, I.ScaleLog2);
      E.aluRR(Alu::Add, 8, HAX, HCX);
    }
    if (I.AddrSize == 4)
      E.movRR(4, HAX, HAX);
    return true;
  }
  /// The flags an instruction must leave in RFLAGS (docs/TRANSLATOR.md, "Flags"): the
  /// bits it defines that a later instruction of the block reads, or that the block's
  /// state at an exit holds. Set by emitBlock before each instruction.
  uint32_t Need = uint32_t(rflags::Arith);
  /// The host's flags into EDX, keeping HostBits of them that are needed; returns the
  /// mask of Mask to merge into RFLAGS (0: nothing needed, nothing emitted).
  /// Whether the host has LAHF in 64-bit mode (CPUID.80000001H:ECX[0]; all but the
  /// first x86-64 processors).
  bool Lahf = true;
  /// EDX = the host's flags, Bits of them (arithmetic flags) at their RFLAGS positions;
  /// EDX's other bits are unspecified (bits 0-11). With LAHF (SF, ZF, AF, PF, CF in AH,
  /// at the same bit positions) and SETO rather than PUSHF, which the host executes far
  /// more slowly (on the AMD EPYC measured, a third of a decompression loop's time was
  /// its PUSHFs). KeepRax: RAX is preserved (through RSI).
  void captureFlags(uint32_t Bits, bool KeepRax) {
    if (!Lahf) {
      E.pushfq();
      E.pop(HDX);
      return;
    }
    const bool Of = Bits & uint32_t(rflags::OF);
    const bool Low = Bits & kLahfBits;
    if (Low && KeepRax)
      E.movRR(8, HSI, HAX);
    if (Of)
      E.setcc(0, HDX); // SETO DL
    if (Low)
      E.byte(0x9f); // LAHF
    if (Of) {
      E.movZxRR(1, HDX, HDX);
      E.shiftImm(Shift::Shl, 4, HDX, 11);
      if (Low) {
        E.byte(0x88); // MOV DL, AH
        E.byte(0xe2);
      }
    } else if (Low) {
      E.byte(0x0f); // MOVZX EDX, AH
      E.byte(0xb6);
      E.byte(0xd4);
    }
    if (Low && KeepRax)
      E.movRR(8, HAX, HSI);
  }
  /// RAX holds a value needed after the flags are taken (a read-modify-write's host
  /// address): hostFlags keeps it.
  bool RaxLive = false;
  /// The host's flags are the guest's for the condition of the SETcc or CMOVcc being
  /// emitted (the instruction before it set them): its condition code is the host's.
  bool CondOnHost = false;
  static constexpr uint32_t kLahfBits =
      uint32_t(rflags::SF | rflags::ZF | rflags::AF | rflags::PF | rflags::CF);
  uint32_t hostFlags(uint32_t HostBits, uint32_t Mask) {
    const uint32_t M = Mask & Need;
    if (!M)
      return 0;
    captureFlags(HostBits & M, RaxLive);
    // RFLAGS in memory: mergeFlags masks EDX itself, so the host's other bits may stay
    // when all of M are the host's.
    if (FlagsHost != kInMemory || (HostBits & M) != M)
      E.aluImm(Alu::And, 4, HDX, HostBits & M);
    return M;
  }
  /// RFLAGS = (RFLAGS & ~Mask) | (EDX & Mask) (EDX holds only bits of Mask when RFLAGS is
  /// in a host register); nothing for Mask 0.
  void mergeFlags(uint32_t Mask) {
    if (!Mask)
      return;
    if (FlagsHost != kInMemory) {
      E.aluImm(Alu::And, 8, Reg(FlagsHost), ~Mask);
      E.aluRR(Alu::Or, 8, Reg(FlagsHost), HDX);
      return;
    }
    // RFLAGS ^= (RFLAGS ^ RDX) & Mask: the bits of Mask from RDX, the others kept. The
    // whole qword, as every other access to RFLAGS: a dword store read back as a qword
    // cannot be forwarded by the host and stalls.
    E.xorRegMem64(HDX, OffRflags);
    E.aluImm(Alu::And, 4, HDX, Mask); // (zero-extends: bits 63:32 are not in Mask)
    E.xorMemReg64(OffRflags, HDX);
  }
  /// Runs instruction K (at Off) through its own handler, with RIP, Cycles and Retired
  /// as the interpreter has them (the caller has synced the counts): its status ends the
  /// block (kStatus), its cost and count are added, and the run loop's stop check
  /// follows unless it is the block's last (of N).
  void handlerCall(const DecodedInsn &I, unsigned K, int32_t Off, unsigned N) {
    AcClear = false;
    spill();
    E.leaR12(HAX, Off);
    E.store(8, HAX, OffRip);
    E.leaDisp32(HDI, HBX, -kCpuBias); // the Cpu
    E.movImm64(HSI, reinterpret_cast<uint64_t>(&I));
    E.movImm64(HAX, reinterpret_cast<uint64_t>(I.Fn));
    E.callRax();
    reload(); // (its exits below find the Cpu current: nothing to write back)
    E.testRR(1, HAX, HAX);
    UsedStatus[K] = true;
    E.jump(kHostNE, kStatus + K);
    addCounts(int32_t(I.Cost), 1);
    if (K + 1 < N) {
      cyclesPlus(HAX, 0);
      E.cmpRegMem64(HAX, OffBlockStop);
      UsedStop[K] = true;
      E.jump(kHostAE, kStop + K);
    }
  }
  void sync() {
    addCounts(int32_t(PendCycles), int32_t(PendInsns));
    PendCycles = PendInsns = 0;
  }
  void bailBefore(int Cc, unsigned K) {
    UsedBail[K] = true;
    E.jump(Cc, kBail + K);
  }
  /// RAX = a branch target: hand the instruction to the interpreter unless it is
  /// canonical with 48 bits (the interpreter raises the #GP(0), or accepts it under
  /// CR4.LA57).
  void checkCanonical(unsigned K) {
    E.movRR(8, HCX, HAX);
    E.shiftImm(Shift::Shl, 8, HCX, 16);
    E.shiftImm(Shift::Sar, 8, HCX, 16);
    E.aluRR(Alu::Cmp, 8, HCX, HAX);
    bailBefore(kHostNE, K);
  }
  /// Tests guest condition Cc >> 1 (SDM Vol. 1, Jcc conditions) on RFLAGS; returns the
  /// host condition code that holds when it is true.
  int condition(uint8_t Cc) {
    loadFlags(HAX);
    switch (Cc >> 1) {
    case 0: E.btImm(HAX, 11); return kHostB;       // OF
    case 1: E.btImm(HAX, 0); return kHostB;        // CF
    case 2: E.btImm(HAX, 6); return kHostB;        // ZF
    case 3:                                        // CF or ZF
      E.byte(0xa9); // TEST EAX, imm32
      E.u32(uint32_t(rflags::CF | rflags::ZF));
      return kHostNE;
    case 4: E.btImm(HAX, 7); return kHostB;        // SF
    case 5: E.btImm(HAX, 2); return kHostB;        // PF
    default:                                       // SF != OF (and, for LE, or ZF)
      E.movRR(4, HCX, HAX);
      E.shiftImm(Shift::Shr, 4, HCX, 4); // OF to bit 7
      E.aluRR(Alu::Xor, 4, HCX, HAX);
      if ((Cc >> 1) == 7) {
        E.movRR(4, HDX, HAX);
        E.shiftImm(Shift::Shl, 4, HDX, 1); // ZF to bit 7
        E.aluRR(Alu::Or, 4, HCX, HDX);
      }
      E.btImm(HCX, 7);
      return kHostB;
    }
  }
};

constexpr uint32_t kSzp = uint32_t(rflags::SF | rflags::ZF | rflags::PF);
constexpr uint32_t kArith = uint32_t(rflags::Arith);

/// The RFLAGS bits instruction I (form F) defines when it completes, for the flags'
/// liveness (docs/TRANSLATOR.md, "Flags"); the same masks the emitters below merge.
uint32_t flagWrites(const DecodedInsn &I, const JitForm &F) {
  switch (F.Op) {
  case JitOp::Add: case JitOp::Or: case JitOp::Adc: case JitOp::Sbb: case JitOp::And:
  case JitOp::Sub: case JitOp::Xor: case JitOp::Cmp: case JitOp::Test: case JitOp::Neg:
    return kArith;
  case JitOp::Inc: case JitOp::Dec:
    return kArith & ~uint32_t(rflags::CF);
  case JitOp::Imul:
    return kArith;
  case JitOp::Rol: case JitOp::Ror: case JitOp::Shl: case JitOp::Shr: case JitOp::Sar: {
    if ((I.Imm & (F.Size == 8 ? 0x3f : 0x1f)) == 0)
      return 0;
    return F.Op == JitOp::Rol || F.Op == JitOp::Ror ? uint32_t(rflags::CF | rflags::OF)
                                                    : kArith;
  }
  default:
    return 0;
  }
}
/// The RFLAGS bits I reads (ADC, SBB: CF; a Jcc ends its block, where all are live).
uint32_t flagReads(const JitForm &F) {
  if (F.Op == JitOp::Setcc || F.Op == JitOp::Cmov)
    return kArith; // (the condition's flags; all, for simplicity)
  return F.Op == JitOp::Adc || F.Op == JitOp::Sbb ? uint32_t(rflags::CF) : 0;
}

bool isAlu(JitOp Op) { return Op >= JitOp::Add && Op <= JitOp::Test; }
bool isUnary(JitOp Op) { return Op >= JitOp::Inc && Op <= JitOp::Not; }
/// The host flags aluOp and unaryOp keep (Bits) of the ones they define (Mask).
struct HostFlags {
  uint32_t Bits, Mask;
};
HostFlags hostFlagsOf(const JitForm &F) {
  if (isAlu(F.Op)) {
    // ADD/ADC/SUB/SBB/CMP define all six; the logical ones clear CF, OF and AF (AF is
    // undefined and the interpreter clears it, cpu/exec.h flagsLogic).
    const bool Logic = F.Op == JitOp::Or || F.Op == JitOp::And || F.Op == JitOp::Xor ||
                       F.Op == JitOp::Test;
    return {Logic ? kSzp : kArith, kArith};
  }
  const uint32_t Mask = F.Op == JitOp::Neg ? kArith : kArith & ~uint32_t(rflags::CF);
  return {Mask, Mask};
}

/// The two-operand operation F.Op on Dst (HCX, or a held guest register) and Src, result
/// in Dst, its flags in EDX; returns the mask to merge (BlockEmitter::hostFlags).
uint32_t aluOp(BlockEmitter &BE, const JitForm &F, Reg Src, Reg Dst = HCX) {
  Emitter &E = BE.E;
  if (F.Op == JitOp::Adc || F.Op == JitOp::Sbb)
    BE.btFlags(0); // the guest's CF is the carry/borrow in
  if (F.Op == JitOp::Test)
    E.testRR(F.Size, Dst, Src);
  else
    E.aluRR(Alu(unsigned(F.Op) - unsigned(JitOp::Add)), F.Size, Dst, Src);
  const HostFlags H = hostFlagsOf(F);
  return BE.hostFlags(H.Bits, H.Mask);
}
/// INC, DEC, NEG or NOT of Dst (HCX, or a held guest register); returns the mask to merge.
uint32_t unaryOp(BlockEmitter &BE, const JitForm &F, Reg Dst = HCX) {
  Emitter &E = BE.E;
  if (F.Op == JitOp::Not) {
    E.group3(2, F.Size, Dst);
    return 0;
  }
  if (F.Op == JitOp::Neg)
    E.group3(3, F.Size, Dst);
  else
    E.group45(F.Op == JitOp::Inc ? 0 : 1, F.Size, Dst);
  const HostFlags H = hostFlagsOf(F);
  return BE.hostFlags(H.Bits, H.Mask);
}

/// Emits the register-only forms. False when the form is not taken (the block is then
/// refused as UnsupportedForm).
bool emitInline(BlockEmitter &BE, const DecodedInsn &I, const JitForm &F) {
  Emitter &E = BE.E;
  const unsigned N = F.Size;
  // A held destination is operated on in place (the host's operation of the same size
  // writes it as the guest's does: 32-bit results zero-extend, 8- and 16-bit merge; SDM
  // Vol. 1, 3.4.1.1 "General-Purpose Registers in 64-Bit Mode").
  const bool InPlace = BE.held(I.Reg[0], N);
  const bool HeldSrc = F.Shape == JitShape::RegReg && BE.held(I.Reg[1], N);
  if (isAlu(F.Op) && F.Op != JitOp::Test && F.Shape == JitShape::RegImm &&
      (N == 4 || (N == 8 && fitsInt32(int64_t(I.Imm))))) {
    // ALU r32/r64, imm32 (81 /digit; sign-extended for 64 bits, as the guest's was),
    // on the held register or a copy: no register for the immediate.
    const Reg D = InPlace ? BE.host(I.Reg[0]) : HCX;
    if (!InPlace)
      BE.loadReg(N, HCX, I.Reg[0]);
    if (F.Op == JitOp::Adc || F.Op == JitOp::Sbb)
      BE.btFlags(0); // the guest's CF is the carry/borrow in
    E.aluImm(Alu(unsigned(F.Op) - unsigned(JitOp::Add)), N, D, uint32_t(I.Imm));
    const HostFlags H = hostFlagsOf(F);
    const uint32_t M = BE.hostFlags(H.Bits, H.Mask);
    if (!InPlace && F.Op != JitOp::Cmp)
      BE.setReg(N, HCX, I.Reg[0]);
    BE.mergeFlags(M);
    return true;
  }
  if (isAlu(F.Op) && InPlace) {
    if (!HeldSrc)
      BE.source(I, F, HAX);
    BE.mergeFlags(aluOp(BE, F, HeldSrc ? BE.host(I.Reg[1]) : HAX, BE.host(I.Reg[0])));
    return true;
  }
  if (isUnary(F.Op) && InPlace) {
    BE.mergeFlags(unaryOp(BE, F, BE.host(I.Reg[0])));
    return true;
  }
  if (isAlu(F.Op)) {
    BE.loadReg(N, HCX, I.Reg[0]);
    BE.source(I, F, HAX);
    const uint32_t M = aluOp(BE, F, HAX);
    if (F.Op != JitOp::Cmp && F.Op != JitOp::Test)
      BE.setReg(N, HCX, I.Reg[0]);
    BE.mergeFlags(M);
    return true;
  }
  if (isUnary(F.Op)) {
    BE.loadReg(N, HCX, I.Reg[0]);
    const uint32_t M = unaryOp(BE, F);
    BE.setReg(N, HCX, I.Reg[0]);
    BE.mergeFlags(M);
    return true;
  }
  switch (F.Op) {
  case JitOp::Mov:
    if (InPlace && HeldSrc) {
      E.movRR(N, BE.host(I.Reg[0]), BE.host(I.Reg[1]));
      return true;
    }
    BE.source(I, F, HAX);
    BE.setReg(N, HAX, I.Reg[0]);
    return true;
  case JitOp::Imul: { // IMUL r, r (Reg[0] *= Reg[1]) or IMUL r, r, imm (Reg[0] = Reg[1] * imm)
    if (F.Shape == JitShape::RegReg) {
      BE.loadReg(N, HCX, I.Reg[0]);
      BE.loadReg(N, HAX, I.Reg[1]);
    } else {
      BE.loadReg(N, HCX, I.Reg[1]);
      if (N == 8)
        E.movImm64(HAX, I.Imm);
      else
        E.movImm32(HAX, uint32_t(I.Imm));
    }
    E.imulRR(N, HCX, HAX);
    // cpu/exec_muldiv.cpp execImulN: CF = OF = the product did not fit (the host's);
    // SF, ZF, PF of the truncated result, AF 0 (undefined in the SDM).
    const uint32_t M = kArith & BE.Need;
    if (M) {
      BE.captureFlags(uint32_t(rflags::CF | rflags::OF) & M, false);
      E.aluImm(Alu::And, 4, HDX, uint32_t(rflags::CF | rflags::OF) & M);
      E.movRR(8, HSI, HDX); // (LAHF writes AH)
      E.testRR(N, HCX, HCX);
      BE.captureFlags(kSzp & M, false);
      E.aluImm(Alu::And, 4, HDX, kSzp & M);
      E.aluRR(Alu::Or, 4, HDX, HSI);
    }
    BE.setReg(N, HCX, I.Reg[0]);
    BE.mergeFlags(M);
    return true;
  }
  case JitOp::Setcc: case JitOp::Cmov: {
    int True = I.Cond & 15; // (SDM Vol. 1, Appendix B: the same condition codes)
    if (!BE.CondOnHost) {
      const int Host = BE.condition(I.Cond);
      True = (I.Cond & 1) ? Host ^ 1 : Host;
    }
    if (F.Op == JitOp::Setcc) { // SETcc r8: 1 or 0
      E.setcc(True, HCX);
      BE.setReg(1, HCX, I.Reg[0]);
      return true;
    }
    // CMOVcc r, r: a 32-bit destination is written (zero-extended) either way.
    BE.loadReg(N, HSI, I.Reg[0]);
    BE.loadReg(N, HDI, I.Reg[1]);
    E.cmov(True, N, HSI, HDI);
    BE.setReg(N, HSI, I.Reg[0]);
    return true;
  }
  case JitOp::MovZx: case JitOp::MovSx:
    if (F.Op == JitOp::MovZx)
      BE.loadRegZx(F.SrcSize, HAX, I.Reg[1]);
    else
      BE.loadRegSx64(F.SrcSize, HAX, I.Reg[1]);
    BE.setReg(N, HAX, I.Reg[0], F.Op == JitOp::MovZx);
    return true;
  case JitOp::Lea:
    if (!BE.address(I))
      return false;
    BE.setReg(N, HAX, I.Reg[0], I.AddrSize == 4);
    return true;
  case JitOp::Rol: case JitOp::Ror: case JitOp::Shl: case JitOp::Shr: case JitOp::Sar: {
    // cpu/exec_shift.cpp defines the flags the SDM leaves undefined; they are computed
    // here from the same formulas, never taken from the host.
    const unsigned Bits = 8 * N;
    const uint8_t Count = uint8_t(I.Imm & (N == 8 ? 0x3f : 0x1f));
    const uint8_t R = I.Reg[0];
    if (Count == 0) { // nothing changes, but a 32-bit destination is zero-extended
      if (N == 4) {
        BE.loadReg(4, HAX, R);
        BE.setReg(4, HAX, R);
      }
      return true;
    }
    const bool Rotate = F.Op == JitOp::Rol || F.Op == JitOp::Ror;
    if (!Rotate && Count >= Bits)
      return false; // 8- and 16-bit shifts past the width: interpreted
    const uint32_t Defined = Rotate ? uint32_t(rflags::CF | rflags::OF) : kArith;
    const uint32_t Mask = Defined & BE.Need;
    const Shift Op = F.Op == JitOp::Rol   ? Shift::Rol
                     : F.Op == JitOp::Ror ? Shift::Ror
                     : F.Op == JitOp::Shl ? Shift::Shl
                     : F.Op == JitOp::Shr ? Shift::Shr
                                          : Shift::Sar;
    if (InPlace) { // HCX (HSI): the result (the original) zero-extended, for the flags
      if (Mask && F.Op == JitOp::Shr)
        E.movZxRR(N, HSI, BE.host(R));
      E.shiftImm(Op, N, BE.host(R), Count);
      if (Mask)
        E.movZxRR(N, HCX, BE.host(R)); // (a MOV leaves the host's flags)
    } else {
      BE.loadRegZx(N, HCX, R); // zero-extended: bits above the operand stay 0
      if (Mask && F.Op == JitOp::Shr)
        E.movRR(8, HSI, HCX);           // the original value
      E.shiftImm(Op, N, HCX, Count);
    }
    if (Mask == uint32_t(rflags::CF) && Rotate) {
      // Only CF is needed: ROL's is the result's LSB, ROR's its MSB.
      E.movRR(8, HDX, HCX);
      if (F.Op == JitOp::Rol)
        E.aluImm(Alu::And, 4, HDX, 1);
      else
        E.shiftImm(Shift::Shr, 8, HDX, uint8_t(Bits - 1));
    } else if (Mask && Rotate) {
      // ROL: CF = LSB(result), OF = MSB(result) XOR CF; ROR: CF = MSB(result), OF = the
      // XOR of the result's two top bits.
      E.movRR(8, HAX, HCX);
      E.movRR(8, HDX, HCX);
      if (F.Op == JitOp::Rol) {
        E.aluImm(Alu::And, 4, HAX, 1);
        E.shiftImm(Shift::Shr, 8, HDX, uint8_t(Bits - 1));
      } else {
        E.shiftImm(Shift::Shr, 8, HAX, uint8_t(Bits - 1));
        E.shiftImm(Shift::Shr, 8, HDX, uint8_t(Bits - 2));
      }
      E.aluRR(Alu::Xor, 4, HDX, HAX);
      E.aluImm(Alu::And, 4, HDX, 1);
      E.shiftImm(Shift::Shl, 4, HDX, 11);
      E.aluRR(Alu::Or, 4, HDX, HAX);
    } else if (Mask) {
      // The count is below the width: the host's result, CF, SF, ZF and PF are the
      // architectural ones. OF: SHL MSB(result) XOR CF, SHR MSB(original), SAR 0; AF 0.
      BE.captureFlags(kSzp | uint32_t(rflags::CF), false); // (RSI holds SHR's original)
      E.aluImm(Alu::And, 4, HDX, kSzp | uint32_t(rflags::CF));
      if (F.Op == JitOp::Shl) {
        E.movRR(8, HAX, HCX);
        E.shiftImm(Shift::Shr, 8, HAX, uint8_t(Bits - 1));
        E.aluRR(Alu::Xor, 4, HAX, HDX);
        E.aluImm(Alu::And, 4, HAX, 1);
        E.shiftImm(Shift::Shl, 4, HAX, 11);
        E.aluRR(Alu::Or, 4, HDX, HAX);
      } else if (F.Op == JitOp::Shr) {
        E.movRR(8, HAX, HSI);
        E.shiftImm(Shift::Shr, 8, HAX, uint8_t(Bits - 1));
        E.shiftImm(Shift::Shl, 4, HAX, 11);
        E.aluRR(Alu::Or, 4, HDX, HAX);
      }
    }
    if (Mask && Mask != Defined && !(Rotate && Mask == uint32_t(rflags::CF)))
      E.aluImm(Alu::And, 4, HDX, Mask); // only the bits a later instruction needs
    if (!InPlace)
      BE.setReg(N, HCX, R);
    BE.mergeFlags(Mask);
    return true;
  }
  default:
    return false;
  }
}

/// Whether memory form F of I has its TLB-hit path emitted inline (emitMemHit); the
/// others call their handler every time.
bool hasInlineHit(const BlockEmitter &BE, const DecodedInsn &I, const JitForm &F) {
  if (F.Shape != JitShape::Mem)
    return false;
  switch (F.Op) {
  case JitOp::Push: case JitOp::Pop: case JitOp::CallRel: case JitOp::Ret:
    return F.Stack64;
  case JitOp::Mov: case JitOp::MovZx: case JitOp::MovSx:
    return BE.addressable(I);
  default:
    return (isAlu(F.Op) || isUnary(F.Op)) && BE.addressable(I);
  }
}

/// Chooses what a loop of one block keeps in host registers (BlockEmitter::HostOf):
/// RFLAGS, and the guest registers its inline code names most often, up to the pool.
void holdRegisters(const Block &B, const JitForm *Forms, BlockEmitter &BE, bool Loop) {
  // (RBP, which has no byte register without REX, holds a count.)
  static constexpr Reg kLoopPool[] = {H8, HBP, H9, H10, H11, H14, H15};
  // Outside loops: the registers no other code of a translation uses and no handler
  // call needs kept (the held values are written back before every call).
  static constexpr Reg kBlockPool[] = {H8, H9, H10, H11};
  unsigned Uses[16] = {};
  bool Never[16] = {};
  // The guest registers inline code may write (a destination, either operand to be
  // safe, RSP of the stack forms): the others need no write-back (spill), their host
  // copy being loaded at the entry and after each handler call.
  uint16_t Written = 0;
  const auto Write = [&](uint8_t R) {
    if (R < 16)
      Written |= uint16_t(1u << R);
  };
  const auto Count = [&](uint8_t R) {
    if (R < 16)
      ++Uses[R];
    else if (R >= kRegAH && R < kRegAH + 4)
      Never[R - kRegAH] = true; // AH..BH: byte 1 stays addressed in the Cpu
  };
  for (unsigned K = 0; K < B.NumInsns; ++K) {
    const DecodedInsn &I = B.Insns[K];
    const JitForm F = Forms[K];
    if (F.Op == JitOp::None)
      continue;
    if (F.Shape == JitShape::Mem) {
      if (!hasInlineHit(BE, I, F))
        continue;
      if (F.Stack64) {
        Count(4);
        Write(4);
      }
      Count(I.Base);
      Count(I.Index);
    } else if (F.Op == JitOp::Lea) {
      Count(I.Base);
      Count(I.Index);
    }
    Count(I.Reg[0]);
    Count(I.Reg[1]);
    Write(I.Reg[0]);
    Write(I.Reg[1]);
  }
  BE.Written = Written;
  const Reg *Pool = kLoopPool;
  size_t PoolSize = std::size(kLoopPool), First = 3;
  unsigned MinUses = 1;
  if (Loop) {
    BE.FlagsHost = kLoopPool[0];
    BE.CyclesHost = kLoopPool[1];
    BE.RetiredHost = kLoopPool[2];
  } else {
    Pool = kBlockPool;
    PoolSize = std::size(kBlockPool);
    First = 0;
    MinUses = 3; // fewer: the load at the entry and the store at the exit cost as much
  }
  for (size_t H = First; H < PoolSize; ++H) {
    unsigned Best = 16;
    for (unsigned R = 0; R < 16; ++R)
      if (Uses[R] >= MinUses && !Never[R] && BE.HostOf[R] == BlockEmitter::kInMemory &&
          (Best == 16 || Uses[R] > Uses[Best]))
        Best = R;
    if (Best == 16)
      break;
    BE.HostOf[Best] = Pool[H];
  }
  BE.Holds = BE.holdsAny();
}

} // namespace

Translator::Translator(Cpu &Owner, ExecMode M) : C(Owner), Mode(M) {
  auto Off = [&](const void *P) {
    return int32_t(reinterpret_cast<const char *>(P) - reinterpret_cast<const char *>(&C));
  };
  // LAHF/SAHF in 64-bit mode: CPUID.80000001H:ECX[0] (SDM Vol. 2A, LAHF).
  unsigned A = 0, Bx = 0, Cx = 0, D = 0;
  HostLahf = __get_cpuid(0x80000001u, &A, &Bx, &Cx, &D) && (Cx & 1);
  OffGpr = Off(&C.S.Gpr[0]);
  OffRip = Off(&C.S.Rip);
  OffRflags = Off(&C.S.Rflags);
  OffCycles = Off(&C.Cycles);
  OffRetired = Off(&C.Retired);
  OffBlockStop = Off(&C.BlockStop);
  OffWindowDue = Off(&C.WindowDue);
  OffInsnEnd = Off(&C.InsnEnd);
  const Mmu::LinkInputs L = C.Mmu.linkInputs();
  OffFetchTagLow = Off(L.FetchTagLow);
  OffFetchTlb = Off(L.FetchTlb);
  OffBlockKeyBase = Off(L.BlockKeyBase);
  CodeGens = L.CodeGenerations;
  OffChainSum = Off(L.ChainSum);
  CodeWrites = L.CodeWrites;
  OffTlbRead = Off(&C.Mmu.readSlot(Gla(0)));
  OffTlbWrite = Off(&C.Mmu.writeSlot(Gla(0)));
  if (sysconf(_SC_PAGESIZE) != long(kHostPage))
    return; // no code cache: every block is interpreted
  if (Mode == ExecMode::Lockstep) {
    Log.reset(new (std::nothrow) StoreLog());
    if (!Log)
      return; // no code cache, as above
  }
  Kept.reset(new (std::nothrow) KeptEntry[kKeptEntries]());
  void *CellMem = mmap(nullptr, (kCells + kTargets) * sizeof(ChainCell), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (!Kept || CellMem == MAP_FAILED)
    return;
  Cells = static_cast<ChainCell *>(CellMem);
  Targets = Cells + kCells;
  // The scratch buffer for one block's code.
  void *P = mmap(nullptr, kScratchBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (P == MAP_FAILED)
    return;
  Scratch = static_cast<uint8_t *>(P);
  // The cache: one memory object mapped twice, writable and executable, so installing a
  // block is a copy, no system call (W^X holds per mapping: neither view is both).
  const int Fd = int(memfd_create("vmxsim-jit", MFD_CLOEXEC));
  if (Fd >= 0) {
    if (ftruncate(Fd, off_t(kCodeBytes)) == 0) {
      void *Rw = mmap(nullptr, kCodeBytes, PROT_READ | PROT_WRITE, MAP_SHARED, Fd, 0);
      void *Rx = mmap(nullptr, kCodeBytes, PROT_READ | PROT_EXEC, MAP_SHARED, Fd, 0);
      if (Rw != MAP_FAILED && Rx != MAP_FAILED) {
        CodeRw = static_cast<uint8_t *>(Rw);
        Code = static_cast<uint8_t *>(Rx);
      } else {
        if (Rw != MAP_FAILED)
          munmap(Rw, kCodeBytes);
        if (Rx != MAP_FAILED)
          munmap(Rx, kCodeBytes);
      }
    }
    close(Fd);
    if (Code)
      return;
  }
  // The fallback (no memfd, or a host that refuses a second, executable mapping): one
  // private mapping, kept read+execute and made writable page by page while a block is
  // copied in.
  P = mmap(nullptr, kCodeBytes, PROT_READ | PROT_EXEC,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (P != MAP_FAILED)
    Code = static_cast<uint8_t *>(P);
}

Translator::~Translator() {
  if (Code)
    munmap(Code, kCodeBytes);
  if (CodeRw)
    munmap(CodeRw, kCodeBytes);
  if (Scratch)
    munmap(Scratch, kScratchBytes);
  if (Cells)
    munmap(Cells, (kCells + kTargets) * sizeof(ChainCell));
}

bool Translator::install(size_t Off, const uint8_t *Src, size_t Len) {
  if (CodeRw) {
    std::memcpy(CodeRw + Off, Src, Len);
    return true;
  }
  // W^X: the pages the bytes land on are writable only while they are copied in. Only
  // those pages: changing the protection of the whole cache costs the host a walk of all
  // its page-table entries per block.
  const uintptr_t PageMask = uintptr_t(kHostPage) - 1;
  uint8_t *First = reinterpret_cast<uint8_t *>(reinterpret_cast<uintptr_t>(Code + Off) & ~PageMask);
  const uintptr_t Last = (reinterpret_cast<uintptr_t>(Code + Off + Len) + PageMask) & ~PageMask;
  const size_t Span = size_t(Last - reinterpret_cast<uintptr_t>(First));
  if (mprotect(First, Span, PROT_READ | PROT_WRITE) != 0)
    return false;
  std::memcpy(Code + Off, Src, Len);
  return mprotect(First, Span, PROT_READ | PROT_EXEC) == 0;
}

const uint8_t *Translator::guestBytes(const Block &B, size_t &Len) {
  Len = 0;
  for (unsigned K = 0; K < B.NumInsns; ++K)
    Len += B.Insns[K].Len;
  const uint8_t *Page = C.Mem.ramPointer(Hpa(B.Pa & kPageMask));
  if (!Page)
    return nullptr;
  const size_t Off = B.Pa & (kPageSize - 1);
  if (!B.Crosses)
    return Page + Off;
  // A page-crossing instruction (Block::Crosses): its head ends the block's frame, its
  // tail begins frame CrossPfn, which need not be the next one.
  const size_t Head = kPageSize - Off;
  const uint8_t *Tail = C.Mem.ramPointer(Hpa(B.CrossPfn << 12));
  if (!Tail || Head >= Len || Len > sizeof CrossBytes)
    return nullptr;
  std::memcpy(CrossBytes, Page + Off, Head);
  std::memcpy(CrossBytes + Head, Tail, Len - Head);
  return CrossBytes;
}

namespace {
size_t keptSlot(uint64_t Pa) {
  return size_t((Pa * 0x9E3779B97F4A7C15ull) >> 48) & (Translator::kKeptEntries - 1);
}
} // namespace

bool Translator::reattach(Block &B) {
  const KeptEntry &K = Kept[keptSlot(B.Pa)];
  if (K.Stamp != Stamp || K.Pa != B.Pa || K.NumInsns != B.NumInsns)
    return false;
  size_t Len;
  const uint8_t *Bytes = guestBytes(B, Len);
  // The same bytes at the same physical address in the same decode mode decode to the
  // same block (the decoder reads nothing else), in the same cache slot (blockSlot), so
  // the translation, which depends on nothing else, is this block's.
  if (!Bytes || Len != K.Bytes || std::memcmp(Bytes, Code + K.BytesOff, Len) != 0)
    return false;
  B.JitStamp = Stamp;
  B.JitCode = Code + K.CodeOff;
  B.JitCalls = K.Calls;
  ++Stats.Kept;
  return true;
}

bool Translator::emitBlock(Block &B, void *EmitterPtr) {
  Emitter &E = *static_cast<Emitter *>(EmitterPtr);
  BlockEmitter BE{E, OffGpr, OffRip, OffRflags, OffCycles, OffRetired, OffBlockStop};
  BE.Lahf = HostLahf;
  constexpr unsigned kBody = kLocal + 2, kExitN = kLocal + 3;
  const unsigned N = B.NumInsns;
  // Prologue: RBX = the Cpu + kCpuBias (emitter.h), R12 = the RIP the block was entered
  // at (the block is keyed by physical address; the same code may run at several linear
  // addresses).
  E.push(HBX);
  E.push(H12);
  E.push(H13); // keeps RSP 16-byte aligned for the handler calls
  E.leaDisp32(HBX, HDI, kCpuBias);
  E.movRR(8, H12, HSI);
  E.movAbs(H13, reinterpret_cast<uint64_t>(&Chain)); // R13 = the chain state (10 bytes)
  if (E.size() != kPrologueBytes)
    return false;
  E.bind(kBody);
  // A loop of one block keeps the guest registers its inline code uses most, RFLAGS and
  // the counts in host registers; any other block the guest registers its inline code
  // names three times or more, in the caller-saved R8-R11 (BlockEmitter::HostOf;
  // docs/TRANSLATOR.md, "Registers").
  const JitForm EndForm = Forms[N - 1];
  int64_t Bytes = 0;
  for (unsigned K = 0; K < N; ++K)
    Bytes += B.Insns[K].Len;
  const bool Loop = Mode == ExecMode::Translate &&
                    (EndForm.Op == JitOp::JmpRel || EndForm.Op == JitOp::JccRel) &&
                    Bytes + int64_t(B.Insns[N - 1].Imm) == 0;
  holdRegisters(B, Forms, BE, Loop);
  HeldRegisters = Loop && BE.holdsAny();
  // R14, R15 and RBP are saved by the block that uses them, at its entry (from the run
  // loop or chained), and restored at each of its exits: other blocks pay nothing.
  const auto SaveHeld = [&] {
    E.push(H14);
    E.push(H15);
    E.push(HBP);
    E.push(HAX); // (seven pushes keep RSP 16-byte aligned for the handler calls)
  };
  const auto RestoreHeld = [&] {
    E.pop(HCX); // (EAX may hold the result)
    E.pop(HBP);
    E.pop(H15);
    E.pop(H14);
  };
  if (HeldRegisters)
    SaveHeld();
  BE.reload();
  // RFLAGS.AC: tested at the first inline access after the block's start and after each
  // handler call (emitMemHit). A loop that calls no handler cannot change AC (only
  // POPF, IRET, STAC, CLAC and event delivery do, all through handlers or outside the
  // block), so it is tested once, before the loop's head, when the loop has an inline
  // access.
  bool HoistAc = Loop;
  bool InlineAccess = false;
  for (unsigned K = 0, Next = 0; K < N && HoistAc; ++K) {
    const JitForm F = Forms[K];
    Next += B.Insns[K].Len;
    BE.NextOff = int32_t(Next); // (addressable: a RIP-relative operand)
    if (F.Op == JitOp::None || (F.Shape == JitShape::Mem && !hasInlineHit(BE, B.Insns[K], F)))
      HoistAc = false;
    InlineAccess |= F.Shape == JitShape::Mem;
  }
  HoistAc &= InlineAccess;
  if (HoistAc) {
    BE.btFlags(18);
    BE.bailBefore(kHostB, 0);
  }
  constexpr unsigned kLoopHead = kLocal + 8;
  E.bind(kLoopHead);
  BE.AcClear = HoistAc;
  // Chaining: every exit after the whole block names its cell in RSI (Cell0 for the
  // taken branch and every other block end, Cell1 for a Jcc not taken). The cells are
  // data outside the code (a store near code being run costs the host a pipeline flush).
  const bool Chains = Mode == ExecMode::Translate;
  const uint64_t Cell0 = reinterpret_cast<uint64_t>(&Cells[CellsUsed]),
                 Cell1 = reinterpret_cast<uint64_t>(&Cells[CellsUsed + 1]);
  constexpr unsigned kNoChain = kLocal + 6, kSecondCell = kLocal + 7, kValid0 = kLocal + 4,
                     kValid1 = kLocal + 5;
  // The flags each instruction must leave in RFLAGS (docs/TRANSLATOR.md, "Flags"): all
  // are live at the block's end and before any instruction that can leave the block
  // early (a handler call, an inline access whose miss path calls the handler, a branch
  // that hands a non-canonical target to the interpreter); an instruction's flags that
  // a later one defines before anything reads them are not computed.
  uint32_t Need[kMaxBlockInsns] = {};
  uint32_t LiveIn = kArith; // the flags the block reads before it defines them
  {
    uint32_t Live = kArith;
    for (unsigned K = N; K-- > 0;) {
      const JitForm F = Forms[K];
      const uint32_t Writes = flagWrites(B.Insns[K], F);
      Need[K] = Writes & Live;
      const bool MayLeave = F.Shape == JitShape::Mem || F.Op == JitOp::None ||
                            F.Op == JitOp::JmpRel || F.Op == JitOp::JccRel;
      Live = MayLeave ? kArith : flagReads(F) | (Live & ~Writes);
    }
    LiveIn = Live;
  }
  // A loop whose JCC tests the flags of the register instruction before it (DEC RCX;
  // JNZ) branches on the host's flags, and computes those flags only on the paths that
  // read them (docs/TRANSLATOR.md, "Loops").
  // Whether instruction K, a register instruction, leaves the host's flags equal to the
  // guest's for the condition of instruction K + 1 (ALU, NEG; INC and DEC leave CF,
  // so the host's is not the guest's).
  // AllowMem: also a memory form whose TLB-hit path is inline (its miss path, which
  // runs the handler, then loads the host's flags from RFLAGS: SlowPath below).
  int32_t Ends[kMaxBlockInsns] = {};
  for (unsigned K = 0, End = 0; K < N; ++K)
    Ends[K] = int32_t(End += B.Insns[K].Len);
  const auto HostFlagsServe = [&](unsigned K, bool AllowMem) {
    const JitForm F = Forms[K];
    const unsigned Cond = B.Insns[K + 1].Cond >> 1;
    const bool Alu = isAlu(F.Op);
    const bool Unary = F.Op == JitOp::Neg ||
                       ((F.Op == JitOp::Inc || F.Op == JitOp::Dec) && Cond != 1 && Cond != 3);
    if (F.Shape == JitShape::Mem) {
      BE.NextOff = Ends[K]; // (addressable: a RIP-relative operand)
      return AllowMem && (Alu || Unary) && hasInlineHit(BE, B.Insns[K], F);
    }
    return (Alu && (F.Shape == JitShape::RegReg || F.Shape == JitShape::RegImm)) ||
           (Unary && F.Shape == JitShape::Reg);
  };
  const bool JccOnHost = N >= 2 && EndForm.Op == JitOp::JccRel && HostFlagsServe(N - 2, !Loop);
  unsigned FusedAt = N;
  if (Loop && JccOnHost)
    FusedAt = N - 2;
  FusedBranch = FusedAt < N;
  // Any other block ending so (CMP; JNE) branches on the host's flags too, and computes
  // the instruction's flags on each of the two paths (FusedJcc, at the Jcc below).
  const unsigned FusedJccAt = !Loop && JccOnHost ? N - 2 : N;
  HostFlags FusedFlags = {0, 0};
  // The Jcc's test, on the host's flags of instruction K (the same RFLAGS bits: SDM
  // Vol. 1, Appendix B), made before K's flags are computed; the not-taken path computes
  // them at the Jcc's NotTaken label, the taken one here.
  const auto fuseJcc = [&](unsigned K, const JitForm &F) {
    E.jump(B.Insns[K + 1].Cond ^ 1, kLocal); // the Jcc's NotTaken
    FusedFlags = hostFlagsOf(F);
    BE.Need = Need[K];
    BE.mergeFlags(BE.hostFlags(FusedFlags.Bits, FusedFlags.Mask));
  };
  // A run of PUSH r64 (or POP r64) from instruction K, RSP not among them: one TLB test
  // for the run's bytes, which lie in one page when it hits, then plain stores (loads)
  // and one update of RSP. When the test fails (a miss, the bytes across two pages), the
  // instructions run one by one as emitted after it, each with its own test. The
  // interpreter's PUSHes (SDM Vol. 2B, PUSH: the value at RSP - 8 for each) leave the
  // same memory and RSP when none faults; a run that could fault takes the slow way.
  unsigned RunEnd = N, Runs = 0;
  const auto emitStackRun = [&](unsigned K) {
    const JitOp Op = Forms[K].Op;
    if ((Op != JitOp::Push && Op != JitOp::Pop) || !Forms[K].Stack64 || Loop)
      return;
    constexpr uint8_t Rsp = 4;
    unsigned M = 0;
    while (K + M < N && M < 16 && Forms[K + M].Op == Op && Forms[K + M].Stack64 &&
           B.Insns[K + M].Reg[0] != Rsp)
      ++M;
    if (M < 2)
      return;
    const bool Push = Op == JitOp::Push;
    const unsigned Slow = kStackRun + 2 * Runs++;
    BE.loadReg(8, HAX, Rsp);
    if (Push)
      E.aluImm(Alu::Sub, 8, HAX, 8 * M);
    emitTlbHit(&BE, 8 * M, Push, Slow, K);
    for (unsigned J = 0; J < M; ++J) {
      const uint8_t R = B.Insns[K + J].Reg[0];
      if (Push) {
        BE.loadReg(8, HCX, R);
        E.storeAt(HCX, HAX, int8_t(8 * (M - 1 - J)));
      } else {
        E.loadAt(HCX, HAX, int8_t(8 * J));
        BE.setReg(8, HCX, R);
      }
    }
    BE.addReg64(Rsp, Push ? -int32_t(8 * M) : int32_t(8 * M));
    E.jump(-1, Slow + 1);
    E.bind(Slow);
    RunEnd = K + M - 1;
  };
  // The instruction before a SETcc or CMOVcc that tests its host flags (CondNext below).
  HostFlags CondFlags = {0, 0};
  uint32_t CondNeed = 0;
  bool Flagged = false;
  bool SlowPath[kMaxBlockInsns] = {};
  // The miss path of inline access K loads the host's flags from RFLAGS before it joins
  // the hit path (a branch, SETcc or CMOVcc after it tests them).
  bool FlagsAtJoin[kMaxBlockInsns] = {};
  bool RipByHandler = false;
  int32_t Off = 0;
  for (unsigned K = 0; K < N; ++K) {
    const DecodedInsn &I = B.Insns[K];
    const JitForm F = Forms[K];
    const int32_t Next = Off + I.Len;
    BE.BailCycles[K] = BE.PendCycles;
    BE.BailInsns[K] = BE.PendInsns;
    BE.Offset[K] = Off;
    RipByHandler = false;
    BE.Need = Need[K];
    // A SETcc or CMOVcc (register forms) right after: it tests the host's flags, and
    // this instruction's flags are computed after it (neither writes flags).
    const bool CondNext = K + 1 < N && K != FusedAt &&
                          (Forms[K + 1].Op == JitOp::Setcc || Forms[K + 1].Op == JitOp::Cmov) &&
                          HostFlagsServe(K, true);
    const bool JccNext = K == FusedJccAt;
    if (CondNext || JccNext)
      BE.Need = 0;
    if (K > RunEnd || RunEnd == N)
      emitStackRun(K);
    if (K == FusedAt) {
      // The test the loop's back edge makes (below), made here: nothing from here to the
      // end changes the counts or what they are compared with. When it fails, the
      // instructions are emitted as in any block (SlowTail).
      const DecodedInsn &J = B.Insns[N - 1];
      const uint32_t IterCycles = BE.PendCycles + I.Cost + J.Cost,
                     IterInsns = BE.PendInsns + 2;
      constexpr unsigned kSlowTail = kLocal + 9, kFastNotTaken = kLocal + 10;
      BE.cyclesPlus(HAX, int32_t(IterCycles + B.Insns[0].CostToEnd));
      E.cmpRegMem64(HAX, OffWindowDue);
      E.jump(kHostAE, kSlowTail);
      BE.retiredPlus(HCX, int32_t(IterInsns + N));
      E.cmpRegMem64(HCX, OffInsnEnd);
      E.jump(kHostAE, kSlowTail);
      E.store(8, HAX, OffBlockStop);
      BE.Need = 0; // the host's flags stay those of the instruction
      BE.NextOff = Next;
      if (!emitInline(BE, I, F))
        return false;
      // To FastNotTaken when the guest's condition is false: Jcc's condition code is the
      // host's, testing the same RFLAGS bits (SDM Vol. 1, Appendix B "EFLAGS Condition
      // Codes"), and the host instruction just emitted set them as the guest's does
      // (RegAlu/RegUnary above: INC and DEC, which leave CF, only with a condition that
      // does not read it).
      E.jump(J.Cond ^ 1, kFastNotTaken);
      const HostFlags H = hostFlagsOf(F);
      const auto Materialize = [&](uint32_t Mask) {
        BE.Need = Mask;
        BE.mergeFlags(BE.hostFlags(H.Bits, H.Mask));
      };
      Materialize(LiveIn); // taken: what the next iteration reads
      BE.PendCycles = IterCycles;
      BE.PendInsns = IterInsns;
      BE.sync();
      E.jump(-1, kLoopHead);
      E.bind(kFastNotTaken);
      Materialize(kArith);
      BE.PendCycles = IterCycles;
      BE.PendInsns = IterInsns;
      BE.sync();
      E.leaR12(HAX, Next + J.Len);
      E.store(8, HAX, OffRip);
      E.movImm64(HSI, Cell1);
      E.jump(-1, kExitN);
      E.bind(kSlowTail);
      BE.PendCycles = BE.BailCycles[K];
      BE.PendInsns = BE.BailInsns[K];
      BE.Need = Need[K];
    }
    if (F.Shape == JitShape::Mem && hasInlineHit(BE, I, F)) {
      // The interpreter's TLB-hit path inline; anything else (a miss, a page crossing,
      // a target outside RIP's canonical half) runs the handler out of line (SlowPath
      // below) and comes back to Join; RFLAGS.AC set hands the rest to the interpreter.
      BE.NextOff = Next;
      if (!emitMemHit(&BE, I, F, Off, Next, kMiss + 2 * K))
        return false;
      E.bind(kMiss + 2 * K + 1);
      SlowPath[K] = true;
      FlagsAtJoin[K] = CondNext || JccNext;
      if (JccNext)
        fuseJcc(K, F);
      BE.PendCycles += I.Cost;
      ++BE.PendInsns;
      RipByHandler = F.Op == JitOp::CallRel || F.Op == JitOp::Ret;
    } else if (F.Shape == JitShape::Mem || F.Op == JitOp::None) {
      BE.NextOff = Next;
      BE.sync();
      // Through the instruction's own handler, with RIP, Cycles and Retired as the
      // interpreter has them, its status and the run loop's stop check after it.
      BE.handlerCall(I, K, Off, N);
      // The handler leaves RIP after the instruction.
      RipByHandler = true;
    } else if (F.Op == JitOp::JmpRel || F.Op == JitOp::JccRel) {
      const int64_t Target = int64_t(Next) + int64_t(I.Imm);
      if (!fitsInt32(Target) || K + 1 != N)
        return false;
      const unsigned NotTaken = kLocal, Tail = kLocal + 1;
      // The branch completes on both paths below (its bail-out exit, before it, uses
      // the counts saved above).
      BE.PendCycles += I.Cost;
      ++BE.PendInsns;
      const uint32_t PendCycles = BE.PendCycles, PendInsns = BE.PendInsns;
      const bool Cond = F.Op == JitOp::JccRel;
      const bool Fused = K == FusedJccAt + 1;
      if (Cond && !Fused) {
        const int Host = BE.condition(I.Cond);
        // To NotTaken when the condition (with the opcode's negation) is false.
        E.jump((I.Cond & 1) ? Host : Host ^ 1, NotTaken);
      }
      if (Target == 0 && Mode == ExecMode::Translate) {
        // A branch back to the block's start (a loop of one block): run the block again
        // at once when the run loop would enter it again, in full, with this same
        // translation (docs/TRANSLATOR.md, "Loops"). Not in lockstep, which compares
        // every run. RIP is stored only when the loop is left (nothing reads it inside).
        BE.sync();
        BE.cyclesPlus(HAX, int32_t(B.Insns[0].CostToEnd));
        E.cmpRegMem64(HAX, OffWindowDue);
        E.jump(kHostAE, kLoopExit);
        BE.retiredPlus(HCX, int32_t(N));
        E.cmpRegMem64(HCX, OffInsnEnd);
        E.jump(kHostAE, kLoopExit);
        E.store(8, HAX, OffBlockStop);
        E.jump(-1, kLoopHead);
        E.bind(kLoopExit);
        E.leaR12(HAX, 0);
        E.store(8, HAX, OffRip);
        E.movImm64(HSI, Cell0);
        E.jump(-1, kExitN);
      } else {
        E.leaR12(HAX, int32_t(Target));
        // A target in the entry RIP's page is canonical as that RIP is (the decoder
        // fetched there); others are checked.
        const int64_t InPage = int64_t(B.Pa & 0xfff) + Target;
        if (InPage < 0 || InPage >= 4096)
          BE.checkCanonical(K);
        E.store(8, HAX, OffRip);
        if (Chains)
          E.movImm64(HSI, Cell0);
      }
      if (Cond && !(Target == 0 && Mode == ExecMode::Translate)) {
        E.jump(-1, Tail);
      }
      if (Cond) {
        E.bind(NotTaken);
        if (Fused) {
          BE.Need = Need[K - 1];
          BE.mergeFlags(BE.hostFlags(FusedFlags.Bits, FusedFlags.Mask));
        }
        E.leaR12(HAX, Next);
        E.store(8, HAX, OffRip);
        if (Chains)
          E.movImm64(HSI, Cell1);
      }
      E.bind(Tail);
      BE.PendCycles = PendCycles;
      BE.PendInsns = PendInsns;
      RipByHandler = true;
    } else if (F.Op == JitOp::Nop) {
      BE.PendCycles += I.Cost;
      ++BE.PendInsns;
    } else {
      BE.NextOff = Next;
      if (!emitInline(BE, I, F))
        return false;
      if (JccNext)
        fuseJcc(K, F);
      BE.PendCycles += I.Cost;
      ++BE.PendInsns;
    }
    if (Flagged) {
      // (K is the SETcc or CMOVcc): now the previous instruction's flags.
      BE.Need = CondNeed;
      BE.mergeFlags(BE.hostFlags(CondFlags.Bits, CondFlags.Mask));
    }
    BE.CondOnHost = Flagged = CondNext;
    if (CondNext) {
      CondFlags = hostFlagsOf(F);
      CondNeed = Need[K];
    }
    if (K == RunEnd)
      E.bind(kStackRun + 2 * Runs - 1); // the run's fast path joins here
    Off = Next;
  }
  BE.sync();
  if (!RipByHandler) {
    E.leaR12(HAX, Off);
    E.store(8, HAX, OffRip);
  }
  const JitForm LastForm = Forms[N - 1];
  // A block that does not end with a direct branch leaves through one exit with two
  // cells (a RET returns to several callers): both are tried, and link() refills the
  // stale one, or the two in turn.
  const bool Pair = Chains && LastForm.Op != JitOp::JccRel && LastForm.Op != JitOp::JmpRel;
  if (Chains)
    Cells[CellsUsed].Pad = Pair;
  if (Pair)
    E.movImm64(HSI, Cell0);
  E.bind(kExitN); // RIP stored, the counts added, RSI = the exit's cell
  BE.spill();
  if (HeldRegisters)
    RestoreHeld(); // (a chained jump enters the next block with the run loop's frame)
  if (Pair) {
    emitChain(&E, kSecondCell, kValid0);
    E.bind(kSecondCell);
    E.movImm64(HSI, Cell1);
    // Neither cell holds: the table of targets (Translator::Targets), one cell per slot
    // of the RIP (targetSlot), filled by link() from every exit of this kind, so that a
    // RET back to one of many callers still chains.
    constexpr unsigned kTargetTry = kLocal + 12, kTargetMiss = kLocal + 13,
                       kValidTarget = kLocal + 14;
    emitChain(&E, kTargetTry, kValid1);
    E.bind(kTargetTry);
    E.load(8, HAX, OffRip);
    E.movRR(4, HDX, HAX);
    E.shiftImm(Shift::Shr, 4, HDX, kTargetShift);
    E.aluRR(Alu::Xor, 4, HDX, HAX);
    E.aluImm(Alu::And, 4, HDX, kTargets - 1);
    static_assert(sizeof(ChainCell) == 96);
    E.timesThree(HDX);
    E.shiftImm(Shift::Shl, 4, HDX, 5);
    E.movImm64(HSI, reinterpret_cast<uint64_t>(Targets));
    E.aluRR(Alu::Add, 8, HSI, HDX);
    emitChain(&E, kTargetMiss, kValidTarget, true);
    E.bind(kTargetMiss);
    E.movImm64(HSI, Cell1); // link() refills the pair, and the table's cell
  } else if (Chains) {
    // Every path to kExitN of a block ending with JMP or Jcc computed the RIP it stored
    // in RAX (the branch's exits, the loop's), and nothing after wrote RAX.
    emitChain(&E, kNoChain, kValid1, false, true);
  }
  E.bind(kNoChain);
  if (Chains)
    E.storeR13(0, HSI); // the exit taken (its last cell tried), for link()
  E.movImm32(HAX, N);
  constexpr unsigned kEpilogueFrame = kLocal + 11;
  if (HeldRegisters)
    E.jump(-1, kEpilogueFrame);
  E.bind(kEpilogue); // the other exits, with the held registers' frame
  if (HeldRegisters)
    RestoreHeld();
  E.bind(kEpilogueFrame);
  E.movImm64(HCX, reinterpret_cast<uint64_t>(&B)); // the block the run ended in
  E.storeR13(8, HCX);
  E.pop(H13);
  E.pop(H12);
  E.pop(HBX);
  E.ret();
  // The inline accesses' other paths: the handler, as an instruction without one runs
  // it, then back to the TLB-hit path's state (its counts pending, not added).
  for (unsigned K = 0; K < N; ++K) {
    if (!SlowPath[K])
      continue;
    const DecodedInsn &I = B.Insns[K];
    E.bind(kMiss + 2 * K);
    BE.PendCycles = BE.BailCycles[K];
    BE.PendInsns = BE.BailInsns[K];
    BE.sync();
    BE.handlerCall(I, K, BE.Offset[K], N);
    const int64_t Cycles = int64_t(BE.BailCycles[K]) + I.Cost,
                  Insns = int64_t(BE.BailInsns[K]) + 1;
    if (!fitsInt32(Cycles))
      return false;
    BE.addCounts(int32_t(-Cycles), int32_t(-Insns));
    if (FlagsAtJoin[K]) {
      // The host's arithmetic flags = the guest's, as the handler left them (the others,
      // DF, AC and TF among them, clear: nothing in translated code reads them).
      BE.loadFlags(HAX);
      E.aluImm(Alu::And, 4, HAX, kArith);
      E.push(HAX);
      E.byte(0x9d); // POPFQ
    }
    E.jump(-1, kMiss + 2 * K + 1);
  }
  // The exits.
  for (unsigned K = 0; K < N; ++K) {
    if (BE.UsedBail[K]) {
      E.bind(kBail + K);
      BE.PendCycles = BE.BailCycles[K];
      BE.PendInsns = BE.BailInsns[K];
      BE.sync();
      BE.spill();
      E.leaR12(HAX, BE.Offset[K]);
      E.store(8, HAX, OffRip);
      E.movImm32(HAX, K);
      E.jump(-1, kEpilogue);
    }
    if (BE.UsedStatus[K]) { // AL = the status; the handler left RIP at the instruction
      E.bind(kStatus + K);
      E.byte(0x0f); // MOVZX EAX, AL
      E.byte(0xb6);
      E.byte(0xc0);
      E.shiftImm(Shift::Shl, 4, HAX, 8);
      E.aluImm(Alu::Or, 4, HAX, K);
      E.jump(-1, kEpilogue);
    }
    if (BE.UsedStop[K]) { // (the counts of K added to the held ones: written back)
      E.bind(kStop + K);
      BE.spill();
      E.movImm32(HAX, K + 1);
      E.jump(-1, kEpilogue);
    }
  }
  return !E.overflow() && E.resolve();
}

void Translator::emitTlbHit(void *BlockEmitterPtr, unsigned Size, bool Write, unsigned Miss,
                            unsigned K) {
  // RAX: the linear address of an access of Size bytes -> its host address (see
  // emitMemHit); Miss for anything else, the bail-out before instruction K when
  // RFLAGS.AC is set.
  BlockEmitter &BE = *static_cast<BlockEmitter *>(BlockEmitterPtr);
  Emitter &E = BE.E;
  if (!BE.AcClear) {
    // RFLAGS.AC set: the interpreter runs this instruction and the rest of the block
    // (#AC is checked on its path). Only a handler call can change AC (POPF, IRET,
    // STAC, CLAC, a fault), so the inline accesses after this one up to the next call
    // need no test.
    BE.btFlags(18);
    BE.bailBefore(kHostB, K);
    BE.AcClear = true;
  }
  if (Size > 1)
    E.leaDisp32(HDX, HAX, int32_t(Size - 1));
  else
    E.movRR(8, HDX, HAX);
  E.aluImm(Alu::And, 8, HDX, 0xfffff000u);
  E.opMem(8, 0x0a, 0x0b, HDX, OffFetchTagLow); // OR: tag(La + Size - 1, false)
  E.movRR(4, HCX, HAX);
  slotOffset(E, HCX);
  const int32_t Tlb = Write ? OffTlbWrite : OffTlbRead;
  E.opBaseIndex(0x3b, HDX, HCX, Tlb + int32_t(offsetof(TlbEntry, Tag))); // CMP
  E.jump(kHostNE, Miss);
  E.opBaseIndex(0x03, HAX, HCX, Tlb + int32_t(offsetof(TlbEntry, Addend))); // ADD
}

bool Translator::emitMemHit(void *BlockEmitterPtr, const DecodedInsn &I, const JitForm &F,
                            int32_t Off, int32_t Next, unsigned Miss) {
  // The interpreter's fast paths of readMem/writeMem/mapRmw (cpu/memory.h) and of the
  // 64-bit stack handlers (cpu/exec_data.cpp execPushReg64, execPopReg64; cpu/
  // exec_control.cpp callTo, execRet), in host code: in 64-bit mode with RFLAGS.AC
  // clear, the linear address is the offset (plus the FS/GS base), and the entry of the
  // read (load) or write (store, read-modify-write) TLB slot of its page maps the whole
  // access when its tag equals the tag of the access's last byte (tlbMaps); the host
  // address is then La + Addend. Anything else jumps to Miss, where the handler runs
  // from the start: nothing is committed before the last test. A write TLB entry never
  // maps a page that holds decoded code, a data breakpoint, MMIO or a watched range, and
  // a read entry never one that holds a data breakpoint, MMIO or a read-watched range
  // (PhysMem::watchReads), so a hit has no effect but the access, as in the
  // interpreter's fast path.
  BlockEmitter &BE = *static_cast<BlockEmitter *>(BlockEmitterPtr);
  Emitter &E = BE.E;
  const unsigned N = F.Size;
  const auto CpuOff = [&](const void *P) {
    return int32_t(reinterpret_cast<const char *>(P) - reinterpret_cast<const char *>(&C));
  };
  // RAX: the linear address of an access of Size bytes -> its host address.
  const auto Hit = [&](unsigned Size, bool Write) {
    emitTlbHit(&BE, Size, Write, Miss, (Miss - kMiss) / 2);
  };
  const auto Operand = [&] { // RAX = the memory operand's linear address
    BE.address(I);
    if (SegReg(I.Seg) >= SegReg::FS)
      E.addRegMem64(HAX, CpuOff(&C.S.seg(SegReg(I.Seg)).Base));
  };
  // X = the register or immediate operand of a memory-destination form.
  const auto Value = [&](Reg X) {
    if (I.Reg[1] != kRegNone)
      BE.loadReg(N, X, I.Reg[1]);
    else if (N == 8)
      E.movImm64(X, I.Imm);
    else
      E.movImm32(X, uint32_t(I.Imm));
  };
  // A branch target in RAX or RDX (Target) shares bits 63:47 with the instruction's
  // RIP (sameCanonicalHalf), else Miss.
  const auto SameHalf = [&](Reg Target) {
    E.leaR12(HCX, Off);
    E.aluRR(Alu::Xor, 8, HCX, Target);
    E.shiftImm(Shift::Shr, 8, HCX, 47);
    E.jump(kHostNE, Miss);
  };
  constexpr uint8_t Rsp = 4;
  switch (F.Op) {
  case JitOp::Push: // PUSH r64 (RSP: the value before the push)
    BE.loadReg(8, HAX, Rsp);
    E.aluImm(Alu::Sub, 8, HAX, 8);
    Hit(8, true);
    BE.loadReg(8, HCX, I.Reg[0]);
    E.storeAtRax(8, HCX);
    BE.addReg64(Rsp, -8);
    return true;
  case JitOp::Pop: // POP r64 (POP RSP: the popped value wins)
    BE.loadReg(8, HAX, Rsp);
    Hit(8, false);
    E.loadAtRax(8, HCX);
    BE.addReg64(Rsp, 8);
    BE.setReg(8, HCX, I.Reg[0]);
    return true;
  case JitOp::CallRel: { // the target is checked before the push (SDM Vol. 2A, CALL)
    const int64_t Target = int64_t(Next) + int64_t(I.Imm);
    if (!fitsInt32(Target))
      return false;
    E.leaR12(HAX, int32_t(Target));
    SameHalf(HAX);
    BE.loadReg(8, HAX, Rsp);
    E.aluImm(Alu::Sub, 8, HAX, 8);
    Hit(8, true);
    E.leaR12(HCX, Next);
    E.storeAtRax(8, HCX);
    BE.addReg64(Rsp, -8);
    E.leaR12(HAX, int32_t(Target));
    E.store(8, HAX, OffRip);
    return true;
  }
  case JitOp::Ret: // RET and RET imm16
    BE.loadReg(8, HAX, Rsp);
    Hit(8, false);
    E.loadAtRax(8, HDX);
    SameHalf(HDX);
    E.store(8, HDX, OffRip);
    BE.addReg64(Rsp, int32_t(8 + I.Imm));
    return true;
  case JitOp::Mov:
    Operand();
    if (I.Reg[0] != kRegNone) { // MOV r, m
      Hit(N, false);
      E.loadAtRax(N, HCX);
      BE.setReg(N, HCX, I.Reg[0]);
    } else { // MOV m, r / MOV m, imm
      Hit(N, true);
      Value(HCX);
      E.storeAtRax(N, HCX);
    }
    return true;
  case JitOp::MovZx: case JitOp::MovSx:
    Operand();
    Hit(F.SrcSize, false);
    if (F.Op == JitOp::MovZx)
      E.loadZxAtRax(F.SrcSize, HAX);
    else
      E.loadSxAtRax(F.SrcSize, HAX);
    BE.setReg(N, HAX, I.Reg[0], F.Op == JitOp::MovZx);
    return true;
  default:
    break;
  }
  Operand();
  if (isUnary(F.Op)) { // read-modify-write (mapRmw)
    Hit(N, true);
    E.loadAtRax(N, HCX);
    BE.RaxLive = true;
    const uint32_t M = unaryOp(BE, F);
    BE.RaxLive = false;
    E.storeAtRax(N, HCX);
    BE.mergeFlags(M);
    return true;
  }
  if (I.Reg[0] != kRegNone) { // op r, m
    Hit(N, false);
    E.loadAtRax(N, HAX);
    BE.loadReg(N, HCX, I.Reg[0]);
    const uint32_t M = aluOp(BE, F, HAX);
    if (F.Op != JitOp::Cmp && F.Op != JitOp::Test)
      BE.setReg(N, HCX, I.Reg[0]);
    BE.mergeFlags(M);
    return true;
  }
  // op m, r / op m, imm: CMP and TEST read (readMem), the others read, modify and write
  // through the write TLB (mapRmw).
  const bool Writes = F.Op != JitOp::Cmp && F.Op != JitOp::Test;
  Hit(N, Writes);
  E.loadAtRax(N, HCX);
  Value(HDX);
  BE.RaxLive = Writes;
  const uint32_t M = aluOp(BE, F, HDX);
  BE.RaxLive = false;
  if (Writes)
    E.storeAtRax(N, HCX);
  BE.mergeFlags(M);
  return true;
}

bool Translator::emitChainTest() {
  Emitter E(Scratch, kScratchBytes);
  E.resetLabels();
  constexpr unsigned kFail = 0;
  // RAX = the RIP, RCX = the current chain stamp, RSI = the cell (emitChain); called,
  // so it returns to its exit with ZF set when the cell is valid (RAX reloaded with the
  // RIP, the stamp recorded), clear when not. Clobbers RDX, RDI.
  // The full test, which then records the stamp: the fetch tag is the cell's and in the
  // primary fetch TLB slot with the cell's frame, and the block cache's slot of that
  // address still holds Next, current (Mmu::cachedBlock's test: address, key of this
  // cache epoch in 64-bit mode, the page's code generation), with the translation the
  // cell names. A page-crossing Next fails it: this test does not see its second page
  // (Mmu::crossingMapped), so a cell reaches such a block only while its stamp says
  // that nothing the run loop's lookup tested has changed since.
  E.movRR(8, HDX, HAX);
  E.aluImm(Alu::And, 8, HDX, 0xfffff000u); // the page (sign-extended mask)
  E.opMem(8, 0x0a, 0x0b, HDX, OffFetchTagLow); // OR
  E.cmpRegAt(HDX, HSI, 8); // Tag
  E.jump(kHostNE, kFail);
  E.movRR(4, HDI, HAX);
  slotOffset(E, HDI);
  static_assert(offsetof(TlbEntry, Tag) == 0);
  E.opBaseIndex(0x3b, HDX, HDI, OffFetchTlb); // CMP RDX, TlbFetch[slot].Tag
  E.jump(kHostNE, kFail);
  E.opBaseIndex(0x8b, HDX, HDI, OffFetchTlb + int32_t(offsetof(TlbEntry, Pfn)));
  E.cmpRegAt(HDX, HSI, int8_t(offsetof(ChainCell, Pfn)));
  E.jump(kHostNE, kFail);
  E.loadAt(HDI, HSI, int8_t(offsetof(ChainCell, Next)));
  E.loadAt(HAX, HSI, int8_t(offsetof(ChainCell, Pa)));
  E.cmpRegAt(HAX, HDI, int8_t(offsetof(Block, Pa)));
  E.jump(kHostNE, kFail);
  E.cmpByteAt(HDI, int8_t(offsetof(Block, Crosses)), 0);
  E.jump(kHostNE, kFail);
  E.load(4, HAX, OffBlockKeyBase);
  E.aluImm(Alu::Or, 4, HAX, uint32_t(CodeMode::Long64));
  E.opAt(0x3b, HAX, HDI, int8_t(offsetof(Block, Key)), 4);
  E.jump(kHostNE, kFail);
  E.movImm64(HAX, reinterpret_cast<uint64_t>(CodeGens));
  E.loadAt(HAX, HAX, 0);        // PhysMem's code generations
  E.loadIndexed8(HAX, HAX, HDX); // of the frame
  E.cmpRegAt(HAX, HDI, int8_t(offsetof(Block, Gen)));
  E.jump(kHostNE, kFail);
  E.movImm64(HAX, reinterpret_cast<uint64_t>(&Stamp));
  E.opAt(0x8b, HAX, HAX, 0, 4);
  E.opAt(0x3b, HAX, HDI, int8_t(offsetof(Block, JitStamp)), 4);
  E.jump(kHostNE, kFail);
  E.loadAt(HAX, HDI, int8_t(offsetof(Block, JitCode)));
  E.aluImm(Alu::Add, 8, HAX, kPrologueBytes);
  E.cmpRegAt(HAX, HSI, int8_t(offsetof(ChainCell, Body)));
  E.jump(kHostNE, kFail);
  E.storeAt(HCX, HSI, int8_t(offsetof(ChainCell, Stamp)));
  E.load(8, HAX, OffRip);
  E.bind(kFail); // (ZF: clear on a failed test, set by the last compare on success)
  E.ret();
  if (!E.resolve() || E.overflow() || !install(Used, Scratch, E.size()))
    return false;
  ChainTestAt = Used;
  Used += (E.size() + 15) & ~size_t(15);
  return true;
}

void Translator::emitChain(void *EmitterPtr, unsigned Fail, unsigned Valid, bool Target,
                           bool RaxIsRip) {
  Emitter &E = *static_cast<Emitter *>(EmitterPtr);
  // The run loop's step from one block to the next (Cpu::runBlocks), for a successor
  // known from this exit's cell: Mmu::cachedBlock's test (the RIP is the cell's La, its
  // fetch tag is the cell's Tag and in the primary fetch TLB slot with the cell's frame,
  // and the block cache's slot holds Next, current: the lookup would return Next), then
  // the test for running Next whole (the window due after it, the budget beyond it). Nothing else the loop tests
  // can change inside translated code: stepping, RF, breakpoints, observers and the mode
  // are changed by no translatable instruction, and anything that needs the loop (a
  // device, a write into code) calls breakBlock(), which zeroes WindowDue.
  // The stamp first: unchanged since the cell was filled or last passed the full test,
  // the fetch TLB's slots, the tags' low bits (TLB generation, CPL), the block cache and
  // the code are as they were then (cpu/mmu.h, "Block links": Mmu::chainStamp also
  // moves at every change of the fetch TLB's slots and of the tag bits), so with the same
  // address the lookup finds the same entry in the primary slot and returns what it
  // returned then; the translation is the same (it changes only with a decode, which
  // moves the stamp, or a flush, which drops the cell).
  if (!RaxIsRip)
    E.load(8, HAX, OffRip);
  E.cmpRegAt(HAX, HSI, 0); // La
  E.jump(kHostNE, Fail);
  E.load(8, HCX, OffChainSum); // (Mmu::chainStamp)
  E.movImm64(HDI, reinterpret_cast<uint64_t>(CodeWrites));
  E.addRegAt(HCX, HDI, 0);
  E.cmpRegAt(HCX, HSI, int8_t(offsetof(ChainCell, Stamp)));
  E.jump(kHostE, Valid);
  // The full test (emitChainTest), shared by every exit of the generation: ZF set when
  // it passed, RAX = RIP again.
  E.callAbs(reinterpret_cast<uint64_t>(Code + ChainTestAt));
  E.jump(kHostNE, Fail);
  E.bind(Valid); // RAX = RIP
  E.load(8, HDX, OffCycles);
  E.addRegAt(HDX, HSI, 40); // NextCost
  E.cmpRegMem64(HDX, OffWindowDue);
  E.jump(kHostAE, Fail);
  E.load(8, HCX, OffRetired);
  E.addRegAt(HCX, HSI, 48); // NextInsns
  E.cmpRegMem64(HCX, OffInsnEnd);
  E.jump(kHostAE, Fail);
  E.store(8, HDX, OffBlockStop);
  E.incR13(16);           // chained jumps
  if (Target)
    E.incR13(24);         // through the table of targets
  // (The block running, ChainState::Current, is stored by the exit that leaves it.)
  E.movRR(8, H12, HAX);
  E.jumpAt(HSI, 24); // Body
  static_assert(offsetof(ChainCell, La) == 0 && offsetof(ChainCell, Tag) == 8 &&
                offsetof(ChainCell, Body) == 24 && offsetof(ChainCell, Next) == 32 &&
                offsetof(ChainCell, NextCost) == 40 && offsetof(ChainCell, NextInsns) == 48);
  static_assert(offsetof(Block, JitCode) < 128 && offsetof(Block, Key) < 128 &&
                offsetof(Block, Crosses) < 128);
  static_assert(offsetof(ChainState, LastCell) == 0 && offsetof(ChainState, Current) == 8 &&
                offsetof(ChainState, Chained) == 16 && offsetof(ChainState, TargetChained) == 24);
}

void Translator::link(const Block &B, const Block *Prev) {
  ChainCell *Cell = PendingCell;
  PendingCell = nullptr;
  // The cell is in code of this cache generation, written by the block that just ran to
  // its end (Prev), and B is what the lookup returned at the RIP it left with.
  if (!Prev || Prev != PendingFrom || PendingStamp != Stamp || !B.JitCode ||
      B.JitStamp != Stamp)
    return;
  // (One translator per CPU: nothing runs the cell while it changes.)
  ChainCell *W = Cell;
  const size_t Index = size_t(Cell - Cells);
  if ((Index & 1) && Cells[Index - 1].Pad) {
    // The second cell of an exit's pair (both failed): fill an empty one, else the two
    // in turn.
    ChainCell *First = Cell - 1;
    if (!First->Next)
      W = First;
    else if (Cell->Next)
      W = (Cell->Pad ^= 1) ? First : Cell;
  }
  // B is the block cache's current block at the RIP's frame (the run loop's lookup
  // returned it); the fetch TLB's primary slot holds the RIP's entry.
  const TlbEntry &F = C.Mmu.fetchEntry(Gla(C.S.Rip));
  const bool Pair = Cells[Index & ~size_t(1)].Pad;
  W->La = C.S.Rip;
  W->Tag = C.Mmu.tag(C.S.Rip, false);
  W->Pfn = F.Tag == W->Tag ? F.Pfn : ~uint64_t(0);
  W->Pa = B.Pa;
  W->Body = static_cast<const uint8_t *>(B.JitCode) + kPrologueBytes;
  W->Next = const_cast<Block *>(&B);
  W->NextCost = B.Insns[0].CostToEnd;
  W->NextInsns = B.NumInsns;
  W->Stamp = C.Mmu.chainStamp();
  if (Pair) {
    ChainCell &T = Targets[targetSlot(C.S.Rip)];
    T = *W;
    T.Pad = 0;
  }
  ++Stats.Links;
}

namespace {
/// Integer instructions outside the inline set whose handlers only compute (registers,
/// RFLAGS, an ordinary memory operand, a #DE): run by a handler call when they do not
/// end their block and take no LOCK prefix. Not every instruction that does not end
/// its block: that was exact on one CPU but diverged on a two-CPU Linux boot (an
/// instruction with effects between processors, not found yet). VMREAD and VMWRITE
/// (register forms; VMX root: the current VMCS, this processor's own; non-root: a VM
/// exit, after which the handler call's stop check ends the block, or the shadow VMCS)
/// are among them.
bool callsHandler(const DecodedInsn &I) {
  if (I.Flags & (insnflag::EndsBlock | insnflag::Lock))
    return false;
  const char *N = mnemonicName(I.Mnemonic);
  if (std::strncmp(N, "cmov", 4) == 0 || std::strncmp(N, "set", 3) == 0)
    return true;
  static const char *const kPlain[] = {
      "imul", "mul",  "div",  "idiv", "bswap", "shl",  "shr",  "sar",  "rol",
      "ror",  "rcl",  "rcr",  "shld", "shrd",  "bt",   "bts",  "btr",  "btc",
      "bsf",  "bsr",  "tzcnt", "lzcnt", "popcnt", "cdq", "cqo",  "cdqe", "cwde",
      "cwd",  "cbw",  "movzx", "movsx", "movsxd", "add", "sub",  "and",  "or",
      "xor",  "cmp",  "test", "adc",  "sbb",   "inc",  "dec",  "neg",  "not",
      "lea",  "andn", "sarx", "shlx", "shrx",  "rorx", "bzhi", "blsr", "blsi",
      "blsmsk", "movbe", "vmread", "vmwrite"};
  for (const char *P : kPlain)
    if (std::strcmp(N, P) == 0)
      return true;
  return false;
}
} // namespace

const JitForm &Translator::formOf(const DecodedInsn &I) {
  const uintptr_t P = reinterpret_cast<uintptr_t>(I.Fn);
  FormSlot &S = FormCache[((P >> 4) ^ (P >> 14)) & (kFormSlots - 1)];
  if (S.Fn != I.Fn || !S.Fn) {
    S.Fn = I.Fn;
    S.F = jitFormOf(I);
  }
  return S.F;
}

Translator::Entry Translator::translate(Block &B) {
  // Every instruction must be in the supported set, or be a plain integer instruction
  // run by a call of its handler (callsHandler; docs/TRANSLATOR.md, "Supported set").
  uint8_t Calls = 0; // jitcalls::
  for (unsigned K = 0; K < B.NumInsns; ++K) {
    const JitForm F = Forms[K] = formOf(B.Insns[K]);
    bool ByCall = false;
    if (F.Op == JitOp::None && !(B.Insns[K].Flags & (insnflag::EndsBlock | insnflag::Lock))) {
      uint8_t &Known = CallsByMnemonic[B.Insns[K].Mnemonic % JitStats::kMnemonics];
      if (!Known) {
        const char *N = mnemonicName(B.Insns[K].Mnemonic);
        Known = !callsHandler(B.Insns[K])                                 ? 1
                : std::strcmp(N, "vmread") && std::strcmp(N, "vmwrite") ? 2
                                                                        : 3;
      }
      ByCall = Known >= 2;
      if (Known == 3)
        Calls |= jitcalls::Vmx;
    }
    if (ByCall || F.Shape == JitShape::Mem)
      Calls |= jitcalls::Handlers;
    if (F.Op == JitOp::None && !ByCall) {
      ++Stats.Refused[size_t(JitRefusal::UnsupportedInsn)];
      ++Stats.UnsupportedMnemonic[B.Insns[K].Mnemonic % JitStats::kMnemonics];
      return nullptr;
    }
  }
  if (Used + kScratchBytes + kMaxBlockInsns * 15 + 16 > kCodeBytes ||
      CellsUsed + 2 > kCells) {
    // Full (or too full for the largest block): every translation is dropped at once
    // (their blocks' stamps no longer match, nor do the kept entries'), with the cells.
    ++Stats.Flushes;
    if (++Stamp == 0)
      Stamp = 1;
    Used = 0;
    CellsUsed = 0;
    ChainTestReady = false;
    // The table's cells name translations just dropped: all empty (Stamp 0 never holds).
    std::memset(static_cast<void *>(Targets), 0, kTargets * sizeof(ChainCell));
  }
  if (!ChainTestReady) { // the generation's shared code first
    if (!emitChainTest())
      return nullptr;
    ChainTestReady = true;
  }
  Cells[CellsUsed] = ChainCell{};
  Cells[CellsUsed + 1] = ChainCell{}; // La 0 with Pfn 0: no link yet (see link())
  Emitter E(Scratch, kScratchBytes);
  E.resetLabels();
  E.setOrigin(reinterpret_cast<uint64_t>(Code + Used));
  if (!emitBlock(B, &E)) {
    ++Stats.Refused[size_t(E.overflow() ? JitRefusal::CodeTooLarge
                                        : JitRefusal::UnsupportedForm)];
    return nullptr;
  }
  size_t GuestLen;
  const uint8_t *Guest = guestBytes(B, GuestLen);
  const size_t Bytes = (E.size() + GuestLen + 15) & ~size_t(15);
  if (!Guest)
    return nullptr;
  // The code, then the guest bytes it was made from (for reattach).
  if (!install(Used, Scratch, E.size()) || !install(Used + E.size(), Guest, GuestLen))
    return nullptr;
  KeptEntry &K = Kept[keptSlot(B.Pa)];
  K = KeptEntry{B.Pa, Stamp, uint32_t(Used), uint32_t(Used + E.size()), uint16_t(GuestLen),
                B.NumInsns, Calls};
  uint8_t *Start = Code + Used;
  Used += Bytes;
  if (Mode == ExecMode::Translate)
    CellsUsed += 2;
  B.JitCalls = Calls;
  ++Stats.Translated;
  if (PerfMap)
    std::fprintf(PerfMap, "%llx %zx vmxsim_cpu%u_rip_%llx_pa_%llx_n%u\n",
                 (unsigned long long)(uintptr_t)Start, E.size(), unsigned(C.Id),
                 (unsigned long long)C.S.Rip, (unsigned long long)B.Pa, unsigned(B.NumInsns));
  Stats.HeldLoops += HeldRegisters;
  Stats.FusedLoops += FusedBranch;
  return reinterpret_cast<Entry>(Start);
}

JitRun Translator::runSlow(Block &B, const Block *Prev) {
  if (!Code)
    return {};
  if (B.JitStamp != Stamp) {
    // Not translated in this cache generation: at its first entry since it was decoded,
    // take the translation made for the same bytes if there is one; else count the
    // entry, translate when hot.
    if (B.JitRuns != 0 || !reattach(B)) {
      if (++B.JitRuns < Threshold) {
        PendingCell = nullptr;
        return {};
      }
      B.JitRuns = 0;
      B.JitStamp = Stamp;
      B.JitCode = reinterpret_cast<const void *>(translate(B));
    }
  }
  if (!B.JitCode) {
    PendingCell = nullptr;
    return {};
  }
  if (PendingCell)
    link(B, Prev);
  Entry Fn = reinterpret_cast<Entry>(const_cast<void *>(B.JitCode));
  if (Mode == ExecMode::Lockstep)
    return lockstep(B, Fn);
  return enter(B, Fn);
}

// Lockstep (docs/TRANSLATOR.md, "Lockstep"): the interpreter runs the block first, as the
// run loop's fast loop would, with its stores logged (StoreLog, cpu/mmu.h); then the
// state is put back and the stores undone, the translation runs, and both results are
// compared: the registers, RIP, RFLAGS, CR2, the clock and the count, where the block
// stopped and with what status (a fault's exception too), and the bytes of every store
// the interpreter made. A pass that reached something it could not undo stopped before
// it (StoreLogRefusal); the block then runs translated only, counted by reason.
JitRun Translator::lockstep(Block &B, Entry Fn) {
  auto alone = [&](LockstepSkip Why) {
    ++Stats.LockstepUncompared[size_t(Why)];
    return enter(B, Fn);
  };
  if (B.JitCalls & jitcalls::Vmx)
    return alone(LockstepSkip::VmxInsn);
  if (C.Debug.DataArmed)
    return alone(LockstepSkip::DataBreakpoint);
  // The state the supported set can change (docs/TRANSLATOR.md, "Supported set": the
  // handlers run by calls only compute registers and RFLAGS, store, or raise an
  // exception, which is recorded in Pending; CR2 is compared as a guard).
  struct Regs {
    uint64_t Gpr[16], Rip, Rflags, Cr2;
    void take(const CpuState &S) {
      std::memcpy(Gpr, S.Gpr, sizeof Gpr);
      Rip = S.Rip, Rflags = S.Rflags, Cr2 = S.Cr2;
    }
    void give(CpuState &S) const {
      std::memcpy(S.Gpr, Gpr, sizeof Gpr);
      S.Rip = Rip, S.Rflags = Rflags, S.Cr2 = Cr2;
    }
  };
  Regs Before, Interp;
  Before.take(C.S);
  const PendingEvent Pending0 = C.Pending;
  const uint64_t Cycles0 = C.Cycles, Retired0 = C.Retired, Stop0 = C.BlockStop,
                 Window0 = C.WindowDue;
  // Every block, so that no store escapes the log (opening and closing it set two tags).
  C.Mmu.beginStoreLog(*Log);
  // The interpreter, as Cpu::runBlocks' fast loop runs a whole block.
  unsigned DoneI = 0;
  Status StI = Status::Ok;
  while (DoneI < B.NumInsns) {
    const DecodedInsn &I = B.Insns[DoneI];
    Log->Insn = uint8_t(DoneI); // names the instruction of each store
    StI = I.Fn(C, I);
    if (StI != Status::Ok)
      break;
    C.Cycles += I.Cost;
    ++C.Retired;
    ++DoneI;
    if (C.Cycles >= C.BlockStop)
      break;
  }
  Interp.take(C.S);
  const PendingEvent PendingI = C.Pending;
  const uint64_t CyclesI = C.Cycles, RetiredI = C.Retired;
  LockstepSkip Skip = LockstepSkip::Count; // none
  if (StI != Status::Ok && StI != Status::Fault)
    Skip = LockstepSkip::Other;
  switch (Log->Refused) {
  case StoreLogRefusal::None: break;
  case StoreLogRefusal::Device: Skip = LockstepSkip::Device; break;
  case StoreLogRefusal::CodeOrWatched: Skip = LockstepSkip::CodeOrWatched; break;
  case StoreLogRefusal::VmExit: Skip = LockstepSkip::VmExit; break;
  case StoreLogRefusal::Full:
  case StoreLogRefusal::Count: Skip = LockstepSkip::Full; break;
  }
  // The interpreter's bytes kept for the comparison, then its stores undone, the last
  // first (stores may overlap).
  const unsigned Stores = Log->NumStores;
  for (unsigned K = 0; K < Stores; ++K)
    StoreLog::copy(Log->Stores[K].New, Log->Stores[K].Host, Log->Stores[K].Size);
  for (unsigned K = Stores; K-- > 0;)
    StoreLog::copy(Log->Stores[K].Host, Log->Stores[K].Old, Log->Stores[K].Size);
  C.Mmu.endStoreLog();
  Before.give(C.S);
  C.Pending = Pending0;
  C.Cycles = Cycles0;
  C.Retired = Retired0;
  C.BlockStop = Stop0;
  C.WindowDue = Window0;
  JitRun R = enter(B, Fn);
  if (Skip != LockstepSkip::Count) {
    ++Stats.LockstepUncompared[size_t(Skip)];
    return R;
  }
  // A translation that hands the rest of its block to the interpreter (a bail-out: an
  // inline form's condition failed, RFLAGS.AC set, ...) is continued here as the run
  // loop would continue it, so that the whole block is compared.
  if (R.St == Status::Ok && R.Done < B.NumInsns && C.Cycles < C.WindowDue) {
    unsigned K = R.Done;
    C.BlockStop = std::min<uint64_t>(C.WindowDue, C.Cycles + B.Insns[K].CostToEnd);
    do {
      const DecodedInsn &I = B.Insns[K];
      if ((R.St = I.Fn(C, I)) != Status::Ok)
        break;
      C.Cycles += I.Cost;
      ++C.Retired;
      ++K;
    } while (K < B.NumInsns && C.Cycles < C.BlockStop);
    R.Done = uint8_t(K);
    ++Stats.LockstepContinued;
  }
  ++Stats.LockstepCompared;
  // The first difference: a register, RIP, RFLAGS, CR2, the clock, the count, where and
  // how the block stopped, the exception, memory.
  static const char *const Names[16] = {"RAX", "RCX", "RDX", "RBX", "RSP", "RBP",
                                        "RSI", "RDI", "R8",  "R9",  "R10", "R11",
                                        "R12", "R13", "R14", "R15"};
  const char *What = nullptr;
  uint64_t A = 0, T = 0;
  int Gpr = -1;
  for (unsigned K = 0; K < 16 && !What; ++K)
    if (Interp.Gpr[K] != C.S.Gpr[K]) {
      What = Names[K], A = Interp.Gpr[K], T = C.S.Gpr[K], Gpr = int(K);
    }
  if (!What && Interp.Rflags != C.S.Rflags)
    What = "RFLAGS", A = Interp.Rflags, T = C.S.Rflags;
  if (!What && Interp.Rip != C.S.Rip)
    What = "RIP", A = Interp.Rip, T = C.S.Rip;
  if (!What && Interp.Cr2 != C.S.Cr2)
    What = "CR2", A = Interp.Cr2, T = C.S.Cr2;
  if (!What && CyclesI != C.Cycles)
    What = "cycles", A = CyclesI, T = C.Cycles;
  if (!What && RetiredI != C.Retired)
    What = "retired", A = RetiredI, T = C.Retired;
  if (!What && R.Done != DoneI)
    What = "instructions completed", A = DoneI, T = R.Done;
  if (!What && R.St != StI)
    What = "status", A = uint64_t(StI), T = uint64_t(R.St);
  if (!What && StI == Status::Fault) {
    ++Stats.LockstepComparedFaults;
    const PendingEvent &P = C.Pending;
    if (PendingI.Vector != P.Vector)
      What = "exception vector", A = PendingI.Vector, T = P.Vector;
    else if (PendingI.HasErrorCode != P.HasErrorCode || PendingI.ErrorCode != P.ErrorCode)
      What = "error code", A = PendingI.HasErrorCode ? PendingI.ErrorCode : ~uint64_t(0),
      T = P.HasErrorCode ? P.ErrorCode : ~uint64_t(0);
    else if (PendingI.FaultAddr != P.FaultAddr)
      What = "faulting address", A = PendingI.FaultAddr, T = P.FaultAddr;
  }
  // Memory: the bytes of each store of the interpreter, as its pass left them.
  uint64_t Addr = 0;
  unsigned MemInsn = 0;
  if (Stores)
    ++Stats.LockstepComparedStores;
  for (unsigned K = 0; K < Stores && !What; ++K) {
    const StoreLog::Store &St = Log->Stores[K];
    uint8_t Now[StoreLog::kMaxStoreBytes];
    StoreLog::copy(Now, St.Host, St.Size);
    if (std::memcmp(St.New, Now, St.Size) == 0)
      continue;
    unsigned Off = 0; // the first differing 8 bytes (or fewer) of the store
    while (Off + 8 < St.Size && std::memcmp(St.New + Off, St.Host + Off, 8) == 0)
      Off += 8;
    const unsigned N = std::min(8u, St.Size - Off);
    What = "memory";
    Addr = St.Pa + Off;
    std::memcpy(&A, St.New + Off, N);
    std::memcpy(&T, St.Host + Off, N);
    MemInsn = St.Insn;
  }
  if (!What)
    return R;
  // The instruction named is the last of the block that writes what differs (for the
  // clock, the count and RIP: the last instruction; for memory, the one that stored).
  const bool Memory = std::strcmp(What, "memory") == 0;
  unsigned At = Memory ? MemInsn : B.NumInsns - 1;
  for (unsigned K = B.NumInsns; !Memory && K-- > 0;) {
    const DecodedInsn &I = B.Insns[K];
    const JitForm F = jitFormOf(I);
    const bool WritesFlags = F.Op != JitOp::Mov && F.Op != JitOp::Lea &&
                             F.Op != JitOp::MovZx && F.Op != JitOp::MovSx &&
                             F.Op != JitOp::Not && F.Op != JitOp::Nop &&
                             F.Op != JitOp::JmpRel && F.Op != JitOp::JccRel &&
                             F.Op != JitOp::Setcc && F.Op != JitOp::Cmov;
    const uint8_t Dst = I.Reg[0] >= kRegAH && I.Reg[0] != kRegNone && F.Size == 1
                            ? uint8_t(I.Reg[0] - kRegAH)
                            : I.Reg[0];
    if ((Gpr >= 0 && Dst == Gpr) || (Gpr < 0 && std::strcmp(What, "RFLAGS") == 0 && WritesFlags)) {
      At = K;
      break;
    }
  }
  uint64_t InsnRip = Before.Rip;
  for (unsigned K = 0; K < At; ++K)
    InsnRip += B.Insns[K].Len;
  char Where[48] = "";
  if (Memory)
    std::snprintf(Where, sizeof Where, " at physical %#" PRIx64, Addr);
  std::snprintf(Message, sizeof Message,
                "lockstep mismatch in the block at RIP=%#" PRIx64 ": %s at %#" PRIx64
                " (instruction %u of %u): %s%s interpreter=%#" PRIx64 " translated=%#" PRIx64,
                Before.Rip, mnemonicName(B.Insns[At].Mnemonic), InsnRip, At + 1,
                unsigned(B.NumInsns), What, Where, A, T);
  C.StopWhat = Message;
  C.StopRip = Before.Rip;
  R.Mismatch = true;
  return R;
}

void Translator::describe(char *Out, size_t Size) const {
  int Len = std::snprintf(
      Out, Size,
      "jit: %" PRIu64 " blocks translated, %" PRIu64 " runs, %" PRIu64
      " instructions translated, %" PRIu64 " bail-outs, %" PRIu64 " flushes, %" PRIu64
      " kept across re-decoding, %" PRIu64 " exits linked, %" PRIu64
      " chained jumps (%" PRIu64 " through the table of targets), %" PRIu64 " loops with registers held (%" PRIu64
      " on the host's flags); refused: %" PRIu64
      " unsupported instruction, %" PRIu64 " unsupported form, %" PRIu64 " too large",
      Stats.Translated, Stats.Runs, Stats.InsnsTranslated, Stats.Bailouts, Stats.Flushes,
      Stats.Kept, Stats.Links, Stats.Chained, Stats.TargetChained, Stats.HeldLoops, Stats.FusedLoops,
      Stats.Refused[0], Stats.Refused[1], Stats.Refused[2]);
  // The most frequent unsupported instructions.
  uint32_t Shown[5] = {};
  unsigned Which[5] = {};
  for (unsigned M = 0; M < JitStats::kMnemonics; ++M)
    for (unsigned K = 0; K < 5; ++K)
      if (Stats.UnsupportedMnemonic[M] > Shown[K]) {
        for (unsigned J = 4; J > K; --J)
          Shown[J] = Shown[J - 1], Which[J] = Which[J - 1];
        Shown[K] = Stats.UnsupportedMnemonic[M];
        Which[K] = M;
        break;
      }
  for (unsigned K = 0; K < 5 && Shown[K] && Len > 0 && size_t(Len) < Size; ++K)
    Len += std::snprintf(Out + Len, Size - size_t(Len), "%s%s %u", K ? ", " : " (by: ",
                         mnemonicName(uint16_t(Which[K])), Shown[K]);
  if (Shown[0] && Len > 0 && size_t(Len) < Size)
    Len += std::snprintf(Out + Len, Size - size_t(Len), ")");
  if (Mode == ExecMode::Lockstep && Len > 0 && size_t(Len) < Size) {
    static const char *const Why[size_t(LockstepSkip::Count)] = {
        "VMREAD/VMWRITE", "data breakpoint", "device memory", "code or watched memory",
        "VM exit", "log full", "other stop"};
    uint64_t Alone = 0;
    for (uint64_t N : Stats.LockstepUncompared)
      Alone += N;
    Len += std::snprintf(Out + Len, Size - size_t(Len),
                         "; lockstep: %" PRIu64 " compared (%" PRIu64 " with stores, %" PRIu64
                         " faulting, %" PRIu64 " finished by the interpreter), %" PRIu64
                         " uncompared",
                         Stats.LockstepCompared, Stats.LockstepComparedStores,
                         Stats.LockstepComparedFaults, Stats.LockstepContinued, Alone);
    const char *Sep = " (";
    for (size_t K = 0; K < size_t(LockstepSkip::Count); ++K)
      if (Stats.LockstepUncompared[K] && Len > 0 && size_t(Len) < Size) {
        Len += std::snprintf(Out + Len, Size - size_t(Len), "%s%s: %" PRIu64, Sep, Why[K],
                             Stats.LockstepUncompared[K]);
        Sep = ", ";
      }
    if (Alone && Len > 0 && size_t(Len) < Size)
      Len += std::snprintf(Out + Len, Size - size_t(Len), ")");
  }
}

} // namespace vmxsim
