// What a VM exit's exit qualification and the guest's registers at the exit say about the
// instruction that caused it, for the checks of a hypervisor's handler records against
// the ground truth (trace/check.cpp for Xen's records, trace/check_kvm.cpp for KVM's):
// one definition of each field, shared.
#pragma once
#include <cstdint>

namespace vmxsim::trace {

// SDM Vol. 3C, "Exit Qualification for I/O Instructions": bits 2:0 size - 1, bit 3
// direction (1 = IN), bit 4 string instruction, bits 31:16 the port.
constexpr uint32_t ioSize(uint64_t Qual) { return uint32_t(Qual & 7) + 1; }
constexpr bool ioIsIn(uint64_t Qual) { return (Qual >> 3) & 1; }
constexpr bool ioIsString(uint64_t Qual) { return (Qual >> 4) & 1; }
constexpr uint32_t ioPort(uint64_t Qual) { return uint32_t(Qual >> 16) & 0xffff; }
/// The data a (non-string) OUT of Size bytes writes: RAX's low Size bytes.
constexpr uint32_t outData(uint64_t Rax, uint32_t Size) {
  return uint32_t(Rax) & (Size >= 4 ? 0xffffffffu : (1u << (8 * Size)) - 1);
}

// RDMSR and WRMSR (SDM Vol. 2B): the index in ECX; WRMSR writes EDX:EAX.
constexpr uint32_t msrIndex(uint64_t Rcx) { return uint32_t(Rcx); }
constexpr uint64_t wrmsrValue(uint64_t Rax, uint64_t Rdx) {
  return uint64_t(uint32_t(Rdx)) << 32 | uint32_t(Rax);
}

// CPUID (SDM Vol. 2A): the leaf in EAX, the sub-leaf in ECX.
constexpr uint32_t cpuidLeaf(uint64_t Rax) { return uint32_t(Rax); }
constexpr uint32_t cpuidSubleaf(uint64_t Rcx) { return uint32_t(Rcx); }

} // namespace vmxsim::trace
