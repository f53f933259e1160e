// Host-oracle tests (tests/cpu/insn_oracle.h): every general-purpose instruction form the
// emulator implements that can run natively in a 64-bit host process, on thousands of
// random operand sets, in 64-bit mode and (forms without REX/stack/address-size
// differences) in 32-bit protected mode. SDM Vol. 1, Programming with General-Purpose
// Instructions; flag definitions from each instruction page of SDM Vol. 2.
#include "tests/cpu/insn_oracle.h"

using namespace vmxsim;
using namespace vmxsim::test;
using namespace vmxsim::test::oracle;

namespace {

constexpr unsigned kTrials64 = 1000;
constexpr unsigned kTrials32 = 200;
constexpr uint64_t kArith = rflags::Arith;
constexpr uint64_t kNoAf = rflags::Arith & ~rflags::AF;
constexpr uint64_t kSzp = rflags::SF | rflags::ZF | rflags::PF;
constexpr uint16_t kRbx = 1u << RBX;

SplitMix64 &buildRng() {
  static SplitMix64 G(0xb01d);
  return G;
}

struct Table {
  std::vector<Row> Rows;
  Row &add(std::string Name, Bytes B, uint64_t Flags = kArith, uint32_t Opts = 0,
           uint16_t Ptrs = 0) {
    Row R;
    R.Name = std::move(Name);
    R.Bytes = std::move(B);
    R.Flags = Flags;
    R.Opts = Opts;
    R.Ptrs = Ptrs;
    Rows.push_back(std::move(R));
    return Rows.back();
  }
};

uint32_t x32If(unsigned Size) { return Size == 8 ? 0 : opt::X32; }

void runBoth(const Table &T, const char *What) {
  unsigned N64 = runRows(T.Rows, kTrials64, false);
  unsigned N32 = runRows(T.Rows, kTrials32, true);
  std::printf("[oracle] %s: %u forms compared in 64-bit mode, %u also in 32-bit mode\n", What,
              N64, N32);
  EXPECT_GT(N64, 0u);
}

// --- ALU ---------------------------------------------------------------------------------

Table aluTable() {
  Table T;
  static const char *Names[8] = {"add", "or", "adc", "sbb", "and", "sub", "xor", "cmp"};
  for (unsigned K = 0; K < 8; ++K) {
    const uint64_t F = (K == 1 || K == 4 || K == 6) ? kNoAf : kArith;
    const uint8_t B = uint8_t(K * 8);
    const std::string N = Names[K];
    for (unsigned S : {1u, 2u, 4u, 8u}) {
      const std::string Sz = sizeName(S);
      const uint32_t X = x32If(S);
      const uint64_t Imm = operandValue(buildRng());
      T.add(N + Sz + " r/m,r (reg)", sized(S, {}, B, B + 1, {modrmRR(1, 0)}), F, X);
      T.add(N + Sz + " r/m,r (mem)", sized(S, {}, B, B + 1, memRbx(2)), F, X, kRbx);
      T.add(N + Sz + " r,r/m (reg)", sized(S, {}, B + 2, B + 3, {modrmRR(2, 6)}), F, X);
      T.add(N + Sz + " r,r/m (mem)", sized(S, {}, B + 2, B + 3, memRbx(2)), F, X, kRbx);
      T.add(N + Sz + " acc,imm", sized(S, {}, B + 4, B + 5, immBytes(S, Imm)), F, X);
      T.add(N + Sz + " r/m,imm (reg)", sized(S, {}, 0x80, 0x81, cat({modrmRR(K, 1)}, immBytes(S, Imm))), F, X);
      T.add(N + Sz + " r/m,imm (mem)", sized(S, {}, 0x80, 0x81, cat(memRbx(K), immBytes(S, Imm))), F, X, kRbx);
      if (S > 1) {
        T.add(N + Sz + " r/m,imm8 (reg)", sized(S, {}, 0x83, 0x83, {modrmRR(K, 1), uint8_t(Imm)}), F, X);
        T.add(N + Sz + " r/m,imm8 (mem)", sized(S, {}, 0x83, 0x83, cat(memRbx(K), {uint8_t(Imm)})), F, X, kRbx);
      }
      if (K != 7) {
        T.add("lock " + N + Sz + " m,r", sized(S, {}, B, B + 1, memRbx(2), {0xf0}), F, X, kRbx);
        T.add("lock " + N + Sz + " m,imm", sized(S, {}, 0x80, 0x81, cat(memRbx(K), immBytes(S, Imm)), {0xf0}), F, X, kRbx);
      }
    }
    // High-byte and REX registers.
    T.add(N + "8 ah,bh", {B, modrmRR(7, 4)}, F, opt::X32);
    T.add(N + "8 sil,r9b", {0x44, B, modrmRR(1, 6)}, F);
    T.add(N + "64 r9,r12", {0x4d, uint8_t(B + 1), modrmRR(4, 1)}, F);
    T.add(N + "32 r10d,[rbx+rcx*4+8]", {0x44, uint8_t(B + 3), 0x54, 0x8b, 0x08}, F, 0, kRbx)
        .Fix = [](const Row &, RegState &In, uint8_t *, SplitMix64 &G) { In.Gpr[RCX] = G.nextBelow(64); };
  }
  for (unsigned S : {1u, 2u, 4u, 8u}) {
    const std::string Sz = sizeName(S);
    const uint32_t X = x32If(S);
    const uint64_t Imm = operandValue(buildRng());
    T.add("test" + Sz + " r/m,r (reg)", sized(S, {}, 0x84, 0x85, {modrmRR(1, 2)}), kNoAf, X);
    T.add("test" + Sz + " r/m,r (mem)", sized(S, {}, 0x84, 0x85, memRbx(1)), kNoAf, X, kRbx);
    T.add("test" + Sz + " acc,imm", sized(S, {}, 0xa8, 0xa9, immBytes(S, Imm)), kNoAf, X);
    T.add("test" + Sz + " r/m,imm (reg)", sized(S, {}, 0xf6, 0xf7, cat({modrmRR(0, 1)}, immBytes(S, Imm))), kNoAf, X);
    T.add("test" + Sz + " r/m,imm (mem)", sized(S, {}, 0xf6, 0xf7, cat(memRbx(0), immBytes(S, Imm))), kNoAf, X, kRbx);
    static const struct {
      const char *Name;
      uint8_t Op8, OpV, Digit;
    } Un[] = {{"inc", 0xfe, 0xff, 0}, {"dec", 0xfe, 0xff, 1}, {"not", 0xf6, 0xf7, 2},
              {"neg", 0xf6, 0xf7, 3}};
    for (const auto &U : Un) {
      T.add(U.Name + Sz + " (reg)", sized(S, {}, U.Op8, U.OpV, {modrmRR(U.Digit, 1)}), kArith, X);
      T.add(U.Name + Sz + " (mem)", sized(S, {}, U.Op8, U.OpV, memRbx(U.Digit)), kArith, X, kRbx);
      T.add("lock " + std::string(U.Name) + Sz + " (mem)",
            sized(S, {}, U.Op8, U.OpV, memRbx(U.Digit), {0xf0}), kArith, X, kRbx);
    }
  }
  return T;
}

// --- shifts and rotates --------------------------------------------------------------------

unsigned shiftCount(const Row &R, const RegState &In) {
  unsigned C = R.Imm >= 0 ? unsigned(R.Imm) : unsigned(In.Gpr[RCX] & 0xff);
  return C & (R.Size == 8 ? 63 : 31);
}

// Kind: the /digit (0 ROL 1 ROR 2 RCL 3 RCR 4 SHL 5 SHR 6 SAL 7 SAR).
uint64_t shiftMask(const Row &R, const RegState &In) {
  const unsigned C = shiftCount(R, In), N = 8 * R.Size;
  if (C == 0)
    return kArith;
  const uint64_t Of = C == 1 ? rflags::OF : 0;
  if (R.Kind < 4) // rotates: only CF and OF change; OF defined for count 1 only
    return (kArith & ~rflags::OF) | Of;
  const uint64_t Cf = (R.Kind == 7 || C < N) ? rflags::CF : 0;
  return kSzp | Cf | Of;
}

uint64_t doubleShiftMask(const Row &R, const RegState &In) {
  const unsigned C = shiftCount(R, In);
  if (C == 0)
    return kArith;
  return kSzp | rflags::CF | (C == 1 ? rflags::OF : 0);
}

Table shiftTable() {
  Table T;
  static const char *Names[8] = {"rol", "ror", "rcl", "rcr", "shl", "shr", "sal", "sar"};
  for (unsigned K = 0; K < 8; ++K) {
    for (unsigned S : {1u, 2u, 4u, 8u}) {
      const std::string N = std::string(Names[K]) + sizeName(S);
      const uint32_t X = x32If(S);
      auto Add = [&](std::string Name, Bytes B, int Imm, uint16_t Ptrs) {
        Row &R = T.add(std::move(Name), std::move(B), kArith, X, Ptrs);
        R.Mask = shiftMask;
        R.Size = S;
        R.Imm = Imm;
        R.Kind = int(K);
      };
      if (K == 6 && S != 4)
        continue; // SAL is SHL: one size suffices
      Add(N + " r/m,1 (reg)", sized(S, {}, 0xd0, 0xd1, {modrmRR(K, 2)}), 1, 0);
      Add(N + " r/m,1 (mem)", sized(S, {}, 0xd0, 0xd1, memRbx(K)), 1, kRbx);
      Add(N + " r/m,cl (reg)", sized(S, {}, 0xd2, 0xd3, {modrmRR(K, 2)}), -1, 0);
      Add(N + " r/m,cl (mem)", sized(S, {}, 0xd2, 0xd3, memRbx(K)), -1, kRbx);
      for (unsigned Imm : {1u, unsigned(buildRng().nextBelow(64)), unsigned(buildRng().nextBelow(256))}) {
        Add(N + " r/m,imm8=" + std::to_string(Imm) + " (reg)",
            sized(S, {}, 0xc0, 0xc1, {modrmRR(K, 2), uint8_t(Imm)}), int(Imm), 0);
        Add(N + " r/m,imm8=" + std::to_string(Imm) + " (mem)",
            sized(S, {}, 0xc0, 0xc1, cat(memRbx(K), {uint8_t(Imm)})), int(Imm), kRbx);
      }
    }
  }
  // SHLD/SHRD. 16-bit counts above 16 give an undefined result: kept out of the oracle.
  for (bool Left : {true, false}) {
    for (unsigned S : {2u, 4u, 8u}) {
      const std::string N = std::string(Left ? "shld" : "shrd") + sizeName(S);
      const uint8_t OpI = Left ? 0xa4 : 0xac, OpC = uint8_t(OpI + 1);
      const uint32_t X = x32If(S);
      auto Add = [&](std::string Name, Bytes B, int Imm, uint16_t Ptrs) {
        Row &R = T.add(std::move(Name), std::move(B), kArith, X, Ptrs);
        R.Mask = doubleShiftMask;
        R.Size = S;
        R.Imm = Imm;
        if (Imm < 0 && S == 2)
          R.Fix = [](const Row &, RegState &In, uint8_t *, SplitMix64 &G) {
            In.Gpr[RCX] = (In.Gpr[RCX] & ~0xffull) | G.nextBelow(17);
          };
      };
      Add(N + " r/m,r,cl (reg)", sized(S, {0x0f}, OpC, OpC, {modrmRR(6, 2)}), -1, 0);
      Add(N + " r/m,r,cl (mem)", sized(S, {0x0f}, OpC, OpC, memRbx(6)), -1, kRbx);
      for (unsigned Imm : {1u, unsigned(buildRng().nextBelow(S == 2 ? 17 : 8 * S)), 8 * S - 1}) {
        if (S == 2 && Imm > 16)
          continue;
        Add(N + " r/m,r,imm8=" + std::to_string(Imm) + " (reg)",
            sized(S, {0x0f}, OpI, OpI, {modrmRR(6, 2), uint8_t(Imm)}), int(Imm), 0);
        Add(N + " r/m,r,imm8=" + std::to_string(Imm) + " (mem)",
            sized(S, {0x0f}, OpI, OpI, cat(memRbx(6), {uint8_t(Imm)})), int(Imm), kRbx);
      }
    }
  }
  return T;
}

// --- multiply and divide ---------------------------------------------------------------

// Kind bit 0: signed; bit 1: divisor in memory. Keeps the quotient in range (no #DE).
void divFix(const Row &R, RegState &In, uint8_t *Mem, SplitMix64 &G) {
  const unsigned S = R.Size;
  const uint64_t M = sizeMask(S);
  const bool Signed = R.Kind & 1, InMem = R.Kind & 2;
  uint64_t D = InMem ? getMem(Mem, kMemOff, S) : In.Gpr[RCX] & M;
  if (D == 0)
    D = 1 + G.nextBelow(5);
  uint64_t Lo = S == 1 ? In.Gpr[RAX] & 0xff : In.Gpr[RAX] & M;
  uint64_t Hi = S == 1 ? (In.Gpr[RAX] >> 8) & 0xff : In.Gpr[RDX] & M;
  const uint64_t Msb = uint64_t(1) << (8 * S - 1);
  if (Signed) {
    Hi = (Lo & Msb) ? M : 0;
    if (Lo == Msb && D == M)
      D = 1;
  } else {
    Hi %= D;
  }
  if (InMem)
    putMem(Mem, kMemOff, S, D);
  else
    In.Gpr[RCX] = (In.Gpr[RCX] & ~M) | D;
  if (S == 1)
    In.Gpr[RAX] = (In.Gpr[RAX] & ~0xffffull) | (Hi << 8) | Lo;
  else
    In.Gpr[RDX] = (In.Gpr[RDX] & ~M) | Hi;
}

Table muldivTable() {
  Table T;
  static const char *Names[4] = {"mul", "imul", "div", "idiv"};
  for (unsigned K = 0; K < 4; ++K) {
    for (unsigned S : {1u, 2u, 4u, 8u}) {
      const std::string N = std::string(Names[K]) + sizeName(S);
      const uint64_t F = K < 2 ? (rflags::CF | rflags::OF) : 0;
      for (bool Mem : {false, true}) {
        Row &R = T.add(N + (Mem ? " r/m (mem)" : " r/m (reg)"),
                       sized(S, {}, 0xf6, 0xf7, Mem ? memRbx(4 + K) : Bytes{modrmRR(4 + K, 1)}), F,
                       x32If(S), Mem ? kRbx : 0);
        R.Size = S;
        R.Kind = (K == 3 ? 1 : 0) | (Mem ? 2 : 0);
        if (K >= 2)
          R.Fix = divFix;
      }
    }
  }
  for (unsigned S : {2u, 4u, 8u}) {
    const std::string N = std::string("imul") + sizeName(S);
    const uint64_t F = rflags::CF | rflags::OF;
    const uint64_t Imm = operandValue(buildRng());
    T.add(N + " r,r/m (reg)", sized(S, {0x0f}, 0xaf, 0xaf, {modrmRR(2, 1)}), F, x32If(S));
    T.add(N + " r,r/m (mem)", sized(S, {0x0f}, 0xaf, 0xaf, memRbx(2)), F, x32If(S), kRbx);
    T.add(N + " r,r/m,imm (reg)", sized(S, {}, 0x69, 0x69, cat({modrmRR(2, 1)}, immBytes(S, Imm))), F, x32If(S));
    T.add(N + " r,r/m,imm (mem)", sized(S, {}, 0x69, 0x69, cat(memRbx(2), immBytes(S, Imm))), F, x32If(S), kRbx);
    T.add(N + " r,r/m,imm8 (reg)", sized(S, {}, 0x6b, 0x6b, {modrmRR(2, 1), uint8_t(Imm)}), F, x32If(S));
    T.add(N + " r,r/m,imm8 (mem)", sized(S, {}, 0x6b, 0x6b, cat(memRbx(2), {uint8_t(Imm)})), F, x32If(S), kRbx);
  }
  for (bool W : {false, true}) {
    const std::string N = W ? "mulx64" : "mulx32";
    T.add(N + " r,r,r", vex(2, W, 1, 3, 0xf6, {modrmRR(2, 6)}), kArith, W ? 0 : opt::X32).Needs = need::Bmi2;
    T.add(N + " r,r,m", vex(2, W, 1, 3, 0xf6, memRbx(2)), kArith, W ? 0 : opt::X32, kRbx).Needs = need::Bmi2;
    T.add(N + " same destinations", vex(2, W, 2, 3, 0xf6, {modrmRR(2, 6)}), kArith, W ? 0 : opt::X32).Needs = need::Bmi2;
  }
  return T;
}

} // namespace

TEST(GeneralPurposeInstructions, OracleBinaryArithmeticAndLogicMatchHost) {
  runBoth(aluTable(), "ALU/TEST/INC/DEC/NEG/NOT");
}
TEST(GeneralPurposeInstructions, OracleShiftsAndRotatesMatchHost) {
  runBoth(shiftTable(), "shifts/rotates/SHLD/SHRD");
}
TEST(GeneralPurposeInstructions, OracleMultiplyDivideMatchHost) {
  runBoth(muldivTable(), "MUL/IMUL/DIV/IDIV/MULX");
  if (!(hostNeeds() & need::Bmi2))
    GTEST_SKIP() << "host lacks BMI2: MULX rows were not compared";
}

namespace {

// --- bit test, scan, count, swap, CRC32, BMI, ADX ---------------------------------------

// BT m, r with a register bit offset: keep the addressed operand inside the window
// (signed offsets around [rbx+10h]); the bits above the operand size stay random.
void btOffsetFix(const Row &R, RegState &In, uint8_t *, SplitMix64 &G) {
  int64_t Off = int64_t(G.nextBelow(6001)) - 3000;
  const uint64_t M = sizeMask(R.Size);
  In.Gpr[RCX] = (In.Gpr[RCX] & ~M) | (uint64_t(Off) & M);
}

Table bitTable() {
  Table T;
  static const char *Names[4] = {"bt", "bts", "btr", "btc"};
  static const uint8_t RegOps[4] = {0xa3, 0xab, 0xb3, 0xbb};
  const uint64_t Bt = rflags::CF | rflags::ZF;
  for (unsigned K = 0; K < 4; ++K) {
    for (unsigned S : {2u, 4u, 8u}) {
      const std::string N = std::string(Names[K]) + sizeName(S);
      const uint32_t X = x32If(S);
      const uint8_t Imm = uint8_t(buildRng().next());
      T.add(N + " r/m,r (reg)", sized(S, {0x0f}, RegOps[K], RegOps[K], {modrmRR(1, 2)}), Bt, X);
      Row &M = T.add(N + " r/m,r (mem)", sized(S, {0x0f}, RegOps[K], RegOps[K], memRbx(1)), Bt, X, kRbx);
      M.Size = S;
      M.Fix = btOffsetFix;
      T.add(N + " r/m,imm8 (reg)", sized(S, {0x0f}, 0xba, 0xba, {modrmRR(4 + K, 2), Imm}), Bt, X);
      T.add(N + " r/m,imm8 (mem)", sized(S, {0x0f}, 0xba, 0xba, cat(memRbx(4 + K), {Imm})), Bt, X, kRbx);
      if (K > 0) {
        Row &L = T.add("lock " + N + " m,r", sized(S, {0x0f}, RegOps[K], RegOps[K], memRbx(1), {0xf0}), Bt, X, kRbx);
        L.Size = S;
        L.Fix = btOffsetFix;
        T.add("lock " + N + " m,imm8", sized(S, {0x0f}, 0xba, 0xba, cat(memRbx(4 + K), {Imm}), {0xf0}), Bt, X, kRbx);
      }
    }
  }
  struct Scan {
    const char *Name;
    uint8_t Prefix, Op;
    uint64_t Flags;
    uint32_t Needs;
  };
  static const Scan Scans[] = {
      {"bsf", 0, 0xbc, rflags::ZF, 0},
      {"bsr", 0, 0xbd, rflags::ZF, 0},
      {"tzcnt", 0xf3, 0xbc, rflags::CF | rflags::ZF, need::Bmi1},
      {"lzcnt", 0xf3, 0xbd, rflags::CF | rflags::ZF, need::Lzcnt},
      {"popcnt", 0xf3, 0xb8, kArith, need::Popcnt},
  };
  for (const Scan &Sc : Scans) {
    for (unsigned S : {2u, 4u, 8u}) {
      const std::string N = std::string(Sc.Name) + sizeName(S);
      Bytes P = Sc.Prefix ? Bytes{Sc.Prefix} : Bytes{};
      T.add(N + " r,r/m (reg)", sized(S, {0x0f}, Sc.Op, Sc.Op, {modrmRR(2, 1)}, P), Sc.Flags, x32If(S)).Needs = Sc.Needs;
      T.add(N + " r,r/m (mem)", sized(S, {0x0f}, Sc.Op, Sc.Op, memRbx(2), P), Sc.Flags, x32If(S), kRbx).Needs = Sc.Needs;
    }
  }
  T.add("bswap32 ecx", {0x0f, 0xc9}, kArith, opt::X32);
  T.add("bswap64 rcx", {0x48, 0x0f, 0xc9}, kArith);
  T.add("bswap64 r9", {0x49, 0x0f, 0xc9}, kArith);
  T.add("bswap32 r14d", {0x41, 0x0f, 0xce}, kArith);
  for (unsigned S : {2u, 4u, 8u}) {
    const std::string N = std::string("movbe") + sizeName(S);
    T.add(N + " r,m", sized(S, {0x0f, 0x38}, 0xf0, 0xf0, memRbx(2)), kArith, x32If(S), kRbx).Needs = need::Movbe;
    T.add(N + " m,r", sized(S, {0x0f, 0x38}, 0xf1, 0xf1, memRbx(2)), kArith, x32If(S), kRbx).Needs = need::Movbe;
  }
  struct Crc {
    const char *Name;
    unsigned Size; // the size sized() sees: 1 selects F0, others F1 (+66 / REX.W)
    bool W;
  };
  static const Crc Crcs[] = {{"crc32 r32,r/m8", 1, false}, {"crc32 r64,r/m8", 1, true},
                             {"crc32 r32,r/m16", 2, false}, {"crc32 r32,r/m32", 4, false},
                             {"crc32 r64,r/m64", 8, false}};
  for (const Crc &C : Crcs) {
    for (bool Mem : {false, true}) {
      Bytes Tail = Mem ? memRbx(2) : Bytes{modrmRR(2, 1)};
      Bytes B = sized(C.Size, {0x0f, 0x38}, 0xf0, 0xf1, Tail, {0xf2});
      if (C.W) // REX.W goes right before the 0F escape
        B.insert(B.begin() + 1, 0x48);
      T.add(std::string(C.Name) + (Mem ? " (mem)" : " (reg)"), B, kArith,
            (C.W || C.Size == 8) ? 0 : opt::X32, Mem ? kRbx : 0).Needs = need::Sse42;
    }
  }
  return T;
}

// BEXTR/BZHI controls: mostly in-range start/length/index so the results are non-trivial.
void bmiControlFix(const Row &, RegState &In, uint8_t *, SplitMix64 &G) {
  if (G.nextBelow(4) != 0)
    In.Gpr[RCX] = (In.Gpr[RCX] & ~0xffffull) | (G.nextBelow(72) << 8) | G.nextBelow(72);
}

Table bmiTable() {
  Table T;
  const uint64_t Szco = rflags::SF | rflags::ZF | rflags::CF | rflags::OF;
  struct Op {
    const char *Name;
    unsigned Map, Pp;
    uint8_t Opc;
    int Digit; // >= 0: ModRM.reg digit with VEX.vvvv the destination
    uint64_t Flags;
    uint32_t Needs;
    bool Control;
    bool Imm;
  };
  static const Op Ops[] = {
      {"andn", 2, 0, 0xf2, -1, Szco, need::Bmi1, false, false},
      {"bextr", 2, 0, 0xf7, -1, rflags::ZF | rflags::CF | rflags::OF, need::Bmi1, true, false},
      {"blsi", 2, 0, 0xf3, 3, Szco, need::Bmi1, false, false},
      {"blsmsk", 2, 0, 0xf3, 2, Szco, need::Bmi1, false, false},
      {"blsr", 2, 0, 0xf3, 1, Szco, need::Bmi1, false, false},
      {"bzhi", 2, 0, 0xf5, -1, Szco, need::Bmi2, true, false},
      {"pdep", 2, 3, 0xf5, -1, kArith, need::Bmi2, false, false},
      {"pext", 2, 2, 0xf5, -1, kArith, need::Bmi2, false, false},
      {"rorx", 3, 3, 0xf0, -1, kArith, need::Bmi2, false, true},
      {"sarx", 2, 2, 0xf7, -1, kArith, need::Bmi2, false, false},
      {"shlx", 2, 1, 0xf7, -1, kArith, need::Bmi2, false, false},
      {"shrx", 2, 3, 0xf7, -1, kArith, need::Bmi2, false, false},
  };
  for (const Op &O : Ops) {
    for (bool W : {false, true}) {
      for (bool Mem : {false, true}) {
        const std::string N = std::string(O.Name) + (W ? "64" : "32") + (Mem ? " (mem)" : " (reg)");
        unsigned Reg = O.Digit >= 0 ? unsigned(O.Digit) : 2;
        unsigned Vvvv = O.Digit >= 0 ? 2 : (O.Imm ? 0 : 1);
        Bytes Tail = Mem ? memRbx(Reg) : Bytes{modrmRR(Reg, 6)};
        if (O.Imm)
          Tail.push_back(uint8_t(buildRng().next()));
        Row &R = T.add(N, vex(O.Map, W, Vvvv, O.Pp, O.Opc, Tail), O.Flags, W ? 0 : opt::X32,
                       Mem ? kRbx : 0);
        R.Needs = O.Needs;
        if (O.Control)
          R.Fix = bmiControlFix;
      }
    }
  }
  for (bool Ox : {false, true}) {
    for (unsigned S : {4u, 8u}) {
      const std::string N = std::string(Ox ? "adox" : "adcx") + sizeName(S);
      Bytes P = {uint8_t(Ox ? 0xf3 : 0x66)};
      T.add(N + " r,r/m (reg)", sized(S, {0x0f, 0x38}, 0xf6, 0xf6, {modrmRR(2, 1)}, P), kArith, x32If(S)).Needs = need::Adx;
      T.add(N + " r,r/m (mem)", sized(S, {0x0f, 0x38}, 0xf6, 0xf6, memRbx(2), P), kArith, x32If(S), kRbx).Needs = need::Adx;
    }
  }
  return T;
}

} // namespace

TEST(GeneralPurposeInstructions, OracleBitInstructionsMatchHost) {
  runBoth(bitTable(), "BT*/BSF/BSR/TZCNT/LZCNT/POPCNT/BSWAP/MOVBE/CRC32");
  const uint32_t Want = need::Bmi1 | need::Lzcnt | need::Popcnt | need::Movbe | need::Sse42;
  if ((hostNeeds() & Want) != Want)
    GTEST_SKIP() << "host lacks one of BMI1/LZCNT/POPCNT/MOVBE/SSE4.2: those rows skipped";
}
TEST(GeneralPurposeInstructions, OracleBmiAndAdxMatchHost) {
  const uint32_t Want = need::Bmi1 | need::Bmi2 | need::Adx;
  if ((hostNeeds() & Want) != Want)
    GTEST_SKIP() << "host lacks BMI1/BMI2/ADX";
  runBoth(bmiTable(), "BMI1/BMI2/ADX");
}

namespace {

// --- data movement, exchange, flags -----------------------------------------------------

// CMPXCHG: half the trials make the accumulator equal to the destination. Kind: 1 when
// the destination is [rbx+10h], else RCX.
void cmpxchgFix(const Row &R, RegState &In, uint8_t *Mem, SplitMix64 &G) {
  if (G.nextBelow(2))
    return;
  const uint64_t M = sizeMask(R.Size);
  uint64_t D = R.Kind ? getMem(Mem, kMemOff, R.Size) : In.Gpr[RCX] & M;
  In.Gpr[RAX] = (In.Gpr[RAX] & ~M) | D;
}
// CMPXCHG8B/16B: half the trials make rDX:rAX equal to the memory operand.
void cmpxchgNbFix(const Row &R, RegState &In, uint8_t *Mem, SplitMix64 &G) {
  if (G.nextBelow(2))
    return;
  const unsigned H = R.Size / 2;
  const uint64_t M = sizeMask(H);
  In.Gpr[RAX] = (In.Gpr[RAX] & ~M) | getMem(Mem, kMemOff, H);
  In.Gpr[RDX] = (In.Gpr[RDX] & ~M) | getMem(Mem, kMemOff + H, H);
}

Table dataTable() {
  Table T;
  for (unsigned S : {1u, 2u, 4u, 8u}) {
    const std::string Sz = sizeName(S);
    const uint32_t X = x32If(S);
    const uint64_t Imm = operandValue(buildRng());
    T.add("mov" + Sz + " r/m,r (reg)", sized(S, {}, 0x88, 0x89, {modrmRR(1, 2)}), kArith, X);
    T.add("mov" + Sz + " r/m,r (mem)", sized(S, {}, 0x88, 0x89, memRbx(1)), kArith, X, kRbx);
    T.add("mov" + Sz + " r,r/m (mem)", sized(S, {}, 0x8a, 0x8b, memRbx(1)), kArith, X, kRbx);
    T.add("mov" + Sz + " r/m,imm (reg)", sized(S, {}, 0xc6, 0xc7, cat({modrmRR(0, 1)}, immBytes(S, Imm))), kArith, X);
    T.add("mov" + Sz + " r/m,imm (mem)", sized(S, {}, 0xc6, 0xc7, cat(memRbx(0), immBytes(S, Imm))), kArith, X, kRbx);
    Bytes MovImm = immBytes(S, Imm);
    if (S == 8) // REX.W B8+r takes a full 64-bit immediate
      MovImm = cat(MovImm, immBytes(4, Imm >> 32));
    T.add("mov" + Sz + " r,imm", sized(S, {}, 0xb1, 0xb9, MovImm), kArith, X);
    T.add("xchg" + Sz + " r/m,r (reg)", sized(S, {}, 0x86, 0x87, {modrmRR(1, 2)}), kArith, X);
    T.add("xchg" + Sz + " r/m,r (mem)", sized(S, {}, 0x86, 0x87, memRbx(1)), kArith, X, kRbx);
    T.add("lock xchg" + Sz + " m,r", sized(S, {}, 0x86, 0x87, memRbx(1), {0xf0}), kArith, X, kRbx);
    T.add("xadd" + Sz + " r/m,r (reg)", sized(S, {0x0f}, 0xc0, 0xc1, {modrmRR(1, 2)}), kArith, X);
    T.add("xadd" + Sz + " same register", sized(S, {0x0f}, 0xc0, 0xc1, {modrmRR(2, 2)}), kArith, X);
    T.add("xadd" + Sz + " r/m,r (mem)", sized(S, {0x0f}, 0xc0, 0xc1, memRbx(1)), kArith, X, kRbx);
    T.add("lock xadd" + Sz + " m,r", sized(S, {0x0f}, 0xc0, 0xc1, memRbx(1), {0xf0}), kArith, X, kRbx);
    for (int Mem = 0; Mem < 3; ++Mem) {
      Bytes Tail = Mem ? memRbx(2) : Bytes{modrmRR(2, 1)};
      Row &R = T.add(std::string(Mem == 2 ? "lock " : "") + "cmpxchg" + Sz +
                         (Mem ? " m,r" : " r,r"),
                     sized(S, {0x0f}, 0xb0, 0xb1, Tail, Mem == 2 ? Bytes{0xf0} : Bytes{}), kArith,
                     X, Mem ? kRbx : 0);
      R.Size = S;
      R.Kind = Mem ? 1 : 0;
      R.Fix = cmpxchgFix;
    }
    if (S > 1) {
      T.add("xchg" + Sz + " rcx,rax (short)", sized(S, {}, 0x91, 0x91, {}), kArith, X);
      for (unsigned Cc = 0; Cc < 16; ++Cc) {
        T.add("cmov" + std::to_string(Cc) + "_" + Sz + " (reg)", sized(S, {0x0f}, 0, uint8_t(0x40 + Cc), {modrmRR(2, 1)}), kArith, X);
        T.add("cmov" + std::to_string(Cc) + "_" + Sz + " (mem)", sized(S, {0x0f}, 0, uint8_t(0x40 + Cc), memRbx(2)), kArith, X, kRbx);
      }
      for (bool Signed : {false, true}) {
        const std::string N = std::string(Signed ? "movsx" : "movzx") + Sz;
        const uint8_t Op = Signed ? 0xbe : 0xb6;
        T.add(N + " r,r/m8 (reg)", sized(S, {0x0f}, 0, Op, {modrmRR(2, 1)}), kArith, X);
        T.add(N + " r,r/m8 (mem)", sized(S, {0x0f}, 0, Op, memRbx(2)), kArith, X, kRbx);
        if (S > 2) {
          T.add(N + " r,r/m16 (reg)", sized(S, {0x0f}, 0, uint8_t(Op + 1), {modrmRR(2, 1)}), kArith, X);
          T.add(N + " r,r/m16 (mem)", sized(S, {0x0f}, 0, uint8_t(Op + 1), memRbx(2)), kArith, X, kRbx);
        }
      }
    }
  }
  T.add("movsx32 r,ah", {0x0f, 0xbe, modrmRR(2, 4)}, kArith, opt::X32);
  T.add("movsxd64 r,r/m32 (reg)", {0x48, 0x63, modrmRR(2, 1)}, kArith);
  T.add("movsxd64 r,r/m32 (mem)", {0x48, 0x63, 0x53, 0x10}, kArith, 0, kRbx);
  T.add("movsxd32 r,r/m32 (reg)", {0x63, modrmRR(2, 1)}, kArith);
  T.add("mov64 r,imm64", {0x48, 0xb9, 1, 2, 3, 4, 0x85, 0x86, 0x87, 0x88}, kArith);
  T.add("mov8 ah,imm8", {0xb4, 0x9c}, kArith, opt::X32);
  T.add("mov32 r,[rbx+rcx*8-16]", {0x8b, 0x54, 0xcb, 0xf0}, kArith, 0, kRbx).Fix =
      [](const Row &, RegState &In, uint8_t *, SplitMix64 &G) { In.Gpr[RCX] = G.nextBelow(60); };
  T.add("lea64 r,[rbx+rcx*2+disp32]", {0x48, 0x8d, 0x94, 0x4b, 0x78, 0x56, 0x34, 0x12}, kArith);
  T.add("lea32 r,[rbx+rcx*2+disp32]", {0x8d, 0x94, 0x4b, 0x78, 0x56, 0x34, 0x12}, kArith, opt::X32);
  T.add("lea16 r,[rbx+rcx*2+disp32]", {0x66, 0x8d, 0x94, 0x4b, 0x78, 0x56, 0x34, 0x12}, kArith, opt::X32);
  T.add("lea64 r,[eax+ecx] (67)", {0x67, 0x48, 0x8d, 0x14, 0x08}, kArith);
  for (unsigned W : {0u, 1u}) {
    // [rsi+10h]: RBX is an operand (the new low half), so it cannot be the base.
    const uint16_t Rsi = 1u << RSI;
    Row &R = T.add(W ? "cmpxchg16b m128" : "cmpxchg8b m64", W ? Bytes{0x48, 0x0f, 0xc7, 0x4e, 0x10} : Bytes{0x0f, 0xc7, 0x4e, 0x10}, kArith, W ? 0 : opt::X32, Rsi);
    R.Size = W ? 16 : 8;
    R.Fix = cmpxchgNbFix;
    Row &L = T.add(W ? "lock cmpxchg16b m128" : "lock cmpxchg8b m64", W ? Bytes{0xf0, 0x48, 0x0f, 0xc7, 0x4e, 0x10} : Bytes{0xf0, 0x0f, 0xc7, 0x4e, 0x10}, kArith, W ? 0 : opt::X32, Rsi);
    L.Size = W ? 16 : 8;
    L.Fix = cmpxchgNbFix;
  }
  for (unsigned Cc = 0; Cc < 16; ++Cc) {
    T.add("set" + std::to_string(Cc) + " r/m8 (reg)", {0x0f, uint8_t(0x90 + Cc), modrmRR(0, 1)}, kArith, opt::X32);
    T.add("set" + std::to_string(Cc) + " r/m8 (ah)", {0x0f, uint8_t(0x90 + Cc), modrmRR(0, 4)}, kArith, opt::X32);
    T.add("set" + std::to_string(Cc) + " r/m8 (mem)", cat({0x0f, uint8_t(0x90 + Cc)}, memRbx(0)), kArith, opt::X32, kRbx);
  }
  T.add("cbw", {0x66, 0x98}, kArith, opt::X32);
  T.add("cwde", {0x98}, kArith, opt::X32);
  T.add("cdqe", {0x48, 0x98}, kArith);
  T.add("cwd", {0x66, 0x99}, kArith, opt::X32);
  T.add("cdq", {0x99}, kArith, opt::X32);
  T.add("cqo", {0x48, 0x99}, kArith);
  T.add("xlat", {0xd7}, kArith, opt::X32, kRbx);
  T.add("lahf", {0x9f}, kArith, opt::X32);
  T.add("sahf", {0x9e}, kArith, opt::X32);
  T.add("clc", {0xf8}, kArith, opt::X32);
  T.add("stc", {0xf9}, kArith, opt::X32);
  T.add("cmc", {0xf5}, kArith, opt::X32);
  T.add("cld", {0xfc}, kArith | rflags::DF, opt::X32 | opt::RandDf);
  T.add("std", {0xfd}, kArith | rflags::DF, opt::X32 | opt::RandDf);
  T.add("nop", {0x90}, kArith, opt::X32);
  T.add("nop r/m32", {0x0f, 0x1f, 0x44, 0x00, 0x00}, kArith, opt::X32);
  T.add("pause", {0xf3, 0x90}, kArith, opt::X32); // bound by the system family
  T.add("endbr64", {0xf3, 0x0f, 0x1e, 0xfa}, kArith);
  T.add("prefetcht0 m8", cat({0x0f, 0x18}, memRbx(1)), kArith, opt::X32, kRbx);
  T.add("prefetchnta m8", cat({0x0f, 0x18}, memRbx(0)), kArith, opt::X32, kRbx);
  T.add("prefetchw m8", cat({0x0f, 0x0d}, memRbx(1)), kArith, opt::X32, kRbx);
  return T;
}

// --- stack and near control --------------------------------------------------------------

void loopFix(const Row &, RegState &In, uint8_t *, SplitMix64 &G) {
  if (G.nextBelow(2))
    In.Gpr[RCX] = (In.Gpr[RCX] & ~0xffffffffull) | G.nextBelow(3);
  if (G.nextBelow(4) == 0)
    In.Gpr[RCX] = G.nextBelow(3);
}

Table controlTable() {
  Table T;
  const uint16_t Rbp = 1u << RBP;
  // Every branch jumps over "inc edi" (FF C7), so taken/not-taken shows in RDI.
  for (unsigned Cc = 0; Cc < 16; ++Cc) {
    T.add("j" + std::to_string(Cc) + " rel8", {uint8_t(0x70 + Cc), 0x02, 0xff, 0xc7}, kArith, opt::X32);
    T.add("j" + std::to_string(Cc) + " rel32", {0x0f, uint8_t(0x80 + Cc), 0x02, 0, 0, 0, 0xff, 0xc7}, kArith, opt::X32);
  }
  T.add("jmp rel8", {0xeb, 0x02, 0xff, 0xc7}, kArith, opt::X32);
  T.add("jmp rel32", {0xe9, 0x02, 0, 0, 0, 0xff, 0xc7}, kArith, opt::X32);
  struct L {
    const char *Name;
    uint8_t Op;
  };
  for (L Lp : {L{"loop", 0xe2}, L{"loope", 0xe1}, L{"loopne", 0xe0}, L{"jrcxz", 0xe3}}) {
    T.add(std::string(Lp.Name), {Lp.Op, 0x02, 0xff, 0xc7}, kArith, opt::X32).Fix = loopFix;
    T.add(std::string(Lp.Name) + " (67: ecx)", {0x67, Lp.Op, 0x02, 0xff, 0xc7}, kArith).Fix = loopFix;
  }
  T.add("push r64", {0x51}, kArith);
  T.add("push r9", {0x41, 0x51}, kArith);
  T.add("push r16", {0x66, 0x51}, kArith);
  T.add("push m64", {0xff, 0x73, 0x10}, kArith, 0, kRbx);
  T.add("push m16", {0x66, 0xff, 0x73, 0x10}, kArith, 0, kRbx);
  T.add("push imm8", {0x6a, 0x85}, kArith);
  T.add("push imm32", {0x68, 0x01, 0x02, 0x03, 0x84}, kArith);
  T.add("push imm16", {0x66, 0x68, 0x01, 0x82}, kArith);
  T.add("push rsp", {0x54}, kArith);
  T.add("pop r64", {0x59}, kArith);
  T.add("pop r9", {0x41, 0x59}, kArith);
  T.add("pop r16", {0x66, 0x59}, kArith);
  T.add("pop m64", {0x8f, 0x43, 0x10}, kArith, 0, kRbx);
  T.add("pop [rsp+8]", {0x8f, 0x44, 0x24, 0x08}, kArith);
  T.add("pop rsp", {0x5c}, kArith).Fix = [](const Row &, RegState &, uint8_t *Mem, SplitMix64 &G) {
    putMem(Mem, kPtrOff, 8, kGuestWindow + kPtrOff - 64 + G.nextBelow(128)); // inside the window
  };
  struct E {
    uint16_t Alloc;
    uint8_t Level;
  };
  for (E En : {E{0x10, 0}, E{0x20, 1}, E{0x8, 2}, E{0, 5}, E{0x18, 31}, E{0x28, 33}}) {
    Row &R = T.add("enter " + std::to_string(En.Alloc) + "," + std::to_string(En.Level),
                   {0xc8, uint8_t(En.Alloc), uint8_t(En.Alloc >> 8), En.Level}, kArith, 0, Rbp);
    R.Fix = [](const Row &, RegState &In, uint8_t *, SplitMix64 &G) { In.Gpr[RBP] = kPtrOff + 8 * G.nextBelow(40); };
  }
  T.add("enter16 8,3", {0x66, 0xc8, 0x08, 0x00, 0x03}, kArith, 0, Rbp).Fix =
      [](const Row &, RegState &In, uint8_t *, SplitMix64 &G) { In.Gpr[RBP] = kPtrOff + 2 * G.nextBelow(100); };
  T.add("leave", {0xc9}, kArith, 0, Rbp).Fix = [](const Row &, RegState &In, uint8_t *, SplitMix64 &G) {
    In.Gpr[RBP] = kPtrOff - 128 + 8 * G.nextBelow(32);
  };
  T.add("leave16", {0x66, 0xc9}, kArith, 0, Rbp).Fix = [](const Row &, RegState &In, uint8_t *, SplitMix64 &G) {
    In.Gpr[RBP] = kPtrOff - 128 + 2 * G.nextBelow(100);
  };
  return T;
}

// --- strings --------------------------------------------------------------------------

// Kind: 1 for compares (low-entropy memory and accumulator so REPE/REPNE stop anywhere).
void stringFix(const Row &R, RegState &In, uint8_t *Mem, SplitMix64 &G) {
  In.Gpr[RSI] = kPtrOff - 128 + G.nextBelow(256);
  In.Gpr[RDI] = kPtrOff - 128 + G.nextBelow(256);
  In.Gpr[RCX] = G.nextBelow(4) == 0 ? G.nextBelow(3) : G.nextBelow(33);
  if (R.Kind & 2) // address size 32: the upper half of RCX must be ignored
    In.Gpr[RCX] |= G.next() << 32;
  if (R.Kind & 1) {
    for (unsigned K = 0; K < kWindow; ++K)
      Mem[K] = uint8_t(G.nextBelow(8) == 0);
    uint64_t A = 0;
    for (unsigned K = 0; K < 8; ++K)
      A |= uint64_t(G.nextBelow(8) == 0) << (8 * K);
    In.Gpr[RAX] = A;
  }
}

Table stringTable() {
  Table T;
  const uint16_t SiDi = (1u << RSI) | (1u << RDI);
  struct Op {
    const char *Name;
    uint8_t Op8;
    bool Compare;
  };
  static const Op Ops[] = {{"movs", 0xa4, false}, {"stos", 0xaa, false}, {"lods", 0xac, false},
                           {"cmps", 0xa6, true}, {"scas", 0xae, true}};
  for (const Op &O : Ops) {
    for (unsigned S : {1u, 2u, 4u, 8u}) {
      for (uint8_t Rep : {uint8_t(0), uint8_t(0xf3), uint8_t(0xf2)}) {
        if (Rep == 0xf2 && !O.Compare)
          continue;
        for (bool A32 : {false, true}) {
          if (A32 && S == 2)
            continue;
          Bytes P;
          if (A32)
            P.push_back(0x67);
          if (Rep)
            P.push_back(Rep);
          std::string N = std::string(Rep == 0xf3 ? (O.Compare ? "repe " : "rep ") : Rep ? "repne " : "") +
                          O.Name + sizeName(S) + (A32 ? " (67)" : "");
          Row &R = T.add(N, sized(S, {}, O.Op8, uint8_t(O.Op8 + 1), {}, P), kArith,
                         (A32 || S == 8) ? opt::RandDf : (opt::RandDf | opt::X32), SiDi);
          R.Kind = (O.Compare ? 1 : 0) | (A32 ? 2 : 0);
          R.Fix = stringFix;
          // A REP with a count of 0 in ECX zeroes RCX[63:32] on Intel processors, and
          // MOVS ESI's and EDI's, STOS EDI's; not on AMD's (cpu/exec_string.cpp).
          if (A32 && Rep)
            R.Intel = [](const Row &Rw, const RegState &In, RegState &H) {
              if (uint32_t(In.Gpr[RCX]) != 0)
                return;
              H.Gpr[RCX] = 0;
              const uint8_t Op = Rw.Bytes[Rw.Bytes.size() - 1] & 0xfe;
              if (Op == 0xa4)
                H.Gpr[RSI] = uint32_t(H.Gpr[RSI]);
              if (Op == 0xa4 || Op == 0xaa)
                H.Gpr[RDI] = uint32_t(H.Gpr[RDI]);
            };
        }
      }
    }
  }
  // A segment override on the source that is a no-op in both modes (ES = DS, flat).
  T.add("rep movsb es:[rsi]", {0x26, 0xf3, 0xa4}, kArith, opt::RandDf | opt::X32, SiDi).Fix = stringFix;
  T.add("repe cmpsd es:[rsi]", {0x26, 0xf3, 0xa7}, kArith, opt::RandDf | opt::X32, SiDi).Fix = stringFix;
  return T;
}

} // namespace

// A REP with address size 32 and ECX = 0 in 64-bit mode, on an Intel processor (measured
// on an Intel Xeon host: cpu/exec_string.cpp): RCX[63:32] zeroed, and for MOVS ESI and
// EDI, for STOS EDI written (bits 63:32 zeroed); LODS, CMPS, SCAS leave RSI and RDI.
// The oracle cannot see RSI and RDI (its pointers are small); checked on every host.
TEST(GeneralPurposeInstructions, RepWithZeroEcxWritesWhatIntelsWrite) {
  struct Case {
    const char *Name;
    std::vector<uint8_t> Code;
    bool Si, Di;
  };
  const Case Cases[] = {
      {"rep movsb", {0x67, 0xf3, 0xa4}, true, true},
      {"rep movsq", {0x67, 0xf3, 0x48, 0xa5}, true, true},
      {"rep stosb", {0x67, 0xf3, 0xaa}, false, true},
      {"rep stosd", {0x67, 0xf3, 0xab}, false, true},
      {"rep lodsb", {0x67, 0xf3, 0xac}, false, false},
      {"repe cmpsb", {0x67, 0xf3, 0xa6}, false, false},
      {"repne scasq", {0x67, 0xf2, 0x48, 0xaf}, false, false},
  };
  for (const Case &K : Cases) {
    TestMachine M;
    M.setupLongMode();
    std::vector<uint8_t> Code = K.Code;
    Code.push_back(0xf4);
    M.loadCode(Code);
    const uint64_t Si = 0x1234500000010ull, Di = 0x6789a00000020ull;
    M.S.Gpr[RCX] = 0xdead00000000ull;
    M.S.Gpr[RSI] = Si;
    M.S.Gpr[RDI] = Di;
    EXPECT_EQ(M.run(10), StopReason::Halted) << K.Name;
    EXPECT_EQ(M.S.Gpr[RCX], 0u) << K.Name;
    EXPECT_EQ(M.S.Gpr[RSI], K.Si ? 0x10u : Si) << K.Name;
    EXPECT_EQ(M.S.Gpr[RDI], K.Di ? 0x20u : Di) << K.Name;
  }
}

TEST(GeneralPurposeInstructions, OracleDataTransferAndFlagsMatchHost) {
  runBoth(dataTable(), "MOV/CMOV/SETcc/MOVZX/MOVSX/XCHG/XADD/CMPXCHG/flag ops");
}
TEST(GeneralPurposeInstructions, OracleStackAndBranchesMatchHost) {
  runBoth(controlTable(), "Jcc/JMP/LOOP/JrCXZ/PUSH/POP/ENTER/LEAVE");
}
TEST(GeneralPurposeInstructions, OracleStringInstructionsMatchHost) {
  runBoth(stringTable(), "MOVS/STOS/LODS/CMPS/SCAS with REP/REPE/REPNE");
}
