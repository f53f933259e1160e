// GoogleTest helpers for hypervisor tests on vmxsim (library target vmxsim_gtest): the VM
// exits, VM entries and VM-entry failures of a run as values, and gmock matchers on them
// (the "GoogleTest helpers" part of harness/README.md's "Run control" section).
//
//   MachineConfig Cfg;                       // ... Cfg.GroundTruthFile = "gt.xt";
//   auto M = Machine::create(Cfg, Err);
//   M->run();
//   auto T = vmxsim::testing::GroundTruth::read(*M);
//   ASSERT_TRUE(T) << T.error().str();
//   EXPECT_THAT(T->exits(0), Contains(ExitedWith(ExitReason::IoInstruction).port(0x3f8).write()));
//   EXPECT_THAT(T->exits(0), ExitsInOrder({ExitReason::Cpuid, ExitReason::Hlt}));
//   EXPECT_THAT(*T, HandlerCycles(ExitReason::Cpuid) <= 2000);
//
// A failing matcher explains itself with the exit's VMCS fields (by their SDM names from
// cpu/vmx/vmcs_fields.def) and the ground-truth records around it. Exit reasons, VM-entry
// checks and VM-instruction errors are the enumerators of their .def tables.
#pragma once
#include "cpu/vmx/vm_entry_checks.h"
#include "cpu/vmx/vm_exit.h"
#include "cpu/vmx/vmcs.h"
#include "harness/machine.h"
#include "trace/reader.h"

#include <gmock/gmock.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace vmxsim::testing {

using Records = std::shared_ptr<const std::vector<trace::TraceRecord>>;

/// One VM exit: the exit information fields as the processor recorded them (the ground
/// truth's GT_EXIT or GT_VMEXIT, GT_VMEXIT_EVENT, GT_VMEXIT_ADDR and GT_VMEXIT_REGS
/// records, or the current VMCS: lastExit).
struct ExitInfo {
  unsigned Cpu = 0;
  uint64_t Tsc = 0;
  uint32_t Reason = 0; ///< the full exit-reason field (bit 31: VM-entry failure)
  uint64_t Rip = 0;    ///< the guest's RIP at the exit
  uint64_t Qualification = 0;
  uint32_t InstructionLength = 0, InstructionInfo = 0;
  uint32_t InterruptionInfo = 0, InterruptionErrorCode = 0;
  uint32_t IdtVectoringInfo = 0, IdtVectoringErrorCode = 0;
  bool GuestLinearValid = false, GuestPhysicalValid = false;
  uint64_t GuestLinearAddress = 0, GuestPhysicalAddress = 0;
  /// RAX, RCX and RDX of the exiting instruction (the ground truth has them for CPUID,
  /// CR access, I/O, RDMSR and WRMSR exits, and for every exit of an image whose trace
  /// slots it watched; lastExit for every exit).
  bool HasRegs = false;
  uint64_t Rax = 0, Rcx = 0, Rdx = 0;
  /// Virtual cycles from this exit to the next VM entry on its CPU (ground truth only;
  /// none when no entry followed).
  std::optional<uint64_t> HandlerCycles;
  /// Where it came from, for failure messages: the records and the index of its
  /// GT_EXIT (GT_VMEXIT) among them (none for lastExit).
  Records Source;
  size_t Record = 0;
  uint32_t basicReason() const { return Reason & 0xffff; }
};

/// One VM entry (GT_VMENTRY, or GT_RESUME: the entry its CPU's last exit implies).
struct EntryInfo {
  unsigned Cpu = 0;
  uint64_t Tsc = 0;
  uint64_t Rip = 0;
  bool Launch = false;
  uint32_t InjectedInfo = 0, InjectedErrorCode = 0;
  Records Source;
  size_t Record = 0;
};

/// One failed VM entry (GT_VMENTRY_FAIL).
struct EntryFailureInfo {
  unsigned Cpu = 0;
  uint64_t Tsc = 0;
  VmEntryFailOutcome Outcome = VmEntryFailOutcome::VmFailValid;
  uint32_t Number = 0; ///< the VM-instruction error (VmFailValid), else the basic exit reason
  uint32_t CheckId = kNoVmEntryCheck; ///< the row of vm_entry_checks.def that failed
  uint64_t Qualification = 0;
  Records Source;
  size_t Record = 0;
};

/// The ground truth of a machine so far, parsed.
class GroundTruth {
public:
  /// Machine::groundTruthRecords (it needs MachineConfig::GroundTruthFile).
  static ErrorOr<GroundTruth> read(Machine &M);
  explicit GroundTruth(std::vector<trace::TraceRecord> Recs);
  GroundTruth() = default;

  const std::vector<trace::TraceRecord> &records() const { return *Recs; }
  /// Every VM exit in record order; or those of one CPU.
  const std::vector<ExitInfo> &exits() const { return Exits; }
  std::vector<ExitInfo> exits(unsigned Cpu) const;
  const std::vector<EntryInfo> &entries() const { return Entries; }
  const std::vector<EntryFailureInfo> &entryFailures() const { return Failures; }

private:
  Records Recs = std::make_shared<std::vector<trace::TraceRecord>>();
  std::vector<ExitInfo> Exits;
  std::vector<EntryInfo> Entries;
  std::vector<EntryFailureInfo> Failures;
};

/// The last VM exit of CPU Cpu as its current VMCS holds it (e.g. after runUntil stopped
/// at a VM exit): NoCurrentVmcs, NoSuchCpu.
ErrorOr<ExitInfo> lastExit(Machine &M, unsigned Cpu);

/// The VMCS fields of an exit, one per line ("  Exit reason: 0x1e (I/O instruction)").
std::string describeFields(const ExitInfo &E);
/// The records around record Index of Recs (Before before it, After after it), one per
/// line, the record itself marked with ">".
std::string recordsAround(const std::vector<trace::TraceRecord> &Recs, size_t Index,
                          size_t Before = 3, size_t After = 3);

void PrintTo(const ExitInfo &E, std::ostream *Os);
void PrintTo(const EntryInfo &E, std::ostream *Os);
void PrintTo(const EntryFailureInfo &E, std::ostream *Os);
void PrintTo(const GroundTruth &T, std::ostream *Os);

/// A matcher of one VM exit: its basic reason, and what the modifiers add (each a check
/// of the exit's qualification, registers or addresses).
class ExitMatcher {
public:
  /// Implicit, so that a list of reasons is a list of matchers (ExitsInOrder).
  ExitMatcher(ExitReason R) : Reason(R) {} // NOLINT(google-explicit-constructor)

  // I/O instruction (SDM Vol. 3C, Table "Exit Qualification for I/O Instructions").
  ExitMatcher port(uint16_t Port) const;
  ExitMatcher in() const;
  ExitMatcher out() const;
  ExitMatcher write() const { return out(); } ///< OUT
  ExitMatcher read() const { return in(); }   ///< IN
  ExitMatcher size(unsigned Bytes) const;
  ExitMatcher string() const;
  ExitMatcher rep() const;
  // Control-register access (Table "Exit Qualification for Control-Register Accesses").
  ExitMatcher cr(unsigned N) const;
  ExitMatcher movToCr() const;
  ExitMatcher movFromCr() const;
  ExitMatcher clts() const;
  ExitMatcher lmsw() const;
  ExitMatcher gpr(unsigned Reg) const; ///< the MOV CR's general-purpose register (0 RAX ..)
  // RDMSR / WRMSR: the MSR is ECX of the exiting instruction.
  ExitMatcher msr(uint32_t Index) const;
  // EPT violation (Table "Exit Qualification for EPT Violations").
  ExitMatcher gpa(uint64_t Address) const;
  ExitMatcher gla(uint64_t Address) const;
  ExitMatcher dataRead() const;
  ExitMatcher dataWrite() const;
  ExitMatcher fetch() const;
  // Exception or NMI: the vector of the VM-exit interruption information.
  ExitMatcher vector(uint8_t V) const;
  // Any exit.
  ExitMatcher qualification(uint64_t Q) const;
  ExitMatcher rip(uint64_t Rip) const;
  ExitMatcher onCpu(unsigned Cpu) const;
  ExitMatcher length(uint32_t Bytes) const;

  /// Whether E matches; else Why says the first difference ("port is 0x60, not 0x3f8").
  bool matches(const ExitInfo &E, std::string *Why) const;
  /// "a VM exit I/O instruction (30) with port 0x3f8, OUT".
  std::string describe() const;

  operator ::testing::Matcher<const ExitInfo &>() const; // NOLINT(google-explicit-constructor)

private:
  struct Check {
    std::string Name;                         ///< "port"
    std::function<uint64_t(const ExitInfo &)> Get;
    uint64_t Want;
    std::string Text;                         ///< how Want reads: "0x3f8", "OUT"
    std::function<std::string(uint64_t)> Show; ///< how a got value reads
    bool NeedsRegs = false;
  };
  ExitMatcher with(Check C) const;
  ExitReason Reason;
  std::vector<Check> Checks;
};

/// The exit matcher: ExitedWith(ExitReason::IoInstruction).port(0x3f8).write().
inline ExitMatcher ExitedWith(ExitReason R) { return ExitMatcher(R); }

/// The exits are exactly these, in this order.
::testing::Matcher<const std::vector<ExitInfo> &> ExitsInOrder(std::vector<ExitMatcher> Want);
/// These exits occur in this order, others may come between them (a subsequence).
::testing::Matcher<const std::vector<ExitInfo> &>
ContainsExitsInOrder(std::vector<ExitMatcher> Want);
/// Exactly this many exits of each listed basic reason (other reasons are not counted).
::testing::Matcher<const std::vector<ExitInfo> &>
ExitCountsAre(std::vector<std::pair<ExitReason, uint64_t>> Want);

/// A VM-entry failure with VMfailValid and this VM-instruction error.
::testing::Matcher<const EntryFailureInfo &> FailedWithVmInstructionError(VmInstructionError E);
/// A VM-entry failure reported by this check of vm_entry_checks.def.
::testing::Matcher<const EntryFailureInfo &> FailedEntryCheck(VmEntryCheckId Id);
/// The VM-instruction error field of CPU Cpu's current VMCS (after a VMX instruction
/// failed with VMfailValid).
::testing::Matcher<const Machine &> HasVmInstructionError(unsigned Cpu, VmInstructionError E);

/// Cycle budgets: HandlerCycles(ExitReason::Cpuid) <= 2000 matches a GroundTruth in
/// which every CPUID exit that a VM entry followed on its CPU reached that entry within
/// 2000 virtual cycles (and there is at least one such exit).
class HandlerCycles {
public:
  explicit HandlerCycles(ExitReason R) : Reason(R) {}
  friend ::testing::Matcher<const GroundTruth &> operator<=(HandlerCycles H, uint64_t Max) {
    return H.atMost(Max);
  }
  friend ::testing::Matcher<const GroundTruth &> operator<(HandlerCycles H, uint64_t Max) {
    return H.atMost(Max == 0 ? 0 : Max - 1);
  }
  ::testing::Matcher<const GroundTruth &> atMost(uint64_t Max) const;

private:
  ExitReason Reason;
};

} // namespace vmxsim::testing

namespace vmxsim {
/// Machines print as their CPU count (gmock prints the value a matcher was given).
void PrintTo(const Machine &M, std::ostream *Os);
} // namespace vmxsim
