// Machine::runUntil and the machine's inspection functions (harness/run_control.h,
// harness/machine.h). How a condition stops the run exactly:
//
// - Events (VM exit, VM entry, VM-entry failure, a store to or a read of watched
//   memory) reach the
//   harness through the processor's observer (cpu/observer.h). While such a condition
//   is set, RunUntil sits in front of each CPU's VmxTransitionObserver (forwarding every
//   event to the ground truth first, so its records are unchanged) and, when an event
//   matches, raises IoBus::requestBreak and ends the CPU's block. The event's
//   instruction (or event-window delivery) completes; the run loop returns at its head,
//   the next instruction boundary (Cpu::run).
// - Execute addresses and TSC values: RunUntil becomes the CPU's CpuObserver
//   (forwarding to the instruction tracer, if any), which makes the CPU run one
//   instruction at a time, and holds the instruction at the address, or the first one
//   that would start at or past the TSC value (CpuObserver::holdBefore), before anything
//   of it happens.
// - Stores to and reads of watched memory and serial text (a tap on COM1's output sink,
//   OutputSink::setTap): these can happen in the middle of a REP string instruction,
//   which a block end would split into two retired instructions where the unstopped run
//   has one. So they do not end the block: they raise the break, which the run loop sees
//   at its head, and the CPU's holdBefore holds the next instruction; the instruction
//   completes whole.
// - Instruction counts: limits of the scheduler (Scheduler::setLimits), which cut the
//   CPU's run at exactly that count, as the total budget does.
// With no condition set none of these is installed: the run costs what it did before.
#include "harness/machine.h"

#include "cpu/debug.h"
#include "cpu/msrs.h"
#include "cpu/translation.h"
#include "cpu/vmx/ept_translation.h"
#include "cpu/vmx/vmcs_controls.h"
#include "cpu/vmx/vmx_state.h"
#include "mmu/ept.h"
#include "mmu/paging.h"
#include "trace/async_output.h"
#include "trace/vmx_names.h"
#include "trace/writer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

namespace vmxsim {

// --- StopWhen ---

StopWhen StopWhen::instructions(uint64_t N) {
  StopWhen W;
  W.K = Kind::Instructions;
  W.Value = N;
  return W;
}
StopWhen StopWhen::vmExit() { return StopWhen{}; }
StopWhen StopWhen::vmEntry() {
  StopWhen W;
  W.K = Kind::VmEntry;
  return W;
}
StopWhen StopWhen::vmEntryFailure() {
  StopWhen W;
  W.K = Kind::VmEntryFailure;
  return W;
}
StopWhen StopWhen::execute(Gla La) {
  StopWhen W;
  W.K = Kind::Execute;
  W.Value = La.value();
  return W;
}
StopWhen StopWhen::execute(Hpa Pa) {
  StopWhen W = execute(Gla(Pa.value()));
  W.Physical = true;
  return W;
}
namespace {
/// A write, read or access condition on [Value, Value + SizeBytes).
StopWhen rangeCondition(StopWhen::Kind K, uint64_t Value, uint64_t SizeBytes, bool Physical) {
  StopWhen W;
  W.K = K;
  W.Value = Value;
  W.SizeBytes = SizeBytes;
  W.Physical = Physical;
  return W;
}
} // namespace
StopWhen StopWhen::write(Gla La, uint64_t SizeBytes) {
  return rangeCondition(Kind::Write, La.value(), SizeBytes, false);
}
StopWhen StopWhen::write(Hpa Pa, uint64_t SizeBytes) {
  return rangeCondition(Kind::Write, Pa.value(), SizeBytes, true);
}
StopWhen StopWhen::read(Gla La, uint64_t SizeBytes) {
  return rangeCondition(Kind::Read, La.value(), SizeBytes, false);
}
StopWhen StopWhen::read(Hpa Pa, uint64_t SizeBytes) {
  return rangeCondition(Kind::Read, Pa.value(), SizeBytes, true);
}
StopWhen StopWhen::access(Gla La, uint64_t SizeBytes) {
  return rangeCondition(Kind::Access, La.value(), SizeBytes, false);
}
StopWhen StopWhen::access(Hpa Pa, uint64_t SizeBytes) {
  return rangeCondition(Kind::Access, Pa.value(), SizeBytes, true);
}
StopWhen StopWhen::tsc(uint64_t Value) {
  StopWhen W;
  W.K = Kind::Tsc;
  W.Value = Value;
  return W;
}
StopWhen StopWhen::serial(std::string Text) {
  StopWhen W;
  W.K = Kind::Serial;
  W.Text = std::move(Text);
  return W;
}
StopWhen StopWhen::onCpu(unsigned Id) const {
  StopWhen W = *this;
  W.Cpu = Id;
  return W;
}
StopWhen StopWhen::reason(ExitReason R) const {
  StopWhen W = *this;
  W.Reasons.push_back(R);
  return W;
}
StopWhen StopWhen::nth(uint64_t N) const {
  StopWhen W = *this;
  W.Count = N;
  return W;
}

namespace {

std::string ordinal(uint64_t N) {
  const char *Suffix = "th";
  if (N % 100 < 11 || N % 100 > 13) {
    if (N % 10 == 1)
      Suffix = "st";
    else if (N % 10 == 2)
      Suffix = "nd";
    else if (N % 10 == 3)
      Suffix = "rd";
  }
  return fmt::format("{}{}", N, Suffix);
}

std::string reasonName(uint32_t Basic) {
  const char *N = trace::exitReasonName(Basic);
  return N ? N : fmt::format("reason {}", Basic);
}

} // namespace

std::string StopWhen::describe() const {
  const std::string Which = Count == 1 ? "the" : "the " + ordinal(Count);
  const std::string On = Cpu ? fmt::format(" on CPU {}", *Cpu) : "";
  switch (K) {
  case Kind::Instructions:
    return fmt::format("{} more instructions{}", Value,
                       Cpu ? fmt::format(" of CPU {}", *Cpu) : "");
  case Kind::VmExit: {
    std::string Reasons;
    for (ExitReason R : this->Reasons)
      Reasons += (Reasons.empty() ? "" : " or ") + reasonName(uint32_t(R));
    return fmt::format("{} VM exit{}{}", Which, Reasons.empty() ? "" : " (" + Reasons + ")",
                       On);
  }
  case Kind::VmEntry:
    return fmt::format("{} VM entry{}", Which, On);
  case Kind::VmEntryFailure:
    return fmt::format("{} VM-entry failure{}", Which, On);
  case Kind::Execute:
    return fmt::format("{} execution of {} {:#x}{}", Which,
                       Physical ? "physical address" : "linear address", Value, On);
  case Kind::Write:
  case Kind::Read:
  case Kind::Access:
    return fmt::format("{} {} {} {:#x} ({} bytes){}", Which,
                       K == Kind::Write  ? "write to"
                       : K == Kind::Read ? "read of"
                                         : "access to",
                       Physical ? "physical address" : "linear address", Value, SizeBytes, On);
  case Kind::Tsc:
    return fmt::format("TSC {}{}", Value, fmt::format(" on CPU {}", Cpu.value_or(0)));
  case Kind::Serial: {
    std::string Shown; // C-style escapes, so that the phrase stays one line
    for (char Ch : Text) {
      if (Ch == '\n')
        Shown += "\\n";
      else if (Ch == '\r')
        Shown += "\\r";
      else if (Ch == '"' || Ch == '\\')
        Shown += std::string("\\") + Ch;
      else if (uint8_t(Ch) < 0x20 || uint8_t(Ch) >= 0x7f)
        Shown += fmt::format("\\x{:02x}", uint8_t(Ch));
      else
        Shown += Ch;
    }
    return fmt::format("serial output \"{}\"", Shown);
  }
  }
  return "a condition";
}

// --- Reading through the guest's paging without changing anything ---

namespace {

/// EPT for the guest paging-structure accesses of a probe walk: no flags set.
class ProbeEpt final : public PagingStructureTranslator {
public:
  ProbeEpt(PhysMem &Mem, const EptWalkerConfig &Cfg, uint64_t Eptp)
      : Mem(Mem), Cfg(Cfg), Eptp(Eptp) {}
  EptWalk translate(Gpa Entry, const EptAccess &A) override {
    return eptWalk(Mem, Cfg, Eptp, Entry, A);
  }

private:
  PhysMem &Mem;
  EptWalkerConfig Cfg;
  uint64_t Eptp;
};

Error unmapped(unsigned Cpu, uint64_t La) {
  return Error(ErrorCode::UnmappedAddress,
               fmt::format("linear address {:#x} is not mapped on CPU {}", La, Cpu));
}

/// The machine-physical address of La on C, as a read would find it (SDM Vol. 3A,
/// "Paging"; Vol. 3C, "EPT Translation Mechanism"), with no rights checked and no
/// accessed or dirty flag set.
ErrorOr<Hpa> probeTranslate(Cpu &C, Gla La) {
  PagingContext Ctx = pagingContext(C);
  Ctx.Probe = true;
  Ctx.Smap = Ctx.Smep = false; // a look is no supervisor access to a user page
  const bool Ept = C.NonRoot && eptActive(C);
  EptWalkerConfig EptCfg = Ept ? eptWalkerConfig(C) : EptWalkerConfig{};
  EptCfg.Probe = true;
  EptCfg.AdUpdatesBlocked = false;
  const uint64_t Eptp = Ept ? C.Vmx->Vmcs.get(VmcsField::EptPointer) : 0;
  ProbeEpt Structures(C.Mem, EptCfg, Eptp);
  const PagingWalk W =
      walkGuestPaging(C.Mem, Ctx, La, Access::Read, false, Ept ? &Structures : nullptr);
  if (W.Outcome != PagingOutcome::Translated)
    return unmapped(C.Id, La.value());
  const uint64_t G = W.Address.value() & a20Mask(C);
  if (!Ept)
    return Hpa(G);
  const EptWalk T =
      eptWalk(C.Mem, EptCfg, Eptp, Gpa(G), EptAccess{Access::Read, false, true, La.value()});
  if (T.Outcome != EptOutcome::Translated)
    return unmapped(C.Id, La.value());
  return T.Address;
}

/// The linear address of the instruction C is about to execute (CS base + RIP; SDM Vol.
/// 3A, "Logical and Linear Addresses": the base is 0 in 64-bit mode).
uint64_t fetchLinear(const Cpu &C) {
  if (C.S.in64BitMode())
    return C.S.Rip;
  return (C.S.cs().Base + C.S.Rip) & 0xffffffffu;
}

} // namespace

// --- RunUntil: the conditions of one runUntil call, installed for its duration ---

class RunUntil final : public VmxTransitionObserver {
public:
  RunUntil(Machine &M, const std::vector<StopWhen> &Conds)
      : M(M), Conds(Conds), Counts(Conds.size(), 0), Tails(Conds.size()) {}
  ~RunUntil() override { uninstall(); }
  RunUntil(const RunUntil &) = delete;
  RunUntil &operator=(const RunUntil &) = delete;

  Error prepare();
  /// A condition that holds before anything runs (a TSC already reached), or -1.
  int alreadyMet() const;
  void install();
  /// Which condition ended the run (the first that fired, else the first limit met).
  unsigned metIndex() const;
  /// The CPU whose event fired it (-1: none fired, a limit ended the run).
  int metCpu() const { return MetCpu; }

  std::vector<uint64_t> InsnAt;
  uint64_t TotalBudget = ~uint64_t(0);

  // VmxTransitionObserver: the inner observer (the ground truth) first.
  void vmExit(const VmExitEvent &E) override;
  void vmEntry(const VmEntryEvent &E) override;
  void vmEntryFailure(const VmEntryFailureEvent &E) override;
  void rootTsc(unsigned Cpu, uint64_t Tsc, uint64_t Rip, uint64_t Value) override {
    if (VmxTransitionObserver *I = Inner[Cpu])
      I->rootTsc(Cpu, Tsc, Rip, Value);
  }
  void watchedStore(const WatchedStoreEvent &E) override;
  void watchedLoad(const WatchedLoadEvent &E) override;

private:
  /// A CPU's instruction observer while an execute condition is set.
  class Hold final : public CpuObserver {
  public:
    Hold(RunUntil &Owner, CpuObserver *Inner, uint64_t StartRetired, uint64_t StartRip)
        : Owner(Owner), Inner(Inner), StartRetired(StartRetired), StartRip(StartRip) {}
    void beforeInsn(const Cpu &C, const DecodedInsn &I) override {
      if (Inner)
        Inner->beforeInsn(C, I);
    }
    void afterInsn(const Cpu &C, const DecodedInsn &I) override {
      if (Inner)
        Inner->afterInsn(C, I);
    }
    void onException(const Cpu &C, const PendingEvent &E) override {
      if (Inner)
        Inner->onException(C, E);
    }
    bool holdBefore(const Cpu &C, const DecodedInsn &I) override;

    RunUntil &Owner;
    CpuObserver *Inner;
    uint64_t StartRetired, StartRip;
    bool PastStart = false;
  };
  struct WatchedRange {
    unsigned Cond;
    uint64_t Base, Size;
    bool Writes, Reads; ///< which of the condition's accesses count
  };
  /// The watched-range event of Addr/SizeBytes by CPU Cpu, a store or a read.
  void watchedEvent(uint64_t Addr, uint64_t SizeBytes, unsigned Cpu, bool Store);

  bool cpuMatches(const StopWhen &W, unsigned Cpu) const { return !W.Cpu || *W.Cpu == Cpu; }
  /// Condition Cond was met by CPU Cpu: the run returns at the next instruction
  /// boundary. AtNextHold: by the CPU's holdBefore (or the run loop's head), without
  /// ending the block (see the file comment).
  void fire(unsigned Cond, unsigned Cpu, bool AtNextHold = false);
  /// Whether CPU Id needs the instruction observer (Hold) for these conditions.
  bool needsHold(unsigned Id) const;
  void uninstall();
  static void serialByte(void *Self, uint8_t Byte);

  Machine &M;
  const std::vector<StopWhen> &Conds;
  std::vector<uint64_t> Counts;
  std::vector<std::string> Tails; ///< Serial: the last bytes of output, up to the text's size
  std::vector<WatchedRange> Ranges;
  std::vector<VmxTransitionObserver *> Inner;
  std::vector<CpuObserver *> InnerObservers;
  std::vector<std::unique_ptr<Hold>> Holds;
  std::vector<uint8_t> HoldNext; ///< per CPU: a deferred fire waits for its next boundary
  bool NeedTransitions = false, NeedSerial = false, Installed = false;
  int Met = -1, MetCpu = -1;
};

Error RunUntil::prepare() {
  if (Conds.empty())
    return Error(ErrorCode::BadCondition, "runUntil needs at least one condition");
  const unsigned N = M.numCpus();
  InsnAt.assign(N, ~uint64_t(0));
  bool AnyLimit = false;
  for (unsigned I = 0; I < Conds.size(); ++I) {
    const StopWhen &W = Conds[I];
    if (W.Cpu && *W.Cpu >= N)
      return Error(ErrorCode::NoSuchCpu, fmt::format("condition {} ({}): the machine has no CPU "
                                                     "{} (it has {})",
                                                     I, W.describe(), *W.Cpu, N));
    if (W.Count == 0)
      return Error(ErrorCode::BadCondition,
                   fmt::format("condition {}: a count of 0 can never be met", I));
    switch (W.K) {
    case StopWhen::Kind::Instructions:
      if (W.Value == 0)
        return Error(ErrorCode::BadCondition,
                     fmt::format("condition {}: 0 more instructions can never be met", I));
      if (W.Cpu) {
        Cpu &C = M.cpu(*W.Cpu);
        InsnAt[*W.Cpu] = std::min(InsnAt[*W.Cpu],
                                  W.Value > ~C.Retired ? ~uint64_t(0) : C.Retired + W.Value);
        AnyLimit = true;
      } else {
        const uint64_t Total = M.scheduler().totalRetired();
        TotalBudget = std::min(TotalBudget, W.Value > ~Total ? ~uint64_t(0) : Total + W.Value);
      }
      break;
    case StopWhen::Kind::Tsc:
    case StopWhen::Kind::VmExit:
    case StopWhen::Kind::VmEntry:
    case StopWhen::Kind::VmEntryFailure:
      NeedTransitions = true;
      break;
    case StopWhen::Kind::Execute:
      break;
    case StopWhen::Kind::Write:
    case StopWhen::Kind::Read:
    case StopWhen::Kind::Access: {
      if (W.SizeBytes == 0 || W.Value + W.SizeBytes - 1 < W.Value)
        return Error(ErrorCode::BadCondition,
                     fmt::format("condition {}: {} range of {} bytes at {:#x}", I,
                                 W.K == StopWhen::Kind::Write  ? "a write"
                                 : W.K == StopWhen::Kind::Read ? "a read"
                                                               : "an access",
                                 W.SizeBytes, W.Value));
      NeedTransitions = true;
      const bool Writes = W.K != StopWhen::Kind::Read, Reads = W.K != StopWhen::Kind::Write;
      if (W.Physical) {
        Ranges.push_back({I, W.Value, W.SizeBytes, Writes, Reads});
        break;
      }
      // Page by page through the CPU's paging, as a store would go.
      Cpu &C = M.cpu(W.Cpu.value_or(0));
      uint64_t La = W.Value, Left = W.SizeBytes;
      while (Left) {
        const uint64_t Chunk = std::min(Left, kPageSize - (La & (kPageSize - 1)));
        ErrorOr<Hpa> Pa = probeTranslate(C, Gla(La));
        if (!Pa)
          return Pa.error();
        Ranges.push_back({I, Pa->value(), Chunk, Writes, Reads});
        La += Chunk;
        Left -= Chunk;
      }
      break;
    }
    case StopWhen::Kind::Serial:
      if (W.Text.empty())
        return Error(ErrorCode::BadCondition,
                     fmt::format("condition {}: an empty serial text", I));
      Tails[I].reserve(W.Text.size() + 1);
      NeedSerial = true;
      break;
    }
  }
  if (!AnyLimit)
    InsnAt.clear();
  return Error::success();
}

int RunUntil::alreadyMet() const {
  for (unsigned I = 0; I < Conds.size(); ++I)
    if (Conds[I].K == StopWhen::Kind::Tsc &&
        M.Cpus[Conds[I].Cpu.value_or(0)]->Cycles >= Conds[I].Value)
      return int(I);
  return -1;
}

bool RunUntil::needsHold(unsigned Id) const {
  for (const StopWhen &W : Conds)
    switch (W.K) {
    case StopWhen::Kind::Execute:
    case StopWhen::Kind::Write:
    case StopWhen::Kind::Read:
    case StopWhen::Kind::Access:
      if (cpuMatches(W, Id))
        return true;
      break;
    case StopWhen::Kind::Tsc:
      if (W.Cpu.value_or(0) == Id)
        return true;
      break;
    case StopWhen::Kind::Serial: // any CPU may write the byte
      return true;
    default:
      break;
    }
  return false;
}

void RunUntil::install() {
  const unsigned N = M.numCpus();
  Inner.assign(N, nullptr);
  InnerObservers.assign(N, nullptr);
  Holds.resize(N);
  HoldNext.assign(N, 0);
  for (unsigned Id = 0; Id < N; ++Id) {
    Cpu &C = *M.Cpus[Id];
    Inner[Id] = C.Transitions;
    InnerObservers[Id] = C.Observer;
    if (NeedTransitions)
      C.Transitions = this;
    if (needsHold(Id)) {
      Holds[Id] = std::make_unique<Hold>(*this, C.Observer, C.Retired, C.S.Rip);
      C.Observer = Holds[Id].get();
    }
  }
  for (const WatchedRange &R : Ranges) {
    if (R.Writes)
      M.Mem.watchWrites(Hpa(R.Base), R.Size);
    if (R.Reads)
      M.Mem.watchReads(Hpa(R.Base), R.Size);
    // PhysMem::watchWrites and watchReads: no fast write (for a read watch, nor read)
    // mapping of the pages may remain.
    for (uint64_t P = R.Base >> 12; P <= (R.Base + R.Size - 1) >> 12; ++P)
      for (auto &C : M.Cpus) {
        if (R.Reads)
          C->Mmu.dropDataMappings(P);
        else
          C->Mmu.dropWriteMappings(P);
      }
  }
  if (NeedSerial)
    M.SerialSink.setTap(&serialByte, this);
  Installed = true;
}

void RunUntil::uninstall() {
  if (!Installed)
    return;
  Installed = false;
  for (unsigned Id = 0; Id < M.numCpus(); ++Id) {
    Cpu &C = *M.Cpus[Id];
    C.Transitions = Inner[Id];
    C.Observer = InnerObservers[Id];
  }
  for (const WatchedRange &R : Ranges) {
    if (R.Writes)
      M.Mem.unwatchWrites(Hpa(R.Base), R.Size);
    if (R.Reads)
      M.Mem.unwatchReads(Hpa(R.Base), R.Size);
  }
  if (NeedSerial)
    M.SerialSink.setTap(nullptr, nullptr);
  M.Io.clearBreak();
}

void RunUntil::fire(unsigned Cond, unsigned Cpu, bool AtNextHold) {
  if (Met < 0) {
    Met = int(Cond);
    MetCpu = int(Cpu);
  }
  M.Io.requestBreak();
  if (AtNextHold && Holds[Cpu])
    HoldNext[Cpu] = 1;
  else
    M.Cpus[Cpu]->breakBlock();
}

unsigned RunUntil::metIndex() const {
  if (Met >= 0)
    return unsigned(Met);
  for (unsigned I = 0; I < Conds.size(); ++I) {
    const StopWhen &W = Conds[I];
    if (W.K == StopWhen::Kind::Instructions && W.Cpu &&
        M.Cpus[*W.Cpu]->Retired >= InsnAt[*W.Cpu])
      return I;
    if (W.K == StopWhen::Kind::Instructions && !W.Cpu &&
        M.Sched->totalRetired() >= TotalBudget)
      return I;
  }
  return 0;
}

void RunUntil::vmExit(const VmExitEvent &E) {
  if (VmxTransitionObserver *I = Inner[E.Cpu])
    I->vmExit(E);
  for (unsigned I = 0; I < Conds.size(); ++I) {
    const StopWhen &W = Conds[I];
    if (W.K != StopWhen::Kind::VmExit || !cpuMatches(W, E.Cpu))
      continue;
    const uint32_t Basic = E.Reason & 0xffff;
    if (!W.Reasons.empty() &&
        std::none_of(W.Reasons.begin(), W.Reasons.end(),
                     [Basic](ExitReason R) { return uint32_t(R) == Basic; }))
      continue;
    if (++Counts[I] == W.Count)
      fire(I, E.Cpu);
  }
}

void RunUntil::vmEntry(const VmEntryEvent &E) {
  if (VmxTransitionObserver *I = Inner[E.Cpu])
    I->vmEntry(E);
  for (unsigned I = 0; I < Conds.size(); ++I)
    if (Conds[I].K == StopWhen::Kind::VmEntry && cpuMatches(Conds[I], E.Cpu) &&
        ++Counts[I] == Conds[I].Count)
      fire(I, E.Cpu);
}

void RunUntil::vmEntryFailure(const VmEntryFailureEvent &E) {
  if (VmxTransitionObserver *I = Inner[E.Cpu])
    I->vmEntryFailure(E);
  for (unsigned I = 0; I < Conds.size(); ++I)
    if (Conds[I].K == StopWhen::Kind::VmEntryFailure && cpuMatches(Conds[I], E.Cpu) &&
        ++Counts[I] == Conds[I].Count)
      fire(I, E.Cpu);
}

void RunUntil::watchedStore(const WatchedStoreEvent &E) {
  if (VmxTransitionObserver *I = Inner[E.Cpu])
    I->watchedStore(E);
  watchedEvent(E.Addr, E.SizeBytes, E.Cpu, true);
}

void RunUntil::watchedLoad(const WatchedLoadEvent &E) {
  if (VmxTransitionObserver *I = Inner[E.Cpu])
    I->watchedLoad(E);
  watchedEvent(E.Addr, E.SizeBytes, E.Cpu, false);
}

// A store or read of a watched range: it completes with its instruction (a REP string
// instruction whole), then the CPU's Hold holds the next one. The stop is trap-like, as
// a data breakpoint's #DB (SDM Vol. 3B, "Data Memory and I/O Breakpoint Exception
// Conditions": the processor reports it after executing the instruction that accessed
// the location).
void RunUntil::watchedEvent(uint64_t Addr, uint64_t SizeBytes, unsigned Cpu, bool Store) {
  unsigned Last = ~0u; // one access counts once per condition, over its pages
  for (const WatchedRange &R : Ranges) {
    if (R.Cond == Last || !(Store ? R.Writes : R.Reads) || Addr >= R.Base + R.Size ||
        R.Base >= Addr + SizeBytes || !cpuMatches(Conds[R.Cond], Cpu))
      continue;
    Last = R.Cond;
    if (++Counts[R.Cond] == Conds[R.Cond].Count)
      fire(R.Cond, Cpu, true);
  }
}

bool RunUntil::Hold::holdBefore(const Cpu &C, const DecodedInsn &I) {
  if (Inner && Inner->holdBefore(C, I))
    return true;
  if (Owner.HoldNext[C.Id]) { // a store or serial byte of the instruction before
    Owner.HoldNext[C.Id] = 0;
    return true;
  }
  // The boundary this call started at is where the last stop left the CPU: continue.
  if (!PastStart) {
    PastStart = true;
    if (C.Retired == StartRetired && C.S.Rip == StartRip)
      return false;
  }
  const uint64_t La = fetchLinear(C);
  std::optional<uint64_t> Pa;
  for (unsigned K = 0; K < Owner.Conds.size(); ++K) {
    const StopWhen &W = Owner.Conds[K];
    if (W.K == StopWhen::Kind::Tsc && W.Cpu.value_or(0) == C.Id && C.Cycles >= W.Value) {
      Owner.fire(K, C.Id);
      return true;
    }
    if (W.K != StopWhen::Kind::Execute || !Owner.cpuMatches(W, C.Id))
      continue;
    uint64_t Here = La;
    if (W.Physical) {
      if (!Pa) {
        ErrorOr<Hpa> T = probeTranslate(const_cast<Cpu &>(C), Gla(La));
        Pa = T ? T->value() : ~uint64_t(0);
      }
      Here = *Pa;
    }
    if (Here == W.Value && ++Owner.Counts[K] == W.Count) {
      Owner.fire(K, C.Id);
      return true;
    }
  }
  return false;
}

void RunUntil::serialByte(void *Self, uint8_t Byte) {
  RunUntil &U = *static_cast<RunUntil *>(Self);
  for (unsigned I = 0; I < U.Conds.size(); ++I) {
    const StopWhen &W = U.Conds[I];
    if (W.K != StopWhen::Kind::Serial)
      continue;
    std::string &T = U.Tails[I];
    if (T.size() == W.Text.size())
      T.erase(T.begin()); // within the capacity reserved: no allocation
    T.push_back(char(Byte));
    if (T == W.Text && ++U.Counts[I] == W.Count) {
      const unsigned Cur = U.M.ApicRouter.Current;
      U.fire(I, Cur < U.M.numCpus() ? Cur : 0, true);
    }
  }
}

ErrorOr<RunResult> Machine::runUntil(const std::vector<StopWhen> &Conditions) {
  RunUntil U(*this, Conditions);
  if (Error E = U.prepare())
    return E;
  Scheduler &Sch = scheduler();
  RunResult R;
  if (const int Now = U.alreadyMet(); Now >= 0) {
    const Cpu &C = cpu(Conditions[Now].Cpu.value_or(0));
    R.Reason = RunReason::Stopped;
    R.Retired = Sch.totalRetired();
    R.Cycles = bsp().Cycles;
    R.CpuId = C.Id;
    R.Rip = C.S.Rip;
    R.Condition = unsigned(Now);
    R.What = Conditions[Now].describe();
    return R;
  }
  U.install();
  Sch.setLimits(U.InsnAt);
  R = runScheduled(nullptr, 0, U.TotalBudget, true);
  Sch.setLimits({});
  if (R.Reason == RunReason::Stopped) {
    R.Condition = U.metIndex();
    R.What = Conditions[R.Condition].describe();
    // An event can concern another CPU than the one whose run returned (an INIT exit
    // taken when the scheduler applies the INIT between slices): name the event's CPU.
    if (U.metCpu() >= 0) {
      R.CpuId = unsigned(U.metCpu());
      R.Rip = cpu(R.CpuId).S.Rip;
    }
  }
  return R;
}

// --- Inspection ---

namespace {

Error noSuchCpu(unsigned Cpu, unsigned N) {
  return Error(ErrorCode::NoSuchCpu,
               fmt::format("the machine has no CPU {} (it has {})", Cpu, N));
}

/// A register of CpuState by name (Machine::readRegister's list).
uint64_t *registerSlot(CpuState &S, const std::string &Name, unsigned &SizeBytes) {
  static const char *const Gprs[16] = {"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
                                       "r8",  "r9",  "r10", "r11", "r12", "r13", "r14", "r15"};
  SizeBytes = 8;
  for (unsigned I = 0; I < 16; ++I)
    if (Name == Gprs[I])
      return &S.Gpr[I];
  struct Named {
    const char *Name;
    uint64_t CpuState::*Field;
  };
  static const Named Plain[] = {
      {"rip", &CpuState::Rip},   {"rflags", &CpuState::Rflags}, {"cr0", &CpuState::Cr0},
      {"cr2", &CpuState::Cr2},   {"cr3", &CpuState::Cr3},       {"cr4", &CpuState::Cr4},
      {"cr8", &CpuState::Cr8},   {"xcr0", &CpuState::Xcr0},     {"efer", &CpuState::Efer},
  };
  for (const Named &P : Plain)
    if (Name == P.Name)
      return &(S.*P.Field);
  static const char *const Drs[] = {"dr0", "dr1", "dr2", "dr3", nullptr, nullptr, "dr6", "dr7"};
  for (unsigned I = 0; I < 8; ++I)
    if (Drs[I] && Name == Drs[I])
      return &S.Dr[I];
  return nullptr;
}

/// A segment or table register's part: "cs", "cs.base", "gdtr.limit", ...
bool segmentPart(CpuState &S, const std::string &Name, uint64_t *Read, const uint64_t *Write) {
  static const char *const Segs[] = {"es", "cs", "ss", "ds", "fs", "gs"};
  const size_t Dot = Name.find('.');
  const std::string Reg = Name.substr(0, Dot);
  const std::string Part = Dot == std::string::npos ? "selector" : Name.substr(Dot + 1);
  Segment *G = nullptr;
  for (unsigned I = 0; I < kNumSegRegs; ++I)
    if (Reg == Segs[I])
      G = &S.Seg[I];
  if (Reg == "ldtr")
    G = &S.Ldtr;
  if (Reg == "tr")
    G = &S.Tr;
  if (G) {
    if (Part == "selector") {
      if (Read)
        *Read = G->Selector;
      if (Write)
        G->Selector = uint16_t(*Write);
    } else if (Part == "base") {
      if (Read)
        *Read = G->Base;
      if (Write)
        G->Base = *Write;
    } else if (Part == "limit") {
      if (Read)
        *Read = G->Limit;
      if (Write)
        G->Limit = uint32_t(*Write);
    } else if (Part == "attr") {
      if (Read)
        *Read = G->Attr;
      if (Write)
        G->Attr = decltype(G->Attr)(*Write);
    } else {
      return false;
    }
    return true;
  }
  TableReg *T = Reg == "gdtr" ? &S.Gdtr : Reg == "idtr" ? &S.Idtr : nullptr;
  if (!T || Dot == std::string::npos)
    return false;
  if (Part == "base") {
    if (Read)
      *Read = T->Base;
    if (Write)
      T->Base = *Write;
    return true;
  }
  if (Part == "limit") {
    if (Read)
      *Read = T->Limit;
    if (Write)
      T->Limit = decltype(T->Limit)(*Write);
    return true;
  }
  return false;
}

/// After state was written from outside: what the instruction that loads it would
/// bring up to date.
void stateChanged(Cpu &C) {
  C.modeChanged();
  debugRegistersChanged(C);
  C.Mmu.flushTlb();
}

ErrorOr<VmcsField> vmcsFieldByName(const std::string &Name) {
  for (unsigned I = 0; I < kNumVmcsFields; ++I)
    if (Name == kVmcsFields[I].Name || Name == kVmcsFields[I].SdmName)
      return VmcsField(I);
  return Error(ErrorCode::UnknownVmcsField,
               fmt::format("\"{}\" is no VMCS field (cpu/vmx/vmcs_fields.def)", Name));
}

} // namespace

ErrorOr<uint64_t> Machine::readRegister(unsigned Id, const std::string &Name) const {
  if (Id >= numCpus())
    return noSuchCpu(Id, numCpus());
  CpuState S = Cpus[Id]->S; // registerSlot and segmentPart address a state they may write
  unsigned Size;
  if (uint64_t *P = registerSlot(S, Name, Size))
    return *P;
  uint64_t V = 0;
  if (segmentPart(S, Name, &V, nullptr))
    return V;
  if (Name == "mxcsr")
    return uint64_t(S.Mxcsr);
  return Error(ErrorCode::UnknownRegister, fmt::format("no register \"{}\"", Name));
}

Error Machine::writeRegister(unsigned Id, const std::string &Name, uint64_t Value) {
  if (Id >= numCpus())
    return noSuchCpu(Id, numCpus());
  Cpu &C = *Cpus[Id];
  unsigned Size;
  if (uint64_t *P = registerSlot(C.S, Name, Size)) {
    *P = Value;
  } else if (Name == "mxcsr") {
    C.S.Mxcsr = uint32_t(Value);
  } else if (!segmentPart(C.S, Name, nullptr, &Value)) {
    return Error(ErrorCode::UnknownRegister, fmt::format("no register \"{}\"", Name));
  }
  stateChanged(C);
  return Error::success();
}

ErrorOr<CpuState> Machine::registers(unsigned Id) const {
  if (Id >= numCpus())
    return noSuchCpu(Id, numCpus());
  return Cpus[Id]->S;
}

Error Machine::setRegisters(unsigned Id, const CpuState &S) {
  if (Id >= numCpus())
    return noSuchCpu(Id, numCpus());
  Cpus[Id]->S = S;
  stateChanged(*Cpus[Id]);
  return Error::success();
}

ErrorOr<uint64_t> Machine::readMsr(unsigned Id, uint32_t Index) {
  if (Id >= numCpus())
    return noSuchCpu(Id, numCpus());
  Cpu &C = *Cpus[Id];
  const PendingEvent Saved = C.Pending; // a #GP is reported here, not left pending
  uint64_t V = 0;
  const Status St = vmxsim::readMsr(C, Index, V);
  C.Pending = Saved;
  if (St != Status::Ok)
    return Error(ErrorCode::MsrFault,
                 fmt::format("RDMSR of {:#x} on CPU {} raises #GP", Index, Id));
  return V;
}

Error Machine::writeMsr(unsigned Id, uint32_t Index, uint64_t Value) {
  if (Id >= numCpus())
    return noSuchCpu(Id, numCpus());
  Cpu &C = *Cpus[Id];
  const PendingEvent Saved = C.Pending;
  const Status St = vmxsim::writeMsr(C, Index, Value);
  C.Pending = Saved;
  if (St != Status::Ok)
    return Error(ErrorCode::MsrFault,
                 fmt::format("WRMSR of {:#x} to {:#x} on CPU {} raises #GP", Value, Index, Id));
  return Error::success();
}

ErrorOr<Hpa> Machine::translate(unsigned Id, Gla La) {
  if (Id >= numCpus())
    return noSuchCpu(Id, numCpus());
  return probeTranslate(*Cpus[Id], La);
}

namespace {

Error notRam(uint64_t Pa, uint64_t SizeBytes) {
  return Error(ErrorCode::NotRam, fmt::format("physical range {:#x}+{:#x} is not all RAM", Pa,
                                              SizeBytes));
}

} // namespace

Error Machine::readPhysical(Hpa Pa, void *Out, uint64_t SizeBytes) const {
  if (!Mem.isRam(Pa, SizeBytes))
    return notRam(Pa.value(), SizeBytes);
  Mem.copyOut(Pa, Out, SizeBytes);
  return Error::success();
}

Error Machine::writePhysical(Hpa Pa, const void *In, uint64_t SizeBytes) {
  if (!Mem.isRam(Pa, SizeBytes))
    return notRam(Pa.value(), SizeBytes);
  Mem.copyIn(Pa, In, SizeBytes); // noteWrite: decoded code of those bytes goes
  return Error::success();
}

Error Machine::readLinear(unsigned Id, Gla La, void *Out, uint64_t SizeBytes) {
  if (Id >= numCpus())
    return noSuchCpu(Id, numCpus());
  uint8_t *P = static_cast<uint8_t *>(Out);
  uint64_t A = La.value();
  while (SizeBytes) {
    const uint64_t Chunk = std::min(SizeBytes, kPageSize - (A & (kPageSize - 1)));
    ErrorOr<Hpa> Pa = probeTranslate(*Cpus[Id], Gla(A));
    if (!Pa)
      return Pa.error();
    if (Error E = readPhysical(*Pa, P, Chunk))
      return E;
    P += Chunk;
    A += Chunk;
    SizeBytes -= Chunk;
  }
  return Error::success();
}

Error Machine::writeLinear(unsigned Id, Gla La, const void *In, uint64_t SizeBytes) {
  if (Id >= numCpus())
    return noSuchCpu(Id, numCpus());
  // Every page is translated and checked first, so that an error writes nothing.
  std::vector<std::pair<Hpa, uint64_t>> Pieces;
  uint64_t A = La.value(), Left = SizeBytes;
  while (Left) {
    const uint64_t Chunk = std::min(Left, kPageSize - (A & (kPageSize - 1)));
    ErrorOr<Hpa> Pa = probeTranslate(*Cpus[Id], Gla(A));
    if (!Pa)
      return Pa.error();
    if (!Mem.isRam(*Pa, Chunk))
      return notRam(Pa->value(), Chunk);
    Pieces.push_back({*Pa, Chunk});
    A += Chunk;
    Left -= Chunk;
  }
  const uint8_t *P = static_cast<const uint8_t *>(In);
  for (const auto &[Pa, Chunk] : Pieces) {
    (void)writePhysical(Pa, P, Chunk);
    P += Chunk;
  }
  return Error::success();
}

ErrorOr<uint64_t> Machine::readVmcs(unsigned Id, const std::string &Field) const {
  if (Id >= numCpus())
    return noSuchCpu(Id, numCpus());
  ErrorOr<VmcsField> F = vmcsFieldByName(Field);
  if (!F)
    return F.error();
  const Cpu &C = *Cpus[Id];
  if (!fieldSupported(*C.Model.Vmx, *F))
    return Error(ErrorCode::UnsupportedVmcsField,
                 fmt::format("CPU {}'s VMX profile has no VMCS field {}", Id, Field));
  if (!C.Vmx->haveCurrentVmcs())
    return Error(ErrorCode::NoCurrentVmcs, fmt::format("CPU {} has no current VMCS", Id));
  return C.Vmx->Vmcs.get(*F);
}

Error Machine::writeVmcs(unsigned Id, const std::string &Field, uint64_t Value) {
  ErrorOr<uint64_t> Old = readVmcs(Id, Field); // the same errors
  if (!Old)
    return Old.error();
  Cpus[Id]->Vmx->Vmcs.set(*vmcsFieldByName(Field), Value);
  return Error::success();
}

ErrorOr<uint64_t> Machine::readVmcsAt(Hpa Region, const std::string &Field) const {
  ErrorOr<VmcsField> F = vmcsFieldByName(Field);
  if (!F)
    return F.error();
  // The current VMCS of a CPU is authoritative in that CPU's cache (cpu/vmx/vmx_state.h).
  for (auto &C : Cpus)
    if (C->Vmx->haveCurrentVmcs() && C->Vmx->CurrentVmcsPointer == Region.value())
      return C->Vmx->Vmcs.get(*F);
  uint64_t V = 0;
  if (Error E = readPhysical(Hpa(Region.value() + vmcs_layout::fieldOffset(*F)), &V, 8))
    return E;
  return V;
}

Error Machine::writeVmcsAt(Hpa Region, const std::string &Field, uint64_t Value) {
  ErrorOr<VmcsField> F = vmcsFieldByName(Field);
  if (!F)
    return F.error();
  for (auto &C : Cpus)
    if (C->Vmx->haveCurrentVmcs() && C->Vmx->CurrentVmcsPointer == Region.value()) {
      C->Vmx->Vmcs.set(*F, Value);
      return Error::success();
    }
  const uint64_t V = VmcsData::truncateToWidth(*F, Value);
  return writePhysical(Hpa(Region.value() + vmcs_layout::fieldOffset(*F)), &V, 8);
}

namespace {

ErrorOr<std::vector<trace::TraceRecord>> readRecords(const std::string &Path,
                                                    const std::vector<uint8_t> &Pending) {
  std::ifstream In(Path, std::ios::binary);
  std::vector<uint8_t> Bytes((std::istreambuf_iterator<char>(In)),
                             std::istreambuf_iterator<char>());
  Bytes.insert(Bytes.end(), Pending.begin(), Pending.end());
  trace::TraceReader Reader;
  Reader.openMemory(Bytes.data(), Bytes.size());
  std::vector<trace::TraceRecord> Out;
  trace::TraceRecord R;
  while (Reader.next(R))
    Out.push_back(R);
  if (Reader.failed())
    return Error(ErrorCode::NoTrace, Reader.error().str(), Path);
  return Out;
}

} // namespace

ErrorOr<std::vector<trace::TraceRecord>> Machine::groundTruthRecords() {
  if (!GroundTruthWriter)
    return Error(ErrorCode::NoTrace, "the machine records no ground truth "
                                     "(MachineConfig::GroundTruthFile is empty)");
  GroundTruthOut->flush(); // what was handed to its thread: the file's bytes are the same
  std::vector<uint8_t> Pending;
  GroundTruthWriter->peekPending(Pending);
  return readRecords(Cfg.GroundTruthFile, Pending);
}

ErrorOr<std::vector<trace::TraceRecord>> Machine::hypervisorTraceRecords() {
  if (!TraceDrain)
    return Error(ErrorCode::NoTrace, "the machine writes no hypervisor trace "
                                     "(MachineConfig::XentraceFile is empty)");
  XentraceOut->flush();
  std::vector<uint8_t> Pending;
  TraceDrain->peek(Pending);
  return readRecords(Cfg.XentraceFile, Pending);
}

} // namespace vmxsim
