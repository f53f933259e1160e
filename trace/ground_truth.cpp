#include "trace/ground_truth.h"

#include "cpu/vmx/vm_exit.h"

namespace vmxsim::trace {

namespace {
uint32_t lo(uint64_t V) { return uint32_t(V); }
uint32_t hi(uint64_t V) { return uint32_t(V >> 32); }
} // namespace

void GroundTruthRecorder::vmExit(const Cpu &C, const VmExitInfo &Info) {
  const uint32_t Reason = uint32_t(Info.Reason) | (Info.EntryFailure ? kExitReasonEntryFailure : 0);
  const uint64_t Rip = C.S.Rip;
  const uint32_t Exit[7] = {C.Id, Reason, lo(Rip), hi(Rip), lo(Info.Qualification),
                            hi(Info.Qualification), Info.InstructionLength};
  W.recordTsc(C.Id, XT_EV_GtVmExit, C.Cycles, Exit);
  const uint32_t Event[5] = {Info.InterruptionInfo, Info.InterruptionErrorCode,
                             Info.IdtVectoringInfo, Info.IdtVectoringErrorCode,
                             Info.InstructionInfo};
  // Only when it says something: most exits (CPUID, VMCALL, I/O, MSR, CR, HLT) have all
  // five fields 0, and a missing record means exactly that. A fifth fewer bytes per exit.
  if (Event[0] | Event[1] | Event[2] | Event[3] | Event[4])
    W.record(C.Id, XT_EV_GtVmExitEvent, Event);
  if (Info.GuestLinearValid || Info.GuestPhysicalValid) {
    const uint64_t Gla = Info.GuestLinearValid ? Info.GuestLinearAddress : 0;
    const uint64_t Gpa = Info.GuestPhysicalValid ? Info.GuestPhysicalAddress : 0;
    const uint32_t Addr[5] = {uint32_t(Info.GuestLinearValid) | uint32_t(Info.GuestPhysicalValid) << 1,
                              lo(Gla), hi(Gla), lo(Gpa), hi(Gpa)};
    W.record(C.Id, XT_EV_GtVmExitAddr, Addr);
  }
}

void GroundTruthRecorder::vmEntry(const Cpu &C, bool IsLaunch, uint32_t InjectedInfo,
                                  uint32_t InjectedError) {
  // Only a valid field injects; the error code only with "deliver error code" (SDM Vol.
  // 3C, "Format of the VM-Entry Interruption-Information Field").
  if (!(InjectedInfo & intinfo::Valid))
    InjectedInfo = 0;
  if (!(InjectedInfo & intinfo::DeliverErrorCode))
    InjectedError = 0;
  const uint64_t Rip = C.S.Rip;
  const uint32_t Words[6] = {C.Id, lo(Rip), hi(Rip), uint32_t(IsLaunch), InjectedInfo,
                             InjectedError};
  W.recordTsc(C.Id, XT_EV_GtVmEntry, C.Cycles, Words);
}

void GroundTruthRecorder::vmEntryFailure(const Cpu &C, EntryFailOutcome Outcome,
                                         uint32_t Number, uint32_t CheckId,
                                         uint64_t Qualification) {
  const uint32_t Words[6] = {C.Id, uint32_t(Outcome), Number, CheckId, lo(Qualification),
                             hi(Qualification)};
  W.recordTsc(C.Id, XT_EV_GtVmEntryFail, C.Cycles, Words);
}

void GroundTruthRecorder::instruction(const Cpu &C, const DecodedInsn &I) {
  const uint64_t Rip = C.S.Rip;
  const uint32_t Words[4] = {C.Id, lo(Rip), hi(Rip),
                             uint32_t(I.Len & 0xf) | (C.NonRoot ? 1u << 8 : 0u)};
  W.recordTsc(C.Id, XT_EV_GtInsn, C.Cycles, Words);
}

void GroundTruthInsnObserver::beforeInsn(const Cpu &C, const DecodedInsn &I) {
  R.instruction(C, I);
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

} // namespace vmxsim::trace
