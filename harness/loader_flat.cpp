// Flat binaries: the file's bytes at a guest-physical address, entered at that address
// in real, 32-bit protected or 64-bit mode.
#include "cpu/cpu.h"
#include "harness/boot_state.h"
#include "harness/loader.h"

#include <fmt/format.h>

namespace vmxsim {

Error loadFlat(Cpu &C, std::span<const uint8_t> Image, uint64_t Addr, EntryMode Mode,
               BootLayout *Out) {
  PhysMem &Mem = C.Mem;
  const uint64_t Size = Image.size();
  if (Size == 0)
    return Error(ErrorCode::NotAnImage, "flat image is empty");
  if (!rangeIsRam(Mem, Addr, Size))
    return Error(ErrorCode::OutsideRam,
                 fmt::format("flat image at {:#x}-{:#x} is not in guest RAM", Addr, Addr + Size));
  if (Mode == EntryMode::Real && Addr >= (1ull << 20))
    return Error(ErrorCode::BadEntry,
                 fmt::format("real-mode entry {:#x} is not below 1 MiB", Addr));
  if (Mode == EntryMode::Prot32 && Addr > 0xffffffffull)
    return Error(ErrorCode::BadEntry,
                 fmt::format("32-bit entry {:#x} is above 4 GiB", Addr));
  if (Mode == EntryMode::Long && Addr >= (1ull << 32))
    return Error(ErrorCode::BadEntry,
                 fmt::format("64-bit entry {:#x} is outside the identity-mapped 4 GiB", Addr));

  std::vector<AddrRange> Used{{Addr, Addr + Size}};
  BootLayout L;
  L.Entry = Addr;
  L.ImageBegin = Addr;
  L.ImageEnd = Addr + Size;
  if (Mode != EntryMode::Real) {
    if (!findFree(Mem, Used, kBootGdtBytes, 8, L.GdtAddr))
      return Error(ErrorCode::NoRoom, "no free guest memory for the boot GDT");
    Used.push_back({L.GdtAddr, L.GdtAddr + kBootGdtBytes});
  }
  if (Mode == EntryMode::Long) {
    if (!findFree(Mem, Used, kIdentityTablesBytes, kPageSize, L.PageTables))
      return Error(ErrorCode::NoRoom, "no free guest memory for the page tables");
  }

  Mem.copyIn(Hpa(Addr), Image.data(), Size);
  switch (Mode) {
  case EntryMode::Real:
    enterReal(C, Addr);
    break;
  case EntryMode::Prot32:
    writeBootGdt(Mem, L.GdtAddr);
    enterProtected32(C, L.GdtAddr, Addr);
    break;
  case EntryMode::Long:
    writeBootGdt(Mem, L.GdtAddr);
    buildIdentityTables(Mem, L.PageTables);
    enterLong(C, L.GdtAddr, L.PageTables, Addr);
    break;
  }
  if (Out)
    *Out = L;
  return Error::success();
}

} // namespace vmxsim
