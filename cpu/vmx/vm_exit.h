// VM exits (SDM Vol. 3C, "VM Exits"): the API the rest of the emulator calls to leave
// VMX non-root operation. vmExit performs the whole exit synchronously — records the
// exit information, saves guest state, stores guest MSRs, loads host state and host MSRs
// (or aborts) — and returns Status::VmExit, which handlers pass up unchanged; the run
// loop then simply continues in the host.
#pragma once
#include "cpu/status.h"

#include <cstdint>

namespace vmxsim {

class Cpu;

/// Basic exit reasons, generated from exit_reasons.def (SDM Vol. 3D, Appendix C).
enum class ExitReason : uint16_t {
#define EXIT_REASON(Name, Number, Kind, SdmName) Name = Number,
#include "cpu/vmx/exit_reasons.def"
#undef EXIT_REASON
};

/// Bit 31 of the exit-reason field: "VM-entry failure" (SDM Vol. 3C, "Basic VM-Exit
/// Information").
inline constexpr uint32_t kExitReasonEntryFailure = 1u << 31;

/// Interruption-information format shared by the VM-entry interruption-information,
/// VM-exit interruption-information and IDT-vectoring fields (SDM Vol. 3C, "Format of
/// the VM-Entry Interruption-Information Field").
namespace intinfo {
inline constexpr uint32_t VectorMask = 0xff, TypeShift = 8, TypeMask = 7u << 8,
                          DeliverErrorCode = 1u << 11, NmiUnblockingDueToIret = 1u << 12,
                          Valid = 1u << 31;
enum Type : uint32_t {
  ExternalInterrupt = 0,
  Nmi = 2,
  HardwareException = 3,
  SoftwareInterrupt = 4,
  PrivilegedSoftwareException = 5,
  SoftwareException = 6,
  OtherEvent = 7,
};
/// Bits 30:12 of the VM-entry interruption-information field are reserved (bit 12, NMI
/// unblocking due to IRET, exists only in the exit fields).
inline constexpr uint32_t EntryReserved = 0x7ffff000;
constexpr unsigned vector(uint32_t Info) { return Info & VectorMask; }
constexpr unsigned type(uint32_t Info) { return (Info & TypeMask) >> TypeShift; }
} // namespace intinfo

/// Everything a VM exit records (SDM Vol. 3C, "Recording VM-Exit Information and
/// Updating VM-Entry Control Fields"). Fields a given exit does not define stay zero.
struct VmExitInfo {
  ExitReason Reason = ExitReason::ExceptionOrNmi;
  bool EntryFailure = false; ///< sets bit 31 and skips saving guest state
  uint64_t Qualification = 0;
  uint64_t GuestLinearAddress = 0;
  bool GuestLinearValid = false;
  uint64_t GuestPhysicalAddress = 0;
  bool GuestPhysicalValid = false;
  uint32_t InstructionLength = 0;
  uint32_t InstructionInfo = 0;
  uint32_t InterruptionInfo = 0; ///< intinfo format; 0 = not valid
  uint32_t InterruptionErrorCode = 0;
  uint32_t IdtVectoringInfo = 0; ///< intinfo format; 0 = not valid
  uint32_t IdtVectoringErrorCode = 0;
};

/// Performs a VM exit from VMX non-root operation (or a VM-entry failure when
/// Info.EntryFailure) and returns Status::VmExit; Status::Shutdown after a VMX abort.
/// Guest RIP is saved as C.S.Rip: fault-like exits must call this before advancing RIP.
Status vmExit(Cpu &C, const VmExitInfo &Info);

/// Loads MSRs from an MSR-load area of Count 16-byte entries (SDM Vol. 3C, "Loading
/// MSRs"); returns 0, or the 1-based index of the entry that failed. An entry whose
/// value vmxsim does not model (WRMSR would stop the run with status 10) sets
/// Unimplemented, with C.StopWhat naming it: the caller stops the run rather
/// than report an MSR-loading failure the processor would not have.
uint32_t loadMsrAreaEntries(Cpu &C, uint64_t Area, uint32_t Count, bool &Unimplemented);
inline uint32_t loadMsrArea(Cpu &C, uint64_t Area, uint32_t Count, bool &Unimplemented) {
  Unimplemented = false;
  return Count == 0 ? 0 : loadMsrAreaEntries(C, Area, Count, Unimplemented);
}

/// VMX abort (SDM Vol. 3C, "VMX Aborts"): writes the indicator to offset 4 of the
/// current VMCS region and puts the processor into shutdown. Returns Status::Shutdown.
enum class VmxAbortIndicator : uint32_t {
  SavingGuestMsrs = 1,
  HostCheckingFailure = 2,
  CorruptedVmcs = 3,
  LoadingHostMsrs = 4,
  MachineCheckDuringExit = 5,
  LongModeHostWithoutAddressSpaceSize = 6,
};
Status vmxAbort(Cpu &C, VmxAbortIndicator Indicator);

/// The number of entries vmxsim processes in each MSR list (the VM-entry MSR-load list,
/// the VM-exit MSR-store and MSR-load lists): 512 * (N + 1) for N = IA32_VMX_MISC[27:25],
/// "the recommended maximum number of MSRs to be included in each list. If the limit is
/// exceeded, undefined processor behavior may result (including a machine check during
/// the VMX transition)" (SDM Vol. 3D, A.6 "Miscellaneous Data"; Vol. 3C, "VM-Exit
/// Controls for MSRs" and "VM-Entry Controls for MSRs"). vmxsim gives that undefined
/// case one defined outcome, the failure the SDM gives an entry that cannot be processed:
/// entry Limit + 1 of the VM-entry MSR-load list fails the VM entry with exit reason 34
/// and qualification Limit + 1 ("VM-Entry Failures During or After Loading Guest
/// State"), and of a VM-exit list causes a VMX abort with indicator 1 (store) or 4
/// (load) ("VMX Aborts"). The entries before it are processed. This also bounds the work
/// of a transition whatever 32-bit count the VMCS holds.
uint32_t msrListLimit(const Cpu &C);

} // namespace vmxsim
