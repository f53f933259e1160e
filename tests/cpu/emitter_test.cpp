// The translator's machine-code writer (cpu/jit/emitter.h): every form it emits, for
// every register and for displacements and immediates at the edges of their short
// encodings, decodes (with capstone, an independent decoder) to the operation and
// operands asked for, in the shortest encoding (SDM Vol. 2, 2.1.5 "Addressing-Mode
// Encoding of ModR/M and SIB Bytes"; 2.2.1 "REX Prefixes").
#include "cpu/jit/emitter.h"

#include <capstone/capstone.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using namespace vmxsim::x64;

constexpr x86_reg kReg64[16] = {X86_REG_RAX, X86_REG_RCX, X86_REG_RDX, X86_REG_RBX,
                                X86_REG_RSP, X86_REG_RBP, X86_REG_RSI, X86_REG_RDI,
                                X86_REG_R8,  X86_REG_R9,  X86_REG_R10, X86_REG_R11,
                                X86_REG_R12, X86_REG_R13, X86_REG_R14, X86_REG_R15};
constexpr x86_reg kReg32[16] = {X86_REG_EAX,  X86_REG_ECX,  X86_REG_EDX,  X86_REG_EBX,
                                X86_REG_ESP,  X86_REG_EBP,  X86_REG_ESI,  X86_REG_EDI,
                                X86_REG_R8D,  X86_REG_R9D,  X86_REG_R10D, X86_REG_R11D,
                                X86_REG_R12D, X86_REG_R13D, X86_REG_R14D, X86_REG_R15D};

// The displacements and immediates at the edges of the 8-bit forms.
const std::vector<int32_t> kEdges = {0, 1, -1, 127, 128, -128, -129, 255, 256, 0x12345678,
                                     -0x12345678};

struct Decoded {
  unsigned Id = 0;
  size_t Size = 0;
  cs_x86 X = {};
};

class Capstone {
public:
  Capstone() {
    EXPECT_EQ(cs_open(CS_ARCH_X86, CS_MODE_64, &H), CS_ERR_OK);
    cs_option(H, CS_OPT_DETAIL, CS_OPT_ON);
  }
  ~Capstone() { cs_close(&H); }
  /// The one instruction that is all of E's bytes (Size 0 if they are not one).
  Decoded one(Emitter &E, uint64_t At = 0) {
    cs_insn *I = nullptr;
    Decoded D;
    const size_t N = cs_disasm(H, E.data(), E.size(), At, 0, &I);
    if (N == 1 && I[0].size == E.size())
      D = Decoded{I[0].id, I[0].size, I[0].detail->x86};
    if (N)
      cs_free(I, N);
    return D;
  }

private:
  csh H = 0;
};

struct Buf {
  uint8_t Bytes[32];
  Emitter E{Bytes, sizeof Bytes};
};

void expectReg(const cs_x86_op &Op, x86_reg R) {
  EXPECT_EQ(Op.type, X86_OP_REG);
  EXPECT_EQ(Op.reg, R);
}

void expectMem(const cs_x86_op &Op, unsigned Base, x86_reg Index, int Scale, int64_t Disp) {
  ASSERT_EQ(Op.type, X86_OP_MEM);
  EXPECT_EQ(Op.mem.base, kReg64[Base]);
  EXPECT_EQ(Op.mem.index, Index);
  if (Index != X86_REG_INVALID) {
    EXPECT_EQ(Op.mem.scale, Scale);
  }
  EXPECT_EQ(Op.mem.disp, Disp);
}

/// Bytes of the shortest displacement for [Base + Disp] with no index.
size_t dispBytes(unsigned Base, int32_t Disp) {
  if (Disp == 0 && (Base & 7) != HBP)
    return 0;
  return fitsInt8(Disp) ? 1 : 4;
}

TEST(Emitter, CpuOperandsAreBiasedAndTakeTheShortestDisplacement) {
  // [RBX + Off - kCpuBias]: the Cpu's bytes 0..255 with a disp8 (128 with none).
  Capstone Cs;
  for (const int32_t Off : {0, 0x78, 0x80, 0x88, 0xff, 0x100, 0x3f0, 0x9b28}) {
    for (unsigned R = 0; R < 16; ++R) {
      SCOPED_TRACE(testing::Message() << "offset " << Off << " register " << R);
      Buf B;
      B.E.load(8, Reg(R), Off);
      const Decoded D = Cs.one(B.E);
      ASSERT_EQ(D.Id, X86_INS_MOV);
      EXPECT_EQ(D.Size, 3 + dispBytes(HBX, Off - kCpuBias));
      expectReg(D.X.operands[0], kReg64[R]);
      expectMem(D.X.operands[1], HBX, X86_REG_INVALID, 1, Off - kCpuBias);
      Buf S;
      S.E.store(4, Reg(R), Off);
      const Decoded T = Cs.one(S.E);
      ASSERT_EQ(T.Id, X86_INS_MOV);
      EXPECT_EQ(T.Size, (R >= 8 ? 3 : 2) + dispBytes(HBX, Off - kCpuBias));
      expectMem(T.X.operands[0], HBX, X86_REG_INVALID, 1, Off - kCpuBias);
      expectReg(T.X.operands[1], kReg32[R]);
    }
    Buf A;
    A.E.addMem64Imm(Off, -1);
    Decoded D = Cs.one(A.E);
    ASSERT_EQ(D.Id, X86_INS_ADD);
    EXPECT_EQ(D.Size, 4 + dispBytes(HBX, Off - kCpuBias));
    expectMem(D.X.operands[0], HBX, X86_REG_INVALID, 1, Off - kCpuBias);
    EXPECT_EQ(D.X.operands[1].imm, -1);
    Buf T;
    T.E.btMem64(Off, 18);
    D = Cs.one(T.E);
    ASSERT_EQ(D.Id, X86_INS_BT);
    expectMem(D.X.operands[0], HBX, X86_REG_INVALID, 1, Off - kCpuBias);
    EXPECT_EQ(D.X.operands[1].imm, 18);
  }
}

TEST(Emitter, LeaTakesTheShortestFormForEveryBase) {
  Capstone Cs;
  for (unsigned Base = 0; Base < 16; ++Base)
    for (const unsigned Dst : {0u, 2u, 9u, 15u})
      for (const int32_t Disp : kEdges) {
        SCOPED_TRACE(testing::Message() << "base " << Base << " dst " << Dst << " disp " << Disp);
        Buf B;
        B.E.leaDisp32(Reg(Dst), Reg(Base), Disp);
        const Decoded D = Cs.one(B.E);
        if (Disp == 0) { // a plain copy
          ASSERT_EQ(D.Id, X86_INS_MOV);
          EXPECT_EQ(D.Size, 3u);
          expectReg(D.X.operands[0], kReg64[Dst]);
          expectReg(D.X.operands[1], kReg64[Base]);
          continue;
        }
        ASSERT_EQ(D.Id, X86_INS_LEA);
        EXPECT_EQ(D.Size, 3 + ((Base & 7) == HSP) + dispBytes(Base, Disp));
        expectReg(D.X.operands[0], kReg64[Dst]);
        expectMem(D.X.operands[1], Base, X86_REG_INVALID, 1, Disp);
      }
}

TEST(Emitter, ScaledIndexLeaTakesTheShortestDisplacement) {
  Capstone Cs;
  for (unsigned Base = 0; Base < 16; ++Base)
    for (unsigned Index = 0; Index < 16; ++Index) {
      if (Index == HSP)
        continue; // no index
      for (uint8_t Scale = 0; Scale < 4; ++Scale)
        for (const int32_t Disp : kEdges) {
          SCOPED_TRACE(testing::Message() << "base " << Base << " index " << Index << " scale "
                                          << int(Scale) << " disp " << Disp);
          Buf B;
          B.E.leaSib(HDX, Reg(Base), Reg(Index), Scale, Disp);
          const Decoded D = Cs.one(B.E);
          ASSERT_EQ(D.Id, X86_INS_LEA);
          EXPECT_EQ(D.Size, 4 + dispBytes(Base, Disp));
          expectMem(D.X.operands[1], Base, kReg64[Index], 1 << Scale, Disp);
        }
    }
}

TEST(Emitter, AluImmediatesTakeTheShortestForm) {
  // 83 /digit ib when the sign-extended byte is the operand's value, else 81 /digit id.
  Capstone Cs;
  const x86_insn Ids[8] = {X86_INS_ADD, X86_INS_OR,  X86_INS_ADC, X86_INS_SBB,
                           X86_INS_AND, X86_INS_SUB, X86_INS_XOR, X86_INS_CMP};
  for (unsigned Op = 0; Op < 8; ++Op)
    for (const unsigned Size : {4u, 8u})
      for (unsigned R = 0; R < 16; ++R)
        for (const int32_t Imm : kEdges) {
          SCOPED_TRACE(testing::Message() << "op " << Op << " size " << Size << " register " << R
                                          << " imm " << Imm);
          Buf B;
          B.E.aluImm(Alu(Op), Size, Reg(R), uint32_t(Imm));
          const Decoded D = Cs.one(B.E);
          ASSERT_EQ(D.Id, unsigned(Ids[Op]));
          EXPECT_EQ(D.Size, (Size == 8 || R >= 8 ? 3u : 2u) + (fitsInt8(Imm) ? 1 : 4));
          expectReg(D.X.operands[0], Size == 8 ? kReg64[R] : kReg32[R]);
          if (Size == 8)
            EXPECT_EQ(D.X.operands[1].imm, int64_t(Imm));
          else
            EXPECT_EQ(uint32_t(D.X.operands[1].imm), uint32_t(Imm));
        }
}

TEST(Emitter, ImmediateLoadsTakeTheShortestFormAndTheWholeValue) {
  Capstone Cs;
  const uint64_t Values[] = {0,          1,          0x7fffffff,         0x80000000,
                             0xffffffff, 0x100000000, 0x00005555555bdb10, 0xffffffff80000000,
                             0xffffffff7fffffff, 0x8000000000000000, ~uint64_t(0)};
  for (const uint64_t V : Values)
    for (unsigned R = 0; R < 16; ++R) {
      SCOPED_TRACE(testing::Message() << std::hex << "value " << V << " register " << R);
      Buf B;
      B.E.movImm64(Reg(R), V);
      const Decoded D = Cs.one(B.E);
      const bool Sx32 = int64_t(V) >= INT32_MIN && int64_t(V) < 0;
      ASSERT_EQ(D.Id, V <= 0xffffffff || Sx32 ? X86_INS_MOV : X86_INS_MOVABS);
      if (V <= 0xffffffff) { // MOV r32, imm32 zero-extends
        EXPECT_EQ(D.Size, R >= 8 ? 6u : 5u);
        expectReg(D.X.operands[0], kReg32[R]);
        EXPECT_EQ(uint32_t(D.X.operands[1].imm), uint32_t(V));
      } else {
        EXPECT_EQ(D.Size, Sx32 ? 7u : 10u);
        expectReg(D.X.operands[0], kReg64[R]);
        EXPECT_EQ(uint64_t(D.X.operands[1].imm), V);
      }
      Buf A;
      A.E.movAbs(Reg(R), V);
      const Decoded L = Cs.one(A.E);
      ASSERT_EQ(L.Id, X86_INS_MOVABS);
      EXPECT_EQ(L.Size, 10u);
      EXPECT_EQ(uint64_t(L.X.operands[1].imm), V);
    }
}

TEST(Emitter, BaseRelativeFormsEncodeEveryBase) {
  // Op R, [Base + Disp8]: RSP and R12 need a SIB byte, RBP and R13 a displacement.
  Capstone Cs;
  for (unsigned Base = 0; Base < 16; ++Base)
    for (const int8_t Disp : {0, 8, -8, 127, -128}) {
      SCOPED_TRACE(testing::Message() << "base " << Base << " disp " << int(Disp));
      Buf B;
      B.E.loadAt(HCX, Reg(Base), Disp);
      Decoded D = Cs.one(B.E);
      ASSERT_EQ(D.Id, X86_INS_MOV);
      EXPECT_EQ(D.Size, 3 + ((Base & 7) == HSP) + dispBytes(Base, Disp));
      expectReg(D.X.operands[0], X86_REG_RCX);
      expectMem(D.X.operands[1], Base, X86_REG_INVALID, 1, Disp);
      Buf J;
      J.E.jumpAt(Reg(Base), Disp);
      D = Cs.one(J.E);
      ASSERT_EQ(D.Id, X86_INS_JMP);
      expectMem(D.X.operands[0], Base, X86_REG_INVALID, 1, Disp);
    }
}

TEST(Emitter, TableLookupsIndexTheBiasedCpu) {
  // CMP/ADD/MOV R, [RBX + Index + Off - kCpuBias] (the TLB's slots).
  Capstone Cs;
  const x86_insn Ids[3] = {X86_INS_CMP, X86_INS_ADD, X86_INS_MOV};
  const uint8_t Ops[3] = {0x3b, 0x03, 0x8b};
  for (unsigned K = 0; K < 3; ++K)
    for (unsigned Index = 0; Index < 8; ++Index) {
      if (Index == HSP)
        continue;
      for (const int32_t Off : {0, 0x80, 0xff, 0x100, 0x430, 0x3440}) {
        Buf B;
        B.E.opBaseIndex(Ops[K], HDX, Reg(Index), Off);
        const Decoded D = Cs.one(B.E);
        ASSERT_EQ(D.Id, unsigned(Ids[K]));
        EXPECT_EQ(D.Size, 4u + (fitsInt8(Off - kCpuBias) ? 1 : 4));
        expectReg(D.X.operands[0], X86_REG_RDX);
        expectMem(D.X.operands[1], HBX, kReg64[Index], 1, Off - kCpuBias);
      }
    }
}

TEST(Emitter, CallsReachTheirTargetFromTheOrigin) {
  for (const uint64_t Target : {0x7f0000001000ull, 0x7f0000000000ull, 0x7effffff0000ull}) {
    Buf B;
    const uint64_t Origin = 0x7f0000000800;
    B.E.setOrigin(Origin);
    B.E.byte(0x90); // the call starts one byte in
    B.E.callAbs(Target);
    cs_insn *I = nullptr;
    csh H;
    ASSERT_EQ(cs_open(CS_ARCH_X86, CS_MODE_64, &H), CS_ERR_OK);
    cs_option(H, CS_OPT_DETAIL, CS_OPT_ON);
    ASSERT_EQ(cs_disasm(H, B.Bytes, B.E.size(), Origin, 0, &I), 2u);
    EXPECT_EQ(I[1].id, unsigned(X86_INS_CALL));
    EXPECT_EQ(I[1].size, 5u);
    EXPECT_EQ(uint64_t(I[1].detail->x86.operands[0].imm), Target);
    cs_free(I, 2);
    cs_close(&H);
  }
}

} // namespace
