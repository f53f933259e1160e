/* Port I/O for hvm/ code compiled into a host test (HVM_HOST_TEST): OUT calls the
   test's handler instead of touching a port. Only what the tested files use. */
#ifndef HVM_TEST_FAKE_LIB_IO_H
#define HVM_TEST_FAKE_LIB_IO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
void outl(uint16_t Port, uint32_t Value);
#ifdef __cplusplus
}
#endif

#endif
