// BOOTSTRAP VERSION: the system-family work replaces this file.
#include "cpu/msrs.h"
#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
namespace vmxsim {
void resetMsrs(Cpu &) {}
uint32_t cpuidSignature(const CpuModel &) { return 0x000806f8; }
Status readMsr(Cpu &C, uint32_t, uint64_t &) { return C.raiseGp(0); }
Status writeMsr(Cpu &C, uint32_t, uint64_t) { return C.raiseGp(0); }
const CpuModel &CpuModel::defaultModel() {
  static const CpuModel M;
  return M;
}
} // namespace vmxsim
