/*
 * The vmx_e2e guest: 64-bit code at CPL 0 that runs in VMX non-root operation and
 * touches every exit family of the hypervisor core once or more. It reports what it
 * observed with hypercall 0 (RAX = 0, RBX = value); main.c checks the values.
 * Its RIPs are logged relative to vmxE2eGuest, so keep the order of instructions
 * stable: the expected logs depend on it.
 *
 * Entry: RDI = the CR3 to load (the host's; the guest shares its identity map).
 */
#define HYPERCALL_PRINT 0
#define UART_THR 0x3f8
#define UART_LSR 0x3fd
#define UART_LSR_THRE 0x20
#define MSR_IA32_TSC_AUX 0xc0000103
#define UNIMPLEMENTED_MSR 0x1234
#define UNCLAIMED_PORT 0x1234

/* Hypercall 0 with the value of REG. */
.macro REPORT reg
        movq \reg, %rbx
        xorl %eax, %eax
        vmcall
.endm

        .text
        .globl vmxE2eGuest
vmxE2eGuest:
        movq %rdi, %r15

        /* CPUID 0x40000000: the hypervisor's signature "vmxsimHVM" in EBX, ECX, EDX. */
        movl $0x40000000, %eax
        xorl %ecx, %ecx
        cpuid
        movq %rcx, %r12
        movq %rdx, %r13
        REPORT %rbx
        REPORT %r12
        REPORT %r13

        /* CPUID 1: VMX hidden (ECX bit 5), hypervisor present (bit 31): 0x10. */
        movl $1, %eax
        xorl %ecx, %ecx
        cpuid
        movl %ecx, %ebx
        shrl $5, %ebx
        andl $1, %ebx
        shrl $31, %ecx
        shll $4, %ecx
        orl %ecx, %ebx
        REPORT %rbx

        /* The UART, as a polling driver uses it: IN from the line status register
           until THRE, then OUT of the byte. */
        leaq guestMessage(%rip), %rsi
        call guestPuts

        /* A 16-bit IN (port in DX) from an unclaimed port reads all ones: 0xffff. A
           32-bit OUT to it is dropped. */
        xorl %eax, %eax
        movw $UNCLAIMED_PORT, %dx
        inw %dx, %ax
        REPORT %rax
        movl $0xdeadbeef, %eax
        movw $UNCLAIMED_PORT, %dx
        outl %eax, %dx

        /* IA32_TSC_AUX is emulated: write 0x2a, read it back. */
        movl $MSR_IA32_TSC_AUX, %ecx
        movl $0x2a, %eax
        xorl %edx, %edx
        wrmsr
        xorl %eax, %eax
        rdmsr
        shlq $32, %rdx
        orq %rdx, %rax
        REPORT %rax

        /* An unimplemented MSR: the hypervisor injects #GP(0), guestGpHandler counts
           it and skips the RDMSR. Reports (count << 32) | error code: 0x100000000. */
        movl $UNIMPLEMENTED_MSR, %ecx
        rdmsr
        movq guestGpCount(%rip), %rbx
        shlq $32, %rbx
        orq guestGpErrorCode(%rip), %rbx
        REPORT %rbx
        /* Reserved bits 63:32 of IA32_TSC_AUX: #GP(0) again; count 2. */
        movl $MSR_IA32_TSC_AUX, %ecx
        movl $1, %edx
        xorl %eax, %eax
        wrmsr
        REPORT guestGpCount(%rip)

        /* MOV to CR3 always exits (CR3-target count 0). */
        movq %r15, %cr3

        /* CR0.CD is owned by the hypervisor (guest/host mask): setting it exits, the
           guest then reads its own value from the read shadow without an exit, and
           writing the same value again does not exit. Reports 1, then 0 after
           clearing it (another exit). */
        movq %cr0, %rax
        movq %rax, %r14
        btsq $30, %rax
        movq %rax, %cr0
        movq %cr0, %rbx
        movq %rbx, %cr0
        shrq $30, %rbx
        andl $1, %ebx
        REPORT %rbx
        movq %r14, %cr0
        movq %cr0, %rbx
        shrq $30, %rbx
        andl $1, %ebx
        REPORT %rbx

        /* CR8 (TPR): MOV to and from CR8 both exit; reads back 5. */
        movl $5, %eax
        movq %rax, %cr8
        xorl %ebx, %ebx
        movq %cr8, %rbx
        REPORT %rbx

        /* An unknown hypercall returns all ones. */
        movl $7, %eax
        vmcall
        REPORT %rax

        /* CR4.VMXE is owned by the hypervisor and reads 0 (no exit). */
        movq %cr4, %rbx
        shrq $13, %rbx
        andl $1, %ebx
        REPORT %rbx

        /* The end: HLT exits and the hypervisor ends the guest. */
        hlt
        ud2

/* Prints the NUL-terminated string at RSI on the UART. */
guestPuts:
        movzbl (%rsi), %ecx
        testl %ecx, %ecx
        jz 3f
        movw $UART_LSR, %dx
2:      inb %dx, %al
        testb $UART_LSR_THRE, %al
        jz 2b
        movl %ecx, %eax
        movw $UART_THR, %dx
        outb %al, %dx
        incq %rsi
        jmp guestPuts
3:      ret

/* The guest's #GP handler (IDT vector 13, interrupt gate): records the error code,
   counts, and resumes after the 2-byte RDMSR/WRMSR that faulted. */
        .globl vmxE2eGuestGpHandler
vmxE2eGuestGpHandler:
        popq guestGpErrorCode(%rip)
        incq guestGpCount(%rip)
        addq $2, (%rsp)
        iretq

        .section .rodata
guestMessage:
        .asciz "hello\n"

        .data
        .balign 8
guestGpCount:
        .quad 0
guestGpErrorCode:
        .quad 0

        /* No executable stack: without this note ld assumes one and warns. */
        .section .note.GNU-stack, "", @progbits
