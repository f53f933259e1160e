/*
 * The realmode scenario's guest: 16-bit code run as an unrestricted guest in real mode
 * (CS base = hvRealModeGuest, IP from 0; no stack, no data: nothing here depends on
 * where the image is loaded). It reports with hypercall 0 (RAX = 0, RBX = value), which
 * main.c checks: CPUID 0x40000000's EBX ("vmxs"), then CR0 as it reads it (PE = PG = 0:
 * 0x30, NE and ET); prints "rm" through the UART; ends with hypercall 1.
 * Exits: CPUID, VMCALL, OUT x 3, VMCALL, VMCALL (7).
 */
        .text
        .code16
        .globl hvRealModeGuest
hvRealModeGuest:
        movl $0x40000000, %eax
        xorl %ecx, %ecx
        cpuid
        xorl %eax, %eax
        vmcall
        movw $0x3f8, %dx
        movb $'r', %al
        outb %al, %dx
        movb $'m', %al
        outb %al, %dx
        movb $'\n', %al
        outb %al, %dx
        movl %cr0, %ebx
        andl $0xffff, %ebx
        xorl %eax, %eax
        vmcall
        movl $1, %eax
        xorl %ebx, %ebx
        vmcall
1:      hlt
        jmp 1b
        .code64
        .section .note.GNU-stack, "", @progbits
