/* The VMX instructions as C functions.
 *
 * SDM Vol. 3C, "VMX Instruction Reference" > Conventions: every VMX instruction reports
 * VMsucceed (CF = ZF = 0), VMfailInvalid (CF = 1: no current VMCS to hold an error
 * number) or VMfailValid (ZF = 1: the number is in the VM-instruction error field).
 */
#ifndef HVM_VMX_INSN_H
#define HVM_VMX_INSN_H

#include <stdint.h>

#include "vmx/arch.h"

enum VmxStatus { VmSucceed = 0, VmFailInvalid = 1, VmFailValid = 2 };

static inline enum VmxStatus vmxStatus(uint8_t Cf, uint8_t Zf) {
  return Cf ? VmFailInvalid : Zf ? VmFailValid : VmSucceed;
}

/* The memory-operand forms take the 64-bit physical address of the region in memory. */
static inline enum VmxStatus vmxon(uint64_t RegionPa) {
  uint8_t Cf, Zf;
  __asm__ volatile("vmxon %[Pa]" : "=@ccc"(Cf), "=@ccz"(Zf) : [Pa] "m"(RegionPa) : "memory");
  return vmxStatus(Cf, Zf);
}

static inline enum VmxStatus vmxoff(void) {
  uint8_t Cf, Zf;
  __asm__ volatile("vmxoff" : "=@ccc"(Cf), "=@ccz"(Zf) : : "memory");
  return vmxStatus(Cf, Zf);
}

static inline enum VmxStatus vmclear(uint64_t VmcsPa) {
  uint8_t Cf, Zf;
  __asm__ volatile("vmclear %[Pa]" : "=@ccc"(Cf), "=@ccz"(Zf) : [Pa] "m"(VmcsPa) : "memory");
  return vmxStatus(Cf, Zf);
}

static inline enum VmxStatus vmptrld(uint64_t VmcsPa) {
  uint8_t Cf, Zf;
  __asm__ volatile("vmptrld %[Pa]" : "=@ccc"(Cf), "=@ccz"(Zf) : [Pa] "m"(VmcsPa) : "memory");
  return vmxStatus(Cf, Zf);
}

/* VMREAD r/m64, r64 and VMWRITE r64, r/m64 (Intel order); AT&T reverses operands. */
static inline enum VmxStatus vmreadChecked(enum VmcsField Field, uint64_t *Value) {
  uint8_t Cf, Zf;
  uint64_t V;
  __asm__ volatile("vmread %[F], %[V]"
                   : [V] "=r"(V), "=@ccc"(Cf), "=@ccz"(Zf)
                   : [F] "r"((uint64_t)Field));
  *Value = V;
  return vmxStatus(Cf, Zf);
}

static inline enum VmxStatus vmwriteChecked(enum VmcsField Field, uint64_t Value) {
  uint8_t Cf, Zf;
  __asm__ volatile("vmwrite %[V], %[F]"
                   : "=@ccc"(Cf), "=@ccz"(Zf)
                   : [F] "r"((uint64_t)Field), [V] "r"(Value));
  return vmxStatus(Cf, Zf);
}

/* For the exit path, where the current VMCS is known to be valid and every field read
   exists on every VMX processor: no status. */
/* INVVPID (SDM Vol. 3C, "INVVPID—Invalidate Translations Based on VPID"): the descriptor
   is the VPID in bits 15:0 and a linear address in bits 127:64; Type 0 individual
   address, 1 single context, 2 all contexts, 3 single context retaining globals. */
static inline enum VmxStatus invvpid(uint64_t Type, uint16_t Vpid, uint64_t Linear) {
  struct {
    uint64_t Vpid, Linear;
  } Descriptor = {Vpid, Linear};
  uint8_t Cf, Zf;
  __asm__ volatile("invvpid %[D], %[T]"
                   : "=@ccc"(Cf), "=@ccz"(Zf)
                   : [D] "m"(Descriptor), [T] "r"(Type)
                   : "memory");
  return vmxStatus(Cf, Zf);
}

static inline uint64_t vmread(enum VmcsField Field) {
  uint64_t V;
  __asm__ volatile("vmread %[F], %[V]" : [V] "=r"(V) : [F] "r"((uint64_t)Field) : "cc");
  return V;
}

static inline void vmwrite(enum VmcsField Field, uint64_t Value) {
  __asm__ volatile("vmwrite %[V], %[F]" : : [F] "r"((uint64_t)Field), [V] "r"(Value) : "cc");
}

#endif
