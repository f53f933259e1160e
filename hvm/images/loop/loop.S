/*
 * uint64_t loopRun(uint64_t Iters)  -- the speed benchmark's workload.
 *
 * Instructions retired from the first instruction of loopRun up to and including its
 * RET, for Iters = N (any N >= 0):
 *
 *     5 (set-up) + 5 * N (loop body) + 2 (epilogue) = 5N + 7
 *
 * With N = 0 the JZ is taken: 5 set-up + 2 epilogue = 7, the same formula. The body is
 * register-only ALU work plus one predictable branch: a measure of an emulator's
 * dispatch rate, not of its memory or decode-cache paths.
 */
        .text
        .globl loopRun
        .type loopRun, @function
loopRun:
        movabsq $0x9e3779b97f4a7c15, %rax  /* 1 */
        xorl %edx, %edx                    /* 2 */
        movq %rdi, %rcx                    /* 3 */
        testq %rcx, %rcx                   /* 4 */
        jz 2f                              /* 5 */
1:      addq %rcx, %rax                    /* body 1 */
        xorq %rax, %rdx                    /* body 2 */
        rolq $7, %rdx                      /* body 3 */
        decq %rcx                          /* body 4 */
        jnz 1b                             /* body 5 */
2:      xorq %rdx, %rax                    /* epilogue 1 */
        ret                                /* epilogue 2 */
        .size loopRun, . - loopRun

        /* No executable stack: without this note ld assumes one and warns. */
        .section .note.GNU-stack, "", @progbits
