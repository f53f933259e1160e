#include "harness/kvm/fuzz_gen.h"

#include <Zydis/Zydis.h>

#include <cstring>

namespace vmxsim::kvm::fuzzgen {

namespace {

// --- the instruction forms ----------------------------------------------------------------

/// Operand shapes (explicit operands, in Zydis encoder order).
enum class Shape : uint8_t {
  None, R, M, RR, RM, MR, RI, MI, RI8, MI8, RCl, MCl, RRI8, MRI8, RRCl, MRCl,
  RRR,  ///< r, r, r/m as register (VEX: ANDN PDEP PEXT MULX)
  RRM,  ///< r, r, m
  RRmR, ///< r, r/m(reg), r (VEX: BEXTR BZHI SHLX SHRX SARX)
  RMR,  ///< r, m, r
  RMI,  ///< r, m, imm (IMUL)
  RRI,  ///< r, r, imm (IMUL)
  RM8,  ///< r, r/m8 memory (MOVZX/MOVSX)
  RR8,  ///< r, r8
  RM16, RR16, RM32, RR32, ///< MOVZX/MOVSX word source, MOVSXD
  Jcc,  ///< short forward branch over the next instruction
  AlI8, I8Al, EaxDx, DxEax, ///< IN/OUT forms
  RCr, CrR, ///< MOV r64, CRn / MOV CR2, r64
};

const char *shapeName(Shape S) {
  switch (S) {
  case Shape::None: return "";
  case Shape::R: return "r";
  case Shape::M: return "m";
  case Shape::RR: return "r,r";
  case Shape::RM: return "r,m";
  case Shape::MR: return "m,r";
  case Shape::RI: return "r,i";
  case Shape::MI: return "m,i";
  case Shape::RI8: return "r,i8";
  case Shape::MI8: return "m,i8";
  case Shape::RCl: return "r,cl";
  case Shape::MCl: return "m,cl";
  case Shape::RRI8: return "r,r,i8";
  case Shape::MRI8: return "m,r,i8";
  case Shape::RRCl: return "r,r,cl";
  case Shape::MRCl: return "m,r,cl";
  case Shape::RRR: return "r,r,r";
  case Shape::RRM: return "r,r,m";
  case Shape::RRmR: return "r,r,r";
  case Shape::RMR: return "r,m,r";
  case Shape::RMI: return "r,m,i";
  case Shape::RRI: return "r,r,i";
  case Shape::RM8: return "r,m8";
  case Shape::RR8: return "r,r8";
  case Shape::RM16: return "r,m16";
  case Shape::RR16: return "r,r16";
  case Shape::RM32: return "r,m32";
  case Shape::RR32: return "r,r32";
  case Shape::Jcc: return "rel8";
  case Shape::AlI8: return "al,i8";
  case Shape::I8Al: return "i8,al";
  case Shape::EaxDx: return "eax,dx";
  case Shape::DxEax: return "dx,eax";
  case Shape::RCr: return "r,cr";
  case Shape::CrR: return "cr2,r";
  }
  return "?";
}

namespace sz {
constexpr uint8_t B = 1, W = 2, D = 4, Q = 8, All = 15, WDQ = 14, DQ = 12;
}
namespace only {
constexpr uint8_t Any = 0, Cpl0 = 1, Cpl3 = 2;
}

struct Form {
  ZydisMnemonic Mn;
  Shape Sh;
  uint8_t Sizes;
  uint8_t Where;
};

#define M(X) ZYDIS_MNEMONIC_##X
// The generated instruction forms. Not generated, and why (vendor or host differences,
// or results that legitimately differ between two correct implementations):
//   CPUID, RDTSC(P), RDRAND/RDSEED, RDPID: host-, time- or randomness-dependent values.
//   x87, MMX, SSE/AVX arithmetic: not part of this differential run (separate oracles
//     compare SSE against the host: tests/cpu/sse_*oracle*).
//   SGDT/SIDT/SLDT/STR/SMSW at CPL 3: run natively they report the HOST's tables (or
//     #GP under the host's UMIP); generated at CPL 0 only, where the emulator runs them.
//   RDMSR/WRMSR, SWAPGS, MOV to CR0/CR3/CR4: model-specific MSR sets; PVM rewrites CR0
//     and CR4 and owns CR3 (shadow paging) - not an emulator-vs-emulator question.
//   SYSCALL/SYSRET, INT n, IRET, far transfers, MOV to segment registers: PVM handles CPL
//     and segment changes itself (paravirtual entry points), not as the SDM says.
//   String instructions (MOVS/STOS/...) with REP: long I/O-less loops; without REP they
//     are covered by the memory forms of other instructions (future work).
//   INTO, AAA & co., PUSHA, LDS/LES, BOUND, ARPL: invalid in 64-bit mode.
//   Undefined flags: masked per stream (see fuzz.h), never compared.
//   16-bit SHLD/SHRD: a count above 16 gives an undefined result (SDM Vol. 2B, SHLD),
//     which differs between Intel and AMD: only 32/64-bit forms are generated.
//   LZCNT/TZCNT and MOVBE at CPL 0: the host kernel's emulator runs F3 0F BD/BC as
//     BSR/BSF and MOVBE as #UD (the CPUID it emulates lacks them; the VMM cannot set
//     CPUID here): CPL 3 only, where the CPU runs them.
//   INT3: at CPL 3 PVM delivers #BP even through a DPL 0 gate, where the SDM (Vol. 3A,
//     Protection of Exception- and Interrupt-Handler Procedures) requires #GP(0x1a), as
//     vmxsim does; at CPL 0 the kernel's emulator cannot run it. Not generated.
//   BMI1/BMI2/ADX, POPCNT, VERR/VERW at CPL 0: the kernel's emulator cannot run them
//     (KVM internal error): CPL 3 only (BMI/ADX/POPCNT) or not generated (VERR/VERW).
//   RFLAGS.AC: PVM reports it clear at CPL 3 and clears it when it delivers an event at
//     CPL 0 (the SDM's delivery clears only TF, NT, RF, VM and, for interrupt gates, IF:
//     Vol. 3A, Flag Usage by Exception- or Interrupt-Handler Procedure). Not compared.
//   Port I/O, CLI/STI with IOPL 3 at CPL 3: see the I/O rows.
//   POPF at CPL 3 sets RFLAGS.AC, and with CR0.AM = 1 the CPU then raises #AC on
//     misaligned accesses: the divergence that made vmxsim implement the alignment check
//     (tests/xcheck/regressions/alignment_check_cpl3.txt). Generated at both CPLs.
//   CMPXCHG reg,reg at CPL 0: the host kernel's emulator zero-extends a 32-bit destination
//     also when the comparison fails; the CPU (CPL 3 runs) and vmxsim do not.
//   Page-crossing accesses at CPL 0 whose second page faults: see the memory operands
//     (the kernel's emulator commits a partial store / reports the other page's fault).
//   Random (mostly non-canonical) addresses at CPL 3 for VEX, MOVBE, LZCNT/TZCNT,
//     ADCX/ADOX: PVM intercepts the #GP and re-runs the instruction in the kernel's
//     emulator, which lacks them and raises #UD instead.
const Form kForms[] = {
    // ALU (SDM Vol. 2A, ADD ... XOR)
    {M(ADD), Shape::RR, sz::All, only::Any}, {M(ADD), Shape::RM, sz::All, only::Any},
    {M(ADD), Shape::MR, sz::All, only::Any}, {M(ADD), Shape::RI, sz::All, only::Any},
    {M(ADD), Shape::MI, sz::All, only::Any},
    {M(OR), Shape::RR, sz::All, only::Any}, {M(OR), Shape::MI, sz::All, only::Any},
    {M(ADC), Shape::RR, sz::All, only::Any}, {M(ADC), Shape::RM, sz::All, only::Any},
    {M(ADC), Shape::MI, sz::All, only::Any},
    {M(SBB), Shape::RR, sz::All, only::Any}, {M(SBB), Shape::MR, sz::All, only::Any},
    {M(AND), Shape::RR, sz::All, only::Any}, {M(AND), Shape::RI, sz::All, only::Any},
    {M(SUB), Shape::RR, sz::All, only::Any}, {M(SUB), Shape::RM, sz::All, only::Any},
    {M(SUB), Shape::MI, sz::All, only::Any},
    {M(XOR), Shape::RR, sz::All, only::Any}, {M(XOR), Shape::MR, sz::All, only::Any},
    {M(CMP), Shape::RR, sz::All, only::Any}, {M(CMP), Shape::RM, sz::All, only::Any},
    {M(CMP), Shape::MI, sz::All, only::Any},
    {M(TEST), Shape::RR, sz::All, only::Any}, {M(TEST), Shape::MR, sz::All, only::Any},
    {M(TEST), Shape::RI, sz::All, only::Any},
    {M(INC), Shape::R, sz::All, only::Any}, {M(INC), Shape::M, sz::All, only::Any},
    {M(DEC), Shape::R, sz::All, only::Any}, {M(DEC), Shape::M, sz::All, only::Any},
    {M(NEG), Shape::R, sz::All, only::Any}, {M(NEG), Shape::M, sz::All, only::Any},
    {M(NOT), Shape::R, sz::All, only::Any}, {M(NOT), Shape::M, sz::All, only::Any},
    // Shifts and rotates (SDM Vol. 2B, SAL/SAR/SHL/SHR; RCL/RCR/ROL/ROR; SHLD; SHRD)
    {M(SHL), Shape::RI8, sz::All, only::Any}, {M(SHL), Shape::RCl, sz::All, only::Any},
    {M(SHR), Shape::RI8, sz::All, only::Any}, {M(SHR), Shape::MI8, sz::All, only::Any},
    {M(SAR), Shape::RI8, sz::All, only::Any}, {M(SAR), Shape::RCl, sz::All, only::Any},
    {M(ROL), Shape::RI8, sz::All, only::Any}, {M(ROR), Shape::RCl, sz::All, only::Any},
    {M(RCL), Shape::RI8, sz::All, only::Any}, {M(RCR), Shape::RI8, sz::All, only::Any},
    {M(SHLD), Shape::RRI8, sz::DQ, only::Any}, {M(SHRD), Shape::RRCl, sz::DQ, only::Any},
    {M(SHLD), Shape::MRI8, sz::DQ, only::Any},
    // Multiply and divide (SDM Vol. 2A, MUL, IMUL, DIV, IDIV): #DE is a wanted fault.
    {M(MUL), Shape::R, sz::All, only::Any}, {M(MUL), Shape::M, sz::All, only::Any},
    {M(IMUL), Shape::R, sz::All, only::Any}, {M(IMUL), Shape::RR, sz::WDQ, only::Any},
    {M(IMUL), Shape::RM, sz::WDQ, only::Any}, {M(IMUL), Shape::RRI, sz::WDQ, only::Any},
    {M(DIV), Shape::R, sz::All, only::Any}, {M(DIV), Shape::M, sz::All, only::Any},
    {M(IDIV), Shape::R, sz::All, only::Any},
    // Bits (SDM Vol. 2A, BT/BTS/BTR/BTC, BSF, BSR, LZCNT, TZCNT, POPCNT, BSWAP)
    {M(BT), Shape::RR, sz::WDQ, only::Any}, {M(BT), Shape::RI8, sz::WDQ, only::Any},
    {M(BT), Shape::MI8, sz::WDQ, only::Any}, {M(BTS), Shape::RR, sz::WDQ, only::Any},
    {M(BTS), Shape::MI8, sz::WDQ, only::Any}, {M(BTR), Shape::RI8, sz::WDQ, only::Any},
    {M(BTR), Shape::MR, sz::WDQ, only::Any}, {M(BTC), Shape::RR, sz::WDQ, only::Any},
    {M(BTC), Shape::MI8, sz::WDQ, only::Any},
    {M(BSF), Shape::RR, sz::WDQ, only::Any}, {M(BSR), Shape::RM, sz::WDQ, only::Any},
    {M(LZCNT), Shape::RR, sz::WDQ, only::Cpl3}, {M(TZCNT), Shape::RM, sz::WDQ, only::Cpl3},
    {M(POPCNT), Shape::RR, sz::WDQ, only::Cpl3}, {M(BSWAP), Shape::R, sz::DQ, only::Any},
    // BMI1/BMI2/ADX (SDM Vol. 2A/2B, each page); both vmxsim's model and the host have them.
    {M(ANDN), Shape::RRR, sz::DQ, only::Cpl3}, {M(BLSI), Shape::RR, sz::DQ, only::Cpl3},
    {M(BLSR), Shape::RR, sz::DQ, only::Cpl3}, {M(BLSMSK), Shape::RR, sz::DQ, only::Cpl3},
    {M(BEXTR), Shape::RRmR, sz::DQ, only::Cpl3}, {M(BZHI), Shape::RRmR, sz::DQ, only::Cpl3},
    {M(SHLX), Shape::RRmR, sz::DQ, only::Cpl3}, {M(SARX), Shape::RMR, sz::DQ, only::Cpl3},
    {M(PDEP), Shape::RRR, sz::DQ, only::Cpl3}, {M(PEXT), Shape::RRR, sz::DQ, only::Cpl3},
    {M(MULX), Shape::RRR, sz::DQ, only::Cpl3}, {M(RORX), Shape::RRI8, sz::DQ, only::Cpl3},
    {M(ADCX), Shape::RR, sz::DQ, only::Cpl3}, {M(ADOX), Shape::RR, sz::DQ, only::Cpl3},
    // Data movement (SDM Vol. 2A/2B, MOV, MOVZX, MOVSX, MOVSXD, XCHG, XADD, CMPXCHG, LEA,
    // CMOVcc, SETcc, MOVBE, PUSH, POP)
    {M(MOV), Shape::RR, sz::All, only::Any}, {M(MOV), Shape::RM, sz::All, only::Any},
    {M(MOV), Shape::MR, sz::All, only::Any}, {M(MOV), Shape::RI, sz::All, only::Any},
    {M(MOV), Shape::MI, sz::All, only::Any},
    {M(MOVZX), Shape::RR8, sz::WDQ, only::Any}, {M(MOVZX), Shape::RM16, sz::DQ, only::Any},
    {M(MOVSX), Shape::RM8, sz::WDQ, only::Any}, {M(MOVSX), Shape::RR16, sz::DQ, only::Any},
    {M(MOVSXD), Shape::RR32, sz::Q, only::Any}, {M(MOVSXD), Shape::RM32, sz::Q, only::Any},
    {M(XCHG), Shape::RR, sz::All, only::Any}, {M(XCHG), Shape::MR, sz::All, only::Any},
    {M(XADD), Shape::RR, sz::All, only::Any}, {M(XADD), Shape::MR, sz::All, only::Any},
    {M(CMPXCHG), Shape::RR, sz::All, only::Cpl3}, {M(CMPXCHG), Shape::MR, sz::All, only::Any},
    {M(LEA), Shape::RM, sz::WDQ, only::Any},
    {M(CMOVZ), Shape::RR, sz::WDQ, only::Any}, {M(CMOVB), Shape::RM, sz::WDQ, only::Any},
    {M(CMOVLE), Shape::RR, sz::WDQ, only::Any}, {M(CMOVS), Shape::RM, sz::WDQ, only::Any},
    {M(SETNBE), Shape::R, sz::B, only::Any}, {M(SETL), Shape::M, sz::B, only::Any},
    {M(SETP), Shape::R, sz::B, only::Any}, {M(SETO), Shape::R, sz::B, only::Any},
    {M(MOVBE), Shape::RM, sz::WDQ, only::Cpl3}, {M(MOVBE), Shape::MR, sz::WDQ, only::Cpl3},
    {M(PUSH), Shape::R, sz::Q, only::Any}, {M(POP), Shape::R, sz::Q, only::Any},
    {M(PUSH), Shape::M, sz::Q, only::Any}, {M(PUSH), Shape::RI, sz::Q, only::Any},
    {M(CBW), Shape::None, 0, only::Any}, {M(CWDE), Shape::None, 0, only::Any},
    {M(CDQE), Shape::None, 0, only::Any}, {M(CWD), Shape::None, 0, only::Any},
    {M(CDQ), Shape::None, 0, only::Any}, {M(CQO), Shape::None, 0, only::Any},
    // Flags (SDM Vol. 2A, CLC STC CMC CLD STD LAHF SAHF PUSHF POPF)
    {M(CLC), Shape::None, 0, only::Any}, {M(STC), Shape::None, 0, only::Any},
    {M(CMC), Shape::None, 0, only::Any}, {M(LAHF), Shape::None, 0, only::Any},
    {M(SAHF), Shape::None, 0, only::Any}, {M(PUSHFQ), Shape::None, 0, only::Any},
    {M(POPFQ), Shape::None, 0, only::Any},
    // Control flow inside the stream and faults (SDM Vol. 2A, Jcc; UD; HLT; INT3)
    {M(JZ), Shape::Jcc, 0, only::Any}, {M(JNB), Shape::Jcc, 0, only::Any},
    {M(JLE), Shape::Jcc, 0, only::Any}, {M(JS), Shape::Jcc, 0, only::Any},
    {M(NOP), Shape::None, 0, only::Any}, {M(UD2), Shape::None, 0, only::Any},
    {M(HLT), Shape::None, 0, only::Cpl3},
    // Port I/O (SDM Vol. 2A, IN, OUT): CPL 0 only, because PVM executes port I/O at CPL 3
    // without the IOPL/I-O-bitmap check (real hardware: #GP) and cannot run user code
    // with IOPL 3 (it reports and pushes IOPL 0).
    {M(IN), Shape::AlI8, 0, only::Cpl0}, {M(OUT), Shape::I8Al, 0, only::Cpl0},
    {M(IN), Shape::EaxDx, 0, only::Cpl0}, {M(OUT), Shape::DxEax, 0, only::Cpl0},
    // System instructions legal at CPL 0 (SDM Vol. 2, each page); at CPL 3 the
    // privileged ones are generated as #GP cases.
    {M(CLI), Shape::None, 0, only::Any}, {M(STI), Shape::None, 0, only::Any},
    {M(MOV), Shape::RCr, sz::Q, only::Any}, {M(MOV), Shape::CrR, sz::Q, only::Cpl0},
    {M(SGDT), Shape::M, 0, only::Cpl0}, {M(SIDT), Shape::M, 0, only::Cpl0},
    {M(STR), Shape::R, sz::W, only::Cpl0}, {M(SLDT), Shape::R, sz::W, only::Cpl0},
    {M(SMSW), Shape::R, sz::W, only::Cpl0}, {M(INVLPG), Shape::M, 0, only::Any},
    {M(LAR), Shape::RR16, sz::DQ, only::Cpl0}, {M(LSL), Shape::RR16, sz::DQ, only::Cpl0},
    {M(CLTS), Shape::None, 0, only::Cpl0}, {M(WBINVD), Shape::None, 0, only::Cpl0},
};
#undef M
constexpr unsigned kNumForms = sizeof(kForms) / sizeof(kForms[0]);

bool pvmEmulatorLacks(ZydisMnemonic Mn) {
  switch (Mn) {
  case ZYDIS_MNEMONIC_ANDN: case ZYDIS_MNEMONIC_BLSI: case ZYDIS_MNEMONIC_BLSR:
  case ZYDIS_MNEMONIC_BLSMSK: case ZYDIS_MNEMONIC_BEXTR: case ZYDIS_MNEMONIC_BZHI:
  case ZYDIS_MNEMONIC_SHLX: case ZYDIS_MNEMONIC_SHRX: case ZYDIS_MNEMONIC_SARX:
  case ZYDIS_MNEMONIC_PDEP: case ZYDIS_MNEMONIC_PEXT: case ZYDIS_MNEMONIC_MULX:
  case ZYDIS_MNEMONIC_RORX: case ZYDIS_MNEMONIC_ADCX: case ZYDIS_MNEMONIC_ADOX:
  case ZYDIS_MNEMONIC_MOVBE: case ZYDIS_MNEMONIC_LZCNT: case ZYDIS_MNEMONIC_TZCNT:
  case ZYDIS_MNEMONIC_POPCNT:
    return true;
  default:
    return false;
  }
}

bool isShiftLike(ZydisMnemonic Mn) {
  switch (Mn) {
  case ZYDIS_MNEMONIC_SHL: case ZYDIS_MNEMONIC_SHR: case ZYDIS_MNEMONIC_SAR:
  case ZYDIS_MNEMONIC_ROL: case ZYDIS_MNEMONIC_ROR: case ZYDIS_MNEMONIC_RCL:
  case ZYDIS_MNEMONIC_RCR: case ZYDIS_MNEMONIC_SHLD: case ZYDIS_MNEMONIC_SHRD:
    return true;
  default:
    return false;
  }
}

ZydisRegister gpr(unsigned Size, unsigned Idx) {
  switch (Size) {
  case 1:
    if (Idx < 4) return ZydisRegister(ZYDIS_REGISTER_AL + Idx);
    if (Idx < 8) return ZydisRegister(ZYDIS_REGISTER_SPL + (Idx - 4));
    return ZydisRegister(ZYDIS_REGISTER_R8B + (Idx - 8));
  case 2: return ZydisRegister(ZYDIS_REGISTER_AX + Idx);
  case 4: return ZydisRegister(ZYDIS_REGISTER_EAX + Idx);
  default: return ZydisRegister(ZYDIS_REGISTER_RAX + Idx);
  }
}

} // namespace

struct Generator::Impl {
  Impl() { ZydisDecoderInit(&Dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64); }

  FuzzStream make(Rng &G, unsigned Cpl, unsigned MaxInsns) {
    FuzzStream St;
    St.Cpl = Cpl;
    for (unsigned R = 0; R < 16; ++R)
      St.Gpr[R] = operandValue(G);
    // CPL 3: IOPL 0 and IF 1, what PVM really runs user code with (it reports and pushes
    // those whatever the VMM sets; kvm_vm.h).
    St.Rflags = rflags::Fixed1 | (G.next() & rflags::Arith) | (Cpl == 3 ? rflags::IF : 0);
    St.DataSeed = G.next();
    const unsigned N = 1 + unsigned(G.nextBelow(MaxInsns));
    uint64_t Undef = 0;
    uint64_t Offset = 0;
    while (St.Insns.size() < N) {
      FuzzInsn I;
      uint64_t NewUndef = Undef;
      if (!one(G, Cpl, Offset, Undef, I, NewUndef))
        continue;
      const Form &F = kForms[I.Form];
      if (F.Sh == Shape::Jcc) {
        // Encode the skipped instruction first: the branch jumps over it.
        FuzzInsn Next;
        uint64_t AfterNext = NewUndef;
        unsigned Tries = 0;
        while (Tries++ < 50) {
          if (one(G, Cpl, Offset + 2, NewUndef, Next, AfterNext) &&
              kForms[Next.Form].Sh != Shape::Jcc)
            break;
        }
        if (Tries > 50)
          continue;
        I.Bytes.push_back(uint8_t(Next.Bytes.size()));
        Offset += I.Bytes.size() + Next.Bytes.size();
        St.Insns.push_back(I);
        St.Insns.push_back(Next);
        Undef = NewUndef | AfterNext; // either path
        continue;
      }
      Offset += I.Bytes.size();
      St.Insns.push_back(I);
      Undef = NewUndef;
    }
    return St;
  }

  /// Flags left undefined after running Code[0..Count) from a fully defined state (the
  /// branch rule of make(): a Jcc's skipped instruction counts as either path).
  uint64_t undefinedAfter(const FuzzStream &St, size_t Count) {
    uint64_t Undef = 0;
    for (size_t K = 0; K < Count && K < St.Insns.size(); ++K) {
      const std::vector<uint8_t> &B = St.Insns[K].Bytes;
      ZydisDecodedInstruction D;
      if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&Dec, nullptr, B.data(), B.size(), &D)))
        continue;
      if (D.meta.category == ZYDIS_CATEGORY_COND_BR && K + 1 < St.Insns.size()) {
        const uint64_t Before = Undef;
        Undef = update(St.Insns[K + 1].Bytes, Undef) | Before;
        ++K;
        continue;
      }
      Undef = update(B, Undef);
    }
    return Undef;
  }

  uint64_t update(const std::vector<uint8_t> &B, uint64_t Undef) {
    ZydisDecodedInstruction D;
    ZydisDecodedOperand Ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&Dec, B.data(), B.size(), &D, Ops)))
      return Undef;
    return flagsAfter(D, Ops, Undef);
  }

  uint64_t flagsAfter(const ZydisDecodedInstruction &D, const ZydisDecodedOperand *Ops,
                      uint64_t Undef) {
    if (!D.cpu_flags)
      return Undef;
    const uint64_t Arith = rflags::Arith;
    const uint64_t Written = (D.cpu_flags->modified | D.cpu_flags->set_0 | D.cpu_flags->set_1) & Arith;
    uint64_t Und = D.cpu_flags->undefined & Arith;
    if (isShiftLike(D.mnemonic)) {
      // A count of 0 (after masking) changes no flag and OF is defined only for 1, so
      // only an immediate count other than 0 defines the written flags.
      const ZydisDecodedOperand *Cnt = nullptr;
      for (unsigned K = 0; K < D.operand_count_visible; ++K)
        if (Ops[K].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
          Cnt = &Ops[K];
      const unsigned Mask = D.operand_width == 64 ? 63 : 31;
      unsigned Count = Cnt ? unsigned(Cnt->imm.value.u) & Mask : 0;
      // Count 1 for the D0/D1 forms (an implicit immediate 1 operand).
      if (!Cnt)
        for (unsigned K = 0; K < D.operand_count; ++K)
          if (Ops[K].type == ZYDIS_OPERAND_TYPE_IMMEDIATE)
            Count = unsigned(Ops[K].imm.value.u) & Mask;
      bool ClCount = false;
      for (unsigned K = 0; K < D.operand_count_visible; ++K)
        if (Ops[K].type == ZYDIS_OPERAND_TYPE_REGISTER && Ops[K].reg.value == ZYDIS_REGISTER_CL)
          ClCount = true;
      if (ClCount || Count == 0)
        return Undef | Written | Und;
      if (Count != 1)
        Und |= rflags::OF;
      if (D.mnemonic == ZYDIS_MNEMONIC_ROL || D.mnemonic == ZYDIS_MNEMONIC_ROR ||
          D.mnemonic == ZYDIS_MNEMONIC_RCL || D.mnemonic == ZYDIS_MNEMONIC_RCR) {
        // Rotates of 8/16-bit operands by a count >= the width (RCL/RCR: width + 1)
        // still change CF; keep the rule simple: CF and OF written only as Zydis says.
      }
    }
    return (Undef & ~Written) | Und;
  }

  /// Encodes one random instruction; false to retry.
  bool one(Rng &G, unsigned Cpl, uint64_t Offset, uint64_t Undef, FuzzInsn &Out,
           uint64_t &UndefOut) {
    const unsigned FormIdx = unsigned(G.nextBelow(kNumForms));
    const Form &F = kForms[FormIdx];
    if ((F.Where == only::Cpl0 && Cpl != 0) || (F.Where == only::Cpl3 && Cpl != 3))
      return false;
    Out.Form = uint16_t(FormIdx);
    Out.Bytes.clear();
    if (F.Sh == Shape::Jcc) {
      static const ZydisMnemonic Cc[] = {ZYDIS_MNEMONIC_JZ, ZYDIS_MNEMONIC_JNB,
                                         ZYDIS_MNEMONIC_JLE, ZYDIS_MNEMONIC_JS};
      static const uint8_t Op[] = {0x74, 0x73, 0x7e, 0x78};
      static const uint64_t Tested[] = {rflags::ZF, rflags::CF,
                                        rflags::ZF | rflags::SF | rflags::OF, rflags::SF};
      for (unsigned K = 0; K < 4; ++K)
        if (Cc[K] == F.Mn) {
          if (Tested[K] & Undef)
            return false;
          Out.Bytes = {Op[K]}; // the rel8 byte is appended by make()
          UndefOut = Undef;
          return true;
        }
      return false;
    }
    unsigned Size = 8;
    if (F.Sizes) {
      do
        Size = 1u << G.nextBelow(4);
      while (!(F.Sizes & Size));
    }
    ZydisEncoderRequest Req;
    std::memset(&Req, 0, sizeof(Req));
    Req.machine_mode = ZYDIS_MACHINE_MODE_LONG_64;
    Req.mnemonic = F.Mn;
    auto Reg = [&](unsigned S) {
      unsigned Idx;
      do
        Idx = unsigned(G.nextBelow(15));
      while (Idx == 4);
      ZydisEncoderOperand O;
      std::memset(&O, 0, sizeof(O));
      O.type = ZYDIS_OPERAND_TYPE_REGISTER;
      O.reg.value = (S == 1 && G.chance(15)) ? ZydisRegister(ZYDIS_REGISTER_AH + G.nextBelow(4))
                                             : gpr(S, Idx);
      return O;
    };
    auto RegFixed = [&](ZydisRegister R) {
      ZydisEncoderOperand O;
      std::memset(&O, 0, sizeof(O));
      O.type = ZYDIS_OPERAND_TYPE_REGISTER;
      O.reg.value = R;
      return O;
    };
    bool RipRel = false;
    auto Mem = [&](unsigned S) {
      ZydisEncoderOperand O;
      std::memset(&O, 0, sizeof(O));
      O.type = ZYDIS_OPERAND_TYPE_MEMORY;
      O.mem.size = uint16_t(S);
      O.mem.base = ZYDIS_REGISTER_R15;
      O.mem.index = ZYDIS_REGISTER_NONE;
      const unsigned W = S ? S : 8;
      int64_t Disp;
      switch (G.nextBelow(20)) {
      case 0: case 1: case 2: Disp = -int64_t(1 + G.nextBelow(0x100)); break; // end of D0
      case 3: case 4: case 5: Disp = W > 1 ? -int64_t(1 + G.nextBelow(W - 1)) : 0; break; // D0/D1
      case 6: case 7: // D1/U (may #PF). Not at CPL 0: the host kernel's emulator commits
        // the first part of a store whose second page faults (hardware and vmxsim do not).
        Disp = Cpl == 0 ? -int64_t(G.nextBelow(W)) : 0x1000 - int64_t(1 + G.nextBelow(W));
        break;
      case 8: Disp = 0x1000 + int64_t(G.nextBelow(0x1000)); break;        // U: #PF
      case 9: // R: #PF on write. At CPL 0 not crossing into the unmapped page after it:
        // for such an access the kernel's emulator reports the second page's fault
        // (CR2 there), the CPU (CPL 3 runs) and vmxsim the first page's.
        Disp = 0x2000 + int64_t(G.nextBelow(Cpl == 0 ? 0x1000 - W : 0x1000));
        break;
      case 10: {                                                        // random index
        if (Cpl == 3 && pvmEmulatorLacks(F.Mn)) { // see the form table
          Disp = 0;
          break;
        }
        O.mem.index = gpr(8, unsigned(G.nextBelow(4)));
        O.mem.scale = uint8_t(1u << G.nextBelow(4));
        Disp = int64_t(G.nextBelow(0x100));
        break;
      }
      case 11: case 12: // RIP-relative into D1 (absolute target, encoded relative)
        O.mem.base = ZYDIS_REGISTER_RIP;
        Disp = int64_t(kD1 + G.nextBelow(0x200));
        RipRel = true;
        break;
      default: Disp = int64_t(G.nextBelow(0x200)); break; // D1
      }
      O.mem.displacement = Disp;
      return O;
    };
    auto Imm = [&](unsigned S, bool Count = false) {
      ZydisEncoderOperand O;
      std::memset(&O, 0, sizeof(O));
      O.type = ZYDIS_OPERAND_TYPE_IMMEDIATE;
      if (Count)
        O.imm.u = G.chance(70) ? G.nextBelow(S * 8 + 2) : G.nextBelow(256);
      else if (S == 8)
        O.imm.s = int64_t(int32_t(uint32_t(operandValue(G))));
      else
        O.imm.u = operandValue(G) & ((S >= 8 ? ~0ull : (1ull << (8 * S)) - 1));
      return O;
    };
    auto &Op = Req.operands;
    unsigned N = 0;
    switch (F.Sh) {
    case Shape::None: break;
    case Shape::R: Op[N++] = Reg(Size); break;
    case Shape::M: Op[N++] = Mem(F.Sizes ? Size : 0); break;
    case Shape::RR: Op[N++] = Reg(Size); Op[N++] = Reg(Size); break;
    case Shape::RM: Op[N++] = Reg(Size); Op[N++] = Mem(Size); break;
    case Shape::MR: Op[N++] = Mem(Size); Op[N++] = Reg(Size); break;
    case Shape::RI: Op[N++] = Reg(Size); Op[N++] = Imm(Size); break;
    case Shape::MI: Op[N++] = Mem(Size); Op[N++] = Imm(Size); break;
    case Shape::RI8: Op[N++] = Reg(Size); Op[N++] = Imm(Size, true); break;
    case Shape::MI8: Op[N++] = Mem(Size); Op[N++] = Imm(Size, true); break;
    case Shape::RCl: Op[N++] = Reg(Size); Op[N++] = RegFixed(ZYDIS_REGISTER_CL); break;
    case Shape::MCl: Op[N++] = Mem(Size); Op[N++] = RegFixed(ZYDIS_REGISTER_CL); break;
    case Shape::RRI8: Op[N++] = Reg(Size); Op[N++] = Reg(Size); Op[N++] = Imm(Size, true); break;
    case Shape::MRI8: Op[N++] = Mem(Size); Op[N++] = Reg(Size); Op[N++] = Imm(Size, true); break;
    case Shape::RRCl: Op[N++] = Reg(Size); Op[N++] = Reg(Size); Op[N++] = RegFixed(ZYDIS_REGISTER_CL); break;
    case Shape::MRCl: Op[N++] = Mem(Size); Op[N++] = Reg(Size); Op[N++] = RegFixed(ZYDIS_REGISTER_CL); break;
    case Shape::RRR: case Shape::RRmR: Op[N++] = Reg(Size); Op[N++] = Reg(Size); Op[N++] = Reg(Size); break;
    case Shape::RRM: Op[N++] = Reg(Size); Op[N++] = Reg(Size); Op[N++] = Mem(Size); break;
    case Shape::RMR: Op[N++] = Reg(Size); Op[N++] = Mem(Size); Op[N++] = Reg(Size); break;
    case Shape::RMI: Op[N++] = Reg(Size); Op[N++] = Mem(Size); Op[N++] = Imm(Size > 4 ? 4 : Size); break;
    case Shape::RRI: Op[N++] = Reg(Size); Op[N++] = Reg(Size); Op[N++] = Imm(Size > 4 ? 4 : Size); break;
    case Shape::RM8: Op[N++] = Reg(Size); Op[N++] = Mem(1); break;
    case Shape::RR8: Op[N++] = Reg(Size); Op[N++] = Reg(1); break;
    case Shape::RM16: Op[N++] = Reg(Size); Op[N++] = Mem(2); break;
    case Shape::RR16: Op[N++] = Reg(Size); Op[N++] = Reg(2); break;
    case Shape::RM32: Op[N++] = Reg(Size); Op[N++] = Mem(4); break;
    case Shape::RR32: Op[N++] = Reg(Size); Op[N++] = Reg(4); break;
    case Shape::AlI8: {
      Op[N++] = RegFixed(ZYDIS_REGISTER_AL);
      ZydisEncoderOperand I = Imm(1);
      if (I.imm.u == kEndPort)
        I.imm.u = kEndPort + 1;
      Op[N++] = I;
      break;
    }
    case Shape::I8Al: {
      ZydisEncoderOperand I = Imm(1);
      if (I.imm.u == kEndPort)
        I.imm.u = kEndPort + 1;
      Op[N++] = I;
      Op[N++] = RegFixed(ZYDIS_REGISTER_AL);
      break;
    }
    case Shape::EaxDx: Op[N++] = RegFixed(ZYDIS_REGISTER_EAX); Op[N++] = RegFixed(ZYDIS_REGISTER_DX); break;
    case Shape::DxEax: Op[N++] = RegFixed(ZYDIS_REGISTER_DX); Op[N++] = RegFixed(ZYDIS_REGISTER_EAX); break;
    case Shape::RCr: {
      static const ZydisRegister Cr[] = {ZYDIS_REGISTER_CR0, ZYDIS_REGISTER_CR2, ZYDIS_REGISTER_CR4};
      Op[N++] = Reg(8);
      Op[N++] = RegFixed(Cr[G.nextBelow(3)]);
      break;
    }
    case Shape::CrR: Op[N++] = RegFixed(ZYDIS_REGISTER_CR2); Op[N++] = Reg(8); break;
    case Shape::Jcc: return false;
    }
    Req.operand_count = uint8_t(N);
    uint8_t Buf[ZYDIS_MAX_INSTRUCTION_LENGTH];
    ZyanUSize Len = sizeof(Buf);
    ZyanStatus St = RipRel ? ZydisEncoderEncodeInstructionAbsolute(&Req, Buf, &Len, kCode + Offset)
                           : ZydisEncoderEncodeInstruction(&Req, Buf, &Len);
    if (!ZYAN_SUCCESS(St))
      return false;
    ZydisDecodedInstruction D;
    ZydisDecodedOperand Ops[ZYDIS_MAX_OPERAND_COUNT];
    if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&Dec, Buf, Len, &D, Ops)))
      return false;
    // Never read a flag that is undefined at this point (the result would be too).
    uint64_t Tested = D.cpu_flags ? (D.cpu_flags->tested & rflags::Arith) : 0;
    if (D.mnemonic == ZYDIS_MNEMONIC_PUSHFQ)
      Tested = rflags::Arith; // stores every flag
    if (Tested & Undef)
      return false;
    Out.Bytes.assign(Buf, Buf + Len);
    UndefOut = flagsAfter(D, Ops, Undef);
    return true;
  }

  ZydisDecoder Dec;
};


Generator::Generator() : P(std::make_unique<Impl>()) {}
Generator::~Generator() = default;
FuzzStream Generator::make(Rng &G, unsigned Cpl, unsigned MaxInsns) {
  return P->make(G, Cpl, MaxInsns);
}
uint64_t Generator::undefinedAfter(const FuzzStream &St, size_t Count) {
  return P->undefinedAfter(St, Count);
}

std::string lower(std::string S) {
  for (char &C : S)
    C = char(std::tolower(static_cast<unsigned char>(C)));
  return S;
}

} // namespace vmxsim::kvm::fuzzgen

namespace vmxsim::kvm {

using namespace fuzzgen;

unsigned numForms() { return kNumForms; }

std::string formName(unsigned Form) {
  if (Form >= kNumForms)
    return "replayed";
  const struct Form &F = kForms[Form];
  std::string N = fuzzgen::lower(ZydisMnemonicGetString(F.Mn));
  if (F.Sh != Shape::None)
    N += std::string(" ") + shapeName(F.Sh);
  return N;
}

} // namespace vmxsim::kvm
