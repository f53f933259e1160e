// The translation cache (cpu/jit/translator.h, docs/TRANSLATOR.md) against the
// interpreter, its reference: a seeded random fuzz of instruction streams over the
// supported set run in lockstep (every translated register-only block run both ways and
// compared by the translator itself) and, separately, interpreted and translated with
// every register, RFLAGS, RIP, the clock, the count and the data they stored compared;
// self-modifying code rewriting a translated block; a fault inside a translated block.
#include "cpu/jit/translator.h"
#include "cpu/memory.h"
#include "tests/cpu/system_test_support.h"
#include "tests/support/test_machine.h"
#include "tests/support/watch_log.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

/// A random stream of instructions of the translator's set (and a few it refuses),
/// ending in HLT. RBX holds kDataBase and RSP the stack: neither is a destination.
class StreamGen {
public:
  explicit StreamGen(uint64_t Seed) : R(Seed) {}

  /// Loop: the stream has no branches and is the body of a loop of one block, which the
  /// translation runs with guest registers held in host registers (docs/TRANSLATOR.md,
  /// "Registers"), counted in memory or, with its JCC on the host's flags ("Loops"), in
  /// R15 (then no destination):
  ///   mov dword [rbx + 0xf0], 5 ; jmp +0 ; body: <stream> ; dec dword [rbx + 0xf0]
  ///   jnz body ; jmp +0 ; hlt
  ///   mov r15d, 5 ; jmp +0 ; body: <stream> ; one of: dec r15 | sub r15, 1 | dec r15d,
  ///   with jnz or jg body | dec r15, test r15, r15, jne body ; jmp +0 ; hlt
  std::vector<uint8_t> stream(unsigned NumInsns, bool Loop = false, unsigned Tail = 0) {
    Insns.clear();
    Branches.clear();
    Calls.clear();
    NoBranches = Loop;
    NoR15 = Loop && Tail != 0;
    if (Loop) {
      if (Tail == 0)
        Insns.push_back({0xc7, 0x83, 0xf0, 0, 0, 0, 5, 0, 0, 0});
      else
        Insns.push_back({0x41, 0xbf, 5, 0, 0, 0});
      Insns.push_back({0xeb, 0x00});
      const size_t Body = Insns.size();
      for (unsigned K = 0; K < NumInsns; ++K)
        one();
      uint8_t Cc = 0x85; // JNZ
      switch (Tail) {
      case 0: Insns.push_back({0xff, 0x8b, 0xf0, 0, 0, 0}); break; // dec dword [rbx + 0xf0]
      case 1: Insns.push_back({0x49, 0xff, 0xcf}); break;          // dec r15
      case 2: Insns.push_back({0x49, 0x83, 0xef, 0x01}); break;    // sub r15, 1
      case 3: Insns.push_back({0x41, 0xff, 0xcf}); Cc = 0x8f; break; // dec r15d; jg
      default:                                                      // dec r15; test r15, r15
        Insns.push_back({0x49, 0xff, 0xcf});
        Insns.push_back({0x4d, 0x85, 0xff});
        break;
      }
      const size_t Jnz = Insns.size();
      Insns.push_back({0x0f, Cc, 0, 0, 0, 0});
      Insns.push_back({0xeb, 0x00});
      Insns.push_back({0xf4});
      std::vector<size_t> Start;
      std::vector<uint8_t> Out;
      for (const auto &I : Insns) {
        Start.push_back(Out.size());
        Out.insert(Out.end(), I.begin(), I.end());
      }
      const int32_t Back = int32_t(Start[Body]) - int32_t(Start[Jnz] + 6);
      std::memcpy(&Out[Start[Jnz] + 2], &Back, 4);
      return Out;
    }
    // The stream runs three times, so that its blocks, translated at their first run,
    // run chained (one translation jumping into the next) in the later ones:
    //   mov dword [rbx + 0xf0], 3 ; jmp +0 ; body: <stream> ; jmp +0
    //   dec dword [rbx + 0xf0] ; jnz body ; jmp +0 ; hlt
    // ([RBX + 0xf0] is above every operand of the stream's memory forms.)
    Insns.push_back({0xc7, 0x83, 0xf0, 0, 0, 0, 3, 0, 0, 0});
    Insns.push_back({0xeb, 0x00});
    const size_t Body = Insns.size();
    for (unsigned K = 0; K < NumInsns; ++K)
      one();
    Insns.push_back({0xeb, 0x00});
    Insns.push_back({0xff, 0x8b, 0xf0, 0, 0, 0});
    const size_t Jnz = Insns.size();
    Insns.push_back({0x0f, 0x85, 0, 0, 0, 0});
    Insns.push_back({0xeb, 0x00}); // JMP +0: HLT (outside the set) is a block of its own
    Insns.push_back({0xf4});       // HLT
    const size_t Hlt = Insns.size() - 1;
    // A function called from several places (case 18): its RET returns to each of them,
    // so it leaves through the translator's table of targets.
    Insns.push_back({0x48, 0x8d, 0x40, 0x01, 0xc3}); // lea rax, [rax + 1]; ret
    // Lay out, then resolve each forward Jcc rel8 to the start of its target and each
    // CALL of the function.
    std::vector<size_t> Start;
    std::vector<uint8_t> Out;
    for (const auto &I : Insns) {
      Start.push_back(Out.size());
      Out.insert(Out.end(), I.begin(), I.end());
    }
    for (auto [From, To] : Branches) {
      const size_t To2 = std::min(To, Hlt);
      Out[Start[From] + 1] = uint8_t(Start[To2] - (Start[From] + 2));
    }
    for (size_t From : Calls) {
      const int32_t Rel = int32_t(Start[Hlt + 1]) - int32_t(Start[From] + 5);
      std::memcpy(&Out[Start[From] + 1], &Rel, 4);
    }
    const int32_t Back = int32_t(Start[Body]) - int32_t(Start[Jnz] + 6);
    std::memcpy(&Out[Start[Jnz] + 2], &Back, 4);
    return Out;
  }

private:
  std::mt19937_64 R;
  std::vector<std::vector<uint8_t>> Insns;
  std::vector<std::pair<size_t, size_t>> Branches;
  std::vector<size_t> Calls; ///< CALLs of the stream's function
  bool NoBranches = false;
  bool NoR15 = false; ///< R15 is the loop's counter: not a destination

  unsigned pick(unsigned N) { return unsigned(R() % N); }
  unsigned size() { return (unsigned[]){1, 2, 4, 8}[pick(4)]; }
  /// A destination: no RBX, RSP (or BH, BL, SPL).
  unsigned dst(unsigned Size) {
    static const unsigned Wide[] = {0, 1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    static const unsigned Byte[] = {0, 1, 2, 4, 5, 6}; // AL CL DL AH CH DH
    return Size == 1 ? Byte[pick(6)] : Wide[pick(NoR15 ? 13 : 14)];
  }
  unsigned src(unsigned Size) { return Size == 1 ? pick(8) : pick(16); }
  /// Prefixes and opcode of a register-form instruction (ModR/M reg = Reg, rm = Rm).
  void rr(std::vector<uint8_t> &B, unsigned Size, std::initializer_list<uint8_t> Op,
          unsigned Reg, unsigned Rm) {
    if (Size == 2)
      B.push_back(0x66);
    const uint8_t Rex = uint8_t(0x40 | (Size == 8) << 3 | (Reg >> 3) << 2 | (Rm >> 3));
    if (Rex != 0x40)
      B.push_back(Rex);
    B.insert(B.end(), Op);
    B.push_back(uint8_t(0xc0 | (Reg & 7) << 3 | (Rm & 7)));
  }
  /// The same with the memory operand [RBX + disp8] (inside the data area).
  void rm(std::vector<uint8_t> &B, unsigned Size, std::initializer_list<uint8_t> Op,
          unsigned Reg) {
    if (Size == 2)
      B.push_back(0x66);
    const uint8_t Rex = uint8_t(0x40 | (Size == 8) << 3 | (Reg >> 3) << 2);
    if (Rex != 0x40)
      B.push_back(Rex);
    B.insert(B.end(), Op);
    B.push_back(uint8_t(0x40 | (Reg & 7) << 3 | 3));
    // Mostly inside the data area; one in eight just below it, so that an access of
    // more than a byte crosses into the page before (the TLB-hit path's miss).
    B.push_back(pick(8) ? uint8_t(pick(15) * 8 + pick(2)) : uint8_t(-int(1 + pick(7))));
  }
  void imm(std::vector<uint8_t> &B, unsigned Bytes) {
    // Edge values as often as random ones.
    static const uint64_t Edge[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff,
                                    0x7fffffff, 0x80000000, 0xffffffff, ~uint64_t(0)};
    uint64_t V = pick(2) ? R() : Edge[pick(12)];
    for (unsigned K = 0; K < Bytes; ++K)
      B.push_back(uint8_t(V >> (8 * K)));
  }

  void one() {
    std::vector<uint8_t> B;
    const unsigned S = size();
    const uint8_t W = S == 1 ? 0 : 1;
    unsigned Case = pick(20);
    while (NoBranches && (Case == 12 || Case == 18)) // Jcc; CALL, RET, JMP
      Case = pick(20);
    switch (Case) {
    case 0: // ALU r/m, r  (ADD OR ADC SBB AND SUB XOR CMP)
      rr(B, S, {uint8_t(pick(8) * 8 + W)}, src(S), dst(S));
      break;
    case 1: { // ALU r/m, imm (80/81/83)
      const unsigned Op = pick(8);
      if (S == 1) {
        rr(B, 1, {0x80}, Op, dst(1));
        imm(B, 1);
      } else if (pick(2)) {
        rr(B, S, {0x83}, Op, dst(S));
        imm(B, 1);
      } else {
        rr(B, S, {0x81}, Op, dst(S));
        imm(B, S == 2 ? 2 : 4);
      }
      break;
    }
    case 2: // TEST r/m, r; TEST r/m, imm
      if (pick(2)) {
        rr(B, S, {uint8_t(0x84 + W)}, src(S), dst(S));
      } else {
        rr(B, S, {uint8_t(0xf6 + W)}, 0, dst(S));
        imm(B, S == 1 ? 1 : S == 2 ? 2 : 4);
      }
      break;
    case 3: // MOV r/m, r; MOV r, imm
      if (pick(2)) {
        rr(B, S, {uint8_t(0x88 + W)}, src(S), dst(S));
      } else {
        const unsigned D = dst(S);
        if (S == 2)
          B.push_back(0x66);
        if (S == 8 || D >= 8)
          B.push_back(uint8_t(0x40 | (S == 8) << 3 | (D >> 3)));
        B.push_back(uint8_t((S == 1 ? 0xb0 : 0xb8) + (D & 7)));
        imm(B, S);
      }
      break;
    case 4: // INC DEC NOT NEG
      if (pick(2))
        rr(B, S, {uint8_t(0xfe + W)}, pick(2), dst(S));
      else
        rr(B, S, {uint8_t(0xf6 + W)}, 2 + pick(2), dst(S));
      break;
    case 5: { // ROL ROR SHL SHR SAR by imm8 (any count: masking, >= width) or by 1
      static const unsigned Ops[] = {0, 1, 4, 5, 7};
      if (pick(4)) {
        rr(B, S, {uint8_t(0xc0 + W)}, Ops[pick(5)], dst(S));
        B.push_back(uint8_t(pick(3) ? pick(S * 8 + 1) : pick(256)));
      } else {
        rr(B, S, {uint8_t(0xd0 + W)}, Ops[pick(5)], dst(S));
      }
      break;
    }
    case 6: { // LEA r, [base + index * scale + disp] (64- or 32-bit address), or [RIP+d]
      const unsigned D = S == 1 ? 4 : S;
      if (pick(3) == 0)
        B.push_back(0x67);
      if (D == 2)
        B.push_back(0x66);
      const unsigned Reg = dst(D), Base = pick(16);
      unsigned Index = pick(16);
      if (Index == 4)
        Index = 5;
      const bool Rip = pick(5) == 0;
      B.push_back(uint8_t(0x40 | (D == 8) << 3 | (Reg >> 3) << 2 | (Index >> 3) << 1 |
                          (Rip ? 0 : Base >> 3)));
      B.push_back(0x8d);
      if (Rip) {
        B.push_back(uint8_t((Reg & 7) << 3 | 5));
        imm(B, 4);
      } else {
        const bool D32 = pick(2);
        B.push_back(uint8_t((D32 ? 0x84 : 0x44) | (Reg & 7) << 3));
        B.push_back(uint8_t(pick(4) << 6 | (Index & 7) << 3 | (Base & 7)));
        imm(B, D32 ? 4 : 1);
      }
      break;
    }
    case 7: { // MOVZX / MOVSX r, r/m8|16; MOVSXD r64, r/m32
      const unsigned D = (unsigned[]){2, 4, 8}[pick(3)];
      if (pick(4) == 0) {
        rr(B, 8, {0x63}, dst(8), src(4));
      } else {
        const bool Word = D > 2 && pick(2);
        // A byte source without REX is AL..BH; keep the REX-free encodings for it.
        const unsigned Reg = Word ? dst(D) : (unsigned[]){0, 1, 2, 5, 6, 7}[pick(6)];
        const unsigned Rm = Word ? src(2) : pick(8);
        rr(B, D, {0x0f, uint8_t((pick(2) ? 0xb6 : 0xbe) + Word)}, Reg, Rm);
      }
      break;
    }
    case 8: // ALU r, [RBX + d8]; ALU [RBX + d8], r
      rm(B, S, {uint8_t(pick(8) * 8 + W + (pick(2) ? 2 : 0))}, dst(S));
      break;
    case 9: // MOV r, [RBX + d8]; MOV [RBX + d8], r; MOVZX r32, byte [RBX + d8]
      if (pick(3) == 0)
        rm(B, 4, {0x0f, 0xb6}, dst(4));
      else
        rm(B, S, {uint8_t(0x88 + W + (pick(2) ? 2 : 0))}, dst(S));
      break;
    case 10: // INC/DEC [mem], shift [mem], imm8
      if (pick(2)) {
        rm(B, S, {uint8_t(0xfe + W)}, pick(2));
      } else {
        rm(B, S, {uint8_t(0xc0 + W)}, (unsigned[]){0, 1, 4, 5, 7}[pick(5)]);
        B.push_back(uint8_t(pick(40)));
      }
      break;
    case 11: { // 1..6 PUSH r, then as many POP r (runs: one TLB test for the run)
      const unsigned M = 1 + pick(6);
      for (unsigned Push : {1u, 0u})
        for (unsigned J = 0; J < M; ++J) {
          const unsigned Reg = Push ? src(8) : dst(8);
          if (Reg >= 8)
            B.push_back(0x41);
          B.push_back(uint8_t((Push ? 0x50 : 0x58) + (Reg & 7)));
        }
      break;
    }
    case 12: // Jcc rel8 forward over 0..3 instructions
      Branches.push_back({Insns.size(), Insns.size() + 1 + pick(4)});
      B = {uint8_t(0x70 + pick(16)), 0};
      break;
    case 13: { // NOP, LFENCE; IMUL r, r / r, r, imm; SETcc r8; CMOVcc r, r
      const unsigned D = S == 1 ? 4 : S;
      switch (pick(6)) {
      case 0: B = {0x90}; break;
      case 1: B = {0x0f, 0xae, 0xe8}; break;
      case 2: rr(B, D, {0x0f, 0xaf}, dst(D), src(D)); break;
      case 3:
        if (pick(2)) {
          rr(B, D, {0x6b}, dst(D), src(D));
          imm(B, 1);
        } else {
          rr(B, D, {0x69}, dst(D), src(D));
          imm(B, D == 2 ? 2 : 4);
        }
        break;
      case 4: rr(B, 1, {0x0f, uint8_t(0x90 + pick(16))}, 0, dst(1)); break;
      default: rr(B, D, {0x0f, uint8_t(0x40 + pick(16))}, dst(D), src(D)); break;
      }
      break;
    }
    case 16: // ALU [mem], imm (80/81/83); TEST [mem], imm; TEST [mem], r
      if (pick(3) == 0) {
        rm(B, S, {uint8_t(0x84 + W)}, src(S));
      } else if (pick(2)) {
        rm(B, S, {uint8_t(0xf6 + W)}, 0);
        imm(B, S == 1 ? 1 : S == 2 ? 2 : 4);
      } else if (S == 1 || pick(2)) {
        rm(B, S, {uint8_t(S == 1 ? 0x80 : 0x83)}, pick(8));
        imm(B, 1);
      } else {
        rm(B, S, {0x81}, pick(8));
        imm(B, S == 2 ? 2 : 4);
      }
      break;
    case 17: { // NEG/NOT [mem]; MOVZX/MOVSX r, byte|word [mem]; MOVSXD r64, [mem]
      const unsigned D = (unsigned[]){2, 4, 8}[pick(3)];
      switch (pick(3)) {
      case 0: rm(B, S, {uint8_t(0xf6 + W)}, 2 + pick(2)); break;
      case 1: rm(B, D, {0x0f, uint8_t((pick(2) ? 0xb6 : 0xbe) + pick(2))}, dst(D)); break;
      default: rm(B, 8, {0x63}, dst(8)); break;
      }
      break;
    }
    case 18: // CALL L; JMP over; L: RET — or with a pushed word that RET imm16 drops;
             // JMP RAX and CALL RAX to an address LEA made
      if (pick(3) == 0) {
        Calls.push_back(Insns.size()); // call the function (resolved in stream())
        B = {0xe8, 0, 0, 0, 0};
      } else if (pick(3) == 0) {
        if (pick(2)) // lea rax, [rip + 2]; jmp rax
          B = {0x48, 0x8d, 0x05, 2, 0, 0, 0, 0xff, 0xe0};
        else // lea rax, [rip + 4]; call rax; jmp over; ret
          B = {0x48, 0x8d, 0x05, 4, 0, 0, 0, 0xff, 0xd0, 0xeb, 0x01, 0xc3};
      } else if (pick(2)) {
        B = {0xe8, 2, 0, 0, 0, 0xeb, 0x01, 0xc3};
      } else {
        const unsigned Reg = src(8);
        if (Reg >= 8)
          B.push_back(0x41);
        B.push_back(uint8_t(0x50 + (Reg & 7)));
        B.insert(B.end(), {0xe8, 2, 0, 0, 0, 0xeb, 0x03, 0xc2, 0x08, 0x00});
      }
      break;
    default: // more of the plain ALU forms
      rr(B, S, {uint8_t(pick(8) * 8 + W)}, src(S), dst(S));
      break;
    }
    Insns.push_back(B);
  }
};

struct Outcome {
  StopReason Why;
  CpuState S;
  uint64_t Cycles, Retired;
  uint8_t Data[256];
  uint8_t Stack[64];
};

/// The data area of a faulting stream: its last 0x80 bytes sit before the 2 MiB page at
/// 0x400000, which runStream makes not present, so that the stream's [RBX + d8] operands
/// with d8 >= 0x80 (and those that cross) raise #PF.
constexpr uint64_t kFaultingData = 0x400000 - 0x80;

Outcome runStream(TestMachine &M, const std::vector<uint8_t> &Code, uint64_t Seed,
                  bool Faulting = false) {
  M.setupLongMode();
  const uint64_t Data0 = Faulting ? kFaultingData : kDataBase;
  if (Faulting) { // the PDE of 0x400000 (setupLongMode's tables), not present
    const uint64_t Pde = kPml4Base + 0x2000 + 2 * 8;
    M.write(Pde, std::vector<uint8_t>(8, 0).data(), 8);
  }
  M.loadCode(Code);
  std::mt19937_64 R(Seed);
  for (uint64_t &G : M.S.Gpr)
    G = R();
  M.S.Gpr[RBX] = Data0;
  M.S.Gpr[RSP] = kStackTop;
  M.S.Rflags = rflags::Fixed1 | (R() & rflags::Arith);
  uint8_t Data[256];
  for (uint8_t &B : Data)
    B = uint8_t(R());
  M.write(Data0, Data, sizeof Data);
  M.Cpu_.Activity = ActivityState::Active;
  Outcome O;
  O.Why = M.run(10000);
  O.S = M.S;
  O.Cycles = M.Cpu_.Cycles;
  O.Retired = M.Cpu_.Retired;
  std::memcpy(O.Data, M.Mem.ramPointer(Hpa(Data0)), sizeof O.Data);
  std::memcpy(O.Stack, M.Mem.ramPointer(Hpa(kStackTop - 64)), sizeof O.Stack);
  return O;
}

void expectSame(const Outcome &A, const Outcome &B, unsigned Stream) {
  ASSERT_EQ(A.Why, B.Why) << "stream " << Stream;
  for (unsigned K = 0; K < 16; ++K)
    ASSERT_EQ(A.S.Gpr[K], B.S.Gpr[K]) << "stream " << Stream << " register " << K;
  ASSERT_EQ(A.S.Rflags, B.S.Rflags) << "stream " << Stream;
  ASSERT_EQ(A.S.Rip, B.S.Rip) << "stream " << Stream;
  ASSERT_EQ(A.Cycles, B.Cycles) << "stream " << Stream;
  ASSERT_EQ(A.Retired, B.Retired) << "stream " << Stream;
  ASSERT_EQ(0, std::memcmp(A.Data, B.Data, sizeof A.Data)) << "stream " << Stream;
  ASSERT_EQ(0, std::memcmp(A.Stack, B.Stack, sizeof A.Stack)) << "stream " << Stream;
}

void translateAtOnce(TestMachine &M, ExecMode Mode) {
  M.Cpu_.setExecMode(Mode);
  ASSERT_TRUE(M.Cpu_.Jit && M.Cpu_.Jit->usable());
  M.Cpu_.Jit->Threshold = 1; // every block is translated at its first entry
}

/// Runs the first N fuzzed streams interpreted, in lockstep and translated, and requires
/// the three to agree (expectSame). Every third stream is the body of a loop of one block
/// (at most 31 instructions with its DEC and JNZ: kMaxBlockInsns). Every fourth stream
/// that is not a loop's body runs with its data area against a page that is not present
/// (kFaultingData): most of them fault (#PF, then, with no IDT, a triple fault).
void fuzzStreams(TestMachine &Interp, TestMachine &Lock, TestMachine &Trans, unsigned N) {
  StreamGen Gen(0x6a69742d66757a7aull);
  const unsigned kStreams = N;
  for (unsigned K = 0; K < kStreams; ++K) {
    const bool Loop = K % 3 == 2;
    const bool Faulting = !Loop && K % 4 == 3;
    const std::vector<uint8_t> Code =
        Gen.stream(Loop ? 2 + K % 28 : 4 + K % 40, Loop, Loop ? (K / 3) % 5 : 0);
    const Outcome A = runStream(Interp, Code, K, Faulting);
    const Outcome B = runStream(Lock, Code, K, Faulting);
    ASSERT_NE(B.Why, StopReason::LockstepMismatch)
        << "stream " << K << ": " << Lock.Cpu_.StopWhat;
    expectSame(A, B, K);
    expectSame(A, runStream(Trans, Code, K, Faulting), K);
    if (::testing::Test::HasFatalFailure())
      return;
  }
}

} // namespace

TEST(Translator, FuzzedStreamsAgreeWithTheInterpreterWhenFlagsAreTakenByPushf) {
  // A host without LAHF in 64-bit mode: the translator takes the host's flags with PUSHF
  // (BlockEmitter::captureFlags). The same streams as below, fewer of them.
  TestMachine Interp, Lock, Trans;
  translateAtOnce(Lock, ExecMode::Lockstep);
  translateAtOnce(Trans, ExecMode::Translate);
  Lock.Cpu_.Jit->HostLahf = Trans.Cpu_.Jit->HostLahf = false;
  constexpr unsigned kStreams = 600;
  fuzzStreams(Interp, Lock, Trans, kStreams);
  if (HasFatalFailure())
    return;
  EXPECT_GT(Trans.Cpu_.Jit->stats().InsnsTranslated, 20 * uint64_t(kStreams));
}

TEST(Translator, FuzzedStreamsAgreeWithTheInterpreterInLockstepAndTranslated) {
  TestMachine Interp, Lock, Trans;
  translateAtOnce(Lock, ExecMode::Lockstep);
  translateAtOnce(Trans, ExecMode::Translate);
  constexpr unsigned kStreams = 2000;
  fuzzStreams(Interp, Lock, Trans, kStreams);
  if (HasFatalFailure())
    return;
  // The streams did run translated, and in lockstep most blocks were compared.
  const JitStats &L = Lock.Cpu_.Jit->stats();
  const JitStats &T = Trans.Cpu_.Jit->stats();
  char Line[1024];
  Trans.Cpu_.Jit->describe(Line, sizeof Line);
  std::printf("%s\n", Line);
  Lock.Cpu_.Jit->describe(Line, sizeof Line);
  std::printf("%s\n", Line);
  // Every block was compared (none reached a device, code or a VM exit), half of them
  // with stores, whose bytes were compared too.
  EXPECT_GT(L.LockstepCompared, 15 * uint64_t(kStreams));
  EXPECT_GT(L.LockstepComparedStores, 8 * uint64_t(kStreams));
  EXPECT_GT(L.LockstepComparedFaults, kStreams / 10); // compared up to their #PF
  for (uint64_t N : L.LockstepUncompared)
    EXPECT_EQ(N, 0u);
  EXPECT_GT(T.InsnsTranslated, 20 * uint64_t(kStreams));
  EXPECT_GT(T.Chained, uint64_t(kStreams)); // translations jumped into the next ones
  EXPECT_GT(T.TargetChained, kStreams / 10); // RETs chained through the table of targets
  EXPECT_GT(T.HeldLoops, kStreams / 6);      // loops ran with registers held
  EXPECT_GT(T.FusedLoops, kStreams / 10);    // and branched on the host's flags
  EXPECT_EQ(L.Chained, 0u);                 // lockstep compares every block: no chaining
  EXPECT_GT(T.Refused[size_t(JitRefusal::UnsupportedInsn)], 100u);
  EXPECT_EQ(L.Refused[size_t(JitRefusal::CodeTooLarge)], 0u);
}

TEST(Translator, LockstepReportsADifferenceNamingBlockInstructionAndRegister) {
  // A translated block whose host code is made wrong on purpose (its first instruction's
  // handler, which lockstep runs as the reference, replaced by one that adds 1 more):
  // the run stops with the one-line message.
  TestMachine M;
  M.setupLongMode();
  translateAtOnce(M, ExecMode::Lockstep);
  M.loadCode({0x48, 0x01, 0xc8, 0x90, 0xeb, 0x00, 0xf4}); // add rax, rcx; nop; jmp +0; hlt
  M.S.Gpr[RAX] = 5;
  M.S.Gpr[RCX] = 7;
  // Decode and translate the block, then make the interpreter's copy differ.
  ASSERT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], 12u);
  M.Cpu_.Activity = ActivityState::Active;
  Block *B = M.Cpu_.Mmu.cachedBlock(Gla(kCodeBase), M.Cpu_.DecodeMode);
  ASSERT_NE(B, nullptr);
  ASSERT_NE(B->JitCode, nullptr);
  B->Insns[0].Fn = [](Cpu &C, const DecodedInsn &I) {
    C.S.Gpr[RAX] += C.S.Gpr[RCX] + 1;
    return next(C, I);
  };
  M.S.Rip = kCodeBase;
  EXPECT_EQ(M.run(100), StopReason::LockstepMismatch);
  EXPECT_STREQ(M.Cpu_.StopWhat,
               "lockstep mismatch in the block at RIP=0x100000: add at 0x100000 "
               "(instruction 1 of 3): RAX interpreter=0x14 translated=0x13");
}

TEST(Translator, LockstepComparesTheBytesTheInterpreterStored) {
  // A block that stores into a data frame and the stack: compared, stores included. Then
  // the interpreter's copy of the store is made to store 1 more: the run stops naming
  // the store, the physical address and both values, and memory holds the translated
  // run's bytes (the interpreter's were undone).
  TestMachine M;
  M.setupLongMode();
  translateAtOnce(M, ExecMode::Lockstep);
  // mov [rbx], rax; push rcx; pop rdx; jmp +0; hlt
  M.loadCode({0x48, 0x89, 0x03, 0x51, 0x5a, 0xeb, 0x00, 0xf4});
  M.S.Gpr[RAX] = 0x1122334455667788;
  M.S.Gpr[RBX] = kDataBase + 0x18;
  M.S.Gpr[RCX] = 7;
  ASSERT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.read64(kDataBase + 0x18), 0x1122334455667788u);
  EXPECT_EQ(M.S.Gpr[RDX], 7u);
  const JitStats &L = M.Cpu_.Jit->stats();
  EXPECT_EQ(L.LockstepCompared, 1u);
  EXPECT_EQ(L.LockstepComparedStores, 1u);
  M.Cpu_.Activity = ActivityState::Active;
  Block *B = M.Cpu_.Mmu.cachedBlock(Gla(kCodeBase), M.Cpu_.DecodeMode);
  ASSERT_TRUE(B && B->JitCode);
  B->Insns[0].Fn = [](Cpu &C, const DecodedInsn &I) {
    VMX_TRY(writeMem<uint64_t>(C, SegReg::DS, C.S.Gpr[RBX], C.S.Gpr[RAX] + 1));
    return next(C, I);
  };
  M.write(kDataBase + 0x18, "\0\0\0\0\0\0\0\0", 8);
  M.S.Rip = kCodeBase;
  EXPECT_EQ(M.run(100), StopReason::LockstepMismatch);
  EXPECT_STREQ(M.Cpu_.StopWhat,
               "lockstep mismatch in the block at RIP=0x100000: mov at 0x100000 "
               "(instruction 1 of 4): memory at physical 0x200018 "
               "interpreter=0x1122334455667789 translated=0x1122334455667788");
  EXPECT_EQ(M.read64(kDataBase + 0x18), 0x1122334455667788u);
}

TEST(Translator, LockstepComparesABlockThatFaultsUpToItsException) {
  // A store, then a load that faults: the two runs are compared up to the fault, the
  // exception included (#GP(0) for a non-canonical address, #PF with its address above
  // the 4 GiB the tables map). With the interpreter's copy of the load made to raise
  // #GP(8), the error code differs.
  for (const uint64_t Bad : {0x8000000000000000ull, 0x140000000ull}) {
    SCOPED_TRACE(Bad);
    TestMachine Interp, M;
    translateAtOnce(M, ExecMode::Lockstep);
    for (TestMachine *T : {&Interp, &M}) {
      T->setupLongMode();
      // mov [rbx], rax; mov rdx, [rcx]; jmp +0
      T->loadCode({0x48, 0x89, 0x03, 0x48, 0x8b, 0x11, 0xeb, 0x00});
      T->S.Gpr[RAX] = 5;
      T->S.Gpr[RBX] = kDataBase;
      T->S.Gpr[RCX] = Bad;
    }
    const StopReason Why = Interp.run(100);
    EXPECT_EQ(M.run(100), Why);
    EXPECT_EQ(M.S.Cr2, Interp.S.Cr2);
    EXPECT_EQ(M.S.Rip, Interp.S.Rip);
    EXPECT_EQ(M.read64(kDataBase), 5u);
    EXPECT_EQ(M.Cpu_.Jit->stats().LockstepComparedFaults, 1u);
    EXPECT_EQ(M.Cpu_.Jit->stats().LockstepComparedStores, 1u);
    Block *B = M.Cpu_.Mmu.cachedBlock(Gla(kCodeBase), uint8_t(CodeMode::Long64));
    ASSERT_TRUE(B && B->JitCode);
    B->Insns[1].Fn = [](Cpu &C, const DecodedInsn &) { return C.raiseGp(8); };
    M.setupLongMode();
    M.S.Rip = kCodeBase;
    M.S.Gpr[RCX] = Bad;
    M.Cpu_.Activity = ActivityState::Active;
    EXPECT_EQ(M.run(100), StopReason::LockstepMismatch);
    EXPECT_STREQ(M.Cpu_.StopWhat,
                 Bad >> 63 ? "lockstep mismatch in the block at RIP=0x100000: jmp at 0x100006 "
                             "(instruction 3 of 3): error code interpreter=0x8 translated=0"
                           : "lockstep mismatch in the block at RIP=0x100000: jmp at 0x100006 "
                             "(instruction 3 of 3): exception vector interpreter=0xd "
                             "translated=0xe");
  }
}

TEST(Translator, LockstepFinishesABlockItsTranslationHandsToTheInterpreter) {
  // With RFLAGS.AC set the inline memory forms hand the rest of the block to the
  // interpreter (Linux's user copies run under STAC): lockstep finishes the block as the
  // run loop would, then compares the whole of it. A byte copy loop of Linux's (copy to
  // and from user space): mov al, [rsi]; mov [rdi], al; inc rsi; inc rdi; dec ecx; jnz;
  // then hlt.
  const std::vector<uint8_t> Code = {0x8a, 0x06, 0x88, 0x07, 0x48, 0xff, 0xc6, 0x48,
                                     0xff, 0xc7, 0xff, 0xc9, 0x75, 0xf2, 0xf4};
  TestMachine Interp, M;
  translateAtOnce(M, ExecMode::Lockstep);
  for (TestMachine *T : {&Interp, &M}) {
    T->setupLongMode();
    T->loadCode(Code);
    T->write(kDataBase, "lockstep", 8);
    T->S.Gpr[RSI] = kDataBase;
    T->S.Gpr[RDI] = kDataBase + 0x100;
    T->S.Gpr[RCX] = 8;
    T->S.Rflags |= rflags::AC;
  }
  ASSERT_EQ(Interp.run(1000), StopReason::Halted);
  ASSERT_EQ(M.run(1000), StopReason::Halted) << M.Cpu_.StopWhat;
  EXPECT_EQ(M.read64(kDataBase + 0x100), Interp.read64(kDataBase + 0x100));
  EXPECT_EQ(M.read64(kDataBase + 0x100), 0x706574736b636f6cu); // "lockstep"
  EXPECT_EQ(M.Cpu_.Retired, Interp.Cpu_.Retired);
  EXPECT_EQ(M.Cpu_.Cycles, Interp.Cpu_.Cycles);
  const JitStats &L = M.Cpu_.Jit->stats();
  EXPECT_EQ(L.LockstepCompared, 8u);
  EXPECT_EQ(L.LockstepContinued, 8u);
  EXPECT_EQ(L.LockstepComparedStores, 8u);
}

TEST(Translator, LockstepRunsABlockThatStoresIntoCodeTranslatedAlone) {
  // A store into the block's own code lines (the same byte again): its bookkeeping is not
  // undone, so the interpreter's pass stops before it and the block runs translated
  // alone, counted as such; the run is the interpreter's.
  TestMachine M;
  M.setupLongMode();
  translateAtOnce(M, ExecMode::Lockstep);
  // mov byte [rip + 1], 0 (the JMP's displacement); jmp +0; hlt
  M.loadCode({0xc6, 0x05, 0x01, 0x00, 0x00, 0x00, 0x00, 0xeb, 0x00, 0xf4});
  ASSERT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.Cpu_.Retired, 3u);
  const JitStats &L = M.Cpu_.Jit->stats();
  EXPECT_EQ(L.LockstepUncompared[size_t(LockstepSkip::CodeOrWatched)], 1u);
  // The store ended the block (self-modifying code): the JMP's block, decoded anew after
  // it, is compared.
  EXPECT_EQ(L.LockstepCompared, 1u);
  EXPECT_EQ(L.LockstepComparedStores, 0u);
}

TEST(Translator, RewrittenTranslatedBlockRunsTheNewCode) {
  // A loop whose body block is translated (20 iterations, threshold 16), then rewritten
  // by the guest: the next run of the block executes the new immediate.
  //   loop: mov eax, imm32 ; b8 xx xx xx xx   <- patched
  //         add rsi, rax   ; 48 01 c6
  //         dec ecx        ; ff c9
  //         jnz loop       ; 75 f4
  //         mov byte [rip + patch], 7 (at kCodeBase + 1)  ; c6 05 disp32 07
  //         dec edi ; jnz again ... hlt
  for (ExecMode Mode : {ExecMode::Interp, ExecMode::Translate, ExecMode::Lockstep}) {
    TestMachine M;
    M.setupLongMode();
    M.Cpu_.setExecMode(Mode);
    std::vector<uint8_t> Code = {
        0xb9, 20, 0, 0, 0,                   // 0:  mov ecx, 20
        0xb8, 1, 0, 0, 0,                    // 5:  loop: mov eax, 1
        0x48, 0x01, 0xc6,                    // 10: add rsi, rax
        0xff, 0xc9,                          // 13: dec ecx
        0x75, 0xf4,                          // 15: jnz loop (-> 5)
        0xc6, 0x05, 0, 0, 0, 0, 100,         // 17: mov byte [rip + d], 100 (d below)
        0xff, 0xcf,                          // 24: dec edi
        0x75, 0xe4,                          // 26: jnz 0 (-> 0)
        0xf4};                               // 28: hlt
    const int32_t D = 6 - 24; // the imm32's low byte (offset 6) from the next RIP (24)
    std::memcpy(&Code[19], &D, 4);
    M.loadCode(Code);
    M.S.Gpr[RSI] = 0;
    M.S.Gpr[RDI] = 2;
    ASSERT_EQ(M.run(10000), StopReason::Halted);
    EXPECT_EQ(M.S.Gpr[RSI], 20u * 1 + 20u * 100) << int(Mode);
    if (Mode != ExecMode::Interp) {
      EXPECT_GE(M.Cpu_.Jit->stats().Translated, 1u);
    }
  }
}

namespace {
/// One run's end state in one execution mode (interpreted, translated, lockstep).
struct ModeRun {
  CpuState S;
  uint64_t Cycles = 0, Retired = 0;
  std::vector<uint8_t> Data; ///< guest memory the test compares, if any
};
/// M in 64-bit mode with Code loaded, run in Mode (translating every block at its first
/// entry when Mode translates).
void startIn(TestMachine &M, ExecMode Mode, const std::vector<uint8_t> &Code) {
  M.setupLongMode();
  if (Mode != ExecMode::Interp)
    translateAtOnce(M, Mode);
  M.loadCode(Code);
}
/// The translated and the lockstep run (1, 2) end as the interpreted one (0) did.
void expectModesAgree(const ModeRun (&R)[3]) {
  for (int K = 1; K < 3; ++K) {
    for (unsigned G = 0; G < 16; ++G)
      EXPECT_EQ(R[0].S.Gpr[G], R[K].S.Gpr[G]) << K << " " << G;
    EXPECT_EQ(R[0].S.Rip, R[K].S.Rip) << K;
    EXPECT_EQ(R[0].S.Rflags, R[K].S.Rflags) << K;
    EXPECT_EQ(R[0].Cycles, R[K].Cycles) << K;
    EXPECT_EQ(R[0].Retired, R[K].Retired) << K;
    EXPECT_EQ(R[0].Data, R[K].Data) << K;
  }
}
} // namespace

TEST(Translator, FaultInsideATranslatedBlockLeavesTheInterpretersState) {
  // add rax, rcx; mov rdx, [rbx]; inc rax; jmp back: the load from RBX faults (#PF, an
  // unmapped address above the identity map) on the 40th run; there is no IDT, so the
  // fault ends in a triple fault. Interpreted and translated runs stop at the same
  // instruction with the same registers, CR2, clock and count.
  auto Run = [](ExecMode Mode) {
    auto M = std::make_unique<TestMachine>();
    M->setupLongMode();
    M->Cpu_.setExecMode(Mode);
    M->loadCode({0x48, 0x01, 0xc8,       // add rax, rcx
                 0x48, 0x8b, 0x13,       // mov rdx, [rbx]
                 0x48, 0xff, 0xc0,       // inc rax
                 0x48, 0x83, 0xc3, 0x08, // add rbx, 8  (walks to the unmapped address)
                 0xeb, 0xf1});           // jmp 0
    M->S.Gpr[RBX] = (4ull << 30) - 39 * 8; // the 40th load is at 4 GiB: not mapped
    M->S.Gpr[RCX] = 3;
    EXPECT_EQ(M->run(100000), StopReason::Shutdown);
    return M;
  };
  auto A = Run(ExecMode::Interp), B = Run(ExecMode::Translate);
  EXPECT_GT(B->Cpu_.Jit->stats().InsnsTranslated, 100u);
  for (unsigned K = 0; K < 16; ++K)
    EXPECT_EQ(A->S.Gpr[K], B->S.Gpr[K]) << K;
  EXPECT_EQ(A->S.Rip, B->S.Rip);
  EXPECT_EQ(A->S.Rip, kCodeBase + 3); // the load
  EXPECT_EQ(A->S.Cr2, 4ull << 30);
  EXPECT_EQ(A->S.Cr2, B->S.Cr2);
  EXPECT_EQ(A->S.Rflags, B->S.Rflags);
  EXPECT_EQ(A->Cpu_.Cycles, B->Cpu_.Cycles);
  EXPECT_EQ(A->Cpu_.Retired, B->Cpu_.Retired);
}

TEST(Translator, ChainedBlocksRewrittenByTheGuestRunTheNewCode) {
  // Two blocks that chain into each other (A: mov eax, imm; jmp B. B: add rsi, rax; dec
  // ecx; jnz A), 40 iterations, then a store into A's immediate and 40 more: the chained
  // jump into A's old translation must not be taken after the store. Storing the value
  // that is already there re-decodes A to the same bytes: its translation is kept.
  for (const uint8_t NewImm : {uint8_t(100), uint8_t(1)}) {
    uint64_t Cycles = 0, Retired = 0; // interpreted
    for (ExecMode Mode : {ExecMode::Interp, ExecMode::Translate, ExecMode::Lockstep}) {
      SCOPED_TRACE(int(Mode));
      TestMachine M;
      M.setupLongMode();
      M.Cpu_.setExecMode(Mode);
      std::vector<uint8_t> Code = {
          0xb9, 40, 0, 0, 0,           // 0:  mov ecx, 40
          0xb8, 1, 0, 0, 0,            // 5:  A: mov eax, 1
          0xeb, 0x00,                  // 10: jmp B
          0x48, 0x01, 0xc6,            // 12: B: add rsi, rax
          0xff, 0xc9,                  // 15: dec ecx
          0x75, 0xf2,                  // 17: jnz A (-> 5)
          0xc6, 0x05, 0, 0, 0, 0, NewImm, // 19: mov byte [rip + d], NewImm
          0xff, 0xcf,                  // 26: dec edi
          0x75, 0xe2,                  // 28: jnz 0
          0xf4};                       // 30: hlt
      const int32_t D = 6 - 26; // the imm32's low byte from the next RIP
      std::memcpy(&Code[21], &D, 4);
      M.loadCode(Code);
      M.S.Gpr[RSI] = 0;
      M.S.Gpr[RDI] = 2;
      ASSERT_EQ(M.run(10000), StopReason::Halted);
      EXPECT_EQ(M.S.Gpr[RSI], 40u * 1 + 40u * NewImm);
      if (Mode == ExecMode::Interp) {
        Cycles = M.Cpu_.Cycles;
        Retired = M.Cpu_.Retired;
      }
      EXPECT_EQ(M.Cpu_.Cycles, Cycles);
      EXPECT_EQ(M.Cpu_.Retired, Retired);
      if (Mode == ExecMode::Translate) {
        const JitStats &S = M.Cpu_.Jit->stats();
        EXPECT_GT(S.Chained, 40u);
        EXPECT_GE(S.Links, 2u);
        if (NewImm == 1) {
          EXPECT_GE(S.Kept, 1u);
        }
      }
      if (Mode == ExecMode::Lockstep) {
        EXPECT_EQ(M.Cpu_.Jit->stats().Chained, 0u);
      }
    }
  }
}

namespace {

struct Interrupted {
  StopReason First, Last;
  uint64_t RipAtStop, RetiredAtStop;
  CpuState S;
  uint64_t Cycles, Retired, Chained;
};

/// A two-block loop (A: add rsi, rax; inc rax; jmp B. B: add rdi, rsi; dec ecx; jnz A)
/// stopped at cycle Deadline or after Budget instructions, then given an interrupt whose
/// handler records the interrupted RIP (inc r8; mov r9, [rsp]; add r10, r9; iretq).
Interrupted runInterrupted(ExecMode Mode, uint64_t Deadline, uint64_t Budget) {
  TestMachine M;
  OneInterrupt Intr; // the timer's
  M.Cpu_.Intr = &Intr;
  M.setupLongMode();
  if (Mode != ExecMode::Interp)
    translateAtOnce(M, Mode);
  M.loadCode({0x48, 0x01, 0xc6,  // 0:  add rsi, rax
              0x48, 0xff, 0xc0,  // 3:  inc rax
              0xeb, 0x00,        // 6:  jmp 8
              0x48, 0x01, 0xf7,  // 8:  add rdi, rsi
              0xff, 0xc9,        // 11: dec ecx
              0x75, 0xf1,        // 13: jnz 0
              0xf4});            // 15: hlt
  const uint64_t H = kCodeBase + 0x800;
  const uint8_t Handler[] = {0x49, 0xff, 0xc0, 0x4c, 0x8b, 0x0c, 0x24,
                             0x4d, 0x01, 0xca, 0x48, 0xcf};
  M.write(H, Handler, sizeof Handler);
  gate64(M, kIdtBase + 16 * 0x40, kSelCode64, H, 0xe, 0);
  M.S.Idtr.Limit = 0x41 * 16 - 1;
  M.S.Gpr[RSP] = kStackTop;
  M.S.Gpr[RCX] = 300;
  M.S.Rflags |= rflags::IF;
  Interrupted R;
  R.First = M.Cpu_.run(Budget, Deadline);
  R.RipAtStop = M.S.Rip;
  R.RetiredAtStop = M.Cpu_.Retired;
  Intr.Pending = true;
  R.Last = M.Cpu_.run(100000);
  R.S = M.S;
  R.Cycles = M.Cpu_.Cycles;
  R.Retired = M.Cpu_.Retired;
  R.Chained = M.Cpu_.Jit ? M.Cpu_.Jit->stats().Chained : 0;
  return R;
}

} // namespace

TEST(Translator, AChainStopsWhereTheInterpreterTakesATimerInterrupt) {
  // The run stops at a cycle deadline (where a timer would fire) or at an instruction
  // budget falling anywhere in the chained loop; the interrupt is then taken at the same
  // instruction, with the same clock and count, as interpreted.
  uint64_t Chained = 0;
  for (unsigned K = 0; K < 48; ++K) {
    const uint64_t Deadline = K < 24 ? 200 + 13 * K : ~uint64_t(0);
    const uint64_t Budget = K < 24 ? 1000000 : 150 + 7 * (K - 24);
    SCOPED_TRACE(K);
    const Interrupted A = runInterrupted(ExecMode::Interp, Deadline, Budget);
    for (ExecMode Mode : {ExecMode::Translate, ExecMode::Lockstep}) {
      const Interrupted B = runInterrupted(Mode, Deadline, Budget);
      EXPECT_EQ(A.First, K < 24 ? StopReason::Deadline : StopReason::InsnLimit);
      EXPECT_EQ(A.First, B.First);
      EXPECT_EQ(A.Last, StopReason::Halted);
      EXPECT_EQ(A.Last, B.Last);
      EXPECT_EQ(A.RipAtStop, B.RipAtStop);
      EXPECT_EQ(A.RetiredAtStop, B.RetiredAtStop);
      for (unsigned G = 0; G < 16; ++G)
        EXPECT_EQ(A.S.Gpr[G], B.S.Gpr[G]) << G;
      EXPECT_EQ(A.S.Gpr[R8], 1u); // one interrupt
      EXPECT_EQ(A.S.Rflags, B.S.Rflags);
      EXPECT_EQ(A.Cycles, B.Cycles);
      EXPECT_EQ(A.Retired, B.Retired);
      if (Mode == ExecMode::Translate)
        Chained += B.Chained;
    }
  }
  EXPECT_GT(Chained, 48u * 100);
}

TEST(Translator, InlineMovAccessesTakeTheInterpretersPathWhenTheTlbDoesNot) {
  // A translated loop of MOVs whose accesses hit the TLB inline (a store and an indexed
  // store through RBX, a load and a store through FS), miss it (a load across a page
  // boundary) or store into the loop's own code (the same byte again: the block is
  // decoded again and keeps its translation); once with RFLAGS.AC clear and once set
  // (the translation then hands the block to the interpreter at its first access, at
  // every run). Interpreted, translated and in
  // lockstep: the same registers, clock, count and memory.
  //   loop: mov rax, [rbx + 0xffc] ; mov [rbx + 0x10], rax ; mov ecx, fs:[0x20]
  //         mov fs:[0x28], ecx ; mov [rbx + rdx*8 + 0x100], rdx
  //         mov byte [rip + d], 1 (d: add's imm8) ; add edx, 1 ; dec edi ; jnz loop ; hlt
  std::vector<uint8_t> Code = {
      0x48, 0x8b, 0x83, 0xfc, 0x0f, 0x00, 0x00,       // 0
      0x48, 0x89, 0x43, 0x10,                         // 7
      0x64, 0x8b, 0x0c, 0x25, 0x20, 0x00, 0x00, 0x00, // 11
      0x64, 0x89, 0x0c, 0x25, 0x28, 0x00, 0x00, 0x00, // 19
      0x48, 0x89, 0x94, 0xd3, 0x00, 0x01, 0x00, 0x00, // 27
      0xc6, 0x05, 0, 0, 0, 0, 0x01,                   // 35: next RIP 42
      0x83, 0xc2, 0x01,                               // 42: add edx, 1 (imm8 at 44)
      0xff, 0xcf,                                     // 45
      0x75, 0xcf,                                     // 47: jnz 0 (49 - 49 = -49)
      0xf4};                                          // 49
  const int32_t D = 44 - 42;
  std::memcpy(&Code[37], &D, 4);
  for (const bool Ac : {false, true}) {
    SCOPED_TRACE(Ac);
    ModeRun Results[3];
    int Slot = 0;
    for (ExecMode Mode : {ExecMode::Interp, ExecMode::Translate, ExecMode::Lockstep}) {
      TestMachine M;
      startIn(M, Mode, Code);
      std::vector<uint8_t> Data(0x1100);
      for (size_t K = 0; K < Data.size(); ++K)
        Data[K] = uint8_t(K * 7 + 3);
      M.write(kDataBase, Data.data(), Data.size());
      M.S.Gpr[RBX] = kDataBase;
      M.S.Gpr[RDX] = 0;
      M.S.Gpr[RDI] = 40;
      M.S.seg(SegReg::FS).Base = kDataBase;
      if (Ac)
        M.S.Rflags |= rflags::AC;
      ASSERT_EQ(M.run(100000), StopReason::Halted);
      ModeRun &R = Results[Slot++];
      R.S = M.S;
      R.Cycles = M.Cpu_.Cycles;
      R.Retired = M.Cpu_.Retired;
      R.Data.assign(M.Mem.ramPointer(Hpa(kDataBase)), M.Mem.ramPointer(Hpa(kDataBase)) + 0x1100);
      if (Mode == ExecMode::Translate && !Ac) {
        EXPECT_GT(M.Cpu_.Jit->stats().InsnsTranslated, 300u);
        EXPECT_GT(M.Cpu_.Jit->stats().Kept, 30u);
      }
      if (Mode == ExecMode::Translate && Ac) {
        // Only the block of ADD, DEC and JNZ (the store into its code splits the loop)
        // runs translated, 40 times.
        EXPECT_EQ(M.Cpu_.Jit->stats().InsnsTranslated, 120u);
        EXPECT_EQ(M.Cpu_.Jit->stats().Bailouts, 40u); // at every one of the 40 runs
      }
    }
    EXPECT_EQ(Results[0].S.Gpr[RDX], 40u);
    expectModesAgree(Results);
  }
}

TEST(Translator, MovntiStoresRunInlineAsMovAndWriteWhatTheInterpreterWrites) {
  // Xen clears pages with MOVNTI; it is bound to MOV's store handler (cpu/exec_sse_move.cpp,
  // SDM Vol. 2B MOVNTI: the non-temporal hint changes nothing a single in-order store
  // shows), so a loop of them runs translated and stores exactly what the interpreter does.
  //   loop: movnti [rdi], rax ; movnti [rdi + 8], rax ; movnti [rdi + 0x10], eax
  //         add rdi, 24 ; dec ecx ; jnz loop ; hlt
  const std::vector<uint8_t> Code = {
      0x48, 0x0f, 0xc3, 0x07,       // 0
      0x48, 0x0f, 0xc3, 0x47, 0x08, // 4
      0x0f, 0xc3, 0x47, 0x10,       // 9
      0x48, 0x83, 0xc7, 0x18,       // 13
      0xff, 0xc9,                   // 17
      0x75, 0xeb,                   // 19: jnz 0
      0xf4};                        // 21
  ModeRun Results[3];
  int Slot = 0;
  for (ExecMode Mode : {ExecMode::Interp, ExecMode::Translate, ExecMode::Lockstep}) {
    TestMachine M;
    startIn(M, Mode, Code);
    std::vector<uint8_t> Data(16 * 24, 0xa5);
    M.write(kDataBase, Data.data(), Data.size());
    M.S.Gpr[RAX] = 0x1122334455667788ull;
    M.S.Gpr[RCX] = 16;
    M.S.Gpr[RDI] = kDataBase;
    ASSERT_EQ(M.run(100000), StopReason::Halted);
    ModeRun &R = Results[Slot++];
    R.S = M.S;
    R.Cycles = M.Cpu_.Cycles;
    R.Retired = M.Cpu_.Retired;
    R.Data.assign(M.Mem.ramPointer(Hpa(kDataBase)),
                  M.Mem.ramPointer(Hpa(kDataBase)) + 16 * 24);
    if (Mode == ExecMode::Translate) {
      // Every loop instruction ran translated; the one refusal is HLT's block.
      EXPECT_EQ(M.Cpu_.Jit->stats().InsnsTranslated, 16u * 6);
      EXPECT_EQ(M.Cpu_.Jit->stats().Refused[0], 1u);
    }
  }
  // The interpreter's result, exactly: two quadwords and a doubleword of RAX per 24 bytes.
  EXPECT_EQ(Results[0].Retired, 16u * 6 + 1);
  EXPECT_EQ(Results[0].S.Gpr[RDI], kDataBase + 16 * 24);
  for (unsigned K = 0; K < 16; ++K) {
    uint64_t Q0, Q1;
    uint32_t D0, D1;
    std::memcpy(&Q0, &Results[0].Data[24 * K], 8);
    std::memcpy(&Q1, &Results[0].Data[24 * K + 8], 8);
    std::memcpy(&D0, &Results[0].Data[24 * K + 16], 4);
    std::memcpy(&D1, &Results[0].Data[24 * K + 20], 4);
    EXPECT_EQ(Q0, 0x1122334455667788ull) << K;
    EXPECT_EQ(Q1, 0x1122334455667788ull) << K;
    EXPECT_EQ(D0, 0x55667788u) << K;
    EXPECT_EQ(D1, 0xa5a5a5a5u) << K;
  }
  expectModesAgree(Results);
}

TEST(Translator, InlineMovLoadsOfAReadWatchedPageReportEveryReadAsInterpreted) {
  // A translated loop whose inline MOV loads hit the TLB (emitTlbHitMov) until a read
  // watch is set on their page (PhysMem::watchReads and Mmu::dropDataMappings, as the run
  // control sets it): from then on each load of the watched bytes misses inline, takes the
  // interpreter's path and is reported, exactly as interpreted; a load of the bytes after
  // them and a store into the page are not.
  //   loop: mov rax, [rbx] ; mov rcx, [rbx + 8] ; mov [rbx + 16], rax ; dec edi ; jnz loop
  //   hlt
  const std::vector<uint8_t> Code = {
      0x48, 0x8b, 0x03,       // 0
      0x48, 0x8b, 0x4b, 0x08, // 3
      0x48, 0x89, 0x43, 0x10, // 7
      0xff, 0xcf,             // 11
      0x75, 0xf1,             // 13: jnz 0
      0xf4};                  // 15
  struct Result {
    std::vector<WatchedLoadEvent> Loads;
    uint64_t Cycles, Retired, Rip;
  } Results[2];
  int Slot = 0;
  for (ExecMode Mode : {ExecMode::Interp, ExecMode::Translate}) {
    SCOPED_TRACE(Mode == ExecMode::Interp ? "interp" : "translate");
    TestMachine M;
    M.setupLongMode();
    if (Mode != ExecMode::Interp)
      translateAtOnce(M, Mode);
    WatchLog Log;
    M.Cpu_.Transitions = &Log;
    M.loadCode(Code);
    M.S.Gpr[RBX] = kDataBase;
    M.S.Gpr[RDI] = 50;
    // 20 iterations unwatched: translated, with the page in the read and write TLBs.
    ASSERT_EQ(M.run(100), StopReason::InsnLimit);
    ASSERT_NE(M.Cpu_.Mmu.readHost(Gla(kDataBase), 8, false), nullptr);
    M.Mem.watchReads(Hpa(kDataBase), 8);
    M.Cpu_.Mmu.dropDataMappings(kDataBase >> 12);
    ASSERT_EQ(M.run(1000), StopReason::Halted);
    if (Mode == ExecMode::Translate) {
      EXPECT_GT(M.Cpu_.Jit->stats().InsnsTranslated, 200u);
    }
    Results[Slot++] = {Log.Loads, M.Cpu_.Cycles, M.Cpu_.Retired, M.S.Rip};
  }
  ASSERT_EQ(Results[0].Loads.size(), 30u); // the 30 iterations after the watch was set
  ASSERT_EQ(Results[1].Loads.size(), 30u);
  for (size_t K = 0; K < 30; ++K) {
    EXPECT_EQ(Results[0].Loads[K].Rip, kCodeBase) << K;
    EXPECT_EQ(Results[0].Loads[K].Addr, kDataBase) << K;
    EXPECT_EQ(Results[0].Loads[K].SizeBytes, 8u) << K;
    EXPECT_EQ(Results[1].Loads[K].Rip, Results[0].Loads[K].Rip) << K;
    EXPECT_EQ(Results[1].Loads[K].Tsc, Results[0].Loads[K].Tsc) << K;
  }
  EXPECT_EQ(Results[0].Cycles, Results[1].Cycles);
  EXPECT_EQ(Results[0].Retired, Results[1].Retired);
  EXPECT_EQ(Results[0].Rip, Results[1].Rip);
}

TEST(Translator, ABlockEndingInAnUntranslatableInstructionIsTranslatedUpToIt) {
  // The decoder cuts a block of at least 8 translatable instructions before its
  // block-ending instruction when the translator has no form for that one (here OUT):
  // the prefix runs translated, OUT interpreted as a block of its own (cpu/decode.cpp,
  // splitsBefore). Interpreted, translated and in lockstep: the same registers, clock,
  // count and stack.
  //   loop: add rsi, 1 ; add rsi, 2 ; add r8, 3 ; push rsi ; pop r9 ; xor r10, r8
  //         add r11, 5 ; sub r12, 1 ; out 0x80, al ; dec edi ; jnz loop ; hlt
  const std::vector<uint8_t> Code = {
      0x48, 0x83, 0xc6, 0x01, // 0
      0x48, 0x83, 0xc6, 0x02, // 4
      0x49, 0x83, 0xc0, 0x03, // 8
      0x56,                   // 12
      0x41, 0x59,             // 13
      0x4d, 0x31, 0xc2,       // 15
      0x49, 0x83, 0xc3, 0x05, // 18
      0x49, 0x83, 0xec, 0x01, // 22
      0xe6, 0x80,             // 26: out 0x80, al
      0xff, 0xcf,             // 28
      0x75, 0xe0,             // 30: jnz 0 (32 - 32)
      0xf4};                  // 32
  ModeRun Results[3];
  int Slot = 0;
  for (ExecMode Mode : {ExecMode::Interp, ExecMode::Translate, ExecMode::Lockstep}) {
    TestMachine M;
    startIn(M, Mode, Code);
    M.S.Gpr[RDI] = 40;
    ASSERT_EQ(M.run(100000), StopReason::Halted);
    Results[Slot++] = ModeRun{M.S, M.Cpu_.Cycles, M.Cpu_.Retired, {}};
    if (Mode == ExecMode::Translate) {
      // The 8 instructions before OUT at each of the 40 runs, and DEC, JNZ at each.
      EXPECT_EQ(M.Cpu_.Jit->stats().InsnsTranslated, 40u * (8 + 2));
      EXPECT_EQ(M.Cpu_.Jit->stats().Bailouts, 0u);
    }
  }
  EXPECT_EQ(Results[0].Retired, 40u * 11 + 1);
  EXPECT_EQ(Results[0].S.Gpr[RSI], 40u * 3);
  EXPECT_EQ(Results[0].S.Gpr[R9], 40u * 3);
  expectModesAgree(Results);
}
