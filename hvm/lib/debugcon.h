/* The debug console port 0xe9 (QEMU -debugcon, Bochs port_e9_hack). Write-only, no
   flow control; images print to the UART and use this only on purpose. */
#ifndef HVM_LIB_DEBUGCON_H
#define HVM_LIB_DEBUGCON_H

#include <stddef.h>

#define HVM_DEBUGCON_PORT 0xe9

#ifdef __cplusplus
extern "C" {
#endif
void debugconPutc(char C);
void debugconWrite(const char *S, size_t Len);
#ifdef __cplusplus
}
#endif

#endif
