/*
 * The application processors' start-up code (SDM Vol. 3A, MP Initialization): a SIPI
 * with vector 0x08 starts an AP in real mode at 0x0800:0000 = physical 0x8000. smpStartAps
 * copies [smpTrampoline, smpTrampolineEnd) there and fills the parameter block at its
 * end (lib/smp.c). The code takes the AP from real mode through 32-bit protected mode to 64-bit
 * mode (SDM Vol. 3A, Initializing IA-32e Mode), on the BSP's page tables, then jumps to
 * the caller's entry function (64-bit, linked at 1 MiB) with its stack.
 *
 * Addresses inside the copy are computed as TRAMP + (label - smpTrampoline).
 */
#define TRAMP 0x8000
#define T(label) (TRAMP + (label) - smpTrampoline)

        .section .rodata
        .balign 16
        .globl smpTrampoline, smpTrampolineEnd, smpTrampParams
        .code16
smpTrampoline:
        cli
        xorw %ax, %ax
        movw %ax, %ds
        lgdtl T(tramp_gdt_ptr)
        movl %cr0, %eax
        orl $1, %eax               /* CR0.PE */
        movl %eax, %cr0
        ljmpl $0x18, $T(tramp_pm32)

        .code32
tramp_pm32:
        movw $0x10, %ax
        movw %ax, %ds
        movw %ax, %es
        movw %ax, %ss
        movl $0x620, %eax          /* CR4: PAE | OSFXSR | OSXMMEXCPT */
        movl %eax, %cr4
        movl T(param_cr3), %eax
        movl %eax, %cr3
        movl $0xC0000080, %ecx     /* IA32_EFER: the BSP's value (LME, NXE) */
        movl T(param_efer), %eax
        xorl %edx, %edx
        wrmsr
        movl $0x80010033, %eax     /* CR0: PG | WP | NE | ET | MP | PE */
        movl %eax, %cr0
        ljmp $0x08, $T(tramp_lm64)

        .code64
tramp_lm64:
        movq T(param_stack), %rsp
        movq T(param_entry), %rax
        jmpq *%rax

        .balign 8
/* null, 0x08 64-bit code, 0x10 data, 0x18 32-bit code (SDM Vol. 3A, Segment Descriptors) */
tramp_gdt:
        .quad 0
        .quad 0x00af9a000000ffff
        .quad 0x00cf92000000ffff
        .quad 0x00cf9a000000ffff
tramp_gdt_ptr:
        .word 4 * 8 - 1
        .long T(tramp_gdt)
        .balign 8
smpTrampParams:
param_cr3:   .quad 0
param_efer:  .quad 0
param_stack: .quad 0
param_entry: .quad 0
smpTrampolineEnd:

        .section .note.GNU-stack, "", @progbits
