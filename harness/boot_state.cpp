#include "harness/boot_state.h"

#include "cpu/cpu.h"

#include <algorithm>
#include <cstring>

namespace vmxsim {

namespace {
uint64_t alignUp(uint64_t V, uint64_t A) { return (V + A - 1) & ~(A - 1); }

// A code/data segment descriptor (SDM Vol. 3A, Segment Descriptors).
uint64_t descriptor(uint32_t Base, uint32_t Limit, uint8_t Access, uint8_t Flags) {
  return uint64_t(Limit & 0xffff) | (uint64_t(Base & 0xffffff) << 16) |
         (uint64_t(Access) << 40) | (uint64_t((Limit >> 16) & 0xf) << 48) |
         (uint64_t(Flags & 0xf) << 52) | (uint64_t(Base >> 24) << 56);
}

void loadFlat(CpuState &S, SegReg R, uint16_t Sel, uint32_t Attr) {
  S.seg(R) = Segment{Sel, 0, 0xffffffff, Attr};
}
} // namespace

bool rangeIsRam(const PhysMem &Mem, uint64_t Begin, uint64_t Size) {
  if (Size == 0)
    return Begin <= Mem.lowRamBytes() ||
           (Begin >= PhysMem::kHighRamBase &&
            Begin - PhysMem::kHighRamBase <= Mem.highRamBytes());
  uint64_t End = Begin + Size;
  if (End < Begin)
    return false;
  bool InLow = End <= Mem.lowRamBytes();
  bool InHigh = Begin >= PhysMem::kHighRamBase &&
                End - PhysMem::kHighRamBase <= Mem.highRamBytes();
  return (InLow || InHigh) && Mem.isRam(Hpa(Begin), Size);
}

bool findFree(const PhysMem &Mem, const std::vector<AddrRange> &Used, uint64_t Size,
              uint64_t Align, uint64_t &Out) {
  uint64_t Cand = alignUp(kLoaderDataLow, Align);
  for (bool Moved = true; Moved;) {
    Moved = false;
    for (const AddrRange &R : Used)
      if (R.overlaps(Cand, Cand + Size)) {
        Cand = alignUp(R.End, Align);
        Moved = true;
      }
  }
  if (Cand + Size <= kConventionalEnd && rangeIsRam(Mem, Cand, Size)) {
    Out = Cand;
    return true;
  }
  uint64_t Top = 1ull << 20;
  for (const AddrRange &R : Used)
    if (R.End <= (1ull << 32))
      Top = std::max(Top, R.End);
  Cand = alignUp(Top, Align);
  for (const AddrRange &R : Used)
    if (R.overlaps(Cand, Cand + Size))
      return false;
  if (Cand + Size > (1ull << 32) || !rangeIsRam(Mem, Cand, Size))
    return false;
  Out = Cand;
  return true;
}

void zeroGuestRam(PhysMem &Mem, uint64_t Begin, uint64_t Size) {
  (void)Mem.zeroRam(Hpa(Begin), Size); // callers have checked the range is RAM
}

void writeBootGdt(PhysMem &Mem, uint64_t Addr) {
  // Accessed bits are preset so the descriptors match the hidden parts loaded below (and
  // a later VM entry's "accessed" checks on them).
  const uint64_t Gdt[7] = {
      0,
      0,
      descriptor(0, 0xfffff, 0x9b, 0xc), // 0x10 32-bit code, execute/read
      descriptor(0, 0xfffff, 0x93, 0xc), // 0x18 32-bit data, read/write
      descriptor(0, 0xfffff, 0x9b, 0xa), // 0x20 64-bit code
      descriptor(0, 0xffff, 0x9b, 0x0),  // 0x28 16-bit code
      descriptor(0, 0xffff, 0x93, 0x0),  // 0x30 16-bit data
  };
  Mem.copyIn(Hpa(Addr), Gdt, sizeof(Gdt));
}

void enterProtected32(Cpu &C, uint64_t GdtAddr, uint64_t Entry) {
  C.reset();
  CpuState &S = C.S;
  S.Cr0 = cr0::PE | cr0::ET;
  S.Gdtr = TableReg{GdtAddr, uint16_t(kBootGdtBytes - 1)};
  S.Idtr = TableReg{0, 0};
  const uint32_t Code = 0x9b | Segment::DB | Segment::G;
  const uint32_t Data = 0x93 | Segment::DB | Segment::G;
  loadFlat(S, SegReg::CS, bootsel::Code32, Code);
  for (SegReg R : {SegReg::DS, SegReg::ES, SegReg::FS, SegReg::GS, SegReg::SS})
    loadFlat(S, R, bootsel::Data, Data);
  S.Rflags = rflags::Fixed1;
  S.Gpr[RSP] = kBootStackTop;
  S.Rip = Entry;
  C.Mmu.flushTlb();
  C.modeChanged();
}

void enterLong(Cpu &C, uint64_t GdtAddr, uint64_t Pml4, uint64_t Entry) {
  enterProtected32(C, GdtAddr, Entry);
  CpuState &S = C.S;
  S.Cr4 = cr4::PAE;
  S.Cr3 = Pml4;
  S.Efer = efer::LME | efer::LMA;
  S.Cr0 = cr0::PE | cr0::ET | cr0::PG;
  loadFlat(S, SegReg::CS, bootsel::Code64, 0x9b | Segment::L | Segment::G);
  C.Mmu.flushTlb();
  C.modeChanged();
}

void enterReal(Cpu &C, uint64_t Entry) {
  C.reset();
  CpuState &S = C.S;
  S.seg(SegReg::CS) = Segment{uint16_t(Entry >> 4), Entry & ~0xfull, 0xffff, 0x9b};
  for (SegReg R : {SegReg::DS, SegReg::ES, SegReg::FS, SegReg::GS, SegReg::SS})
    S.seg(R) = Segment{0, 0, 0xffff, 0x93};
  S.Idtr = TableReg{0, 0x3ff};
  S.Rip = Entry & 0xf;
  S.Gpr[RSP] = kBootStackTop;
  C.modeChanged();
}

void buildIdentityTables(PhysMem &Mem, uint64_t Base) {
  // SDM Vol. 3A, 4-Level Paging: PML4[0] -> PDPT, PDPT[0..3] -> PDs of 2 MiB pages.
  const uint64_t Pdpt = Base + 0x1000, Pd = Base + 0x2000;
  zeroGuestRam(Mem, Base, kIdentityTablesBytes);
  uint64_t E = Pdpt | 0x3;
  Mem.copyIn(Hpa(Base), &E, 8);
  for (uint64_t I = 0; I < 4; ++I) {
    E = (Pd + I * 0x1000) | 0x3;
    Mem.copyIn(Hpa(Pdpt + I * 8), &E, 8);
    uint64_t Dir[512];
    for (uint64_t J = 0; J < 512; ++J)
      Dir[J] = ((I * 512 + J) << 21) | 0x83; // P RW PS
    Mem.copyIn(Hpa(Pd + I * 0x1000), Dir, sizeof(Dir));
  }
}

} // namespace vmxsim
