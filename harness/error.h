// Errors of the machine and its loaders, returned as values (the library stays usable from
// -fno-exceptions code). Every error is one line: "<path>: <what is wrong>".
#pragma once
#include <cstdint>
#include <string>
#include <utility>

namespace vmxsim {

/// What went wrong, for callers (and tests) that branch on the kind of failure.
enum class ErrorCode : uint8_t {
  None,
  FileUnreadable,    ///< missing, unreadable or not a regular file
  FileTooLarge,      ///< larger than guest RAM (or than 4 GiB for 32-bit formats)
  NotAnImage,        ///< not ELF and no Multiboot header
  BadMultibootHeader, ///< checksum or header fields inconsistent
  UnsupportedFlags,  ///< a "must understand" Multiboot flag bit we cannot honour
  TruncatedImage,    ///< a header or segment reaches past the end of the file
  BadElf,            ///< malformed or unsupported ELF header / program headers
  OutsideRam,        ///< a segment or module does not fit in guest RAM
  BadEntry,          ///< the entry point is not inside the loaded image
  NoRoom,            ///< no free guest memory for modules or boot information
  BadConfig,         ///< the machine configuration is invalid
  HostFailure,       ///< the host refused memory or a file could not be created
  // Run control and inspection (harness/run_control.h):
  NoSuchCpu,         ///< a CPU number the machine does not have
  UnknownRegister,   ///< a register name Machine::readRegister does not know
  UnknownVmcsField,  ///< a name that is no row of cpu/vmx/vmcs_fields.def
  UnsupportedVmcsField, ///< a field the CPU's VMX profile does not have
  NoCurrentVmcs,     ///< the CPU has no current VMCS (none loaded, or not in VMX operation)
  MsrFault,          ///< RDMSR/WRMSR of that index and value would raise #GP
  UnmappedAddress,   ///< a linear address the CPU's paging (or EPT) does not map
  NotRam,            ///< a physical address range that is not all RAM
  NoTrace,           ///< a trace that the machine's configuration does not write
  BadCondition,      ///< a stop condition that cannot be met as given
  // Snapshots (Machine::saveSnapshot, Machine::restoreSnapshot):
  NotSnapshottable,  ///< the machine has something a snapshot cannot hold
  BadSnapshot,       ///< not a snapshot, truncated, corrupt, or a newer format version
  SnapshotMismatch,  ///< a snapshot of another configuration (memory, CPUs, image, ...)
  // Input logs (harness/input_log.h):
  BadInputLog,       ///< not an input log, truncated, malformed, another version
  InputLogMismatch,  ///< the log of another machine (image, CPUs, ports), or a run that left it
  // Xen's own trace drain (harness/xen_trace_drain.h):
  BadSymbolFile,     ///< the Xen symbol file is missing, not an ELF, or lacks Xen's trace symbols
};

struct Error {
  ErrorCode Code = ErrorCode::None;
  std::string Path;    ///< file the error is about (may be empty)
  std::string Message; ///< what is wrong, no trailing newline

  Error() = default;
  Error(ErrorCode C, std::string M, std::string P = {})
      : Code(C), Path(std::move(P)), Message(std::move(M)) {}
  static Error success() { return Error(); }
  explicit operator bool() const { return Code != ErrorCode::None; }
  /// "<path>: <message>" or just the message.
  std::string str() const { return Path.empty() ? Message : Path + ": " + Message; }
};

/// A value, or the Error that says why there is none. Test it before use:
///   ErrorOr<uint64_t> Rip = M->readRegister(0, "rip");
///   if (!Rip) { ... Rip.error().str() ... }  else use *Rip
template <class T> class ErrorOr {
public:
  ErrorOr(T V) : Val(std::move(V)) {}
  ErrorOr(Error E) : Err(std::move(E)) {}
  explicit operator bool() const { return !Err; }
  const T &operator*() const { return Val; }
  T &operator*() { return Val; }
  const T *operator->() const { return &Val; }
  T *operator->() { return &Val; }
  const Error &error() const { return Err; }

private:
  T Val{};
  Error Err;
};

} // namespace vmxsim
