/* Compiled as freestanding C11 (trace/CMakeLists.txt) to prove that trace/xentrace.h is
 * usable from the hypervisor core in hvm/: no C++ and no host headers. */
#include "trace/xentrace.h"

uint32_t vmxsim_xentrace_check(uint32_t *buf);
uint32_t vmxsim_xentrace_check(uint32_t *buf) {
  const uint32_t words[3] = {10, 0x81001234u, 0xffffffffu};
  uint32_t *end = xt_put(buf, XT_EV_VmxExit64, 1, 0x12345670000ull, words, XT_WORDS_VmxExit64);
  return (uint32_t)(end - buf) + (uint32_t)XT_TSCRULE_VmxExit64 + (uint32_t)XT_CLASS_GroundTruth;
}
