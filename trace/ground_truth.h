// The emulator's ground truth (issue 6): a record of every VM exit and VM entry as the
// emulated processor performed them — and, on request, of every instruction — written as
// XenTrace records of vmxsim's own class (trace/events.def, class 0x400) and stamped with
// the virtual TSC (Cpu::Cycles). A hypervisor's own trace can then be checked against
// what really happened. The hooks in cpu/vmx/vm_exit.cpp and vm_entry.cpp test
// Cpu::GroundTruth: with recording off, each costs one predictable branch.
#pragma once
#include "cpu/cpu.h"
#include "trace/writer.h"

#include <cstdint>

namespace vmxsim {
struct VmExitInfo;
struct VmEntryCheckResult;
} // namespace vmxsim

namespace vmxsim::trace {

/// Outcome word of GT_VMENTRY_FAIL (events.def).
enum class EntryFailOutcome : uint32_t { VmFailValid = 1, GuestStateCheck = 2, LoadingGuestState = 3 };
/// Check word of GT_VMENTRY_FAIL when no VM-entry check failed (a load failure).
inline constexpr uint32_t kNoCheckId = 0xffff;

class GroundTruthRecorder {
public:
  explicit GroundTruthRecorder(TraceWriter &W) : W(W) {}

  /// At the start of a VM exit (or VM-entry failure after the guest-state checks), with
  /// guest state still in C: GT_VMEXIT, GT_VMEXIT_EVENT unless all its fields are 0, and,
  /// if an address is valid, GT_VMEXIT_ADDR.
  void vmExit(const Cpu &C, const VmExitInfo &Info);
  /// When VM entry has loaded the guest and is about to run it (before injection).
  void vmEntry(const Cpu &C, bool IsLaunch, uint32_t InjectedInfo, uint32_t InjectedError);
  /// A VM entry that failed: its outcome, the VM-instruction error or basic exit reason,
  /// the ID of the failing check (kNoCheckId if none) and the exit qualification.
  void vmEntryFailure(const Cpu &C, EntryFailOutcome Outcome, uint32_t Number,
                      uint32_t CheckId, uint64_t Qualification);
  /// One instruction before it executes.
  void instruction(const Cpu &C, const DecodedInsn &I);

  TraceWriter &writer() { return W; }

private:
  TraceWriter &W;
};

/// A CpuObserver that records every instruction and forwards to another observer (the
/// instruction tracer), so both can be on at once.
class GroundTruthInsnObserver : public CpuObserver {
public:
  GroundTruthInsnObserver(GroundTruthRecorder &R, CpuObserver *Next) : R(R), Next(Next) {}
  void beforeInsn(const Cpu &C, const DecodedInsn &I) override;
  void afterInsn(const Cpu &C, const DecodedInsn &I) override;
  void onException(const Cpu &C, const PendingEvent &E) override;

private:
  GroundTruthRecorder &R;
  CpuObserver *Next;
};

} // namespace vmxsim::trace
