// How the processor executes guest code (`vmxsim run --exec`, MachineConfig::Exec;
// docs/TRANSLATOR.md).
#pragma once
#include <cstdint>

namespace vmxsim {

enum class ExecMode : uint8_t {
  Interp,    ///< the interpreter only (the default)
  Translate, ///< hot blocks run as translated host code (cpu/jit/translator.h)
  /// Every translated block is run by the interpreter and by its translation and the two
  /// results compared; a difference stops the run (StopReason::LockstepMismatch).
  Lockstep,
};

} // namespace vmxsim
