// The address-range monitor of MONITOR/MWAIT (SDM Vol. 2B, MONITOR and MWAIT; Vol. 3A,
// "MONITOR/MWAIT Instruction" in "Power and Thermal Management"), one per processor.
//
// MONITOR arms it on the 64-byte line (physical, the line size of CPUID leaf 5) that
// holds its operand; a store by any agent into the line then triggers it: another
// processor's or this one's instruction, a store the processors make themselves (A/D
// flags, ...), a device's. How a store is seen: the armed line is a write watch
// (PhysMem::watchWrites), so its page has no fast write mapping on any processor and
// every store into it passes PhysMem::noteWrite, which reports it to the running
// processor's Mmu::watchedWrite, which calls monitorSawStore for each processor.
//
// MWAIT with the monitor armed and not triggered waits: the processor is in the HLT
// activity state (so every event that wakes HLT wakes it too, in VMX root and non-root
// operation alike: NMI, INIT, SMI (none exist), interrupts, the VMX-preemption timer,
// debug traps) with Waiting set, which adds two wake-ups of its own: a trigger of the
// monitor, and with ECX[0] a masked interrupt. Every C-state its hint (EAX) names is
// entered as C1: time is skipped to the wake-up exactly as for HLT (harness/
// scheduler.cpp), so deeper states cost and save nothing more. MWAIT disarms the monitor
// when it completes (falls through or wakes): the next MWAIT needs a new MONITOR.
#pragma once
#include "mmu/address.h"

#include <cstdint>

namespace vmxsim {

class Cpu;

struct MonitorState {
  enum class Phase : uint8_t { Idle, Armed, Triggered };
  Phase State = Phase::Idle;
  uint64_t Line = 0; ///< physical address of the armed line (64-byte aligned)
  /// In MWAIT's wait: meaningful while Cpu::Activity is Hlt (HLT and VM entry in the
  /// HLT state clear it).
  bool Waiting = false;
  /// ECX[0] of the waiting MWAIT: interrupts wake it even when masked (RFLAGS.IF = 0).
  bool BreakOnMaskedInterrupt = false;
};

/// The monitor line size (CPUID.5:EAX smallest and EBX largest line, in bytes).
inline constexpr uint64_t kMonitorLineBytes = 64;

/// CPUID.1:ECX.MONITOR as the processor reports it now: the model's bit, cleared while
/// IA32_MISC_ENABLE[18] ("ENABLE MONITOR FSM") is 0 (SDM Vol. 4, IA32_MISC_ENABLE).
bool monitorEnabled(const Cpu &C);
/// In MWAIT's wait (HLT activity state entered by MWAIT).
bool mwaitWaiting(const Cpu &C);
/// A pending interrupt wakes the waiting C although RFLAGS.IF (or the guest's) masks it:
/// MWAIT with ECX[0] = 1 ("interrupts as break events even if masked").
bool mwaitWakesOnMaskedInterrupt(const Cpu &C);
/// Leaves MWAIT's wait for a masked interrupt (mwaitWakesOnMaskedInterrupt): the
/// processor resumes after MWAIT without taking it.
void mwaitWake(Cpu &C);
/// A store into [Pa, Pa + SizeBytes) completed at virtual time Now (the storing
/// processor's clock): triggers C's monitor if it is armed on a line the store touches,
/// and ends C's MWAIT wait then, C's clock moving to Now if it was behind.
void monitorSawStore(Cpu &C, Hpa Pa, uint64_t SizeBytes, uint64_t Now);
/// Disarms C's monitor (INIT, RESET): its line is no longer watched.
void monitorReset(Cpu &C);
/// Before the processor enters the HLT state for another reason (HLT, a VM entry in
/// the HLT activity state): an earlier MWAIT that was woken is complete.
void mwaitSettle(Cpu &C);

} // namespace vmxsim
