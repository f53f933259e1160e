// RDRAND and RDSEED (SDM Vol. 2B, RDRAND—Read Random Number; RDSEED—Read Random SEED).
// vmxsim is deterministic (DESIGN.md, Determinism): the "random" values are a splitmix64
// stream seeded by CpuModel::RandomSeed and the CPU number, advanced once per value
// drawn, never host randomness. Both instructions always succeed (CF = 1).
#include "cpu/cpu_model.h"
#include "cpu/exec.h"
#include "cpu/vmx/nonroot.h"

namespace vmxsim {

namespace {

// splitmix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators"):
// a bijective mix of an arithmetic sequence; each CPU starts its own sequence.
uint64_t drawRandom(Cpu &C) {
  uint64_t Z = C.Model.RandomSeed + uint64_t(C.Id) * 0xd1b54a32d192ed03ull +
               ++C.RandomDraws * 0x9e3779b97f4a7c15ull;
  Z = (Z ^ (Z >> 30)) * 0xbf58476d1ce4e5b9ull;
  Z = (Z ^ (Z >> 27)) * 0x94d049bb133111ebull;
  return Z ^ (Z >> 31);
}

// CF = 1 (a value is available); OF, SF, ZF, AF and PF are cleared.
template <typename T, bool IsRdseed> Status execRdrand(Cpu &C, const DecodedInsn &I) {
  // SDM Vol. 3C, "Instructions That Cause VM Exits Conditionally" > RDRAND, RDSEED.
  if (C.NonRoot) [[unlikely]]
    VMX_TRY(nonroot::onRdrandRdseed(C, I, IsRdseed));
  setReg<T>(C, I.Reg[0], T(drawRandom(C)));
  setArithFlags(C, rflags::CF);
  return next(C, I);
}

template <bool IsRdseed> bool bindRandom(const DecodeInfo &D, DecodedInsn &I) {
  // #UD with LOCK, F2 or F3 prefixes, or a memory operand.
  if ((D.Prefixes & (insnflag::Lock | insnflag::Rep | insnflag::Repne)) ||
      D.Ops[0].Kind != OperandKind::Reg)
    return false;
  copyOperandRegs(D, I);
  unsigned Size = D.Ops[0].SizeBytes;
  I.Fn = Size == 2   ? &execRdrand<uint16_t, IsRdseed>
         : Size == 4 ? &execRdrand<uint32_t, IsRdseed>
                     : &execRdrand<uint64_t, IsRdseed>;
  I.Cost = costOf(CostClass::System);
  return true;
}

} // namespace

bool bindRdrand(const DecodeInfo &D, DecodedInsn &I) { return bindRandom<false>(D, I); }
bool bindRdseed(const DecodeInfo &D, DecodedInsn &I) { return bindRandom<true>(D, I); }

} // namespace vmxsim
