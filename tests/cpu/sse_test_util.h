// Helpers shared by the SSE/FXSAVE tests: deterministic random numbers, running a
// code snippet natively, and observing a fault raised in the emulator whether or not
// exception delivery through the IDT is implemented yet.
#pragma once
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace vmxsim::test {

/// splitmix64: a tiny deterministic generator (same sequence on every host).
struct SplitMix64 {
  uint64_t State;
  explicit SplitMix64(uint64_t Seed) : State(Seed) {}
  uint64_t next() {
    uint64_t Z = (State += 0x9e3779b97f4a7c15ull);
    Z = (Z ^ (Z >> 30)) * 0xbf58476d1ce4e5b9ull;
    Z = (Z ^ (Z >> 27)) * 0x94d049bb133111ebull;
    return Z ^ (Z >> 31);
  }
  unsigned below(unsigned N) { return unsigned(next() % N); }
};

/// Register state handed to natively executed snippets (layout used by runNative).
struct NativeRegs {
  Xmm X[16];
  uint64_t Rax, Rcx, Rdx, Rbx, Rsi;
};
static_assert(sizeof(NativeRegs) == 16 * 16 + 5 * 8);

/// An executable page holding `snippet; ret`.
class NativeCode {
public:
  NativeCode() {
    Page = static_cast<uint8_t *>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  }
  ~NativeCode() { munmap(Page, 4096); }
  NativeCode(const NativeCode &) = delete;
  NativeCode &operator=(const NativeCode &) = delete;
  bool valid() const { return Page != MAP_FAILED; }
  void *entry() const { return Page; }

  void set(const std::vector<uint8_t> &Snippet) {
    std::memcpy(Page, Snippet.data(), Snippet.size());
    Page[Snippet.size()] = 0xc3; // ret
  }

  /// Loads XMM0-15, RAX, RCX, RDX, RBX, RSI from R, runs the snippet, stores them back.
  void run(NativeRegs &R) {
    void *Fn = Page;
    NativeRegs *P = &R;
    asm volatile(
#define VMX_LOAD(N) "movdqu " #N "*16(%[p]), %%xmm" #N "\n\t"
        VMX_LOAD(0) VMX_LOAD(1) VMX_LOAD(2) VMX_LOAD(3) VMX_LOAD(4) VMX_LOAD(5) VMX_LOAD(6)
        VMX_LOAD(7) VMX_LOAD(8) VMX_LOAD(9) VMX_LOAD(10) VMX_LOAD(11) VMX_LOAD(12)
        VMX_LOAD(13) VMX_LOAD(14) VMX_LOAD(15)
#undef VMX_LOAD
        "mov 256(%[p]), %%rax\n\t"
        "mov 264(%[p]), %%rcx\n\t"
        "mov 272(%[p]), %%rdx\n\t"
        "mov 280(%[p]), %%rbx\n\t"
        "mov 288(%[p]), %%rsi\n\t"
        "sub $128, %%rsp\n\t" // step over the red zone
        "push %[p]\n\t"
        "call *%[f]\n\t"
        "pop %[p]\n\t"
        "add $128, %%rsp\n\t"
#define VMX_STORE(N) "movdqu %%xmm" #N ", " #N "*16(%[p])\n\t"
        VMX_STORE(0) VMX_STORE(1) VMX_STORE(2) VMX_STORE(3) VMX_STORE(4) VMX_STORE(5)
        VMX_STORE(6) VMX_STORE(7) VMX_STORE(8) VMX_STORE(9) VMX_STORE(10) VMX_STORE(11)
        VMX_STORE(12) VMX_STORE(13) VMX_STORE(14) VMX_STORE(15)
#undef VMX_STORE
        "mov %%rax, 256(%[p])\n\t"
        "mov %%rcx, 264(%[p])\n\t"
        "mov %%rdx, 272(%[p])\n\t"
        "mov %%rbx, 280(%[p])\n\t"
        "mov %%rsi, 288(%[p])\n\t"
        : [p] "+r"(P), [f] "+r"(Fn)
        :
        : "rax", "rcx", "rdx", "rbx", "rsi", "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3",
          "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
          "xmm14", "xmm15");
  }

private:
  uint8_t *Page;
};

/// Where the fault-catching IDT sends vector V: a HLT at kFaultStubs + V.
inline constexpr uint64_t kFaultStubs = 0x3000;

/// Installs a 64-bit IDT whose 32 exception vectors each point at a HLT stub, so that a
/// test sees the vector of a fault both with the bootstrap delivery (which stops with
/// Shutdown, leaving the vector in Cpu::Pending) and with real IDT delivery.
inline void installFaultIdt(TestMachine &M) {
  for (unsigned V = 0; V < 32; ++V) {
    uint64_t Target = kFaultStubs + V;
    uint64_t Lo = (Target & 0xffff) | (uint64_t(kSelCode64) << 16) | (uint64_t(0x8e) << 40) |
                  (((Target >> 16) & 0xffff) << 48);
    uint64_t Hi = Target >> 32;
    M.write(kIdtBase + 16 * V, &Lo, 8);
    M.write(kIdtBase + 16 * V + 8, &Hi, 8);
    uint8_t Hlt = 0xf4;
    M.write(Target, &Hlt, 1);
  }
  M.S.Idtr = TableReg{kIdtBase, 32 * 16 - 1};
}

/// The vector of the exception the last run stopped on, or -1 if it ended otherwise.
inline int faultVector(TestMachine &M, StopReason Why) {
  if (Why == StopReason::Shutdown)
    return M.Cpu_.Pending.Vector;
  if (Why == StopReason::Halted && M.S.Rip >= kFaultStubs + 1 && M.S.Rip <= kFaultStubs + 32)
    return int(M.S.Rip - kFaultStubs - 1);
  return -1;
}

/// A natively executed floating-point snippet's state: registers, MXCSR and RFLAGS.
struct NativeFpState {
  NativeRegs R;
  uint32_t Mxcsr;  ///< in: loaded before the snippet; out: after it or at the #XM
  uint32_t Pad = 0;
  uint64_t Rflags; ///< out
};
static_assert(sizeof(NativeFpState) == 312);

namespace fpdetail {
inline sigjmp_buf *Jump;
inline NativeFpState *Trap;
/// SIGFPE (an unmasked SIMD floating-point exception, #XM on the host): records the state
/// at the faulting instruction and leaves the snippet.
inline void onSigfpe(int, siginfo_t *, void *Ctx) {
  auto *U = static_cast<ucontext_t *>(Ctx);
  NativeFpState &T = *Trap;
  T.Mxcsr = U->uc_mcontext.fpregs->mxcsr;
  std::memcpy(T.R.X, U->uc_mcontext.fpregs->_xmm, sizeof(T.R.X));
  T.R.Rax = uint64_t(U->uc_mcontext.gregs[REG_RAX]);
  T.R.Rcx = uint64_t(U->uc_mcontext.gregs[REG_RCX]);
  T.R.Rdx = uint64_t(U->uc_mcontext.gregs[REG_RDX]);
  T.R.Rbx = uint64_t(U->uc_mcontext.gregs[REG_RBX]);
  T.Rflags = uint64_t(U->uc_mcontext.gregs[REG_EFL]);
  siglongjmp(*Jump, 1);
}
} // namespace fpdetail

/// Runs Code natively like NativeCode::run, under St.Mxcsr, then stores MXCSR and RFLAGS
/// back. Returns true when the snippet raised an unmasked SIMD floating-point exception
/// (St then holds the state at the faulting instruction). The host MXCSR is restored.
inline bool runNativeFp(NativeCode &Code, NativeFpState &St) {
  struct sigaction Sa = {}, Old = {};
  Sa.sa_sigaction = &fpdetail::onSigfpe;
  Sa.sa_flags = SA_SIGINFO;
  sigemptyset(&Sa.sa_mask);
  sigaction(SIGFPE, &Sa, &Old);
  sigjmp_buf Env;
  fpdetail::Jump = &Env;
  fpdetail::Trap = &St;
  uint32_t HostCsr;
  asm volatile("stmxcsr %0" : "=m"(HostCsr));
  bool Trapped = false;
  if (sigsetjmp(Env, 1) == 0) {
    void *Fn = Code.entry();
    NativeFpState *P = &St;
    asm volatile(
#define VMX_LOAD(N) "movdqu " #N "*16(%[p]), %%xmm" #N "\n\t"
        VMX_LOAD(0) VMX_LOAD(1) VMX_LOAD(2) VMX_LOAD(3) VMX_LOAD(4) VMX_LOAD(5) VMX_LOAD(6)
        VMX_LOAD(7) VMX_LOAD(8) VMX_LOAD(9) VMX_LOAD(10) VMX_LOAD(11) VMX_LOAD(12)
        VMX_LOAD(13) VMX_LOAD(14) VMX_LOAD(15)
#undef VMX_LOAD
        "mov 256(%[p]), %%rax\n\t"
        "mov 264(%[p]), %%rcx\n\t"
        "mov 272(%[p]), %%rdx\n\t"
        "mov 280(%[p]), %%rbx\n\t"
        "mov 288(%[p]), %%rsi\n\t"
        "ldmxcsr 296(%[p])\n\t"
        "sub $128, %%rsp\n\t" // step over the red zone
        "push %[p]\n\t"
        "call *%[f]\n\t"
        "pushfq\n\t"
        "mov 8(%%rsp), %[p]\n\t"
        "popq 304(%[p])\n\t"
        "pop %[p]\n\t"
        "add $128, %%rsp\n\t"
        "stmxcsr 296(%[p])\n\t"
        "ldmxcsr %[host]\n\t"
#define VMX_STORE(N) "movdqu %%xmm" #N ", " #N "*16(%[p])\n\t"
        VMX_STORE(0) VMX_STORE(1) VMX_STORE(2) VMX_STORE(3) VMX_STORE(4) VMX_STORE(5)
        VMX_STORE(6) VMX_STORE(7) VMX_STORE(8) VMX_STORE(9) VMX_STORE(10) VMX_STORE(11)
        VMX_STORE(12) VMX_STORE(13) VMX_STORE(14) VMX_STORE(15)
#undef VMX_STORE
        "mov %%rax, 256(%[p])\n\t"
        "mov %%rcx, 264(%[p])\n\t"
        "mov %%rdx, 272(%[p])\n\t"
        "mov %%rbx, 280(%[p])\n\t"
        "mov %%rsi, 288(%[p])\n\t"
        : [p] "+r"(P), [f] "+r"(Fn)
        : [host] "m"(HostCsr)
        : "rax", "rcx", "rdx", "rbx", "rsi", "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3",
          "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13",
          "xmm14", "xmm15");
  } else {
    Trapped = true;
  }
  asm volatile("ldmxcsr %0" : : "m"(HostCsr));
  sigaction(SIGFPE, &Old, nullptr);
  return Trapped;
}

} // namespace vmxsim::test
