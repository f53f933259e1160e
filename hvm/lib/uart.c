#include "lib/uart.h"

#include "lib/io.h"

/* Register offsets and bits from the National Semiconductor PC16550D data sheet. */
enum {
  UartBase = 0x3f8,
  UartThr = 0, /* transmit holding (DLAB = 0) */
  UartDll = 0, /* divisor latch low (DLAB = 1) */
  UartIer = 1, /* interrupt enable (DLAB = 0) */
  UartDlm = 1, /* divisor latch high (DLAB = 1) */
  UartFcr = 2,
  UartLcr = 3,
  UartMcr = 4,
  UartLsr = 5,
  LcrDlab = 0x80,
  Lcr8N1 = 0x03,
  FcrEnableClear = 0x07, /* enable FIFOs, clear both */
  McrDtrRts = 0x03,      /* OUT2 stays clear: no interrupts reach the PIC */
  LsrThre = 0x20,        /* transmit holding register empty */
  LsrTemt = 0x40,        /* transmitter empty: holding and shift registers */
};

void uartInit(void) {
  outb(UartBase + UartIer, 0);
  outb(UartBase + UartLcr, LcrDlab);
  outb(UartBase + UartDll, 1); /* 115200 = 1.8432 MHz / 16 / 1 */
  outb(UartBase + UartDlm, 0);
  outb(UartBase + UartLcr, Lcr8N1);
  outb(UartBase + UartFcr, FcrEnableClear);
  outb(UartBase + UartMcr, McrDtrRts);
}

void uartPutc(char C) {
  while (!(inb(UartBase + UartLsr) & LsrThre))
    ;
  outb(UartBase + UartThr, (uint8_t)C);
}

void uartWrite(const char *S, size_t Len) {
  for (size_t I = 0; I < Len; ++I)
    uartPutc(S[I]);
}

void uartFlush(void) {
  while (!(inb(UartBase + UartLsr) & LsrTemt))
    ;
}
