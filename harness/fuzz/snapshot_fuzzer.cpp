// libFuzzer entry point for snapshot files (Machine::restoreSnapshot): any bytes as a
// snapshot of a small machine (8 MiB, 2 CPUs, no image), with the checksum made valid
// when the input is long enough to hold one, so that the section loaders see the bytes;
// a restore that succeeds is run for 10,000 instructions. Must return an error or run,
// never crash or trip a sanitizer.
#include "harness/machine.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace vmxsim;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  static const std::string Path =
      "/tmp/vmxsim-snapshot-fuzz-" + std::to_string(::getpid()) + ".snap";
  std::vector<uint8_t> B(Data, Data + Size);
  if (B.size() >= kSnapshotHeaderBytes + 4) {
    const uint32_t C = crc32c(0, B.data(), B.size() - 4);
    std::memcpy(B.data() + B.size() - 4, &C, 4);
  }
  if (std::FILE *F = std::fopen(Path.c_str(), "wb")) {
    std::fwrite(B.data(), 1, B.size(), F);
    std::fclose(F);
  }
  MachineConfig Cfg;
  Cfg.RamBytes = 8ull << 20;
  Cfg.NumCpus = 2;
  Cfg.Serial = OutputSpec::discard();
  Cfg.Debugcon = OutputSpec::discard();
  Cfg.MaxInsns = 10'000;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  if (M && !M->restoreSnapshot(Path)) {
    M->setMaxInsns(M->cpu(0).Retired + M->cpu(1).Retired + 10'000);
    (void)M->run();
  }
  return 0;
}
