// `vmxsim trace check HV GT`: every VM exit and VM entry a hypervisor recorded in its
// own XenTrace file (Xen's records: VMX_EXIT/VMX_EXIT64, handler records, VMENTRY) is
// checked against vmxsim's ground truth of the same run (GT_VMEXIT, GT_VMENTRY,
// GT_VMENTRY_FAIL; trace/ground_truth.h), CPU by CPU, record by record.
//
// Pairing, per CPU: the k-th VMX_EXIT(64) is the k-th GT_VMEXIT; the k-th VMENTRY is the
// k-th VM-entry attempt (GT_VMENTRY, or GT_VMENTRY_FAIL). Both traces must hold the
// same number of each. For every pair:
// - exit: the same full exit-reason field (bit 31 included) and the same guest RIP
//   (VMX_EXIT carries RIP bits 0-31 only); the hypervisor's TSC is not before the
//   ground truth's (it reads the TSC after the exit happened). Its lag, TSC(hypervisor)
//   - TSC(ground truth), is the cycles between the VM exit and the hypervisor's RDTSC.
// - entry: the hypervisor's TSC is not after the ground truth's; the lead, TSC(ground
//   truth) - TSC(hypervisor), is the cycles from its RDTSC to the VM entry.
// - handler records that say something the exit qualification also says (SDM Vol. 3C,
//   "Exit Qualification for I/O Instructions" / "... for Control-Register Accesses"):
//   IOPORT_READ/WRITE's port and direction, CR_READ/CR_WRITE's CR number, LMSW/CLTS's
//   access type.
// A xen-3.0 trace (docs/trace-flavours.md) is paired the same way: the k-th VMX_VMEXIT
// with the k-th GT_VMEXIT (its five items must be 0; its TSC not before the exit), the
// k-th VMX_VMENTRY with the k-th entry attempt (TSC not after it). The exit's data
// arrives with the entry record after it: slot 0 must be the ground truth's full
// exit-reason field, and the slots this core derives from the exit qualification must
// equal it (hvm/vmx/README.md): for I/O (30) slot 1 the port, 2 the direction (1 = IN),
// 3 the size in bytes; for CR accesses (28) slot 1 the access type, 2 the CR number, 3
// the general register, 4 the qualification; for exceptions (0) slot 4 the
// qualification. Such entry records count as handler records checked. The slots of the
// first entry (no exit before it) are not compared; an exit whose entry record never
// comes (the guest ended there) is paired by its TSC only: its reason is unknown.
// Both TSCs are the same clock on vmxsim (RDTSC in VMX root operation reads the virtual
// TSC that stamps the ground truth), so lags and leads are exact, and equal run after
// run. LOST_RECORDS in the hypervisor's trace ends the check (nothing after it can be
// paired) and fails it.
#pragma once
#include "trace/reader.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace vmxsim::trace {

struct LagStats {
  uint64_t Count = 0, Total = 0, Min = 0, Max = 0;
  void add(uint64_t V);
};

struct CpuCheck {
  uint16_t Cpu = 0;
  uint64_t Exits = 0, Entries = 0, HandlerRecords = 0;
  LagStats ExitLag;    ///< TSC(VMX_EXIT) - TSC(GT_VMEXIT)
  LagStats EntryLead;  ///< TSC(GT entry attempt) - TSC(VMENTRY)
};

struct CheckResult {
  bool Ok = true;
  /// The first disagreement, one line ("cpu0 exit 17: ..."), empty when Ok.
  std::string Problem;
  /// The problem is that a file is corrupt or truncated (not a disagreement).
  bool ReadError = false;
  /// The problem is that a file is not of the kind its position expects (a ground truth
  /// given as the hypervisor's trace, or the other way round): bad input, like ReadError.
  bool WrongKind = false;
  std::vector<CpuCheck> Cpus; ///< ascending CPU number
  uint64_t HypervisorRecords = 0, GroundTruthRecords = 0;
};

/// Reads both traces to the end (or to the first disagreement) and pairs their records.
/// A reader error in either file fails the check with ReadError set ("hypervisor trace:
/// offset ..."), whichever record first noticed the missing data. Each file must be of
/// its kind: ground-truth records (vmxsim's class) in the hypervisor's trace, or HVM
/// records in the ground truth, fail with WrongKind. A check that paired no exit and no
/// entry has not agreed on anything: it fails, saying so.
CheckResult checkAgainstGroundTruth(TraceReader &Hypervisor, TraceReader &GroundTruth);

/// Prints the result: the problem or "match", then one line per CPU with the counts and
/// the exit lags and entry leads (min/mean/max cycles). A bad input (ReadError,
/// WrongKind) is not printed as "mismatch": the caller reports R.Problem as an error, and
/// this prints only the per-CPU lines of what was checked before it.
void printCheck(const CheckResult &R, std::FILE *Out);

} // namespace vmxsim::trace
