// A minimal KVM back-end: one VM, one memory slot, one vCPU, entered in a state given as
// vmxsim's own CpuState, run exit by exit. Used by `vmxsim xcheck` and the differential
// instruction fuzzer (harness/kvm/fuzz.h) as the second side of a comparison (DESIGN.md,
// "Correctness sources", item 3).
//
// What the /dev/kvm of these machines is (measured with a probe program, kernel
// 6.18.44-fc, AMD EPYC host; API version 12). It is a paravirtual module (PVM), not VT-x:
//  - Accepted entry states (KVM_SET_SREGS + KVM_SET_REGS before the first KVM_RUN): real
//    mode, 32-bit protected mode (paging off), 64-bit long mode at CPL 0, and 64-bit long
//    mode at CPL 3. PVM lets the CPL of a vCPU change through SET_SREGS only before its
//    first KVM_RUN (its source: "CPL changing is only valid for the first change"; later
//    the vCPU triple-faults), so a KvmVm keeps the CPL of its first run and refuses a
//    state with another one (use one VM per CPL).
//  - CPL 0, real-mode and 32-bit code is run by the kernel's instruction emulator:
//    measured 1.6 MIPS (DEC/JNZ loop). CPL 3 64-bit code runs natively on the AMD host:
//    measured 5,300 MIPS. One SET_SREGS + SET_REGS + KVM_RUN to the first OUT costs
//    ~56 us; a user-space exit costs 7-25 us (the first KVM_RUN of a VM ~100-300 us).
//  - Exits seen: OUT/IN -> KVM_EXIT_IO (port, size, direction, data; count 1), a store to
//    a guest-physical address outside the memory slot -> KVM_EXIT_MMIO (address, length,
//    data), HLT at CPL 0 -> KVM_EXIT_HLT, triple fault -> KVM_EXIT_SHUTDOWN.
//  - An exception at CPL 0 (any mode) is delivered through the guest IDT by the emulator,
//    exactly as the SDM says (checked: #GP from WRMSR to an unknown MSR vectors to the
//    handler, which runs and HLTs).
//  - An exception at CPL 3 IS delivered through the guest IDT (to a CPL 0 handler via the
//    TSS's RSP0) with the fuzzer's layout (harness/kvm/fuzz.h: IDT, GDT, TSS, handlers
//    and stacks in 4 KiB pages, A/D preset, RFLAGS.IF=1): over 1,500,000 CPL 3 streams with
//    #DE/#DB/#UD/#GP/#PF agreed with vmxsim on vector, error code and frame.
//    But with a first probe layout (the same tables and handlers mapped only by 2 MiB
//    pages, IF=0), EVERY CPL 3 exception ended in KVM_EXIT_SHUTDOWN instead, the state
//    left at the event: RIP at the faulting instruction (after it for INT3), RFLAGS.RF
//    set for faults, CR2 loaded for #PF. The cause was not isolated. PVM's own
//    paravirtual event entry (MSR_PVM_EVENT_ENTRY / MSR_PVM_VCPU_STRUCT) is not usable:
//    KVM_SET_MSRS and KVM_GET_MSRS fail with EINVAL for every MSR, and a guest WRMSR to
//    those MSRs is #GP. SideConfig::Cpl3ExceptionStops (xcheck.h) models the shutdown.
//  - PVM deviations found by the fuzzer at CPL 3: RFLAGS.IOPL and AC read back (and are
//    pushed) as the hardware's (IOPL 0, AC 0) whatever the VMM set; INT3 through a DPL 0
//    gate gives #BP (the SDM: #GP); an instruction whose #GP PVM intercepts is re-run in
//    the kernel's emulator, which raises #UD for VEX/MOVBE/LZCNT/TZCNT/ADX. At CPL 0 the
//    kernel's emulator lacks the BMI/ADX/... instructions (KVM internal error), runs
//    LZCNT/TZCNT as BSR/BSF and MOVBE as #UD, commits the first half of a page-crossing
//    store that faults on its second page, zero-extends a 32-bit CMPXCHG destination on
//    failure, and clears RFLAGS.AC on event delivery. harness/kvm/fuzz.h lists how each
//    is kept out of the comparison.
//  - The vCPU can be run again after a shutdown exit (new SET_REGS/SET_SREGS).
//  - Port I/O at CPL 3 is executed even with IOPL 0 and no I/O bitmap (real hardware:
//    #GP(0)): PVM emulates the trapped instruction without the IOPL check, and IOPL 3
//    cannot be given to user code (next item), so the fuzzer tests port I/O at CPL 0.
//  - System ioctls KVM_GET_SUPPORTED_CPUID and KVM_GET_MSR_INDEX_LIST, and the vCPU
//    ioctl KVM_GET_CPUID2, fail with EINVAL: the vCPU runs with the module's default
//    CPUID (the fuzzer excludes CPUID anyway).
#pragma once
#include "cpu/registers.h"

#include <cstdint>
#include <memory>
#include <string>

struct kvm_run;

namespace vmxsim::kvm {

/// What ended one KVM_RUN.
enum class ExitKind : uint8_t {
  Io,       ///< port I/O: Port, Size, Write, Data
  Mmio,     ///< access outside RAM: Addr, Size, Write, Data
  Hlt,      ///< HLT
  Shutdown, ///< triple fault (or, at CPL 3 here, any exception: see the file comment)
  Timeout,  ///< the run exceeded its wall-clock bound
  Error,    ///< KVM refused or reported an internal error: What says which
};
const char *exitKindName(ExitKind K);

struct Exit {
  ExitKind Kind = ExitKind::Error;
  uint16_t Port = 0;
  uint8_t Size = 0;
  bool Write = false;
  uint64_t Data = 0;
  uint64_t Addr = 0;
  std::string What;
};

class KvmVm {
public:
  /// True if /dev/kvm (or $VMXSIM_KVM_DEVICE, for tests) can be opened read/write;
  /// otherwise Why says why (one line).
  static bool available(std::string &Why);
  /// A VM with RamBytes of RAM at guest-physical 0 and one vCPU. Null and Why on failure.
  static std::unique_ptr<KvmVm> create(uint64_t RamBytes, std::string &Why);
  ~KvmVm();
  KvmVm(const KvmVm &) = delete;
  KvmVm &operator=(const KvmVm &) = delete;

  uint8_t *ram() { return Ram; }
  uint64_t ramBytes() const { return RamBytes; }

  /// Loads GPRs, RIP, RFLAGS, segment registers (with hidden parts), GDTR/IDTR, CR0,
  /// CR2, CR3, CR4 and EFER from S. False and Why if KVM refuses, or if the CPL differs
  /// from the one this vCPU already ran at (PVM cannot change it; see the file comment).
  bool setState(const CpuState &S, std::string &Why);
  /// Reads the same registers back into S (other fields of S are left alone).
  bool getState(CpuState &S, std::string &Why);
  /// One KVM_RUN, bounded by TimeoutMs of wall-clock time (a signal interrupts it).
  /// For a port or MMIO read exit, call completeRead() before running again.
  Exit run(unsigned TimeoutMs);
  /// Supplies the value of the pending IN or MMIO read.
  void completeRead(uint64_t Value);

private:
  KvmVm() = default;
  int SysFd = -1, VmFd = -1, CpuFd = -1;
  kvm_run *Run = nullptr;
  size_t RunBytes = 0;
  uint8_t *Ram = nullptr;
  uint64_t RamBytes = 0;
  bool HasRun = false;
  unsigned RunCpl = 0;
};

} // namespace vmxsim::kvm
