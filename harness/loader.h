// Image loaders: Multiboot v1 kernels (ELF32, ELF64, or any file with the a.out-kludge
// header) and flat binaries. They write guest RAM and set the boot processor's state;
// every failure is a one-line Error, never a crash, whatever the bytes (a fuzz test and
// a libFuzzer target check that).
#pragma once
#include "harness/error.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace vmxsim {

class Cpu;

/// How a flat binary is entered (vmxsim run --flat ADDR --entry-mode MODE).
enum class EntryMode : uint8_t {
  Real,   ///< real mode, CS:IP = ADDR>>4 : ADDR&0xf (ADDR below 1 MiB)
  Prot32, ///< the Multiboot machine state without EAX/EBX (see boot_state.h)
  Long,   ///< 64-bit mode, CS=0x20, identity paging of 0..4 GiB with 2 MiB pages
};

struct ModuleImage {
  std::string CmdLine;        ///< the whole "--initrd" element: "path args"
  std::vector<uint8_t> Bytes; ///< file contents
};

struct MultibootParams {
  /// Passed first in the kernel command line, like QEMU: cmdline = KernelName + " " +
  /// Append (so the string ends in a space when Append is empty — QEMU does the same).
  std::string KernelName;
  std::string Append;
  std::vector<ModuleImage> Modules;
  const char *BootLoaderName = "vmxsim";
};

/// Where the loader put things (for tests, traces and messages).
struct BootLayout {
  uint64_t Entry = 0;
  uint64_t ImageBegin = 0, ImageEnd = 0; ///< lowest and highest+1 loaded address (incl. BSS)
  uint64_t InfoAddr = 0;                 ///< Multiboot information (EBX); 0 for flat
  uint64_t GdtAddr = 0;
  uint64_t PageTables = 0;               ///< long-mode flat entry only
  bool AoutKludge = false, Elf64 = false;
};

/// Reads a whole file. Errors: FileUnreadable (missing, unreadable, not a regular file),
/// FileTooLarge (more than MaxBytes). The Error's Path is left empty.
Error readImageFile(const std::string &Path, uint64_t MaxBytes, std::vector<uint8_t> &Out);

/// Loads a Multiboot v1 image per Multiboot 0.6.96 ("OS image format", "Machine state",
/// "Boot information format") and leaves the CPU at its entry point. Error::Path is left
/// empty (the caller knows the file name).
Error loadMultiboot(Cpu &C, std::span<const uint8_t> Image, const MultibootParams &P,
                    BootLayout *Out = nullptr);

/// Copies a flat binary to Addr and enters it at Addr in the given mode.
Error loadFlat(Cpu &C, std::span<const uint8_t> Image, uint64_t Addr, EntryMode Mode,
               BootLayout *Out = nullptr);

} // namespace vmxsim
