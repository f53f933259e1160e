// Connects the processor's observer interfaces (cpu/observer.h) to trace/'s ground-truth
// writer (trace/ground_truth.h): the processor knows nothing of traces, and trace/
// nothing of the processor; this is the one place that knows both.
#pragma once
#include "cpu/observer.h"
#include "trace/ground_truth.h"

namespace vmxsim {

/// Every VM exit, entry and entry failure of the CPUs it is attached to (Cpu::Transitions)
/// becomes a ground-truth record.
class GroundTruthLink : public VmxTransitionObserver {
public:
  explicit GroundTruthLink(trace::GroundTruthRecorder &R) : R(R) {}
  void vmExit(const VmExitEvent &E) override;
  void vmEntry(const VmEntryEvent &E) override;
  void vmEntryFailure(const VmEntryFailureEvent &E) override;

private:
  trace::GroundTruthRecorder &R;
};

/// A CpuObserver that records every instruction into the ground truth and forwards to
/// another observer (the instruction tracer), so both can be on at once.
class GroundTruthInsnObserver : public CpuObserver {
public:
  GroundTruthInsnObserver(trace::GroundTruthRecorder &R, CpuObserver *Next) : R(R), Next(Next) {}
  void beforeInsn(const Cpu &C, const DecodedInsn &I) override;
  void afterInsn(const Cpu &C, const DecodedInsn &I) override;
  void onException(const Cpu &C, const PendingEvent &E) override;

private:
  trace::GroundTruthRecorder &R;
  CpuObserver *Next;
};

} // namespace vmxsim
