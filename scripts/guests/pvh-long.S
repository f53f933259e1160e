/*
 * pvh-long: a small 64-bit PVH guest for Xen, run after pvh-hello by the xen initramfs's
 * /init as a second domU (scripts/fetch-guests.sh builds it with the host's gcc and ld;
 * see docs/xen-trace.md). Xen enters it as it enters pvh-hello (XEN_ELFNOTE_PHYS32_ENTRY:
 * 32-bit protected mode, paging off). It switches to long mode and then takes the exits
 * pvh-hello does not: EPT violations on MMIO, external interrupts while it runs, and HLT
 * with a wake-up by its local APIC's timer. In this order:
 *   - port 0xe9 OUT, one byte a time, as pvh-hello ("(d2) pvh-long: ..." on Xen's
 *     console), in 32-bit mode first (VMX_EXIT records), in long mode later (VMX_EXIT64);
 *   - into long mode (SDM Vol. 3A, "Initializing IA-32e Mode"): MOV to CR4 (PAE), WRMSR of
 *     IA32_EFER (LME), MOV to CR0 (PG); Xen intercepts all three, each register being
 *     EAX, so the value Xen traces is the ground truth's RAX. MOV to CR3 and the far jump
 *     to the 64-bit code segment take no exit;
 *   - CPUID leaf 1 in long mode (whether the vCPU has an x2APIC);
 *   - MMIO: a 4-byte load from 0x20000000 and a 4-byte store to 0x20000004, where the
 *     domU has no memory: each an EPT violation, which Xen emulates with no device model
 *     behind it (its null handler: loads read all ones, stores are dropped);
 *   - the local APIC in x2APIC mode (SDM Vol. 3A, "Extended XAPIC (x2APIC)"): RDMSR and
 *     WRMSR of IA32_APIC_BASE (x2APIC on), WRMSR of the spurious-interrupt vector
 *     register, the timer's divide configuration, its LVT entry (one-shot, vector 0x40)
 *     and its initial count, all intercepted by Xen;
 *   - with IF=1, a spin until the timer's interrupt has run its handler: Xen's own timer
 *     interrupt arrives while the domU runs (an external-interrupt exit), and Xen then
 *     delivers the guest's vector 0x40; the handler ends with an EOI (WRMSR of the x2APIC
 *     EOI register: with virtual-interrupt delivery no WRMSR exit, but Xen keeps the
 *     timer's vector in the EOI-exit bitmap, so an EOI-induced exit);
 *   - the timer again, then STI; HLT: Xen blocks the vCPU until the timer wakes it, the
 *     handler runs, and execution goes on after the HLT;
 *   - VMCALL sched_op(SCHEDOP_shutdown, {SHUTDOWN_poweroff}) in 64-bit form (arguments in
 *     RDI and RSI): the end.
 * The results are printed: "pvh-long: mmio load ffffffff", "pvh-long: spin: ticks 1",
 * "pvh-long: hlt: woken, ticks 2". An unexpected exception prints its vector and powers
 * the domain off.
 */
#define XEN_ELFNOTE_XEN_VERSION 5
#define XEN_ELFNOTE_GUEST_OS 6
#define XEN_ELFNOTE_LOADER 8
#define XEN_ELFNOTE_PHYS32_ENTRY 18

#define HYPERVISOR_sched_op 29
#define SCHEDOP_shutdown 2
#define SHUTDOWN_poweroff 0

#define MSR_EFER 0xc0000080
#define MSR_APIC_BASE 0x1b
#define MSR_X2APIC_EOI 0x80b
#define MSR_X2APIC_SVR 0x80f
#define MSR_X2APIC_LVTT 0x832
#define MSR_X2APIC_TMICT 0x838
#define MSR_X2APIC_TDCR 0x83e

#define TIMER_VECTOR 0x40
/* 100,000 bus cycles, divided by 1: 1 ms on Xen's 100 MHz virtual APIC bus. */
#define TIMER_COUNT 100000
/* The spin's bound (iterations): far beyond the 1 ms the timer takes. */
#define SPIN_BOUND 50000000

#define MMIO_HOLE 0x20000000

/* One Xen ELF note: name "Xen", type, descriptor. */
#define NOTE(type, desctype, descdata) \
  .balign 4; .long 4; .long 2f - 1f; .long type; .asciz "Xen"; \
  1: desctype descdata; 2: .balign 4

  .section .note.Xen, "a", @note
  NOTE(XEN_ELFNOTE_GUEST_OS, .asciz, "pvh-long")
  NOTE(XEN_ELFNOTE_LOADER, .asciz, "generic")
  NOTE(XEN_ELFNOTE_XEN_VERSION, .asciz, "xen-3.0")
  NOTE(XEN_ELFNOTE_PHYS32_ENTRY, .long, pvh_start)

  .code32
  .text
  .globl pvh_start
pvh_start:
  cld
  mov $stack_top, %esp
  mov $msg_start, %esi
  call puts32

  /* Identity map of the first GiB in 2 MiB pages: PML4[0] -> PDPT[0] -> PD. */
  mov $pdpt + 3, %eax
  mov %eax, pml4
  mov $pd + 3, %eax
  mov %eax, pdpt
  mov $pd, %edi
  mov $0x83, %eax          /* present, writable, 2 MiB page */
  mov $512, %ecx
1:
  mov %eax, (%edi)
  movl $0, 4(%edi)
  add $0x200000, %eax
  add $8, %edi
  loop 1b

  lgdt gdt_desc
  mov $pml4, %eax
  mov %eax, %cr3
  mov %cr4, %eax
  or $0x20, %eax           /* CR4.PAE */
  mov %eax, %cr4
  mov $MSR_EFER, %ecx
  rdmsr
  or $0x100, %eax          /* EFER.LME */
  wrmsr
  mov %cr0, %eax
  or $0x80000000, %eax     /* CR0.PG: IA-32e mode active */
  mov %eax, %cr0
  ljmp $0x10, $long_start

/* puts32: the NUL-terminated string at ESI, then a newline, to port 0xe9. */
puts32:
  lodsb
  test %al, %al
  jz 1f
  out %al, $0xe9
  jmp puts32
1:
  mov $'\n', %al
  out %al, $0xe9
  ret

  .code64
long_start:
  mov $0x18, %ax
  mov %ax, %ds
  mov %ax, %es
  mov %ax, %ss
  mov $stack_top, %rsp
  lea msg_long(%rip), %rsi
  call puts

  /* The IDT: every vector to `unexpected`, but the timer's. */
  lea idt(%rip), %rdi
  lea unexpected(%rip), %rdx
  xor %ecx, %ecx
2:
  mov %rdx, %rax
  cmp $TIMER_VECTOR, %ecx
  jne 3f
  lea timer_handler(%rip), %rax
3:
  call set_gate
  add $16, %rdi
  inc %ecx
  cmp $256, %ecx
  jne 2b
  lidt idt_desc(%rip)

  /* CPUID leaf 1: ECX bit 21, x2APIC. */
  mov $1, %eax
  xor %ecx, %ecx
  cpuid
  bt $21, %ecx
  jc 4f
  lea msg_nox2apic(%rip), %rsi
  call puts
  jmp shutdown
4:

  /* MMIO where the domU has no memory: EPT violations, emulated by Xen. */
  mov $MMIO_HOLE, %ebx
  mov (%rbx), %eax
  mov %eax, %r12d
  mov $0x12345678, %ecx
  mov %ecx, 4(%rbx)
  lea msg_mmio(%rip), %rsi
  call puts_nonl
  mov %r12d, %eax
  call put_hex32
  call newline

  /* The local APIC in x2APIC mode, its timer one-shot at vector 0x40. */
  mov $MSR_APIC_BASE, %ecx
  rdmsr
  or $0xc00, %eax          /* bit 11 enable, bit 10 x2APIC mode */
  wrmsr
  mov $MSR_X2APIC_SVR, %ecx
  mov $0x1ff, %eax         /* APIC software enable, spurious vector 0xff */
  xor %edx, %edx
  wrmsr
  mov $MSR_X2APIC_TDCR, %ecx
  mov $0xb, %eax           /* divide by 1 */
  wrmsr
  mov $MSR_X2APIC_LVTT, %ecx
  mov $TIMER_VECTOR, %eax  /* one-shot, not masked */
  wrmsr

  /* Spin with interrupts on until the timer's handler has run. */
  mov $MSR_X2APIC_TMICT, %ecx
  mov $TIMER_COUNT, %eax
  wrmsr
  mov $SPIN_BOUND, %ecx
  sti
5:
  cmpl $0, ticks(%rip)
  jne 6f
  dec %ecx
  jnz 5b
6:
  cli
  lea msg_spin(%rip), %rsi
  call puts_nonl
  mov ticks(%rip), %eax
  call put_hex8
  call newline

  /* HLT until the timer wakes the vCPU (STI's shadow covers the HLT). */
  mov $MSR_X2APIC_TMICT, %ecx
  mov $TIMER_COUNT, %eax
  xor %edx, %edx
  wrmsr
  sti
  hlt
  cli
  lea msg_hlt(%rip), %rsi
  call puts_nonl
  mov ticks(%rip), %eax
  call put_hex8
  call newline

shutdown:
  lea msg_off(%rip), %rsi
  call puts
  mov $HYPERVISOR_sched_op, %eax
  mov $SCHEDOP_shutdown, %edi
  lea shutdown_reason(%rip), %rsi
  vmcall
  /* Not reached; should it be, stop here without further exits. */
7:
  jmp 7b

/* set_gate: the 64-bit interrupt gate at RDI to handler RAX (code segment 0x10, DPL 0). */
set_gate:
  mov %ax, (%rdi)
  movw $0x10, 2(%rdi)
  movw $0x8e00, 4(%rdi)    /* present, DPL 0, 64-bit interrupt gate */
  shr $16, %rax
  mov %ax, 6(%rdi)
  shr $16, %rax
  mov %eax, 8(%rdi)
  movl $0, 12(%rdi)
  ret

timer_handler:
  push %rax
  push %rcx
  push %rdx
  incl ticks(%rip)
  mov $MSR_X2APIC_EOI, %ecx
  xor %eax, %eax
  xor %edx, %edx
  wrmsr
  pop %rdx
  pop %rcx
  pop %rax
  iretq

/* Any other vector: there is no way to tell which from here, so say so and stop. */
unexpected:
  lea msg_unexpected(%rip), %rsi
  call puts
  jmp shutdown

/* puts: the NUL-terminated string at RSI, then a newline, to port 0xe9. */
puts:
  call puts_nonl
newline:
  mov $'\n', %al
  out %al, $0xe9
  ret
puts_nonl:
  lodsb
  test %al, %al
  jz 1f
  out %al, $0xe9
  jmp puts_nonl
1:
  ret
/* put_hex32 / put_hex8: EAX (AL) in hexadecimal to port 0xe9. */
put_hex32:
  mov $8, %ecx
  jmp 1f
put_hex8:
  shl $24, %eax
  mov $2, %ecx
1:
  rol $4, %eax
  mov %eax, %edx
  and $0xf, %edx
  lea hexdigits(%rip), %r8
  mov (%r8, %rdx), %dl
  xchg %eax, %edx
  out %al, $0xe9
  xchg %eax, %edx
  loop 1b
  ret

  .data
  .balign 8
gdt:
  .quad 0
  .quad 0x00cf9a000000ffff  /* 0x08: 32-bit code */
  .quad 0x00af9a000000ffff  /* 0x10: 64-bit code */
  .quad 0x00cf92000000ffff  /* 0x18: data */
gdt_end:
gdt_desc:
  .word gdt_end - gdt - 1
  .long gdt
  .balign 8
idt_desc:
  .word 256 * 16 - 1
  .quad idt
ticks: .long 0
shutdown_reason: .long SHUTDOWN_poweroff
hexdigits: .ascii "0123456789abcdef"
msg_start: .asciz "pvh-long: start"
msg_long: .asciz "pvh-long: long mode"
msg_nox2apic: .asciz "pvh-long: no x2APIC"
msg_mmio: .asciz "pvh-long: mmio load "
msg_spin: .asciz "pvh-long: spin: ticks "
msg_hlt: .asciz "pvh-long: hlt: woken, ticks "
msg_unexpected: .asciz "pvh-long: unexpected exception"
msg_off: .asciz "pvh-long: poweroff"

  .bss
  .balign 4096
pml4: .fill 4096, 1, 0
pdpt: .fill 4096, 1, 0
pd: .fill 4096, 1, 0
idt: .fill 4096, 1, 0
  .fill 4096, 1, 0
stack_top:
