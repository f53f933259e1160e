// Descriptor loads and protection checks for segment registers (SDM Vol. 3A, Protection;
// Vol. 2B, MOV—Move (segment register forms), POP, LDS/LES/LFS/LGS/LSS).
#include "cpu/segmentation.h"

#include "cpu/exec.h"

namespace vmxsim {

Segment segmentFromDescriptor(uint16_t Sel, uint64_t Lo) {
  return Segment{Sel, desc::base(Lo), desc::limit(Lo), desc::attr(Lo)};
}

namespace {
// The table and byte offset of a selector's descriptor, or false if it lies beyond the
// table limit (SDM Vol. 3A, Segment Selectors: TI picks GDT or LDT).
bool descriptorAddress(const Cpu &C, uint16_t Sel, unsigned Bytes, uint64_t &La) {
  uint64_t Base;
  uint32_t Limit;
  if (Sel & 4) {
    if (C.S.Ldtr.Attr & Segment::Unusable || (C.S.Ldtr.Selector & 0xfffc) == 0)
      return false;
    Base = C.S.Ldtr.Base;
    Limit = C.S.Ldtr.Limit;
  } else {
    Base = C.S.Gdtr.Base;
    Limit = C.S.Gdtr.Limit;
  }
  uint32_t Off = Sel & 0xfff8;
  if (Off + Bytes - 1 > Limit)
    return false;
  La = Base + Off;
  if (!C.S.longMode())
    La &= 0xffffffffull;
  return true;
}
} // namespace

bool selectorInTable(const Cpu &C, uint16_t Sel, unsigned Bytes) {
  uint64_t La;
  return descriptorAddress(C, Sel, Bytes, La);
}

Status readDescriptor(Cpu &C, uint16_t Sel, uint64_t &Lo, uint32_t Ext, uint8_t Vec) {
  uint64_t La;
  if (!descriptorAddress(C, Sel, 8, La))
    return C.raise(Vec, selectorError(Sel, Ext));
  return readLinear(C, La, Lo, /*Supervisor=*/true);
}

Status readDescriptorHigh(Cpu &C, uint16_t Sel, uint64_t &Hi, uint32_t Ext, uint8_t Vec) {
  uint64_t La;
  if (!descriptorAddress(C, Sel, 16, La))
    return C.raise(Vec, selectorError(Sel, Ext));
  return readLinear(C, La + 8, Hi, /*Supervisor=*/true);
}

Status setAccessed(Cpu &C, uint16_t Sel, uint64_t &Lo) {
  if (Lo & (1ull << 40))
    return Status::Ok;
  uint64_t La;
  if (!descriptorAddress(C, Sel, 8, La))
    return C.raiseGp(selectorError(Sel));
  // The accessed bit lives in byte 5 of the descriptor; a locked byte write on hardware.
  uint8_t Byte = uint8_t(Lo >> 40) | 1;
  VMX_TRY(writeLinear(C, La + 5, Byte, /*Supervisor=*/true));
  Lo |= 1ull << 40;
  return Status::Ok;
}

Segment nullStackSegment(uint16_t Sel, unsigned Cpl) {
  // SDM Vol. 3A, Null Segment Checking in 64-Bit Mode: SS may hold a null selector at
  // CPL < 3; its hidden DPL still tracks the CPL.
  return Segment{uint16_t((Sel & 0xfffc) | Cpl), 0, 0,
                 Segment::Unusable | (Cpl << Segment::DplShift) | Segment::DB | 0x3};
}

void loadRealSegment(Cpu &C, SegReg R, uint16_t Sel) {
  Segment &G = C.S.seg(R);
  G.Selector = Sel;
  G.Base = uint64_t(Sel) << 4;
  if (C.S.Rflags & rflags::VM) {
    // SDM Vol. 3A, Virtual-8086 Mode: segments are 64 KiB read/write, DPL 3.
    G.Limit = 0xffff;
    G.Attr = (R == SegReg::CS ? 0xb : 0x3) | Segment::S | Segment::P | (3u << Segment::DplShift);
  } else {
    // Real mode keeps the cached limit and attributes (big real mode relies on it), but
    // the descriptor becomes usable and present.
    G.Attr = (G.Attr & ~Segment::Unusable) | Segment::P | Segment::S;
  }
}

Status checkStackSegment(Cpu &C, uint16_t Sel, unsigned Cpl, uint64_t &Lo, uint8_t Vec,
                         uint32_t Ext, bool NullOk) {
  // SDM Vol. 2B, MOV: "IF SS is loaded ... IF segment selector is NULL THEN #GP(0);
  // IF RPL != CPL or segment is not a writable data segment or DPL != CPL THEN
  // #GP(selector); IF segment not marked present THEN #SS(selector)".
  if ((Sel & 0xfffc) == 0) {
    if (NullOk && (Sel & 3) == Cpl)
      return Status::Ok;
    return C.raise(Vec, Ext);
  }
  VMX_TRY(readDescriptor(C, Sel, Lo, Ext, Vec));
  if ((Sel & 3) != Cpl || !desc::writableData(Lo) || desc::dpl(Lo) != Cpl)
    return C.raise(Vec, selectorError(Sel, Ext));
  if (!desc::present(Lo))
    return C.raise(vec::SS, selectorError(Sel, Ext));
  return Status::Ok;
}

Status loadSegment(Cpu &C, SegReg R, uint16_t Sel) {
  CpuState &S = C.S;
  if (!(S.Cr0 & cr0::PE) || (S.Rflags & rflags::VM)) {
    loadRealSegment(C, R, Sel);
    return Status::Ok;
  }
  const unsigned Cpl = S.cpl();
  uint64_t Lo = 0;
  if (R == SegReg::SS) {
    bool NullOk = S.in64BitMode() && Cpl < 3;
    VMX_TRY(checkStackSegment(C, Sel, Cpl, Lo, vec::GP, 0, NullOk));
    if ((Sel & 0xfffc) == 0) {
      S.seg(R) = nullStackSegment(Sel, Cpl);
      return Status::Ok;
    }
    VMX_TRY(setAccessed(C, Sel, Lo));
    S.seg(R) = segmentFromDescriptor(Sel, Lo);
    return Status::Ok;
  }
  if ((Sel & 0xfffc) == 0) {
    // A null selector may be loaded into DS/ES/FS/GS; use faults later (SDM Vol. 3A,
    // Segment Selectors). Intel processors clear the base (FS/GS in 64-bit mode too).
    S.seg(R) = Segment{Sel, 0, 0, Segment::Unusable};
    return Status::Ok;
  }
  VMX_TRY(readDescriptor(C, Sel, Lo));
  // SDM Vol. 2B, MOV: "IF segment is not a data or readable code segment or ((segment is
  // a data or nonconforming code segment) and ((RPL > DPL) or (CPL > DPL))) THEN
  // #GP(selector); IF segment not marked present THEN #NP(selector)".
  if (desc::isSystem(Lo) || !desc::readable(Lo))
    return C.raiseGp(selectorError(Sel));
  if (!desc::conforming(Lo) && ((Sel & 3u) > desc::dpl(Lo) || Cpl > desc::dpl(Lo)))
    return C.raiseGp(selectorError(Sel));
  if (!desc::present(Lo))
    return C.raise(vec::NP, selectorError(Sel));
  VMX_TRY(setAccessed(C, Sel, Lo));
  S.seg(R) = segmentFromDescriptor(Sel, Lo);
  return Status::Ok;
}

void nullInaccessibleDataSegments(Cpu &C) {
  const unsigned Cpl = C.S.cpl();
  for (SegReg R : {SegReg::ES, SegReg::FS, SegReg::GS, SegReg::DS}) {
    Segment &G = C.S.seg(R);
    if (G.Attr & Segment::Unusable)
      continue;
    bool ConformingCode = (G.Attr & 0x18) == 0x18 && (G.Attr & 4);
    if (!ConformingCode && G.dpl() < Cpl)
      G = Segment{0, 0, 0, Segment::Unusable};
  }
}

Status stackPush(Cpu &C, StackRef &R, uint64_t V, unsigned SizeBytes) {
  uint64_t NewSp = maskToSize(R.Sp - SizeBytes, R.AddrSize);
  uint64_t La;
  if (R.AddrSize == 8) {
    La = NewSp;
    if (!isCanonical(C, La))
      return C.raise(R.FaultVec, R.FaultErr);
  } else {
    // Expand-down stacks are legal; everything else checks against the limit.
    bool ExpandDown = (R.Ss.Attr & 0xc) == 0x4;
    uint64_t Last = NewSp + SizeBytes - 1;
    if (!(R.Ss.Attr & Segment::Unusable)) {
      uint64_t Upper = (R.Ss.Attr & Segment::DB) ? 0xffffffffull : 0xffffull;
      if (ExpandDown ? (NewSp <= R.Ss.Limit || Last > Upper) : Last > R.Ss.Limit)
        return C.raise(R.FaultVec, R.FaultErr);
    }
    La = (R.Ss.Base + NewSp) & 0xffffffffull;
  }
  Status St = Status::Ok;
  if (SizeBytes == 2)
    St = writeLinear(C, La, uint16_t(V), R.Supervisor);
  else if (SizeBytes == 4)
    St = writeLinear(C, La, uint32_t(V), R.Supervisor);
  else
    St = writeLinear(C, La, V, R.Supervisor);
  VMX_TRY(St);
  R.Sp = NewSp;
  return Status::Ok;
}

Status stackRead(Cpu &C, const StackRef &R, uint64_t Offset, uint64_t &V,
                 unsigned SizeBytes) {
  uint64_t Sp = maskToSize(R.Sp + Offset, R.AddrSize);
  uint64_t La;
  if (R.AddrSize == 8) {
    La = Sp;
    if (!isCanonical(C, La))
      return C.raise(R.FaultVec, R.FaultErr);
  } else {
    bool ExpandDown = (R.Ss.Attr & 0xc) == 0x4;
    uint64_t Last = Sp + SizeBytes - 1;
    uint64_t Upper = (R.Ss.Attr & Segment::DB) ? 0xffffffffull : 0xffffull;
    if (ExpandDown ? (Sp <= R.Ss.Limit || Last > Upper) : Last > R.Ss.Limit)
      return C.raise(R.FaultVec, R.FaultErr);
    La = (R.Ss.Base + Sp) & 0xffffffffull;
  }
  V = 0;
  if (SizeBytes == 2) {
    uint16_t X;
    VMX_TRY(readLinear(C, La, X, R.Supervisor));
    V = X;
  } else if (SizeBytes == 4) {
    uint32_t X;
    VMX_TRY(readLinear(C, La, X, R.Supervisor));
    V = X;
  } else {
    VMX_TRY(readLinear(C, La, V, R.Supervisor));
  }
  return Status::Ok;
}

Status readTss(Cpu &C, uint32_t Offset, unsigned SizeBytes, uint64_t &V, uint32_t Ext) {
  const Segment &Tr = C.S.Tr;
  if ((Tr.Selector & 0xfffc) == 0 || Offset + SizeBytes - 1 > Tr.Limit)
    return C.raise(vec::TS, selectorError(Tr.Selector, Ext));
  uint64_t La = Tr.Base + Offset;
  if (!C.S.longMode())
    La &= 0xffffffffull;
  V = 0;
  if (SizeBytes == 2) {
    uint16_t X;
    VMX_TRY(readLinear(C, La, X, true));
    V = X;
  } else if (SizeBytes == 4) {
    uint32_t X;
    VMX_TRY(readLinear(C, La, X, true));
    V = X;
  } else {
    VMX_TRY(readLinear(C, La, V, true));
  }
  return Status::Ok;
}

void loadCodeSegment(Cpu &C, uint16_t Sel, uint64_t Lo, unsigned Cpl) {
  Segment Cs = segmentFromDescriptor(uint16_t((Sel & 0xfffc) | Cpl), Lo);
  Cs.Attr |= 1; // accessed (already written back by the caller)
  C.S.seg(SegReg::CS) = Cs;
  C.modeChanged();
}

} // namespace vmxsim
