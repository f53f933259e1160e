// SSE/SSE2 instructions checked against the host processor (STYLE 2.8, differential
// tests): each form runs natively and in the emulator from the same deterministic random
// XMM, GPR and memory state; all sixteen XMM registers, the GPRs the snippet can touch and
// the memory around the operand must match exactly. One table row per encoding; each row
// yields a register form and/or a memory form ([rsi]) with random register numbers
// (exercising REX.R/REX.B) and random immediates.
#include "tests/cpu/sse_inputs.h"
#include "tests/cpu/sse_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

enum class Kind : uint8_t {
  Xmm,       ///< an XMM register
  Gpr,       ///< one of EAX/ECX/EDX/EBX (RAX.. with REX.W)
  Mem,       ///< [rsi]
  XmmOrMem,  ///< both forms are generated
  GprOrMem,
  Digit,     ///< ModRM.reg is an opcode extension (Row::Digit)
};

struct Row {
  const char *Name;
  uint8_t Prefix;            ///< mandatory prefix: 0, 0x66, 0xf2, 0xf3
  std::vector<uint8_t> Op;   ///< opcode bytes after 0F
  Kind Reg, Rm;
  bool Imm = false;
  bool Aligned = false;      ///< memory operand must be 16-byte aligned
  bool RexW = false;
  uint8_t Digit = 0;
  bool CountSource = false;  ///< the source is a shift count: keep it mostly small
};

// The SSE/SSE2 encodings compilers emit (SDM Vol. 2, opcode column of each page).
const std::vector<Row> &rows() {
  static const std::vector<Row> R = {
      // Moves.
      {"MOVAPS load", 0, {0x28}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"MOVAPS store", 0, {0x29}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"MOVAPD load", 0x66, {0x28}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"MOVAPD store", 0x66, {0x29}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"MOVDQA load", 0x66, {0x6f}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"MOVDQA store", 0x66, {0x7f}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"MOVUPS load", 0, {0x10}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVUPS store", 0, {0x11}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVUPD load", 0x66, {0x10}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVUPD store", 0x66, {0x11}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVDQU load", 0xf3, {0x6f}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVDQU store", 0xf3, {0x7f}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVNTDQ", 0x66, {0xe7}, Kind::Xmm, Kind::Mem, false, true},
      {"MOVNTPS", 0, {0x2b}, Kind::Xmm, Kind::Mem, false, true},
      {"MOVNTPD", 0x66, {0x2b}, Kind::Xmm, Kind::Mem, false, true},
      {"MOVNTI m32", 0, {0xc3}, Kind::Gpr, Kind::Mem},
      {"MOVNTI m64", 0, {0xc3}, Kind::Gpr, Kind::Mem, false, false, true},
      {"MOVD xmm, r/m32", 0x66, {0x6e}, Kind::Xmm, Kind::GprOrMem},
      {"MOVD r/m32, xmm", 0x66, {0x7e}, Kind::Xmm, Kind::GprOrMem},
      {"MOVQ xmm, r/m64", 0x66, {0x6e}, Kind::Xmm, Kind::GprOrMem, false, false, true},
      {"MOVQ r/m64, xmm", 0x66, {0x7e}, Kind::Xmm, Kind::GprOrMem, false, false, true},
      {"MOVQ xmm, xmm/m64", 0xf3, {0x7e}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVQ xmm/m64, xmm", 0x66, {0xd6}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVSS load", 0xf3, {0x10}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVSS store", 0xf3, {0x11}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVSD load", 0xf2, {0x10}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVSD store", 0xf2, {0x11}, Kind::Xmm, Kind::XmmOrMem},
      {"MOVLPS load", 0, {0x12}, Kind::Xmm, Kind::Mem},
      {"MOVHLPS", 0, {0x12}, Kind::Xmm, Kind::Xmm},
      {"MOVLPS store", 0, {0x13}, Kind::Xmm, Kind::Mem},
      {"MOVHPS load", 0, {0x16}, Kind::Xmm, Kind::Mem},
      {"MOVLHPS", 0, {0x16}, Kind::Xmm, Kind::Xmm},
      {"MOVHPS store", 0, {0x17}, Kind::Xmm, Kind::Mem},
      {"MOVLPD load", 0x66, {0x12}, Kind::Xmm, Kind::Mem},
      {"MOVLPD store", 0x66, {0x13}, Kind::Xmm, Kind::Mem},
      {"MOVHPD load", 0x66, {0x16}, Kind::Xmm, Kind::Mem},
      {"MOVHPD store", 0x66, {0x17}, Kind::Xmm, Kind::Mem},
      {"PMOVMSKB", 0x66, {0xd7}, Kind::Gpr, Kind::Xmm},
      {"PMOVMSKB r64", 0x66, {0xd7}, Kind::Gpr, Kind::Xmm, false, false, true},
      {"MOVMSKPS", 0, {0x50}, Kind::Gpr, Kind::Xmm},
      {"MOVMSKPD", 0x66, {0x50}, Kind::Gpr, Kind::Xmm},
      {"PEXTRW r32", 0x66, {0xc5}, Kind::Gpr, Kind::Xmm, true},
      {"PEXTRW r/m16 (SSE4.1)", 0x66, {0x3a, 0x15}, Kind::Xmm, Kind::GprOrMem, true},
      {"PINSRW", 0x66, {0xc4}, Kind::Xmm, Kind::GprOrMem, true},
      // Bitwise.
      {"PAND", 0x66, {0xdb}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PANDN", 0x66, {0xdf}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"POR", 0x66, {0xeb}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PXOR", 0x66, {0xef}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"ANDPS", 0, {0x54}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"ANDPD", 0x66, {0x54}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"ANDNPS", 0, {0x55}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"ANDNPD", 0x66, {0x55}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"ORPS", 0, {0x56}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"ORPD", 0x66, {0x56}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"XORPS", 0, {0x57}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"XORPD", 0x66, {0x57}, Kind::Xmm, Kind::XmmOrMem, false, true},
      // Add and subtract.
      {"PADDB", 0x66, {0xfc}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PADDW", 0x66, {0xfd}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PADDD", 0x66, {0xfe}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PADDQ", 0x66, {0xd4}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PSUBB", 0x66, {0xf8}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PSUBW", 0x66, {0xf9}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PSUBD", 0x66, {0xfa}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PSUBQ", 0x66, {0xfb}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PADDSB", 0x66, {0xec}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PADDSW", 0x66, {0xed}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PADDUSB", 0x66, {0xdc}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PADDUSW", 0x66, {0xdd}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PSUBSB", 0x66, {0xe8}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PSUBSW", 0x66, {0xe9}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PSUBUSB", 0x66, {0xd8}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PSUBUSW", 0x66, {0xd9}, Kind::Xmm, Kind::XmmOrMem, false, true},
      // Compare, min/max.
      {"PCMPEQB", 0x66, {0x74}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PCMPEQW", 0x66, {0x75}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PCMPEQD", 0x66, {0x76}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PCMPGTB", 0x66, {0x64}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PCMPGTW", 0x66, {0x65}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PCMPGTD", 0x66, {0x66}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PMINUB", 0x66, {0xda}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PMAXUB", 0x66, {0xde}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PMINSW", 0x66, {0xea}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PMAXSW", 0x66, {0xee}, Kind::Xmm, Kind::XmmOrMem, false, true},
      // Multiply, average, sum of absolute differences.
      {"PMULLW", 0x66, {0xd5}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PMULHW", 0x66, {0xe5}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PMULHUW", 0x66, {0xe4}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PMULUDQ", 0x66, {0xf4}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PMADDWD", 0x66, {0xf5}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PAVGB", 0x66, {0xe0}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PAVGW", 0x66, {0xe3}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PSADBW", 0x66, {0xf6}, Kind::Xmm, Kind::XmmOrMem, false, true},
      // Shuffles.
      {"PSHUFD", 0x66, {0x70}, Kind::Xmm, Kind::XmmOrMem, true, true},
      {"PSHUFLW", 0xf2, {0x70}, Kind::Xmm, Kind::XmmOrMem, true, true},
      {"PSHUFHW", 0xf3, {0x70}, Kind::Xmm, Kind::XmmOrMem, true, true},
      {"SHUFPS", 0, {0xc6}, Kind::Xmm, Kind::XmmOrMem, true, true},
      {"SHUFPD", 0x66, {0xc6}, Kind::Xmm, Kind::XmmOrMem, true, true},
      // Unpacks and packs.
      {"PUNPCKLBW", 0x66, {0x60}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PUNPCKLWD", 0x66, {0x61}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PUNPCKLDQ", 0x66, {0x62}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PUNPCKLQDQ", 0x66, {0x6c}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PUNPCKHBW", 0x66, {0x68}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PUNPCKHWD", 0x66, {0x69}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PUNPCKHDQ", 0x66, {0x6a}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PUNPCKHQDQ", 0x66, {0x6d}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"UNPCKLPS", 0, {0x14}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"UNPCKHPS", 0, {0x15}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"UNPCKLPD", 0x66, {0x14}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"UNPCKHPD", 0x66, {0x15}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PACKSSWB", 0x66, {0x63}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PACKSSDW", 0x66, {0x6b}, Kind::Xmm, Kind::XmmOrMem, false, true},
      {"PACKUSWB", 0x66, {0x67}, Kind::Xmm, Kind::XmmOrMem, false, true},
      // Shifts by an XMM/m128 count.
      {"PSRLW xmm", 0x66, {0xd1}, Kind::Xmm, Kind::XmmOrMem, false, true, false, 0, true},
      {"PSRLD xmm", 0x66, {0xd2}, Kind::Xmm, Kind::XmmOrMem, false, true, false, 0, true},
      {"PSRLQ xmm", 0x66, {0xd3}, Kind::Xmm, Kind::XmmOrMem, false, true, false, 0, true},
      {"PSRAW xmm", 0x66, {0xe1}, Kind::Xmm, Kind::XmmOrMem, false, true, false, 0, true},
      {"PSRAD xmm", 0x66, {0xe2}, Kind::Xmm, Kind::XmmOrMem, false, true, false, 0, true},
      {"PSLLW xmm", 0x66, {0xf1}, Kind::Xmm, Kind::XmmOrMem, false, true, false, 0, true},
      {"PSLLD xmm", 0x66, {0xf2}, Kind::Xmm, Kind::XmmOrMem, false, true, false, 0, true},
      {"PSLLQ xmm", 0x66, {0xf3}, Kind::Xmm, Kind::XmmOrMem, false, true, false, 0, true},
      // Shifts by imm8 (opcode-extension groups 12, 13, 14).
      {"PSRLW imm", 0x66, {0x71}, Kind::Digit, Kind::Xmm, true, false, false, 2},
      {"PSRAW imm", 0x66, {0x71}, Kind::Digit, Kind::Xmm, true, false, false, 4},
      {"PSLLW imm", 0x66, {0x71}, Kind::Digit, Kind::Xmm, true, false, false, 6},
      {"PSRLD imm", 0x66, {0x72}, Kind::Digit, Kind::Xmm, true, false, false, 2},
      {"PSRAD imm", 0x66, {0x72}, Kind::Digit, Kind::Xmm, true, false, false, 4},
      {"PSLLD imm", 0x66, {0x72}, Kind::Digit, Kind::Xmm, true, false, false, 6},
      {"PSRLQ imm", 0x66, {0x73}, Kind::Digit, Kind::Xmm, true, false, false, 2},
      {"PSRLDQ imm", 0x66, {0x73}, Kind::Digit, Kind::Xmm, true, false, false, 3},
      {"PSLLQ imm", 0x66, {0x73}, Kind::Digit, Kind::Xmm, true, false, false, 6},
      {"PSLLDQ imm", 0x66, {0x73}, Kind::Digit, Kind::Xmm, true, false, false, 7},
  };
  return R;
}

constexpr unsigned kIterations = 1500;
constexpr unsigned kMemBytes = 64;

/// Shift counts: mostly below 70 so every lane width sees in-range and saturating counts.
uint64_t shiftCount(SplitMix64 &Rng) {
  return Rng.nextBelow(4) ? Rng.nextBelow(70) : Rng.next();
}

using Form = OracleForm<Row>;

std::vector<Form> allForms() {
  std::vector<Form> F;
  for (const Row &R : rows()) {
    bool Mem = R.Rm == Kind::Mem || R.Rm == Kind::XmmOrMem || R.Rm == Kind::GprOrMem;
    bool Reg = R.Rm != Kind::Mem;
    if (Reg)
      F.push_back({&R, false});
    if (Mem)
      F.push_back({&R, true});
  }
  return F;
}

class SseOracle : public ::testing::TestWithParam<Form> {};

TEST_P(SseOracle, MatchesHostOnRandomInputs) {
  const Row &R = *GetParam().R;
  const bool MemForm = GetParam().MemForm;
  NativeCode Native;
  ASSERT_TRUE(Native.valid());
  TestMachine M;
  M.setupLongMode();
  alignas(64) uint8_t HostMem[kMemBytes];

  SplitMix64 Rng(0x55e0 ^ std::hash<std::string>{}(oracleFormName(R.Name, MemForm)));
  auto pickReg = [&](Kind K) -> unsigned {
    if (K == Kind::Gpr || K == Kind::GprOrMem)
      return Rng.nextBelow(4); // EAX, ECX, EDX, EBX
    if (K == Kind::Digit)
      return R.Digit;
    return Rng.nextBelow(16);
  };
  unsigned Failures = 0;
  for (unsigned It = 0; It < kIterations && Failures < 5; ++It) {
    unsigned RegNo = pickReg(R.Reg);
    Kind RmKind = R.Rm == Kind::XmmOrMem ? Kind::Xmm : R.Rm == Kind::GprOrMem ? Kind::Gpr : R.Rm;
    unsigned RmNo = MemForm ? 6 : pickReg(RmKind);
    uint8_t Imm = uint8_t(
        Rng.nextBelow(4) ? Rng.nextBelow(R.Op[0] >= 0x71 && R.Op[0] <= 0x73 ? 80 : 256) : Rng.next());
    std::vector<uint8_t> Code =
        encodeLegacySse(R.Prefix, R.Op, R.RexW, R.Imm, MemForm, RegNo, RmNo, Imm);

    NativeRegs In;
    for (Xmm &X : In.X)
      X = Xmm{interesting(Rng), interesting(Rng)};
    if (R.CountSource) {
      for (Xmm &X : In.X)
        if (Rng.nextBelow(4))
          X.Lo = shiftCount(Rng);
    }
    In.Rax = interesting(Rng);
    In.Rcx = interesting(Rng);
    In.Rdx = interesting(Rng);
    In.Rbx = interesting(Rng);
    unsigned Off = R.Aligned ? 16 * Rng.nextBelow(3) : Rng.nextBelow(kMemBytes - 16 + 1);
    uint8_t MemIn[kMemBytes];
    for (unsigned K = 0; K < kMemBytes; K += 8) {
      uint64_t V = interesting(Rng);
      std::memcpy(MemIn + K, &V, 8);
    }
    if (R.CountSource && Rng.nextBelow(4)) {
      uint64_t C = shiftCount(Rng);
      std::memcpy(MemIn + Off, &C, 8);
    }

    // Host.
    NativeRegs Host = In;
    std::memcpy(HostMem, MemIn, kMemBytes);
    Host.Rsi = reinterpret_cast<uint64_t>(HostMem + Off);
    Native.set(Code);
    Native.run(Host);

    // Emulator.
    std::vector<uint8_t> EmuCode = Code;
    EmuCode.push_back(0xf4); // hlt
    M.loadCode(EmuCode);
    loadOracleInput(M, In, Off, MemIn, kMemBytes);
    StopReason Why = M.run(10);

    std::string Where = std::string(R.Name) + (MemForm ? " [rsi]" : "") + " iteration " +
                        std::to_string(It) + " reg " + std::to_string(RegNo) + " rm " +
                        std::to_string(RmNo) + " imm " + std::to_string(Imm);
    if (Why != StopReason::Halted || M.S.Rip != kCodeBase + EmuCode.size()) {
      ADD_FAILURE() << Where << ": emulator stopped with " << int(Why) << " at RIP 0x"
                    << std::hex << M.S.Rip << " pending vector " << std::dec
                    << int(M.Cpu_.Pending.Vector);
      ++Failures;
      continue;
    }
    bool Ok = sameOracleRegs(M, Host, Where);
    uint8_t EmuMem[kMemBytes];
    M.Mem.copyOut(Hpa(kDataBase), EmuMem, kMemBytes);
    if (std::memcmp(EmuMem, HostMem, kMemBytes) != 0) {
      ADD_FAILURE() << Where << ": memory differs";
      Ok = false;
    }
    Failures += !Ok;
  }
}

INSTANTIATE_TEST_SUITE_P(ProgrammingWithSse2, SseOracle, ::testing::ValuesIn(allForms()),
                         OracleFormName());

} // namespace
