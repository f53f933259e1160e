/* Leaving the machine: isa-debug-exit, with a Bochs fallback. */
#ifndef HVM_LIB_EXIT_H
#define HVM_LIB_EXIT_H

/* Codes written to isa-debug-exit. QEMU exits with status (code << 1) | 1, so the
   shell sees 1, 3, 5, 7. Kept below 0x80 so the status never wraps. */
#define HVM_EXIT_SUCCESS 0   /* every check passed */
#define HVM_EXIT_FAILURE 1   /* a test failed */
#define HVM_EXIT_BAD_BOOT 2  /* not started by a Multiboot loader, or no long mode */
#define HVM_EXIT_EXCEPTION 3 /* an unexpected CPU exception */

#define HVM_DEBUG_EXIT_PORT 0xf4

#ifndef __ASSEMBLER__
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
/// Drains the UART, then stops the machine with Code. Never returns.
__attribute__((noreturn)) void hvmExit(uint32_t Code);
#ifdef __cplusplus
}
#endif
#endif

#endif
