/* A small printf to the UART, plus snprintf for building strings.
   Conversions: d i u x X o c s p %; flags '-' '0'; width and precision (number or
   '*'); length modifiers hh h l ll z j t. Precision on integers is not supported. */
#ifndef HVM_LIB_PRINTF_H
#define HVM_LIB_PRINTF_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
__attribute__((format(printf, 1, 2))) int printf(const char *Fmt, ...);
int vprintf(const char *Fmt, va_list Ap);
__attribute__((format(printf, 3, 4))) int snprintf(char *Buf, size_t Size,
                                                   const char *Fmt, ...);
int vsnprintf(char *Buf, size_t Size, const char *Fmt, va_list Ap);
int puts(const char *S); /* appends '\n', like the C library's */
#ifdef __cplusplus
}
#endif

#endif
