// Guest-physical memory of the machine: size limits, lazy commitment, unassigned reads.
#include "harness/machine.h"

#include <fstream>
#include <gtest/gtest.h>
#include <string>

using namespace vmxsim;

namespace {
uint64_t residentKiB() {
  std::ifstream In("/proc/self/status");
  std::string Line;
  while (std::getline(In, Line))
    if (Line.rfind("VmRSS:", 0) == 0)
      return std::stoull(Line.substr(6));
  return 0;
}
} // namespace

TEST(PhysicalMemory, SixtyFourGibMachineCommitsAlmostNothing) {
  const uint64_t Before = residentKiB();
  MachineConfig Cfg;
  Cfg.RamBytes = 64ull << 30;
  Cfg.Serial = OutputSpec::discard();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  EXPECT_EQ(M->mem().lowRamBytes(), 3ull << 30);
  EXPECT_EQ(M->mem().highRamBytes(), 61ull << 30);
  // Touch the last byte of RAM: one page, not the whole range.
  M->mem().write(Hpa((4ull << 30) + (61ull << 30) - 1), 1, 0x5a);
  EXPECT_EQ(M->mem().read(Hpa((4ull << 30) + (61ull << 30) - 1), 1), 0x5au);
  // The CPU's decoded-block cache is the only large allocation (a few MiB).
  EXPECT_LT(residentKiB() - Before, 32u * 1024u);
}

TEST(PhysicalMemory, AddressesAboveRamAndInHoleReadAllOnes) {
  MachineConfig Cfg;
  Cfg.Serial = OutputSpec::discard();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_TRUE(M) << Err.str();
  EXPECT_EQ(M->mem().read(Hpa(256ull << 20), 4), 0xffffffffu);
  EXPECT_EQ(M->mem().read(Hpa(0xe0000000), 8), ~0ull);
  EXPECT_EQ(M->mem().read(Hpa(5ull << 30), 2), 0xffffu);
  M->mem().write(Hpa(256ull << 20), 4, 0);
  EXPECT_EQ(M->mem().read(Hpa(256ull << 20), 4), 0xffffffffu);
  EXPECT_EQ(M->mem().read(Hpa((256ull << 20) - 4), 4), 0u);
}

TEST(PhysicalMemory, InvalidSizesAndCpuCountsAreConfigErrors) {
  MachineConfig Cfg;
  Cfg.RamBytes = 65ull << 30;
  Error E = Machine::validate(Cfg);
  EXPECT_EQ(E.Code, ErrorCode::BadConfig);
  EXPECT_EQ(E.str(), "memory size 69793218560 bytes is outside 2 MiB..64 GiB");
  Cfg.RamBytes = 1 << 20;
  EXPECT_EQ(Machine::validate(Cfg).Code, ErrorCode::BadConfig);
  Cfg.RamBytes = 256 << 20;
  Cfg.NumCpus = 65;
  EXPECT_EQ(Machine::validate(Cfg).str(), "CPU count 65 is outside 1..64");
  Cfg.NumCpus = 64;
  EXPECT_FALSE(Machine::validate(Cfg));
}
