// VM functions invoked by VMFUNC in VMX non-root operation (SDM Vol. 3C, "VMX Non-Root
// Operation" > "VM Functions"). execVmfunc (cpu/vmx/vmx_instructions.cpp) performs the
// instruction's own checks (#UD, the VM exit for a disabled function) and calls here.
#pragma once
#include "cpu/status.h"

#include <cstdint>

namespace vmxsim {

class Cpu;
struct DecodedInsn;

/// VM function 0, EPTP switching (SDM Vol. 3C, "EPTP Switching"): loads EPTP-list entry
/// ECX into the EPTP field and continues after VMFUNC, or performs a VMFUNC VM exit
/// (reason 59) when ECX >= 512 or the entry is not a valid EPTP.
Status vmfuncEptpSwitching(Cpu &C, const DecodedInsn &I);

} // namespace vmxsim
