// VM entry after the VMLAUNCH/VMRESUME instruction checks (SDM Vol. 3C, "VM Entries").
#pragma once
#include "cpu/status.h"

namespace vmxsim {

class Cpu;
struct DecodedInsn;

/// Runs the VM-entry checks, loads guest state and the VM-entry MSR-load area, injects
/// the event of the VM-entry interruption-information field and enters VMX non-root
/// operation. I is the VMLAUNCH/VMRESUME instruction (for VMfailValid, which continues
/// after it). Returns Ok after a successful entry or a VMfail, VmExit after a VM-entry
/// failure (host state is loaded), or the status of a faulting injected delivery.
Status vmEntry(Cpu &C, const DecodedInsn &I, bool IsLaunch);

} // namespace vmxsim
