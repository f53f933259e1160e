/* The hypervisor core's interface to images: enter VMX operation, build a VMCS for a
 * 64-bit guest that shares the host's identity-mapped address space, run it, leave.
 *
 * Use:
 *   struct PerCpu *Cpu = perCpuInit(0);
 *   vmxEnable(Cpu);                      // VMXON
 *   vmxSetupVmcs(Cpu, &Guest);           // VMCLEAR, VMPTRLD, controls, host, guest
 *   Cpu->ExitHandler = vmxExitHandler;   // or a minimal handler of one's own
 *   vmxRunGuest(Cpu);                    // VMLAUNCH ... until the guest ends
 *   vmxDisable(Cpu);                     // VMCLEAR, VMXOFF
 */
#ifndef HVM_VMX_VMX_H
#define HVM_VMX_VMX_H

#include <stdbool.h>
#include <stdint.h>

#include "vmx/descriptors.h"
#include "vmx/insn.h"
#include "vmx/percpu.h"

/// The guest: 64-bit mode, CPL 0, the host's CR3, its own code, stack and tables.
struct GuestSetup {
  uint64_t Rip;
  uint64_t Rsp;
  /// Initial general registers (the rest start at 0).
  uint64_t Rdi, Rsi;
  /// The guest's GDT, TSS and IDT (descriptorTablesInit + idtSetGate).
  struct DescriptorTables *Tables;
  /// Exit lines print guest RIPs relative to this address ("rip=guest+0x1c"), so the
  /// log does not change when unrelated code moves the guest in the image.
  uint64_t RipBase;
  /// The EPT pointer (vmx/ept.h) when the processor offers EPT; 0 = no EPT, the guest
  /// translates with the host's CR3 directly.
  uint64_t Eptp;
  /// TSC cycles of a time slice (the VMX-preemption timer reloaded at every VM entry);
  /// 0 = no time slices. With Timers set and the timer offered, HLT blocks the vCPU until
  /// its virtual timer (hypercall 2) fires instead of ending the guest.
  uint64_t SliceCycles;
  bool Timers;
  /// The exception bitmap (bit n: exception n exits); the core reflects each such
  /// exception back to the guest (exit_exception.c). 0 = none exits.
  uint32_t ExceptionBitmap;
  /// An unrestricted guest that starts in real mode (CR0.PE = PG = 0, 16-bit segments
  /// with limit 0xffff) with CS base RealCsBase and IP = Rip - RealCsBase; needs Eptp and
  /// the "unrestricted guest" control (SDM Vol. 3C, "Unrestricted Guests"). Tables, Rsp
  /// and the 64-bit state are not used then.
  bool RealMode;
  uint64_t RealCsBase;
  /// The system exits (README.md, "Exit handling"): INVLPG, MOV DR, PAUSE and WBINVD
  /// exiting, CR4.OSXSAVE owned (so XSETBV is meaningful), MSR bitmaps that pass
  /// IA32_PAT through when the processor offers them (with the PAT load/save controls),
  /// TSC offsetting (the guest's TSC starts at 0 at its launch), and RDTSC exiting on
  /// request (hypercall 4). Off, the VMCS is what it was before these families existed.
  bool SystemExits;
  /// APIC virtualization (exit_apic.c; needs SystemExits): "use TPR shadow" instead of
  /// CR8 exiting, "virtualize APIC accesses" with the APIC-access page at the guest's
  /// local APIC (0xfee00000), "APIC-register virtualization", "virtual-interrupt
  /// delivery" and "process posted interrupts". vmxSetupVmcs fails, saying which, when
  /// the processor lacks one.
  bool Apicv;
};

/// Checks for VMX, enables it in IA32_FEATURE_CONTROL if that is still unlocked, adjusts
/// CR0/CR4 to the fixed-bit MSRs, sets CR4.VMXE and executes VMXON. Prints why and
/// returns false on failure.
bool vmxEnable(struct PerCpu *Cpu);

/// VMCLEAR + VMPTRLD of Cpu->Vmcs, then writes the controls, host state and guest
/// state. Prints and returns false if a control is unsupported or a VMWRITE fails.
bool vmxSetupVmcs(struct PerCpu *Cpu, const struct GuestSetup *Guest);

/// VMCLEAR, VMXOFF and CR4.VMXE = 0.
void vmxDisable(struct PerCpu *Cpu);

/// Runs the guest until an exit handler calls vmxGuestDone (returns 0). Returns -1
/// for VMfailInvalid and -2 for VMfailValid of VMLAUNCH (see vmxPrintVmFail).
int vmxRunGuest(struct PerCpu *Cpu);
/// Ends the guest from inside an exit handler: returns from vmxRunGuest.
__attribute__((noreturn)) void vmxGuestDone(struct PerCpu *Cpu);

/// The core's exit handler: one function per exit family, TRACE_VMEXIT, logging.
void vmxExitHandler(struct GuestRegs *Regs);
/// The same with the xen-3.0 flavour's trace hooks (vmx/trace.h), for a CPU whose ring
/// vmxTraceSetFlavour set to VmxTrace_Xen30.
void vmxExitHandlerXen30(struct GuestRegs *Regs);

/// Prints "vmx: WHAT failed: VMfailInvalid" or "... VMfailValid, error N (name)".
void vmxPrintVmFail(const char *What, int Status);

/// The SDM name of a basic exit reason, or "unknown".
const char *exitReasonName(uint32_t Basic);
/// The SDM description of a VM-instruction error number, or "unknown".
const char *vmInstructionErrorName(uint32_t Number);

/// Called by the exit stub when VMRESUME fails; stops the image.
__attribute__((noreturn)) void vmxResumeFailed(struct GuestRegs *Regs, uint64_t Rflags);

/// Held while a CPU prints a handler's note line (vmx/trace.c); images with several
/// CPUs take it for their own lines too, so lines never interleave.
extern volatile uint32_t VmxConsoleLock;

/// Whether the setup prints the capability MSRs (model-specific, so off by default:
/// logs must be the same on every peer).
extern bool VmxVerbose;

#endif
