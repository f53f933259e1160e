// VMX non-root operation: the instruction intercepts (SDM Vol. 3C, "VMX Non-Root
// Operation" > "Instructions That Cause VM Exits Unconditionally" / "... Conditionally",
// and "Changes to Instruction Behavior in VMX Non-Root Operation").
//
// Each instruction handler calls its hook under one unlikely branch,
//   if (C.NonRoot) [[unlikely]] VMX_TRY(nonroot::onX(C, I, ...));
// placed where the SDM pseudo-code checks "IF in VMX non-root operation ... THEN VM
// exit": after the #UD checks and the faults based on privilege level, which have
// priority over VM exits, and before every other fault ("Relative Priority of Faults and
// VM Exits": "Fault-like VM exits have priority over exceptions other than those
// mentioned above"). A hook returns Status::VmExit after performing the whole VM exit
// (vmExit), a fault status for the exceptions that only exist in non-root operation
// (e.g. #GP for a CR0 write that VMX does not support), or Ok to let the instruction
// execute normally. Hooks do not allocate and cost nothing in VMX root operation.
#pragma once
#include "cpu/status.h"
#include "cpu/vmx/capabilities.h"

#include <cstdint>

namespace vmxsim {

class Cpu;
struct DecodedInsn;

namespace nonroot {

/// controlSet (cpu/vmx/vmcs_controls.h) of the current VMCS.
bool procCtl(const Cpu &C, VmxControl Ctl);

/// The TSC value a guest reads (RDTSC, RDTSCP, RDMSR of IA32_TSC) when the read does not
/// exit: Tsc scaled by the TSC multiplier (bits 63:48 integer, 47:0 fraction) when "use
/// TSC scaling" is 1, plus the TSC offset, when "use TSC offsetting" is 1 (SDM Vol. 3C,
/// "Changes to Instruction Behavior in VMX Non-Root Operation" > RDTSC).
uint64_t guestTsc(const Cpu &C, uint64_t Tsc);

/// CR0 and CR4 as the guest reads them: read-shadow bits where the guest/host mask is
/// 1, the real bits elsewhere (SDM Vol. 3C, "... Instruction Behavior" > MOV from CR0).
uint64_t guestCr0(const Cpu &C);
uint64_t guestCr4(const Cpu &C);

// --- Unconditional exits (SDM Vol. 3C, "Instructions That Cause VM Exits
// Unconditionally"): CPUID, INVD, XSETBV. GETSEC is #UD on this model (no SMX:
// CR4.SMXE cannot be set), and #UD has priority over the exit.
Status onCpuid(Cpu &C, const DecodedInsn &I);
Status onInvd(Cpu &C, const DecodedInsn &I);
Status onXsetbv(Cpu &C, const DecodedInsn &I);

// --- Conditional exits (SDM Vol. 3C, "Instructions That Cause VM Exits Conditionally").
Status onHlt(Cpu &C, const DecodedInsn &I);
Status onWbinvd(Cpu &C, const DecodedInsn &I);
/// "MONITOR exiting" (exit 39, qualification 0) and "MWAIT exiting" (exit 36, bit 0 of
/// the qualification: the monitor hardware is armed). Called after the #UD checks.
Status onMonitor(Cpu &C, const DecodedInsn &I);
Status onMwait(Cpu &C, const DecodedInsn &I, bool MonitorArmed);
/// Only called when the RDPMC privilege check passed.
Status onRdpmc(Cpu &C, const DecodedInsn &I);
/// PAUSE exiting, and PAUSE-loop exiting at CPL 0.
Status onPause(Cpu &C, const DecodedInsn &I);
/// LinearAddress: the INVLPG operand (the exit qualification).
Status onInvlpg(Cpu &C, const DecodedInsn &I, uint64_t LinearAddress);
/// "enable INVPCID" = 0 makes INVPCID #UD in non-root operation.
bool invpcidEnabled(const Cpu &C);
Status onInvpcid(Cpu &C, const DecodedInsn &I);
/// "enable RDTSCP" = 0 makes RDTSCP #UD in non-root operation.
bool rdtscpEnabled(const Cpu &C);
Status onRdtsc(Cpu &C, const DecodedInsn &I, bool IsRdtscp);
/// RDMSR/WRMSR: the MSR-bitmap exit, else the x2APIC virtualization of 800H-8FFH
/// (cpu/vmx/apic_virtualization.h); Done = true when that completed the instruction.
Status onRdmsr(Cpu &C, const DecodedInsn &I, uint32_t Msr, bool &Done);
Status onWrmsr(Cpu &C, const DecodedInsn &I, uint32_t Msr, bool &Done);
Status onRdrandRdseed(Cpu &C, const DecodedInsn &I, bool IsRdseed);

/// Descriptor-table exiting. Identity values are those of the instruction-information
/// tables: GDTR/IDTR 0 SGDT, 1 SIDT, 2 LGDT, 3 LIDT; LDTR/TR 0 SLDT, 1 STR, 2 LLDT, 3 LTR.
enum class GdtrIdtrInsn : uint8_t { Sgdt = 0, Sidt = 1, Lgdt = 2, Lidt = 3 };
enum class LdtrTrInsn : uint8_t { Sldt = 0, Str = 1, Lldt = 2, Ltr = 3 };
Status onGdtrIdtrAccess(Cpu &C, const DecodedInsn &I, GdtrIdtrInsn Which);
Status onLdtrTrAccess(Cpu &C, const DecodedInsn &I, LdtrTrInsn Which);

/// MOV to CRn with source Value (SDM Vol. 3C, "Control-Register Accesses"). On Ok the
/// instruction continues with Value, which for CR0/CR4 now keeps the host-owned bits;
/// Done = true means the hook completed the instruction (a CR8 write virtualized by the
/// TPR shadow: RIP is advanced, and a TPR-below-threshold exit may have followed).
Status onMovToCr(Cpu &C, const DecodedInsn &I, unsigned Cr, uint64_t &Value, bool &Done);
/// MOV from CRn: may exit; otherwise Value (read from the real register) becomes what
/// the guest sees (read shadows, the virtual TPR).
Status onMovFromCr(Cpu &C, const DecodedInsn &I, unsigned Cr, uint64_t &Value);
/// CLTS: may exit; LeaveTs = true when the host owns CR0.TS and the shadow's TS is 0
/// (CLTS then completes without changing CR0).
Status onClts(Cpu &C, const DecodedInsn &I, bool &LeaveTs);
/// LMSW with the 16-bit source operand (already read); NewCr0 is the CR0 value LMSW
/// would load, on Ok rewritten to keep the host-owned bits.
Status onLmsw(Cpu &C, const DecodedInsn &I, uint16_t Source, uint64_t &NewCr0);
/// MOV to/from DRn (called before the CR4.DE #UD and the CPL check, which this exit
/// takes priority over).
Status onMovDr(Cpu &C, const DecodedInsn &I, bool ToDr);

/// One I/O instruction as the I/O exit describes it.
struct IoAccess {
  uint16_t Port;
  uint8_t SizeBytes; ///< 1, 2 or 4
  bool In;           ///< IN/INS (else OUT/OUTS)
  bool String;       ///< INS/OUTS
  bool Rep;          ///< REP prefix (string forms)
  bool Immediate;    ///< port from an immediate operand (else DX)
};
/// Called after the I/O-permission checks (which have priority over the exit).
Status onIo(Cpu &C, const DecodedInsn &I, const IoAccess &A);

} // namespace nonroot
} // namespace vmxsim
