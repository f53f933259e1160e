// Mmu::writeWatchedPage (cpu/mmu.h), inline: the explicit stores' miss path
// (cpu/memory.h, writeMemFull) tries it before segmentation and writeLinearSlow, so that
// a traced hypervisor's slot stores, several per VM exit, cost one call into the
// observer each. cpu/watched_store.cpp has the rest.
#pragma once
#include "cpu/cpu.h"
#include "cpu/inline_records.h"
#include "cpu/mmu.h"

#include <cstring>

namespace vmxsim {

// A store touched a watched range while this processor runs: its instruction made the
// store, directly, through the processor's own bookkeeping (A/D flags, ...) or through a
// device it programmed (Mmu::watchedWrite, and writeWatchedPage below).
[[gnu::always_inline]] inline void Mmu::storeSeen(Hpa Pa, uint64_t SizeBytes,
                                                  StoreAgent Agent, const void *Bytes) {
  // MONITOR (cpu/monitor.h; SDM Vol. 2B, MONITOR): a store by any agent triggers every
  // armed monitor whose line it touches, at the storing processor's time
  // (monitorSawStore does nothing to one that is not armed).
  for (unsigned K = 0; K < NumPeers; ++K)
    if (Peers[K]->Monitor.State == MonitorState::Phase::Armed)
      monitorSawStore(*Peers[K], Pa, SizeBytes, Owner.Cycles);
  if (VmxTransitionObserver *O = Owner.Transitions) {
    if (Agent == StoreAgent::Instruction && SizeBytes == 8 && Bytes) {
      uint64_t V;
      std::memcpy(&V, Bytes, 8);
      if (!slotRecordInPlace(Owner, Pa.value(), V))
        O->instructionStored64(Owner, Pa, V);
    } else if (Agent == StoreAgent::Instruction) // an instruction's store is at most a page
      O->instructionStored(Owner, Pa, unsigned(SizeBytes));
    else
      O->watchedStore(watchedStoreEventOf(Owner, Pa, SizeBytes, Agent));
  }
}

// What writeLinearSlow does for a store that its first step, writeCodePage, takes, in a
// page without code: writeCodePage's tests (the entry's tag, the store inside the page,
// the page holding a watched range), the copy, and PhysMem::noteWrite (the report to the
// write watcher when the store touches a write-watched range; no code to invalidate, so
// no block to end); then writeLinearSlow's data breakpoint check, which is why an armed
// one sends the store there. The same store, the same report, the same TLB and watch
// state after it; only the lookups are cached.
[[gnu::always_inline]] inline bool Mmu::writeWatchedPage(Gla Linear, unsigned Size, const void *In, bool Supervisor) {
  const uint64_t La = Linear.value();
  const TlbEntry &E = TlbWriteCode[(La >> 12) & (kTlbEntries - 1)];
  // The tag of the store's last byte: slot K holds only entries of pages whose slot is
  // K, so a store that leaves the page misses (cpu/memory.h, tlbMaps). writeTag, as the
  // store fast paths: while lockstep logs the interpreter's stores (StoreLog) no entry
  // matches it, so every store goes to writeLinearSlow, which logs or refuses it.
  if (E.Tag != writeTag(La + (Size - 1), Supervisor) || !WatchedPageOn) [[unlikely]]
    return false;
  if (Watched.Pfn != E.Pfn || Watched.Epoch != Mem.watchEpoch()) [[unlikely]]
    lookUpWatchedPage(E.Pfn);
  if (!Watched.Usable || Mem.codeLines(E.Pfn) || Owner.Debug.DataArmed) [[unlikely]]
    return false;
  void *Host = reinterpret_cast<void *>(La + E.Addend);
  if (Size == 8) [[likely]] // a slot store: no call
    std::memcpy(Host, In, 8);
  else
    std::memcpy(Host, In, Size);
  ++WatchedPageStores;
  const unsigned Off = unsigned(La & 0xfff);
  for (unsigned K = 0; K < Watched.NumRanges; ++K) {
    const PhysMem::PageRange &R = Watched.Ranges[K];
    if (Off < R.End && R.Begin < Off + Size) {
      const Hpa Pa((E.Pfn << 12) | Off);
      // The processor that runs installs its own MMU as the watcher (Cpu::run).
      if (WriteWatcher *W = Mem.writeWatcher(); W == this) [[likely]]
        storeSeen(Pa, Size, StoreAgent::Instruction, In); // watchedWrite, inline
      else if (W)
        W->watchedWrite(Pa, Size, StoreAgent::Instruction);
      break;
    }
  }
  return true;
}

// A slot store recorded in place, ahead of writeWatchedPage: an aligned 8-byte store
// into the running CPU's own slot array (cpu/inline_records.h), which the ground truth
// watches as a range of its own, so that writeWatchedPage would report the store exactly
// once, to this MMU's storeSeen, and the processor would write its record in place. The
// same tests as that path (the entry's tag, no decoded code in the page, this MMU the
// watcher), and storeSeen's (no armed monitor that the store's line would trigger:
// monitorSawStore; the observer the one that asked; room for the record) all come first;
// then the store, its count and the record. Without a call, so that writeMemFull's 8-byte
// stores keep no frame for it. False with nothing done otherwise.
//
// A data breakpoint (SDM Vol. 3B, "Data Memory and I/O Breakpoint Exception Conditions")
// needs no test: a page holding an armed one has no TLB entry at all
// (Mmu::translate refuses it, and arming one flushes every entry: cpu/debug.cpp), so the
// entry's tag matching means no breakpoint covers the store, as on the stores' fast
// path (cpu/memory.h). A slot array of 0 bytes (none) fails the offset test.
[[gnu::always_inline]] inline bool Mmu::writeSlotInPlace(Gla Linear, uint64_t Value) {
  InlineTransitionRecords *T = Owner.InlineRecords;
  if (!T || T->Observer != Owner.Transitions) [[unlikely]]
    return false;
  const uint64_t La = Linear.value();
  const TlbEntry &E = TlbWriteCode[(La >> 12) & (kTlbEntries - 1)];
  if (E.Tag != writeTag(La + 7, false) || !WatchedPageOn) [[unlikely]]
    return false;
  const uint64_t Off = ((E.Pfn << 12) | (La & 0xfff)) - T->SlotBase;
  if (Off >= T->SlotBytes || (Off & 7) || Mem.codeLines(E.Pfn) || Mem.writeWatcher() != this)
      [[unlikely]]
    return false;
  if (T->SlotQuietEpoch != Mem.watchEpoch() && !noteSlotArrayQuiet(*T)) [[unlikely]]
    return false;
  const uint32_t U = T->next<5>();
  if (U == ~0u) [[unlikely]]
    return false;
  std::memcpy(reinterpret_cast<void *>(La + E.Addend), &Value, 8);
  ++SlotStoresAhead;
  writeSlotRecord(Owner, *T, U, Off, Value);
  return true;
}

} // namespace vmxsim
