#include "trace/ground_truth.h"

#include <array>

namespace vmxsim::trace {

namespace {
uint32_t lo(uint64_t V) { return uint32_t(V); }
uint32_t hi(uint64_t V) { return uint32_t(V >> 32); }
/// RAX, RCX and RDX as GT_VMEXIT_REGS and GT_VMENTRY_REGS hold them.
std::array<uint32_t, 6> regWords(const uint64_t (&Regs)[3]) {
  return {lo(Regs[0]), hi(Regs[0]), lo(Regs[1]), hi(Regs[1]), lo(Regs[2]), hi(Regs[2])};
}
} // namespace

void GroundTruthRecorder::vmExit(unsigned Cpu, uint64_t Tsc, uint32_t Reason, uint64_t Rip,
                                 uint64_t Qualification, uint32_t InstructionLength,
                                 const uint32_t (&Event)[5], uint32_t AddrValid, uint64_t Gla,
                                 uint64_t Gpa, const uint64_t (&Regs)[3], bool RegsByReason) {
  exit(Cpu, Tsc, Reason, Rip, Qualification, InstructionLength);
  exitEvent(Cpu, Event);
  exitAddr(Cpu, AddrValid, Gla, Gpa);
  if (RegsByReason && exitHasRegs(Reason))
    exitRegs(Cpu, Regs);
}

void GroundTruthRecorder::exitEvent(unsigned Cpu, const uint32_t (&Event)[5]) {
  // Only when it says something: most exits (CPUID, VMCALL, I/O, MSR, CR, HLT) have all
  // five fields 0, and a missing record means exactly that. A fifth fewer bytes per exit.
  if (Event[0] | Event[1] | Event[2] | Event[3] | Event[4])
    W.record(Cpu, XT_EV_GtVmExitEvent, Event);
}

void GroundTruthRecorder::exitAddr(unsigned Cpu, uint32_t Valid, uint64_t Gla, uint64_t Gpa) {
  if (Valid) {
    const uint32_t Addr[5] = {Valid, lo(Gla), hi(Gla), lo(Gpa), hi(Gpa)};
    W.record(Cpu, XT_EV_GtVmExitAddr, Addr);
  }
}

void GroundTruthRecorder::exitRegs(unsigned Cpu, const uint64_t (&Regs)[3]) {
  const auto R = regWords(Regs);
  W.record(Cpu, XT_EV_GtVmExitRegs, R.data(), unsigned(R.size()));
}

void GroundTruthRecorder::entryRegs(unsigned Cpu, const uint64_t (&Regs)[3]) {
  const auto R = regWords(Regs);
  W.record(Cpu, XT_EV_GtVmEntryRegs, R.data(), unsigned(R.size()));
}

void GroundTruthRecorder::vmEntry(unsigned Cpu, uint64_t Tsc, uint64_t Rip, bool IsLaunch,
                                  uint32_t InjectedInfo, uint32_t InjectedError) {
  const uint32_t Words[6] = {Cpu, lo(Rip), hi(Rip), uint32_t(IsLaunch), InjectedInfo,
                             InjectedError};
  W.recordTsc(Cpu, XT_EV_GtVmEntry, Tsc, Words);
}

void GroundTruthRecorder::vmEntryFailure(unsigned Cpu, uint64_t Tsc, uint32_t Outcome,
                                         uint32_t Number, uint32_t CheckId,
                                         uint64_t Qualification) {
  const uint32_t Words[6] = {Cpu, Outcome, Number, CheckId, lo(Qualification), hi(Qualification)};
  W.recordTsc(Cpu, XT_EV_GtVmEntryFail, Tsc, Words);
}

void GroundTruthRecorder::gpr(unsigned Cpu, unsigned Reg, uint64_t Value) {
  const uint32_t Words[4] = {Cpu, Reg, lo(Value), hi(Value)};
  W.record(Cpu, XT_EV_GtGpr, Words);
}

void GroundTruthRecorder::activity(unsigned Cpu, uint32_t State) {
  const uint32_t Words[2] = {Cpu, State};
  W.record(Cpu, XT_EV_GtActivity, Words);
}

void GroundTruthRecorder::slotLayout(uint64_t TablePa, uint32_t Slots, uint32_t MaxCpus) {
  const uint32_t Words[4] = {lo(TablePa), hi(TablePa), Slots, MaxCpus};
  W.recordTsc(0, XT_EV_GtSlotLayout, 0, Words);
}

void GroundTruthRecorder::slotPublish(unsigned Cpu, uint64_t Tsc, uint32_t Owner,
                                      uint64_t SlotsPa) {
  const uint32_t Words[3] = {Owner, lo(SlotsPa), hi(SlotsPa)};
  W.recordTsc(Cpu, XT_EV_GtSlotPublish, Tsc, Words);
}

void GroundTruthRecorder::slotStoreSlow(unsigned Cpu, uint64_t Tsc, uint32_t Owner,
                                        uint32_t Slot, uint64_t Value, uint64_t Rip) {
  if (Owner == Cpu) {
    const uint32_t Words[5] = {Slot, lo(Rip), lo(Value), hi(Value), hi(Rip)};
    W.recordTsc(Cpu, XT_EV_GtSlotOwn, Tsc, Words, slotOwnWords(Value, Rip));
    return;
  }
  const uint32_t Words[7] = {Cpu, Owner, Slot, lo(Value), hi(Value), lo(Rip), hi(Rip)};
  W.recordTsc(Cpu, XT_EV_GtSlotStore, Tsc, Words);
}

void GroundTruthRecorder::rootTsc(unsigned Cpu, uint64_t Tsc, uint64_t Value, uint64_t Rip) {
  const uint64_t Offset = Value - Tsc;
  const unsigned N = rootTscWords(Offset, Rip);
  // All four payload words are stored; those past the header's count are room.
  if (TraceWriter::Lane *L = W.lane(Cpu)) [[likely]]
    if (uint32_t *P = TraceWriter::placeTsc<4>(*L, XT_EV_GtRootRdtsc, Tsc, N)) [[likely]] {
      P[0] = lo(Rip), P[1] = lo(Offset), P[2] = hi(Offset), P[3] = hi(Rip);
      return;
    }
  const uint32_t Words[4] = {lo(Rip), lo(Offset), hi(Offset), hi(Rip)};
  W.recordTsc(Cpu, XT_EV_GtRootRdtsc, Tsc, Words, N);
}

void GroundTruthRecorder::instruction(unsigned Cpu, uint64_t Tsc, uint64_t Rip, unsigned Length,
                                      bool NonRoot) {
  const uint32_t Words[4] = {Cpu, lo(Rip), hi(Rip), (Length & 0xf) | (NonRoot ? 1u << 8 : 0u)};
  W.recordTsc(Cpu, XT_EV_GtInsn, Tsc, Words);
}

} // namespace vmxsim::trace
