#include "cpu/vmx/vmcs.h"

namespace vmxsim {

namespace {
// Encoding -> field, for the 15-bit encoding space with the access-type bit cleared,
// computed at compile time from the table (no initialisation guard on the VMREAD/VMWRITE
// path); 0xffff marks "no such field".
struct EncodingIndex {
  uint16_t FieldOf[0x8000 / 2];
};
constexpr EncodingIndex makeEncodingIndex() {
  EncodingIndex Index{};
  for (uint16_t &V : Index.FieldOf)
    V = 0xffff;
  for (unsigned I = 0; I < kNumVmcsFields; ++I)
    Index.FieldOf[kVmcsFields[I].Encoding >> 1] = uint16_t(I);
  return Index;
}
constexpr EncodingIndex kEncodingIndex = makeEncodingIndex();
const EncodingIndex &encodingIndex() { return kEncodingIndex; }
} // namespace

VmcsLookup lookupEncoding(uint64_t Encoding) {
  VmcsLookup L;
  // Bits 63:15 must be zero (SDM Vol. 3C, "VMREAD, VMWRITE, and Encodings of VMCS
  // Fields": bits 31:15 are reserved; in 64-bit mode the register is 64 bits and any bit
  // above 31 set also names no field).
  if (Encoding >> 15)
    return L;
  uint16_t Idx = encodingIndex().FieldOf[(Encoding & 0x7fff) >> 1];
  if (Idx == 0xffff)
    return L;
  const VmcsFieldInfo &F = kVmcsFields[Idx];
  bool High = Encoding & 1;
  if (High && F.Width != VmcsWidth::W64)
    return L;
  L.Found = true;
  L.Field = VmcsField(Idx);
  L.High = High;
  return L;
}

const char *vmInstructionErrorText(unsigned Number) {
  switch (Number) {
#define VM_INSTRUCTION_ERROR(Name, Num, Desc)                                           \
  case Num:                                                                              \
    return Desc;
#include "cpu/vmx/vm_instruction_errors.def"
#undef VM_INSTRUCTION_ERROR
  }
  return "unknown VM-instruction error";
}

} // namespace vmxsim
