// Image loaders: Multiboot v1 kernels (ELF32, ELF64, or any file with the a.out-kludge
// header), Linux bzImage kernels (boot protocol 2.06 and later) and flat binaries. They write guest RAM and set the boot processor's state;
// every failure is a one-line Error, never a crash, whatever the bytes (a fuzz test and
// a libFuzzer target check that).
#pragma once
#include "harness/error.h"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace vmxsim {

class Cpu;
class PhysMem;

/// How a flat binary is entered (vmxsim run --flat ADDR --entry-mode MODE).
enum class EntryMode : uint8_t {
  Real,   ///< real mode, CS:IP = ADDR>>4 : ADDR&0xf (ADDR below 1 MiB)
  Prot32, ///< the Multiboot machine state without EAX/EBX (see boot_state.h)
  Long,   ///< 64-bit mode, CS=0x20, identity paging of 0..4 GiB with 2 MiB pages
};

struct ModuleImage {
  std::string CmdLine;                ///< the whole "--initrd" element: "path args"
  std::span<const uint8_t> Bytes;     ///< file contents (owned by the caller)
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
  /// Linux bzImage only: InfoAddr is boot_params (ESI), ImageBegin..ImageEnd the memory
  /// the kernel claims (pref_address + init_size), and these:
  bool LinuxBzImage = false;
  uint64_t CmdLineAddr = 0;
  uint64_t RamdiskAddr = 0, RamdiskBytes = 0; ///< 0, 0 without an initrd
};

/// An image or module file, mapped read-only: a loader reads from the disk only the pages
/// it looks at, so refusing a bad header costs the same whatever the file's size, and
/// loading costs what is loaded. A file that is not a regular one (a FIFO, a device, a
/// directory) is refused without blocking. The file must not shrink while it is mapped
/// (the loaders copy it into guest RAM right away and the machine drops the mapping).
class ImageFile {
public:
  ImageFile() = default;
  ~ImageFile();
  ImageFile(ImageFile &&O) noexcept;
  ImageFile &operator=(ImageFile &&O) noexcept;
  ImageFile(const ImageFile &) = delete;
  ImageFile &operator=(const ImageFile &) = delete;

  /// Errors: FileUnreadable (missing, unreadable, not a regular file), FileTooLarge (more
  /// than MaxBytes). The Error's Path is left empty.
  static Error open(const std::string &Path, uint64_t MaxBytes, ImageFile &Out);
  std::span<const uint8_t> bytes() const {
    return {static_cast<const uint8_t *>(Map), size_t(Size)};
  }

private:
  void reset();
  void *Map = nullptr;
  uint64_t Size = 0;
};

/// Loads a Multiboot v1 image per Multiboot 0.6.96 ("OS image format", "Machine state",
/// "Boot information format") and leaves the CPU at its entry point. Error::Path is left
/// empty (the caller knows the file name).
Error loadMultiboot(Cpu &C, std::span<const uint8_t> Image, const MultibootParams &P,
                    BootLayout *Out = nullptr);


struct LinuxParams {
  std::string CmdLine;                ///< the whole command line (QEMU's -append)
  std::span<const uint8_t> Initrd;    ///< empty: no initrd
};

/// True if the image has the Linux setup header signature "HdrS" at offset 0x202.
bool isBzImage(std::span<const uint8_t> Image);

/// The physical address and size of the object Name in an ELF64 image's symbol table
/// (its virtual address mapped through the loadable segment holding it). False when the
/// image is not such an ELF, has no symbol table or no such symbol in a loaded segment.
bool findElfSymbol(std::span<const uint8_t> Image, std::string_view Name, uint64_t &Pa,
                   uint64_t &SizeBytes);

/// Loads a Linux bzImage per Documentation/x86/boot.rst: boot protocol 2.06 or later,
/// protected-mode kernel at pref_address (relocatable, protocol 2.10+) else at 1 MiB,
/// initrd as high as it fits below initrd_addr_max, boot_params and the command line in
/// conventional memory, and the CPU in the 32-bit boot protocol's entry state
/// (harness/loader_linux.cpp says why that one). Error::Path is left empty.
Error loadBzImage(Cpu &C, std::span<const uint8_t> Image, const LinuxParams &P,
                  BootLayout *Out = nullptr);

/// Copies a flat binary to Addr and enters it at Addr in the given mode.
Error loadFlat(Cpu &C, std::span<const uint8_t> Image, uint64_t Addr, EntryMode Mode,
               BootLayout *Out = nullptr);

} // namespace vmxsim
