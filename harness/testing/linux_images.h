// A builder for small synthetic Linux bzImages, for tests and fuzzers of the Linux
// loader: a setup area with the boot protocol header (Documentation/x86/boot.rst, "The
// Real-Mode Kernel Header") followed by a few bytes of 32-bit protected-mode code.
// Header-only.
#pragma once
#include "harness/testing/multiboot_images.h"

#include <cstdint>
#include <vector>

namespace vmxsim::testing {

struct BzImageOptions {
  uint8_t SetupSects = 4;            ///< setup area = (SetupSects + 1) * 512 bytes
  uint16_t Version = 0x20f;          ///< boot protocol 2.15
  uint8_t LoadFlags = 0x01;          ///< LOADED_HIGH
  uint8_t JumpOffset = 0x6a;         ///< header ends at 0x202 + this (0x26c for 2.15)
  uint32_t InitrdAddrMax = 0x7fffffff;
  uint32_t KernelAlignment = 0x200000;
  uint8_t Relocatable = 1;
  uint32_t CmdlineSize = 0x7ff;
  uint64_t PrefAddress = 0x1000000;  ///< 16 MiB, LOAD_PHYSICAL_ADDR of x86-64 kernels
  uint32_t InitSize = 0x400000;      ///< 4 MiB claimed from pref_address
  uint16_t VidMode = 0xffff;         ///< "normal"
  /// syssize in 16-byte paragraphs; 0 = the code's size rounded up.
  uint32_t SysSize = 0;
};

/// The 32-bit payload the loader tests run: copies the NUL-terminated command line at
/// boot_params.hdr.cmd_line_ptr to port 0xe9, then exits through isa-debug-exit with the
/// first four bytes of the initrd (at boot_params.hdr.ramdisk_image). ESI = boot_params.
inline std::vector<uint8_t> echoCmdlineExitWithInitrd() {
  return {
      0x8b, 0x9e, 0x28, 0x02, 0x00, 0x00, // mov ebx, [esi + 0x228]  cmd_line_ptr
      0x8a, 0x03,                         // 1: mov al, [ebx]
      0x84, 0xc0,                         // test al, al
      0x74, 0x05,                         // jz 2f
      0xe6, 0xe9,                         // out 0xe9, al
      0x43,                               // inc ebx
      0xeb, 0xf5,                         // jmp 1b
      0x8b, 0x86, 0x18, 0x02, 0x00, 0x00, // 2: mov eax, [esi + 0x218]  ramdisk_image
      0x8b, 0x00,                         // mov eax, [eax]
      0xe7, 0xf4,                         // out 0xf4, eax
      0xf4,                               // hlt
  };
}

/// A bzImage: setup sectors with the header filled in, then Code padded to whole
/// paragraphs as the protected-mode kernel.
inline std::vector<uint8_t> bzImage(const std::vector<uint8_t> &Code,
                                    const BzImageOptions &O = {}) {
  const size_t Setup = size_t((O.SetupSects ? O.SetupSects : 4) + 1) * 512;
  const size_t Paras = (Code.size() + 15) / 16;
  std::vector<uint8_t> B(Setup + Paras * 16, 0);
  B[0x1f1] = O.SetupSects;
  put32(B, 0x1f4, O.SysSize ? O.SysSize : uint32_t(Paras));
  put16(B, 0x1fa, O.VidMode);
  put16(B, 0x1fe, 0xaa55);                // boot_flag
  B[0x200] = 0xeb;                        // jmp short over the header
  B[0x201] = O.JumpOffset;
  put32(B, 0x202, 0x53726448);            // "HdrS"
  put16(B, 0x206, O.Version);
  B[0x211] = O.LoadFlags;
  put32(B, 0x214, 0x100000);              // code32_start default
  put32(B, 0x22c, O.InitrdAddrMax);
  put32(B, 0x230, O.KernelAlignment);
  B[0x234] = O.Relocatable;
  B[0x235] = 21;                          // min_alignment
  put16(B, 0x236, 0x1);                   // xloadflags: XLF_KERNEL_64
  put32(B, 0x238, O.CmdlineSize);
  put64(B, 0x258, O.PrefAddress);
  put32(B, 0x260, O.InitSize);
  std::memcpy(B.data() + Setup, Code.data(), Code.size());
  return B;
}

} // namespace vmxsim::testing
