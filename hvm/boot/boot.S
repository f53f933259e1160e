/*
 * Multiboot v1 entry: from the loader's 32-bit protected mode to 64-bit C code.
 *
 * Citations are to the Multiboot Specification version 0.6.96 and to the Intel SDM.
 */
#include "boot/boot.h"
#include "lib/exit.h"

/* 3.1.2 "The magic fields of Multiboot header": bit 0 asks for page-aligned modules,
   bit 1 for mem_lower/mem_upper and the memory map (3.3), bit 16 says the address
   fields are valid. Bit 16 (the a.out kludge) is what lets QEMU's -kernel load an ELF64
   file: without it QEMU insists on ELF32. */
#define MB_FLAGS ((1 << 0) | (1 << 1) | (1 << 16))

#define CR0_PE (1 << 0)
#define CR0_MP (1 << 1)
#define CR0_ET (1 << 4)
#define CR0_NE (1 << 5)
#define CR0_WP (1 << 16)
#define CR0_PG (1 << 31)
#define CR4_PAE (1 << 5)
#define CR4_OSFXSR (1 << 9)
#define CR4_OSXMMEXCPT (1 << 10)
#define MSR_IA32_EFER 0xC0000080
#define EFER_LME (1 << 8)
#define EFER_NXE (1 << 11)
#define PTE_P (1 << 0)
#define PTE_RW (1 << 1)
#define PTE_PS (1 << 7)

#define UART_THR 0x3f8
#define UART_LSR 0x3fd

/* 3.1.1 "The layout of Multiboot header": 32-bit aligned, within the first 8192 bytes
   of the file; image.ld puts this section first. */
        .section .multiboot, "a"
        .balign 4
multiboot_header:
        .long MULTIBOOT_HEADER_MAGIC
        .long MB_FLAGS
        .long -(MULTIBOOT_HEADER_MAGIC + MB_FLAGS)
        /* 3.1.3 "The address fields of Multiboot header" */
        .long multiboot_header  /* header_addr */
        .long __image_start     /* load_addr */
        .long __load_end        /* load_end_addr */
        .long __bss_end         /* bss_end_addr: the loader zero-fills up to here */
        .long _start            /* entry_addr */

        .section .text.boot, "ax"
        .code32
        .globl _start
_start:
        /* 3.2 "Machine state": EAX = magic, EBX = physical address of the Multiboot
           information, flat 32-bit CS/DS/ES/FS/GS/SS, CR0.PG = 0, IF = 0. ESP, GDTR and
           IDTR are undefined, so nothing below may rely on the loader's. */
        cli
        movl $boot_stack_top, %esp
        /* Every other EFLAGS bit is undefined too (AC, DF, ...): start from a known value. */
        pushl $2
        popfl
        movl %eax, %ebp
        movl %ebx, %esi
        cmpl $MULTIBOOT_BOOTLOADER_MAGIC, %ebp
        jne .Lbad_magic

        /* The loader already zero-filled up to bss_end_addr (3.1.3); clearing again costs
           little and keeps a loader that honours only the ELF headers safe. */
        movl $__bss_start, %edi
        movl $__bss_end, %ecx
        subl %edi, %ecx
        shrl $2, %ecx
        xorl %eax, %eax
        rep stosl
        movl %ebp, boot_magic
        movl %esi, boot_mbi

        /* SDM Vol. 3A, Paging > Enumeration of Paging Features by CPUID: long mode is
           CPUID.80000001H:EDX.LM[29]; XD (for EFER.NXE) is bit 20. */
        movl $0x80000000, %eax
        cpuid
        cmpl $0x80000001, %eax
        jb .Lno_long_mode
        movl $0x80000001, %eax
        cpuid
        btl $29, %edx
        jnc .Lno_long_mode
        movl %edx, %ebp

        /* Identity map 0..4 GiB with 2 MiB pages: PML4[0] -> PDPT, PDPT[0..3] -> PDs.
           4 GiB covers the image, the Multiboot data and every device a loader reports. */
        movl $(BootPdpt + PTE_P + PTE_RW), BootPml4
        xorl %ecx, %ecx
1:      movl %ecx, %eax
        shll $12, %eax
        addl $(BootPd + PTE_P + PTE_RW), %eax
        movl %eax, BootPdpt(, %ecx, 8)
        incl %ecx
        cmpl $4, %ecx
        jb 1b
        /* High halves stay zero: the last page starts at 0xFFE00000. */
        xorl %ecx, %ecx
1:      movl %ecx, %eax
        shll $21, %eax
        orl $(PTE_P + PTE_RW + PTE_PS), %eax
        movl %eax, BootPd(, %ecx, 8)
        incl %ecx
        cmpl $2048, %ecx
        jb 1b

        /* SDM Vol. 3A, Initializing IA-32e Mode: PAE on, CR3 loaded and EFER.LME set
           before CR0.PG; the far jump that follows enters 64-bit mode. CR0 and CR4 are
           written whole so no loader-left bit (CD, NW, TS, AM) survives. MP=1, EM=0 and
           OSFXSR/OSXMMEXCPT enable SSE, which gcc uses for any struct copy. */
        lgdt boot_gdt_ptr
        movl $(CR4_PAE | CR4_OSFXSR | CR4_OSXMMEXCPT), %eax
        movl %eax, %cr4
        movl $BootPml4, %eax
        movl %eax, %cr3
        movl $MSR_IA32_EFER, %ecx
        rdmsr
        orl $EFER_LME, %eax
        btl $20, %ebp
        jnc 1f
        orl $EFER_NXE, %eax
1:      wrmsr
        movl $(CR0_PE | CR0_MP | CR0_ET | CR0_NE | CR0_WP | CR0_PG), %eax
        movl %eax, %cr0
        ljmp $BOOT_CS64, $long_mode_entry

.Lbad_magic:
        movl $msg_bad_magic, %esi
        jmp .Lfail32
.Lno_long_mode:
        movl $msg_no_long_mode, %esi
        /* No UART set-up yet: BIOSes and GRUB leave COM1 usable, and a message now is
           worth more than a correct baud rate. */
.Lfail32:
        movl $UART_LSR, %edx
2:      inb %dx, %al
        testb $0x20, %al
        jz 2b
        lodsb
        testb %al, %al
        jz 3f
        movl $UART_THR, %edx
        outb %al, %dx
        jmp .Lfail32
3:      movl $HVM_DEBUG_EXIT_PORT, %edx
        movl $HVM_EXIT_BAD_BOOT, %eax
        outl %eax, %dx
4:      hlt
        jmp 4b

        .code64
long_mode_entry:
        movl $BOOT_DS, %eax
        movl %eax, %ds
        movl %eax, %es
        movl %eax, %ss
        movl %eax, %fs
        movl %eax, %gs
        movl $boot_stack_top, %esp
        xorl %ebp, %ebp
        /* Default x87 control word and MXCSR (all exceptions masked), whatever the loader
           left. */
        fninit
        ldmxcsr boot_mxcsr(%rip)
        call uartInit
        call idtInit
        movl boot_magic(%rip), %edi
        movl boot_mbi(%rip), %esi
        call kmain
        xorl %edi, %edi
        call hvmExit

        .section .rodata
msg_bad_magic:
        .asciz "boot: not started by a Multiboot loader (EAX != 0x2BADB002)\n"
msg_no_long_mode:
        .asciz "boot: CPU has no long mode (CPUID.80000001H:EDX.LM = 0)\n"
        .balign 4
boot_mxcsr:
        .long 0x1f80

        /* In .data, not .rodata: the CPU sets the accessed bit in a descriptor when it
           loads a segment register from it. */
        .data
        .balign 16
boot_gdt:
        .quad 0
        .quad 0x00af9a000000ffff /* 0x08: 64-bit code, DPL 0 (L = 1, D = 0) */
        .quad 0x00cf92000000ffff /* 0x10: flat 4 GiB read/write data */
boot_gdt_end:
        .balign 8
        .word 0
        .word 0
        .word 0
boot_gdt_ptr:
        .word boot_gdt_end - boot_gdt - 1
        .quad boot_gdt

        .section .bss
        .balign 4096
        .globl BootPml4, BootPdpt, BootPd
BootPml4:
        .skip 4096
BootPdpt:
        .skip 4096
BootPd:
        .skip 4 * 4096
        .balign 16
boot_stack:
        .skip BOOT_STACK_SIZE
boot_stack_top:
boot_magic:
        .skip 4
boot_mbi:
        .skip 4

        /* No executable stack: without this note ld assumes one and warns. */
        .section .note.GNU-stack, "", @progbits
