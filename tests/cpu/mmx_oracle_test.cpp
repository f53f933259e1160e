// MMX technology checked against the host processor (STYLE 2.8, differential tests): the
// MMX instructions and the SSE/SSE2/SSSE3 forms on MM registers, each run natively and in
// the emulator from the same deterministic random MM, XMM, GPR and memory state. The
// native snippet loads MM0-MM7 from, and stores them back to, a data area on its own code
// page (RIP-relative, so no register is clobbered) and ends with EMMS. All MM and XMM
// registers, RAX/RCX/RDX/RBX, MXCSR and the memory window must match exactly. Fixed tests
// cover the x87 aliasing rules (TOP, tags, exponent), EMMS and the CR0.EM/CR0.TS/#MF
// checks (SDM Vol. 1, MMX Technology Programming Environment; SDM Vol. 3A, Table "Effect
// of the MP, EM, and TS Flags ...").
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

enum class Kind : uint8_t { Mm, Xmm, Gpr, Mem, MmOrMem, XmmOrMem, GprOrMem, Digit };

struct Row {
  const char *Name;
  uint8_t Prefix;          ///< mandatory prefix: 0, 0x66, 0xf2, 0xf3
  std::vector<uint8_t> Op; ///< opcode bytes after 0F
  Kind Reg, Rm;
  bool Imm = false;
  bool Fp = false;    ///< floating-point lanes (the CVT forms)
  bool RexW = false;
  uint8_t Digit = 0;  ///< ModRM.reg for Kind::Digit
  bool Aligned = false;
  bool Ssse3 = false; ///< needs SSSE3 on the host
};

constexpr Kind MM = Kind::Mm, MMM = Kind::MmOrMem, X = Kind::Xmm, XM = Kind::XmmOrMem,
               G = Kind::Gpr, GM = Kind::GprOrMem, M = Kind::Mem, D = Kind::Digit;

// SDM Vol. 2, opcode column of each instruction page (NP 0F xx forms).
const std::vector<Row> &rows() {
  static const std::vector<Row> R = {
#define VMX_MM(Name, Opc) {Name, 0, {Opc}, MM, MMM}
      VMX_MM("PUNPCKLBW", 0x60), VMX_MM("PUNPCKLWD", 0x61), VMX_MM("PUNPCKLDQ", 0x62),
      VMX_MM("PACKSSWB", 0x63), VMX_MM("PCMPGTB", 0x64), VMX_MM("PCMPGTW", 0x65),
      VMX_MM("PCMPGTD", 0x66), VMX_MM("PACKUSWB", 0x67), VMX_MM("PUNPCKHBW", 0x68),
      VMX_MM("PUNPCKHWD", 0x69), VMX_MM("PUNPCKHDQ", 0x6a), VMX_MM("PACKSSDW", 0x6b),
      VMX_MM("PCMPEQB", 0x74), VMX_MM("PCMPEQW", 0x75), VMX_MM("PCMPEQD", 0x76),
      VMX_MM("PSRLW", 0xd1), VMX_MM("PSRLD", 0xd2), VMX_MM("PSRLQ", 0xd3),
      VMX_MM("PADDQ", 0xd4), VMX_MM("PMULLW", 0xd5), VMX_MM("PSUBUSB", 0xd8),
      VMX_MM("PSUBUSW", 0xd9), VMX_MM("PMINUB", 0xda), VMX_MM("PAND", 0xdb),
      VMX_MM("PADDUSB", 0xdc), VMX_MM("PADDUSW", 0xdd), VMX_MM("PMAXUB", 0xde),
      VMX_MM("PANDN", 0xdf), VMX_MM("PAVGB", 0xe0), VMX_MM("PSRAW", 0xe1),
      VMX_MM("PSRAD", 0xe2), VMX_MM("PAVGW", 0xe3), VMX_MM("PMULHUW", 0xe4),
      VMX_MM("PMULHW", 0xe5), VMX_MM("PSUBSB", 0xe8), VMX_MM("PSUBSW", 0xe9),
      VMX_MM("PMINSW", 0xea), VMX_MM("POR", 0xeb), VMX_MM("PADDSB", 0xec),
      VMX_MM("PADDSW", 0xed), VMX_MM("PMAXSW", 0xee), VMX_MM("PXOR", 0xef),
      VMX_MM("PSLLW", 0xf1), VMX_MM("PSLLD", 0xf2), VMX_MM("PSLLQ", 0xf3),
      VMX_MM("PMULUDQ", 0xf4), VMX_MM("PMADDWD", 0xf5), VMX_MM("PSADBW", 0xf6),
      VMX_MM("PSUBB", 0xf8), VMX_MM("PSUBW", 0xf9), VMX_MM("PSUBD", 0xfa),
      VMX_MM("PSUBQ", 0xfb), VMX_MM("PADDB", 0xfc), VMX_MM("PADDW", 0xfd),
      VMX_MM("PADDD", 0xfe),
#undef VMX_MM
      // Shifts by imm8 (groups 12, 13, 14; no PSRLDQ/PSLLDQ on MM registers).
      {"PSRLW imm", 0, {0x71}, D, MM, true, false, false, 2},
      {"PSRAW imm", 0, {0x71}, D, MM, true, false, false, 4},
      {"PSLLW imm", 0, {0x71}, D, MM, true, false, false, 6},
      {"PSRLD imm", 0, {0x72}, D, MM, true, false, false, 2},
      {"PSRAD imm", 0, {0x72}, D, MM, true, false, false, 4},
      {"PSLLD imm", 0, {0x72}, D, MM, true, false, false, 6},
      {"PSRLQ imm", 0, {0x73}, D, MM, true, false, false, 2},
      {"PSLLQ imm", 0, {0x73}, D, MM, true, false, false, 6},
      // Moves.
      {"MOVD mm, r/m32", 0, {0x6e}, MM, GM},
      {"MOVQ mm, r64", 0, {0x6e}, MM, G, false, false, true},
      {"MOVD r/m32, mm", 0, {0x7e}, MM, GM},
      {"MOVQ r64, mm", 0, {0x7e}, MM, G, false, false, true},
      {"MOVQ mm, mm/m64", 0, {0x6f}, MM, MMM},
      {"MOVQ mm/m64, mm", 0, {0x7f}, MM, MMM},
      {"MOVNTQ", 0, {0xe7}, MM, M},
      {"MOVQ2DQ", 0xf3, {0xd6}, X, MM},
      {"MOVDQ2Q", 0xf2, {0xd6}, MM, X},
      // SSE additions on MM registers.
      {"PSHUFW", 0, {0x70}, MM, MMM, true},
      {"PINSRW", 0, {0xc4}, MM, GM, true},
      {"PEXTRW", 0, {0xc5}, G, MM, true},
      {"PMOVMSKB", 0, {0xd7}, G, MM},
      // SSSE3 on MM registers.
      {"PSHUFB", 0, {0x38, 0x00}, MM, MMM, false, false, false, 0, false, true},
      {"PHADDW", 0, {0x38, 0x01}, MM, MMM, false, false, false, 0, false, true},
      {"PHADDD", 0, {0x38, 0x02}, MM, MMM, false, false, false, 0, false, true},
      {"PHADDSW", 0, {0x38, 0x03}, MM, MMM, false, false, false, 0, false, true},
      {"PMADDUBSW", 0, {0x38, 0x04}, MM, MMM, false, false, false, 0, false, true},
      {"PHSUBW", 0, {0x38, 0x05}, MM, MMM, false, false, false, 0, false, true},
      {"PHSUBD", 0, {0x38, 0x06}, MM, MMM, false, false, false, 0, false, true},
      {"PHSUBSW", 0, {0x38, 0x07}, MM, MMM, false, false, false, 0, false, true},
      {"PSIGNB", 0, {0x38, 0x08}, MM, MMM, false, false, false, 0, false, true},
      {"PSIGNW", 0, {0x38, 0x09}, MM, MMM, false, false, false, 0, false, true},
      {"PSIGND", 0, {0x38, 0x0a}, MM, MMM, false, false, false, 0, false, true},
      {"PMULHRSW", 0, {0x38, 0x0b}, MM, MMM, false, false, false, 0, false, true},
      {"PABSB", 0, {0x38, 0x1c}, MM, MMM, false, false, false, 0, false, true},
      {"PABSW", 0, {0x38, 0x1d}, MM, MMM, false, false, false, 0, false, true},
      {"PABSD", 0, {0x38, 0x1e}, MM, MMM, false, false, false, 0, false, true},
      {"PALIGNR", 0, {0x3a, 0x0f}, MM, MMM, true, false, false, 0, false, true},
      // Conversions between MM and XMM registers.
      {"CVTPI2PS", 0, {0x2a}, X, MMM, false, true},
      {"CVTPS2PI", 0, {0x2d}, MM, XM, false, true},
      {"CVTTPS2PI", 0, {0x2c}, MM, XM, false, true},
      {"CVTPI2PD", 0x66, {0x2a}, X, MMM, false, true},
      {"CVTPD2PI", 0x66, {0x2d}, MM, XM, false, true, false, 0, true},
      {"CVTTPD2PI", 0x66, {0x2c}, MM, XM, false, true, false, 0, true},
  };
  return R;
}

using Form = OracleForm<Row>;

std::vector<Form> allForms() {
  std::vector<Form> F;
  for (const Row &R : rows()) {
    const bool Mem = R.Rm == Kind::Mem || R.Rm == Kind::MmOrMem || R.Rm == Kind::XmmOrMem ||
                     R.Rm == Kind::GprOrMem;
    if (R.Rm != Kind::Mem)
      F.push_back({&R, false});
    if (Mem)
      F.push_back({&R, true});
  }
  return F;
}

constexpr unsigned kMemBytes = 64;
constexpr unsigned kMmArea = 2048; ///< MM0-7 on the native code page

/// movq mm<R>, [rip + to Area + 8R] (Store = false) or movq [rip + ...], mm<R>.
void ripMovq(std::vector<uint8_t> &B, bool Store, unsigned R) {
  const size_t At = B.size();
  B.insert(B.end(), {0x0f, uint8_t(Store ? 0x7f : 0x6f), uint8_t((R << 3) | 5)});
  const int32_t Disp = int32_t(kMmArea + 8 * R) - int32_t(At + 7);
  uint8_t D[4];
  std::memcpy(D, &Disp, 4);
  B.insert(B.end(), D, D + 4);
}

/// The native snippet around Code: load MM0-7, Code, store MM0-7, EMMS.
std::vector<uint8_t> nativeSnippet(const std::vector<uint8_t> &Code) {
  std::vector<uint8_t> B;
  for (unsigned R = 0; R < 8; ++R)
    ripMovq(B, false, R);
  B.insert(B.end(), Code.begin(), Code.end());
  for (unsigned R = 0; R < 8; ++R)
    ripMovq(B, true, R);
  B.insert(B.end(), {0x0f, 0x77}); // emms
  return B;
}

class MmxOracle : public ::testing::TestWithParam<Form> {};

TEST_P(MmxOracle, MatchesHostOnRandomInputs) {
  const Row &R = *GetParam().R;
  const bool MemForm = GetParam().MemForm;
  if (R.Ssse3 && !__builtin_cpu_supports("ssse3"))
    GTEST_SKIP() << "the host lacks SSSE3";
  if (!__builtin_cpu_supports("mmx"))
    GTEST_SKIP() << "the host lacks MMX";
  NativeCode Native;
  ASSERT_TRUE(Native.valid());
  TestMachine Mc;
  Mc.setupLongMode();
  alignas(64) uint8_t HostMem[kMemBytes];
  SplitMix64 Rng(0x3a3a ^ std::hash<std::string>{}(oracleFormName(R.Name, MemForm)));
  auto pick = [&](Kind K) -> unsigned {
    switch (K) {
    case Kind::Gpr: case Kind::GprOrMem: return unsigned(Rng.nextBelow(4));
    case Kind::Xmm: case Kind::XmmOrMem: return unsigned(Rng.nextBelow(16));
    case Kind::Digit: return R.Digit;
    default: return unsigned(Rng.nextBelow(8));
    }
  };
  unsigned Failures = 0;
  for (unsigned It = 0; It < 1500 && Failures < 5; ++It) {
    const unsigned RegNo = pick(R.Reg);
    const unsigned RmNo = MemForm ? 6 : pick(R.Rm == Kind::MmOrMem ? Kind::Mm : R.Rm);
    const uint8_t Imm = uint8_t(It); // every imm8 value several times
    const std::vector<uint8_t> Code =
        encodeLegacySse(R.Prefix, R.Op, R.RexW, R.Imm, MemForm, RegNo, RmNo, Imm);
    uint64_t Mm[8];
    for (uint64_t &V : Mm)
      V = R.Fp ? randomLanes(Rng, Elem::I32) : interesting(Rng);
    NativeFpState In;
    for (Xmm &V : In.R.X)
      V = R.Fp ? Xmm{randomLanes(Rng, R.Prefix ? Elem::F64 : Elem::F32),
                     randomLanes(Rng, R.Prefix ? Elem::F64 : Elem::F32)}
               : Xmm{interesting(Rng), interesting(Rng)};
    // Shift counts: mostly in range so that every lane width sees real shifts.
    if (Rng.nextBelow(2))
      Mm[RmNo & 7] = Rng.nextBelow(70);
    In.R.Rax = interesting(Rng);
    In.R.Rcx = interesting(Rng);
    In.R.Rdx = interesting(Rng);
    In.R.Rbx = interesting(Rng);
    In.Mxcsr = R.Fp ? randomMxcsr(Rng, 0) : sse::mxcsr::Initial;
    In.Rflags = 0;
    const unsigned Off = R.Aligned ? 16 * unsigned(Rng.nextBelow(3))
                                   : unsigned(Rng.nextBelow(kMemBytes - 16 + 1));
    uint8_t MemIn[kMemBytes];
    for (unsigned B = 0; B < kMemBytes; B += 8) {
      uint64_t V = R.Fp ? randomLanes(Rng, R.Prefix ? Elem::F64 : Elem::F32) : interesting(Rng);
      if (!R.Fp && Rng.nextBelow(4) == 0)
        V = Rng.nextBelow(70); // a shift count
      std::memcpy(MemIn + B, &V, 8);
    }
    std::string Where = std::string(R.Name) + (MemForm ? " [rsi]" : "") + " iteration " +
                        std::to_string(It) + " reg " + std::to_string(RegNo) + " rm " +
                        std::to_string(RmNo) + " imm " + std::to_string(Imm);

    // Host.
    NativeFpState Host = In;
    std::memcpy(HostMem, MemIn, kMemBytes);
    Host.R.Rsi = reinterpret_cast<uint64_t>(HostMem + Off);
    Native.set(nativeSnippet(Code));
    uint8_t *Area = static_cast<uint8_t *>(Native.entry()) + kMmArea;
    std::memcpy(Area, Mm, sizeof(Mm));
    ASSERT_FALSE(runNativeFp(Native, Host)) << Where << ": host trapped";
    uint64_t HostMm[8];
    std::memcpy(HostMm, Area, sizeof(HostMm));

    // Emulator: MMX state as the native prologue leaves it.
    std::vector<uint8_t> EmuCode = Code;
    EmuCode.push_back(0xf4);
    Mc.loadCode(EmuCode);
    loadOracleInput(Mc, In.R, Off, MemIn, kMemBytes);
    for (unsigned K = 0; K < 8; ++K)
      sse::mmx::write(Mc.S, K, Mm[K]);
    sse::mmx::enter(Mc.S);
    Mc.S.Mxcsr = In.Mxcsr;
    Mc.S.Rflags = rflags::Fixed1;
    const StopReason Why = Mc.run(10);
    if (Why != StopReason::Halted || Mc.S.Rip != kCodeBase + EmuCode.size()) {
      ADD_FAILURE() << Where << ": emulator stopped with " << int(Why) << " vector "
                    << faultVector(Mc, Why);
      ++Failures;
      continue;
    }
    bool Ok = sameOracleRegs(Mc, Host.R, Where);
    for (unsigned K = 0; K < 8; ++K)
      if (sse::mmx::read(Mc.S, K) != HostMm[K]) {
        ADD_FAILURE() << Where << ": MM" << K << " emulator 0x" << std::hex
                      << sse::mmx::read(Mc.S, K) << " host 0x" << HostMm[K];
        Ok = false;
      }
    if (Mc.S.Mxcsr != Host.Mxcsr) {
      ADD_FAILURE() << Where << ": MXCSR emulator 0x" << std::hex << Mc.S.Mxcsr << " host 0x"
                    << Host.Mxcsr;
      Ok = false;
    }
    uint8_t EmuMem[kMemBytes];
    Mc.Mem.copyOut(Hpa(kDataBase), EmuMem, kMemBytes);
    if (std::memcmp(EmuMem, HostMem, kMemBytes) != 0) {
      ADD_FAILURE() << Where << ": memory differs";
      Ok = false;
    }
    Failures += !Ok;
  }
}

INSTANTIATE_TEST_SUITE_P(ProgrammingWithMmx, MmxOracle, ::testing::ValuesIn(allForms()),
                         OracleFormName());

// --- the x87 aliasing and the availability rules -----------------------------------------

/// A long-mode machine with the fault-catching IDT; x87 state away from MMX state: TOP = 5,
/// all tags empty, exponents zero.
void setupX87(TestMachine &Mc) {
  Mc.setupLongMode();
  installFaultIdt(Mc);
  Mc.S.Gpr[RSP] = 0x80000;
  Mc.S.Cr0 |= cr0::NE;
  Mc.S.Fsw = 5u << 11;
  Mc.S.Ftw = 0;
  for (auto &R : Mc.S.St)
    std::memset(R, 0, 10);
}

TEST(ProgrammingWithMmx, MmxInstructionSetsTopZeroTagsValidAndExponentOnes) {
  TestMachine Mc;
  setupX87(Mc);
  std::memcpy(Mc.S.St[1], "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
  Mc.loadCode({0x0f, 0xfc, 0xc1, 0xf4}); // paddb mm0, mm1
  ASSERT_EQ(Mc.run(10), StopReason::Halted);
  EXPECT_EQ(sse::mmx::read(Mc.S, 0), 0x0807060504030201ull);
  EXPECT_EQ((Mc.S.Fsw >> 11) & 7, 0);
  EXPECT_EQ(Mc.S.Ftw, 0xff);
  EXPECT_EQ(Mc.S.St[0][8], 0xff);
  EXPECT_EQ(Mc.S.St[0][9], 0xff);
  EXPECT_EQ(Mc.S.St[1][9], 0) << "a register only read keeps its exponent";
}

TEST(ProgrammingWithMmx, EmmsEmptiesEveryTag) {
  TestMachine Mc;
  setupX87(Mc);
  Mc.loadCode({0x0f, 0xef, 0xc0, 0x0f, 0x77, 0xf4}); // pxor mm0, mm0; emms
  ASSERT_EQ(Mc.run(10), StopReason::Halted);
  EXPECT_EQ(Mc.S.Ftw, 0);
  EXPECT_EQ((Mc.S.Fsw >> 11) & 7, 0);
}

TEST(ProgrammingWithMmx, AvailabilityFaultsLeaveTheX87StateAlone) {
  struct Case {
    const char *Name;
    uint64_t Cr0Set;
    uint16_t Fsw;
    int Vector;
  };
  const Case Cases[] = {
      {"CR0.EM = 1: #UD", cr0::EM, 5u << 11, vec::UD},
      {"CR0.TS = 1: #NM", cr0::TS, 5u << 11, vec::NM},
      {"pending x87 exception (FSW.ES), CR0.NE = 1: #MF", 0, (5u << 11) | 0x81, vec::MF},
  };
  const std::vector<std::vector<uint8_t>> Forms = {
      {0x0f, 0xfc, 0xc1, 0xf4},       // paddb mm0, mm1
      {0x0f, 0x77, 0xf4},             // emms
      {0x0f, 0x6e, 0xc0, 0xf4},       // movd mm0, eax
      {0x0f, 0x70, 0xc1, 0x1b, 0xf4}, // pshufw mm0, mm1, 0x1b
  };
  for (const Case &K : Cases)
    for (const auto &Code : Forms) {
      SCOPED_TRACE(K.Name);
      TestMachine Mc;
      setupX87(Mc);
      Mc.S.Cr0 |= K.Cr0Set;
      Mc.S.Fsw = K.Fsw;
      Mc.loadCode(Code);
      EXPECT_EQ(faultVector(Mc, Mc.run(10)), K.Vector);
      EXPECT_EQ(Mc.S.Fsw, K.Fsw);
      EXPECT_EQ(Mc.S.Ftw, 0);
    }
}

TEST(ProgrammingWithMmx, PendingX87ExceptionWithoutCr0NeStopsAsUnimplemented) {
  TestMachine Mc;
  setupX87(Mc);
  Mc.S.Cr0 &= ~cr0::NE;
  Mc.S.Fsw = 0x81;
  Mc.loadCode({0x0f, 0xfc, 0xc1, 0xf4}); // paddb mm0, mm1
  EXPECT_EQ(Mc.run(10), StopReason::Unimplemented);
}

TEST(ProgrammingWithMmx, MmxDoesNotDependOnOsfxsrButItsSseFormsDo) {
  TestMachine Mc;
  setupX87(Mc);
  Mc.S.Cr4 &= ~cr4::OSFXSR;
  Mc.loadCode({0x0f, 0xfc, 0xc1, 0xf4}); // paddb mm0, mm1
  EXPECT_EQ(Mc.run(10), StopReason::Halted);
  TestMachine Mc2;
  setupX87(Mc2);
  Mc2.S.Cr4 &= ~cr4::OSFXSR;
  Mc2.loadCode({0xf3, 0x0f, 0xd6, 0xc1, 0xf4}); // movq2dq xmm0, mm1
  EXPECT_EQ(faultVector(Mc2, Mc2.run(10)), int(vec::UD));
}

TEST(ProgrammingWithMmx, MaskmovqStoresTheSelectedBytesAtRdi) {
  TestMachine Mc;
  setupX87(Mc);
  sse::mmx::write(Mc.S, 0, 0x8877665544332211ull);
  sse::mmx::write(Mc.S, 1, 0x80000080ff7f0080ull); // bytes 0, 3, 4, 7 selected
  const uint64_t Old = 0xaaaaaaaaaaaaaaaaull;
  Mc.write(kDataBase + 3, &Old, 8);
  Mc.S.Gpr[RDI] = kDataBase + 3; // no alignment rule
  Mc.loadCode({0x0f, 0xf7, 0xc1, 0xf4}); // maskmovq mm0, mm1
  ASSERT_EQ(Mc.run(10), StopReason::Halted);
  uint64_t New;
  Mc.Mem.copyOut(Hpa(kDataBase + 3), &New, 8);
  EXPECT_EQ(New, 0x88aaaa5544aaaa11ull);
  EXPECT_EQ(Mc.S.Ftw, 0xff);
}

TEST(ProgrammingWithMmx, Cvtpi2pdFromMemoryLeavesTheX87StateAlone) {
  // CVTPI2PD xmm, m64 neither takes x87 exceptions nor switches to MMX state; its
  // register form does both (SDM Vol. 2A, CVTPI2PD).
  TestMachine Mc;
  setupX87(Mc);
  Mc.S.Fsw = 0x81 | (5u << 11); // a pending x87 exception
  const uint64_t Ints = 0xfffffffe00000003ull; // {3, -2}
  Mc.write(kDataBase, &Ints, 8);
  Mc.S.Gpr[RSI] = kDataBase;
  Mc.loadCode({0x66, 0x0f, 0x2a, 0x06, 0xf4}); // cvtpi2pd xmm0, [rsi]
  ASSERT_EQ(Mc.run(10), StopReason::Halted);
  EXPECT_EQ(Mc.S.XmmReg[0].Lo, 0x4008000000000000ull); // 3.0
  EXPECT_EQ(Mc.S.XmmReg[0].Hi, 0xc000000000000000ull); // -2.0
  EXPECT_EQ(Mc.S.Ftw, 0);
  EXPECT_EQ(Mc.S.Fsw, 0x81 | (5u << 11));
  TestMachine Mc2;
  setupX87(Mc2);
  Mc2.S.Fsw = 0x81;
  Mc2.loadCode({0x66, 0x0f, 0x2a, 0xc1, 0xf4}); // cvtpi2pd xmm0, mm1
  EXPECT_EQ(faultVector(Mc2, Mc2.run(10)), int(vec::MF));
}

TEST(ProgrammingWithMmx, CpuidReportsMmx) {
  TestMachine Mc;
  EXPECT_TRUE(cpuidQuery(Mc.Cpu_, 1, 0).Edx & cpuidbit::Mmx);
}

} // namespace
