// A deterministic mutation fuzzer for the loaders: valid ELF32, ELF64 and a.out-kludge
// images are truncated, bit-flipped and given extreme sizes and offsets; every load must
// return (success or a one-line Error) without crashing. CI runs this under ASan+UBSan.
#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "harness/loader.h"
#include "harness/testing/multiboot_images.h"
#include "tests/support/random.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::testing;
using vmxsim::test::SplitMix64;

namespace {

const uint64_t kInteresting[] = {0,          1,          0x7f,       0x80,
                                 0xff,       0xfff,      0x1000,     0x7fffffff,
                                 0x80000000, 0xfffffffe, 0xffffffff, 0x100000,
                                 0x9fc00,    0xfee00000, 1ull << 32, 0x7fffffffffffffffull,
                                 ~0ull,      0xfffffffffffff000ull};

std::vector<uint8_t> mutate(std::vector<uint8_t> B, SplitMix64 &R) {
  const unsigned Rounds = 1 + unsigned(R.nextBelow(4));
  for (unsigned K = 0; K < Rounds && !B.empty(); ++K) {
    switch (R.nextBelow(5)) {
    case 0: // truncate
      B.resize(R.nextBelow(B.size() + 1));
      break;
    case 1: // flip bits
      for (unsigned I = 0, N = 1 + unsigned(R.nextBelow(8)); I < N && !B.empty(); ++I)
        B[R.nextBelow(B.size())] ^= uint8_t(1u << R.nextBelow(8));
      break;
    case 2: { // an interesting 4- or 8-byte value at an aligned offset (header fields)
      const unsigned W = R.nextBelow(2) ? 8 : 4;
      if (B.size() < W)
        break;
      const uint64_t Off = R.nextBelow(B.size() - W + 1) & ~uint64_t(3);
      const uint64_t V = R.pick(kInteresting);
      std::memcpy(&B[Off], &V, W);
      break;
    }
    case 3: // random byte
      B[R.nextBelow(B.size())] = uint8_t(R.next());
      break;
    case 4: // grow with junk
      B.resize(B.size() + R.nextBelow(64), uint8_t(R.next()));
      break;
    }
  }
  return B;
}

} // namespace

TEST(LoaderFuzz, MutatedImagesNeverCrash) {
  PhysMem Mem(8ull << 20);
  IoBus Io;
  Cpu C(Mem, Io, CpuModel::defaultModel());
  const std::vector<uint8_t> Code = exitWithMagicXorInfo();
  ElfImageOptions High;
  High.VAddr = 0xffffffff80100000ull;
  AoutImageOptions Low;
  Low.LoadAddr = 0x1000;
  Low.BssEndAddr = 0x9f000;
  const std::vector<std::vector<uint8_t>> Seeds = {
      elf32Image(Code), elf64Image(Code), elf64Image(Code, High), aoutImage(Code),
      aoutImage(Code, Low)};
  MultibootParams P;
  P.KernelName = "fuzz.elf";
  P.Append = "a=b";
  P.Modules.push_back({"mod arg", std::vector<uint8_t>(100, 0xab)});

  SplitMix64 R{0x766d7873696dull};
  unsigned Loaded = 0, Rejected = 0;
  for (unsigned I = 0; I < 20000; ++I) {
    std::vector<uint8_t> Img = mutate(Seeds[I % Seeds.size()], R);
    BootLayout L;
    Error E = loadMultiboot(C, Img, P, &L);
    if (E) {
      ++Rejected;
      EXPECT_NE(E.Message, "");
      EXPECT_EQ(E.Message.find('\n'), std::string::npos);
    } else {
      ++Loaded;
      EXPECT_LT(C.S.Rip, 1ull << 32);
    }
    // Flat loads at random addresses in every mode.
    const uint64_t Addr = R.nextBelow(2) ? R.nextBelow(16ull << 20) : R.pick(kInteresting);
    Error F = loadFlat(C, std::span<const uint8_t>(Img).first(std::min<size_t>(Img.size(), 64)), Addr,
                       EntryMode(R.nextBelow(3)));
    if (F) {
      EXPECT_EQ(F.Message.find('\n'), std::string::npos);
    }
  }
  // Both outcomes are exercised (exact counts are fixed by the seed).
  EXPECT_GT(Loaded, 100u);
  EXPECT_GT(Rejected, 100u);
}
