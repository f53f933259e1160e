// Helpers shared by the SSE/FXSAVE tests: running a code snippet natively, the parts of
// the host-oracle harness both SSE oracles use, and observing a fault raised in the
// emulator whether or not exception delivery through the IDT is implemented yet.
#pragma once
#include "tests/support/random.h"
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

namespace vmxsim::test {

/// Register state handed to natively executed snippets (layout used by runNative).
struct NativeRegs {
  Xmm X[16];
  uint64_t Rax, Rcx, Rdx, Rbx, Rsi;
};
static_assert(sizeof(NativeRegs) == 16 * 16 + 5 * 8);

/// The asm text that loads XMM0-15, RAX, RCX, RDX, RBX and RSI from the NativeRegs at
/// %[p], the text that stores them back, and what the two clobber. Used by NativeCode::run
/// and runNativeFp, whose snippets see and leave the same registers.
#define VMX_NATIVE_FOR_XMM(Op)                                                              \
  Op(0) Op(1) Op(2) Op(3) Op(4) Op(5) Op(6) Op(7) Op(8) Op(9) Op(10) Op(11) Op(12) Op(13)  \
      Op(14) Op(15)
#define VMX_NATIVE_XMM_LOAD(N) "movdqu " #N "*16(%[p]), %%xmm" #N "\n\t"
#define VMX_NATIVE_XMM_STORE(N) "movdqu %%xmm" #N ", " #N "*16(%[p])\n\t"
#define VMX_NATIVE_LOAD_REGS                                                                \
  VMX_NATIVE_FOR_XMM(VMX_NATIVE_XMM_LOAD)                                                   \
  "mov 256(%[p]), %%rax\n\t"                                                                \
  "mov 264(%[p]), %%rcx\n\t"                                                                \
  "mov 272(%[p]), %%rdx\n\t"                                                                \
  "mov 280(%[p]), %%rbx\n\t"                                                                \
  "mov 288(%[p]), %%rsi\n\t"
#define VMX_NATIVE_STORE_REGS                                                               \
  VMX_NATIVE_FOR_XMM(VMX_NATIVE_XMM_STORE)                                                  \
  "mov %%rax, 256(%[p])\n\t"                                                                \
  "mov %%rcx, 264(%[p])\n\t"                                                                \
  "mov %%rdx, 272(%[p])\n\t"                                                                \
  "mov %%rbx, 280(%[p])\n\t"                                                                \
  "mov %%rsi, 288(%[p])\n\t"
#define VMX_NATIVE_CLOBBERS                                                                 \
  "rax", "rcx", "rdx", "rbx", "rsi", "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4",  \
      "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",    \
      "xmm15"

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
        VMX_NATIVE_LOAD_REGS
        "sub $128, %%rsp\n\t" // step over the red zone
        "push %[p]\n\t"
        "call *%[f]\n\t"
        "pop %[p]\n\t"
        "add $128, %%rsp\n\t"
        VMX_NATIVE_STORE_REGS
        : [p] "+r"(P), [f] "+r"(Fn)
        :
        : VMX_NATIVE_CLOBBERS);
  }

private:
  uint8_t *Page;
};

/// Concatenates instruction encodings (tests build snippets as A + B + C).
inline std::vector<uint8_t> operator+(std::vector<uint8_t> A, const std::vector<uint8_t> &B) {
  A.insert(A.end(), B.begin(), B.end());
  return A;
}

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

/// A long-mode machine whose faults are delivered through installFaultIdt's IDT, with a
/// stack for the frames.
inline void setupLongModeWithFaultIdt(TestMachine &M) {
  M.setupLongMode();
  installFaultIdt(M);
  M.S.Gpr[RSP] = 0x80000;
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
        VMX_NATIVE_LOAD_REGS
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
        VMX_NATIVE_STORE_REGS
        : [p] "+r"(P), [f] "+r"(Fn)
        : [host] "m"(HostCsr)
        : VMX_NATIVE_CLOBBERS);
  } else {
    Trapped = true;
  }
  asm volatile("ldmxcsr %0" : : "m"(HostCsr));
  sigaction(SIGFPE, &Old, nullptr);
  return Trapped;
}

#undef VMX_NATIVE_FOR_XMM
#undef VMX_NATIVE_XMM_LOAD
#undef VMX_NATIVE_XMM_STORE
#undef VMX_NATIVE_LOAD_REGS
#undef VMX_NATIVE_STORE_REGS
#undef VMX_NATIVE_CLOBBERS

// --- the harness both SSE host oracles share (sse_oracle_test, sse_fp_oracle_test) ------

/// One generated instruction form of an oracle table row: its register form, or its
/// memory form with the operand at [rsi].
template <typename RowT> struct OracleForm {
  const RowT *R;
  bool MemForm;
};

/// The test name of a form: the row name plus "_mem" or "_reg", every character GoogleTest
/// does not allow in a name replaced by '_'. Each form's random generator is seeded from it.
inline std::string oracleFormName(const char *RowName, bool MemForm) {
  std::string N = RowName;
  N += MemForm ? "_mem" : "_reg";
  for (char &Ch : N)
    if (!isalnum(static_cast<unsigned char>(Ch)))
      Ch = '_';
  return N;
}

/// The name generator for INSTANTIATE_TEST_SUITE_P over OracleForm parameters.
struct OracleFormName {
  template <typename RowT>
  std::string operator()(const ::testing::TestParamInfo<OracleForm<RowT>> &Info) const {
    return oracleFormName(Info.param.R->Name, Info.param.MemForm);
  }
};

/// Encodes a legacy SSE instruction: mandatory prefix (0 for none), REX when W, R or B is
/// needed, 0F, the opcode bytes, ModRM with RegNo in reg and either RmNo (register form)
/// or [rsi] (memory form), then the imm8 if HasImm.
inline std::vector<uint8_t> encodeLegacySse(uint8_t Prefix, std::span<const uint8_t> Op,
                                            bool RexW, bool HasImm, bool MemForm,
                                            unsigned RegNo, unsigned RmNo, uint8_t Imm) {
  std::vector<uint8_t> B;
  if (Prefix)
    B.push_back(Prefix);
  uint8_t Rex = 0x40 | (RexW ? 8 : 0) | ((RegNo & 8) ? 4 : 0) | (!MemForm && (RmNo & 8) ? 1 : 0);
  if (Rex != 0x40)
    B.push_back(Rex);
  B.push_back(0x0f);
  B.insert(B.end(), Op.begin(), Op.end());
  if (MemForm)
    B.push_back(uint8_t(((RegNo & 7) << 3) | 6)); // [rsi]
  else
    B.push_back(uint8_t(0xc0 | ((RegNo & 7) << 3) | (RmNo & 7)));
  if (HasImm)
    B.push_back(Imm);
  return B;
}

/// Gives the emulator an oracle input: XMM0-15 and RAX, RCX, RDX, RBX from In, the memory
/// window Mem at kDataBase with RSI pointing Off bytes into it, and the activity state
/// active so that the next run starts at RIP (set by TestMachine::loadCode).
inline void loadOracleInput(TestMachine &M, const NativeRegs &In, unsigned Off,
                            const uint8_t *Mem, unsigned MemBytes) {
  for (unsigned R = 0; R < 16; ++R)
    M.S.XmmReg[R] = In.X[R];
  M.S.Gpr[RAX] = In.Rax;
  M.S.Gpr[RCX] = In.Rcx;
  M.S.Gpr[RDX] = In.Rdx;
  M.S.Gpr[RBX] = In.Rbx;
  M.S.Gpr[RSI] = kDataBase + Off;
  M.write(kDataBase, Mem, MemBytes);
  M.Cpu_.Activity = ActivityState::Active;
}

/// Reports (ADD_FAILURE, prefixed by Where) every XMM register and each of RAX, RCX, RDX
/// and RBX in which the emulator differs from the host; true when all of them match.
inline bool sameOracleRegs(const TestMachine &M, const NativeRegs &Host, const std::string &Where) {
  bool Ok = true;
  for (unsigned R = 0; R < 16; ++R)
    if (M.S.XmmReg[R].Lo != Host.X[R].Lo || M.S.XmmReg[R].Hi != Host.X[R].Hi) {
      ADD_FAILURE() << Where << ": XMM" << R << " emulator " << std::hex << M.S.XmmReg[R].Hi
                    << ":" << M.S.XmmReg[R].Lo << " host " << Host.X[R].Hi << ":"
                    << Host.X[R].Lo;
      Ok = false;
    }
  const uint64_t Gprs[4] = {Host.Rax, Host.Rcx, Host.Rdx, Host.Rbx};
  for (unsigned R = 0; R < 4; ++R)
    if (M.S.Gpr[R] != Gprs[R]) {
      ADD_FAILURE() << Where << ": GPR" << R << " emulator 0x" << std::hex << M.S.Gpr[R]
                    << " host 0x" << Gprs[R];
      Ok = false;
    }
  return Ok;
}

} // namespace vmxsim::test
