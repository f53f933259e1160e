// The hypervisor core's MOV decoder for emulated MMIO (hvm/vmx/movdecode.c), compiled for
// the host: each accepted form's length, size, direction, register and immediate, and
// the forms it refuses. Encodings per SDM Vol. 2A "Instruction Format" / Vol. 2B "MOV".
extern "C" {
#include "vmx/movdecode.h"
}

#include <gtest/gtest.h>

#include <vector>

namespace {

MovInsn decode(std::vector<uint8_t> Bytes, bool *Ok = nullptr) {
  Bytes.resize(16, 0);
  MovInsn M{};
  bool R = decodeMov(Bytes.data(), &M);
  if (Ok)
    *Ok = R;
  else
    EXPECT_TRUE(R);
  return M;
}

} // namespace

TEST(MovDecode, RegisterFormsWithEveryAddressingShape) {
  // mov %rdx,-0x8(%rcx): REX.W 89 /r, mod 01 (disp8).
  MovInsn M = decode({0x48, 0x89, 0x51, 0xf8});
  EXPECT_EQ(M.Length, 4u);
  EXPECT_EQ(M.Size, 8u);
  EXPECT_TRUE(M.Store);
  EXPECT_FALSE(M.HasImm);
  EXPECT_EQ(M.Reg, 2u);
  // mov -0x8(%rcx),%r8: REX.WR 8B /r.
  M = decode({0x4c, 0x8b, 0x41, 0xf8});
  EXPECT_EQ(M.Length, 4u);
  EXPECT_FALSE(M.Store);
  EXPECT_EQ(M.Reg, 8u);
  // mov (%rax),%ecx: mod 00.
  M = decode({0x8b, 0x08});
  EXPECT_EQ(M.Length, 2u);
  EXPECT_EQ(M.Size, 4u);
  EXPECT_EQ(M.Reg, 1u);
  // mov %eax,0x12345678(%rbx,%rsi,4): SIB and disp32.
  M = decode({0x89, 0x84, 0xb3, 0x78, 0x56, 0x34, 0x12});
  EXPECT_EQ(M.Length, 7u);
  // mov 0x0(%rip),%eax: RIP-relative disp32.
  M = decode({0x8b, 0x05, 0, 0, 0, 0});
  EXPECT_EQ(M.Length, 6u);
  // mov 0xd0000000,%eax through SIB with no base (mod 00, base 101): disp32.
  M = decode({0x8b, 0x04, 0x25, 0x00, 0x00, 0x00, 0xd0});
  EXPECT_EQ(M.Length, 7u);
  // mov %ax,(%rdi): 66 prefix.
  M = decode({0x66, 0x89, 0x07});
  EXPECT_EQ(M.Length, 3u);
  EXPECT_EQ(M.Size, 2u);
}

TEST(MovDecode, ImmediateAndAbsoluteForms) {
  // movl $0x55,-0x8(%rcx): C7 /0 imm32.
  MovInsn M = decode({0xc7, 0x41, 0xf8, 0x55, 0, 0, 0});
  EXPECT_EQ(M.Length, 7u);
  EXPECT_TRUE(M.Store);
  EXPECT_TRUE(M.HasImm);
  EXPECT_EQ(M.Imm, 0x55u);
  // movq $-1,(%rax): REX.W C7 /0, imm32 sign-extended.
  M = decode({0x48, 0xc7, 0x00, 0xff, 0xff, 0xff, 0xff});
  EXPECT_EQ(M.Length, 7u);
  EXPECT_EQ(M.Imm, ~0ull);
  // movw $0x1234,(%rax): 66 C7 /0 imm16.
  M = decode({0x66, 0xc7, 0x00, 0x34, 0x12});
  EXPECT_EQ(M.Length, 5u);
  EXPECT_EQ(M.Imm, 0x1234u);
  // movabs 0xd0000000,%eax: A1 moffs64.
  M = decode({0xa1, 0, 0, 0, 0xd0, 0, 0, 0, 0});
  EXPECT_EQ(M.Length, 9u);
  EXPECT_FALSE(M.Store);
  EXPECT_EQ(M.Reg, 0u);
  // movabs %rax,0xd0000008: REX.W A3.
  M = decode({0x48, 0xa3, 8, 0, 0, 0xd0, 0, 0, 0, 0});
  EXPECT_EQ(M.Length, 10u);
  EXPECT_TRUE(M.Store);
  EXPECT_EQ(M.Size, 8u);
}

TEST(MovDecode, RefusesWhatItDoesNotEmulate) {
  bool Ok = true;
  decode({0x89, 0xc8}, &Ok); // mov %ecx,%eax: register to register
  EXPECT_FALSE(Ok);
  decode({0xc7, 0x48, 0x00}, &Ok); // C7 /1: no such instruction
  EXPECT_FALSE(Ok);
  decode({0x88, 0x07}, &Ok); // mov %al,(%rdi): byte form, not emulated
  EXPECT_FALSE(Ok);
  decode({0x0f, 0xb6, 0x07}, &Ok); // movzbl (%rdi),%eax
  EXPECT_FALSE(Ok);
}
