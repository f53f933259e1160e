// Reading vmxsim's ground-truth transitions (trace/events.def): a VM exit is GT_EXIT or
// (files written before 2026-12-03) GT_VMEXIT, a VM entry GT_VMENTRY or GT_RESUME, which
// stands for the GT_VMENTRY its CPU's last exit implies. Every reader of ground truths
// decodes them here, so that both forms read the same.
#pragma once
#include "trace/xentrace.h"

#include <cstdint>

namespace vmxsim::trace {

/// What a VM exit's record says (the CPU is its window's).
struct GtExitFields {
  uint32_t Reason = 0; ///< the full exit-reason field
  uint64_t Rip = 0, Qual = 0;
  uint32_t Len = 0;
  /// The RIP of a GT_RESUME that follows this exit.
  uint64_t resumeRip() const { return Rip + Len; }
};

constexpr bool isGtExit(uint32_t Event) {
  return Event == XT_EV_GtExit || Event == XT_EV_GtVmExit;
}
constexpr bool isGtEntry(uint32_t Event) {
  return Event == XT_EV_GtVmEntry || Event == XT_EV_GtResume;
}

/// GT_EXIT {reason, rip, len, qual (0 to 2 words)} or GT_VMEXIT {cpu, reason, rip, qual,
/// len}; Word(I) is payload word I. False for another event or a record too short for
/// its layout (events.def: GT_EXIT 4..6 words, GT_VMEXIT 7).
template <class WordFn>
bool gtExit(uint32_t Event, unsigned NumWords, WordFn &&Word, GtExitFields &F) {
  const auto Quad = [&](unsigned I) { return uint64_t(Word(I)) | uint64_t(Word(I + 1)) << 32; };
  if (Event == XT_EV_GtExit && NumWords >= 4) {
    F.Reason = Word(0);
    F.Rip = Quad(1);
    F.Len = Word(3);
    F.Qual = NumWords >= 6 ? Quad(4) : NumWords == 5 ? Word(4) : 0;
    return true;
  }
  if (Event == XT_EV_GtVmExit && NumWords >= 7) {
    F.Reason = Word(1);
    F.Rip = Quad(2);
    F.Qual = Quad(4);
    F.Len = Word(6);
    return true;
  }
  return false;
}

/// gtExit of a record that holds its payload words in Words[] (TraceRecord).
template <class Record> bool gtExitOf(const Record &R, GtExitFields &F) {
  return gtExit(R.Event, R.NumWords, [&](unsigned I) { return R.Words[I]; }, F);
}

/// What a successful VM entry's record says.
struct GtEntryFields {
  uint64_t Rip = 0;
  bool Launch = false;
  uint32_t InjInfo = 0, InjErr = 0;
};

/// GT_VMENTRY {cpu, rip, launch, inj_info, inj_err}, or GT_RESUME: a VMRESUME at
/// ResumeRip (GtExitFields::resumeRip of its CPU's last exit) injecting nothing. False for
/// another event or a GT_VMENTRY too short.
template <class WordFn>
bool gtEntry(uint32_t Event, unsigned NumWords, WordFn &&Word, uint64_t ResumeRip,
             GtEntryFields &F) {
  if (Event == XT_EV_GtResume) {
    F = GtEntryFields{ResumeRip, false, 0, 0};
    return true;
  }
  if (Event != XT_EV_GtVmEntry || NumWords < 6)
    return false;
  F.Rip = uint64_t(Word(1)) | uint64_t(Word(2)) << 32;
  F.Launch = Word(3) != 0;
  F.InjInfo = Word(4);
  F.InjErr = Word(5);
  return true;
}

/// gtEntry of a record that holds its payload words in Words[] (TraceRecord).
template <class Record> bool gtEntryOf(const Record &R, uint64_t ResumeRip, GtEntryFields &F) {
  return gtEntry(R.Event, R.NumWords, [&](unsigned I) { return R.Words[I]; }, ResumeRip, F);
}

/// What a slot store's record says (trace/slot_layout.h): a store by the CPU whose window
/// holds it into CPU Owner's slot Slot, which left Value there, by the instruction at Rip.
struct GtSlotStoreFields {
  uint32_t Owner = 0, Slot = 0;
  uint64_t Value = 0, Rip = 0;
};

constexpr bool isGtSlotStore(uint32_t Event) {
  return Event == XT_EV_GtSlotOwn || Event == XT_EV_GtSlotStore;
}

/// GT_SLOT_OWN {slot, rip, value, value_hi, rip_hi} (3 to 5 words: a word left off is 0;
/// the owner is Cpu, the record's) or GT_SLOT_STORE {cpu, owner, slot, value, rip}. False
/// for another event or a record too short for its layout.
template <class WordFn>
bool gtSlotStore(uint32_t Event, unsigned NumWords, WordFn &&Word, uint32_t Cpu,
                 GtSlotStoreFields &F) {
  const auto Quad = [&](unsigned I) { return uint64_t(Word(I)) | uint64_t(Word(I + 1)) << 32; };
  if (Event == XT_EV_GtSlotOwn && NumWords >= 3) {
    F.Owner = Cpu;
    F.Slot = Word(0);
    F.Value = Word(2) | (NumWords >= 4 ? uint64_t(Word(3)) << 32 : 0);
    F.Rip = Word(1) | (NumWords >= 5 ? uint64_t(Word(4)) << 32 : 0);
    return true;
  }
  if (Event == XT_EV_GtSlotStore && NumWords >= 7) {
    F.Owner = Word(1);
    F.Slot = Word(2);
    F.Value = Quad(3);
    F.Rip = Quad(5);
    return true;
  }
  return false;
}

/// What a root RDTSC's record says: the instruction at Rip returned Value.
struct GtRootTscFields {
  uint64_t Value = 0, Rip = 0;
};

constexpr bool isGtRootTsc(uint32_t Event) {
  return Event == XT_EV_GtRootRdtsc || Event == XT_EV_GtRootTsc;
}

/// GT_ROOT_RDTSC {rip, offset, offset_hi, rip_hi} (1 to 4 words: a word left off is 0;
/// the value is the record's Tsc plus the offset) or GT_ROOT_TSC {cpu, value, rip}.
/// False for another event or a record too short for its layout.
template <class WordFn>
bool gtRootTsc(uint32_t Event, unsigned NumWords, WordFn &&Word, uint64_t Tsc,
               GtRootTscFields &F) {
  const auto At = [&](unsigned I) { return I < NumWords ? uint64_t(Word(I)) : 0; };
  if (Event == XT_EV_GtRootRdtsc && NumWords >= 1) {
    F.Rip = At(0) | At(3) << 32;
    F.Value = Tsc + (At(1) | At(2) << 32);
    return true;
  }
  if (Event == XT_EV_GtRootTsc && NumWords >= 5) {
    F.Value = At(1) | At(2) << 32;
    F.Rip = At(3) | At(4) << 32;
    return true;
  }
  return false;
}

/// gtRootTsc of a record that holds its payload words in Words[] and its TSC in Tsc
/// (TraceRecord).
template <class Record> bool gtRootTscOf(const Record &R, GtRootTscFields &F) {
  return gtRootTsc(R.Event, R.NumWords, [&](unsigned I) { return R.Words[I]; }, R.Tsc, F);
}

/// gtSlotStore of a record that holds its payload words in Words[] and its CPU in Cpu
/// (TraceRecord).
template <class Record> bool gtSlotStoreOf(const Record &R, GtSlotStoreFields &F) {
  return gtSlotStore(R.Event, R.NumWords, [&](unsigned I) { return R.Words[I]; }, R.Cpu, F);
}

} // namespace vmxsim::trace
