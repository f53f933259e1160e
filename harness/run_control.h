// Run control for embedders and tests (the "Run control" section of harness/README.md):
// the conditions Machine::runUntil waits for. The machine's inspection functions
// (registers, memory, VMCS fields by name, the trace so far) are in harness/machine.h.
//
//   auto R = M->runUntil({StopWhen::vmExit().onCpu(1).nth(10)});
//   ASSERT_TRUE(R) << R.error().str();
//   EXPECT_EQ(R->Reason, RunReason::Stopped);
//   EXPECT_EQ(*M->readVmcs(1, "ExitReason"), 10u);
//
// Where a run stops. Always at an instruction boundary, with the architectural state
// consistent: after a VM exit has completed (the CPU in VMX root operation at the host
// RIP, the exit information in the VMCS), after a VM entry has completed (in non-root
// operation at the guest's RIP, any injected event delivered), after the instruction
// that wrote or read the watched memory or wrote the serial pattern's last byte, and
// before the instruction at an execute address does anything. A run that is stopped and continued
// (runUntil again, or run()) any number of times is the same run, byte for byte, as the
// one that was never stopped: the same serial output, traces, clocks and state. Nothing
// of it costs anything while no condition is set.
#pragma once
#include "cpu/vmx/vm_exit.h"
#include "mmu/address.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vmxsim {

/// One condition of Machine::runUntil; build it with the static functions and refine it
/// with the modifiers, which return a changed copy:
///   StopWhen::vmExit().reason(ExitReason::IoInstruction).onCpu(0).nth(3)
/// Counts start when runUntil is called: "the 3rd" is the 3rd from then on.
class StopWhen {
public:
  enum class Kind : uint8_t {
    Instructions,   ///< N more instructions retired (by onCpu's CPU, or by all together)
    VmExit,         ///< the next VM exit (of reason(), on onCpu's CPU)
    VmEntry,        ///< the next completed VM entry (on onCpu's CPU)
    VmEntryFailure, ///< the next failed VMLAUNCH/VMRESUME (VMfailValid or exit bit 31)
    Execute,        ///< before the instruction at an address executes
    Write,          ///< after an instruction wrote a byte of a range
    Read,           ///< after an instruction read a byte of a range
    Access,         ///< after an instruction read or wrote a byte of a range
    Tsc,            ///< a CPU's virtual TSC (Cpu::Cycles) reaches a value
    Serial,         ///< COM1's output since runUntil was called contains a text
  };

  /// N more instructions (N >= 1). With onCpu: retired by that CPU; else by all CPUs
  /// together (the machine's total).
  static StopWhen instructions(uint64_t N);
  /// Any VM exit, including the exit (bit 31 set) of a VM entry that failed while or
  /// after loading guest state; reason() narrows it to basic exit reasons.
  static StopWhen vmExit();
  static StopWhen vmEntry();
  /// A VM entry that failed: VMfailValid (a check on the controls or host state), or the
  /// VM exit with bit 31 (a check on the guest state, loading it, or loading MSRs).
  static StopWhen vmEntryFailure();
  /// The instruction whose first byte is at linear address La (CS base + RIP) is about
  /// to execute. The instruction a CPU starts a runUntil at (where the previous stop
  /// left it) is not held, so that continuing from an execute stop moves on.
  static StopWhen execute(Gla La);
  /// The same for the machine-physical address of the instruction's first byte (after
  /// the CPU's paging and, in VMX non-root operation, EPT).
  static StopWhen execute(Hpa Pa);
  /// An instruction stored to at least one byte of [La, La + SizeBytes). The range is
  /// translated once, when runUntil is called, through the paging (and EPT) of onCpu's
  /// CPU (CPU 0 if none): a mapping changed later is not followed. A store by any CPU
  /// to those physical bytes counts, unless onCpu names the storing CPU. Every store
  /// counts (PhysMem::noteWrite): an instruction's, the processor's own (page-walk and
  /// EPT A/D updates, the page-modification log, VMX's MSR-store area, posted-interrupt
  /// descriptors), and a device's, which counts as the store of the CPU whose
  /// instruction made the device store; the stop follows that instruction.
  static StopWhen write(Gla La, uint64_t SizeBytes = 1);
  static StopWhen write(Hpa Pa, uint64_t SizeBytes = 1);
  /// An instruction read at least one byte of [La, La + SizeBytes) as data; the range is
  /// translated as write's is, and a read by any CPU counts unless onCpu names another.
  /// The stop is trap-like, as an x86 data breakpoint's (SDM Vol. 3B, "Debug Exceptions",
  /// "Data Memory and I/O Breakpoint Exception Conditions": reported after the
  /// instruction completes): right after the reading instruction, on the reading CPU
  /// (RIP at the next instruction; a REP string instruction completes whole, as for
  /// write, unless its own event window interrupts it between iterations). What counts
  /// is every read a data breakpoint (DR7 R/W = 11b) sees, whatever the page's paging
  /// or EPT: the instruction's reads through linear addresses, explicit (memory
  /// operands, stack pops, string sources, the read of a read-modify-write operand,
  /// x87/SSE/XSAVE-area loads) and implicit (GDT/LDT descriptors, the TSS, IDT gates:
  /// an event's delivery counts as the instruction it precedes or interrupts, so its
  /// stop comes before the handler's first instruction). What does not: instruction
  /// fetch (use execute), the processor's reads by physical address (paging-structure
  /// and EPT entries of a page walk, VMCS regions and VMX's MSR-load areas, the
  /// virtual-APIC page, posted-interrupt descriptors, the PDPTEs loaded by MOV CR3 or a
  /// VM entry), devices' reads (DMA) and the debugger's (Machine::readLinear). Costs
  /// nothing until set; while set, the watched pages' reads take the TLB's slow path
  /// (PhysMem::watchReads). Setting it drops the TLB's read and write entries of the
  /// watched frames (every CPU, every context; write drops the write entries), so a
  /// translation of them that the guest changed in its page tables without invalidating
  /// it, which the uninterrupted run would go on using, is walked again: a guest that
  /// invalidates as the SDM requires runs the same run.
  static StopWhen read(Gla La, uint64_t SizeBytes = 1);
  static StopWhen read(Hpa Pa, uint64_t SizeBytes = 1);
  /// read or write: what either counts (a read-modify-write of the range is two events
  /// for nth).
  static StopWhen access(Gla La, uint64_t SizeBytes = 1);
  static StopWhen access(Hpa Pa, uint64_t SizeBytes = 1);
  /// Before the first instruction of onCpu's CPU (CPU 0 if none) that would start with
  /// a virtual TSC (Cpu::Cycles: the TSC before VMX offsetting and scaling, as the
  /// ground truth stamps records) of at least Value; at once if the CPU is there
  /// already. A CPU that waits (HLT) may jump past Value before its next instruction.
  static StopWhen tsc(uint64_t Value);
  /// The COM1 output written after runUntil was called contains Text (not empty).
  static StopWhen serial(std::string Text);

  /// Only events of CPU Id.
  StopWhen onCpu(unsigned Id) const;
  /// Only VM exits of this basic exit reason; may be given several times (any of them).
  StopWhen reason(ExitReason R) const;
  /// The N-th matching event rather than the first (N >= 1; events and writes only).
  StopWhen nth(uint64_t N) const;

  /// One phrase: "the 10th VM exit (CPUID or HLT) on CPU 1".
  std::string describe() const;

  Kind K = Kind::VmExit;
  std::optional<unsigned> Cpu;
  std::vector<ExitReason> Reasons;
  uint64_t Count = 1;
  uint64_t Value = 0; ///< instructions, address or TSC
  uint64_t SizeBytes = 0;
  bool Physical = false; ///< Execute, Write, Read, Access: Value is an Hpa, not a Gla
  std::string Text;
};

} // namespace vmxsim
