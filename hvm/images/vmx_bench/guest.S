/*
 * The vmx_bench guest: RDI iterations of CPUID, OUT and VMCALL (three exits each), then
 * hypercall 1 (one more exit) to end. 3 * iters + 1 exits in all.
 */
        .text
        .globl vmxBenchGuest
vmxBenchGuest:
        movq %rdi, %r12
        testq %r12, %r12
        jz 2f
1:      xorl %eax, %eax
        cpuid
        outb %al, $0x80
        xorl %eax, %eax
        vmcall
        decq %r12
        jnz 1b
2:      movl $1, %eax
        xorl %ebx, %ebx
        vmcall
        ud2

        /* No executable stack: without this note ld assumes one and warns. */
        .section .note.GNU-stack, "", @progbits
