// The common VM exit's and entry's records, a slot store's and a root RDTSC's, written in
// place by the processor for the observer that asked (cpu/observer.h,
// InlineTransitionRecords; the ground truth's GT_EXIT, GT_RESUME, GT_SLOT_OWN and
// GT_ROOT_RDTSC). vmExit, vmEntry, the watched-page store and RDTSC try these first; false
// means nothing was written and the observer's call follows, as without them.
#pragma once
#include "cpu/cpu.h"
#include "cpu/vmx/vm_exit.h"

namespace vmxsim {

/// At a VM exit that begins (guest state still in C): the exit's record, when C's
/// Transitions asked for in-place records and the exit is a plain one — no event
/// information, no guest address, not an entry failure, the processor active, a basic
/// reason the observer does not take itself, the registers passing its test — and
/// the buffer has room. Then the entry record is due at RIP + instruction length.
[[gnu::always_inline]] inline bool exitRecordInPlace(Cpu &C, const VmExitInfo &I) {
  InlineTransitionRecords *T = C.InlineRecords;
  if (!T || T->Observer != C.Transitions || !T->Mode) [[unlikely]]
    return false;
  const uint32_t Basic = uint32_t(I.Reason);
  if ((I.InterruptionInfo | I.InterruptionErrorCode | I.IdtVectoringInfo |
       I.IdtVectoringErrorCode | I.InstructionInfo) ||
      (I.GuestLinearValid | I.GuestPhysicalValid | I.EntryFailure) ||
      C.Activity != ActivityState::Active || Basic >= 128 ||
      (T->CallReasons[Basic >> 6] >> (Basic & 63) & 1) || !T->regsPass(C.S.Gpr))
    return false;
  const uint32_t U = T->next<6>();
  if (U == ~0u) [[unlikely]]
    return false;
  const uint64_t Rip = C.S.Rip, Q = I.Qualification;
  const unsigned Extra = unsigned(Q != 0) + unsigned(Q >> 32 != 0);
  // All six payload words are stored; those past the header's count are room.
  uint32_t *P = T->place(U, T->ExitHeader[Extra], C.Cycles, 4 + Extra);
  P[0] = Basic;
  P[1] = uint32_t(Rip);
  P[2] = uint32_t(Rip >> 32);
  P[3] = I.InstructionLength;
  P[4] = uint32_t(Q);
  P[5] = uint32_t(Q >> 32);
  T->ResumeRip = Rip + I.InstructionLength;
  T->ResumeOpen = true;
  return true;
}

/// At a VM entry that has loaded the guest: the entry record, when it is the first
/// attempt after an exit whose record was written (by either side) and resumes where
/// that record said, injects nothing (Info 0), is not a launch, the registers pass the
/// observer's test and the buffer has room.
[[gnu::always_inline]] inline bool entryRecordInPlace(Cpu &C, bool IsLaunch, uint32_t Info) {
  InlineTransitionRecords *T = C.InlineRecords;
  if (!T || T->Observer != C.Transitions || !T->Mode || !T->ResumeOpen || IsLaunch || Info ||
      C.S.Rip != T->ResumeRip || !T->regsPass(C.S.Gpr)) [[unlikely]]
    return false;
  const uint32_t U = T->next<0>();
  if (U == ~0u) [[unlikely]]
    return false;
  T->place(U, T->ResumeHeader, C.Cycles, 0);
  T->ResumeOpen = false;
  return true;
}

/// The slot-store record of an 8-byte store of Value at offset Off of T's slot array (the
/// CPU's own), at index U (T->next<5>()).
[[gnu::always_inline]] inline void writeSlotRecord(Cpu &C, InlineTransitionRecords &T,
                                                   uint32_t U, uint64_t Off, uint64_t Value) {
  const uint64_t Rip = C.S.Rip;
  const uint32_t RipHi = uint32_t(Rip >> 32), ValueHi = uint32_t(Value >> 32);
  // All five payload words are stored; those past the header's count are room.
  const unsigned Extra = unsigned((ValueHi | RipHi) != 0) + unsigned(RipHi != 0);
  uint32_t *P = T.place(U, T.SlotHeader[Extra], C.Cycles, 3 + Extra);
  P[0] = uint32_t(Off / 8);
  P[1] = uint32_t(Rip);
  P[2] = uint32_t(Value);
  P[3] = ValueHi;
  P[4] = RipHi;
}

/// An instruction's aligned 8-byte store of Value at Pa (in a watched page: Mmu::storeSeen):
/// its slot-store record, when Pa is a slot of the observer's array and the buffer has
/// room.
[[gnu::always_inline]] inline bool slotRecordInPlace(Cpu &C, uint64_t Pa, uint64_t Value) {
  InlineTransitionRecords *T = C.InlineRecords;
  if (!T || T->Observer != C.Transitions) [[unlikely]]
    return false;
  const uint64_t Off = Pa - T->SlotBase;
  if (Off >= T->SlotBytes || (Off & 7)) [[unlikely]]
    return false;
  const uint32_t U = T->next<5>();
  if (U == ~0u) [[unlikely]]
    return false;
  writeSlotRecord(C, *T, U, Off, Value);
  return true;
}

/// RDTSC or RDTSCP in VMX root operation returned Value: its record, when the observer
/// records those in place and the buffer has room.
[[gnu::always_inline]] inline bool rootTscRecordInPlace(Cpu &C, uint64_t Value) {
  InlineTransitionRecords *T = C.InlineRecords;
  if (!T || T->Observer != C.Transitions || !T->RootTscHeader[0]) [[unlikely]]
    return false;
  const uint32_t U = T->next<4>();
  if (U == ~0u) [[unlikely]]
    return false;
  const uint64_t Rip = C.S.Rip, Offset = Value - C.Cycles;
  const uint32_t RipHi = uint32_t(Rip >> 32), OffsetHi = uint32_t(Offset >> 32);
  const unsigned Words = RipHi ? 4 : OffsetHi ? 3 : Offset ? 2 : 1;
  // All four payload words are stored; those past the header's count are room.
  uint32_t *P = T->place(U, T->RootTscHeader[Words - 1], C.Cycles, Words);
  P[0] = uint32_t(Rip);
  P[1] = uint32_t(Offset);
  P[2] = OffsetHi;
  P[3] = RipHi;
  return true;
}

} // namespace vmxsim
