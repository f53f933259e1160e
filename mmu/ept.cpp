#include "mmu/ept.h"

#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/exit_qualification.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmcs_controls.h"
#include "cpu/vmx/vmx_events.h"
#include "cpu/vmx/vmx_features.h"
#include "cpu/vmx/vmx_state.h"

#include <cstring>

namespace vmxsim {

namespace {

using F = VmcsField;



/// Mode-based execute control for EPT is in effect (SDM Vol. 3C, "Mode-Based Execute
/// Control for EPT"): only when the processor supports it and the control is 1.
bool modeBasedExecute(const Cpu &C) {
  return C.Model.Vmx && C.Model.Vmx->has(VmxFeature::ModeBasedExecute) &&
         controlSet(C.Vmx->Vmcs, VmxControl::ModeBasedExecuteControlForEpt);
}

// EPT paging structures live in host-physical memory. An entry outside RAM (or in an
// MMIO region, which must not see side effects from a table walk) reads all-ones: bits
// 2:0 = 111b with reserved bits set, i.e. a misconfiguration, never a host crash.
uint64_t readEptEntry(const Cpu &C, uint64_t Hpa) {
  if (const uint8_t *P = C.Mem.ramPointer(Gpa(Hpa))) {
    uint64_t V;
    std::memcpy(&V, P, 8);
    return V;
  }
  return ~uint64_t(0);
}

void setEptBits(Cpu &C, uint64_t Hpa, uint64_t Old, uint64_t Bits) {
  if ((Old & Bits) == Bits)
    return;
  if (uint8_t *P = C.Mem.ramPointer(Gpa(Hpa))) {
    uint64_t V = Old | Bits;
    std::memcpy(P, &V, 8);
    C.Mem.noteWrite(Gpa(Hpa), 8);
  }
}

// SDM Vol. 3C, "EPT Violations": the access must be allowed by every entry used
// (Rights is their AND). Guest paging-structure accesses are writes when A/D is on.
bool eptAllows(bool Mbec, uint8_t Rights, const EptAccess &A, bool IsWrite) {
  if (A.Kind == Access::Fetch)
    return (Mbec && A.UserAddress) ? (Rights & eptright::UserX) : (Rights & eptright::X);
  return (Rights & eptright::R) && (!IsWrite || (Rights & eptright::W));
}

} // namespace

bool eptActive(const Cpu &C) {
  return C.NonRoot && controlSet(C.Vmx->Vmcs, VmxControl::EnableEpt);
}

EptWalk eptWalk(Cpu &C, uint64_t Eptp, uint64_t Gpa, const EptAccess &A) {
  using namespace eptentry;
  EptWalk W;
  const VmxProfile *P = C.Model.Vmx;
  const bool ExecuteOnly = P && P->EptExecuteOnly;
  const bool Pages1G = P && P->Ept1GPages;
  const bool Mbec = modeBasedExecute(C);
  const unsigned MaxPhys = C.Model.MaxPhysAddrBits;
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
    const uint64_t EAddr = Table | (((Gpa >> Shift) & 0x1ff) << 3);
    const uint64_t E = readEptEntry(C, EAddr);
    Used[NumUsed++] = EAddr;
    if (!(E & PresentBits)) {
      // SDM Vol. 3C, "EPT Violations": a not-present entry.
      W.Outcome = EptOutcome::Violation;
      W.Rights = 0;
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
      return W;
    }
    const uint64_t OffMask = (uint64_t(1) << Shift) - 1;
    W.Hpa = (E & PhysMask & ~OffMask) | (Gpa & OffMask);
    if (Ad) {
      // The accessed flag of every entry used, the dirty flag of the entry that maps
      // the page for a write (SDM Vol. 3C, "Accessed and Dirty Flags for EPT"). Set
      // only by a walk that completes: a walk that ends in a VM exit leaves the EPT
      // unchanged (vmxsim's choice within "may set").
      for (unsigned K = 0; K + 1 < NumUsed; ++K)
        setEptBits(C, Used[K], readEptEntry(C, Used[K]), Accessed);
      setEptBits(C, EAddr, E, Accessed | (IsWrite ? Dirty : 0));
    }
    return W;
  }
}

uint64_t eptViolationQualification(const Cpu &C, const EptWalk &W, uint64_t Eptp,
                                   const EptAccess &A) {
  namespace Q = exitqual::ept_violation;
  const bool Ad = Eptp & eptp::AccessedDirty;
  uint64_t V = 0;
  // A guest paging-structure access under EPT A/D is "treated as a write": the
  // processor sets both bit 0 and bit 1 (SDM Vol. 3C, Table "Exit Qualification for
  // EPT Violations", note 1).
  V = Q::DataRead.set(V, A.Kind == Access::Read || (Ad && A.PagingStructure));
  V = Q::DataWrite.set(V, A.Kind == Access::Write || (Ad && A.PagingStructure));
  V = Q::InstructionFetch.set(V, A.Kind == Access::Fetch);
  V = Q::Readable.set(V, (W.Rights & eptright::R) != 0);
  V = Q::Writeable.set(V, (W.Rights & eptright::W) != 0);
  V = Q::Executable.set(V, (W.Rights & eptright::X) != 0);
  if (modeBasedExecute(C))
    V = Q::UserModeExecutable.set(V, (W.Rights & eptright::UserX) != 0);
  V = Q::GuestLinearAddressValid.set(V, A.LinearValid);
  if (A.LinearValid)
    V = Q::TranslatedLinearAddress.set(V, !A.PagingStructure);
  return V;
}

Status eptTranslate(Cpu &C, uint64_t Gpa, const EptAccess &A, EptWalk &Out) {
  const uint64_t Eptp = C.Vmx->Vmcs.get(F::EptPointer);
  const bool Ad = Eptp & eptp::AccessedDirty;
  const bool IsWrite = A.Kind == Access::Write || (Ad && A.PagingStructure);
  // A cached guest-physical mapping of the current context serves any access it allows
  // and that needs no A/D update; anything else walks the EPT afresh, so violations,
  // misconfigurations and flag updates are always computed from the tables.
  EptCacheEntry &Cached = C.EptCache[(Gpa >> 12) & (kEptCacheEntries - 1)];
  if (Cached.GpaPage == ((Gpa & kPageMask) | 1) && Cached.Generation == C.TlbGeneration &&
      Cached.AccessedDirty == Ad && (!IsWrite || Cached.DirtyDone) &&
      eptAllows(modeBasedExecute(C), Cached.Rights, A, IsWrite)) {
    Out = EptWalk{};
    Out.Hpa = Cached.HpaPage | (Gpa & 0xfff);
    Out.Rights = Cached.Rights;
    Out.MemType = Cached.MemType;
    Out.IgnorePat = Cached.IgnorePat;
    Out.PageLevel = Cached.PageLevel;
    return Status::Ok;
  }
  Out = eptWalk(C, Eptp, Gpa, A);
  if (Out.Outcome == EptOutcome::Translated) [[likely]] {
    Cached = EptCacheEntry{(Gpa & kPageMask) | 1, Out.Hpa & kPageMask, C.TlbGeneration,
                           Out.Rights, Out.MemType, Out.PageLevel, Out.IgnorePat, Ad,
                           !Ad || IsWrite};
    return Status::Ok;
  }
  VmExitInfo Info;
  Info.GuestPhysicalAddress = Gpa;
  Info.GuestPhysicalValid = true;
  if (Out.Outcome == EptOutcome::Misconfiguration) {
    // SDM Vol. 3C, "EPT Misconfigurations": exit reason 49; the qualification is
    // undefined (0) and only the guest-physical address is reported.
    Info.Reason = ExitReason::EptMisconfiguration;
  } else {
    Info.Reason = ExitReason::EptViolation;
    Info.Qualification = eptViolationQualification(C, Out, Eptp, A);
    if (A.LinearValid) {
      Info.GuestLinearAddress = A.Gla;
      Info.GuestLinearValid = true;
    }
  }
  // Both are fault-like exits; during event delivery they report IDT-vectoring
  // information (SDM Vol. 3C, "Information for VM Exits That Occur During Event
  // Delivery").
  vmxFillIdtVectoring(C, Info);
  VmxEventState &E = C.Vmx->Events;
  // Bit 12, "NMI unblocking due to IRET": the EPT violation is a fault on an IRET that
  // unblocked NMIs, and not during event delivery (SDM Vol. 3C, "Exit Qualification
  // for EPT Violations"; same rule as for vectored events).
  if (Info.Reason == ExitReason::EptViolation && !E.DeliveringInfo &&
      E.IretNmiMark == C.Retired + 1)
    Info.Qualification = exitqual::ept_violation::NmiUnblockingDueToIret.set(
        Info.Qualification, 1);
  E.DeliveringInfo = E.DeliveringErrorCode = E.DeliveringInsnLength = 0;
  E.InjectingEvent = E.MtfPending = false;
  E.IretNmiMark = 0;
  return vmExit(C, Info);
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
