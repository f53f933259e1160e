// The one query of a VMCS's VM-execution, VM-exit and VM-entry controls: whether a
// control (a row of vmx_controls.def) is in effect. Its word comes from the table's Word
// column, so callers never name the VMCS field a control lives in.
#pragma once
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vmcs.h"

namespace vmxsim {

/// Whether Ctl is 1 in V. A secondary processor-based control is in effect only when
/// "activate secondary controls" is 1 (SDM Vol. 3C, "Secondary Processor-Based
/// VM-Execution Controls": "the processor operates as if all the secondary
/// processor-based VM-execution controls were 0" otherwise); no profile offers a tertiary
/// control, so those read 0. Inline: with a constant Ctl the word is chosen at compile
/// time and the query is one load and one test.
inline bool controlSet(const VmcsData &V, VmxControl Ctl) {
  uint64_t Word = 0;
  switch (controlWord(Ctl)) {
  case VmxControlWord::Pin:
    Word = V.get(VmcsField::PinBasedVmExecutionControls);
    break;
  case VmxControlWord::Proc:
    Word = V.get(VmcsField::PrimaryProcessorBasedVmExecutionControls);
    break;
  case VmxControlWord::Proc2:
    if (V.get(VmcsField::PrimaryProcessorBasedVmExecutionControls) &
        controlBit(VmxControl::ActivateSecondaryControls))
      Word = V.get(VmcsField::SecondaryProcessorBasedVmExecutionControls);
    break;
  case VmxControlWord::Proc3:
    return false;
  case VmxControlWord::Exit:
    Word = V.get(VmcsField::PrimaryVmExitControls);
    break;
  case VmxControlWord::Entry:
    Word = V.get(VmcsField::VmEntryControls);
    break;
  }
  return Word & controlBit(Ctl);
}

} // namespace vmxsim
