#include "cpu/memory.h"

#include "cpu/vmx/apic_virtualization.h"

#include <algorithm>

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
// Lockstep's interpreter pass (StoreLog, cpu/mmu.h): the accesses of plain RAM only, with
// the same translations in the same order (so the same faults) as the paths below; an
// access the pass could not undo stops it first.
Status loggedRam(Cpu &C, Hpa Pa, unsigned N, bool Write, uint8_t *&Host) {
  Host = C.Mem.ramPointer(Pa);
  if (!Host || Pa.pageOffset() + N > kPageSize || (C.NonRoot && apicv::onApicAccessPage(C, Pa)))
    return C.Mmu.refuseLogged(StoreLogRefusal::Device);
  const uint64_t A = Pa.value();
  if (C.Mem.rangeReadWatched(A, N) ||
      (Write && (C.Mem.rangeWatched(A, N) ||
                 (C.Mem.codeLines(Pa.pageNumber()) &
                  PhysMem::lineMask(unsigned(Pa.pageOffset()), N)))))
    return C.Mmu.refuseLogged(StoreLogRefusal::CodeOrWatched);
  return Status::Ok;
}

// In: the bytes of a store; else Out receives those of a read.
Status accessLinearLogged(Cpu &C, uint64_t La, unsigned SizeBytes, bool Supervisor,
                          uint8_t *Out, const uint8_t *In) {
  const bool Write = In != nullptr;
  const Access Kind = Write ? Access::Write : Access::Read;
  Hpa Pa0, Pa1;
  unsigned First = unsigned(std::min<uint64_t>(SizeBytes, kPageSize - (La & 0xfff)));
  VMX_TRY(C.Mmu.translate(Gla(La), Kind, Supervisor, Pa0));
  if (First < SizeBytes)
    VMX_TRY(C.Mmu.translate(Gla(La + First), Kind, Supervisor, Pa1));
  uint8_t *H0 = nullptr, *H1 = nullptr;
  VMX_TRY(loggedRam(C, Pa0, First, Write, H0));
  if (First < SizeBytes)
    VMX_TRY(loggedRam(C, Pa1, SizeBytes - First, Write, H1));
  if (Write) {
    VMX_TRY(C.Mmu.logStore(Pa0, H0, First));
    if (First < SizeBytes)
      VMX_TRY(C.Mmu.logStore(Pa1, H1, SizeBytes - First));
    std::memcpy(H0, In, First);
    if (First < SizeBytes)
      std::memcpy(H1, In + First, SizeBytes - First);
  } else {
    std::memcpy(Out, H0, First);
    if (First < SizeBytes)
      std::memcpy(Out + First, H1, SizeBytes - First);
  }
  return Status::Ok;
}
} // namespace

Status readLinearSlow(Cpu &C, uint64_t La, unsigned SizeBytes, void *Out, bool Supervisor) {
  if (C.Mmu.storeLogging()) [[unlikely]]
    return accessLinearLogged(C, La, SizeBytes, Supervisor, static_cast<uint8_t *>(Out),
                              nullptr);
  uint8_t *Dst = static_cast<uint8_t *>(Out);
  // Translate every page the access touches before reading any of it.
  Hpa Pa0, Pa1;
  unsigned First = unsigned(std::min<uint64_t>(SizeBytes, kPageSize - (La & 0xfff)));
  VMX_TRY(C.Mmu.translate(Gla(La), Access::Read, Supervisor, Pa0));
  if (First < SizeBytes)
    VMX_TRY(C.Mmu.translate(Gla(La + First), Access::Read, Supervisor, Pa1));
  // The APIC-access page (no TLB entry ever maps it): virtualized or an APIC-access VM
  // exit. An access that crosses into or out of it is never virtualized.
  if (C.NonRoot) [[unlikely]] {
    if (apicv::onApicAccessPage(C, Pa0))
      return apicv::linearRead(C, Pa0, First < SizeBytes ? 8 : SizeBytes, Dst);
    if (First < SizeBytes && apicv::onApicAccessPage(C, Pa1))
      return apicv::linearRead(C, Pa1, 8, Dst + First);
  }
  auto copy = [&](Hpa Pa, uint8_t *D, unsigned N) {
    if (uint8_t *H = C.Mem.ramPointer(Pa); H && Pa.pageOffset() + N <= kPageSize) {
      std::memcpy(D, H, N);
      return;
    }
    // A device access: its side effects (an interrupt raised, a stop requested) must be
    // seen at the next instruction boundary.
    C.breakBlock();
    if (N == 1 || N == 2 || N == 4 || N == 8) {
      uint64_t V = C.Mem.read(Pa, N);
      std::memcpy(D, &V, N);
      return;
    }
    for (unsigned I = 0; I < N; ++I)
      D[I] = uint8_t(C.Mem.read(Pa + I, 1));
  };
  copy(Pa0, Dst, First);
  if (First < SizeBytes)
    copy(Pa1, Dst + First, SizeBytes - First);
  // Pages holding a read-watched range never get read (or write) TLB entries, so every
  // read of them comes here (PhysMem::watchReads).
  if (C.Mem.readWatching()) [[unlikely]] {
    if (!C.Mmu.noteRead(Pa0, First) && First < SizeBytes)
      C.Mmu.noteRead(Pa1, SizeBytes - First);
  }
  // Pages with an armed data breakpoint never get TLB entries, so their accesses all
  // come here (cpu/debug.h).
  if (C.Debug.DataArmed) [[unlikely]]
    dataBreakpointAccess(C, La, SizeBytes, false);
  return Status::Ok;
}

Status writeLinearSlow(Cpu &C, uint64_t La, unsigned SizeBytes, const void *In,
                       bool Supervisor) {
  if (C.Mmu.storeLogging()) [[unlikely]]
    return accessLinearLogged(C, La, SizeBytes, Supervisor, nullptr,
                              static_cast<const uint8_t *>(In));
  // A store that TlbWrite cannot take because its page holds decoded code goes through
  // the page's TlbWriteCode entry when there is one and the store stays in the page.
  if (C.Mmu.writeCodePage(Gla(La), SizeBytes, In, Supervisor)) {
    if (C.Debug.DataArmed) [[unlikely]]
      dataBreakpointAccess(C, La, SizeBytes, true);
    return Status::Ok;
  }
  const uint8_t *Src = static_cast<const uint8_t *>(In);
  Hpa Pa0, Pa1;
  unsigned First = unsigned(std::min<uint64_t>(SizeBytes, kPageSize - (La & 0xfff)));
  VMX_TRY(C.Mmu.translate(Gla(La), Access::Write, Supervisor, Pa0));
  if (First < SizeBytes)
    VMX_TRY(C.Mmu.translate(Gla(La + First), Access::Write, Supervisor, Pa1));
  // The APIC-access page, as in readLinearSlow.
  if (C.NonRoot) [[unlikely]] {
    if (apicv::onApicAccessPage(C, Pa0))
      return apicv::linearWrite(C, Pa0, First < SizeBytes ? 8 : SizeBytes, Src);
    if (First < SizeBytes && apicv::onApicAccessPage(C, Pa1))
      return apicv::linearWrite(C, Pa1, 8, Src + First);
  }
  uint64_t Before = C.Mem.codeWriteCount();
  auto copy = [&](Hpa Pa, const uint8_t *S, unsigned N) {
    if (uint8_t *H = C.Mem.ramPointer(Pa); H && Pa.pageOffset() + N <= kPageSize) {
      std::memcpy(H, S, N);
      C.Mem.noteWrite(Pa, N, StoreAgent::Instruction); // reports a watched store
      return;
    }
    C.breakBlock(); // device access, as in readLinearSlow
    if (N == 1 || N == 2 || N == 4 || N == 8) {
      uint64_t V = 0;
      std::memcpy(&V, S, N);
      C.Mem.write(Pa, N, V, StoreAgent::Instruction);
      return;
    }
    for (unsigned I = 0; I < N; ++I)
      C.Mem.write(Pa + I, 1, S[I], StoreAgent::Instruction);
  };
  copy(Pa0, Src, First);
  if (First < SizeBytes)
    copy(Pa1, Src + First, SizeBytes - First);
  // Self-modifying code: leave the current block so the next fetch sees the new bytes.
  if (C.Mem.codeWriteCount() != Before)
    C.breakBlock();
  if (C.Debug.DataArmed) [[unlikely]]
    dataBreakpointAccess(C, La, SizeBytes, true);
  return Status::Ok;
}

Status mapRmwSlow(Cpu &C, RmwRef &R, unsigned SizeBytes) {
  // An operand in a page holding decoded code, in lines without code: a direct pointer,
  // as through TlbWrite. Nothing decodes between the map and the write of one
  // instruction, so the lines stay free of code until the write.
  R.Host = C.Mmu.writeHostBesideCode(Gla(R.La), SizeBytes, false);
  if (R.Host)
    return Status::Ok;
  return probeWrite(C, R.La, SizeBytes);
}

Status probeWrite(Cpu &C, uint64_t La, unsigned SizeBytes, bool Supervisor) {
  Hpa Pa;
  unsigned First = unsigned(std::min<uint64_t>(SizeBytes, kPageSize - (La & 0xfff)));
  VMX_TRY(C.Mmu.translate(Gla(La), Access::Write, Supervisor, Pa));
  if (First < SizeBytes)
    VMX_TRY(C.Mmu.translate(Gla(La + First), Access::Write, Supervisor, Pa));
  return Status::Ok;
}

Status fetchCode(Cpu &C, uint64_t La, uint8_t *Buf, unsigned Max, unsigned &Got,
                 Hpa &Pa) {
  unsigned N = unsigned(std::min<uint64_t>(Max, kPageSize - (La & 0xfff)));
  if (const uint8_t *H = C.Mmu.fetchHost(Gla(La), Pa)) {
    std::memcpy(Buf, H, N);
    Got = N;
    return Status::Ok;
  }
  VMX_TRY(C.Mmu.translate(Gla(La), Access::Fetch, false, Pa));
  if (C.NonRoot && apicv::onApicAccessPage(C, Pa)) [[unlikely]]
    return apicv::linearFetch(C, Pa);
  if (uint8_t *H = C.Mem.ramPointer(Pa))
    std::memcpy(Buf, H, N);
  else
    for (unsigned I = 0; I < N; ++I)
      Buf[I] = uint8_t(C.Mem.read(Pa + I, 1));
  Got = N;
  return Status::Ok;
}

} // namespace vmxsim
