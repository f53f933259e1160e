// The same guest under KVM and under vmxsim, compared (`vmxsim xcheck`, DESIGN.md
// "Correctness sources", item 3). Each side runs from one memory image and one register
// state to a final event (HLT, shutdown, an OUT to the stop port, or its bound); the
// sequence of exits that reach user space on KVM (port I/O with port, size, direction
// and data; MMIO) and the final registers and memory must be the same.
//
// What "the same" means, and why:
//  - Port reads (IN) and MMIO reads return the same deterministic value on both sides
//    (inputValue()), so guests that read devices stay comparable.
//  - vmxsim has no devices here: every port is the recorder, and guest-physical addresses
//    from RamBytes to 4 GiB are one recorded MMIO region (KVM exits for any address
//    outside its memory slot).
//  - Exceptions at CPL 3 may end a KVM run with a shutdown exit (harness/kvm/kvm_vm.h
//    says when). With Cpl3ExceptionStops the vmxsim side stops the same way, with its
//    registers as they were when the exception was raised; the outcome always records
//    vmxsim's first exception (vector, error code, RIP).
//  - Registers compared: the 16 GPRs, RIP, RFLAGS under FlagMask (RF excluded: KVM shows
//    the RF a fault would push), and CR2 (the #PF address). Control registers other
//    than CR2 are not: PVM rewrites CR0 (NE, AM, WP) when it switches a 64-bit vCPU to
//    its paravirtual mode.
#pragma once
#include "cpu/registers.h"
#include "harness/kvm/kvm_vm.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace vmxsim {
class Cpu;
class PhysMem;
class IoBus;
struct CpuModel;
} // namespace vmxsim

namespace vmxsim::kvm {

/// One exit that reaches user space (or the final event of a run).
struct Event {
  ExitKind Kind = ExitKind::Hlt;
  uint16_t Port = 0;
  uint8_t Size = 0;
  bool Write = false;
  uint64_t Data = 0;
  uint64_t Addr = 0;
  bool operator==(const Event &O) const;
  std::string str() const;
};

/// The value an IN or MMIO read returns on both sides: a hash of where and when.
uint64_t inputValue(uint64_t Where, unsigned Seq, unsigned SizeBytes);

struct RunLimits {
  uint64_t MaxInsns = 50'000'000;  ///< vmxsim's retired-instruction bound
  unsigned TimeoutMs = 10'000;     ///< KVM's wall-clock bound for the whole run
  unsigned MaxEvents = 100'000;    ///< port/MMIO exits before the run is cut off
};

/// What one side did.
struct Outcome {
  std::vector<Event> Events; ///< I/O and MMIO in order; the last one is the final event
  ExitKind End = ExitKind::Error;
  std::string What; ///< for Timeout/Error: why (one line)
  CpuState State;   ///< final registers
  /// vmxsim only: the first exception raised (vector, error code, #PF address).
  bool Excepted = false;
  uint8_t Vector = 0;
  bool HasErrorCode = false;
  uint32_t ErrorCode = 0;
  uint64_t FaultRip = 0; ///< RIP when that exception was raised
};

/// How both sides run.
struct SideConfig {
  uint64_t RamBytes = 16ull << 20;
  std::optional<uint16_t> StopPort; ///< an OUT here ends the run (after recording it)
  /// Stop vmxsim at an exception raised at CPL 3, as KVM's shutdown exit does when this
  /// KVM cannot deliver it (see the file comment). Off: both sides deliver through the
  /// guest IDT, which is what this KVM does with the fuzzer's layout.
  bool Cpl3ExceptionStops = false;
  /// Test-only: vmxsim's side runs with Cpu::TestBugs.FlipBtCarry.
  bool InjectBtCarryBug = false;
};

/// vmxsim as one side: a processor, RAM, a recording port bus and MMIO region. Reusable:
/// load() then run() as often as needed.
class SimSide {
public:
  explicit SimSide(const SideConfig &Cfg);
  ~SimSide();
  PhysMem &mem();
  Cpu &cpu();
  /// Copies Bytes into guest RAM at Gpa (false if it does not fit).
  bool load(uint64_t Gpa, const void *Bytes, uint64_t Size);
  Outcome run(const CpuState &Start, const RunLimits &L);

private:
  struct Impl;
  std::unique_ptr<Impl> P;
};

/// KVM as the other side.
class KvmSide {
public:
  static std::unique_ptr<KvmSide> create(const SideConfig &Cfg, std::string &Why);
  uint8_t *ram() { return Vm->ram(); }
  bool load(uint64_t Gpa, const void *Bytes, uint64_t Size);
  Outcome run(const CpuState &Start, const RunLimits &L);
  KvmVm &vm() { return *Vm; }

private:
  SideConfig Cfg;
  std::unique_ptr<KvmVm> Vm;
};

/// Compares two outcomes; empty if identical, else the first difference (one line).
std::string compareOutcomes(const Outcome &Kvm, const Outcome &Sim, uint64_t FlagMask);
/// Both sides' events and registers, for a failure report.
std::string describeOutcomes(const Outcome &Kvm, const Outcome &Sim);

/// Entry modes of `vmxsim xcheck`.
enum class XMode : uint8_t { Real, Prot32, Long };

struct XcheckConfig {
  std::string Image; ///< flat binary
  XMode Mode = XMode::Long;
  std::optional<uint64_t> LoadAddr; ///< default 0x7c00 (real) or 0x100000
  SideConfig Side;
  RunLimits Limits;
};

struct XcheckResult {
  bool Identical = false;
  bool HostProblem = false; ///< KVM missing/refusing, bad image: Report says why
  std::string Report;       ///< "identical ..." or the first difference with both sides
};

/// `vmxsim xcheck IMAGE`: builds the entry state with vmxsim's boot code
/// (harness/boot_state.h), runs the image on both sides and compares. Memory is
/// compared over all of RAM.
XcheckResult runXcheck(const XcheckConfig &Cfg);

} // namespace vmxsim::kvm
