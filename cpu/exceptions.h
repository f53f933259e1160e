// Event delivery through the IDT in every mode (SDM Vol. 3A, Interrupt and Exception
// Handling): exceptions with error codes, #DF escalation, triple fault, external
// interrupts, NMIs and software interrupts.
#pragma once
#include "cpu/status.h"
#include <cstdint>

namespace vmxsim {

class Cpu;

enum class EventKind : uint8_t {
  Exception,         ///< fault or trap raised by the processor (C.Pending)
  External,          ///< INTR, vector from the interrupt controller
  Nmi,
  SoftwareInt,       ///< INT n (privilege checked against the gate DPL)
  SoftwareException, ///< INT3, INTO (also checked against the gate DPL)
  PrivSoftwareException, ///< INT1 (ICEBP)
};

/// RFLAGS.RF in the image of hardware exception Vector (Dr6Bits: a #DB's DR6 bits, in
/// PendingEvent::FaultAddr): 1 for a fault other than an instruction-breakpoint #DB (SDM
/// Vol. 3B, "Instruction-Breakpoint Exception Condition"); else RF as it is.
bool exceptionImageSetsRf(uint8_t Vector, uint64_t Dr6Bits);

/// Delivers the exception pending in C.Pending, escalating to #DF and to a triple fault
/// (returns Status::Shutdown) per SDM Vol. 3A, Interrupt 8—Double Fault Exception.
Status deliverPendingException(Cpu &C);

/// Delivers an event of the given kind. NextRip is the return address pushed for traps
/// and software interrupts (for faults it is the faulting instruction's RIP). Returns
/// Fault if delivery itself faulted (C.Pending holds the new exception).
Status deliverEvent(Cpu &C, EventKind Kind, uint8_t Vector, bool HasErrorCode,
                    uint32_t ErrorCode, uint64_t ReturnRip);

} // namespace vmxsim
