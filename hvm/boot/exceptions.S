/*
 * Stubs for the 32 exception vectors. Each pushes a uniform frame (ExcFrame in
 * boot/exceptions.h) and calls excHandle, which either stops the image with a message
 * or, for an exception a test armed, resumes it through IRETQ.
 */
#include "boot/boot.h"

/* SDM Vol. 3A, Exception and Interrupt Reference: the vectors whose delivery pushes an
   error code (#DF, #TS, #NP, #SS, #GP, #PF, #AC, #CP, #VC, #SX). The others push a
   zero so the frame has one layout. */
.macro STUB vec, has_error_code
        .balign 16
exc_stub_\vec:
.if \has_error_code == 0
        pushq $0
.endif
        pushq $\vec
        jmp exc_common
.endm

        .text
        STUB 0, 0
        STUB 1, 0
        STUB 2, 0
        STUB 3, 0
        STUB 4, 0
        STUB 5, 0
        STUB 6, 0
        STUB 7, 0
        STUB 8, 1
        STUB 9, 0
        STUB 10, 1
        STUB 11, 1
        STUB 12, 1
        STUB 13, 1
        STUB 14, 1
        STUB 15, 0
        STUB 16, 0
        STUB 17, 1
        STUB 18, 0
        STUB 19, 0
        STUB 20, 0
        STUB 21, 1
        STUB 22, 0
        STUB 23, 0
        STUB 24, 0
        STUB 25, 0
        STUB 26, 0
        STUB 27, 0
        STUB 28, 0
        STUB 29, 1
        STUB 30, 1
        STUB 31, 0

exc_common:
        pushq %rax
        pushq %rbx
        pushq %rcx
        pushq %rdx
        pushq %rsi
        pushq %rdi
        pushq %rbp
        pushq %r8
        pushq %r9
        pushq %r10
        pushq %r11
        pushq %r12
        pushq %r13
        pushq %r14
        pushq %r15
        movq %rsp, %rdi
        /* The ABI wants RSP 16-byte aligned at the call and DF clear; the interrupted
           code may have had DF set (the rep-string test runs backwards). IRETQ restores
           its RFLAGS. RBX is callee-saved, so it survives the call. */
        movq %rsp, %rbx
        andq $-16, %rsp
        cld
        call excHandle
        movq %rbx, %rsp
        popq %r15
        popq %r14
        popq %r13
        popq %r12
        popq %r11
        popq %r10
        popq %r9
        popq %r8
        popq %rbp
        popq %rdi
        popq %rsi
        popq %rdx
        popq %rcx
        popq %rbx
        popq %rax
        addq $16, %rsp /* vector and error code */
        iretq

        .section .rodata
        .balign 8
        .globl ExcStubs
ExcStubs:
        .irp vec, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
        .quad exc_stub_\vec
        .endr

        /* No executable stack: without this note ld assumes one and warns. */
        .section .note.GNU-stack, "", @progbits
