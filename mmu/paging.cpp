#include "mmu/paging.h"

#include "mmu/phys_mem.h"

#include <cstring>

namespace vmxsim {

namespace {

// Paging-structure entry bits (SDM Vol. 3A, Formats of Paging-Structure Entries).
constexpr uint64_t kP = 1u << 0, kRw = 1u << 1, kUs = 1u << 2, kA = 1u << 5, kD = 1u << 6,
                   kPs = 1u << 7, kG = 1u << 8, kXd = 1ull << 63;

struct Walker {
  PhysMem &Mem;
  const PagingContext &Ctx;
  uint64_t La;
  Access Kind;
  bool User;
  PagingStructureTranslator *Ept;
  PagingWalk &Out;
  uint64_t PhysMask = 0;     // bits [MAXPHYADDR-1:12]
  uint64_t ReservedHigh = 0; // bits [51:MAXPHYADDR] and XD when NXE=0
  bool EptFailed = false;

  // The machine-physical address of an entry access: the guest-physical one itself
  // without EPT, else EPT's translation; false (the walk's result set) when EPT refuses.
  bool entryAddress(uint64_t Pa, Access A, uint64_t &Hp) {
    if (!Ept) [[likely]] {
      Hp = Pa & Ctx.A20Mask;
      return true;
    }
    const EptAccess EA{A, true, true, La, false};
    EptWalk T = Ept->translate(Gpa(Pa), EA);
    if (T.Outcome != EptOutcome::Translated) [[unlikely]] {
      Out.Outcome = PagingOutcome::EptFault;
      Out.EptAddress = Gpa(Pa);
      Out.EptAccessKind = EA;
      Out.Ept = T;
      EptFailed = true;
      return false;
    }
    Hp = T.Address.value();
    return true;
  }

  // Reads one paging-structure entry. An entry outside RAM reads all-ones (which is
  // reserved-bit garbage, as an unbacked PC bus would return). An entry read that EPT
  // refused reads as not present; the walker's next step is fault(0), which then
  // returns the EPT fault instead of a #PF.
  uint64_t readEntry(uint64_t Pa, unsigned Size) {
    uint64_t Hp;
    if (!entryAddress(Pa, Access::Read, Hp))
      return 0;
    if (uint8_t *P = Mem.ramPointer(Hpa(Hp))) {
      uint64_t V = 0;
      std::memcpy(&V, P, Size);
      return V;
    }
    return Mem.read(Hpa(Hp), Size);
  }
  // The A/D update of a guest paging-structure entry is a guest-physical write through
  // EPT (SDM Vol. 3C, "EPT Violations": "Writes by the logical processor to guest
  // paging structures to update accessed and dirty flags are considered to be data
  // writes"). False when EPT refused it (the result is set).
  bool setBits(uint64_t Pa, unsigned Size, uint64_t Old, uint64_t Bits) {
    if ((Old & Bits) == Bits)
      return true;
    if (Ctx.Probe) // a debugger's look changes nothing (PagingContext::Probe)
      return true;
    uint64_t Hp;
    if (!entryAddress(Pa, Access::Write, Hp))
      return false;
    uint64_t V = Old | Bits;
    if (uint8_t *P = Mem.ramPointer(Hpa(Hp))) {
      // A/D updates are locked read-modify-writes on hardware; one vCPU runs at a time
      // here, so a plain store is atomic with respect to the other vCPUs.
      std::memcpy(P, &V, Size);
      Mem.noteWrite(Hpa(Hp), Size, StoreAgent::Processor);
    }
    return true;
  }

  // Ends the walk with a #PF (or with the EPT fault of the entry read that preceded).
  PagingWalk &fault(uint32_t Err) {
    if (EptFailed) [[unlikely]]
      return Out;
    if (Kind == Access::Write)
      Err |= pferr::W;
    if (User)
      Err |= pferr::U;
    // I/D is reported for fetches when CR4.SMEP=1, or when PAE/4-level paging is in
    // use with IA32_EFER.NXE=1 (SDM Vol. 3A, Page-Fault Exceptions: "I/D flag (bit 4)").
    if (Kind == Access::Fetch &&
        (Ctx.Smep || (Ctx.Nxe && Ctx.Pae)))
      Err |= pferr::I;
    Out.Outcome = PagingOutcome::PageFault;
    Out.ErrorCode = Err;
    return Out;
  }

  // Access rights of the final translation (SDM Vol. 3A, Access Rights); false when
  // they refuse the access (the #PF is set).
  bool checkRights(bool Rw, bool Us, bool Xd) {
    const bool Nxe = Ctx.Nxe && (Ctx.Pae || Ctx.LongMode);
    Out.User = Us;
    Out.ReadWrite = Rw;
    Out.Executable = !(Nxe && Xd);
    if (User) {
      if (!Us || (Kind == Access::Write && !Rw) ||
          (Kind == Access::Fetch && !Out.Executable)) {
        fault(pferr::P);
        return false;
      }
      Out.Writable = Rw;
      return true;
    }
    // Supervisor-mode access.
    if (Kind == Access::Fetch) {
      if (!Out.Executable || (Us && Ctx.Smep)) {
        fault(pferr::P);
        return false;
      }
      Out.Writable = Rw || !Ctx.WriteProtect;
      return true;
    }
    // SMAP: supervisor data accesses to user pages fault when CR4.SMAP=1, unless the
    // access is explicit (CPL < 3) and RFLAGS.AC=1. A supervisor access at CPL 3 is an
    // implicit one (descriptor tables, TSS), which SMAP always checks.
    if (Us && Ctx.Smap && (Ctx.Cpl3 || !Ctx.Ac)) {
      fault(pferr::P);
      return false;
    }
    // CR0.WP=0 lets supervisor writes ignore R/W (SDM Vol. 3A, Access Rights).
    bool Writable = Rw || !Ctx.WriteProtect;
    if (Kind == Access::Write && !Writable) {
      fault(pferr::P);
      return false;
    }
    Out.Writable = Writable;
    return true;
  }

  // The leaf: rights, then its A/D update, then the address.
  PagingWalk &leaf(uint64_t EAddr, unsigned Size, uint64_t E, bool Rw, bool Us, bool Xd,
                   uint64_t Pa, bool Global) {
    if (!checkRights(Rw, Us, Xd))
      return Out;
    if (!setBits(EAddr, Size, E, kA | (Kind == Access::Write ? kD : 0)))
      return Out;
    Out.Outcome = PagingOutcome::Translated;
    Out.Address = Gpa(Pa);
    Out.Global = Global;
    return Out;
  }
};

} // namespace

bool readPdptes(PhysMem &Mem, Hpa Table, unsigned MaxPhysAddrBits, uint64_t (&Out)[4]) {
  const uint64_t PhysMask = ((1ull << MaxPhysAddrBits) - 1) & kPageMask;
  for (unsigned I = 0; I < 4; ++I) {
    Out[I] = Mem.read(Hpa(Table.value() + 8 * I), 8);
    // Reserved: bits 2:1, 8:5 and bits above MAXPHYADDR (SDM Vol. 3A, PAE Paging,
    // Format of a PAE Page-Directory-Pointer-Table Entry).
    if ((Out[I] & kP) && ((Out[I] & 0x1e6) || (Out[I] & ~PhysMask & ~uint64_t(0xfff))))
      return false;
  }
  return true;
}

PagingWalk walkGuestPaging(PhysMem &Mem, const PagingContext &Ctx, Gla Linear, Access Kind,
                           bool User, PagingStructureTranslator *Ept) {
  PagingWalk Out;
  const uint64_t La = Linear.value();
  if (!Ctx.Paging) {
    Out.Address = Gpa(La & 0xffffffffu);
    Out.Writable = Out.User = Out.ReadWrite = Out.Executable = true;
    return Out;
  }
  Walker W{Mem, Ctx, La, Kind, User, Ept, Out};
  const uint64_t MaxPhys = Ctx.MaxPhysAddrBits;
  W.PhysMask = ((1ull << MaxPhys) - 1) & kPageMask;
    W.ReservedHigh = (~((1ull << MaxPhys) - 1) & ((1ull << 52) - 1) & ~uint64_t(0xfff)) |
                   (Ctx.Nxe ? 0 : kXd);
  const bool Pge = Ctx.Pge;

  bool Rw = true, Us = true, Xd = false;
  auto accumulate = [&](uint64_t E) {
    Rw &= bool(E & kRw);
    Us &= bool(E & kUs);
    Xd |= bool(E & kXd);
  };

  if (!Ctx.Pae) {
    // 32-bit paging (SDM Vol. 3A, 32-Bit Paging).
    uint32_t La32 = uint32_t(La);
    uint64_t PdeAddr = (Ctx.Cr3 & 0xfffff000u) | ((La32 >> 22) << 2);
    uint64_t Pde = W.readEntry(PdeAddr, 4);
    if (!(Pde & kP))
      return W.fault(0);
    if ((Pde & kPs) && Ctx.Pse) {
      // 4 MiB page: PSE-36 bits 20:13 give physical bits 39:32; bit 21 reserved, and
      // bits beyond MAXPHYADDR (up to 39) reserved.
      uint64_t Hi = (Pde >> 13) & 0xff;
      uint64_t Rsv = (Pde & (1u << 21)) | ((Hi << 32) & ~((1ull << MaxPhys) - 1));
      if (Rsv)
        return W.fault(pferr::P | pferr::Rsvd);
      accumulate(Pde);
      const uint64_t Pa = (Hi << 32) | (Pde & 0xffc00000u) | (La32 & 0x3fffff);
      return W.leaf(PdeAddr, 4, Pde, Rw, Us, false, Pa, Pge && (Pde & kG));
    }
    accumulate(Pde);
    uint64_t PteAddr = (Pde & 0xfffff000u) | (((La32 >> 12) & 0x3ff) << 2);
    if (!W.setBits(PdeAddr, 4, Pde, kA))
      return Out;
    uint64_t Pte = W.readEntry(PteAddr, 4);
    if (!(Pte & kP))
      return W.fault(0);
    accumulate(Pte);
    return W.leaf(PteAddr, 4, Pte, Rw, Us, false, (Pte & 0xfffff000u) | (La32 & 0xfff),
                  Pge && (Pte & kG));
  }

  uint64_t Table; // physical address of the next table
  int Level;      // 4 = PDPT level index when walking from PML4, etc.
  if (!Ctx.LongMode) {
    // PAE paging: the PDPTE registers stand in for the first level.
    uint64_t Pdpte = Ctx.Pdpte[(La >> 30) & 3];
    if (!(Pdpte & kP))
      return W.fault(0);
    // PDPTEs carry no R/W, U/S or XD in PAE mode.
    Table = Pdpte & W.PhysMask;
    Level = 2;
    // PAE paging-structure entries reserve bits 62:MAXPHYADDR, not only 51:MAXPHYADDR
    // as 4-level paging does (SDM Vol. 3A, PAE Paging, formats of PAE PDEs and PTEs).
    W.ReservedHigh |= 0x7ff0000000000000ull;
  } else {
    Table = Ctx.Cr3 & W.PhysMask;
    Level = Ctx.La57 ? 5 : 4;
  }

  // Entry levels: 5 = PML5E, 4 = PML4E, 3 = PDPTE, 2 = PDE, 1 = PTE.
  for (;; --Level) {
    unsigned Shift = 12 + 9 * (Level - 1);
    uint64_t EAddr = Table | (((La >> Shift) & 0x1ff) << 3);
    uint64_t E = W.readEntry(EAddr, 8);
    if (!(E & kP))
      return W.fault(0);
    uint64_t Rsv = E & W.ReservedHigh;
    bool Leaf = Level == 1;
    if (E & kPs) {
      if (Level >= 4 || (Level == 3 && !Ctx.Page1G))
        Rsv |= kPs; // PS is reserved in PML5E/PML4E, and in PDPTE without 1 GiB pages
      else if (Level > 1) {
        Leaf = true;
        // Bits 12 .. (Shift-1) of a large-page entry (except PAT at bit 12) are reserved.
        Rsv |= E & ((1ull << Shift) - 1) & ~uint64_t(0x1fff);
      }
    }
    if (Rsv)
      return W.fault(pferr::P | pferr::Rsvd);
    accumulate(E);
    if (Leaf) {
      uint64_t OffMask = (1ull << Shift) - 1;
      return W.leaf(EAddr, 8, E, Rw, Us, Xd, (E & W.PhysMask & ~OffMask) | (La & OffMask),
                    Pge && (E & kG));
    }
    if (!W.setBits(EAddr, 8, E, kA))
      return Out;
    Table = E & W.PhysMask;
  }
}

} // namespace vmxsim
