// kvm-hello: a small KVM user of /dev/kvm, run by the kvm initramfs's /init inside Linux
// on vmxsim (scripts/fetch-guests.sh builds it with gcc -static). It creates a VM with one
// vCPU (user-space irqchip: no KVM_CREATE_IRQCHIP) and runs the real-mode guest below,
// which exercises, in order:
//
//   1. port I/O: OUT 'A' to 0x3f8; IN from 0x501 (kvm-hello supplies 0x5a), echoed by OUT;
//   2. MMIO: a 4-byte store to 0xd0000 and a 4-byte load from 0xd0004, where no memslot
//      is (KVM_EXIT_MMIO; kvm-hello supplies the load's 0xcafef00d), the load echoed;
//   3. CPUID leaf 0, answered by KVM in the kernel from the entries kvm-hello set with
//      KVM_SET_CPUID2 (vendor "vmxsimKVMkit"), EBX EDX ECX sent out;
//   4. MSRs: WRMSR then RDMSR of IA32_SYSENTER_CS (KVM passes it through its MSR bitmap)
//      and IA32_PAT (KVM intercepts it and emulates it in the kernel), read values sent out;
//   5. EPT fault-in: a second memslot of four pages at 0x10000, first touched here (KVM
//      maps it on EPT violations): the guest sums its dwords, sends the sum out and marks
//      each page's last dword, which kvm-hello checks afterwards;
//   6. interrupt injection: with IF=0 the guest asks (OUT 0x507) for an interrupt; kvm-hello
//      sets request_interrupt_window, the guest executes STI, KVM returns
//      KVM_EXIT_IRQ_WINDOW_OPEN, kvm-hello injects vector 0x20 with KVM_INTERRUPT, and the
//      handler (real-mode IVT entry 0x20) sends out 0x20 and sets a flag the guest waits on;
//   7. HLT (KVM_EXIT_HLT).
//
// Each step sends its results out through its own port (0x501 to 0x508). kvm-hello prints
// one line per exit and one "... ok" line per step it checked, or the first call or check
// that failed. When Linux has two CPUs or more, the first part's thread is pinned to CPU 0
// and a second part follows (smpPart below): a VM with two vCPUs, one thread each, pinned
// to CPUs 0 and 1; then a third (migratePart): a VM with one vCPU whose thread starts on
// CPU 0 and moves to CPU 1 (sched_setaffinity) after the vCPU's first exit to user space,
// so that KVM moves the vCPU's VMCS (VMCLEAR on CPU 0, VMPTRLD and VMLAUNCH on CPU 1).
// Exit status: 0 when every step checked out, 1 otherwise.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

// The guest: real-mode code, assembled by gcc's assembler into this program's read-only
// data and copied to guest-physical 0x1000 (CS base 0x1000, IP 0). Only label differences
// within the block are used, so the code does not depend on where it lands.
extern const uint8_t GuestStart[], GuestHandler[], GuestEnd[];
__asm__(".pushsection .rodata.kvm_guest, \"a\"\n"
        ".code16\n"
        "GuestStart:\n"
        // 1. port I/O
        "  mov $0x3f8, %dx\n"
        "  mov $0x41, %al\n"
        "  out %al, %dx\n"
        "  mov $0x501, %dx\n"
        "  in %dx, %al\n"
        "  out %al, %dx\n"
        // 2. MMIO at 0xd0000, where no memslot is
        "  mov $0xd000, %ax\n"
        "  mov %ax, %es\n"
        "  movl $0x12345678, %es:0\n"
        "  movl %es:4, %eax\n"
        "  mov $0x502, %dx\n"
        "  out %eax, %dx\n"
        // 3. CPUID leaf 0
        "  xor %eax, %eax\n"
        "  xor %ecx, %ecx\n"
        "  cpuid\n"
        "  mov %edx, %edi\n"
        "  mov %ecx, %esi\n"
        "  mov $0x503, %dx\n"
        "  mov %ebx, %eax\n"
        "  out %eax, %dx\n"
        "  mov %edi, %eax\n"
        "  out %eax, %dx\n"
        "  mov %esi, %eax\n"
        "  out %eax, %dx\n"
        // 4. MSRs: IA32_SYSENTER_CS (0x174), then IA32_PAT (0x277)
        "  mov $0x174, %ecx\n"
        "  mov $0x1234, %eax\n"
        "  xor %edx, %edx\n"
        "  wrmsr\n"
        "  xor %eax, %eax\n"
        "  rdmsr\n"
        "  mov $0x504, %dx\n"
        "  out %eax, %dx\n"
        "  mov $0x277, %ecx\n"
        "  mov $0x06040700, %eax\n" // every byte a valid memory type (SDM Vol. 3A, 13.12.2)
        "  mov $0x01050007, %edx\n"
        "  wrmsr\n"
        "  xor %eax, %eax\n"
        "  xor %edx, %edx\n"
        "  rdmsr\n"
        "  mov %edx, %esi\n"
        "  mov $0x505, %dx\n"
        "  out %eax, %dx\n"
        "  mov %esi, %eax\n"
        "  out %eax, %dx\n"
        // 5. EPT fault-in: sum the dwords of the four pages at 0x10000, then mark each page
        "  mov $0x1000, %ax\n"
        "  mov %ax, %es\n"
        "  xor %eax, %eax\n"
        "  xor %si, %si\n"
        "1:addl %es:(%si), %eax\n"
        "  add $4, %si\n"
        "  cmp $0x4000, %si\n"
        "  jne 1b\n"
        "  mov $0x506, %dx\n"
        "  out %eax, %dx\n"
        "  mov $0x4b564d00, %ebx\n"
        "  xor %si, %si\n"
        "2:mov %ebx, %es:0xffc(%si)\n"
        "  inc %ebx\n"
        "  add $0x1000, %si\n"
        "  cmp $0x4000, %si\n"
        "  jne 2b\n"
        // 6. interrupt injection: ask with IF=0, then open the window and wait (bounded)
        "  cli\n"
        "  movb $0, %cs:(GuestFlag - GuestStart)\n"
        "  mov $0x507, %dx\n"
        "  mov $1, %al\n"
        "  out %al, %dx\n"
        "  sti\n"
        "  mov $0xffff, %cx\n"
        "3:cmpb $0, %cs:(GuestFlag - GuestStart)\n"
        "  jne 4f\n"
        "  loop 3b\n"
        // 7. HLT
        "4:hlt\n"
        "GuestHandler:\n"
        "  push %ax\n"
        "  push %dx\n"
        "  movb $1, %cs:(GuestFlag - GuestStart)\n"
        "  mov $0x508, %dx\n"
        "  mov $0x20, %al\n"
        "  out %al, %dx\n"
        "  pop %dx\n"
        "  pop %ax\n"
        "  iret\n"
        "GuestFlag: .byte 0\n"
        "GuestEnd:\n"
        ".code64\n"
        ".popsection\n");

enum {
  CodeGpa = 0x1000,      // slot 0 is guest-physical 0..0x2000: IVT, stack, code
  DataGpa = 0x10000,     // slot 1: the pages of the EPT fault-in step
  DataPages = 4,
  MmioGpa = 0xd0000,     // no memslot
  InValue = 0x5a,        // what kvm-hello answers the IN with
  MmioLoadValue = 0xcafef00d,
  SysenterCs = 0x1234,
  PatLow = 0x06040700,
  PatHigh = 0x01050007,
  Vector = 0x20,
  PageMark = 0x4b564d00, // the guest writes PageMark + n at the end of page n
};

static int fail(const char *What) {
  printf("kvm-hello: %s failed: %s\n", What, strerror(errno));
  return 1;
}

static int bad(const char *What) {
  printf("kvm-hello: %s: FAILED\n", What);
  return 1;
}

static uint32_t get32(const uint8_t *P) {
  uint32_t V;
  memcpy(&V, P, 4);
  return V;
}

// CPUID as the guest sees it: leaf 0 only, with a vendor no CPU has, so the guest's
// answer can only come from here.
static int setCpuidVendor(int Vcpu) {
  struct {
    struct kvm_cpuid2 Head;
    struct kvm_cpuid_entry2 Entry[1];
  } Cpuid;
  memset(&Cpuid, 0, sizeof Cpuid);
  Cpuid.Head.nent = 1;
  Cpuid.Entry[0].function = 0;
  Cpuid.Entry[0].eax = 0;
  memcpy(&Cpuid.Entry[0].ebx, "vmxs", 4);
  memcpy(&Cpuid.Entry[0].edx, "imKV", 4);
  memcpy(&Cpuid.Entry[0].ecx, "Mkit", 4);
  return ioctl(Vcpu, KVM_SET_CPUID2, &Cpuid);
}

// The second part, run when Linux has two CPUs or more (the kvm kit booted with --smp 2):
// a VM with two vCPUs, each run by its own thread pinned to its own host CPU (vCPU n on
// CPU n), so that each CPU's kvm_exit and kvm_entry events are that vCPU's. Each vCPU runs
// the real-mode guest below from its own reset state (a user-space irqchip: no INIT/SIPI,
// every vCPU is runnable): OUT of its number (BL, set by kvm-hello) to port 0x510, CPUID
// leaf 0 (answered by KVM from KVM_SET_CPUID2's vendor), OUT of CPUID's EBX to 0x511,
// HLT. The threads record what they saw; main prints it after joining them, in vCPU order.
extern const uint8_t SmpGuestStart[], SmpGuestEnd[];
__asm__(".pushsection .rodata.kvm_smp_guest, \"a\"\n"
        ".code16\n"
        "SmpGuestStart:\n"
        "  mov $0x510, %dx\n"
        "  mov %bl, %al\n"
        "  out %al, %dx\n"
        "  xor %eax, %eax\n"
        "  xor %ecx, %ecx\n"
        "  cpuid\n"
        "  mov $0x511, %dx\n"
        "  mov %ebx, %eax\n"
        "  out %eax, %dx\n"
        "  hlt\n"
        "SmpGuestEnd:\n"
        ".code64\n"
        ".popsection\n");

enum { SmpVcpus = 2, SmpCodeGpa = 0x3000 };

struct SmpVcpu {
  int Fd, Index, RunSize;
  int Cpu, MoveTo; // the CPU the thread starts on; the one it moves to after the first exit (-1: none)
  uint32_t Id, Vendor; // what the guest sent to 0x510 and 0x511
  int ExitCpu[8];      // the CPU each exit to user space came back on
  int Exits, Ok;
  char Problem[96];
};

static int pinTo(int Cpu) {
  cpu_set_t Set;
  CPU_ZERO(&Set);
  CPU_SET(Cpu, &Set);
  return sched_setaffinity(0, sizeof Set, &Set);
}

static void *smpRun(void *Arg) {
  struct SmpVcpu *V = Arg;
  if (pinTo(V->Cpu) < 0) {
    snprintf(V->Problem, sizeof V->Problem, "sched_setaffinity to CPU %d: %s", V->Cpu,
             strerror(errno));
    return NULL;
  }
  struct kvm_run *Run =
      mmap(NULL, (size_t)V->RunSize, PROT_READ | PROT_WRITE, MAP_SHARED, V->Fd, 0);
  if (Run == MAP_FAILED) {
    snprintf(V->Problem, sizeof V->Problem, "mmap kvm_run: %s", strerror(errno));
    return NULL;
  }
  for (V->Exits = 0; V->Exits < 8; ++V->Exits) {
    if (ioctl(V->Fd, KVM_RUN, 0) < 0) {
      snprintf(V->Problem, sizeof V->Problem, "KVM_RUN: %s", strerror(errno));
      return NULL;
    }
    V->ExitCpu[V->Exits] = sched_getcpu();
    if (Run->exit_reason == KVM_EXIT_HLT) {
      ++V->Exits;
      V->Ok = 1;
      return NULL;
    }
    if (Run->exit_reason != KVM_EXIT_IO || Run->io.direction != KVM_EXIT_IO_OUT ||
        Run->io.count != 1) {
      snprintf(V->Problem, sizeof V->Problem, "exit reason %u", Run->exit_reason);
      return NULL;
    }
    const uint8_t *D = (uint8_t *)Run + Run->io.data_offset;
    if (Run->io.port == 0x510 && Run->io.size == 1)
      V->Id = D[0];
    else if (Run->io.port == 0x511 && Run->io.size == 4)
      V->Vendor = get32(D);
    else {
      snprintf(V->Problem, sizeof V->Problem, "out to port %#x size %u", Run->io.port,
               Run->io.size);
      return NULL;
    }
    // The thread (and with it the vCPU, at its next KVM_RUN) moves to another CPU.
    if (V->Exits == 0 && V->MoveTo >= 0 && pinTo(V->MoveTo) < 0) {
      snprintf(V->Problem, sizeof V->Problem, "sched_setaffinity to CPU %d: %s", V->MoveTo,
               strerror(errno));
      return NULL;
    }
  }
  snprintf(V->Problem, sizeof V->Problem, "no hlt after 8 exits");
  return NULL;
}

// A VM of Count vCPUs running the smp guest, vCPU I's thread starting on CPU I (moving to
// MoveTo after its first exit when MoveTo >= 0); V receives what each saw. 0 when every
// call succeeded (what the vCPUs saw is the caller's to check).
static int runSmpGuest(int Kvm, int Count, int MoveTo, struct SmpVcpu *V) {
  int Vm = ioctl(Kvm, KVM_CREATE_VM, 0UL);
  if (Vm < 0)
    return fail("smp: KVM_CREATE_VM");
  if (ioctl(Vm, KVM_SET_TSS_ADDR, 0xfffbd000UL) < 0)
    return fail("smp: KVM_SET_TSS_ADDR");
  uint8_t *Mem = mmap(NULL, 0x4000, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (Mem == MAP_FAILED)
    return fail("smp: mmap");
  memcpy(Mem + SmpCodeGpa, SmpGuestStart, (size_t)(SmpGuestEnd - SmpGuestStart));
  struct kvm_userspace_memory_region Region = {
      .slot = 0, .guest_phys_addr = 0, .memory_size = 0x4000,
      .userspace_addr = (uint64_t)(uintptr_t)Mem};
  if (ioctl(Vm, KVM_SET_USER_MEMORY_REGION, &Region) < 0)
    return fail("smp: KVM_SET_USER_MEMORY_REGION");
  const int RunSize = ioctl(Kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
  if (RunSize < 0)
    return fail("smp: KVM_GET_VCPU_MMAP_SIZE");
  memset(V, 0, sizeof *V * (size_t)Count);
  for (int I = 0; I < Count; ++I) {
    V[I].Index = I;
    V[I].Cpu = I;
    V[I].MoveTo = MoveTo;
    V[I].RunSize = RunSize;
    V[I].Fd = ioctl(Vm, KVM_CREATE_VCPU, (unsigned long)I);
    if (V[I].Fd < 0)
      return fail("smp: KVM_CREATE_VCPU");
    if (setCpuidVendor(V[I].Fd) < 0)
      return fail("smp: KVM_SET_CPUID2");
    struct kvm_sregs Sregs;
    if (ioctl(V[I].Fd, KVM_GET_SREGS, &Sregs) < 0)
      return fail("smp: KVM_GET_SREGS");
    Sregs.cs.base = SmpCodeGpa;
    Sregs.cs.selector = SmpCodeGpa >> 4;
    if (ioctl(V[I].Fd, KVM_SET_SREGS, &Sregs) < 0)
      return fail("smp: KVM_SET_SREGS");
    struct kvm_regs Regs;
    memset(&Regs, 0, sizeof Regs);
    Regs.rbx = 0x30 + (uint64_t)I; // the vCPU's number, as the digit it sends
    Regs.rsp = 0x1000;
    Regs.rflags = 0x2;
    if (ioctl(V[I].Fd, KVM_SET_REGS, &Regs) < 0)
      return fail("smp: KVM_SET_REGS");
  }
  pthread_t T[SmpVcpus];
  for (int I = 0; I < Count; ++I)
    if ((errno = pthread_create(&T[I], NULL, smpRun, &V[I])) != 0)
      return fail("smp: pthread_create");
  for (int I = 0; I < Count; ++I)
    pthread_join(T[I], NULL);
  return 0;
}

// One vCPU whose thread moves from CPU 0 to CPU 1 after its first exit (OUT 0x510): KVM
// loads the vCPU on CPU 1 at the next KVM_RUN, clearing its VMCS on CPU 0 first (VMCLEAR,
// by an IPI to CPU 0) and launching it again on CPU 1 (VMPTRLD, VMLAUNCH). The CPUID,
// the OUT of its result and the HLT exit on CPU 1.
static int migratePart(int Kvm) {
  struct SmpVcpu V;
  if (runSmpGuest(Kvm, 1, 1, &V) != 0)
    return 1;
  if (!V.Ok) {
    printf("kvm-hello: migrate: %s: FAILED\n", V.Problem);
    return 1;
  }
  char S[5];
  memcpy(S, &V.Vendor, 4);
  S[4] = 0;
  printf("kvm-hello: migrate: vcpu 0: out 0x510 '%c' on cpu %d, moved to cpu 1, cpuid ebx "
         "'%s' out on cpu %d, hlt on cpu %d\n",
         (int)V.Id, V.ExitCpu[0], S, V.Exits == 3 ? V.ExitCpu[1] : -1, V.ExitCpu[V.Exits - 1]);
  if (V.Exits != 3 || V.Id != 0x30u || strcmp(S, "vmxs") != 0 || V.ExitCpu[0] != 0 ||
      V.ExitCpu[1] != 1 || V.ExitCpu[2] != 1) {
    printf("kvm-hello: migrate: FAILED\n");
    return 1;
  }
  printf("kvm-hello: migrate ok: the vcpu moved from cpu 0 to cpu 1\n");
  return 0;
}

static int smpPart(int Kvm) {
  struct SmpVcpu V[SmpVcpus];
  if (runSmpGuest(Kvm, SmpVcpus, -1, V) != 0)
    return 1;
  int Bad = 0;
  for (int I = 0; I < SmpVcpus; ++I) {
    if (!V[I].Ok) {
      printf("kvm-hello: smp: vcpu %d on cpu %d: %s: FAILED\n", I, I, V[I].Problem);
      Bad = 1;
      continue;
    }
    char S[5];
    memcpy(S, &V[I].Vendor, 4);
    S[4] = 0;
    printf("kvm-hello: smp: vcpu %d on cpu %d: out 0x510 '%c', cpuid ebx '%s', hlt, %d exits "
           "to user space\n",
           I, I, (int)V[I].Id, S, V[I].Exits);
    if (V[I].Id != 0x30u + (uint32_t)I || strcmp(S, "vmxs") != 0) {
      printf("kvm-hello: smp: vcpu %d: FAILED\n", I);
      Bad = 1;
    }
  }
  if (Bad)
    return 1;
  printf("kvm-hello: smp ok: %d vcpus on %d cpus\n", SmpVcpus, SmpVcpus);
  return migratePart(Kvm);
}

// The pattern slot 1 starts with, and its dword sum the guest must send.
static uint32_t pattern(uint32_t I) { return I * 0x9e3779b9u + 1; }

int main(void) {
  // With several CPUs, the first part's vCPU runs on CPU 0 (so its events stay on one
  // CPU), and the second part follows it.
  const long Cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (Cpus >= SmpVcpus) {
    cpu_set_t Set;
    CPU_ZERO(&Set);
    CPU_SET(0, &Set);
    if (sched_setaffinity(0, sizeof Set, &Set) < 0)
      return fail("sched_setaffinity to CPU 0");
  }
  int Kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (Kvm < 0)
    return fail("open /dev/kvm");
  printf("kvm-hello: KVM_GET_API_VERSION %d\n", ioctl(Kvm, KVM_GET_API_VERSION, 0));
  int Vm = ioctl(Kvm, KVM_CREATE_VM, 0UL);
  if (Vm < 0)
    return fail("KVM_CREATE_VM");
  // Three pages of guest-physical space for the TSS KVM needs to run real mode in
  // virtual-8086 mode when the CPU lacks unrestricted guest (the address QEMU uses; no
  // memory of ours is there).
  if (ioctl(Vm, KVM_SET_TSS_ADDR, 0xfffbd000UL) < 0)
    return fail("KVM_SET_TSS_ADDR");

  uint8_t *Mem = mmap(NULL, 0x2000, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  uint8_t *Data = mmap(NULL, DataPages * 0x1000, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (Mem == MAP_FAILED || Data == MAP_FAILED)
    return fail("mmap");
  memcpy(Mem + CodeGpa, GuestStart, (size_t)(GuestEnd - GuestStart));
  // Real-mode IVT entry Vector: offset, then segment (the code's, 0x100).
  const uint16_t Ivt[2] = {(uint16_t)(GuestHandler - GuestStart), CodeGpa >> 4};
  memcpy(Mem + 4 * Vector, Ivt, sizeof Ivt);
  uint32_t Sum = 0;
  for (uint32_t I = 0; I < DataPages * 0x1000 / 4; ++I) {
    const uint32_t V = pattern(I);
    memcpy(Data + 4 * I, &V, 4);
    Sum += V;
  }
  struct kvm_userspace_memory_region Region = {
      .slot = 0, .guest_phys_addr = 0, .memory_size = 0x2000,
      .userspace_addr = (uint64_t)(uintptr_t)Mem};
  if (ioctl(Vm, KVM_SET_USER_MEMORY_REGION, &Region) < 0)
    return fail("KVM_SET_USER_MEMORY_REGION 0");
  Region = (struct kvm_userspace_memory_region){
      .slot = 1, .guest_phys_addr = DataGpa, .memory_size = DataPages * 0x1000,
      .userspace_addr = (uint64_t)(uintptr_t)Data};
  if (ioctl(Vm, KVM_SET_USER_MEMORY_REGION, &Region) < 0)
    return fail("KVM_SET_USER_MEMORY_REGION 1");

  int Vcpu = ioctl(Vm, KVM_CREATE_VCPU, 0UL);
  if (Vcpu < 0)
    return fail("KVM_CREATE_VCPU");
  int RunSize = ioctl(Kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
  if (RunSize < 0)
    return fail("KVM_GET_VCPU_MMAP_SIZE");
  struct kvm_run *Run = mmap(NULL, (size_t)RunSize, PROT_READ | PROT_WRITE, MAP_SHARED, Vcpu, 0);
  if (Run == MAP_FAILED)
    return fail("mmap kvm_run");

  if (setCpuidVendor(Vcpu) < 0)
    return fail("KVM_SET_CPUID2");

  // Real mode, CS base 0x1000 (selector 0x100), IP 0; SS:SP 0:0x1000.
  struct kvm_sregs Sregs;
  if (ioctl(Vcpu, KVM_GET_SREGS, &Sregs) < 0)
    return fail("KVM_GET_SREGS");
  Sregs.cs.base = CodeGpa;
  Sregs.cs.selector = CodeGpa >> 4;
  if (ioctl(Vcpu, KVM_SET_SREGS, &Sregs) < 0)
    return fail("KVM_SET_SREGS");
  struct kvm_regs Regs;
  memset(&Regs, 0, sizeof Regs);
  Regs.rip = 0;
  Regs.rsp = 0x1000;
  Regs.rflags = 0x2;
  if (ioctl(Vcpu, KVM_SET_REGS, &Regs) < 0)
    return fail("KVM_SET_REGS");

  uint32_t Vendor[3], Pat[2];
  int NVendor = 0, NPat = 0;
  unsigned Done = 0; // one bit per checked step, in the order of the comment at the top
  for (int I = 0; I < 64; ++I) {
    if (ioctl(Vcpu, KVM_RUN, 0) < 0)
      return fail("KVM_RUN");
    switch (Run->exit_reason) {
    case KVM_EXIT_IO: {
      uint8_t *D = (uint8_t *)Run + Run->io.data_offset;
      const unsigned Port = Run->io.port, Size = Run->io.size;
      if (Run->io.count != 1 || (Size != 1 && Size != 4))
        return bad("io exit of an unexpected count or size");
      if (Run->io.direction == KVM_EXIT_IO_IN) {
        printf("kvm-hello: exit io port %#x size %u in, supplying %#x\n", Port, Size, InValue);
        if (Port != 0x501 || Size != 1)
          return bad("unexpected in");
        D[0] = InValue;
        break;
      }
      const uint32_t V = Size == 4 ? get32(D) : D[0];
      printf("kvm-hello: exit io port %#x size %u out data %#x\n", Port, Size, V);
      switch (Port) {
      case 0x3f8:
        if (V != 'A')
          return bad("out");
        Done |= 1;
        break;
      case 0x501:
        if (V != InValue)
          return bad("io");
        printf("kvm-hello: io ok: out 0x41, in %#x echoed\n", InValue);
        Done |= 2;
        break;
      case 0x502:
        if (V != MmioLoadValue)
          return bad("mmio");
        printf("kvm-hello: mmio ok: load %#x echoed\n", MmioLoadValue);
        Done |= 4;
        break;
      case 0x503:
        Vendor[NVendor++] = V;
        if (NVendor == 3) {
          char S[13];
          memcpy(S, Vendor, 12);
          S[12] = 0;
          if (strcmp(S, "vmxsimKVMkit") != 0)
            return bad("cpuid");
          printf("kvm-hello: cpuid ok: leaf 0 vendor %s\n", S);
          Done |= 8;
        }
        break;
      case 0x504:
        if (V != SysenterCs)
          return bad("msr IA32_SYSENTER_CS");
        printf("kvm-hello: msr ok: IA32_SYSENTER_CS %#x\n", V);
        Done |= 0x10;
        break;
      case 0x505:
        Pat[NPat++] = V;
        if (NPat == 2) {
          if (Pat[0] != PatLow || Pat[1] != PatHigh)
            return bad("msr IA32_PAT");
          printf("kvm-hello: msr ok: IA32_PAT %#010x%08x\n", Pat[1], Pat[0]);
          Done |= 0x20;
        }
        break;
      case 0x506:
        if (V != Sum)
          return bad("ept fault-in sum");
        printf("kvm-hello: ept fault-in ok: sum %#x of %d pages at %#x\n", Sum, DataPages,
               DataGpa);
        Done |= 0x40;
        break;
      case 0x507:
        printf("kvm-hello: if_flag %u ready_for_interrupt_injection %u: requesting an "
               "interrupt window\n",
               Run->if_flag, Run->ready_for_interrupt_injection);
        if (Run->if_flag != 0)
          return bad("if_flag with IF=0");
        Run->request_interrupt_window = 1;
        break;
      case 0x508:
        if (V != Vector)
          return bad("interrupt");
        printf("kvm-hello: interrupt ok: vector %#x handler ran\n", Vector);
        Done |= 0x80;
        break;
      default:
        return bad("out to an unexpected port");
      }
      break;
    }
    case KVM_EXIT_MMIO: {
      const uint64_t A = Run->mmio.phys_addr;
      if (Run->mmio.len != 4)
        return bad("mmio exit of an unexpected length");
      if (Run->mmio.is_write) {
        const uint32_t V = get32(Run->mmio.data);
        printf("kvm-hello: exit mmio addr %#llx len 4 write data %#x\n", (unsigned long long)A, V);
        if (A != MmioGpa || V != 0x12345678)
          return bad("mmio write");
      } else {
        printf("kvm-hello: exit mmio addr %#llx len 4 read, supplying %#x\n",
               (unsigned long long)A, MmioLoadValue);
        if (A != MmioGpa + 4)
          return bad("mmio read");
        const uint32_t V = MmioLoadValue;
        memcpy(Run->mmio.data, &V, 4);
      }
      break;
    }
    case KVM_EXIT_IRQ_WINDOW_OPEN: {
      printf("kvm-hello: exit irq_window_open if_flag %u ready_for_interrupt_injection %u\n",
             Run->if_flag, Run->ready_for_interrupt_injection);
      if (!Run->ready_for_interrupt_injection)
        return bad("irq window open but not ready for injection");
      struct kvm_interrupt Irq = {.irq = Vector};
      if (ioctl(Vcpu, KVM_INTERRUPT, &Irq) < 0)
        return fail("KVM_INTERRUPT");
      printf("kvm-hello: KVM_INTERRUPT vector %#x\n", Vector);
      Run->request_interrupt_window = 0;
      break;
    }
    case KVM_EXIT_HLT: {
      printf("kvm-hello: exit hlt\n");
      if (Mem[CodeGpa + (GuestEnd - GuestStart) - 1] != 1)
        return bad("interrupt handler's flag");
      for (uint32_t P = 0; P < DataPages; ++P)
        if (get32(Data + P * 0x1000 + 0xffc) != PageMark + P)
          return bad("ept fault-in page marks");
      printf("kvm-hello: ept fault-in ok: the guest's marks are in all %d pages\n", DataPages);
      if (Done != 0xff)
        return bad("a step's exit missing");
      printf("kvm-hello: all steps ok\n");
      return Cpus >= SmpVcpus ? smpPart(Kvm) : 0;
    }
    case KVM_EXIT_FAIL_ENTRY:
      printf("kvm-hello: exit fail_entry hardware_entry_failure_reason %#llx\n",
             (unsigned long long)Run->fail_entry.hardware_entry_failure_reason);
      return 1;
    case KVM_EXIT_INTERNAL_ERROR:
      printf("kvm-hello: exit internal_error suberror %u\n", Run->internal.suberror);
      return 1;
    default:
      printf("kvm-hello: exit reason %u\n", Run->exit_reason);
      return 1;
    }
  }
  printf("kvm-hello: no hlt after 64 exits\n");
  return 1;
}
