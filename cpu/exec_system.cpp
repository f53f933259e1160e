// System instructions without a family of their own: CPUID, RDTSC/RDTSCP/RDPMC,
// RDMSR/WRMSR, HLT, CLI/STI, PUSHF/POPF, INVLPG, INVPCID, cache and fence instructions,
// PAUSE, UD0/UD1/UD2 (SDM Vol. 2, the instruction page of each). MONITOR/MWAIT are in
// cpu/exec_monitor.cpp.
// Segment-register and descriptor-table instructions are in cpu/exec_seg.cpp, far
// transfers in cpu/exec_far.cpp, CR/DR in cpu/exec_cr.cpp, port I/O in cpu/exec_io.cpp.
#include "cpu/cpuid.h"
#include "cpu/exec.h"
#include "cpu/inline_records.h"
#include "cpu/jit/jit_form.h"
#include "cpu/msrs.h"
#include "cpu/perfmon.h"
#include "cpu/vmx/nonroot.h"
#include "cpu/vmx/vmx_state.h"

namespace vmxsim {

namespace {

unsigned iopl(const Cpu &C) { return unsigned(C.S.Rflags >> 12) & 3; }
bool inV86(const Cpu &C) { return C.S.Rflags & rflags::VM; }

// CPUID exits unconditionally in VMX non-root operation (SDM Vol. 3C, "Instructions That
// Cause VM Exits Unconditionally").
Status execCpuid(Cpu &C, const DecodedInsn &I) {
  if (C.NonRoot) [[unlikely]]
    return nonroot::onCpuid(C, I);
  CpuidResult R = cpuidQuery(C, uint32_t(C.S.Gpr[RAX]), uint32_t(C.S.Gpr[RCX]));
  C.S.Gpr[RAX] = R.Eax;
  C.S.Gpr[RBX] = R.Ebx;
  C.S.Gpr[RCX] = R.Ecx;
  C.S.Gpr[RDX] = R.Edx;
  return next(C, I);
}

// RDTSC/RDTSCP: CR4.TSD restricts them to CPL 0 (SDM Vol. 2B, RDTSC). In VMX non-root
// operation RDTSCP is #UD unless "enable RDTSCP" is 1; both exit with "RDTSC exiting",
// after the CR4.TSD #GP, or else read the offset/scaled TSC (SDM Vol. 3C, "Changes to
// Instruction Behavior in VMX Non-Root Operation" > RDTSC, RDTSCP).
template <bool WithAux> Status execRdtsc(Cpu &C, const DecodedInsn &I) {
  if constexpr (WithAux)
    if (C.NonRoot && !nonroot::rdtscpEnabled(C)) [[unlikely]]
      return C.raiseUd();
  if ((C.S.Cr4 & cr4::TSD) && C.S.cpl() > 0)
    return C.raiseGp(0);
  uint64_t Tsc = readTsc(C);
  if (C.NonRoot) [[unlikely]] {
    VMX_TRY(nonroot::onRdtsc(C, I, WithAux));
    Tsc = nonroot::guestTsc(C, Tsc);
  } else if (VmxTransitionObserver *O = C.Transitions) [[unlikely]] {
    // The ground truth of a hypervisor's trace timestamps (trace/slot_layout.h).
    if (C.Vmx->InVmxOperation && !rootTscRecordInPlace(C, Tsc))
      O->rootTsc(C.Id, C.Cycles, C.S.Rip, Tsc);
  }
  C.S.Gpr[RAX] = uint32_t(Tsc);
  C.S.Gpr[RDX] = uint32_t(Tsc >> 32);
  if constexpr (WithAux)
    C.S.Gpr[RCX] = uint32_t((*C.Msrs)[MsrSlot::IA32_TSC_AUX]);
  return next(C, I);
}

// SDM Vol. 2B, RDPMC: allowed at CPL 0, in real mode, or with CR4.PCE; "RDPMC exiting"
// is checked after that privilege check and before the counter index (cpu/perfmon.h:
// four general-purpose and three fixed counters, 48 bits wide); #GP(0) otherwise.
Status execRdpmc(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  bool Allowed = !(S.Cr0 & cr0::PE) || S.cpl() == 0 || (S.Cr4 & cr4::PCE);
  if (Allowed && C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onRdpmc(C, I));
  uint64_t V;
  if (!Allowed || !C.Pmu->readCounter(C, uint32_t(S.Gpr[RCX]), V))
    return C.raiseGp(0);
  S.Gpr[RAX] = uint32_t(V);
  S.Gpr[RDX] = uint32_t(V >> 32);
  return next(C, I);
}

// RDMSR/WRMSR in VMX non-root operation exit (MSR bitmaps) after the CPL check and
// before any check of the MSR index or value (SDM Vol. 3C, "Relative Priority of Faults
// and VM Exits": "RDMSR of a non-existent MSR with CPL = 0 generates a VM exit").
// RDMSR of IA32_TSC that does not exit reads the offset/scaled TSC.
Status execRdmsr(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  const uint32_t Index = uint32_t(C.S.Gpr[RCX]);
  if (C.NonRoot) [[unlikely]] {
    bool Done = false;
    VMX_TRY(nonroot::onRdmsr(C, I, Index, Done));
    if (Done)
      return Status::Ok;
  }
  uint64_t V;
  VMX_TRY(readMsr(C, Index, V));
  if (C.NonRoot && Index == msr::IA32_TIME_STAMP_COUNTER) [[unlikely]]
    V = nonroot::guestTsc(C, V);
  C.S.Gpr[RAX] = uint32_t(V);
  C.S.Gpr[RDX] = uint32_t(V >> 32);
  return next(C, I);
}
Status execWrmsr(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  if (C.NonRoot) [[unlikely]] {
    bool Done = false;
    VMX_TRY(nonroot::onWrmsr(C, I, uint32_t(C.S.Gpr[RCX]), Done));
    if (Done)
      return Status::Ok;
  }
  uint64_t V = (uint64_t(uint32_t(C.S.Gpr[RDX])) << 32) | uint32_t(C.S.Gpr[RAX]);
  VMX_TRY(writeMsr(C, uint32_t(C.S.Gpr[RCX]), V));
  C.breakBlock();
  return next(C, I);
}

Status execHlt(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onHlt(C, I));
  mwaitSettle(C); // this HLT is not an MWAIT's wait
  C.Activity = ActivityState::Hlt;
  C.breakBlock();
  return next(C, I);
}

// CLI/STI (SDM Vol. 2A, CLI; Vol. 2B, STI): IF when IOPL allows, VIF through PVI (CPL 3)
// or VME (virtual-8086 mode), #GP(0) otherwise.
template <bool Set> Status execCliSti(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  uint64_t Bit = rflags::IF;
  if (S.Cr0 & cr0::PE) {
    bool Allowed = inV86(C) ? iopl(C) == 3 : S.cpl() <= iopl(C);
    if (!Allowed) {
      bool Virtual = inV86(C) ? (S.Cr4 & cr4::VME) : (S.cpl() == 3 && (S.Cr4 & cr4::PVI));
      if (!Virtual || (Set && (S.Rflags & rflags::VIP)))
        return C.raiseGp(0);
      Bit = rflags::VIF;
    }
  }
  if constexpr (Set) {
    // STI blocks interrupts until the end of the next instruction if IF was 0 (SDM
    // Vol. 3A, Masking Maskable Hardware Interrupts). Retired advances once for STI;
    // the window after the next instruction is at Retired + 2. The run loop runs that
    // instruction alone so the window is not skipped.
    if (Bit == rflags::IF && !(S.Rflags & rflags::IF)) {
      C.ShadowUntil = C.Retired + 2;
      C.ShadowIsMovSs = false; // "blocking by STI"
    }
    S.Rflags |= Bit;
  } else {
    S.Rflags &= ~Bit;
  }
  C.breakBlock();
  return next(C, I);
}

// PUSHF: VM and RF are cleared in the image (SDM Vol. 2B, PUSHF/PUSHFD/PUSHFQ).
template <typename T> Status execPushf(Cpu &C, const DecodedInsn &I) {
  if (inV86(C) && iopl(C) != 3)
    return C.raiseGp(0);
  VMX_TRY(push<T>(C, T(C.S.Rflags & ~(rflags::VM | rflags::RF))));
  return next(C, I);
}

// POPF (SDM Vol. 2B, POPF/POPFD/POPFQ): VM, VIF, VIP never change; RF is cleared; IOPL
// changes only at CPL 0; IF only when CPL <= IOPL; a 16-bit POPF touches bits 15:0.
template <typename T> Status execPopf(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  if (inV86(C) && iopl(C) != 3)
    return C.raiseGp(0);
  T V;
  VMX_TRY(peek(C, V));
  uint64_t Mask = rflags::Arith | rflags::TF | rflags::DF | rflags::NT | rflags::AC |
                  rflags::ID | rflags::IF | rflags::IOPL;
  if (inV86(C)) {
    Mask &= ~rflags::IOPL;
  } else if (S.cpl() > 0) {
    Mask &= ~rflags::IOPL;
    if (S.cpl() > iopl(C))
      Mask &= ~rflags::IF;
  }
  if (sizeof(T) == 2)
    Mask &= 0xffff;
  popCommit(C, sizeof(T));
  S.Rflags = ((S.Rflags & ~Mask & ~rflags::RF) | (uint64_t(V) & Mask)) | rflags::Fixed1;
  C.breakBlock(); // IF or TF may have changed
  return next(C, I);
}

// INVLPG (SDM Vol. 2A): CPL 0, memory operand only; a non-canonical address is a NOP.
Status execInvlpg(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  uint64_t La = effectiveAddress(C, I);
  if (C.S.in64BitMode()) {
    if (SegReg(I.Seg) >= SegReg::FS)
      La += C.S.seg(SegReg(I.Seg)).Base;
  } else {
    La = (La + C.S.seg(SegReg(I.Seg)).Base) & 0xffffffffull;
  }
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onInvlpg(C, I, La));
  C.Mmu.flushTlbPage(Gla(La));
  return next(C, I);
}

// INVPCID (SDM Vol. 2A): type in a register, a 128-bit descriptor {PCID, linear address}.
// In VMX non-root operation INVPCID is #UD unless "enable INVPCID" is 1, and exits
// (after the CPL check, before the descriptor is read) with "INVLPG exiting".
template <typename T> Status execInvpcid(Cpu &C, const DecodedInsn &I) {
  CpuState &S = C.S;
  if (C.NonRoot && !nonroot::invpcidEnabled(C)) [[unlikely]]
    return C.raiseUd();
  if (S.cpl() != 0)
    return C.raiseGp(0);
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onInvpcid(C, I));
  uint64_t Type = getReg<T>(C, I.Reg[0]);
  uint64_t Ea = effectiveAddress(C, I);
  uint64_t Desc[2];
  VMX_TRY(readMem(C, SegReg(I.Seg), Ea, Desc[0]));
  VMX_TRY(readMem(C, SegReg(I.Seg), maskToSize(Ea + 8, I.AddrSize), Desc[1]));
  if (Type > 3 || (Desc[0] >> 12))
    return C.raiseGp(0);
  if (Type <= 1 && !(S.Cr4 & cr4::PCIDE) && (Desc[0] & 0xfff))
    return C.raiseGp(0);
  if (Type == 0 && !isCanonical(C, Desc[1]))
    return C.raiseGp(0);
  // The TLB holds no PCID tags: every type is a full flush, which is always allowed.
  C.Mmu.flushTlb();
  return next(C, I);
}

// WBINVD exits with "WBINVD exiting", INVD always (SDM Vol. 3C, "Instructions That
// Cause VM Exits Unconditionally / Conditionally"), after their CPL check.
Status execWbinvd(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onWbinvd(C, I));
  return next(C, I);
}
Status execInvd(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  if (C.NonRoot) [[unlikely]]
    return nonroot::onInvd(C, I);
  return next(C, I);
}

Status execNop(Cpu &C, const DecodedInsn &I) { return next(C, I); }

// PAUSE is a NOP here, except for "PAUSE exiting" and "PAUSE-loop exiting" in VMX
// non-root operation.
Status execPause(Cpu &C, const DecodedInsn &I) {
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onPause(C, I));
  return next(C, I);
}

// CLFLUSH/CLFLUSHOPT are checked like a byte read (SDM Vol. 2A, CLFLUSH).
Status execClflush(Cpu &C, const DecodedInsn &I) {
  uint8_t B;
  VMX_TRY(readMem(C, SegReg(I.Seg), effectiveAddress(C, I), B));
  return next(C, I);
}

Status execUd(Cpu &C, const DecodedInsn &) { return C.raiseUd(); }

bool bindFn(DecodedInsn &I, Handler Fn, CostClass Cost, bool Ends = false) {
  I.Fn = Fn;
  I.Cost = costOf(Cost);
  if (Ends)
    I.Flags |= insnflag::EndsBlock;
  return true;
}

} // namespace

bool bindCpuid(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execCpuid, CostClass::System);
}
bool bindRdtsc(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execRdtsc<false>, CostClass::System);
}
bool bindRdtscp(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execRdtsc<true>, CostClass::System);
}
bool bindRdpmc(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execRdpmc, CostClass::System);
}
bool bindRdmsr(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execRdmsr, CostClass::System);
}
bool bindWrmsr(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execWrmsr, CostClass::System, true);
}
bool bindHlt(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execHlt, CostClass::Halt, true);
}
bool bindCli(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execCliSti<false>, CostClass::Simple, true);
}
bool bindSti(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execCliSti<true>, CostClass::Simple, true);
}
bool bindPushf(const DecodeInfo &D, DecodedInsn &I) {
  I.Fn = D.OpSize == 2 ? &execPushf<uint16_t>
         : D.OpSize == 4 ? &execPushf<uint32_t>
                         : &execPushf<uint64_t>;
  I.Cost = costOf(CostClass::Memory);
  return true;
}
bool bindPopf(const DecodeInfo &D, DecodedInsn &I) {
  I.Fn = D.OpSize == 2 ? &execPopf<uint16_t>
         : D.OpSize == 4 ? &execPopf<uint32_t>
                         : &execPopf<uint64_t>;
  I.Cost = costOf(CostClass::Memory);
  I.Flags |= insnflag::EndsBlock;
  return true;
}
bool bindInvlpg(const DecodeInfo &D, DecodedInsn &I) {
  I.Flags &= ~insnflag::HasMem; // computes an address, accesses nothing
  bindFn(I, &execInvlpg, CostClass::System, true);
  return D.Ops[0].Kind == OperandKind::Mem;
}
bool bindInvpcid(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  I.Fn = D.Ops[0].SizeBytes == 8 ? &execInvpcid<uint64_t> : &execInvpcid<uint32_t>;
  I.Cost = costOf(CostClass::System);
  I.Flags |= insnflag::EndsBlock;
  return D.Ops[1].Kind == OperandKind::Mem;
}
bool bindWbinvd(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execWbinvd, CostClass::Serializing);
}
bool bindInvd(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execInvd, CostClass::Serializing);
}
bool bindClflush(const DecodeInfo &D, DecodedInsn &I) {
  bindFn(I, &execClflush, CostClass::Memory);
  return D.Ops[0].Kind == OperandKind::Mem;
}
bool bindFence(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execNop, CostClass::Simple);
}

/// LFENCE, MFENCE and SFENCE order nothing an in-order, one-access-at-a-time processor
/// could reorder: their handler is a NOP's, and the translator emits them as one.
JitForm systemJitForm(const DecodedInsn &I) {
  if (I.Fn == &execNop)
    return JitForm{JitOp::Nop, JitShape::None, 0, 0};
  return {};
}
bool bindPause(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execPause, CostClass::Simple);
}
bool bindUd(const DecodeInfo &, DecodedInsn &I) {
  return bindFn(I, &execUd, CostClass::Simple, true);
}

} // namespace vmxsim
