#include "mmu/paging.h"

#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "cpu/vmx/ept_translation.h"

#include <cstring>

namespace vmxsim {

namespace {

// Paging-structure entry bits (SDM Vol. 3A, Formats of Paging-Structure Entries).
constexpr uint64_t kP = 1u << 0, kRw = 1u << 1, kUs = 1u << 2, kA = 1u << 5, kD = 1u << 6,
                   kPs = 1u << 7, kG = 1u << 8, kXd = 1ull << 63;

struct Walker {
  Cpu &C;
  uint64_t La;
  Access Kind;
  bool User;
  uint64_t PhysMask; // bits [MAXPHYADDR-1:12]
  uint64_t ReservedHigh; // bits [51:MAXPHYADDR] and XD when NXE=0
  // VMX non-root operation with EPT: paging-structure entries are at guest-physical
  // addresses, each access translated by EPT (SDM Vol. 3C, "EPT Translation
  // Mechanism": "guest paging structures ... are accessed using guest-physical
  // addresses"). EptStatus holds the VM exit of a failed access.
  bool Ept = false;
  Status EptStatus = Status::Ok;

  // Reads one paging-structure entry. The walker accesses guest-physical memory
  // directly; an entry outside RAM reads all-ones (which is reserved-bit garbage, as an
  // unbacked PC bus would return).
  uint64_t readEntry(uint64_t Pa, unsigned Size) {
    if (Ept) [[unlikely]]
      return readEntryEpt(Pa, Size);
    if (uint8_t *P = C.Mem.ramPointer(Gpa(Pa))) {
      uint64_t V = 0;
      std::memcpy(&V, P, Size);
      return V;
    }
    return C.Mem.read(Gpa(Pa), Size);
  }
  // An entry read that EPT refused reads as not present; the walker's next step is
  // fault(0), which then returns the VM exit instead of raising #PF.
  uint64_t readEntryEpt(uint64_t Pa, unsigned Size) {
    EptWalk T;
    EptStatus = eptTranslate(C, Pa, EptAccess{Access::Read, true, true, La, false}, T);
    if (EptStatus != Status::Ok)
      return 0;
    Ept = false; // the same read, at the host-physical address
    uint64_t V = readEntry(T.Hpa, Size);
    Ept = true;
    return V;
  }
  // The A/D update of a guest paging-structure entry is a guest-physical write through
  // EPT (SDM Vol. 3C, "EPT Violations": "Writes by the logical processor to guest
  // paging structures to update accessed and dirty flags are considered to be data
  // writes").
  Status setBits(uint64_t Pa, unsigned Size, uint64_t Old, uint64_t Bits) {
    if ((Old & Bits) == Bits)
      return Status::Ok;
    if (Ept) [[unlikely]] {
      EptWalk T;
      VMX_TRY(eptTranslate(C, Pa, EptAccess{Access::Write, true, true, La, false}, T));
      Pa = T.Hpa;
    }
    uint64_t V = Old | Bits;
    if (uint8_t *P = C.Mem.ramPointer(Gpa(Pa))) {
      // A/D updates are locked read-modify-writes on hardware; one vCPU runs at a time
      // here, so a plain store is atomic with respect to the other vCPUs.
      std::memcpy(P, &V, Size);
      C.Mem.noteWrite(Gpa(Pa), Size);
    }
    return Status::Ok;
  }

  Status fault(uint32_t Err) {
    if (EptStatus != Status::Ok) [[unlikely]]
      return EptStatus;
    if (Kind == Access::Write)
      Err |= pferr::W;
    if (User)
      Err |= pferr::U;
    // I/D is reported for fetches when CR4.SMEP=1, or when PAE/4-level paging is in
    // use with IA32_EFER.NXE=1 (SDM Vol. 3A, Page-Fault Exceptions: "I/D flag (bit 4)").
    if (Kind == Access::Fetch &&
        ((C.S.Cr4 & cr4::SMEP) || ((C.S.Efer & efer::NXE) && (C.S.Cr4 & cr4::PAE))))
      Err |= pferr::I;
    C.Pending = PendingEvent{vec::PF, true, Err, La};
    return Status::Fault;
  }

  // Access rights of the final translation (SDM Vol. 3A, Access Rights).
  Status checkRights(bool Rw, bool Us, bool Xd, Translation &Out) {
    const uint64_t Cr0 = C.S.Cr0, Cr4 = C.S.Cr4;
    const bool Nxe = (C.S.Efer & efer::NXE) && ((Cr4 & cr4::PAE) || (C.S.Efer & efer::LMA));
    Out.User = Us;
    Out.Executable = !(Nxe && Xd);
    if (User) {
      if (!Us)
        return fault(pferr::P);
      if (Kind == Access::Write && !Rw)
        return fault(pferr::P);
      if (Kind == Access::Fetch && !Out.Executable)
        return fault(pferr::P);
      Out.Writable = Rw;
      return Status::Ok;
    }
    // Supervisor-mode access.
    if (Kind == Access::Fetch) {
      if (!Out.Executable)
        return fault(pferr::P);
      if (Us && (Cr4 & cr4::SMEP))
        return fault(pferr::P);
      Out.Writable = Rw || !(Cr0 & cr0::WP);
      return Status::Ok;
    }
    // SMAP: supervisor data accesses to user pages fault when CR4.SMAP=1, unless the
    // access is explicit (CPL < 3) and RFLAGS.AC=1. A supervisor access at CPL 3 is an
    // implicit one (descriptor tables, TSS), which SMAP always checks.
    if (Us && (Cr4 & cr4::SMAP)) {
      bool Implicit = C.S.cpl() == 3;
      if (Implicit || !(C.S.Rflags & rflags::AC))
        return fault(pferr::P);
    }
    // CR0.WP=0 lets supervisor writes ignore R/W (SDM Vol. 3A, Access Rights).
    bool Writable = Rw || !(Cr0 & cr0::WP);
    if (Kind == Access::Write && !Writable)
      return fault(pferr::P);
    Out.Writable = Writable;
    return Status::Ok;
  }
};

} // namespace

Status loadPdptes(Cpu &C) {
  uint64_t Base = C.S.Cr3 & 0xffffffe0u;
  // In VMX non-root operation with EPT, CR3 is a guest-physical address: the PDPTE
  // load is a guest paging-structure access through EPT, with no guest-linear address
  // (SDM Vol. 3C, "EPT Violations"; Vol. 3A, PDPTE Registers).
  if (eptActive(C)) {
    EptWalk W;
    VMX_TRY(eptTranslate(C, Base, EptAccess{Access::Read, true, false, 0, false}, W));
    Base = W.Hpa;
  }
  uint64_t PhysMask = ((1ull << C.Model.MaxPhysAddrBits) - 1) & kPageMask;
  uint64_t E[4];
  for (unsigned I = 0; I < 4; ++I) {
    E[I] = C.Mem.read(Gpa(Base + 8 * I), 8);
    // Reserved: bits 2:1, 8:5 and bits above MAXPHYADDR (SDM Vol. 3A, PAE Paging,
    // Format of a PAE Page-Directory-Pointer-Table Entry): #GP(0), nothing loaded.
    if ((E[I] & kP) && ((E[I] & 0x1e6) || (E[I] & ~PhysMask & ~uint64_t(0xfff))))
      return C.raiseGp(0);
  }
  for (unsigned I = 0; I < 4; ++I)
    C.S.Pdpte[I] = E[I];
  return Status::Ok;
}

namespace {

Status walkGuestPaging(Cpu &C, uint64_t La, Access Kind, bool User, bool Ept,
                       Translation &Out) {
  const CpuState &S = C.S;
  Out = Translation{};
  if (!(S.Cr0 & cr0::PG)) {
    Out.Pa = La & 0xffffffffu;
    Out.Writable = Out.User = Out.Executable = true;
    return Status::Ok;
  }
  Walker W{C, La, Kind, User, 0, 0};
  W.Ept = Ept;
  const uint64_t MaxPhys = C.Model.MaxPhysAddrBits;
  W.PhysMask = ((1ull << MaxPhys) - 1) & kPageMask;
  const bool Nxe = S.Efer & efer::NXE;
  W.ReservedHigh = (~((1ull << MaxPhys) - 1) & ((1ull << 52) - 1) & ~uint64_t(0xfff)) |
                   (Nxe ? 0 : kXd);
  const bool Pge = S.Cr4 & cr4::PGE;

  bool Rw = true, Us = true, Xd = false;
  auto accumulate = [&](uint64_t E) {
    Rw &= bool(E & kRw);
    Us &= bool(E & kUs);
    Xd |= bool(E & kXd);
  };

  if (!(S.Cr4 & cr4::PAE)) {
    // 32-bit paging (SDM Vol. 3A, 32-Bit Paging).
    uint32_t La32 = uint32_t(La);
    uint64_t PdeAddr = (S.Cr3 & 0xfffff000u) | ((La32 >> 22) << 2);
    uint64_t Pde = W.readEntry(PdeAddr, 4);
    if (!(Pde & kP))
      return W.fault(0);
    if ((Pde & kPs) && (S.Cr4 & cr4::PSE)) {
      // 4 MiB page: PSE-36 bits 20:13 give physical bits 39:32; bit 21 reserved, and
      // bits beyond MAXPHYADDR (up to 39) reserved.
      uint64_t Hi = (Pde >> 13) & 0xff;
      uint64_t Rsv = (Pde & (1u << 21)) | ((Hi << 32) & ~((1ull << MaxPhys) - 1));
      if (Rsv)
        return W.fault(pferr::P | pferr::Rsvd);
      accumulate(Pde);
      VMX_TRY(W.checkRights(Rw, Us, false, Out));
      VMX_TRY(W.setBits(PdeAddr, 4, Pde, kA | (Kind == Access::Write ? kD : 0)));
      Out.Pa = (Hi << 32) | (Pde & 0xffc00000u) | (La32 & 0x3fffff);
      Out.Global = Pge && (Pde & kG);
      return Status::Ok;
    }
    accumulate(Pde);
    uint64_t PteAddr = (Pde & 0xfffff000u) | (((La32 >> 12) & 0x3ff) << 2);
    VMX_TRY(W.setBits(PdeAddr, 4, Pde, kA));
    uint64_t Pte = W.readEntry(PteAddr, 4);
    if (!(Pte & kP))
      return W.fault(0);
    accumulate(Pte);
    VMX_TRY(W.checkRights(Rw, Us, false, Out));
    VMX_TRY(W.setBits(PteAddr, 4, Pte, kA | (Kind == Access::Write ? kD : 0)));
    Out.Pa = (Pte & 0xfffff000u) | (La32 & 0xfff);
    Out.Global = Pge && (Pte & kG);
    return Status::Ok;
  }

  uint64_t Table; // physical address of the next table
  int Level;      // 4 = PDPT level index when walking from PML4, etc.
  if (!(S.Efer & efer::LMA)) {
    // PAE paging: the PDPTE registers stand in for the first level.
    uint64_t Pdpte = S.Pdpte[(La >> 30) & 3];
    if (!(Pdpte & kP))
      return W.fault(0);
    // PDPTEs carry no R/W, U/S or XD in PAE mode.
    Table = Pdpte & W.PhysMask;
    Level = 2;
    // PAE paging-structure entries reserve bits 62:MAXPHYADDR, not only 51:MAXPHYADDR
    // as 4-level paging does (SDM Vol. 3A, PAE Paging, formats of PAE PDEs and PTEs).
    W.ReservedHigh |= 0x7ff0000000000000ull;
  } else {
    const bool La57 = S.Cr4 & cr4::LA57;
    Table = S.Cr3 & W.PhysMask;
    Level = La57 ? 5 : 4;
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
      if (Level >= 4 || (Level == 3 && !C.Model.Page1G))
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
      VMX_TRY(W.checkRights(Rw, Us, Xd, Out));
      VMX_TRY(W.setBits(EAddr, 8, E, kA | (Kind == Access::Write ? kD : 0)));
      uint64_t OffMask = (1ull << Shift) - 1;
      Out.Pa = (E & W.PhysMask & ~OffMask) | (La & OffMask);
      Out.Global = Pge && (E & kG);
      return Status::Ok;
    }
    VMX_TRY(W.setBits(EAddr, 8, E, kA));
    Table = E & W.PhysMask;
  }
}

} // namespace

Status translateLinear(Cpu &C, uint64_t La, Access Kind, bool User, Translation &Out) {
  if (!C.NonRoot || !eptActive(C)) [[likely]]
    return walkGuestPaging(C, La, Kind, User, false, Out);
  // SDM Vol. 3C, "EPT Translation Mechanism": the guest's paging structures give the
  // guest-physical address (with CR0.PG = 0 the linear address is one), which EPT then
  // translates; the access needs the permission of both.
  VMX_TRY(walkGuestPaging(C, La, Kind, User, true, Out));
  EptWalk T;
  // With CR0.PG = 0 every linear address is a supervisor-mode address for mode-based
  // execute control (SDM Vol. 3C, "Mode-Based Execute Control for EPT").
  const bool UserAddress = (C.S.Cr0 & cr0::PG) && Out.User;
  VMX_TRY(eptTranslate(C, Out.Pa, EptAccess{Kind, false, true, La, UserAddress}, T));
  Out.Pa = T.Hpa;
  // The combined permission: a later write through this mapping needs EPT's W too.
  Out.Writable = Out.Writable && (T.Rights & eptright::W);
  return Status::Ok;
}

} // namespace vmxsim
