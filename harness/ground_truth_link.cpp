#include "harness/ground_truth_link.h"

#include "cpu/cpu.h"
#include "cpu/vmx/vm_entry.h"
#include "cpu/vmx/vm_exit.h"
#include "trace/slot_layout.h"

#include <algorithm>
#include <cstring>

namespace vmxsim {

namespace {
/// A VM exit for a control-register access (SDM Vol. 3D, Appendix C: basic exit reason
/// 28, not a VM-entry failure, bit 31); its qualification names the general register in
/// bits 11:8 (SDM Vol. 3C, "Exit Qualification for Control-Register Accesses").
bool isCrAccess(uint32_t Reason) {
  return !(Reason >> 31) &&
         (Reason & 0xffff) == uint32_t(ExitReason::ControlRegisterAccesses);
}
} // namespace

void GroundTruthLink::recordGprs(unsigned Cpu, CpuRegs &C, const uint64_t *Gpr, int ExtraReg) {
  // trace/events.def, GT_GPR: RBX and the CR access's register, each only when it differs
  // from its last record.
  constexpr unsigned kRbx = 3;
  if (C.differs(kRbx, Gpr[kRbx])) [[unlikely]] {
    C.set(kRbx, Gpr[kRbx]);
    R.gpr(Cpu, kRbx, Gpr[kRbx]);
  }
  if (ExtraReg >= 4 && C.differs(unsigned(ExtraReg), Gpr[ExtraReg])) {
    C.set(unsigned(ExtraReg), Gpr[ExtraReg]);
    R.gpr(Cpu, unsigned(ExtraReg), Gpr[ExtraReg]);
  }
}

void GroundTruthLink::recordRegs(unsigned Cpu, CpuRegs &C, const uint64_t *Gpr, bool AtExit) {
  // trace/events.def: GT_VMEXIT_REGS or GT_VMENTRY_REGS (all three) when one of RAX, RCX,
  // RDX differs from its last record.
  if (!C.differs(0, Gpr[0]) && !C.differs(1, Gpr[1]) && !C.differs(2, Gpr[2]))
    return;
  for (unsigned Reg = 0; Reg < 3; ++Reg)
    C.set(Reg, Gpr[Reg]);
  if (AtExit)
    R.exitRegs(Cpu, {Gpr[0], Gpr[1], Gpr[2]});
  else
    R.entryRegs(Cpu, {Gpr[0], Gpr[1], Gpr[2]});
}

// The fast paths: the common transition (an exit that says nothing but GT_EXIT, the
// entry that resumes after it: GT_RESUME) with the registers as last recorded, read from
// the processor and written in place. Every condition is tested before a record is
// written (and of C only what the full path sets the same), and every other case is a
// tail call of the full path (the processor's event, built only then, to vmExit or
// vmEntry), so that these stay leaf code: they run at every exit and entry of a traced
// run.
void GroundTruthLink::vmExitBegins(const Cpu &P, const VmExitInfo &I) {
  // With slot watching a CR access opens its register; without, the exits that take
  // operands in RAX, RCX, RDX have GT_VMEXIT_REGS (exitDetails). An entry failure (bit
  // 31 of the reason) and a processor that is not active (GT_ACTIVITY; savedActivity)
  // take the full path.
  const unsigned Id = P.Id;
  if (Id >= NumFast ||
      (I.InterruptionInfo | I.InterruptionErrorCode | I.IdtVectoringInfo |
       I.IdtVectoringErrorCode | I.InstructionInfo) ||
      (I.GuestLinearValid | I.GuestPhysicalValid | I.EntryFailure) ||
      P.Activity != ActivityState::Active ||
      (Mem ? I.Reason == ExitReason::ControlRegisterAccesses
           : trace::exitHasRegs(uint32_t(I.Reason)))) [[unlikely]]
    return exitFromEvent(P, I);
  CpuRegs &C = *Regs[Id];
  if (!C.fastRegs(P.S.Gpr)) [[unlikely]]
    return exitFromEvent(P, I);
  // What the full path would set of C as well (so these may go first, while their
  // values are at hand): GT_RESUME's RIP (trace/events.def), no CR access open.
  const uint64_t Rip = P.S.Rip;
  const uint32_t Len = I.InstructionLength;
  C.In.ResumeRip = Rip + Len;
  C.In.ResumeOpen = true;
  closeCr(C);
  if (!trace::GroundTruthRecorder::exitInPlace(*C.Lane, P.Cycles, uint32_t(I.Reason), Rip,
                                               I.Qualification, Len)) [[unlikely]]
    return exitFromEvent(P, I);
}

void GroundTruthLink::vmEntryDone(const Cpu &P, bool IsLaunch, uint32_t Info) {
  // An injecting entry's error code is not 0 only when Info is not.
  const unsigned Id = P.Id;
  if (Id >= NumFast) [[unlikely]]
    return entryFromEvent(P, IsLaunch, Info);
  CpuRegs &C = *Regs[Id];
  if (!C.In.ResumeOpen || IsLaunch || Info || P.S.Rip != C.In.ResumeRip ||
      !C.fastRegs(P.S.Gpr) || !trace::GroundTruthRecorder::resumeInPlace(*C.Lane, P.Cycles))
      [[unlikely]]
    return entryFromEvent(P, IsLaunch, Info);
  C.In.ResumeOpen = false;
  closeCr(C);
}

void GroundTruthLink::exitFromEvent(const Cpu &P, const VmExitInfo &I) {
  vmExit(exitEventOf(P, I));
}

void GroundTruthLink::entryFromEvent(const Cpu &P, bool IsLaunch, uint32_t Info) {
  vmEntry(entryEventOf(P, IsLaunch, Info));
}

void GroundTruthLink::vmExit(const VmExitEvent &E) {
  // GT_EXIT; the records that say more follow it only when they say something
  // (trace/events.def, exitDetails), which the common exit (CPUID, I/O, VMCALL, MSR with
  // RAX..RBX as last recorded) does not: then nothing else is called.
  R.exit(E.Cpu, E.Tsc, E.Reason, E.Rip, E.Qualification, E.InstructionLength);
  CpuRegs &C = regsOf(E.Cpu);
  C.In.ResumeRip = E.Rip + E.InstructionLength; // trace/events.def, GT_RESUME
  C.In.ResumeOpen = true;
  if (!Mem) [[unlikely]] {
    exitDetails(E, C);
    refresh(C);
    return;
  }
  C.CrGpr = isCrAccess(E.Reason) ? int((E.Qualification >> 8) & 15) : -1;
  if ((E.InterruptionInfo | E.InterruptionErrorCode | E.IdtVectoringInfo |
       E.IdtVectoringErrorCode | E.InstructionInfo | E.ActivityState) ||
      E.GuestLinearValid || E.GuestPhysicalValid || !C.unchanged(E.Gpr)) [[unlikely]]
    exitDetails(E, C);
  refresh(C);
}

void GroundTruthLink::exitDetails(const VmExitEvent &E, CpuRegs &C) {
  if (E.InterruptionInfo | E.InterruptionErrorCode | E.IdtVectoringInfo |
      E.IdtVectoringErrorCode | E.InstructionInfo)
    R.exitEvent(E.Cpu, {E.InterruptionInfo, E.InterruptionErrorCode, E.IdtVectoringInfo,
                        E.IdtVectoringErrorCode, E.InstructionInfo});
  if (E.GuestLinearValid || E.GuestPhysicalValid)
    R.exitAddr(E.Cpu, uint32_t(E.GuestLinearValid) | uint32_t(E.GuestPhysicalValid) << 1,
               E.GuestLinearAddress, E.GuestPhysicalAddress);
  // Without slot watching, GT_VMEXIT_REGS after the exits that take operands there; with
  // it, the register file (trace/events.def, GT_GPR).
  if (!Mem) {
    if (trace::exitHasRegs(E.Reason))
      R.exitRegs(E.Cpu, {E.Gpr[0], E.Gpr[1], E.Gpr[2]});
    return;
  }
  if (!C.unchanged(E.Gpr)) {
    recordRegs(E.Cpu, C, E.Gpr, true);
    recordGprs(E.Cpu, C, E.Gpr, C.CrGpr);
  }
  if (E.ActivityState) // no GT_ACTIVITY means active (trace/events.def)
    R.activity(E.Cpu, E.ActivityState);
}

void GroundTruthLink::vmEntry(const VmEntryEvent &E) {
  CpuRegs &C = regsOf(E.Cpu);
  // GT_RESUME for the entry its CPU's last GT_EXIT implies (trace/events.def), else
  // GT_VMENTRY with every field.
  if (C.In.ResumeOpen && !E.IsLaunch && !(E.InjectedInfo | E.InjectedErrorCode) &&
      E.Rip == C.In.ResumeRip) [[likely]]
    R.resume(E.Cpu, E.Tsc);
  else
    R.vmEntry(E.Cpu, E.Tsc, E.Rip, E.IsLaunch, E.InjectedInfo, E.InjectedErrorCode);
  C.In.ResumeOpen = false;
  if (Mem && !C.unchanged(E.Gpr)) [[unlikely]] {
    recordRegs(E.Cpu, C, E.Gpr, false);
    recordGprs(E.Cpu, C, E.Gpr, C.CrGpr);
  }
  C.CrGpr = -1;
  refresh(C);
}

void GroundTruthLink::regsResized() {
  trace::TraceWriter &W = R.writer();
  for (unsigned N = 0; N < Regs.size(); ++N)
    Regs[N]->Lane = W.lane(N);
  NumFast = unsigned(std::min<size_t>(Regs.size(), W.numCpus()));
}

void GroundTruthLink::growRegs(size_t N) {
  while (Regs.size() < N)
    Regs.push_back(std::make_unique<CpuRegs>());
  regsResized();
}

void GroundTruthLink::attachInline(Cpu &P) {
  CpuRegs &C = regsOf(P.Id);
  if (!C.Lane)
    return; // no lane: every record through the writer's checks
  InlineTransitionRecords &T = C.In;
  T.Observer = this;
  // The exits the full path must see: an open CR access's register (slot watching), or
  // GT_VMEXIT_REGS after the ones that take operands in RAX..RDX (without it).
  T.CallReasons[0] = T.CallReasons[1] = 0;
  for (uint32_t Basic = 0; Basic < 128; ++Basic)
    if (Mem ? Basic == uint32_t(ExitReason::ControlRegisterAccesses) : trace::exitHasRegs(Basic))
      T.CallReasons[Basic >> 6] |= 1ull << (Basic & 63);
  for (unsigned K = 0; K < 3; ++K)
    T.ExitHeader[K] = trace::GroundTruthRecorder::exitHeader(4 + K);
  T.ResumeHeader = trace::GroundTruthRecorder::resumeHeader();
  for (unsigned K = 0; K < 3; ++K)
    T.SlotHeader[K] = trace::GroundTruthRecorder::slotOwnHeader(3 + K);
  for (unsigned K = 0; K < 4; ++K) // rootTsc, with slot watching
    T.RootTscHeader[K] = Mem ? trace::GroundTruthRecorder::rootTscHeader(1 + K) : 0;
  noteInline(); // T's slot array
  T.Words = &C.Lane->Words;
  T.Used = &C.Lane->Used;
  T.Limit = &C.Lane->Limit;
  T.LastTsc = &C.Lane->LastTsc;
  refresh(C);
  P.InlineRecords = &T;
}

void GroundTruthLink::detachInline(Cpu &P) { P.InlineRecords = nullptr; }

void GroundTruthLink::rootTsc(unsigned Cpu, uint64_t Tsc, uint64_t Rip, uint64_t Value) {
  if (Mem)
    R.rootTsc(Cpu, Tsc, Value, Rip);
}

bool GroundTruthLink::watchSlotTable(PhysMem &M, std::span<Cpu *const> All, uint64_t TablePa) {
  xt_slot_layout T;
  if (!M.copyOut(Hpa(TablePa), &T, sizeof(T)) || T.magic != XT_SLOT_LAYOUT_MAGIC ||
      T.version != XT_SLOT_LAYOUT_VERSION || T.slot_count != XT_SLOT_LAYOUT_SLOTS ||
      T.max_cpus != XT_SLOT_LAYOUT_MAX_CPUS)
    return false;
  Mem = &M;
  Cpus.assign(All.begin(), All.end());
  Table = TablePa;
  SlotsPa.assign(XT_SLOT_LAYOUT_MAX_CPUS, 0);
  Published.clear();
  noteArrays();
  R.slotLayout(TablePa, XT_SLOT_LAYOUT_SLOTS, XT_SLOT_LAYOUT_MAX_CPUS);
  M.watchWrites(Hpa(TablePa), sizeof(T));
  for (Cpu *C : Cpus)
    for (uint64_t P = TablePa >> 12; P <= (TablePa + sizeof(T) - 1) >> 12; ++P)
      C->Mmu.dropWriteMappings(P);
  // A table published before the watch (the image's own data): its CPUs count from now.
  for (uint32_t N = 0; N < XT_SLOT_LAYOUT_MAX_CPUS; ++N)
    if (T.slots_pa[N])
      publish(0, 0, N, T.slots_pa[N]);
  return true;
}

void GroundTruthLink::publish(unsigned StoringCpu, uint64_t Tsc, uint32_t Owner,
                              uint64_t Pa) {
  const uint64_t Bytes = 8ull * XT_SLOT_LAYOUT_SLOTS;
  if (Pa == SlotsPa[Owner] || (Pa & 7) || !Mem->isRam(Hpa(Pa), Bytes))
    return;
  if (!SlotsPa[Owner])
    Published.insert(std::lower_bound(Published.begin(), Published.end(), Owner), Owner);
  SlotsPa[Owner] = Pa;
  noteArrays();
  R.slotPublish(StoringCpu, Tsc, Owner, Pa);
  Mem->watchWrites(Hpa(Pa), Bytes);
  for (Cpu *C : Cpus)
    for (uint64_t P = Pa >> 12; P <= (Pa + Bytes - 1) >> 12; ++P)
      C->Mmu.dropWriteMappings(P);
}

void GroundTruthLink::watchedStore(const WatchedStoreEvent &E) {
  if (!Mem)
    return;
  // Every store into a watched page comes here (a traced hypervisor's slot stores,
  // several per exit, and its other stores to those pages): the ranges are compared
  // once each, and only the published arrays (Published) are looked at, not all
  // XT_SLOT_LAYOUT_MAX_CPUS owners.
  const uint64_t Begin = E.Addr, End = E.Addr + E.SizeBytes;
  // A store into the table's slots_pa entries publishes CPUs' slots.
  const uint64_t Entries = Table + XT_SLOT_LAYOUT_OFF_SLOTS_PA;
  if (Begin < Entries + 8ull * XT_SLOT_LAYOUT_MAX_CPUS && Entries < End) [[unlikely]] {
    const uint64_t First = Begin > Entries ? (Begin - Entries) / 8 : 0;
    const uint64_t Last = std::min<uint64_t>((End - 1 - Entries) / 8, XT_SLOT_LAYOUT_MAX_CPUS - 1);
    for (uint64_t N = First; N <= Last; ++N)
      if (const uint64_t V = read64(Entries + 8 * N))
        publish(E.Cpu, E.Tsc, uint32_t(N), V);
  }
  // Ascending owners (Published is sorted), ascending slots: one slot store (GT_SLOT_OWN or GT_SLOT_STORE) per slot
  // the store touched, holding the slot's whole value after it.
  for (const uint32_t N : Published) {
    const uint64_t Base = SlotsPa[N];
    if (End <= Base || Begin >= Base + 8ull * XT_SLOT_LAYOUT_SLOTS)
      continue;
    const uint64_t First = Begin > Base ? (Begin - Base) / 8 : 0;
    const uint64_t Last = std::min<uint64_t>((End - 1 - Base) / 8, XT_SLOT_LAYOUT_SLOTS - 1);
    for (uint64_t S = First; S <= Last; ++S)
      R.slotStore(E.Cpu, E.Tsc, N, uint32_t(S), slotValue(N, S), E.Rip);
  }
}

void GroundTruthLink::instructionStored(const Cpu &P, Hpa Pa, unsigned SizeBytes) {
  const uint64_t A = Pa.value();
  const uint64_t Entries = Table + XT_SLOT_LAYOUT_OFF_SLOTS_PA;
  // What watchedStore does with such a store: no table entry touched, so nothing
  // published; the one array holding the 8 bytes (disjoint arrays, 8-aligned bases:
  // publish) gets one slot-store record of that slot, and no other array anything.
  const uint32_t N = LastOwner;
  if (!Mem || SizeBytes != 8 || (A & 7) || !ArraysDisjoint ||
      (A < Entries + 8ull * XT_SLOT_LAYOUT_MAX_CPUS && Entries < A + 8) ||
      A - SlotsPa[N] >= 8ull * XT_SLOT_LAYOUT_SLOTS || !SlotsPa[N] ||
      Mem->mmioRegionCount() != HostRegions || !SlotsHost[N]) [[unlikely]]
    return storedElsewhere(P, Pa, SizeBytes);
  const uint64_t S = (A - SlotsPa[N]) / 8;
  uint64_t V;
  std::memcpy(&V, SlotsHost[N] + 8 * S, 8); // slotValue(N, S)
  R.slotStore(P.Id, P.Cycles, N, uint32_t(S), V, P.S.Rip);
}

void GroundTruthLink::instructionStored64(const Cpu &P, Hpa Pa, uint64_t Value) {
  // instructionStored's common case with its tests folded into FastBase and FastBytes
  // (noteFast): Value is the slot's whole value after the store (an aligned 8-byte store
  // into RAM, through the processor's write mapping).
  const uint64_t Off = Pa.value() - FastBase;
  const unsigned Id = P.Id;
  if (Off >= FastBytes || (Off & 7) || Id >= NumFast ||
      !trace::GroundTruthRecorder::slotStoreInPlace(*Regs[Id]->Lane, Id, P.Cycles, LastOwner,
                                                    uint32_t(Off / 8), Value, P.S.Rip))
      [[unlikely]]
    return instructionStored(P, Pa, 8);
}

uint64_t GroundTruthLink::fastArray(uint32_t Owner) const {
  const uint64_t Bytes = 8ull * XT_SLOT_LAYOUT_SLOTS;
  const uint64_t Entries = Table + XT_SLOT_LAYOUT_OFF_SLOTS_PA;
  const uint64_t Base = Owner < SlotsPa.size() ? SlotsPa[Owner] : 0;
  return Mem && Base && ArraysDisjoint &&
                 !(Base < Entries + 8ull * XT_SLOT_LAYOUT_MAX_CPUS && Entries < Base + Bytes)
             ? Base
             : 0;
}

void GroundTruthLink::noteFast() {
  FastBase = fastArray(LastOwner);
  FastBytes = FastBase ? 8ull * XT_SLOT_LAYOUT_SLOTS : 0;
}

void GroundTruthLink::noteInline() {
  // Each CPU's in-place slot-store records (attachInline) take its own array, the one
  // its stores go to.
  for (size_t N = 0; N < Regs.size(); ++N)
    if (InlineTransitionRecords &T = Regs[N]->In; T.Observer) {
      T.SlotBase = fastArray(uint32_t(N));
      T.SlotBytes = T.SlotBase ? 8ull * XT_SLOT_LAYOUT_SLOTS : 0;
      T.SlotQuietEpoch = 0; // the processor looks at the monitors again
    }
}

void GroundTruthLink::storedElsewhere(const Cpu &P, Hpa Pa, unsigned SizeBytes) {
  const uint64_t A = Pa.value();
  const uint64_t Entries = Table + XT_SLOT_LAYOUT_OFF_SLOTS_PA;
  if (!Mem || SizeBytes != 8 || (A & 7) || !ArraysDisjoint ||
      (A < Entries + 8ull * XT_SLOT_LAYOUT_MAX_CPUS && Entries < A + 8))
    return watchedStore(watchedStoreEventOf(P, Pa, SizeBytes, StoreAgent::Instruction));
  // Another array than the last one's, or none.
  const auto Hit = std::find_if(Published.begin(), Published.end(), [&](uint32_t M) {
    return A - SlotsPa[M] < 8ull * XT_SLOT_LAYOUT_SLOTS;
  });
  if (Hit == Published.end())
    return; // in no array: no record
  const uint32_t N = LastOwner = *Hit;
  noteFast();
  const uint64_t S = (A - SlotsPa[N]) / 8;
  R.slotStore(P.Id, P.Cycles, N, uint32_t(S), slotValue(N, S), P.S.Rip);
}

void GroundTruthLink::noteArrays() {
  HostRegions = ~size_t(0); // SlotsHost follows SlotsPa
  ArraysDisjoint = true;
  const uint64_t Bytes = 8ull * XT_SLOT_LAYOUT_SLOTS;
  for (size_t I = 0; I < Published.size(); ++I)
    for (size_t J = I + 1; J < Published.size(); ++J) {
      const uint64_t X = SlotsPa[Published[I]], Y = SlotsPa[Published[J]];
      if (X < Y + Bytes && Y < X + Bytes)
        ArraysDisjoint = false;
    }
  noteFast();
  noteInline();
}

void GroundTruthLink::refreshSlotsHost() {
  HostRegions = Mem->mmioRegionCount();
  SlotsHost.assign(SlotsPa.size(), nullptr);
  for (size_t Owner = 0; Owner < SlotsPa.size(); ++Owner) {
    const uint64_t Pa = SlotsPa[Owner];
    if (!Pa)
      continue;
    // read64 takes each slot's own ramPointer: the array's must give all of them.
    const uint8_t *H = Mem->ramPointer(Hpa(Pa));
    for (uint64_t S = 0; H && S < XT_SLOT_LAYOUT_SLOTS; ++S)
      if ((Pa & 0xfff) + 8 * S > 0xff8 || Mem->ramPointer(Hpa(Pa + 8 * S)) != H + 8 * S)
        H = nullptr;
    SlotsHost[Owner] = H;
  }
}

uint64_t GroundTruthLink::read64(uint64_t Pa) const {
  // Within a page (a slot is 8-byte aligned: publish), its RAM's host pointer when it
  // has one; else what copyOut reads (0 if a byte is not RAM).
  uint64_t V = 0;
  const uint8_t *H = (Pa & 0xfff) <= 0xff8 ? Mem->ramPointer(Hpa(Pa)) : nullptr;
  if (H) [[likely]]
    std::memcpy(&V, H, 8);
  else
    Mem->copyOut(Hpa(Pa), &V, 8);
  return V;
}

void GroundTruthLink::vmEntryFailure(const VmEntryFailureEvent &E) {
  regsOf(E.Cpu).In.ResumeOpen = false; // GT_RESUME: only the first attempt after an exit
  R.vmEntryFailure(E.Cpu, E.Tsc, uint32_t(E.Outcome), E.Number, E.CheckId, E.Qualification);
}

void GroundTruthInsnObserver::beforeInsn(const Cpu &C, const DecodedInsn &I) {
  R.instruction(C.Id, C.Cycles, C.S.Rip, I.Len, C.NonRoot);
  if (Next)
    Next->beforeInsn(C, I);
}

void GroundTruthInsnObserver::afterInsn(const Cpu &C, const DecodedInsn &I) {
  if (Next)
    Next->afterInsn(C, I);
}

void GroundTruthInsnObserver::onException(const Cpu &C, const PendingEvent &E) {
  if (Next)
    Next->onException(C, E);
}

void GroundTruthLink::save(SnapshotWriter &W) const {
  W.u64(SlotsPa.size());
  for (uint64_t Pa : SlotsPa)
    W.u64(Pa);
  W.u64(Regs.size());
  for (const auto &C : Regs) {
    for (uint64_t V : C->Value)
      W.u64(V);
    W.u64(C->Known);
    W.io(C->CrGpr);
    W.all(C->In.ResumeRip, C->In.ResumeOpen);
  }
}

void GroundTruthLink::load(SnapshotReader &R) {
  const uint64_t N = R.u64();
  if (R.ok() && N != SlotsPa.size()) {
    R.fail("the snapshot's ground truth watches " + std::to_string(N) +
           " slot arrays, this image's " + std::to_string(SlotsPa.size()));
    return;
  }
  Published.clear();
  for (uint32_t Owner = 0; Owner < SlotsPa.size(); ++Owner)
    if ((SlotsPa[Owner] = R.u64()))
      Published.push_back(Owner);
  noteArrays();
  const uint64_t M = R.u64(); // grows with the CPUs that exited so far
  if (R.ok() && M > 4096) {
    R.fail("the snapshot's ground truth lists " + std::to_string(M) + " CPUs");
    return;
  }
  // Each CpuRegs stays where it is (the processor may point into it): those the
  // snapshot lists are read, any others start again.
  growRegs(M);
  for (size_t N = 0; N < Regs.size(); ++N) {
    CpuRegs &C = *Regs[N];
    std::fill(std::begin(C.Value), std::end(C.Value), 0);
    C.Known = 0;
    C.CrGpr = -1;
    C.In.ResumeRip = 0;
    C.In.ResumeOpen = false;
    if (N < M) {
      for (uint64_t &V : C.Value)
        V = R.u64();
      C.Known = uint16_t(R.u64());
      R.io(C.CrGpr);
      R.all(C.In.ResumeRip, C.In.ResumeOpen);
      if (C.CrGpr < -1 || C.CrGpr > 15) {
        R.fail("the snapshot's ground truth names register " + std::to_string(C.CrGpr));
        C.CrGpr = -1;
      }
    }
    refresh(C);
  }
}

} // namespace vmxsim
