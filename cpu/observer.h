// What the processor tells the outside about itself: the observer interfaces that cpu/
// owns (DESIGN.md, "Layers depend one way"). Tools (the instruction tracer, the ground
// truth) implement them in harness/, which connects them to trace/'s writers; nothing in
// cpu/ or cpu/vmx/ knows who listens. Every hook is a null pointer test when unused.
//
// The events carry plain values, copied out of the processor at the moment the SDM names
// (a VM exit before guest state is saved, a VM entry once guest state is loaded), so an
// observer needs no header of the processor's internals.
#pragma once
#include "mmu/phys_mem.h"

#include <cstdint>
#include <memory>

namespace vmxsim {

class Cpu;
struct DecodedInsn;
struct PendingEvent;
struct VmExitInfo;

/// Hooks for tooling (instruction traces); null when unused so they cost one branch.
class CpuObserver {
public:
  virtual ~CpuObserver() = default;
  /// Called before each instruction executes when instruction tracing is on.
  virtual void beforeInsn(const Cpu &, const DecodedInsn &) {}
  /// Called after each instruction retires.
  virtual void afterInsn(const Cpu &, const DecodedInsn &) {}
  virtual void onException(const Cpu &, const PendingEvent &) {}
  /// Called at each instruction boundary before anything of the next instruction
  /// happens (before RF is cleared, breakpoints are checked or beforeInsn is called).
  /// True holds the instruction: the run loop returns at this boundary with nothing of
  /// it done, as if it had not been reached; the observer has raised the reason to
  /// return (IoBus::requestBreak). The harness's run control uses it to stop before an
  /// address executes (harness/run_control.h).
  virtual bool holdBefore(const Cpu &, const DecodedInsn &) { return false; }
};

/// A VM exit as it begins (SDM Vol. 3C, "VM Exits"): the exit information the processor
/// is about to record in the VMCS, and the guest's RIP before it is saved.
/// Sixteen zero registers: what a default-constructed VmExitEvent or VmEntryEvent points at.
inline constexpr uint64_t kNoGprs[16] = {};

struct VmExitEvent {
  unsigned Cpu = 0;
  uint64_t Tsc = 0;    ///< the virtual TSC (Cpu::Cycles)
  uint32_t Reason = 0; ///< the full exit-reason field, bit 31 for a VM-entry failure
  uint64_t Rip = 0;
  uint64_t Qualification = 0;
  uint32_t InstructionLength = 0, InstructionInfo = 0;
  uint32_t InterruptionInfo = 0, InterruptionErrorCode = 0;
  uint32_t IdtVectoringInfo = 0, IdtVectoringErrorCode = 0;
  bool GuestLinearValid = false, GuestPhysicalValid = false;
  uint64_t GuestLinearAddress = 0, GuestPhysicalAddress = 0;
  /// The guest's general registers (SDM numbering: 0 RAX, 1 RCX, ... 15 R15) as the
  /// exiting instruction left them: what an OUT, WRMSR, CPUID or MOV to CR used. Sixteen
  /// registers, the processor's own (valid during the call only: not copied, the exit
  /// path's hot part; zeros by default).
  const uint64_t *Gpr = kNoGprs;
  /// The guest's activity state as the exit saves it (SDM Vol. 3C, "Guest Non-Register
  /// State": 0 active, 1 HLT, 2 shutdown, 3 wait-for-SIPI).
  uint32_t ActivityState = 0;
};

/// A VM entry that has loaded the guest and is about to run it (before the injected
/// event, if any, is delivered).
struct VmEntryEvent {
  unsigned Cpu = 0;
  uint64_t Tsc = 0;
  uint64_t Rip = 0;
  bool IsLaunch = false;
  /// The event injected by this entry: the VM-entry interruption-information field when
  /// its valid bit is set (else 0), and its error code when it delivers one (else 0).
  uint32_t InjectedInfo = 0, InjectedErrorCode = 0;
  /// The guest's general registers the entry runs it with (as the hypervisor left them:
  /// what an IN, RDMSR, CPUID or MOV from CR returned): sixteen, the processor's own,
  /// valid during the call only (as VmExitEvent::Gpr).
  const uint64_t *Gpr = kNoGprs;
};

/// How a VM entry failed (SDM Vol. 3C, "VM Entries").
enum class VmEntryFailOutcome : uint32_t {
  VmFailValid = 1,       ///< a check on the controls or host state: VMfailValid
  GuestStateCheck = 2,   ///< a check on the guest state: VM exit with bit 31
  LoadingGuestState = 3, ///< while or after loading guest state (PDPTEs, MSR loading)
};
/// CheckId of a failure that no VM-entry check (cpu/vmx/vm_entry_checks.def) reported.
inline constexpr uint32_t kNoVmEntryCheck = 0xffff;

struct VmEntryFailureEvent {
  unsigned Cpu = 0;
  uint64_t Tsc = 0;
  VmEntryFailOutcome Outcome = VmEntryFailOutcome::VmFailValid;
  /// The VM-instruction error (VmFailValid) or the basic exit reason (the others).
  uint32_t Number = 0;
  uint32_t CheckId = kNoVmEntryCheck;
  uint64_t Qualification = 0;
};

/// A completed store (by a processor, or a device while that processor ran) that touched
/// a watched range of physical memory
/// (PhysMem::watchWrites): the bytes [Addr, Addr + SizeBytes) now hold what it stored.
struct WatchedStoreEvent {
  unsigned Cpu = 0;
  uint64_t Tsc = 0; ///< the virtual TSC (Cpu::Cycles) at the storing instruction
  uint64_t Rip = 0; ///< the storing instruction's RIP
  uint64_t Addr = 0; ///< machine-physical
  unsigned SizeBytes = 0;
  /// What made the store: the instruction at Rip, the processor's own bookkeeping during
  /// it (an accessed/dirty flag, ...), or a device that instruction programmed.
  StoreAgent Agent = StoreAgent::Instruction;
};

/// A completed read of data through a linear address (the reads cpu/memory.cpp's
/// readLinearSlow makes: an instruction's operands, stack pops, string sources,
/// read-modify-write operands, and the descriptor-table, TSS and IDT reads of the
/// instruction or of an event's delivery) that touched a read-watched range of physical
/// memory (PhysMem::watchReads).
struct WatchedLoadEvent {
  unsigned Cpu = 0;
  uint64_t Tsc = 0;  ///< the virtual TSC (Cpu::Cycles) at the reading instruction
  uint64_t Rip = 0;  ///< the reading instruction's RIP
  uint64_t Addr = 0; ///< machine-physical: the bytes [Addr, Addr + SizeBytes) were read
  unsigned SizeBytes = 0;
};

/// What the processor publishes of a VM exit that begins, from itself and the exit's
/// information before it saves guest state (cpu/vmx/vm_exit.cpp).
VmExitEvent exitEventOf(const Cpu &C, const VmExitInfo &Info);
/// What it publishes of a VM entry that has loaded the guest (cpu/vmx/vm_entry.cpp):
/// EntryInterruptionInfo is the VM-entry interruption-information field when its valid
/// bit is set, else 0; the error code is the VMCS's when that field delivers one.
VmEntryEvent entryEventOf(const Cpu &C, bool IsLaunch, uint32_t EntryInterruptionInfo);
/// What it publishes of a store into watched memory that completed while C ran (Mmu::
/// watchedWrite): C's number, TSC and RIP, the bytes, who made the store
/// (cpu/watched_store.cpp).
WatchedStoreEvent watchedStoreEventOf(const Cpu &C, Hpa Pa, uint64_t SizeBytes, StoreAgent Agent);

/// VMX transitions, as they happen; the ground truth listens here. It is also told of
/// the two events a hypervisor's trace is proven with (trace/slot_layout.h): stores into
/// watched memory, and the TSC values RDTSC/RDTSCP return in VMX root operation.
class VmxTransitionObserver {
public:
  virtual ~VmxTransitionObserver() = default;
  virtual void vmExit(const VmExitEvent &E) = 0;
  virtual void vmEntry(const VmEntryEvent &E) = 0;
  /// The processor's own calls at the same two moments. By default they build the
  /// VmExitEvent or VmEntryEvent above (cpu/vmx: exitEventOf, entryEventOf) and call
  /// vmExit or vmEntry. An observer on the exit loop's hot path (the ground truth) may
  /// override them to read the few values its common case needs from the processor
  /// itself (C and Info are valid during the call only) rather than have every exit
  /// copy the whole event. EntryInterruptionInfo is the VM-entry interruption-information
  /// field when its valid bit is set, else 0 (VmEntryEvent::InjectedInfo).
  virtual void vmExitBegins(const Cpu &C, const VmExitInfo &Info) {
    vmExit(exitEventOf(C, Info));
  }
  virtual void vmEntryDone(const Cpu &C, bool IsLaunch, uint32_t EntryInterruptionInfo) {
    vmEntry(entryEventOf(C, IsLaunch, EntryInterruptionInfo));
  }
  virtual void vmEntryFailure(const VmEntryFailureEvent &E) = 0;
  /// RDTSC or RDTSCP in VMX root operation returns Value (the TSC: no offset or scaling
  /// applies there; SDM Vol. 2B, RDTSC). Rip is the instruction's.
  virtual void rootTsc(unsigned Cpu, uint64_t Tsc, uint64_t Rip, uint64_t Value) {
    (void)Cpu, (void)Tsc, (void)Rip, (void)Value;
  }
  /// A store touched watched memory (only while PhysMem watches something).
  virtual void watchedStore(const WatchedStoreEvent &E) { (void)E; }
  /// The processor's own call for a store that C's instruction made itself
  /// (StoreAgent::Instruction) of [Pa, Pa + SizeBytes), as vmExitBegins is for vmExit: by
  /// default the event (watchedStoreEventOf) to watchedStore. The ground truth overrides
  /// it for a traced hypervisor's slot stores, several per exit.
  virtual void instructionStored(const Cpu &C, Hpa Pa, unsigned SizeBytes) {
    watchedStore(watchedStoreEventOf(C, Pa, SizeBytes, StoreAgent::Instruction));
  }
  /// instructionStored of an 8-byte store, with the Value it stored (the processor's
  /// short path for stores into watched pages, Mmu::writeWatchedPage, has it at hand):
  /// the ground truth records a slot store from it without reading memory back. By
  /// default instructionStored.
  virtual void instructionStored64(const Cpu &C, Hpa Pa, uint64_t Value) {
    (void)Value;
    instructionStored(C, Pa, 8);
  }
  /// A read touched read-watched memory (only while PhysMem watches reads).
  virtual void watchedLoad(const WatchedLoadEvent &E) { (void)E; }
};

/// The records of the common VM exit and of the entry that resumes after it, written by
/// the processor itself, in place, for the observer that asked (the ground truth's
/// GT_EXIT and GT_RESUME, harness/ground_truth_link.h): at an exit loop's rate a call into
/// the observer per transition cost more than the records it wrote (docs/PERFORMANCE.md,
/// "The common transitions' records in place"). The observer owns this (one per CPU),
/// points Cpu::InlineRecords at it and keeps its fields; the processor only tests them
/// and, when a transition qualifies, writes its record and the two fields that follow
/// it (ResumeOpen, ResumeRip), and SlotQuietEpoch. Anything else is the observer's
/// call, as without this.
///
/// Also, with slot watching (trace/slot_layout.h), two records a traced hypervisor makes
/// several of per exit: an aligned 8-byte store into the CPU's own slot array, which the
/// observer names (SlotBase, SlotBytes: GT_SLOT_OWN) and an RDTSC in VMX root operation
/// (GT_ROOT_RDTSC).
///
/// A record is the observer's format (a XenTrace record, trace/xentrace.h): a header
/// word the observer gives, the TSC in two words (low first), then the payload. The exit
/// record's payload is {exit reason, RIP low, RIP high, instruction length, exit
/// qualification low, high}, of which the header keeps 4, 5 or 6 words (ExitHeader[0],
/// [1], [2]: qualification 0, its high half 0, else); the entry record has no payload;
/// the slot store's is {slot index, RIP low, value low, value high, RIP high}, of which
/// the header keeps 3, 4 or 5 words (SlotHeader[0], [1], [2]: both high halves 0, RIP's
/// 0, else); the root RDTSC's {RIP low, offset low, offset high, RIP high} (the value
/// less the record's TSC), of which the header keeps 1 to 4 (RootTscHeader[0] to [3]:
/// as few as hold every word that is not 0).
struct InlineTransitionRecords {
  /// Whose records these are: the processor writes them only while this is the CPU's
  /// Transitions (an observer interposed, as run control's, sees every transition).
  const void *Observer = nullptr;
  /// What the processor must test, kept by the observer: 0 nothing is written in place;
  /// 1 a transition qualifies whatever the registers; 2 only with RAX, RCX, RDX and RBX
  /// equal to Regs.
  uint8_t Mode = 0;
  /// The entry record is due: the next entry attempt is the first after an exit whose
  /// record said "resume at ResumeRip" (rip + length). Set by the exit record, cleared by
  /// the entry's, whoever wrote them.
  bool ResumeOpen = false;
  uint64_t ResumeRip = 0;
  uint64_t Regs[4] = {};
  /// Basic exit reasons (bit N of word N / 64) whose exits the observer records itself.
  uint64_t CallReasons[2] = {~0ull, ~0ull};
  uint32_t ExitHeader[3] = {};
  uint32_t ResumeHeader = 0;
  /// The CPU's own slot array, whose stores are recorded in place ([SlotBase, SlotBase +
  /// SlotBytes), 8-byte slots; SlotBytes 0: none), and the record's headers.
  uint64_t SlotBase = 0, SlotBytes = 0;
  uint32_t SlotHeader[3] = {};
  /// The processor's: PhysMem::watchEpoch when it found no armed MONITOR covering a
  /// byte of the slot array (Mmu::writeSlotInPlace); 0, not known. The observer sets it
  /// to 0 whenever it changes the array.
  uint64_t SlotQuietEpoch = 0;
  /// The root RDTSC record's headers (1 to 4 payload words); [0] 0: the observer's call.
  uint32_t RootTscHeader[4] = {};
  /// The observer's buffer, by reference (it may replace the buffer when it drains):
  /// Words[0 .. Used) hold records, a record of N payload words may be written while
  /// Used + 3 + N <= Limit (Limit 0 stops every in-place record), and LastTsc is the
  /// last record's TSC.
  const std::unique_ptr<uint32_t[]> *Words = nullptr;
  uint32_t *Used = nullptr;
  const uint32_t *Limit = nullptr;
  uint64_t *LastTsc = nullptr;
  /// Records written in place so far (tests, and the observer's statistics).
  uint64_t Placed = 0;

  /// The registers pass Mode's test.
  bool regsPass(const uint64_t *Gpr) const {
    return Mode == 1 || !((Regs[0] ^ Gpr[0]) | (Regs[1] ^ Gpr[1]) | (Regs[2] ^ Gpr[2]) |
                          (Regs[3] ^ Gpr[3]));
  }
  /// Where the next record starts (an index into Words) when one of MaxWords payload
  /// words fits, else ~0u.
  template <unsigned MaxWords> uint32_t next() const {
    const uint32_t U = *Used;
    return U + 3 + MaxWords <= *Limit ? U : ~0u;
  }
  /// Writes Header and Tsc at index U (next()) and counts the record, of NumWords payload
  /// words (the caller stores them, at the pointer returned).
  uint32_t *place(uint32_t U, uint32_t Header, uint64_t Tsc, unsigned NumWords) {
    uint32_t *P = Words->get() + U;
    P[0] = Header;
    P[1] = uint32_t(Tsc);
    P[2] = uint32_t(Tsc >> 32);
    *Used = U + 3 + NumWords;
    *LastTsc = Tsc;
    ++Placed;
    return P + 3;
  }
};

} // namespace vmxsim
