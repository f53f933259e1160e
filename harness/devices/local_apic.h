// The local APIC of each processor, in xAPIC mode (SDM Vol. 3A, Advanced Programmable
// Interrupt Controller (APIC)), and the APIC bus that carries IPIs between them.
//
// Modelled (section titles of SDM Vol. 3A, APIC):
//  - Local APIC Register Address Map: ID, version (0x00050014: version 0x14, six LVT
//    entries), TPR, PPR, EOI, LDR, DFR, SVR, ISR/TMR/IRR (256 bits each), ESR, ICR, the
//    LVT timer/thermal/performance/LINT0/LINT1/error entries, initial/current count and
//    divide configuration. Reset values as in "Local APIC State After Power-Up or Reset";
//    INIT keeps the APIC ID ("Local APIC State After an INIT Reset").
//  - One register page at 0xfee00000 for the whole machine, where each CPU sees its own
//    APIC (ApicMmio: the machine says which CPU is running). With IA32_APIC_BASE.EN = 0
//    the page is not decoded (reads all-ones, writes ignored), as on a PC.
//  - Task and Processor Priorities, Interrupt Acceptance for Fixed Interrupts (IRR, ISR,
//    PPR), Signaling Interrupt Servicing Completion (EOI), Spurious Interrupt (an INTA
//    that finds nothing deliverable returns the SVR vector).
//  - APIC Timer: one-shot, periodic and TSC-deadline (IA32_TSC_DEADLINE). The bus clock
//    is the virtual clock: ONE BUS CYCLE = ONE VIRTUAL CYCLE (Cpu::Cycles, the cycle count
//    the TSC is made of), so a one-shot count C with divide D expires exactly C x D
//    virtual cycles after the initial-count write (measured from Cpu::Cycles at that
//    write). A divide change applies from the next initial-count write.
//  - Issuing Interprocessor Interrupts (ICR): fixed, lowest priority (to the matching
//    APIC with the lowest TPR class, ties by lowest APIC ID), NMI, INIT, INIT level
//    de-assert (ignored, as on P4/Xeon), start-up; physical and logical (flat and
//    cluster) destinations, broadcast 0xff; shorthands self, all, all-but-self. Delivery
//    is immediate, so the delivery-status bit always reads 0 ("idle").
//  - Error Handling (ESR): send/receive illegal vector (0-15, for fixed/lowest-priority
//    IPIs, LVT-generated and self interrupts), illegal register address; a new error
//    raises the LVT error interrupt when unmasked. ESR reads return the errors latched by
//    the last ESR write, per the SDM's write-then-read protocol.
//  - INIT and start-up IPIs (SDM Vol. 3A, MP Initialization): latched and applied by the
//    machine at the target's next instruction boundary (applySignals), so a CPU's state
//    never changes in the middle of another CPU's instruction. INIT: Cpu::init() and
//    wait-for-SIPI (except that INIT is blocked in VMX root operation and causes a VM exit
//    in non-root operation: vmxInitSignal); SIPI in wait-for-SIPI: CS selector = vector
//    << 8, base = vector << 12, IP = 0, real mode; in non-root, vmxStartupIpi; otherwise
//    discarded.
//  - LINT0 carries the 8259 PIC's INTR to the BSP (ExtINT): when LVT LINT0 is unmasked
//    with delivery mode ExtINT, and also while the APIC is software- or hardware-disabled
//    (the "through" virtual-wire routing a PC BIOS sets up, which vmxsim has no BIOS to
//    do). ExtINT vectors come from the PIC's INTA and bypass IRR/ISR/PPR.
//
//  - Extended XAPIC (x2APIC): IA32_APIC_BASE.EXTD (transitions checked in cpu/msrs.cpp),
//    the registers as MSRs 0x802-0x83f (readMsr/writeMsr): 32-bit x2APIC ID (= the APIC
//    ID), LDR derived from it (cluster ID << 16 | 1 << (ID & 0xf)), no DFR, ICR as one
//    64-bit MSR with a 32-bit destination (0xffffffff broadcast), SELF IPI. In x2APIC
//    mode the MMIO page behaves as in the globally disabled state (x2APIC Register
//    Availability).
//
// Not modelled: APIC base relocation (the page stays at 0xfee00000),
// SMI/reserved ICR delivery modes (nothing is sent), directed EOI (an EOI of a
// level-triggered vector is broadcast to the I/O APIC, ApicBus::LevelEoi), thermal and
// CMCI sources (their LVT entries are storage; the performance-counter entry delivers the
// processor's PMIs: performanceMonitoringInterrupt),
// focus processor checking, the arbitration priority register (APR reads 0).
#pragma once
#include "cpu/cpu.h"
#include "harness/timer_event.h"
#include "mmu/phys_mem.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <vector>

namespace vmxsim {
class StopLatch;

class ApicBus;
class PicPair;

/// Hears the EOI of a level-triggered interrupt (the I/O APIC's EOI broadcast,
/// harness/devices/ioapic.h).
class EoiListener {
public:
  virtual ~EoiListener() = default;
  virtual void levelEoi(uint8_t Vector) = 0;
};

class LocalApic : public InterruptSource, public ApicHook, public TimerEventSource {
public:
  static constexpr uint64_t kBase = 0xfee00000, kSize = 0x1000;
  enum Reg : uint32_t { Id = 0x20, Version = 0x30, Tpr = 0x80, Apr = 0x90, Ppr = 0xa0,
                        Eoi = 0xb0, Rrd = 0xc0, Ldr = 0xd0, Dfr = 0xe0, Svr = 0xf0,
                        Isr0 = 0x100, Tmr0 = 0x180, Irr0 = 0x200, Esr = 0x280,
                        LvtCmci = 0x2f0, IcrLo = 0x300, IcrHi = 0x310, LvtTimer = 0x320,
                        LvtThermal = 0x330, LvtPerf = 0x340, LvtLint0 = 0x350,
                        LvtLint1 = 0x360, LvtError = 0x370, TimerInitial = 0x380,
                        TimerCurrent = 0x390, TimerDivide = 0x3e0 };
  /// ESR bits (SDM Vol. 3A, Error Handling, figure "Error Status Register").
  enum EsrBit : uint32_t { SendIllegalVector = 1u << 5, ReceiveIllegalVector = 1u << 6,
                           IllegalRegisterAddress = 1u << 7 };
  /// ICR delivery modes (SDM Vol. 3A, Interrupt Command Register (ICR)).
  enum class Delivery : uint8_t { Fixed = 0, LowestPriority = 1, Smi = 2, Nmi = 4, Init = 5,
                                  StartUp = 6, ExtInt = 7 };

  LocalApic(Cpu &C, ApicBus &Bus, uint8_t ApicId);
  /// Power-up/RESET state.
  void reset();

  /// Register access by xAPIC offset (32-bit registers at 16-byte strides).
  uint32_t readReg(uint32_t Offset);
  void writeReg(uint32_t Offset, uint32_t Value);

  /// The 8259 pair on LINT0 (the BSP only).
  PicPair *Pic = nullptr;
  /// Where a delivery vmxsim does not model stops the run (status 10); none: dropped
  /// (a unit test's APIC without a machine).
  StopLatch *Latch = nullptr;

  // InterruptSource: the processor's INTR/INTA (Cpu::run's event window).
  bool intrPending() override;
  uint8_t acknowledge() override;
  void endOfInterrupt() override { writeReg(Eoi, 0); }
  // ApicHook: IA32_TSC_DEADLINE.
  Status readMsr(Cpu &C, uint32_t Index, uint64_t &Value) override;
  Status writeMsr(Cpu &C, uint32_t Index, uint64_t Value) override;
  /// A counter overflow's PMI (cpu/perfmon.h) through the LVT performance-counter entry.
  void performanceMonitoringInterrupt() override;

  /// A delivery vmxsim does not model: the run stops with status 10 naming it.
  void unimplemented(const char *What);
  /// An interrupt message arriving from the bus or a local source.
  void accept(Delivery Mode, uint8_t Vector, bool LevelTrigger);
  /// Applies a latched INIT or SIPI at an instruction boundary of this CPU (called by the
  /// machine before the CPU runs).
  void applySignals();
  /// Whether something can end a HLT or wait-for-SIPI now (NMI, INIT, SIPI, or an
  /// interrupt the CPU would take with its current RFLAGS.IF).
  bool hasWakeEvent();
  /// Virtual cycle at which the timer next raises an interrupt, or ~0.
  uint64_t nextTimerEvent() const override;

  uint8_t apicId() const { return ApicId; }
  bool hardwareEnabled() const;
  bool softwareEnabled() const { return SvrReg & 0x100; }
  /// IA32_APIC_BASE.EN and EXTD both set (SDM Vol. 3A, x2APIC Mode Enabling).
  bool x2apicMode() const;
  /// The x2APIC logical ID (SDM Vol. 3A, Logical Destination Mode in x2APIC Mode).
  uint32_t x2apicLdr() const { return (uint32_t(ApicId >> 4) << 16) | (1u << (ApicId & 0xf)); }
  bool InitPending = false, SipiPending = false;
  /// An ExtINT message (an I/O APIC virtual-wire entry) waits for the processor's INTA,
  /// whose vector the 8259 supplies.
  bool ExtIntPending = false;
  uint8_t SipiVector = 0;

  Cpu &C;

private:
  friend class ApicBus;
  static int highest(const uint32_t (&Bits)[8]);
  static void setBit(uint32_t (&Bits)[8], uint8_t V) { Bits[V >> 5] |= 1u << (V & 31); }
  static void clearBit(uint32_t (&Bits)[8], uint8_t V) { Bits[V >> 5] &= ~(1u << (V & 31)); }
  uint32_t ppr() const;
  bool picRouted() const;
  void updateTimer();
  void signalError(uint32_t Bits);
  void sendIpi();
  uint32_t divisor() const;
  uint32_t &lvt(uint32_t Offset) { return Lvt[(Offset - LvtTimer) >> 4]; }
  uint32_t timerMode() const { return (Lvt[0] >> 17) & 3; } // 0 one-shot, 1 periodic, 2 TSC

  ApicBus &Bus;
  uint8_t ApicId;
  uint32_t TprReg = 0, LdrReg = 0, DfrReg = 0xffffffff, SvrReg = 0xff;
  uint32_t Isr[8] = {}, Tmr[8] = {}, Irr[8] = {};
  uint32_t EsrReg = 0, EsrPending = 0;
  uint32_t IcrLoReg = 0, IcrHiReg = 0;
  uint32_t Lvt[6] = {}; ///< timer, thermal, performance, LINT0, LINT1, error
  uint32_t LvtCmciReg = 0x10000;
  uint32_t Initial = 0, DivideReg = 0;
  // Timer: the count runs from TimerStart (virtual cycle) with period Initial x divisor.
  bool TimerArmed = false;
  uint64_t TimerStart = 0, TimerPeriod = 0;
  uint64_t TscDeadline = 0; ///< IA32_TSC_DEADLINE (TSC units); 0 = disarmed
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.InitPending, S.SipiPending, S.ExtIntPending, S.SipiVector, S.TprReg, S.LdrReg, S.DfrReg,
          S.SvrReg, S.Isr, S.Tmr, S.Irr, S.EsrReg, S.EsrPending, S.IcrLoReg, S.IcrHiReg,
          S.Lvt, S.LvtCmciReg, S.Initial, S.DivideReg, S.TimerArmed, S.TimerStart,
          S.TimerPeriod, S.TscDeadline);
  }
};

/// Connects the local APICs: IPI routing, and the machine-wide MMIO page that shows each
/// CPU its own APIC.
class ApicBus : public MmioDevice {
public:
  std::vector<LocalApic *> Apics;
  /// The CPU whose instructions are executing (set by the machine's scheduler); MMIO
  /// accesses from outside any CPU (tests, loaders) see CPU 0's APIC.
  unsigned Current = 0;
  /// Told of every EOI of a level-triggered vector (TMR set); null: nobody listens.
  EoiListener *LevelEoi = nullptr;

  uint64_t mmioRead(uint64_t Offset, unsigned SizeBytes) override;
  void mmioWrite(uint64_t Offset, unsigned SizeBytes, uint64_t Value) override;

  /// Whether APIC A matches destination Dest in the given mode (SDM Vol. 3A, Determining
  /// IPI Destination).
  static bool matches(const LocalApic &A, uint8_t Dest, bool Logical);
  /// The same for a 32-bit x2APIC destination (physical x2APIC ID or cluster/logical).
  static bool matchesX2apic(const LocalApic &A, uint32_t Dest, bool Logical);
};

} // namespace vmxsim
