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

/*
 * uint64_t loopOutRun(uint64_t Iters)  -- the port-write benchmark's workload: the same
 * shape and count (5N + 7 instructions), with one body instruction an OUT to port 0x80
 * (the POST-code port: recorded by vmxsim, ignored by QEMU and Bochs), so that every
 * iteration goes through the emulator's port-I/O path.
 */
        .globl loopOutRun
        .type loopOutRun, @function
loopOutRun:
        movabsq $0x9e3779b97f4a7c15, %rax  /* 1 */
        xorl %edx, %edx                    /* 2 */
        movq %rdi, %rcx                    /* 3 */
        testq %rcx, %rcx                   /* 4 */
        jz 2f                              /* 5 */
1:      addq %rcx, %rax                    /* body 1 */
        outb %al, $0x80                    /* body 2 */
        xorq %rax, %rdx                    /* body 3 */
        decq %rcx                          /* body 4 */
        jnz 1b                             /* body 5 */
2:      xorq %rdx, %rax                    /* epilogue 1 */
        ret                                /* epilogue 2 */
        .size loopOutRun, . - loopOutRun

/*
 * uint64_t loopMemRun(uint64_t Iters)  -- the memory-access profile's workload: 6 + 5N + 2
 * instructions, two body instructions accessing memory (a load and a store, TLB hits
 * after the first iteration), the rest as in loopRun.
 */
        .globl loopMemRun
        .type loopMemRun, @function
loopMemRun:
        movabsq $0x9e3779b97f4a7c15, %rax  /* 1 */
        xorl %edx, %edx                    /* 2 */
        leaq loopMemData(%rip), %rsi       /* 3 */
        movq %rdi, %rcx                    /* 4 */
        testq %rcx, %rcx                   /* 5 */
        jz 2f                              /* 6 */
1:      addq (%rsi), %rax                  /* body 1: load */
        xorq %rax, %rdx                    /* body 2 */
        movq %rdx, 8(%rsi)                 /* body 3: store */
        decq %rcx                          /* body 4 */
        jnz 1b                             /* body 5 */
2:      xorq %rdx, %rax                    /* epilogue 1 */
        ret                                /* epilogue 2 */
        .size loopMemRun, . - loopMemRun

        .data
        .balign 64
loopMemData:
        .quad 0x0123456789abcdef, 0
        .text

        /* No executable stack: without this note ld assumes one and warns. */
        .section .note.GNU-stack, "", @progbits
