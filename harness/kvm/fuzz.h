// The differential instruction fuzzer (`vmxsim xcheck fuzz`): random but valid
// instruction streams, encoded with the Zydis encoder, run under KVM and under vmxsim
// from the same memory and registers; registers (defined flags only), data memory, the
// exits and the exception taken must agree. Reproducible from a seed; a divergence is
// minimised and can be written out as a regression case that vmxsim replays alone.
//
// Guest layout (identity paging of exactly these 4 KiB pages, user-accessible, accessed
// and dirty preset so neither side writes the tables; only D0, D1 and the stack page
// are writable, everything else unmapped):
//   0x1000 GDT   0x2000 IDT (vectors 0-31 -> 0x20000 + 16 * vector: HLT)   0x3000 TSS
//   0x10000 page tables   0x30000 the stream (then OUT kEndPort, AL)   0x50000 stack page
//   0x40000 D0, 0x41000 D1 (data, R15 points to D1 so a disp8 crosses D0/D1)
//   0x42000 U (not present: #PF)   0x43000 R (read-only: #PF on writes, CR0.WP = 1)
// Two kinds of streams (see kvm_vm.h for why):
//  - CPL 3 (64-bit, IOPL 3): run NATIVELY on the AMD host CPU: real-hardware semantics.
//    An exception ends both sides at the faulting instruction; CR2 is compared, the
//    vector is not observable on KVM (vmxsim's is recorded for the report).
//  - CPL 0 (64-bit): run by the host kernel's instruction EMULATOR: a second independent
//    implementation, not hardware. Exceptions are delivered through the IDT on both
//    sides, so vector (the handler's RIP), error code and frame (stack page) are
//    compared. System instructions that are legal at CPL 0 are generated only here.
//
// Flags: a stream of several instructions is compared under the mask of flags that are
// DEFINED after it: each instruction's Zydis flag table (tested / modified / set /
// undefined) updates a running set of undefined flags, and an instruction that would
// read an undefined flag (ADC, Jcc, SETcc, CMOVcc, PUSHF...) is not generated.
#pragma once
#include "harness/kvm/xcheck.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace vmxsim::kvm {

inline constexpr uint16_t kEndPort = 0x80;

/// One generated instruction.
struct FuzzInsn {
  std::vector<uint8_t> Bytes;
  uint16_t Form = 0; ///< row of the form table (for coverage); 0xffff when replayed
};

struct FuzzStream {
  unsigned Cpl = 3;
  std::vector<FuzzInsn> Insns;
  uint64_t Gpr[16] = {};
  uint64_t Rflags = 0x2;
  uint64_t DataSeed = 0; ///< contents of D0, D1, R and the stack page
  std::vector<uint8_t> code() const; ///< the stream plus the end marker (2 bytes)
};

struct FuzzOptions {
  uint64_t Seed = 1;
  uint64_t Streams = 20000;
  unsigned MaxInsns = 6;  ///< instructions per stream (1..MaxInsns)
  bool Cpl0 = true;       ///< also generate CPL 0 streams (every 4th)
  bool Cpl3 = true;
  bool Capstone = true;   ///< decode every stream with Capstone and vmxsim's decoder too
  bool Minimise = true;
  unsigned MaxReported = 10; ///< divergences kept (minimised) in the result
  /// Test-only: vmxsim's side runs with Cpu::TestBugs.FlipBtCarry (BT* store the wrong
  /// CF), which proves that the differential run can fail.
  bool InjectBtCarryBug = false;
};

struct FuzzDivergence {
  FuzzStream Stream;    ///< minimised
  std::string Diff;     ///< first difference
  std::string Detail;   ///< both sides
  Outcome Kvm;          ///< the KVM outcome of the minimised stream
  std::vector<std::pair<uint64_t, uint8_t>> KvmMemChanges; ///< bytes KVM changed
};

struct FuzzResult {
  bool HostProblem = false;
  std::string Why;
  uint64_t Compared = 0, Cpl0Streams = 0, Cpl3Streams = 0, Divergent = 0;
  /// Streams not compared: CPL 0 streams the host kernel's emulator could not run (KVM
  /// internal error; coverage kind "kvm-emulator-lacks" names the forms involved), and
  /// streams whose POPF set TF so that the trap falls after the end marker.
  uint64_t KvmCannot = 0;
  /// Compared streams whose difference did not come back when the stream was run again
  /// on both sides (not counted as divergent): KVM's outcome of one stream has been seen
  /// to change from run to run under host load; vmxsim's is deterministic. The first
  /// few differences are kept in UnreproducibleExamples.
  uint64_t Unreproducible = 0;
  std::vector<std::string> UnreproducibleExamples;
  /// Instructions decoded by both, disagreements, and of those the known class (Capstone 4
  /// mishandles F2/F3 followed by 66); CapstoneExamples shows the unexplained ones.
  uint64_t CapstoneChecked = 0, CapstoneDisagree = 0, CapstoneKnown = 0;
  std::vector<std::string> CapstoneExamples;
  std::vector<FuzzDivergence> Divergences;
  /// kind -> name -> count: "form" (instruction form), "exit" (final event),
  /// "exception" (vmxsim's vector), "event" (I/O and MMIO exits).
  std::map<std::string, std::map<std::string, uint64_t>> Coverage;
  double Seconds = 0;
};

/// Runs the fuzzer. Needs /dev/kvm (HostProblem and Why otherwise).
FuzzResult runFuzz(const FuzzOptions &O);

/// "kind<TAB>name<TAB>count" lines, sorted (for the coverage report).
std::string formatCoverage(const FuzzResult &R);

/// A regression case: the stream, its start state and what KVM did.
std::string formatRegression(const FuzzDivergence &D);
/// Replays a regression case under vmxsim alone; empty if vmxsim now matches the
/// recorded KVM outcome, else the first difference (or a parse error).
std::string replayRegression(const std::string &Text, bool InjectBtCarryBug = false);

/// Number of instruction forms in the generator's table, and the name of one.
unsigned numForms();
std::string formName(unsigned Form);

} // namespace vmxsim::kvm
