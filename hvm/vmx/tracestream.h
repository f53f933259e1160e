/* The UART stream of the trace rings (vmx/tracestream.c; format in trace/tbuf.h). */
#ifndef HVM_VMX_TRACESTREAM_H
#define HVM_VMX_TRACESTREAM_H

#include <stdbool.h>

#include "vmx/tracebuf.h"

/// `tstream=` on the image's command line: off (the default: records stay in the ring
/// for the machine's drain, or are dropped and counted without one), auto (stream when
/// the machine has no drain: Bochs, QEMU/KVM, hardware), uart (always).
enum TraceStreamMode { TraceStream_Off, TraceStream_Auto, TraceStream_Uart };

/// After tbufInit: makes B stream itself when Mode says so.
void tbufStreamSetup(struct TraceBuffer *B, enum TraceStreamMode Mode);
/// Copies [cons, prod) of B out as frames and advances cons (also the guest's end).
void tbufStreamOut(struct TraceBuffer *B);
/// Reads "tstream=" from an image's command line: *Mode set for off, auto or uart, left
/// alone when absent; false for any other value.
bool tbufStreamOption(const char *Cmdline, enum TraceStreamMode *Mode);

#endif
