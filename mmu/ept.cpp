#include "mmu/ept.h"

#include "mmu/phys_mem.h"

#include <cstring>

namespace vmxsim {

namespace {

// EPT paging structures live in host-physical memory. An entry outside RAM (or in an
// MMIO region, which must not see side effects from a table walk) reads all-ones: bits
// 2:0 = 111b with reserved bits set, i.e. a misconfiguration, never a host crash.
uint64_t readEptEntry(const PhysMem &Mem, Hpa Entry) {
  if (const uint8_t *P = Mem.ramPointer(Entry)) {
    uint64_t V;
    std::memcpy(&V, P, 8);
    return V;
  }
  return ~uint64_t(0);
}

void setEptBits(PhysMem &Mem, Hpa Entry, uint64_t Old, uint64_t Bits) {
  if ((Old & Bits) == Bits)
    return;
  if (uint8_t *P = Mem.ramPointer(Entry)) {
    uint64_t V = Old | Bits;
    std::memcpy(P, &V, 8);
    Mem.noteWrite(Entry, 8, StoreAgent::Processor);
  }
}

} // namespace

// SDM Vol. 3C, "EPT Violations": the access must be allowed by every entry used
// (Rights is their AND). Guest paging-structure accesses are writes when A/D is on.
bool eptAllows(bool Mbec, uint8_t Rights, const EptAccess &A, bool IsWrite) {
  if (A.Kind == Access::Fetch)
    return (Mbec && A.UserAddress) ? (Rights & eptright::UserX) : (Rights & eptright::X);
  return (Rights & eptright::R) && (!IsWrite || (Rights & eptright::W));
}


EptWalk eptWalk(PhysMem &Mem, const EptWalkerConfig &Cfg, uint64_t Eptp, Gpa Address,
                const EptAccess &A) {
  using namespace eptentry;
  EptWalk W;
  const bool ExecuteOnly = Cfg.ExecuteOnly;
  const bool Pages1G = Cfg.Pages1G;
  const bool Mbec = Cfg.ModeBasedExecute;
  const unsigned MaxPhys = Cfg.MaxPhysAddrBits;
  const uint64_t PhysMask = ((uint64_t(1) << MaxPhys) - 1) & ~uint64_t(0xfff);
  // Bits 51:N of every entry are reserved (N = MAXPHYADDR).
  const uint64_t ReservedHigh = ((uint64_t(1) << 52) - 1) & ~((uint64_t(1) << MaxPhys) - 1);
  // "Present": any of bits 2:0, or bit 10 with mode-based execute control (SDM Vol. 3C,
  // "EPT Translation Mechanism").
  const uint64_t PresentBits = Read | Write | Execute | (Mbec ? UserExecute : 0);
  const bool Ad = Eptp & eptp::AccessedDirty;
  // Guest paging-structure accesses are writes for EPT when A/D flags are enabled (SDM
  // Vol. 3C, "Accessed and Dirty Flags for EPT").
  const bool IsWrite = A.Kind == Access::Write || (Ad && A.PagingStructure);

  int Level = ((Eptp & eptp::WalkLengthMask) >> eptp::WalkLengthShift) == 4 ? 5 : 4;
  uint64_t Table = Eptp & PhysMask;
  uint8_t Rights = eptright::R | eptright::W | eptright::X | eptright::UserX;
  uint64_t Used[5];
  unsigned NumUsed = 0;
  for (;; --Level) {
    const unsigned Shift = 12 + 9 * (Level - 1);
    const uint64_t EAddr = Table | (((Address.value() >> Shift) & 0x1ff) << 3);
    const uint64_t E = readEptEntry(Mem, Hpa(EAddr));
    Used[NumUsed++] = EAddr;
    if (!(E & PresentBits)) {
      // SDM Vol. 3C, "EPT Violations": a not-present entry.
      W.Outcome = EptOutcome::Violation;
      W.Rights = 0;
      W.SuppressVe = E & SuppressVe;
      return W;
    }
    Rights &= uint8_t((E & Read ? eptright::R : 0) | (E & Write ? eptright::W : 0) |
                      (E & Execute ? eptright::X : 0) |
                      (E & UserExecute ? eptright::UserX : 0));
    // SDM Vol. 3C, "EPT Misconfigurations": write-only or write/execute; execute-only
    // where not supported (with MBEC, bit 10 is an execute permission too).
    const bool Exec = E & (Execute | (Mbec ? UserExecute : 0));
    const bool Misconfigured =
        ((E & Write) && !(E & Read)) || (Exec && !(E & (Read | Write)) && !ExecuteOnly);
    uint64_t Rsv = E & ReservedHigh;
    bool Leaf = Level == 1;
    if (Level >= 4) {
      Rsv |= E & 0xf8; // bits 7:3 of an EPT PML5E / PML4E
    } else if (Level >= 2) {
      if (E & LargePage) {
        if (Level == 3 && !Pages1G) {
          Rsv |= LargePage; // no 1-GByte pages: bit 7 of a PDPTE is reserved
        } else {
          Leaf = true;
          // Bits 29:12 (1-GByte page) or 20:12 (2-MByte page) are reserved.
          Rsv |= E & ((uint64_t(1) << Shift) - 1) & ~uint64_t(0xfff);
        }
      } else {
        Rsv |= E & 0xf8; // bits 7:3 of an entry that references a table
      }
    }
    const uint64_t Type = (E & MemTypeMask) >> MemTypeShift;
    // Reserved memory types 2, 3 and 7 in the entry that maps the page.
    const bool BadType = Leaf && (Type == 2 || Type == 3 || Type == 7);
    if (Misconfigured || Rsv || BadType) {
      W.Outcome = EptOutcome::Misconfiguration;
      return W;
    }
    if (!Leaf) {
      Table = E & PhysMask;
      continue;
    }

    W.Rights = Rights;
    W.MemType = uint8_t(Type);
    W.IgnorePat = E & IgnorePat;
    W.PageLevel = uint8_t(Level);
    if (!eptAllows(Mbec, Rights, A, IsWrite)) {
      W.Outcome = EptOutcome::Violation;
      W.SuppressVe = E & SuppressVe; // the entry that maps the page
      return W;
    }
    const uint64_t OffMask = (uint64_t(1) << Shift) - 1;
    W.Address = Hpa((E & PhysMask & ~OffMask) | (Address.value() & OffMask));
    if (Ad && !Cfg.Probe) {
      // The accessed flag of every entry used, the dirty flag of the entry that maps
      // the page for a write (SDM Vol. 3C, "Accessed and Dirty Flags for EPT"). Set
      // only by a walk that completes: a walk that ends in a VM exit leaves the EPT
      // unchanged (vmxsim's choice within "may set").
      const uint64_t LeafBits = Accessed | (IsWrite ? Dirty : 0);
      if (Cfg.AdUpdatesBlocked) {
        // SDM Vol. 3C, "Page-Modification Logging": with the log full, "the accessed or
        // dirty flag is not set, and the guest-physical access that triggered the event
        // does not occur" — only when some flag needs setting.
        bool Needed = (E & LeafBits) != LeafBits;
        for (unsigned K = 0; K + 1 < NumUsed && !Needed; ++K)
          Needed = !(readEptEntry(Mem, Hpa(Used[K])) & Accessed);
        if (Needed) {
          W.Outcome = EptOutcome::AdUpdateBlocked;
          return W;
        }
      }
      for (unsigned K = 0; K + 1 < NumUsed; ++K)
        setEptBits(Mem, Hpa(Used[K]), readEptEntry(Mem, Hpa(Used[K])), Accessed);
      setEptBits(Mem, Hpa(EAddr), E, LeafBits);
      W.DirtySet = IsWrite && !(E & Dirty);
    }
    return W;
  }
}

uint8_t eptEffectiveMemoryType(uint8_t EptType, bool IgnorePat, uint8_t PatType,
                               bool Cr0Cd) {
  using namespace memtype;
  if (Cr0Cd)
    return Uc;
  if (IgnorePat)
    return EptType;
  // Rows: the EPT type in the role of the MTRR type (UC, WC, WT, WP, WB); columns: the
  // PAT type (UC, WC, WT, WP, WB, UC-).
  static constexpr uint8_t kTable[5][6] = {
      /* UC */ {Uc, Wc, Uc, Uc, Uc, Uc},
      /* WC */ {Uc, Wc, Uc, Uc, Wc, Wc},
      /* WT */ {Uc, Wc, Wt, Wp, Wt, Uc},
      /* WP */ {Uc, Wc, Wt, Wp, Wp, Wc},
      /* WB */ {Uc, Wc, Wt, Wp, Wb, Uc},
  };
  auto row = [](uint8_t T) {
    return T == Uc ? 0 : T == Wc ? 1 : T == Wt ? 2 : T == Wp ? 3 : T == Wb ? 4 : -1;
  };
  auto column = [](uint8_t T) {
    return T == Uc ? 0 : T == Wc ? 1 : T == Wt ? 2 : T == Wp ? 3 : T == Wb ? 4
           : T == UcMinus ? 5 : -1;
  };
  const int R = row(EptType), Col = column(PatType);
  if (R < 0 || Col < 0)
    return Uc;
  return kTable[R][Col];
}

} // namespace vmxsim
