// Host-CPU oracle for general-purpose instructions (STYLE 2.8, "Unprivileged instruction
// semantics are compared against the host CPU"). Each table row is one instruction form
// (a few bytes, sometimes with a marker instruction after a branch). For thousands of
// deterministic random operand sets the row runs natively on the host, inside a small
// generated function that loads every GPR (RSP included) and RFLAGS from a struct and
// stores them back, and in the emulator (TestMachine, 64-bit mode; rows marked X32 also
// in 32-bit protected mode). Registers, a 1 KiB memory window and the DEFINED flags must
// agree; undefined flags are masked per row because the host may not be Intel.
#pragma once
#include "tests/support/random.h"
#include "tests/support/test_machine.h"

#include <gtest/gtest.h>

#include <cpuid.h>
#include <sys/mman.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace vmxsim::test::oracle {

/// A register value: mostly uniform, sometimes an edge value of some operand size.
inline uint64_t operandValue(SplitMix64 &G) {
  static constexpr uint64_t Edge[] = {
      0, 1, 2, ~0ull, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x7fffffff, 0x80000000,
      0xffffffff, 0x7fffffffffffffff, 0x8000000000000000, 0x100, 0x10000, 0x100000000};
  switch (G.nextBelow(8)) {
  case 0: return G.pick(Edge);
  case 1: return G.nextBelow(70);
  case 2: return G.next() >> G.nextBelow(64);
  default: return G.next();
  }
}

inline constexpr unsigned kWindow = 1024; ///< bytes of the memory window
inline constexpr unsigned kPtrOff = 512;  ///< pointer registers start at this offset
inline constexpr uint64_t kGuestWindow = kDataBase;

struct RegState {
  uint64_t Gpr[16];
  uint64_t Rflags;
};

struct Row;
/// Adjusts random inputs (e.g. no #DE for DIV); pointer registers hold window offsets.
using FixFn = void (*)(const Row &, RegState &, uint8_t *Mem, SplitMix64 &);
/// Defined flags for one input (e.g. OF only for shift count 1).
using MaskFn = uint64_t (*)(const Row &, const RegState &In);
/// On a host that is not an Intel processor: gives the host's result (Host, from In) the
/// value an Intel processor gives where the two are known to differ (vmxsim models
/// Intel's).
using IntelFn = void (*)(const Row &, const RegState &In, RegState &Host);

namespace need {
inline constexpr uint32_t Bmi1 = 1, Bmi2 = 2, Adx = 4, Lzcnt = 8, Popcnt = 16, Movbe = 32,
                          Sse42 = 64;
}
namespace opt {
inline constexpr uint32_t X32 = 1;    ///< also valid (same meaning) in 32-bit mode
inline constexpr uint32_t RandDf = 2; ///< randomise RFLAGS.DF
} // namespace opt

struct Row {
  std::string Name;
  std::vector<uint8_t> Bytes;
  uint64_t Flags = rflags::Arith; ///< defined flags (when Mask is null)
  uint16_t Ptrs = 0;              ///< GPRs (besides RSP) that point into the window
  uint32_t Needs = 0, Opts = 0;
  FixFn Fix = nullptr;
  MaskFn Mask = nullptr;
  IntelFn Intel = nullptr;
  unsigned Size = 0; ///< operand size, for Fix/Mask
  int Imm = -1;      ///< count immediate of shift rows, -1 for CL
  int Kind = 0;      ///< row-family specific (which shift, divisor location...)
};

inline uint32_t hostNeeds() {
  unsigned A, B, C, D;
  uint32_t N = 0;
  if (__get_cpuid(1, &A, &B, &C, &D)) {
    if (C & (1u << 23)) N |= need::Popcnt;
    if (C & (1u << 22)) N |= need::Movbe;
    if (C & (1u << 20)) N |= need::Sse42;
  }
  if (__get_cpuid_count(7, 0, &A, &B, &C, &D)) {
    if (B & (1u << 3)) N |= need::Bmi1;
    if (B & (1u << 8)) N |= need::Bmi2;
    if (B & (1u << 19)) N |= need::Adx;
  }
  if (__get_cpuid(0x80000001, &A, &B, &C, &D) && (C & (1u << 5)))
    N |= need::Lzcnt;
  return N;
}

/// Runs code natively: a generated function loads RegState, runs the row, stores back.
class HostRunner {
public:
  HostRunner() {
    Code = static_cast<uint8_t *>(mmap(nullptr, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    // At the guest address of the window: pointers that the instruction stores to memory
    // or loads from it (PUSH RSP, ENTER, LEAVE, CMPXCHG8B with RBX) are then the same
    // numbers on both sides, and rows with a 32-bit address size can reach it.
    Data = static_cast<uint8_t *>(mmap(reinterpret_cast<void *>(kGuestWindow), 4096,
                                       PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0));
    if (Data != MAP_FAILED && reinterpret_cast<uint64_t>(Data) != kGuestWindow) {
      munmap(Data, 4096);
      Data = static_cast<uint8_t *>(MAP_FAILED);
    }
  }
  ~HostRunner() {
    if (Code != MAP_FAILED)
      munmap(Code, 4096);
    if (Data != MAP_FAILED)
      munmap(Data, 4096);
  }
  bool ok() const { return Code != MAP_FAILED && Data != MAP_FAILED; }
  uint64_t windowBase() const { return reinterpret_cast<uint64_t>(Data); }

  void prepare(const std::vector<uint8_t> &Insn) {
    std::vector<uint8_t> B;
    auto Emit = [&](std::initializer_list<uint8_t> L) { B.insert(B.end(), L); };
    auto Disp32 = [&](uint32_t V) {
      for (int K = 0; K < 4; ++K)
        B.push_back(uint8_t(V >> (8 * K)));
    };
    std::vector<size_t> SlotFixups; // positions of rel32 fields addressing the slot
    auto RipSlot = [&]() {
      SlotFixups.push_back(B.size());
      Disp32(0);
    };
    Emit({0x53, 0x55, 0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57, 0x57});
    Emit({0x48, 0x89, 0x25}); // mov [rip+slot], rsp
    RipSlot();
    Emit({0xff, 0xb7}); // push qword [rdi+128]
    Disp32(128);
    Emit({0x9d}); // popfq
    for (unsigned R = 0; R < 16; ++R) {
      if (R == RSP || R == RDI)
        continue;
      Emit({uint8_t(0x48 | (R >= 8 ? 4 : 0)), 0x8b, uint8_t(0x80 | ((R & 7) << 3) | 7)});
      Disp32(8 * R);
    }
    Emit({0x48, 0x8b, 0xa7}); // mov rsp, [rdi+32]
    Disp32(32);
    Emit({0x48, 0x8b, 0xbf}); // mov rdi, [rdi+56]
    Disp32(56);
    B.insert(B.end(), Insn.begin(), Insn.end());
    Emit({0x48, 0x87, 0x25}); // xchg rsp, [rip+slot]
    RipSlot();
    Emit({0x9c, 0x57});                   // pushfq; push rdi
    Emit({0x48, 0x8b, 0x7c, 0x24, 0x10}); // mov rdi, [rsp+16]
    for (unsigned R = 0; R < 16; ++R) {
      if (R == RSP || R == RDI)
        continue;
      Emit({uint8_t(0x48 | (R >= 8 ? 4 : 0)), 0x89, uint8_t(0x80 | ((R & 7) << 3) | 7)});
      Disp32(8 * R);
    }
    Emit({0x58, 0x48, 0x89, 0x87}); // pop rax; mov [rdi+56], rax
    Disp32(56);
    Emit({0x58, 0x48, 0x89, 0x87}); // pop rax; mov [rdi+128], rax
    Disp32(128);
    Emit({0x48, 0x8b, 0x05}); // mov rax, [rip+slot]
    RipSlot();
    Emit({0x48, 0x89, 0x87}); // mov [rdi+32], rax
    Disp32(32);
    Emit({0x48, 0x83, 0xc4, 0x08});
    Emit({0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, 0x5d, 0x5b, 0xfc, 0xc3});
    while (B.size() % 8)
      B.push_back(0xcc);
    size_t Slot = B.size();
    B.resize(B.size() + 8, 0);
    for (size_t P : SlotFixups) {
      uint32_t Rel = uint32_t(int32_t(Slot) - int32_t(P + 4));
      std::memcpy(&B[P], &Rel, 4);
    }
    std::memcpy(Code, B.data(), B.size());
  }

  /// Pointer registers in S hold window offsets on entry and exit.
  void run(RegState &S, uint16_t Ptrs, uint8_t *Mem) {
    std::memcpy(Data, Mem, kWindow);
    RegState H = S;
    for (unsigned R = 0; R < 16; ++R)
      if (Ptrs & (1u << R))
        H.Gpr[R] += windowBase();
    H.Rflags |= rflags::IF;
    reinterpret_cast<void (*)(RegState *)>(Code)(&H);
    for (unsigned R = 0; R < 16; ++R)
      if (Ptrs & (1u << R))
        H.Gpr[R] -= windowBase();
    H.Rflags &= ~(rflags::IF | rflags::RF);
    S = H;
    std::memcpy(Mem, Data, kWindow);
  }

private:
  uint8_t *Code = nullptr;
  uint8_t *Data = nullptr;
};

/// Runs code in the emulator (64-bit long mode or 32-bit protected mode), ending at HLT.
class EmuRunner {
public:
  explicit EmuRunner(bool Mode32) : Mode32(Mode32) {
    if (Mode32)
      M.setupProtected32();
    else
      M.setupLongMode();
  }
  void prepare(const std::vector<uint8_t> &Insn) {
    std::vector<uint8_t> Code = Insn;
    Code.push_back(0xf4); // hlt
    M.loadCode(Code);
    CodeEnd = kCodeBase + Code.size();
  }
  /// Returns an error text, empty on success.
  std::string run(RegState &S, uint16_t Ptrs, uint8_t *Mem) {
    M.write(kGuestWindow, Mem, kWindow);
    for (unsigned R = 0; R < 16; ++R) {
      uint64_t V = S.Gpr[R] + ((Ptrs & (1u << R)) ? kGuestWindow : 0);
      M.S.Gpr[R] = Mode32 ? uint32_t(V) : V;
    }
    M.S.Rflags = (S.Rflags | rflags::Fixed1) & ~rflags::IF;
    M.S.Rip = kCodeBase;
    M.Cpu_.Activity = ActivityState::Active;
    StopReason Why = M.run(256);
    if (Why != StopReason::Halted || M.S.Rip != CodeEnd) {
      char Buf[160];
      std::snprintf(Buf, sizeof(Buf), "emulator stopped with reason %d at RIP %#" PRIx64
                    " (pending vector %u)", int(Why), M.S.Rip, M.Cpu_.Pending.Vector);
      if (M.Cpu_.shutDown()) { // start over with a fresh machine for the next rows
        Broken = true;
      }
      return Buf;
    }
    for (unsigned R = 0; R < 16; ++R)
      S.Gpr[R] = M.S.Gpr[R] - ((Ptrs & (1u << R)) ? kGuestWindow : 0);
    S.Rflags = M.S.Rflags;
    M.Mem.copyOut(Hpa(kGuestWindow), Mem, kWindow);
    return {};
  }
  bool Broken = false;

private:
  bool Mode32;
  TestMachine M;
  uint64_t CodeEnd = 0;
};

inline std::string hexBytes(const std::vector<uint8_t> &B) {
  std::string S;
  char T[4];
  for (uint8_t X : B) {
    std::snprintf(T, sizeof(T), "%02x ", X);
    S += T;
  }
  return S;
}

inline std::string describe(const RegState &S) {
  std::string Out;
  char T[64];
  for (unsigned R = 0; R < 16; ++R) {
    std::snprintf(T, sizeof(T), "r%u=%#" PRIx64 " ", R, S.Gpr[R]);
    Out += T;
  }
  std::snprintf(T, sizeof(T), "rflags=%#" PRIx64, S.Rflags);
  return Out + T;
}

/// Runs every row (of the mode) Trials times; returns the number of rows compared.
inline unsigned runRows(const std::vector<Row> &Rows, unsigned Trials, bool Mode32) {
  HostRunner Host;
  if (!Host.ok()) {
    ADD_FAILURE() << "cannot map the host code page or the data window at " << kGuestWindow;
    return 0;
  }
  const uint32_t Have = hostNeeds();
  auto Emu = std::make_unique<EmuRunner>(Mode32);
  unsigned Compared = 0;
  for (const Row &R : Rows) {
    if (Mode32 && !(R.Opts & opt::X32))
      continue;
    if ((R.Needs & Have) != R.Needs)
      continue; // the test body reports the skip
    if (Emu->Broken)
      Emu = std::make_unique<EmuRunner>(Mode32);
    Host.prepare(R.Bytes);
    Emu->prepare(R.Bytes);
    ++Compared;
    uint64_t Seed = 0x5eed;
    for (char Ch : R.Name)
      Seed = Seed * 131 + uint8_t(Ch);
    SplitMix64 G(Seed);
    const uint16_t Ptrs = R.Ptrs | (1u << RSP);
    const unsigned NumRegs = Mode32 ? 8 : 16;
    const uint64_t RegMask = Mode32 ? 0xffffffffull : ~0ull;
    for (unsigned T = 0; T < Trials; ++T) {
      RegState In;
      uint8_t Mem[kWindow];
      for (unsigned K = 0; K < kWindow; K += 8) {
        uint64_t V = G.next();
        std::memcpy(Mem + K, &V, 8);
      }
      for (unsigned K = 0; K < 16; ++K) {
        In.Gpr[K] = (Ptrs & (1u << K)) ? kPtrOff : operandValue(G);
        if (Mode32 && K < 8)
          In.Gpr[K] &= RegMask;
      }
      In.Rflags = rflags::Fixed1 | (G.next() & rflags::Arith);
      if (R.Opts & opt::RandDf)
        In.Rflags |= G.next() & rflags::DF;
      if (R.Fix)
        R.Fix(R, In, Mem, G);
      RegState H = In, E = In;
      uint8_t HMem[kWindow], EMem[kWindow];
      std::memcpy(HMem, Mem, kWindow);
      std::memcpy(EMem, Mem, kWindow);
      Host.run(H, Ptrs, HMem);
      if (R.Intel && !__builtin_cpu_is("intel"))
        R.Intel(R, In, H);
      std::string Err = Emu->run(E, Ptrs, EMem);
      const uint64_t FlagMask = R.Mask ? R.Mask(R, In) : R.Flags;
      std::string Diff = Err;
      char Buf[160];
      for (unsigned K = 0; K < NumRegs && Err.empty(); ++K)
        if (((H.Gpr[K] ^ E.Gpr[K]) & RegMask) != 0) {
          std::snprintf(Buf, sizeof(Buf), "r%u host %#" PRIx64 " emu %#" PRIx64 "; ", K,
                        H.Gpr[K] & RegMask, E.Gpr[K] & RegMask);
          Diff += Buf;
        }
      if (Err.empty() && ((H.Rflags ^ E.Rflags) & FlagMask)) {
        std::snprintf(Buf, sizeof(Buf), "flags host %#" PRIx64 " emu %#" PRIx64
                      " (compared %#" PRIx64 "); ", H.Rflags, E.Rflags, FlagMask);
        Diff += Buf;
      }
      if (Err.empty() && std::memcmp(HMem, EMem, kWindow) != 0) {
        for (unsigned K = 0; K < kWindow; ++K)
          if (HMem[K] != EMem[K]) {
            std::snprintf(Buf, sizeof(Buf), "memory +%u host %02x emu %02x; ", K, HMem[K], EMem[K]);
            Diff += Buf;
            break;
          }
      }
      if (!Diff.empty()) {
        ADD_FAILURE() << (Mode32 ? "[32-bit] " : "[64-bit] ") << R.Name << " ("
                      << hexBytes(R.Bytes) << ") trial " << T << ": " << Diff
                      << "\n  input " << describe(In);
        break; // one report per row
      }
    }
  }
  return Compared;
}

// --- encoding helpers ------------------------------------------------------------------

using Bytes = std::vector<uint8_t>;

/// Legacy-encoded instruction of operand size Size: [66][REX.W][0F...] opcode (Op8 for
/// byte size, OpV otherwise) followed by Tail.
inline Bytes sized(unsigned Size, Bytes Map, uint8_t Op8, uint8_t OpV, Bytes Tail,
                   Bytes Prefix = {}) {
  Bytes B = Prefix;
  if (Size == 2)
    B.insert(B.begin(), 0x66);
  if (Size == 8)
    B.push_back(0x48);
  B.insert(B.end(), Map.begin(), Map.end());
  B.push_back(Size == 1 ? Op8 : OpV);
  B.insert(B.end(), Tail.begin(), Tail.end());
  return B;
}
inline uint8_t modrmRR(unsigned Reg, unsigned Rm) { return uint8_t(0xc0 | (Reg << 3) | Rm); }
/// [rbx+10h] memory operand with the given reg field.
inline Bytes memRbx(unsigned Reg) { return {uint8_t(0x40 | (Reg << 3) | 3), 0x10}; }
inline constexpr unsigned kMemOff = kPtrOff + 0x10; ///< window offset of [rbx+10h]
inline Bytes immBytes(unsigned Size, uint64_t V) {
  Bytes B;
  for (unsigned K = 0; K < (Size > 4 ? 4 : Size); ++K)
    B.push_back(uint8_t(V >> (8 * K)));
  return B;
}
inline Bytes cat(Bytes A, const Bytes &B) {
  A.insert(A.end(), B.begin(), B.end());
  return A;
}
/// VEX (C4) encoding for GPR operands 0..7: Map 2 = 0F38, 3 = 0F3A; Pp 0/1/2/3 = none,
/// 66, F3, F2.
inline Bytes vex(unsigned Map, bool W, unsigned Vvvv, unsigned Pp, uint8_t Op, Bytes Tail) {
  Bytes B = {0xc4, uint8_t(0xe0 | Map), uint8_t((W ? 0x80 : 0) | ((~Vvvv & 15) << 3) | Pp), Op};
  B.insert(B.end(), Tail.begin(), Tail.end());
  return B;
}
inline const char *sizeName(unsigned Size) {
  return Size == 1 ? "8" : Size == 2 ? "16" : Size == 4 ? "32" : "64";
}
inline uint64_t sizeMask(unsigned Size) {
  return Size == 8 ? ~0ull : (uint64_t(1) << (8 * Size)) - 1;
}
inline uint64_t getMem(const uint8_t *Mem, unsigned Off, unsigned Size) {
  uint64_t V = 0;
  std::memcpy(&V, Mem + Off, Size);
  return V;
}
inline void putMem(uint8_t *Mem, unsigned Off, unsigned Size, uint64_t V) {
  std::memcpy(Mem + Off, &V, Size);
}

} // namespace vmxsim::test::oracle
