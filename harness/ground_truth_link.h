// Connects the processor's observer interfaces (cpu/observer.h) to trace/'s ground-truth
// writer (trace/ground_truth.h): the processor knows nothing of traces, and trace/
// nothing of the processor; this is the one place that knows both.
#pragma once
#include "cpu/observer.h"
#include "state/snapshot_io.h"
#include "trace/ground_truth.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

namespace vmxsim {

class Cpu;
class PhysMem;

/// Every VM exit, entry and entry failure of the CPUs it is attached to (Cpu::Transitions)
/// becomes a ground-truth record. With watchSlotTable, also every store to a hypervisor's
/// published trace_values slots (trace/slot_layout.h), every RDTSC/RDTSCP in VMX root
/// operation, and the guest registers at each exit and entry (GT_SLOT_*, GT_ROOT_RDTSC,
/// GT_GPR in trace/events.def): what `trace check` proves a hypervisor's records with.
class GroundTruthLink final : public VmxTransitionObserver {
public:
  explicit GroundTruthLink(trace::GroundTruthRecorder &R) : R(R) {}
  /// The full paths: every exit and entry, from their events.
  void vmExit(const VmExitEvent &E) override;
  void vmEntry(const VmEntryEvent &E) override;
  /// The fast paths, from the processor: the common exit (GT_EXIT alone) and the entry
  /// that resumes after it (GT_RESUME), when the records fit in place; every other case
  /// goes to vmExit or vmEntry with the processor's event. Both write the same records.
  void vmExitBegins(const Cpu &P, const VmExitInfo &Info) override;
  void vmEntryDone(const Cpu &P, bool IsLaunch, uint32_t EntryInterruptionInfo) override;
  void vmEntryFailure(const VmEntryFailureEvent &E) override;
  void rootTsc(unsigned Cpu, uint64_t Tsc, uint64_t Rip, uint64_t Value) override;
  void watchedStore(const WatchedStoreEvent &E) override;
  /// The fast path of watchedStore, from the processor: an aligned 8-byte store into one
  /// slot of a published array (a traced hypervisor's TRACE_VMEXIT and its resets),
  /// found from the array the last one went to; anything else goes to watchedStore with
  /// the processor's event. The same records either way.
  void instructionStored(const Cpu &P, Hpa Pa, unsigned SizeBytes) override;
  /// The common case of instructionStored, with the bytes stored: an aligned store into
  /// the array the last one went to (FastBase), recorded in place from Value; anything
  /// else goes to instructionStored. The same records either way.
  void instructionStored64(const Cpu &P, Hpa Pa, uint64_t Value) override;

  /// Lets the processor write CPU C's most frequent records in place, without a call
  /// (cpu/observer.h, InlineTransitionRecords: GT_EXIT, GT_RESUME, and with slot
  /// watching GT_SLOT_OWN and GT_ROOT_RDTSC), when C has a lane in the writer; the
  /// records are the same bytes as this link's calls write
  /// (MachineConfig::GroundTruthInline). Call after watchSlotTable, with C->Transitions
  /// this; detach before this goes away.
  void attachInline(Cpu &C);
  static void detachInline(Cpu &C);

  /// Reads the slot table at TablePa (loaded from the image) and, when its header is the
  /// one trace/slot_layout.h defines, writes GT_SLOT_LAYOUT and watches the table: each
  /// CPU's slots are watched from the store that publishes them. Before any CPU runs.
  /// False (nothing watched, nothing written) for any other header.
  bool watchSlotTable(PhysMem &Mem, std::span<Cpu *const> Cpus, uint64_t TablePa);

  /// Snapshot: the published slot arrays, the registers last recorded, the open
  /// CR-access exits and the RIPs a GT_RESUME would stand for (the watches themselves are PhysMem's; the table address is the
  /// image's).
  void save(SnapshotWriter &W) const;
  void load(SnapshotReader &R);

private:
  /// Per CPU: what a GT_RESUME would stand for; with slot watching, also the general registers as its last GT_VMEXIT_REGS,
  /// GT_VMENTRY_REGS and GT_GPR records left them (trace/events.def: a register is
  /// recorded only when it differs from that, or was never recorded), and the register
  /// of its open CR-access exit.
  struct CpuRegs {
    uint64_t Value[16] = {};
    uint16_t Known = 0; ///< bit n: register n was recorded
    int CrGpr = -1;     ///< the register of the open CR-access exit, or -1
    /// In.ResumeRip: the RIP a GT_RESUME would stand for (trace/events.def: its last
    /// exit's rip + len), while its next entry attempt is the first after that exit
    /// (In.ResumeOpen); kept there for the processor's in-place records, which refresh
    /// keeps the rest of In for (its Mode and Regs) when they are attached.
    InlineTransitionRecords In;
    /// What the fast paths must test of the registers, kept by refresh: 0 nothing (no
    /// slot watching), 1 that RAX..RBX are as last recorded (unchanged), 2 take the
    /// full path (a register of RAX..RBX never recorded, a CR access's open).
    uint8_t Check = 2;
    /// This CPU's buffer in the writer (TraceWriter::lane); null past the writer's CPUs.
    trace::TraceWriter::Lane *Lane = nullptr;
    bool differs(unsigned Reg, uint64_t V) const {
      return !(Known >> Reg & 1) || Value[Reg] != V;
    }
    void set(unsigned Reg, uint64_t V) {
      Value[Reg] = V;
      Known = uint16_t(Known | 1u << Reg);
    }
    /// Nothing to record at a transition: RAX, RCX, RDX and RBX are as last recorded and
    /// no CR access's register (4-15) is open.
    bool unchanged(const uint64_t *Gpr) const {
      return (Known & 15) == 15 && CrGpr < 4 && same(Gpr);
    }
    /// RAX, RCX, RDX and RBX are the values last recorded (or never recorded, as 0).
    bool same(const uint64_t *Gpr) const {
      return !((Value[0] ^ Gpr[0]) | (Value[1] ^ Gpr[1]) | (Value[2] ^ Gpr[2]) |
               (Value[3] ^ Gpr[3]));
    }
    /// Whether a fast path may write this transition (Check) with the registers Gpr.
    bool fastRegs(const uint64_t *Gpr) const { return !Check || (Check == 1 && same(Gpr)); }
  };
  /// C.Check from the registers recorded, the open CR access and slot watching: after
  /// every full path, which alone changes them.
  void refresh(CpuRegs &C) const {
    C.Check = !Mem ? 0 : (C.Known & 15) == 15 && C.CrGpr < 4 ? 1 : 2;
    // The processor's in-place records: the fast paths' tests, with no CR access's
    // register open at all (the fast paths close one; the processor does not).
    if (C.In.Observer) {
      C.In.Mode = C.Check == 0 ? 1 : C.Check == 1 && C.CrGpr < 0 ? 2 : 0;
      for (unsigned Reg = 0; Reg < 4; ++Reg)
        C.In.Regs[Reg] = C.Value[Reg];
    }
  }
  CpuRegs &regsOf(unsigned Cpu) {
    if (Cpu >= Regs.size()) [[unlikely]]
      growRegs(Cpu + 1);
    return *Regs[Cpu];
  }
  /// Regs to N CPUs (each CpuRegs stays where it is: the processor may point into it).
  void growRegs(size_t N);
  /// The fast paths' closing of an open CR access (CpuRegs::CrGpr), which refresh then
  /// sees for the in-place records.
  void closeCr(CpuRegs &C) {
    if (C.CrGpr != -1) [[unlikely]] {
      C.CrGpr = -1;
      refresh(C);
    }
  }
  /// Each CPU's lane, and NumFast, after Regs grew or was loaded.
  void regsResized();
  /// The full paths from the fast paths: the processor's event built (out of line, so
  /// that the fast paths keep no stack frame) and given to vmExit or vmEntry.
  [[gnu::noinline]] void exitFromEvent(const Cpu &P, const VmExitInfo &Info);
  [[gnu::noinline]] void entryFromEvent(const Cpu &P, bool IsLaunch, uint32_t Info);
  /// The 8 bytes at machine-physical Pa (8-byte aligned) as the store left them.
  uint64_t read64(uint64_t Pa) const;
  /// Slot S of Owner's published array as the store left it: read64 of its address,
  /// through SlotsHost when it is current.
  uint64_t slotValue(uint32_t Owner, uint64_t S) {
    if (Mem->mmioRegionCount() != HostRegions) [[unlikely]]
      refreshSlotsHost();
    if (const uint8_t *H = SlotsHost[Owner]) [[likely]] {
      uint64_t V;
      std::memcpy(&V, H + 8 * S, 8);
      return V;
    }
    return read64(SlotsPa[Owner] + 8 * S);
  }
  /// SlotsHost of every owner, from SlotsPa and the MMIO regions now.
  void refreshSlotsHost();
  void publish(unsigned StoringCpu, uint64_t Tsc, uint32_t Owner, uint64_t SlotsPa);
  /// The records after an exit's GT_EXIT (GT_VMEXIT_EVENT, _ADDR, _REGS, GT_GPR,
  /// GT_ACTIVITY), each when it is due: vmExit calls it only when one may be.
  void exitDetails(const VmExitEvent &E, CpuRegs &C);
  /// GT_VMEXIT_REGS (AtExit) or GT_VMENTRY_REGS when one of RAX, RCX, RDX differs.
  void recordRegs(unsigned Cpu, CpuRegs &C, const uint64_t *Gpr, bool AtExit);
  /// GT_GPR for RBX and for ExtraReg (>= 4), each when it differs.
  void recordGprs(unsigned Cpu, CpuRegs &C, const uint64_t *Gpr, int ExtraReg);

  trace::GroundTruthRecorder &R;
  PhysMem *Mem = nullptr; ///< set by watchSlotTable
  std::vector<Cpu *> Cpus;
  uint64_t Table = 0;
  std::vector<uint64_t> SlotsPa; ///< per owner CPU; 0 = not published
  std::vector<uint32_t> Published; ///< the owners whose SlotsPa is not 0, ascending
  /// Per owner: the host pointer of its slot array when every slot's RAM has the one
  /// PhysMem::ramPointer gives (read64 reads the same bytes through it), else null; valid
  /// while PhysMem::mmioRegionCount() is HostRegions (~0: never).
  std::vector<const uint8_t *> SlotsHost;
  size_t HostRegions = ~size_t(0);
  /// No two published arrays share a byte (kept by noteArrays): an aligned 8-byte store
  /// is then one slot of at most one array.
  bool ArraysDisjoint = true;
  /// The owner whose array instructionStored found last (an index into SlotsPa).
  uint32_t LastOwner = 0;
  /// ArraysDisjoint and HostRegions after SlotsPa changed (publish, load).
  void noteArrays();
  /// Owner's array when a store into it is a slot store of that array alone (slot
  /// watching on, the arrays disjoint, none of the table's slots_pa entries in it), else 0.
  uint64_t fastArray(uint32_t Owner) const;
  /// What instructionStored64 serves without a test more: the array of LastOwner,
  /// [FastBase, FastBase + FastBytes), when fastArray gives it; FastBytes 0 otherwise.
  /// Kept by noteFast after each change of LastOwner or of the arrays.
  uint64_t FastBase = 0, FastBytes = 0;
  void noteFast();
  /// Each attached CPU's in-place slot array (InlineTransitionRecords::SlotBase: its own
  /// array's fastArray), after the arrays changed or a CPU was attached.
  void noteInline();
  /// instructionStored's other cases, out of line so that its common one stays leaf code.
  [[gnu::noinline]] void storedElsewhere(const Cpu &P, Hpa Pa, unsigned SizeBytes);
  /// Per CPU (grows with the CPUs that exited or were attached); each in a place of its
  /// own, which Cpu::InlineRecords may point into.
  std::vector<std::unique_ptr<CpuRegs>> Regs;
  /// The CPUs the fast paths serve: those of Regs that have a lane (without the
  /// division of Regs.size() on the fast paths).
  unsigned NumFast = 0;
};

/// A CpuObserver that records every instruction into the ground truth and forwards to
/// another observer (the instruction tracer), so both can be on at once.
class GroundTruthInsnObserver : public CpuObserver {
public:
  GroundTruthInsnObserver(trace::GroundTruthRecorder &R, CpuObserver *Next) : R(R), Next(Next) {}
  void beforeInsn(const Cpu &C, const DecodedInsn &I) override;
  void afterInsn(const Cpu &C, const DecodedInsn &I) override;
  void onException(const Cpu &C, const PendingEvent &E) override;

private:
  trace::GroundTruthRecorder &R;
  CpuObserver *Next;
};

} // namespace vmxsim
