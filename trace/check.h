// `vmxsim trace check HV GT`: every VM exit and VM entry a hypervisor recorded in its
// own XenTrace file (Xen's records: VMX_EXIT/VMX_EXIT64, handler records, VMENTRY) is
// checked against vmxsim's ground truth of the same run (GT_EXIT, GT_RESUME, GT_VMENTRY,
// GT_VMENTRY_FAIL, and GT_VMEXIT in a ground truth written before 2026-12-03; both forms
// of a transition read the same, trace/gt_records.h), CPU by CPU, record by record. A
// GT_RESUME that follows no VM exit of its CPU is a broken ground truth (status 2).
//
// Pairing, per CPU: the k-th VMX_EXIT(64) is the k-th GT_EXIT; the k-th VMENTRY is the
// k-th VM-entry attempt (GT_RESUME, GT_VMENTRY, or GT_VMENTRY_FAIL). Both traces must hold the
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
// with the k-th GT_EXIT (its five items must be 0; its TSC not before the exit), the
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
// paired) and fails it, unless the loss lies outside every exit window of its CPU (no
// exit open, the CPU's next VM transition after the record: Xen traced from boot, its
// buffers full before its first HVM guest; docs/xen-trace.md).
// Without slot watching, Xen's handler records are also checked against the guest's
// RAX/RCX/RDX at the exit (GT_VMEXIT_REGS; trace/exit_operands.h): IOPORT_WRITE's data =
// RAX's low bytes, CPUID's leaf and sub-leaf = EAX and ECX, MSR_READ's and MSR_WRITE's
// index = ECX, MSR_WRITE's value = EDX:EAX, CR_WRITE(64)'s value = the register the
// qualification names when that is RAX, RCX or RDX; and against the exit's other fields:
// NPF's guest-physical address (GT_VMEXIT_ADDR) and qualification, the first
// IOMEM_READ/WRITE(64)'s address after an EPT violation or misconfiguration (the
// faulting access), INTR's vector (GT_VMEXIT_EVENT's interruption information). Each
// only after an exit of its reason (VMMCALL after a VMCALL, HLT after an HLT). Results
// (an IN's data, CPUID's answer, an RDMSR's value, a MOV from CR's value, an IOMEM load's
// data), what only Xen knows (NPF's frame and p2m type, HLT's pending), an IOMEM store's
// data (its source register is not in GT_VMEXIT_REGS), the later IOMEM records of one
// exit (a string instruction's), and VMMCALL's EAX (no GT_VMEXIT_REGS for VMCALL) are
// free. INJ_VIRQ {vector, fake} and INTR_WINDOW {vector, source, queued} (Xen 4.17's
// vmx_intr_assist and vmx_enable_intr_window, written on the way to a VM entry: inside an
// exit or before the vCPU's first entry on the CPU) are checked against the CPU's next VM
// entry's interruption information: INJ_VIRQ's vector is the external interrupt it
// injects (fake 0); INTR_WINDOW's third word the vector it injects, or all ones when it
// injects nothing (the waiting vector and its source are Xen's own). Other HVM records
// (the EMUL subclass's LAPIC timer records, ...) are read but neither checked nor
// counted.
//
// # Every word proven: ground truth with slot watching
//
// When the image publishes its trace slots (trace/slot_layout.h; the bundled core does,
// hvm/vmx/trace_layout.c), the ground truth starts with GT_SLOT_LAYOUT and also holds
// every store to the slots (GT_SLOT_OWN and GT_SLOT_STORE: slot, value, TSC, RIP), every RDTSC/RDTSCP of
// VMX root operation (GT_ROOT_TSC: the value it returned) and the guest registers at each
// exit and entry (GT_VMEXIT_REGS, GT_VMENTRY_REGS, GT_GPR: a register file per CPU, each
// register recorded when it changed). The check then proves every word of the
// hypervisor's trace;
// beyond the pairing above, per CPU:
// - TSCs are exact. Each timed record carries the value one root-mode RDTSC returned,
//   taken in order between the CPU's transitions: a VMX_EXIT64 / TRC_VMX_VMEXIT the
//   first RDTSC after its GT_EXIT whose value is its TSC, a VMENTRY / TRC_VMX_VMENTRY
//   the last one before its GT_RESUME / GT_VMENTRY (no RDTSC may be left between it and the entry),
//   a RUNSTATE record (this core's d1v<cpu>, launch and guest end) one between. The
//   RDTSCs skipped on the way are the hypervisor's own reads of the TSC (the core's
//   virtual timer). The virtual TSC differs at every RDTSC of a CPU, so the value names
//   the instruction exactly; a timed record whose TSC no RDTSC of its window returned
//   fails the check.
// - The slots as the handler left them (the stores before the RDTSC of the record that
//   closes the exit: VMENTRY, TRC_VMX_VMENTRY or RUNSTATE_RUNNING_TO_OFFLINE) equal what
//   the exit's architectural sources give under this core's mapping (hvm/vmx/README.md,
//   "Exit handling"): slot 0 the full exit-reason field; I/O: port, direction, size
//   (qualification) and the data (RAX at the exit for OUT, at the entry for IN, masked
//   to the size); CR access: access type, CR number, register, qualification; CPUID:
//   EAX/ECX at the exit; VMCALL: RAX, RBX at the exit; RDMSR: ECX at the exit, EAX/EDX at
//   the entry, or 13 in slot 4 when the entry injects #GP; WRMSR: ECX, EAX, EDX at the
//   exit, 13 in slot 4 with #GP; exception: vector, error code (GT_VMEXIT_EVENT),
//   qualification; EPT violation: the guest-physical address (GT_VMEXIT_ADDR) and the
//   qualification, with slots 2 and 3 (host frame or MMIO data, p2m type) the
//   hypervisor's own choice; EPT misconfiguration: the guest-physical address;
//   VMX-preemption timer: the guest's activity state the exit saved (GT_ACTIVITY);
//   external interrupt: the vector (GT_VMEXIT_EVENT); INVLPG: the qualification;
//   RDTSC: EDX:EAX at the entry; MOV DR: DR number, direction, register, qualification;
//   XSETBV: ECX, EAX, EDX at the exit, 13 in slot 4 with #GP. A slot the handler does
//   not fill holds the reset value.
// - Modern flavour: exactly one handler record per exit that calls for one, untimed, with
//   the event id the reason and direction give (IOPORT_READ/WRITE by slot 2, CR_READ64 /
//   CR_WRITE64 / CLTS / LMSW64 by slot 1, PF_XEN64 or TRAP by the vector, CPUID, HLT,
//   VMMCALL, MSR_READ/WRITE, NPF for an EPT violation, INTR for an external interrupt,
//   INVLPG64, RDTSC, DR_WRITE; none for PAUSE, WBINVD, XSETBV and the interrupt and NMI
//   windows) and every word equal to the slot it comes from, or to the
//   guest register it comes from (CPUID's EAX..EDX and a CR's value: at the entry);
//   INJ_VIRQ {vector, 0} exactly when the entry injects an external interrupt, INJ_EXC
//   {vector, error code} exactly when it injects an exception, nothing for an NMI (as
//   Xen). At most one INTR_WINDOW before them, never when the entry injects an external
//   interrupt; its third word is the vector the entry injects or all ones, its first two
//   (the vector waiting and its source) are the hypervisor's own.
// - xen-3.0 flavour: each TRC_VMX_VMENTRY's five items equal the slots at its RDTSC (the
//   launch's: the boot value 0).
// - After each entry record, the stores up to the VM entry reset every slot (0 modern,
//   the marker 9 xen-3.0).
// - No record the core does not write for its exits (any other id fails), and nothing
//   on a CPU after its guest's end.
// Fields a format leaves free are listed in one table, kFreeFields in check.cpp
// (freeFields()); nothing else is left unread. Without GT_SLOT_LAYOUT (a Xen or Linux
// run, an older ground truth) only the pairing above is checked.
#pragma once
#include "trace/reader.h"

#include <cstdint>
#include <cstdio>
#include <span>
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
  LagStats ExitLag;    ///< TSC(VMX_EXIT) - TSC(GT_EXIT)
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
  /// LOST_RECORDS outside every exit window (accepted), and the records they lost.
  uint64_t LostOutsideExits = 0, LostRecords = 0;
};

/// A field of a hypervisor record that the format leaves free: nothing about the exit
/// determines what a hypervisor writes there, so no ground truth can prove it, and the
/// check does not read it. The one list of them is kFreeFields in trace/check.cpp.
struct FreeField {
  bool Xen30;     ///< a field of xen-3.0 records (else of modern ones)
  uint32_t Event; ///< the record's event id; 0: every record of the flavour
  /// Bytes [Offset, Offset + Bytes) of the record as stored in the file, counted from
  /// TraceRecord::Offset (xen-3.0: from the pcpu number before the record).
  uint8_t Offset, Bytes;
  const char *Why;
};
std::span<const FreeField> freeFields();

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
