// BMI1/BMI2 (VEX-encoded) and ADX: ANDN BEXTR BLSI BLSMSK BLSR BZHI PDEP PEXT RORX SARX
// SHLX SHRX, ADCX ADOX (SDM Vol. 2A/2B, the instruction page of each; MULX is with the
// multiplies in exec_muldiv.cpp).
//
// Flags the SDM leaves undefined (AF and PF everywhere here, SF of BEXTR) are left
// unchanged.
#include "cpu/exec.h"

namespace vmxsim {

namespace {

enum class BmiOp : uint8_t {
  Andn, Bextr, Blsi, Blsmsk, Blsr, Bzhi, Pdep, Pext, Rorx, Sarx, Shlx, Shrx,
};

/// Number of source operands after the destination (operand 0).
template <BmiOp Op> inline constexpr unsigned kNumSrc =
    Op == BmiOp::Blsi || Op == BmiOp::Blsmsk || Op == BmiOp::Blsr ? 1 : 2;

inline uint64_t zf(bool Z) { return Z ? rflags::ZF : 0; }
inline uint64_t cf(bool B) { return B ? rflags::CF : 0; }
template <typename T> inline uint64_t sf(T R) { return (R & kMsb<T>) ? rflags::SF : 0; }

template <typename T> inline T pdep(T Src, T Mask) {
  T R = 0;
  for (T Bit = 1; Mask; Bit <<= 1) {
    T Low = Mask & (0 - Mask);
    if (Src & Bit)
      R |= Low;
    Mask &= Mask - 1;
  }
  return R;
}
template <typename T> inline T pext(T Src, T Mask) {
  T R = 0;
  for (T Bit = 1; Mask; Bit <<= 1) {
    T Low = Mask & (0 - Mask);
    if (Src & Low)
      R |= Bit;
    Mask &= Mask - 1;
  }
  return R;
}

/// Computes one BMI operation on the source operands in Zydis/SDM operand order (A is
/// operand 1, B operand 2), updating the defined flags.
template <BmiOp Op, typename T> inline T bmi(Cpu &C, T A, T B, uint64_t Imm) {
  constexpr unsigned N = kBits<T>;
  constexpr uint64_t Szco = rflags::SF | rflags::ZF | rflags::CF | rflags::OF;
  T R;
  switch (Op) {
  case BmiOp::Andn: // ANDN r, vvvv, r/m
    R = T(~A & B);
    setArithFlags(C, sf(R) | zf(R == 0), Szco);
    return R;
  case BmiOp::Bextr: { // BEXTR r, r/m, vvvv: start B[7:0], length B[15:8]
    unsigned Start = B & 0xff, Len = (B >> 8) & 0xff;
    uint64_t V = Start < N ? uint64_t(A) >> Start : 0;
    if (Len < 64)
      V &= (uint64_t(1) << Len) - 1;
    R = T(V);
    setArithFlags(C, zf(R == 0), rflags::ZF | rflags::CF | rflags::OF);
    return R;
  }
  case BmiOp::Blsi: // BLSI vvvv, r/m
    R = T(T(0 - A) & A);
    setArithFlags(C, sf(R) | zf(R == 0) | cf(A != 0), Szco);
    return R;
  case BmiOp::Blsmsk:
    R = T(T(A - 1) ^ A);
    setArithFlags(C, sf(R) | cf(A == 0), Szco);
    return R;
  case BmiOp::Blsr:
    R = T(T(A - 1) & A);
    setArithFlags(C, sf(R) | zf(R == 0) | cf(A == 0), Szco);
    return R;
  case BmiOp::Bzhi: { // BZHI r, r/m, vvvv: index B[7:0]
    unsigned Index = B & 0xff;
    R = Index < N ? T(A & ((T(1) << Index) - 1)) : A;
    setArithFlags(C, sf(R) | zf(R == 0) | cf(Index > N - 1), Szco);
    return R;
  }
  case BmiOp::Pdep: return pdep<T>(A, B); // PDEP r, vvvv, r/m(mask)
  case BmiOp::Pext: return pext<T>(A, B);
  case BmiOp::Rorx: {
    unsigned Cnt = unsigned(Imm) & (N - 1);
    return Cnt ? T((A >> Cnt) | (A << (N - Cnt))) : A;
  }
  case BmiOp::Sarx:
    return T(std::make_signed_t<T>(A) >> (B & (N - 1)));
  case BmiOp::Shlx:
    return T(A << (B & (N - 1)));
  case BmiOp::Shrx:
    return T(A >> (B & (N - 1)));
  }
  return A;
}

/// MemK: index of the memory operand (1 or 2), 0 when all operands are registers.
template <typename T, BmiOp Op, unsigned MemK> Status execBmi(Cpu &C, const DecodedInsn &I) {
  T A, B = 0;
  VMX_TRY((readOp<T, MemK == 1, 1>(C, I, A)));
  if constexpr (kNumSrc<Op> == 2 && Op != BmiOp::Rorx)
    VMX_TRY((readOp<T, MemK == 2, 2>(C, I, B)));
  setReg<T>(C, I.Reg[0], bmi<Op, T>(C, A, B, I.Imm));
  return next(C, I);
}

template <BmiOp Op> bool bindBmi(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  unsigned MemK = 0;
  for (unsigned K = 1; K < 3 && K < D.NumOps; ++K)
    if (D.Ops[K].Kind == OperandKind::Mem)
      MemK = K;
  I.Imm = D.ImmRaw;
  const bool Is64 = D.Ops[0].SizeBytes == 8;
#define VMX_PICK(K) (Is64 ? &execBmi<uint64_t, Op, K> : &execBmi<uint32_t, Op, K>)
  I.Fn = MemK == 1 ? VMX_PICK(1) : MemK == 2 ? VMX_PICK(2) : VMX_PICK(0);
#undef VMX_PICK
  I.Cost = costOf(CostClass::Bit);
  return true;
}

// ADCX / ADOX (SDM Vol. 2A): unsigned add with carry through CF (ADCX) or OF (ADOX);
// no other flag changes.
template <typename T, bool UseOf, bool IsMem> Status execAdx(Cpu &C, const DecodedInsn &I) {
  T B;
  VMX_TRY((readOp<T, IsMem, 1>(C, I, B)));
  const uint64_t Flag = UseOf ? rflags::OF : rflags::CF;
  T A = getReg<T>(C, I.Reg[0]);
  bool Cin = C.S.Rflags & Flag;
  T R = T(A + B + Cin);
  bool Cout = Cin ? R <= A : R < A;
  setReg<T>(C, I.Reg[0], R);
  C.S.Rflags = (C.S.Rflags & ~Flag) | (Cout ? Flag : 0);
  return next(C, I);
}

template <bool UseOf> bool bindAdx(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Prefixes & insnflag::Lock)
    return false;
  copyOperandRegs(D, I);
  const bool Mem = D.Ops[1].Kind == OperandKind::Mem;
  if (D.Ops[0].SizeBytes == 8)
    I.Fn = Mem ? &execAdx<uint64_t, UseOf, true> : &execAdx<uint64_t, UseOf, false>;
  else
    I.Fn = Mem ? &execAdx<uint32_t, UseOf, true> : &execAdx<uint32_t, UseOf, false>;
  I.Cost = costOf(Mem ? CostClass::Memory : CostClass::Simple);
  return true;
}

} // namespace

bool bindAndn(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Andn>(D, I); }
bool bindBextr(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Bextr>(D, I); }
bool bindBlsi(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Blsi>(D, I); }
bool bindBlsmsk(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Blsmsk>(D, I); }
bool bindBlsr(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Blsr>(D, I); }
bool bindBzhi(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Bzhi>(D, I); }
bool bindPdep(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Pdep>(D, I); }
bool bindPext(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Pext>(D, I); }
bool bindRorx(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Rorx>(D, I); }
bool bindSarx(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Sarx>(D, I); }
bool bindShlx(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Shlx>(D, I); }
bool bindShrx(const DecodeInfo &D, DecodedInsn &I) { return bindBmi<BmiOp::Shrx>(D, I); }
bool bindAdcx(const DecodeInfo &D, DecodedInsn &I) { return bindAdx<false>(D, I); }
bool bindAdox(const DecodeInfo &D, DecodedInsn &I) { return bindAdx<true>(D, I); }

} // namespace vmxsim
