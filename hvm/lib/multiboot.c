#include "lib/multiboot.h"

#include "lib/printf.h"
#include "lib/string.h"

const char *multibootCmdline(const struct MultibootInfo *Mbi) {
  if (!(Mbi->flags & MULTIBOOT_INFO_CMDLINE) || !Mbi->cmdline)
    return "";
  return (const char *)(uintptr_t)Mbi->cmdline;
}

void multibootPrintInfo(const struct MultibootInfo *Mbi) {
  printf("cmdline: %s\n", multibootCmdline(Mbi));
  if (Mbi->flags & MULTIBOOT_INFO_MEMORY)
    printf("mem_lower=%uKiB mem_upper=%uKiB\n", Mbi->mem_lower, Mbi->mem_upper);
  else
    printf("mem_lower=? mem_upper=? (not provided)\n");
  if (!(Mbi->flags & MULTIBOOT_INFO_MEM_MAP)) {
    printf("mmap entries=0 (not provided)\n");
    return;
  }
  uintptr_t Begin = Mbi->mmap_addr, End = Begin + Mbi->mmap_length;
  unsigned Count = 0;
  for (uintptr_t P = Begin; P < End;
       P += ((const struct MultibootMmapEntry *)P)->size + 4)
    ++Count;
  printf("mmap entries=%u\n", Count);
  unsigned I = 0;
  for (uintptr_t P = Begin; P < End; ++I) {
    const struct MultibootMmapEntry *E = (const struct MultibootMmapEntry *)P;
    printf("mmap[%u] base=0x%016llx length=0x%016llx type=%u\n", I,
           (unsigned long long)E->base_addr, (unsigned long long)E->length, E->type);
    P += E->size + 4;
  }
}

static bool isSpace(char C) { return C == ' ' || C == '\t' || C == '\n'; }

static bool parseU64(const char *S, size_t Len, uint64_t *Value) {
  unsigned Base = 10;
  if (Len > 2 && S[0] == '0' && (S[1] == 'x' || S[1] == 'X')) {
    Base = 16;
    S += 2;
    Len -= 2;
  }
  if (Len == 0)
    return false;
  uint64_t V = 0;
  for (size_t I = 0; I < Len; ++I) {
    char C = S[I];
    unsigned D;
    if (C >= '0' && C <= '9')
      D = (unsigned)(C - '0');
    else if (Base == 16 && C >= 'a' && C <= 'f')
      D = (unsigned)(C - 'a' + 10);
    else if (Base == 16 && C >= 'A' && C <= 'F')
      D = (unsigned)(C - 'A' + 10);
    else
      return false;
    if (V > (UINT64_MAX - D) / Base)
      return false; /* overflow */
    V = V * Base + D;
  }
  *Value = V;
  return true;
}

bool cmdlineGetWord(const char *Cmdline, const char *Key, const char **Value, size_t *Len) {
  size_t KeyLen = strlen(Key);
  const char *P = Cmdline;
  while (*P) {
    while (isSpace(*P))
      ++P;
    const char *Word = P;
    while (*P && !isSpace(*P))
      ++P;
    size_t WordLen = (size_t)(P - Word);
    if (WordLen > KeyLen && Word[KeyLen] == '=' && !strncmp(Word, Key, KeyLen)) {
      *Value = Word + KeyLen + 1;
      *Len = WordLen - KeyLen - 1;
      return true;
    }
  }
  return false;
}

int cmdlineGetU64(const char *Cmdline, const char *Key, uint64_t *Value) {
  const char *V;
  size_t Len;
  if (!cmdlineGetWord(Cmdline, Key, &V, &Len))
    return 0;
  return parseU64(V, Len, Value) ? 1 : -1;
}
