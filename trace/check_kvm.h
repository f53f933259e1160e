// `vmxsim trace check KVM GT` for a trace imported from KVM's ftrace events
// (trace/ftrace_import.h; its first record is KVM_FTRACE, by which `trace check` routes
// here): every kvm_exit and kvm_entry and KVM's handler events checked against vmxsim's
// ground truth of the same run, CPU by CPU (ftrace's CPU number is vmxsim's CPU).
//
// Pairing, per CPU: the k-th kvm_exit (VMX_EXIT64 + KVM_EXIT_INFO) is the k-th GT_EXIT,
// the k-th kvm_entry (VMENTRY + KVM_ENTRY_INFO) the k-th VM-entry attempt (GT_RESUME,
// GT_VMENTRY or GT_VMENTRY_FAIL); both files must hold the same number of each. Exact (equal words):
// - kvm_exit: the full exit reason, the guest RIP, info1 = the exit qualification, info2 =
//   the IDT-vectoring information, intr_info = the VM-exit interruption information and
//   error_code = its error code when intr_info says one was delivered (valid, bit 31, and
//   deliver-error-code, bit 11), else 0 (KVM 6.1's vmx_get_exit_info; all three 0 after a
//   failed VM entry);
// - kvm_entry: the RIP the entry resumes at (not for a failed entry: GT_VMENTRY_FAIL has
//   none);
// - handler events, each against the exit it follows (SDM Vol. 3C, "Exit Qualification
//   for I/O Instructions", "... for Control-Register Accesses", "... for EPT Violations")
//   and the guest's RAX/RCX/RDX at it (GT_VMEXIT_REGS):
//   kvm_pio only after an I/O exit: direction, port, size (1 + bits 2:0), count 1 unless
//     the exit is a string instruction, and an OUT's value = RAX's low `size` bytes;
//   kvm_mmio only after an EPT violation or misconfiguration: gpa = the exit's guest-
//     physical address; after an EPT violation a write is a data write (qualification
//     bit 1) and a read a data read (bit 0);
//   kvm_msr only after RDMSR (read) or WRMSR (write): index = ECX, a write's value = EDX:EAX,
//     its #GP flag 1 exactly when the next VM entry injects #GP (type 3, vector 13);
//   kvm_cr only after a CR access: the CR number (bits 3:0), write for MOV to CR and LMSW
//     and CLTS, read for MOV from CR; a MOV to CR's value when its register is RAX, RCX or
//     RDX;
//   kvm_cpuid only after CPUID: function = EAX, index = ECX;
//   kvm_inj_virq: the next VM entry injects it: valid, its vector, type 0 (external
//     interrupt) or 4 (software interrupt, "Soft/INTn");
//   KVM_FTRACE's counts: events = the event records, unknown = KVM_OTHER records, cpus
//   = the CPUs with records.
//   every VM entry that injects an external or software interrupt (VM-entry interruption
//     information valid, type 0 or 4) has a kvm_inj_virq since the CPU's previous
//     kvm_entry (KVM 6.1 traces every such injection, reinjections included, in
//     vmx_inject_irq);
// Free (not in the ground truth, so not checked): vcpu numbers, immediate_exit, an IN's
// and an RDMSR's and MOV from CR's value (results, which enter the guest later), MMIO
// len and val and after an EPT misconfiguration its type, KVM's CPUID answer and flags,
// kvm_inj_virq's reinjected flag, KVM_OTHER's line number: the
// one table of them is kvmFreeFields() (kKvmFreeFields in check_kvm.cpp), with the reasons.
// Windows (ftrace stamps an event when it reserves ring-buffer space, a point vmxsim cannot
// name, so no timestamp is exact): a kvm_exit's and its handler events' timestamps lie
// between that VM exit and the next VM-entry attempt of the CPU (the last exit: after the
// exit); a kvm_entry's between the CPU's previous VM exit (or the start) and its VM entry;
// and on each CPU the timestamps never go back (ftrace's per-CPU ring buffer is in time
// order; the import refuses a trace whose timestamps go back on a CPU, and the trace
// reader a file in which they do: ReadError).
// A ground truth without GT_VMEXIT_REGS (an older vmxsim's) is bad input (ReadError) at
// the first handler event that needs the registers.
// The TSC is the same clock on both sides (ftrace's x86-tsc clock reads the TSC in VMX root
// operation: vmxsim's virtual TSC), so these are exact comparisons, equal run after run.
#pragma once
#include "trace/reader.h"

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace vmxsim::trace {

struct KvmCycles {
  uint64_t Count = 0, Total = 0, Min = 0, Max = 0;
  void add(uint64_t V);
};

struct KvmCpuCheck {
  uint16_t Cpu = 0;
  uint64_t Exits = 0, Entries = 0, Handlers = 0;
  KvmCycles ExitLag;   ///< TSC(kvm_exit) - TSC(GT_EXIT)
  KvmCycles EntryLead; ///< TSC(GT entry attempt) - TSC(kvm_entry)
};

struct KvmCheckResult {
  bool Ok = true;
  std::string Problem;    ///< the first disagreement, one line, empty when Ok
  bool ReadError = false; ///< a file is corrupt or not of its kind (bad input, status 2)
  std::vector<KvmCpuCheck> Cpus;
  uint64_t KvmRecords = 0, GroundTruthRecords = 0, Other = 0;
};

/// When a free field of an imported KVM record is free (KvmFreeField::When).
enum class KvmFreeWhen : uint8_t {
  Always,
  Read,              ///< the record's first word (write) is 0: a read's result
  AfterEptMisconfig, ///< after an EPT misconfiguration, any type 0..2
  CrFromOtherGpr,    ///< a MOV to CR from a register other than RAX/RCX/RDX
  InWindow,          ///< a timestamp inside its window and its CPU's order
};

/// A field of an imported KVM record that the check does not prove exactly, and why.
/// Words [Word, Word + Words) of the record's payload, or (Timestamp) its TSC.
struct KvmFreeField {
  uint32_t Event; ///< the record's event id; 0: every timed record
  bool Timestamp;
  uint8_t Word, Words;
  KvmFreeWhen When;
  const char *Why;
};
/// The one table of them (check_kvm.cpp); every other bit of an imported trace is proven.
std::span<const KvmFreeField> kvmFreeFields();

/// Whether the trace at Path is an imported KVM trace (its first record is KVM_FTRACE).
bool isImportedKvmTrace(const std::string &Path);

/// Checks the imported KVM trace against the ground truth (both read to the end first).
KvmCheckResult checkKvmAgainstGroundTruth(TraceReader &Kvm, TraceReader &GroundTruth);

/// "match: ..." or "mismatch: ...", then one line per CPU with the counts and windows.
void printKvmCheck(const KvmCheckResult &R, std::FILE *Out);

} // namespace vmxsim::trace
