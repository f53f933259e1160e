// Single-bit changes of an imported KVM trace (trace/ftrace_import.h) against the ground
// truth of the same run, through `trace check` (trace/check_kvm.h), by the method of the
// bundled core's mutation test (tests/trace/slot_check_mutation_test.cpp): every bit of the
// file is flipped in turn, each mutant is checked in memory against
// the unchanged ground truth, and it must be caught, with status 1 naming a record (its
// offset) or status 2 (a broken file), unless the bit lies in a field trace/check_kvm.cpp
// lists as free (kvmFreeFields(), each with its reason). A timestamp is free only while the
// changed value stays inside its window, which this file computes on its own from the
// ground truth (not with the check's code): for a kvm_exit and the handler events after it,
// from its VM exit to the CPU's next VM-entry attempt; for a kvm_entry, from the CPU's
// previous VM exit to its VM entry; and between the CPU's previous and next timed records.
// Shared by the test of the committed golden KVM trace, the unit test on the written
// samples and the LinuxKvm test on the real trace.
#pragma once
#include "trace/check_kvm.h"
#include "trace/events.h"
#include "trace/gt_records.h"
#include "trace/reader.h"
#include "trace/writer.h"
#include "trace/xentrace.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <map>
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

/// One record of the imported file, in file order, with what the free-field rules need.
struct KvmSpan {
  trace::TraceRecord Rec;
  uint64_t End = 0;          ///< the next record's offset (or the file's size)
  bool Kvm = false;          ///< a record of the import (not a window header)
  uint64_t Lo = 0, Hi = 0;   ///< its timestamp's window (timed KVM records)
  uint32_t ExitReason = ~0u; ///< the full reason of the exit it follows (~0: none)
  uint64_t ExitQual = 0;
};

/// The records of Kvm in file order, each with its window from Gt (see the top).
inline std::vector<KvmSpan> kvmSpans(const std::vector<uint8_t> &Kvm,
                                     const std::vector<uint8_t> &Gt) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  // The ground truth's transitions per CPU, in time order.
  struct Trans {
    bool Exit;
    uint64_t Tsc;
    uint32_t Reason;
    uint64_t Qual;
  };
  std::map<uint16_t, std::vector<Trans>> Gts;
  {
    trace::TraceReader R;
    R.openMemory(Gt.data(), Gt.size());
    trace::TraceRecord Rec;
    while (R.next(Rec)) {
      trace::GtExitFields X;
      if (trace::gtExitOf(Rec, X))
        Gts[Rec.Cpu].push_back({true, Rec.Tsc, X.Reason, X.Qual});
      else if (trace::isGtEntry(Rec.Event) || Rec.Event == XT_EV_GtVmEntryFail)
        Gts[Rec.Cpu].push_back({false, Rec.Tsc, 0, 0});
    }
  }
  std::vector<KvmSpan> Out;
  {
    trace::TraceReader R(trace::ReadOrder::File);
    R.openMemory(Kvm.data(), Kvm.size());
    trace::TraceRecord Rec;
    while (R.next(Rec)) {
      if (!Out.empty())
        Out.back().End = Rec.Offset;
      KvmSpan S;
      S.Rec = Rec;
      S.End = Kvm.size();
      S.Kvm = Rec.Event != XT_EV_TraceCpuChange;
      Out.push_back(S);
    }
  }
  // Walk each CPU's records and transitions together: the k-th kvm_exit is the k-th VM
  // exit, the k-th kvm_entry the k-th entry attempt.
  struct Walk {
    size_t Exits = 0, Entries = 0;
    bool InExit = false;
    const Trans *Exit = nullptr;
  };
  std::map<uint16_t, Walk> Walks;
  // The index in the CPU's transitions of its n-th exit / entry.
  const auto nth = [&](uint16_t Cpu, bool Exit, size_t N) -> ptrdiff_t {
    const std::vector<Trans> &T = Gts[Cpu];
    for (size_t I = 0; I < T.size(); ++I)
      if (T[I].Exit == Exit && N-- == 0)
        return ptrdiff_t(I);
    return -1;
  };
  for (KvmSpan &S : Out) {
    if (!S.Kvm)
      continue;
    const uint16_t Cpu = S.Rec.Cpu;
    Walk &W = Walks[Cpu];
    const std::vector<Trans> &T = Gts[Cpu];
    S.Lo = 0;
    S.Hi = kMax;
    // The exit window of exit index X: [its TSC, the next entry attempt's].
    const auto exitWindow = [&](ptrdiff_t X) {
      S.Lo = T[size_t(X)].Tsc;
      for (size_t I = size_t(X) + 1; I < T.size(); ++I)
        if (!T[I].Exit) {
          S.Hi = T[I].Tsc;
          break;
        }
    };
    if (S.Rec.Event == XT_EV_VmxExit64) {
      const ptrdiff_t X = nth(Cpu, true, W.Exits++);
      W.InExit = true;
      W.Exit = X >= 0 ? &T[size_t(X)] : nullptr;
      if (X >= 0)
        exitWindow(X);
    } else if (S.Rec.Event == XT_EV_VmEntry) {
      const ptrdiff_t E = nth(Cpu, false, W.Entries++);
      W.InExit = false;
      W.Exit = nullptr;
      if (E >= 0) {
        S.Hi = T[size_t(E)].Tsc;
        for (ptrdiff_t I = E - 1; I >= 0; --I)
          if (T[size_t(I)].Exit) {
            S.Lo = T[size_t(I)].Tsc;
            break;
          }
      }
    } else if (S.Rec.HasTsc && S.Rec.Event != XT_EV_KvmOther) {
      if (W.InExit && W.Exit) {
        exitWindow(W.Exit - T.data());
      } else {
        const ptrdiff_t E = nth(Cpu, false, W.Entries);
        if (E >= 0)
          S.Hi = T[size_t(E)].Tsc;
      }
    }
    if (W.Exit) {
      S.ExitReason = W.Exit->Reason;
      S.ExitQual = W.Exit->Qual;
    }
  }
  // And between the CPU's previous and next timed records.
  std::map<uint16_t, uint64_t> Prev;
  for (KvmSpan &S : Out)
    if (S.Kvm && S.Rec.HasTsc) {
      S.Lo = std::max(S.Lo, Prev[S.Rec.Cpu]);
      Prev[S.Rec.Cpu] = S.Rec.Tsc;
    }
  std::map<uint16_t, uint64_t> Next;
  for (auto It = Out.rbegin(); It != Out.rend(); ++It)
    if (It->Kvm && It->Rec.HasTsc) {
      auto N = Next.find(It->Rec.Cpu);
      if (N != Next.end())
        It->Hi = std::min(It->Hi, N->second);
      Next[It->Rec.Cpu] = It->Rec.Tsc;
    }
  return Out;
}

/// Whether flipping bit Bit of byte Byte of the file lands in a free field
/// (trace::kvmFreeFields()); Timestamp is set when it is a timestamp inside its window.
inline bool kvmFreeBit(const std::vector<KvmSpan> &Spans, uint64_t Byte, unsigned Bit,
                       bool &Timestamp) {
  Timestamp = false;
  auto It = std::upper_bound(Spans.begin(), Spans.end(), Byte,
                             [](uint64_t B, const KvmSpan &S) { return B < S.Rec.Offset; });
  if (It == Spans.begin())
    return false;
  const KvmSpan &S = *--It;
  if (!S.Kvm || Byte >= S.End)
    return false;
  const trace::TraceRecord &R = S.Rec;
  const uint64_t TscAt = R.Offset + 4, WordsAt = TscAt + (R.HasTsc ? 8 : 0);
  if (Byte < TscAt)
    return false; // the header: event id, word count, TSC flag
  for (const trace::KvmFreeField &F : trace::kvmFreeFields()) {
    if (F.Event && F.Event != R.Event)
      continue;
    if (F.Timestamp) {
      if (!R.HasTsc || Byte >= WordsAt)
        continue;
      const uint64_t New = R.Tsc ^ uint64_t(1) << ((Byte - TscAt) * 8 + Bit);
      if (New >= S.Lo && New <= S.Hi)
        return Timestamp = true;
      continue;
    }
    if (Byte < WordsAt)
      continue;
    const uint64_t Word = (Byte - WordsAt) / 4;
    if (Word < F.Word || Word >= uint64_t(F.Word) + F.Words)
      continue;
    switch (F.When) {
    case trace::KvmFreeWhen::Always:
      return true;
    case trace::KvmFreeWhen::Read:
      if (R.Words[0] == 0)
        return true;
      break;
    case trace::KvmFreeWhen::AfterEptMisconfig: {
      const uint32_t New = R.Words[Word] ^ 1u << ((Byte - WordsAt) % 4 * 8 + Bit);
      if (S.ExitReason != ~0u && (S.ExitReason & 0xffff) == 49 && New <= 2)
        return true;
      break;
    }
    case trace::KvmFreeWhen::CrFromOtherGpr:
      // SDM Vol. 3C, "Exit Qualification for Control-Register Accesses": bits 5:4 the
      // access type (0 MOV to CR), 11:8 the register.
      if (S.ExitReason != ~0u && (S.ExitReason & 0xffff) == 28 && (S.ExitQual >> 4 & 3) == 0 &&
          (S.ExitQual >> 8 & 15) >= 3)
        return true;
      break;
    case trace::KvmFreeWhen::InWindow:
      break;
    }
  }
  return false;
}

struct KvmMutationResult {
  uint64_t Flipped = 0, Free = 0, FreeTimestamps = 0, Checked = 0, Caught = 0, Broken = 0;
  std::vector<std::string> NotCaught; ///< one line per checked mutant the check let through
  std::vector<std::string> Unnamed;   ///< status-1 mutants whose problem names no record
  double rate() const { return Checked ? 100.0 * double(Caught) / double(Checked) : 0.0; }
  std::string text(const char *Name) const {
    return fmt::format("{}: {} bits flipped, {} in free fields ({} of them timestamps inside "
                       "their windows); {} of {} checked bits caught ({:.2f}%), {} of them as "
                       "broken files",
                       Name, Flipped, Free, FreeTimestamps, Caught, Checked, rate(), Broken);
  }
};

/// Flips every bit of the imported trace Kvm in turn and checks each mutant against Gt,
/// which the unchanged trace must match.
inline KvmMutationResult mutateKvmFile(const std::vector<uint8_t> &Kvm,
                                       const std::vector<uint8_t> &Gt) {
  KvmMutationResult Res;
  const std::vector<KvmSpan> Spans = kvmSpans(Kvm, Gt);
  std::vector<uint8_t> M = Kvm;
  for (uint64_t B = 0; B < Kvm.size() * 8; ++B) {
    const uint64_t Byte = B / 8;
    const unsigned Bit = unsigned(B % 8);
    ++Res.Flipped;
    bool Timestamp = false;
    if (kvmFreeBit(Spans, Byte, Bit, Timestamp)) {
      ++Res.Free;
      Res.FreeTimestamps += Timestamp;
      continue;
    }
    ++Res.Checked;
    M[Byte] ^= uint8_t(1u << Bit);
    const trace::KvmCheckResult R = checkKvm(M, Gt);
    M[Byte] ^= uint8_t(1u << Bit);
    if (R.Ok) {
      Res.NotCaught.push_back(fmt::format("bit {} of byte {:#x} still matches", Bit, Byte));
      continue;
    }
    ++Res.Caught;
    Res.Broken += R.ReadError;
    if (!R.ReadError && R.Problem.find("offset 0x") == std::string::npos)
      Res.Unnamed.push_back(fmt::format("bit {} of byte {:#x}: {}", Bit, Byte, R.Problem));
  }
  return Res;
}

/// Flips every bit of Kvm (mutateKvmFile), prints the catch rate under Name, and fails the
/// test for each checked bit not caught and each status-1 mutant that names no record.
inline KvmMutationResult expectEveryCheckedBitCaught(const std::vector<uint8_t> &Kvm,
                                                     const std::vector<uint8_t> &Gt,
                                                     const char *Name) {
  const KvmMutationResult M = mutateKvmFile(Kvm, Gt);
  for (const std::string &Line : M.NotCaught)
    ADD_FAILURE() << Name << ": not caught: " << Line;
  for (const std::string &Line : M.Unnamed)
    ADD_FAILURE() << Name << ": status 1 without naming a record: " << Line;
  std::printf("%s\n", M.text(Name).c_str());
  EXPECT_EQ(M.Flipped, Kvm.size() * 8);
  EXPECT_EQ(M.Caught, M.Checked);
  return M;
}

} // namespace vmxsim::test
