// The Zydis-based decoder against Capstone, an independent decoder (STYLE 2.8,
// differential tests): over a deterministic random corpus of plausible instructions and
// of raw random bytes in 16-, 32- and 64-bit mode, both must agree on validity and
// length, and on the mnemonic after normalising spelling aliases. Every kind of
// disagreement seen is listed in kKnown with its reason; any other one fails the test.
#include "cpu/decode.h"
#include "tests/support/random.h"

#include <capstone/capstone.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

using namespace vmxsim;

namespace {

using test::SplitMix64;

enum class Kind : uint8_t { ZydisOnly, CapstoneOnly, Length, Mnemonic };
const char *kindName(Kind K) {
  switch (K) {
  case Kind::ZydisOnly: return "ZydisOnly";
  case Kind::CapstoneOnly: return "CapstoneOnly";
  case Kind::Length: return "Length";
  case Kind::Mnemonic: return "Mnemonic";
  }
  return "?";
}

/// A class of disagreement: its kind, the Zydis mnemonic and the (normalised) Capstone
/// mnemonic involved ("" for the decoder that rejected the bytes).
struct Key {
  Kind K;
  std::string Zydis, Capstone;
  std::string Trait; ///< prefix situation that explains many disagreements (see traitOf)
  bool operator<(const Key &O) const {
    return std::tie(K, Zydis, Capstone, Trait) < std::tie(O.K, O.Zydis, O.Capstone, O.Trait);
  }
};

struct Known {
  Kind K;
  const char *Zydis, *Capstone; ///< "*" matches any mnemonic
  const char *Trait;            ///< "*" matches any trait
  const char *Reason;
};

// The known disagreements (Capstone 4.0.2 against Zydis 4.0.0), grouped by cause. Where
// the SDM decides, Zydis follows it and Capstone 4 does not, unless noted.
const char *const kSpelling = "same instruction, different spelling";
const char *const kPrefixOrder =
    "Capstone 4 mishandles operand-size/mandatory prefixes: it drops a 66 that precedes "
    "F2/F3, honours a REX that is not last, or treats 67+REX.W as 66 (SDM Vol. 2A, "
    "Instruction Prefixes; REX Prefixes: a REX not immediately before the opcode is ignored)";
const char *const kNewer = "instruction newer than Capstone 4.0.2 (or AMD/VIA-only) that Zydis decodes";
const char *const kEvex = "AVX-512 (EVEX) form Capstone 4 lacks (no binder: #UD in vmxsim)";
const char *const kReservedField =
    "Capstone 4 accepts an encoding with a missing required prefix or a reserved field value";
const Known kKnown[] = {
    // Prefix situations (see traitOf).
    {Kind::CapstoneOnly, "*", "*", "lock",
     "LOCK on a non-lockable instruction or a register destination is #UD (SDM Vol. 2A, "
     "LOCK); Capstone 4 decodes it"},
    {Kind::CapstoneOnly, "*", "*", "prefix-vex",
     "a 66/F2/F3/REX prefix before VEX/EVEX is #UD (SDM Vol. 2A, VEX and the LOCK, 66H, "
     "F2H, F3H, and REX Prefixes); Capstone 4 decodes it"},
    {Kind::CapstoneOnly, "*", "*", "rep-0f",
     "F2/F3 before a 0F opcode select another instruction; with no such instruction Zydis "
     "rejects the reserved combination, Capstone 4 ignores the prefix"},
    {Kind::CapstoneOnly, "*", "*", "66-0f",
     "66 before a 0F opcode selects another instruction (or none, e.g. 66 0F 77, MMX with "
     "66); Capstone 4 ignores the prefix"},
    {Kind::Mnemonic, "*", "*", "rep-0f",
     "Capstone 4 picks the wrong mandatory prefix: 66 over F2/F3, or none in 16-bit mode "
     "(SDM Vol. 2A, Mandatory Prefixes: F2/F3 take precedence)"},
    {Kind::Mnemonic, "*", "*", "66-0f",
     "Capstone 4 treats a mandatory 66 as an operand-size prefix in 16-bit mode"},
    {Kind::ZydisOnly, "*", "", "rep-0f",
     "valid F2/F3 forms Capstone 4 does not know (POPCNT/LZCNT/TZCNT in 16-bit mode, "
     "CVTDQ2PD, ADDSUBPS, hint NOPs with a prefix, RDSSP, ...)"},
    {Kind::ZydisOnly, "*", "", "66-0f",
     "valid 66 forms Capstone 4 does not know in this mode (CVTTPD2DQ, hint NOPs, ...)"},
    {Kind::Length, "*", "*", "rep-0f", "UD1/UD0 length (below) with a prefix"},
    {Kind::Length, "*", "*", "66-0f", "UD1/UD0 length (below) with a prefix"},
    {Kind::ZydisOnly, "*", "", "lock",
     "hint NOPs, UD0/UD1 and prefetches Capstone 4 lacks, with a LOCK prefix (#UD at run time)"},
    // Spelling aliases.
    {Kind::Mnemonic, "ret", "retf", "*", "far RET: Zydis keeps the mnemonic, Capstone spells retf"},
    {Kind::Mnemonic, "ret", "retfq", "*", "far RET with REX.W"},
    {Kind::Mnemonic, "jmp", "ljmp", "*", "far JMP ptr16:16/32"},
    {Kind::Mnemonic, "call", "lcall", "*", "far CALL ptr16:16/32"},
    {Kind::Mnemonic, "mov", "movabs", "*", "MOV with a 64-bit immediate or moffs64"},
    {Kind::Mnemonic, "fwait", "wait", "*", kSpelling},
    {Kind::Mnemonic, "xlat", "xlatb", "*", kSpelling},
    {Kind::Mnemonic, "shl", "sal", "*", "the /6 alias of SHL in the shift groups (SDM Vol. 2B, SAL/SAR/SHL/SHR)"},
    {Kind::Mnemonic, "pushad", "pushal", "*", kSpelling},
    {Kind::Mnemonic, "popad", "popal", "*", kSpelling},
    {Kind::Mnemonic, "pusha", "pushaw", "*", kSpelling},
    {Kind::Mnemonic, "popa", "popaw", "*", kSpelling},
    {Kind::Mnemonic, "fsetpm287_nop", "fsetpm", "*", kSpelling},
    {Kind::Mnemonic, "xstore", "xstorerng", "*", "VIA PadLock spelling"},
    {Kind::Mnemonic, "pause", "nop", "*", "F3 90 is PAUSE; Capstone 4 prints the NOP"},
    {Kind::Mnemonic, "cmpps", "*", "*", "Capstone spells the imm8 predicate into CMPPS (cmpleps, ...)"},
    {Kind::Mnemonic, "cmppd", "*", "*", "Capstone spells the imm8 predicate into CMPPD"},
    {Kind::Mnemonic, "cmpss", "*", "*", "Capstone spells the imm8 predicate into CMPSS"},
    {Kind::Mnemonic, "cmpsd", "*", "*", "Capstone spells the imm8 predicate into CMPSD"},
    {Kind::Mnemonic, "vcmpps", "*", "*", "Capstone spells the imm8 predicate into VCMPPS"},
    {Kind::Mnemonic, "vcmppd", "*", "*", "Capstone spells the imm8 predicate into VCMPPD"},
    {Kind::Mnemonic, "vcmpss", "*", "*", "Capstone spells the imm8 predicate into VCMPSS"},
    {Kind::Mnemonic, "vcmpsd", "*", "*", "Capstone spells the imm8 predicate into VCMPSD"},
    {Kind::Mnemonic, "pfsqrt", "pfrsqrt", "*", "3DNow! 0F 0F /r 97: Zydis misnames PFRSQRT (3DNow! is not modelled)"},
    {Kind::Mnemonic, "pfcpit1", "pfrcpit1", "*", "3DNow! 0F 0F /r A6: Zydis misnames PFRCPIT1 (not modelled)"},
    // Capstone 4 sizes by the wrong operand or address size.
    {Kind::Mnemonic, "cbw", "cwde", "*", "Capstone 4 ignores the 16-bit default operand size for 98"},
    {Kind::Mnemonic, "cwd", "cdq", "*", "Capstone 4 ignores the 16-bit default operand size for 99"},
    {Kind::Mnemonic, "jecxz", "jcxz", "*", "JECXZ with a 67 prefix in 16-bit mode: Capstone ignores 67"},
    {Kind::Mnemonic, "jecxz", "jrcxz", "*", "67 E3 in 64-bit mode is JECXZ; Capstone ignores 67"},
    // Encodings Capstone 4 decodes with the wrong length.
    {Kind::Length, "ud1", "ud2b", "*", "UD1 (0F B9) has a ModRM byte (SDM Vol. 2B, UD); Capstone 4 decodes none"},
    {Kind::Length, "ud0", "ud0", "*", "UD0 (0F FF) has a ModRM byte on Intel (SDM Vol. 2B, UD); Capstone 4 follows AMD"},
    {Kind::Length, "jmp", "jmp", "*", "66 E9 in 64-bit mode: Intel ignores 66 for near branches (rel32); Capstone uses rel16"},
    {Kind::Length, "call", "call", "*", "66 E8 after F2 (BND): Capstone drops the 66 and reads rel32"},
    {Kind::Length, "push", "push", "*", "66 68 in 64-bit mode pushes imm16; Capstone reads imm32 when 66 precedes F2"},
    {Kind::Length, "ret", "ret", "*", "C2 iw with 67+REX: Capstone 4 misreads the immediate length"},
    // Valid encodings Capstone 4 does not know (ZydisOnly).
    {Kind::ZydisOnly, "nop", "", "*", "0F 18-1F reserved hint NOPs (SDM Vol. 2B, NOP); Capstone 4 knows only some"},
    {Kind::ZydisOnly, "ud0", "", "*", "UD0 with a ModRM and prefixes"},
    {Kind::ZydisOnly, "prefetch", "", "*", "AMD 0F 0D /0,/2-7 PREFETCH aliases"},
    {Kind::ZydisOnly, "prefetchwt1", "", "*", kNewer},
    {Kind::ZydisOnly, "mov", "", "*", "MOV moffs with F2/F3 prefixes (ignored) that Capstone 4 rejects"},
    {Kind::ZydisOnly, "mfence", "", "*", "MFENCE ignores ModRM.rm (0F AE F0-F7); Capstone 4 accepts only F0"},
    {Kind::ZydisOnly, "sfence", "", "*", "SFENCE ignores ModRM.rm (0F AE F8-FF); Capstone 4 accepts only F8"},
    {Kind::ZydisOnly, "lfence", "", "*", "LFENCE ignores ModRM.rm (0F AE E8-EF); Capstone 4 accepts only E8"},
    {Kind::ZydisOnly, "movdiri", "", "*", kNewer},
    {Kind::ZydisOnly, "wrssd", "", "*", kNewer},
    {Kind::ZydisOnly, "invlpgb", "", "*", kNewer},
    {Kind::ZydisOnly, "wrpkru", "", "*", kNewer},
    {Kind::ZydisOnly, "serialize", "", "*", kNewer},
    {Kind::ZydisOnly, "pconfig", "", "*", kNewer},
    {Kind::ZydisOnly, "monitorx", "", "*", kNewer},
    {Kind::ZydisOnly, "mwaitx", "", "*", kNewer},
    {Kind::ZydisOnly, "jknzd", "", "*", "Knights Corner mask branch decoded by Zydis (no binder: #UD in vmxsim)"},
    // Encodings Zydis rejects and Capstone 4 accepts (CapstoneOnly).
    {Kind::CapstoneOnly, "", "mov", "*",
     "MOV to/from CR1, CR5-CR7, CR9-CR15 or DR8-DR15 is #UD (SDM Vol. 2B, MOV—Move to/from Control Registers)"},
    {Kind::CapstoneOnly, "", "nop", "*",
     "MPX 0F 1A/1B forms MPX makes #UD (16-bit addressing, BND4-BND7); Capstone 4 decodes hint NOPs"},
    {Kind::Mnemonic, "bndldx", "nop", "*", "MPX: Capstone 4 decodes 0F 1A as a hint NOP"},
    {Kind::Mnemonic, "bndstx", "nop", "*", "MPX: Capstone 4 decodes 0F 1B as a hint NOP"},
    {Kind::Mnemonic, "cldemote", "nop", "*", "CLDEMOTE (0F 1C /0): Capstone 4 decodes a hint NOP"},
    {Kind::CapstoneOnly, "", "swapgs", "*", "SWAPGS is valid only in 64-bit mode (SDM Vol. 2B, SWAPGS)"},
    // Prefix-order and REX handling errors of Capstone 4 (observed pairs).
    {Kind::Mnemonic, "cmpsw", "cmpsd", "", kPrefixOrder},
    {Kind::Mnemonic, "cvtps2pi", "cvtpd2pi", "", kPrefixOrder},
    {Kind::Mnemonic, "cvttps2pi", "cvttpd2pi", "", kPrefixOrder},
    {Kind::Mnemonic, "insd", "insw", "", kPrefixOrder},
    {Kind::Mnemonic, "insw", "insd", "", kPrefixOrder},
    {Kind::Mnemonic, "iret", "iretd", "", kPrefixOrder},
    {Kind::Mnemonic, "jcxz", "jecxz", "", kPrefixOrder},
    {Kind::Mnemonic, "lodsw", "lodsd", "", kPrefixOrder},
    {Kind::Mnemonic, "maxps", "maxpd", "", kPrefixOrder},
    {Kind::Mnemonic, "minps", "minpd", "", kPrefixOrder},
    {Kind::Mnemonic, "movaps", "movapd", "", kPrefixOrder},
    {Kind::Mnemonic, "movlps", "movlpd", "", kPrefixOrder},
    {Kind::Mnemonic, "movntps", "movntpd", "", kPrefixOrder},
    {Kind::Mnemonic, "movq", "movd", "", "REX.W 0F 6E/7E (MOVQ): Capstone 4 spells movd"},
    {Kind::Mnemonic, "movups", "movupd", "", kPrefixOrder},
    {Kind::Mnemonic, "mulps", "mulpd", "", kPrefixOrder},
    {Kind::Mnemonic, "outsd", "outsw", "", kPrefixOrder},
    {Kind::Mnemonic, "outsw", "outsd", "", kPrefixOrder},
    {Kind::Mnemonic, "pause", "xchg", "", kPrefixOrder},
    {Kind::Mnemonic, "popa", "popal", "", kPrefixOrder},
    {Kind::Mnemonic, "popf", "popfq", "", kPrefixOrder},
    {Kind::Mnemonic, "popfq", "popf", "", kPrefixOrder},
    {Kind::Mnemonic, "pushfq", "pushf", "", kPrefixOrder},
    {Kind::Mnemonic, "scasw", "scasd", "", kPrefixOrder},
    {Kind::Mnemonic, "shufps", "shufpd", "", kPrefixOrder},
    {Kind::Mnemonic, "sqrtps", "sqrtpd", "", kPrefixOrder},
    {Kind::Mnemonic, "subps", "subpd", "", kPrefixOrder},
    // AVX-512 (EVEX) forms Capstone 4 lacks: no binder, #UD in vmxsim.
    {Kind::ZydisOnly, "vaddps", "", "", kEvex},
    {Kind::ZydisOnly, "vpaddsw", "", "", kEvex},
    {Kind::ZydisOnly, "vpalignr", "", "", kEvex},
    {Kind::ZydisOnly, "vpermi2pd", "", "", kEvex},
    {Kind::ZydisOnly, "vpermps", "", "", kEvex},
    {Kind::ZydisOnly, "vshuff64x2", "", "", kEvex},
    {Kind::ZydisOnly, "vshufi64x2", "", "", kEvex},
    // Capstone 4 accepts a VEX/SSE4/PadLock/3DNow! encoding whose required prefix or
    // field is missing or reserved (VEX.L=1 on scalar or 128-bit-only ops, no 66 on SSE4
    // 0F 38/3A, no F3 on PadLock, VEX.W on some forms).
    {Kind::CapstoneOnly, "", "femms", "", kReservedField},
    {Kind::CapstoneOnly, "", "montmul", "", kReservedField},
    {Kind::CapstoneOnly, "", "mpsadbw", "", kReservedField},
    {Kind::CapstoneOnly, "", "pclmulqdq", "", kReservedField},
    {Kind::CapstoneOnly, "", "pcmpestri", "", kReservedField},
    {Kind::CapstoneOnly, "", "pminsb", "", kReservedField},
    {Kind::CapstoneOnly, "", "pmuldq", "", kReservedField},
    {Kind::CapstoneOnly, "", "roundsd", "", kReservedField},
    {Kind::CapstoneOnly, "", "vpermilpd", "", kReservedField},
    {Kind::CapstoneOnly, "", "vpgatherdd", "", kReservedField},
    {Kind::CapstoneOnly, "", "xcryptcbc", "", kReservedField},
    {Kind::CapstoneOnly, "", "xcryptcfb", "", kReservedField},
    {Kind::CapstoneOnly, "", "xcryptofb", "", kReservedField},
    {Kind::CapstoneOnly, "", "xsha1", "", kReservedField},
    {Kind::CapstoneOnly, "", "xsha256", "", kReservedField},
};

bool matches(const Known &E, const Key &K) {
  return E.K == K.K && (std::strcmp(E.Zydis, "*") == 0 || K.Zydis == E.Zydis) &&
         (std::strcmp(E.Capstone, "*") == 0 || K.Capstone == E.Capstone) &&
         (std::strcmp(E.Trait, "*") == 0 || K.Trait == E.Trait);
}

std::string lower(std::string S) {
  for (char &C : S)
    C = char(std::tolower(static_cast<unsigned char>(C)));
  return S;
}

/// Capstone 4 spells prefixes into the mnemonic ("rep stosb", "lock add"); Zydis keeps
/// them as attributes. Condition-code spellings differ too (Zydis jz/jnbe/cmovnl,
/// Capstone je/ja/cmovge): both are mapped to Capstone's.
std::string normaliseCapstone(const char *Mn) {
  std::string S = Mn;
  static const char *Prefixes[] = {"lock ", "rep ", "repe ", "repz ", "repne ", "repnz ",
                                   "xacquire ", "xrelease ", "bnd ", "notrack ", "data16 ",
                                   "addr32 "};
  for (bool Again = true; Again;) {
    Again = false;
    for (const char *P : Prefixes)
      if (S.rfind(P, 0) == 0 && S.size() > std::strlen(P)) {
        S = S.substr(std::strlen(P));
        Again = true;
      }
  }
  return S;
}

std::string normaliseZydis(uint16_t Mn) {
  std::string S = lower(mnemonicName(Mn));
  static const std::pair<const char *, const char *> Cc[] = {
      {"nbe", "a"}, {"nb", "ae"}, {"nz", "ne"}, {"z", "e"}, {"nle", "g"}, {"nl", "ge"}};
  for (const char *Head : {"j", "cmov", "set"}) {
    if (S.rfind(Head, 0) != 0 || S == "jmp" || S.find("cxz") != std::string::npos)
      continue;
    std::string Tail = S.substr(std::strlen(Head));
    for (auto [Z, C] : Cc)
      if (Tail == Z)
        return std::string(Head) + C;
  }
  return S;
}

/// The prefix situation of a byte string, the usual cause of a disagreement: "lock" (an
/// F0 prefix), else "prefix-vex" (66/F2/F3/REX before a VEX/EVEX lead byte), else
/// "rep-0f" (F2/F3 before a 0F-map opcode), else "66-0f" (66 before a
/// 0F-map opcode), else "".
std::string traitOf(const uint8_t *B, bool Is64) {
  bool Lock = false, Rep = false, OpSize = false;
  unsigned N = 0;
  for (; N < 15; ++N) {
    uint8_t X = B[N];
    if (X == 0xf0)
      Lock = true;
    else if (X == 0xf2 || X == 0xf3)
      Rep = true;
    else if (X == 0x66)
      OpSize = true;
    else if (X == 0x67 || X == 0x2e || X == 0x36 || X == 0x3e || X == 0x26 || X == 0x64 ||
             X == 0x65 || (Is64 && (X & 0xf0) == 0x40))
      continue;
    else
      break;
  }
  bool Map0F = N < 15 && B[N] == 0x0f;
  bool Vex = N < 15 && (B[N] == 0xc4 || B[N] == 0xc5 || B[N] == 0x62);
  bool Rex = Is64 && N > 0 && (B[N - 1] & 0xf0) == 0x40;
  if (Lock)
    return "lock";
  if (Vex && (Rep || OpSize || Rex))
    return "prefix-vex";
  if (Rep && Map0F)
    return "rep-0f";
  if (OpSize && Map0F)
    return "66-0f";
  return "";
}

std::string hex(const uint8_t *B, unsigned N) {
  std::string S;
  char Buf[4];
  for (unsigned K = 0; K < N; ++K) {
    std::snprintf(Buf, sizeof(Buf), "%02x", B[K]);
    S += Buf;
    if (K + 1 < N)
      S += ' ';
  }
  return S;
}

/// A plausible instruction: legacy prefixes, REX in 64-bit mode, an opcode from one of
/// the maps (or a VEX/EVEX lead byte), then random ModRM/SIB/displacement/immediate bytes.
void plausible(SplitMix64 &R, bool Is64, uint8_t *B) {
  static const uint8_t Legacy[] = {0x66, 0x67, 0xf2, 0xf3, 0xf0, 0x2e, 0x36, 0x3e,
                                   0x26, 0x64, 0x65};
  unsigned N = 0;
  unsigned NumPrefixes = R.nextBelow(8) < 5 ? 0 : 1 + R.nextBelow(3);
  for (unsigned K = 0; K < NumPrefixes; ++K)
    B[N++] = R.pick(Legacy);
  if (Is64 && R.nextBelow(3) == 0)
    B[N++] = uint8_t(0x40 | R.nextBelow(16));
  switch (R.nextBelow(8)) {
  case 0: case 1: case 2: // one-byte map
    B[N++] = uint8_t(R.nextBelow(256));
    break;
  case 3: case 4: case 5: // 0F map
    B[N++] = 0x0f;
    B[N++] = uint8_t(R.nextBelow(256));
    break;
  case 6: // 0F 38 / 0F 3A
    B[N++] = 0x0f;
    B[N++] = R.nextBelow(2) ? 0x38 : 0x3a;
    B[N++] = uint8_t(R.nextBelow(256));
    break;
  default: { // VEX2 / VEX3 / EVEX
    static const uint8_t Lead[] = {0xc5, 0xc4, 0x62};
    B[N++] = R.pick(Lead);
    break;
  }
  }
  // ModRM: bias towards register forms and simple memory forms.
  while (N < 15)
    B[N++] = uint8_t(R.next());
}

struct Corpus {
  std::map<Key, std::pair<unsigned, std::string>> Seen; ///< count, first example
  unsigned Total = 0, BothValid = 0, BothInvalid = 0;
};

void compareMode(csh Cs, CodeMode Mode, const char *ModeName, uint64_t Seed, unsigned Count,
                 Corpus &Out) {
  SplitMix64 R{Seed};
  cs_insn *Insn = cs_malloc(Cs);
  for (unsigned It = 0; It < Count; ++It) {
    uint8_t B[15];
    if (It % 4 == 3) {
      for (uint8_t &X : B)
        X = uint8_t(R.next());
    } else {
      plausible(R, Mode == CodeMode::Long64, B);
    }
    unsigned ZLen = 0;
    uint16_t ZMn = 0;
    bool ZOk = decodeLength(B, 15, Mode, ZLen, ZMn);
    const uint8_t *Code = B;
    size_t Size = 15;
    uint64_t Addr = 0x1000;
    bool COk = cs_disasm_iter(Cs, &Code, &Size, &Addr, Insn);
    ++Out.Total;
    Key K;
    const std::string Trait = traitOf(B, Mode == CodeMode::Long64);
    if (!ZOk && !COk) {
      ++Out.BothInvalid;
      continue;
    }
    if (ZOk && COk) {
      ++Out.BothValid;
      std::string Zn = normaliseZydis(ZMn), Cn = normaliseCapstone(Insn->mnemonic);
      if (ZLen != Insn->size)
        K = {Kind::Length, Zn, Cn, Trait};
      else if (Zn != Cn)
        K = {Kind::Mnemonic, Zn, Cn, Trait};
      else
        continue;
    } else if (ZOk) {
      K = {Kind::ZydisOnly, normaliseZydis(ZMn), "", Trait};
    } else {
      K = {Kind::CapstoneOnly, "", normaliseCapstone(Insn->mnemonic), Trait};
    }
    auto &Slot = Out.Seen[K];
    if (Slot.first++ == 0)
      Slot.second = std::string(ModeName) + ": " + hex(B, 15) + " (zydis len " +
                    std::to_string(ZOk ? ZLen : 0) + ", capstone len " +
                    std::to_string(COk ? Insn->size : 0) + ")";
  }
  cs_free(Insn, 1);
}

TEST(InstructionFormat, ZydisAgreesWithCapstoneOnLengthAndValidity) {
  struct ModeCase {
    CodeMode Mode;
    cs_mode Cs;
    const char *Name;
  };
  const ModeCase Modes[] = {{CodeMode::Prot16, CS_MODE_16, "16-bit"},
                            {CodeMode::Prot32, CS_MODE_32, "32-bit"},
                            {CodeMode::Long64, CS_MODE_64, "64-bit"}};
  Corpus All;
  uint64_t Seed = 0xdec0de;
  for (const ModeCase &M : Modes) {
    csh Cs;
    ASSERT_EQ(cs_open(CS_ARCH_X86, M.Cs, &Cs), CS_ERR_OK);
    compareMode(Cs, M.Mode, M.Name, Seed++, 100000, All);
    cs_close(&Cs);
  }

  unsigned Disagreements = 0, Unknown = 0;
  std::map<const Known *, unsigned> Hits;
  for (const auto &[K, Info] : All.Seen) {
    Disagreements += Info.first;
    const Known *Match = nullptr;
    for (const Known &E : kKnown)
      if (matches(E, K)) {
        Match = &E;
        break;
      }
    if (Match) {
      Hits[Match] += Info.first;
      continue;
    }
    ++Unknown;
    ADD_FAILURE() << "new disagreement " << kindName(K.K) << " zydis '" << K.Zydis
                  << "' capstone '" << K.Capstone << "' trait '" << K.Trait << "' x" << Info.first << ", e.g. "
                  << Info.second;
  }
  std::printf("decoder cross-check: %u byte strings, %u both valid, %u both invalid, %u "
              "disagreements in %zu classes (%u unexplained)\n",
              All.Total, All.BothValid, All.BothInvalid, Disagreements, All.Seen.size(),
              Unknown);
  for (const Known &E : kKnown)
    if (Hits.count(&E))
      std::printf("  %-12s %-14s %-14s x%-6u %s\n", kindName(E.K), E.Zydis, E.Capstone,
                  Hits[&E], E.Reason);
}

TEST(InstructionFormat, DecodeLengthIndependentOfBinders) {
  // A valid encoding vmxsim does not execute (CPUID, bound elsewhere or not) still has a
  // Zydis length; an invalid one (0F 0B is UD2, valid; 0F 04 is invalid) does not.
  const uint8_t Ud2[] = {0x0f, 0x0b}, Bad[] = {0x0f, 0x04, 0, 0};
  unsigned Len = 0;
  uint16_t Mn = 0;
  EXPECT_TRUE(decodeLength(Ud2, sizeof(Ud2), CodeMode::Long64, Len, Mn));
  EXPECT_EQ(Len, 2u);
  EXPECT_STREQ(mnemonicName(Mn), "ud2");
  EXPECT_FALSE(decodeLength(Bad, sizeof(Bad), CodeMode::Long64, Len, Mn));
}

} // namespace
