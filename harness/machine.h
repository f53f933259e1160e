// libvmxsim's machine: memory, the port-I/O bus, PC devices, processors, image loading
// and run control. This is the API that the vmxsim command, the tests in this repository
// and users' own GoogleTests use.
//
//   vmxsim::MachineConfig Cfg;
//   Cfg.Kernel = "hvm.elf";
//   Cfg.Serial = vmxsim::OutputSpec::capture();
//   vmxsim::Error Err;
//   auto M = vmxsim::Machine::create(Cfg, Err);   // builds and loads; Err says why not
//   if (!M) { ... Err.str() ... }
//   vmxsim::RunResult R = M->run();               // until exit, fault, limit or halt
//   EXPECT_EQ(R.Reason, vmxsim::RunReason::GuestExit);
//   EXPECT_EQ(M->serialOutput(), "hello\n");
//
// Devices (see each header for exactly what is modelled), a PC like QEMU's pc machine
// (i440FX/PIIX3) as SeaBIOS leaves it, every timer on the virtual clock: 16550A UARTs COM1
// at 0x3f8 (IRQ 4) and COM2 at 0x2f8 (IRQ 3) with scripted serial input
// (harness/devices/uart16550.h), debug console 0xe9, isa-debug-exit 0xf4 (iosize 4), fw_cfg 0x510/0x511, PCI
// configuration mechanism #1 at 0xcf8/0xcfc with the 82441FX host bridge 00:00.0 and the
// PIIX3 ISA bridge 00:01.0 (harness/devices/pci_host.h), 8259A PIC pair (INTR to the BSP's
// LINT0), one local APIC per CPU behind the register page at 0xfee00000 (each CPU sees its
// own: harness/devices/local_apic.h), the 8254 PIT at 0x40-0x43 (IRQ0 to the PIC's IR0
// and the I/O APIC's pin 2; channel 2 behind port 0x61), the MC146818 CMOS/RTC at
// 0x70/0x71 (IRQ 8; harness/devices/rtc146818.h, CMOS fields in cmos_layout.h), the HPET
// at 0xfed00000 (harness/devices/hpet.h; its legacy replacement takes IRQ0 and IRQ8 from
// the PIT and the RTC), the I/O APIC at 0xfec00000 (harness/devices/ioapic.h; level EOIs
// reach it from the local APICs), the i8042 keyboard controller at 0x60/0x64 (no keyboard;
// IRQ 1/12), the A20 gate (port 0x92 bit 1 OR the i8042 output port bit 1, honoured by
// every memory access: harness/devices/a20_gate.h), system control ports 0x92/0x61, the
// PIIX3 reset control register 0xcf9, the POST-code port 0x80, and the power-off port
// 0x8900, and the ACPI PM registers at 0x600-0x60b (PM1a event and control blocks, the
// 24-bit PM timer at 3.579545 MHz of the virtual clock; SLP_EN with \_S5's SLP_TYP powers
// off: harness/devices/acpi_pm.h). ISA IRQ n reaches I/O APIC pin n (IRQ0: pin 2). Every
// CPU reset request (0x92 bit 0, 0xcf9, the i8042's reset line) ends the run
// (RunReason::Reset, status 0): there is no firmware to reboot into.
// Firmware state (harness/firmware.h), written before the image is loaded: the real-mode
// IVT (every vector at an IRET in the BIOS area), the BIOS Data Area, the EBDA at 0x9fc00
// (with the ACPI FACS), and the read-only BIOS area 0xe0000-0xfffff holding the ACPI
// tables (RSDP at 0xf0000: harness/acpi_tables.h) and the SMBIOS tables
// (harness/smbios_tables.h). Every loader passes on the one E820 map, e820Map().
// Unassigned ports read all-ones; unassigned physical addresses read all-ones.
//
// Processors: NumCpus are created; the bootstrap processor (CPU 0) starts at the image's
// entry, the application processors in wait-for-SIPI (Cpu::Activity) until the guest starts them with INIT-SIPI-SIPI. They run
// under the deterministic scheduler (harness/scheduler.h). fw_cfg reports NumCpus.
#pragma once
#include "cpu/cpu.h"
#include "cpu/jit/exec_mode.h"
#include "cpu/cpu_model.h"
#include "cpu/vmx/vmx_features.h"
#include "harness/devices/a20_gate.h"
#include "harness/devices/acpi_pm.h"
#include "harness/devices/coprocessor_error.h"
#include "harness/devices/debug_console.h"
#include "harness/devices/debug_exit.h"
#include "harness/devices/fw_cfg.h"
#include "harness/devices/hpet.h"
#include "harness/devices/i8042.h"
#include "harness/devices/ioapic.h"
#include "harness/devices/local_apic.h"
#include "harness/devices/pci_host.h"
#include "harness/devices/pic8259.h"
#include "harness/devices/pit8254.h"
#include "harness/devices/rtc146818.h"
#include "harness/devices/stop_latch.h"
#include "harness/devices/system_ports.h"
#include "harness/devices/trace_buffers.h"
#include "harness/devices/uart16550.h"
#include "harness/error.h"
#include "harness/loader.h"
#include "harness/output.h"
#include "harness/run_control.h"
#include "harness/scheduler.h"
#include "trace/reader.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace vmxsim {

class InsnTracer;
namespace trace {
class AsyncFileOutput;
class TraceWriter;
class GroundTruthRecorder;
} // namespace trace
class GroundTruthLink;
class XenTraceDrain;
class GroundTruthInsnObserver;

inline constexpr uint64_t kMinRamBytes = 2ull << 20;
inline constexpr uint64_t kMaxRamBytes = 64ull << 30;
inline constexpr unsigned kMaxCpus = 64;

struct MachineConfig {
  /// Guest RAM. 2 MiB .. 64 GiB; host memory is committed only for pages the guest (or
  /// the loader) touches. RAM above 3.5 GiB is split QEMU-style: 3 GiB low, rest at 4 GiB.
  uint64_t RamBytes = 256ull << 20;
  /// Processors (1..64). The APs wait for a start-up IPI (see the file comment).
  unsigned NumCpus = 1;
  /// Scheduler quantum in virtual cycles (harness/scheduler.h); ignored with one CPU.
  uint64_t QuantumCycles = kDefaultQuantumCycles;
  /// The image: a Multiboot v1 kernel, a Linux bzImage (boot protocol 2.06+; "HdrS" at
  /// 0x202), or a flat binary when FlatAddr is set. Empty (and KernelImage empty): nothing
  /// is loaded and CPU 0 is left in its reset state.
  std::string Kernel;
  /// If not empty, used instead of reading the file Kernel (which still names the image
  /// in the command line and in errors).
  std::vector<uint8_t> KernelImage;
  /// Multiboot modules, each "path args..." (the module's string is the whole text).
  /// For a Linux kernel, the initrd: at most one, the whole text is its path (QEMU's
  /// -initrd for Linux).
  std::vector<std::string> Modules;
  /// Kernel command-line arguments (a Multiboot kernel sees "Kernel Append", a Linux
  /// kernel just Append).
  std::string Append;
  /// Flat binary: load at this guest-physical address and enter it in FlatMode.
  std::optional<uint64_t> FlatAddr;
  EntryMode FlatMode = EntryMode::Prot32;
  /// UART (COM1) output, COM2's output, and the debug console (port 0xe9) output. Two of
  /// them that name the same file share one stream.
  OutputSpec Serial = OutputSpec::stdoutSpec();
  OutputSpec Serial2 = OutputSpec::discard();
  OutputSpec Debugcon = OutputSpec::stdoutSpec();
  /// What the terminals on COM1's and COM2's serial inputs send (SerialInput in
  /// harness/devices/uart16550.h): a file, read whole when the machine is built, or "-"
  /// for the host's standard input (interactive, not deterministic; at most one of the
  /// two); empty = nothing.
  std::string SerialIn, Serial2In;
  /// The input log (harness/input_log.h): record every input consumed from the host's
  /// standard input into this file, or replay the inputs of this file (each port the log
  /// names then reads the log instead of standard input; its SerialIn must be empty or
  /// "-"). Not both.
  std::string RecordInput, ReplayInput;
  /// Instruction trace (one line per instruction, see harness/insn_trace.h); off if unset.
  std::optional<OutputSpec> TraceInsns;
  /// Ground truth (trace/ground_truth.h): every VM exit and VM entry of every CPU as
  /// XenTrace records of vmxsim's own class, written to this file; off if empty.
  std::string GroundTruthFile;
  /// Also record every instruction into the ground truth (GT_INSN; large).
  bool GroundTruthInsns = false;
  /// The hypervisor's own per-CPU trace buffers (trace/tbuf.h), drained into this
  /// XenTrace file as xentrace would (harness/devices/trace_buffers.h); when empty the
  /// drain ports are unassigned, as on any other machine.
  std::string XentraceFile;
  /// An unmodified Xen 4.17's own per-CPU trace buffers, read from guest memory with
  /// Xen's symbol file XenSymsFile (xen-syms) and drained into this XenTrace file as
  /// xentrace in dom0 would (harness/xen_trace_drain.h): at every multiple of
  /// XenTraceEvery retired instructions (all CPUs) and at the end of a run. Off if empty;
  /// needs XenSymsFile.
  std::string XenTraceFile, XenSymsFile;
  uint64_t XenTraceEvery = 1'000'000;
  /// The three trace files above are written by a thread each (trace/async_output.h),
  /// so that the kernel's copying them costs the emulation no time; false writes them
  /// on the emulation thread. Their bytes are the same either way.
  bool TraceFileThreads = true;
  /// The ground truth's records of the common VM exit and entry, of a slot store and of a
  /// root RDTSC (GT_EXIT, GT_RESUME, GT_SLOT_OWN, GT_ROOT_RDTSC) are written in place by
  /// the processor (cpu/observer.h, InlineTransitionRecords) rather than through a call
  /// into the ground truth each; false makes every one that call. The same bytes either
  /// way (a test compares them).
  bool GroundTruthInline = true;
  /// Retired-instruction budget for run() (total of all CPUs since load); ~0 = unlimited.
  uint64_t MaxInsns = ~uint64_t(0);
  /// Processor model; null = CpuModel::defaultModel().
  const CpuModel *Model = nullptr;
  /// VMX feature set (`--vmx-profile`: VmxProfile::full(), kvmNested(), minimal()); null
  /// = the model's own. Replaces the model's profile for every CPU of the machine.
  const VmxProfile *Vmx = nullptr;
  /// When set, run() stops at an instruction boundary soon after *StopFlag becomes true
  /// (RunReason::Interrupted): between quanta with several CPUs, and within
  /// kStopPollInsns instructions with one. Setting it is async-signal-safe, so a signal
  /// handler may do it; what the guest sees and every trace up to the stop are the same
  /// as in a run that was not watched (Scheduler::setStopFlag).
  const std::atomic<bool> *StopFlag = nullptr;
  /// The RTC's date-time at virtual cycle 0, in seconds since 1970-01-01 00:00:00 UTC
  /// (`--rtc-base`; Rtc146818::parseBase reads the option's forms).
  int64_t RtcBaseSeconds = kDefaultRtcBase;
  /// How the CPUs execute guest code (`--exec`; docs/TRANSLATOR.md): the interpreter,
  /// the translation cache, or both in lockstep (a difference stops the run with
  /// RunReason::LockstepMismatch).
  ExecMode Exec = ExecMode::Interp;
};

/// Why Machine::run returned.
enum class RunReason : uint8_t {
  GuestExit,     ///< isa-debug-exit write: ExitValue = V, ExitStatus = ((V << 1) | 1) & 0xff
  PowerOff,      ///< "Shutdown" on port 0x8900, or ACPI S5 (PM1a_CNT): status 0
  /// CPU reset (port 0x92 bit 0, the PIIX3 reset control 0xcf9, the i8042's reset line):
  /// status 0; ExitValue = the port (0x92, 0xcf9, 0x64). A reset always ends the run, like
  /// QEMU's -no-reboot: vmxsim has no firmware to reboot into.
  Reset,
  TripleFault,   ///< the CPU entered shutdown: status kExitTripleFault
  InsnLimit,     ///< MaxInsns retired: status kExitInsnLimit
  Halted,        ///< every CPU halted and nothing can wake one: status kExitHalted
  Unimplemented, ///< the guest used something vmxsim lacks: status kExitUnimplemented
  /// ExecMode::Lockstep: a translated block disagreed with the interpreter (What says
  /// where and in what): status kExitLockstepMismatch.
  LockstepMismatch,
  Interrupted,   ///< MachineConfig::StopFlag was raised (the vmxsim command: a signal)
  /// A condition of runUntil was met (RunResult::Condition says which): status 0. The
  /// run can be continued; the hypervisor's trace is not drained and the ground truth
  /// not flushed at this stop, so that the files come out as in an unstopped run.
  Stopped,
};

/// Process exit statuses of the vmxsim command. vmxsim's own are even, guest exits
/// through isa-debug-exit are odd, so they never collide.
inline constexpr int kExitUsage = 2; ///< bad command line, bad image, host failure
inline constexpr int kExitInsnLimit = 4, kExitHalted = 6, kExitTripleFault = 8,
                     kExitUnimplemented = 10;
/// The run was stopped by SIGINT, SIGTERM or SIGHUP (outputs flushed, summary printed).
inline constexpr int kExitInterrupted = 12;
/// The run ended but an output file (--serial, --serial2, --debugcon, --trace-insns,
/// --xentrace, --trace-ground-truth) could not be written in full; takes precedence over the others.
inline constexpr int kExitOutputFailed = 14;
/// A snapshot could not be restored (not a snapshot, truncated, corrupt, a newer format,
/// taken of another configuration) or taken (`--snapshot-at`/`--snapshot-every` on a
/// machine that cannot be saved, or a file that cannot be written).
inline constexpr int kExitSnapshot = 16;
/// `--exec lockstep`: a translated block and the interpreter disagreed (one line names the
/// block, the instruction and what differs).
inline constexpr int kExitLockstepMismatch = 18;
/// The input log (`--record-input`, `--replay-input`) could not be read or written, is of
/// another machine, or the replayed run left the recorded one (one line).
inline constexpr int kExitInputLog = 20;
/// `--xen-trace`: the Xen symbol file is missing, not an ELF or lacks Xen's trace symbols,
/// is not the running Xen's, Xen never set up its trace buffers, or its buffers held
/// nonsense (one line; the records drained before it stay in the file).
inline constexpr int kExitXenTrace = 22;

struct RunResult {
  RunReason Reason = RunReason::InsnLimit;
  /// GuestExit: the isa-debug-exit value; Reset and PowerOff: the port (PowerOff: 0x8900,
  /// or 0x604 = PM1a_CNT for ACPI S5).
  uint32_t ExitValue = 0;
  int ExitStatus = 0;     ///< what the vmxsim command exits with
  uint64_t Retired = 0;   ///< instructions retired by all CPUs since load
  uint64_t Cycles = 0;    ///< CPU 0's virtual clock
  unsigned CpuId = 0;     ///< the CPU the reason concerns
  uint64_t Rip = 0;       ///< its RIP when it stopped
  std::string What;       ///< Unimplemented: what is missing; Stopped: the condition
  /// Stopped: the index of the condition met in runUntil's list (the first one, when
  /// one instruction met several).
  unsigned Condition = 0;
  /// One phrase, e.g. "guest exit 0x3 (status 7)" or "triple fault at RIP=0x1000 (CPU 0)".
  std::string describe() const;
  /// "vmxsim: <describe()>; <N> instructions, <C> cycles".
  std::string summary() const;
};

/// A multi-line dump of the architectural registers (for fatal-stop messages).
std::string formatCpuState(const CpuState &S);

class Machine {
public:
  /// Validates Cfg, builds the machine, opens its outputs and loads the image. Returns
  /// null and sets Err (a one-line message, and the ErrorCode) on failure.
  static std::unique_ptr<Machine> create(const MachineConfig &Cfg, Error &Err);
  /// Checks a configuration without building anything.
  static Error validate(const MachineConfig &Cfg);
  ~Machine();
  Machine(const Machine &) = delete;
  Machine &operator=(const Machine &) = delete;

  /// Runs the CPUs (harness/scheduler.h) until a stop reason. May be called again to continue (e.g. with a larger
  /// MaxInsns, or after clearStop()).
  RunResult run();
  /// The same run, calling Progress(total retired instructions) about every EveryInsns
  /// retired instructions (for a progress display; Scheduler::setProgress). What the
  /// guest does, its clocks and every trace are the same as without Progress.
  using ProgressFn = std::function<void(uint64_t Retired)>;
  RunResult run(const ProgressFn &Progress, uint64_t EveryInsns);
  /// The same run, stopping (RunReason::Stopped) once the instructions retired by all
  /// CPUs since load reach Total (when that comes before another reason), at the
  /// boundary where a run with MaxInsns = Total would end; the traces are neither
  /// drained nor flushed there, so continuing is the run that never stopped. For
  /// snapshots at instruction counts (the vmxsim command's --snapshot-at).
  RunResult runToRetired(uint64_t Total, const ProgressFn *Progress = nullptr,
                         uint64_t EveryInsns = 0);
  /// Runs until the first of Conditions is met (RunReason::Stopped; harness/run_control.h
  /// says where exactly each stops), or a reason of run() comes first (then that
  /// reason, as run() would return it). Conditions are counted from this call on.
  /// Errors (nothing has run then): NoSuchCpu (a condition names a CPU the machine does
  /// not have), BadCondition (no conditions, a count of 0, an empty serial text, a write
  /// range of 0 bytes), UnmappedAddress (a linear write range the CPU's paging does not
  /// map; the message names the address and the CPU).
  ErrorOr<RunResult> runUntil(const std::vector<StopWhen> &Conditions);

  // --- Inspection and change between runs (the "Run control" section of
  // harness/README.md). Every function returns its error as a value; an error changes
  // nothing. Cpu is the CPU number (0 .. numCpus() - 1): NoSuchCpu otherwise. ---

  /// A register by name (lower case): rax..r15, rip, rflags; cr0, cr2, cr3, cr4, cr8,
  /// xcr0, efer; dr0-dr3, dr6, dr7; es, cs, ss, ds, fs, gs, ldtr, tr (the selector) and
  /// with ".base", ".limit", ".attr" their hidden parts; gdtr.base, gdtr.limit,
  /// idtr.base, idtr.limit; mxcsr. UnknownRegister for any other name.
  ErrorOr<uint64_t> readRegister(unsigned Cpu, const std::string &Name) const;
  /// Writes it, then brings the processor's derived state up to date (the mode and
  /// RIP mask after a control register, EFER, RFLAGS or segment; the armed breakpoints
  /// after a debug register; the TLBs after CR0, CR3, CR4 or EFER), as the instruction
  /// that loads it would. No architectural checks: the value is taken as given.
  Error writeRegister(unsigned Cpu, const std::string &Name, uint64_t Value);
  /// The whole architectural state at once (segment hidden parts, control and debug
  /// registers, x87/SSE state), and its writer, with writeRegister's updates.
  ErrorOr<CpuState> registers(unsigned Cpu) const;
  Error setRegisters(unsigned Cpu, const CpuState &S);
  /// RDMSR/WRMSR of Index through the processor's MSR layer (cpu/msrs.def), as in VMX
  /// root operation at CPL 0 (no VMX intercepts): MsrFault where the instruction would
  /// raise #GP (an MSR vmxsim does not have, a reserved bit, a read-only MSR).
  ErrorOr<uint64_t> readMsr(unsigned Cpu, uint32_t Index);
  Error writeMsr(unsigned Cpu, uint32_t Index, uint64_t Value);
  /// The machine-physical address of La through the CPU's current paging and, in VMX
  /// non-root operation with EPT, EPT (no rights are checked, no accessed or dirty flag
  /// is set): UnmappedAddress when a walk ends at an entry that is not present.
  ErrorOr<Hpa> translate(unsigned Cpu, Gla La);
  /// Guest memory by linear address (translated page by page as translate does) or by
  /// machine-physical address. Writes invalidate decoded code as a store would.
  /// UnmappedAddress, or NotRam for bytes outside RAM (MMIO and holes are not touched).
  Error readLinear(unsigned Cpu, Gla La, void *Out, uint64_t SizeBytes);
  Error writeLinear(unsigned Cpu, Gla La, const void *In, uint64_t SizeBytes);
  Error readPhysical(Hpa Pa, void *Out, uint64_t SizeBytes) const;
  Error writePhysical(Hpa Pa, const void *In, uint64_t SizeBytes);
  /// A field of the CPU's current VMCS by name: the enumerator of
  /// cpu/vmx/vmcs_fields.def ("ExitQualification") or its SDM name ("Exit
  /// qualification"). Errors: UnknownVmcsField, UnsupportedVmcsField (the CPU's VMX
  /// profile lacks it), NoCurrentVmcs. A write stores the value truncated to the field's
  /// width into the current VMCS, as VMWRITE would but for any field (read-only exit
  /// information too); state the processor loaded at VM entry is not re-derived.
  ErrorOr<uint64_t> readVmcs(unsigned Cpu, const std::string &Field) const;
  Error writeVmcs(unsigned Cpu, const std::string &Field, uint64_t Value);
  /// A field of the VMCS whose region is at Region: the cached data when it is some
  /// CPU's current VMCS, else what the region holds (vmxsim's layout,
  /// cpu/vmx/vmcs.h: vmcs_layout). NotRam when the region is not RAM.
  ErrorOr<uint64_t> readVmcsAt(Hpa Region, const std::string &Field) const;
  Error writeVmcsAt(Hpa Region, const std::string &Field, uint64_t Value);
  /// Every record so far, merged across CPUs by TSC (trace/reader.h): the ground truth
  /// (NoTrace without MachineConfig::GroundTruthFile) and the hypervisor's trace, what
  /// has been drained to the file plus what its rings hold now (NoTrace without
  /// MachineConfig::XentraceFile). Looking changes nothing: no buffer is drained.
  ErrorOr<std::vector<trace::TraceRecord>> groundTruthRecords();
  ErrorOr<std::vector<trace::TraceRecord>> hypervisorTraceRecords();

  /// Ends a run that runUntil left stopped as run() ends one, for an embedder that ends
  /// it there (the gdb stub's kill): the ground truth's buffers are flushed and the
  /// hypervisor's rings drained into its file, so that no record is lost. A run continued
  /// after this is no longer byte for byte the unstopped one (the guest sees the drain).
  void finishOutputs();

  // --- Snapshots (harness/snapshot.cpp; the "Snapshots" section of README.md) ---

  /// Writes the whole machine to Path (the format of state/snapshot_io.h): memory (the
  /// pages that are not all zero), every CPU with its VMX state and cached VMCS, every
  /// device, the scheduler's open slice, the virtual clocks, the trace writers' buffered
  /// records and the byte counts of every output so far. Taken between runs (after
  /// run() or runUntil() returned), at an instruction boundary. Errors: NotSnapshottable
  /// (one line naming what cannot be saved: serial input from standard input),
  /// HostFailure (the file cannot be written).
  Error saveSnapshot(const std::string &Path);
  /// Makes this machine the one saved in Path. The machine must have been created from
  /// the same configuration (memory size, CPU count, image and its modules and command
  /// line, processor model and VMX profile, quantum, which traces are written); its
  /// outputs then receive what the saved run would have written after the snapshot
  /// (each output's bytes from the offset recorded in the snapshot on: outputOffsets()).
  /// Errors (one line, the machine unchanged): BadSnapshot (not a snapshot, truncated,
  /// checksum mismatch, a newer format version), SnapshotMismatch (taken of another
  /// configuration: says which part differs), FileUnreadable. An error in a later section
  /// (only for a file this build did not write) leaves the machine partly restored: it
  /// must not be run then.
  Error restoreSnapshot(const std::string &Path);
  /// The bytes each output had received when the snapshot this machine was restored from
  /// was taken (0 for a machine that was not restored): a restored run's output file is
  /// the uninterrupted run's file from this offset on.
  struct OutputOffsets {
    uint64_t Serial = 0, Serial2 = 0, Debugcon = 0, TraceInsns = 0, GroundTruth = 0,
             Xentrace = 0;
  };
  const OutputOffsets &outputOffsets() const { return RestoredOffsets; }
  /// The same byte counts now (what a snapshot taken now would record).
  OutputOffsets currentOutputOffsets() const;

  /// Clears a device stop request so that run() continues past it.
  void clearStop() { Latch.clear(); }
  /// One line per output that could not be written in full ("<path>: cannot write:
  /// <errno text>"): the device outputs, the instruction trace, the ground truth and the
  /// hypervisor's trace. Empty when every byte so far reached its destination. run()
  /// flushes every output before it returns, so this is complete after it.
  std::vector<std::string> outputProblems() const;
  /// Empty, or one line: the input log being recorded could not be written in full, or
  /// the run being replayed left the recorded one (MachineConfig::ReplayInput).
  std::string inputLogProblem() const;
  /// With MachineConfig::RecordInput: logs a write gdb makes now, where the machine is
  /// stopped (harness/input_log.h; the gdb stub calls it). Nothing without.
  void logGdbWrite(const GdbWrite &W);
  bool recordsInput() const { return InputRecorder != nullptr; }
  /// Where the machine is, as the input log names gdb's stops: the instructions all CPUs
  /// retired and each CPU's virtual clock.
  GdbStopPoint stopPoint() const;
  /// gdb's writes in MachineConfig::ReplayInput's log (none without one); GdbWriteReplay
  /// (harness/gdb_stub.h) makes them.
  const std::vector<GdbStopPoint> &replayedGdbStops() const;

  const MachineConfig &config() const { return Cfg; }
  unsigned numCpus() const { return unsigned(Cpus.size()); }
  Cpu &cpu(unsigned I = 0) { return *Cpus[I]; }
  Cpu &bsp() { return *Cpus[0]; }
  PhysMem &mem() { return Mem; }
  /// The guest-physical address of the image's trace-slot table (trace/slot_layout.h),
  /// when it publishes one.
  std::optional<uint64_t> slotTablePa() const { return SlotTablePa; }
  IoBus &io() { return Io; }
  const BootLayout &layout() const { return Layout; }
  /// Captured output (empty unless the spec was OutputSpec::capture()).
  const std::string &serialOutput() const { return SerialSink.captured(); }
  const std::string &serial2Output() const { return Serial2Out->captured(); }
  const std::string &debugconOutput() const { return debugconSink().captured(); }
  const std::string &traceOutput() const { return TraceSink.captured(); }
  void setMaxInsns(uint64_t N) { Cfg.MaxInsns = N; }

  // Devices, for tests and embedders.
  Uart16550 &uart() { return Uart; }  ///< COM1
  Uart16550 &uart2() { return Uart2; } ///< COM2
  PicPair &pic() { return Pic; }
  LocalApic &localApic(unsigned I = 0) { return *Apics[I]; }
  ApicBus &apicBus() { return ApicRouter; }
  Pit8254 &pit() { return Pit; }
  Rtc146818 &rtc() { return Rtc; }
  Hpet &hpet() { return HpetDev; }
  I8042 &keyboardController() { return Kbc; }
  A20Gate &a20Gate() { return A20; }
  PostCodePort &postCodePort() { return Post; }
  IoApic &ioApic() { return IoApicDev; }
  FwCfg &fwCfg() { return Fw; }
  PciHost &pciHost() { return Pci; }
  AcpiPm &acpiPm() { return Pm; }
  /// The trace-buffer drain, or null without Cfg.XentraceFile.
  const TraceBufferDrain *traceBuffers() const { return TraceDrain.get(); }
  /// Xen's own trace drain, or null without Cfg.XenTraceFile.
  const XenTraceDrain *xenTraceDrain() const { return XenDrain.get(); }

private:
  friend class RunUntil;
  explicit Machine(const MachineConfig &Cfg);
  /// The scheduler, made at the first run and kept, so that a run continues the slice
  /// the last one stopped in (Scheduler::run).
  Scheduler &scheduler();
  /// run() and runUntil(): MaxTotal is the total budget of this call; Stoppable says a
  /// run-control stop (a break, a limit, MaxTotal below Cfg.MaxInsns) ends it as
  /// RunReason::Stopped without draining or flushing the traces.
  RunResult runScheduled(const ProgressFn *Progress, uint64_t EveryInsns, uint64_t MaxTotal,
                         bool Stoppable);
  Error init();
  /// ISA interrupt lines to the 8259 pair and the I/O APIC (IRQ0 -> pin 2, IRQ n -> pin
  /// n, the MADT's overrides): a level, or an edge (raised and lowered).
  void isaIrqLevel(unsigned Irq, bool Level);
  void isaIrqEdge(unsigned Irq);
  /// Whether ISA IRQ Irq can reach a processor (unmasked at the 8259s or the I/O APIC).
  bool isaIrqObserved(unsigned Irq) const;
  void initPlatform();
  Error loadImage();
  Error loadLinux(const std::string &Name, std::span<const uint8_t> Image);
  const OutputSink &debugconSink() const { return SharedDebugcon ? SerialSink : DebugconSink; }

  MachineConfig Cfg;
  PhysMem Mem;
  IoBus Io;
  StopLatch Latch;
  OutputSink SerialSink, DebugconSink, TraceSink, Serial2Sink;
  bool SharedDebugcon = false;
  /// COM2's stream: Serial2Sink, or the serial or debug-console one when it names the
  /// same file.
  OutputSink *Serial2Out;
  Uart16550 Uart, Uart2;
  std::unique_ptr<DebugConsole> Debugcon;
  DebugExit DbgExit;
  FwCfg Fw;
  PciHost Pci;
  PicPair Pic;
  ApicBus ApicRouter;
  std::vector<std::unique_ptr<LocalApic>> Apics;
  Pit8254 Pit;
  IoApic IoApicDev{ApicRouter};
  A20Gate A20;
  SystemControlA SysA;
  SystemControlB SysB;
  CoprocessorError FpuError; ///< FERR# to IRQ 13, port 0xf0, IGNNE#
  ResetControl ResetCtl;
  PostCodePort Post;
  Rtc146818 Rtc;
  Hpet HpetDev;
  I8042 Kbc;
  bool RtcIrqLevel = false; ///< the RTC's IRQ output, whether or not the HPET owns IRQ8
  PowerOffPort PowerOff;
  AcpiPm Pm;
  std::vector<std::unique_ptr<Cpu>> Cpus;
  std::vector<Cpu *> CpuPtrs;
  std::unique_ptr<InsnTracer> Tracer;
  /// Ground truth (Cfg.GroundTruthFile): the file, its writer, the recorder the CPUs
  /// point to, and one instruction observer per CPU (Cfg.GroundTruthInsns). Each trace
  /// file is written by a thread of its own (trace/async_output.h); its writer is
  /// declared after it, so the writer's last windows reach it before it closes.
  std::unique_ptr<trace::AsyncFileOutput> GroundTruthOut;
  std::unique_ptr<trace::TraceWriter> GroundTruthWriter;
  std::unique_ptr<trace::GroundTruthRecorder> GroundTruth;
  std::unique_ptr<GroundTruthLink> GroundTruthTransitions;
  std::vector<std::unique_ptr<GroundTruthInsnObserver>> GroundTruthInsnObservers;
  /// The hypervisor's trace (Cfg.XentraceFile): the file, its writer, the drain device.
  std::unique_ptr<trace::AsyncFileOutput> XentraceOut;
  std::unique_ptr<trace::TraceWriter> XentraceWriter;
  std::unique_ptr<TraceBufferDrain> TraceDrain;
  /// Xen's own trace (Cfg.XenTraceFile): the file, its writer, the drain.
  std::unique_ptr<trace::AsyncFileOutput> XenTraceOut;
  std::unique_ptr<trace::TraceWriter> XenTraceWriter;
  std::unique_ptr<XenTraceDrain> XenDrain;
  CpuModel Model; ///< the model the CPUs run (Cfg.Model with Cfg.Vmx applied)
  BootLayout Layout;
  /// The image's trace-slot table (trace/slot_layout.h), when its ELF names one.
  std::optional<uint64_t> SlotTablePa;
  /// CRC-32C of the image, its modules and its command line (a snapshot's check that a
  /// restoring machine runs the same image).
  uint32_t ImageCrc = 0;
  OutputOffsets RestoredOffsets;
  /// MachineConfig::RecordInput's writer; ReplayInput's events (kept for a restore).
  std::unique_ptr<InputLogWriter> InputRecorder;
  std::optional<InputLog> Replay;
  Error setUpInputLog();
  /// A new replaying input for each port the log names (Replay).
  void installReplayInputs();
  void saveConfig(SnapshotWriter &W) const;
  Error checkConfig(SnapshotReader &R) const;
  /// Last: it detaches from the timers above when it goes.
  std::unique_ptr<Scheduler> Sched;
};

} // namespace vmxsim
