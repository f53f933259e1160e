/* The exit handler's internal interface: what each exit family returns, and the helpers
 * the families share. One file per family (STYLE 2.7): exit_exception.c, exit_cpuid.c,
 * exit_io.c, exit_msr.c, exit_cr.c, exit_dr.c, exit_vmcall.c, exit_timer.c, exit_ept.c,
 * exit_system.c (INVLPG, WBINVD, PAUSE, XSETBV), exit_intr.c (external interrupts, the
 * interrupt and NMI windows), exit_apic.c (virtualized EOI, APIC write, posting),
 * exit_fail.c.
 */
#ifndef HVM_VMX_EXIT_H
#define HVM_VMX_EXIT_H

#include <stdint.h>

#include "vmx/arch.h"
#include "vmx/percpu.h"
#include "vmx/trace.h"

/// What to do after a family handler.
enum ExitAction {
  /// The instruction was emulated: guest RIP += the VM-exit instruction length.
  Action_Advance,
  /// An exception was injected: RIP stays at the faulting instruction.
  Action_Inject,
  /// Resume the guest where it is: RIP unchanged (a fault-like exit whose cause is now
  /// gone, such as a lazily mapped page, or an event-like one such as the timer's).
  Action_Resume,
  /// The guest has finished (HLT, hypercall 1): return to the launcher.
  Action_GuestDone,
  /// Something we cannot handle: print and stop the image with a failure.
  Action_Stop,
};

typedef enum ExitAction (*ExitFamilyFn)(struct PerCpu *Cpu, struct GuestRegs *Regs);

enum ExitAction handleException(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleCpuid(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleIo(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleRdmsr(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleWrmsr(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleCrAccess(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleVmcall(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleHlt(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handlePreemptionTimer(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleEptViolation(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleEptMisconfig(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleTripleFault(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleInvlpg(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleRdtsc(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleDrAccess(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handlePause(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleWbinvd(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleXsetbv(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleExternalInterrupt(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleInterruptWindow(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleNmiWindow(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleVirtualizedEoi(struct PerCpu *Cpu, struct GuestRegs *Regs);
enum ExitAction handleApicWrite(struct PerCpu *Cpu, struct GuestRegs *Regs);

/// The host's local APIC timer vector, and the guest's virtual timer interrupt
/// (exit_intr.c).
#define HV_HOST_TIMER_VECTOR 0xf0
#define HV_GUEST_TIMER_VECTOR 0x30

/// Hypercall 5: the guest's virtual timer fires Arg[63:32] times, Arg[31:0] TSC cycles
/// apart (Action_Stop when already armed, or without the system exits).
enum ExitAction vmxStartVirqs(struct PerCpu *Cpu, uint64_t Arg);
/// Hypercall 6: one virtual NMI for the guest, through the NMI window.
enum ExitAction vmxQueueNmi(struct PerCpu *Cpu);
/// Before every VM entry: injects a pending virtual interrupt or NMI the guest can take
/// now, or opens the window for it (exit_intr.c).
void vmxIntrAssist(struct PerCpu *Cpu);
/// APIC virtualization (exit_apic.c, GuestSetup.Apicv): the self-IPI the guest sends
/// through its virtual ICR, the vector another vCPU posts to it (its EOI exits), and the
/// host vector that notifies a processor of a posted interrupt.
#define HV_APICV_SELF_VECTOR 0x31
#define HV_APICV_POSTED_VECTOR 0x32
#define HV_POSTED_NOTIFICATION_VECTOR 0xf2
/// Sets up the virtual-APIC page, the APIC-access address, the EOI-exit bitmaps and the
/// posted-interrupt descriptor of Cpu's VMCS (current); false when Cpu's number is out
/// of range.
bool vmxApicvSetup(struct PerCpu *Cpu);
/// The number of vCPUs, for hypercall 8's target (the next vCPU, wrapping).
void vmxApicvSetVcpuCount(uint32_t N);
/// Hypercall 7: posts Vector to the next vCPU (waiting until that vCPU's setup has run)
/// and notifies its processor; Action_Stop without APIC virtualization or for a vector
/// below 16.
enum ExitAction vmxPostInterrupt(struct PerCpu *Cpu, uint64_t Vector);

/// For an exit reason with bit 31 set (VM-entry failure); not in the dispatch table.
enum ExitAction handleEntryFailure(struct PerCpu *Cpu, struct GuestRegs *Regs);

/// HLT of a vCPU: with its virtual timer armed and the VMX-preemption timer in use,
/// blocks it (HLT activity state) until the timer fires and returns Action_Advance;
/// otherwise nothing can wake it and the guest ends (Action_GuestDone).
enum ExitAction vcpuBlock(struct PerCpu *Cpu);

/// Queues a hardware exception with an error code for the next VM entry (SDM Vol. 3C,
/// "Event Injection"); returns Action_Inject.
enum ExitAction injectHardwareException(uint32_t Vector, uint32_t ErrorCode);

/// General register Number (exit-qualification numbering) of the guest; 4 is RSP,
/// kept in the VMCS.
uint64_t readGuestGpr(struct GuestRegs *Regs, unsigned Number);
void writeGuestGpr(struct GuestRegs *Regs, unsigned Number, uint64_t Value);

/// Sets the line printed after this exit's own line (printf format).
__attribute__((format(printf, 2, 3))) void exitNote(struct PerCpu *Cpu, const char *Fmt, ...);

#endif
