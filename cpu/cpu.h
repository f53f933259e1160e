// One logical processor: architectural state, the virtual clock and the run loop. Its
// caches of translations and decoded code belong to its MMU (cpu/mmu.h, with their
// coherence contract). Instruction semantics live in free functions in cpu/exec_*.cpp.
#pragma once
#include "cpu/debug.h"
#include "cpu/decoded_insn.h"
#include "cpu/jit/exec_mode.h"
#include "cpu/mmu.h"
#include "cpu/monitor.h"
#include "cpu/observer.h"
#include "cpu/registers.h"
#include "cpu/status.h"
#include "mmu/access.h"
#include "mmu/io_bus.h"
#include "mmu/phys_mem.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <type_traits>

namespace vmxsim {

class Cpu;
struct CpuModel;
struct MsrState;
struct VmxState;
class InterruptSource;
class PerfMon;
class Translator;


/// An exception waiting to be delivered (or turned into a VM exit by the VMX layer).
struct PendingEvent {
  uint8_t Vector = 0;
  bool HasErrorCode = false;
  uint32_t ErrorCode = 0;
  uint64_t FaultAddr = 0; ///< #PF linear address, loaded into CR2 at delivery
};

/// Why Cpu::run returned.
enum class StopReason : uint8_t {
  InsnLimit,     ///< the retired-instruction budget ran out
  Deadline,      ///< the cycle deadline of this run call passed
  Halted,        ///< waiting (HLT, shutdown, wait-for-SIPI) with no event that can wake it
  Shutdown,      ///< triple fault: the processor entered shutdown
  StopRequested, ///< a device (isa-debug-exit, shutdown port) asked the machine to stop
  Unimplemented, ///< the guest executed something vmxsim does not implement
  /// ExecMode::Lockstep: a translated block and the interpreter disagreed
  /// (Cpu::StopWhat holds the one-line message).
  LockstepMismatch,
};

/// What the event window decided at an instruction boundary (Cpu::eventWindow).
enum class EventWindow : uint8_t {
  Run,   ///< execute instructions until the window is due again
  Again, ///< a VM exit happened or a guest event was delivered: open the window again
  Stop,  ///< Cpu::run must return (the StopReason says why)
};

/// An interrupt controller as the processor sees it: the INTR line and the INTA cycle.
class InterruptSource {
public:
  virtual ~InterruptSource() = default;
  virtual bool intrPending() = 0;
  /// The interrupt acknowledge cycle: returns the vector and updates the controller.
  virtual uint8_t acknowledge() = 0;
  /// An end of interrupt as a write of 0 to the local APIC's EOI register makes it (SDM
  /// Vol. 3C, "Posted-Interrupt Processing" dismisses the notification vector so); a
  /// controller without that register ignores it.
  virtual void endOfInterrupt() {}
};

/// The local APIC's MSR side (x2APIC registers 0x800-0x8ff and IA32_TSC_DEADLINE), for
/// rows of cpu/msrs.def whose Write kind is Apic. Implemented by the machine's local APIC
/// (harness/devices/local_apic.h); a CPU without one (a bare test CPU) treats those rows
/// as plain storage.
class ApicHook {
public:
  virtual ~ApicHook() = default;
  virtual Status readMsr(Cpu &C, uint32_t Index, uint64_t &Value) = 0;
  virtual Status writeMsr(Cpu &C, uint32_t Index, uint64_t Value) = 0;
  /// A performance-monitoring counter overflowed with its PMI enabled (cpu/perfmon.h):
  /// the local APIC delivers the interrupt of its LVT performance-counter entry.
  virtual void performanceMonitoringInterrupt() = 0;
};

/// The PC's legacy x87 error reporting (SDM Vol. 1, Appendix D, "MS-DOS Compatibility
/// Sub-mode"; Vol. 3A, "Numeric Error" in CR0.NE): the processor's FERR# output, which
/// the chipset routes to IRQ 13 (cpu/x87.h). Implemented by the machine's chipset.
class FerrLine {
public:
  virtual ~FerrLine() = default;
  /// The processor asserts FERR# (a waiting x87 instruction found an unmasked exception
  /// pending with CR0.NE = 0).
  virtual void assertFerr(Cpu &C) = 0;
};

class Cpu {
public:
  Cpu(PhysMem &Mem, IoBus &Io, const CpuModel &Model, unsigned Id = 0);
  ~Cpu();
  Cpu(const Cpu &) = delete;
  Cpu &operator=(const Cpu &) = delete;

  /// Power-on/RESET state (SDM Vol. 3A, Processor State After Reset).
  void reset();
  /// INIT (SDM Vol. 3A, table "IA-32 and Intel 64 Processor States Following Power-up,
  /// Reset, or INIT"): RESET's register state, but the x87/SSE state, the MSRs (and so
  /// the TSC, MTRRs and IA32_APIC_BASE) keep their values. The caller (the machine's
  /// local APIC) then puts the processor in wait-for-SIPI unless it is the BSP.
  void init();
  /// Executes until an instruction budget or virtual-cycle deadline is reached (the
  /// deadline may be brought forward during the run: pullDeadline), or the processor
  /// stops for another StopReason.
  StopReason run(uint64_t MaxInsns, uint64_t UntilCycle = ~uint64_t(0));

  /// Snapshot (cpu/cpu_snapshot.cpp): the architectural state, the clocks, the MSRs,
  /// the VMX state with the cached current VMCS, the performance counters and the
  /// event bookkeeping and the MMU's TLBs (Mmu::save), at an instruction boundary
  /// between run() calls. The decoded blocks are derived and not saved: load() flushes
  /// them and re-derives the mode (modeChanged, debugRegistersChanged).
  /// load() returns false with R's error set when the snapshot does not fit this CPU.
  void save(SnapshotWriter &W) const;
  bool load(SnapshotReader &R);

  // --- state (public: plain data, as in Blink/Bochs; functions keep the invariants) ---
  CpuState S;
  PhysMem &Mem;
  IoBus &Io;
  const CpuModel &Model;
  std::unique_ptr<MsrState> Msrs;
  /// VMX operation (cpu/vmx/vmx_state.h): VMXON/current-VMCS pointers, cached VMCS.
  std::unique_ptr<VmxState> Vmx;
  /// Architectural performance monitoring (cpu/perfmon.h): the counters and their MSRs.
  std::unique_ptr<PerfMon> Pmu;
  /// Some performance counter is counting (hot-path copy of PerfMon::active): the event
  /// window brings the counters up to date and the run loop opens it by their overflow.
  bool PmuActive = false;
  /// In VMX non-root operation (hot-path copy; SDM Vol. 3C, "VMX Operation").
  bool NonRoot = false;
  InterruptSource *Intr = nullptr;
  /// The local APIC's MSR interface; null on a CPU without a local APIC.
  ApicHook *Apic = nullptr;
  /// FERR#'s wire to the chipset; null when nothing is wired (a legacy x87 error then
  /// stops the run as unimplemented, cpu/x87.h).
  FerrLine *Ferr = nullptr;
  /// The IGNNE# input: asserted by the chipset (a write to port F0h), deasserted when
  /// FERR# is, that is when FSW.ES clears (cpu/x87.h, x87::esMayHaveCleared).
  bool Ignne = false;
  CpuObserver *Observer = nullptr;
  /// Told of every VM exit, VM entry and VM-entry failure (cpu/observer.h): the
  /// ground truth listens here; null (one predictable branch) when nobody does.
  VmxTransitionObserver *Transitions = nullptr;
  /// The common transitions' records, written in place for Transitions when it asked
  /// (cpu/observer.h; cpu/inline_records.h); null otherwise.
  InlineTransitionRecords *InlineRecords = nullptr;
  /// Test-only injected bugs, so that a differential test can prove it catches a wrong
  /// result (harness/kvm/fuzz.h, FuzzOptions::InjectBtCarryBug). All off outside it.
  struct InjectedBugs {
    bool FlipBtCarry = false; ///< BT/BTS/BTR/BTC store the complement of CF
  } TestBugs;
  unsigned Id;
  /// The translation cache (cpu/jit/translator.h); null with ExecMode::Interp.
  std::unique_ptr<Translator> Jit;
  /// Selects how guest code is executed; Interp drops the translator and its cache.
  void setExecMode(ExecMode M);

  uint64_t Cycles = 0;  ///< virtual clock: the TSC before offsetting/scaling
  uint64_t Retired = 0; ///< retired instructions
  /// The part of Cycles spent waiting (HLT, shutdown, wait-for-SIPI): the unhalted
  /// cycles the performance counters count are Cycles - HaltedCycles.
  uint64_t HaltedCycles = 0;
  /// A waiting processor's clock jumps to T (the event that wakes it, or the end of the
  /// time it may wait); the jump is halted time.
  void waitUntil(uint64_t T) {
    if (T > Cycles) {
      HaltedCycles += T - Cycles;
      Cycles = T;
    }
  }
  uint64_t RandomDraws = 0; ///< RDRAND/RDSEED values drawn (cpu/exec_random.cpp)
  /// The cycle at which the run loop must next open the event window: the end of the
  /// run call, or earlier (an STI/MOV SS shadow, MTF, the preemption timer). Anything
  /// that must be noticed at the next instruction boundary makes it due now (0) through
  /// breakBlock(), which is why the loop checks one compare per instruction.
  uint64_t WindowDue = 0;
  PendingEvent Pending;
  /// The activity state, the one place for it in root and non-root operation (the
  /// guest's in non-root operation: VM entry loads it, VM exit saves it and makes the
  /// processor active). Anything that leaves the active state ends the current block.
  ActivityState Activity = ActivityState::Active;
  /// MONITOR's address-range monitor and MWAIT's wait (cpu/monitor.h).
  MonitorState Monitor;
  /// Waiting for an event (HLT, MWAIT, shutdown, wait-for-SIPI): the run loop executes
  /// nothing.
  bool waiting() const { return Activity != ActivityState::Active; }
  /// Shut down in root operation (a triple fault, a VMX abort): the run ends there.
  /// (In non-root operation the shutdown state is the guest's, which the VMX event
  /// window handles.)
  bool shutDown() const { return Activity == ActivityState::Shutdown && !NonRoot; }
  /// STI / MOV SS blocking for one instruction (SDM Vol. 3A, Masking Maskable Hardware
  /// Interrupts): the Retired count at which the shadow ends.
  uint64_t ShadowUntil = 0;
  /// The shadow above was set by MOV SS/POP SS rather than STI ("blocking by MOV SS"
  /// vs "blocking by STI", SDM Vol. 3C, Interruptibility State; VMLAUNCH fails with
  /// error 26 under MOV SS blocking). Set by the MOV SS/POP SS and STI handlers.
  bool ShadowIsMovSs = false;
  bool NmiBlocked = false;
  bool NmiPending = false;
  /// Breakpoints armed by DR7 and debug traps waiting for a boundary (cpu/debug.h).
  DebugState Debug;
  /// Set by a nested fault while delivering an event, to detect #DF and triple faults.
  uint8_t DeliveryDepth = 0;
  StopReason LastStop = StopReason::InsnLimit;

  /// The memory-management unit: TLBs, the guest-physical mapping cache, the
  /// decoded-block cache and their contexts, with the rules that keep them coherent.
  vmxsim::Mmu Mmu;

  /// Makes the event window due after this instruction, which ends the current block
  /// (mode change, self-modifying code, new interrupt, device stop request).
  void breakBlock() { WindowDue = 0; BlockStop = 0; }
  /// The cycle at which the run loop stops executing the current block (Cpu::runBlocks):
  /// the earlier of WindowDue and the cycle at which the block's last instruction ends
  /// when no instruction adds cycles of its own. It never exceeds WindowDue (breakBlock
  /// zeroes both), so one compare per instruction finds both the end of the block and
  /// every instruction boundary at which the window is due.
  uint64_t BlockStop = 0;
  /// The retired-instruction count at which the current run() call ends (its budget):
  /// translated loops read it (cpu/jit/translator.h).
  uint64_t InsnEnd = ~uint64_t(0);
  /// The virtual-cycle deadline of the current run() call: where it returns Deadline.
  uint64_t RunUntil = ~uint64_t(0);
  /// Brings the current run's deadline forward to cycle T (if T is earlier), ending the
  /// current block: a device that a running processor has just programmed (a timer
  /// armed, or re-armed earlier) makes its next event the run's end, so that the
  /// scheduler raises it at its exact cycle rather than at the end of the slice it
  /// handed out before (harness/scheduler.cpp).
  void pullDeadline(uint64_t T) {
    if (T < RunUntil) {
      RunUntil = T;
      breakBlock();
    }
  }

  /// Raises an exception: records it and returns Status::Fault.
  Status raise(uint8_t Vector) {
    Pending = PendingEvent{Vector, false, 0, 0};
    return Status::Fault;
  }
  Status raise(uint8_t Vector, uint32_t ErrorCode) {
    Pending = PendingEvent{Vector, true, ErrorCode, 0};
    return Status::Fault;
  }
  Status raiseGp(uint32_t ErrorCode = 0) { return raise(vec::GP, ErrorCode); }
  Status raiseUd() { return raise(vec::UD); }

  /// Mask of valid RIP bits in the current code size (IP/EIP wrap).
  uint64_t RipMask = 0xffff;
  /// Recomputes cached mode-derived values (RipMask, decode mode, TLB user bit) after a
  /// change to CR0, EFER, CS or RFLAGS.VM; ends the current block.
  void modeChanged();
  uint8_t DecodeMode = 0; ///< CodeMode of the current CS
  /// The one-line reason of a stop that is not the guest's doing, and the RIP it names:
  /// what the guest executed that vmxsim does not implement (StopReason::Unimplemented),
  /// or the translated block that disagreed with the interpreter
  /// (StopReason::LockstepMismatch, cpu/jit/translator.h).
  const char *StopWhat = nullptr;
  uint64_t StopRip = 0;
  Status unimplemented(const char *What) {
    StopWhat = What;
    StopRip = S.Rip;
    return Status::Unimplemented;
  }

private:
  /// The event window at an instruction boundary: NMIs and external interrupts in the
  /// priority order of SDM Vol. 3A, "Priority Among Concurrent Events", and in VMX
  /// non-root operation the VMX layer's VM exits among them (cpu/vmx/vmx_events.h).
  EventWindow eventWindow(StopReason &Why);
  /// The status of an event the window delivered or a VM exit it performed.
  EventWindow afterEvent(Status St, StopReason &Why);
  /// Executes blocks until the deadline, the instruction budget, or an event; true when
  /// the run must stop (Why says why).
  bool runBlocks(uint64_t InsnEnd, StopReason &Why);
  bool runBlockSlow(const DecodedInsn *I, const DecodedInsn *End, StopReason &Why);
  bool handleStatus(Status St, StopReason &Why);
};

/// Advances RIP past the instruction (the common tail of non-branch handlers).
inline Status next(Cpu &C, const DecodedInsn &I) {
  C.S.Rip = (C.S.Rip + I.Len) & C.RipMask;
  return Status::Ok;
}

} // namespace vmxsim
