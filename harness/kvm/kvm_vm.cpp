#include "harness/kvm/kvm_vm.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

namespace vmxsim::kvm {

namespace {

// The run page of the vCPU inside KVM_RUN, for the timeout signal: setting immediate_exit
// also covers a signal that arrives just before the ioctl enters the guest.
kvm_run *volatile ActiveRun = nullptr;

void onAlarm(int) {
  if (kvm_run *R = ActiveRun)
    R->immediate_exit = 1;
}

void installAlarmHandler() {
  static bool Done = false;
  if (Done)
    return;
  struct sigaction Sa = {};
  Sa.sa_handler = onAlarm;
  sigemptyset(&Sa.sa_mask);
  Sa.sa_flags = 0; // no SA_RESTART: KVM_RUN must return EINTR
  sigaction(SIGALRM, &Sa, nullptr);
  Done = true;
}

void setTimer(unsigned Ms) {
  itimerval T = {};
  T.it_value.tv_sec = Ms / 1000;
  T.it_value.tv_usec = (Ms % 1000) * 1000;
  // Re-arm every 10 ms after the first expiry so a signal lost between arming and the
  // ioctl is repeated.
  T.it_interval.tv_usec = Ms ? 10000 : 0;
  setitimer(ITIMER_REAL, &T, nullptr);
}

/// The KVM device: /dev/kvm, or $VMXSIM_KVM_DEVICE (lets tests exercise the "no KVM" path).
const char *devicePath() {
  const char *P = std::getenv("VMXSIM_KVM_DEVICE");
  return P && *P ? P : "/dev/kvm";
}

std::string errnoText(const char *What) { return std::string(What) + ": " + std::strerror(errno); }

// vmxsim's Segment (VMCS access-rights packing) to KVM's kvm_segment and back.
kvm_segment toKvm(const Segment &S) {
  kvm_segment K = {};
  K.base = S.Base;
  K.limit = S.Limit;
  K.selector = S.Selector;
  K.type = S.Attr & Segment::Type;
  K.s = (S.Attr & Segment::S) ? 1 : 0;
  K.dpl = S.dpl();
  K.present = (S.Attr & Segment::P) ? 1 : 0;
  K.avl = (S.Attr & Segment::Avl) ? 1 : 0;
  K.l = (S.Attr & Segment::L) ? 1 : 0;
  K.db = (S.Attr & Segment::DB) ? 1 : 0;
  K.g = (S.Attr & Segment::G) ? 1 : 0;
  K.unusable = (S.Attr & Segment::Unusable) ? 1 : 0;
  return K;
}
Segment fromKvm(const kvm_segment &K) {
  Segment S;
  S.Base = K.base;
  S.Limit = K.limit;
  S.Selector = K.selector;
  S.Attr = (K.type & 0xf) | (K.s ? Segment::S : 0) | (uint32_t(K.dpl & 3) << Segment::DplShift) |
           (K.present ? Segment::P : 0) | (K.avl ? Segment::Avl : 0) | (K.l ? Segment::L : 0) |
           (K.db ? Segment::DB : 0) | (K.g ? Segment::G : 0) | (K.unusable ? Segment::Unusable : 0);
  return S;
}

} // namespace

const char *exitKindName(ExitKind K) {
  switch (K) {
  case ExitKind::Io: return "io";
  case ExitKind::Mmio: return "mmio";
  case ExitKind::Hlt: return "hlt";
  case ExitKind::Shutdown: return "shutdown";
  case ExitKind::Timeout: return "timeout";
  case ExitKind::Error: return "error";
  }
  return "?";
}

bool KvmVm::available(std::string &Why) {
  int Fd = open(devicePath(), O_RDWR | O_CLOEXEC);
  if (Fd < 0) {
    Why = errnoText(devicePath());
    return false;
  }
  close(Fd);
  return true;
}

std::unique_ptr<KvmVm> KvmVm::create(uint64_t RamBytes, std::string &Why) {
  std::unique_ptr<KvmVm> V(new KvmVm);
  V->SysFd = open(devicePath(), O_RDWR | O_CLOEXEC);
  if (V->SysFd < 0) {
    Why = errnoText(devicePath());
    return nullptr;
  }
  if (ioctl(V->SysFd, KVM_GET_API_VERSION, 0) != KVM_API_VERSION) {
    Why = "/dev/kvm: unexpected KVM API version";
    return nullptr;
  }
  V->VmFd = ioctl(V->SysFd, KVM_CREATE_VM, 0);
  if (V->VmFd < 0) {
    Why = errnoText("KVM_CREATE_VM");
    return nullptr;
  }
  // Needed by VT-x hosts for real mode; harmless (and refused by some modules) elsewhere.
  (void)ioctl(V->VmFd, KVM_SET_TSS_ADDR, 0xfffbd000ul);
  void *Mem = mmap(nullptr, RamBytes, PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (Mem == MAP_FAILED) {
    Why = errnoText("mmap of guest RAM");
    return nullptr;
  }
  V->Ram = static_cast<uint8_t *>(Mem);
  V->RamBytes = RamBytes;
  kvm_userspace_memory_region Region = {};
  Region.slot = 0;
  Region.guest_phys_addr = 0;
  Region.memory_size = RamBytes;
  Region.userspace_addr = reinterpret_cast<uint64_t>(Mem);
  if (ioctl(V->VmFd, KVM_SET_USER_MEMORY_REGION, &Region) < 0) {
    Why = errnoText("KVM_SET_USER_MEMORY_REGION");
    return nullptr;
  }
  V->CpuFd = ioctl(V->VmFd, KVM_CREATE_VCPU, 0);
  if (V->CpuFd < 0) {
    Why = errnoText("KVM_CREATE_VCPU");
    return nullptr;
  }
  int RunSize = ioctl(V->SysFd, KVM_GET_VCPU_MMAP_SIZE, 0);
  if (RunSize <= 0) {
    Why = errnoText("KVM_GET_VCPU_MMAP_SIZE");
    return nullptr;
  }
  void *R = mmap(nullptr, size_t(RunSize), PROT_READ | PROT_WRITE, MAP_SHARED, V->CpuFd, 0);
  if (R == MAP_FAILED) {
    Why = errnoText("mmap of kvm_run");
    return nullptr;
  }
  V->Run = static_cast<kvm_run *>(R);
  V->RunBytes = size_t(RunSize);
  installAlarmHandler();
  return V;
}

KvmVm::~KvmVm() {
  if (Run)
    munmap(Run, RunBytes);
  if (Ram)
    munmap(Ram, RamBytes);
  for (int Fd : {CpuFd, VmFd, SysFd})
    if (Fd >= 0)
      close(Fd);
}

bool KvmVm::setState(const CpuState &S, std::string &Why) {
  const unsigned Cpl = S.cpl();
  if (HasRun && Cpl != RunCpl) {
    Why = "this KVM (PVM) cannot change the CPL of a vCPU that has run; use a new VM";
    return false;
  }
  kvm_sregs Sr = {};
  if (ioctl(CpuFd, KVM_GET_SREGS, &Sr) < 0) {
    Why = errnoText("KVM_GET_SREGS");
    return false;
  }
  Sr.cs = toKvm(S.seg(SegReg::CS));
  Sr.ds = toKvm(S.seg(SegReg::DS));
  Sr.es = toKvm(S.seg(SegReg::ES));
  Sr.fs = toKvm(S.seg(SegReg::FS));
  Sr.gs = toKvm(S.seg(SegReg::GS));
  Sr.ss = toKvm(S.seg(SegReg::SS));
  Sr.tr = toKvm(S.Tr);
  Sr.ldt = toKvm(S.Ldtr);
  Sr.gdt.base = S.Gdtr.Base;
  Sr.gdt.limit = S.Gdtr.Limit;
  Sr.idt.base = S.Idtr.Base;
  Sr.idt.limit = S.Idtr.Limit;
  Sr.cr0 = S.Cr0;
  Sr.cr2 = S.Cr2;
  Sr.cr3 = S.Cr3;
  Sr.cr4 = S.Cr4;
  Sr.efer = S.Efer;
  if (ioctl(CpuFd, KVM_SET_SREGS, &Sr) < 0) {
    Why = errnoText("KVM_SET_SREGS (this KVM refuses the entry state)");
    return false;
  }
  kvm_regs R = {};
  R.rax = S.Gpr[0];
  R.rcx = S.Gpr[1];
  R.rdx = S.Gpr[2];
  R.rbx = S.Gpr[3];
  R.rsp = S.Gpr[4];
  R.rbp = S.Gpr[5];
  R.rsi = S.Gpr[6];
  R.rdi = S.Gpr[7];
  R.r8 = S.Gpr[8];
  R.r9 = S.Gpr[9];
  R.r10 = S.Gpr[10];
  R.r11 = S.Gpr[11];
  R.r12 = S.Gpr[12];
  R.r13 = S.Gpr[13];
  R.r14 = S.Gpr[14];
  R.r15 = S.Gpr[15];
  R.rip = S.Rip;
  R.rflags = S.Rflags;
  if (ioctl(CpuFd, KVM_SET_REGS, &R) < 0) {
    Why = errnoText("KVM_SET_REGS");
    return false;
  }
  if (!HasRun)
    RunCpl = Cpl;
  return true;
}

bool KvmVm::getState(CpuState &S, std::string &Why) {
  kvm_regs R = {};
  kvm_sregs Sr = {};
  if (ioctl(CpuFd, KVM_GET_REGS, &R) < 0 || ioctl(CpuFd, KVM_GET_SREGS, &Sr) < 0) {
    Why = errnoText("KVM_GET_REGS/SREGS");
    return false;
  }
  const uint64_t G[16] = {R.rax, R.rcx, R.rdx, R.rbx, R.rsp, R.rbp, R.rsi, R.rdi,
                          R.r8,  R.r9,  R.r10, R.r11, R.r12, R.r13, R.r14, R.r15};
  std::memcpy(S.Gpr, G, sizeof(G));
  S.Rip = R.rip;
  S.Rflags = R.rflags;
  S.seg(SegReg::CS) = fromKvm(Sr.cs);
  S.seg(SegReg::DS) = fromKvm(Sr.ds);
  S.seg(SegReg::ES) = fromKvm(Sr.es);
  S.seg(SegReg::FS) = fromKvm(Sr.fs);
  S.seg(SegReg::GS) = fromKvm(Sr.gs);
  S.seg(SegReg::SS) = fromKvm(Sr.ss);
  S.Tr = fromKvm(Sr.tr);
  S.Ldtr = fromKvm(Sr.ldt);
  S.Gdtr = TableReg{Sr.gdt.base, Sr.gdt.limit};
  S.Idtr = TableReg{Sr.idt.base, Sr.idt.limit};
  S.Cr0 = Sr.cr0;
  S.Cr2 = Sr.cr2;
  S.Cr3 = Sr.cr3;
  S.Cr4 = Sr.cr4;
  S.Efer = Sr.efer;
  return true;
}

Exit KvmVm::run(unsigned TimeoutMs) {
  Exit E;
  Run->immediate_exit = 0;
  ActiveRun = Run;
  setTimer(TimeoutMs);
  int Rc = ioctl(CpuFd, KVM_RUN, 0);
  int Err = errno;
  setTimer(0);
  ActiveRun = nullptr;
  Run->immediate_exit = 0;
  HasRun = true;
  if (Rc < 0) {
    if (Err == EINTR) {
      E.Kind = ExitKind::Timeout;
      E.What = "KVM_RUN did not return within " + std::to_string(TimeoutMs) + " ms";
      return E;
    }
    E.Kind = ExitKind::Error;
    E.What = std::string("KVM_RUN: ") + std::strerror(Err);
    return E;
  }
  switch (Run->exit_reason) {
  case KVM_EXIT_IO: {
    E.Kind = ExitKind::Io;
    E.Port = Run->io.port;
    E.Size = Run->io.size;
    E.Write = Run->io.direction == KVM_EXIT_IO_OUT;
    if (E.Write)
      std::memcpy(&E.Data, reinterpret_cast<uint8_t *>(Run) + Run->io.data_offset, E.Size);
    if (Run->io.count != 1) {
      E.Kind = ExitKind::Error;
      E.What = "string port I/O (count > 1) is not supported by xcheck";
    }
    return E;
  }
  case KVM_EXIT_MMIO:
    E.Kind = ExitKind::Mmio;
    E.Addr = Run->mmio.phys_addr;
    E.Size = uint8_t(Run->mmio.len);
    E.Write = Run->mmio.is_write;
    if (E.Write)
      std::memcpy(&E.Data, Run->mmio.data, E.Size > 8 ? 8 : E.Size);
    return E;
  case KVM_EXIT_HLT:
    E.Kind = ExitKind::Hlt;
    return E;
  case KVM_EXIT_SHUTDOWN:
    E.Kind = ExitKind::Shutdown;
    return E;
  case KVM_EXIT_FAIL_ENTRY:
    E.What = "KVM refused to enter the guest (KVM_EXIT_FAIL_ENTRY, hardware reason " +
             std::to_string(Run->fail_entry.hardware_entry_failure_reason) + ")";
    return E;
  case KVM_EXIT_INTERNAL_ERROR:
    E.What = "KVM internal error (suberror " + std::to_string(Run->internal.suberror) +
             "): the kernel's emulator could not run the instruction";
    return E;
  default:
    E.What = "unexpected KVM exit reason " + std::to_string(Run->exit_reason);
    return E;
  }
}

void KvmVm::completeRead(uint64_t Value) {
  if (Run->exit_reason == KVM_EXIT_IO && Run->io.direction == KVM_EXIT_IO_IN)
    std::memcpy(reinterpret_cast<uint8_t *>(Run) + Run->io.data_offset, &Value, Run->io.size);
  else if (Run->exit_reason == KVM_EXIT_MMIO && !Run->mmio.is_write)
    std::memcpy(Run->mmio.data, &Value, Run->mmio.len > 8 ? 8 : Run->mmio.len);
}

} // namespace vmxsim::kvm
