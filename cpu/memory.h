// Guest memory access from instructions: segmentation, then the MMU's TLB (cpu/mmu.h),
// then the walkers on a miss. The TLB hit is the hot path: one compare and a memcpy.
#pragma once
#include "cpu/cpu.h"
#include "cpu/decode_info.h"
#include "cpu/decoded_insn.h"
#include "cpu/watched_store.h"

#include <cstring>
#include <type_traits>

namespace vmxsim {

/// Effective address of the instruction's memory operand (SDM Vol. 1, Specifying an
/// Offset), truncated to the address size. RIP-relative uses the next instruction's RIP.
inline uint64_t effectiveAddress(const Cpu &C, const DecodedInsn &I) {
  uint64_t A = uint64_t(I.Disp);
  if (I.Base == kRegRip)
    A += C.S.Rip + I.Len;
  else if (I.Base != kRegNone)
    A += C.S.Gpr[I.Base];
  if (I.Index != kRegNone)
    A += C.S.Gpr[I.Index] << I.ScaleLog2;
  if (I.AddrSize == 8)
    return A;
  return I.AddrSize == 4 ? uint32_t(A) : uint16_t(A);
}

/// Segmentation: Seg:Offset to a linear address for an access of SizeBytes, with the
/// limit, type and canonical checks of the current mode (SDM Vol. 3A, Segment-Limit
/// Checking; Limit Checking in 64-Bit Mode). Raises #GP(0) or #SS(0).
Status segmentToLinearSlow(Cpu &C, SegReg Seg, uint64_t Offset, unsigned SizeBytes,
                           Access Kind, uint64_t &La);

inline bool isCanonical(const Cpu &C, uint64_t La) {
  unsigned Bits = (C.S.Cr4 & cr4::LA57) ? 57 : 48;
  return uint64_t(int64_t(La << (64 - Bits)) >> (64 - Bits)) == La;
}

inline Status segmentToLinear(Cpu &C, SegReg Seg, uint64_t Offset, unsigned SizeBytes,
                              Access Kind, uint64_t &La) {
  if (C.DecodeMode == 3 /* CodeMode::Long64 */) [[likely]] {
    La = Offset;
    if (Seg >= SegReg::FS)
      La += C.S.seg(Seg).Base;
    if (isCanonical(C, La)) [[likely]]
      return Status::Ok;
  }
  return segmentToLinearSlow(C, Seg, Offset, SizeBytes, Kind, La);
}

/// TLB-miss and page-crossing paths. They translate, fill the TLB where allowed, and
/// copy byte by byte through PhysMem (so MMIO and unassigned addresses work).
/// Supervisor is true for implicit supervisor accesses (descriptor tables, TSS, IDT).
Status readLinearSlow(Cpu &C, uint64_t La, unsigned SizeBytes, void *Out, bool Supervisor);
Status writeLinearSlow(Cpu &C, uint64_t La, unsigned SizeBytes, const void *In,
                       bool Supervisor);
/// writeLinear's miss: Mmu::writeWatchedPage for a store into a watched page without
/// decoded code (cpu/watched_store.cpp), else writeLinearSlow. The same result either way.
Status writeLinearMiss(Cpu &C, uint64_t La, unsigned SizeBytes, const void *In,
                       bool Supervisor);
/// Checks that [La, La+SizeBytes) is writable (translating and setting A/D bits) without
/// writing: used to make multi-part stores all-or-nothing.
Status probeWrite(Cpu &C, uint64_t La, unsigned SizeBytes, bool Supervisor = false);

/// Whether TLB entry E, read from the slot of La (Mmu::readSlot/writeSlot), maps all of
/// [La, La + Size) for an access with these tag bits: one compare of E's tag with the
/// tag of the access's last byte. Slot K only ever holds entries of pages whose slot is
/// K or tlbVictimSlot(K) (Mmu::placeEntry, Mmu::translate), never K + 1, the slot of the
/// page after La's; so a match says both that E maps La's page and that the access ends
/// in it (no page-crossing test).
constexpr bool victimSlotNeverNext() {
  for (unsigned K = 0; K < kTlbEntries; ++K)
    if (tlbVictimSlot(K) == ((K + 1) & (kTlbEntries - 1)) || K == ((K + 1) & (kTlbEntries - 1)))
      return false;
  return true;
}
static_assert(victimSlotNeverNext(), "tlbMaps needs the next page's slot to differ");
template <unsigned Size>
inline bool tlbMaps(const Cpu &C, const TlbEntry &E, uint64_t La, bool Supervisor) {
  static_assert(Size >= 1 && Size <= kPageSize);
  return E.Tag == C.Mmu.tag(La + (Size - 1), Supervisor);
}
/// tlbMaps for a store through TlbWrite entry E: the same compare with Mmu::writeTag,
/// which no entry matches while lockstep logs the interpreter's stores (StoreLog).
template <unsigned Size>
inline bool tlbMapsWrite(const Cpu &C, const TlbEntry &E, uint64_t La, bool Supervisor) {
  static_assert(Size >= 1 && Size <= kPageSize);
  return E.Tag == C.Mmu.writeTag(La + (Size - 1), Supervisor);
}

template <typename T>
inline Status readLinear(Cpu &C, uint64_t La, T &Out, bool Supervisor = false) {
  static_assert(std::is_trivially_copyable_v<T>);
  const TlbEntry &E = C.Mmu.readSlot(Gla(La));
  if (tlbMaps<sizeof(T)>(C, E, La, Supervisor))
      [[likely]] {
    std::memcpy(&Out, reinterpret_cast<const void *>(La + E.Addend), sizeof(T));
    return Status::Ok;
  }
  return readLinearSlow(C, La, sizeof(T), &Out, Supervisor);
}

template <typename T>
inline Status writeLinear(Cpu &C, uint64_t La, T V, bool Supervisor = false) {
  static_assert(std::is_trivially_copyable_v<T>);
  const TlbEntry &E = C.Mmu.writeSlot(Gla(La));
  if (tlbMapsWrite<sizeof(T)>(C, E, La, Supervisor))
      [[likely]] {
    std::memcpy(reinterpret_cast<void *>(La + E.Addend), &V, sizeof(T));
    return Status::Ok;
  }
  return writeLinearMiss(C, La, sizeof(T), &V, Supervisor);
}

/// Alignment checking (SDM Vol. 3A, "Interrupt 17—Alignment Check Exception (#AC)" and
/// "Alignment Checking"): with CR0.AM = 1 and RFLAGS.AC = 1, an explicit data or stack
/// reference at CPL 3 to a word, doubleword or quadword whose address is not a multiple
/// of its size raises #AC(0), before the access is translated. Implicit supervisor
/// accesses (descriptor tables, TSS, event delivery) are never checked. Not modelled:
/// the checks of 128-bit and larger operands, and of REP string iterations on their
/// page-local fast path. The fast path pays one test of RFLAGS.AC.
Status alignmentCheckSlow(Cpu &C, uint64_t La, unsigned SizeBytes);
template <typename T> inline Status alignmentCheck(Cpu &C, uint64_t La) {
  if constexpr (sizeof(T) >= 2 && sizeof(T) <= 8) {
    if (C.S.Rflags & rflags::AC) [[unlikely]]
      return alignmentCheckSlow(C, La, sizeof(T));
  }
  return Status::Ok;
}

// The explicit accesses of instructions (readMem, writeMem, mapRmw) try a fast path
// first, in 64-bit mode with RFLAGS.AC clear: the linear address is the offset plus the
// FS/GS base, and a TLB entry that maps the whole access gives the host address. It
// needs no canonical check: no TLB entry maps a non-canonical page (cpu/mmu.h) and an
// access inside one page shares its bits 63:12, so a hit implies that the check of
// segmentToLinear passes. With RFLAGS.AC set, #AC must be checked after segmentation and
// before the TLB; every other case (other modes, a miss, a page-crossing access) takes
// the full path, whose checks come in the architectural order.
inline bool fastAccessMode(const Cpu &C) {
  return C.DecodeMode == 3 /* CodeMode::Long64 */ && !(C.S.Rflags & rflags::AC);
}
inline uint64_t fastLinear(const Cpu &C, SegReg Seg, uint64_t Off) {
  return Seg >= SegReg::FS ? Off + C.S.seg(Seg).Base : Off;
}

template <typename T>
[[gnu::noinline]] Status readMemFull(Cpu &C, SegReg Seg, uint64_t Off, T &Out) {
  uint64_t La;
  VMX_TRY(segmentToLinear(C, Seg, Off, sizeof(T), Access::Read, La));
  VMX_TRY(alignmentCheck<T>(C, La));
  return readLinear(C, La, Out);
}
template <typename T>
[[gnu::noinline]] Status writeMemSegmented(Cpu &C, SegReg Seg, uint64_t Off, T V) {
  uint64_t La;
  VMX_TRY(segmentToLinear(C, Seg, Off, sizeof(T), Access::Write, La));
  VMX_TRY(alignmentCheck<T>(C, La));
  return writeLinear(C, La, V);
}
template <typename T>
[[gnu::noinline]] Status writeMemWatched(Cpu &C, SegReg Seg, uint64_t Off, T V) {
  // A store into a watched page (the ground truth's trace slots) first, as writeLinear's
  // miss would take it (writeLinearMiss): in the fast access mode segmentation is the
  // offset plus the FS/GS base with only the canonical check, which a TLB entry's
  // match implies (above), and the alignment check is off. The rest is a call of its
  // own, so that this path keeps a small frame.
  if (fastAccessMode(C) &&
      C.Mmu.writeWatchedPage(Gla(fastLinear(C, Seg, Off)), sizeof(T), &V, false))
    return Status::Ok;
  return writeMemSegmented(C, Seg, Off, V);
}
template <typename T>
[[gnu::noinline]] Status writeMemFull(Cpu &C, SegReg Seg, uint64_t Off, T V) {
  // An 8-byte store may be a traced hypervisor's slot store, several per VM exit: the
  // processor records it in place without a call (Mmu::writeSlotInPlace), in the same
  // fast access mode; anything else is writeMemWatched's.
  if constexpr (sizeof(T) == 8) {
    uint64_t Bits;
    std::memcpy(&Bits, &V, 8);
    if (fastAccessMode(C) && C.Mmu.writeSlotInPlace(Gla(fastLinear(C, Seg, Off)), Bits))
      return Status::Ok;
  }
  return writeMemWatched(C, Seg, Off, V);
}

template <typename T> inline Status readMem(Cpu &C, SegReg Seg, uint64_t Off, T &Out) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (fastAccessMode(C)) [[likely]] {
    const uint64_t La = fastLinear(C, Seg, Off);
    const TlbEntry &E = C.Mmu.readSlot(Gla(La));
    if (tlbMaps<sizeof(T)>(C, E, La, false)) [[likely]] {
      std::memcpy(&Out, reinterpret_cast<const void *>(La + E.Addend), sizeof(T));
      return Status::Ok;
    }
  }
  return readMemFull(C, Seg, Off, Out);
}

template <typename T> inline Status writeMem(Cpu &C, SegReg Seg, uint64_t Off, T V) {
  static_assert(std::is_trivially_copyable_v<T>);
  if (fastAccessMode(C)) [[likely]] {
    const uint64_t La = fastLinear(C, Seg, Off);
    const TlbEntry &E = C.Mmu.writeSlot(Gla(La));
    if (tlbMapsWrite<sizeof(T)>(C, E, La, false)) [[likely]] {
      std::memcpy(reinterpret_cast<void *>(La + E.Addend), &V, sizeof(T));
      return Status::Ok;
    }
  }
  return writeMemFull(C, Seg, Off, V);
}

// Flat 64-bit operands. In 64-bit mode with a 64-bit address size, an operand with a
// general register as base (not RIP) in ES, CS, SS or DS (whose bases are 0 there: SDM
// Vol. 3A, "Segmentation in IA-32e Mode") has as linear address the plain sum of base,
// scaled index and displacement. The decoder binds such operands to handler
// instantiations that compute it without the tests of effectiveAddress and readMem (RIP,
// no base, address size, mode, FS/GS). Blocks are decoded and looked up in one mode and
// every mode change ends the block, so those handlers only run in 64-bit mode. Their
// accesses are readMem's, writeMem's and mapRmw's: the same TLB-hit test with RFLAGS.AC
// clear, and on anything else the same full path (readMemFull, writeMemFull, mapRmw)
// with the same offset, which there is the linear address.
inline bool flat64Operand(CodeMode Mode, const DecodedInsn &I) {
  return Mode == CodeMode::Long64 && I.AddrSize == 8 && I.Base < 16 &&
         SegReg(I.Seg) < SegReg::FS;
}
inline uint64_t flat64Address(const Cpu &C, const DecodedInsn &I) {
  uint64_t A = C.S.Gpr[I.Base] + uint64_t(I.Disp);
  if (I.Index != kRegNone)
    A += C.S.Gpr[I.Index] << I.ScaleLog2;
  return A;
}
/// The instruction's memory operand, read or written; Flat: a flat 64-bit operand.
template <bool Flat, typename T> inline Status readMemOp(Cpu &C, const DecodedInsn &I, T &Out) {
  if constexpr (Flat) {
    const uint64_t La = flat64Address(C, I);
    if (!(C.S.Rflags & rflags::AC)) [[likely]] {
      const TlbEntry &E = C.Mmu.readSlot(Gla(La));
      if (tlbMaps<sizeof(T)>(C, E, La, false)) [[likely]] {
        std::memcpy(&Out, reinterpret_cast<const void *>(La + E.Addend), sizeof(T));
        return Status::Ok;
      }
    }
    return readMemFull(C, SegReg(I.Seg), La, Out);
  } else {
    return readMem(C, SegReg(I.Seg), effectiveAddress(C, I), Out);
  }
}
template <bool Flat, typename T> inline Status writeMemOp(Cpu &C, const DecodedInsn &I, T V) {
  if constexpr (Flat) {
    const uint64_t La = flat64Address(C, I);
    if (!(C.S.Rflags & rflags::AC)) [[likely]] {
      const TlbEntry &E = C.Mmu.writeSlot(Gla(La));
      if (tlbMapsWrite<sizeof(T)>(C, E, La, false)) [[likely]] {
        std::memcpy(reinterpret_cast<void *>(La + E.Addend), &V, sizeof(T));
        return Status::Ok;
      }
    }
    return writeMemFull(C, SegReg(I.Seg), La, V);
  } else {
    return writeMem(C, SegReg(I.Seg), effectiveAddress(C, I), V);
  }
}

/// A read-modify-write operand: translated once for writing (so the access faults as a
/// write before anything is read, as a locked RMW does on hardware), then read and
/// written through the same mapping.
struct RmwRef {
  uint64_t La = 0;
  uint8_t *Host = nullptr; ///< direct pointer when the operand sits in one RAM page
};

/// mapRmw's miss path: a direct pointer into a page holding decoded code when the operand's
/// lines hold none (Mmu::writeHostBesideCode), else Host = nullptr after probeWrite.
Status mapRmwSlow(Cpu &C, RmwRef &R, unsigned SizeBytes);

template <typename T> inline Status mapRmw(Cpu &C, SegReg Seg, uint64_t Off, RmwRef &R) {
  if (fastAccessMode(C)) [[likely]] { // the fast path of readMem and writeMem
    R.La = fastLinear(C, Seg, Off);
    const TlbEntry &E = C.Mmu.writeSlot(Gla(R.La));
    if (tlbMapsWrite<sizeof(T)>(C, E, R.La, false))
        [[likely]] {
      R.Host = reinterpret_cast<uint8_t *>(R.La + E.Addend);
      return Status::Ok;
    }
  }
  VMX_TRY(segmentToLinear(C, Seg, Off, sizeof(T), Access::Write, R.La));
  VMX_TRY(alignmentCheck<T>(C, R.La));
  const TlbEntry &E = C.Mmu.writeSlot(Gla(R.La));
  if (tlbMapsWrite<sizeof(T)>(C, E, R.La, false))
      [[likely]] {
    R.Host = reinterpret_cast<uint8_t *>(R.La + E.Addend);
    return Status::Ok;
  }
  return mapRmwSlow(C, R, sizeof(T));
}
/// mapRmw of the instruction's memory operand; Flat: a flat 64-bit operand (above).
template <bool Flat, typename T>
inline Status mapRmwOp(Cpu &C, const DecodedInsn &I, RmwRef &R) {
  if constexpr (Flat) {
    R.La = flat64Address(C, I);
    if (!(C.S.Rflags & rflags::AC)) [[likely]] {
      const TlbEntry &E = C.Mmu.writeSlot(Gla(R.La));
      if (tlbMapsWrite<sizeof(T)>(C, E, R.La, false)) [[likely]] {
        R.Host = reinterpret_cast<uint8_t *>(R.La + E.Addend);
        return Status::Ok;
      }
    }
    return mapRmw<T>(C, SegReg(I.Seg), R.La, R);
  } else {
    return mapRmw<T>(C, SegReg(I.Seg), effectiveAddress(C, I), R);
  }
}
template <typename T> inline Status rmwRead(Cpu &C, const RmwRef &R, T &Out) {
  if (R.Host) [[likely]] {
    std::memcpy(&Out, R.Host, sizeof(T));
    return Status::Ok;
  }
  return readLinearSlow(C, R.La, sizeof(T), &Out, false);
}
template <typename T> inline Status rmwWrite(Cpu &C, const RmwRef &R, T V) {
  if (R.Host) [[likely]] {
    std::memcpy(R.Host, &V, sizeof(T));
    return Status::Ok;
  }
  return writeLinearSlow(C, R.La, sizeof(T), &V, false);
}

/// Instruction fetch for the decoder: copies up to Max bytes at La that are in the same
/// page as La (the decoder calls again for the next page). Got receives the count.
Status fetchCode(Cpu &C, uint64_t La, uint8_t *Buf, unsigned Max, unsigned &Got,
                 Hpa &Pa);

} // namespace vmxsim
