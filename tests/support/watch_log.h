// Transition observers that record the watched-memory events of a processor
// (cpu/observer.h): the stores into write-watched ranges and the reads of read-watched
// ones, for tests of PhysMem::watchWrites and watchReads.
#pragma once
#include "cpu/observer.h"

#include <vector>

namespace vmxsim::test {

class WatchLog final : public VmxTransitionObserver {
public:
  void vmExit(const VmExitEvent &) override {}
  void vmEntry(const VmEntryEvent &) override {}
  void vmEntryFailure(const VmEntryFailureEvent &) override {}
  void watchedStore(const WatchedStoreEvent &E) override { Stores.push_back(E); }
  void watchedLoad(const WatchedLoadEvent &E) override { Loads.push_back(E); }
  std::vector<WatchedStoreEvent> Stores;
  std::vector<WatchedLoadEvent> Loads;
};

} // namespace vmxsim::test
