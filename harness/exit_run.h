// A run counted in VM exits (the "Run control" section of harness/README.md): the VM
// exits of all CPUs together, in the order they happen, numbered from 1 since the machine
// was loaded. `vmxsim run --set-at-exit N:REG=VALUE` writes a register after the N-th
// exit (a divergence injected at a chosen exit, for `vmxsim bisect`), and `vmxsim bisect`
// takes its snapshots every K exits. Both stop the run with Machine::runUntil at that
// exit (after it has completed: the CPU at the host RIP, the exit information in the
// VMCS, the guest's general registers still in the CPU's) and continue it; a stop changes
// nothing the guest or the traces see.
#pragma once
#include "harness/machine.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace vmxsim {

/// After the AtExit-th VM exit, register Register (a name of Machine::writeRegister) of
/// the CPU that made that exit becomes Value. Right after an exit the general registers
/// other than RSP are still the guest's (SDM Vol. 3C, "VM Exits" > "Loading Host State":
/// only RSP, RIP and RFLAGS of them are loaded), so writing RAX there changes the RAX the
/// hypervisor's exit handler saves and sees.
struct RegisterPoke {
  uint64_t AtExit = 0;
  std::string Register;
  uint64_t Value = 0;
};

/// "N:REG=VALUE" (N >= 1; N and VALUE decimal or 0x hex). False with Why on a bad form;
/// the register name is checked when the poke is made.
bool parseRegisterPoke(const std::string &S, RegisterPoke &Out, std::string &Why);

/// Runs a machine while counting its VM exits, making the pokes and, every EveryExits
/// exits (0: never), calling AtEvery. Exits is the count so far: 0 for a machine just
/// built, or the count at the snapshot a machine was restored from (pokes at or before it
/// are in the snapshot already).
class ExitRun {
public:
  ExitRun(Machine &M, std::vector<RegisterPoke> Pokes, uint64_t Exits = 0);
  uint64_t EveryExits = 0;
  /// Called after the exit that makes Exits a multiple of EveryExits (after a poke at
  /// the same exit); an error ends the run with it.
  std::function<Error(const RunResult &)> AtEvery;
  /// Runs until the machine stops for a reason of Machine::run (returned as it gives
  /// it), or the first of Until is met (RunReason::Stopped, Condition = its index in
  /// Until; the exits are then no longer counted: a run ends there). Errors: runUntil's,
  /// a poke's register name (UnknownRegister), AtEvery's.
  ErrorOr<RunResult> run(const std::vector<StopWhen> &Until = {});
  uint64_t exits() const { return Exits; }

private:
  Machine &M;
  std::vector<RegisterPoke> Pokes; ///< sorted by AtExit
  uint64_t Exits;
};

} // namespace vmxsim
