// The VMX instructions (SDM Vol. 2 and Vol. 3C, "VMX Instruction Reference"): VMXON,
// VMXOFF, VMCLEAR, VMPTRLD, VMPTRST, VMREAD, VMWRITE, VMLAUNCH, VMRESUME, VMCALL,
// INVEPT, INVVPID, VMFUNC. Binders are listed in cpu/vmx/insns_vmx.def.
#pragma once
#include "cpu/status.h"

#include <cstdint>
#include <optional>

namespace vmxsim {

class Cpu;
struct DecodedInsn;

/// The conventions of SDM Vol. 3C, "Conventions" (VMsucceed / VMfailInvalid /
/// VMfailValid): set RFLAGS and the VM-instruction error field, then continue after the
/// instruction.
Status vmSucceed(Cpu &C, const DecodedInsn &I);
Status vmFailInvalid(Cpu &C, const DecodedInsn &I);
Status vmFailValid(Cpu &C, const DecodedInsn &I, uint32_t ErrorNumber);
/// VMfail(ErrorNumber): VMfailValid when there is a current VMCS, else VMfailInvalid.
Status vmFail(Cpu &C, const DecodedInsn &I, uint32_t ErrorNumber);

/// The value RDMSR returns for an IA32_VMX_* capability MSR (0x480-0x492), or nullopt
/// when the MSR does not exist on this model (no VMX, or the feature is absent):
/// RDMSR must then raise #GP(0). WRMSR to these MSRs always raises #GP(0).
std::optional<uint64_t> readVmxCapabilityMsr(const Cpu &C, uint32_t Msr);

/// Writes the current VMCS's cached data and launch state to its region in memory
/// (SDM Vol. 3C, VMCLEAR: "ensure that data for the VMCS ... are in memory").
void writeBackCurrentVmcs(Cpu &C);

} // namespace vmxsim
