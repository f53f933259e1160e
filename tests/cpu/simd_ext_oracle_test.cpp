// The SIMD extensions after SSE2 (cpu/insns_sse_ext.def) checked against the host
// processor (STYLE 2.8, differential tests), in the manner of sse_oracle_test and
// sse_fp_oracle_test: each form runs natively and in the emulator from the same
// deterministic random state; all XMM registers, RAX/RCX/RDX/RBX, MXCSR, the memory
// window and (where the instruction writes them) the arithmetic flags must match exactly.
// Rows whose imm8 matters run every imm8 value several times. Floating-point rows also
// run with random exceptions unmasked, checking #XM against the host's SIGFPE. A host
// without an extension skips its rows visibly (GTEST_SKIP).
#include "tests/cpu/sse_inputs.h"
#include "tests/cpu/sse_test_util.h"

#include "cpu/cpuid.h"
#include "cpu/exec_sse.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

enum class Kind : uint8_t { Xmm, Gpr, Mem, XmmOrMem, GprOrMem };
/// What the lanes of the random inputs hold.
enum class Data : uint8_t { Int, F32, F64 };
/// None: no imm8; Random: a random imm8; Every: iteration K uses imm8 = K mod 256.
enum class ImmMode : uint8_t { None, Random, Every };
/// The host feature a row needs.
/// Sse41Intel: SSE4.1 on an Intel processor, for DPPS/DPPD, whose sums of two NaNs
/// return Intel's choice (cpu/exec_sse_sse41_fp.cpp): on another host their rows skip,
/// and DotProductNaNs below checks that choice on every host.
enum class Ext : uint8_t { Sse3, Ssse3, Sse41, Sse41Intel, Sse42, Pclmul, Aes };

struct Row {
  const char *Name;
  Ext Needs;
  uint8_t Prefix;          ///< mandatory prefix: 0, 0x66, 0xf2, 0xf3
  std::vector<uint8_t> Op; ///< opcode bytes after 0F
  Kind Reg, Rm;
  Data D = Data::Int;
  ImmMode Imm = ImmMode::None;
  bool Aligned = false; ///< the memory form takes an aligned m128
  bool RexW = false;
  bool Flags = false;   ///< writes the arithmetic flags
};

constexpr Kind X = Kind::Xmm, XM = Kind::XmmOrMem, G = Kind::Gpr, GM = Kind::GprOrMem,
               M = Kind::Mem;
constexpr Data Int = Data::Int, F32 = Data::F32, F64 = Data::F64;
constexpr ImmMode NoImm = ImmMode::None, Every = ImmMode::Every;

bool hostHas(Ext E) {
  switch (E) {
  case Ext::Sse3: return __builtin_cpu_supports("sse3");
  case Ext::Ssse3: return __builtin_cpu_supports("ssse3");
  case Ext::Sse41: return __builtin_cpu_supports("sse4.1");
  case Ext::Sse41Intel: return __builtin_cpu_supports("sse4.1") && __builtin_cpu_is("intel");
  case Ext::Sse42: return __builtin_cpu_supports("sse4.2");
  case Ext::Pclmul: return __builtin_cpu_supports("pclmul");
  case Ext::Aes: return __builtin_cpu_supports("aes");
  }
  return false;
}

// SDM Vol. 2, opcode column of each instruction page.
const std::vector<Row> &rows() {
  static const std::vector<Row> R = {
      // SSE3.
      {"ADDSUBPS", Ext::Sse3, 0xf2, {0xd0}, X, XM, F32, NoImm, true},
      {"ADDSUBPD", Ext::Sse3, 0x66, {0xd0}, X, XM, F64, NoImm, true},
      {"HADDPS", Ext::Sse3, 0xf2, {0x7c}, X, XM, F32, NoImm, true},
      {"HADDPD", Ext::Sse3, 0x66, {0x7c}, X, XM, F64, NoImm, true},
      {"HSUBPS", Ext::Sse3, 0xf2, {0x7d}, X, XM, F32, NoImm, true},
      {"HSUBPD", Ext::Sse3, 0x66, {0x7d}, X, XM, F64, NoImm, true},
      {"MOVSLDUP", Ext::Sse3, 0xf3, {0x12}, X, XM, Int, NoImm, true},
      {"MOVSHDUP", Ext::Sse3, 0xf3, {0x16}, X, XM, Int, NoImm, true},
      {"MOVDDUP", Ext::Sse3, 0xf2, {0x12}, X, XM},
      {"LDDQU", Ext::Sse3, 0xf2, {0xf0}, X, M},
      // SSSE3.
      {"PABSB", Ext::Ssse3, 0x66, {0x38, 0x1c}, X, XM, Int, NoImm, true},
      {"PABSW", Ext::Ssse3, 0x66, {0x38, 0x1d}, X, XM, Int, NoImm, true},
      {"PABSD", Ext::Ssse3, 0x66, {0x38, 0x1e}, X, XM, Int, NoImm, true},
      {"PALIGNR", Ext::Ssse3, 0x66, {0x3a, 0x0f}, X, XM, Int, Every, true},
      {"PHADDW", Ext::Ssse3, 0x66, {0x38, 0x01}, X, XM, Int, NoImm, true},
      {"PHADDD", Ext::Ssse3, 0x66, {0x38, 0x02}, X, XM, Int, NoImm, true},
      {"PHADDSW", Ext::Ssse3, 0x66, {0x38, 0x03}, X, XM, Int, NoImm, true},
      {"PHSUBW", Ext::Ssse3, 0x66, {0x38, 0x05}, X, XM, Int, NoImm, true},
      {"PHSUBD", Ext::Ssse3, 0x66, {0x38, 0x06}, X, XM, Int, NoImm, true},
      {"PHSUBSW", Ext::Ssse3, 0x66, {0x38, 0x07}, X, XM, Int, NoImm, true},
      {"PMADDUBSW", Ext::Ssse3, 0x66, {0x38, 0x04}, X, XM, Int, NoImm, true},
      {"PMULHRSW", Ext::Ssse3, 0x66, {0x38, 0x0b}, X, XM, Int, NoImm, true},
      {"PSHUFB", Ext::Ssse3, 0x66, {0x38, 0x00}, X, XM, Int, NoImm, true},
      {"PSIGNB", Ext::Ssse3, 0x66, {0x38, 0x08}, X, XM, Int, NoImm, true},
      {"PSIGNW", Ext::Ssse3, 0x66, {0x38, 0x09}, X, XM, Int, NoImm, true},
      {"PSIGND", Ext::Ssse3, 0x66, {0x38, 0x0a}, X, XM, Int, NoImm, true},
      // SSE4.1.
      {"BLENDPS", Ext::Sse41, 0x66, {0x3a, 0x0c}, X, XM, Int, Every, true},
      {"BLENDPD", Ext::Sse41, 0x66, {0x3a, 0x0d}, X, XM, Int, Every, true},
      {"PBLENDW", Ext::Sse41, 0x66, {0x3a, 0x0e}, X, XM, Int, Every, true},
      {"BLENDVPS", Ext::Sse41, 0x66, {0x38, 0x14}, X, XM, Int, NoImm, true},
      {"BLENDVPD", Ext::Sse41, 0x66, {0x38, 0x15}, X, XM, Int, NoImm, true},
      {"PBLENDVB", Ext::Sse41, 0x66, {0x38, 0x10}, X, XM, Int, NoImm, true},
      {"DPPS", Ext::Sse41Intel, 0x66, {0x3a, 0x40}, X, XM, F32, Every, true},
      {"DPPD", Ext::Sse41Intel, 0x66, {0x3a, 0x41}, X, XM, F64, Every, true},
      {"EXTRACTPS", Ext::Sse41, 0x66, {0x3a, 0x17}, X, GM, Int, Every},
      {"EXTRACTPS r64", Ext::Sse41, 0x66, {0x3a, 0x17}, X, G, Int, Every, false, true},
      {"INSERTPS", Ext::Sse41, 0x66, {0x3a, 0x21}, X, XM, Int, Every},
      {"MOVNTDQA", Ext::Sse41, 0x66, {0x38, 0x2a}, X, M, Int, NoImm, true},
      {"MPSADBW", Ext::Sse41, 0x66, {0x3a, 0x42}, X, XM, Int, Every, true},
      {"PACKUSDW", Ext::Sse41, 0x66, {0x38, 0x2b}, X, XM, Int, NoImm, true},
      {"PCMPEQQ", Ext::Sse41, 0x66, {0x38, 0x29}, X, XM, Int, NoImm, true},
      {"PEXTRB", Ext::Sse41, 0x66, {0x3a, 0x14}, X, GM, Int, Every},
      {"PEXTRB r64", Ext::Sse41, 0x66, {0x3a, 0x14}, X, G, Int, Every, false, true},
      {"PEXTRD", Ext::Sse41, 0x66, {0x3a, 0x16}, X, GM, Int, Every},
      {"PEXTRQ", Ext::Sse41, 0x66, {0x3a, 0x16}, X, GM, Int, Every, false, true},
      {"PINSRB", Ext::Sse41, 0x66, {0x3a, 0x20}, X, GM, Int, Every},
      {"PINSRD", Ext::Sse41, 0x66, {0x3a, 0x22}, X, GM, Int, Every},
      {"PINSRQ", Ext::Sse41, 0x66, {0x3a, 0x22}, X, GM, Int, Every, false, true},
      {"PHMINPOSUW", Ext::Sse41, 0x66, {0x38, 0x41}, X, XM, Int, NoImm, true},
      {"PMAXSB", Ext::Sse41, 0x66, {0x38, 0x3c}, X, XM, Int, NoImm, true},
      {"PMAXSD", Ext::Sse41, 0x66, {0x38, 0x3d}, X, XM, Int, NoImm, true},
      {"PMAXUW", Ext::Sse41, 0x66, {0x38, 0x3e}, X, XM, Int, NoImm, true},
      {"PMAXUD", Ext::Sse41, 0x66, {0x38, 0x3f}, X, XM, Int, NoImm, true},
      {"PMINSB", Ext::Sse41, 0x66, {0x38, 0x38}, X, XM, Int, NoImm, true},
      {"PMINSD", Ext::Sse41, 0x66, {0x38, 0x39}, X, XM, Int, NoImm, true},
      {"PMINUW", Ext::Sse41, 0x66, {0x38, 0x3a}, X, XM, Int, NoImm, true},
      {"PMINUD", Ext::Sse41, 0x66, {0x38, 0x3b}, X, XM, Int, NoImm, true},
      {"PMOVSXBW", Ext::Sse41, 0x66, {0x38, 0x20}, X, XM},
      {"PMOVSXBD", Ext::Sse41, 0x66, {0x38, 0x21}, X, XM},
      {"PMOVSXBQ", Ext::Sse41, 0x66, {0x38, 0x22}, X, XM},
      {"PMOVSXWD", Ext::Sse41, 0x66, {0x38, 0x23}, X, XM},
      {"PMOVSXWQ", Ext::Sse41, 0x66, {0x38, 0x24}, X, XM},
      {"PMOVSXDQ", Ext::Sse41, 0x66, {0x38, 0x25}, X, XM},
      {"PMOVZXBW", Ext::Sse41, 0x66, {0x38, 0x30}, X, XM},
      {"PMOVZXBD", Ext::Sse41, 0x66, {0x38, 0x31}, X, XM},
      {"PMOVZXBQ", Ext::Sse41, 0x66, {0x38, 0x32}, X, XM},
      {"PMOVZXWD", Ext::Sse41, 0x66, {0x38, 0x33}, X, XM},
      {"PMOVZXWQ", Ext::Sse41, 0x66, {0x38, 0x34}, X, XM},
      {"PMOVZXDQ", Ext::Sse41, 0x66, {0x38, 0x35}, X, XM},
      {"PMULDQ", Ext::Sse41, 0x66, {0x38, 0x28}, X, XM, Int, NoImm, true},
      {"PMULLD", Ext::Sse41, 0x66, {0x38, 0x40}, X, XM, Int, NoImm, true},
      {"PTEST", Ext::Sse41, 0x66, {0x38, 0x17}, X, XM, Int, NoImm, true, false, true},
      {"ROUNDPS", Ext::Sse41, 0x66, {0x3a, 0x08}, X, XM, F32, Every, true},
      {"ROUNDPD", Ext::Sse41, 0x66, {0x3a, 0x09}, X, XM, F64, Every, true},
      {"ROUNDSS", Ext::Sse41, 0x66, {0x3a, 0x0a}, X, XM, F32, Every},
      {"ROUNDSD", Ext::Sse41, 0x66, {0x3a, 0x0b}, X, XM, F64, Every},
      // SSE4.2 (the string compares have their own test below).
      {"PCMPGTQ", Ext::Sse42, 0x66, {0x38, 0x37}, X, XM, Int, NoImm, true},
      // PCLMULQDQ and AES-NI.
      {"PCLMULQDQ", Ext::Pclmul, 0x66, {0x3a, 0x44}, X, XM, Int, Every, true},
      {"AESENC", Ext::Aes, 0x66, {0x38, 0xdc}, X, XM, Int, NoImm, true},
      {"AESENCLAST", Ext::Aes, 0x66, {0x38, 0xdd}, X, XM, Int, NoImm, true},
      {"AESDEC", Ext::Aes, 0x66, {0x38, 0xde}, X, XM, Int, NoImm, true},
      {"AESDECLAST", Ext::Aes, 0x66, {0x38, 0xdf}, X, XM, Int, NoImm, true},
      {"AESIMC", Ext::Aes, 0x66, {0x38, 0xdb}, X, XM, Int, NoImm, true},
      {"AESKEYGENASSIST", Ext::Aes, 0x66, {0x3a, 0xdf}, X, XM, Int, Every, true},
  };
  return R;
}

using Form = OracleForm<Row>;

std::vector<Form> forms(bool FpOnly) {
  std::vector<Form> F;
  for (const Row &R : rows()) {
    if (FpOnly && R.D == Data::Int)
      continue;
    if (R.Rm != Kind::Mem)
      F.push_back({&R, false});
    if (R.Rm == Kind::Mem || R.Rm == Kind::XmmOrMem || R.Rm == Kind::GprOrMem)
      F.push_back({&R, true});
  }
  return F;
}

constexpr unsigned kMemBytes = 64;

uint64_t randomBits(SplitMix64 &Rng, Data D) {
  switch (D) {
  case Data::Int: return interesting(Rng);
  case Data::F32: return randomLanes(Rng, Elem::F32);
  case Data::F64: return randomLanes(Rng, Elem::F64);
  }
  return 0;
}

/// One generated case: code, registers, memory, MXCSR.
struct Case {
  std::vector<uint8_t> Code;
  NativeFpState In;
  unsigned Off;
  uint8_t Mem[kMemBytes];
  std::string Where;
};

Case makeCase(const Row &R, bool MemForm, SplitMix64 &Rng, uint32_t Unmask, unsigned It) {
  Case K;
  auto pick = [&](Kind Kd) {
    return Kd == Kind::Gpr || Kd == Kind::GprOrMem ? unsigned(Rng.nextBelow(4))
                                                   : unsigned(Rng.nextBelow(16));
  };
  const unsigned RegNo = pick(R.Reg);
  const unsigned RmNo = MemForm ? 6 : pick(R.Rm);
  const uint8_t Imm = R.Imm == ImmMode::Every ? uint8_t(It) : uint8_t(Rng.next());
  K.Code = encodeLegacySse(R.Prefix, R.Op, R.RexW, R.Imm != ImmMode::None, MemForm, RegNo,
                           RmNo, Imm);
  for (Xmm &V : K.In.R.X)
    V = Xmm{randomBits(Rng, R.D), randomBits(Rng, R.D)};
  if (!MemForm && Rng.nextBelow(8) == 0 && R.Reg == Kind::Xmm && R.Rm == Kind::XmmOrMem)
    K.In.R.X[RmNo] = K.In.R.X[RegNo];
  K.In.R.Rax = interesting(Rng);
  K.In.R.Rcx = interesting(Rng);
  K.In.R.Rdx = interesting(Rng);
  K.In.R.Rbx = interesting(Rng);
  K.In.Mxcsr = R.D == Data::Int ? sse::mxcsr::Initial : randomMxcsr(Rng, Unmask);
  K.In.Rflags = 0;
  K.Off = R.Aligned ? 16 * Rng.nextBelow(3) : Rng.nextBelow(kMemBytes - 16 + 1);
  for (unsigned B = 0; B < kMemBytes; B += 8) {
    const uint64_t V = randomBits(Rng, R.D);
    std::memcpy(K.Mem + B, &V, 8);
  }
  char Buf[200];
  std::snprintf(Buf, sizeof(Buf), "%s%s iteration %u reg %u rm %u imm %u MXCSR %#x", R.Name,
                MemForm ? " [rsi]" : "", It, RegNo, RmNo, Imm, K.In.Mxcsr);
  K.Where = Buf;
  return K;
}

StopReason runEmu(TestMachine &Mc, const Case &K) {
  std::vector<uint8_t> Code = K.Code;
  Code.push_back(0xf4); // hlt
  Mc.loadCode(Code);
  loadOracleInput(Mc, K.In.R, K.Off, K.Mem, kMemBytes);
  Mc.S.Mxcsr = K.In.Mxcsr;
  Mc.S.Rflags = rflags::Fixed1;
  return Mc.run(10);
}

/// Compares registers, MXCSR, memory and (if Flags) the arithmetic flags.
bool sameState(TestMachine &Mc, const NativeFpState &Host, const uint8_t *HostMem,
               const Case &K, bool Flags) {
  bool Ok = sameOracleRegs(Mc, Host.R, K.Where);
  if (Mc.S.Mxcsr != Host.Mxcsr) {
    ADD_FAILURE() << K.Where << ": MXCSR emulator 0x" << std::hex << Mc.S.Mxcsr
                  << " host 0x" << Host.Mxcsr;
    Ok = false;
  }
  if (Flags && (Mc.S.Rflags & rflags::Arith) != (Host.Rflags & rflags::Arith)) {
    ADD_FAILURE() << K.Where << ": RFLAGS emulator 0x" << std::hex
                  << (Mc.S.Rflags & rflags::Arith) << " host 0x"
                  << (Host.Rflags & rflags::Arith);
    Ok = false;
  }
  uint8_t EmuMem[kMemBytes];
  Mc.Mem.copyOut(Hpa(kDataBase), EmuMem, kMemBytes);
  if (std::memcmp(EmuMem, HostMem, kMemBytes) != 0) {
    ADD_FAILURE() << K.Where << ": memory differs";
    Ok = false;
  }
  return Ok;
}

class SimdExtOracle : public ::testing::TestWithParam<Form> {};

/// All exceptions masked: results, flags and MXCSR match the host.
TEST_P(SimdExtOracle, MatchesHostOnRandomInputs) {
  const Row &R = *GetParam().R;
  const bool MemForm = GetParam().MemForm;
  if (!hostHas(R.Needs))
    GTEST_SKIP() << "the host lacks the extension of " << R.Name
                 << (R.Needs == Ext::Sse41Intel ? " (SSE4.1 on an Intel processor)" : "");
  NativeCode Native;
  ASSERT_TRUE(Native.valid());
  TestMachine Mc;
  Mc.setupLongMode();
  alignas(64) uint8_t HostMem[kMemBytes];
  SplitMix64 Rng(0x51d3 ^ std::hash<std::string>{}(oracleFormName(R.Name, MemForm)));
  const unsigned Iterations = R.Imm == ImmMode::Every ? 4 * 256 : 1500;
  unsigned Failures = 0;
  for (unsigned It = 0; It < Iterations && Failures < 5; ++It) {
    Case K = makeCase(R, MemForm, Rng, 0, It);
    NativeFpState Host = K.In;
    std::memcpy(HostMem, K.Mem, kMemBytes);
    Host.R.Rsi = reinterpret_cast<uint64_t>(HostMem + K.Off);
    Native.set(K.Code);
    ASSERT_FALSE(runNativeFp(Native, Host)) << K.Where << ": host trapped";
    const StopReason Why = runEmu(Mc, K);
    if (Why != StopReason::Halted || Mc.S.Rip != kCodeBase + K.Code.size() + 1) {
      ADD_FAILURE() << K.Where << ": emulator stopped with " << int(Why) << " vector "
                    << faultVector(Mc, Why);
      ++Failures;
      continue;
    }
    Failures += !sameState(Mc, Host, HostMem, K, R.Flags);
  }
}

INSTANTIATE_TEST_SUITE_P(ProgrammingWithSse3Ssse3Sse4AndAesNi, SimdExtOracle,
                         ::testing::ValuesIn(forms(false)), OracleFormName());

class SimdExtFpOracle : public ::testing::TestWithParam<Form> {};

/// Random exceptions unmasked: when the host raises #XM (SIGFPE) the emulator raises #XM
/// with the same MXCSR and untouched registers; otherwise both complete identically.
TEST_P(SimdExtFpOracle, UnmaskedExceptionsMatchHost) {
  const Row &R = *GetParam().R;
  const bool MemForm = GetParam().MemForm;
  if (!hostHas(R.Needs))
    GTEST_SKIP() << "the host lacks the extension of " << R.Name
                 << (R.Needs == Ext::Sse41Intel ? " (SSE4.1 on an Intel processor)" : "");
  NativeCode Native;
  ASSERT_TRUE(Native.valid());
  TestMachine Mc;
  Mc.setupLongMode();
  installFaultIdt(Mc);
  alignas(64) uint8_t HostMem[kMemBytes];
  SplitMix64 Rng(0x0e7d ^ std::hash<std::string>{}(oracleFormName(R.Name, MemForm)));
  const unsigned Iterations = R.Imm == ImmMode::Every ? 4 * 256 : 1500;
  unsigned Failures = 0, Traps = 0;
  for (unsigned It = 0; It < Iterations && Failures < 5; ++It) {
    Case K = makeCase(R, MemForm, Rng, uint32_t(Rng.next()) & 0x3f, It);
    NativeFpState Host = K.In;
    std::memcpy(HostMem, K.Mem, kMemBytes);
    Host.R.Rsi = reinterpret_cast<uint64_t>(HostMem + K.Off);
    Native.set(K.Code);
    const bool Trapped = runNativeFp(Native, Host);
    Mc.S.Gpr[RSP] = 0x80000;
    const StopReason Why = runEmu(Mc, K);
    const int Vector = faultVector(Mc, Why);
    if (Trapped) {
      ++Traps;
      if (Vector != vec::XM) {
        ADD_FAILURE() << K.Where << ": host raised #XM, emulator stopped with " << int(Why)
                      << " vector " << Vector;
        ++Failures;
        continue;
      }
    } else if (Why != StopReason::Halted || Mc.S.Rip != kCodeBase + K.Code.size() + 1) {
      ADD_FAILURE() << K.Where << ": host completed, emulator stopped with " << int(Why)
                    << " vector " << Vector;
      ++Failures;
      continue;
    }
    Failures += !sameState(Mc, Host, HostMem, K, R.Flags && !Trapped);
  }
  RecordProperty("Traps", int(Traps));
}

INSTANTIATE_TEST_SUITE_P(ProgrammingWithSse3Ssse3Sse4AndAesNi, SimdExtFpOracle,
                         ::testing::ValuesIn(forms(true)), OracleFormName());

// --- PCMPESTRI / PCMPESTRM / PCMPISTRI / PCMPISTRM -----------------------------------

struct StrRow {
  const char *Name;
  uint8_t Op;    ///< 66 0F 3A Op
  bool Explicit; ///< lengths in EAX/EDX (RAX/RDX with REX.W)
  bool RexW;
};
const StrRow kStrRows[] = {
    {"PCMPESTRM", 0x60, true, false},  {"PCMPESTRI", 0x61, true, false},
    {"PCMPESTRM64", 0x60, true, true}, {"PCMPESTRI64", 0x61, true, true},
    {"PCMPISTRM", 0x62, false, false}, {"PCMPISTRI", 0x63, false, false},
};

struct StrForm {
  const StrRow *R;
  bool MemForm;
};
std::vector<StrForm> strForms() {
  std::vector<StrForm> F;
  for (const StrRow &R : kStrRows)
    for (bool Mem : {false, true})
      F.push_back({&R, Mem});
  return F;
}

/// A string of 16 bytes (8 words) over a small alphabet, so that elements often match
/// and ranges often hold; with Terminator < the element count, element Terminator is
/// zero and the ones before it are not (the implicit length).
Xmm randomString(SplitMix64 &Rng, bool Words, unsigned Terminator) {
  static const uint8_t Alphabet[] = {0x01, 0x02, 0x03, 0x41, 0x42, 0x43, 0x7f, 0x80, 0xfe, 0xff};
  uint8_t B[16];
  for (uint8_t &V : B)
    V = Rng.pick(Alphabet);
  const unsigned N = Words ? 8 : 16, Size = Words ? 2 : 1;
  if (Terminator < N) {
    std::memset(B + Terminator * Size, 0, Size);
    if (Terminator * Size + Size <= 15 && Rng.nextBelow(2)) // a zero after it: no effect
      B[15] = 0;
  }
  Xmm X;
  std::memcpy(&X, B, 16);
  return X;
}

/// A length register value whose saturated absolute value is L, sometimes negative and
/// sometimes far out of range (saturating to 16 or 8).
uint64_t lengthValue(SplitMix64 &Rng, unsigned L, bool Wide) {
  int64_t V = int64_t(L);
  if (Rng.nextBelow(8) == 0)
    V = int64_t(L) + 16 + int64_t(Rng.nextBelow(1000));
  if (Rng.nextBelow(3) == 0)
    V = -V;
  uint64_t Bits = uint64_t(V);
  if (!Wide) // the upper half of RAX/RDX must not count
    Bits = (Rng.next() << 32) | uint32_t(Bits);
  if (Rng.nextBelow(32) == 0)
    Bits = Wide ? 0x8000000000000000ull : 0x80000000u | (Rng.next() << 32);
  return Bits;
}

class SimdStringOracle : public ::testing::TestWithParam<StrForm> {};

/// Every control byte 0..127 (and with the reserved bit 7 set at random) with each string
/// length 0..16 of one operand against a random length of the other.
TEST_P(SimdStringOracle, EveryControlByteAndLengthMatchesHost) {
  const StrRow &R = *GetParam().R;
  const bool MemForm = GetParam().MemForm;
  if (!hostHas(Ext::Sse42))
    GTEST_SKIP() << "the host lacks SSE4.2";
  NativeCode Native;
  ASSERT_TRUE(Native.valid());
  TestMachine Mc;
  Mc.setupLongMode();
  alignas(64) uint8_t HostMem[kMemBytes];
  SplitMix64 Rng(0x5742 ^ std::hash<std::string>{}(std::string(R.Name) + (MemForm ? "m" : "r")));
  unsigned Failures = 0, Cases = 0;
  for (unsigned Ctl = 0; Ctl < 128 && Failures < 5; ++Ctl)
    for (unsigned L = 0; L <= 16 && Failures < 5; ++L) {
      const uint8_t Imm = uint8_t(Ctl | (Rng.nextBelow(4) == 0 ? 0x80 : 0));
      const bool Words = Ctl & 1;
      const unsigned Other = unsigned(Rng.nextBelow(17));
      const bool FirstIsL = Rng.nextBelow(2);
      const unsigned LenA = FirstIsL ? L : Other, LenB = FirstIsL ? Other : L;
      const unsigned RegNo = unsigned(Rng.nextBelow(16));
      const unsigned RmNo = MemForm ? 6 : unsigned(Rng.nextBelow(16));
      const uint8_t Op[] = {0x3a, R.Op};
      Case K;
      K.Code = encodeLegacySse(0x66, Op, R.RexW, true, MemForm, RegNo, RmNo, Imm);
      for (Xmm &V : K.In.R.X)
        V = randomString(Rng, Words, unsigned(Rng.nextBelow(17)));
      const unsigned N = Words ? 8 : 16;
      // Explicit lengths come from RAX/RDX; implicit ones from the terminators.
      const Xmm StrA = randomString(Rng, Words, R.Explicit ? unsigned(Rng.nextBelow(17)) : LenA);
      const Xmm StrB = randomString(Rng, Words, R.Explicit ? unsigned(Rng.nextBelow(17)) : LenB);
      K.In.R.X[RegNo] = StrA;
      if (!MemForm)
        K.In.R.X[RmNo] = RmNo == RegNo ? StrA : StrB;
      K.In.R.Rax = R.Explicit ? lengthValue(Rng, LenA, R.RexW) : interesting(Rng);
      K.In.R.Rdx = R.Explicit ? lengthValue(Rng, LenB, R.RexW) : interesting(Rng);
      K.In.R.Rcx = interesting(Rng);
      K.In.R.Rbx = interesting(Rng);
      K.In.Mxcsr = sse::mxcsr::Initial;
      K.In.Rflags = 0;
      K.Off = unsigned(Rng.nextBelow(kMemBytes - 16 + 1)); // no alignment rule
      for (unsigned B = 0; B < kMemBytes; B += 16) {
        const Xmm V = randomString(Rng, Words, unsigned(Rng.nextBelow(17)));
        std::memcpy(K.Mem + B, &V, 16);
      }
      std::memcpy(K.Mem + K.Off, &StrB, 16);
      char Buf[200];
      std::snprintf(Buf, sizeof(Buf), "%s%s imm %#x lengths %u/%u (of %u) reg %u rm %u", R.Name,
                    MemForm ? " [rsi]" : "", Imm, LenA, LenB, N, RegNo, RmNo);
      K.Where = Buf;
      NativeFpState Host = K.In;
      std::memcpy(HostMem, K.Mem, kMemBytes);
      Host.R.Rsi = reinterpret_cast<uint64_t>(HostMem + K.Off);
      Native.set(K.Code);
      ASSERT_FALSE(runNativeFp(Native, Host)) << K.Where << ": host trapped";
      const StopReason Why = runEmu(Mc, K);
      ++Cases;
      if (Why != StopReason::Halted || Mc.S.Rip != kCodeBase + K.Code.size() + 1) {
        ADD_FAILURE() << K.Where << ": emulator stopped with " << int(Why);
        ++Failures;
        continue;
      }
      Failures += !sameState(Mc, Host, HostMem, K, true);
    }
  EXPECT_EQ(Cases, 128u * 17u);
}

std::string strFormName(const ::testing::TestParamInfo<StrForm> &Info) {
  return std::string(Info.param.R->Name) + (Info.param.MemForm ? "_mem" : "_reg");
}
INSTANTIATE_TEST_SUITE_P(ProgrammingWithSse3Ssse3Sse4AndAesNi, SimdStringOracle,
                         ::testing::ValuesIn(strForms()), strFormName);

// --- faults every legacy SIMD instruction shares --------------------------------------

/// A representative memory form per extension, [rsi] as the operand; Aligned when the
/// legacy encoding requires a 16-byte aligned operand (SDM Vol. 2A, Exceptions Type 4)
/// and false where the SDM allows any alignment.
struct FaultRow {
  const char *Name;
  std::vector<uint8_t> Code;
  bool Aligned;
};
const std::vector<FaultRow> &faultRows() {
  static const std::vector<FaultRow> R = {
      {"haddps xmm0, [rsi]", {0xf2, 0x0f, 0x7c, 0x06}, true},
      {"movshdup xmm0, [rsi]", {0xf3, 0x0f, 0x16, 0x06}, true},
      {"movddup xmm0, [rsi] (m64)", {0xf2, 0x0f, 0x12, 0x06}, false},
      {"lddqu xmm0, [rsi]", {0xf2, 0x0f, 0xf0, 0x06}, false},
      {"pshufb xmm0, [rsi]", {0x66, 0x0f, 0x38, 0x00, 0x06}, true},
      {"palignr xmm0, [rsi], 3", {0x66, 0x0f, 0x3a, 0x0f, 0x06, 0x03}, true},
      {"ptest xmm0, [rsi]", {0x66, 0x0f, 0x38, 0x17, 0x06}, true},
      {"dpps xmm0, [rsi], 0xff", {0x66, 0x0f, 0x3a, 0x40, 0x06, 0xff}, true},
      {"roundss xmm0, [rsi] (m32), 0", {0x66, 0x0f, 0x3a, 0x0a, 0x06, 0x00}, false},
      {"pmovsxbw xmm0, [rsi] (m64)", {0x66, 0x0f, 0x38, 0x20, 0x06}, false},
      {"pinsrb xmm0, [rsi] (m8), 1", {0x66, 0x0f, 0x3a, 0x20, 0x06, 0x01}, false},
      {"movntdqa xmm0, [rsi]", {0x66, 0x0f, 0x38, 0x2a, 0x06}, true},
      {"pcmpgtq xmm0, [rsi]", {0x66, 0x0f, 0x38, 0x37, 0x06}, true},
      {"pcmpistri xmm0, [rsi], 0", {0x66, 0x0f, 0x3a, 0x63, 0x06, 0x00}, false},
      {"pcmpestrm xmm0, [rsi], 0", {0x66, 0x0f, 0x3a, 0x60, 0x06, 0x00}, false},
      {"pclmulqdq xmm0, [rsi], 0", {0x66, 0x0f, 0x3a, 0x44, 0x06, 0x00}, true},
      {"aesenc xmm0, [rsi]", {0x66, 0x0f, 0x38, 0xdc, 0x06}, true},
      {"aeskeygenassist xmm0, [rsi], 1", {0x66, 0x0f, 0x3a, 0xdf, 0x06, 0x01}, true},
  };
  return R;
}

/// Runs Code + HLT with RSI = kDataBase + Misalign after Setup adjusted the machine.
template <typename F> int faultOf(const FaultRow &Row, unsigned Misalign, F Setup) {
  TestMachine Mc;
  Mc.setupLongMode();
  installFaultIdt(Mc);
  Mc.S.Gpr[RSP] = 0x80000;
  Mc.S.Gpr[RSI] = kDataBase + Misalign;
  Setup(Mc);
  std::vector<uint8_t> Code = Row.Code;
  Code.push_back(0xf4);
  Mc.loadCode(Code);
  const StopReason Why = Mc.run(10);
  if (Why == StopReason::Halted && Mc.S.Rip == kCodeBase + Code.size())
    return -2; // completed
  return faultVector(Mc, Why);
}

TEST(ProgrammingWithSse3Ssse3Sse4AndAesNi, AlignmentTsEmAndOsfxsrRulesHoldForEveryFamily) {
  for (const FaultRow &R : faultRows()) {
    SCOPED_TRACE(R.Name);
    auto none = [](TestMachine &) {};
    EXPECT_EQ(faultOf(R, 0, none), -2) << "aligned operand completes";
    EXPECT_EQ(faultOf(R, 8, none), R.Aligned ? int(vec::GP) : -2)
        << "misaligned operand: #GP(0) only for the aligned forms";
    EXPECT_EQ(faultOf(R, 0, [](TestMachine &Mc) { Mc.S.Cr0 |= cr0::TS; }), int(vec::NM));
    EXPECT_EQ(faultOf(R, 0, [](TestMachine &Mc) { Mc.S.Cr0 |= cr0::EM; }), int(vec::UD));
    EXPECT_EQ(faultOf(R, 0, [](TestMachine &Mc) { Mc.S.Cr4 &= ~cr4::OSFXSR; }),
              int(vec::UD));
  }
}

TEST(ProgrammingWithSse3Ssse3Sse4AndAesNi, UnmaskedExceptionWithoutOsxmmexcptRaisesUd) {
  // HADDPS of +inf and -inf: invalid, unmasked; CR4.OSXMMEXCPT = 0 turns #XM into #UD
  // (SDM Vol. 3A, Interrupt 19—SIMD Floating-Point Exception (#XM)).
  TestMachine Mc;
  Mc.setupLongMode();
  installFaultIdt(Mc);
  Mc.S.Cr4 &= ~cr4::OSXMMEXCPT;
  Mc.S.Gpr[RSP] = 0x80000;
  Mc.S.XmmReg[0] = Xmm{0xff8000007f800000ull, 0};
  Mc.S.Mxcsr = sse::mxcsr::Initial & ~0x80u;
  Mc.loadCode({0xf2, 0x0f, 0x7c, 0xc0, 0xf4}); // haddps xmm0, xmm0
  EXPECT_EQ(faultVector(Mc, Mc.run(10)), int(vec::UD));
  EXPECT_EQ(Mc.S.XmmReg[0].Lo, 0xff8000007f800000ull);
  EXPECT_EQ(Mc.S.Mxcsr & sse::mxcsr::Flags, sse::mxcsr::IE);
}

TEST(ProgrammingWithSse3Ssse3Sse4AndAesNi, LddquRegisterFormIsInvalid) {
  TestMachine Mc;
  Mc.setupLongMode();
  installFaultIdt(Mc);
  Mc.S.Gpr[RSP] = 0x80000;
  Mc.loadCode({0xf2, 0x0f, 0xf0, 0xc1, 0xf4}); // lddqu xmm0, xmm1 (mod = 11)
  EXPECT_EQ(faultVector(Mc, Mc.run(10)), int(vec::UD));
}

// DPPS/DPPD sum the products of each destination lane in Intel's order, so a sum of two
// NaNs returns the NaN Intel processors return (cpu/exec_sse_sse41_fp.cpp): the table was
// read off an Intel Xeon host (_mm_dp_ps/_mm_dp_pd, products 1.0 * QNaN with payload K + 1
// in the lanes K of the mask, 1.0 elsewhere). Checked on every host.
TEST(ProgrammingWithSse3Ssse3Sse4AndAesNi, DotProductNaNsAreIntels) {
  static const uint8_t Dpps[16][4] = {{0, 0, 0, 0}, {1, 1, 1, 1}, {2, 2, 2, 2}, {2, 1, 2, 1},
                                      {3, 3, 3, 3}, {1, 1, 3, 3}, {2, 2, 3, 3}, {2, 1, 3, 3},
                                      {4, 4, 4, 4}, {1, 1, 4, 4}, {2, 2, 4, 4}, {2, 1, 4, 4},
                                      {4, 3, 4, 3}, {1, 1, 4, 3}, {2, 2, 4, 3}, {2, 1, 4, 3}};
  for (unsigned Mask = 1; Mask < 16; ++Mask) {
    TestMachine Mc;
    Mc.setupLongMode();
    uint32_t Lane[4];
    for (unsigned K = 0; K < 4; ++K)
      Lane[K] = (Mask >> K & 1) ? 0x7fc00000u | (K + 1) : 0x3f800000u; // QNaN or 1.0
    Mc.S.XmmReg[0] = Xmm{Lane[0] | uint64_t(Lane[1]) << 32, Lane[2] | uint64_t(Lane[3]) << 32};
    Mc.S.XmmReg[1] = Xmm{0x3f8000003f800000ull, 0x3f8000003f800000ull};
    Mc.loadCode({0x66, 0x0f, 0x3a, 0x40, 0xc1, 0xff, 0xf4}); // dpps xmm0, xmm1, 0xff
    Mc.run(10);
    const Xmm &R = Mc.S.XmmReg[0];
    const uint32_t Got[4] = {uint32_t(R.Lo), uint32_t(R.Lo >> 32), uint32_t(R.Hi),
                             uint32_t(R.Hi >> 32)};
    for (unsigned K = 0; K < 4; ++K)
      EXPECT_EQ(Got[K], 0x7fc00000u | Dpps[Mask][K]) << "mask " << Mask << " lane " << K;
  }
  static const uint8_t Dppd[4][2] = {{0, 0}, {1, 1}, {2, 2}, {1, 2}};
  for (unsigned Mask = 1; Mask < 4; ++Mask) {
    TestMachine Mc;
    Mc.setupLongMode();
    const uint64_t One = 0x3ff0000000000000ull, Nan = 0x7ff8000000000000ull;
    Mc.S.XmmReg[0] = Xmm{(Mask & 1) ? Nan | 1 : One, (Mask & 2) ? Nan | 2 : One};
    Mc.S.XmmReg[1] = Xmm{One, One};
    Mc.loadCode({0x66, 0x0f, 0x3a, 0x41, 0xc1, 0x33, 0xf4}); // dppd xmm0, xmm1, 0x33
    Mc.run(10);
    EXPECT_EQ(Mc.S.XmmReg[0].Lo, Nan | Dppd[Mask][0]) << "mask " << Mask;
    EXPECT_EQ(Mc.S.XmmReg[0].Hi, Nan | Dppd[Mask][1]) << "mask " << Mask;
  }
}

// --- CPUID ------------------------------------------------------------------------------

TEST(ProgrammingWithSse3Ssse3Sse4AndAesNi, CpuidReportsExactlyTheImplementedExtensions) {
  TestMachine Mc;
  const CpuidResult R = cpuidQuery(Mc.Cpu_, 1, 0);
  using namespace cpuidbit;
  const uint32_t Simd = Sse3 | Pclmulqdq | Monitor | Ssse3 | Sse41 | Sse42 | Popcnt | Aes;
  // MONITOR/MWAIT are implemented too (cpu/monitor.h).
  EXPECT_EQ(R.Ecx & Simd, Sse3 | Pclmulqdq | Monitor | Ssse3 | Sse41 | Sse42 | Popcnt | Aes);
  EXPECT_TRUE(R.Edx & Mmx);
}

} // namespace
