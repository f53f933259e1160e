// Flag instructions and condition materialisation: CLC STC CMC CLD STD, LAHF SAHF, SETcc,
// and the decimal-arithmetic adjustments AAA AAS DAA DAS AAM AAD (SDM Vol. 2A/2B, the
// instruction page of each). The BCD instructions and the one-byte encodings they use
// are invalid in 64-bit mode; the decoder already reports them as #UD there.
//
// Flags the SDM leaves undefined get one fixed value (pinned by insn_flags_test):
//  - AAA/AAS: SF, ZF, PF from the final AL, OF cleared.
//  - DAA/DAS: OF cleared.
//  - AAM/AAD: OF, AF, CF cleared.
#include "cpu/cpuid.h"
#include "cpu/exec.h"
#include "cpu/jit/jit_form.h"

namespace vmxsim {

namespace {

enum class FlagOp : uint8_t { Clc, Stc, Cmc, Cld, Std };

template <FlagOp Op> Status execFlagOp(Cpu &C, const DecodedInsn &I) {
  switch (Op) {
  case FlagOp::Clc: C.S.Rflags &= ~rflags::CF; break;
  case FlagOp::Stc: C.S.Rflags |= rflags::CF; break;
  case FlagOp::Cmc: C.S.Rflags ^= rflags::CF; break;
  case FlagOp::Cld: C.S.Rflags &= ~rflags::DF; break;
  case FlagOp::Std: C.S.Rflags |= rflags::DF; break;
  }
  return next(C, I);
}

template <FlagOp Op> bool bindFlagOp(const DecodeInfo &, DecodedInsn &I) {
  I.Fn = &execFlagOp<Op>;
  I.Cost = costOf(CostClass::Simple);
  return true;
}

/// The flags LAHF/SAHF transfer: SF ZF AF PF CF (bits 7, 6, 4, 2, 0 of AH).
constexpr uint64_t kAhFlags = rflags::SF | rflags::ZF | rflags::AF | rflags::PF | rflags::CF;

// LAHF (SDM Vol. 2A): AH <- SF:ZF:0:AF:0:PF:1:CF.
Status execLahf(Cpu &C, const DecodedInsn &I) {
  setReg<uint8_t>(C, kRegAH, uint8_t((C.S.Rflags & kAhFlags) | rflags::Fixed1));
  return next(C, I);
}
// SAHF (SDM Vol. 2B): loads SF ZF AF PF CF from AH.
Status execSahf(Cpu &C, const DecodedInsn &I) {
  setArithFlags(C, getReg<uint8_t>(C, kRegAH), kAhFlags);
  return next(C, I);
}

template <bool IsMem> Status execSetcc(Cpu &C, const DecodedInsn &I) {
  VMX_TRY((writeOp<uint8_t, IsMem>(C, I, testCond(C.S.Rflags, I.Cond) ? 1 : 0)));
  return next(C, I);
}

// --- decimal arithmetic --------------------------------------------------------------

inline bool af(const Cpu &C) { return C.S.Rflags & rflags::AF; }
inline bool cf(const Cpu &C) { return C.S.Rflags & rflags::CF; }

// AAA (SDM Vol. 2A): adds 106H to AX when the low nibble of AL overflowed.
Status execAaa(Cpu &C, const DecodedInsn &I) {
  uint16_t Ax = getReg<uint16_t>(C, RAX);
  bool Adjust = (Ax & 0xf) > 9 || af(C);
  if (Adjust)
    Ax = uint16_t(Ax + 0x106);
  Ax &= 0xff0f;
  setReg<uint16_t>(C, RAX, Ax);
  setArithFlags(C, flagsSzp(uint8_t(Ax)) | (Adjust ? rflags::AF | rflags::CF : 0));
  return next(C, I);
}

// AAS (SDM Vol. 2A): AX <- AX - 6, AH <- AH - 1 when the low nibble of AL borrowed.
Status execAas(Cpu &C, const DecodedInsn &I) {
  uint16_t Ax = getReg<uint16_t>(C, RAX);
  bool Adjust = (Ax & 0xf) > 9 || af(C);
  if (Adjust) {
    Ax = uint16_t(Ax - 6);
    Ax = uint16_t(Ax - 0x100);
  }
  Ax &= 0xff0f;
  setReg<uint16_t>(C, RAX, Ax);
  setArithFlags(C, flagsSzp(uint8_t(Ax)) | (Adjust ? rflags::AF | rflags::CF : 0));
  return next(C, I);
}

// DAA / DAS (SDM Vol. 2A): the two-nibble decimal adjust after an addition/subtraction.
template <bool Sub> Status execDaaDas(Cpu &C, const DecodedInsn &I) {
  const uint8_t OldAl = getReg<uint8_t>(C, RAX);
  const bool OldCf = cf(C);
  uint8_t Al = OldAl;
  bool Cf = false, Af = false;
  if ((Al & 0xf) > 9 || af(C)) {
    Cf = OldCf || (Sub ? Al < 6 : Al > 0xff - 6);
    Al = uint8_t(Sub ? Al - 6 : Al + 6);
    Af = true;
  }
  if (OldAl > 0x99 || OldCf) {
    Al = uint8_t(Sub ? Al - 0x60 : Al + 0x60);
    Cf = true;
  } else if (!Sub) {
    Cf = false;
  }
  setReg<uint8_t>(C, RAX, Al);
  setArithFlags(C, flagsSzp(Al) | (Cf ? rflags::CF : 0) | (Af ? rflags::AF : 0));
  return next(C, I);
}

// AAM imm8 (SDM Vol. 2A): AH <- AL / imm8, AL <- AL MOD imm8; #DE when imm8 is 0.
Status execAam(Cpu &C, const DecodedInsn &I) {
  const uint8_t Base = uint8_t(I.Imm);
  if (Base == 0)
    return C.raise(vec::DE);
  const uint8_t Al = getReg<uint8_t>(C, RAX);
  setReg<uint16_t>(C, RAX, uint16_t(((Al / Base) << 8) | (Al % Base)));
  setArithFlags(C, flagsSzp(uint8_t(Al % Base)));
  return next(C, I);
}

// AAD imm8 (SDM Vol. 2A): AL <- (AL + AH * imm8) AND FFH, AH <- 0.
Status execAad(Cpu &C, const DecodedInsn &I) {
  const uint16_t Ax = getReg<uint16_t>(C, RAX);
  const uint8_t Al = uint8_t((Ax & 0xff) + (Ax >> 8) * uint8_t(I.Imm));
  setReg<uint16_t>(C, RAX, Al);
  setArithFlags(C, flagsSzp(Al));
  return next(C, I);
}

bool bindSimple(DecodedInsn &I, Handler Fn) {
  I.Fn = Fn;
  I.Cost = costOf(CostClass::Simple);
  return true;
}

} // namespace

bool bindClc(const DecodeInfo &D, DecodedInsn &I) { return bindFlagOp<FlagOp::Clc>(D, I); }
bool bindStc(const DecodeInfo &D, DecodedInsn &I) { return bindFlagOp<FlagOp::Stc>(D, I); }
bool bindCmc(const DecodeInfo &D, DecodedInsn &I) { return bindFlagOp<FlagOp::Cmc>(D, I); }
bool bindCld(const DecodeInfo &D, DecodedInsn &I) { return bindFlagOp<FlagOp::Cld>(D, I); }
bool bindStd(const DecodeInfo &D, DecodedInsn &I) { return bindFlagOp<FlagOp::Std>(D, I); }

// LAHF/SAHF are valid in 64-bit mode when CPUID.80000001H:ECX.LAHF-SAHF[bit 0] is 1,
// which the modelled processor reports (SDM Vol. 2A, LAHF: "Valid*").
// CLAC/STAC (SDM Vol. 2A, CLAC; Vol. 2B, STAC): clear or set RFLAGS.AC, which lets
// supervisor-mode data accesses reach user pages under SMAP. #UD when CPUID does not
// report SMAP, at CPL > 0 (virtual-8086 mode included) and with LOCK (the binder). They
// cause no VM exit. The TLB never caches a supervisor mapping of a user page under SMAP
// (cpu/mmu.cpp), so AC needs no flush.
template <bool Set> Status execAcFlag(Cpu &C, const DecodedInsn &I) {
  if (!modelHas(C, 7, 1, cpuidbit::Smap) || C.S.cpl() != 0)
    return C.raiseUd();
  if (Set)
    C.S.Rflags |= rflags::AC;
  else
    C.S.Rflags &= ~rflags::AC;
  return next(C, I);
}
bool bindClac(const DecodeInfo &D, DecodedInsn &I) {
  return !(D.Prefixes & insnflag::Lock) && bindSimple(I, &execAcFlag<false>);
}
bool bindStac(const DecodeInfo &D, DecodedInsn &I) {
  return !(D.Prefixes & insnflag::Lock) && bindSimple(I, &execAcFlag<true>);
}
bool bindLahf(const DecodeInfo &, DecodedInsn &I) { return bindSimple(I, &execLahf); }
bool bindSahf(const DecodeInfo &, DecodedInsn &I) { return bindSimple(I, &execSahf); }

bool bindSetcc(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Prefixes & insnflag::Lock)
    return false;
  copyOperandRegs(D, I);
  I.Cond = D.Opcode & 0xf; // 0F 90+cc
  bool Mem = D.Ops[0].Kind == OperandKind::Mem;
  I.Fn = Mem ? &execSetcc<true> : &execSetcc<false>;
  I.Cost = costOf(Mem ? CostClass::Memory : CostClass::Simple);
  return true;
}

/// SETcc r8 is emitted inline by the translator (cpu/jit/translator.cpp).
JitForm flagsJitForm(const DecodedInsn &I) {
  if (I.Fn == &execSetcc<false>)
    return JitForm{JitOp::Setcc, JitShape::Reg, 1, 1};
  return {};
}

bool bindAaa(const DecodeInfo &, DecodedInsn &I) { return bindSimple(I, &execAaa); }
bool bindAas(const DecodeInfo &, DecodedInsn &I) { return bindSimple(I, &execAas); }
bool bindDaa(const DecodeInfo &, DecodedInsn &I) { return bindSimple(I, &execDaaDas<false>); }
bool bindDas(const DecodeInfo &, DecodedInsn &I) { return bindSimple(I, &execDaaDas<true>); }
bool bindAam(const DecodeInfo &D, DecodedInsn &I) {
  I.Imm = D.ImmRaw;
  return bindSimple(I, &execAam);
}
bool bindAad(const DecodeInfo &D, DecodedInsn &I) {
  I.Imm = D.ImmRaw;
  return bindSimple(I, &execAad);
}

} // namespace vmxsim
