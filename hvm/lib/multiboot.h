/* Multiboot v1 boot information (Multiboot Specification 0.6.96, 3.3 "Boot information
   format"). Field names are the specification's, so it can be searched. */
#ifndef HVM_LIB_MULTIBOOT_H
#define HVM_LIB_MULTIBOOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bits of MultibootInfo.flags saying which fields are valid. */
#define MULTIBOOT_INFO_MEMORY (1u << 0)
#define MULTIBOOT_INFO_CMDLINE (1u << 2)
#define MULTIBOOT_INFO_MEM_MAP (1u << 6)
#define MULTIBOOT_INFO_BOOT_LOADER_NAME (1u << 9)

#define MULTIBOOT_MEMORY_AVAILABLE 1

struct MultibootInfo {
  uint32_t flags;
  uint32_t mem_lower; /* KiB from 0 */
  uint32_t mem_upper; /* KiB from 1 MiB */
  uint32_t boot_device;
  uint32_t cmdline; /* physical address of a NUL-terminated string */
  uint32_t mods_count;
  uint32_t mods_addr;
  uint32_t syms[4];
  uint32_t mmap_length;
  uint32_t mmap_addr;
  uint32_t drives_length;
  uint32_t drives_addr;
  uint32_t config_table;
  uint32_t boot_loader_name;
  uint32_t apm_table;
};

/* One memory-map entry. size counts the bytes after itself, so the next entry is at
   (char *)Entry + size + 4; it may exceed 20. */
struct __attribute__((packed)) MultibootMmapEntry {
  uint32_t size;
  uint64_t base_addr;
  uint64_t length;
  uint32_t type;
};

#ifdef __cplusplus
extern "C" {
#endif
/// The information structure; it lives below 4 GiB, inside the identity map.
static inline const struct MultibootInfo *multibootInfo(uint32_t MbiAddr) {
  return (const struct MultibootInfo *)(uintptr_t)MbiAddr;
}

/// The command line, or "" when the loader passed none. QEMU and GRUB put the kernel's
/// file name first ("build/hvm/selftest.elf hello world").
const char *multibootCmdline(const struct MultibootInfo *Mbi);

/// Prints "cmdline: ...", "mem_lower=..KiB mem_upper=..KiB", "mmap entries=N" and one
/// line per memory-map entry.
void multibootPrintInfo(const struct MultibootInfo *Mbi);

/// Finds a whitespace-separated "Key=Value" word in Cmdline and parses Value as an
/// unsigned number (decimal, or hex with 0x). Returns 1 when found and valid, 0 when
/// absent (Value untouched), -1 when present but malformed or out of range.
int cmdlineGetU64(const char *Cmdline, const char *Key, uint64_t *Value);

/// Finds a whitespace-separated "Key=Value" word in Cmdline: returns true with *Value
/// pointing at Value and *Len its length (not NUL-terminated), false when absent.
bool cmdlineGetWord(const char *Cmdline, const char *Key, const char **Value, size_t *Len);
#ifdef __cplusplus
}
#endif

#endif
