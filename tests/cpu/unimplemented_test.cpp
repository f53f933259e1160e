// What an instruction vmxsim has no handler for becomes (cpu/decode.cpp, execUnbound):
// #UD when the processor does not report its extension in CPUID, as on such a processor;
// otherwise the run stops as unimplemented, naming it — never a guest #UD. And the CET
// hint space, which is a NOP on a processor without CET (SDM Vol. 2A, ENDBR64; Vol. 2B,
// RDSSPD/RDSSPQ).
#include "tests/cpu/insn_fault_helpers.h"
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

/// Each form (followed by HLT), run alone in 64-bit mode from kCodeBase with RAX pointing
/// at data, raises #UD at its first byte.
void expectUdAtStart(const std::vector<std::vector<uint8_t>> &Forms) {
  for (const auto &Code : Forms) {
    TestMachine M;
    M.setupLongMode();
    M.S.Gpr[RAX] = kCodeBase + 0x800;
    M.loadCode(Code);
    const FaultInfo F = runToFault(M);
    EXPECT_TRUE(F.Faulted) << int(Code[0]) << " " << int(Code[1]) << " " << int(Code[2]);
    EXPECT_EQ(F.Vector, vec::UD) << int(Code[0]) << " " << int(Code[1]) << " " << int(Code[2]);
    EXPECT_EQ(F.Rip, kCodeBase) << int(Code[0]) << " " << int(Code[1]) << " " << int(Code[2]);
  }
}

TEST(UnimplementedInstructions, CetHintSpaceExecutesAsNop) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RAX] = 0x1234;
  M.S.Gpr[RCX] = 0x5678;
  M.loadCode({0xf3, 0x48, 0x0f, 0x1e, 0xc8, // rdsspq rax
              0xf3, 0x0f, 0x1e, 0xc9,       // rdsspd ecx
              0xf3, 0x0f, 0x1e, 0xfa,       // endbr64
              0xf3, 0x0f, 0x1e, 0xfb,       // endbr32
              0xf4});
  EXPECT_EQ(M.run(100), StopReason::Halted);
  EXPECT_EQ(M.S.Gpr[RAX], 0x1234u); // a NOP: the destination is not written
  EXPECT_EQ(M.S.Gpr[RCX], 0x5678u);
  EXPECT_EQ(M.S.Rip, kCodeBase + 18);
  EXPECT_EQ(M.Cpu_.Retired, 5u);
}

TEST(UnimplementedInstructions, ShadowStackInstructionsRaiseUdWithoutCet) {
  // INCSSP, SETSSBSY, SAVEPREVSSP and CLRSSBSY: #UD when CR4.CET = 0 (SDM Vol. 2A/2B);
  // vmxsim's processors report no CET, so CR4.CET is always 0.
  const std::vector<std::vector<uint8_t>> Forms = {
      {0xf3, 0x48, 0x0f, 0xae, 0xe8, 0xf4}, // incsspq rax
      {0xf3, 0x0f, 0x01, 0xe8, 0xf4},       // setssbsy
      {0xf3, 0x0f, 0x01, 0xea, 0xf4},       // saveprevssp
      {0xf3, 0x0f, 0xae, 0x30, 0xf4},       // clrssbsy [rax]
  };
  expectUdAtStart(Forms);
}

TEST(UnimplementedInstructions, InstructionOfAnUnreportedExtensionRaisesUd) {
  // CLWB (CPUID.7:EBX[24] = 0 in the model), RDPID
  // (CPUID.7:ECX[22] = 0), VADDPS (AVX: CPUID.1:ECX[28] = 0), EXTRQ (AMD's SSE4a).
  const std::vector<std::vector<uint8_t>> Forms = {
      {0x66, 0x0f, 0xae, 0x30, 0xf4},             // clwb [rax]
      {0xf3, 0x0f, 0xc7, 0xf8, 0xf4},             // rdpid rax
      {0xc5, 0xf0, 0x58, 0xc2, 0xf4},             // vaddps xmm0, xmm1, xmm2
      {0x66, 0x0f, 0x78, 0xc0, 0x08, 0x08, 0xf4}, // extrq xmm0, 8, 8
      {0x0f, 0xaa, 0xf4},                         // rsm (not in SMM)
  };
  expectUdAtStart(Forms);
}

TEST(UnimplementedInstructions, InstructionTheProcessorHasAndVmxsimLacksStopsTheRun) {
  // A model whose CPUID reports CLWB (CPUID.7:EBX[24]), which vmxsim has no handler
  // for: the processor has the instruction, so it is not a #UD.
  CpuModel Model = CpuModel::defaultModel();
  for (CpuidLeaf &L : Model.Cpuid)
    if (L.Leaf == 7)
      L.Ebx |= 1u << 24;
  TestMachine M(64ull << 20, Model);
  M.setupProtected32();
  M.S.Gpr[RAX] = kCodeBase + 0x800;
  M.loadCode({0x90, 0x66, 0x0f, 0xae, 0x30, 0xf4}); // nop; clwb [eax]; hlt
  EXPECT_EQ(M.run(100), StopReason::Unimplemented);
  ASSERT_NE(M.Cpu_.StopWhat, nullptr);
  EXPECT_STREQ(M.Cpu_.StopWhat, "clwb");
  EXPECT_EQ(M.Cpu_.StopRip, kCodeBase + 1);
  EXPECT_EQ(M.S.Rip, kCodeBase + 1); // stopped at the instruction, not past it
  EXPECT_EQ(M.Cpu_.Retired, 1u);
}

} // namespace
