/* The C library's string functions, under their standard names: gcc emits calls to
   memcpy, memset, memmove and memcmp on its own (struct copies, zeroing, loops it
   recognises) even with -ffreestanding. */
#ifndef HVM_LIB_STRING_H
#define HVM_LIB_STRING_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
void *memcpy(void *__restrict Dst, const void *__restrict Src, size_t N);
void *memmove(void *Dst, const void *Src, size_t N);
void *memset(void *Dst, int C, size_t N);
int memcmp(const void *A, const void *B, size_t N);
size_t strlen(const char *S);
int strcmp(const char *A, const char *B);
int strncmp(const char *A, const char *B, size_t N);
char *strcpy(char *__restrict Dst, const char *__restrict Src);
char *strchr(const char *S, int C);
#ifdef __cplusplus
}
#endif

#endif
