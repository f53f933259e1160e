// The x87 FPU's execution environment (SDM Vol. 1, ch. "Programming with the x87 FPU"):
// the control, status and tag words and the rules that tie them together, shared by the
// x87 instructions (cpu/exec_x87.cpp) and the instructions that save and restore x87
// state (FXSAVE/FXRSTOR in cpu/exec_fxsave.cpp, XSAVE/XRSTOR in cpu/exec_xsave.cpp).
//
// State kept in CpuState: Fcw, Fsw (TOP in bits 11-13), St[i] = ST(i) in stack order (the
// order FXSAVE and FSAVE store them), and Ftw as the abridged tag word, one bit per
// physical register, 1 = not empty. The full two-bit tags are a function of those: on
// FRSTOR and FLDENV the processor honours only the "empty" tags and recomputes the others
// from the register contents (checked on the host: loading "valid" tags for registers
// that hold zeros reads back "zero"), and FSTENV/FSAVE store tags computed from the
// contents. So fullTagWord() derives them, and FXSAVE's abridged word is the state itself.
#pragma once
#include "cpu/exec.h"

#include <cstring>

namespace vmxsim::x87 {

/// FSW bits (SDM Vol. 1, x87 FPU Status Register).
namespace fsw {
inline constexpr uint16_t IE = 1 << 0, DE = 1 << 1, ZE = 1 << 2, OE = 1 << 3, UE = 1 << 4,
                          PE = 1 << 5, SF = 1 << 6, ES = 1 << 7, C0 = 1 << 8, C1 = 1 << 9,
                          C2 = 1 << 10, TopMask = 7 << 11, C3 = 1 << 14, B = 1 << 15;
inline constexpr uint16_t Flags = 0x3f;
inline constexpr unsigned TopShift = 11;
} // namespace fsw

inline unsigned top(const CpuState &S) { return (S.Fsw >> fsw::TopShift) & 7; }

/// FCW as the processor keeps it: bit 6 reads as 1 and bits 13-15 as 0 whatever is
/// loaded (checked on the host for FLDCW, FLDENV and FXRSTOR; SDM Vol. 1, x87 FPU
/// Control Word, shows them reserved; the power-up value 0040H has bit 6 set).
inline uint16_t normalizeFcw(uint16_t V) { return uint16_t((V & 0x1f3f) | 0x40); }

/// ES and B summarise the exception flags: set exactly when a flag is set whose mask bit
/// in FCW is clear (SDM Vol. 1, Exception Summary Status Flag; B mirrors ES on processors
/// since the Intel 387). Every load of FCW or FSW recomputes them, as the host does after
/// FLDCW, FLDENV, FRSTOR and FXRSTOR.
inline uint16_t withSummary(uint16_t Fsw, uint16_t Fcw) {
  Fsw &= uint16_t(~(fsw::ES | fsw::B));
  if (Fsw & ~Fcw & fsw::Flags)
    Fsw |= fsw::ES | fsw::B;
  return Fsw;
}
inline void loadControlStatus(CpuState &S, uint16_t Fcw, uint16_t Fsw) {
  S.Fcw = normalizeFcw(Fcw);
  S.Fsw = withSummary(Fsw, S.Fcw);
}

/// The tag of a non-empty register from its contents (SDM Vol. 1, x87 FPU Tag Word):
/// 00 valid, 01 zero, 10 special (NaN, infinity, denormal, pseudo-denormal, unnormal).
inline unsigned tagOf(const uint8_t *R) {
  const unsigned Exp = R[8] | ((R[9] & 0x7f) << 8);
  uint64_t Mant;
  std::memcpy(&Mant, R, 8);
  if (Exp == 0x7fff)
    return 2;
  if (Exp == 0)
    return Mant == 0 ? 1 : 2;
  return (Mant >> 63) ? 0 : 2;
}

/// The full tag word (two bits per physical register, 11 = empty).
inline uint16_t fullTagWord(const CpuState &S) {
  uint16_t W = 0;
  const unsigned Top = top(S);
  for (unsigned P = 0; P < 8; ++P) {
    const unsigned Tag = (S.Ftw >> P) & 1 ? tagOf(S.St[(P - Top) & 7]) : 3;
    W |= uint16_t(Tag << (2 * P));
  }
  return W;
}
/// The abridged tag word of a full one: only "empty" is honoured.
inline uint16_t abridgedTagWord(uint16_t Full) {
  uint16_t A = 0;
  for (unsigned P = 0; P < 8; ++P)
    if (((Full >> (2 * P)) & 3) != 3)
      A |= uint16_t(1 << P);
  return A;
}

/// x87 availability (SDM Vol. 3A, table "Action Taken By x87 FPU Instructions for
/// Different Combinations of EM, MP, and TS"): every x87 instruction raises #NM when
/// CR0.EM or CR0.TS is set (WAIT/FWAIT has its own row, see execFwait).
inline Status checkAvailable(Cpu &C) {
  if (C.S.Cr0 & (cr0::EM | cr0::TS)) [[unlikely]]
    return C.raise(vec::NM);
  return Status::Ok;
}

/// The CR0.NE = 0 half of checkPending (cpu/exec_x87.cpp).
Status legacyPendingError(Cpu &C);

/// What a waiting x87 instruction (all but FNINIT, FNCLEX, FNSTSW, FNSTCW, FNSTENV,
/// FNSAVE, FXSAVE, FXRSTOR) does first when an unmasked exception is pending (FSW.ES = 1):
/// with CR0.NE = 1 it raises #MF, the instruction not executed (SDM Vol. 3A,
/// "Interrupt 16—x87 FPU Floating-Point Error (#MF)"). With CR0.NE = 0 the PC-style
/// legacy path applies instead (legacyPendingError: FERR# raising IRQ 13 through the
/// chipset, the handler answering with IGNNE#; SDM Vol. 1, Appendix D, and Vol. 3A,
/// "Numeric Error").
inline Status checkPending(Cpu &C) {
  if (!(C.S.Fsw & fsw::ES)) [[likely]]
    return Status::Ok;
  if (C.S.Cr0 & cr0::NE)
    return C.raise(vec::MF);
  return legacyPendingError(C);
}

/// After an instruction that may have cleared FSW.ES (FNINIT, FNCLEX, FLDCW, FLDENV,
/// FRSTOR, FXRSTOR, XRSTOR): FERR# follows ES, and when FERR# is deasserted the chipset
/// deasserts IGNNE# (SDM Vol. 1, Appendix D, "MS-DOS Compatibility Sub-mode").
inline void esMayHaveCleared(Cpu &C) {
  if (!(C.S.Fsw & fsw::ES))
    C.Ignne = false;
}

/// The layouts of the x87 environment in memory (SDM Vol. 1, figures "Protected Mode
/// x87 FPU State Image in Memory, 32-Bit Format", "Real Mode ... 32-Bit Format",
/// "Protected Mode ... 16-Bit Format", "Real Mode ... 16-Bit Format"): the real-mode
/// formats serve real-address and virtual-8086 mode, the protected-mode ones protected
/// and 64-bit mode.
enum class EnvFormat : uint8_t { Prot32, Real32, Prot16, Real16 };
inline unsigned envSize(EnvFormat F) {
  return F == EnvFormat::Prot32 || F == EnvFormat::Real32 ? 28 : 14;
}
/// FSAVE/FRSTOR: the environment then ST(0)..ST(7), 10 bytes each.
inline unsigned saveSize(EnvFormat F) { return envSize(F) + 80; }

/// The environment's fields, as stored and loaded (pointers as the format holds them).
void storeEnv(const CpuState &S, EnvFormat F, uint8_t *B);
void loadEnv(CpuState &S, EnvFormat F, const uint8_t *B);

} // namespace vmxsim::x87
