/* The smp image's LAPIC timer interrupt and spurious vector: save the caller-saved registers,
   call the C handler, IRETQ. */
        .text
        .code64
        .globl timerStub, spuriousStub
timerStub:
        pushq %rax
        pushq %rcx
        pushq %rdx
        pushq %rsi
        pushq %rdi
        pushq %r8
        pushq %r9
        pushq %r10
        pushq %r11
        cld
        call timerInterrupt
        popq %r11
        popq %r10
        popq %r9
        popq %r8
        popq %rdi
        popq %rsi
        popq %rdx
        popq %rcx
        popq %rax
        iretq
spuriousStub:
        iretq
        .section .note.GNU-stack, "", @progbits
