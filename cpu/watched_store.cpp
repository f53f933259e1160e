// Stores into watched pages without decoded code (cpu/mmu.h, Mmu::writeWatchedPage): the
// ground truth's slot stores. A traced hypervisor stores its trace slots several times
// per VM exit, each store into a watched page, so each misses TlbWrite (no processor
// keeps a fast write mapping of a watched page: mmu/phys_mem.h, "Write watches"). Through
// writeLinearSlow such a store compares the page with every watched range twice
// (writeCodePage's pageWatched, noteWrite's rangeWatched) and reaches the watcher by a
// virtual call. The short path (cpu/watched_store.h, inline in the stores' miss path)
// looks the page's ranges up once per change of the watches: here, with the event of a
// watched store and writeLinear's miss.
#include "cpu/cpu.h"
#include "cpu/memory.h"
#include "cpu/observer.h"
#include "cpu/watched_store.h"

#include <cstring>

namespace vmxsim {

WatchedStoreEvent watchedStoreEventOf(const Cpu &C, Hpa Pa, uint64_t SizeBytes, StoreAgent Agent) {
  WatchedStoreEvent E;
  E.Cpu = C.Id;
  E.Tsc = C.Cycles;
  E.Rip = C.S.Rip;
  E.Addr = Pa.value();
  E.SizeBytes = unsigned(SizeBytes);
  E.Agent = Agent;
  return E;
}

bool Mmu::noteSlotArrayQuiet(InlineTransitionRecords &T) {
  // A store triggers an armed monitor only when it writes the monitored address range
  // (SDM Vol. 2B, MONITOR; monitorSawStore, cpu/monitor.h), so a slot store no armed
  // line covers needs no look at the monitors. Arming one watches its line
  // (cpu/exec_monitor.cpp), which moves the epoch.
  for (unsigned K = 0; K < NumPeers; ++K) {
    const MonitorState &M = Peers[K]->Monitor;
    if (M.State == MonitorState::Phase::Armed && M.Line < T.SlotBase + T.SlotBytes &&
        T.SlotBase < M.Line + kMonitorLineBytes)
      return false;
  }
  T.SlotQuietEpoch = Mem.watchEpoch();
  return true;
}

void Mmu::lookUpWatchedPage(uint64_t Pfn) {
  Watched.Pfn = Pfn;
  Watched.Epoch = Mem.watchEpoch();
  const unsigned Max = sizeof(Watched.Ranges) / sizeof(Watched.Ranges[0]);
  const unsigned N = Mem.watchedRangesInPage(Pfn, Watched.Ranges, Max);
  Watched.NumRanges = uint8_t(N <= Max ? N : 0);
  // writeCodePage keeps a TlbWriteCode entry only while its page holds code or a watched
  // range (of writes or of reads); without either it drops the entry and the store fills
  // TlbWrite. This path serves the watched pages, and only when every range is kept.
  Watched.Usable = N <= Max && Mem.pageWatched(Pfn);
}

Status writeLinearMiss(Cpu &C, uint64_t La, unsigned SizeBytes, const void *In,
                       bool Supervisor) {
  if (C.Mmu.writeWatchedPage(Gla(La), SizeBytes, In, Supervisor))
    return Status::Ok;
  return writeLinearSlow(C, La, SizeBytes, In, Supervisor);
}

} // namespace vmxsim
