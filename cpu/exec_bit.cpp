// Bit instructions: BT BTS BTR BTC, BSF BSR, LZCNT TZCNT POPCNT, BSWAP, MOVBE and CRC32
// (SDM Vol. 2A/2B, the instruction page of each).
//
// Undefined flags are left unchanged (BT*: OF SF AF PF; BSF/BSR: CF OF SF AF PF;
// LZCNT/TZCNT: OF SF AF PF). BSF/BSR with a zero source leave the whole destination
// register unchanged, also for a 32-bit destination in 64-bit mode (no zero-extension),
// as Intel processors do. BSWAP of a 16-bit register (undefined) clears the low 16 bits,
// as Intel processors do.
#include "cpu/exec.h"

namespace vmxsim {

namespace {

enum class BtOp : uint8_t { Bt, Bts, Btr, Btc };

template <BtOp Op, typename T> inline T btApply(Cpu &C, T V, unsigned Bit) {
  const T M = T(T(1) << Bit);
  // Cpu::TestBugs: the test-only wrong CF of the KVM differential test (one load).
  setArithFlags(C, ((V & M) ? rflags::CF : 0) ^ (C.TestBugs.FlipBtCarry ? rflags::CF : 0),
                rflags::CF);
  switch (Op) {
  case BtOp::Bt: return V;
  case BtOp::Bts: return V | M;
  case BtOp::Btr: return T(V & ~M);
  case BtOp::Btc: return V ^ M;
  }
  return V;
}

/// BT* with a register bit base: the offset is taken modulo the operand size.
template <typename T, BtOp Op, bool OffInReg> Status execBtReg(Cpu &C, const DecodedInsn &I) {
  unsigned Bit = unsigned(OffInReg ? getReg<T>(C, I.Reg[1]) : T(I.Imm)) & (kBits<T> - 1);
  T R = btApply<Op, T>(C, getReg<T>(C, I.Reg[0]), Bit);
  if constexpr (Op != BtOp::Bt)
    setReg<T>(C, I.Reg[0], R);
  return next(C, I);
}

/// BT* with a memory bit base. An immediate offset selects a bit of the operand itself;
/// a register offset is a signed bit index from the bit base, so the operand accessed is
/// at EA + operand-size * floor(offset / operand-bits) (SDM Vol. 2A, BT: "Bit(BitBase,
/// BitOffset)" and the table "Range of Bit Positions Specified by Bit Offset Operands").
template <typename T, BtOp Op, bool OffInReg> Status execBtMem(Cpu &C, const DecodedInsn &I) {
  uint64_t Ea = effectiveAddress(C, I);
  unsigned Bit;
  if constexpr (OffInReg) {
    using S = std::make_signed_t<T>;
    int64_t Off = S(getReg<T>(C, I.Reg[1]));
    Bit = unsigned(Off) & (kBits<T> - 1);
    constexpr unsigned Shift = sizeof(T) == 2 ? 4 : sizeof(T) == 4 ? 5 : 6;
    Ea = maskToSize(Ea + uint64_t((Off >> Shift) * int64_t(sizeof(T))), I.AddrSize);
  } else {
    Bit = unsigned(I.Imm) & (kBits<T> - 1);
  }
  if constexpr (Op == BtOp::Bt) {
    T V;
    VMX_TRY(readMem(C, SegReg(I.Seg), Ea, V));
    (void)btApply<Op, T>(C, V, Bit);
  } else {
    RmwRef Ref;
    VMX_TRY(mapRmw<T>(C, SegReg(I.Seg), Ea, Ref));
    T V;
    VMX_TRY(rmwRead(C, Ref, V));
    uint64_t OldFlags = C.S.Rflags;
    T R = btApply<Op, T>(C, V, Bit);
    if (Status St = rmwWrite(C, Ref, R); St != Status::Ok) {
      C.S.Rflags = OldFlags;
      return St;
    }
  }
  return next(C, I);
}

template <BtOp Op> bool bindBtOp(const DecodeInfo &D, DecodedInsn &I) {
  const bool Mem = D.Ops[0].Kind == OperandKind::Mem;
  // LOCK is valid only on BTS/BTR/BTC with a memory destination (SDM Vol. 2A, LOCK).
  if ((D.Prefixes & insnflag::Lock) && (!Mem || Op == BtOp::Bt))
    return false;
  copyOperandRegs(D, I);
  const unsigned Size = D.Ops[0].SizeBytes;
  const bool Reg = D.Ops[1].Kind == OperandKind::Reg;
  I.Imm = D.ImmRaw;
  if (Size == 1)
    return false;
  if (Mem)
    I.Fn = Reg ? VMX_BY_SIZE(Size, execBtMem, Op, true) : VMX_BY_SIZE(Size, execBtMem, Op, false);
  else
    I.Fn = Reg ? VMX_BY_SIZE(Size, execBtReg, Op, true) : VMX_BY_SIZE(Size, execBtReg, Op, false);
  I.Cost = costOf(CostClass::Bit);
  return true;
}

// --- bit scans and counts ------------------------------------------------------------

enum class ScanOp : uint8_t { Bsf, Bsr, Tzcnt, Lzcnt, Popcnt };

template <typename T, ScanOp Op, bool IsMem> Status execScan(Cpu &C, const DecodedInsn &I) {
  T V;
  VMX_TRY((readOp<T, IsMem, 1>(C, I, V)));
  constexpr unsigned N = kBits<T>;
  const uint64_t W = V;
  switch (Op) {
  case ScanOp::Bsf:
  case ScanOp::Bsr:
    // SDM Vol. 2A, BSF/BSR: ZF=1 and the destination is left as it was for a 0 source.
    if (V == 0) {
      C.S.Rflags |= rflags::ZF;
    } else {
      C.S.Rflags &= ~rflags::ZF;
      setReg<T>(C, I.Reg[0], T(Op == ScanOp::Bsf ? __builtin_ctzll(W) : 63 - __builtin_clzll(W)));
    }
    break;
  case ScanOp::Tzcnt:
  case ScanOp::Lzcnt: {
    T R = V == 0 ? T(N)
          : Op == ScanOp::Tzcnt ? T(__builtin_ctzll(W))
                                : T(__builtin_clzll(W) - (64 - N));
    setReg<T>(C, I.Reg[0], R);
    setArithFlags(C, (V == 0 ? rflags::CF : 0) | (R == 0 ? rflags::ZF : 0),
                  rflags::CF | rflags::ZF);
    break;
  }
  case ScanOp::Popcnt:
    setReg<T>(C, I.Reg[0], T(__builtin_popcountll(W)));
    setArithFlags(C, V == 0 ? rflags::ZF : 0); // SDM Vol. 2B, POPCNT: the rest cleared
    break;
  }
  return next(C, I);
}

template <ScanOp Op> bool bindScan(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Prefixes & insnflag::Lock)
    return false;
  copyOperandRegs(D, I);
  const bool Mem = D.Ops[1].Kind == OperandKind::Mem;
  const unsigned Size = D.Ops[0].SizeBytes;
  if (Size == 1)
    return false;
  I.Fn = Mem ? VMX_BY_SIZE(Size, execScan, Op, true) : VMX_BY_SIZE(Size, execScan, Op, false);
  I.Cost = costOf(CostClass::Bit);
  return true;
}

// --- byte swaps ----------------------------------------------------------------------

template <typename T> inline T byteSwap(T V) {
  if constexpr (sizeof(T) == 2)
    return __builtin_bswap16(V);
  else if constexpr (sizeof(T) == 4)
    return __builtin_bswap32(V);
  else
    return __builtin_bswap64(V);
}

template <typename T> Status execBswap(Cpu &C, const DecodedInsn &I) {
  if constexpr (sizeof(T) == 2)
    setReg<uint16_t>(C, I.Reg[0], 0);
  else
    setReg<T>(C, I.Reg[0], byteSwap(getReg<T>(C, I.Reg[0])));
  return next(C, I);
}

// MOVBE (SDM Vol. 2B): a load or store with the bytes reversed.
template <typename T, bool Load> Status execMovbe(Cpu &C, const DecodedInsn &I) {
  if constexpr (Load) {
    T V;
    VMX_TRY(readMem(C, SegReg(I.Seg), effectiveAddress(C, I), V));
    setReg<T>(C, I.Reg[0], byteSwap(V));
  } else {
    VMX_TRY(writeMem(C, SegReg(I.Seg), effectiveAddress(C, I), byteSwap(getReg<T>(C, I.Reg[1]))));
  }
  return next(C, I);
}

// --- CRC32 ---------------------------------------------------------------------------

/// CRC32 (SDM Vol. 2A, CRC32): CRC-32C (polynomial 11EDC6F41H) over the source bytes,
/// bit-reflected, with no initial or final inversion.
inline uint32_t crc32cBytes(uint32_t Crc, uint64_t Data, unsigned Bytes) {
  for (unsigned B = 0; B < Bytes; ++B) {
    Crc ^= uint8_t(Data >> (8 * B));
    for (unsigned K = 0; K < 8; ++K)
      Crc = (Crc >> 1) ^ (0x82F63B78u & (0u - (Crc & 1)));
  }
  return Crc;
}

template <typename Src, bool IsMem, bool Dst64> Status execCrc32(Cpu &C, const DecodedInsn &I) {
  Src V;
  VMX_TRY((readOp<Src, IsMem, 1>(C, I, V)));
  uint32_t Crc = crc32cBytes(uint32_t(C.S.Gpr[I.Reg[0]]), uint64_t(V), sizeof(Src));
  C.S.Gpr[I.Reg[0]] = Crc; // 32- and 64-bit destinations both zero-extend
  (void)Dst64;
  return next(C, I);
}

template <bool Dst64> Handler pickCrc32(unsigned SrcSize, bool Mem) {
  switch (SrcSize) {
  case 1: return Mem ? &execCrc32<uint8_t, true, Dst64> : &execCrc32<uint8_t, false, Dst64>;
  case 2: return Mem ? &execCrc32<uint16_t, true, Dst64> : &execCrc32<uint16_t, false, Dst64>;
  case 4: return Mem ? &execCrc32<uint32_t, true, Dst64> : &execCrc32<uint32_t, false, Dst64>;
  default: return Mem ? &execCrc32<uint64_t, true, Dst64> : &execCrc32<uint64_t, false, Dst64>;
  }
}

} // namespace

bool bindBt(const DecodeInfo &D, DecodedInsn &I) { return bindBtOp<BtOp::Bt>(D, I); }
bool bindBts(const DecodeInfo &D, DecodedInsn &I) { return bindBtOp<BtOp::Bts>(D, I); }
bool bindBtr(const DecodeInfo &D, DecodedInsn &I) { return bindBtOp<BtOp::Btr>(D, I); }
bool bindBtc(const DecodeInfo &D, DecodedInsn &I) { return bindBtOp<BtOp::Btc>(D, I); }
bool bindBsf(const DecodeInfo &D, DecodedInsn &I) { return bindScan<ScanOp::Bsf>(D, I); }
bool bindBsr(const DecodeInfo &D, DecodedInsn &I) { return bindScan<ScanOp::Bsr>(D, I); }
bool bindTzcnt(const DecodeInfo &D, DecodedInsn &I) { return bindScan<ScanOp::Tzcnt>(D, I); }
bool bindLzcnt(const DecodeInfo &D, DecodedInsn &I) { return bindScan<ScanOp::Lzcnt>(D, I); }
bool bindPopcnt(const DecodeInfo &D, DecodedInsn &I) { return bindScan<ScanOp::Popcnt>(D, I); }

bool bindBswap(const DecodeInfo &D, DecodedInsn &I) {
  copyOperandRegs(D, I);
  unsigned Size = D.Ops[0].SizeBytes;
  I.Fn = Size == 2 ? &execBswap<uint16_t> : Size == 4 ? &execBswap<uint32_t> : &execBswap<uint64_t>;
  I.Cost = costOf(CostClass::Bit);
  return true;
}

bool bindMovbe(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Prefixes & insnflag::Lock)
    return false;
  copyOperandRegs(D, I);
  const bool Load = D.Ops[0].Kind == OperandKind::Reg;
  const unsigned Size = D.Ops[0].SizeBytes;
  if (Load)
    I.Fn = Size == 2 ? &execMovbe<uint16_t, true> : Size == 4 ? &execMovbe<uint32_t, true>
                                                              : &execMovbe<uint64_t, true>;
  else
    I.Fn = Size == 2 ? &execMovbe<uint16_t, false> : Size == 4 ? &execMovbe<uint32_t, false>
                                                               : &execMovbe<uint64_t, false>;
  I.Cost = costOf(CostClass::Memory);
  return true;
}

bool bindCrc32(const DecodeInfo &D, DecodedInsn &I) {
  if (D.Prefixes & insnflag::Lock)
    return false;
  copyOperandRegs(D, I);
  const bool Mem = D.Ops[1].Kind == OperandKind::Mem;
  I.Fn = D.Ops[0].SizeBytes == 8 ? pickCrc32<true>(D.Ops[1].SizeBytes, Mem)
                                 : pickCrc32<false>(D.Ops[1].SizeBytes, Mem);
  I.Cost = costOf(CostClass::Bit);
  return true;
}

} // namespace vmxsim
