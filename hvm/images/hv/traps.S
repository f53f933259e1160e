/*
 * The hv guest's exception handlers (interrupt gates in its own IDT), for the exceptions
 * scenario (guest.c). Before an instruction that faults on purpose the guest puts the
 * address to resume at in R15; the handler counts the exception in R14, keeps the error
 * code (if the vector pushes one) in R13, and returns to R15 with IRETQ. Exceptions
 * change no general register, so this needs no memory of its own per vCPU.
 */
        .text
        .code64
        .globl hvTrapNoError, hvTrapError
hvTrapNoError:
        movq %r15, (%rsp)       /* the frame's RIP */
        incq %r14
        iretq
hvTrapError:
        popq %r13               /* the error code */
        movq %r15, (%rsp)
        incq %r14
        iretq
        .section .note.GNU-stack, "", @progbits
