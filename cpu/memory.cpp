#include "cpu/memory.h"

#include "mmu/paging.h"

#include <utility>

namespace vmxsim {

Status segmentToLinearSlow(Cpu &C, SegReg Seg, uint64_t Offset, unsigned SizeBytes,
                           Access Kind, uint64_t &La) {
  const CpuState &S = C.S;
  const bool IsSs = Seg == SegReg::SS;
  auto fail = [&]() { return IsSs ? C.raise(vec::SS, 0) : C.raiseGp(0); };
  if (S.longMode() && (S.cs().Attr & Segment::L)) {
    // 64-bit mode: no limit checks; the linear address must be canonical (SDM Vol. 3A,
    // Limit Checking in 64-Bit Mode). FS/GS bases were added by the fast path.
    La = Offset + (Seg >= SegReg::FS ? S.seg(Seg).Base : 0);
    return fail();
  }
  const Segment &D = S.seg(Seg);
  if (S.Cr0 & cr0::PE && !(S.Rflags & rflags::VM)) {
    // Protected mode: a null/unusable segment faults on use; type checks (SDM Vol. 3A,
    // Type Checking).
    if (D.Attr & Segment::Unusable)
      return fail();
    unsigned Type = D.Attr & Segment::Type;
    bool Code = Type & 8;
    if (Kind == Access::Write && (Code || !(Type & 2)))
      return fail();
    if (Kind == Access::Read && Code && !(Type & 2))
      return fail();
    bool ExpandDown = !Code && (Type & 4);
    uint64_t Last = Offset + SizeBytes - 1;
    if (ExpandDown) {
      uint64_t Upper = (D.Attr & Segment::DB) ? 0xffffffffull : 0xffffull;
      if (Offset <= D.Limit || Last > Upper)
        return fail();
    } else if (Last > D.Limit) {
      return fail();
    }
  } else {
    // Real and virtual-8086 mode still check the (cached) limit.
    if (Offset + SizeBytes - 1 > D.Limit)
      return fail();
  }
  La = (D.Base + Offset) & 0xffffffffull;
  return Status::Ok;
}

Status alignmentCheckSlow(Cpu &C, uint64_t La, unsigned SizeBytes) {
  if ((C.S.Cr0 & cr0::AM) && C.S.cpl() == 3 && (La & (SizeBytes - 1)))
    return C.raise(vec::AC, 0);
  return Status::Ok;
}

namespace {

// Each TLB array is direct-mapped (the fast paths look at one slot) with a victim slot,
// tlbVictimSlot(Slot), that only the miss paths consult (here, and the block lookup of
// Cpu::runBlocks): the entry a fill displaces
// moves there and comes back on its next miss without a page walk. Two pages that share
// a slot then stop evicting each other — typically a guest's code page and its
// hypervisor's, the same page in two VPID contexts, at every VM entry and exit. Victim
// entries are ordinary entries: flushes, generations and dropWriteMappings cover them.
void placeEntry(TlbEntry *Array, unsigned Slot, const TlbEntry &E) {
  TlbEntry &Primary = Array[Slot];
  if (Primary.Tag != kTlbEmpty && Primary.Tag != E.Tag)
    Array[tlbVictimSlot(Slot)] = Primary;
  Primary = E;
}

// Translates one page's worth of an access and installs the TLB entry when the page is
// plain RAM (never for MMIO). A write mapping of a page holding decoded code goes to
// TlbWriteCode, never to TlbWrite, whose hits store without telling PhysMem.
Status translateAndFill(Cpu &C, uint64_t La, Access Kind, bool Supervisor, uint64_t &Pa) {
  const unsigned Slot = (La >> 12) & (kTlbEntries - 1);
  TlbEntry *Array = Kind == Access::Read    ? C.TlbRead
                    : Kind == Access::Write ? C.TlbWrite
                                            : C.TlbFetch;
  if (TlbEntry &V = Array[tlbVictimSlot(Slot)]; V.Tag == tlbTag(C, La, Supervisor)) {
    std::swap(Array[Slot], V);
    Pa = (Array[Slot].Pfn << 12) | (La & 0xfff);
    return Status::Ok;
  }
  bool User = !Supervisor && C.UserTagBit;
  Translation T;
  VMX_TRY(translateLinear(C, La, Kind, User, T));
  Pa = T.Pa;
  uint8_t *Host = C.Mem.ramPointer(Gpa(T.Pa & kPageMask));
  if (!Host)
    return Status::Ok;
  uint64_t Pfn = T.Pa >> 12;
  // With SMAP on, supervisor entries for user pages are not cached: RFLAGS.AC can change
  // without a TLB flush.
  if (!User && T.User && (C.S.Cr4 & cr4::SMAP))
    return Status::Ok;
  TlbEntry E{tlbTag(C, La, Supervisor),
             reinterpret_cast<uintptr_t>(Host) - (La & kPageMask), Pfn};
  switch (Kind) {
  case Access::Read:
    placeEntry(C.TlbRead, Slot, E);
    break;
  case Access::Write:
    if (!C.Mem.pageHoldsCode(Pfn))
      placeEntry(C.TlbWrite, Slot, E);
    else
      C.TlbWriteCode[Slot] = E;
    // A page writable now is readable too; saves the read walk of a RMW.
    placeEntry(C.TlbRead, Slot, E);
    break;
  case Access::Fetch:
    placeEntry(C.TlbFetch, Slot, E);
    break;
  }
  return Status::Ok;
}

} // namespace

Status readLinearSlow(Cpu &C, uint64_t La, unsigned SizeBytes, void *Out, bool Supervisor) {
  uint8_t *Dst = static_cast<uint8_t *>(Out);
  // Translate every page the access touches before reading any of it.
  uint64_t Pa0, Pa1 = 0;
  unsigned First = unsigned(std::min<uint64_t>(SizeBytes, kPageSize - (La & 0xfff)));
  VMX_TRY(translateAndFill(C, La, Access::Read, Supervisor, Pa0));
  if (First < SizeBytes)
    VMX_TRY(translateAndFill(C, La + First, Access::Read, Supervisor, Pa1));
  auto copy = [&](uint64_t Pa, uint8_t *D, unsigned N) {
    if (uint8_t *H = C.Mem.ramPointer(Gpa(Pa)); H && (Pa & 0xfff) + N <= kPageSize) {
      std::memcpy(D, H, N);
      return;
    }
    // A device access: its side effects (an interrupt raised, a stop requested) must be
    // seen at the next instruction boundary.
    C.breakBlock();
    if (N == 1 || N == 2 || N == 4 || N == 8) {
      uint64_t V = C.Mem.read(Gpa(Pa), N);
      std::memcpy(D, &V, N);
      return;
    }
    for (unsigned I = 0; I < N; ++I)
      D[I] = uint8_t(C.Mem.read(Gpa(Pa + I), 1));
  };
  copy(Pa0, Dst, First);
  if (First < SizeBytes)
    copy(Pa1, Dst + First, SizeBytes - First);
  return Status::Ok;
}

namespace {

// A store that TlbWrite cannot take because its page holds decoded code: through the
// page's TlbWriteCode entry when there is one and the store stays in the page, telling
// PhysMem which bytes it wrote. A store to data that shares the page with code
// invalidates nothing; one into code lines invalidates their blocks, and the CPU leaves
// its current block so that the next instruction is fetched anew (SDM Vol. 3A,
// Self-Modifying Code). False when the entry is missing, and when the page has lost all
// its code since: the caller's fill then gives it a TlbWrite mapping again.
bool writeCodePage(Cpu &C, uint64_t La, unsigned SizeBytes, const void *In,
                   bool Supervisor) {
  TlbEntry &E = C.TlbWriteCode[(La >> 12) & (kTlbEntries - 1)];
  if (E.Tag != tlbTag(C, La, Supervisor) || (La & 0xfff) + SizeBytes > kPageSize)
    return false;
  if (!C.Mem.pageHoldsCode(E.Pfn)) [[unlikely]] {
    E.Tag = kTlbEmpty;
    return false;
  }
  std::memcpy(reinterpret_cast<void *>(La + E.Addend), In, SizeBytes);
  if (C.Mem.noteWrite(Gpa((E.Pfn << 12) | (La & 0xfff)), SizeBytes)) [[unlikely]]
    C.breakBlock();
  return true;
}

} // namespace

Status writeLinearSlow(Cpu &C, uint64_t La, unsigned SizeBytes, const void *In,
                       bool Supervisor) {
  if (writeCodePage(C, La, SizeBytes, In, Supervisor))
    return Status::Ok;
  const uint8_t *Src = static_cast<const uint8_t *>(In);
  uint64_t Pa0, Pa1 = 0;
  unsigned First = unsigned(std::min<uint64_t>(SizeBytes, kPageSize - (La & 0xfff)));
  VMX_TRY(translateAndFill(C, La, Access::Write, Supervisor, Pa0));
  if (First < SizeBytes)
    VMX_TRY(translateAndFill(C, La + First, Access::Write, Supervisor, Pa1));
  uint64_t Before = C.Mem.codeWriteCount();
  auto copy = [&](uint64_t Pa, const uint8_t *S, unsigned N) {
    if (uint8_t *H = C.Mem.ramPointer(Gpa(Pa)); H && (Pa & 0xfff) + N <= kPageSize) {
      std::memcpy(H, S, N);
      C.Mem.noteWrite(Gpa(Pa), N);
      return;
    }
    C.breakBlock(); // device access, as in readLinearSlow
    if (N == 1 || N == 2 || N == 4 || N == 8) {
      uint64_t V = 0;
      std::memcpy(&V, S, N);
      C.Mem.write(Gpa(Pa), N, V);
      return;
    }
    for (unsigned I = 0; I < N; ++I)
      C.Mem.write(Gpa(Pa + I), 1, S[I]);
  };
  copy(Pa0, Src, First);
  if (First < SizeBytes)
    copy(Pa1, Src + First, SizeBytes - First);
  // Self-modifying code: leave the current block so the next fetch sees the new bytes.
  if (C.Mem.codeWriteCount() != Before)
    C.breakBlock();
  return Status::Ok;
}

Status mapRmwSlow(Cpu &C, RmwRef &R, unsigned SizeBytes) {
  // An operand in a page holding decoded code, in lines without code: a direct pointer,
  // as through TlbWrite. Nothing decodes between the map and the write of one
  // instruction, so the lines stay free of code until the write.
  const TlbEntry &E = C.TlbWriteCode[(R.La >> 12) & (kTlbEntries - 1)];
  if (E.Tag == tlbTag(C, R.La, false) && (R.La & 0xfff) + SizeBytes <= kPageSize &&
      !(C.Mem.codeLines(E.Pfn) & PhysMem::lineMask(unsigned(R.La & 0xfff), SizeBytes))) {
    R.Host = reinterpret_cast<uint8_t *>(R.La + E.Addend);
    return Status::Ok;
  }
  R.Host = nullptr;
  return probeWrite(C, R.La, SizeBytes);
}

Status probeWrite(Cpu &C, uint64_t La, unsigned SizeBytes, bool Supervisor) {
  uint64_t Pa;
  unsigned First = unsigned(std::min<uint64_t>(SizeBytes, kPageSize - (La & 0xfff)));
  VMX_TRY(translateAndFill(C, La, Access::Write, Supervisor, Pa));
  if (First < SizeBytes)
    VMX_TRY(translateAndFill(C, La + First, Access::Write, Supervisor, Pa));
  return Status::Ok;
}

Status fetchCode(Cpu &C, uint64_t La, uint8_t *Buf, unsigned Max, unsigned &Got,
                 uint64_t &Pa) {
  unsigned N = unsigned(std::min<uint64_t>(Max, kPageSize - (La & 0xfff)));
  const TlbEntry &E = C.TlbFetch[(La >> 12) & (kTlbEntries - 1)];
  if (E.Tag == tlbTag(C, La, false)) {
    Pa = (E.Pfn << 12) | (La & 0xfff);
    std::memcpy(Buf, reinterpret_cast<const void *>(La + E.Addend), N);
    Got = N;
    return Status::Ok;
  }
  VMX_TRY(translateAndFill(C, La, Access::Fetch, false, Pa));
  if (uint8_t *H = C.Mem.ramPointer(Gpa(Pa)))
    std::memcpy(Buf, H, N);
  else
    for (unsigned I = 0; I < N; ++I)
      Buf[I] = uint8_t(C.Mem.read(Gpa(Pa + I), 1));
  Got = N;
  return Status::Ok;
}

} // namespace vmxsim
