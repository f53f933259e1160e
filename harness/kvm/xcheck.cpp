#include "harness/kvm/xcheck.h"

#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "harness/boot_state.h"
#include "harness/loader.h"
#include "mmu/io_bus.h"
#include "mmu/phys_mem.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <iterator>

namespace vmxsim::kvm {

namespace {

std::string hex(uint64_t V) {
  char B[24];
  std::snprintf(B, sizeof(B), "%#" PRIx64, V);
  return B;
}

const char *const kGprNames[16] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
                                   "r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};

// The MMIO window vmxsim records: from the end of RAM to 4 GiB (KVM exits for any
// guest-physical address outside its one memory slot).
constexpr uint64_t kMmioEnd = 4ull << 30;

} // namespace

bool Event::operator==(const Event &O) const {
  return Kind == O.Kind && Port == O.Port && Size == O.Size && Write == O.Write &&
         Data == O.Data && Addr == O.Addr;
}

std::string Event::str() const {
  switch (Kind) {
  case ExitKind::Io:
    return std::string(Write ? "out" : "in") + " port " + hex(Port) + " size " +
           std::to_string(Size) + " data " + hex(Data);
  case ExitKind::Mmio:
    return std::string("mmio ") + (Write ? "write " : "read ") + hex(Addr) + " size " +
           std::to_string(Size) + " data " + hex(Data);
  default:
    return exitKindName(Kind);
  }
}

uint64_t inputValue(uint64_t Where, unsigned Seq, unsigned SizeBytes) {
  uint64_t Z = Where * 0x9E3779B97F4A7C15ull + Seq + 1;
  Z = (Z ^ (Z >> 30)) * 0xBF58476D1CE4E5B9ull;
  Z = (Z ^ (Z >> 27)) * 0x94D049BB133111EBull;
  Z ^= Z >> 31;
  return SizeBytes >= 8 ? Z : Z & ((uint64_t(1) << (8 * SizeBytes)) - 1);
}

// --- vmxsim side -------------------------------------------------------------------------

struct SimSide::Impl final : PortDevice, MmioDevice, CpuObserver {
  explicit Impl(const SideConfig &Cfg)
      : Cfg(Cfg), Mem(Cfg.RamBytes), C(Mem, Io, CpuModel::defaultModel()) {
    Io.add(0, 0x10000, this);
    if (Cfg.RamBytes < kMmioEnd)
      Mem.addMmio(Hpa(Cfg.RamBytes), kMmioEnd - Cfg.RamBytes, this);
    C.Observer = this;
  }
  uint32_t ioRead(uint16_t Port, unsigned Size) override {
    uint64_t V = inputValue(Port, unsigned(Out->Events.size()), Size);
    record(Event{ExitKind::Io, Port, uint8_t(Size), false, V, 0});
    return uint32_t(V);
  }
  void ioWrite(uint16_t Port, unsigned Size, uint32_t V) override {
    record(Event{ExitKind::Io, Port, uint8_t(Size), true, V, 0});
    if (Cfg.StopPort && Port == *Cfg.StopPort) {
      StopPortHit = true;
      Io.requestStop(0);
    }
  }
  uint64_t mmioRead(uint64_t Off, unsigned Size) override {
    uint64_t A = Cfg.RamBytes + Off;
    uint64_t V = inputValue(A, unsigned(Out->Events.size()), Size);
    record(Event{ExitKind::Mmio, 0, uint8_t(Size), false, V, A});
    return V;
  }
  void mmioWrite(uint64_t Off, unsigned Size, uint64_t V) override {
    record(Event{ExitKind::Mmio, 0, uint8_t(Size), true, V, Cfg.RamBytes + Off});
  }
  void record(const Event &E) {
    Out->Events.push_back(E);
    if (Out->Events.size() >= MaxEvents)
      Io.requestStop(0);
  }
  void onException(const Cpu &Cp, const PendingEvent &E) override {
    if (Out->Excepted)
      return;
    Out->Excepted = true;
    Out->Vector = E.Vector;
    Out->HasErrorCode = E.HasErrorCode;
    Out->ErrorCode = E.ErrorCode;
    Out->FaultRip = Cp.S.Rip;
    if (Cfg.Cpl3ExceptionStops && Cp.S.cpl() == 3) {
      Snapshot = Cp.S;
      if (E.Vector == vec::PF)
        Snapshot.Cr2 = E.FaultAddr;
      ExceptionStop = true;
      Io.requestStop(0);
    }
  }

  SideConfig Cfg;
  PhysMem Mem;
  IoBus Io;
  Cpu C;
  Outcome *Out = nullptr;
  size_t MaxEvents = 0;
  bool StopPortHit = false, ExceptionStop = false;
  CpuState Snapshot;
};

SimSide::SimSide(const SideConfig &Cfg) : P(std::make_unique<Impl>(Cfg)) {
  P->C.TestBugs.FlipBtCarry = Cfg.InjectBtCarryBug;
}
SimSide::~SimSide() = default;
PhysMem &SimSide::mem() { return P->Mem; }
Cpu &SimSide::cpu() { return P->C; }

bool SimSide::load(uint64_t Addr, const void *Bytes, uint64_t Size) {
  return P->Mem.copyIn(Hpa(Addr), Bytes, Size);
}

Outcome SimSide::run(const CpuState &Start, const RunLimits &L) {
  Outcome O;
  Cpu &C = P->C;
  P->Out = &O;
  P->MaxEvents = L.MaxEvents;
  P->StopPortHit = P->ExceptionStop = false;
  P->Io.clearStop();
  C.Activity = ActivityState::Active;
  C.Pending = PendingEvent{};
  C.DeliveryDepth = 0;
  C.ShadowUntil = 0;
  C.NmiBlocked = C.NmiPending = false;
  C.S = Start;
  C.Mmu.flushTlb();
  C.modeChanged();
  StopReason R = C.run(L.MaxInsns);
  O.State = C.S;
  if (P->ExceptionStop) {
    O.End = ExitKind::Shutdown;
    O.State = P->Snapshot;
  } else if (R == StopReason::StopRequested && P->StopPortHit) {
    O.End = ExitKind::Io; // the stop-port write, already recorded, is the final event
  } else if (R == StopReason::StopRequested) {
    O.End = ExitKind::Timeout;
    O.What = "more than " + std::to_string(L.MaxEvents) + " port/MMIO exits";
  } else if (R == StopReason::Halted) {
    O.End = ExitKind::Hlt;
  } else if (R == StopReason::Shutdown) {
    O.End = ExitKind::Shutdown;
  } else if (R == StopReason::Unimplemented) {
    O.End = ExitKind::Error;
    O.What = std::string("vmxsim does not implement ") +
             (C.StopWhat ? C.StopWhat : "an instruction") + " at RIP " +
             hex(C.StopRip);
  } else {
    O.End = ExitKind::Timeout;
    O.What = "vmxsim: no final event within " + std::to_string(L.MaxInsns) +
             " instructions (runs forever?)";
  }
  P->Out = nullptr;
  return O;
}

// --- KVM side --------------------------------------------------------------------------

std::unique_ptr<KvmSide> KvmSide::create(const SideConfig &Cfg, std::string &Why) {
  std::unique_ptr<KvmSide> K(new KvmSide);
  K->Cfg = Cfg;
  K->Vm = KvmVm::create(Cfg.RamBytes, Why);
  if (!K->Vm)
    return nullptr;
  return K;
}

bool KvmSide::load(uint64_t Addr, const void *Bytes, uint64_t Size) {
  if (Addr > Vm->ramBytes() || Size > Vm->ramBytes() - Addr)
    return false;
  std::memcpy(Vm->ram() + Addr, Bytes, Size);
  return true;
}

Outcome KvmSide::run(const CpuState &Start, const RunLimits &L) {
  Outcome O;
  O.State = Start;
  std::string Why;
  if (!Vm->setState(Start, Why)) {
    O.End = ExitKind::Error;
    O.What = Why;
    return O;
  }
  // One wall-clock budget for the whole run, split over the exits.
  unsigned LeftMs = L.TimeoutMs;
  for (;;) {
    struct timespec T0, T1;
    clock_gettime(CLOCK_MONOTONIC, &T0);
    Exit X = Vm->run(LeftMs ? LeftMs : 1);
    clock_gettime(CLOCK_MONOTONIC, &T1);
    uint64_t Ms = uint64_t(T1.tv_sec - T0.tv_sec) * 1000 + uint64_t(T1.tv_nsec - T0.tv_nsec) / 1000000;
    LeftMs = Ms >= LeftMs ? 0 : unsigned(LeftMs - Ms);
    if (X.Kind == ExitKind::Io || X.Kind == ExitKind::Mmio) {
      Event E{X.Kind, X.Port, X.Size, X.Write, X.Data, X.Addr};
      if (!X.Write) {
        E.Data = inputValue(X.Kind == ExitKind::Io ? X.Port : X.Addr, unsigned(O.Events.size()),
                            X.Size);
        Vm->completeRead(E.Data);
      }
      O.Events.push_back(E);
      if (X.Kind == ExitKind::Io && X.Write && Cfg.StopPort && X.Port == *Cfg.StopPort) {
        O.End = ExitKind::Io;
        break;
      }
      if (O.Events.size() >= L.MaxEvents) {
        O.End = ExitKind::Timeout;
        O.What = "more than " + std::to_string(L.MaxEvents) + " port/MMIO exits";
        break;
      }
      if (LeftMs == 0) {
        O.End = ExitKind::Timeout;
        O.What = "KVM: no final event within " + std::to_string(L.TimeoutMs) + " ms";
        break;
      }
      continue;
    }
    O.End = X.Kind;
    O.What = X.What;
    if (X.Kind == ExitKind::Timeout)
      O.What = "KVM: no final event within " + std::to_string(L.TimeoutMs) +
               " ms (runs forever?)";
    break;
  }
  if (!Vm->getState(O.State, Why) && O.End != ExitKind::Error) {
    O.End = ExitKind::Error;
    O.What = Why;
  }
  return O;
}

// --- comparison ------------------------------------------------------------------------

std::string compareOutcomes(const Outcome &K, const Outcome &S, uint64_t FlagMask) {
  if (K.End == ExitKind::Error)
    return "KVM side failed: " + K.What;
  if (S.End == ExitKind::Error)
    return "vmxsim side failed: " + S.What;
  const size_t N = std::min(K.Events.size(), S.Events.size());
  for (size_t I = 0; I < N; ++I)
    if (!(K.Events[I] == S.Events[I]))
      return "exit " + std::to_string(I) + ": KVM " + K.Events[I].str() + ", vmxsim " +
             S.Events[I].str();
  if (K.Events.size() != S.Events.size()) {
    const bool KMore = K.Events.size() > S.Events.size();
    const Event &E = KMore ? K.Events[N] : S.Events[N];
    return "exit " + std::to_string(N) + ": " + (KMore ? "KVM " : "vmxsim ") + E.str() +
           ", " + (KMore ? "vmxsim ends (" : "KVM ends (") +
           exitKindName(KMore ? S.End : K.End) + ")";
  }
  if (K.End != S.End)
    return std::string("final event: KVM ") + exitKindName(K.End) +
           (K.What.empty() ? "" : " (" + K.What + ")") + ", vmxsim " + exitKindName(S.End) +
           (S.What.empty() ? "" : " (" + S.What + ")");
  if (K.End == ExitKind::Timeout)
    return "both sides hit their bound: " + K.What + "; " + S.What;
  for (unsigned R = 0; R < 16; ++R)
    if (K.State.Gpr[R] != S.State.Gpr[R])
      return std::string(kGprNames[R]) + ": KVM " + hex(K.State.Gpr[R]) + ", vmxsim " +
             hex(S.State.Gpr[R]);
  if (K.State.Rip != S.State.Rip)
    return "rip: KVM " + hex(K.State.Rip) + ", vmxsim " + hex(S.State.Rip);
  const uint64_t M = FlagMask & ~rflags::RF;
  if ((K.State.Rflags ^ S.State.Rflags) & M)
    return "rflags: KVM " + hex(K.State.Rflags) + ", vmxsim " + hex(S.State.Rflags) +
           " (compared bits " + hex(M) + ")";
  if (K.State.Cr2 != S.State.Cr2)
    return "cr2: KVM " + hex(K.State.Cr2) + ", vmxsim " + hex(S.State.Cr2);
  return {};
}

namespace {
std::string describeOne(const char *Name, const Outcome &O) {
  std::string Out = std::string(Name) + ": ";
  size_t Shown = 0;
  for (const Event &E : O.Events) {
    if (++Shown > 16) {
      Out += "... (" + std::to_string(O.Events.size()) + " exits); ";
      break;
    }
    Out += E.str() + "; ";
  }
  Out += std::string("end ") + exitKindName(O.End);
  if (!O.What.empty())
    Out += " (" + O.What + ")";
  if (O.Excepted)
    Out += ", exception vector " + std::to_string(O.Vector) +
           (O.HasErrorCode ? " error " + hex(O.ErrorCode) : std::string());
  Out += "\n  ";
  for (unsigned R = 0; R < 16; ++R)
    Out += std::string(kGprNames[R]) + "=" + hex(O.State.Gpr[R]) + (R % 8 == 7 ? "\n  " : " ");
  Out += "rip=" + hex(O.State.Rip) + " rflags=" + hex(O.State.Rflags) + " cr2=" + hex(O.State.Cr2);
  return Out;
}
} // namespace

std::string describeOutcomes(const Outcome &K, const Outcome &S) {
  return describeOne("KVM   ", K) + "\n" + describeOne("vmxsim", S);
}

// --- vmxsim xcheck IMAGE -----------------------------------------------------------------

XcheckResult runXcheck(const XcheckConfig &Cfg) {
  XcheckResult Res;
  // The image first: a missing or unusable image is the user's first problem, whatever
  // the host offers.
  const uint64_t Ram = Cfg.Side.RamBytes;
  ImageFile File;
  if (Error E = ImageFile::open(Cfg.Image, Ram, File)) {
    E.Path = Cfg.Image;
    Res.HostProblem = true;
    Res.Report = E.str();
    return Res;
  }
  const std::span<const uint8_t> Image = File.bytes();
  const uint64_t GdtAddr = kLoaderDataLow, Tables = 0x10000;
  const uint64_t Addr = Cfg.LoadAddr ? *Cfg.LoadAddr : Cfg.Mode == XMode::Real ? 0x7c00 : 0x100000;
  // Real mode needs no loader data (the real-mode IVT area below 0x500 is left alone).
  const uint64_t LowEnd = Cfg.Mode == XMode::Long     ? Tables + kIdentityTablesBytes
                          : Cfg.Mode == XMode::Prot32 ? GdtAddr + kBootGdtBytes
                                                      : 0x500;
  if (Image.empty() || Addr < LowEnd || Addr + Image.size() > Ram ||
      (Cfg.Mode == XMode::Real && Addr + Image.size() > 0xa0000)) {
    Res.HostProblem = true;
    Res.Report = Cfg.Image + ": an image of " + std::to_string(Image.size()) +
                 " bytes does not fit at " + hex(Addr) + " (RAM " + hex(Ram) +
                 ", loader data below " + hex(LowEnd) +
                 (Cfg.Mode == XMode::Real ? ", real mode below 0xa0000)" : ")");
    return Res;
  }
  std::string Why;
  if (!KvmVm::available(Why)) {
    Res.HostProblem = true;
    Res.Report = "xcheck needs /dev/kvm, which is not usable here (" + Why + ")";
    return Res;
  }

  SimSide Sim(Cfg.Side);
  std::unique_ptr<KvmSide> Kvm = KvmSide::create(Cfg.Side, Why);
  if (!Kvm) {
    Res.HostProblem = true;
    Res.Report = "KVM: " + Why;
    return Res;
  }
  // Entry state from vmxsim's own boot code, then the same RAM bytes to KVM.
  Cpu &C = Sim.cpu();
  if (Cfg.Mode != XMode::Real)
    writeBootGdt(Sim.mem(), GdtAddr);
  switch (Cfg.Mode) {
  case XMode::Real:
    enterReal(C, Addr);
    break;
  case XMode::Prot32:
    enterProtected32(C, GdtAddr, Addr);
    break;
  case XMode::Long: {
    buildIdentityTables(Sim.mem(), Tables);
    // Accessed (and, in leaves, dirty) preset: the two sides may set them at different
    // times (KVM here shadows the guest tables), and they are not what is compared.
    for (uint64_t A = Tables; A < Tables + kIdentityTablesBytes; A += 8) {
      uint64_t E = Sim.mem().read(Hpa(A), 8);
      if (E & 1)
        Sim.mem().write(Hpa(A), 8, E | 0x20 | ((E & 0x80) ? 0x40 : 0));
    }
    enterLong(C, GdtAddr, Tables, Addr);
    break;
  }
  }
  Sim.load(Addr, Image.data(), Image.size());
  CpuState Start = C.S;
  // KVM wants a usable TR in protected modes; vmxsim's reset TR is a 32-bit busy TSS
  // descriptor cache of limit 0xffff, which both accept.
  for (uint64_t A = 0; A < Ram; A += kPageSize)
    Sim.mem().copyOut(Hpa(A), Kvm->ram() + A, kPageSize);

  Outcome K = Kvm->run(Start, Cfg.Limits);
  if (K.End == ExitKind::Error && K.Events.empty()) {
    Res.HostProblem = true;
    Res.Report = "KVM refuses this run: " + K.What;
    return Res;
  }
  Outcome S = Sim.run(Start, Cfg.Limits);
  std::string Diff = compareOutcomes(K, S, rflags::Arith | rflags::DF | rflags::IF);
  if (Diff.empty()) {
    std::vector<uint8_t> Page(kPageSize);
    for (uint64_t A = 0; A < Ram && Diff.empty(); A += kPageSize) {
      Sim.mem().copyOut(Hpa(A), Page.data(), kPageSize);
      if (std::memcmp(Page.data(), Kvm->ram() + A, kPageSize) != 0)
        for (unsigned I = 0; I < kPageSize; ++I)
          if (Page[I] != Kvm->ram()[A + I]) {
            char B[128];
            std::snprintf(B, sizeof(B), "memory at %#" PRIx64 ": KVM %02x, vmxsim %02x", A + I,
                          Kvm->ram()[A + I], Page[I]);
            Diff = B;
            break;
          }
    }
  }
  const char *ModeName = Cfg.Mode == XMode::Real ? "real" : Cfg.Mode == XMode::Prot32 ? "prot32" : "long";
  if (Diff.empty()) {
    Res.Identical = true;
    Res.Report = std::string("identical (") + ModeName + " mode, " +
                 std::to_string(K.Events.size()) + (K.Events.size() == 1 ? " exit" : " exits") +
                 ", final " + exitKindName(K.End) + ", " + std::to_string(C.Retired) +
                 " instructions on vmxsim)";
    return Res;
  }
  Res.Report = "differ (" + std::string(ModeName) + " mode): " + Diff + "\n" + describeOutcomes(K, S);
  return Res;
}

} // namespace vmxsim::kvm
