/* 16550 UART at COM1 (0x3f8), polled, no interrupts. */
#ifndef HVM_LIB_UART_H
#define HVM_LIB_UART_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
/// 115200 baud, 8N1, FIFOs on, interrupts off. boot.S calls it before kmain.
void uartInit(void);
/// Sends one byte once the transmit holding register is empty. '\n' is sent as is.
void uartPutc(char C);
void uartWrite(const char *S, size_t Len);
/// Waits until the transmitter is completely idle, so nothing is lost at shutdown.
void uartFlush(void);
#ifdef __cplusplus
}
#endif

#endif
