#include "lib/exit.h"

#include "lib/io.h"
#include "lib/uart.h"

void hvmExit(uint32_t Code) {
  /* Bochs drops whatever is still in the UART when the machine stops. */
  uartFlush();
  /* QEMU's isa-debug-exit (iobase 0xf4, iosize 4) takes a 32-bit write. */
  outl(HVM_DEBUG_EXIT_PORT, Code);
  /* Bochs has no isa-debug-exit; it stops on "Shutdown" written to port 0x8900
     (exit status 1, so the code is lost: the UART output says what happened). */
  for (const char *P = "Shutdown"; *P; ++P)
    outb(0x8900, (uint8_t)*P);
  for (;;)
    __asm__ volatile("cli; hlt");
}
