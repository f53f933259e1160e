// Single-bit changes of an imported KVM trace (trace/ftrace_import.h) against the ground
// truth of the same run, through trace/check_kvm.h: every bit of every payload word of every
// record is flipped in turn, except in the free fields check_kvm.h lists (values that are not
// in the ground truth), and each mutant must fail the check. Shared by the unit test on the
// written samples and the LinuxKvm test on the real trace.
#pragma once
#include "trace/check_kvm.h"
#include "trace/dump.h"
#include "trace/events.h"
#include "trace/reader.h"
#include "trace/writer.h"

#include <string>
#include <vector>

namespace vmxsim::test {

/// Every record of a trace in memory, CPUs merged by TSC.
inline std::vector<trace::TraceRecord> traceRecords(const std::vector<uint8_t> &Bytes) {
  trace::TraceReader R;
  R.openMemory(Bytes.data(), Bytes.size());
  std::vector<trace::TraceRecord> Out;
  trace::TraceRecord Rec;
  while (R.next(Rec))
    Out.push_back(Rec);
  return Out;
}

/// The records written again (one buffer per CPU, as the import writes them).
inline std::vector<uint8_t> rewriteTrace(const std::vector<trace::TraceRecord> &Recs) {
  unsigned Cpus = 1;
  for (const trace::TraceRecord &R : Recs)
    Cpus = std::max(Cpus, unsigned(R.Cpu) + 1);
  trace::MemoryOutput Out;
  trace::TraceWriter W(Out, Cpus);
  for (const trace::TraceRecord &R : Recs) {
    if (R.HasTsc)
      W.recordTsc(R.Cpu, R.Event, R.Tsc, R.Words, R.NumWords);
    else
      W.record(R.Cpu, R.Event, R.Words, R.NumWords);
  }
  W.flush();
  return Out.Bytes;
}

inline trace::KvmCheckResult checkKvm(const std::vector<uint8_t> &Kvm,
                                      const std::vector<uint8_t> &Gt) {
  trace::TraceReader K, G;
  K.openMemory(Kvm.data(), Kvm.size());
  G.openMemory(Gt.data(), Gt.size());
  return trace::checkKvmAgainstGroundTruth(K, G);
}

/// Whether bit Bit of payload word Word of record I is in a free field (check_kvm.h).
inline bool kvmFreeBit(const std::vector<trace::TraceRecord> &Recs, size_t I, unsigned Word,
                       unsigned Bit) {
  const trace::TraceRecord &R = Recs[I];
  switch (R.Event) {
  case XT_EV_KvmExitInfo:
    return Word == 0; // vcpu
  case XT_EV_KvmEntryInfo:
    return Word == 0 || Word == 3; // vcpu, immediate_exit
  case XT_EV_KvmPio:
    return Word == 4 && R.Words[0] == 0; // an IN's value
  case XT_EV_KvmMmio: {
    if (Word == 1 || Word >= 4) // len, val
      return true;
    // After an EPT misconfiguration, the type is free among 0, 1 and 2.
    size_t E = I;
    while (E > 0 && (Recs[E].Event != XT_EV_VmxExit64 || Recs[E].Cpu != R.Cpu))
      --E;
    return Word == 0 && (Recs[E].Words[0] & 0xffff) == 49 && Bit < 2 &&
           (R.Words[0] ^ (1u << Bit)) <= 2;
  }
  case XT_EV_KvmMsr:
    return Word == 4 || (Word >= 2 && Word <= 3 && R.Words[0] == 0); // #GP, a read's value
  case XT_EV_KvmCr:
    return Word >= 2 && R.Words[0] == 0; // a read's value (a write's from a GPR other than
                                         // RAX/RCX/RDX is free too: not in these traces)
  case XT_EV_KvmCpuid:
    return Word >= 2; // KVM's answer and flags
  case XT_EV_KvmInjVirq:
    return Word == 2; // reinjected
  case XT_EV_KvmOther:
    return true; // the line number
  default:
    return false;
  }
}

struct KvmMutationResult {
  unsigned Mutants = 0;
  std::vector<std::string> NotCaught; ///< one line per mutant the check let through
};

/// Flips every non-free payload bit of the imported trace Kvm in turn and checks each
/// mutant against Gt (which the unchanged trace must match).
inline KvmMutationResult mutateKvmPayload(const std::vector<uint8_t> &Kvm,
                                          const std::vector<uint8_t> &Gt) {
  KvmMutationResult Res;
  const std::vector<trace::TraceRecord> Recs = traceRecords(Kvm);
  for (size_t I = 0; I < Recs.size(); ++I)
    for (unsigned Word = 0; Word < Recs[I].NumWords; ++Word)
      for (unsigned Bit = 0; Bit < 32; ++Bit) {
        if (kvmFreeBit(Recs, I, Word, Bit))
          continue;
        std::vector<trace::TraceRecord> M = Recs;
        M[I].Words[Word] ^= 1u << Bit;
        ++Res.Mutants;
        if (checkKvm(rewriteTrace(M), Gt).Ok)
          Res.NotCaught.push_back(trace::formatRecord(Recs[I], 0) + " word " +
                                  std::to_string(Word) + " bit " + std::to_string(Bit));
      }
  return Res;
}

} // namespace vmxsim::test
