// The only file that talks to Zydis (STYLE 2.2). It turns guest bytes into DecodedInsn
// blocks, binding each instruction's handler through the per-family binder tables
// (cpu/insns_*.def).
#include "cpu/decode.h"

#include "cpu/memory.h"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <array>
#include <cstring>

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

  Binder B = binders()[Z.mnemonic];
  if (!B || !B(D, Out)) {
    Out.Fn = &execInvalid;
    Out.Flags |= insnflag::EndsBlock;
    return DecodeResult::Invalid;
  }
  return DecodeResult::Ok;
}

} // namespace

Status execInvalid(Cpu &C, const DecodedInsn &) { return C.raiseUd(); }

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
  if (B.Pa == Pa && B.Key == C.Mmu.blockKey(C.DecodeMode)) {
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
    Out = &Scratch;
    return Status::Ok;
  }

  B.Pa = Pa;
  B.Key = C.Mmu.blockKey(C.DecodeMode);
  B.Gen = C.Mem.codeGeneration(Pfn);
  B.Lines = 0;
  B.NumInsns = 0;

  unsigned Off = unsigned(Pa & 0xfff);
  while (B.NumInsns < kMaxBlockInsns) {
    unsigned Avail = unsigned(std::min<uint64_t>(kPageSize - Off, LimitLeft));
    DecodedInsn &I = B.Insns[B.NumInsns];
    const unsigned Shown = std::min(Avail, 15u);
    DecodeResult R = decodeBytes(Page + Off, Shown, Mode, I);
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
      // Page-crossing instruction: fetch the rest from the next page (which may fault)
      // and run it from the uncached scratch block.
      std::memcpy(Buf, Page + Off, Avail);
      unsigned Got2;
      Hpa Pa2;
      VMX_TRY(fetchCode(C, (La + Avail) & (Is64 ? ~uint64_t(0) : 0xffffffffull),
                        Buf + Avail, 15 - Avail, Got2, Pa2));
      Block &Scratch = C.Mmu.scratchBlock();
      Scratch.Key = 0; // never valid: not cached
      Scratch.NumInsns = 1;
      unsigned Total = unsigned(std::min<uint64_t>(Avail + Got2, LimitLeft));
      if (decodeBytes(Buf, Total, Mode, Scratch.Insns[0]) == DecodeResult::NeedMore)
        return C.raiseGp(0);
      Out = &Scratch;
      return Status::Ok;
    }
    ++B.NumInsns;
    Off += I.Len;
    LimitLeft -= I.Len;
    if ((I.Flags & insnflag::EndsBlock) || Off >= kPageSize || LimitLeft == 0)
      break;
  }
  C.Mmu.blockDecoded(Pfn, B.Lines);
  Out = &B;
  return Status::Ok;
}

} // namespace vmxsim
