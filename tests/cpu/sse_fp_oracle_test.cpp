// SSE/SSE2 floating-point instructions checked against the host processor (STYLE 2.8,
// differential tests). Every form runs natively and in the emulator from the same
// deterministic random state: XMM lanes biased towards special values (±0, ±inf, QNaN,
// SNaN, denormals, extreme exponents, integer-conversion boundaries), under every
// rounding mode with FTZ and DAZ on and off, starting from random sticky flags. All XMM
// registers, the GPRs, MXCSR and (for COMIS/UCOMIS) the arithmetic flags must match
// exactly. A second suite unmasks random exceptions and checks #XM delivery against the
// host's SIGFPE: same flags, destination untouched.
#include "tests/cpu/sse_inputs.h"
#include "tests/cpu/sse_test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

enum class Kind : uint8_t { Xmm, Gpr, XmmOrMem, GprOrMem };

struct Row {
  const char *Name;
  uint8_t Prefix;  ///< mandatory prefix: 0, 0x66, 0xf2, 0xf3
  uint8_t Op;      ///< opcode byte after 0F
  Kind Reg, Rm;
  Elem E;
  bool Imm = false;
  bool Aligned = false; ///< the memory form takes an aligned m128
  bool RexW = false;
  bool Flags = false;   ///< writes ZF/PF/CF (COMIS/UCOMIS)
};

constexpr Kind X = Kind::Xmm, XM = Kind::XmmOrMem, G = Kind::Gpr, GM = Kind::GprOrMem;
constexpr Elem F32 = Elem::F32, F64 = Elem::F64, I32 = Elem::I32;

// SDM Vol. 2, opcode column of each instruction page.
const std::vector<Row> &rows() {
  static const std::vector<Row> R = {
#define VMX_ARITH(Mn, Op)                                                                 \
  {Mn "PS", 0, Op, X, XM, F32, false, true}, {Mn "PD", 0x66, Op, X, XM, F64, false, true},  \
      {Mn "SS", 0xf3, Op, X, XM, F32}, {Mn "SD", 0xf2, Op, X, XM, F64}
      VMX_ARITH("ADD", 0x58), VMX_ARITH("MUL", 0x59), VMX_ARITH("SUB", 0x5c),
      VMX_ARITH("MIN", 0x5d), VMX_ARITH("DIV", 0x5e), VMX_ARITH("MAX", 0x5f),
      VMX_ARITH("SQRT", 0x51),
#undef VMX_ARITH
      {"CMPPS", 0, 0xc2, X, XM, F32, true, true},
      {"CMPPD", 0x66, 0xc2, X, XM, F64, true, true},
      {"CMPSS", 0xf3, 0xc2, X, XM, F32, true},
      {"CMPSD", 0xf2, 0xc2, X, XM, F64, true},
      {"UCOMISS", 0, 0x2e, X, XM, F32, false, false, false, true},
      {"UCOMISD", 0x66, 0x2e, X, XM, F64, false, false, false, true},
      {"COMISS", 0, 0x2f, X, XM, F32, false, false, false, true},
      {"COMISD", 0x66, 0x2f, X, XM, F64, false, false, false, true},
      {"CVTSI2SS r32", 0xf3, 0x2a, X, GM, I32},
      {"CVTSI2SS r64", 0xf3, 0x2a, X, GM, I32, false, false, true},
      {"CVTSI2SD r32", 0xf2, 0x2a, X, GM, I32},
      {"CVTSI2SD r64", 0xf2, 0x2a, X, GM, I32, false, false, true},
      {"CVTTSS2SI r32", 0xf3, 0x2c, G, XM, F32},
      {"CVTTSS2SI r64", 0xf3, 0x2c, G, XM, F32, false, false, true},
      {"CVTTSD2SI r32", 0xf2, 0x2c, G, XM, F64},
      {"CVTTSD2SI r64", 0xf2, 0x2c, G, XM, F64, false, false, true},
      {"CVTSS2SI r32", 0xf3, 0x2d, G, XM, F32},
      {"CVTSS2SI r64", 0xf3, 0x2d, G, XM, F32, false, false, true},
      {"CVTSD2SI r32", 0xf2, 0x2d, G, XM, F64},
      {"CVTSD2SI r64", 0xf2, 0x2d, G, XM, F64, false, false, true},
      {"CVTPS2PD", 0, 0x5a, X, XM, F32},
      {"CVTPD2PS", 0x66, 0x5a, X, XM, F64, false, true},
      {"CVTSS2SD", 0xf3, 0x5a, X, XM, F32},
      {"CVTSD2SS", 0xf2, 0x5a, X, XM, F64},
      {"CVTDQ2PS", 0, 0x5b, X, XM, I32, false, true},
      {"CVTPS2DQ", 0x66, 0x5b, X, XM, F32, false, true},
      {"CVTTPS2DQ", 0xf3, 0x5b, X, XM, F32, false, true},
      {"CVTTPD2DQ", 0x66, 0xe6, X, XM, F64, false, true},
      {"CVTPD2DQ", 0xf2, 0xe6, X, XM, F64, false, true},
      {"CVTDQ2PD", 0xf3, 0xe6, X, XM, I32},
  };
  return R;
}

// --- forms and encoding -----------------------------------------------------------------

using Form = OracleForm<Row>;

std::vector<Form> allForms() {
  std::vector<Form> F;
  for (const Row &R : rows()) {
    F.push_back({&R, false});
    F.push_back({&R, true});
  }
  return F;
}

constexpr unsigned kMemBytes = 64;

/// One randomly generated case: code, registers, memory, MXCSR.
struct Case {
  std::vector<uint8_t> Code;
  NativeFpState In;
  unsigned Off;
  uint8_t Mem[kMemBytes];
  std::string Where;
};

Case makeCase(const Row &R, bool MemForm, SplitMix64 &Rng, uint32_t Unmask, unsigned It) {
  Case K;
  auto pick = [&](Kind Kd) { return Kd == Kind::Gpr || Kd == Kind::GprOrMem ? Rng.nextBelow(4) : Rng.nextBelow(16); };
  unsigned RegNo = pick(R.Reg);
  unsigned RmNo = MemForm ? 6 : pick(R.Rm);
  uint8_t Imm = uint8_t(Rng.nextBelow(4) ? Rng.nextBelow(8) : Rng.next());
  K.Code = encodeLegacySse(R.Prefix, {&R.Op, 1}, R.RexW, R.Imm, MemForm, RegNo, RmNo, Imm);
  for (Xmm &V : K.In.R.X)
    V = Xmm{randomLanes(Rng, R.E), randomLanes(Rng, R.E)};
  // The destination of a scalar or binary operation is an input too; sometimes make the
  // two sources equal so that compares see equal operands.
  if (!MemForm && Rng.nextBelow(8) == 0 && R.Reg == Kind::Xmm && R.Rm == Kind::XmmOrMem)
    K.In.R.X[RmNo] = K.In.R.X[RegNo];
  K.In.R.Rax = randomInt(Rng);
  K.In.R.Rcx = randomInt(Rng);
  K.In.R.Rdx = randomInt(Rng);
  K.In.R.Rbx = randomInt(Rng);
  K.In.Mxcsr = randomMxcsr(Rng, Unmask);
  K.In.Rflags = 0;
  K.Off = R.Aligned ? 16 * Rng.nextBelow(3) : Rng.nextBelow(kMemBytes - 16 + 1);
  for (unsigned B = 0; B < kMemBytes; B += 8) {
    uint64_t V = R.Rm == Kind::GprOrMem ? randomInt(Rng) : randomLanes(Rng, R.E);
    std::memcpy(K.Mem + B, &V, 8);
  }
  char Buf[160];
  std::snprintf(Buf, sizeof(Buf), "%s%s iteration %u reg %u rm %u imm %u MXCSR %#x", R.Name,
                MemForm ? " [rsi]" : "", It, RegNo, RmNo, Imm, K.In.Mxcsr);
  K.Where = Buf;
  return K;
}

/// Runs the case in the emulator; true if it stopped on #XM/#UD (Vector set).
struct EmuResult {
  StopReason Why;
  int Vector;
};
EmuResult runEmu(TestMachine &M, const Case &K) {
  std::vector<uint8_t> Code = K.Code;
  Code.push_back(0xf4); // hlt
  M.loadCode(Code);
  loadOracleInput(M, K.In.R, K.Off, K.Mem, kMemBytes);
  M.S.Mxcsr = K.In.Mxcsr;
  M.S.Rflags = rflags::Fixed1;
  StopReason Why = M.run(10);
  return {Why, faultVector(M, Why)};
}

/// Compares XMM, GPRs, MXCSR and (if Flags) the arithmetic flags; returns false on a
/// mismatch after reporting it.
bool sameState(TestMachine &M, const NativeFpState &Host, const Case &K, bool Flags) {
  bool Ok = sameOracleRegs(M, Host.R, K.Where);
  if (M.S.Mxcsr != Host.Mxcsr) {
    ADD_FAILURE() << K.Where << ": MXCSR emulator 0x" << std::hex << M.S.Mxcsr << " host 0x"
                  << Host.Mxcsr;
    Ok = false;
  }
  if (Flags && (M.S.Rflags & rflags::Arith) != (Host.Rflags & rflags::Arith)) {
    ADD_FAILURE() << K.Where << ": RFLAGS emulator 0x" << std::hex
                  << (M.S.Rflags & rflags::Arith) << " host 0x" << (Host.Rflags & rflags::Arith);
    Ok = false;
  }
  return Ok;
}

class SseFpOracle : public ::testing::TestWithParam<Form> {};

/// All exceptions masked: results, flags and MXCSR match the host.
TEST_P(SseFpOracle, MatchesHostOnRandomInputs) {
  const Row &R = *GetParam().R;
  const bool MemForm = GetParam().MemForm;
  NativeCode Native;
  ASSERT_TRUE(Native.valid());
  TestMachine M;
  M.setupLongMode();
  alignas(64) uint8_t HostMem[kMemBytes];
  SplitMix64 Rng(0xf10a7 ^ std::hash<std::string>{}(oracleFormName(R.Name, MemForm)));
  unsigned Failures = 0;
  for (unsigned It = 0; It < 3000 && Failures < 5; ++It) {
    Case K = makeCase(R, MemForm, Rng, 0, It);
    NativeFpState Host = K.In;
    std::memcpy(HostMem, K.Mem, kMemBytes);
    Host.R.Rsi = reinterpret_cast<uint64_t>(HostMem + K.Off);
    Native.set(K.Code);
    ASSERT_FALSE(runNativeFp(Native, Host)) << K.Where << ": host trapped";
    EmuResult E = runEmu(M, K);
    if (E.Why != StopReason::Halted || M.S.Rip != kCodeBase + K.Code.size() + 1) {
      ADD_FAILURE() << K.Where << ": emulator stopped with " << int(E.Why) << " vector "
                    << E.Vector;
      ++Failures;
      continue;
    }
    Failures += !sameState(M, Host, K, R.Flags);
  }
}

/// Random exceptions unmasked: when the host raises #XM (SIGFPE) the emulator raises #XM
/// with the same MXCSR and untouched registers; otherwise both complete identically.
TEST_P(SseFpOracle, UnmaskedExceptionsMatchHost) {
  const Row &R = *GetParam().R;
  const bool MemForm = GetParam().MemForm;
  NativeCode Native;
  ASSERT_TRUE(Native.valid());
  TestMachine M;
  M.setupLongMode();
  installFaultIdt(M);
  alignas(64) uint8_t HostMem[kMemBytes];
  SplitMix64 Rng(0x0e7c ^ std::hash<std::string>{}(oracleFormName(R.Name, MemForm)));
  unsigned Failures = 0, Traps = 0;
  for (unsigned It = 0; It < 1500 && Failures < 5; ++It) {
    Case K = makeCase(R, MemForm, Rng, uint32_t(Rng.next()) & 0x3f, It);
    NativeFpState Host = K.In;
    std::memcpy(HostMem, K.Mem, kMemBytes);
    Host.R.Rsi = reinterpret_cast<uint64_t>(HostMem + K.Off);
    Native.set(K.Code);
    const bool Trapped = runNativeFp(Native, Host);
    M.S.Gpr[RSP] = 0x80000;
    EmuResult E = runEmu(M, K);
    if (Trapped) {
      ++Traps;
      if (E.Vector != vec::XM) {
        ADD_FAILURE() << K.Where << ": host raised #XM, emulator stopped with " << int(E.Why)
                      << " vector " << E.Vector;
        ++Failures;
        continue;
      }
    } else if (E.Why != StopReason::Halted || M.S.Rip != kCodeBase + K.Code.size() + 1) {
      ADD_FAILURE() << K.Where << ": host completed, emulator stopped with " << int(E.Why)
                    << " vector " << E.Vector;
      ++Failures;
      continue;
    }
    // On #XM the host's registers are those at the faulting instruction: the
    // destination must be unchanged in both. RFLAGS is only compared on completion.
    Failures += !sameState(M, Host, K, R.Flags && !Trapped);
  }
  RecordProperty("Traps", int(Traps));
}

INSTANTIATE_TEST_SUITE_P(ProgrammingWithSse2, SseFpOracle, ::testing::ValuesIn(allForms()),
                         OracleFormName());

// --- fixed cases from the SDM, independent of the host --------------------------------

/// A long-mode machine with the fault-catching IDT: XMM0 = 1.0f, XMM1 = 0.0f, RSI at an
/// aligned buffer, then Code + HLT runs.
StopReason runFixed(TestMachine &M, std::vector<uint8_t> Code, uint32_t Mxcsr) {
  M.setupLongMode();
  installFaultIdt(M);
  M.S.Gpr[RSP] = 0x80000;
  M.S.Gpr[RSI] = kDataBase;
  M.S.XmmReg[0] = Xmm{0x3f800000, 0x1234};
  M.S.XmmReg[1] = Xmm{0, 0};
  M.S.Mxcsr = Mxcsr;
  Code.push_back(0xf4);
  M.loadCode(Code);
  M.Cpu_.Activity = ActivityState::Active;
  return M.run(10);
}
const std::vector<uint8_t> DivssXmm0Xmm1 = {0xf3, 0x0f, 0x5e, 0xc1};

TEST(InterruptAndExceptionHandling, UnmaskedDivideByZeroRaisesXmAndKeepsDestination) {
  TestMachine M;
  StopReason Why = runFixed(M, DivssXmm0Xmm1, 0x1f80 & ~(0x200u));
  EXPECT_EQ(faultVector(M, Why), vec::XM);
  EXPECT_EQ(M.S.XmmReg[0].Lo, 0x3f800000u);
  EXPECT_EQ(M.S.XmmReg[0].Hi, 0x1234u);
  EXPECT_EQ(M.S.Mxcsr, (0x1f80u & ~0x200u) | 0x4u); // ZE
  EXPECT_EQ(M.read64(M.S.Gpr[RSP]), kCodeBase) << "#XM is a fault: RIP of the DIVSS";
}

TEST(InterruptAndExceptionHandling, MaskedDivideByZeroGivesInfinity) {
  TestMachine M;
  ASSERT_EQ(runFixed(M, DivssXmm0Xmm1, 0x1f80), StopReason::Halted);
  EXPECT_EQ(M.S.XmmReg[0].Lo, 0x7f800000u);
  EXPECT_EQ(M.S.XmmReg[0].Hi, 0x1234u);
  EXPECT_EQ(M.S.Mxcsr, 0x1f84u);
}

TEST(InterruptAndExceptionHandling, UnmaskedExceptionWithoutOsxmmexcptRaisesUd) {
  TestMachine M;
  M.setupLongMode();
  M.S.Cr4 &= ~cr4::OSXMMEXCPT;
  // runFixed re-runs setupLongMode; clear the bit after it through a wrapper sequence.
  installFaultIdt(M);
  M.S.Gpr[RSP] = 0x80000;
  M.S.XmmReg[0] = Xmm{0x3f800000, 0};
  M.S.XmmReg[1] = Xmm{0, 0};
  M.S.Mxcsr = 0x1f80 & ~0x200u;
  std::vector<uint8_t> Code = DivssXmm0Xmm1;
  Code.push_back(0xf4);
  M.loadCode(Code);
  StopReason Why = M.run(10);
  EXPECT_EQ(faultVector(M, Why), vec::UD);
  EXPECT_EQ(M.S.XmmReg[0].Lo, 0x3f800000u);
  EXPECT_EQ(M.S.Mxcsr & 0x3f, 0x4u) << "the flag is set before #UD";
}

TEST(InterruptAndExceptionHandling, UnmaskedInvalidSuppressesPostComputationFlags) {
  // ADDPS with an SNaN in lane 0 and an inexact sum in lane 1, invalid unmasked: only IE
  // is reported (SDM Vol. 1, Handling Unmasked Exceptions: pre-computation first).
  TestMachine M;
  M.setupLongMode();
  installFaultIdt(M);
  M.S.Gpr[RSP] = 0x80000;
  M.S.XmmReg[0] = Xmm{0x3f800000ull << 32 | 0x7f800001u, 0};
  M.S.XmmReg[1] = Xmm{0x33800000ull << 32 | 0x3f800000u, 0}; // 1 + 2^-24: inexact
  M.S.Mxcsr = 0x1f80 & ~0x80u;
  M.loadCode({0x0f, 0x58, 0xc1, 0xf4});
  StopReason Why = M.run(10);
  EXPECT_EQ(faultVector(M, Why), vec::XM);
  EXPECT_EQ(M.S.Mxcsr, (0x1f80u & ~0x80u) | 0x1u);
}

TEST(ProgrammingWithSse2, ComisdUnorderedSetsZfPfCfAndClearsOthers) {
  TestMachine M;
  M.setupLongMode();
  M.S.XmmReg[0] = Xmm{0x7ff8000000000000ull, 0}; // QNaN
  M.S.XmmReg[1] = Xmm{0x3ff0000000000000ull, 0};
  M.S.Rflags = rflags::Fixed1 | rflags::OF | rflags::SF | rflags::AF;
  M.loadCode({0x66, 0x0f, 0x2f, 0xc1, 0xf4}); // comisd xmm0, xmm1
  ASSERT_EQ(M.run(10), StopReason::Halted);
  EXPECT_EQ(M.S.Rflags & rflags::Arith, rflags::ZF | rflags::PF | rflags::CF);
  EXPECT_EQ(M.S.Mxcsr, 0x1f81u) << "COMISD signals invalid on a QNaN";
}

TEST(ProgrammingWithSse2, Cvttsd2siOverflowGivesIntegerIndefinite) {
  TestMachine M;
  M.setupLongMode();
  M.S.XmmReg[0] = Xmm{0x43e0000000000000ull, 0}; // 2^63
  M.loadCode({0xf2, 0x48, 0x0f, 0x2c, 0xc0, 0xf4}); // cvttsd2si rax, xmm0
  ASSERT_EQ(M.run(10), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], 0x8000000000000000ull);
  EXPECT_EQ(M.S.Mxcsr, 0x1f81u);
}

TEST(ProgrammingWithSse2, AddpsMisalignedMemoryRaisesGp) {
  TestMachine M;
  M.setupLongMode();
  installFaultIdt(M);
  M.S.Gpr[RSP] = 0x80000;
  M.S.Gpr[RSI] = kDataBase + 8;
  M.loadCode({0x0f, 0x58, 0x06, 0xf4}); // addps xmm0, [rsi]
  EXPECT_EQ(faultVector(M, M.run(10)), vec::GP);
}

TEST(ProgrammingWithSse2, AddssMisalignedMemoryIsAllowed) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RSI] = kDataBase + 3;
  M.loadCode({0xf3, 0x0f, 0x58, 0x06, 0xf4}); // addss xmm0, [rsi]
  EXPECT_EQ(M.run(10), StopReason::Halted);
}

TEST(ProgrammingWithSse2, FloatingPointWithCr0TsRaisesNm) {
  TestMachine M;
  M.setupLongMode();
  installFaultIdt(M);
  M.S.Gpr[RSP] = 0x80000;
  M.S.Cr0 |= cr0::TS;
  M.loadCode({0xf2, 0x0f, 0x58, 0xc1, 0xf4}); // addsd xmm0, xmm1
  EXPECT_EQ(faultVector(M, M.run(10)), vec::NM);
}

} // namespace
