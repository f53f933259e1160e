// libFuzzer entry point for the loaders: any bytes as a Multiboot kernel (with one
// module), as a Linux bzImage (with an initrd) and as a flat binary; a load must return, never crash or trip a sanitizer.
#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "harness/loader.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

using namespace vmxsim;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  static PhysMem Mem(8ull << 20);
  static IoBus Io;
  static Cpu C(Mem, Io, CpuModel::defaultModel());
  static const MultibootParams P = [] {
    MultibootParams Q;
    Q.KernelName = "fuzz.elf";
    static const uint8_t Module[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    Q.Modules.push_back({"mod", Module});
    return Q;
  }();
  static const uint8_t Initrd[4096] = {};
  static const LinuxParams LP{"console=ttyS0", Initrd};
  std::span<const uint8_t> Image(Data, Size);
  (void)loadMultiboot(C, Image, P);
  (void)loadBzImage(C, Image, LP);
  if (Size >= 9) {
    uint64_t Addr;
    std::memcpy(&Addr, Data, 8);
    (void)loadFlat(C, Image.subspan(9), Addr & 0xffffff, EntryMode(Data[8] % 3));
  }
  return 0;
}
