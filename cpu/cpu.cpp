#include "cpu/cpu.h"

#include "cpu/cpu_model.h"
#include "cpu/decode.h"
#include "cpu/exceptions.h"
#include "cpu/memory.h"
#include "cpu/msrs.h"
#include "cpu/vmx/vmx_events.h"
#include "cpu/vmx/vmx_state.h"

#include <algorithm>
#include <cstring>

namespace vmxsim {

Cpu::Cpu(PhysMem &Mem, IoBus &Io, const CpuModel &Model, unsigned Id)
    : Mem(Mem), Io(Io), Model(Model), Msrs(std::make_unique<MsrState>()),
      Vmx(std::make_unique<VmxState>()), Id(Id),
      Blocks(static_cast<Block *>(std::calloc(kBlockCacheEntries + 1, sizeof(Block)))),
      VpidGeneration(static_cast<uint64_t *>(std::calloc(65536, sizeof(uint64_t)))) {
  if (!Blocks || !VpidGeneration) {
    // Host out of memory at construction: nothing sensible can run. This is a host
    // failure, not a guest-triggerable condition.
    std::abort();
  }
  reset();
}

Cpu::~Cpu() = default;

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
  S.Fcw = 0x40;
  *Msrs = MsrState{};
  resetMsrs(*this);
  // RESET leaves VMX operation (SDM Vol. 3C, "VMX Operation" and "Processor State
  // After Reset").
  *Vmx = VmxState{};
  NonRoot = false;
  Pending = PendingEvent{};
  Halted = InShutdown = NmiBlocked = NmiPending = false;
  ShadowUntil = 0;
  DeliveryDepth = 0;
  clearTlb();
  CurrentVpid = 0;
  TlbEptContext = false;
  flushTlb();
  flushDecodeCache();
  modeChanged();
}

void Cpu::init() {
  // SDM Vol. 3A, Processor State After Reset, INIT column of the table: x87 FPU, XMM
  // registers, MXCSR, MTRRs, machine-check and most MSRs are unchanged; IA32_EFER is
  // cleared (it lives in CpuState, which reset() rebuilds). The TSC keeps counting.
  const CpuState Old = S;
  const MsrState OldMsrs = *Msrs;
  reset();
  *Msrs = OldMsrs;
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
  UserTagBit = S.cpl() == 3;
  TagLowSupervisor = uint16_t(TlbGeneration << 1);
  TagLowUser = uint16_t(TagLowSupervisor | UserTagBit);
  RipMask = M == CodeMode::Long64 ? ~uint64_t(0)
            : M == CodeMode::Prot32 ? 0xffffffffull
                                    : 0xffffull;
  breakBlock();
}

void Cpu::clearTlb() {
  for (unsigned I = 0; I < kTlbEntries; ++I)
    TlbRead[I].Tag = TlbWrite[I].Tag = TlbFetch[I].Tag = TlbWriteCode[I].Tag = kTlbEmpty;
  // Generations restart below: cached guest-physical mappings must not match again.
  for (EptCacheEntry &E : EptCache)
    E.GpaPage = 0;
  ++TlbEpoch; // every context's generation is forgotten
  NextTlbGeneration = 1;
}

uint16_t Cpu::allocTlbGeneration() {
  // Generation 0x7ff is never handed out: a tag with it could equal kTlbEmpty.
  if (NextTlbGeneration >= 0x7ff)
    clearTlb();
  return NextTlbGeneration++;
}

uint16_t Cpu::contextGeneration(uint16_t Vpid) {
  uint64_t E = VpidGeneration.get()[Vpid];
  if ((E >> 16) == TlbEpoch)
    return uint16_t(E);
  uint16_t Gen = allocTlbGeneration();
  VpidGeneration.get()[Vpid] = (TlbEpoch << 16) | Gen;
  return Gen;
}

void Cpu::useGeneration(uint16_t Gen) {
  TlbGeneration = Gen;
  TagLowSupervisor = uint16_t(Gen << 1);
  TagLowUser = uint16_t(TagLowSupervisor | UserTagBit);
  breakBlock();
}

Cpu::EptTlbContext &Cpu::eptContextSlot(uint16_t Vpid, uint64_t Ep4ta) {
  uint64_t H = (Ep4ta ^ (uint64_t(Vpid) << 52)) * 0x9E3779B97F4A7C15ull;
  static_assert(kEptTlbContexts == 64, "the slot takes 6 hash bits");
  return EptContexts[H >> (64 - 6)];
}

uint16_t Cpu::eptContextGeneration(uint16_t Vpid, uint64_t Ep4ta) {
  EptTlbContext &X = eptContextSlot(Vpid, Ep4ta);
  if (X.Epoch == TlbEpoch && X.Vpid == Vpid && X.Ep4ta == Ep4ta)
    return X.Gen;
  uint16_t Gen = allocTlbGeneration();
  X = EptTlbContext{TlbEpoch, Ep4ta, Vpid, Gen};
  return Gen;
}

void Cpu::flushTlb() {
  uint16_t Gen = allocTlbGeneration();
  if (TlbEptContext)
    eptContextSlot(CurrentVpid, CurrentEp4ta) =
        EptTlbContext{TlbEpoch, CurrentEp4ta, CurrentVpid, Gen};
  else
    VpidGeneration.get()[CurrentVpid] = (TlbEpoch << 16) | Gen;
  useGeneration(Gen);
}

void Cpu::flushTlbVpid(uint16_t Vpid) {
  // A VPID's linear mappings and its combined mappings of every EP4TA (SDM Vol. 3C,
  // INVVPID).
  for (EptTlbContext &X : EptContexts)
    if (X.Vpid == Vpid)
      X.Epoch = 0;
  VpidGeneration.get()[Vpid] = 0; // epoch 0 is never current
  if (Vpid == CurrentVpid)
    flushTlb();
}

void Cpu::flushTlbEptp(uint64_t Eptp) {
  // Mappings derived from the EPT paging structures of one EP4TA, for every VPID (SDM
  // Vol. 3C, INVEPT single-context).
  const uint64_t Ep4ta = Eptp & 0x000ffffffffff000ull;
  for (EptTlbContext &X : EptContexts)
    if (X.Ep4ta == Ep4ta)
      X.Epoch = 0;
  if (TlbEptContext && CurrentEp4ta == Ep4ta)
    flushTlb();
}

void Cpu::flushTlbAllContexts() {
  clearTlb();
  useGeneration(TlbEptContext ? eptContextGeneration(CurrentVpid, CurrentEp4ta)
                              : contextGeneration(CurrentVpid));
}

void Cpu::switchTlbContext(uint16_t Vpid) {
  CurrentVpid = Vpid;
  TlbEptContext = false;
  useGeneration(contextGeneration(Vpid));
}

void Cpu::switchTlbContextEpt(uint16_t Vpid, uint64_t Eptp) {
  CurrentVpid = Vpid;
  TlbEptContext = true;
  CurrentEp4ta = Eptp & 0x000ffffffffff000ull;
  useGeneration(eptContextGeneration(Vpid, CurrentEp4ta));
}

void Cpu::flushTlbPage(uint64_t La) {
  // Large pages may cover many TLB slots; one slot per 4 KiB page is cached here, so a
  // full flush is the simple exact answer for INVLPG on any page size.
  (void)La;
  flushTlb();
}

void Cpu::dropWriteMappings(uint64_t Pfn) {
  for (TlbEntry &E : TlbWrite)
    if (E.Tag != kTlbEmpty && E.Pfn == Pfn)
      E.Tag = kTlbEmpty;
}

void Cpu::flushDecodeCache() {
  BlockKeyBase += 1u << 8;
  if (BlockKeyBase == 0) {
    // The 24-bit epoch wrapped: stale blocks could look current again, so clear them.
    std::memset(static_cast<void *>(Blocks.get()), 0, (kBlockCacheEntries + 1) * sizeof(Block));
    BlockKeyBase = 1u << 8;
  }
}

StopReason Cpu::run(uint64_t MaxInsns, uint64_t UntilCycle) {
  const uint64_t InsnEnd = MaxInsns > ~Retired ? ~uint64_t(0) : Retired + MaxInsns;
  for (;;) {
    if (Io.stopRequested())
      return LastStop = StopReason::StopRequested;
    if (InShutdown)
      return LastStop = StopReason::Shutdown;
    if (Retired >= InsnEnd)
      return LastStop = StopReason::InsnLimit;
    if (Cycles >= UntilCycle)
      return LastStop = StopReason::Deadline;

    if (NonRoot) [[unlikely]] {
      // VMX non-root operation has its own event window (VM exits for events, MTF, the
      // preemption timer, guest activity states: cpu/vmx/vmx_events.cpp) and deadline.
      StopReason R = StopReason::InsnLimit;
      switch (vmxEventWindow(*this, UntilCycle, R)) {
      case EventWindow::Stop:
        return LastStop = R;
      case EventWindow::Again:
        continue;
      case EventWindow::Run:
        break;
      }
      Deadline = vmxGuestDeadline(*this, UntilCycle);
      if (runBlocks(InsnEnd, R))
        return LastStop = R;
      continue;
    }

    // Event window between instructions (SDM Vol. 3A, Priority Among Concurrent Events):
    // NMI, then maskable interrupts when IF=1 and no STI/MOV SS shadow.
    Status St = Status::Ok;
    if (NmiPending && !NmiBlocked) {
      NmiPending = false;
      Halted = false;
      St = deliverEvent(*this, EventKind::Nmi, vec::NMI, false, 0, S.Rip);
    } else if (Intr && (S.Rflags & rflags::IF) && Retired >= ShadowUntil &&
               Intr->intrPending()) {
      Halted = false;
      St = deliverEvent(*this, EventKind::External, Intr->acknowledge(), false, 0, S.Rip);
    }
    if (St == Status::Fault)
      St = deliverPendingException(*this);
    if (St == Status::Shutdown) {
      InShutdown = true;
      continue;
    }
    if (St == Status::Unimplemented)
      return LastStop = StopReason::Unimplemented; // e.g. delivery through a task gate
    if (Halted)
      return LastStop = StopReason::Halted;

    // An STI/MOV SS shadow covers exactly the next instruction: run it alone (a deadline
    // of "now" ends the block after one instruction) so the event window after it is
    // not skipped.
    Deadline = Retired < ShadowUntil ? Cycles : UntilCycle;
    StopReason R = StopReason::InsnLimit;
    if (runBlocks(InsnEnd, R))
      return LastStop = R;
  }
}

bool Cpu::runBlocks(uint64_t InsnEnd, StopReason &Why) {
  // Runs blocks back to back while nothing needs the event window: interrupts can only
  // become deliverable through an instruction that ends its block with breakBlock() (I/O,
  // MMIO, CR/flag writes) or at the cycle deadline, both of which leave this loop.
  for (;;) {
    Block *B = nullptr;
    if (DecodeMode == uint8_t(CodeMode::Long64)) [[likely]] {
      uint64_t La = S.Rip;
      const unsigned Slot = (La >> 12) & (kTlbEntries - 1);
      TlbEntry &E = TlbFetch[Slot];
      const uint64_t Tag = tlbTag(*this, La, false);
      // The displaced entry (cpu/memory.cpp, victimSlot) comes back without a walk or a
      // decode: a guest and its hypervisor sharing a code page alternate at every exit.
      if (E.Tag != Tag) [[unlikely]]
        if (TlbEntry &V = TlbFetch[tlbVictimSlot(Slot)]; V.Tag == Tag)
          std::swap(E, V);
      if (E.Tag == Tag) [[likely]] {
        uint64_t Pa = (E.Pfn << 12) | (La & 0xfff);
        Block &Cand = Blocks.get()[blockSlot(Pa)];
        if (Cand.Pa == Pa && Cand.Key == blockKey() &&
            Cand.Gen == Mem.codeGeneration(E.Pfn))
          B = &Cand;
      }
    }
    if (!B) {
      Status St = decodeBlock(*this, B);
      if (St != Status::Ok)
        return handleStatus(St, Why);
    }

    const DecodedInsn *I = B->Insns;
    const DecodedInsn *End = I + std::min<uint64_t>(B->NumInsns, InsnEnd - Retired);
    if (Observer || (S.Rflags & rflags::TF)) [[unlikely]]
      return runBlockSlow(I, End, Why);
    for (;;) {
      Status St = I->Fn(*this, *I);
      if (St != Status::Ok) [[unlikely]]
        return handleStatus(St, Why);
      Cycles += I->Cost;
      ++Retired;
      if (++I == End || Cycles >= Deadline)
        break;
    }
    if (Cycles >= Deadline || Retired >= InsnEnd)
      return false;
  }
}

bool Cpu::runBlockSlow(const DecodedInsn *I, const DecodedInsn *End, StopReason &Why) {
  for (; I != End; ++I) {
    bool SingleStep = S.Rflags & rflags::TF;
    if (Observer)
      Observer->beforeInsn(*this, *I);
    Status St = I->Fn(*this, *I);
    if (St != Status::Ok)
      return handleStatus(St, Why);
    Cycles += I->Cost;
    ++Retired;
    if (Observer)
      Observer->afterInsn(*this, *I);
    if (SingleStep) {
      if (NonRoot) [[unlikely]] {
        // Through the non-root event window, where an MTF VM exit takes priority.
        vmxSingleStepTrap(*this);
        return false;
      }
      // Single-step trap after the instruction (SDM Vol. 3A, Single-Step Exception
      // Condition): DR6.BS, #DB delivered with RIP of the next instruction.
      S.Dr[6] |= 1u << 14;
      Pending = PendingEvent{vec::DB, false, 0, 0};
      return handleStatus(Status::Fault, Why);
    }
    if (Cycles >= Deadline)
      return false;
  }
  return false;
}

bool Cpu::handleStatus(Status St, StopReason &Why) {
  switch (St) {
  case Status::Ok:
    return false;
  case Status::Fault:
    if (Observer)
      Observer->onException(*this, Pending);
    if (deliverPendingException(*this) == Status::Shutdown)
      InShutdown = true;
    return false;
  case Status::Shutdown:
    InShutdown = true;
    return false;
  case Status::VmExit:
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
