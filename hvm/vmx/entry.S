/*
 * The host side of VM entries and exits: the first VMLAUNCH, the VM-exit entry stub
 * (the VMCS host RIP) with its VMRESUME, and the way back to the launcher when the
 * guest has finished. Like Xen's vmx_asm_vmexit_handler, the stub saves the guest's
 * general registers in a per-CPU frame (struct GuestRegs, vmx/percpu.h), calls the C
 * handler, restores them and resumes.
 *
 * SDM Vol. 3C, "Loading Host State" (VM exits): RSP and RIP come from the host-state
 * area, RFLAGS is cleared to 0x2 (so IF = 0 and DF = 0, as the C ABI needs), and no
 * general register other than RSP changes: they still hold the guest's values.
 */
#include "vmx/percpu.h"

/* Offsets in struct GuestRegs. */
#define R_R15 0
#define R_R14 8
#define R_R13 16
#define R_R12 24
#define R_R11 32
#define R_R10 40
#define R_R9 48
#define R_R8 56
#define R_RDI 64
#define R_RSI 72
#define R_RBP 80
#define R_RBX 88
#define R_RDX 96
#define R_RCX 104
#define R_RAX 112

        .text

/* int vmxRunGuest(struct PerCpu *Cpu)
   Loads the guest's general registers from Cpu->Regs and executes VMLAUNCH. On
   success it does not come back here: the guest runs, and its end is vmxGuestDone,
   which returns 0 from this function. VMfailInvalid returns -1, VMfailValid -2 (the
   error is in the VM-instruction error field). */
        .globl vmxRunGuest
vmxRunGuest:
        pushq %rbp
        pushq %rbx
        pushq %r12
        pushq %r13
        pushq %r14
        pushq %r15
        movq %rsp, PERCPU_LAUNCHER_RSP_OFFSET(%rdi)
        leaq PERCPU_REGS_OFFSET(%rdi), %rax
        movq R_R15(%rax), %r15
        movq R_R14(%rax), %r14
        movq R_R13(%rax), %r13
        movq R_R12(%rax), %r12
        movq R_R11(%rax), %r11
        movq R_R10(%rax), %r10
        movq R_R9(%rax), %r9
        movq R_R8(%rax), %r8
        movq R_RDI(%rax), %rdi
        movq R_RSI(%rax), %rsi
        movq R_RBP(%rax), %rbp
        movq R_RBX(%rax), %rbx
        movq R_RDX(%rax), %rdx
        movq R_RCX(%rax), %rcx
        movq R_RAX(%rax), %rax
        vmlaunch
        /* Only a VMfail comes here; RSP is unchanged (SDM Vol. 3C, VMLAUNCH/VMRESUME
           Operation: a failure leaves the processor in root operation). */
        movq $-1, %rax
        jc 1f
        movq $-2, %rax
1:      popq %r15
        popq %r14
        popq %r13
        popq %r12
        popq %rbx
        popq %rbp
        ret

/* noreturn void vmxGuestDone(struct PerCpu *Cpu)
   Called from the exit handler (on the exit stack) when the guest has ended: returns 0
   from vmxRunGuest on the launcher's stack. The VMCS stays current and launched. */
        .globl vmxGuestDone
vmxGuestDone:
        movq PERCPU_LAUNCHER_RSP_OFFSET(%rdi), %rsp
        xorl %eax, %eax
        popq %r15
        popq %r14
        popq %r13
        popq %r12
        popq %rbx
        popq %rbp
        ret

/* The VMCS host RIP. RSP = the host RSP field = the end of Cpu->Regs. */
        .balign 16
        .globl vmxExitEntry
vmxExitEntry:
        subq $8, %rsp /* GuestRegs.Pad */
        pushq %rax
        pushq %rcx
        pushq %rdx
        pushq %rbx
        pushq %rbp
        pushq %rsi
        pushq %rdi
        pushq %r8
        pushq %r9
        pushq %r10
        pushq %r11
        pushq %r12
        pushq %r13
        pushq %r14
        pushq %r15
        /* RSP = &Cpu->Regs, 16-byte aligned; the handler pointer follows Regs. */
        movq %rsp, %rdi
        call *GUEST_REGS_SIZE(%rsp)
        popq %r15
        popq %r14
        popq %r13
        popq %r12
        popq %r11
        popq %r10
        popq %r9
        popq %r8
        popq %rdi
        popq %rsi
        popq %rbp
        popq %rbx
        popq %rdx
        popq %rcx
        popq %rax
        addq $8, %rsp
        vmresume
        /* VMRESUME failed: the general registers hold the guest's values and are lost
           to us; report and stop, on the stack below Regs. */
        pushfq
        popq %rsi
        leaq -GUEST_REGS_SIZE(%rsp), %rdi
        movq %rdi, %rsp
        call vmxResumeFailed
        ud2

        /* No executable stack: without this note ld assumes one and warns. */
        .section .note.GNU-stack, "", @progbits
