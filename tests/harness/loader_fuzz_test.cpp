// A deterministic mutation fuzzer for the loaders: valid ELF32, ELF64, a.out-kludge and
// Linux bzImage images are truncated, bit-flipped and given extreme sizes and offsets; every load must
// return (success or a one-line Error) without crashing. CI runs this under ASan+UBSan.
#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "harness/boot_state.h"
#include "harness/loader.h"
#include "harness/testing/linux_images.h"
#include "harness/testing/multiboot_images.h"
#include "tests/support/random.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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
  const std::vector<uint8_t> ModuleBytes(100, 0xab);
  P.Modules.push_back({"mod arg", ModuleBytes});

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

TEST(LoaderFuzz, MutatedBzImagesNeverCrash) {
  // 32 MiB: room for the seeds' kernel (16..20 MiB) and for some of the initrds.
  PhysMem Mem(32ull << 20);
  IoBus Io;
  Cpu C(Mem, Io, CpuModel::defaultModel());
  const std::vector<uint8_t> Code = echoCmdlineExitWithInitrd();
  BzImageOptions NotRelocatable, Old, Low;
  NotRelocatable.Relocatable = 0;
  Old.Version = 0x206;
  Old.JumpOffset = 0x3a;
  Low.InitrdAddrMax = 0x00ffffff;
  const std::vector<std::vector<uint8_t>> Seeds = {
      bzImage(Code), bzImage(Code, NotRelocatable), bzImage(Code, Old), bzImage(Code, Low)};
  // Setup header fields (boot.rst, "The Real-Mode Kernel Header"), the likeliest to
  // reach a wrong computation.
  const uint64_t Fields[] = {0x1f1, 0x1f4, 0x201, 0x206, 0x211, 0x214, 0x22c,
                             0x230, 0x234, 0x238, 0x258, 0x25c, 0x260};
  const std::vector<uint8_t> Initrd(24u << 20, 0x5a);
  const size_t InitrdSizes[] = {0, 1, 100, 4096, 1u << 20, 15u << 20, 24u << 20};

  SplitMix64 R{0x627a496d616765ull};
  unsigned Loaded = 0, Rejected = 0;
  for (unsigned I = 0; I < 20000; ++I) {
    std::vector<uint8_t> Img = Seeds[I % Seeds.size()];
    if (R.nextBelow(2)) {
      Img = mutate(std::move(Img), R);
    } else {
      const uint64_t Off = R.pick(Fields);
      const uint64_t V = R.pick(kInteresting);
      const unsigned W = 1u << R.nextBelow(4);
      if (Off + W <= Img.size())
        std::memcpy(&Img[Off], &V, W);
    }
    LinuxParams P;
    P.CmdLine = R.nextBelow(8) ? "console=ttyS0" : std::string(3000, 'x');
    P.Initrd = std::span<const uint8_t>(Initrd).first(R.pick(InitrdSizes));
    BootLayout L;
    Error E = loadBzImage(C, Img, P, &L);
    if (E) {
      ++Rejected;
      EXPECT_NE(E.Message, "");
      EXPECT_EQ(E.Message.find('\n'), std::string::npos);
      continue;
    }
    ++Loaded;
    EXPECT_EQ(C.S.Rip, L.Entry);
    EXPECT_EQ(C.S.Gpr[RSI], L.InfoAddr);
    EXPECT_LT(L.Entry, 1ull << 32);
    EXPECT_TRUE(rangeIsRam(Mem, L.ImageBegin, L.ImageEnd - L.ImageBegin));
    EXPECT_EQ(L.RamdiskBytes, P.Initrd.size());
    if (L.RamdiskBytes) {
      EXPECT_TRUE(rangeIsRam(Mem, L.RamdiskAddr, L.RamdiskBytes));
      EXPECT_FALSE(AddrRange({L.ImageBegin, L.ImageEnd})
                       .overlaps(L.RamdiskAddr, L.RamdiskAddr + L.RamdiskBytes));
      EXPECT_EQ(L.RamdiskAddr % 4096, 0u);
    }
  }
  // Both outcomes are exercised; the counts are fixed by the seed, so a change in what
  // the loader accepts shows here.
  EXPECT_EQ(Loaded, 8837u);
  EXPECT_EQ(Rejected, 11163u);
}

namespace {

long maxRssKiB() {
  struct rusage U;
  ::getrusage(RUSAGE_SELF, &U);
  return U.ru_maxrss;
}

} // namespace

TEST(LoaderFuzz, HugeBssSegmentsCostWhatTheFileCosts) {
  // A 64 GiB machine (3 GiB low, 61 GiB from 4 GiB): BSS segments of every size up to
  // all of RAM, placed at interesting addresses, with mutated sizes. Each load ends in
  // success or a one-line error, and none commits host memory for the zeros (the old
  // loader compared every page with zero: a 61 GiB BSS grew past 7.8 GB).
  PhysMem Mem(64ull << 30);
  IoBus Io;
  Cpu C(Mem, Io, CpuModel::defaultModel());
  const long Before = maxRssKiB();
  const uint64_t Addrs[] = {0x200000, 0x40000000, 0xbff00000, 1ull << 32, 5ull << 32,
                            0xfee00000, 0xc0000000};
  const uint64_t Sizes[] = {1, 0xfff, 0x1000, 1ull << 30, 0xbfe00000, 0xc0000000,
                            61ull << 30, 62ull << 30, ~0ull >> 1, ~0ull};
  unsigned Loaded = 0, Rejected = 0;
  for (uint64_t A : Addrs)
    for (uint64_t S : Sizes) {
      Error E = loadMultiboot(C, elf64CodeAndBss(A, S), MultibootParams{});
      if (E) {
        ++Rejected;
        EXPECT_EQ(E.Message.find('\n'), std::string::npos);
        EXPECT_TRUE(E.Code == ErrorCode::OutsideRam) << E.str();
      } else {
        ++Loaded;
        EXPECT_EQ(C.S.Rip, 0x100000u + 188);
      }
    }
  // Mutations of a 61 GiB BSS image.
  SplitMix64 R{0x6273735f66757a7aull};
  const std::vector<uint8_t> Seed = elf64CodeAndBss(1ull << 32, 61ull << 30);
  for (unsigned I = 0; I < 2000; ++I) {
    Error E = loadMultiboot(C, mutate(Seed, R), MultibootParams{});
    E ? ++Rejected : ++Loaded;
    if (E) {
      EXPECT_EQ(E.Message.find('\n'), std::string::npos);
    }
  }
  EXPECT_EQ(Loaded, 409u);
  EXPECT_EQ(Rejected, 1661u);
  EXPECT_LT(maxRssKiB() - Before, 128 * 1024) << "KiB of host memory for zeros";
}

TEST(LoaderFuzz, FilesThatAreNotRegularAreRefusedWithoutBlocking) {
  ::alarm(60); // a blocking open would end the test here, visibly, not hang CI
  const std::string Dir = std::filesystem::temp_directory_path() /
                          ("vmxsim_loader_files_" + std::to_string(::getpid()));
  std::filesystem::create_directories(Dir);
  const std::string Fifo = Dir + "/fifo", Link = Dir + "/link", Sock = Dir + "/sock",
                    Empty = Dir + "/empty";
  ASSERT_EQ(::mkfifo(Fifo.c_str(), 0600), 0);
  ASSERT_EQ(::symlink(Fifo.c_str(), Link.c_str()), 0);
  int S = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un Addr{};
  Addr.sun_family = AF_UNIX;
  std::snprintf(Addr.sun_path, sizeof(Addr.sun_path), "%s", Sock.c_str());
  ASSERT_EQ(::bind(S, reinterpret_cast<sockaddr *>(&Addr), sizeof(Addr)), 0);
  { std::ofstream(Empty).flush(); }
  const std::pair<std::string, std::string> Cases[] = {
      {Fifo, "is a FIFO, not a regular file"},
      {Link, "is a FIFO, not a regular file"},
      {Sock, "cannot open: No such device or address"},
      {Dir, "is a directory, not a regular file"},
      {"/dev/null", "is a character device, not a regular file"},
      {"/dev/zero", "is a character device, not a regular file"},
      {Dir + "/missing", "cannot open: No such file or directory"},
  };
  for (const auto &[Path, Message] : Cases) {
    ImageFile F;
    Error E = ImageFile::open(Path, 1ull << 30, F);
    EXPECT_EQ(E.Code, ErrorCode::FileUnreadable) << Path;
    EXPECT_EQ(E.Message, Message) << Path;
  }
  // A FIFO with a writer waiting is refused as well (nothing is read from it).
  int W = ::open(Fifo.c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(W, 0);
  {
    ImageFile F;
    EXPECT_EQ(ImageFile::open(Fifo, 1ull << 30, F).Message, "is a FIFO, not a regular file");
  }
  ::close(W);
  // An empty regular file opens (0 bytes) and the loader says what it is not.
  ImageFile F;
  ASSERT_FALSE(ImageFile::open(Empty, 1ull << 30, F));
  EXPECT_EQ(F.bytes().size(), 0u);
  PhysMem Mem(8ull << 20);
  IoBus Io;
  Cpu C(Mem, Io, CpuModel::defaultModel());
  EXPECT_EQ(loadMultiboot(C, F.bytes(), MultibootParams{}).Message,
            "not an ELF file and no Multiboot header in the first 8192 bytes");
  ::close(S);
  std::filesystem::remove_all(Dir);
  ::alarm(0);
}
