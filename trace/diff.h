// `vmxsim trace diff A B`: where two XenTrace files stop agreeing.
//
// Record mode (default): each CPU's records, in merged order (trace/reader.h), are
// compared one by one with the same CPU's records of the other file; a record is its
// event id, TSC flag, TSC value and payload words (not its file offset: windows may be
// cut differently). The FIRST divergence is the one whose record comes first in A's merged
// order (a divergence where A has no more records of that CPU comes after every record of
// A, ordered by B's merged order). Comparing per CPU rather than in merged order keeps a
// change of interleaving between CPUs — e.g. from one TSC that moved — from showing up as
// a divergence of its own; two records swapped on one CPU diverge at the first of them.
//
// --ignore-tsc compares what another implementation of the same hypervisor (or real
// hardware) can reproduce, leaving out:
//   - TSC values (the flag is still compared),
//   - payload words that are times: the RDTSC handler record's value, the two 64-bit
//     counters of 5-word runstate records,
//   - LOST_RECORDS records (skipped: how many records a ring drops depends on its size and
//     on when the daemon drains it; they are not counted in the per-CPU index either).
// A xen-3.0 record (docs/trace-flavours.md) is its id, TSC and five items; records of
// different flavours never agree, so two files of different flavours diverge at their
// first record.
// Never compared in either mode: the framing — TRACE_CPU_CHANGE windows and WRAP_BUFFER
// padding (the merged reader does not return them) — which depends on buffer sizes and
// drain timing, not on what the hypervisor did.
//
// Distribution mode: the two summaries (trace/summary.h) are compared scope by scope
// (per CPU and per vCPU) and reason by reason: exit counts always, and with a tolerance
// the cycle statistics avg, median and p99 (relative difference |a-b| / max(a,b)).
// --cycles is a view, not a comparison: per scope and reason, both sides' exits and mean
// handler cycles and their ratio; status 0 unless a file cannot be read (2).
#pragma once
#include "trace/reader.h"
#include "trace/summary.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace vmxsim::trace {

struct DiffOptions {
  bool IgnoreTsc = false;
  unsigned Context = 3;      ///< equal records shown before the divergence
  bool Distribution = false; ///< compare summaries instead of records
  bool Cycles = false;       ///< print the handler cycles of both per reason (a view)
  double Tolerance = -1;     ///< distribution mode: < 0 compares counts only
};

/// One record of one file as the diff saw it; Delta: TSC minus the CPU's previous timed
/// TSC in that file (for trace/dump.h's formatRecord).
struct DiffRecord {
  TraceRecord Rec;
  uint64_t Delta = 0;
};

struct RecordDivergence {
  uint16_t Cpu = 0;
  uint64_t Index = 0;               ///< 0-based index among that CPU's compared records
  bool HaveA = false, HaveB = false; ///< false: that file has no more records of the CPU
  DiffRecord A, B;
  uint64_t CountA = 0, CountB = 0; ///< when a file ends: its records of the CPU
  /// Up to DiffOptions::Context equal records of the CPU before it, oldest first.
  std::vector<DiffRecord> ContextA, ContextB;
};

struct RecordDiff {
  bool Diverged = false;
  RecordDivergence First;
  uint64_t RecordsA = 0, RecordsB = 0; ///< records compared (read before stopping)
  bool FailedA = false, FailedB = false;
  TraceError ErrorA, ErrorB;
};

/// Compares the records of A and B (both opened in merged order).
RecordDiff diffRecords(TraceReader &A, TraceReader &B, const DiffOptions &O);
/// "identical (N records)" or the divergence with its context.
void printRecordDiff(const RecordDiff &D, std::FILE *Out);

/// One difference between two summaries.
struct DistributionDifference {
  std::string Scope;   ///< "cpu0", "d1v0"
  uint32_t Reason = 0;
  std::string Field;   ///< "exits", "avg", "median" or "p99"
  double A = 0, B = 0;
};

std::vector<DistributionDifference> diffDistributions(const TraceSummary &A,
                                                      const TraceSummary &B,
                                                      const DiffOptions &O);
void printDistributionDiff(const TraceSummary &A, const TraceSummary &B,
                           const std::vector<DistributionDifference> &D, std::FILE *Out);
/// --cycles: per scope and exit reason, the exits and mean handler cycles (exit to next
/// entry) of A and of B and the ratio B / A: how another machine's (Bochs', real
/// hardware's) exit costs compare with vmxsim's.
void printCyclesView(const TraceSummary &A, const TraceSummary &B, std::FILE *Out);

/// `vmxsim trace diff A B`: status 0 identical, 1 different, 2 error (a file that cannot
/// be opened or that ends at an error: "vmxsim: error: PATH: offset 0x..: what" on Err;
/// a divergence found before the error is still printed).
/// Progress, if set, is given to both readers.
int traceDiffCommand(const std::string &PathA, const std::string &PathB, const DiffOptions &O,
                     std::FILE *Out, std::FILE *Err,
                     const TraceReader::ProgressFn &Progress = {});

} // namespace vmxsim::trace
