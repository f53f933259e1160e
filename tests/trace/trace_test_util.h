// Helpers shared by the trace tests: a hand-built trace covering every record shape.
#pragma once
#include "trace/events.h"
#include "trace/reader.h"
#include "trace/writer.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

namespace vmxsim::trace::testing {

/// Every record of the trace file at Path, CPUs merged by TSC; the file must open and
/// read to its end without an error.
inline std::vector<TraceRecord> readAllFile(const std::string &Path) {
  TraceReader R;
  std::string Why;
  EXPECT_TRUE(R.open(Path, Why)) << Why;
  std::vector<TraceRecord> Out;
  TraceRecord Rec;
  while (R.next(Rec))
    Out.push_back(Rec);
  EXPECT_FALSE(R.failed()) << R.error().str();
  return Out;
}

/// Reads every record of Bytes in the given order.
inline std::vector<TraceRecord> readAll(const std::vector<uint8_t> &Bytes, ReadOrder Order,
                                        TraceError *Err = nullptr, bool *Failed = nullptr) {
  TraceReader R(Order, 4096);
  R.openMemory(Bytes.data(), Bytes.size());
  std::vector<TraceRecord> Out;
  TraceRecord Rec;
  while (R.next(Rec))
    Out.push_back(Rec);
  if (Err)
    *Err = R.error();
  if (Failed)
    *Failed = R.failed();
  return Out;
}

/// A trace with every row of events.def at every word count it allows, timed as its row
/// says (Optional rows both ways), spread over CPUs 0, 1 and 3 in several windows, plus
/// unknown ids with 0..7 words, a record with a bad word count, WRAP_BUFFER padding, and
/// LOST_RECORDS from a full buffer. Deterministic.
inline std::vector<uint8_t> everyShapeTrace() {
  MemoryOutput Out;
  {
    TraceWriter W(Out, 4, 1 << 16);
    uint64_t Tsc[4] = {1000, 1000, 0, 1003};
    const unsigned CpuOf[3] = {0, 1, 3};
    unsigned N = 0;
    auto Words = [](unsigned Seed) {
      std::vector<uint32_t> V(7);
      for (unsigned I = 0; I < 7; ++I)
        V[I] = (Seed + 1) * 0x01010101u * (I + 1) + I;
      return V;
    };
    for (const EventInfo &E : kEvents) {
      if (E.Id == XT_EV_TraceCpuChange || E.Id == XT_EV_LostRecords)
        continue; // written by the writer itself
      for (unsigned Count = E.MinWords; Count <= E.MaxWords; ++Count) {
        const unsigned Cpu = CpuOf[N % 3];
        auto V = Words(N++);
        if (E.Id == XT_EV_VmxExit64) {
          V[0] = 30; // a real exit reason; rip is canonical
          V[2] = 0xffffffff;
        }
        if (E.Id == XT_EV_GtVmExit || E.Id == XT_EV_GtVmEntryFail || E.Id == XT_EV_GtVmEntry)
          V[0] = Cpu;
        if (E.Id == XT_EV_GtVmExit)
          V[1] = 0x80000021; // VM-entry failure, invalid guest state
        if (E.Id == XT_EV_GtExit)
          V[0] = 0x80000021;
        if (E.Id == XT_EV_GtVmEntryFail) {
          V[1] = 2;  // failed guest-state check
          V[2] = 33; // basic exit reason
          V[3] = 3;  // check ID 3 (named by cpu/vmx/vm_entry_checks.def)
        }
        if (E.Tsc != TscRule::Never) {
          Tsc[Cpu] += 7 + N % 5;
          W.recordTsc(Cpu, E.Id, Tsc[Cpu], V.data(), Count);
        }
        if (E.Tsc != TscRule::Always)
          W.record(Cpu, E.Id, V.data(), Count);
        if (N % 17 == 0)
          W.flushCpu(Cpu); // extra windows, out of CPU order
      }
    }
    for (unsigned Count = 0; Count <= 7; ++Count) {
      auto V = Words(Count);
      W.recordTsc(1, 0x00123456 + Count, Tsc[1] += 3, V.data(), Count);
    }
    // VMX_EXIT64 with a wrong word count: shown flagged by the dump.
    const uint32_t Bad[2] = {1, 2};
    W.recordTsc(0, XT_EV_VmxExit64, Tsc[0] += 1, Bad, 2);
    W.flush();
  }
  // LOST_RECORDS: a small dropping buffer on CPU 2.
  {
    MemoryOutput Lossy;
    TraceWriter W(Lossy, 3, 80, FullPolicy::Drop);
    W.setCurrent(2, 1, 0);
    const uint32_t One[1] = {0x00010000};
    for (unsigned I = 0; I < 12; ++I)
      W.recordTsc(2, XT_EV_RunstateRunnableToRunning, 5000 + I, One);
    W.flushCpu(2);
    W.recordTsc(2, XT_EV_VmEntry, 6000, nullptr, 0);
    W.flush();
    Out.Bytes.insert(Out.Bytes.end(), Lossy.Bytes.begin(), Lossy.Bytes.end());
  }
  return Out.Bytes;
}

/// One xen-3.0 record as a file holds it (docs/trace-flavours.md): the 32-bit pcpu, then
/// Xen 3.0.3's 56-byte t_rec {TSC, id, padding 0, five items}.
inline void appendXen30(std::vector<uint8_t> &Out, uint32_t Cpu, uint64_t Tsc,
                        uint32_t Event, std::array<uint64_t, XT30_ITEMS> Items) {
  uint32_t W[1 + XT30_RECORD_WORDS];
  W[0] = Cpu;
  xt30_put(W + 1, Event, Tsc, Items.data());
  for (uint32_t V : W)
    for (unsigned I = 0; I < 4; ++I)
      Out.push_back(uint8_t(V >> (8 * I)));
}

/// A xen-3.0 trace: every row of the xen-3.0 table and an unknown id, on CPUs 0, 1 and
/// 3, written in per-CPU batches as two drain rounds (CPUs 0, 1, 3, then 0, 1) would,
/// so that file order is not TSC order. CPU 0: the launch,
/// an OUT (30) of 250 cycles, a CPUID (10) of 100; CPU 1: the launch, a MOV to CR3 (28) of
/// 280, LOST_RECORDS {2}, an entry failure (0x80000021) of 250; CPU 3: an exit whose entry
/// record never comes (a second exit follows), then RDMSR (31) of 10. Deterministic.
inline std::vector<uint8_t> xen30Trace() {
  std::vector<uint8_t> B;
  const uint32_t Exit = XT30_EV_VmxVmexit, Entry = XT30_EV_VmxVmentry;
  appendXen30(B, 0, 1000, Entry, {0, 0, 0, 0, 0});
  appendXen30(B, 0, 1100, Exit, {0, 0, 0, 0, 0});
  appendXen30(B, 0, 1350, Entry, {30, 0x3f8, 0, 1, 0x41});
  appendXen30(B, 1, 1050, Entry, {0, 0, 0, 0, 0});
  appendXen30(B, 1, 1120, Exit, {0, 0, 0, 0, 0});
  appendXen30(B, 1, 1400, Entry, {28, 0, 3, 0, 0x3});
  appendXen30(B, 1, 1410, XT30_EV_LostRecords, {2, 0, 0, 0, 0});
  appendXen30(B, 1, 1450, Exit, {0, 0, 0, 0, 0});
  appendXen30(B, 3, 1200, Exit, {0, 0, 0, 0, 0});
  appendXen30(B, 3, 1250, 0x00084567, {1, 2, 3, 4, 0xffffffffffffffffull});
  appendXen30(B, 3, 1250, Exit, {0, 0, 0, 0, 0});
  appendXen30(B, 3, 1260, Entry, {31, 0xc0000103, 5, 0, 9});
  appendXen30(B, 0, 1500, Exit, {0, 0, 0, 0, 0});
  appendXen30(B, 0, 1600, Entry, {10, 1, 0, 9, 9});
  appendXen30(B, 1, 1700, Entry, {0x80000021, 9, 9, 9, 9});
  return B;
}

} // namespace vmxsim::trace::testing
