/* Segment descriptors, the 64-bit TSS and IDT gates: the host's GDT (which VMX needs a
 * TSS in) and the guest's own GDT, TSS and IDT.
 */
#ifndef HVM_VMX_DESCRIPTORS_H
#define HVM_VMX_DESCRIPTORS_H

#include <stdint.h>

#include "lib/idt.h"

/* Selectors, the same in the host's and the guest's GDT: code and data keep boot.S's
   numbers (boot/boot.h), the TSS descriptor (16 bytes in IA-32e mode) follows. */
#define SEL_CODE64 0x08
#define SEL_DATA 0x10
#define SEL_TSS 0x18

/* SDM Vol. 3C, "Format of the VMCS Region" > Guest-State Area: access rights in the
   VMCS use the descriptor's bits 15:8 and 23:20 packed as bits 7:0 and 15:12, bit 16
   meaning "unusable". */
#define AR_CODE64 0xa09b  /* execute/read, accessed, S, DPL 0, P, L, G */
#define AR_DATA 0xc093    /* read/write, accessed, S, DPL 0, P, D/B, G */
#define AR_TSS_BUSY 0x008b /* 64-bit busy TSS, P */
#define AR_UNUSABLE 0x10000

/* SDM Vol. 3A, "Task-State Segment (TSS)" > 64-bit TSS: 104 bytes. */
struct Tss64 {
  uint32_t Reserved0;
  uint64_t Rsp[3];
  uint64_t Reserved1;
  uint64_t Ist[7];
  uint64_t Reserved2;
  uint16_t Reserved3;
  uint16_t IoMapBase;
} __attribute__((packed));
_Static_assert(sizeof(struct Tss64) == 104, "64-bit TSS is 104 bytes");
#define TSS64_LIMIT (sizeof(struct Tss64) - 1)

/* null, code64, data, TSS (two slots). */
#define GDT_ENTRIES 5


struct DescriptorTables {
  uint64_t Gdt[GDT_ENTRIES] __attribute__((aligned(16)));
  struct Tss64 Tss __attribute__((aligned(16)));
  struct IdtGate64 Idt[64] __attribute__((aligned(16)));
};

/// Fills T->Gdt (null, code64, data, available 64-bit TSS for T->Tss) and T->Tss.
void descriptorTablesInit(struct DescriptorTables *T);
/// Installs an interrupt gate (DPL 0, IF cleared on entry) for Vector in T->Idt.
void idtSetGate(struct DescriptorTables *T, unsigned Vector, uint64_t Handler);

/// Makes T's GDT the host's: LGDT, reloads every segment register, LTR SEL_TSS.
/// Keeps the current IDT.
void hostLoadTables(struct DescriptorTables *T);

#endif
