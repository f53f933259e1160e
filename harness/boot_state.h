// Shared pieces of the loaders: the boot GDT, the processor state each entry mode starts
// in, and placement of loader data in guest memory without overlapping the image.
#pragma once
#include <cstdint>
#include <vector>

namespace vmxsim {

class Cpu;
class PhysMem;

/// Selectors of the GDT the loaders install (the layout of QEMU's multiboot option ROM
/// for the 32-bit ones, so a guest that reloads CS=0x10 / DS=0x18 keeps working).
namespace bootsel {
inline constexpr uint16_t Code32 = 0x10, Data = 0x18, Code64 = 0x20, Code16 = 0x28,
                          Data16 = 0x30;
}
/// Bytes of that GDT (7 descriptors: null, null, code32, data, code64, code16, data16).
inline constexpr uint64_t kBootGdtBytes = 7 * 8;
/// Initial ESP/RSP for every entry mode. Multiboot leaves ESP undefined (Multiboot 0.6.96,
/// "Machine state"); 0x7000 is below everything the loaders write (they start at
/// 0x8000), in conventional memory, so an early PUSH lands in RAM that is not the image's
/// unless the image itself was linked there.
inline constexpr uint64_t kBootStackTop = 0x7000;
/// Lowest address the loaders use for their own data (GDT, boot information, tables).
inline constexpr uint64_t kLoaderDataLow = 0x8000;
/// End of the usable conventional memory (the EBDA starts here on a PC).
inline constexpr uint64_t kConventionalEnd = 0x9fc00;

struct AddrRange {
  uint64_t Begin, End; ///< [Begin, End)
  bool overlaps(uint64_t B, uint64_t E) const { return B < End && Begin < E; }
};

/// True if [Begin, Begin + Size) is guest RAM (no MMIO, no hole); false on overflow.
/// Cheap for any Size (no page walk when the range is obviously outside RAM).
bool rangeIsRam(const PhysMem &Mem, uint64_t Begin, uint64_t Size);

/// Finds Size bytes, Align-aligned, not overlapping Used: first in conventional memory
/// from kLoaderDataLow up to kConventionalEnd, else just above the highest used address
/// (at or above 1 MiB) if that is RAM below 4 GiB. False if neither fits.
bool findFree(const PhysMem &Mem, const std::vector<AddrRange> &Used, uint64_t Size,
              uint64_t Align, uint64_t &Out);

/// Zero-fills guest RAM (PhysMem::zeroRam: whole pages go back to the host, so a BSS of
/// many GiB costs nothing and commits no host memory). The range must be RAM.
void zeroGuestRam(PhysMem &Mem, uint64_t Begin, uint64_t Size);

/// Writes the boot GDT at Addr (kBootGdtBytes bytes, RAM).
void writeBootGdt(PhysMem &Mem, uint64_t Addr);

/// Multiboot "Machine state" (Multiboot 0.6.96, 3.2): protected mode, paging off, flat
/// 4 GiB CS (0x10, execute/read) and DS/ES/FS/GS/SS (0x18, read/write), EFLAGS = 0x2,
/// GDTR = the boot GDT, IDTR = {0, 0} (any exception escalates to a triple fault and is
/// reported), ESP = kBootStackTop, other GPRs 0 except EDX (the reset signature).
void enterProtected32(Cpu &C, uint64_t GdtAddr, uint64_t Entry);
/// 64-bit mode: the above plus CR4.PAE, EFER.LME/LMA, CR0.PG, CS = 0x20 (L=1) and CR3 =
/// Pml4 (identity tables built by buildIdentityTables).
void enterLong(Cpu &C, uint64_t GdtAddr, uint64_t Pml4, uint64_t Entry);
/// Real mode at Entry (< 1 MiB): CS = Entry >> 4, IP = Entry & 0xf, DS=ES=FS=GS=SS=0,
/// SP = kBootStackTop, as after reset otherwise.
void enterReal(Cpu &C, uint64_t Entry);

/// Bytes needed by buildIdentityTables: PML4, PDPT and 4 page directories.
inline constexpr uint64_t kIdentityTablesBytes = 6 * 4096;
/// Identity-maps 0..4 GiB with 2 MiB pages (present, writable, supervisor) at Base.
void buildIdentityTables(PhysMem &Mem, uint64_t Base);

} // namespace vmxsim
