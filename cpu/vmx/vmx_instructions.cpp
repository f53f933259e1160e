// The VMX instructions (SDM Vol. 3C, "VMX Instruction Reference", and the pseudo-code of
// each instruction). Every handler follows the SDM order: #UD conditions, then the VM
// exit in VMX non-root operation, then CPL > 0 #GP(0), then memory-operand faults and
// VMfail. No state changes before the last fault check (STYLE 2.3).
#include "cpu/vmx/vmx_instructions.h"

#include "cpu/vmx/vm_entry_checks.h"

#include "cpu/cost_model.h"
#include "cpu/cpu_model.h"
#include "cpu/decode_info.h"
#include "cpu/exec.h"
#include "cpu/memory.h"
#include "cpu/msrs.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_entry.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmcs_controls.h"
#include "cpu/vmx/vmfunc.h"
#include "cpu/vmx/vmx_state.h"

namespace vmxsim {

// --- Conventions (SDM Vol. 3C, "VMX Instruction Reference > Conventions") --------------

Status vmSucceed(Cpu &C, const DecodedInsn &I) {
  C.S.Rflags &= ~rflags::Arith;
  return next(C, I);
}

Status vmFailInvalid(Cpu &C, const DecodedInsn &I) {
  C.S.Rflags = (C.S.Rflags & ~rflags::Arith) | rflags::CF;
  return next(C, I);
}

Status vmFailValid(Cpu &C, const DecodedInsn &I, uint32_t ErrorNumber) {
  C.S.Rflags = (C.S.Rflags & ~rflags::Arith) | rflags::ZF;
  C.Vmx->Vmcs.set(VmcsField::VmInstructionError, ErrorNumber);
  return next(C, I);
}

Status vmFail(Cpu &C, const DecodedInsn &I, uint32_t ErrorNumber) {
  if (C.Vmx->haveCurrentVmcs())
    return vmFailValid(C, I, ErrorNumber);
  return vmFailInvalid(C, I);
}

std::optional<uint64_t> readVmxCapabilityMsr(const Cpu &C, uint32_t Msr) {
  if (!C.Model.Vmx)
    return std::nullopt;
  // CR4 bits this model supports (IA32_VMX_CR4_FIXED1, SDM Vol. 3D, A.8).
  uint64_t Cr4Fixed1 = cr4::VME | cr4::PVI | cr4::TSD | cr4::DE | cr4::PSE | cr4::PAE |
                       cr4::MCE | cr4::PGE | cr4::PCE | cr4::OSFXSR | cr4::OSXMMEXCPT |
                       cr4::UMIP | cr4::VMXE | cr4::FSGSBASE | cr4::OSXSAVE;
  if (C.Model.La57)
    Cr4Fixed1 |= cr4::LA57;
  if (C.Model.Pcid)
    Cr4Fixed1 |= cr4::PCIDE;
  if (C.Model.Smep)
    Cr4Fixed1 |= cr4::SMEP;
  if (C.Model.Smap)
    Cr4Fixed1 |= cr4::SMAP;
  return vmxCapabilityMsr(*C.Model.Vmx, Msr, Cr4Fixed1);
}

void writeBackCurrentVmcs(Cpu &C) {
  VmxState &X = *C.Vmx;
  if (!X.haveCurrentVmcs())
    return;
  for (unsigned K = 0; K < kNumVmcsFields; ++K)
    C.Mem.write(Hpa(X.CurrentVmcsPointer + vmcs_layout::fieldOffset(VmcsField(K))), 8,
                X.Vmcs.Values[K], StoreAgent::Processor);
  C.Mem.write(Hpa(X.CurrentVmcsPointer + vmcs_layout::LaunchStateOffset), 4,
              uint32_t(X.CurrentLaunch), StoreAgent::Processor);
}

namespace {

using F = VmcsField;

// --- Shared checks ----------------------------------------------------------------------

/// The #UD conditions shared by the VMX instructions other than VMXON and VMCALL: "not in
/// VMX operation, CR0.PE = 0, RFLAGS.VM = 1, or IA32_EFER.LMA = 1 and CS.L = 0"
/// (compatibility mode). Real mode has CR0.PE = 0.
bool vmxUd(const Cpu &C) {
  const CpuState &S = C.S;
  return !C.Model.Vmx || !C.Vmx->InVmxOperation || !(S.Cr0 & cr0::PE) ||
         (S.Rflags & rflags::VM) || (S.longMode() && !(S.cs().Attr & Segment::L));
}

unsigned addrSizeCode(const DecodedInsn &I) {
  return I.AddrSize == 2 ? 0 : I.AddrSize == 4 ? 1 : 2;
}

/// VM-exit instruction information for a memory operand (SDM Vol. 3C, "VM-Exit
/// Instruction Information": scaling 1:0, address size 9:7, segment 17:15, index 21:18
/// (+ invalid 22), base 26:23 (+ invalid 27)); bit 10 = 0 for memory.
uint32_t memoryOperandInfo(const DecodedInsn &I) {
  bool HasIndex = I.Index != kRegNone, HasBase = I.Base != kRegNone && I.Base != kRegRip;
  uint32_t V = (HasIndex ? I.ScaleLog2 : 0) | (addrSizeCode(I) << 7) |
               (uint32_t(I.Seg & 7) << 15);
  V |= HasIndex ? uint32_t(I.Index) << 18 : (1u << 22);
  V |= HasBase ? uint32_t(I.Base) << 23 : (1u << 27);
  return V;
}

/// Exit qualification for instructions with a memory operand: the displacement, sign-
/// extended; for RIP-relative addressing the displacement plus the next RIP (SDM Vol. 3C,
/// "Exit Qualification for VMX instructions ...").
uint64_t displacementQualification(const Cpu &C, const DecodedInsn &I) {
  if (!I.hasMem())
    return 0;
  if (I.Base == kRegRip)
    return uint64_t(I.Disp) + C.S.Rip + I.Len;
  return uint64_t(I.Disp);
}

/// The VM exit a VMX instruction causes in VMX non-root operation (SDM Vol. 3C, "VMX
/// Non-Root Operation > Instructions That Cause VM Exits Unconditionally").
Status instructionExit(Cpu &C, const DecodedInsn &I, ExitReason Reason, uint32_t Info) {
  VmExitInfo E;
  E.Reason = Reason;
  E.Qualification = displacementQualification(C, I);
  E.InstructionLength = I.Len;
  E.InstructionInfo = Info;
  return vmExit(C, E);
}

bool physicalAddressInvalid(const Cpu &C, uint64_t Addr) {
  return (Addr & 0xfff) || (Addr >> C.Model.MaxPhysAddrBits);
}

Status readPointerOperand(Cpu &C, const DecodedInsn &I, uint64_t &Addr) {
  return readMem(C, SegReg(I.Seg), effectiveAddress(C, I), Addr);
}

/// Operand size of VMREAD/VMWRITE/INVEPT/INVVPID register operands: 64 bits in 64-bit
/// mode, 32 bits otherwise.
uint64_t regOperand(const Cpu &C, uint8_t R) {
  return C.S.in64BitMode() ? C.S.Gpr[R] : uint32_t(C.S.Gpr[R]);
}

// --- VMXON (SDM Vol. 3C, VMXON—Enter VMX Operation) ---------------------------------

Status execVmxon(Cpu &C, const DecodedInsn &I) {
  const CpuState &S = C.S;
  VmxState &X = *C.Vmx;
  if (!C.Model.Vmx || !(S.Cr0 & cr0::PE) || !(S.Cr4 & cr4::VMXE) ||
      (S.Rflags & rflags::VM) || (S.longMode() && !(S.cs().Attr & Segment::L)))
    return C.raiseUd();
  if (!X.InVmxOperation) {
    // CR0/CR4 against IA32_VMX_CR0/CR4_FIXED0/1 (SDM Vol. 3C, "Restrictions on VMX
    // Operation"); IA32_FEATURE_CONTROL lock (bit 0) and "enable VMXON outside SMX"
    // (bit 2); #GP "in A20M mode", when the platform's A20 gate is off (PhysMem::a20Mask).
    uint64_t Cr0F0 = *readVmxCapabilityMsr(C, msr::IA32_VMX_CR0_FIXED0);
    uint64_t Cr0F1 = *readVmxCapabilityMsr(C, msr::IA32_VMX_CR0_FIXED1);
    uint64_t Cr4F0 = *readVmxCapabilityMsr(C, msr::IA32_VMX_CR4_FIXED0);
    uint64_t Cr4F1 = *readVmxCapabilityMsr(C, msr::IA32_VMX_CR4_FIXED1);
    uint64_t Fc = (*C.Msrs)[MsrSlot::IA32_FEATURE_CONTROL];
    if (S.cpl() > 0 || (S.Cr0 & Cr0F0) != Cr0F0 || (S.Cr0 & ~Cr0F1) ||
        (S.Cr4 & Cr4F0) != Cr4F0 || (S.Cr4 & ~Cr4F1) || !(Fc & 1) || !(Fc & 4) ||
        !C.Mem.a20Enabled())
      return C.raiseGp(0);
    uint64_t Addr;
    VMX_TRY(readPointerOperand(C, I, Addr));
    if (physicalAddressInvalid(C, Addr))
      return vmFailInvalid(C, I);
    uint32_t Rev = uint32_t(C.Mem.read(Hpa(Addr + vmcs_layout::RevisionOffset), 4));
    if ((Rev & 0x7fffffff) != kVmcsRevisionId || (Rev >> 31))
      return vmFailInvalid(C, I);
    X.InVmxOperation = true;
    X.VmxonPointer = Addr;
    X.CurrentVmcsPointer = kInvalidVmcsPointer;
    return vmSucceed(C, I);
  }
  if (C.NonRoot)
    return instructionExit(C, I, ExitReason::Vmxon, memoryOperandInfo(I));
  if (S.cpl() > 0)
    return C.raiseGp(0);
  return vmFail(C, I, uint32_t(VmInstructionError::VmxonInVmxRootOperation));
}

// --- VMXOFF (SDM Vol. 3C, VMXOFF—Leave VMX Operation) -------------------------------

Status execVmxoff(Cpu &C, const DecodedInsn &I) {
  if (vmxUd(C))
    return C.raiseUd();
  if (C.NonRoot)
    return instructionExit(C, I, ExitReason::Vmxoff, 0);
  if (C.S.cpl() > 0)
    return C.raiseGp(0);
  // The dual-monitor treatment of SMIs and SMM is not modelled, so error 23 never
  // occurs. The SDM leaves the current VMCS's memory image undefined after VMXOFF
  // without VMCLEAR; writing it back is one allowed outcome.
  writeBackCurrentVmcs(C);
  VmxState &X = *C.Vmx;
  X.InVmxOperation = false;
  // "unblock and enable A20M": if the gate went off during VMX operation, translations
  // filled without the A20 mask must go (cpu/mmu.h, the A20 rule).
  if (!C.Mem.a20Enabled()) {
    C.Mmu.flushTlbAllContexts();
    C.Mmu.flushDecodeCache();
  }
  X.VmxonPointer = X.CurrentVmcsPointer = kInvalidVmcsPointer;
  // Leaving VMX operation unblocks a held INIT (SDM Vol. 3C, "Restrictions on VMX
  // Operation"): the run ends after this instruction so that the local APIC performs it
  // at this boundary (VmxState::InitBlocked).
  if (X.InitBlocked)
    C.pullDeadline(C.Cycles);
  return vmSucceed(C, I);
}

// --- VMCLEAR (SDM Vol. 3C, VMCLEAR—Clear Virtual-Machine Control Structure) -----------

// The shared start of VMCLEAR and VMPTRLD in their pseudo-code order: #UD, the VM exit
// in VMX non-root operation, CPL, then the memory operand (the 64-bit pointer).
Status vmcsPointerOperand(Cpu &C, const DecodedInsn &I, ExitReason Reason, uint64_t &Addr) {
  if (vmxUd(C))
    return C.raiseUd();
  if (C.NonRoot)
    return instructionExit(C, I, Reason, memoryOperandInfo(I));
  if (C.S.cpl() > 0)
    return C.raiseGp(0);
  return readPointerOperand(C, I, Addr);
}

Status execVmclear(Cpu &C, const DecodedInsn &I) {
  uint64_t Addr;
  VMX_TRY(vmcsPointerOperand(C, I, ExitReason::Vmclear, Addr));
  VmxState &X = *C.Vmx;
  if (physicalAddressInvalid(C, Addr))
    return vmFail(C, I, uint32_t(VmInstructionError::VmclearInvalidPhysicalAddress));
  if (Addr == X.VmxonPointer)
    return vmFail(C, I, uint32_t(VmInstructionError::VmclearVmxonPointer));
  if (Addr == X.CurrentVmcsPointer) {
    writeBackCurrentVmcs(C);
    X.CurrentVmcsPointer = kInvalidVmcsPointer;
  }
  C.Mem.write(Hpa(Addr + vmcs_layout::LaunchStateOffset), 4, uint32_t(LaunchState::Clear),
              StoreAgent::Processor);
  return vmSucceed(C, I);
}

// --- VMPTRLD (SDM Vol. 3C, VMPTRLD—Load Pointer to Virtual-Machine Control Structure) ---

Status execVmptrld(Cpu &C, const DecodedInsn &I) {
  uint64_t Addr;
  VMX_TRY(vmcsPointerOperand(C, I, ExitReason::Vmptrld, Addr));
  VmxState &X = *C.Vmx;
  if (physicalAddressInvalid(C, Addr))
    return vmFail(C, I, uint32_t(VmInstructionError::VmptrldInvalidPhysicalAddress));
  if (Addr == X.VmxonPointer)
    return vmFail(C, I, uint32_t(VmInstructionError::VmptrldVmxonPointer));
  uint32_t Rev = uint32_t(C.Mem.read(Hpa(Addr + vmcs_layout::RevisionOffset), 4));
  // Bit 31 is the shadow-VMCS indicator, allowed only with VMCS shadowing.
  if ((Rev & 0x7fffffff) != kVmcsRevisionId ||
      ((Rev >> 31) && !C.Model.Vmx->has(VmxFeature::VmcsShadowing)))
    return vmFail(C, I, uint32_t(VmInstructionError::VmptrldIncorrectRevision));
  if (Addr != X.CurrentVmcsPointer) {
    writeBackCurrentVmcs(C);
    for (unsigned K = 0; K < kNumVmcsFields; ++K)
      X.Vmcs.Values[K] =
          C.Mem.read(Hpa(Addr + vmcs_layout::fieldOffset(VmcsField(K))), 8);
    X.Vmcs.markAllWritten();
    X.CurrentLaunch =
        C.Mem.read(Hpa(Addr + vmcs_layout::LaunchStateOffset), 4) == uint32_t(LaunchState::Launched)
            ? LaunchState::Launched
            : LaunchState::Clear;
    X.CurrentIsShadow = Rev >> 31;
    X.CurrentVmcsPointer = Addr;
  }
  return vmSucceed(C, I);
}

// --- VMPTRST (SDM Vol. 3C, VMPTRST—Store Pointer to Virtual-Machine Control Structure) --

Status execVmptrst(Cpu &C, const DecodedInsn &I) {
  if (vmxUd(C))
    return C.raiseUd();
  if (C.NonRoot)
    return instructionExit(C, I, ExitReason::Vmptrst, memoryOperandInfo(I));
  if (C.S.cpl() > 0)
    return C.raiseGp(0);
  VMX_TRY(writeMem(C, SegReg(I.Seg), effectiveAddress(C, I), C.Vmx->CurrentVmcsPointer));
  return vmSucceed(C, I);
}

// --- VMREAD / VMWRITE (SDM Vol. 3C, VMREAD—Read Field from Virtual-Machine Control
// Structure; VMWRITE—Write Field to Virtual-Machine Control Structure) ----------------

/// Instruction information for VMREAD/VMWRITE: Reg1 (6:3) and bit 10 for a register
/// operand, else the memory-operand layout; Reg2 (31:28) is the field-encoding register.
uint32_t vmreadWriteInfo(const DecodedInsn &I, uint8_t RmReg, uint8_t EncodingReg) {
  uint32_t V = I.hasMem() ? memoryOperandInfo(I)
                          : ((uint32_t(RmReg) << 3) | (addrSizeCode(I) << 7) | (1u << 10));
  return V | (uint32_t(EncodingReg) << 28);
}

// --- VMCS shadowing (SDM Vol. 3C, "VMCS Types: Ordinary and Shadow", "VMCS Shadowing
// Bitmap Addresses", and the VMREAD/VMWRITE pseudo-code) ------------------------------

/// Whether VMREAD (Bitmap = VMREAD-bitmap address) or VMWRITE (VMWRITE-bitmap address)
/// in VMX non-root operation causes a VM exit: "VMCS shadowing" is 0, the field encoding
/// sets a bit in 63:15, or the bitmap bit that bits 14:0 of the encoding select is 1.
/// The bitmaps are 4-KByte physical pages (bit n is bit n % 8 of byte n / 8).
bool shadowAccessExits(Cpu &C, uint64_t Encoding, VmcsField Bitmap) {
  const VmcsData &V = C.Vmx->Vmcs;
  if (!controlSet(V, VmxControl::VmcsShadowing) || (Encoding >> 15))
    return true;
  const uint64_t Byte = C.Mem.read(Hpa(V.get(Bitmap) + (Encoding >> 3)), 1);
  return (Byte >> (Encoding & 7)) & 1;
}

/// The VMCS a VMREAD/VMWRITE accesses: the current VMCS in VMX root operation; in VMX
/// non-root operation (with no VM exit) the shadow VMCS the VMCS link pointer references,
/// or none if the link pointer is FFFFFFFF_FFFFFFFFH ("not valid": VMfailInvalid). A
/// shadow VMCS is never current then (VM entry checks that the link pointer is not the
/// current-VMCS pointer), so its data is the copy in its region, where VMCLEAR and
/// VMPTRLD keep a non-current VMCS's data (vmcs_layout).
struct AccessedVmcs {
  bool Valid = false;
  uint64_t ShadowRegion = kInvalidVmcsPointer; ///< the shadow VMCS; invalid: current VMCS
};
AccessedVmcs accessedVmcs(const Cpu &C) {
  const VmxState &X = *C.Vmx;
  AccessedVmcs A;
  if (!C.NonRoot) {
    A.Valid = X.haveCurrentVmcs();
    return A;
  }
  A.ShadowRegion = X.Vmcs.get(VmcsField::VmcsLinkPointer);
  A.Valid = A.ShadowRegion != kInvalidVmcsPointer;
  return A;
}

uint64_t readAccessedField(Cpu &C, const AccessedVmcs &A, const VmcsLookup &L) {
  if (A.ShadowRegion == kInvalidVmcsPointer)
    return vmcsReadValue(C.Vmx->Vmcs, L);
  const uint64_t Stored = C.Mem.read(Hpa(A.ShadowRegion + vmcs_layout::fieldOffset(L.Field)), 8);
  return vmcsReadValue(VmcsData::truncateToWidth(L.Field, Stored), L);
}

void writeAccessedField(Cpu &C, const AccessedVmcs &A, const VmcsLookup &L, uint64_t V) {
  if (A.ShadowRegion == kInvalidVmcsPointer)
    return vmcsWriteValue(C.Vmx->Vmcs, L, V);
  const Hpa Slot(A.ShadowRegion + vmcs_layout::fieldOffset(L.Field));
  const uint64_t Stored = VmcsData::truncateToWidth(L.Field, C.Mem.read(Slot, 8));
  C.Mem.write(Slot, 8, vmcsWrittenValue(Stored, L, V), StoreAgent::Processor);
}

// Zydis operand order: VMREAD r/m, reg (Reg[0] = destination, Reg[1] = encoding);
// VMWRITE reg, r/m (Reg[0] = encoding, Reg[1] = source).
template <bool IsMem> [[gnu::noinline]] Status execVmread(Cpu &C, const DecodedInsn &I) {
  if (vmxUd(C))
    return C.raiseUd();
  const uint64_t Encoding = regOperand(C, I.Reg[1]);
  if (C.NonRoot && shadowAccessExits(C, Encoding, VmcsField::VmreadBitmapAddress))
    return instructionExit(C, I, ExitReason::Vmread, vmreadWriteInfo(I, I.Reg[0], I.Reg[1]));
  // A shadow VMCS is accessed in memory, which may be MMIO or hold decoded code: the
  // block ends after the instruction, as it did when every VMX instruction ended one.
  if (C.NonRoot)
    C.breakBlock();
  if (C.S.cpl() > 0)
    return C.raiseGp(0);
  const AccessedVmcs A = accessedVmcs(C);
  if (!A.Valid)
    return vmFailInvalid(C, I);
  // An unsupported encoding fails with error 12 in the current VMCS, also when a shadow
  // VMCS is being accessed (VMfailValid writes the current VMCS's VM-instruction error).
  VmcsLookup L = lookupEncoding(Encoding);
  if (!L.Found || !fieldSupported(*C.Model.Vmx, L.Field))
    return vmFailValid(C, I, uint32_t(VmInstructionError::UnsupportedVmcsComponent));
  uint64_t Value = readAccessedField(C, A, L);
  // The operand size is 64 bits in 64-bit mode and 32 bits otherwise; a longer field is
  // truncated, a shorter one zero-extended.
  const bool Is64 = C.S.in64BitMode();
  if constexpr (IsMem) {
    uint64_t Ea = effectiveAddress(C, I);
    if (Is64)
      VMX_TRY(writeMem(C, SegReg(I.Seg), Ea, Value));
    else
      VMX_TRY(writeMem(C, SegReg(I.Seg), Ea, uint32_t(Value)));
  } else {
    if (Is64)
      setReg<uint64_t>(C, I.Reg[0], Value);
    else
      setReg<uint32_t>(C, I.Reg[0], uint32_t(Value));
  }
  return vmSucceed(C, I);
}

template <bool IsMem> [[gnu::noinline]] Status execVmwrite(Cpu &C, const DecodedInsn &I) {
  if (vmxUd(C))
    return C.raiseUd();
  const uint64_t Encoding = regOperand(C, I.Reg[0]);
  if (C.NonRoot && shadowAccessExits(C, Encoding, VmcsField::VmwriteBitmapAddress))
    return instructionExit(C, I, ExitReason::Vmwrite, vmreadWriteInfo(I, I.Reg[1], I.Reg[0]));
  // A shadow VMCS is accessed in memory, which may be MMIO or hold decoded code: the
  // block ends after the instruction, as it did when every VMX instruction ended one.
  if (C.NonRoot)
    C.breakBlock();
  if (C.S.cpl() > 0)
    return C.raiseGp(0);
  const AccessedVmcs A = accessedVmcs(C);
  if (!A.Valid)
    return vmFailInvalid(C, I);
  // The source is read before the field checks, as Bochs's reference VMX does.
  const bool Is64 = C.S.in64BitMode();
  uint64_t Value;
  if constexpr (IsMem) {
    uint64_t Ea = effectiveAddress(C, I);
    if (Is64) {
      VMX_TRY(readMem(C, SegReg(I.Seg), Ea, Value));
    } else {
      uint32_t V32;
      VMX_TRY(readMem(C, SegReg(I.Seg), Ea, V32));
      Value = V32;
    }
  } else {
    Value = regOperand(C, I.Reg[1]);
  }
  VmcsLookup L = lookupEncoding(Encoding);
  if (!L.Found || !fieldSupported(*C.Model.Vmx, L.Field))
    return vmFailValid(C, I, uint32_t(VmInstructionError::UnsupportedVmcsComponent));
  // IA32_VMX_MISC[29] decides for the shadow VMCS as for the current one.
  if (fieldInfo(L.Field).Type == VmcsType::ExitInfo && !C.Model.Vmx->VmwriteAnyField)
    return vmFailValid(C, I, uint32_t(VmInstructionError::VmwriteReadOnlyComponent));
  writeAccessedField(C, A, L, Value);
  return vmSucceed(C, I);
}

// VMREAD r64, r64 and VMWRITE r64, r64 in 64-bit mode (bound only there: a block runs in
// the mode it was decoded in, cpu/exec.h), the form of a hypervisor's exit handler: in VMX
// root operation at CPL 0 with a current VMCS and a supported field, every check of the
// pseudo-code above passes in its order (no #UD: VMX operation, CR0.PE = 1, RFLAGS.VM = 0
// and 64-bit mode; no VM exit outside non-root operation; CPL 0; a valid current VMCS; a
// supported encoding and, for VMWRITE, a writable field), and the full handler would
// read or write the current VMCS's data, with the 64-bit register operands of 64-bit
// mode. Anything else runs the full handler from its start (nothing is changed before).
// CR0.PE = 1 and RFLAGS.VM = 0 hold in 64-bit mode itself (IA-32e mode needs CR0.PG,
// which needs CR0.PE; virtual-8086 mode does not exist in IA-32e mode: SDM Vol. 3A,
// "IA-32e Mode Operation" and "Virtual-8086 Mode"), so they are not tested again.
bool vmreadWriteFast(const Cpu &C) {
  return C.Model.Vmx && !C.NonRoot && C.Vmx->InVmxOperation && C.S.ss().dpl() == 0 &&
         C.Vmx->haveCurrentVmcs();
}
// A full (not high: access-type bit 0 clear) access only; a high access takes the full
// handler.
Status execVmread64Reg(Cpu &C, const DecodedInsn &I) {
  const uint64_t Encoding = C.S.Gpr[I.Reg[1]];
  if (vmreadWriteFast(C) && !(Encoding & 1)) [[likely]] {
    const uint16_t Idx = fieldIndexOfEncoding(Encoding);
    if (Idx != 0xffff && fieldSupported(*C.Model.Vmx, VmcsField(Idx))) [[likely]] {
      C.S.Gpr[I.Reg[0]] = C.Vmx->Vmcs.Values[Idx];
      C.S.Rflags &= ~rflags::Arith;
      return next64(C, I);
    }
  }
  return execVmread<false>(C, I);
}
Status execVmwrite64Reg(Cpu &C, const DecodedInsn &I) {
  const uint64_t Encoding = C.S.Gpr[I.Reg[0]];
  if (vmreadWriteFast(C) && !(Encoding & 1)) [[likely]] {
    const uint16_t Idx = fieldIndexOfEncoding(Encoding);
    if (Idx != 0xffff && fieldSupported(*C.Model.Vmx, VmcsField(Idx)) &&
        (kVmcsFields[Idx].Type != VmcsType::ExitInfo || C.Model.Vmx->VmwriteAnyField))
        [[likely]] {
      C.Vmx->Vmcs.set(VmcsField(Idx), C.S.Gpr[I.Reg[1]]);
      C.S.Rflags &= ~rflags::Arith;
      return next64(C, I);
    }
  }
  return execVmwrite<false>(C, I);
}

// --- VMLAUNCH / VMRESUME (SDM Vol. 3C, VMLAUNCH/VMRESUME—Launch/Resume Virtual Machine) --

template <bool IsLaunch> Status execVmlaunch(Cpu &C, const DecodedInsn &I) {
  if (vmxUd(C))
    return C.raiseUd();
  if (C.NonRoot)
    return instructionExit(C, I, IsLaunch ? ExitReason::Vmlaunch : ExitReason::Vmresume, 0);
  if (C.S.cpl() > 0)
    return C.raiseGp(0);
  VmxState &X = *C.Vmx;
  // SDM Vol. 3C, "Basic VM-Entry Checks": no current VMCS, or a current VMCS that is a
  // shadow VMCS, fails with VMfailInvalid; then MOV-SS blocking and the launch state.
  if (!X.haveCurrentVmcs() || X.CurrentIsShadow)
    return vmFailInvalid(C, I);
  if (C.Retired < C.ShadowUntil && C.ShadowIsMovSs)
    return vmFailValid(C, I, uint32_t(VmInstructionError::EntryEventsBlockedByMovSs));
  if (IsLaunch && X.CurrentLaunch != LaunchState::Clear)
    return vmFailValid(C, I, uint32_t(VmInstructionError::VmlaunchNonClearVmcs));
  if (!IsLaunch && X.CurrentLaunch != LaunchState::Launched)
    return vmFailValid(C, I, uint32_t(VmInstructionError::VmresumeNonLaunchedVmcs));
  return vmEntry(C, I, IsLaunch);
}

// --- VMCALL (SDM Vol. 3C, VMCALL—Call to VM Monitor) ----------------------------------

Status execVmcall(Cpu &C, const DecodedInsn &I) {
  const CpuState &S = C.S;
  if (!C.Model.Vmx || !C.Vmx->InVmxOperation)
    return C.raiseUd();
  if (C.NonRoot)
    return instructionExit(C, I, ExitReason::Vmcall, 0);
  if ((S.Rflags & rflags::VM) || (S.longMode() && !(S.cs().Attr & Segment::L)))
    return C.raiseUd();
  if (S.cpl() > 0)
    return C.raiseGp(0);
  // The dual-monitor treatment of SMIs and SMM is not modelled: IA32_SMM_MONITOR_CTL[0]
  // reads 0, so VMCALL in VMX root operation always fails with error 1.
  return vmFail(C, I, uint32_t(VmInstructionError::VmcallInVmxRootOperation));
}

// --- INVEPT / INVVPID (SDM Vol. 3C, INVEPT—Invalidate Translations Derived from EPT;
// INVVPID—Invalidate Translations Based on VPID) ---------------------------------------

struct Descriptor128 {
  uint64_t Lo, Hi;
};

uint64_t eptVpidCap(const Cpu &C) {
  return readVmxCapabilityMsr(C, msr::IA32_VMX_EPT_VPID_CAP).value_or(0);
}

/// Whether an EPTP would pass the VM-entry EPTP checks (SDM Vol. 3C, "Checks on VMX
/// Controls > VM-Execution Control Fields", EPTP bullet).
// INVEPT single-context takes an EPTP that must pass the VM-entry EPTP checks (SDM
// Vol. 3C, INVEPT: "IF ... EPTP is invalid THEN VMfail(Invalid operand ...)").
bool eptpValid(const Cpu &C, uint64_t Eptp) {
  return checkEptp(Eptp, eptVpidCap(C), C.Model.MaxPhysAddrBits) == VmEntryCheckId::None;
}

uint32_t invInfo(const DecodedInsn &I) {
  return memoryOperandInfo(I) | (uint32_t(I.Reg[0]) << 28);
}

Status execInvept(Cpu &C, const DecodedInsn &I) {
  uint64_t Cap = eptVpidCap(C);
  // #UD without EPT or without INVEPT support (IA32_VMX_EPT_VPID_CAP[20]).
  if (vmxUd(C) || !C.Model.Vmx->has(VmxFeature::Ept) || !(Cap & (1u << 20)))
    return C.raiseUd();
  if (C.NonRoot)
    return instructionExit(C, I, ExitReason::Invept, invInfo(I));
  if (C.S.cpl() > 0)
    return C.raiseGp(0);
  uint64_t Type = regOperand(C, I.Reg[0]);
  if (Type < 1 || Type > 2 || !(Cap & (uint64_t(1) << (Type + 24))))
    return vmFail(C, I, uint32_t(VmInstructionError::InvalidInveptInvvpidOperand));
  Descriptor128 D;
  VMX_TRY(readMem(C, SegReg(I.Seg), effectiveAddress(C, I), D));
  if (Type == 1 && !eptpValid(C, D.Lo))
    return vmFail(C, I, uint32_t(VmInstructionError::InvalidInveptInvvpidOperand));
  // Single-context: the mappings derived from the EP4TA in the descriptor, for every
  // VPID; all-context: every context (which also covers what INVEPT must invalidate).
  if (Type == 1)
    C.Mmu.flushTlbEptp(D.Lo);
  else
    C.Mmu.flushTlbAllContexts();
  return vmSucceed(C, I);
}

Status execInvvpid(Cpu &C, const DecodedInsn &I) {
  uint64_t Cap = eptVpidCap(C);
  // #UD without VPID or without INVVPID support (IA32_VMX_EPT_VPID_CAP[32]).
  if (vmxUd(C) || !C.Model.Vmx->has(VmxFeature::Vpid) || !(Cap & (uint64_t(1) << 32)))
    return C.raiseUd();
  if (C.NonRoot)
    return instructionExit(C, I, ExitReason::Invvpid, invInfo(I));
  if (C.S.cpl() > 0)
    return C.raiseGp(0);
  uint64_t Type = regOperand(C, I.Reg[0]);
  const uint32_t Err = uint32_t(VmInstructionError::InvalidInveptInvvpidOperand);
  if (Type > 3 || !(Cap & (uint64_t(1) << (Type + 40))))
    return vmFail(C, I, Err);
  Descriptor128 D;
  VMX_TRY(readMem(C, SegReg(I.Seg), effectiveAddress(C, I), D));
  if (D.Lo >> 16)
    return vmFail(C, I, Err);
  uint16_t Vpid = uint16_t(D.Lo);
  if (Type != 2 && Vpid == 0)
    return vmFail(C, I, Err);
  if (Type == 0) {
    unsigned Bits = C.Model.MaxLinearAddrBits;
    if (uint64_t(int64_t(D.Hi << (64 - Bits)) >> (64 - Bits)) != D.Hi)
      return vmFail(C, I, Err);
  }
  // SDM Vol. 3C, INVVPID: individual-address (0), single-context (1) and single-context
  // retaining globals (3) invalidate the given VPID's mappings (all of them: more than
  // required is allowed); all-context (2) invalidates every VPID but 0000H (all, here).
  if (Type == 2)
    C.Mmu.flushTlbAllContexts();
  else
    C.Mmu.flushTlbVpid(Vpid);
  return vmSucceed(C, I);
}

// --- VMFUNC (SDM Vol. 3C, VMFUNC—Invoke VM function) ----------------------------------

Status execVmfunc(Cpu &C, const DecodedInsn &I) {
  if (!C.NonRoot)
    return C.raiseUd();
  const VmcsData &V = C.Vmx->Vmcs;
  const bool Enabled = controlSet(V, VmxControl::EnableVmFunctions);
  // SDM Vol. 3C, "General Operation of the VMFUNC Instruction": #UD when "enable VM
  // functions" is 0 or EAX > 63 (only VM functions 0-63 can be enabled); a VM exit
  // (reason 59) when the selected VM function is disabled.
  uint64_t Leaf = uint32_t(C.S.Gpr[RAX]);
  if (!Enabled || Leaf >= 64)
    return C.raiseUd();
  if (!(V.get(F::VmFunctionControls) & (uint64_t(1) << Leaf)))
    return instructionExit(C, I, ExitReason::Vmfunc, 0);
  // Leaf 0 is the only function the VM-function controls can enable (IA32_VMX_VMFUNC
  // reports no other, and VM entry refuses reserved bits).
  if (Leaf == 0)
    return vmfuncEptpSwitching(C, I);
  return C.unimplemented("VM function other than EPTP switching");
}

void bindVmx(DecodedInsn &I, Handler Fn, bool EndsBlock) {
  I.Fn = Fn;
  I.Cost = costOf(CostClass::System);
  if (EndsBlock)
    I.Flags |= insnflag::EndsBlock;
}

bool noLock(const DecodedInsn &I) { return !(I.Flags & insnflag::Lock); }

} // namespace

// --- Binders (rows in cpu/vmx/insns_vmx.def) -------------------------------------------
// Every VMX instruction but VMREAD and VMWRITE ends its block: any of them may exit to
// the host or change the state that decoding and the TLB depend on. VMREAD and VMWRITE
// in VMX root operation change registers, RFLAGS, the current VMCS's data and (a memory
// operand, through the ordinary store path) memory only, and a fault leaves the block
// through its status; hypervisors run them back to back. In non-root operation they end
// the block themselves (a VM exit, or a shadow-VMCS access).

bool bindVmxon(const DecodeInfo &D, DecodedInsn &I) {
  bindVmx(I, &execVmxon, true);
  return D.Ops[0].Kind == OperandKind::Mem && noLock(I);
}
bool bindVmxoff(const DecodeInfo &, DecodedInsn &I) {
  bindVmx(I, &execVmxoff, true);
  return noLock(I);
}
bool bindVmclear(const DecodeInfo &D, DecodedInsn &I) {
  bindVmx(I, &execVmclear, true);
  return D.Ops[0].Kind == OperandKind::Mem && noLock(I);
}
bool bindVmptrld(const DecodeInfo &D, DecodedInsn &I) {
  bindVmx(I, &execVmptrld, true);
  return D.Ops[0].Kind == OperandKind::Mem && noLock(I);
}
bool bindVmptrst(const DecodeInfo &D, DecodedInsn &I) {
  bindVmx(I, &execVmptrst, true);
  return D.Ops[0].Kind == OperandKind::Mem && noLock(I);
}
bool bindVmread(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  bool Mem = D.Ops[0].Kind == OperandKind::Mem;
  bindVmx(I, Mem ? &execVmread<true>
                 : D.Mode == CodeMode::Long64 ? &execVmread64Reg
                                              : &execVmread<false>,
          false);
  return noLock(I);
}
bool bindVmwrite(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  bool Mem = D.Ops[1].Kind == OperandKind::Mem;
  bindVmx(I, Mem ? &execVmwrite<true>
                 : D.Mode == CodeMode::Long64 ? &execVmwrite64Reg
                                              : &execVmwrite<false>,
          false);
  return noLock(I);
}
bool bindVmlaunch(const DecodeInfo &, DecodedInsn &I) {
  bindVmx(I, &execVmlaunch<true>, true);
  return noLock(I);
}
bool bindVmresume(const DecodeInfo &, DecodedInsn &I) {
  bindVmx(I, &execVmlaunch<false>, true);
  return noLock(I);
}
bool bindVmcall(const DecodeInfo &, DecodedInsn &I) {
  bindVmx(I, &execVmcall, true);
  return noLock(I);
}
bool bindInvept(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  bindVmx(I, &execInvept, true);
  return D.Ops[1].Kind == OperandKind::Mem && noLock(I);
}
bool bindInvvpid(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  bindVmx(I, &execInvvpid, true);
  return D.Ops[1].Kind == OperandKind::Mem && noLock(I);
}
bool bindVmfunc(const DecodeInfo &, DecodedInsn &I) {
  bindVmx(I, &execVmfunc, true);
  return noLock(I);
}

} // namespace vmxsim
