#include "lib/printf.h"

#include <stdbool.h>
#include <stdint.h>

#include "lib/uart.h"

/* Where formatted characters go: the UART, or a bounded buffer. */
struct Sink {
  char *Buf; /* NULL: the UART */
  size_t Size;
  size_t Len; /* characters produced, including those that did not fit */
};

static void emit(struct Sink *S, char C) {
  if (!S->Buf)
    uartPutc(C);
  else if (S->Len + 1 < S->Size)
    S->Buf[S->Len] = C;
  ++S->Len;
}

static void emitPadded(struct Sink *S, const char *Body, size_t Len, int Width,
                       bool Left, char Pad) {
  size_t Fill = Width > 0 && (size_t)Width > Len ? (size_t)Width - Len : 0;
  /* Zero padding goes after a sign or 0x prefix, as in C. */
  if (Pad == '0' && Len > 0 && (Body[0] == '-' || (Len > 1 && Body[1] == 'x'))) {
    size_t Prefix = Body[0] == '-' ? 1 : 2;
    for (size_t I = 0; I < Prefix; ++I)
      emit(S, Body[I]);
    Body += Prefix;
    Len -= Prefix;
  }
  if (!Left)
    while (Fill--)
      emit(S, Pad);
  for (size_t I = 0; I < Len; ++I)
    emit(S, Body[I]);
  if (Left)
    while (Fill--)
      emit(S, ' ');
}

/* Writes V in Base right-aligned ending at End; returns the first character. */
static char *formatUnsigned(char *End, uint64_t V, unsigned Base, bool Upper) {
  const char *Digits = Upper ? "0123456789ABCDEF" : "0123456789abcdef";
  do {
    *--End = Digits[V % Base];
    V /= Base;
  } while (V);
  return End;
}

static int format(struct Sink *S, const char *Fmt, va_list Ap) {
  for (; *Fmt; ++Fmt) {
    if (*Fmt != '%') {
      emit(S, *Fmt);
      continue;
    }
    ++Fmt;
    bool Left = false;
    char Pad = ' ';
    for (;; ++Fmt) {
      if (*Fmt == '-')
        Left = true;
      else if (*Fmt == '0')
        Pad = '0';
      else
        break;
    }
    int Width = 0;
    if (*Fmt == '*') {
      Width = va_arg(Ap, int);
      if (Width < 0) {
        Left = true;
        Width = -Width;
      }
      ++Fmt;
    } else {
      while (*Fmt >= '0' && *Fmt <= '9')
        Width = Width * 10 + (*Fmt++ - '0');
    }
    int Precision = -1;
    if (*Fmt == '.') {
      ++Fmt;
      Precision = 0;
      if (*Fmt == '*') {
        Precision = va_arg(Ap, int);
        ++Fmt;
      } else {
        while (*Fmt >= '0' && *Fmt <= '9')
          Precision = Precision * 10 + (*Fmt++ - '0');
      }
    }
    if (Left)
      Pad = ' ';
    /* Integer size in bytes: 0 means int. */
    int Size = 0;
    if (*Fmt == 'h') {
      Size = 2;
      if (*++Fmt == 'h') {
        Size = 1;
        ++Fmt;
      }
    } else if (*Fmt == 'l') {
      Size = 8;
      if (*++Fmt == 'l')
        ++Fmt;
    } else if (*Fmt == 'z' || *Fmt == 'j' || *Fmt == 't') {
      Size = 8;
      ++Fmt;
    }

    char Tmp[24]; /* 2^64 in octal is 22 digits; hex with 0x is 18 */
    char *End = Tmp + sizeof(Tmp);
    char *P;
    switch (*Fmt) {
    case 'd':
    case 'i': {
      int64_t V = Size == 8 ? va_arg(Ap, int64_t) : va_arg(Ap, int);
      if (Size == 2)
        V = (int16_t)V;
      else if (Size == 1)
        V = (int8_t)V;
      uint64_t Mag = V < 0 ? -(uint64_t)V : (uint64_t)V;
      P = formatUnsigned(End, Mag, 10, false);
      if (V < 0)
        *--P = '-';
      emitPadded(S, P, (size_t)(End - P), Width, Left, Pad);
      break;
    }
    case 'u':
    case 'x':
    case 'X':
    case 'o': {
      uint64_t V = Size == 8 ? va_arg(Ap, uint64_t) : va_arg(Ap, unsigned);
      if (Size == 2)
        V = (uint16_t)V;
      else if (Size == 1)
        V = (uint8_t)V;
      unsigned Base = *Fmt == 'u' ? 10 : *Fmt == 'o' ? 8 : 16;
      P = formatUnsigned(End, V, Base, *Fmt == 'X');
      emitPadded(S, P, (size_t)(End - P), Width, Left, Pad);
      break;
    }
    case 'p': {
      P = formatUnsigned(End, (uintptr_t)va_arg(Ap, void *), 16, false);
      *--P = 'x';
      *--P = '0';
      emitPadded(S, P, (size_t)(End - P), Width, Left, Pad);
      break;
    }
    case 'c':
      Tmp[0] = (char)va_arg(Ap, int);
      emitPadded(S, Tmp, 1, Width, Left, ' ');
      break;
    case 's': {
      const char *Str = va_arg(Ap, const char *);
      if (!Str)
        Str = "(null)";
      size_t Len = 0;
      while (Str[Len] && (Precision < 0 || Len < (size_t)Precision))
        ++Len;
      emitPadded(S, Str, Len, Width, Left, ' ');
      break;
    }
    case '%':
      emit(S, '%');
      break;
    case '\0':
      --Fmt; /* a lone '%' at the end: stop at the terminator */
      break;
    default: /* unknown: print it, so the mistake shows */
      emit(S, '%');
      emit(S, *Fmt);
      break;
    }
  }
  if (S->Buf && S->Size)
    S->Buf[S->Len < S->Size ? S->Len : S->Size - 1] = '\0';
  return (int)S->Len;
}

int vprintf(const char *Fmt, va_list Ap) {
  struct Sink S = {0, 0, 0};
  return format(&S, Fmt, Ap);
}

int printf(const char *Fmt, ...) {
  va_list Ap;
  va_start(Ap, Fmt);
  int N = vprintf(Fmt, Ap);
  va_end(Ap);
  return N;
}

int vsnprintf(char *Buf, size_t Size, const char *Fmt, va_list Ap) {
  char Dummy;
  struct Sink S = {Size ? Buf : &Dummy, Size, 0};
  return format(&S, Fmt, Ap);
}

int snprintf(char *Buf, size_t Size, const char *Fmt, ...) {
  va_list Ap;
  va_start(Ap, Fmt);
  int N = vsnprintf(Buf, Size, Fmt, Ap);
  va_end(Ap);
  return N;
}

int puts(const char *S) {
  int N = 0;
  for (; S[N]; ++N)
    uartPutc(S[N]);
  uartPutc('\n');
  return N + 1;
}
