#include "harness/ground_truth_link.h"

#include "cpu/cpu.h"

namespace vmxsim {

void GroundTruthLink::vmExit(const VmExitEvent &E) {
  const uint32_t Event[5] = {E.InterruptionInfo, E.InterruptionErrorCode, E.IdtVectoringInfo,
                             E.IdtVectoringErrorCode, E.InstructionInfo};
  R.vmExit(E.Cpu, E.Tsc, E.Reason, E.Rip, E.Qualification, E.InstructionLength, Event,
           uint32_t(E.GuestLinearValid) | uint32_t(E.GuestPhysicalValid) << 1,
           E.GuestLinearAddress, E.GuestPhysicalAddress, {E.Rax, E.Rcx, E.Rdx});
}

void GroundTruthLink::vmEntry(const VmEntryEvent &E) {
  R.vmEntry(E.Cpu, E.Tsc, E.Rip, E.IsLaunch, E.InjectedInfo, E.InjectedErrorCode);
}

void GroundTruthLink::vmEntryFailure(const VmEntryFailureEvent &E) {
  R.vmEntryFailure(E.Cpu, E.Tsc, uint32_t(E.Outcome), E.Number, E.CheckId, E.Qualification);
}

void GroundTruthInsnObserver::beforeInsn(const Cpu &C, const DecodedInsn &I) {
  R.instruction(C.Id, C.Cycles, C.S.Rip, I.Len, C.NonRoot);
  if (Next)
    Next->beforeInsn(C, I);
}

void GroundTruthInsnObserver::afterInsn(const Cpu &C, const DecodedInsn &I) {
  if (Next)
    Next->afterInsn(C, I);
}

void GroundTruthInsnObserver::onException(const Cpu &C, const PendingEvent &E) {
  if (Next)
    Next->onException(C, E);
}

} // namespace vmxsim
