// `vmxsim trace dump`: one line per record, in the spirit of xentrace_format (format
// doc, section 12): CPU, TSC, the TSC delta since the CPU's previous timed record, the
// event name and the payload decoded by the layout of trace/events.def.
//
//   CPU0 1251004645376 +2048 VMX_EXIT64 reason=10(Cpuid) rip=0xffffffff81001234
//   CPU0 1251004645376 - CPUID leaf=0x1 subleaf=0x0 eax=0x906ea ...
//
// A xen-3.0 record (docs/trace-flavours.md) shows its five 64-bit items by the layout of
// its TRACE_XEN30_EVENT row (d0..d4 for an id the table does not list), e.g.
//   CPU0 115455 +14631 VMX_VMENTRY reason=10(Cpuid) v1=0x40000000 v2=0x0 v3=0x9 v4=0x9
// An untimed record shows its inherited TSC and "-" as delta. Words past the layout are
// shown as wN=0x..; a record of an id events.def does not list as UNKNOWN(0x...) with
// its words raw; a known record with a word count outside its row's range is flagged.
#pragma once
#include "trace/reader.h"

#include <cstdio>
#include <string>

namespace vmxsim::trace {

/// Formats one record (no newline). Delta: TSC minus the CPU's previous timed TSC, used
/// only when R.HasTsc.
std::string formatRecord(const TraceRecord &R, uint64_t Delta);

/// Formats the payload fields only ("reason=10(Cpuid) rip=0x...").
std::string formatFields(const TraceRecord &R);

/// Prints every record of Reader to Out, one line each. Returns false if the trace
/// ended at an error (Reader.error() says which); the records before it are printed.
bool dumpTrace(TraceReader &Reader, std::FILE *Out);

} // namespace vmxsim::trace
