// BOOTSTRAP VERSION: the system-family work replaces this file.
#include "cpu/exceptions.h"
#include "cpu/cpu.h"
namespace vmxsim {
Status deliverPendingException(Cpu &) { return Status::Shutdown; }
Status deliverEvent(Cpu &, EventKind, uint8_t, bool, uint32_t, uint64_t) {
  return Status::Shutdown;
}
} // namespace vmxsim
