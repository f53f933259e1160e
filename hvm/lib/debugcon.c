#include "lib/debugcon.h"

#include "lib/io.h"

void debugconPutc(char C) { outb(HVM_DEBUGCON_PORT, (uint8_t)C); }

void debugconWrite(const char *S, size_t Len) {
  for (size_t I = 0; I < Len; ++I)
    debugconPutc(S[I]);
}
