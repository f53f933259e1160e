#include "cpu/cpu.h"

#include "cpu/cpu_model.h"
#include "cpu/decode.h"
#include "cpu/exceptions.h"
#include "cpu/jit/translator.h"
#include "cpu/memory.h"
#include "cpu/msrs.h"
#include "cpu/perfmon.h"
#include "cpu/vmx/vmx_events.h"
#include "cpu/vmx/vmx_state.h"

#include <algorithm>
#include <cstring>

namespace vmxsim {

namespace {

// An enabled instruction breakpoint matches CS:RIP and MOV SS does not inhibit it: its
// #DB fault is now in C.Pending (cpu/debug.h). The caller has checked RF. MOV SS / POP
// SS inhibit debug exceptions up to the boundary after the next instruction (SDM Vol.
// 3A, "Masking Exceptions and Interrupts When Switching Stacks"): a code breakpoint on
// that instruction is not taken.
bool codeBreakpoint(Cpu &C) {
  if (C.Retired < C.ShadowUntil && C.ShadowIsMovSs)
    return false;
  const uint32_t Bits = instructionBreakpoints(C);
  if (Bits)
    C.Pending = PendingEvent{vec::DB, false, 0, Bits};
  return Bits;
}

} // namespace

Cpu::Cpu(PhysMem &Mem, IoBus &Io, const CpuModel &Model, unsigned Id)
    : Mem(Mem), Io(Io), Model(Model), Msrs(std::make_unique<MsrState>()),
      Vmx(std::make_unique<VmxState>()), Pmu(std::make_unique<PerfMon>()), Id(Id),
      Mmu(*this, Mem) {
  reset();
}

Cpu::~Cpu() = default;

void Cpu::setExecMode(ExecMode M) {
  if (M == ExecMode::Interp)
    Jit.reset();
  else
    Jit = std::make_unique<Translator>(*this, M);
}

void Cpu::reset() {
  // SDM Vol. 3A, Processor State After Reset (table "IA-32 and Intel 64 Processor States
  // Following Power-up, Reset, or INIT").
  S = CpuState{};
  S.Rflags = rflags::Fixed1;
  S.Rip = 0xfff0;
  S.Cr0 = cr0::ET | cr0::CD | cr0::NW;
  for (Segment &G : S.Seg)
    G = Segment{0, 0, 0xffff, Segment::P | Segment::S | 0x3};
  S.seg(SegReg::CS) = Segment{0xf000, 0xffff0000, 0xffff, Segment::P | Segment::S | 0xb};
  S.Ldtr = Segment{0, 0, 0xffff, Segment::P | 0x2};
  S.Tr = Segment{0, 0, 0xffff, Segment::P | 0xb};
  S.Gdtr = S.Idtr = TableReg{0, 0xffff};
  S.Gpr[RDX] = cpuidSignature(Model);
  // x87: FCW 0040H, FSW 0, FTW 5555H (every register tagged zero, holding +0.0: the
  // abridged word has all eight registers non-empty).
  S.Fcw = 0x40;
  S.Ftw = 0xff;
  *Msrs = MsrState{};
  resetMsrs(*this);
  // RESET leaves VMX operation (SDM Vol. 3C, "VMX Operation" and "Processor State
  // After Reset").
  *Vmx = VmxState{};
  NonRoot = false;
  Pending = PendingEvent{};
  monitorReset(*this); // RESET and INIT disarm the monitor
  Ignne = false;
  Activity = ActivityState::Active;
  NmiBlocked = NmiPending = false;
  ShadowUntil = 0;
  DeliveryDepth = 0;
  Debug = DebugState{};
  Mmu.reset();
  Pmu->reset(*this);
  debugRegistersChanged(*this);
  modeChanged();
}

void Cpu::init() {
  // SDM Vol. 3A, Processor State After Reset, INIT column of the table: x87 FPU, XMM
  // registers, MXCSR, MTRRs, machine-check and most MSRs are unchanged; IA32_EFER is
  // cleared (it lives in CpuState, which reset() rebuilds). The TSC keeps counting.
  const CpuState Old = S;
  const MsrState OldMsrs = *Msrs;
  // The performance counters and their controls keep their values and keep counting,
  // as the other MSRs do.
  const PerfMon OldPmu = *Pmu;
  const bool OldPmuActive = PmuActive;
  const bool OldIgnne = Ignne; // the chipset's pin, which INIT does not change
  reset();
  Ignne = OldIgnne;
  *Msrs = OldMsrs;
  *Pmu = OldPmu;
  PmuActive = OldPmuActive;
  std::memcpy(S.XmmReg, Old.XmmReg, sizeof(S.XmmReg));
  S.Mxcsr = Old.Mxcsr;
  S.Fcw = Old.Fcw;
  S.Fsw = Old.Fsw;
  S.Ftw = Old.Ftw;
  S.Fop = Old.Fop;
  S.Fip = Old.Fip;
  S.Fdp = Old.Fdp;
  std::memcpy(S.St, Old.St, sizeof(S.St));
}

void Cpu::modeChanged() {
  const Segment &Cs = S.cs();
  CodeMode M;
  if (S.longMode() && (Cs.Attr & Segment::L))
    M = CodeMode::Long64;
  else if ((S.Cr0 & cr0::PE) && !(S.Rflags & rflags::VM))
    M = (Cs.Attr & Segment::DB) ? CodeMode::Prot32 : CodeMode::Prot16;
  else
    M = CodeMode::Real16;
  DecodeMode = uint8_t(M);
  Mmu.setUserMode(S.cpl() == 3);
  // The CPL may have changed: the counters that filter by it (USR/OS) start or stop.
  if (PmuActive) [[unlikely]]
    Pmu->update(*this);
  RipMask = M == CodeMode::Long64 ? ~uint64_t(0)
            : M == CodeMode::Prot32 ? 0xffffffffull
                                    : 0xffffull;
  breakBlock();
}

// The tests eventWindow makes, in its order, all of them false or not applying: no
// data/I/O breakpoint hit or debug trap to take, no counter to bring up to date, root
// operation (no VMX event), no NMI pending, and no maskable interrupt it could take
// (none wired, RFLAGS.IF = 0, or an STI/MOV SS shadow: SDM Vol. 3A, "Masking Maskable
// Hardware Interrupts"), in the active state (no HLT/MWAIT wake-up, not waiting). The
// window would then return Run having changed nothing, so the run loop skips it: the
// usual window after a VM exit, whose host RFLAGS is 2 (SDM Vol. 3C, "Loading Host RIP,
// RSP, RFLAGS, and SSP").
static bool quietRootWindow(const Cpu &C) {
  return !C.NonRoot && !C.Debug.Hits && !C.Debug.Traps && !C.PmuActive && !C.NmiPending &&
         C.Activity == ActivityState::Active &&
         (!C.Intr || !(C.S.Rflags & rflags::IF) || C.Retired < C.ShadowUntil);
}

StopReason Cpu::run(uint64_t MaxInsns, uint64_t UntilCycle) {
  RunUntil = UntilCycle;
  // Stores into watched memory made while this processor runs are its own, or those of
  // a device its instruction programmed (Mmu::watchedWrite).
  Mem.setWriteWatcher(&Mmu);
  const uint64_t InsnEnd = MaxInsns > ~Retired ? ~uint64_t(0) : Retired + MaxInsns;
  this->InsnEnd = InsnEnd;
  for (;;) {
    if (Io.stopRequested())
      return LastStop = StopReason::StopRequested;
    if (shutDown())
      return LastStop = StopReason::Shutdown;
    if (Retired >= InsnEnd)
      return LastStop = StopReason::InsnLimit;
    if (Cycles >= RunUntil)
      return LastStop = StopReason::Deadline;

    StopReason R = StopReason::InsnLimit;
    // A window in root operation with nothing to take (quietRootWindow) runs on; any
    // other opens the event window.
    if (!quietRootWindow(*this)) {
      switch (eventWindow(R)) {
      case EventWindow::Stop:
        return LastStop = R;
      case EventWindow::Again:
        continue;
      case EventWindow::Run:
        break;
      }
    }
    // An STI/MOV SS shadow covers exactly the next instruction: run it alone (a window
    // due "now" ends the block after one instruction) so the window after it is not
    // skipped. Non-root operation adds MTF, pending debug traps and the timer.
    if (NonRoot) [[unlikely]]
      WindowDue = vmxWindowDue(*this, RunUntil);
    else
      WindowDue = Retired < ShadowUntil ? Cycles : RunUntil;
    // A counting performance counter's overflow is an event at the boundary after it.
    if (PmuActive) [[unlikely]]
      WindowDue = std::min(WindowDue, Pmu->overflowDue(*this));
    if (runBlocks(InsnEnd, R))
      return LastStop = R;
  }
}

EventWindow Cpu::afterEvent(Status St, StopReason &Why) {
  if (St == Status::Fault) // a fault while delivering: deliver it (#DF, triple fault)
    St = deliverPendingException(*this);
  switch (St) {
  case Status::Shutdown:
    // A triple fault, or a VMX abort: the loop reports the shutdown.
    Activity = ActivityState::Shutdown;
    return EventWindow::Again;
  case Status::Unimplemented:
    Why = StopReason::Unimplemented; // e.g. delivery through a task gate
    return EventWindow::Stop;
  default:
    // Root operation runs the handler now; in non-root operation a VM exit or delivery
    // opens the window again (an MTF VM exit may be pending on the new boundary). So
    // does a stop requested meanwhile (the harness's break at a VM exit, IoBus::
    // requestBreak): the run loop's head returns at this boundary.
    return NonRoot || Io.stopRequested() ? EventWindow::Again : EventWindow::Run;
  }
}

EventWindow Cpu::eventWindow(StopReason &Why) {
  // Data and I/O breakpoints matched by the instruction that just completed are traps on
  // it: above NMIs and interrupts (SDM Vol. 3A, "Priority Among Concurrent Events"). In
  // non-root operation they join the pending debug exceptions, below an MTF VM exit.
  // (Each guarded here by the test its callee starts with: no call in the common case.)
  if (Debug.Hits) [[unlikely]]
    commitDebugHits(*this);
  if (!NonRoot && Debug.Traps && takeRootDebugTraps(*this)) [[unlikely]]
    return afterEvent(Status::Fault, Why);
  // Counter overflows up to this boundary raise their PMIs (NMI or interrupt) now.
  if (PmuActive) [[unlikely]]
    Pmu->update(*this);
  if (NonRoot) [[unlikely]]
    vmxWindowOpens(*this);
  for (;;) {
    Status St = Status::Ok;
    // Above NMIs, in VMX non-root operation only: MTF VM exit, pending debug traps, the
    // preemption timer, the NMI window.
    if (NonRoot && vmxBeforeNmi(*this, St)) [[unlikely]]
      return afterEvent(St, Why);

    // NMI (SDM Vol. 3A, NMI Handling): blocked while a previous NMI's handler runs.
    // Non-root operation also holds it off in wait-for-SIPI and after MOV SS (SDM Vol.
    // 3C, "Interruptibility State"), and may turn it into a VM exit.
    if (NmiPending && !NmiBlocked &&
        (!NonRoot || (!(Retired < ShadowUntil && ShadowIsMovSs) &&
                      Activity != ActivityState::WaitForSipi))) {
      NmiPending = false;
      if (NonRoot && vmxNmiExit(*this, St)) [[unlikely]]
        return afterEvent(St, Why);
      if (!NonRoot)
        Activity = ActivityState::Active;
      return afterEvent(deliverEvent(*this, EventKind::Nmi, vec::NMI, false, 0, S.Rip), Why);
    }

    if (NonRoot && vmxInterruptWindowExit(*this, St)) [[unlikely]]
      return afterEvent(St, Why);

    // Maskable interrupts (SDM Vol. 3A, Masking Maskable Hardware Interrupts): RFLAGS.IF
    // and no STI/MOV SS shadow. In non-root operation "external-interrupt exiting" makes
    // them VM exits, which IF does not block, and only the active and HLT states take
    // them.
    if (Intr && Retired >= ShadowUntil) {
      const bool Exits = NonRoot && vmxExternalInterruptExiting(*this);
      const bool Awake =
          Activity == ActivityState::Active || Activity == ActivityState::Hlt;
      if ((Exits || (S.Rflags & rflags::IF)) && (Awake || !NonRoot) &&
          Intr->intrPending()) {
        if (Exits) [[unlikely]]
          return afterEvent(vmxExternalInterruptExit(*this), Why);
        if (!NonRoot)
          Activity = ActivityState::Active;
        const uint8_t Vector = Intr->acknowledge();
        return afterEvent(deliverEvent(*this, EventKind::External, Vector, false, 0, S.Rip),
                          Why);
      }
    }

    // MWAIT with ECX[0] = 1: a pending interrupt that RFLAGS.IF masks still ends the
    // wait; the processor resumes after MWAIT without taking it (SDM Vol. 2B, MWAIT,
    // "Interrupts as break events even if masked").
    if (Intr && Activity == ActivityState::Hlt && mwaitWakesOnMaskedInterrupt(*this) &&
        Intr->intrPending()) [[unlikely]] {
      mwaitWake(*this);
      return EventWindow::Run;
    }
    if (!waiting())
      return EventWindow::Run;
    if (!NonRoot) {
      Why = StopReason::Halted;
      return EventWindow::Stop;
    }
    // An inactive guest: the preemption timer may still wake it.
    if (EventWindow W = vmxWaitForTimer(*this, RunUntil, Why); W != EventWindow::Again)
      return W;
  }
}

bool Cpu::runBlocks(uint64_t InsnEnd, StopReason &Why) {
  // Runs blocks back to back while nothing needs the event window: interrupts can only
  // become deliverable through an instruction that ends its block with breakBlock() (I/O,
  // MMIO, CR/flag writes) or at the cycle deadline, both of which leave this loop.
  // Block chaining: a cached block that ran to its end is Prev; the next block is found
  // through Prev's links when one is current (cpu/mmu.h, "Block links": the lookup
  // would return the same block), else looked up and linked from Prev.
  Block *Prev = nullptr;
  for (;;) {
    // An instruction breakpoint comes before the faults of fetching and decoding the
    // instruction (SDM Vol. 3A, "Priority Among Concurrent Events": code breakpoint,
    // then fetch faults, then decode faults); runBlockSlow checks each later one.
    if (Debug.InsnArmed && !(S.Rflags & rflags::RF) && codeBreakpoint(*this)) [[unlikely]]
      return handleStatus(Status::Fault, Why);
    Block *B = nullptr;
    if (DecodeMode == uint8_t(CodeMode::Long64)) [[likely]] {
      if (Prev) {
        B = Mmu.chainedBlock(*Prev, Gla(S.Rip)); // 64-bit: CS base 0
        // A link does not see a page-crossing block's second page: its fetch TLB slot
        // is tested as cachedBlock tests it (a victim swap there moves no link stamp).
        if (B && B->Crosses && !Mmu.crossingMapped(*B, S.Rip)) [[unlikely]]
          B = nullptr;
      }
      if (!B) {
        B = Mmu.cachedBlock(Gla(S.Rip), DecodeMode);
        if (B && Prev)
          Mmu.linkBlocks(*Prev, Gla(S.Rip), *B);
      }
    }
    Block *Cached = B;
    if (!B) {
      Status St = decodeBlock(*this, B);
      if (St != Status::Ok)
        return handleStatus(St, Why);
    }

    const DecodedInsn *I = B->Insns;
    const DecodedInsn *End = I + B->NumInsns;
    const uint64_t Budget = InsnEnd - Retired; // > 0: checked before each block
    // One instruction at a time while single-stepping, while RF must be cleared after
    // the next instruction, and while an instruction breakpoint is armed (cpu/debug.h).
    if (Observer || (S.Rflags & (rflags::TF | rflags::RF)) || Debug.InsnArmed) [[unlikely]]
      return runBlockSlow(I, I + std::min<uint64_t>(B->NumInsns, Budget), Why);
    if (Budget <= B->NumInsns) [[unlikely]] {
      // The instruction budget ends in this block: the run ends after it (or earlier).
      for (const DecodedInsn *Last = I + Budget; I != Last; ++I) {
        Status St = I->Fn(*this, *I);
        if (St != Status::Ok) [[unlikely]]
          return handleStatus(St, Why);
        Cycles += I->Cost;
        ++Retired;
        if (Cycles >= WindowDue)
          break;
      }
      return false;
    }
    // A translated block runs where this fast loop would run the whole block: the
    // window is due after its end (docs/TRANSLATOR.md, "Exactness"). It hands the rest of
    // the block to the loop below when it stops early (Done < NumInsns).
    // (A block just decoded into its cache slot counts as cached: Key is 0 only for the
    // uncached scratch block and a slot left unfilled.)
    if (Jit && B->Key && DecodeMode == uint8_t(CodeMode::Long64) &&
        Cycles + I->CostToEnd < WindowDue) {
      BlockStop = Cycles + I->CostToEnd;
      const JitRun R = Jit->run(*B, Cached ? Prev : nullptr);
      if (R.Ran) {
        if (R.Mismatch) {
          Why = StopReason::LockstepMismatch;
          return true;
        }
        if (R.St != Status::Ok)
          return handleStatus(R.St, Why);
        if (Cycles >= WindowDue)
          return false;
        // The translation may have jumped on into the translations of the blocks that
        // followed (docs/TRANSLATOR.md, "Chaining"), each a cached block: R.Last is where
        // it stopped.
        if (R.Last != B)
          B = Cached = R.Last;
        I = B->Insns + R.Done;
        End = B->Insns + B->NumInsns;
        if (I == End) {
          Prev = Cached;
          continue;
        }
      }
    }
    // One compare per instruction finds both the block's end and the boundary at which
    // the window is due: BlockStop is the earlier of WindowDue and the cycle at which the
    // block's remaining instructions end, and breakBlock() zeroes it with WindowDue. An
    // instruction that adds cycles of its own (a REP string) may stop the loop before End
    // with the window not due; the rest of the block then runs with a new stop. So the
    // loop leaves at exactly the instruction boundaries where a test of WindowDue after
    // every instruction would, and runs every instruction it would.
    for (;;) {
      BlockStop = std::min<uint64_t>(WindowDue, Cycles + I->CostToEnd);
      do {
        Status St = I->Fn(*this, *I);
        if (St != Status::Ok) [[unlikely]]
          return handleStatus(St, Why);
        Cycles += I->Cost;
        ++Retired;
        ++I;
      } while (Cycles < BlockStop);
      if (Cycles >= WindowDue)
        return false;
      if (I == End)
        break;
    }
    Prev = Cached;
  }
}

bool Cpu::runBlockSlow(const DecodedInsn *I, const DecodedInsn *End, StopReason &Why) {
  for (; I != End; ++I) {
    if (Observer && Observer->holdBefore(*this, *I)) [[unlikely]]
      return false; // the run loop finds the break at its head
    const bool SingleStep = S.Rflags & rflags::TF;
    // SDM Vol. 3B, "Instruction-Breakpoint Exception Condition": an enabled instruction
    // breakpoint at this instruction is a #DB fault before it executes, unless RF is
    // set; "the RF flag is cleared at the start of the instruction after the check for
    // code breakpoint" (IRET and task switches load it again from their images).
    if (S.Rflags & rflags::RF) {
      S.Rflags &= ~rflags::RF;
      Debug.HeldRf = true;
    } else if (Debug.InsnArmed && codeBreakpoint(*this)) {
      return handleStatus(Status::Fault, Why);
    }
    const uint64_t Fallthrough = (S.Rip + I->Len) & RipMask;
    const uint16_t OldCs = S.cs().Selector;
    if (Observer)
      Observer->beforeInsn(*this, *I);
    Status St = I->Fn(*this, *I);
    Debug.HeldRf = false;
    if (St != Status::Ok)
      return handleStatus(St, Why);
    Cycles += I->Cost;
    ++Retired;
    if (Observer)
      Observer->afterInsn(*this, *I);
    // Single-step trap after the instruction (SDM Vol. 3B, "Single-Step Exception
    // Condition"), DR6.BS; with IA32_DEBUGCTL.BTF only after a taken branch ("Single-
    // Stepping on Branches": a control transfer that did not fall through).
    if (SingleStep) {
      const bool Btf = (*Msrs)[MsrSlot::IA32_DEBUGCTL] & debugctl::BTF;
      const bool Taken = (I->Flags & insnflag::EndsBlock) &&
                         (S.Rip != Fallthrough || S.cs().Selector != OldCs);
      if (!Btf || Taken)
        noteDebugTraps(*this, dr6::BS);
    }
    if (SingleStep || Debug.Hits) {
      commitDebugHits(*this);
      // Non-root operation takes them in its event window, below an MTF VM exit; root
      // operation delivers them now unless MOV SS / POP SS holds them.
      if (NonRoot) [[unlikely]]
        return false;
      if (takeRootDebugTraps(*this))
        return handleStatus(Status::Fault, Why);
      return false;
    }
    if (Cycles >= WindowDue)
      return false;
  }
  return false;
}

bool Cpu::handleStatus(Status St, StopReason &Why) {
  switch (St) {
  case Status::Ok:
    return false;
  case Status::Fault:
    // A faulting instruction did not complete: its breakpoint matches are not traps.
    Debug.Hits = 0;
    if (Observer)
      Observer->onException(*this, Pending);
    if (deliverPendingException(*this) == Status::Shutdown)
      Activity = ActivityState::Shutdown;
    return false;
  case Status::Shutdown:
    Activity = ActivityState::Shutdown;
    return false;
  case Status::Frozen:
    Debug.Hits = 0; // the instruction did not execute: it runs again after the wait
    breakBlock();
    return false;
  case Status::VmExit:
    Debug.Hits = 0; // the instruction did not complete (or was VMLAUNCH/VMRESUME)
    // vmExit (cpu/vmx/vm_exit.cpp) has already performed the whole exit: the processor
    // is in the host (or the VM entry completed); continue at the new RIP.
    breakBlock();
    return false;
  case Status::Unimplemented:
    Why = StopReason::Unimplemented;
    return true;
  }
  return false;
}

} // namespace vmxsim
