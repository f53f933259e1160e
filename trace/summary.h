// `vmxsim trace summary`: what xenalyze --summary tells about VM exits, and more, from
// one streaming pass over a XenTrace file (trace/reader.h).
//
// Two kinds of trace are understood, told apart by their records:
// - a hypervisor's trace (Xen's, or hvm/'s): an exit is VMX_EXIT/VMX_EXIT64 (timed), its
//   handler records (untimed) and the next VMENTRY (timed) on the same CPU; cycles per
//   exit = TSC(VMENTRY) - TSC(VMX_EXIT) (format doc, sections 6-8). The vCPU is the one
//   the last runstate record made running on that CPU (section 5); with no runstate
//   record, vCPU "d?v<cpu>" (unknown domain).
// - vmxsim's ground truth (class 0x400): an exit is GT_EXIT (GT_VMEXIT) and the next
//   GT_RESUME, GT_VMENTRY or GT_VMENTRY_FAIL of the same CPU; the vCPU is the CPU (one
//   guest per logical processor).
// - a xen-3.0 trace (docs/trace-flavours.md): an exit is VMX_VMEXIT (0x00081001) and the
//   next VMX_VMENTRY (0x00081002) on the same CPU; the reason is slot 0 of that entry
//   record, ports (reason 30: slot 1, slot 2 = 1 for IN) and MSRs (31/32: slot 1) come
//   from its slots too; cycles = TSC(entry record) - TSC(exit record). An exit whose entry
//   record never comes has no known reason: it is counted under kUnknownExitReason. The
//   vCPU is "d?v<cpu>" (the flavour has no runstate records).
// Time in guest: from a VM entry to the next exit of that CPU; time in the hypervisor:
// from an exit to the next entry (the exit's cycles). An exit with no closing entry
// before the end of the trace is counted as an exit but has no cycles.
#pragma once
#include "trace/reader.h"

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace vmxsim::trace {

/// Cycle statistics of a set of samples. Median and P99 are exact order statistics:
/// the sample of rank ceil(q * Count) (1-based), i.e. the nearest-rank definition.
struct CycleStats {
  uint64_t Count = 0; ///< samples (exits with a closing entry)
  uint64_t Total = 0, Min = 0, Max = 0, Median = 0, P99 = 0;
  double Avg = 0;     ///< Total / Count, 0 when Count is 0
};

/// The row of exits whose reason the trace does not say (a xen-3.0 exit record with no
/// entry record after it); printed as reason "?" ("unknown"). No basic reason (16 bits)
/// is this value.
inline constexpr uint32_t kUnknownExitReason = 0xffffffff;

/// One basic exit reason (SDM Vol. 3C, Appendix C) within a scope.
struct ReasonRow {
  uint32_t Reason = 0;     ///< basic exit reason (bits 0-15), or kUnknownExitReason
  uint64_t Exits = 0;      ///< exits with this reason, closed or not
  double Share = 0;        ///< Exits / scope's total exits, 0..1
  CycleStats Cycles;       ///< exit-to-entry cycles of the closed ones
};

/// An I/O port or MSR that caused exits: from IOPORT_READ/IOPORT_WRITE and
/// MSR_READ/MSR_WRITE handler records (hypervisor traces), or from the exit
/// qualification / not available (ground truth has no handler records: ports come from
/// the I/O exit qualification, bits 31:16; MSRs are not known and the table is empty).
struct AccessRow {
  uint32_t Key = 0; ///< port or MSR index
  uint64_t Reads = 0, Writes = 0;
  uint64_t Cycles = 0; ///< total exit cycles spent on it
};

/// One CPU or one vCPU.
struct ScopeSummary {
  std::string Name; ///< "cpu0", or "d1v0" (hypervisor traces) / "v0" (ground truth)
  uint16_t Cpu = 0; ///< the CPU number, for the Cpus scopes
  uint64_t Exits = 0;
  uint64_t GuestCycles = 0;      ///< entry -> next exit
  uint64_t HypervisorCycles = 0; ///< exit -> next entry
  CycleStats AllExits;           ///< every closed exit of the scope
  std::vector<ReasonRow> Reasons; ///< by Exits descending, then Reason ascending
  std::vector<AccessRow> Ports;   ///< by Reads+Writes descending, then Key ascending
  std::vector<AccessRow> Msrs;    ///< likewise
};

enum class TraceKind : uint8_t { Empty, Hypervisor, GroundTruth, Mixed };

struct TraceSummary {
  TraceKind Kind = TraceKind::Empty;
  TraceFlavour Flavour = TraceFlavour::Modern; ///< the file's (trace/reader.h)
  uint64_t Records = 0;
  uint64_t LostRecords = 0;
  uint64_t FirstTsc = 0, LastTsc = 0;
  std::vector<ScopeSummary> Cpus;  ///< ascending CPU number
  std::vector<ScopeSummary> Vcpus; ///< ascending (domain, vcpu)
  bool Failed = false;             ///< the trace ended at an error (Error says where)
  TraceError Error;
};

/// One exit, once its fate is known (SummaryOptions::OnExit).
struct ExitEvent {
  uint16_t Cpu = 0;
  uint32_t Reason = 0;  ///< basic exit reason
  uint64_t ExitTsc = 0; ///< TSC of the exit record
  bool Closed = false;  ///< a VM entry (or failed entry) of its CPU followed
  uint64_t Cycles = 0;  ///< exit to entry, when Closed
};

struct SummaryOptions {
  unsigned TopAccesses = 10; ///< rows kept in Ports and Msrs
  /// Called for every exit when it is closed by the next entry of its CPU, or found
  /// unclosed (another exit came first, or the trace ended; those at the end in
  /// ascending CPU order). The report's plots use it, so they pair exits and entries
  /// by exactly the rules above, in the same pass.
  std::function<void(const ExitEvent &)> OnExit;
};

/// Reads every record of Reader (merged order) and summarises it.
TraceSummary summarizeTrace(TraceReader &Reader, const SummaryOptions &O = {});

/// Exact order statistic helper used by summarizeTrace (Samples is reordered).
CycleStats cycleStats(std::vector<uint64_t> &Samples);

enum class SummaryFormat : uint8_t { Text, Json, Csv };
void printSummary(const TraceSummary &S, SummaryFormat F, std::FILE *Out);

/// `vmxsim trace summary FILE`: prints the summary of Path to Out. A file that cannot be
/// opened, or a trace that ends at an error (after the summary of the records before it),
/// prints one line "vmxsim: error: PATH: offset 0x..: what" to Err. Returns the exit
/// status: 0, or 2 for any error.
int traceSummaryCommand(const std::string &Path, SummaryFormat F, std::FILE *Out,
                        std::FILE *Err, const TraceReader::ProgressFn &Progress = {});

} // namespace vmxsim::trace
