// Shared helpers for instruction handlers: register and operand access, flag
// computation, condition codes and the stack. Handlers are templates instantiated per
// operand size and form, chosen by the binder at decode time.
#pragma once
#include "cpu/binders.h"
#include "cpu/cost_model.h"
#include "cpu/cpu.h"
#include "cpu/decode_info.h"
#include "cpu/memory.h"

#include <cstdint>
#include <type_traits>

namespace vmxsim {

// --- registers -----------------------------------------------------------------------

template <typename T> inline T getReg(const Cpu &C, uint8_t R) {
  if constexpr (sizeof(T) == 1)
    if (R >= kRegAH)
      return T(C.S.Gpr[R - kRegAH] >> 8);
  return T(C.S.Gpr[R]);
}

/// Writes a GPR with the width rules of SDM Vol. 1, General-Purpose Registers in 64-Bit
/// Mode: 32-bit results zero-extend, 8- and 16-bit results merge.
template <typename T> inline void setReg(Cpu &C, uint8_t R, T V) {
  if constexpr (sizeof(T) == 8) {
    C.S.Gpr[R] = V;
  } else if constexpr (sizeof(T) == 4) {
    C.S.Gpr[R] = uint32_t(V);
  } else if constexpr (sizeof(T) == 2) {
    C.S.Gpr[R] = (C.S.Gpr[R] & ~uint64_t(0xffff)) | uint16_t(V);
  } else {
    if (R >= kRegAH)
      C.S.Gpr[R - kRegAH] = (C.S.Gpr[R - kRegAH] & ~uint64_t(0xff00)) | (uint64_t(uint8_t(V)) << 8);
    else
      C.S.Gpr[R] = (C.S.Gpr[R] & ~uint64_t(0xff)) | uint8_t(V);
  }
}

/// Reads operand K (register Reg[K], or the memory operand when IsMem; Flat: a flat
/// 64-bit one, cpu/memory.h).
template <typename T, bool IsMem, unsigned K = 0, bool Flat = false>
inline Status readOp(Cpu &C, const DecodedInsn &I, T &V) {
  if constexpr (IsMem) {
    return readMemOp<Flat>(C, I, V);
  } else {
    V = getReg<T>(C, I.Reg[K]);
    return Status::Ok;
  }
}
template <typename T, bool IsMem, unsigned K = 0>
inline Status writeOp(Cpu &C, const DecodedInsn &I, T V) {
  if constexpr (IsMem) {
    return writeMem(C, SegReg(I.Seg), effectiveAddress(C, I), V);
  } else {
    setReg<T>(C, I.Reg[K], V);
    return Status::Ok;
  }
}

// --- flags ---------------------------------------------------------------------------

template <typename T> inline constexpr unsigned kBits = sizeof(T) * 8;
template <typename T> inline constexpr T kMsb = T(T(1) << (kBits<T> - 1));

inline uint64_t parityFlag(uint64_t Result) {
  return __builtin_parity(unsigned(Result & 0xff)) ? 0 : rflags::PF;
}

// Portable flag computation, from the SDM's definitions of each flag (SDM Vol. 1, EFLAGS
// Register; the instruction pages list which flags each instruction defines).
namespace portable {
/// SF, ZF, PF of a result.
template <typename T> inline uint64_t flagsSzp(T R) {
  return ((R & kMsb<T>) ? rflags::SF : 0) | (R == 0 ? rflags::ZF : 0) | parityFlag(R);
}
template <typename T> inline uint64_t flagsAdd(T A, T B, T R, bool CarryIn) {
  bool Cf = CarryIn ? R <= A : R < A;
  return flagsSzp(R) | (Cf ? rflags::CF : 0) | ((A ^ B ^ R) & 0x10 ? rflags::AF : 0) |
         (((A ^ R) & (B ^ R) & kMsb<T>) ? rflags::OF : 0);
}
template <typename T> inline uint64_t flagsSub(T A, T B, T R, bool BorrowIn) {
  bool Cf = BorrowIn ? A <= B : A < B;
  return flagsSzp(R) | (Cf ? rflags::CF : 0) | ((A ^ B ^ R) & 0x10 ? rflags::AF : 0) |
         (((A ^ B) & (A ^ R) & kMsb<T>) ? rflags::OF : 0);
}
} // namespace portable

#if defined(__x86_64__) && !defined(VMXSIM_PORTABLE_FLAGS)
// On an x86-64 host the same operation yields the same defined flags (the arithmetic
// flags of ADD/ADC/SUB/SBB and SF/ZF/PF of any result are architecturally defined and
// identical on every x86 implementation), and LAHF+SETO read them in two instructions
// instead of the ~25 of the portable form. tests/cpu/flags_test.cpp checks both agree.
// (LAHF in 64-bit mode needs CPUID.80000001H:ECX.LAHF-SAHF, present on every x86-64
// processor since 2005.)
namespace hostflags {
inline uint64_t fromLahf(uint64_t Ax, uint8_t Of) {
  return ((Ax >> 8) & (rflags::SF | rflags::ZF | rflags::AF | rflags::PF | rflags::CF)) |
         (uint64_t(Of) << 11);
}
} // namespace hostflags
template <typename T> inline uint64_t flagsSzp(T R) {
  uint64_t Ax;
  asm("test %1, %1\n\tlahf" : "=a"(Ax) : "q"(R) : "cc");
  return (Ax >> 8) & (rflags::SF | rflags::ZF | rflags::PF);
}
template <typename T> inline uint64_t flagsAdd(T A, T B, T, bool CarryIn) {
  uint64_t Ax;
  uint8_t Of, Cin = CarryIn ? 0xff : 0;
  asm("addb $1, %[cin]\n\tadc %[b], %[a]\n\tlahf\n\tseto %[of]"
      : [a] "+q"(A), "=a"(Ax), [of] "=q"(Of), [cin] "+q"(Cin)
      : [b] "q"(B)
      : "cc");
  return hostflags::fromLahf(Ax, Of);
}
template <typename T> inline uint64_t flagsSub(T A, T B, T, bool BorrowIn) {
  uint64_t Ax;
  uint8_t Of, Bin = BorrowIn ? 0xff : 0;
  asm("addb $1, %[bin]\n\tsbb %[b], %[a]\n\tlahf\n\tseto %[of]"
      : [a] "+q"(A), "=a"(Ax), [of] "=q"(Of), [bin] "+q"(Bin)
      : [b] "q"(B)
      : "cc");
  return hostflags::fromLahf(Ax, Of);
}
#else
using portable::flagsAdd;
using portable::flagsSub;
using portable::flagsSzp;
#endif

/// AND/OR/XOR/TEST: CF=OF=0; AF is undefined and Intel processors clear it.
template <typename T> inline uint64_t flagsLogic(T R) { return flagsSzp(R); }

inline void setArithFlags(Cpu &C, uint64_t Bits, uint64_t Mask = rflags::Arith) {
  C.S.Rflags = (C.S.Rflags & ~Mask) | (Bits & Mask);
}

/// Evaluates condition code Cc (SDM Vol. 1, Jcc conditions) on RFLAGS.
inline bool testCond(uint64_t F, uint8_t Cc) {
  bool R;
  switch (Cc >> 1) {
  case 0: R = F & rflags::OF; break;
  case 1: R = F & rflags::CF; break;
  case 2: R = F & rflags::ZF; break;
  case 3: R = F & (rflags::CF | rflags::ZF); break;
  case 4: R = F & rflags::SF; break;
  case 5: R = F & rflags::PF; break;
  case 6: R = bool(F & rflags::SF) != bool(F & rflags::OF); break;
  default: R = (F & rflags::ZF) || (bool(F & rflags::SF) != bool(F & rflags::OF)); break;
  }
  return R != bool(Cc & 1);
}

// --- stack ---------------------------------------------------------------------------

/// Stack-address size in bytes: 8 in 64-bit mode, else SS.B (SDM Vol. 1, Stack).
inline unsigned stackAddrSize(const Cpu &C) {
  if (C.DecodeMode == uint8_t(CodeMode::Long64))
    return 8;
  return (C.S.ss().Attr & Segment::DB) ? 4 : 2;
}
inline uint64_t maskToSize(uint64_t V, unsigned SizeBytes) {
  return SizeBytes == 8 ? V : V & ((uint64_t(1) << (8 * SizeBytes)) - 1);
}
/// Writes RSP respecting the stack-address size (upper bits preserved for 16-bit).
inline void setStackPointer(Cpu &C, uint64_t V) {
  unsigned S = stackAddrSize(C);
  if (S == 8)
    C.S.Gpr[RSP] = V;
  else if (S == 4)
    C.S.Gpr[RSP] = uint32_t(V);
  else
    C.S.Gpr[RSP] = (C.S.Gpr[RSP] & ~uint64_t(0xffff)) | uint16_t(V);
}

/// Pushes a value of SizeBytes (2, 4, 8). RSP changes only if the store succeeds.
template <typename T> inline Status push(Cpu &C, T V) {
  unsigned S = stackAddrSize(C);
  uint64_t NewSp = maskToSize(C.S.Gpr[RSP] - sizeof(T), S);
  VMX_TRY(writeMem(C, SegReg::SS, NewSp, V));
  setStackPointer(C, NewSp);
  return Status::Ok;
}
/// Reads the value at the top of the stack without moving RSP (callers commit with
/// popCommit once every fault check of the instruction has passed).
template <typename T> inline Status peek(Cpu &C, T &V, uint64_t Offset = 0) {
  unsigned S = stackAddrSize(C);
  return readMem(C, SegReg::SS, maskToSize(C.S.Gpr[RSP] + Offset, S), V);
}
inline void popCommit(Cpu &C, uint64_t Bytes) {
  setStackPointer(C, C.S.Gpr[RSP] + Bytes);
}
template <typename T> inline Status pop(Cpu &C, T &V) {
  VMX_TRY(peek(C, V));
  popCommit(C, sizeof(T));
  return Status::Ok;
}

// --- 64-bit operand size: 64-bit mode --------------------------------------------------
//
// A handler instantiated for a 64-bit stack or branch operand runs only in 64-bit mode:
// the operand size of PUSH, POP, CALL, RET and the near branches is 64 bits only there
// (SDM Vol. 1, "Stack Behavior in 64-Bit Mode"; Vol. 2A, "Operand-Size and Address-Size
// Attributes"), a block is decoded in, and looked up by, one mode (Block::Key), and every
// mode change ends the block (Cpu::modeChanged, breakBlock). Such handlers test neither
// the mode nor SS.B: in 64-bit mode the stack-address size is 64 bits, SS's base is not
// used and no limit is checked (SDM Vol. 3A, "Segmentation in IA-32e Mode"), and RIP has
// no wrap mask (RipMask is all ones).

/// Whether the TLB maps the 8 stack bytes at La for a write with RFLAGS.AC clear
/// (writeMem's fast path in 64-bit mode, which it is); Host is then their host address.
/// Otherwise the caller runs the generic path, which checks in the architectural order.
inline bool stackWriteHit64(Cpu &C, uint64_t La, uint8_t *&Host) {
  const TlbEntry &E = C.Mmu.writeSlot(Gla(La));
  Host = reinterpret_cast<uint8_t *>(La + E.Addend);
  return tlbMapsWrite<8>(C, E, La, false) && !(C.S.Rflags & rflags::AC);
}
/// The same for a read (readMem's fast path in 64-bit mode).
inline bool stackReadHit64(const Cpu &C, uint64_t La, const uint8_t *&Host) {
  const TlbEntry &E = C.Mmu.readSlot(Gla(La));
  Host = reinterpret_cast<const uint8_t *>(La + E.Addend);
  return tlbMaps<8>(C, E, La, false) && !(C.S.Rflags & rflags::AC);
}

/// True when a near-branch target in 64-bit mode needs no canonical check: it has the
/// bits 63:47 of the current RIP. The executing instruction's RIP is canonical (the
/// decoder refuses to fetch a non-canonical one, #GP; a block does not leave its page,
/// and CR4.LA57 cannot change in IA-32e mode: MOV CR4 raises #GP, VM entry and exit end
/// the block), and an address sharing bits 63:47 with a canonical one is canonical
/// with 48 and with 57 linear-address bits. Other targets take branchTo's full check.
inline bool sameCanonicalHalf(const Cpu &C, uint64_t Target) {
  return ((Target ^ C.S.Rip) >> 47) == 0;
}
/// branchTo for a 64-bit operand (64-bit mode), the architected #GP(0) included.
inline Status branchTo64(Cpu &C, uint64_t Target);

// --- control transfer ---------------------------------------------------------------

/// Near branch to Target (already computed in the operand size): truncated to the
/// operand size outside 64-bit mode; in 64-bit mode a non-canonical target raises #GP(0)
/// on the branch itself; outside it, a target beyond CS.limit raises #GP(0)
/// (SDM Vol. 2A, JMP: "IF tempEIP is not within code segment limit THEN #GP(0)").
inline Status branchTo(Cpu &C, uint64_t Target, unsigned OpSizeBytes) {
  if (C.DecodeMode == uint8_t(CodeMode::Long64)) {
    if (OpSizeBytes == 4) // not encodable, kept for completeness
      Target = uint32_t(Target);
    else if (OpSizeBytes == 2)
      Target = uint16_t(Target);
    if (!isCanonical(C, Target))
      return C.raiseGp(0);
  } else {
    Target = maskToSize(Target, OpSizeBytes);
    if (Target > C.S.cs().Limit)
      return C.raiseGp(0);
  }
  C.S.Rip = Target;
  return Status::Ok;
}
inline Status branchTo64(Cpu &C, uint64_t Target) {
  if (sameCanonicalHalf(C, Target)) [[likely]] {
    C.S.Rip = Target;
    return Status::Ok;
  }
  return branchTo(C, Target, 8);
}
/// next() and nextRip() in 64-bit mode (no wrap).
inline Status next64(Cpu &C, const DecodedInsn &I) {
  C.S.Rip += I.Len;
  return Status::Ok;
}
inline uint64_t nextRip64(const Cpu &C, const DecodedInsn &I) { return C.S.Rip + I.Len; }
/// next64 for the handlers of flat 64-bit operands (64-bit mode only), else next.
template <bool Flat> inline Status nextOp(Cpu &C, const DecodedInsn &I) {
  return Flat ? next64(C, I) : next(C, I);
}
inline uint64_t nextRip(const Cpu &C, const DecodedInsn &I) {
  return (C.S.Rip + I.Len) & C.RipMask;
}

// --- binders -------------------------------------------------------------------------

/// Picks Tmpl<uint8_t..uint64_t, Rest...> by operand size in bytes.
#define VMX_BY_SIZE(Size, Tmpl, ...)                                                    \
  ((Size) == 1   ? &Tmpl<uint8_t __VA_OPT__(, ) __VA_ARGS__>                            \
   : (Size) == 2 ? &Tmpl<uint16_t __VA_OPT__(, ) __VA_ARGS__>                           \
   : (Size) == 4 ? &Tmpl<uint32_t __VA_OPT__(, ) __VA_ARGS__>                           \
                 : &Tmpl<uint64_t __VA_OPT__(, ) __VA_ARGS__>)

/// Fills DecodedInsn::Reg[] from the decoded operands (register numbers, kRegNone for
/// memory and immediates).
inline void copyOperandRegs(const DecodeInfo &D, DecodedInsn &I) {
  for (unsigned K = 0; K < 3 && K < D.NumOps; ++K)
    I.Reg[K] = D.Ops[K].Kind == OperandKind::Reg ? D.Ops[K].Reg : kRegNone;
}

} // namespace vmxsim
