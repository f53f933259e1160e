// The two flag engines agree: the host-assisted one used on x86-64 hosts and the
// portable one written from the SDM's flag definitions (SDM Vol. 1, EFLAGS Register).
#include "cpu/exec.h"
#include "tests/support/random.h"

#include <gtest/gtest.h>

using namespace vmxsim;

namespace {
template <typename T> void checkAgree(uint64_t Seed) {
  test::SplitMix64 Rng(Seed);
  for (int K = 0; K < 200000; ++K) {
    // Mix in small and boundary values, where carries and overflows cluster.
    T A = T(Rng.next()), B = T(Rng.next());
    if (K % 4 == 1)
      A = T(K & 3 ? kMsb<T> - (K & 7) : T(~T(0)) - T(K & 7));
    if (K % 8 == 2)
      B = T(K & 15);
    for (bool Cin : {false, true}) {
      T RAdd = T(A + B + Cin), RSub = T(A - B - Cin);
      ASSERT_EQ(flagsAdd<T>(A, B, RAdd, Cin), portable::flagsAdd<T>(A, B, RAdd, Cin))
          << std::hex << +A << " + " << +B << " + " << Cin;
      ASSERT_EQ(flagsSub<T>(A, B, RSub, Cin), portable::flagsSub<T>(A, B, RSub, Cin))
          << std::hex << +A << " - " << +B << " - " << Cin;
    }
    ASSERT_EQ(flagsSzp<T>(A), portable::flagsSzp<T>(A));
  }
}
} // namespace

TEST(EflagsRegister, HostAndPortableFlagsAgree8) { checkAgree<uint8_t>(1); }
TEST(EflagsRegister, HostAndPortableFlagsAgree16) { checkAgree<uint16_t>(2); }
TEST(EflagsRegister, HostAndPortableFlagsAgree32) { checkAgree<uint32_t>(3); }
TEST(EflagsRegister, HostAndPortableFlagsAgree64) { checkAgree<uint64_t>(4); }

TEST(EflagsRegister, AddOfMaxPlusOneSetsCarryZeroAuxParity) {
  EXPECT_EQ(flagsAdd<uint8_t>(0xff, 1, 0, false),
            rflags::CF | rflags::ZF | rflags::AF | rflags::PF);
  EXPECT_EQ(flagsAdd<uint32_t>(0x7fffffff, 1, 0x80000000u, false),
            rflags::SF | rflags::OF | rflags::AF | rflags::PF);
  EXPECT_EQ(flagsSub<uint64_t>(0, 1, ~uint64_t(0), false),
            rflags::CF | rflags::SF | rflags::AF | rflags::PF);
}
