#include "vmx/descriptors.h"

#include "lib/string.h"

/* SDM Vol. 3A, "Segment Descriptors" and "Segment Descriptor Tables": the same code and
   data descriptors as boot.S's GDT. */
#define DESC_CODE64 0x00af9a000000ffffull
#define DESC_DATA 0x00cf92000000ffffull
/* System-descriptor type 9: available 64-bit TSS (LTR marks it busy, type 11). */
#define DESC_TYPE_TSS_AVAILABLE 0x9ull
#define DESC_PRESENT (1ull << 47)

void descriptorTablesInit(struct DescriptorTables *T) {
  memset(T, 0, sizeof(*T));
  /* No I/O permission bitmap: the base points past the limit. */
  T->Tss.IoMapBase = sizeof(struct Tss64);
  uint64_t Base = (uint64_t)(uintptr_t)&T->Tss;
  uint64_t Limit = TSS64_LIMIT;
  T->Gdt[0] = 0;
  T->Gdt[SEL_CODE64 / 8] = DESC_CODE64;
  T->Gdt[SEL_DATA / 8] = DESC_DATA;
  /* SDM Vol. 3A, "TSS Descriptor in 64-bit mode": 16 bytes, base bits 63:32 in the
     second quadword. */
  T->Gdt[SEL_TSS / 8] = (Limit & 0xffff) | ((Base & 0xffffff) << 16) |
                        (DESC_TYPE_TSS_AVAILABLE << 40) | DESC_PRESENT |
                        (((Limit >> 16) & 0xf) << 48) | (((Base >> 24) & 0xff) << 56);
  T->Gdt[SEL_TSS / 8 + 1] = Base >> 32;
}

void idtSetGate(struct DescriptorTables *T, unsigned Vector, uint64_t Handler) {
  T->Idt[Vector] = idtInterruptGate(Handler, SEL_CODE64);
}

void hostLoadTables(struct DescriptorTables *T) {
  struct __attribute__((packed)) {
    uint16_t Limit;
    uint64_t Base;
  } Gdtr = {sizeof(T->Gdt) - 1, (uint64_t)(uintptr_t)T->Gdt};
  /* CS is reloaded by a far return (LRETQ pops RIP, then CS). */
  __asm__ volatile("lgdt %0\n\t"
                   "pushq %1\n\t"
                   "leaq 1f(%%rip), %%rax\n\t"
                   "pushq %%rax\n\t"
                   "lretq\n"
                   "1:\n\t"
                   "movl %2, %%eax\n\t"
                   "movl %%eax, %%ds\n\t"
                   "movl %%eax, %%es\n\t"
                   "movl %%eax, %%ss\n\t"
                   "movl %%eax, %%fs\n\t"
                   "movl %%eax, %%gs\n\t"
                   :
                   : "m"(Gdtr), "i"(SEL_CODE64), "i"(SEL_DATA)
                   : "rax", "memory");
  __asm__ volatile("ltr %w0" : : "r"((uint16_t)SEL_TSS) : "memory");
}
