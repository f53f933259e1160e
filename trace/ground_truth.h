// The emulator's ground truth (issue 6): a record of every VM exit and VM entry as the
// emulated processor performed them — and, on request, of every instruction — written as
// XenTrace records of vmxsim's own class (trace/events.def, class 0x400) and stamped with
// the virtual TSC. A hypervisor's own trace can then be checked against what really
// happened.
//
// This is a writer of records from plain values: it knows the record layouts of
// events.def and nothing of the processor. The processor publishes its transitions
// through cpu/observer.h; harness/ground_truth_link.h connects the two.
#pragma once
#include "trace/writer.h"

#include <cstdint>

namespace vmxsim::trace {

/// Whether a VM exit with this full exit-reason field has a GT_VMEXIT_REGS record: the
/// basic reasons CPUID (10), control-register access (28), I/O instruction (30), RDMSR
/// (31), WRMSR (32), not for a VM-entry failure (bit 31).
constexpr bool exitHasRegs(uint32_t Reason) {
  if (Reason & 0x80000000u)
    return false;
  const uint32_t Basic = Reason & 0xffff;
  return Basic == 10 || Basic == 28 || Basic == 30 || Basic == 31 || Basic == 32;
}

/// Payload words of a GT_EXIT with this qualification (trace/events.def: its high half is
/// left off when 0, the whole of it when 0).
constexpr unsigned gtExitWords(uint64_t Qualification) {
  return 4u + unsigned(Qualification != 0) + unsigned(Qualification >> 32 != 0);
}

class GroundTruthRecorder {
public:
  explicit GroundTruthRecorder(TraceWriter &W) : W(W) {}

  /// GT_EXIT {reason, rip, len, qual in 0 to 2 words} alone (exitEvent, exitAddr and
  /// exitRegs follow it when they are due; vmExit below decides that itself).
  void exit(unsigned Cpu, uint64_t Tsc, uint32_t Reason, uint64_t Rip, uint64_t Qualification,
            uint32_t InstructionLength) {
    TraceWriter::Lane *L = W.lane(Cpu);
    if (!L || !exitInPlace(*L, Tsc, Reason, Rip, Qualification, InstructionLength))
        [[unlikely]] {
      const uint32_t Words[6] = {Reason, uint32_t(Rip), uint32_t(Rip >> 32),
                                 InstructionLength, uint32_t(Qualification),
                                 uint32_t(Qualification >> 32)};
      W.recordTsc(Cpu, XT_EV_GtExit, Tsc, Words, gtExitWords(Qualification));
    }
  }
  /// exit on the CPU of lane L (TraceWriter::lane) when it can be stored in place
  /// (TraceWriter::placeTsc: no call, nothing drained); false with nothing written
  /// otherwise. The VM exit's fast path.
  static bool exitInPlace(TraceWriter::Lane &L, uint64_t Tsc, uint32_t Reason, uint64_t Rip,
                          uint64_t Qualification, uint32_t InstructionLength) {
    // All six words are stored: those past the record's are room (placeTsc).
    uint32_t *P =
        TraceWriter::placeTsc<6>(L, XT_EV_GtExit, Tsc, gtExitWords(Qualification));
    if (!P) [[unlikely]]
      return false;
    P[0] = Reason;
    P[1] = uint32_t(Rip);
    P[2] = uint32_t(Rip >> 32);
    P[3] = InstructionLength;
    P[4] = uint32_t(Qualification);
    P[5] = uint32_t(Qualification >> 32);
    return true;
  }
  /// The header words of the records exitInPlace and resumeInPlace write: GT_EXIT with
  /// NumWords (4 to 6) payload words, GT_RESUME. For a writer of those records outside
  /// trace/ (the processor's in-place records, cpu/observer.h, InlineTransitionRecords).
  static uint32_t exitHeader(unsigned NumWords) { return xt_header(XT_EV_GtExit, NumWords, 1); }
  static uint32_t resumeHeader() { return xt_header(XT_EV_GtResume, 0, 1); }
  /// The header words of GT_SLOT_OWN with NumWords (3 to 5) payload words and of
  /// GT_ROOT_RDTSC with NumWords (1 to 4) (slotStore, rootTsc), likewise.
  static uint32_t slotOwnHeader(unsigned NumWords) {
    return xt_header(XT_EV_GtSlotOwn, NumWords, 1);
  }
  /// GT_SLOT_OWN's payload words for Value and Rip: 3, 4 when Value's high half is not 0,
  /// 5 when Rip's is not (trace/events.def).
  static unsigned slotOwnWords(uint64_t Value, uint64_t Rip) {
    return 3 + unsigned(((Value | Rip) >> 32) != 0) + unsigned((Rip >> 32) != 0);
  }
  static uint32_t rootTscHeader(unsigned NumWords) {
    return xt_header(XT_EV_GtRootRdtsc, NumWords, 1);
  }
  /// GT_ROOT_RDTSC's payload words for an RDTSC at Rip whose value is the record's TSC
  /// plus Offset: 1, 2 when the offset is not 0, 3 when its high half is not, 4 when
  /// Rip's is not (trace/events.def).
  static unsigned rootTscWords(uint64_t Offset, uint64_t Rip) {
    return (Rip >> 32) ? 4 : (Offset >> 32) ? 3 : Offset ? 2 : 1;
  }
  /// GT_VMEXIT_EVENT {intr_info, intr_err, idtv_info, idtv_err, insn_info}: after exit,
  /// only when one of them is not 0.
  void exitEvent(unsigned Cpu, const uint32_t (&Event)[5]);
  /// GT_VMEXIT_ADDR {valid, gla, gpa}: after exit (and exitEvent), only when Valid is not 0.
  void exitAddr(unsigned Cpu, uint32_t Valid, uint64_t Gla, uint64_t Gpa);
  /// exit; GT_VMEXIT_EVENT with Event = {interruption
  /// information, its error code, IDT-vectoring information, its error code, instruction
  /// information} unless all five are 0 (a missing record means exactly that); and
  /// GT_VMEXIT_ADDR {valid, gla, gpa} when AddrValid (bit 0 linear, bit 1 physical) is
  /// not 0; and GT_VMEXIT_REGS {rax, rcx, rdx} = Regs for the exits whose instruction
  /// takes its operands there (exitHasRegs), unless RegsByReason is false (slot
  /// watching: the caller writes exitRegs when they changed).
  void vmExit(unsigned Cpu, uint64_t Tsc, uint32_t Reason, uint64_t Rip, uint64_t Qualification,
              uint32_t InstructionLength, const uint32_t (&Event)[5], uint32_t AddrValid,
              uint64_t Gla, uint64_t Gpa, const uint64_t (&Regs)[3] = {0, 0, 0},
              bool RegsByReason = true);
  /// GT_VMEXIT_REGS {rax, rcx, rdx}: right after the vmExit it belongs to.
  void exitRegs(unsigned Cpu, const uint64_t (&Regs)[3]);
  /// GT_VMENTRY {cpu, rip, launch, inj_info, inj_err}.
  void vmEntry(unsigned Cpu, uint64_t Tsc, uint64_t Rip, bool IsLaunch, uint32_t InjectedInfo,
               uint32_t InjectedError);
  /// GT_RESUME: the VM entry that GT_VMENTRY {cpu, rip + len of this CPU's last GT_EXIT,
  /// 0, 0, 0} would say, written by the caller only as the first entry attempt after it.
  void resume(unsigned Cpu, uint64_t Tsc) {
    TraceWriter::Lane *L = W.lane(Cpu);
    if (!L || !resumeInPlace(*L, Tsc)) [[unlikely]]
      W.recordTsc(Cpu, XT_EV_GtResume, Tsc, nullptr, 0);
  }
  /// resume on lane L when it can be stored in place (as exitInPlace); false with
  /// nothing written.
  static bool resumeInPlace(TraceWriter::Lane &L, uint64_t Tsc) {
    return TraceWriter::placeTsc<0>(L, XT_EV_GtResume, Tsc, 0) != nullptr;
  }
  /// GT_VMENTRY_FAIL {cpu, outcome, number, check, qual}.
  void vmEntryFailure(unsigned Cpu, uint64_t Tsc, uint32_t Outcome, uint32_t Number,
                      uint32_t CheckId, uint64_t Qualification);
  /// GT_GPR {cpu, reg, value}: after the vmExit or vmEntry it belongs to.
  void gpr(unsigned Cpu, unsigned Reg, uint64_t Value);
  /// GT_VMENTRY_REGS {rax, rcx, rdx}: after the vmEntry it belongs to.
  void entryRegs(unsigned Cpu, const uint64_t (&Regs)[3]);
  /// GT_ACTIVITY {cpu, activity}: after a vmExit's GT_GPR records (the caller omits it
  /// for the active state, 0).
  void activity(unsigned Cpu, uint32_t State);
  /// GT_SLOT_LAYOUT {table, slots, max_cpus}, at TSC 0: the first record.
  void slotLayout(uint64_t TablePa, uint32_t Slots, uint32_t MaxCpus);
  /// GT_SLOT_PUBLISH {owner, slots_pa}, on the publishing CPU's record stream.
  void slotPublish(unsigned Cpu, uint64_t Tsc, uint32_t Owner, uint64_t SlotsPa);
  /// A store by Cpu into CPU Owner's slot Slot that left Value there: GT_SLOT_OWN {slot,
  /// rip, value, value_hi, rip_hi} (as few words as slotOwnWords says) when Owner is
  /// Cpu, else GT_SLOT_STORE {cpu, owner, slot, value, rip}. In place when it fits
  /// (TraceWriter::placeTsc), as GT_EXIT: a traced hypervisor stores its slots several
  /// times per exit. The same record either way.
  void slotStore(unsigned Cpu, uint64_t Tsc, uint32_t Owner, uint32_t Slot, uint64_t Value,
                 uint64_t Rip) {
    if (TraceWriter::Lane *L = W.lane(Cpu)) [[likely]]
      if (slotStoreInPlace(*L, Cpu, Tsc, Owner, Slot, Value, Rip)) [[likely]]
        return;
    slotStoreSlow(Cpu, Tsc, Owner, Slot, Value, Rip);
  }
  /// slotStore on lane L, Cpu's, when it can be stored in place (as exitInPlace); false
  /// with nothing written.
  static bool slotStoreInPlace(TraceWriter::Lane &L, unsigned Cpu, uint64_t Tsc,
                               uint32_t Owner, uint32_t Slot, uint64_t Value, uint64_t Rip) {
    if (Owner == Cpu) [[likely]] {
      // All five payload words are stored; those past the header's count are room.
      uint32_t *P = TraceWriter::placeTsc<5>(L, XT_EV_GtSlotOwn, Tsc, slotOwnWords(Value, Rip));
      if (!P) [[unlikely]]
        return false;
      P[0] = Slot, P[1] = uint32_t(Rip), P[2] = uint32_t(Value);
      P[3] = uint32_t(Value >> 32), P[4] = uint32_t(Rip >> 32);
      return true;
    }
    uint32_t *P = TraceWriter::placeTsc<7>(L, XT_EV_GtSlotStore, Tsc, 7);
    if (!P) [[unlikely]]
      return false;
    P[0] = Cpu, P[1] = Owner, P[2] = Slot, P[3] = uint32_t(Value);
    P[4] = uint32_t(Value >> 32), P[5] = uint32_t(Rip), P[6] = uint32_t(Rip >> 32);
    return true;
  }
  /// GT_ROOT_RDTSC {rip, offset = Value - Tsc, offset_hi, rip_hi}, in as few words as
  /// rootTscWords says.
  void rootTsc(unsigned Cpu, uint64_t Tsc, uint64_t Value, uint64_t Rip);
  /// GT_INSN {cpu, rip, flags = length | non-root << 8}, before the instruction executes.
  void instruction(unsigned Cpu, uint64_t Tsc, uint64_t Rip, unsigned Length, bool NonRoot);

  TraceWriter &writer() { return W; }

private:
  void slotStoreSlow(unsigned Cpu, uint64_t Tsc, uint32_t Owner, uint32_t Slot, uint64_t Value,
                     uint64_t Rip);
  TraceWriter &W;
};

} // namespace vmxsim::trace
