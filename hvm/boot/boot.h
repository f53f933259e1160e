/* Constants shared by boot.S, the exception stubs and C code. */
#ifndef HVM_BOOT_BOOT_H
#define HVM_BOOT_BOOT_H

/* Selectors of the GDT that boot.S installs. */
#define BOOT_CS64 0x08
#define BOOT_DS 0x10

#define BOOT_STACK_SIZE 0x10000

/* Multiboot Specification 0.6.96, 3.1.1 and 3.2. */
#define MULTIBOOT_HEADER_MAGIC 0x1BADB002
#define MULTIBOOT_BOOTLOADER_MAGIC 0x2BADB002

#ifndef __ASSEMBLER__
#include <stdint.h>

/* Page tables built by boot.S: PML4[0] -> PDPT, PDPT[0..3] -> 4 PDs of 2 MiB pages,
   identity mapping 0..4 GiB. Tests may edit them (and must reload CR3 after). */
extern uint64_t BootPml4[512];
extern uint64_t BootPdpt[512];
extern uint64_t BootPd[4 * 512];

#ifdef __cplusplus
extern "C" {
#endif
/* Every image defines this; returning from it exits with status 0. */
void kmain(uint32_t Magic, uint32_t MbiAddr);
#ifdef __cplusplus
}
#endif
#endif

#endif
