// The x87 FPU instructions (SDM Vol. 1, ch. "Programming with the x87 FPU"; Vol. 2, the
// page of each): loads and stores of every operand type, constants, arithmetic, compares,
// transcendentals, stack and tag manipulation, FCMOVcc, and the environment instructions
// FNSTENV/FLDENV/FNSAVE/FRSTOR. FNINIT, FNCLEX, FNSTCW, FLDCW, FNSTSW and FWAIT are in
// cpu/exec_fxsave.cpp with FXSAVE/FXRSTOR; the rules every x87 instruction shares (ES and
// #MF, tags, FCW) are cpu/x87.h.
//
// How results are computed: the handler runs the very same instruction (its escape byte
// and ModR/M, the memory operand moved to a host buffer) on the host's x87 FPU. One asm
// statement saves the host's x87 state (FNSAVE), loads the guest's (FRSTOR of an image
// built from CpuState, with the guest's FCW and the exception flags cleared), executes the
// instruction, stores the result state (FNSAVE, which does not wait, so an unmasked
// exception the instruction raised sets ES without trapping on the host) and restores the
// host's state (FRSTOR). What comes back is the whole architectural result: ST registers,
// TOP, C0-C3, the exception flags the instruction raised, ES, tags, the masked responses
// (QNaN indefinite, stack faults) and the unmasked ones (an operand left unchanged, the
// bias-adjusted result of an unmasked overflow or underflow) exactly as the host produces
// them. Those are IEEE 754 or SDM-defined for arithmetic, conversions, compares and
// FRNDINT/FSCALE/FXTRACT/FPREM/FPREM1, so any x86 host gives an Intel processor's bits.
//
// Transcendentals (F2XM1, FYL2X, FYL2XP1, FPTAN, FPATAN, FSIN, FCOS, FSINCOS) run on the
// host's x87 too: a choice, not an oversight. Their results are not IEEE-specified (the SDM
// bounds their error, about one ulp), and Intel and AMD processors can differ in the last
// bit and in C1, so a guest that uses them runs identically on one host and on hosts of one
// vendor, but can differ between an Intel and an AMD host. A deterministic software
// implementation (the x87's 66-bit pi for argument reduction, the C2 range rule, C1 for
// round-up, the same exception flags) would remove that and is not written yet; until it
// is, a run that must be reproducible across host vendors should avoid them.
//
// vmxsim itself decides what the host cannot: the #NM and #MF checks before the
// instruction, guest memory (read before, written after; a store an unmasked IE, OE or UE
// suppresses is not written: SDM Vol. 1, "Numeric Overflow Exception (#O)" and
// "Numeric Underflow Exception (#U)", "... the destination operand is not changed"),
// FIP/FDP/FOP, and EFLAGS for FCOMI/FUCOMI (host's ZF, PF, CF; OF, SF, AF cleared).
//
// On a host that is not x86-64 the handlers stop the run as unimplemented after the
// availability checks.
#include "cpu/binders.h"
#include "cpu/exec_sse.h"
#include "cpu/x87.h"

#include <array>
#include <cstring>
#include <utility>

namespace vmxsim {

using namespace x87;
using sse::getField;
using sse::putField;

namespace {

#if defined(__x86_64__)
constexpr bool kHostFpu = true;
#else
constexpr bool kHostFpu = false;
#endif
constexpr const char *kNoHostFpu = "x87 FPU on a non-x86 host";

// --- host execution ---------------------------------------------------------------------

/// The host's 32-bit protected-mode FSAVE image (the format FNSAVE/FRSTOR use in 64-bit
/// mode), the memory operand, and AH as LAHF/SAHF see it (FCMOVcc reads CF/ZF/PF, FCOMI
/// writes them).
struct HostFrame {
  uint8_t Img[108];
  alignas(16) uint8_t Mem[16];
  uint8_t Ah;
};
using HostFn = void (*)(HostFrame &);

/// The host forms: the 512 register forms (ModR/M C0-FF of each escape byte) and the 64
/// memory forms, whose operand is normalised to [rsi] (mod 00, r/m 110).
constexpr unsigned kRegForms = 512, kHostForms = kRegForms + 64;
constexpr unsigned hostIndex(unsigned Fop) {
  const unsigned Esc = (Fop >> 8) & 7, ModRm = Fop & 0xff;
  return (ModRm >> 6) == 3 ? (Esc << 6) | (ModRm & 63)
                           : kRegForms + (Esc << 3) + ((ModRm >> 3) & 7);
}
constexpr unsigned fopOfIndex(unsigned K) {
  return K < kRegForms ? ((K >> 6) << 8) | 0xc0 | (K & 63)
                       : (((K - kRegForms) >> 3) << 8) | (((K - kRegForms) & 7) << 3) | 6;
}

#if defined(__x86_64__)
template <unsigned Fop> void hostRun(HostFrame &F) {
  uint8_t Save[108];
  uint64_t Ax = uint64_t(F.Ah) << 8;
  // Nothing between the FRSTORs can trap: the guest image has no unmasked flag set (they
  // are cleared; a pending exception was turned into #MF before), the instruction is a
  // waiting one that finds nothing pending, and FNSAVE does not wait.
  asm volatile("fnsave %[save]\n\t"
               "frstor %[img]\n\t"
               "sahf\n\t"
               ".byte %c[esc], %c[modrm]\n\t"
               "lahf\n\t"
               "fnsave %[img]\n\t"
               "frstor %[save]"
               : [save] "=m"(Save), [img] "+m"(F.Img), "+a"(Ax)
               : "S"(F.Mem), [esc] "i"(0xd8 | (Fop >> 8)), [modrm] "i"(Fop & 0xff)
               : "cc", "memory");
  F.Ah = uint8_t(Ax >> 8);
}
template <size_t... K>
constexpr std::array<HostFn, kHostForms> makeHostTable(std::index_sequence<K...>) {
  return {&hostRun<fopOfIndex(K)>...};
}
constexpr std::array<HostFn, kHostForms> kHostTable =
    makeHostTable(std::make_index_sequence<kHostForms>());
void runHost(unsigned Index, HostFrame &F) { kHostTable[Index](F); }
#else
void runHost(unsigned, HostFrame &) {}
#endif

static_assert(hostIndex(fopOfIndex(3)) == 3 &&
              hostIndex(fopOfIndex(kRegForms + 61)) == kRegForms + 61);

// --- the execution frame ------------------------------------------------------------------

/// True in the modes whose FSTENV/FSAVE use the real-mode formats; there FIP and FDP hold
/// the 20-bit (32-bit) linear address, elsewhere the offset (SDM Vol. 1, "x87 FPU
/// Instruction and Data (Operand) Pointers"). The selectors FCS and FDS are not kept: the
/// model reports them deprecated (CPUID.(EAX=07H,ECX=0):EBX[13]) and stores them as 0.
bool realFormat(const CpuState &S) { return !(S.Cr0 & cr0::PE) || (S.Rflags & rflags::VM); }

/// FIP, FOP and (for a memory operand) FDP of a non-control instruction: "the x87 FPU
/// saves the ... last non-control instruction" (SDM Vol. 1, "Last Instruction Opcode" and
/// "x87 FPU Instruction and Data (Operand) Pointers"). FDP is left alone by register forms
/// and FOP is always stored (the FOP-compatibility behaviour; the host and Intel's
/// processors agree). CPUID.(EAX=07H,ECX=0):EBX[6] (FDP_EXCPTN_ONLY) is 0 to match.
void updatePointers(Cpu &C, const DecodedInsn &I, bool HasMem, uint64_t Ea) {
  CpuState &S = C.S;
  const bool Real = realFormat(S);
  S.Fop = uint16_t(I.Imm & 0x7ff);
  S.Fip = Real ? uint32_t(S.cs().Base + S.Rip) : S.Rip;
  if (HasMem)
    S.Fdp = Real ? uint32_t(S.seg(SegReg(I.Seg)).Base + Ea) : Ea;
}

enum class MemKind : uint8_t { None, Load, Store };

/// One x87 instruction run on the host (see the file comment). Size is the memory
/// operand's size; SetsEflags marks FCOMI, FCOMIP, FUCOMI, FUCOMIP.
template <MemKind K, unsigned Size, bool SetsEflags>
Status execX87(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  VMX_TRY(checkPending(C));
  if constexpr (!kHostFpu) {
    return C.unimplemented(kNoHostFpu);
  } else {
    CpuState &S = C.S;
    HostFrame F;
    uint64_t Ea = 0, La = 0;
    if constexpr (K != MemKind::None) {
      Ea = effectiveAddress(C, I);
      VMX_TRY(segmentToLinear(C, SegReg(I.Seg), Ea, Size,
                              K == MemKind::Load ? Access::Read : Access::Write, La));
      if constexpr (K == MemKind::Load)
        VMX_TRY(readLinearSlow(C, La, Size, F.Mem, false));
      else
        std::memset(F.Mem, 0, sizeof(F.Mem));
    }
    storeEnv(S, EnvFormat::Prot32, F.Img);
    putField<uint16_t>(F.Img, 4, uint16_t(S.Fsw & ~fsw::Flags));
    for (unsigned R = 0; R < 8; ++R)
      std::memcpy(F.Img + 28 + 10 * R, S.St[R], 10);
    F.Ah = uint8_t((S.Rflags & 0xd5) | 2);
    runHost(I.Imm2, F);

    const uint16_t Out = getField<uint16_t>(F.Img, 4);
    const uint16_t Raised = Out & fsw::Flags;
    if constexpr (K == MemKind::Store) {
      if (!(Raised & ~S.Fcw & (fsw::IE | fsw::OE | fsw::UE))) {
        VMX_TRY(probeWrite(C, La, Size));
        VMX_TRY(writeLinearSlow(C, La, Size, F.Mem, false));
      }
    }
    // Commit: nothing below can fault.
    S.Fsw = withSummary(uint16_t(Out | (S.Fsw & fsw::Flags)), S.Fcw);
    S.Ftw = abridgedTagWord(getField<uint16_t>(F.Img, 8));
    for (unsigned R = 0; R < 8; ++R)
      std::memcpy(S.St[R], F.Img + 28 + 10 * R, 10);
    if constexpr (SetsEflags) {
      // "the status flags in the EFLAGS register are set only if the exception is masked"
      // (SDM Vol. 2A, FCOMI/FCOMIP/FUCOMI/FUCOMIP): ZF, PF, CF from the compare unless an
      // unmasked #IA was raised, and OF, SF, AF cleared "regardless of whether an
      // invalid-operation exception is detected". (AMD hosts set ZF, PF, CF to unordered
      // even then; the model follows the SDM.)
      constexpr uint64_t Cmp = rflags::ZF | rflags::PF | rflags::CF;
      S.Rflags &= ~(rflags::OF | rflags::SF | rflags::AF);
      if (!(Raised & fsw::IE) || (S.Fcw & fsw::IE))
        S.Rflags = (S.Rflags & ~Cmp) | (F.Ah & Cmp);
    }
    updatePointers(C, I, K != MemKind::None, Ea);
    return next(C, I);
  }
}

/// FNENI, FNDISI, FNSETPM: the 8087/287 control instructions, no-ops since the Intel 387
/// (SDM Vol. 1, "Instructions Not Supported..." / Vol. 2, not listed as x87 instructions
/// of the 387 and later). Non-waiting; they do not update the pointers.
Status execX87Nop(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  return next(C, I);
}

// --- FNSTENV, FLDENV, FNSAVE, FRSTOR --------------------------------------------------------

EnvFormat envFormat(const Cpu &C, const DecodedInsn &I) {
  const bool Is16 = I.Imm2 != 0, Real = realFormat(C.S);
  return Is16 ? (Real ? EnvFormat::Real16 : EnvFormat::Prot16)
              : (Real ? EnvFormat::Real32 : EnvFormat::Prot32);
}

/// FNSTENV / FNSAVE (SDM Vol. 2A, FSTENV/FNSTENV; FSAVE/FNSAVE). Non-waiting. FNSTENV
/// then masks all exceptions (so ES clears); FNSAVE then initialises the FPU as FNINIT.
template <bool WithRegs> Status execFnstenv(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  CpuState &S = C.S;
  const EnvFormat F = envFormat(C, I);
  const unsigned N = WithRegs ? saveSize(F) : envSize(F);
  uint8_t B[108];
  storeEnv(S, F, B);
  if constexpr (WithRegs)
    for (unsigned R = 0; R < 8; ++R)
      std::memcpy(B + envSize(F) + 10 * R, S.St[R], 10);
  uint64_t La;
  VMX_TRY(segmentToLinear(C, SegReg(I.Seg), effectiveAddress(C, I), N, Access::Write, La));
  VMX_TRY(probeWrite(C, La, N));
  VMX_TRY(writeLinearSlow(C, La, N, B, false));
  if constexpr (WithRegs) {
    S.Fcw = 0x37f;
    S.Fsw = S.Ftw = S.Fop = 0;
    S.Fip = S.Fdp = 0;
  } else {
    loadControlStatus(S, uint16_t(S.Fcw | fsw::Flags), S.Fsw);
  }
  esMayHaveCleared(C);
  return next(C, I);
}

/// FLDENV / FRSTOR (SDM Vol. 2A, FLDENV; FRSTOR). Waiting: a pending exception is
/// reported first. The whole image is read before any state changes. An exception the
/// loaded FSW flags and FCW leave unmasked is then pending (ES set): "the exception will
/// be generated upon execution of the next ... instruction".
template <bool WithRegs> Status execFldenv(Cpu &C, const DecodedInsn &I) {
  VMX_TRY(checkAvailable(C));
  VMX_TRY(checkPending(C));
  CpuState &S = C.S;
  const EnvFormat F = envFormat(C, I);
  const unsigned N = WithRegs ? saveSize(F) : envSize(F);
  uint8_t B[108];
  uint64_t La;
  VMX_TRY(segmentToLinear(C, SegReg(I.Seg), effectiveAddress(C, I), N, Access::Read, La));
  VMX_TRY(readLinearSlow(C, La, N, B, false));
  loadEnv(S, F, B);
  if constexpr (WithRegs)
    for (unsigned R = 0; R < 8; ++R)
      std::memcpy(S.St[R], B + envSize(F) + 10 * R, 10);
  esMayHaveCleared(C);
  return next(C, I);
}

// --- binding ------------------------------------------------------------------------------

template <MemKind K, unsigned Size> Handler memHandler() { return &execX87<K, Size, false>; }

/// The memory forms of the x87 opcode map (SDM Vol. 2, Appendix A, "Escape Opcode
/// Instructions", the tables of D8-DF with ModR/M below C0): what each /reg does with
/// its operand. FLDCW, FNSTCW and FNSTSW m16 have their own rows (cpu/exec_fxsave.cpp).
Handler memForm(unsigned Esc, unsigned Reg) {
  constexpr MemKind L = MemKind::Load, St = MemKind::Store;
  switch (Esc) {
  case 0: return memHandler<L, 4>(); // FADD..FDIVR m32fp, FCOM(P) m32fp
  case 2: return memHandler<L, 4>(); // FIADD..FIDIVR m32int, FICOM(P) m32int
  case 4: return memHandler<L, 8>(); // ... m64fp
  case 6: return memHandler<L, 2>(); // ... m16int
  case 1:
    switch (Reg) {
    case 0: return memHandler<L, 4>();  // FLD m32fp
    case 2: case 3: return memHandler<St, 4>(); // FST(P) m32fp
    case 4: return &execFldenv<false>;
    case 6: return &execFnstenv<false>;
    default: return nullptr;
    }
  case 3:
    switch (Reg) {
    case 0: return memHandler<L, 4>();  // FILD m32int
    case 1: case 2: case 3: return memHandler<St, 4>(); // FISTTP, FIST, FISTP m32int
    case 5: return memHandler<L, 10>(); // FLD m80fp
    case 7: return memHandler<St, 10>(); // FSTP m80fp
    default: return nullptr;
    }
  case 5:
    switch (Reg) {
    case 0: return memHandler<L, 8>(); // FLD m64fp
    case 1: case 2: case 3: return memHandler<St, 8>(); // FISTTP m64int, FST(P) m64fp
    case 4: return &execFldenv<true>; // FRSTOR
    case 6: return &execFnstenv<true>; // FNSAVE
    default: return nullptr;
    }
  default: // 7
    switch (Reg) {
    case 0: return memHandler<L, 2>(); // FILD m16int
    case 1: case 2: case 3: return memHandler<St, 2>(); // FISTTP, FIST, FISTP m16int
    case 4: return memHandler<L, 10>(); // FBLD m80bcd
    case 5: return memHandler<L, 8>(); // FILD m64int
    case 6: return memHandler<St, 10>(); // FBSTP m80bcd
    default: return memHandler<St, 8>(); // FISTP m64int
    }
  }
}

} // namespace

namespace x87 {

// SDM Vol. 1, Appendix D, "MS-DOS Compatibility Sub-mode" (and Vol. 3A, "Numeric Error"
// under CR0.NE): with CR0.NE = 0, a waiting x87 instruction that finds an unmasked
// exception pending asserts FERR# and freezes before executing, until an interrupt (the
// PC routes FERR# to IRQ 13, whose handler writes port F0h and clears the exception);
// while the IGNNE# input is asserted the processor ignores the pending exception and
// executes the instruction. The freeze is the HLT activity state with RIP at the
// instruction: an interrupt's handler returns to it, and it runs again. Without a chipset
// (a bare test processor) nothing would receive FERR#: the run stops, naming it.
Status legacyPendingError(Cpu &C) {
  if (C.Ignne)
    return Status::Ok;
  if (!C.Ferr)
    return C.unimplemented("x87 legacy FERR# (CR0.NE=0) error reporting without a chipset");
  C.Ferr->assertFerr(C);
  mwaitSettle(C); // this wait is not an MWAIT's
  C.Activity = ActivityState::Hlt;
  return Status::Frozen;
}

void storeEnv(const CpuState &S, EnvFormat F, uint8_t *B) {
  const uint16_t Tw = fullTagWord(S);
  const uint32_t Ip = uint32_t(S.Fip), Dp = uint32_t(S.Fdp), Op = S.Fop & 0x7ffu;
  // Reserved halves of the 32-bit formats are stored as FFFFH, as the host does.
  switch (F) {
  case EnvFormat::Prot32:
    putField<uint32_t>(B, 0, 0xffff0000u | S.Fcw);
    putField<uint32_t>(B, 4, 0xffff0000u | S.Fsw);
    putField<uint32_t>(B, 8, 0xffff0000u | Tw);
    putField<uint32_t>(B, 12, Ip);
    putField<uint32_t>(B, 16, Op << 16); // FCS 0
    putField<uint32_t>(B, 20, Dp);
    putField<uint32_t>(B, 24, 0xffff0000u); // FDS 0
    break;
  case EnvFormat::Real32:
    putField<uint32_t>(B, 0, 0xffff0000u | S.Fcw);
    putField<uint32_t>(B, 4, 0xffff0000u | S.Fsw);
    putField<uint32_t>(B, 8, 0xffff0000u | Tw);
    putField<uint32_t>(B, 12, 0xffff0000u | (Ip & 0xffff));
    putField<uint32_t>(B, 16, ((Ip & 0xffff0000u) >> 4) | Op);
    putField<uint32_t>(B, 20, 0xffff0000u | (Dp & 0xffff));
    putField<uint32_t>(B, 24, (Dp & 0xffff0000u) >> 4);
    break;
  case EnvFormat::Prot16:
    putField<uint16_t>(B, 0, S.Fcw);
    putField<uint16_t>(B, 2, S.Fsw);
    putField<uint16_t>(B, 4, Tw);
    putField<uint16_t>(B, 6, uint16_t(Ip));
    putField<uint16_t>(B, 8, 0); // FCS
    putField<uint16_t>(B, 10, uint16_t(Dp));
    putField<uint16_t>(B, 12, 0); // FDS
    break;
  case EnvFormat::Real16:
    putField<uint16_t>(B, 0, S.Fcw);
    putField<uint16_t>(B, 2, S.Fsw);
    putField<uint16_t>(B, 4, Tw);
    putField<uint16_t>(B, 6, uint16_t(Ip));
    putField<uint16_t>(B, 8, uint16_t(((Ip >> 4) & 0xf000) | Op));
    putField<uint16_t>(B, 10, uint16_t(Dp));
    putField<uint16_t>(B, 12, uint16_t((Dp >> 4) & 0xf000));
    break;
  }
}

void loadEnv(CpuState &S, EnvFormat F, const uint8_t *B) {
  uint16_t Cw = 0, Sw = 0, Tw = 0xffff;
  switch (F) {
  case EnvFormat::Prot32:
  case EnvFormat::Real32: {
    Cw = getField<uint16_t>(B, 0);
    Sw = getField<uint16_t>(B, 4);
    Tw = getField<uint16_t>(B, 8);
    const uint32_t W12 = getField<uint32_t>(B, 12), W16 = getField<uint32_t>(B, 16),
                   W20 = getField<uint32_t>(B, 20), W24 = getField<uint32_t>(B, 24);
    if (F == EnvFormat::Prot32) {
      S.Fip = W12;
      S.Fop = uint16_t((W16 >> 16) & 0x7ff);
      S.Fdp = W20;
    } else {
      S.Fip = (W12 & 0xffff) | ((W16 << 4) & 0xffff0000u);
      S.Fop = uint16_t(W16 & 0x7ff);
      S.Fdp = (W20 & 0xffff) | ((W24 << 4) & 0xffff0000u);
    }
    break;
  }
  case EnvFormat::Prot16:
  case EnvFormat::Real16: {
    Cw = getField<uint16_t>(B, 0);
    Sw = getField<uint16_t>(B, 2);
    Tw = getField<uint16_t>(B, 4);
    const uint32_t W6 = getField<uint16_t>(B, 6), W8 = getField<uint16_t>(B, 8),
                   W10 = getField<uint16_t>(B, 10), W12 = getField<uint16_t>(B, 12);
    if (F == EnvFormat::Prot16) {
      S.Fip = W6;
      S.Fdp = W10;
      // The 16-bit protected format has no FOP field: FOP is left as it was.
    } else {
      S.Fip = W6 | ((W8 & 0xf000) << 4);
      S.Fop = uint16_t(W8 & 0x7ff);
      S.Fdp = W10 | ((W12 & 0xf000) << 4);
    }
    break;
  }
  }
  S.Ftw = abridgedTagWord(Tw);
  loadControlStatus(S, Cw, Sw);
}

} // namespace x87

/// Every x87 mnemonic without its own row (cpu/insns_sse.def) binds here, by escape byte
/// and ModR/M.
bool bindX87Arith(const DecodeInfo &D, DecodedInsn &I) {
  const unsigned Esc = D.Opcode & 7, ModRm = D.ModRm;
  I.Imm = (Esc << 8) | ModRm; // FOP
  I.Imm2 = uint16_t(hostIndex(Esc << 8 | ModRm));
  I.Cost = costOf(CostClass::Sse);
  if ((ModRm >> 6) == 3) {
    if (Esc == 3 && (ModRm == 0xe0 || ModRm == 0xe1 || ModRm == 0xe4)) {
      I.Fn = &execX87Nop;
      return true;
    }
    // FUCOMI(P) E8-EF and FCOMI(P) F0-F7 under DB and DF.
    const bool Eflags = (Esc == 3 || Esc == 7) && ModRm >= 0xe8 && ModRm <= 0xf7;
    I.Fn = Eflags ? &execX87<MemKind::None, 0, true> : &execX87<MemKind::None, 0, false>;
    return true;
  }
  I.Fn = memForm(Esc, (ModRm >> 3) & 7);
  if (!I.Fn)
    return false;
  if (I.Fn == &execFnstenv<false> || I.Fn == &execFnstenv<true> ||
      I.Fn == &execFldenv<false> || I.Fn == &execFldenv<true>) {
    // The operand size picks the 14- or 28-byte environment: 16 bits in a 16-bit code
    // segment without 66H or in a 32/64-bit one with it.
    const bool Default16 = D.Mode == CodeMode::Real16 || D.Mode == CodeMode::Prot16;
    const bool Override = D.Prefixes & insnflag::OpSizeOverride;
    I.Imm2 = Default16 != Override;
    I.Cost = costOf(CostClass::Serializing);
  }
  return true;
}

} // namespace vmxsim
