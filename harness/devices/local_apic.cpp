#include "harness/devices/local_apic.h"

#include "cpu/msrs.h"
#include "cpu/vmx/vmx_events.h"
#include "cpu/vmx/vmx_state.h"
#include "harness/devices/pic8259.h"
#include "harness/devices/stop_latch.h"

namespace vmxsim {

namespace {
constexpr uint32_t kLvtMasked = 1u << 16;
constexpr uint64_t kApicBaseEnable = 1u << 11, kApicBaseExtd = 1u << 10;
// Writable bits of each LVT entry (SDM Vol. 3A, Local Vector Table, figure "Local Vector
// Table (LVT)"): vector, delivery mode, polarity / trigger where present, mask, timer mode.
constexpr uint32_t kLvtWritable[6] = {0x000710ff, 0x000107ff, 0x000107ff,
                                      0x0001a7ff, 0x0001a7ff, 0x000100ff};
} // namespace

LocalApic::LocalApic(Cpu &C, ApicBus &Bus, uint8_t ApicId) : C(C), Bus(Bus), ApicId(ApicId) {
  reset();
}

void LocalApic::reset() {
  // SDM Vol. 3A, Local APIC State After Power-Up or Reset: IRR, ISR, TMR, ICR, LDR, TPR,
  // timer counts and divide are 0, DFR all ones, LVT entries masked, SVR 0xff.
  TprReg = LdrReg = 0;
  DfrReg = 0xffffffff;
  SvrReg = 0xff;
  for (unsigned I = 0; I < 8; ++I)
    Isr[I] = Tmr[I] = Irr[I] = 0;
  EsrReg = EsrPending = IcrLoReg = IcrHiReg = 0;
  for (uint32_t &L : Lvt)
    L = kLvtMasked;
  LvtCmciReg = kLvtMasked;
  Initial = DivideReg = 0;
  TimerArmed = false;
  TimerStart = TimerPeriod = TscDeadline = 0;
  InitPending = SipiPending = ExtIntPending = false;
}

bool LocalApic::hardwareEnabled() const {
  return (*C.Msrs)[MsrSlot::IA32_APIC_BASE] & kApicBaseEnable;
}

bool LocalApic::x2apicMode() const {
  const uint64_t Base = (*C.Msrs)[MsrSlot::IA32_APIC_BASE];
  return (Base & kApicBaseEnable) && (Base & kApicBaseExtd);
}

int LocalApic::highest(const uint32_t (&Bits)[8]) {
  for (int W = 7; W >= 0; --W)
    if (Bits[W])
      return W * 32 + 31 - __builtin_clz(Bits[W]);
  return -1;
}

uint32_t LocalApic::ppr() const {
  // SDM Vol. 3A, Processor Priority Register (PPR): the TPR, or the class of the
  // highest in-service vector when that class is higher.
  int Isrv = highest(Isr);
  uint32_t IsrClass = Isrv < 0 ? 0 : uint32_t(Isrv) & 0xf0;
  return (TprReg & 0xf0) >= IsrClass ? TprReg & 0xff : IsrClass;
}

uint32_t LocalApic::divisor() const {
  // SDM Vol. 3A, figure "Divide Configuration Register": bits 3,1:0; 111b divides by 1.
  uint32_t Code = ((DivideReg >> 1) & 4) | (DivideReg & 3);
  return Code == 7 ? 1 : 2u << Code;
}

void LocalApic::signalError(uint32_t Bits) {
  // SDM Vol. 3A, Error Handling: a newly detected error raises the LVT error interrupt.
  bool New = (EsrPending | Bits) != EsrPending;
  EsrPending |= Bits;
  uint32_t L = lvt(LvtError);
  if (New && !(L & kLvtMasked)) {
    uint8_t V = uint8_t(L);
    if (V < 16)
      EsrPending |= ReceiveIllegalVector; // reported, not delivered
    else
      setBit(Irr, V);
  }
}

void LocalApic::updateTimer() {
  const uint64_t Now = C.Cycles;
  if (timerMode() == 2) {
    // SDM Vol. 3A, TSC-Deadline Mode: fires when the TSC reaches the deadline, then the
    // deadline MSR reads 0.
    if (TscDeadline && readTsc(C) >= TscDeadline) {
      TscDeadline = 0;
      if (!(Lvt[0] & kLvtMasked))
        accept(Delivery::Fixed, uint8_t(Lvt[0]), false);
    }
    return;
  }
  if (!TimerArmed || Now < TimerStart + TimerPeriod)
    return;
  if (timerMode() == 1) {
    // Periodic: reload; periods that passed without being observed raise one request
    // (the IRR bit is already set), as an IRR bit holds one pending interrupt.
    TimerStart += (Now - TimerStart) / TimerPeriod * TimerPeriod;
  } else {
    TimerArmed = false;
  }
  if (!(Lvt[0] & kLvtMasked))
    accept(Delivery::Fixed, uint8_t(Lvt[0]), false);
}

uint64_t LocalApic::nextTimerEvent() const {
  if (!hardwareEnabled() || (Lvt[0] & kLvtMasked))
    return ~uint64_t(0);
  if (timerMode() == 2) {
    if (!TscDeadline)
      return ~uint64_t(0);
    uint64_t Tsc = readTsc(C);
    return TscDeadline <= Tsc ? C.Cycles : C.Cycles + (TscDeadline - Tsc);
  }
  return TimerArmed ? TimerStart + TimerPeriod : ~uint64_t(0);
}

void LocalApic::unimplemented(const char *What) {
  if (Latch)
    Latch->requestUnimplemented(What);
}

void LocalApic::accept(Delivery Mode, uint8_t Vector, bool LevelTrigger) {
  if (!hardwareEnabled())
    return;
  switch (Mode) {
  case Delivery::Fixed:
  case Delivery::LowestPriority:
    // SDM Vol. 3A, Interrupt Acceptance for Fixed Interrupts; vectors 0-15 are illegal
    // (Error Handling: "Receive Illegal Vector"). A software-disabled APIC still accepts
    // into IRR but the LVT masks keep local sources quiet.
    if (Vector < 16) {
      signalError(ReceiveIllegalVector);
      return;
    }
    setBit(Irr, Vector);
    if (LevelTrigger)
      setBit(Tmr, Vector);
    else
      clearBit(Tmr, Vector);
    break;
  case Delivery::Nmi:
    C.NmiPending = true;
    break;
  case Delivery::Init:
    InitPending = true;
    break;
  case Delivery::StartUp:
    SipiPending = true;
    SipiVector = Vector;
    break;
  case Delivery::Smi:
    // SDM Vol. 3C, "System Management Mode": an SMI enters SMM, which vmxsim does not
    // model; never dropped silently.
    unimplemented("an SMI delivered to the local APIC (SMM)");
    break;
  case Delivery::ExtInt:
    // An ExtINT message (an I/O APIC entry in virtual-wire mode): the processor's INTR is
    // raised and the vector comes from the 8259's INTA, bypassing IRR, ISR and the
    // priority (82093AA data sheet, Delivery Mode 111; SDM Vol. 3A, "Local Vector
    // Table", ExtINT). Without an 8259 on this CPU there is no one to answer the INTA.
    if (!Pic)
      unimplemented("an ExtINT message to a local APIC with no 8259 behind it");
    else
      ExtIntPending = true;
    break;
  default:
    // 011b (and 111b in the ICR, where ExtINT is not a valid mode): reserved encodings
    // whose effect the SDM does not define.
    unimplemented("an interrupt message with a reserved delivery mode");
    break;
  }
}

void LocalApic::applySignals() {
  // An INIT the processor held in VMX root operation is unblocked by VMXOFF.
  if (C.Vmx->InitBlocked && !C.Vmx->InVmxOperation) {
    C.Vmx->InitBlocked = false;
    InitPending = true;
  }
  if (InitPending) {
    if (C.NonRoot) {
      // SDM Vol. 3C, Other Causes of VM Exits > INIT signals: a VM exit (or blocked in
      // wait-for-SIPI).
      InitPending = false;
      (void)vmxInitSignal(C);
    } else if (C.Vmx->InVmxOperation) {
      // SDM Vol. 3C, Restrictions on VMX Operation: INIT is blocked in VMX root
      // operation; the processor holds it until the next VM entry or VMXOFF.
      InitPending = false;
      C.Vmx->InitBlocked = true;
    } else {
      InitPending = false;
      C.init();
      // Local APIC State After an INIT Reset: as after RESET, but the APIC ID survives
      // (it is never reset here), and a SIPI latched after the INIT stays latched.
      const bool Sipi = SipiPending;
      reset();
      SipiPending = Sipi;
      C.Activity = ActivityState::WaitForSipi;
    }
  }
  if (SipiPending) {
    SipiPending = false;
    if (C.NonRoot) {
      (void)vmxStartupIpi(C, SipiVector);
    } else if (C.Activity == ActivityState::WaitForSipi) {
      // SDM Vol. 3A, MP Initialization Protocol Algorithm: the AP starts in real mode at
      // vector:0000, i.e. CS.selector = vector << 8, CS.base = vector << 12, IP = 0.
      Segment &Cs = C.S.seg(SegReg::CS);
      Cs.Selector = uint16_t(SipiVector) << 8;
      Cs.Base = uint64_t(SipiVector) << 12;
      C.S.Rip = 0;
      C.Activity = ActivityState::Active;
      C.modeChanged();
    }
    // Otherwise the SIPI is discarded (a running processor ignores it).
  }
}

bool LocalApic::picRouted() const {
  if (!Pic)
    return false;
  uint32_t L = Lvt[3];
  return !hardwareEnabled() || !softwareEnabled() ||
         (!(L & kLvtMasked) && ((L >> 8) & 7) == uint32_t(Delivery::ExtInt));
}

bool LocalApic::intrPending() {
  updateTimer();
  if (ExtIntPending || (picRouted() && Pic->intrPending()))
    return true;
  if (!hardwareEnabled() || !softwareEnabled())
    return false;
  int V = highest(Irr);
  return V >= 0 && (uint32_t(V) & 0xf0) > (ppr() & 0xf0);
}

uint8_t LocalApic::acknowledge() {
  if (ExtIntPending) {
    // The INTA of an ExtINT message: the 8259 supplies the vector (its spurious IRQ 7 or
    // 15 if the request went away meanwhile).
    ExtIntPending = false;
    return Pic->acknowledge();
  }
  if (picRouted() && Pic->intrPending())
    return Pic->acknowledge(); // ExtINT: the vector comes from the 8259's INTA
  int V = highest(Irr);
  if (V < 0 || (uint32_t(V) & 0xf0) <= (ppr() & 0xf0))
    return uint8_t(SvrReg); // SDM Vol. 3A, Spurious Interrupt
  clearBit(Irr, uint8_t(V));
  setBit(Isr, uint8_t(V));
  return uint8_t(V);
}

bool LocalApic::hasWakeEvent() {
  // A timer that expired while the processor waited with interrupts masked sets its IRR
  // bit now, so that its event is consumed: else the scheduler would pick the waiting
  // processor at that expiry again and again (harness/scheduler.cpp asks every waiting
  // processor).
  updateTimer();
  if (InitPending && (C.NonRoot || !C.Vmx->InVmxOperation))
    return true;
  if (SipiPending || (C.NmiPending && !C.NmiBlocked))
    return true;
  if (C.Activity == ActivityState::WaitForSipi && !C.NonRoot)
    return false;
  // MWAIT with ECX[0] = 1 wakes for a masked interrupt too (cpu/monitor.h).
  return (C.NonRoot || (C.S.Rflags & rflags::IF) || mwaitWakesOnMaskedInterrupt(C)) &&
         intrPending();
}

uint32_t LocalApic::readReg(uint32_t Offset) {
  switch (Offset) {
  case Id:
    return uint32_t(ApicId) << 24;
  case Version:
    return 0x00050014;
  case Tpr:
    return TprReg;
  case Apr:
    return 0;
  case Ppr:
    return ppr();
  case Ldr:
    return LdrReg;
  case Dfr:
    return DfrReg;
  case Svr:
    return SvrReg;
  case Esr:
    return EsrReg;
  case LvtCmci:
    return LvtCmciReg;
  case IcrLo:
    return IcrLoReg & ~(1u << 12); // delivery status: idle
  case IcrHi:
    return IcrHiReg;
  case TimerInitial:
    return Initial;
  case TimerCurrent: {
    if (!TimerArmed || timerMode() == 2)
      return 0;
    uint64_t Elapsed = C.Cycles - TimerStart;
    if (timerMode() == 1)
      Elapsed %= TimerPeriod;
    else if (Elapsed >= TimerPeriod)
      return 0;
    return Initial - uint32_t(Elapsed / divisor());
  }
  case TimerDivide:
    return DivideReg;
  case Eoi:
  case Rrd:
    return 0;
  default:
    break;
  }
  if (Offset >= LvtTimer && Offset <= LvtError)
    return lvt(Offset);
  if (Offset >= Isr0 && Offset < Isr0 + 0x80)
    return Isr[(Offset - Isr0) >> 4];
  if (Offset >= Tmr0 && Offset < Tmr0 + 0x80)
    return Tmr[(Offset - Tmr0) >> 4];
  if (Offset >= Irr0 && Offset < Irr0 + 0x80) {
    updateTimer();
    return Irr[(Offset - Irr0) >> 4];
  }
  signalError(IllegalRegisterAddress);
  return 0;
}

void LocalApic::writeReg(uint32_t Offset, uint32_t Value) {
  switch (Offset) {
  case Tpr:
    TprReg = Value & 0xff;
    C.breakBlock(); // a lower priority may unmask a pending interrupt
    return;
  case Eoi: {
    // SDM Vol. 3A, EOI Register: retires the highest-priority in-service interrupt.
    int V = highest(Isr);
    if (V >= 0) {
      // A level-triggered vector's EOI is broadcast to the I/O APIC (SDM Vol. 3A, EOI
      // Register).
      const bool WasLevel = (Tmr[V >> 5] >> (V & 31)) & 1;
      clearBit(Isr, uint8_t(V));
      clearBit(Tmr, uint8_t(V));
      if (WasLevel && Bus.LevelEoi)
        Bus.LevelEoi->levelEoi(uint8_t(V));
    }
    C.breakBlock();
    return;
  }
  case Ldr:
    LdrReg = Value & 0xff000000;
    return;
  case Dfr:
    DfrReg = Value | 0x0fffffff;
    return;
  case Svr:
    // SDM Vol. 3A, Enabling or Disabling the Local APIC: clearing bit 8 masks every LVT
    // entry; they stay masked until software unmasks them.
    SvrReg = Value & 0x3ff;
    if (!softwareEnabled()) {
      for (uint32_t &L : Lvt)
        L |= kLvtMasked;
    }
    C.breakBlock();
    return;
  case Esr:
    EsrReg = EsrPending;
    EsrPending = 0;
    return;
  case LvtCmci:
    LvtCmciReg = (Value & 0x000107ff) | (softwareEnabled() ? 0 : kLvtMasked);
    return;
  case IcrHi:
    IcrHiReg = Value & 0xff000000;
    return;
  case IcrLo:
    IcrLoReg = Value & 0x000ccfff;
    sendIpi();
    C.breakBlock();
    return;
  case TimerInitial:
    // SDM Vol. 3A, APIC Timer: writing the initial count starts the count; 0 stops it.
    // Ignored in TSC-deadline mode.
    if (timerMode() == 2)
      return;
    Initial = Value;
    TimerArmed = Value != 0;
    TimerStart = C.Cycles;
    TimerPeriod = uint64_t(Value) * divisor();
    C.breakBlock();
    return;
  case TimerDivide:
    DivideReg = Value & 0xb;
    return;
  case Id:
    return; // the APIC ID is the machine's (CPU number); xAPIC lets software change it,
            // vmxsim keeps it so that routing and the MADT agree
  default:
    break;
  }
  if (Offset >= LvtTimer && Offset <= LvtError) {
    const unsigned Idx = (Offset - LvtTimer) >> 4;
    uint32_t V = Value & kLvtWritable[Idx];
    if (!softwareEnabled())
      V |= kLvtMasked;
    if (Idx == 0 && ((V ^ Lvt[0]) >> 17 & 3)) {
      // Changing the timer mode disarms the timer (SDM Vol. 3A, TSC-Deadline Mode).
      TimerArmed = false;
      TscDeadline = 0;
    }
    Lvt[Idx] = V;
    C.breakBlock();
    return;
  }
  if ((Offset >= Isr0 && Offset < Irr0 + 0x80) || Offset == Version || Offset == Apr ||
      Offset == Ppr || Offset == Rrd || Offset == TimerCurrent)
    return; // read-only
  signalError(IllegalRegisterAddress);
}

void LocalApic::sendIpi() {
  // SDM Vol. 3A, Interrupt Command Register (ICR) and the table "Valid Combinations for
  // the Pentium 4 and Intel Xeon Processors' Local xAPIC Interrupt Command Register".
  const uint8_t Vector = uint8_t(IcrLoReg);
  const auto Mode = Delivery((IcrLoReg >> 8) & 7);
  const bool Logical = IcrLoReg & (1u << 11);
  const bool Assert = IcrLoReg & (1u << 14);
  const bool Level = IcrLoReg & (1u << 15);
  const unsigned Shorthand = (IcrLoReg >> 18) & 3;
  const uint8_t Dest = uint8_t(IcrHiReg >> 24);
  const bool X2 = x2apicMode(); // 32-bit destination in IcrHiReg

  switch (Mode) {
  case Delivery::Fixed:
  case Delivery::LowestPriority:
    if (Vector < 16) {
      signalError(SendIllegalVector);
      return;
    }
    break;
  case Delivery::Init:
    if (!Assert && Level)
      return; // INIT level de-assert: no effect on P4/Xeon and later
    break;
  case Delivery::Nmi:
  case Delivery::StartUp:
    break;
  case Delivery::Smi:
    unimplemented("an SMI sent through the ICR (SMM)");
    return;
  default:
    // 011b and 111b: reserved in the ICR (SDM Vol. 3A, "Interrupt Command Register
    // (ICR)", Delivery Mode); what a processor sends for them is not defined.
    unimplemented("an IPI with a reserved ICR delivery mode (011b or 111b)");
    return;
  }
  // Self and all-including-self carry fixed interrupts only.
  if ((Shorthand == 1 || Shorthand == 2) && Mode != Delivery::Fixed)
    return;

  if (Shorthand == 1) {
    accept(Mode, Vector, Level);
    return;
  }
  LocalApic *Lowest = nullptr;
  for (LocalApic *A : Bus.Apics) {
    bool Hit = Shorthand == 2 ? true
               : Shorthand == 3 ? A != this
                   : X2         ? ApicBus::matchesX2apic(*A, IcrHiReg, Logical)
                                : ApicBus::matches(*A, Dest, Logical);
    if (!Hit || !A->hardwareEnabled())
      continue;
    if (Mode == Delivery::LowestPriority && Shorthand == 0) {
      if (!Lowest || (A->TprReg & 0xf0) < (Lowest->TprReg & 0xf0))
        Lowest = A;
      continue;
    }
    A->accept(Mode, Vector, Level);
    // A waiting processor's clock catches up with the sender's: the message arrives now.
    if (A != this && A->C.waiting())
      A->C.waitUntil(C.Cycles);
  }
  if (Lowest) {
    Lowest->accept(Mode, Vector, Level);
    if (Lowest != this && Lowest->C.waiting())
      Lowest->C.waitUntil(C.Cycles);
  }
}

Status LocalApic::readMsr(Cpu &, uint32_t Index, uint64_t &Value) {
  if (Index == msr::IA32_TSC_DEADLINE) {
    updateTimer();
    Value = TscDeadline;
    return Status::Ok;
  }
  // x2APIC registers (cpu/msrs.cpp admits only table rows, in x2APIC mode).
  switch (Index) {
  case msr::IA32_X2APIC_APICID:
    Value = ApicId; // the 32-bit x2APIC ID
    return Status::Ok;
  case msr::IA32_X2APIC_LDR:
    Value = x2apicLdr();
    return Status::Ok;
  case msr::IA32_X2APIC_ICR:
    Value = (uint64_t(IcrHiReg) << 32) | (IcrLoReg & ~(1u << 12)); // no delivery status
    return Status::Ok;
  case msr::IA32_X2APIC_EOI:
  case msr::IA32_X2APIC_SELF_IPI:
    return C.raiseGp(0); // write-only (SDM Vol. 3A, x2APIC Register Address Space)
  default:
    break;
  }
  if (Index < 0x802 || Index > 0x83f)
    return C.raiseGp(0);
  Value = readReg((Index - 0x800) << 4);
  return Status::Ok;
}

void LocalApic::performanceMonitoringInterrupt() {
  // SDM Vol. 3A, "Local Vector Table": the entry's delivery mode (fixed or NMI; SMI,
  // INIT and ExtINT are not modelled, as for the other local sources) and vector; "when
  // the local APIC handles a performance-monitoring counters interrupt, it automatically
  // sets the mask flag in the LVT performance counter register", so the next PMI waits
  // until software unmasks it. A masked entry (or a software-disabled APIC, whose LVT
  // entries read masked) drops the interrupt.
  uint32_t &L = lvt(LvtPerf);
  if (!hardwareEnabled() || !softwareEnabled() || (L & kLvtMasked))
    return;
  L |= kLvtMasked;
  const Delivery Mode = Delivery((L >> 8) & 7);
  if (Mode == Delivery::Fixed || Mode == Delivery::Nmi || Mode == Delivery::Smi)
    accept(Mode, uint8_t(L), false);
  else
    // INIT and ExtINT are "not supported for the LVT performance counter register" (SDM
    // Vol. 3A, "Local Vector Table", Delivery Mode), the other encodings reserved: what a
    // processor does with them is undefined, so the run stops naming the entry.
    unimplemented("a PMI through an LVT performance-counter entry with a reserved or "
                  "unsupported delivery mode (INIT, ExtINT or a reserved encoding)");
  C.breakBlock();
}

Status LocalApic::writeMsr(Cpu &, uint32_t Index, uint64_t Value) {
  if (Index == msr::IA32_TSC_DEADLINE) {
    // SDM Vol. 3A, TSC-Deadline Mode: writes outside that mode are ignored; 0 disarms.
    if (timerMode() == 2)
      TscDeadline = Value;
    C.breakBlock();
    rearmed();
    return Status::Ok;
  }
  if (Index < 0x802 || Index > 0x83f)
    return C.raiseGp(0);
  const uint32_t Offset = (Index - 0x800) << 4;
  // Read-only registers raise #GP on WRMSR (SDM Vol. 3A, x2APIC Register Address Space).
  if (Offset == Id || Offset == Version || Offset == Ppr || Offset == Ldr ||
      (Offset >= Isr0 && Offset < Irr0 + 0x80) || Offset == TimerCurrent)
    return C.raiseGp(0);
  switch (Index) {
  case msr::IA32_X2APIC_ICR:
    // One 64-bit write sends the IPI; bits 63:32 are the 32-bit destination (SDM Vol.
    // 3A, Interrupt Command Register (ICR) in x2APIC Mode).
    IcrHiReg = uint32_t(Value >> 32);
    IcrLoReg = uint32_t(Value) & 0x000ccfff;
    sendIpi();
    C.breakBlock();
    return Status::Ok;
  case msr::IA32_X2APIC_SELF_IPI: {
    // SDM Vol. 3A, SELF IPI Register: a fixed, edge-triggered interrupt to this APIC.
    const uint8_t Vector = uint8_t(Value);
    if (Vector < 16)
      signalError(SendIllegalVector);
    else
      accept(Delivery::Fixed, Vector, false);
    C.breakBlock();
    return Status::Ok;
  }
  default:
    writeReg(Offset, uint32_t(Value));
    rearmed(); // the timer registers
    return Status::Ok;
  }
}

bool ApicBus::matches(const LocalApic &A, uint8_t Dest, bool Logical) {
  if (Dest == 0xff)
    return true; // broadcast in both modes
  if (!Logical)
    return A.ApicId == Dest;
  // SDM Vol. 3A, Logical Destination Mode: flat model (DFR 1111b) ANDs the 8-bit
  // logical ID; cluster model (0000b) matches the cluster in bits 7:4 and ANDs 3:0.
  const uint8_t LogicalId = uint8_t(A.LdrReg >> 24);
  if ((A.DfrReg >> 28) == 0xf)
    return (LogicalId & Dest) != 0;
  return (LogicalId >> 4) == (Dest >> 4) && (LogicalId & Dest & 0xf) != 0;
}

bool ApicBus::matchesX2apic(const LocalApic &A, uint32_t Dest, bool Logical) {
  if (Dest == 0xffffffff)
    return true; // broadcast
  if (!Logical)
    return A.ApicId == Dest;
  // SDM Vol. 3A, Logical Destination Mode in x2APIC Mode: bits 31:16 select the cluster,
  // bits 15:0 are a bit mask of logical IDs within it.
  const uint32_t Ldr = A.x2apicLdr();
  return (Ldr >> 16) == (Dest >> 16) && (Ldr & Dest & 0xffff) != 0;
}

uint64_t ApicBus::mmioRead(uint64_t Offset, unsigned SizeBytes) {
  LocalApic &A = *Apics[Current < Apics.size() ? Current : 0];
  // In x2APIC mode the MMIO interface behaves as for a globally disabled xAPIC (SDM Vol.
  // 3A, x2APIC Register Availability).
  if (!A.hardwareEnabled() || A.x2apicMode())
    return SizeBytes >= 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * SizeBytes)) - 1;
  // 32-bit registers at the start of each 16-byte slot; other bytes read 0. Accesses of
  // other sizes are composed byte by byte (the SDM leaves them undefined).
  uint64_t V = 0;
  uint32_t Slot = ~0u, R = 0;
  for (unsigned I = 0; I < SizeBytes; ++I) {
    uint32_t Off = uint32_t((Offset + I) & (LocalApic::kSize - 1));
    if ((Off & 0xf) >= 4)
      continue;
    if ((Off & ~0xfu) != Slot) { // each register is read once per access
      Slot = Off & ~0xfu;
      R = A.readReg(Slot);
    }
    V |= uint64_t((R >> (8 * (Off & 3))) & 0xff) << (8 * I);
  }
  return V;
}

void ApicBus::mmioWrite(uint64_t Offset, unsigned SizeBytes, uint64_t Value) {
  LocalApic &A = *Apics[Current < Apics.size() ? Current : 0];
  if (!A.hardwareEnabled() || A.x2apicMode())
    return;
  // Registers take aligned 32-bit (or wider) stores; narrower or misaligned stores are
  // undefined in the SDM and ignored here.
  if (SizeBytes < 4 || (Offset & 0xf))
    return;
  A.writeReg(uint32_t(Offset & (LocalApic::kSize - 1)), uint32_t(Value));
  A.rearmed(); // the timer registers
}

} // namespace vmxsim
