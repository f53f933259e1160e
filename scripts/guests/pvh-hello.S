/*
 * pvh-hello: a tiny PVH guest for Xen, run by the xen initramfs's /init as a domU with
 * `xl create` (scripts/fetch-guests.sh builds it with the host's gcc and ld; see
 * docs/xen-trace.md). Xen enters it at the XEN_ELFNOTE_PHYS32_ENTRY address in 32-bit
 * protected mode with paging off, flat segments, EBX the guest-physical address of the
 * hvm_start_info structure (Xen's PVH boot ABI, docs/misc/pvh.pandoc in Xen's tree).
 *
 * Every VM exit it takes is known in advance, in this order:
 *   - port 0xe9 OUT, one byte a time: Xen's HVM debug console (hvm_print_line), which
 *     prints each line on Xen's console as "(d1) pvh-hello: ...";
 *   - CPUID leaf 0 and leaf 0x40000000 (Xen's leaves: signature "XenVMMXenVMM");
 *   - IN and OUT of port 0x510, which no one claims (Xen's null handler: reads all ones);
 *   - RDMSR of IA32_MTRRCAP (0xfe), RDMSR and WRMSR (the same value) of
 *     IA32_MTRR_DEF_TYPE (0x2ff): both intercepted and emulated by Xen;
 *   - VMCALL xen_version(XENVER_version): Xen's hypercall, answered 0x40011 (4.17);
 *   - VMCALL sched_op(SCHEDOP_shutdown, {SHUTDOWN_poweroff}): the end.
 * The results are printed: "pvh-hello: cpuid XenVMMXenVMM", "pvh-hello: in 0x510 ff",
 * "pvh-hello: xen_version 00040011", ... No interrupts are enabled (IF stays 0) and no
 * HLT is executed: with IF=0 Xen would take it for a vCPU going down.
 */
#define XEN_ELFNOTE_ENTRY 1
#define XEN_ELFNOTE_XEN_VERSION 5
#define XEN_ELFNOTE_GUEST_OS 6
#define XEN_ELFNOTE_LOADER 8
#define XEN_ELFNOTE_PHYS32_ENTRY 18

#define HYPERVISOR_xen_version 17
#define HYPERVISOR_sched_op 29
#define SCHEDOP_shutdown 2
#define SHUTDOWN_poweroff 0

/* One Xen ELF note: name "Xen", type, descriptor. */
#define NOTE(type, desctype, descdata) \
  .balign 4; .long 4; .long 2f - 1f; .long type; .asciz "Xen"; \
  1: desctype descdata; 2: .balign 4

  .section .note.Xen, "a", @note
  NOTE(XEN_ELFNOTE_GUEST_OS, .asciz, "pvh-hello")
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
  call puts

  /* CPUID leaf 0, then Xen's leaf 0x40000000: its signature printed. */
  xor %eax, %eax
  xor %ecx, %ecx
  cpuid
  mov $0x40000000, %eax
  xor %ecx, %ecx
  cpuid
  mov %ebx, sig
  mov %ecx, sig + 4
  mov %edx, sig + 8
  mov $msg_cpuid, %esi
  call puts

  /* Port I/O to a port nobody claims. */
  mov $0x510, %dx
  in %dx, %al
  mov %al, %bl
  out %al, %dx
  mov $msg_in, %esi
  call puts_nonl
  mov %bl, %al
  call put_hex8
  call newline

  /* MSRs Xen intercepts and emulates. */
  mov $0xfe, %ecx
  rdmsr
  mov $0x2ff, %ecx
  rdmsr
  mov %eax, %ebx
  wrmsr
  mov $msg_msr, %esi
  call puts_nonl
  mov %ebx, %eax
  call put_hex32
  call newline

  /* Hypercall: xen_version(XENVER_version, NULL). */
  mov $HYPERVISOR_xen_version, %eax
  xor %ebx, %ebx
  xor %ecx, %ecx
  vmcall
  mov %eax, %ebx
  mov $msg_ver, %esi
  call puts_nonl
  mov %ebx, %eax
  call put_hex32
  call newline

  /* Hypercall: sched_op(SCHEDOP_shutdown, &{SHUTDOWN_poweroff}). */
  mov $msg_off, %esi
  call puts
  mov $HYPERVISOR_sched_op, %eax
  mov $SCHEDOP_shutdown, %ebx
  mov $shutdown_reason, %ecx
  vmcall
  /* Not reached; should it be, stop here without further exits. */
1:
  jmp 1b

/* puts: the NUL-terminated string at ESI, then a newline, to port 0xe9. */
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
  mov hexdigits(%edx), %dl
  xchg %eax, %edx
  out %al, $0xe9
  xchg %eax, %edx
  loop 1b
  ret

  .data
hexdigits: .ascii "0123456789abcdef"
msg_start: .asciz "pvh-hello: start"
msg_cpuid: .ascii "pvh-hello: cpuid "
sig: .fill 12, 1, '?'
  .byte 0
msg_in: .asciz "pvh-hello: in 0x510 "
msg_msr: .asciz "pvh-hello: rdmsr 0x2ff "
msg_ver: .asciz "pvh-hello: xen_version "
msg_off: .asciz "pvh-hello: poweroff"
  .balign 4
shutdown_reason: .long SHUTDOWN_poweroff

  .bss
  .balign 16
  .fill 1024, 1, 0
stack_top:
