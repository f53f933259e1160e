// The debug registers' breakpoints and debug exceptions (SDM Vol. 3B, "Debug Registers"
// and "Debug Exceptions"; Vol. 3A, "Masking Exceptions and Interrupts When Switching
// Stacks" for the MOV SS / POP SS blocking of #DB).
//
// What costs what. Nothing here is on a hot path while DR7 enables no breakpoint: the
// run loop takes its per-instruction slow path only while RFLAGS.TF or RF is set or an
// instruction breakpoint is armed (DebugState::InsnArmed); data breakpoints never slow
// the fast paths down, because the MMU refuses TLB entries for the linear pages that
// hold an armed data breakpoint (Mmu::translate), so every access to those pages takes
// a slow path of cpu/memory.cpp, which alone checks them; I/O breakpoints are checked by
// the I/O instructions, which are slow anyway. debugRegistersChanged() recomputes the
// armed state after anything that changes DR0-DR3, DR7 or CR4.DE.
//
// Choices where the SDM leaves the behaviour open (documented in README.md):
// - DR6.B0-B3 report only breakpoints that matched and are enabled in DR7 (the SDM:
//   they "may or may not be set" for breakpoints not enabled).
// - Each #DB delivered through the IDT replaces DR6.B0-B3 with the bits of its cause
//   and ORs BD, BS and BT in; the processor never clears the rest of DR6.
// - R/W = 10b with CR4.DE = 0 ("undefined") matches nothing; an instruction breakpoint
//   with LEN other than 00b ("undefined") matches the LEN-aligned range, as a data
//   breakpoint would. LEN = 10b is 8 bytes in every mode (processors based on the Intel
//   Core microarchitecture and later).
#pragma once
#include <cstdint>

namespace vmxsim {

class Cpu;

/// DR6 bits (SDM Vol. 3B, "Debug Status Register (DR6)").
namespace dr6 {
inline constexpr uint32_t B0toB3 = 0xf, BD = 1u << 13, BS = 1u << 14, BT = 1u << 15;
/// Bits that read as 1 on a processor without RTM or bus-lock detection.
inline constexpr uint64_t FixedOnes = 0xffff0ff0;
} // namespace dr6

/// DR7 bits (SDM Vol. 3B, "Debug Control Register (DR7)").
namespace dr7 {
inline constexpr uint64_t Enables = 0xff, GD = 1u << 13;
} // namespace dr7

/// IA32_DEBUGCTL bits vmxsim models (SDM Vol. 3B, "IA32_DEBUGCTL MSR"): LBR is storage
/// only (there are no last-branch-record MSRs), BTF makes TF single-step on branches.
namespace debugctl {
inline constexpr uint64_t LBR = 1u << 0, BTF = 1u << 1;
inline constexpr uint64_t Modelled = LBR | BTF;
} // namespace debugctl

/// "Enabled breakpoint" (bit 12) of the VMCS pending-debug-exceptions field (SDM Vol. 3C,
/// Table "Format of Pending-Debug-Exceptions").
inline constexpr uint64_t kPendingDebugEnabledBreakpoint = 1u << 12;

/// The debug state derived from DR0-DR7 and CR4.DE, and the debug traps waiting for an
/// instruction boundary. Owned by the Cpu; recomputed by debugRegistersChanged().
struct DebugState {
  bool InsnArmed = false; ///< an enabled instruction breakpoint (R/W = 00b)
  bool DataArmed = false; ///< an enabled data breakpoint (R/W = 01b or 11b)
  bool IoArmed = false;   ///< an enabled I/O breakpoint (R/W = 10b with CR4.DE = 1)
  /// Linear page number of each armed data breakpoint, ~0 for the others.
  uint64_t DataPage[4] = {~uint64_t(0), ~uint64_t(0), ~uint64_t(0), ~uint64_t(0)};
  /// B0-B3 of data and I/O breakpoints matched by the instruction executing: they become
  /// a debug trap only when it completes (commitDebugHits), and are dropped when it
  /// faults or causes a VM exit.
  uint32_t Hits = 0;
  /// Debug traps pending at the next instruction boundary in VMX root operation (DR6
  /// layout: B0-B3, BS); in non-root operation they are the VMX pending debug
  /// exceptions (cpu/vmx/vmx_state.h).
  uint32_t Traps = 0;
  /// The executing instruction started with RFLAGS.RF = 1, which the processor cleared
  /// at its start: a VM exit it causes saves RF as 1 (SDM Vol. 3C, "Saving RIP, RSP,
  /// RFLAGS, and SSP").
  bool HeldRf = false;
};

/// Recomputes DebugState's armed flags after a change to DR0-DR3, DR7 or CR4.DE (MOV DR,
/// MOV CR4, task switch, VM entry and exit, RESET); a newly armed data breakpoint page
/// loses its TLB entries in every context. Ends the current block.
void debugRegistersChanged(Cpu &C);

/// DR6 B0-B3 of the enabled instruction breakpoints at the current CS:RIP.
uint32_t instructionBreakpoints(const Cpu &C);

/// La's page holds an armed data breakpoint: the MMU keeps it out of the TLB.
bool dataBreakpointPage(const Cpu &C, uint64_t La);

/// A data access [La, La + SizeBytes) completed (caller checks DebugState::DataArmed).
void dataBreakpointAccess(Cpu &C, uint64_t La, unsigned SizeBytes, bool Write);

/// An I/O access to ports [Port, Port + SizeBytes) completed (caller checks IoArmed).
void ioBreakpointAccess(Cpu &C, uint16_t Port, unsigned SizeBytes);

/// Adds debug traps (DR6 layout) pending at the next boundary: DebugState::Traps in root
/// operation, the pending debug exceptions in non-root operation. Ends the current block.
void noteDebugTraps(Cpu &C, uint32_t Dr6Bits);

/// The executing instruction completed: its breakpoint hits become pending debug traps.
void commitDebugHits(Cpu &C);

/// In VMX root operation: delivers the pending debug traps unless MOV SS / POP SS blocks
/// them (SDM Vol. 3A, "Masking Exceptions and Interrupts When Switching Stacks"). True
/// when a #DB is now pending in Cpu::Pending (the caller delivers it).
bool takeRootDebugTraps(Cpu &C);

} // namespace vmxsim
