// VMX non-root operation: which instructions exit and under which controls, the exit
// information they record, and how the instructions that do not exit behave (SDM Vol.
// 3C, "VMX Non-Root Operation"; exit information from "VM Exits" > "Exit
// Qualification for VM Exits Due to Instruction Execution" and "VM-Exit Instruction
// Information"). The hooks are called from the instruction handlers (see nonroot.h).
#include "cpu/vmx/nonroot.h"

#include "cpu/cpu.h"
#include "cpu/exec.h"
#include "cpu/memory.h"
#include "cpu/vmx/apic_virtualization.h"
#include "cpu/vmx/exit_qualification.h"
#include "cpu/vmx/instruction_info.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmcs_controls.h"
#include "cpu/vmx/vmx_instructions.h"
#include "cpu/vmx/vmx_state.h"

namespace vmxsim::nonroot {

namespace {

using F = VmcsField;

const VmcsData &vmcs(const Cpu &C) { return C.Vmx->Vmcs; }

/// A fault-like exit caused by executing I: RIP stays at the instruction (guest RIP is
/// saved as C.S.Rip) and the VM-exit instruction length is recorded (SDM Vol. 3C,
/// "Information for VM Exits Due to Instruction Execution").
Status instructionExit(Cpu &C, const DecodedInsn &I, ExitReason Reason,
                       uint64_t Qualification = 0, uint32_t Info = 0) {
  VmExitInfo E;
  E.Reason = Reason;
  E.Qualification = Qualification;
  E.InstructionLength = I.Len;
  E.InstructionInfo = Info;
  return vmExit(C, E);
}

/// Linear address of Seg:Offset without checks (the exit reports the address the
/// instruction would use): in 64-bit mode only FS and GS have a base; elsewhere the
/// address wraps at 4 GiB.
uint64_t linearAddress(const Cpu &C, SegReg Seg, uint64_t Offset) {
  const CpuState &S = C.S;
  if (S.in64BitMode())
    return Seg >= SegReg::FS ? Offset + S.seg(Seg).Base : Offset;
  return uint32_t(S.seg(Seg).Base + Offset);
}

/// VMX-fixed CR0/CR4 bits a guest write may not violate when it does not exit (SDM
/// Vol. 3C, "Changes to Instruction Behavior in VMX Non-Root Operation" > MOV to CR0:
/// "a general-protection exception if it attempts to set any bit in CR0 to a value not
/// supported in VMX operation"; with "unrestricted guest" PE and PG are exempt).
bool violatesFixedBits(const Cpu &C, uint32_t Fixed0Msr, uint32_t Fixed1Msr, uint64_t V,
                       uint64_t Exempt) {
  uint64_t Fixed0 = readVmxCapabilityMsr(C, Fixed0Msr).value_or(0) & ~Exempt;
  uint64_t Fixed1 = readVmxCapabilityMsr(C, Fixed1Msr).value_or(~uint64_t(0));
  return (V & Fixed0) != Fixed0 || (V & ~Fixed1);
}

uint64_t cr0Exempt(const Cpu &C) {
  return procCtl(C, VmxControl::UnrestrictedGuest) ? (cr0::PE | cr0::PG) : 0;
}

/// Reg: the MOV CR general-purpose register, or kRegNone for CLTS and LMSW.
uint64_t crAccessQualification(unsigned Cr, exitqual::CrAccessType Type, uint8_t Reg) {
  using namespace exitqual::cr_access;
  uint64_t Q = CrNumber.set(0, Cr);
  Q = AccessType.set(Q, uint64_t(Type));
  return Reg < 16 ? GeneralPurposeRegister.set(Q, Reg) : Q;
}

// --- Bitmaps ----------------------------------------------------------------------

bool bitmapBit(const Cpu &C, uint64_t Base, uint32_t Bit) {
  return (C.Mem.read(Hpa(Base + Bit / 8), 1) >> (Bit % 8)) & 1;
}

/// SDM Vol. 3C, "MSR-Bitmap Address": read bitmap for low MSRs (00000000H-00001FFFH) at
/// offset 0, for high MSRs (C0000000H-C0001FFFH) at 1024, write bitmaps at 2048 and
/// 3072; MSRs outside both ranges always exit ("Instructions That Cause VM Exits
/// Conditionally" > RDMSR/WRMSR).
bool msrExits(const Cpu &C, uint32_t Msr, bool Write) {
  if (!procCtl(C, VmxControl::UseMsrBitmaps))
    return true;
  uint64_t Base = vmcs(C).get(F::MsrBitmapsAddress) + (Write ? 2048 : 0);
  if (Msr <= 0x1fff)
    return bitmapBit(C, Base, Msr);
  if (Msr >= 0xc0000000 && Msr <= 0xc0001fff)
    return bitmapBit(C, Base + 1024, Msr - 0xc0000000);
  return true;
}

/// SDM Vol. 3C, "Instructions That Cause VM Exits Conditionally" > I/O instructions:
/// with "use I/O bitmaps" = 1 every port accessed is looked up (bitmap A for 0000H-7FFFH,
/// B for 8000H-FFFFH) and an access that wraps past FFFFH exits; "unconditional I/O
/// exiting" is then ignored. Without bitmaps, "unconditional I/O exiting" decides.
bool ioExits(const Cpu &C, uint16_t Port, unsigned SizeBytes) {
  if (!procCtl(C, VmxControl::UseIoBitmaps))
    return procCtl(C, VmxControl::UnconditionalIoExiting);
  for (uint32_t P = Port; P < uint32_t(Port) + SizeBytes; ++P) {
    if (P > 0xffff)
      return true;
    uint64_t Base = vmcs(C).get(P < 0x8000 ? F::IoBitmapAAddress : F::IoBitmapBAddress);
    if (bitmapBit(C, Base, P & 0x7fff))
      return true;
  }
  return false;
}

} // namespace

bool procCtl(const Cpu &C, VmxControl Ctl) { return controlSet(vmcs(C), Ctl); }

uint64_t guestTsc(const Cpu &C, uint64_t Tsc) {
  if (!procCtl(C, VmxControl::UseTscOffsetting))
    return Tsc;
  if (procCtl(C, VmxControl::UseTscScaling))
    Tsc = uint64_t((unsigned __int128)Tsc * vmcs(C).get(F::TscMultiplier) >> 48);
  return Tsc + vmcs(C).get(F::TscOffset);
}

uint64_t guestCr0(const Cpu &C) {
  uint64_t Mask = vmcs(C).get(F::Cr0GuestHostMask);
  return (vmcs(C).get(F::Cr0ReadShadow) & Mask) | (C.S.Cr0 & ~Mask);
}
uint64_t guestCr4(const Cpu &C) {
  uint64_t Mask = vmcs(C).get(F::Cr4GuestHostMask);
  return (vmcs(C).get(F::Cr4ReadShadow) & Mask) | (C.S.Cr4 & ~Mask);
}

// --- Unconditional exits -----------------------------------------------------------

Status onCpuid(Cpu &C, const DecodedInsn &I) {
  return instructionExit(C, I, ExitReason::Cpuid);
}
Status onInvd(Cpu &C, const DecodedInsn &I) { return instructionExit(C, I, ExitReason::Invd); }
Status onXsetbv(Cpu &C, const DecodedInsn &I) {
  return instructionExit(C, I, ExitReason::Xsetbv);
}

// --- Conditional exits -------------------------------------------------------------

Status onHlt(Cpu &C, const DecodedInsn &I) {
  if (procCtl(C, VmxControl::HltExiting))
    return instructionExit(C, I, ExitReason::Hlt);
  return Status::Ok;
}

// SDM Vol. 3C, "Instructions That Cause VM Exits Conditionally" > MONITOR, MWAIT; the
// MWAIT qualification is exit_qualification.def's mwait layout.
Status onMonitor(Cpu &C, const DecodedInsn &I) {
  if (procCtl(C, VmxControl::MonitorExiting))
    return instructionExit(C, I, ExitReason::Monitor);
  return Status::Ok;
}

Status onMwait(Cpu &C, const DecodedInsn &I, bool MonitorArmed) {
  if (procCtl(C, VmxControl::MwaitExiting))
    return instructionExit(C, I, ExitReason::Mwait,
                           exitqual::mwait::MonitorArmed.set(0, MonitorArmed));
  return Status::Ok;
}

Status onWbinvd(Cpu &C, const DecodedInsn &I) {
  if (procCtl(C, VmxControl::WbinvdExiting))
    return instructionExit(C, I, ExitReason::WbinvdOrWbnoinvd);
  return Status::Ok;
}

Status onRdpmc(Cpu &C, const DecodedInsn &I) {
  if (procCtl(C, VmxControl::RdpmcExiting))
    return instructionExit(C, I, ExitReason::Rdpmc);
  return Status::Ok;
}

// SDM Vol. 3C, "Instructions That Cause VM Exits Conditionally" > PAUSE. "PAUSE exiting"
// exits at any CPL. "PAUSE-loop exiting" applies at CPL 0 only: a PAUSE more than PLE_Gap
// TSC cycles after the previous CPL-0 PAUSE (or the first after VM entry) starts a loop;
// a PAUSE more than PLE_Window cycles after the start of its loop exits. Time is the
// virtual TSC before offsetting (Cpu::Cycles), which runs at the TSC rate.
Status onPause(Cpu &C, const DecodedInsn &I) {
  if (procCtl(C, VmxControl::PauseExiting))
    return instructionExit(C, I, ExitReason::Pause);
  if (C.S.cpl() != 0 || !procCtl(C, VmxControl::PauseLoopExiting))
    return Status::Ok;
  VmxState &X = *C.Vmx;
  const uint64_t Now = C.Cycles;
  const bool FirstInLoop = !X.PleValid || Now - X.PleLastPause > vmcs(C).get(F::PleGap);
  X.PleValid = true;
  X.PleLastPause = Now;
  if (FirstInLoop) {
    X.PleLoopStart = Now;
    return Status::Ok;
  }
  if (Now - X.PleLoopStart > vmcs(C).get(F::PleWindow))
    return instructionExit(C, I, ExitReason::Pause);
  return Status::Ok;
}

Status onInvlpg(Cpu &C, const DecodedInsn &I, uint64_t LinearAddress) {
  if (procCtl(C, VmxControl::InvlpgExiting))
    return instructionExit(C, I, ExitReason::Invlpg, LinearAddress);
  return Status::Ok;
}

bool invpcidEnabled(const Cpu &C) { return procCtl(C, VmxControl::EnableInvpcid); }

// "INVPCID causes a VM exit if the 'INVLPG exiting' and 'enable INVPCID' VM-execution
// controls are both 1"; the exit reports the displacement and the instruction
// information of Table "... as Used for INVEPT, INVPCID, and INVVPID".
Status onInvpcid(Cpu &C, const DecodedInsn &I) {
  if (!procCtl(C, VmxControl::InvlpgExiting) || !invpcidEnabled(C))
    return Status::Ok;
  uint32_t Info = insninfo::memoryOperand(I);
  Info = uint32_t(insninfo::invalidation::Reg2.set(Info, I.Reg[0]));
  return instructionExit(C, I, ExitReason::Invpcid, exitqual::displacement(I, C.S.Rip), Info);
}

bool rdtscpEnabled(const Cpu &C) { return procCtl(C, VmxControl::EnableRdtscp); }

Status onRdtsc(Cpu &C, const DecodedInsn &I, bool IsRdtscp) {
  if (procCtl(C, VmxControl::RdtscExiting))
    return instructionExit(C, I, IsRdtscp ? ExitReason::Rdtscp : ExitReason::Rdtsc);
  return Status::Ok;
}

Status onRdmsr(Cpu &C, const DecodedInsn &I, uint32_t Msr, bool &Done) {
  if (msrExits(C, Msr, false))
    return instructionExit(C, I, ExitReason::Rdmsr);
  return apicv::rdmsr(C, I, Msr, Done);
}
Status onWrmsr(Cpu &C, const DecodedInsn &I, uint32_t Msr, bool &Done) {
  if (msrExits(C, Msr, true))
    return instructionExit(C, I, ExitReason::Wrmsr);
  return apicv::wrmsr(C, I, Msr, Done);
}

Status onRdrandRdseed(Cpu &C, const DecodedInsn &I, bool IsRdseed) {
  if (!procCtl(C, IsRdseed ? VmxControl::RdseedExiting : VmxControl::RdrandExiting))
    return Status::Ok;
  using namespace insninfo::rdrand_rdseed;
  uint64_t Info = DestinationRegister.set(0, I.Reg[0]);
  Info = OperandSize.set(Info, I.OpSize == 2 ? 0 : I.OpSize == 4 ? 1 : 2);
  return instructionExit(C, I, IsRdseed ? ExitReason::Rdseed : ExitReason::Rdrand, 0,
                         uint32_t(Info));
}

// SDM Vol. 3C, "Instructions That Cause VM Exits Conditionally" > LGDT, LIDT, SGDT,
// SIDT ("descriptor-table exiting"); exit information from Table "... as Used for LIDT,
// LGDT, SIDT, or SGDT".
Status onGdtrIdtrAccess(Cpu &C, const DecodedInsn &I, GdtrIdtrInsn Which) {
  if (!procCtl(C, VmxControl::DescriptorTableExiting))
    return Status::Ok;
  using namespace insninfo::descriptor_table;
  uint64_t Info = insninfo::memoryOperand(I);
  Info = OperandSize.set(Info, I.OpSize == 2 ? 0 : 1);
  Info = InstructionIdentity.set(Info, uint64_t(Which));
  return instructionExit(C, I, ExitReason::AccessToGdtrOrIdtr,
                         exitqual::displacement(I, C.S.Rip), uint32_t(Info));
}

// LLDT, LTR, SLDT, STR: Table "... as Used for LLDT, LTR, SLDT, and STR".
Status onLdtrTrAccess(Cpu &C, const DecodedInsn &I, LdtrTrInsn Which) {
  if (!procCtl(C, VmxControl::DescriptorTableExiting))
    return Status::Ok;
  using namespace insninfo::ldtr_tr;
  uint64_t Info;
  if (I.hasMem()) {
    Info = insninfo::memoryOperand(I);
  } else {
    Info = Reg1.set(0, I.Reg[0]);
    Info = insninfo::memory_operand::MemReg.set(Info, 1);
  }
  Info = InstructionIdentity.set(Info, uint64_t(Which));
  return instructionExit(C, I, ExitReason::AccessToLdtrOrTr,
                         exitqual::displacement(I, C.S.Rip), uint32_t(Info));
}

// --- Control registers (SDM Vol. 3C, "Instructions That Cause VM Exits Conditionally"
// > CLTS, LMSW, MOV from/to CR0, CR3, CR4, CR8; "Changes to Instruction Behavior in VMX
// Non-Root Operation" for the forms that do not exit) ------------------------------

Status onMovToCr(Cpu &C, const DecodedInsn &I, unsigned Cr, uint64_t &Value, bool &Done) {
  const VmcsData &V = vmcs(C);
  const uint64_t Qual = crAccessQualification(Cr, exitqual::CrAccessType::MovToCr, I.Reg[1]);
  switch (Cr) {
  case 0:
  case 4: {
    // Exits if any host-owned bit (set in the guest/host mask) would differ from the
    // read shadow; otherwise the host-owned bits keep their values and the other bits
    // must respect the VMX-fixed bits.
    const bool Is0 = Cr == 0;
    const uint64_t Mask = V.get(Is0 ? F::Cr0GuestHostMask : F::Cr4GuestHostMask);
    const uint64_t Shadow = V.get(Is0 ? F::Cr0ReadShadow : F::Cr4ReadShadow);
    if ((Value ^ Shadow) & Mask)
      return instructionExit(C, I, ExitReason::ControlRegisterAccesses, Qual);
    Value = (Value & ~Mask) | ((Is0 ? C.S.Cr0 : C.S.Cr4) & Mask);
    bool Bad = Is0 ? violatesFixedBits(C, msr::IA32_VMX_CR0_FIXED0, msr::IA32_VMX_CR0_FIXED1,
                                       Value, cr0Exempt(C))
                   : violatesFixedBits(C, msr::IA32_VMX_CR4_FIXED0, msr::IA32_VMX_CR4_FIXED1,
                                       Value, 0);
    if (Bad)
      return C.raiseGp(0);
    return Status::Ok;
  }
  case 3: {
    // No exit when the value equals one of the first "CR3-target count" CR3-target
    // values.
    if (!procCtl(C, VmxControl::Cr3LoadExiting))
      return Status::Ok;
    const F Targets[] = {F::Cr3TargetValue0, F::Cr3TargetValue1, F::Cr3TargetValue2,
                         F::Cr3TargetValue3};
    const uint64_t Count = V.get(F::Cr3TargetCount);
    for (unsigned K = 0; K < 4 && K < Count; ++K)
      if (V.get(Targets[K]) == Value)
        return Status::Ok;
    return instructionExit(C, I, ExitReason::ControlRegisterAccesses, Qual);
  }
  case 8:
    if (procCtl(C, VmxControl::Cr8LoadExiting))
      return instructionExit(C, I, ExitReason::ControlRegisterAccesses, Qual);
    if (procCtl(C, VmxControl::UseTprShadow)) {
      Done = true;
      return apicv::movToCr8(C, I, Value);
    }
    return Status::Ok;
  default:
    return Status::Ok;
  }
}

Status onMovFromCr(Cpu &C, const DecodedInsn &I, unsigned Cr, uint64_t &Value) {
  const uint64_t Qual = crAccessQualification(Cr, exitqual::CrAccessType::MovFromCr, I.Reg[0]);
  switch (Cr) {
  case 0:
    Value = guestCr0(C);
    return Status::Ok;
  case 4:
    Value = guestCr4(C);
    return Status::Ok;
  case 3:
    if (procCtl(C, VmxControl::Cr3StoreExiting))
      return instructionExit(C, I, ExitReason::ControlRegisterAccesses, Qual);
    return Status::Ok;
  case 8:
    if (procCtl(C, VmxControl::Cr8StoreExiting))
      return instructionExit(C, I, ExitReason::ControlRegisterAccesses, Qual);
    // "Virtualizing CR8-Based TPR Accesses": bits 3:0 = VTPR[7:4], bits 63:4 cleared.
    if (procCtl(C, VmxControl::UseTprShadow))
      Value = apicv::movFromCr8(C);
    return Status::Ok;
  default:
    return Status::Ok;
  }
}

// CLTS exits when CR0.TS is host-owned and the shadow's TS is 1; when host-owned with
// the shadow's TS 0, CLTS leaves CR0.TS unchanged.
Status onClts(Cpu &C, const DecodedInsn &I, bool &LeaveTs) {
  if (!(vmcs(C).get(F::Cr0GuestHostMask) & cr0::TS))
    return Status::Ok;
  if (vmcs(C).get(F::Cr0ReadShadow) & cr0::TS)
    return instructionExit(C, I, ExitReason::ControlRegisterAccesses,
                           crAccessQualification(0, exitqual::CrAccessType::Clts, kRegNone));
  LeaveTs = true;
  return Status::Ok;
}

// LMSW exits when (a) PE is set in the mask and in the source and clear in the shadow, or
// (b) for any of bits 3:1 the mask is 1 and the source and shadow differ. The exit
// reports the source data and operand type, and the operand's linear address for a
// memory operand ("Guest-linear address": "VM exits due to attempts to execute LMSW
// with a memory operand").
Status onLmsw(Cpu &C, const DecodedInsn &I, uint16_t Source, uint64_t &NewCr0) {
  const uint64_t Mask = vmcs(C).get(F::Cr0GuestHostMask);
  const uint64_t Shadow = vmcs(C).get(F::Cr0ReadShadow);
  const bool SetsMaskedPe = (Mask & Source & cr0::PE) && !(Shadow & cr0::PE);
  const bool ChangesMaskedBits = (Mask & 0xe) & (Source ^ Shadow);
  if (SetsMaskedPe || ChangesMaskedBits) {
    using namespace exitqual::cr_access;
    uint64_t Q = crAccessQualification(0, exitqual::CrAccessType::Lmsw, kRegNone);
    Q = LmswOperandType.set(Q, I.hasMem() ? 1 : 0);
    Q = LmswSourceData.set(Q, Source);
    VmExitInfo E;
    E.Reason = ExitReason::ControlRegisterAccesses;
    E.Qualification = Q;
    E.InstructionLength = I.Len;
    if (I.hasMem()) {
      E.GuestLinearAddress = linearAddress(C, SegReg(I.Seg), effectiveAddress(C, I));
      E.GuestLinearValid = true;
    }
    return vmExit(C, E);
  }
  NewCr0 = (NewCr0 & ~Mask) | (C.S.Cr0 & Mask);
  if (violatesFixedBits(C, msr::IA32_VMX_CR0_FIXED0, msr::IA32_VMX_CR0_FIXED1, NewCr0,
                        cr0Exempt(C)))
    return C.raiseGp(0);
  return Status::Ok;
}

// MOV DR exits when "MOV-DR exiting" is 1, with priority over the CPL #GP and the CR4.DE
// #UD for DR4/DR5 ("Instructions That Cause VM Exits Conditionally" > MOV DR) and, as a
// fault-like exit, over the DR7.GD #DB. The qualification names the register the
// instruction encodes (4 or 5 for the aliases).
Status onMovDr(Cpu &C, const DecodedInsn &I, bool ToDr) {
  if (!procCtl(C, VmxControl::MovDrExiting))
    return Status::Ok;
  using namespace exitqual::mov_dr;
  uint64_t Q = DrNumber.set(0, I.Cond);
  Q = Direction.set(Q, ToDr ? 0 : 1);
  Q = GeneralPurposeRegister.set(Q, ToDr ? I.Reg[1] : I.Reg[0]);
  return instructionExit(C, I, ExitReason::MovDr, Q);
}

// --- I/O instructions ----------------------------------------------------------------

// SDM Vol. 3C, "Exit Qualification for I/O Instructions"; INS/OUTS also report the
// linear address of their memory operand ("Guest-linear address") and the address size
// and segment (Table "... as Used for INS and OUTS"; IA32_VMX_BASIC[54] = 1). A REP
// string instruction exits before its first iteration whatever its count, as Bochs does.
Status onIo(Cpu &C, const DecodedInsn &I, const IoAccess &A) {
  if (!ioExits(C, A.Port, A.SizeBytes))
    return Status::Ok;
  using namespace exitqual::io;
  uint64_t Q = SizeOfAccess.set(0, A.SizeBytes - 1);
  Q = Direction.set(Q, A.In);
  Q = StringInstruction.set(Q, A.String);
  Q = RepPrefixed.set(Q, A.Rep);
  Q = OperandEncoding.set(Q, A.Immediate);
  Q = PortNumber.set(Q, A.Port);
  VmExitInfo E;
  E.Reason = ExitReason::IoInstruction;
  E.Qualification = Q;
  E.InstructionLength = I.Len;
  if (A.String) {
    const SegReg Seg = A.In ? SegReg::ES : SegReg(I.Seg);
    const uint64_t Offset = maskToSize(C.S.Gpr[A.In ? RDI : RSI], I.AddrSize);
    E.GuestLinearAddress = linearAddress(C, Seg, Offset);
    E.GuestLinearValid = true;
    using namespace insninfo::memory_operand;
    uint64_t Info = AddressSize.set(0, insninfo::addressSizeCode(I.AddrSize));
    E.InstructionInfo = uint32_t(SegmentRegister.set(Info, uint64_t(Seg)));
  }
  return vmExit(C, E);
}

} // namespace vmxsim::nonroot
