// The only file that talks to Zydis (STYLE 2.2). It turns guest bytes into DecodedInsn
// blocks, binding each instruction's handler through the per-family binder tables
// (cpu/insns_*.def).
#include "cpu/decode.h"

#include "cpu/cpuid.h"
#include "cpu/jit/translator.h"
#include "cpu/memory.h"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

namespace vmxsim {

// Binder declarations, generated from the instruction tables.
#define INSN(Mnemonic, BinderFn) bool BinderFn(const DecodeInfo &, DecodedInsn &);
#include "cpu/insns.def"
#undef INSN

namespace {

struct Decoders {
  ZydisDecoder ByMode[4];
  Decoders() {
    ZydisDecoderInit(&ByMode[unsigned(CodeMode::Real16)], ZYDIS_MACHINE_MODE_REAL_16,
                     ZYDIS_STACK_WIDTH_16);
    ZydisDecoderInit(&ByMode[unsigned(CodeMode::Prot16)], ZYDIS_MACHINE_MODE_LEGACY_16,
                     ZYDIS_STACK_WIDTH_16);
    ZydisDecoderInit(&ByMode[unsigned(CodeMode::Prot32)], ZYDIS_MACHINE_MODE_LEGACY_32,
                     ZYDIS_STACK_WIDTH_32);
    ZydisDecoderInit(&ByMode[unsigned(CodeMode::Long64)], ZYDIS_MACHINE_MODE_LONG_64,
                     ZYDIS_STACK_WIDTH_64);
    // vmxsim's processors do not report CET (CPUID.(EAX=7,ECX=0):ECX.CET_SS[7] and
    // EDX.CET_IBT[20] are 0), so the CET hint space decodes as on a processor without
    // it: ENDBR32/ENDBR64 and RDSSPD/RDSSPQ (F3 0F 1E) are the NOPs of 0F 1E (SDM Vol.
    // 2A, ENDBR64: "treated as NOP"; Vol. 2B, RDSSPD/RDSSPQ: "a NOP when CET shadow
    // stacks are not enabled and on processors that do not support CET"). The other CET
    // instructions (INCSSP, SETSSBSY, CLRSSBSY, SAVEPREVSSP, RSTORSSP, WRSS, WRUSS) still
    // decode as themselves and raise #UD with CR4.CET = 0 (execUnbound).
    for (ZydisDecoder &D : ByMode)
      ZydisDecoderEnableMode(&D, ZYDIS_DECODER_MODE_CET, ZYAN_FALSE);
  }
};
const Decoders &decoders() {
  static const Decoders D;
  return D;
}

using BinderTable = std::array<Binder, ZYDIS_MNEMONIC_MAX_VALUE + 1>;
const BinderTable &binders() {
  static const BinderTable T = [] {
    BinderTable B{};
#define INSN(Mnemonic, BinderFn) B[ZYDIS_MNEMONIC_##Mnemonic] = &BinderFn;
#include "cpu/insns.def"
#undef INSN
    return B;
  }();
  return T;
}

uint8_t gprNumber(ZydisRegister R) {
  ZydisRegisterClass Cls = ZydisRegisterGetClass(R);
  int8_t Id = ZydisRegisterGetId(R);
  if (Cls == ZYDIS_REGCLASS_GPR8) {
    // AL CL DL BL AH CH DH BH SPL BPL SIL DIL R8B..R15B
    if (Id < 4)
      return uint8_t(Id);
    if (Id < 8)
      return uint8_t(kRegAH + (Id - 4));
    return uint8_t(Id - 4);
  }
  return uint8_t(Id);
}

SegReg segOf(ZydisRegister R) {
  switch (R) {
  case ZYDIS_REGISTER_ES: return SegReg::ES;
  case ZYDIS_REGISTER_CS: return SegReg::CS;
  case ZYDIS_REGISTER_SS: return SegReg::SS;
  case ZYDIS_REGISTER_DS: return SegReg::DS;
  case ZYDIS_REGISTER_FS: return SegReg::FS;
  case ZYDIS_REGISTER_GS: return SegReg::GS;
  default: return SegReg::None;
  }
}

uint8_t regOperand(ZydisRegister R, RegClass &Class) {
  switch (ZydisRegisterGetClass(R)) {
  case ZYDIS_REGCLASS_GPR8:
  case ZYDIS_REGCLASS_GPR16:
  case ZYDIS_REGCLASS_GPR32:
  case ZYDIS_REGCLASS_GPR64:
    Class = RegClass::Gpr;
    return gprNumber(R);
  case ZYDIS_REGCLASS_SEGMENT:
    Class = RegClass::Seg;
    return uint8_t(segOf(R));
  case ZYDIS_REGCLASS_CONTROL:
    Class = RegClass::Cr;
    return uint8_t(ZydisRegisterGetId(R));
  case ZYDIS_REGCLASS_DEBUG:
    Class = RegClass::Dr;
    return uint8_t(ZydisRegisterGetId(R));
  case ZYDIS_REGCLASS_XMM:
    Class = RegClass::Xmm;
    return uint8_t(ZydisRegisterGetId(R));
  case ZYDIS_REGCLASS_MMX:
    Class = RegClass::Mmx;
    return uint8_t(ZydisRegisterGetId(R));
  case ZYDIS_REGCLASS_X87:
    Class = RegClass::X87;
    return uint8_t(ZydisRegisterGetId(R));
  default:
    Class = RegClass::Other;
    return kRegNone;
  }
}

Status execTooLong(Cpu &C, const DecodedInsn &) {
  // More than 15 bytes: #GP(0) (SDM Vol. 2A, Instruction Format).
  return C.raiseGp(0);
}

enum class DecodeResult { Ok, Invalid, TooLong, NeedMore };

DecodeResult decodeBytes(const uint8_t *Bytes, unsigned Size, CodeMode Mode,
                         DecodedInsn &Out) {
  ZydisDecodedInstruction Z;
  ZydisDecodedOperand Ops[ZYDIS_MAX_OPERAND_COUNT];
  ZyanStatus St =
      ZydisDecoderDecodeFull(&decoders().ByMode[unsigned(Mode)], Bytes, Size, &Z, Ops);
  Out = DecodedInsn{};
  if (!ZYAN_SUCCESS(St)) {
    if (St == ZYDIS_STATUS_NO_MORE_DATA && Size < 15)
      return DecodeResult::NeedMore;
    Out.Len = 1;
    Out.Flags = insnflag::EndsBlock;
    if (St == ZYDIS_STATUS_INSTRUCTION_TOO_LONG) {
      Out.Fn = &execTooLong;
      return DecodeResult::TooLong;
    }
    Out.Fn = &execInvalid;
    return DecodeResult::Invalid;
  }

  DecodeInfo D;
  D.Mnemonic = uint16_t(Z.mnemonic);
  D.Len = Z.length;
  D.OpSize = uint8_t(Z.operand_width / 8);
  D.AddrSize = uint8_t(Z.address_width / 8);
  D.Mode = Mode;
  D.Opcode = Z.opcode;
  D.OpcodeMap = uint8_t(Z.opcode_map);
  D.ModRmReg = Z.raw.modrm.reg;
  D.ModRm = uint8_t(Z.raw.modrm.mod << 6 | Z.raw.modrm.reg << 3 | Z.raw.modrm.rm);
  if (Z.attributes & ZYDIS_ATTRIB_HAS_LOCK)
    D.Prefixes |= insnflag::Lock;
  if (Z.attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE))
    D.Prefixes |= insnflag::Rep;
  if (Z.attributes & ZYDIS_ATTRIB_HAS_REPNE)
    D.Prefixes |= insnflag::Repne;
  if (Z.attributes & ZYDIS_ATTRIB_HAS_OPERANDSIZE)
    D.Prefixes |= insnflag::OpSizeOverride;
  if ((Z.attributes & ZYDIS_ATTRIB_HAS_REX) && Z.raw.rex.W)
    D.Prefixes |= insnflag::RexW;

  Out.Mnemonic = D.Mnemonic;
  Out.Len = D.Len;
  Out.OpSize = D.OpSize;
  Out.AddrSize = D.AddrSize;
  Out.Flags = D.Prefixes & (insnflag::Lock | insnflag::Rep | insnflag::Repne |
                            insnflag::OpSizeOverride | insnflag::RexW);
  Out.Seg = uint8_t(SegReg::DS);

  bool SeenImm = false;
  D.NumOps = std::min<uint8_t>(Z.operand_count, 5);
  D.NumVisible = std::min<uint8_t>(Z.operand_count_visible, 5);
  for (unsigned K = 0; K < D.NumOps; ++K) {
    const ZydisDecodedOperand &O = Ops[K];
    OperandInfo &I = D.Ops[K];
    I.SizeBytes = uint8_t(O.size / 8);
    I.Implicit = O.visibility != ZYDIS_OPERAND_VISIBILITY_EXPLICIT;
    switch (O.type) {
    case ZYDIS_OPERAND_TYPE_REGISTER:
      I.Kind = OperandKind::Reg;
      I.Reg = regOperand(O.reg.value, I.Class);
      break;
    case ZYDIS_OPERAND_TYPE_MEMORY:
      I.Kind = OperandKind::Mem;
      I.Seg = segOf(O.mem.segment);
      // Only the first explicit memory operand (or the only one) is described in the
      // DecodedInsn; string instructions use their implicit ES:rDI / seg:rSI operands.
      if (!(Out.Flags & insnflag::HasMem) && O.mem.type != ZYDIS_MEMOP_TYPE_INVALID) {
        if (O.mem.type == ZYDIS_MEMOP_TYPE_MEM || O.mem.type == ZYDIS_MEMOP_TYPE_AGEN ||
            O.mem.type == ZYDIS_MEMOP_TYPE_MIB) {
          if (!I.Implicit)
            Out.Flags |= insnflag::HasMem;
          SegReg Sg = segOf(O.mem.segment);
          if (Sg != SegReg::None)
            Out.Seg = uint8_t(Sg);
          ZydisRegisterClass BC = ZydisRegisterGetClass(O.mem.base);
          if (BC == ZYDIS_REGCLASS_IP)
            Out.Base = kRegRip;
          else if (O.mem.base != ZYDIS_REGISTER_NONE)
            Out.Base = gprNumber(O.mem.base);
          if (O.mem.index != ZYDIS_REGISTER_NONE)
            Out.Index = gprNumber(O.mem.index);
          Out.ScaleLog2 = O.mem.scale == 8 ? 3 : O.mem.scale == 4 ? 2 : O.mem.scale == 2 ? 1 : 0;
          Out.Disp = O.mem.disp.has_displacement ? O.mem.disp.value : 0;
        }
      }
      break;
    case ZYDIS_OPERAND_TYPE_POINTER:
      I.Kind = OperandKind::Ptr;
      D.Imm = O.ptr.offset;
      D.Imm2 = O.ptr.segment;
      break;
    case ZYDIS_OPERAND_TYPE_IMMEDIATE:
      I.Kind = OperandKind::Imm;
      if (!SeenImm) {
        D.Imm = O.imm.is_signed ? uint64_t(O.imm.value.s) : O.imm.value.u;
        D.ImmRaw = O.imm.value.u;
        D.ImmRelative = O.imm.is_relative;
        D.ImmSize = uint8_t(Z.raw.imm[0].size / 8);
        SeenImm = true;
      } else {
        D.Imm2 = O.imm.value.u;
      }
      break;
    default:
      break;
    }
  }
  Out.Imm = D.Imm;
  Out.Imm2 = uint16_t(D.Imm2);
  // MONITOR's operand is DS:rAX with a segment override allowed (SDM Vol. 2B, MONITOR),
  // which Zydis lists as the register rAX (and so marks the prefix ignored): its segment
  // is the last segment prefix's. (In 64-bit mode only FS and GS add a base, which is
  // segmentToLinear's business.)
  if (Z.mnemonic == ZYDIS_MNEMONIC_MONITOR) {
    constexpr std::pair<uint8_t, SegReg> kOverrides[] = {
        {0x26, SegReg::ES}, {0x2e, SegReg::CS}, {0x36, SegReg::SS},
        {0x3e, SegReg::DS}, {0x64, SegReg::FS}, {0x65, SegReg::GS}};
    for (unsigned P = 0; P < Z.raw.prefix_count; ++P)
      for (const auto &[Byte, Sg] : kOverrides)
        if (Z.raw.prefixes[P].value == Byte)
          Out.Seg = uint8_t(Sg);
  }

  Binder B = binders()[Z.mnemonic];
  if (!B) {
    // An instruction vmxsim has no handler for: whether it exists on the modelled
    // processor is decided when it executes, by the CPUID feature of its extension.
    Out.Fn = &execUnbound;
    Out.Imm = (uint64_t(Z.meta.isa_set) << 16) | uint64_t(Z.meta.isa_ext);
    Out.Flags |= insnflag::EndsBlock;
    return DecodeResult::Ok;
  }
  // A binder refuses only an encoding the SDM makes #UD (a LOCK prefix where it is not
  // allowed, MOV to CS, a register operand where only memory is valid, ...); a form
  // vmxsim lacks is bound to a handler that stops the run as unimplemented.
  if (!B(D, Out)) {
    Out.Fn = &execInvalid;
    Out.Flags |= insnflag::EndsBlock;
    return DecodeResult::Invalid;
  }
  return DecodeResult::Ok;
}

/// The CPUID feature flag that makes the instructions of an ISA extension exist (SDM Vol.
/// 2A, CPUID, "Feature Information"; the "CPUID Feature Flag" column of each opcode
/// table). Reg 0..3 is EAX..EDX of CPUID.(EAX=Leaf, ECX=Subleaf).
struct IsaFeature {
  enum Kind : uint8_t { Cpuid, Never } K = Never;
  uint32_t Leaf = 0;
  uint8_t Subleaf = 0, Reg = 0, Bit = 0;
};

constexpr IsaFeature flag(uint32_t Leaf, uint8_t Reg, uint8_t Bit, uint8_t Subleaf = 0) {
  return IsaFeature{IsaFeature::Cpuid, Leaf, Subleaf, Reg, Bit};
}
constexpr uint8_t kEax = 0, kEbx = 1, kEcx = 2, kEdx = 3;

IsaFeature isaFeature(ZydisISAExt Ext, ZydisISASet Set) {
  switch (Ext) {
  // Present on every Intel 64 processor: CPUID.1:EDX.FPU is always 1 in vmxsim's models.
  case ZYDIS_ISA_EXT_BASE:
  case ZYDIS_ISA_EXT_LONGMODE:
  case ZYDIS_ISA_EXT_PAUSE:
  case ZYDIS_ISA_EXT_X87: return flag(1, kEdx, 0);
  case ZYDIS_ISA_EXT_MMX: return flag(1, kEdx, 23);
  case ZYDIS_ISA_EXT_SSE: return flag(1, kEdx, 25);
  case ZYDIS_ISA_EXT_SSE2: return flag(1, kEdx, 26);
  case ZYDIS_ISA_EXT_CLFSH: return flag(1, kEdx, 19);
  case ZYDIS_ISA_EXT_SSE3: return flag(1, kEcx, 0);
  case ZYDIS_ISA_EXT_PCLMULQDQ: return flag(1, kEcx, 1);
  case ZYDIS_ISA_EXT_MONITOR: return flag(1, kEcx, 3);
  case ZYDIS_ISA_EXT_VTX:
  case ZYDIS_ISA_EXT_VMFUNC: return flag(1, kEcx, 5);
  case ZYDIS_ISA_EXT_SMX: return flag(1, kEcx, 6);
  case ZYDIS_ISA_EXT_SSSE3: return flag(1, kEcx, 9);
  case ZYDIS_ISA_EXT_FMA: return flag(1, kEcx, 12);
  case ZYDIS_ISA_EXT_SSE4: return Set == ZYDIS_ISA_SET_SSE42 ? flag(1, kEcx, 20) : flag(1, kEcx, 19);
  case ZYDIS_ISA_EXT_MOVBE: return flag(1, kEcx, 22);
  case ZYDIS_ISA_EXT_AES: return flag(1, kEcx, 25);
  case ZYDIS_ISA_EXT_XSAVE: return flag(1, kEcx, 26);
  case ZYDIS_ISA_EXT_AVX:
  case ZYDIS_ISA_EXT_AVXAES: return flag(1, kEcx, 28);
  case ZYDIS_ISA_EXT_F16C: return flag(1, kEcx, 29);
  case ZYDIS_ISA_EXT_RDRAND: return flag(1, kEcx, 30);
  case ZYDIS_ISA_EXT_RDWRFSGS: return flag(7, kEbx, 0);
  case ZYDIS_ISA_EXT_SGX:
  case ZYDIS_ISA_EXT_SGX_ENCLV: return flag(7, kEbx, 2);
  case ZYDIS_ISA_EXT_BMI1: return flag(7, kEbx, 3);
  case ZYDIS_ISA_EXT_AVX2:
  case ZYDIS_ISA_EXT_AVX2GATHER: return flag(7, kEbx, 5);
  case ZYDIS_ISA_EXT_BMI2: return flag(7, kEbx, 8);
  case ZYDIS_ISA_EXT_INVPCID: return flag(7, kEbx, 10);
  case ZYDIS_ISA_EXT_RTM: return flag(7, kEbx, 11);
  case ZYDIS_ISA_EXT_MPX: return flag(7, kEbx, 14);
  case ZYDIS_ISA_EXT_AVX512EVEX:
  case ZYDIS_ISA_EXT_AVX512VEX: return flag(7, kEbx, 16);
  case ZYDIS_ISA_EXT_RDSEED: return flag(7, kEbx, 18);
  case ZYDIS_ISA_EXT_ADOX_ADCX: return flag(7, kEbx, 19);
  case ZYDIS_ISA_EXT_SMAP: return flag(7, kEbx, 20);
  case ZYDIS_ISA_EXT_CLFLUSHOPT: return flag(7, kEbx, 23);
  case ZYDIS_ISA_EXT_CLWB: return flag(7, kEbx, 24);
  case ZYDIS_ISA_EXT_PT: return flag(7, kEbx, 25);
  case ZYDIS_ISA_EXT_SHA: return flag(7, kEbx, 29);
  case ZYDIS_ISA_EXT_PREFETCHWT1: return flag(7, kEcx, 0);
  case ZYDIS_ISA_EXT_PKU: return flag(7, kEcx, 3);
  case ZYDIS_ISA_EXT_WAITPKG: return flag(7, kEcx, 5);
  case ZYDIS_ISA_EXT_CET: return flag(7, kEcx, 7);
  case ZYDIS_ISA_EXT_GFNI: return flag(7, kEcx, 8);
  case ZYDIS_ISA_EXT_VAES: return flag(7, kEcx, 9);
  case ZYDIS_ISA_EXT_VPCLMULQDQ: return flag(7, kEcx, 10);
  case ZYDIS_ISA_EXT_RDPID: return flag(7, kEcx, 22);
  case ZYDIS_ISA_EXT_KEYLOCKER:
  case ZYDIS_ISA_EXT_KEYLOCKER_WIDE: return flag(7, kEcx, 23);
  case ZYDIS_ISA_EXT_CLDEMOTE: return flag(7, kEcx, 25);
  case ZYDIS_ISA_EXT_MOVDIR: return flag(7, kEcx, 27);
  case ZYDIS_ISA_EXT_ENQCMD: return flag(7, kEcx, 29);
  case ZYDIS_ISA_EXT_UINTR: return flag(7, kEdx, 5);
  case ZYDIS_ISA_EXT_SERIALIZE: return flag(7, kEdx, 14);
  case ZYDIS_ISA_EXT_TSX_LDTRK: return flag(7, kEdx, 16);
  case ZYDIS_ISA_EXT_PCONFIG: return flag(7, kEdx, 18);
  case ZYDIS_ISA_EXT_AMX_BF16: return flag(7, kEdx, 22);
  case ZYDIS_ISA_EXT_AMX_TILE: return flag(7, kEdx, 24);
  case ZYDIS_ISA_EXT_AMX_INT8: return flag(7, kEdx, 25);
  case ZYDIS_ISA_EXT_AVX_VNNI: return flag(7, kEax, 4, 1);
  case ZYDIS_ISA_EXT_HRESET: return flag(7, kEax, 22, 1);
  case ZYDIS_ISA_EXT_XSAVEOPT: return flag(0xd, kEax, 0, 1);
  case ZYDIS_ISA_EXT_XSAVEC: return flag(0xd, kEax, 1, 1);
  case ZYDIS_ISA_EXT_XSAVES: return flag(0xd, kEax, 3, 1);
  case ZYDIS_ISA_EXT_LZCNT: return flag(0x80000001, kEcx, 5);
  case ZYDIS_ISA_EXT_RDTSCP: return flag(0x80000001, kEdx, 27);
  default:
    // AMD's extensions (3DNow!, SSE4a, XOP, FMA4, TBM, SVM, CLZERO, MONITORX, RDPRU,
    // MCOMMIT, SNP, INVLPGB), Knights Corner, VIA PadLock and TDX exist on no Intel
    // processor vmxsim models.
    return IsaFeature{};
  }
}

} // namespace

Status execInvalid(Cpu &C, const DecodedInsn &) { return C.raiseUd(); }

Status execUnbound(Cpu &C, const DecodedInsn &I) {
  const IsaFeature F = isaFeature(ZydisISAExt(I.Imm & 0xffff), ZydisISASet(I.Imm >> 16));
  bool Exists = false;
  if (F.K == IsaFeature::Cpuid) {
    const CpuidResult R = cpuidQuery(C, F.Leaf, F.Subleaf);
    const uint32_t Regs[4] = {R.Eax, R.Ebx, R.Ecx, R.Edx};
    Exists = (Regs[F.Reg] >> F.Bit) & 1;
  }
  // An instruction of an extension the processor does not report is #UD, as on such a
  // processor; one that exists there and that vmxsim lacks stops the run, naming it.
  if (!Exists)
    return C.raiseUd();
  return C.unimplemented(mnemonicName(I.Mnemonic));
}

bool decodeOne(const uint8_t *Bytes, unsigned Size, CodeMode Mode, DecodedInsn &Out) {
  return decodeBytes(Bytes, Size, Mode, Out) == DecodeResult::Ok;
}

bool decodeLength(const uint8_t *Bytes, unsigned Size, CodeMode Mode, unsigned &Len,
                  uint16_t &Mnemonic) {
  ZydisDecodedInstruction Z;
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&decoders().ByMode[unsigned(Mode)], nullptr,
                                                  Bytes, Size, &Z)))
    return false;
  Len = Z.length;
  Mnemonic = uint16_t(Z.mnemonic);
  return true;
}

const char *mnemonicName(uint16_t Mnemonic) {
  const char *N = ZydisMnemonicGetString(ZydisMnemonic(Mnemonic));
  return N ? N : "?";
}

namespace {
// Each instruction's CostToEnd: its Cost plus that of every instruction after it in the
// block (the run loop's stop cycle, Cpu::runBlocks).
void sumBlockCosts(Block &B) {
  uint16_t Sum = 0;
  for (unsigned K = B.NumInsns; K-- > 0;)
    B.Insns[K].CostToEnd = Sum = uint16_t(Sum + B.Insns[K].Cost);
}

// Page-crossing instructions are never cached as blocks (their bytes live in two frames,
// and the block cache tracks one), so each execution decoded one twice: once up to the
// page end (NeedMore), once whole from both pages. The Linux kit's decompressor runs one
// such instruction every 350 instructions: two Zydis decodes each (about 2,100 host
// instructions) and a refill of its block slot that broke every block link.
//
// decodeBytes is a pure function of its bytes, their count and the mode, so its answers
// for the last crossing instructions are remembered by exactly those: the bytes before
// the page end that made it say NeedMore, and the whole instruction's bytes with its
// decoded form, kept as an uncached one-instruction block (Key 0, like the scratch
// block). A match gives what decodeBytes would return; everything else in the crossing
// path (both fetches through the TLBs with their faults, the CS limit check) runs as
// before. Only the block cache differs: the slot at the instruction's address is no
// longer emptied and the block links stay (the run loop never links an uncached block),
// which nothing the guest sees depends on (a block's presence in the cache is invisible;
// the lines marked as code are not touched by either path). Per host thread, since it
// depends on nothing but the bytes; a processor runs the block it returns before any
// other decodes.
struct CrossingMemo {
  uint8_t Mode;  ///< CodeMode + 1; 0: empty
  uint8_t Head;  ///< bytes before the page end, for which decodeBytes said NeedMore
  uint8_t Total; ///< bytes the whole decode was shown
  uint8_t Bytes[15];
  Block One; ///< the decoded instruction as an uncached block
};
inline constexpr unsigned kCrossingMemos = 4;
thread_local CrossingMemo Crossing[kCrossingMemos];

CrossingMemo &crossingMemo(uint64_t Pa) { return Crossing[(Pa >> 12) & (kCrossingMemos - 1)]; }
bool crossingHeadMatches(const CrossingMemo &M, CodeMode Mode, const uint8_t *Head,
                         unsigned N) {
  return M.Mode == uint8_t(Mode) + 1 && M.Head == N && std::memcmp(M.Bytes, Head, N) == 0;
}

// A page-crossing instruction at La (machine-physical Pa) whose Avail bytes up to the
// page end are in Buf and made decodeBytes say NeedMore: fetch the rest from the next
// page (which may fault) and run it as an uncached one-instruction block.
Status decodeCrossing(Cpu &C, uint64_t La, bool Is64, uint64_t LimitLeft, uint8_t *Buf,
                      unsigned Avail, uint64_t Pa, Block *&Out) {
  const CodeMode Mode = CodeMode(C.DecodeMode);
  unsigned Got2;
  Hpa Pa2;
  VMX_TRY(fetchCode(C, (La + Avail) & (Is64 ? ~uint64_t(0) : 0xffffffffull), Buf + Avail,
                    15 - Avail, Got2, Pa2));
  const unsigned Total = unsigned(std::min<uint64_t>(Avail + Got2, LimitLeft));
  CrossingMemo &M = crossingMemo(Pa);
  if (!crossingHeadMatches(M, Mode, Buf, Avail) || M.Total != Total ||
      std::memcmp(M.Bytes + Avail, Buf + Avail, Total - Avail) != 0) {
    M.Mode = 0;
    Block &One = M.One;
    One.Key = 0; // never valid: not cached
    One.NumInsns = 1;
    if (decodeBytes(Buf, Total, Mode, One.Insns[0]) == DecodeResult::NeedMore)
      return C.raiseGp(0);
    sumBlockCosts(One);
    M.Mode = uint8_t(uint8_t(Mode) + 1);
    M.Head = uint8_t(Avail);
    M.Total = uint8_t(Total);
    std::memcpy(M.Bytes, Buf, Total);
  }
  Out = &M.One; // what decodeBytes(Buf, Total, Mode) made of these bytes
  return Status::Ok;
}
} // namespace

namespace {
/// Page-crossing block B (Block::Crosses) at La, found in its slot: its second page
/// still maps to its frame with the bytes unchanged (revalidated as decodeBlock does the
/// first page's: a write to none of its lines keeps it). False: decode it again.
bool crossingCurrent(Cpu &C, Block &B, uint64_t La) {
  Hpa Pa2;
  if (!C.Mmu.fetchHost(Gla((La | 0xfff) + 1), Pa2) || Pa2.value() >> 12 != B.CrossPfn)
    return false;
  const uint64_t Gen2 = C.Mem.codeGeneration(B.CrossPfn);
  if (B.CrossGen != Gen2 && !C.Mem.linesUnwrittenSince(B.CrossPfn, B.CrossLines, B.CrossGen))
    return false;
  B.CrossGen = Gen2;
  return true;
}

/// The 64-bit instruction at La (B's slot, machine-physical B.Pa) crosses its page's end
/// after its Avail bytes in Buf: fetch the rest from the next page (which may fault) and
/// make it block B of one instruction, kept in the cache like any other (SDM Vol. 3A,
/// "Self-Modifying Code" applies to both pages: the lines of each are marked as code).
/// Decoding it again at every execution (a hot loop of the Linux kit's decompressor has
/// one) cost some 700 host instructions each time.
Status decodeCrossingBlock(Cpu &C, Block &B, uint64_t La, uint8_t *Buf, unsigned Avail,
                           Block *&Out) {
  unsigned Got2;
  Hpa Pa2;
  VMX_TRY(fetchCode(C, La + Avail, Buf + Avail, 15 - Avail, Got2, Pa2));
  const unsigned Total = Avail + Got2;
  DecodedInsn I{};
  if (decodeBytes(Buf, Total, CodeMode::Long64, I) == DecodeResult::NeedMore)
    return C.raiseGp(0);
  if (!C.Mem.ramPointer(Hpa(Pa2.value() & kPageMask))) {
    // Its tail in MMIO or unassigned space: never cached (as a first byte there).
    Block &Scratch = C.Mmu.scratchBlock();
    Scratch.Key = 0;
    Scratch.NumInsns = 1;
    Scratch.Insns[0] = I;
    sumBlockCosts(Scratch);
    Out = &Scratch;
    return Status::Ok;
  }
  // (B.Key is 0 until it is filled, as decodeBlock left it.)
  B.Insns[0] = I;
  const uint64_t Pfn = B.Pa >> 12, Pfn2 = Pa2.value() >> 12;
  const unsigned Off = unsigned(B.Pa & 0xfff);
  B.Lines = PhysMem::lineMask(Off, Avail);
  B.Crosses = 1;
  B.CrossPfn = Pfn2;
  B.CrossGen = C.Mem.codeGeneration(Pfn2);
  B.CrossLines = PhysMem::lineMask(0, I.Len > Avail ? I.Len - Avail : 1);
  B.NumInsns = 1;
  B.Key = C.Mmu.blockKey(C.DecodeMode);
  C.Mmu.blockDecoded(Pfn, B.Lines);
  C.Mmu.crossingDecoded(Pfn2, B.CrossLines);
  sumBlockCosts(B);
  Out = &B;
  return Status::Ok;
}

/// The shortest prefix worth a block of its own (each split adds one block transition).
constexpr unsigned kMinSplitPrefix = 8;
/// True when block-ending instruction I has no translated form and every instruction
/// of B before it has one.
bool splitsBefore(Translator &T, const Block &B, const DecodedInsn &I) {
  if (T.formOf(I).Op != JitOp::None)
    return false;
  for (unsigned K = 0; K < B.NumInsns; ++K)
    if (T.formOf(B.Insns[K]).Op == JitOp::None)
      return false;
  return true;
}
} // namespace

Status decodeBlock(Cpu &C, Block *&Out) {
  const CodeMode Mode = CodeMode(C.DecodeMode);
  const bool Is64 = Mode == CodeMode::Long64;
  const Segment &Cs = C.S.cs();
  uint64_t Rip = C.S.Rip;
  // Code-segment limit (SDM Vol. 3A, Segment-Limit Checking): bytes past the limit
  // cannot be fetched; an instruction that needs them raises #GP(0).
  uint64_t LimitLeft = Is64 ? ~uint64_t(0) : (Rip > Cs.Limit ? 0 : uint64_t(Cs.Limit) - Rip + 1);
  if (LimitLeft == 0)
    return C.raiseGp(0);
  uint64_t La = Is64 ? Rip : (Cs.Base + Rip) & 0xffffffffull;
  if (Is64 && !isCanonical(C, La))
    return C.raiseGp(0);

  uint8_t Buf[32];
  unsigned Got;
  Hpa Fetched;
  VMX_TRY(fetchCode(C, La, Buf, 16, Got, Fetched));
  const uint64_t Pa = Fetched.value();
  const uint64_t Pfn = Pa >> 12;

  Block &B = C.Mmu.blockAt(Pa);
  if (B.Pa == Pa && B.Key == C.Mmu.blockKey(C.DecodeMode) &&
      (!B.Crosses || crossingCurrent(C, B, La))) {
    const uint64_t Gen = C.Mem.codeGeneration(Pfn);
    if (B.Gen == Gen) [[likely]] {
      Out = &B;
      return Status::Ok;
    }
    // A write into code of the page since: if it touched none of the block's lines, the
    // block's bytes are unchanged and it stays (mmu/phys_mem.h).
    if (C.Mem.linesUnwrittenSince(Pfn, B.Lines, B.Gen)) {
      B.Gen = Gen;
      Out = &B;
      return Status::Ok;
    }
  }

  const uint8_t *Page = C.Mem.ramPointer(Hpa(Pa & kPageMask));
  if (!Page) {
    // Code in MMIO or unassigned space: decode one instruction, never cache it.
    Block &Scratch = C.Mmu.scratchBlock();
    Scratch.Key = 0; // never valid: not cached
    Scratch.NumInsns = 1;
    if (decodeBytes(Buf, std::min<uint64_t>(Got, LimitLeft), Mode, Scratch.Insns[0]) ==
        DecodeResult::NeedMore)
      return C.raiseGp(0);
    sumBlockCosts(Scratch);
    Out = &Scratch;
    return Status::Ok;
  }

  B.Pa = Pa;
  B.Key = C.Mmu.blockKey(C.DecodeMode);
  B.Gen = C.Mem.codeGeneration(Pfn);
  B.Lines = 0;
  B.NumInsns = 0;
  B.JitCode = nullptr;
  B.JitStamp = 0;
  B.JitRuns = 0;
  B.JitCalls = 0;
  B.Crosses = 0;

  unsigned Off = unsigned(Pa & 0xfff);
  // With a translator, a block whose instructions all have translated forms but whose
  // last (block-ending) one has none is cut before that one, which starts a block of its
  // own: the prefix is translated instead of the whole block being refused
  // (splitsBefore). Blocks are the run loop's unit of caching only: where one ends changes
  // no instruction's result, cost or window (Cpu::runBlocks checks the window after each).
  const bool Split = C.Jit && Is64;
  while (B.NumInsns < kMaxBlockInsns) {
    unsigned Avail = unsigned(std::min<uint64_t>(kPageSize - Off, LimitLeft));
    DecodedInsn &I = B.Insns[B.NumInsns];
    const unsigned Shown = std::min(Avail, 15u);
    DecodeResult R = decodeBytes(Page + Off, Shown, Mode, I);
    if (Split && R == DecodeResult::Ok && (I.Flags & insnflag::EndsBlock) &&
        B.NumInsns >= kMinSplitPrefix && splitsBefore(*C.Jit, B, I))
      break; // I starts the next block; its bytes are not this block's
    // The bytes the result depends on: a decoded instruction's own; for an undecodable
    // one, all the decoder was shown (a later byte could have made it valid).
    if (R != DecodeResult::NeedMore)
      B.Lines |= PhysMem::lineMask(Off, R == DecodeResult::Ok ? I.Len : Shown);
    if (R == DecodeResult::NeedMore) {
      if (B.NumInsns > 0)
        break; // the crossing instruction starts the next block
      B.Key = 0; // the block was not filled
      if (LimitLeft <= Avail)
        return C.raiseGp(0); // runs past the CS limit
      // Page-crossing instruction: fetch the rest from the next page (which may fault);
      // in 64-bit mode it becomes a block of its own, else it runs from an uncached one.
      std::memcpy(Buf, Page + Off, Avail);
      if (Is64)
        return decodeCrossingBlock(C, B, La, Buf, Avail, Out);
      return decodeCrossing(C, La, Is64, LimitLeft, Buf, Avail, Pa, Out);
    }
    ++B.NumInsns;
    Off += I.Len;
    LimitLeft -= I.Len;
    if ((I.Flags & insnflag::EndsBlock) || Off >= kPageSize || LimitLeft == 0)
      break;
  }
  C.Mmu.blockDecoded(Pfn, B.Lines);
  sumBlockCosts(B);
  Out = &B;
  return Status::Ok;
}

} // namespace vmxsim
