#include "cpu/translation.h"

#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "cpu/vmx/apic_virtualization.h"
#include "cpu/vmx/ept_translation.h"
#include "cpu/vmx/vmx_state.h"

namespace vmxsim {

namespace {

/// Guest paging-structure accesses under EPT, through C's guest-physical mapping cache.
class EptPagingStructures final : public PagingStructureTranslator {
public:
  explicit EptPagingStructures(Cpu &C) : C(C) {}
  EptWalk translate(Gpa Entry, const EptAccess &A) override {
    EptWalk W = eptTranslateNoExit(C, Entry, A);
    // A guest paging-structure access whose translation is on the APIC-access page
    // causes an APIC-access VM exit, below any EPT violation it would cause (SDM Vol.
    // 3C, "Guest-Physical Accesses to the APIC-Access Page").
    if (W.Outcome == EptOutcome::Translated && apicv::onApicAccessPage(C, W.Address))
      [[unlikely]]
      W.Outcome = EptOutcome::ApicAccess;
    return W;
  }

private:
  Cpu &C;
};

} // namespace

// The platform's A20M# (PhysMem::a20Mask): physical address bit 20 is forced to 0 while
// it is asserted (SDM Vol. 3A, "A20M#"), except in VMX operation, where VMXON "blocks and
// disables A20M" until VMXOFF (SDM Vol. 3C, VMXON—Enter VMX Operation).
uint64_t a20Mask(const Cpu &C) {
  return C.Vmx && C.Vmx->InVmxOperation ? ~uint64_t(0) : C.Mem.a20Mask();
}

PagingContext pagingContext(const Cpu &C) {
  const CpuState &S = C.S;
  PagingContext Ctx;
  Ctx.Cr3 = S.Cr3;
  Ctx.Paging = S.Cr0 & cr0::PG;
  Ctx.WriteProtect = S.Cr0 & cr0::WP;
  Ctx.Pse = S.Cr4 & cr4::PSE;
  Ctx.Pae = S.Cr4 & cr4::PAE;
  Ctx.Pge = S.Cr4 & cr4::PGE;
  Ctx.La57 = S.Cr4 & cr4::LA57;
  Ctx.Smep = S.Cr4 & cr4::SMEP;
  Ctx.Smap = S.Cr4 & cr4::SMAP;
  Ctx.LongMode = S.Efer & efer::LMA;
  Ctx.Nxe = S.Efer & efer::NXE;
  for (unsigned I = 0; I < 4; ++I)
    Ctx.Pdpte[I] = S.Pdpte[I];
  Ctx.Cpl3 = S.cpl() == 3;
  Ctx.Ac = S.Rflags & rflags::AC;
  Ctx.MaxPhysAddrBits = C.Model.MaxPhysAddrBits;
  Ctx.Page1G = C.Model.Page1G;
  Ctx.A20Mask = a20Mask(C);
  return Ctx;
}

Status translateLinear(Cpu &C, Gla La, Access Kind, bool User, Translation &Out) {
  const bool Ept = C.NonRoot && eptActive(C);
  EptPagingStructures Structures(C);
  const PagingWalk W =
      walkGuestPaging(C.Mem, pagingContext(C), La, Kind, User, Ept ? &Structures : nullptr);
  switch (W.Outcome) {
  case PagingOutcome::Translated:
    break;
  case PagingOutcome::PageFault:
    C.Pending = PendingEvent{vec::PF, true, W.ErrorCode, La.value()};
    return Status::Fault;
  case PagingOutcome::EptFault:
    if (W.Ept.Outcome == EptOutcome::ApicAccess)
      return apicv::guestPhysicalExit(C);
    return eptFaultExit(C, W.EptAddress, W.EptAccessKind, W.Ept);
  }
  Out = Translation{Hpa(W.Address.value() & a20Mask(C)), W.Writable, W.User, W.Executable,
                    W.Global};
  if (!Ept) [[likely]]
    return Status::Ok;
  // SDM Vol. 3C, "EPT Translation Mechanism": the guest's paging structures give the
  // guest-physical address (with CR0.PG = 0 the linear address is one), which EPT then
  // translates; the access needs the permission of both.
  EptWalk T;
  // A linear address is a user-mode address when U/S = 1 in every paging-structure entry
  // of its translation (SDM Vol. 3A, "Access Rights"); "if CR0.PG = 0, the translation
  // of every linear address is a user-mode linear address" (SDM Vol. 3C, Table "Exit
  // Qualification for EPT Violations", bit 9), and every one is read/write: the walker
  // reports User and ReadWrite as 1 then. That decides which execute bit of the EPT
  // entries a fetch needs with mode-based execute control (SDM Vol. 3C, "EPT
  // Violations").
  EptAccess A{Kind, false, true, La.value(), W.User};
  A.ReadWritePage = W.ReadWrite;
  A.ExecuteDisablePage = !W.Executable;
  VMX_TRY(eptTranslate(C, W.Address, A, T));
  Out.Pa = T.Address;
  // The combined permission: a later write through this mapping needs EPT's W too.
  Out.Writable = Out.Writable && (T.Rights & eptright::W);
  return Status::Ok;
}

Status loadPdptes(Cpu &C) {
  uint64_t Base = C.S.Cr3 & 0xffffffe0u & a20Mask(C);
  // In VMX non-root operation with EPT, CR3 is a guest-physical address: the PDPTE
  // load is a guest paging-structure access through EPT, with no guest-linear address
  // (SDM Vol. 3C, "EPT Violations"; Vol. 3A, PDPTE Registers).
  if (eptActive(C)) {
    EptWalk W;
    VMX_TRY(eptTranslate(C, Gpa(Base), EptAccess{Access::Read, true, false, 0, false}, W));
    // A PDPTE load is a guest-physical access ("Guest-Physical Accesses to the
    // APIC-Access Page").
    if (apicv::onApicAccessPage(C, W.Address))
      return apicv::guestPhysicalExit(C);
    Base = W.Address.value();
  }
  uint64_t E[4];
  if (!readPdptes(C.Mem, Hpa(Base), C.Model.MaxPhysAddrBits, E))
    return C.raiseGp(0);
  for (unsigned I = 0; I < 4; ++I)
    C.S.Pdpte[I] = E[I];
  return Status::Ok;
}

} // namespace vmxsim
