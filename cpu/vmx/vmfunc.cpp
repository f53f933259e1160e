// VM function 0, EPTP switching (SDM Vol. 3C, "VM Functions" > "EPTP Switching").
#include "cpu/vmx/vmfunc.h"

#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "cpu/exec.h"
#include "cpu/msrs.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_entry_checks.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmcs_controls.h"
#include "cpu/vmx/vmx_instructions.h"
#include "cpu/vmx/vmx_state.h"

namespace vmxsim {

namespace {

using F = VmcsField;

/// "The EPTP list comprises 512 8-Byte entries" (SDM Vol. 3C, "VM-Function Controls").
constexpr uint32_t kEptpListEntries = 512;

/// A VM exit caused by VMFUNC: basic exit reason 59 and the instruction length; "No
/// additional VM-exit information is provided" (SDM Vol. 3C, "EPTP Switching").
Status vmfuncExit(Cpu &C, const DecodedInsn &I) {
  VmExitInfo E;
  E.Reason = ExitReason::Vmfunc;
  E.InstructionLength = I.Len;
  return vmExit(C, E);
}

} // namespace

Status vmfuncEptpSwitching(Cpu &C, const DecodedInsn &I) {
  VmcsData &V = C.Vmx->Vmcs;
  const uint32_t Index = uint32_t(C.S.Gpr[RCX]);
  if (Index >= kEptpListEntries)
    return vmfuncExit(C, I);
  // tent_EPTP <- 8 bytes from EPTP-list address + 8 * ECX (a physical address: the
  // list is set up by software in VMX root operation).
  const uint64_t Tentative = C.Mem.read(Hpa(V.get(F::EptpListAddress) + 8 * Index), 8);
  const uint64_t Cap = readVmxCapabilityMsr(C, msr::IA32_VMX_EPT_VPID_CAP).value_or(0);
  if (checkEptp(Tentative, Cap, C.Model.MaxPhysAddrBits) != VmEntryCheckId::None)
    return vmfuncExit(C, I);
  V.set(F::EptPointer, Tentative);
  // "If the processor supports the 1-setting of the 'EPT-violation #VE' VM-execution
  // control, an EPTP-switching VMFUNC loads the value in ECX[15:0] into the EPTP-index
  // field"; later virtualization exceptions save it (cpu/vmx/ept_translation.cpp).
  if (C.Model.Vmx->has(VmxFeature::EptViolationVe))
    V.set(F::EptpIndex, Index & 0xffff);
  // "The logical processor starts creating and using guest-physical and combined
  // mappings associated with the new value of bits 51:12 of EPTP"; "if the 'enable
  // VPID' VM-execution control is 0, an EPTP-switching VMFUNC invalidates combined
  // mappings associated with VPID 0000H (for all PCIDs and for all EP4TA values)".
  // Translations are cached per (VPID, EP4TA) context (cpu/cpu.h), so switching to the
  // new EP4TA's context under the current VPID is exact, and costs no flush with VPID.
  if (!controlSet(V, VmxControl::EnableVpid))
    C.Mmu.flushTlbVpid(0);
  C.Mmu.switchTlbContextEpt(C.Mmu.currentVpid(), Tentative);
  // No register or flag is modified; control passes to the next instruction.
  return next(C, I);
}

} // namespace vmxsim
