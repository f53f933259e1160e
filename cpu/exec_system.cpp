// System instructions. BOOTSTRAP VERSION: the system-family work replaces this file.
#include "cpu/exec.h"

namespace vmxsim {
bool bindMovSystem(const DecodeInfo &, DecodedInsn &) { return false; }
bool bindPushSeg(const DecodeInfo &, DecodedInsn &) { return false; }
bool bindPopSeg(const DecodeInfo &, DecodedInsn &) { return false; }
bool bindFarJmp(const DecodeInfo &, DecodedInsn &) { return false; }
bool bindFarCall(const DecodeInfo &, DecodedInsn &) { return false; }

namespace {
Status execHlt(Cpu &C, const DecodedInsn &I) {
  if (C.S.cpl() != 0)
    return C.raiseGp(0);
  C.Halted = true;
  C.breakBlock();
  return next(C, I);
}
template <typename T, bool Imm> Status execOut(Cpu &C, const DecodedInsn &I) {
  uint16_t Port = Imm ? uint16_t(I.Imm) : uint16_t(C.S.Gpr[RDX]);
  C.Io.write(Port, sizeof(T), T(C.S.Gpr[RAX]));
  C.breakBlock();
  return next(C, I);
}
} // namespace

bool bindHlt(const DecodeInfo &, DecodedInsn &I) {
  I.Fn = &execHlt;
  I.Flags |= insnflag::EndsBlock;
  return true;
}
bool bindOut(const DecodeInfo &D, DecodedInsn &I) {
  bool Imm = D.Ops[0].Kind == OperandKind::Imm;
  unsigned Size = D.Ops[1].SizeBytes;
  I.Fn = Size == 1 ? (Imm ? &execOut<uint8_t, true> : &execOut<uint8_t, false>)
         : Size == 2 ? (Imm ? &execOut<uint16_t, true> : &execOut<uint16_t, false>)
                     : (Imm ? &execOut<uint32_t, true> : &execOut<uint32_t, false>);
  I.Flags |= insnflag::EndsBlock;
  return true;
}
} // namespace vmxsim
