// The fault contract (STYLE 2.3): everything that can fault returns a Status; the details
// are stored in the Cpu before returning. The happy path is one predictable branch.
#pragma once
#include <cstdint>

namespace vmxsim {

enum class [[nodiscard]] Status : uint8_t {
  Ok,
  Fault,         ///< an exception is pending in Cpu::Pending (vector, error code, CR2)
  VmExit,        ///< the VM exit has happened (vmExit, cpu/vmx/vm_exit.h): host state is
                 ///< loaded; callers unwind to the run loop without touching state
  Shutdown,      ///< triple fault or shutdown state
  Unimplemented, ///< an emulator gap (never a guest error): reported loudly
  Frozen,        ///< the processor stopped before the instruction, which did not execute
                 ///< (the x87 FERR# freeze, cpu/x87.h): its activity state says how it
                 ///< waits; callers unwind to the run loop without touching state
};

/// Propagates any non-Ok status to the caller.
#define VMX_TRY(Expr)                                                                   \
  do {                                                                                   \
    if (::vmxsim::Status S_ = (Expr); S_ != ::vmxsim::Status::Ok) [[unlikely]]            \
      return S_;                                                                         \
  } while (0)

/// Exception vectors (SDM Vol. 3A, Exception and Interrupt Reference).
namespace vec {
inline constexpr uint8_t DE = 0, DB = 1, NMI = 2, BP = 3, OF = 4, BR = 5, UD = 6, NM = 7,
                         DF = 8, TS = 10, NP = 11, SS = 12, GP = 13, PF = 14, MF = 16,
                         AC = 17, MC = 18, XM = 19, VE = 20, CP = 21;
}

} // namespace vmxsim
