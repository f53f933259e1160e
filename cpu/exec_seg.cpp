// Segment registers and descriptor tables: MOV/PUSH/POP Sreg, LDS/LES/LFS/LGS/LSS,
// LGDT/LIDT/SGDT/SIDT, LLDT/LTR/SLDT/STR, LAR/LSL/VERR/VERW, SWAPGS and
// RDFSBASE/RDGSBASE/WRFSBASE/WRGSBASE (SDM Vol. 2, the instruction page of each).
#include "cpu/exec.h"
#include "cpu/msrs.h"
#include "cpu/segmentation.h"
#include "cpu/vmx/nonroot.h"

namespace vmxsim {

bool bindMovCrDr(const DecodeInfo &D, DecodedInsn &I);

namespace {

bool protectedMode(const Cpu &C) {
  return (C.S.Cr0 & cr0::PE) && !(C.S.Rflags & rflags::VM);
}

// MOV SS / POP SS inhibit interrupts until the end of the next instruction (SDM Vol. 3A,
// Masking Maskable Hardware Interrupts; Vol. 2B, MOV). Retired is incremented once for
// this instruction, so the window after the next one is at Retired + 2.
void setStackShadow(Cpu &C) {
  C.ShadowUntil = C.Retired + 2;
  C.ShadowIsMovSs = true; // "blocking by MOV SS" (SDM Vol. 3C, Interruptibility State)
  C.breakBlock();
}

// --- MOV Sreg ---------------------------------------------------------------------

template <bool IsMem> Status execMovToSreg(Cpu &C, const DecodedInsn &I) {
  uint16_t Sel;
  VMX_TRY((readOp<uint16_t, IsMem, 1>(C, I, Sel)));
  SegReg R = SegReg(I.Cond);
  VMX_TRY(loadSegment(C, R, Sel));
  if (R == SegReg::SS)
    setStackShadow(C);
  return next(C, I);
}

// MOV r/m, Sreg: register destinations zero-extend the selector (32/64-bit operand);
// memory destinations are always 16 bits.
template <typename T, bool IsMem> Status execMovFromSreg(Cpu &C, const DecodedInsn &I) {
  uint16_t Sel = C.S.seg(SegReg(I.Cond)).Selector;
  if constexpr (IsMem)
    VMX_TRY(writeMem(C, SegReg(I.Seg), effectiveAddress(C, I), Sel));
  else
    setReg<T>(C, I.Reg[0], T(Sel));
  return next(C, I);
}

// PUSH Sreg: recent Intel processors write 16 bits and leave the rest of a 32/64-bit slot
// unchanged (SDM Vol. 2B, PUSH).
template <typename T> Status execPushSeg(Cpu &C, const DecodedInsn &I) {
  unsigned Sas = stackAddrSize(C);
  uint64_t NewSp = maskToSize(C.S.Gpr[RSP] - sizeof(T), Sas);
  VMX_TRY(writeMem(C, SegReg::SS, NewSp, C.S.seg(SegReg(I.Cond)).Selector));
  setStackPointer(C, NewSp);
  return next(C, I);
}

template <typename T> Status execPopSeg(Cpu &C, const DecodedInsn &I) {
  T V;
  VMX_TRY(peek(C, V));
  // The increment uses the stack size in force before SS changes.
  unsigned Sas = stackAddrSize(C);
  uint64_t NewSp = maskToSize(C.S.Gpr[RSP] + sizeof(T), Sas);
  SegReg R = SegReg(I.Cond);
  VMX_TRY(loadSegment(C, R, uint16_t(V)));
  if (Sas == 8)
    C.S.Gpr[RSP] = NewSp;
  else if (Sas == 4)
    C.S.Gpr[RSP] = uint32_t(NewSp);
  else
    C.S.Gpr[RSP] = (C.S.Gpr[RSP] & ~uint64_t(0xffff)) | uint16_t(NewSp);
  if (R == SegReg::SS)
    setStackShadow(C);
  return next(C, I);
}

// LDS/LES/LFS/LGS/LSS r, m16:xx (SDM Vol. 2A, LDS/LES/LFS/LGS/LSS).
template <typename T> Status execLoadFarPointer(Cpu &C, const DecodedInsn &I) {
  uint64_t Ea = effectiveAddress(C, I);
  T Off;
  uint16_t Sel;
  VMX_TRY(readMem(C, SegReg(I.Seg), Ea, Off));
  VMX_TRY(readMem(C, SegReg(I.Seg), maskToSize(Ea + sizeof(T), I.AddrSize), Sel));
  VMX_TRY(loadSegment(C, SegReg(I.Cond), Sel));
  setReg<T>(C, I.Reg[0], Off);
  return next(C, I);
}

// --- descriptor-table registers -------------------------------------------------------

struct [[gnu::packed]] TableImage64 {
  uint16_t Limit;
  uint64_t Base;
};
struct [[gnu::packed]] TableImage32 {
  uint16_t Limit;
  uint32_t Base;
};

// LGDT/LIDT (SDM Vol. 2A, LGDT/LIDT): 8-byte base in 64-bit mode, else 4 bytes of which
// a 16-bit operand size keeps 24.
// In VMX non-root operation LGDT/LIDT/SGDT/SIDT and LLDT/LTR/SLDT/STR exit with
// "descriptor-table exiting" after their #UD and privilege (CPL, UMIP) checks and before
// any memory access (SDM Vol. 3C, "Instructions That Cause VM Exits Conditionally").
template <bool Idt> Status execLoadTable(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onGdtrIdtrAccess(C, I, Idt ? nonroot::GdtrIdtrInsn::Lidt
                                                 : nonroot::GdtrIdtrInsn::Lgdt));
  uint64_t Ea = effectiveAddress(C, I);
  TableReg T;
  if (C.S.in64BitMode()) {
    TableImage64 Img;
    VMX_TRY(readMem(C, SegReg(I.Seg), Ea, Img));
    if (!isCanonical(C, Img.Base))
      return C.raiseGp(0);
    T = TableReg{Img.Base, Img.Limit};
  } else {
    TableImage32 Img;
    VMX_TRY(readMem(C, SegReg(I.Seg), Ea, Img));
    T = TableReg{I.OpSize == 2 ? (Img.Base & 0xffffff) : Img.Base, Img.Limit};
  }
  (Idt ? C.S.Idtr : C.S.Gdtr) = T;
  return next(C, I);
}

// SGDT/SIDT (SDM Vol. 2B): CR4.UMIP makes them #GP(0) above CPL 0; a 16-bit operand
// size stores a 24-bit base and a zero sixth byte.
template <bool Idt> Status execStoreTable(Cpu &C, const DecodedInsn &I) {
  if ((C.S.Cr4 & cr4::UMIP) && C.S.cpl() > 0)
    return C.raiseGp(0);
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onGdtrIdtrAccess(C, I, Idt ? nonroot::GdtrIdtrInsn::Sidt
                                                 : nonroot::GdtrIdtrInsn::Sgdt));
  const TableReg &T = Idt ? C.S.Idtr : C.S.Gdtr;
  uint64_t Ea = effectiveAddress(C, I);
  if (C.S.in64BitMode())
    VMX_TRY(writeMem(C, SegReg(I.Seg), Ea, TableImage64{T.Limit, T.Base}));
  else
    VMX_TRY(writeMem(C, SegReg(I.Seg), Ea,
                     TableImage32{T.Limit, uint32_t(I.OpSize == 2 ? T.Base & 0xffffff
                                                                  : T.Base)}));
  return next(C, I);
}

// The base of a 16-byte system descriptor in IA-32e mode (SDM Vol. 3A, Segment Descriptor
// Tables: LDT and TSS descriptors in 64-bit mode).
Status systemDescriptorBase(Cpu &C, uint16_t Sel, uint64_t Lo, uint64_t &Base) {
  Base = desc::base(Lo);
  if (!C.S.longMode())
    return Status::Ok;
  uint64_t Hi;
  VMX_TRY(readDescriptorHigh(C, Sel, Hi));
  if ((Hi >> 40) & 0x1f)
    return C.raiseGp(selectorError(Sel));
  Base |= (Hi & 0xffffffffull) << 32;
  if (!isCanonical(C, Base))
    return C.raiseGp(selectorError(Sel));
  return Status::Ok;
}

// LLDT (SDM Vol. 2A): the selector must name an LDT descriptor in the GDT.
template <bool IsMem> Status execLldt(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onLdtrTrAccess(C, I, nonroot::LdtrTrInsn::Lldt));
  uint16_t Sel;
  VMX_TRY((readOp<uint16_t, IsMem>(C, I, Sel)));
  if ((Sel & 0xfffc) == 0) {
    C.S.Ldtr = Segment{Sel, 0, 0, Segment::Unusable};
    return next(C, I);
  }
  if (Sel & 4)
    return C.raiseGp(selectorError(Sel));
  uint64_t Lo;
  VMX_TRY(readDescriptor(C, Sel, Lo));
  if (!desc::isSystem(Lo) || desc::type(Lo) != desc::Ldt)
    return C.raiseGp(selectorError(Sel));
  if (!desc::present(Lo))
    return C.raise(vec::NP, selectorError(Sel));
  uint64_t Base;
  VMX_TRY(systemDescriptorBase(C, Sel, Lo, Base));
  Segment L = segmentFromDescriptor(Sel, Lo);
  L.Base = Base;
  C.S.Ldtr = L;
  return next(C, I);
}

// LTR (SDM Vol. 2A): an available TSS in the GDT, marked busy as it is loaded.
template <bool IsMem> Status execLtr(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onLdtrTrAccess(C, I, nonroot::LdtrTrInsn::Ltr));
  uint16_t Sel;
  VMX_TRY((readOp<uint16_t, IsMem>(C, I, Sel)));
  if ((Sel & 0xfffc) == 0)
    return C.raiseGp(0);
  if (Sel & 4)
    return C.raiseGp(selectorError(Sel));
  uint64_t Lo;
  VMX_TRY(readDescriptor(C, Sel, Lo));
  unsigned Type = desc::type(Lo);
  bool Available = C.S.longMode() ? Type == desc::Tss32Avail
                                  : (Type == desc::Tss32Avail || Type == desc::Tss16Avail);
  if (!desc::isSystem(Lo) || !Available)
    return C.raiseGp(selectorError(Sel));
  if (!desc::present(Lo))
    return C.raise(vec::NP, selectorError(Sel));
  uint64_t Base;
  VMX_TRY(systemDescriptorBase(C, Sel, Lo, Base));
  uint8_t Byte5 = uint8_t(Lo >> 40) | 2; // busy
  VMX_TRY(writeLinear(C, (C.S.Gdtr.Base + (Sel & 0xfff8) + 5) &
                             (C.S.longMode() ? ~uint64_t(0) : 0xffffffffull),
                      Byte5, true));
  Segment T = segmentFromDescriptor(Sel, Lo | (uint64_t(2) << 40));
  T.Base = Base;
  C.S.Tr = T;
  return next(C, I);
}

// SLDT/STR (SDM Vol. 2B): CR4.UMIP makes them #GP(0) above CPL 0.
template <typename T, bool IsMem, bool IsTr> Status execStoreSel(Cpu &C, const DecodedInsn &I) {
  if ((C.S.Cr4 & cr4::UMIP) && C.S.cpl() > 0)
    return C.raiseGp(0);
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onLdtrTrAccess(C, I, IsTr ? nonroot::LdtrTrInsn::Str
                                               : nonroot::LdtrTrInsn::Sldt));
  uint16_t Sel = IsTr ? C.S.Tr.Selector : C.S.Ldtr.Selector;
  if constexpr (IsMem)
    VMX_TRY(writeMem(C, SegReg(I.Seg), effectiveAddress(C, I), Sel));
  else
    setReg<T>(C, I.Reg[0], T(Sel));
  return next(C, I);
}

// --- LAR, LSL, VERR, VERW (SDM Vol. 2A/2B; Vol. 3A, Checking Access Rights / Checking
// Segment Limits) -----------------------------------------------------------------------

enum class Probe : uint8_t { Lar, Lsl, Verr, Verw };

// Looks up the descriptor without faulting on table limits; Ok with Found=false means
// "clear ZF".
Status probeSelector(Cpu &C, uint16_t Sel, Probe P, uint64_t &Lo, bool &Found) {
  Found = false;
  if ((Sel & 0xfffc) == 0 || !selectorInTable(C, Sel))
    return Status::Ok;
  VMX_TRY(readDescriptor(C, Sel, Lo));
  unsigned Cpl = C.S.cpl(), Rpl = Sel & 3, Dpl = desc::dpl(Lo);
  if (desc::isSystem(Lo)) {
    if (P == Probe::Verr || P == Probe::Verw)
      return Status::Ok;
    unsigned T = desc::type(Lo);
    bool Valid;
    if (C.S.longMode())
      Valid = T == desc::Ldt || T == desc::Tss32Avail || T == desc::Tss32Busy ||
              (P == Probe::Lar && T == desc::CallGate32);
    else
      Valid = T == desc::Tss16Avail || T == desc::Ldt || T == desc::Tss16Busy ||
              T == desc::Tss32Avail || T == desc::Tss32Busy ||
              (P == Probe::Lar && (T == desc::CallGate16 || T == desc::TaskGate ||
                                   T == desc::CallGate32));
    if (!Valid)
      return Status::Ok;
    if (C.S.longMode()) {
      if (!selectorInTable(C, Sel, 16))
        return Status::Ok;
      uint64_t Hi;
      VMX_TRY(readDescriptorHigh(C, Sel, Hi));
      if ((Hi >> 40) & 0x1f)
        return Status::Ok;
    }
    if (Dpl < Cpl || Dpl < Rpl)
      return Status::Ok;
    Found = true;
    return Status::Ok;
  }
  if (P == Probe::Verr && !desc::readable(Lo))
    return Status::Ok;
  if (P == Probe::Verw && !desc::writableData(Lo))
    return Status::Ok;
  if (!desc::conforming(Lo) && (Dpl < Cpl || Dpl < Rpl))
    return Status::Ok;
  Found = true;
  return Status::Ok;
}

template <typename T, bool IsMem, Probe P> Status execProbe(Cpu &C, const DecodedInsn &I) {
  if (!protectedMode(C))
    return C.raiseUd();
  uint16_t Sel;
  VMX_TRY((readOp<uint16_t, IsMem, 1>(C, I, Sel)));
  uint64_t Lo = 0;
  bool Found;
  VMX_TRY(probeSelector(C, Sel, P, Lo, Found));
  if (!Found) {
    C.S.Rflags &= ~rflags::ZF;
    return next(C, I);
  }
  C.S.Rflags |= rflags::ZF;
  if constexpr (P == Probe::Lar)
    setReg<T>(C, I.Reg[0], T((Lo >> 32) & (sizeof(T) == 2 ? 0xff00 : 0x00f0ff00)));
  else if constexpr (P == Probe::Lsl)
    setReg<T>(C, I.Reg[0], T(desc::limit(Lo)));
  return next(C, I);
}
template <bool IsMem, Probe P> Status execVerify(Cpu &C, const DecodedInsn &I) {
  if (!protectedMode(C))
    return C.raiseUd();
  uint16_t Sel;
  VMX_TRY((readOp<uint16_t, IsMem>(C, I, Sel)));
  uint64_t Lo = 0;
  bool Found;
  VMX_TRY(probeSelector(C, Sel, P, Lo, Found));
  if (Found)
    C.S.Rflags |= rflags::ZF;
  else
    C.S.Rflags &= ~rflags::ZF;
  return next(C, I);
}

// --- SWAPGS, FS/GS base ---------------------------------------------------------------

Status execSwapgs(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  uint64_t &Kernel = (*C.Msrs)[MsrSlot::IA32_KERNEL_GS_BASE];
  uint64_t Gs = C.S.seg(SegReg::GS).Base;
  C.S.seg(SegReg::GS).Base = Kernel;
  Kernel = Gs;
  return next(C, I);
}

// RDFSBASE etc. (SDM Vol. 2C): #UD unless CR4.FSGSBASE; writes must be canonical.
template <typename T, bool Write, SegReg R> Status execFsGsBase(Cpu &C, const DecodedInsn &I) {
  if (!(C.S.Cr4 & cr4::FSGSBASE))
    return C.raiseUd();
  if constexpr (Write) {
    uint64_t V = getReg<T>(C, I.Reg[0]);
    if (!isCanonical(C, V))
      return C.raiseGp(0);
    C.S.seg(R).Base = V;
  } else {
    setReg<T>(C, I.Reg[0], T(C.S.seg(R).Base));
  }
  return next(C, I);
}

void bindCost(DecodedInsn &I, CostClass Cost, bool Ends = false) {
  I.Cost = costOf(Cost);
  if (Ends)
    I.Flags |= insnflag::EndsBlock;
}

template <Probe P> bool bindProbe(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Mode == CodeMode::Real16)
    return false; // #UD in real-address mode (virtual-8086 mode: checked at run time)
  copyOperandRegs(D, I);
  bindCost(I, CostClass::System);
  if constexpr (P == Probe::Lar || P == Probe::Lsl) {
    bool Mem = D.Ops[1].Kind == OperandKind::Mem;
    unsigned Size = D.Ops[0].SizeBytes;
    if (Mem)
      I.Fn = Size == 2 ? &execProbe<uint16_t, true, P>
             : Size == 4 ? &execProbe<uint32_t, true, P>
                         : &execProbe<uint64_t, true, P>;
    else
      I.Fn = Size == 2 ? &execProbe<uint16_t, false, P>
             : Size == 4 ? &execProbe<uint32_t, false, P>
                         : &execProbe<uint64_t, false, P>;
  } else {
    I.Fn = D.Ops[0].Kind == OperandKind::Mem ? &execVerify<true, P> : &execVerify<false, P>;
  }
  return true;
}

} // namespace

// Virtual-8086 mode makes the protected-mode-only instructions #UD; the binder cannot
// see VM (it decodes as Real16), so those handlers re-check below through this wrapper.
template <Handler Fn> Status execProtectedOnly(Cpu &C, const DecodedInsn &I) {
  if (!protectedMode(C))
    return C.raiseUd();
  return Fn(C, I);
}

bool bindMovSystem(const DecodeInfo &D, DecodedInsn &I) {
  const OperandInfo &Dst = D.Ops[0], &Src = D.Ops[1];
  bool DstSys = Dst.Kind == OperandKind::Reg && Dst.Class != RegClass::Gpr;
  bool SrcSys = Src.Kind == OperandKind::Reg && Src.Class != RegClass::Gpr;
  if ((DstSys && (Dst.Class == RegClass::Cr || Dst.Class == RegClass::Dr)) ||
      (SrcSys && (Src.Class == RegClass::Cr || Src.Class == RegClass::Dr)))
    return bindMovCrDr(D, I);
  if (D.Prefixes & insnflag::Lock)
    return false;
  copyOperandRegs(D, I);
  if (DstSys && Dst.Class == RegClass::Seg) {
    if (SegReg(Dst.Reg) == SegReg::CS || Dst.Reg >= kNumSegRegs)
      return false; // MOV CS is #UD (SDM Vol. 2B, MOV)
    I.Cond = Dst.Reg;
    I.Fn = Src.Kind == OperandKind::Mem ? &execMovToSreg<true> : &execMovToSreg<false>;
    bindCost(I, CostClass::System, SegReg(Dst.Reg) == SegReg::SS);
    return true;
  }
  if (SrcSys && Src.Class == RegClass::Seg && Src.Reg < kNumSegRegs) {
    I.Cond = Src.Reg;
    if (Dst.Kind == OperandKind::Mem)
      I.Fn = &execMovFromSreg<uint16_t, true>;
    else
      I.Fn = VMX_BY_SIZE(Dst.SizeBytes, execMovFromSreg, false);
    bindCost(I, CostClass::Simple);
    return true;
  }
  return false;
}

bool bindPushSeg(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Ops[0].Class != RegClass::Seg || D.Ops[0].Reg >= kNumSegRegs)
    return false;
  I.Cond = D.Ops[0].Reg;
  I.Fn = D.OpSize == 2 ? &execPushSeg<uint16_t>
         : D.OpSize == 4 ? &execPushSeg<uint32_t>
                         : &execPushSeg<uint64_t>;
  bindCost(I, CostClass::Memory);
  return true;
}

bool bindPopSeg(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Ops[0].Class != RegClass::Seg || D.Ops[0].Reg >= kNumSegRegs ||
      SegReg(D.Ops[0].Reg) == SegReg::CS)
    return false;
  I.Cond = D.Ops[0].Reg;
  I.Fn = D.OpSize == 2 ? &execPopSeg<uint16_t>
         : D.OpSize == 4 ? &execPopSeg<uint32_t>
                         : &execPopSeg<uint64_t>;
  bindCost(I, CostClass::System, SegReg(D.Ops[0].Reg) == SegReg::SS);
  return true;
}

template <SegReg R> bool bindLoadFarPointer(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Ops[1].Kind != OperandKind::Mem)
    return false;
  copyOperandRegs(D, I);
  I.Cond = uint8_t(R);
  unsigned Size = D.Ops[0].SizeBytes;
  I.Fn = Size == 2 ? &execLoadFarPointer<uint16_t>
         : Size == 4 ? &execLoadFarPointer<uint32_t>
                     : &execLoadFarPointer<uint64_t>;
  bindCost(I, CostClass::System, R == SegReg::SS);
  return true;
}
bool bindLds(const DecodeInfo &D, DecodedInsn &I) { return bindLoadFarPointer<SegReg::DS>(D, I); }
bool bindLes(const DecodeInfo &D, DecodedInsn &I) { return bindLoadFarPointer<SegReg::ES>(D, I); }
bool bindLfs(const DecodeInfo &D, DecodedInsn &I) { return bindLoadFarPointer<SegReg::FS>(D, I); }
bool bindLgs(const DecodeInfo &D, DecodedInsn &I) { return bindLoadFarPointer<SegReg::GS>(D, I); }
bool bindLss(const DecodeInfo &D, DecodedInsn &I) { return bindLoadFarPointer<SegReg::SS>(D, I); }

bool bindLgdt(const DecodeInfo &D, DecodedInsn &I) {
  bindCost(I, CostClass::System, true);
  I.Fn = &execLoadTable<false>;
  return D.Ops[0].Kind == OperandKind::Mem;
}
bool bindLidt(const DecodeInfo &D, DecodedInsn &I) {
  bindCost(I, CostClass::System, true);
  I.Fn = &execLoadTable<true>;
  return D.Ops[0].Kind == OperandKind::Mem;
}
bool bindSgdt(const DecodeInfo &D, DecodedInsn &I) {
  bindCost(I, CostClass::System);
  I.Fn = &execStoreTable<false>;
  return D.Ops[0].Kind == OperandKind::Mem;
}
bool bindSidt(const DecodeInfo &D, DecodedInsn &I) {
  bindCost(I, CostClass::System);
  I.Fn = &execStoreTable<true>;
  return D.Ops[0].Kind == OperandKind::Mem;
}
bool bindLldt(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Mode == CodeMode::Real16)
    return false;
  copyOperandRegs(D, I);
  bindCost(I, CostClass::System, true);
  I.Fn = D.Ops[0].Kind == OperandKind::Mem ? &execProtectedOnly<&execLldt<true>>
                                           : &execProtectedOnly<&execLldt<false>>;
  return true;
}
bool bindLtr(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Mode == CodeMode::Real16)
    return false;
  copyOperandRegs(D, I);
  bindCost(I, CostClass::System, true);
  I.Fn = D.Ops[0].Kind == OperandKind::Mem ? &execProtectedOnly<&execLtr<true>>
                                           : &execProtectedOnly<&execLtr<false>>;
  return true;
}
template <bool IsTr> bool bindStoreSel(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Mode == CodeMode::Real16)
    return false;
  copyOperandRegs(D, I);
  bindCost(I, CostClass::System);
  if (D.Ops[0].Kind == OperandKind::Mem)
    I.Fn = &execProtectedOnly<&execStoreSel<uint16_t, true, IsTr>>;
  else
    I.Fn = D.Ops[0].SizeBytes == 2   ? &execProtectedOnly<&execStoreSel<uint16_t, false, IsTr>>
           : D.Ops[0].SizeBytes == 4 ? &execProtectedOnly<&execStoreSel<uint32_t, false, IsTr>>
                                     : &execProtectedOnly<&execStoreSel<uint64_t, false, IsTr>>;
  return true;
}
bool bindSldt(const DecodeInfo &D, DecodedInsn &I) { return bindStoreSel<false>(D, I); }
bool bindStr(const DecodeInfo &D, DecodedInsn &I) { return bindStoreSel<true>(D, I); }

bool bindLar(const DecodeInfo &D, DecodedInsn &I) { return bindProbe<Probe::Lar>(D, I); }
bool bindLsl(const DecodeInfo &D, DecodedInsn &I) { return bindProbe<Probe::Lsl>(D, I); }
bool bindVerr(const DecodeInfo &D, DecodedInsn &I) { return bindProbe<Probe::Verr>(D, I); }
bool bindVerw(const DecodeInfo &D, DecodedInsn &I) { return bindProbe<Probe::Verw>(D, I); }

bool bindSwapgs(const DecodeInfo &D, DecodedInsn &I) {
  bindCost(I, CostClass::System);
  I.Fn = &execSwapgs;
  return D.Mode == CodeMode::Long64; // #UD outside 64-bit mode
}

template <bool Write, SegReg R> bool bindFsGsBase(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Mode != CodeMode::Long64)
    return false;
  copyOperandRegs(D, I);
  bindCost(I, CostClass::Simple);
  I.Fn = D.Ops[0].SizeBytes == 8 ? &execFsGsBase<uint64_t, Write, R>
                                 : &execFsGsBase<uint32_t, Write, R>;
  return true;
}
bool bindRdfsbase(const DecodeInfo &D, DecodedInsn &I) { return bindFsGsBase<false, SegReg::FS>(D, I); }
bool bindRdgsbase(const DecodeInfo &D, DecodedInsn &I) { return bindFsGsBase<false, SegReg::GS>(D, I); }
bool bindWrfsbase(const DecodeInfo &D, DecodedInsn &I) { return bindFsGsBase<true, SegReg::FS>(D, I); }
bool bindWrgsbase(const DecodeInfo &D, DecodedInsn &I) { return bindFsGsBase<true, SegReg::GS>(D, I); }

} // namespace vmxsim
