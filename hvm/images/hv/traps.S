/*
 * The hv guest's exception handlers (interrupt gates in its own IDT), for the exceptions
 * scenario (guest.c). Before an instruction that faults on purpose the guest puts the
 * address to resume at in R15; the handler counts the exception in R14, keeps the error
 * code (if the vector pushes one) in R13, and returns to R15 with IRETQ. Exceptions
 * change no general register, so this needs no memory of its own per vCPU. hvVirq and
 * hvNmi count the irq scenario's interrupts and NMIs in R12.
 */
        .text
        .code64
        .globl hvTrapNoError, hvTrapError, hvVirq, hvNmi, hvApicvSelf, hvApicvPosted
hvTrapNoError:
        movq %r15, (%rsp)       /* the frame's RIP */
        incq %r14
        iretq
hvTrapError:
        popq %r13               /* the error code */
        movq %r15, (%rsp)
        incq %r14
        iretq
/* The irq scenario's handlers: the virtual timer interrupt (vector 0x30) adds 1 to R12,
   an NMI adds 0x10000; both return where the guest was. */
hvVirq:
        incq %r12
        iretq
hvNmi:
        addq $0x10000, %r12
        iretq
/* The apicv scenario's handlers: the self-IPI (vector 0x31) adds 1 to R12, the posted
   interrupt (vector 0x32) 0x100; each then writes the virtual APIC's EOI register
   (0xfee000b0): EOI virtualization, which for vector 0x32 ends in a VM exit (its bit is
   set in the EOI-exit bitmap). */
hvApicvSelf:
        incq %r12
        jmp 1f
hvApicvPosted:
        addq $0x100, %r12
1:      pushq %rax
        movabsq $0xfee000b0, %rax
        movl $0, (%rax)
        popq %rax
        iretq
        .section .note.GNU-stack, "", @progbits
