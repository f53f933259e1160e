#include "harness/kvm/fuzz.h"
#include "harness/kvm/fuzz_gen.h"

#include "cpu/cpu.h"
#include "cpu/decode.h"
#include "mmu/phys_mem.h"

#include <capstone/capstone.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <optional>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace vmxsim::kvm {

using namespace fuzzgen;

namespace {

uint64_t descriptor(uint32_t Base, uint32_t Limit, uint8_t Access, uint8_t Flags) {
  return uint64_t(Limit & 0xffff) | (uint64_t(Base & 0xffffff) << 16) |
         (uint64_t(Access) << 40) | (uint64_t((Limit >> 16) & 0xf) << 48) |
         (uint64_t(Flags & 0xf) << 52) | (uint64_t(Base >> 24) << 56);
}

/// The fixed part of the guest image, written through Put (to both sides).
template <typename PutFn> void buildFixedImage(PutFn Put) {
  // GDT (SDM Vol. 3A, Segment Descriptors; 64-bit TSS descriptor is 16 bytes).
  const uint64_t Gdt[8] = {0,
                           descriptor(0, 0xfffff, 0x9b, 0xa), // 0x08 code64 DPL0
                           descriptor(0, 0xfffff, 0x93, 0xc), // 0x10 data DPL0
                           descriptor(0, 0xfffff, 0xfb, 0xc), // 0x18 code32 DPL3
                           descriptor(0, 0xfffff, 0xf3, 0xc), // 0x20 data DPL3
                           descriptor(0, 0xfffff, 0xfb, 0xa), // 0x28 code64 DPL3
                           descriptor(uint32_t(kTss), 0x67, 0x8b, 0), // 0x30 busy TSS
                           0};
  Put(kGdt, Gdt, sizeof(Gdt));
  uint8_t Tss[0x68] = {};
  const uint64_t Rsp0 = kStackTop;
  std::memcpy(Tss + 4, &Rsp0, 8);
  Put(kTss, Tss, sizeof(Tss));
  // IDT: 64-bit interrupt gates to a HLT per vector (SDM Vol. 3A, IDT Descriptors).
  for (uint64_t V = 0; V < 32; ++V) {
    const uint64_t H = kHandlers + 16 * V;
    const uint64_t Gate[2] = {(H & 0xffff) | (uint64_t(kSelCode0) << 16) | (0x8eull << 40) |
                                  (((H >> 16) & 0xffff) << 48),
                              H >> 32};
    Put(kIdt + 16 * V, Gate, 16);
    const uint8_t Hlt = 0xf4;
    Put(H, &Hlt, 1);
  }
  // Paging (SDM Vol. 3A, 4-Level Paging): A and D preset, U/S=1 everywhere. Only the
  // pages of the layout are mapped, and only the data and stack pages are writable: a
  // wild address (random index register) then faults or reads bytes that are the same
  // on both sides, and no stream can leave a change outside the compared pages (the
  // two KVM VMs, one per CPL, and the one vmxsim machine would drift apart).
  const uint64_t Dir = 0x67; // P RW US A D
  uint64_t E = kPdpt | Dir;
  Put(kPml4, &E, 8);
  E = kPd | Dir;
  Put(kPdpt, &E, 8);
  E = kPt | Dir;
  Put(kPd, &E, 8);
  for (uint64_t I = 0; I < 512; ++I) {
    const uint64_t Pa = I << 12;
    const bool Writable = Pa == kD0 || Pa == kD1 || Pa == kStackPage;
    const bool ReadOnly = Pa == kGdt || Pa == kIdt || Pa == kTss || Pa == kReadOnly ||
                          Pa == kHandlers || Pa == kCode ||
                          (Pa >= kPml4 && Pa <= kPt);
    E = Writable ? (Pa | 0x67) : ReadOnly ? (Pa | 0x65) : 0;
    Put(kPt + 8 * I, &E, 8);
  }
}

Segment flatSeg(uint16_t Sel, uint32_t Attr) { return Segment{Sel, 0, 0xffffffff, Attr}; }

CpuState startState(const FuzzStream &St) {
  CpuState S;
  std::memcpy(S.Gpr, St.Gpr, sizeof(S.Gpr));
  S.Gpr[4] = kStackTop;
  S.Gpr[kR15] = kD1;
  S.Rip = kCode;
  S.Rflags = St.Rflags;
  const bool User = St.Cpl == 3;
  const uint32_t Dpl = User ? 3u << Segment::DplShift : 0;
  S.seg(SegReg::CS) = flatSeg(User ? kSelCode3 : kSelCode0, 0x9b | Dpl | Segment::L | Segment::G);
  for (SegReg R : {SegReg::DS, SegReg::ES, SegReg::FS, SegReg::GS, SegReg::SS})
    S.seg(R) = flatSeg(User ? kSelData3 : kSelData0, 0x93 | Dpl | Segment::DB | Segment::G);
  S.Tr = Segment{kSelTss, kTss, 0x67, 0x8b};
  S.Ldtr = Segment{0, 0, 0, Segment::Unusable};
  S.Gdtr = TableReg{kGdt, 8 * 8 - 1};
  S.Idtr = TableReg{kIdt, 32 * 16 - 1};
  S.Cr0 = kCr0;
  S.Cr2 = kCr2Start;
  S.Cr3 = kPml4;
  S.Cr4 = kCr4;
  S.Efer = kEfer;
  return S;
}

void dataPages(uint64_t Seed, unsigned Cpl, std::vector<uint8_t> &Out) {
  Out.resize(std::size(kComparedPages) * kPageSize);
  Rng G(Seed);
  for (size_t I = 0; I < Out.size(); I += 8) {
    uint64_t V = G.next();
    // What POPF (CPL 0 only) pops: no TF, because KVM stops at the end marker before
    // the single-step trap that vmxsim delivers right after it.
    if (Cpl == 0 && I >= 3 * kPageSize + (kStackTop - kStackPage))
      V &= ~rflags::TF;
    std::memcpy(&Out[I], &V, 8);
  }
}

// --- running one stream -------------------------------------------------------------------

struct Sides {
  SideConfig Cfg;
  std::unique_ptr<SimSide> Sim;
  std::unique_ptr<KvmSide> Kvm[2]; ///< [0] CPL 0 VM, [1] CPL 3 VM (PVM: one CPL per vCPU)
  std::vector<uint8_t> Page;
};

RunLimits streamLimits() {
  RunLimits L;
  L.MaxInsns = 10000;
  L.TimeoutMs = 2000;
  L.MaxEvents = 64;
  return L;
}

void loadStream(Sides &Sd, KvmSide *K, const FuzzStream &St) {
  std::vector<uint8_t> Code = St.code();
  Code.resize(0x1000, 0xf4); // the rest of the code page: HLT
  Sd.Sim->load(kCode, Code.data(), Code.size());
  if (K)
    K->load(kCode, Code.data(), Code.size());
  std::vector<uint8_t> Data;
  dataPages(St.DataSeed, St.Cpl, Data);
  for (size_t I = 0; I < std::size(kComparedPages); ++I) {
    Sd.Sim->load(kComparedPages[I], &Data[I * kPageSize], kPageSize);
    if (K)
      K->load(kComparedPages[I], &Data[I * kPageSize], kPageSize);
  }
}

/// Compares the final state; also returns the KVM-side byte changes when asked.
std::string compareMemory(Sides &Sd, KvmSide &K) {
  for (uint64_t P : kComparedPages) {
    Sd.Sim->mem().copyOut(Hpa(P), Sd.Page.data(), kPageSize);
    const uint8_t *Kp = K.ram() + P;
    if (std::memcmp(Sd.Page.data(), Kp, kPageSize) == 0)
      continue;
    for (unsigned I = 0; I < kPageSize; ++I)
      if (Sd.Page[I] != Kp[I]) {
        char B[96];
        std::snprintf(B, sizeof(B), "memory at %#" PRIx64 ": KVM %02x, vmxsim %02x", P + I,
                      Kp[I], Sd.Page[I]);
        return B;
      }
  }
  return {};
}

/// If the run ended in an exception handler's HLT, the guest-physical address of the
/// RFLAGS image in the exception frame (SDM Vol. 3A, Exception- or Interrupt-Handler
/// Procedures: 64-bit frame RIP, CS, RFLAGS, RSP, SS, after an error code if any).
std::optional<uint64_t> frameRflagsAddr(const CpuState &Final) {
  if (Final.Rip <= kHandlers || Final.Rip > kHandlers + 32 * 16)
    return std::nullopt;
  const unsigned V = unsigned((Final.Rip - kHandlers - 1) / 16);
  const bool ErrorCode = V == 8 || (V >= 10 && V <= 14) || V == 17 || V == 21;
  const uint64_t A = Final.Gpr[4] + (ErrorCode ? 24 : 16);
  if (A < kStackPage || A + 8 > kStackPage + kPageSize)
    return std::nullopt;
  return A;
}

/// Clears the flags that are undefined at the exception in a frame's RFLAGS image.
void maskFrame(PhysMem &M, const CpuState &Final, uint64_t FlagMask) {
  if (auto A = frameRflagsAddr(Final))
    M.write(Hpa(*A), 8, M.read(Hpa(*A), 8) & ~((rflags::Arith | rflags::AC) & ~FlagMask));
}
void maskFrame(uint8_t *Ram, const CpuState &Final, uint64_t FlagMask) {
  if (auto A = frameRflagsAddr(Final)) {
    uint64_t V;
    std::memcpy(&V, Ram + *A, 8);
    V &= ~((rflags::Arith | rflags::AC) & ~FlagMask);
    std::memcpy(Ram + *A, &V, 8);
  }
}

struct StreamRun {
  bool NotComparable = false; ///< see runStream
  std::string Diff;
  Outcome K, S;
};

uint64_t compareMaskFor(Generator &Gen, const FuzzStream &St, const Outcome &S) {
  // The instructions that ran: up to the faulting one (vmxsim's RIP at the exception) or
  // all of them.
  // An OUT DX to the end port also ends the run early: then the RIP after it bounds.
  size_t Count = St.Insns.size();
  const uint64_t Stop = S.Excepted ? S.FaultRip : S.End == ExitKind::Io ? S.State.Rip : 0;
  if (Stop) {
    uint64_t Off = kCode;
    Count = 0;
    while (Count < St.Insns.size() && Off < Stop)
      Off += St.Insns[Count++].Bytes.size();
  }
  const uint64_t Undef = Gen.undefinedAfter(St, Count);
  return (rflags::Arith & ~Undef) | rflags::DF | rflags::IF | rflags::TF;
}

StreamRun runStream(Sides &Sd, Generator &Gen, const FuzzStream &St) {
  StreamRun R;
  KvmSide &K = *Sd.Kvm[St.Cpl == 3 ? 1 : 0];
  loadStream(Sd, &K, St);
  const CpuState Start = startState(St);
  const RunLimits L = streamLimits();
  R.K = K.run(Start, L);
  R.S = Sd.Sim->run(Start, L);
  // POPF can load TF from memory: the single-step trap after the end marker is delivered
  // by vmxsim before it stops, while KVM stops at the marker's exit first. Not a
  // difference of the instructions under test.
  // Also at CPL 0, the kernel's emulator loses the single-step trap after an instruction
  // it completes in user space (port I/O): vmxsim delivers it (SDM Vol. 3A, Single-Step
  // Exception Condition). So a CPL 0 stream that single-steps is not compared.
  if (R.S.Excepted && R.S.Vector == vec::DB &&
      ((R.K.End == ExitKind::Io && R.S.FaultRip == kCode + St.code().size()) || St.Cpl == 0)) {
    R.NotComparable = true;
    return R;
  }
  const uint64_t Mask = compareMaskFor(Gen, St, R.S);
  R.Diff = compareOutcomes(R.K, R.S, Mask);
  maskFrame(K.ram(), R.K.State, Mask);
  maskFrame(Sd.Sim->mem(), R.S.State, Mask);
  if (R.Diff.empty())
    R.Diff = compareMemory(Sd, K);
  return R;
}

FuzzStream minimise(Sides &Sd, Generator &Gen, FuzzStream St) {
  // Drop one instruction at a time while the stream still diverges (a Jcc and the
  // instruction it skips are dropped together, as a pair, or the Jcc alone).
  for (bool Changed = true; Changed;) {
    Changed = false;
    for (size_t I = 0; I < St.Insns.size() && St.Insns.size() > 1; ++I) {
      FuzzStream T = St;
      T.Insns.erase(T.Insns.begin() + long(I));
      // A Jcc whose skipped instruction is gone would jump into the end marker: fix
      // its displacement to the new next instruction (or drop it when it is last).
      bool Ok = true;
      for (size_t K = 0; K < T.Insns.size(); ++K) {
        std::vector<uint8_t> &B = T.Insns[K].Bytes;
        if (B.size() == 2 && (B[0] & 0xf0) == 0x70) {
          if (K + 1 >= T.Insns.size())
            Ok = false;
          else
            B[1] = uint8_t(T.Insns[K + 1].Bytes.size());
        }
      }
      if (!Ok)
        continue;
      const StreamRun TR = runStream(Sd, Gen, T);
      if (!TR.NotComparable && !TR.Diff.empty() && TR.Diff.rfind("KVM side failed", 0) != 0) {
        St = T;
        Changed = true;
        --I;
      }
    }
  }
  return St;
}

std::string hexBytes(const std::vector<uint8_t> &B) {
  std::string S;
  char T[4];
  for (uint8_t X : B) {
    std::snprintf(T, sizeof(T), "%02x", X);
    S += T;
  }
  return S;
}


/// Capstone against vmxsim's decoder on one generated instruction: validity and length
/// must agree; mnemonics are compared after the spelling aliases of
/// tests/cpu/decoder_test.cpp (whose kKnown table explains each class of disagreement).
std::string capstoneCheck(csh Cs, const std::vector<uint8_t> &B) {
  unsigned Len = 0;
  uint16_t Mn = 0;
  const bool ZOk = decodeLength(B.data(), unsigned(B.size()), CodeMode::Long64, Len, Mn);
  cs_insn *Insn = nullptr;
  const size_t N = cs_disasm(Cs, B.data(), B.size(), 0x1000, 1, &Insn);
  std::string Out;
  if (!ZOk || N == 0)
    Out = std::string("validity: vmxsim ") + (ZOk ? "valid" : "invalid") + ", Capstone " +
          (N ? "valid" : "invalid");
  else if (Insn[0].size != Len)
    Out = "length: vmxsim " + std::to_string(Len) + ", Capstone " + std::to_string(Insn[0].size);
  else {
    std::string Z = lower(mnemonicName(Mn)), C = Insn[0].mnemonic;
    static const char *const Alias[][2] = {
        {"jz", "je"},       {"jnz", "jne"},   {"jnb", "jae"},     {"jnbe", "ja"},
        {"jnle", "jg"},     {"jnl", "jge"},   {"setz", "sete"},   {"setnz", "setne"},
        {"setnbe", "seta"}, {"setnb", "setae"}, {"setnle", "setg"}, {"setnl", "setge"},
        {"cmovz", "cmove"}, {"cmovnz", "cmovne"}, {"cmovnb", "cmovae"}, {"cmovnbe", "cmova"},
        {"cmovnle", "cmovg"}, {"cmovnl", "cmovge"}, {"pushfq", "pushfq"}, {"popfq", "popfq"},
        {"int3", "int3"},   {"setp", "setp"}, {"sal", "shl"}};
    bool Same = Z == C;
    for (const auto &A : Alias)
      if (Z == A[0] && C == A[1])
        Same = true;
    if (!Same && C.rfind(Z, 0) == 0 && C.size() == Z.size() + 1 &&
        std::string("bwdq").find(C.back()) != std::string::npos)
      Same = true; // size suffix (e.g. movsxd / movsx spellings)
    if (!Same)
      Out = "mnemonic: vmxsim " + Z + ", Capstone " + C;
  }
  if (N)
    cs_free(Insn, N);
  return Out.empty() ? Out : Out + " (" + hexBytes(B) + ")";
}

const char *vectorName(uint8_t V) {
  static const char *const Names[] = {"#DE", "#DB", "NMI", "#BP", "#OF", "#BR", "#UD", "#NM",
                                      "#DF", "CSO", "#TS", "#NP", "#SS", "#GP", "#PF", "15",
                                      "#MF", "#AC", "#MC", "#XM", "#VE", "#CP"};
  return V < std::size(Names) ? Names[V] : "other";
}

std::vector<std::pair<uint64_t, uint8_t>> kvmChanges(KvmSide &K, const FuzzStream &St) {
  std::vector<uint8_t> Data;
  dataPages(St.DataSeed, St.Cpl, Data);
  std::vector<std::pair<uint64_t, uint8_t>> Out;
  for (size_t I = 0; I < std::size(kComparedPages); ++I)
    for (unsigned B = 0; B < kPageSize; ++B)
      if (K.ram()[kComparedPages[I] + B] != Data[I * kPageSize + B])
        Out.push_back({kComparedPages[I] + B, K.ram()[kComparedPages[I] + B]});
  return Out;
}

std::unique_ptr<Sides> makeSides(std::string &Why, bool WithKvm, bool InjectBtCarryBug) {
  auto Sd = std::make_unique<Sides>();
  Sd->Cfg.RamBytes = kRamBytes;
  Sd->Cfg.StopPort = kEndPort;
  Sd->Cfg.Cpl3ExceptionStops = false;
  Sd->Cfg.InjectBtCarryBug = InjectBtCarryBug;
  Sd->Sim = std::make_unique<SimSide>(Sd->Cfg);
  Sd->Page.resize(kPageSize);
  auto PutSim = [&](uint64_t A, const void *P, uint64_t N) { Sd->Sim->load(A, P, N); };
  buildFixedImage(PutSim);
  if (!WithKvm)
    return Sd;
  for (auto &K : Sd->Kvm) {
    K = KvmSide::create(Sd->Cfg, Why);
    if (!K)
      return nullptr;
    auto Put = [&](uint64_t A, const void *P, uint64_t N) { K->load(A, P, N); };
    buildFixedImage(Put);
  }
  return Sd;
}

} // namespace

std::vector<uint8_t> FuzzStream::code() const {
  std::vector<uint8_t> C;
  for (const FuzzInsn &I : Insns)
    C.insert(C.end(), I.Bytes.begin(), I.Bytes.end());
  // The end marker: OUT kEndPort, AL at CPL 0; UD2 at CPL 3 (port I/O there is not
  // comparable, see the form table), which ends in the #UD handler's HLT.
  if (Cpl == 3)
    C.insert(C.end(), {0x0f, 0x0b});
  else
    C.insert(C.end(), {0xe6, uint8_t(kEndPort)});
  return C;
}

FuzzResult runFuzz(const FuzzOptions &O) {
  FuzzResult Res;
  const auto T0 = std::chrono::steady_clock::now();
  if (!KvmVm::available(Res.Why)) {
    Res.HostProblem = true;
    Res.Why = "the differential fuzzer needs /dev/kvm (" + Res.Why + ")";
    return Res;
  }
  std::unique_ptr<Sides> Sd = makeSides(Res.Why, true, O.InjectBtCarryBug);
  if (!Sd) {
    Res.HostProblem = true;
    return Res;
  }
  csh Cs = 0;
  const bool HaveCs = O.Capstone && cs_open(CS_ARCH_X86, CS_MODE_64, &Cs) == CS_ERR_OK;
  Generator Gen;
  Rng G(O.Seed);
  for (uint64_t N = 0; N < O.Streams; ++N) {
    unsigned Cpl = 3;
    if (O.Cpl0 && (!O.Cpl3 || N % 4 == 3))
      Cpl = 0;
    FuzzStream St = Gen.make(G, Cpl, std::max(1u, O.MaxInsns));
    StreamRun R = runStream(*Sd, Gen, St);
    if (R.K.End == ExitKind::Error && R.K.What.find("internal error") != std::string::npos) {
      // The host kernel's emulator (CPL 0) lacks an instruction: nothing to compare.
      ++Res.KvmCannot;
      for (const FuzzInsn &I : St.Insns)
        ++Res.Coverage["kvm-emulator-lacks"][formName(I.Form)];
      continue;
    }
    if (R.NotComparable) {
      ++Res.KvmCannot;
      continue;
    }
    ++Res.Compared;
    ++(Cpl ? Res.Cpl3Streams : Res.Cpl0Streams);
    auto &Cov = Res.Coverage;
    for (const FuzzInsn &I : St.Insns)
      ++Cov["form"][formName(I.Form) + (Cpl ? " @cpl3" : " @cpl0")];
    ++Cov["exit"][std::string(exitKindName(R.K.End)) + (Cpl ? " @cpl3" : " @cpl0")];
    for (const Event &E : R.K.Events)
      if (!(E.Kind == ExitKind::Io && E.Write && E.Port == kEndPort))
        ++Cov["event"][E.Kind == ExitKind::Io ? (E.Write ? "out" : "in") : (E.Write ? "mmio-write" : "mmio-read")];
    if (R.S.Excepted && R.S.FaultRip != kCode + St.code().size() - 2)
      ++Cov["exception"][std::string(vectorName(R.S.Vector)) + (Cpl ? " @cpl3" : " @cpl0")];
    if (HaveCs)
      for (const FuzzInsn &I : St.Insns) {
        ++Res.CapstoneChecked;
        std::string D = capstoneCheck(Cs, I.Bytes);
        if (D.empty())
          continue;
        ++Res.CapstoneDisagree;
        // Known class (tests/cpu/decoder_test.cpp, kPrefixOrder): Capstone 4 drops a 66
        // that follows F2/F3 (the Zydis encoder emits F3 66 0F B8/BC/BD).
        bool Known = false;
        for (size_t K = 0; K + 1 < I.Bytes.size() && (I.Bytes[K] == 0xf2 || I.Bytes[K] == 0xf3 ||
                                                     I.Bytes[K] == 0x66); ++K)
          if ((I.Bytes[K] == 0xf2 || I.Bytes[K] == 0xf3) && I.Bytes[K + 1] == 0x66)
            Known = true;
        if (Known) {
          ++Res.CapstoneKnown;
          continue;
        }
        if (Res.CapstoneExamples.size() < 10)
          Res.CapstoneExamples.push_back(formName(I.Form) + ": " + D);
      }
    if (R.Diff.empty())
      continue;
    // A divergence must reproduce: the same stream again, on both sides.
    if (const StreamRun Again = runStream(*Sd, Gen, St); Again.Diff != R.Diff) {
      ++Res.Unreproducible;
      if (Res.UnreproducibleExamples.size() < 3)
        Res.UnreproducibleExamples.push_back(R.Diff + " (then: " +
                                             (Again.Diff.empty() ? "none" : Again.Diff) + ")");
      continue;
    }
    ++Res.Divergent;
    if (Res.Divergences.size() >= O.MaxReported)
      continue;
    FuzzDivergence D;
    D.Stream = O.Minimise ? minimise(*Sd, Gen, St) : St;
    StreamRun M = runStream(*Sd, Gen, D.Stream);
    D.Diff = M.Diff;
    D.Detail = describeOutcomes(M.K, M.S);
    D.Kvm = M.K;
    D.KvmMemChanges = kvmChanges(*Sd->Kvm[D.Stream.Cpl == 3 ? 1 : 0], D.Stream);
    Res.Divergences.push_back(std::move(D));
  }
  if (HaveCs)
    cs_close(&Cs);
  Res.Seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - T0).count();
  return Res;
}

std::string formatCoverage(const FuzzResult &R) {
  std::string Out;
  for (const auto &[Kind, Items] : R.Coverage)
    for (const auto &[Name, Count] : Items)
      Out += Kind + "\t" + Name + "\t" + std::to_string(Count) + "\n";
  return Out;
}

// --- regression cases ---------------------------------------------------------------------
//
// Text format, one item per line ("#" comments):
//   cpl 3
//   insn <hex bytes>          (one line per instruction, in order)
//   gpr <n> <hex>             (16 lines; RSP and R15 are overridden by the layout)
//   rflags <hex>
//   dataseed <hex>
//   expect-end <io|hlt|shutdown>
//   expect-event <io|mmio> <in|out|read|write> <port-or-addr hex> <size> <data hex>
//   expect-gpr <n> <hex>  expect-rip <hex>  expect-rflags <hex> <mask hex>  expect-cr2 <hex>
//   expect-mem <addr hex> <byte hex>   (every compared byte KVM changed)

std::string formatRegression(const FuzzDivergence &D) {
  std::ostringstream S;
  S << "# vmxsim xcheck fuzz regression. Divergence found: " << D.Diff << "\n";
  S << "# Expectations are what KVM did (CPL " << D.Stream.Cpl
    << (D.Stream.Cpl == 3 ? ": native AMD hardware" : ": the host kernel's emulator") << ").\n";
  S << "cpl " << D.Stream.Cpl << "\n";
  for (const FuzzInsn &I : D.Stream.Insns)
    S << "insn " << hexBytes(I.Bytes) << "\n";
  S << std::hex;
  for (unsigned R = 0; R < 16; ++R)
    S << "gpr " << std::dec << R << std::hex << " 0x" << D.Stream.Gpr[R] << "\n";
  S << "rflags 0x" << D.Stream.Rflags << "\n";
  S << "dataseed 0x" << D.Stream.DataSeed << "\n";
  S << "expect-end " << exitKindName(D.Kvm.End) << "\n";
  for (const Event &E : D.Kvm.Events)
    S << "expect-event " << (E.Kind == ExitKind::Io ? "io " : "mmio ")
      << (E.Kind == ExitKind::Io ? (E.Write ? "out" : "in") : (E.Write ? "write" : "read"))
      << " 0x" << (E.Kind == ExitKind::Io ? uint64_t(E.Port) : E.Addr) << " " << std::dec
      << unsigned(E.Size) << std::hex << " 0x" << E.Data << "\n";
  for (unsigned R = 0; R < 16; ++R)
    S << "expect-gpr " << std::dec << R << std::hex << " 0x" << D.Kvm.State.Gpr[R] << "\n";
  S << "expect-rip 0x" << D.Kvm.State.Rip << "\n";
  Generator Gen;
  Outcome Dummy;
  // Mask: the flags defined after the whole stream (conservative for a faulting one).
  const uint64_t Mask = (rflags::Arith & ~Gen.undefinedAfter(D.Stream, D.Stream.Insns.size())) |
                        rflags::DF | rflags::IF | rflags::TF;
  S << "expect-rflags 0x" << D.Kvm.State.Rflags << " 0x" << Mask << "\n";
  S << "expect-cr2 0x" << D.Kvm.State.Cr2 << "\n";
  for (const auto &[A, B] : D.KvmMemChanges)
    S << "expect-mem 0x" << A << " 0x" << unsigned(B) << "\n";
  return S.str();
}

std::string replayRegression(const std::string &Text, bool InjectBtCarryBug) {
  FuzzStream St;
  Outcome Want;
  uint64_t Mask = rflags::Arith;
  std::vector<std::pair<uint64_t, uint8_t>> WantMem;
  std::istringstream In(Text);
  std::string Line;
  unsigned LineNo = 0;
  while (std::getline(In, Line)) {
    ++LineNo;
    if (Line.empty() || Line[0] == '#')
      continue;
    std::istringstream L(Line);
    std::string Key;
    L >> Key;
    auto Num = [&](uint64_t &V) {
      std::string T;
      L >> T;
      char *End = nullptr;
      V = std::strtoull(T.c_str(), &End, 0);
      return !T.empty() && End && *End == 0;
    };
    uint64_t A = 0, B = 0, C = 0;
    bool Ok = true;
    if (Key == "cpl") {
      Ok = Num(A);
      St.Cpl = unsigned(A);
    } else if (Key == "insn") {
      std::string H;
      L >> H;
      FuzzInsn I;
      I.Form = 0xffff;
      for (size_t K = 0; K + 1 < H.size(); K += 2)
        I.Bytes.push_back(uint8_t(std::strtoul(H.substr(K, 2).c_str(), nullptr, 16)));
      Ok = !I.Bytes.empty();
      St.Insns.push_back(I);
    } else if (Key == "gpr") {
      Ok = Num(A) && Num(B) && A < 16;
      if (Ok)
        St.Gpr[A] = B;
    } else if (Key == "rflags") {
      Ok = Num(St.Rflags);
    } else if (Key == "dataseed") {
      Ok = Num(St.DataSeed);
    } else if (Key == "expect-end") {
      std::string E;
      L >> E;
      Want.End = E == "io" ? ExitKind::Io : E == "hlt" ? ExitKind::Hlt
                 : E == "shutdown" ? ExitKind::Shutdown : ExitKind::Error;
      Ok = Want.End != ExitKind::Error;
    } else if (Key == "expect-event") {
      std::string K, Dir;
      L >> K >> Dir;
      Event E;
      E.Kind = K == "io" ? ExitKind::Io : ExitKind::Mmio;
      E.Write = Dir == "out" || Dir == "write";
      Ok = Num(A) && Num(B) && Num(C);
      if (E.Kind == ExitKind::Io)
        E.Port = uint16_t(A);
      else
        E.Addr = A;
      E.Size = uint8_t(B);
      E.Data = C;
      Want.Events.push_back(E);
    } else if (Key == "expect-gpr") {
      Ok = Num(A) && Num(B) && A < 16;
      if (Ok)
        Want.State.Gpr[A] = B;
    } else if (Key == "expect-rip") {
      Ok = Num(Want.State.Rip);
    } else if (Key == "expect-rflags") {
      Ok = Num(Want.State.Rflags) && Num(Mask);
    } else if (Key == "expect-cr2") {
      Ok = Num(Want.State.Cr2);
    } else if (Key == "expect-mem") {
      Ok = Num(A) && Num(B);
      WantMem.push_back({A, uint8_t(B)});
    } else {
      Ok = false;
    }
    if (!Ok)
      return "line " + std::to_string(LineNo) + ": cannot parse '" + Line + "'";
  }
  if (St.Insns.empty())
    return "no instructions";
  std::string Why;
  std::unique_ptr<Sides> Sd = makeSides(Why, false, InjectBtCarryBug);
  loadStream(*Sd, nullptr, St);
  Outcome S = Sd->Sim->run(startState(St), streamLimits());
  std::string Diff = compareOutcomes(Want, S, Mask);
  if (!Diff.empty())
    return Diff + "\n" + describeOutcomes(Want, S);
  maskFrame(Sd->Sim->mem(), S.State, Mask);
  // Memory: every byte KVM changed has its value, every other byte is unchanged.
  std::vector<uint8_t> Data;
  dataPages(St.DataSeed, St.Cpl, Data);
  for (const auto &[Addr, Byte] : WantMem)
    for (size_t I = 0; I < std::size(kComparedPages); ++I)
      if (Addr >= kComparedPages[I] && Addr < kComparedPages[I] + kPageSize)
        Data[I * kPageSize + (Addr - kComparedPages[I])] = Byte;
  for (size_t I = 0; I < std::size(kComparedPages); ++I) {
    Sd->Sim->mem().copyOut(Hpa(kComparedPages[I]), Sd->Page.data(), kPageSize);
    for (unsigned B = 0; B < kPageSize; ++B)
      if (Sd->Page[B] != Data[I * kPageSize + B]) {
        char Buf[96];
        std::snprintf(Buf, sizeof(Buf), "memory at %#" PRIx64 ": KVM %02x, vmxsim %02x",
                      kComparedPages[I] + B, Data[I * kPageSize + B], Sd->Page[B]);
        return Buf;
      }
  }
  return {};
}

} // namespace vmxsim::kvm
