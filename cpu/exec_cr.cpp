// Control and debug registers: MOV to/from CRn and DRn, CLTS, LMSW, SMSW, XSETBV, XGETBV
// (SDM Vol. 2B, MOV—Move to/from Control Registers, MOV—Move to/from Debug Registers;
// Vol. 3A, Control Registers).
#include "cpu/cpu_model.h"
#include "cpu/cpuid.h"
#include "cpu/exec.h"
#include "cpu/msrs.h"
#include "cpu/vmx/nonroot.h"
#include "cpu/translation.h"

namespace vmxsim {

namespace {

// CR0 bits that exist; the others read as written-0 (ET reads 1).
constexpr uint64_t kCr0Bits = cr0::PE | cr0::MP | cr0::EM | cr0::TS | cr0::ET | cr0::NE |
                              cr0::WP | cr0::AM | cr0::NW | cr0::CD | cr0::PG;

bool pagingStructuresChanged(uint64_t Old, uint64_t New, uint64_t Bits) {
  return (Old ^ New) & Bits;
}

// PAE paging in use after the write: PDPTEs are (re)loaded when CR0.CD/NW/PG or
// CR4.PAE/PGE/PSE/SMEP change (SDM Vol. 3A, PDPTE Registers).
bool paePagingAfter(const CpuState &S, uint64_t Cr0, uint64_t Cr4) {
  return (Cr0 & cr0::PG) && (Cr4 & cr4::PAE) && !(S.Efer & efer::LME);
}

} // namespace

/// CR4 bits the model supports (SDM Vol. 3A, CR4; each gated by its CPUID bit).
uint64_t cr4ValidBits(const Cpu &C) {
  uint64_t V = cr4::VME | cr4::PVI | cr4::TSD | cr4::DE | cr4::PSE | cr4::PAE | cr4::MCE |
               cr4::PGE | cr4::PCE | cr4::OSFXSR | cr4::OSXMMEXCPT | cr4::UMIP |
               cr4::VMXE | cr4::FSGSBASE;
  if (C.Model.La57)
    V |= cr4::LA57;
  if (C.Model.Pcid)
    V |= cr4::PCIDE;
  if (modelHas(C, 1, 2, cpuidbit::Xsave))
    V |= cr4::OSXSAVE;
  if (C.Model.Smep)
    V |= cr4::SMEP;
  if (C.Model.Smap)
    V |= cr4::SMAP;
  return V;
}

Status writeCr0(Cpu &C, uint64_t V) {
  CpuState &S = C.S;
  // SDM Vol. 2B, MOV to CR0: #GP(0) for bits 63:32, PG without PE, NW without CD, PG
  // with LME and PAE clear, and clearing PG in 64-bit mode.
  if (V >> 32)
    return C.raiseGp(0);
  V = (V & kCr0Bits) | cr0::ET;
  if ((V & cr0::PG) && !(V & cr0::PE))
    return C.raiseGp(0);
  if ((V & cr0::NW) && !(V & cr0::CD))
    return C.raiseGp(0);
  const uint64_t Old = S.Cr0;
  const bool EnablingPaging = (V & cr0::PG) && !(Old & cr0::PG);
  if (EnablingPaging && (S.Efer & efer::LME)) {
    // Activating IA-32e mode (SDM Vol. 3A, IA-32e Mode Initialization): PAE must be on
    // and the current code segment must not be 64-bit (it cannot be yet) .
    if (!(S.Cr4 & cr4::PAE))
      return C.raiseGp(0);
    if (S.cs().Attr & Segment::L)
      return C.raiseGp(0);
  }
  if ((Old & cr0::PG) && !(V & cr0::PG) && S.in64BitMode())
    return C.raiseGp(0);
  if (paePagingAfter(S, V, S.Cr4) &&
      pagingStructuresChanged(Old, V, cr0::PG | cr0::CD | cr0::NW)) {
    // #GP(0) for reserved bits, or an EPT violation/misconfiguration exit; either way
    // nothing has been loaded.
    VMX_TRY(loadPdptes(C));
  }
  S.Cr0 = V;
  if (EnablingPaging && (S.Efer & efer::LME))
    S.Efer |= efer::LMA;
  if (!(V & cr0::PG))
    S.Efer &= ~efer::LMA;
  if (pagingStructuresChanged(Old, V, cr0::PG | cr0::WP | cr0::PE | cr0::CD))
    C.Mmu.flushTlb();
  C.modeChanged();
  return Status::Ok;
}

Status writeCr3(Cpu &C, uint64_t V) {
  CpuState &S = C.S;
  bool NoFlush = false;
  if (S.longMode()) {
    // Bit 63 with CR4.PCIDE=1 asks not to invalidate the PCID's translations (SDM Vol. 3A,
    // Process-Context Identifiers (PCIDs)); it is not stored.
    if (S.Cr4 & cr4::PCIDE) {
      NoFlush = V >> 63;
      V &= ~(uint64_t(1) << 63);
    }
    // Bits 62:MAXPHYADDR are reserved.
    if (V >> C.Model.MaxPhysAddrBits)
      return C.raiseGp(0);
  } else {
    V = uint32_t(V);
  }
  const uint64_t Old = S.Cr3;
  S.Cr3 = V;
  if ((S.Cr0 & cr0::PG) && (S.Cr4 & cr4::PAE) && !S.longMode()) {
    if (Status St = loadPdptes(C); St != Status::Ok) {
      S.Cr3 = Old;
      return St;
    }
  }
  // With CR4.PCIDE = 1 and bit 63 set, the processor may keep the translations cached for
  // the new CR3's PCID (SDM Vol. 3A, "Process-Context Identifiers (PCIDs)"; Vol. 2B, MOV
  // to/from Control Registers). The TLB here keeps no PCID or global tags: what it holds
  // belongs to the old CR3, so keeping it is right only when CR3 does not change; any
  // other write flushes (a flush is always allowed). Skipping the flush on every bit-63
  // write ran a new process on the previous one's translations (Linux with PCID).
  if (!NoFlush || V != Old)
    C.Mmu.flushTlb();
  C.breakBlock();
  return Status::Ok;
}

Status writeCr4(Cpu &C, uint64_t V) {
  CpuState &S = C.S;
  if (V & ~cr4ValidBits(C))
    return C.raiseGp(0);
  const uint64_t Old = S.Cr4;
  // SDM Vol. 2B, MOV to CR4: #GP(0) when clearing PAE in IA-32e mode, setting PCIDE
  // outside IA-32e mode or with CR3[11:0] != 0, or changing LA57 in IA-32e mode.
  if (S.longMode() && !(V & cr4::PAE))
    return C.raiseGp(0);
  if ((V & cr4::PCIDE) && !(Old & cr4::PCIDE) && (!S.longMode() || (S.Cr3 & 0xfff)))
    return C.raiseGp(0);
  if (S.longMode() && ((Old ^ V) & cr4::LA57))
    return C.raiseGp(0);
  constexpr uint64_t TlbBits = cr4::PGE | cr4::PSE | cr4::PAE | cr4::PCIDE | cr4::SMEP |
                               cr4::SMAP | cr4::PKE | cr4::LA57;
  if (paePagingAfter(S, S.Cr0, V) &&
      pagingStructuresChanged(Old, V, cr4::PAE | cr4::PGE | cr4::PSE | cr4::SMEP)) {
    // #GP(0) for reserved bits, or an EPT violation/misconfiguration exit; either way
    // nothing has been loaded.
    VMX_TRY(loadPdptes(C));
  }
  S.Cr4 = V;
  if (pagingStructuresChanged(Old, V, TlbBits))
    C.Mmu.flushTlb();
  if ((Old ^ V) & cr4::DE)
    debugRegistersChanged(C); // CR4.DE defines R/W = 10b as I/O breakpoints
  C.modeChanged();
  return Status::Ok;
}

namespace {

Status readCr(Cpu &C, unsigned N, uint64_t &V) {
  const CpuState &S = C.S;
  switch (N) {
  case 0: V = S.Cr0; return Status::Ok;
  case 2: V = S.Cr2; return Status::Ok;
  case 3: V = S.Cr3; return Status::Ok;
  case 4: V = S.Cr4; return Status::Ok;
  case 8: V = S.Cr8; return Status::Ok;
  default: return C.raiseUd();
  }
}

Status writeCr(Cpu &C, unsigned N, uint64_t V) {
  switch (N) {
  case 0: return writeCr0(C, V);
  case 2: C.S.Cr2 = V; return Status::Ok;
  case 3: return writeCr3(C, V);
  case 4: return writeCr4(C, V);
  case 8:
    // CR8 is the TPR (SDM Vol. 3A, Task Priority in IA-32e Mode): bits 63:4 reserved.
    if (V >> 4)
      return C.raiseGp(0);
    C.S.Cr8 = V;
    C.breakBlock(); // a lower priority may unmask a pending interrupt
    return Status::Ok;
  default: return C.raiseUd();
  }
}

// Operand width of MOV CR/DR: 64 bits in 64-bit mode, else 32 (the operand-size prefix
// is ignored).
void setCrOperand(Cpu &C, uint8_t R, uint64_t V) {
  if (C.S.in64BitMode())
    C.S.Gpr[R] = V;
  else
    C.S.Gpr[R] = uint32_t(V);
}
uint64_t crOperand(const Cpu &C, uint8_t R) {
  return C.S.in64BitMode() ? C.S.Gpr[R] : uint32_t(C.S.Gpr[R]);
}

// MOV to/from CRn: Reg[0] destination, Reg[1] source; Cond holds the CR number. In VMX
// non-root operation the CR-access exits come after the CPL check (cpu/vmx/nonroot.cpp).
template <bool ToCr> Status execMovCr(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  if constexpr (ToCr) {
    uint64_t V = crOperand(C, I.Reg[1]);
    if (C.NonRoot) [[unlikely]] {
      bool Done = false;
      VMX_TRY(nonroot::onMovToCr(C, I, I.Cond, V, Done));
      if (Done)
        return Status::Ok;
    }
    VMX_TRY(writeCr(C, I.Cond, V));
  } else {
    uint64_t V;
    VMX_TRY(readCr(C, I.Cond, V));
    if (C.NonRoot) [[unlikely]]
      VMX_TRY(nonroot::onMovFromCr(C, I, I.Cond, V));
    setCrOperand(C, I.Reg[0], V);
  }
  return next(C, I);
}

// MOV to/from DRn (SDM Vol. 3A, Debug Registers): CR4.DE makes DR4/DR5 #UD, otherwise
// they alias DR6/DR7; DR7.GD turns the access into a #DB fault with DR6.BD set.
template <bool ToDr> Status execMovDr(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onMovDr(C, I, ToDr));
  unsigned N = I.Cond;
  if (N == 4 || N == 5) {
    if (S.Cr4 & cr4::DE)
      return C.raiseUd();
    N += 2;
  }
  if (S.cpl() != 0)
    return C.raiseGp(0);
  if (S.Dr[7] & dr7::GD) {
    // General detect: a #DB fault with DR6.BD; DR6 and DR7.GD change as the #DB is
    // delivered (cpu/exceptions.cpp), not when the exception bitmap makes it a VM exit.
    C.Pending = PendingEvent{vec::DB, false, 0, dr6::BD};
    return Status::Fault;
  }
  if constexpr (ToDr) {
    uint64_t V = crOperand(C, I.Reg[1]);
    if ((N == 6 || N == 7) && (V >> 32))
      return C.raiseGp(0);
    if (N == 6)
      V = (V & 0xe00f) | dr6::FixedOnes; // reserved bits read as 1 (bit 16 too: no RTM)
    else if (N == 7)
      V = (V & 0xffff23ff) | 0x400;
    S.Dr[N] = V;
    if (N != 6)
      debugRegistersChanged(C); // DR0-DR3 and DR7 arm breakpoints (cpu/debug.h)
  } else {
    setCrOperand(C, I.Reg[0], S.Dr[N]);
  }
  return next(C, I);
}

Status execClts(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  if (C.NonRoot) [[unlikely]] {
    bool LeaveTs = false;
    VMX_TRY(nonroot::onClts(C, I, LeaveTs));
    if (LeaveTs)
      return next(C, I);
  }
  C.S.Cr0 &= ~cr0::TS;
  return next(C, I);
}

// LMSW loads CR0[3:0] but can only set PE, never clear it (SDM Vol. 2A, LMSW).
template <bool IsMem> Status execLmsw(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  uint16_t V;
  VMX_TRY((readOp<uint16_t, IsMem>(C, I, V)));
  uint64_t New = (C.S.Cr0 & ~uint64_t(0xe)) | (V & 0xf) | (C.S.Cr0 & cr0::PE);
  // The LMSW exit depends on the operand, so operand faults come first (SDM Vol. 3C,
  // "Relative Priority of Faults and VM Exits").
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onLmsw(C, I, V, New));
  VMX_TRY(writeCr0(C, New));
  return next(C, I);
}

// SMSW (SDM Vol. 2B, SMSW): CR4.UMIP makes it #GP(0) above CPL 0. Register destinations
// take the full operand size; memory gets 16 bits. In VMX non-root operation it reads
// CR0 through the read shadow (SDM Vol. 3C, "Changes to Instruction Behavior in VMX
// Non-Root Operation" > SMSW).
template <typename T, bool IsMem> Status execSmsw(Cpu &C, const DecodedInsn &I) {
  if ((C.S.Cr4 & cr4::UMIP) && C.S.cpl() > 0)
    return C.raiseGp(0);
  uint64_t Cr0 = C.S.Cr0;
  if (C.NonRoot) [[unlikely]]
    Cr0 = nonroot::guestCr0(C);
  if constexpr (IsMem)
    VMX_TRY(writeMem(C, SegReg(I.Seg), effectiveAddress(C, I), uint16_t(Cr0)));
  else
    setReg<T>(C, I.Reg[0], T(Cr0));
  return next(C, I);
}

// XSETBV/XGETBV (SDM Vol. 2C): #UD without CR4.OSXSAVE; XCR0 bit 0 must stay set and
// only supported components may be enabled.
Status execXsetbv(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  if (!(S.Cr4 & cr4::OSXSAVE))
    return C.raiseUd();
  if (S.cpl() != 0)
    return C.raiseGp(0);
  // XSETBV exits unconditionally, after the #UD and CPL checks (SDM Vol. 3C,
  // "Instructions That Cause VM Exits Unconditionally").
  if (C.NonRoot) [[unlikely]]
    return nonroot::onXsetbv(C, I);
  if (uint32_t(S.Gpr[RCX]) != 0)
    return C.raiseGp(0);
  uint64_t V = (uint64_t(uint32_t(S.Gpr[RDX])) << 32) | uint32_t(S.Gpr[RAX]);
  if (!(V & 1) || (V & ~kSupportedXcr0))
    return C.raiseGp(0);
  S.Xcr0 = V;
  return next(C, I);
}
Status execXgetbv(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  if (!(S.Cr4 & cr4::OSXSAVE))
    return C.raiseUd();
  if (uint32_t(S.Gpr[RCX]) != 0)
    return C.raiseGp(0);
  S.Gpr[RAX] = uint32_t(S.Xcr0);
  S.Gpr[RDX] = uint32_t(S.Xcr0 >> 32);
  return next(C, I);
}

} // namespace

/// MOV forms with a CR or DR operand (called from bindMovSystem).
bool bindMovCrDr(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &Dst = D.Ops[0], &Src = D.Ops[1];
  if (D.Prefixes & insnflag::Lock)
    return false;
  copyOperandRegs(D, I);
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::System);
  if (Dst.Class == RegClass::Cr) {
    I.Cond = Dst.Reg;
    I.Fn = &execMovCr<true>;
  } else if (Src.Class == RegClass::Cr) {
    I.Cond = Src.Reg;
    I.Fn = &execMovCr<false>;
  } else if (Dst.Class == RegClass::Dr) {
    I.Cond = Dst.Reg;
    I.Fn = &execMovDr<true>;
  } else {
    I.Cond = Src.Reg;
    I.Fn = &execMovDr<false>;
  }
  return true;
}

bool bindClts(const DecodeInfo &, DecodedInsn &I) {
  I.Fn = &execClts;
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::System);
  return true;
}
bool bindLmsw(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  I.Fn = D.Ops[0].Kind == OperandKind::Mem ? &execLmsw<true> : &execLmsw<false>;
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::System);
  return true;
}
bool bindSmsw(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  I.Fn = D.Ops[0].Kind == OperandKind::Mem ? &execSmsw<uint16_t, true>
                                           : VMX_BY_SIZE(D.Ops[0].SizeBytes, execSmsw, false);
  I.Cost = costOf(CostClass::System);
  return true;
}
bool bindXsetbv(const DecodeInfo &, DecodedInsn &I) {
  I.Fn = &execXsetbv;
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::Serializing);
  return true;
}
bool bindXgetbv(const DecodeInfo &, DecodedInsn &I) {
  I.Fn = &execXgetbv;
  I.Cost = costOf(CostClass::System);
  return true;
}

} // namespace vmxsim
