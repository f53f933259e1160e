// Port I/O: IN, OUT, INS, OUTS (with REP) and the I/O protection checks (SDM Vol. 1,
// Input/Output, I/O Privilege Level and I/O Permission Bit Map; Vol. 2, IN/OUT/INS/OUTS).
// Every I/O instruction ends its block so a device's side effects (a stop request, an
// interrupt raised) are seen at the next instruction boundary.
#include "cpu/exec.h"
#include "cpu/segmentation.h"
#include "cpu/vmx/nonroot.h"

namespace vmxsim {

namespace {

// SDM Vol. 1, I/O Permission Bit Map: when CPL > IOPL (or in virtual-8086 mode) every bit
// for the ports accessed must be clear in the TSS bitmap, and the bitmap bytes must lie
// within the TSS limit; otherwise #GP(0).
Status checkIoPermission(Cpu &C, uint16_t Port, unsigned Size) {
  const CpuState &S = C.S;
  if (!(S.Cr0 & cr0::PE))
    return Status::Ok;
  unsigned Iopl = unsigned(S.Rflags >> 12) & 3;
  if (!(S.Rflags & rflags::VM) && S.cpl() <= Iopl)
    return Status::Ok;
  const Segment &Tr = S.Tr;
  unsigned TrType = Tr.Attr & Segment::Type;
  if ((Tr.Selector & 0xfffc) == 0 || (TrType != desc::Tss32Avail && TrType != desc::Tss32Busy) ||
      Tr.Limit < 103)
    return C.raiseGp(0);
  uint64_t Base;
  VMX_TRY(readTss(C, 102, 2, Base, 0));
  uint32_t Off = uint32_t(Base) + Port / 8;
  if (Off + 1 > Tr.Limit)
    return C.raiseGp(0);
  uint64_t La = Tr.Base + Off;
  if (!S.longMode())
    La &= 0xffffffffull;
  uint16_t Bits;
  VMX_TRY(readLinear(C, La, Bits, true));
  unsigned Mask = ((1u << Size) - 1) << (Port & 7);
  if (Bits & Mask)
    return C.raiseGp(0);
  return Status::Ok;
}

uint16_t portOf(const Cpu &C, const DecodedInsn &I, bool ImmPort) {
  return ImmPort ? uint16_t(I.Imm) : uint16_t(C.S.Gpr[RDX]);
}

// In VMX non-root operation the I/O exits come after the I/O-permission checks, which
// have priority over them (SDM Vol. 3C, "Relative Priority of Faults and VM Exits").
template <typename T, bool ImmPort> Status execIn(Cpu &C, const DecodedInsn &I) {
  uint16_t Port = portOf(C, I, ImmPort);
  VMX_TRY(checkIoPermission(C, Port, sizeof(T)));
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onIo(C, I, {Port, sizeof(T), true, false, false, ImmPort}));
  setReg<T>(C, RAX, T(C.Io.read(Port, sizeof(T))));
  if (C.Debug.IoArmed) [[unlikely]]
    ioBreakpointAccess(C, Port, sizeof(T));
  C.breakBlock();
  return next(C, I);
}

template <typename T, bool ImmPort> Status execOut(Cpu &C, const DecodedInsn &I) {
  uint16_t Port = portOf(C, I, ImmPort);
  VMX_TRY(checkIoPermission(C, Port, sizeof(T)));
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onIo(C, I, {Port, sizeof(T), false, false, false, ImmPort}));
  C.Io.write(Port, sizeof(T), getReg<T>(C, RAX));
  if (C.Debug.IoArmed) [[unlikely]]
    ioBreakpointAccess(C, Port, sizeof(T));
  C.breakBlock();
  return next(C, I);
}

uint64_t addrReg(const Cpu &C, uint8_t R, unsigned AddrSize) {
  return maskToSize(C.S.Gpr[R], AddrSize);
}
void setAddrReg(Cpu &C, uint8_t R, uint64_t V, unsigned AddrSize) {
  if (AddrSize == 8)
    C.S.Gpr[R] = V;
  else if (AddrSize == 4)
    C.S.Gpr[R] = uint32_t(V);
  else
    C.S.Gpr[R] = (C.S.Gpr[R] & ~uint64_t(0xffff)) | uint16_t(V);
}

// INS/OUTS, one element per iteration; with REP the count register is decremented per
// element and a fault leaves the registers describing the elements done, as on hardware
// (SDM Vol. 2B, REP/REPE/REPZ/REPNE/REPNZ). A device stop request interrupts a REP
// between elements with RIP still on the instruction.
template <typename T, bool IsIns, bool Rep> Status execInsOuts(Cpu &C, const DecodedInsn &I) {
  const unsigned As = I.AddrSize;
  const uint16_t Port = uint16_t(C.S.Gpr[RDX]);
  VMX_TRY(checkIoPermission(C, Port, sizeof(T)));
  // The exit has priority over the segment and alignment checks of the memory operand
  // (SDM Vol. 3C, "Relative Priority of Faults and VM Exits"). A REP instruction resumed
  // after a device stop repeats the check, with the same result.
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onIo(C, I, {Port, sizeof(T), IsIns, true, Rep, false}));
  const int64_t Step = (C.S.Rflags & rflags::DF) ? -int64_t(sizeof(T)) : int64_t(sizeof(T));
  const uint8_t IndexReg = IsIns ? RDI : RSI;
  bool First = true;
  for (;;) {
    if constexpr (Rep) {
      if (addrReg(C, RCX, As) == 0)
        break;
      if (!First) {
        C.Cycles += I.Cost;
        // A device stop request, or an I/O or data breakpoint matched by the element
        // before: the REP resumes later at the same RIP. The debug trap comes after the
        // iteration that matched (SDM Vol. 3B, "Data Memory and I/O Breakpoint
        // Exception Conditions"), and an event taken between iterations pushes RF = 1
        // ("Instruction-Breakpoint Exception Condition").
        // (Not the harness's break, IoBus::requestBreak: it waits for the boundary after
        // the whole instruction, so that a stop changes nothing of the run.)
        if (C.Io.deviceStopRequested() || C.Debug.Hits) {
          C.S.Rflags |= rflags::RF;
          C.breakBlock();
          return Status::Ok;
        }
      }
    }
    First = false;
    uint64_t Off = addrReg(C, IndexReg, As);
    if constexpr (IsIns) {
      // ES:rDI, no override. The destination is checked before the port is read, so a
      // faulting store does not consume device data.
      uint64_t La;
      VMX_TRY(segmentToLinear(C, SegReg::ES, Off, sizeof(T), Access::Write, La));
      VMX_TRY(probeWrite(C, La, sizeof(T)));
      T V = T(C.Io.read(Port, sizeof(T)));
      VMX_TRY(writeLinear(C, La, V));
    } else {
      T V;
      VMX_TRY(readMem(C, SegReg(I.Seg), Off, V));
      C.Io.write(Port, sizeof(T), V);
    }
    if (C.Debug.IoArmed) [[unlikely]]
      ioBreakpointAccess(C, Port, sizeof(T));
    setAddrReg(C, IndexReg, Off + Step, As);
    if constexpr (!Rep)
      break;
    setAddrReg(C, RCX, addrReg(C, RCX, As) - 1, As);
  }
  C.breakBlock();
  return next(C, I);
}

template <bool IsIns> bool bindInsOuts(const DecodeInfo &D, DecodedInsn &I, unsigned Size) {
  I.Flags |= insnflag::EndsBlock;
  I.Flags &= ~insnflag::HasMem;
  I.Cost = costOf(CostClass::Io);
  // OUTS honours a segment override on its DS:rSI source (SDM Vol. 2B, OUTS).
  if (!IsIns) {
    for (unsigned K = 0; K < D.NumOps; ++K)
      if (D.Ops[K].Kind == OperandKind::Mem && D.Ops[K].Seg != SegReg::None)
        I.Seg = uint8_t(D.Ops[K].Seg);
  }
  bool Rep = D.Prefixes & (insnflag::Rep | insnflag::Repne);
  if (Size == 1)
    I.Fn = Rep ? &execInsOuts<uint8_t, IsIns, true> : &execInsOuts<uint8_t, IsIns, false>;
  else if (Size == 2)
    I.Fn = Rep ? &execInsOuts<uint16_t, IsIns, true> : &execInsOuts<uint16_t, IsIns, false>;
  else
    I.Fn = Rep ? &execInsOuts<uint32_t, IsIns, true> : &execInsOuts<uint32_t, IsIns, false>;
  return true;
}

} // namespace

bool bindIn(const DecodeInfo &D, DecodedInsn &I) {
  bool Imm = D.Ops[1].Kind == OperandKind::Imm;
  unsigned Size = D.Ops[0].SizeBytes;
  if (Imm)
    I.Imm = uint8_t(D.ImmRaw);
  I.Fn = Size == 1 ? (Imm ? &execIn<uint8_t, true> : &execIn<uint8_t, false>)
         : Size == 2 ? (Imm ? &execIn<uint16_t, true> : &execIn<uint16_t, false>)
                     : (Imm ? &execIn<uint32_t, true> : &execIn<uint32_t, false>);
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::Io);
  return true;
}

bool bindOut(const DecodeInfo &D, DecodedInsn &I) {
  bool Imm = D.Ops[0].Kind == OperandKind::Imm;
  unsigned Size = D.Ops[1].SizeBytes;
  if (Imm)
    I.Imm = uint8_t(D.ImmRaw);
  I.Fn = Size == 1 ? (Imm ? &execOut<uint8_t, true> : &execOut<uint8_t, false>)
         : Size == 2 ? (Imm ? &execOut<uint16_t, true> : &execOut<uint16_t, false>)
                     : (Imm ? &execOut<uint32_t, true> : &execOut<uint32_t, false>);
  I.Flags |= insnflag::EndsBlock;
  I.Cost = costOf(CostClass::Io);
  return true;
}

bool bindInsb(const DecodeInfo &D, DecodedInsn &I) { return bindInsOuts<true>(D, I, 1); }
bool bindInsw(const DecodeInfo &D, DecodedInsn &I) { return bindInsOuts<true>(D, I, 2); }
bool bindInsd(const DecodeInfo &D, DecodedInsn &I) { return bindInsOuts<true>(D, I, 4); }
bool bindOutsb(const DecodeInfo &D, DecodedInsn &I) { return bindInsOuts<false>(D, I, 1); }
bool bindOutsw(const DecodeInfo &D, DecodedInsn &I) { return bindInsOuts<false>(D, I, 2); }
bool bindOutsd(const DecodeInfo &D, DecodedInsn &I) { return bindInsOuts<false>(D, I, 4); }

} // namespace vmxsim
