// kvm-hello: the smallest KVM user of /dev/kvm, run by the kvm initramfs's /init inside
// Linux on vmxsim (scripts/fetch-guests.sh builds it with gcc -static). It creates a VM
// with one vCPU and one page of memory at guest-physical 0x1000, runs this real-mode code
// from 0x1000:
//
//   ba f8 03    mov dx, 0x3f8
//   b0 41       mov al, 'A'
//   ee          out dx, al
//   f4          hlt
//
// and prints one line per exit it sees ("kvm-hello: exit io port 0x3f8 size 1 out data
// 0x41", then "kvm-hello: exit hlt"), or the first call that failed with its errno.
// Exit status: 0 when the exits were exactly IO then HLT, 1 otherwise.
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

static int fail(const char *What) {
  printf("kvm-hello: %s failed: %s\n", What, strerror(errno));
  return 1;
}

int main(void) {
  static const uint8_t Code[] = {0xba, 0xf8, 0x03, 0xb0, 0x41, 0xee, 0xf4};
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
  uint8_t *Mem = mmap(NULL, 0x1000, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (Mem == MAP_FAILED)
    return fail("mmap");
  memcpy(Mem, Code, sizeof Code);
  struct kvm_userspace_memory_region Region = {
      .slot = 0, .guest_phys_addr = 0x1000, .memory_size = 0x1000,
      .userspace_addr = (uint64_t)(uintptr_t)Mem};
  if (ioctl(Vm, KVM_SET_USER_MEMORY_REGION, &Region) < 0)
    return fail("KVM_SET_USER_MEMORY_REGION");
  int Vcpu = ioctl(Vm, KVM_CREATE_VCPU, 0UL);
  if (Vcpu < 0)
    return fail("KVM_CREATE_VCPU");
  int RunSize = ioctl(Kvm, KVM_GET_VCPU_MMAP_SIZE, 0);
  if (RunSize < 0)
    return fail("KVM_GET_VCPU_MMAP_SIZE");
  struct kvm_run *Run = mmap(NULL, (size_t)RunSize, PROT_READ | PROT_WRITE, MAP_SHARED, Vcpu, 0);
  if (Run == MAP_FAILED)
    return fail("mmap kvm_run");

  // Real mode, CS base 0x1000 (selector 0x100), IP 0.
  struct kvm_sregs Sregs;
  if (ioctl(Vcpu, KVM_GET_SREGS, &Sregs) < 0)
    return fail("KVM_GET_SREGS");
  Sregs.cs.base = 0x1000;
  Sregs.cs.selector = 0x100;
  if (ioctl(Vcpu, KVM_SET_SREGS, &Sregs) < 0)
    return fail("KVM_SET_SREGS");
  struct kvm_regs Regs;
  memset(&Regs, 0, sizeof Regs);
  Regs.rip = 0;
  Regs.rflags = 0x2;
  if (ioctl(Vcpu, KVM_SET_REGS, &Regs) < 0)
    return fail("KVM_SET_REGS");

  int SawIo = 0;
  for (int I = 0; I < 8; ++I) {
    if (ioctl(Vcpu, KVM_RUN, 0) < 0)
      return fail("KVM_RUN");
    switch (Run->exit_reason) {
    case KVM_EXIT_IO: {
      const uint8_t *Data = (const uint8_t *)Run + Run->io.data_offset;
      printf("kvm-hello: exit io port %#x size %u %s data %#x\n", Run->io.port, Run->io.size,
             Run->io.direction == KVM_EXIT_IO_OUT ? "out" : "in", Data[0]);
      SawIo = Run->io.port == 0x3f8 && Run->io.size == 1 &&
              Run->io.direction == KVM_EXIT_IO_OUT && Data[0] == 'A';
      break;
    }
    case KVM_EXIT_HLT:
      printf("kvm-hello: exit hlt\n");
      return SawIo ? 0 : 1;
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
  printf("kvm-hello: no hlt after 8 exits\n");
  return 1;
}
