// `vmxsim trace import --ftrace FILE -o OUT`: Linux KVM's own trace, as ftrace's text output
// (the `trace` file of tracefs), converted into a XenTrace file of the project's records
// (trace/events.def, class 0x200 "Kvm"), which `trace summary`, `dump` and `check` read.
//
// Input: ftrace's text, with the tracer's '#' header, one event a line:
//     <task>-<pid> [<cpu>] <irq flags> <timestamp>: <event>: <fields>
// The irq-flags column is optional (ftrace's irq-info option). The header does not say
// which clock stamped the events, so the file must carry a line
//     # vmxsim-kvm trace_clock: <contents of tracefs's trace_clock>
// (the kvm initramfs's /init writes it first; see docs/kvm-in-linux.md), or the same with
// "# trace_clock:"; the selected clock is the name in brackets and must be x86-tsc, the
// TSC itself: on vmxsim the virtual TSC that stamps the ground truth. A file whose start
// line is vmxsim-kvm's must also end with "# vmxsim-kvm trace end" (else it was cut). A
// header "# entries-in-buffer/entries-written: A/B" with A != B, or ftrace's line
// "CPU:N [LOST M EVENTS]", means the ring buffer overwrote events: refused. Lines may end in CR LF.
//
// The mapping, one event to one or two records on the event's CPU ([<cpu>]), in file order:
//   kvm_exit     -> VMX_EXIT64 {reason (bit 31 for FAILED_VMENTRY), rip} at the event's TSC,
//                   then KVM_EXIT_INFO {vcpu, info1 (the exit qualification), info2 (the
//                   IDT-vectoring information), intr_info, error_code} (untimed)
//   kvm_entry    -> VMENTRY at the event's TSC, then KVM_ENTRY_INFO {vcpu, rip,
//                   immediate_exit} (untimed)
//   kvm_pio      -> KVM_PIO {write, port, size, count, val}
//   kvm_mmio     -> KVM_MMIO {type (0 unsatisfied-read, 1 read, 2 write), len, gpa, val}
//   kvm_msr      -> KVM_MSR {write, msr, value, gp}
//   kvm_cr       -> KVM_CR {write, cr, value}
//   kvm_cpuid    -> KVM_CPUID {func, idx, eax, ebx, ecx, edx, flags}
//   kvm_inj_virq -> KVM_INJ_VIRQ {vector, soft, reinjected}
//   anything else-> KVM_OTHER {line}: kept in place, counted by name and reported
// (the handler records timed with their own event's TSC). Before all of them, on CPU 0,
// untimed: KVM_FTRACE {events, unknown, cpus}, by which `trace check` knows the file.
// The exit-reason names are those of Linux 6.1's kvm_exit format (VMX_EXIT_REASONS);
// a number ftrace prints for a reason without a name ("0x..") is taken as it is.
//
// Exit status of the command: 0 imported; 2 the file cannot be read or written, a line is
// malformed ("FILE:LINE: ..."), or events were lost; 3 the trace's clock is not x86-tsc
// (or the file does not say which it is).
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <string_view>

namespace vmxsim::trace {

class TraceOutput;

/// The command's statuses (besides 0).
inline constexpr int kImportBadInput = 2;
inline constexpr int kImportWrongClock = 3;

struct FtraceImportResult {
  int Status = 0;         ///< 0, kImportBadInput or kImportWrongClock
  std::string Problem;    ///< one line when Status is not 0
  uint64_t Events = 0;    ///< event lines
  uint64_t Exits = 0, Entries = 0, Handlers = 0, Unknown = 0;
  unsigned Cpus = 0;      ///< highest CPU number + 1
  std::map<std::string, uint64_t> UnknownByName;
};

/// Parses the ftrace text Text (Name names it in messages) and writes the records to Out.
/// Nothing is written unless the whole text is well formed.
FtraceImportResult importFtrace(std::string_view Text, const std::string &Name, TraceOutput &Out);

/// The import's report: "imported N events ..." and, if any, the unknown events by name.
void printImport(const FtraceImportResult &R, std::FILE *Out);

/// `vmxsim trace import --ftrace In -o OutPath`: reads In, writes OutPath, prints the report
/// to Out and a failure as one line "vmxsim: error: ..." to Err. Returns the status.
int traceImportFtraceCommand(const std::string &In, const std::string &OutPath, std::FILE *Out,
                             std::FILE *Err);

} // namespace vmxsim::trace
