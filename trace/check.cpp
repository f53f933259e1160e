#include "trace/check.h"

#include "trace/dump.h"
#include "trace/events.h"
#include "trace/exit_operands.h"
#include "trace/gt_records.h"
#include "trace/slot_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

namespace vmxsim::trace {

void LagStats::add(uint64_t V) {
  Min = Count ? std::min(Min, V) : V;
  Max = Count ? std::max(Max, V) : V;
  Total += V;
  ++Count;
}

namespace {

constexpr uint32_t kIoReason = 30, kCrReason = 28, kExceptionReason = 0; // SDM Vol. 3C, App. C

/// What a ground-truth item is: a VM transition (the only kinds without slot watching),
/// or, with it, a store into trace slots, a root-mode RDTSC, a CPU's slots appearing.
enum class GtKind : uint8_t { Transition, SlotStore, RootTsc, Publish };

/// The ground-truth record an item came from, without the xen-3.0 items a ground truth
/// never has: what a message prints (record()) and where an item's numbers came from.
/// Half the size of a TraceRecord: the check queues about fifteen items per exit.
struct GtRecord {
  uint64_t Offset = 0, Tsc = 0;
  uint32_t Event = 0;
  uint16_t Cpu = 0;
  uint8_t NumWords = 0;
  bool HasTsc = false;
  uint32_t Words[XT_MAX_WORDS] = {};

  GtRecord &operator=(const TraceRecord &R) {
    Offset = R.Offset;
    Tsc = R.Tsc;
    Event = R.Event;
    Cpu = R.Cpu;
    NumWords = R.NumWords;
    HasTsc = R.HasTsc;
    std::memcpy(Words, R.Words, sizeof Words);
    return *this;
  }
  /// Record R of CPU Cpu (its words past NumWords become 0).
  void set(const RawRecord &R, uint16_t OfCpu) {
    Offset = R.Offset;
    Tsc = R.Tsc;
    Event = R.Event;
    Cpu = OfCpu;
    NumWords = R.NumWords;
    HasTsc = R.HasTsc;
    if (R.NumWords >= XT_MAX_WORDS) // a constant size: no call
      std::memcpy(Words, R.Words, sizeof Words);
    else
      for (unsigned I = 0; I < XT_MAX_WORDS; ++I)
        Words[I] = I < R.NumWords ? R.word(I) : 0;
  }
  TraceRecord record() const {
    TraceRecord R;
    R.Offset = Offset;
    R.Tsc = Tsc;
    R.Event = Event;
    R.Cpu = Cpu;
    R.NumWords = NumWords;
    R.HasTsc = HasTsc;
    std::memcpy(R.Words, Words, sizeof Words);
    return R;
  }
};

constexpr unsigned kSlots = 5;
using SlotArray = std::array<uint64_t, kSlots>;

/// A CPU's stores into its own trace slots between two of its other ground-truth items:
/// the last value stored into each slot (bit n of Mask: slot n was stored). The check
/// sees the slots only at its items (an RDTSC, a transition), never between two stores,
/// so a run of stores is kept as its result, not queued store by store.
struct SlotDelta {
  uint32_t Mask = 0;
  uint64_t Value[kSlots] = {};
  void store(uint32_t Slot, uint64_t V) {
    Mask |= 1u << Slot;
    Value[Slot] = V;
  }
  void applyTo(SlotArray &S) const {
    for (uint32_t M = Mask; M; M &= M - 1) {
      const unsigned I = unsigned(std::countr_zero(M));
      S[I] = Value[I];
    }
  }
};

/// A ground-truth item of one CPU.
struct GtEvent {
  /// The CPU's stores into its own slots after its previous item and before this one
  /// (applied and cleared when the item reaches the front: GtQueue::applyFront).
  SlotDelta Before;
  GtRecord Rec;
  GtKind Kind = GtKind::Transition;
  bool IsExit = false;
  bool IsFail = false; ///< GT_VMENTRY_FAIL
  uint32_t Reason = 0;
  uint64_t Rip = 0, Qual = 0;
  uint32_t IntrInfo = 0, IntrErr = 0; ///< GT_VMEXIT_EVENT (0 without one)
  uint64_t Gpa = 0;                   ///< GT_VMEXIT_ADDR's guest-physical address (0 without)
  uint32_t Activity = 0;              ///< GT_ACTIVITY's state
  bool HasActivity = false;           ///< a GT_ACTIVITY followed the exit, or slot watching is on (none: active)
  uint32_t InjInfo = 0, InjErr = 0;   ///< GT_VMENTRY (GT_RESUME: 0)
  /// GT_GPR records that followed it: RAX, RCX, RDX, RBX (registers 0-3) in Gpr[0..3],
  /// any other register (a CR access's) in Gpr[4] with its number in ExtraReg.
  uint64_t Gpr[5] = {};
  uint32_t GprMask = 0; ///< bit n: register n was recorded
  uint8_t ExtraReg = 0;
  uint32_t Owner = 0, Slot = 0; ///< GT_SLOT_STORE into another CPU's slots
  uint64_t Value = 0;           ///< GT_SLOT_STORE, GT_ROOT_TSC
};
// GtQueue::hold starts the fields from Kind on with zero bytes: their initial values.
static_assert(std::is_standard_layout_v<GtEvent> && std::is_trivially_copyable_v<GtEvent> &&
              GtKind::Transition == GtKind{});

template <class Record> uint64_t word64(const Record &R, unsigned I) {
  return uint64_t(R.Words[I]) | uint64_t(R.Words[I + 1]) << 32;
}

/// The RIP of a root RDTSC's record (GT_ROOT_RDTSC or GT_ROOT_TSC: trace/gt_records.h),
/// for a message.
uint64_t rootTscRip(const GtRecord &R) {
  GtRootTscFields F;
  return gtRootTsc(R.Event, R.NumWords, [&](unsigned I) { return R.Words[I]; }, R.Tsc, F)
             ? F.Rip
             : 0;
}
/// The name of a root RDTSC's record, for a message.
const char *rootTscName(const GtRecord &R) {
  return R.Event == XT_EV_GtRootRdtsc ? "GT_ROOT_RDTSC" : "GT_ROOT_TSC";
}

/// Basic exit reasons (SDM Vol. 3D, Appendix C) whose records the slot check knows.
constexpr uint32_t kCpuidReason = 10, kHltReason = 12, kVmcallReason = 18,
                   kRdmsrReason = 31, kWrmsrReason = 32, kEptViolationReason = 48,
                   kEptMisconfigReason = 49, kPreemptionTimerReason = 52,
                   kInvlpgReason = 14, kRdtscReason = 16, kMovDrReason = 29,
                   kXsetbvReason = 55, kExternalInterruptReason = 1,
                   kVirtualizedEoiReason = 45, kApicWriteReason = 56;
/// GT_SLOT_OWN's header word with 3 payload words (both high halves 0) and a TSC
/// (trace/events.def; as xt_header(XT_EV_GtSlotOwn, 3, 1)).
constexpr uint32_t kSlotOwnHeader = XT_EV_GtSlotOwn | 3u << XT_WORDS_SHIFT | XT_TSC_FLAG;
constexpr uint32_t kEntryFailureBit = 1u << 31;
/// VM-entry interruption information (SDM Vol. 3C, "VM-Entry Controls for Event
/// Injection"): bit 31 valid, bit 11 deliver error code, bits 7:0 vector.
constexpr uint32_t kIntrValid = 1u << 31, kIntrErrorCode = 1u << 11;
constexpr uint32_t kVectorGp = 13;
/// The core's p2m type of its emulated MMIO page (hvm/vmx/README.md, exit 48).
constexpr uint64_t kP2mMmio = 4;

/// The words a handler record should carry: at most XT_MAX_WORDS, held in place (the
/// check builds one or two per exit; a vector would allocate each time).
class WordList {
public:
  WordList() = default;
  WordList &operator=(std::initializer_list<uint32_t> L) {
    N = 0;
    for (uint32_t V : L)
      push_back(V);
    return *this;
  }
  void clear() { N = 0; }
  void push_back(uint32_t V) {
    if (N < XT_MAX_WORDS)
      W[N++] = V;
  }
  size_t size() const { return N; }
  uint32_t operator[](size_t I) const { return W[I]; }

private:
  std::array<uint32_t, XT_MAX_WORDS> W{};
  size_t N = 0;
};

/// "exit 12", "entry 3" or a fixed text: what a failure names, formatted only when a
/// message is built (the check runs without building one per record).
struct Ordinal {
  const char *What;
  uint64_t N = ~uint64_t(0); ///< ~0: What alone
  std::string str() const { return N == ~uint64_t(0) ? What : fmt::format("{} {}", What, N); }
};
std::string operator+(const Ordinal &A, const char *B) { return A.str() + B; }

} // namespace
} // namespace vmxsim::trace

template <> struct fmt::formatter<vmxsim::trace::Ordinal> : fmt::formatter<std::string> {
  template <typename Ctx> auto format(const vmxsim::trace::Ordinal &O, Ctx &C) const {
    return fmt::formatter<std::string>::format(O.str(), C);
  }
};

namespace vmxsim::trace {
namespace {

/// A FIFO of one CPU's ground-truth items in one growing array (a deque would allocate
/// a node per item of this size). References stay valid until the next push_back.
/// A transition is built in place at the back while the records that belong to it are
/// read (hold): it is not in the queue (size, front, []) until release(). The array's
/// elements are reused once the queue has drained (Count resets, the elements stay).
/// The CPU's stores into its own slots (most of the records) are not items: each
/// item carries those before it (GtEvent::Before), and those after the last item wait in
/// the back delta (storeOwn, back()). A store into another CPU's slots, which the check
/// applies to that CPU's slots when it reaches the front, is an item of its own, which
/// sets only Kind, Owner, Slot and Value.
class GtQueue {
public:
  bool empty() const { return Visible == 0; }
  size_t size() const { return Visible; }
  GtEvent &front() { return Items[Head]; }
  GtEvent &operator[](size_t I) { return Items[Head + I]; }
  /// A new item at the back, with the stores before it, left as an earlier item left it
  /// but for Before: the caller sets every field its kind has (a root RDTSC's: Kind, Rec,
  /// Value, IsExit and IsFail).
  GtEvent &push() {
    ++Visible;
    GtEvent &E = fresh();
    E.Before.Mask = 0;
    return takeBack(E);
  }
  /// A store into the CPU's own slots, after every item so far.
  void storeOwn(uint32_t Slot, uint64_t Value) { Back.store(Slot, Value); }
  /// The stores into the CPU's own slots after the last item.
  SlotDelta &back() { return Back; }
  /// A new store into another CPU's slots at the back.
  void pushStore(uint32_t Owner, uint32_t Slot, uint64_t Value) {
    ++Visible;
    GtEvent &E = fresh();
    E.Before.Mask = 0;
    E.Kind = GtKind::SlotStore;
    E.Owner = Owner;
    E.Slot = Slot;
    E.Value = Value;
  }
  /// A new held item at the back (none may be held already), with the stores before it.
  /// Its record (Rec) is the caller's to set; every field after it starts at 0.
  GtEvent &hold() {
    HeldBack = true;
    GtEvent &E = fresh();
    E.Before.Mask = 0;
    std::memset(&E.Kind, 0, sizeof(GtEvent) - offsetof(GtEvent, Kind));
    return takeBack(E);
  }
  GtEvent *held() { return HeldBack ? &Items[Count - 1] : nullptr; }
  /// Queues the held item; false when there is none.
  bool release() {
    if (!HeldBack)
      return false;
    HeldBack = false;
    ++Visible;
    return true;
  }
  /// Pops the stores into other CPUs' slots at the front, handing each to Apply.
  template <class Fn> void popStores(Fn &&Apply) {
    while (Visible && Items[Head].Kind == GtKind::SlotStore) {
      Apply(Items[Head]);
      pop_front();
    }
  }
  /// Pops the front item; it stays where it is until the next item is added.
  void pop_front() {
    --Visible;
    if (++Head == Count)
      Head = Count = 0; // the elements stay, to be reused
  }

private:
  GtEvent &takeBack(GtEvent &E) {
    if (Back.Mask) {
      E.Before = Back;
      Back.Mask = 0;
    }
    return E;
  }
  /// The next element at the back (Count grows by one): a reused one, with whatever an
  /// earlier item left in it, or a new one.
  [[gnu::always_inline]] GtEvent &fresh() {
    // The items still queued move to the front once they are at most half of those in
    // use (the look-ahead keeps a few queued, so the queue seldom drains); the array
    // keeps its size, its elements to be reused.
    if (Head >= 64 && Head * 2 >= Count) [[unlikely]] {
      std::copy(Items.begin() + std::ptrdiff_t(Head), Items.begin() + std::ptrdiff_t(Count),
                Items.begin());
      Count -= Head;
      Head = 0;
    }
    if (Count == Items.size()) [[unlikely]]
      Items.emplace_back();
    return Items[Count++];
  }
  std::vector<GtEvent> Items;
  SlotDelta Back;
  /// The elements in use (from 0; Items.size() may be more), the first queued item, the
  /// queued items (the held one not counted).
  size_t Count = 0, Head = 0, Visible = 0;
  bool HeldBack = false;
};

class Checker {
public:
  Checker(TraceReader &Hv, TraceReader &Gt) : Hv(Hv), Gt(Gt) {}

  CheckResult run() {
    while (Res.Ok) {
      const TraceRecord *R = Hv.nextRecord();
      if (!R)
        break;
      ++Res.HypervisorRecords;
      hypervisorRecord(*R);
    }
    if (Res.Ok && Hv.failed()) {
      fail("hypervisor trace: " + Hv.error().str());
      Res.ReadError = true;
    }
    // Whatever the ground truth still holds was not in the hypervisor's trace.
    if (Res.Ok) {
      GtEvent E;
      if (pullAny(E))
        fail(fmt::format("cpu{}: the ground truth has more: {} at offset {:#x} has no "
                         "hypervisor record",
                         E.Rec.Cpu, formatRecord(E.Rec.record(), 0), E.Rec.Offset));
      else if (Gt.failed()) {
        fail("ground truth: " + Gt.error().str());
        Res.ReadError = true;
      }
    }
    for (CpuCheck &C : Cpus)
      if (C.Exits || C.Entries)
        Res.Cpus.push_back(C);
    // A record that found no partner because the other file ends early or is corrupt:
    // the cause is the read error, not a disagreement.
    if (!Res.Ok && !Res.WrongKind && (Hv.failed() || Gt.failed())) {
      Res.ReadError = true;
      // Name the read error when the disagreement did not (a record whose sources lie
      // past the damage).
      if (Gt.failed() && Res.Problem.find("ground truth: ") == std::string::npos)
        Res.Problem += " (ground truth: " + Gt.error().str() + ")";
    }
    if (Res.Ok && Res.Cpus.empty())
      fail(fmt::format("nothing was checked: the hypervisor's trace holds no VMX_EXIT or "
                       "VMENTRY record ({} records read) and the ground truth no VM exit "
                       "or entry ({} records read)",
                       Res.HypervisorRecords, Res.GroundTruthRecords));
    return std::move(Res);
  }

private:
  void fail(std::string Why) {
    if (Res.Ok) {
      Res.Ok = false;
      Res.Problem = std::move(Why);
    }
  }
  void wrongKind(std::string Why) {
    if (Res.Ok)
      Res.WrongKind = true;
    fail(std::move(Why));
  }

  CpuCheck &cpu(uint16_t N) {
    if (N < Cpus.size()) [[likely]]
      return Cpus[N];
    return addCpus(N);
  }
  [[gnu::noinline]] CpuCheck &addCpus(uint16_t N) {
    {
      const size_t Old = Cpus.size();
      Cpus.resize(N + 1);
      Pending.resize(N + 1);
      LastExit.resize(N + 1);
      LastEntryFailed.resize(N + 1);
      Window.resize(N + 1);
      Regs.resize(N + 1);
      Promised.resize(N + 1, -1);
      for (size_t I = Old; I < Cpus.size(); ++I)
        Cpus[I].Cpu = uint16_t(I);
    }
    return Cpus[N];
  }

  SlotArray &slotsOf(uint32_t Owner) {
    if (Owner >= Slots.size()) [[unlikely]]
      Slots.resize(Owner + 1, SlotArray{});
    return Slots[Owner];
  }

  /// Reads CPU N's ground truth until an item of it other than a slot store is queued,
  /// or its end; false when it queued nothing. A
  /// transition is held (GtQueue::hold) until the records that belong to it
  /// (GT_VMEXIT_EVENT, GT_VMEXIT_ADDR, GT_VMEXIT_REGS, GT_VMENTRY_REGS, and with slot
  /// watching GT_GPR and GT_ACTIVITY: untimed, right after it on its CPU) have been read
  /// (release(): with slot watching, the registers come from the CPU's register file).
  /// The ground truth is read CPU by CPU, each record's words where the reader holds them
  /// (TraceReader::nextRawOf): the check pairs per CPU, so no merge across CPUs and no
  /// copy of a record before its item is built.
  bool readGt(uint16_t N) {
    cpu(N);
    GtQueue &Q = Pending[N];
    RawRecord R;
    bool Stores = false; // slot stores queued: read on to the next other item (one call)
    for (;;) {
      // Runs of the CPU's stores into its own slots (8.7 per exit of vmx_bench with
      // trace=1, most of the records), those of 3 words: taken straight from the reader's
      // buffer, as the case below would take them one by one.
      if (Strict && !Q.held()) [[likely]] {
        const uint64_t Taken = Gt.takeRun<kSlotOwnHeader>(N, [&](const uint8_t *P, uint64_t) {
          const uint8_t *W = P + 12; // the payload, after the header and the TSC
          uint32_t Slot, Value;
          std::memcpy(&Slot, W, 4);
          if (Slot >= kSlots) [[unlikely]]
            return false;
          std::memcpy(&Value, W + 8, 4); // its high half is 0: a word left off
          Q.storeOwn(Slot, Value);
          return true;
        });
        Res.GroundTruthRecords += Taken;
        Stores |= Taken != 0;
      }
      if (!Gt.nextRawOf(N, R))
        break;
      ++Res.GroundTruthRecords;
      // The common case first: a slot store (8.7 per exit of vmx_bench with trace=1) with
      // no transition held, kept as the switch below would.
      if (GtSlotStoreFields F; !R.Full && Strict && !Q.held() && isStore(R, N, F)) [[likely]] {
        store(Q, N, F);
        Stores = true;
        continue;
      }
      if ((R.Full && R.Full->Flavour == TraceFlavour::Xen30) ||
          eventClass(R.Event) == XT_CLASS_Hvm) [[unlikely]] {
        GtRecord G{};
        G.set(R, N);
        wrongKind(fmt::format("the ground-truth file holds a hypervisor record ({} at offset "
                              "{:#x}): it is a hypervisor's trace, not vmxsim's ground truth "
                              "(the order is: trace check HV GT)",
                              formatRecord(R.Full ? *R.Full : G.record(), 0), R.Offset));
        return false;
      }
      // Records that belong to the CPU's held transition.
      if (GtEvent *H = Q.held()) {
        switch (R.Event) {
        case XT_EV_GtVmExitEvent:
          if (R.NumWords < 2)
            break;
          H->IntrInfo = R.word(0);
          H->IntrErr = R.word(1);
          continue;
        case XT_EV_GtVmExitRegs:
        case XT_EV_GtVmEntryRegs:
          // GT_VMEXIT_REGS: RAX, RCX, RDX at the exit: the operands Xen's handler records
          // carry (CPUID leaf, MSR index, OUT data). GT_VMENTRY_REGS: the same three at
          // the entry (with slot watching).
          if (R.NumWords < 6)
            break;
          for (unsigned I = 0; I < 3; ++I) {
            H->Gpr[I] = R.quad(2 * I);
            Regs[N].set(I, H->Gpr[I]);
          }
          H->GprMask |= 7;
          continue;
        case XT_EV_GtVmExitAddr:
          if (R.NumWords >= 5 && (R.word(0) & 2)) // bit 1: the guest-physical address is valid
            H->Gpa = R.quad(3);
          continue;
        case XT_EV_GtActivity:
          if (R.NumWords < 2)
            break;
          H->Activity = R.word(1);
          H->HasActivity = true;
          continue;
        case XT_EV_GtGpr: {
          if (R.NumWords < 4)
            break;
          const unsigned Reg = R.word(1) & 15;
          if (Reg >= 4)
            H->ExtraReg = uint8_t(Reg);
          H->Gpr[Reg < 4 ? Reg : 4] = R.quad(2);
          H->GprMask |= 1u << Reg;
          Regs[N].set(Reg, R.quad(2));
          continue;
        }
        default:
          break;
        }
      }
      const bool Queued = release(N);
      // Every item is built where it is queued.
      switch (R.Event) {
      case XT_EV_GtSlotStore:
      case XT_EV_GtSlotOwn:
        if (GtSlotStoreFields F; Strict && isStore(R, N, F)) {
          store(Q, N, F);
          if (Queued)
            return true;
          Stores = true;
          continue;
        }
        break;
      case XT_EV_GtRootRdtsc:
      case XT_EV_GtRootTsc:
        if (GtRootTscFields F; Strict && gtRootTsc(
                                             R.Event, R.NumWords,
                                             [&](unsigned I) { return R.word(I); }, R.Tsc, F)) {
          GtEvent &E = Q.push(); // the fields a root RDTSC has, set below
          E.Rec.set(R, N);
          E.Kind = GtKind::RootTsc;
          E.IsExit = E.IsFail = false;
          E.Value = F.Value;
          return true;
        }
        break;
      case XT_EV_GtExit:
      case XT_EV_GtVmExit: {
        GtExitFields X;
        if (gtExit(R.Event, R.NumWords, [&](unsigned I) { return R.word(I); }, X)) {
          GtEvent &E = Q.hold();
          E.Rec.set(R, N);
          E.IsExit = true;
          // With slot watching, no GT_ACTIVITY after the exit means active (state 0).
          E.HasActivity = Strict;
          E.Reason = X.Reason;
          E.Rip = X.Rip;
          E.Qual = X.Qual;
          Regs[N].ResumeRip = X.resumeRip();
          Regs[N].ResumeOpen = true;
        }
        break;
      }
      case XT_EV_GtResume:
        // The entry the CPU's last exit implies (trace/events.def): only right after one.
        if (!Regs[N].ResumeOpen) {
          GtRecord G{};
          G.set(R, N);
          fail(fmt::format("ground truth: cpu{}: {} at offset {:#x} follows no VM exit of "
                           "its CPU (a broken file)",
                           N, formatRecord(R.Full ? *R.Full : G.record(), 0), R.Offset));
          Res.ReadError = true;
          return false;
        }
        [[fallthrough]];
      case XT_EV_GtVmEntry: {
        GtEntryFields F;
        if (gtEntry(R.Event, R.NumWords, [&](unsigned I) { return R.word(I); },
                    Regs[N].ResumeRip, F)) {
          GtEvent &E = Q.hold();
          E.Rec.set(R, N);
          E.Rip = F.Rip;
          E.InjInfo = F.InjInfo;
          E.InjErr = F.InjErr;
        }
        Regs[N].ResumeOpen = false;
        break;
      }
      case XT_EV_GtVmEntryFail:
        Regs[N].ResumeOpen = false;
        if (R.NumWords >= 3) {
          GtEvent &E = Q.hold();
          E.Rec.set(R, N);
          E.IsFail = true;
        }
        break;
      case XT_EV_GtSlotLayout:
        if (R.NumWords >= 3 && R.word(2) == kSlots)
          Strict = true;
        break;
      default:
        break;
      }
      if (Queued)
        return true;
    }
    return release(N) || Stores;
  }

  /// CPU N's record R, when it is a slot store the check takes (store: GT_SLOT_OWN or
  /// GT_SLOT_STORE, trace/gt_records.h, of a slot that exists and an owner that can).
  static bool isStore(const RawRecord &R, uint16_t N, GtSlotStoreFields &F) {
    return gtSlotStore(R.Event, R.NumWords, [&](unsigned I) { return R.word(I); }, N, F) &&
           F.Owner < XT_SLOT_LAYOUT_MAX_CPUS && F.Slot < kSlots;
  }
  /// Applies isStore's F on CPU N (Strict): into the back delta when it stores into N's
  /// own slots, else an item of its own.
  static void store(GtQueue &Q, uint16_t N, const GtSlotStoreFields &F) {
    if (F.Owner == N) [[likely]]
      Q.storeOwn(F.Slot, F.Value);
    else
      Q.pushStore(F.Owner, F.Slot, F.Value);
  }

  /// Queues CPU N's held transition, if any (GtQueue::release). With slot watching, its
  /// registers are those of the CPU's register file after the records that followed it:
  /// the ground truth records a register only when it changed (trace/events.def, GT_GPR).
  bool release(uint16_t N) {
    GtEvent *H = Pending[N].held();
    if (!H)
      return false;
    if (Strict && !H->IsFail) {
      GprFile &F = Regs[N];
      // The register a CR-access exit names (bits 11:8 of its qualification), at the exit
      // and at the entry that follows it, as the ground truth's writer keeps it.
      int Extra = F.CrReg;
      if (H->IsExit) {
        const bool Cr = !(H->Reason & kEntryFailureBit) && (H->Reason & 0xffff) == kCrReason;
        Extra = F.CrReg = Cr ? int((H->Qual >> 8) & 15) : -1;
      } else {
        F.CrReg = -1;
      }
      for (unsigned I = 0; I < 4; ++I)
        H->Gpr[I] = F.Value[I];
      H->GprMask = F.Known & 15u;
      H->ExtraReg = 0;
      if (Extra >= 4 && (F.Known >> Extra & 1)) {
        H->ExtraReg = uint8_t(Extra);
        H->Gpr[4] = F.Value[Extra];
        H->GprMask |= 1u << Extra;
      }
    }
    return Pending[N].release();
  }

  /// Applies the slot stores before the first item of CPU N's queue other than a store
  /// (all of them when there is none).
  void applyStores(uint16_t N) {
    cpu(N);
    GtQueue &Q = Pending[N]; // readGt(N) does not resize Pending: N is known
    // Most calls: an item other than a store at the front (inline).
    if (!Q.empty() && Q.front().Kind != GtKind::SlotStore) [[likely]]
      return applyFront(Q, N);
    applyStoresSlow(Q, N);
  }
  /// The stores kept with the item at the front of CPU N's queue Q.
  void applyFront(GtQueue &Q, uint16_t N) {
    SlotDelta &D = Q.front().Before;
    if (D.Mask) {
      D.applyTo(slotsOf(N));
      D.Mask = 0;
    }
  }
  [[gnu::noinline]] void applyStoresSlow(GtQueue &Q, uint16_t N) {
    for (;;) {
      Q.popStores([this](const GtEvent &F) { slotsOf(F.Owner)[F.Slot] = F.Value; });
      if (!Q.empty())
        return applyFront(Q, N);
      if (!readGt(N))
        break;
    }
    if (Q.back().Mask) {
      Q.back().applyTo(slotsOf(N));
      Q.back().Mask = 0;
    }
  }

  /// The next transition of CPU N (after its stores), popped from its queue: valid until
  /// the next readGt(N) or applyStores(N) (GtQueue::pop_front); null at the end.
  const GtEvent *pull(uint16_t N) {
    cpu(N);
    GtQueue &Q = Pending[N];
    for (;;) {
      applyStores(N);
      if (Q.empty())
        return nullptr;
      const GtEvent &F = Q.front();
      Q.pop_front();
      // An RDTSC no timed record carries: the hypervisor read the TSC for itself (its
      // timers, say).
      if (F.Kind != GtKind::RootTsc)
        return &F;
    }
  }

  /// An RDTSC of root operation whose value no hypervisor record carries where it must.
  void unstamped(const GtEvent &T) {
    fail(fmt::format("cpu{}: the RDTSC at rip {:#x} (TSC {:#x}, {} at offset "
                     "{:#x}) stamps no hypervisor record",
                     T.Rec.Cpu, rootTscRip(T.Rec), T.Value, rootTscName(T.Rec),
                     T.Rec.Offset));
  }

  /// The first transition or root RDTSC the ground truth still holds, CPU by CPU.
  bool pullAny(GtEvent &E) {
    const std::vector<uint16_t> Known = Gt.allCpus();
    for (uint16_t N : Known) {
      cpu(N);
      for (size_t I = 0;; ++I) {
        while (I >= Pending[N].size())
          if (!readGt(N) || !Res.Ok)
            break;
        if (I >= Pending[N].size())
          break;
        const GtEvent &F = Pending[N][I];
        if (F.Kind == GtKind::Transition || F.Kind == GtKind::RootTsc) {
          E = F;
          return true;
        }
      }
    }
    return false;
  }

  /// With slot watching: the timed record R carries the value one of CPU R.Cpu's root
  /// RDTSCs returned: the next ones are taken in order, before the CPU's next transition,
  /// until one returned exactly R's TSC (the others are the hypervisor's own reads of the
  /// TSC). Last: it must also be the last RDTSC before that transition (a VM entry
  /// record).
  bool takeTsc(const TraceRecord &R, const Ordinal &What, bool Last) {
    // The first RDTSC skipped, for the message: its value, RIP and record offset.
    struct Skipped {
      uint64_t Value, Rip, Offset;
      const char *Name;
    };
    std::optional<Skipped> First;
    GtQueue &Q = Pending[R.Cpu]; // R.Cpu is known: readGt does not resize Pending
    for (;;) {
      applyStores(R.Cpu); // reads on until the queue holds an item, or to the end
      if (Q.empty() || Q.front().Kind != GtKind::RootTsc) {
        if (!First)
          fail(fmt::format("cpu{}: {}: {} at offset {:#x} has no RDTSC of root operation in "
                           "the ground truth for its TSC",
                           R.Cpu, What, formatRecord(R, 0), R.Offset));
        else
          fail(fmt::format("cpu{}: {}: the TSC of {} at offset {:#x} is not the value of any "
                           "RDTSC of root operation before the next transition (the first "
                           "returned {:#x} at rip {:#x}, {} at offset {:#x})",
                           R.Cpu, What, formatRecord(R, 0), R.Offset, First->Value,
                           First->Rip, First->Name, First->Offset));
        return false;
      }
      const GtEvent &T = Q.front();
      const bool Stamped = T.Value == R.Tsc;
      if (!Stamped && !First)
        First = Skipped{T.Value, rootTscRip(T.Rec), T.Rec.Offset, rootTscName(T.Rec)};
      Q.pop_front(); // T is gone
      if (Stamped)
        break;
    }
    // Last: no RDTSC between it and the transition. Looked up without applying the
    // stores: the caller still needs the slots as this RDTSC saw them.
    for (size_t I = 0; Last; ++I) {
      while (I >= Q.size())
        if (!readGt(R.Cpu))
          return true;
      const GtEvent &F = Q[I];
      if (F.Kind == GtKind::RootTsc) {
        unstamped(F);
        return false;
      }
      if (F.Kind == GtKind::Transition)
        return true;
    }
    return true;
  }

  /// Looks ahead in CPU N's queue without consuming: the slots as the stores before the
  /// next RDTSC or transition leave them (into *SlotsAtTsc, unless null), and the next
  /// transition when it is a VM entry (the guest registers a handler record may come
  /// from; null when the guest was not entered again), in the queue: valid until the
  /// next readGt(N) or applyStores(N).
  const GtEvent *lookAhead(uint16_t N, SlotArray *SlotsAtTsc) {
    // The slots as the last RDTSC before the transition saw them (the closing record's;
    // earlier ones are the hypervisor's own reads), or all the stores without one.
    constexpr size_t kNone = ~size_t(0);
    size_t I = 0, LastTsc = kNone;
    const GtEvent *Next = nullptr;
    for (bool More = true; More; ++I) {
      while (More && I >= Pending[N].size())
        More = readGt(N);
      if (!More)
        break;
      const GtEvent &F = Pending[N][I];
      if (F.Kind == GtKind::RootTsc) {
        LastTsc = I;
      } else if (F.Kind == GtKind::Transition) {
        if (!F.IsExit && !F.IsFail)
          Next = &F;
        break;
      }
    }
    if (SlotsAtTsc) {
      // The stores before that RDTSC or transition, item Upto's among them; without
      // either, all of them, those after the last item too.
      SlotArray S = slotsOf(N);
      const size_t Upto = LastTsc != kNone ? LastTsc : I;
      for (size_t J = 0; J <= Upto && J < Pending[N].size(); ++J)
        Pending[N][J].Before.applyTo(S);
      if (Upto >= Pending[N].size())
        Pending[N].back().applyTo(S);
      *SlotsAtTsc = S;
    }
    return Next;
  }

  uint64_t resetValue() const { return Xen30 ? XT30_SLOT_MARKER : 0; }

  /// What this core's handler leaves in the five slots for exit X (hvm/vmx/README.md,
  /// "Exit handling"), from the architectural sources: the exit's qualification and
  /// interruption information, the guest registers at the exit (X) and at the entry that
  /// follows (Entry; null when the guest was not entered again). Slots the handler does
  /// not write keep the reset value. False, with Why, when a source is missing.
  /// The slots whose values have no source in the ground truth: the hypervisor's own
  /// choices, which the handler record must still carry as stored (trace/check.h).
  static unsigned hypervisorChosenSlots(const GtEvent &X) {
    if (X.Reason & kEntryFailureBit)
      return 0;
    switch (X.Reason & 0xffff) {
    case kEptViolationReason:
      return (1u << 2) | (1u << 3); // host frame or MMIO data; p2m type
    default:
      return 0;
    }
  }

  bool expectedSlots(const GtEvent &X, const GtEvent *Entry, SlotArray &S, std::string &Why) {
    const uint64_t Z = resetValue();
    S = {X.Reason, Z, Z, Z, Z};
    if (X.Reason & kEntryFailureBit)
      return true;
    const uint64_t Q = X.Qual;
    auto gpr = [&](const GtEvent *E, unsigned Reg, uint64_t &V) {
      if (!E || !(E->GprMask & (1u << Reg))) {
        Why = fmt::format("the ground truth has no register {} at the {}", Reg,
                          E == &X ? "exit" : "entry");
        return false;
      }
      V = E->Gpr[Reg < 4 ? Reg : 4];
      return true;
    };
    const bool GpInjected = Entry && (Entry->InjInfo & kIntrValid) &&
                            (Entry->InjInfo & 0xff) == kVectorGp;
    uint64_t A = 0, B = 0;
    switch (X.Reason & 0xffff) {
    case kExceptionReason:
      S[1] = X.IntrInfo & 0xff;
      S[3] = X.IntrErr;
      S[4] = Q;
      return true;
    case kCpuidReason:
      if (!gpr(&X, 0, A) || !gpr(&X, 1, B))
        return false;
      S[1] = uint32_t(A);
      S[2] = uint32_t(B);
      return true;
    case kVmcallReason:
      if (!gpr(&X, 0, A) || !gpr(&X, 3, B))
        return false;
      S[1] = A;
      S[2] = B;
      return true;
    case kCrReason:
      // Exit qualification for control-register accesses: bits 3:0 CR, 5:4 access
      // type, 11:8 general register.
      S[1] = (Q >> 4) & 3;
      S[2] = Q & 15;
      S[3] = (Q >> 8) & 15;
      S[4] = Q;
      return true;
    case kIoReason: {
      // Exit qualification for I/O instructions: bits 2:0 size - 1, bit 3 direction (1 =
      // IN), bit 4 string instruction, bits 31:16 port.
      const unsigned Size = unsigned(Q & 7) + 1;
      const bool In = Q & 8;
      S[1] = (Q >> 16) & 0xffff;
      S[2] = In;
      S[3] = Size;
      if (Q & 16)
        return true; // string I/O: not emulated, slot 4 not written
      const uint64_t Mask = Size >= 8 ? ~uint64_t(0) : (uint64_t(1) << (8 * Size)) - 1;
      if (!gpr(In ? Entry : &X, 0, A))
        return false;
      S[4] = A & Mask;
      return true;
    }
    case kEptViolationReason:
      // The guest-physical address and the qualification; slots 2 and 3 (the host frame
      // or MMIO data, the p2m type) are the hypervisor's own (hypervisorChosenSlots).
      S[1] = X.Gpa;
      S[4] = Q;
      return true;
    case kEptMisconfigReason:
      S[1] = X.Gpa;
      return true;
    case kPreemptionTimerReason:
      // The guest's activity state the exit saved (GT_ACTIVITY).
      if (!X.HasActivity) {
        Why = "the ground truth has no activity state at the exit";
        return false;
      }
      S[1] = X.Activity;
      return true;
    case kRdmsrReason:
      if (!gpr(&X, 1, A))
        return false;
      S[1] = uint32_t(A);
      if (GpInjected) {
        S[4] = kVectorGp;
        return true;
      }
      if (!gpr(Entry, 0, A) || !gpr(Entry, 2, B))
        return false;
      S[2] = uint32_t(A);
      S[3] = uint32_t(B);
      return true;
    case kWrmsrReason:
    case kXsetbvReason:
      // WRMSR: the MSR index; XSETBV: the XCR index (both from ECX). Then EDX:EAX.
      if (!gpr(&X, 1, A))
        return false;
      S[1] = uint32_t(A);
      if (!gpr(&X, 0, A) || !gpr(&X, 2, B))
        return false;
      S[2] = uint32_t(A);
      S[3] = uint32_t(B);
      if (GpInjected)
        S[4] = kVectorGp;
      return true;
    case kInvlpgReason:
      // The exit qualification is INVLPG's linear-address operand.
      S[1] = Q;
      return true;
    case kExternalInterruptReason:
      // "Acknowledge interrupt on exit": the vector in the exit's interruption information.
      S[1] = X.IntrInfo & 0xff;
      return true;
    case kRdtscReason:
      // The value the guest got: EDX:EAX at the entry that follows.
      if (!gpr(Entry, 0, A) || !gpr(Entry, 2, B))
        return false;
      S[1] = (uint64_t(uint32_t(B)) << 32) | uint32_t(A);
      return true;
    case kMovDrReason:
      // Exit qualification for MOV DR: bits 2:0 DR number, bit 4 direction (1 = MOV from
      // DR), bits 11:8 general register.
      S[1] = Q & 7;
      S[2] = (Q >> 4) & 1;
      S[3] = (Q >> 8) & 15;
      S[4] = Q;
      return true;
    case kVirtualizedEoiReason:
      // Exit qualification for EOI virtualization: bits 7:0, the vector.
      S[1] = Q & 0xff;
      return true;
    case kApicWriteReason:
      // Exit qualification for APIC-write VM exits: bits 11:0, the register's offset.
      S[1] = Q & 0xfff;
      return true;
    default:
      // PAUSE and WBINVD: only the exit reason.
      return true;
    }
  }

  /// The handler record this core writes for exit X with slots S (hvm/vmx/README.md, "The
  /// XenTrace buffers"); false when the exit has none. Its event id and words.
  bool expectedHandlerRecord(const GtEvent &X, const GtEvent *Entry, const SlotArray &S,
                             uint32_t &Event, WordList &W, std::string &Why) {
    W.clear();
    if (X.Reason & kEntryFailureBit)
      return false;
    auto gpr = [&](const GtEvent *E, unsigned Reg, uint64_t &V) {
      if (!E || !(E->GprMask & (1u << Reg))) {
        Why = fmt::format("the ground truth has no register {} at the entry", Reg);
        return false;
      }
      V = E->Gpr[Reg < 4 ? Reg : 4];
      return true;
    };
    uint64_t V = 0;
    switch (X.Reason & 0xffff) {
    case kExceptionReason:
      if (S[1] == 14) {
        Event = XT_EV_PfXen64;
        W = {uint32_t(S[3]), uint32_t(S[4]), uint32_t(S[4] >> 32)};
      } else {
        Event = XT_EV_Trap;
        W = {uint32_t(S[1])};
      }
      return true;
    case kCpuidReason:
      Event = XT_EV_Cpuid;
      W = {uint32_t(S[1]), uint32_t(S[2])};
      for (unsigned Reg : {0u, 3u, 1u, 2u}) { // EAX, EBX, ECX, EDX as returned
        if (!gpr(Entry, Reg, V))
          return true; // Why set: the caller fails
        W.push_back(uint32_t(V));
      }
      return true;
    case kHltReason:
      Event = XT_EV_Hlt;
      W = {0};
      return true;
    case kVmcallReason:
      Event = XT_EV_Vmmcall;
      W = {uint32_t(S[1])};
      return true;
    case kCrReason:
      switch (S[1]) {
      case 0:
      case 1:
        Event = S[1] ? XT_EV_CrRead64 : XT_EV_CrWrite64;
        // The register's value as the handler left it (MOV from CR: the value read).
        if (!gpr(Entry, unsigned(S[3] & 15), V))
          return true;
        W = {uint32_t(S[2]), uint32_t(V), uint32_t(V >> 32)};
        return true;
      case 2:
        Event = XT_EV_Clts;
        return true;
      default:
        Event = XT_EV_Lmsw64;
        W = {uint32_t((X.Qual >> 16) & 0xffff), 0}; // LMSW source data, bits 31:16
        return true;
      }
    case kEptViolationReason:
      // The host frame: Xen's INVALID_MFN (all ones) for an MMIO page (p2m type 4), whose
      // slot 2 holds the data instead (hvm/vmx/README.md).
      Event = XT_EV_Npf;
      {
        const uint64_t Mfn = S[3] == kP2mMmio ? ~uint64_t(0) : S[2];
        W = {uint32_t(S[1]), uint32_t(S[1] >> 32), uint32_t(Mfn), uint32_t(Mfn >> 32),
             uint32_t(S[4]), uint32_t(S[3])};
      }
      return true;
    case kIoReason:
      Event = S[2] ? XT_EV_IoportRead : XT_EV_IoportWrite;
      W = {uint32_t(S[1]), uint32_t(S[4])};
      return true;
    case kRdmsrReason:
    case kWrmsrReason:
      Event = (X.Reason & 0xffff) == kRdmsrReason ? XT_EV_MsrRead : XT_EV_MsrWrite;
      W = {uint32_t(S[1]), uint32_t(S[2]), uint32_t(S[3])};
      return true;
    case kExternalInterruptReason:
      Event = XT_EV_Intr;
      W = {uint32_t(S[1])};
      return true;
    case kInvlpgReason:
      Event = XT_EV_Invlpg64;
      W = {0, uint32_t(S[1]), uint32_t(S[1] >> 32)}; // 0: INVLPG, not INVLPGA
      return true;
    case kRdtscReason:
      Event = XT_EV_Rdtsc;
      W = {uint32_t(S[1]), uint32_t(S[1] >> 32)};
      return true;
    case kMovDrReason:
      Event = XT_EV_DrWrite; // Xen's, for every MOV DR exit, with no payload
      return true;
    default:
      // PAUSE, WBINVD, XSETBV, virtualized EOI and APIC write have none (format doc,
      // section 7; Xen traces no record of its own for the last two), nor has any reason
      // this core does not handle.
      return false;
    }
  }

  /// The record the hypervisor writes for the event the entry injects (hvm/vmx/README.md,
  /// as Xen's vmx_intr_assist and vmx_inject_event): INJ_VIRQ {vector, 0} for an external
  /// interrupt, none for an NMI, INJ_EXC {vector, error code or 0} for the rest; false
  /// when it writes none.
  static bool injectionRecord(const GtEvent *Entry, uint32_t &Event, WordList &W) {
    if (!Entry || !(Entry->InjInfo & kIntrValid))
      return false;
    const uint32_t Type = (Entry->InjInfo >> 8) & 7, Vector = Entry->InjInfo & 0xff;
    switch (Type) {
    case 0: // external interrupt
      Event = XT_EV_InjVirq;
      W = {Vector, 0};
      return true;
    case 2: // NMI
      return false;
    default:
      Event = XT_EV_InjExc;
      W = {Vector, (Entry->InjInfo & kIntrErrorCode) ? Entry->InjErr : 0};
      return true;
    }
  }

  std::string slotsText(const SlotArray &S) {
    return fmt::format("[{:#x}, {:#x}, {:#x}, {:#x}, {:#x}]", S[0], S[1], S[2], S[3], S[4]);
  }

  /// Closes the exit window of CPU N at a VM entry record or the guest's end: the slots
  /// as the handler left them (at the RDTSC of the closing record) against their sources,
  /// and every record the exit called for written.
  void closeWindow(const TraceRecord &R, const GtEvent *Entry) {
    const GtEvent &X = LastExit[R.Cpu]; // R.Cpu is known: nothing below resizes LastExit
    const Ordinal Nth{"exit", cpu(R.Cpu).Exits};
    SlotArray Want;
    std::string Why;
    if (!expectedSlots(X, Entry, Want, Why))
      return fail(versus(R, X, Nth + ": " + Why));
    const SlotArray Have = slotsOf(R.Cpu);
    for (unsigned I = 0; I < kSlots; ++I)
      if (hypervisorChosenSlots(X) & (1u << I))
        Want[I] = Have[I];
    if (Have != Want)
      return fail(versus(R, X, fmt::format("{}: the hypervisor's trace slots hold {}, the "
                                           "exit's sources give {}",
                                           Nth, slotsText(Have), slotsText(Want))));
    if (Xen30)
      return;
    uint32_t Event = 0;
    WordList W;
    const unsigned Records = expectedHandlerRecord(X, Entry, Want, Event, W, Why) ? 1 : 0;
    if (Window[R.Cpu].Handler != Records)
      return fail(versus(R, X, fmt::format("{}: {} handler record(s), the exit calls for {}",
                                           Nth, Window[R.Cpu].Handler, Records)));
    uint32_t InjEvent = 0;
    WordList InjWords;
    const bool Inject = injectionRecord(Entry, InjEvent, InjWords);
    if (Window[R.Cpu].Inj != Inject)
      return fail(versus(R, X, Nth + (Inject ? ": the entry injects an event and no INJ_EXC "
                                               "or INJ_VIRQ says so"
                                             : ": INJ_EXC or INJ_VIRQ, and the entry injects "
                                               "no such event")));
  }

  /// After a VM entry record's RDTSC: the stores up to the entry must reset every slot.
  void expectReset(const TraceRecord &R) {
    applyStores(R.Cpu);
    const SlotArray Have = slotsOf(R.Cpu);
    for (uint64_t V : Have)
      if (V != resetValue())
        return fail(fmt::format("cpu{}: entry {}: the trace slots hold {} at the VM entry "
                                "after {} at offset {:#x}, not the reset value {:#x}",
                                R.Cpu, cpu(R.Cpu).Entries + 1, slotsText(Have),
                                formatRecord(R, 0), R.Offset, resetValue()));
  }

  std::string missing(const TraceRecord &R, const char *What) {
    std::string S = fmt::format("cpu{}: {} at offset {:#x} has no {} in the ground truth",
                                R.Cpu, formatRecord(R, 0), R.Offset, What);
    if (Gt.failed())
      S += " (ground truth: " + Gt.error().str() + ")";
    return S;
  }

  std::string versus(const TraceRecord &R, const GtEvent &E, const std::string &Why) {
    return fmt::format("cpu{}: {}: hypervisor {} at offset {:#x}; ground truth {} at "
                       "offset {:#x}",
                       R.Cpu, Why, formatRecord(R, 0), R.Offset, formatRecord(E.Rec.record(), 0),
                       E.Rec.Offset);
  }

  void exitRecord(const TraceRecord &R, bool Wide) {
    CpuCheck &C = cpu(R.Cpu);
    const GtEvent *P = pull(R.Cpu);
    if (!P)
      return fail(missing(R, "VM exit"));
    // Kept (takeTsc reads on): once the check fails, nothing reads it again.
    const GtEvent &E = LastExit[R.Cpu] = *P;
    const Ordinal Nth{"exit", C.Exits + 1};
    if (!E.IsExit)
      return fail(versus(R, E, Nth + " is a VM entry in the ground truth"));
    const uint32_t Reason = R.Words[0];
    const uint64_t Rip = Wide ? word64(R, 1) : R.Words[1];
    const uint64_t GtRip = Wide ? E.Rip : uint32_t(E.Rip);
    if (Reason != E.Reason)
      return fail(versus(R, E, Nth + ": exit reason differs"));
    if (Rip != GtRip)
      return fail(versus(R, E, Nth + ": guest RIP differs"));
    if (R.Tsc < E.Rec.Tsc)
      return fail(versus(R, E, Nth + ": the hypervisor's TSC is before the VM exit"));
    if (Strict && !takeTsc(R, Nth, false))
      return;
    C.ExitLag.add(R.Tsc - E.Rec.Tsc);
    ++C.Exits;
    Window[R.Cpu] = {};
  }

  /// Pairs an entry record (either flavour) with the ground truth's next event on its
  /// CPU, which must be a VM entry at or after the record's TSC; false (the check failed)
  /// otherwise. The entry as pull() returns it.
  const GtEvent *pairEntry(const TraceRecord &R) {
    CpuCheck &C = cpu(R.Cpu);
    const GtEvent *E = pull(R.Cpu);
    if (!E) {
      if (Res.Ok)
        fail(missing(R, "VM entry"));
      return nullptr;
    }
    const Ordinal Nth{"entry", C.Entries + 1};
    if (E->IsExit) {
      fail(versus(R, *E, Nth + " is a VM exit in the ground truth"));
      return nullptr;
    }
    if (R.Tsc > E->Rec.Tsc) {
      fail(versus(R, *E, Nth + ": the hypervisor's TSC is after the VM entry"));
      return nullptr;
    }
    return E;
  }

  /// The entry is paired: its lead, and the exit it closes is over.
  void entryPaired(const TraceRecord &R, const GtEvent &E) {
    CpuCheck &C = cpu(R.Cpu);
    C.EntryLead.add(E.Rec.Tsc - R.Tsc);
    ++C.Entries;
    LastExit[R.Cpu].IsExit = false; // no exit open: nothing else of it is read
    LastEntryFailed[R.Cpu] = E.IsFail;
  }

  void entryRecord(const TraceRecord &R) {
    if (Strict) {
      const Ordinal Nth{"entry", cpu(R.Cpu).Entries + 1};
      if (R.NumWords != 0)
        return fail(fmt::format("cpu{}: malformed {} at offset {:#x}", R.Cpu,
                                formatRecord(R, 0), R.Offset));
      if (!takeTsc(R, Nth, true))
        return;
      const GtEvent *Next = lookAhead(R.Cpu, nullptr);
      if (LastExit[R.Cpu].IsExit)
        closeWindow(R, Next);
      else if (Window[R.Cpu].Handler || Window[R.Cpu].Inj)
        fail(fmt::format("cpu{}: {}: a handler record before it belongs to no exit", R.Cpu,
                         Nth));
      if (!Res.Ok)
        return;
      expectReset(R);
      if (!Res.Ok)
        return;
    }
    if (const GtEvent *E = pairEntry(R))
      entryPaired(R, *E);
  }

  /// RUNSTATE_* with slot watching: d1v<cpu> (this core's guest is domain 1, one vCPU
  /// per CPU) and the TSC of its RDTSC; RUNNING_TO_OFFLINE ends the open exit.
  void runstateRecord(const TraceRecord &R) {
    if (R.NumWords != 1 || !R.HasTsc || R.Words[0] != ((1u << 16) | R.Cpu))
      return fail(fmt::format("cpu{}: {} at offset {:#x} is not this CPU's d1v{} with a TSC",
                              R.Cpu, formatRecord(R, 0), R.Offset, R.Cpu));
    const bool Offline = R.Event == XT_EV_RunstateRunningToOffline;
    if (!takeTsc(R, Ordinal{Offline ? "the guest's end" : "the launch"}, false))
      return;
    if (Offline) {
      if (!LastExit[R.Cpu].IsExit)
        return fail(fmt::format("cpu{}: {} at offset {:#x} ends no exit", R.Cpu,
                                formatRecord(R, 0), R.Offset));
      if (Promised[R.Cpu] >= 0)
        return fail(fmt::format("cpu{}: {} at offset {:#x}: the interrupt (vector {:#x}) an "
                                "INTR_WINDOW said was waiting was never injected",
                                R.Cpu, formatRecord(R, 0), R.Offset, Promised[R.Cpu]));
      closeWindow(R, nullptr);
      LastExit[R.Cpu] = GtEvent{};
      Window[R.Cpu] = {};
      Ended.resize(std::max<size_t>(Ended.size(), R.Cpu + 1));
      Ended[R.Cpu] = true;
    }
  }

  /// A handler record whose content the exit qualification also gives (without slot
  /// watching), or (with it) every word of any record written inside an exit.
  void handlerRecord(const TraceRecord &R) {
    CpuCheck &C = cpu(R.Cpu);
    const GtEvent &E = LastExit[R.Cpu];
    if (Strict)
      return strictHandlerRecord(R);
    const uint32_t Basic = E.Reason & 0xffff;
    auto Check = [&](bool Good, const char *Why) {
      if (!E.IsExit)
        return fail(fmt::format("cpu{}: {} at offset {:#x} is not inside an exit", R.Cpu,
                                formatRecord(R, 0), R.Offset));
      if (!Good)
        return fail(versus(R, E, fmt::format("exit {}: {}", C.Exits, Why)));
      ++C.HandlerRecords;
    };
    // The guest's RAX, RCX, RDX at the exit (GT_VMEXIT_REGS; a ground truth without them,
    // an older vmxsim's, leaves the operands unchecked).
    const bool Regs = (E.GprMask & 7) == 7;
    const uint64_t Rax = E.Gpr[0], Rcx = E.Gpr[1], Rdx = E.Gpr[2];
    switch (R.Event) {
    case XT_EV_IoportRead:
    case XT_EV_IoportWrite: {
      // Xen's IOPORT_READ/WRITE {port, data} (Xen 4.17's hvmtrace_io_assist): the port and
      // direction from the qualification; an OUT's data is RAX's low bytes (an IN's is
      // its result, free; a string instruction's has no data word).
      const bool In = R.Event == XT_EV_IoportRead;
      if (Basic != kIoReason || R.NumWords < 1 || R.Words[0] != ioPort(E.Qual) ||
          In != ioIsIn(E.Qual))
        return Check(false, "port or direction differs from the exit qualification");
      Check(In || ioIsString(E.Qual) || R.NumWords < 2 || !Regs ||
                R.Words[1] == outData(Rax, ioSize(E.Qual)),
            "the OUT's data differs from RAX at the exit");
      break;
    }
    case XT_EV_Cpuid:
      // CPUID {leaf, sub-leaf, eax, ebx, ecx, edx} (Xen 4.13 on; before: no sub-leaf):
      // the leaf and sub-leaf from EAX and ECX; the answer is Xen's (free).
      Check(Basic == kCpuidReason && (!Regs || (R.Words[0] == cpuidLeaf(Rax) &&
                                                (R.NumWords < 6 ||
                                                 R.Words[1] == cpuidSubleaf(Rcx)))),
            "not a CPUID exit, or the leaf or sub-leaf differs from EAX/ECX at the exit");
      break;
    case XT_EV_MsrRead:
      // MSR_READ {msr, value low, value high}: the index from ECX; the value is the
      // result (free).
      Check(Basic == kRdmsrReason && (!Regs || R.Words[0] == msrIndex(Rcx)),
            "not an RDMSR exit, or the MSR differs from ECX at the exit");
      break;
    case XT_EV_MsrWrite:
      // MSR_WRITE {msr, value low, value high}: ECX, and EDX:EAX.
      Check(Basic == kWrmsrReason &&
                (!Regs || (R.Words[0] == msrIndex(Rcx) &&
                           (uint64_t(R.Words[2]) << 32 | R.Words[1]) == wrmsrValue(Rax, Rdx))),
            "not a WRMSR exit, or the MSR or value differs from ECX and EDX:EAX at the exit");
      break;
    case XT_EV_Vmmcall:
      // VMMCALL {eax}: after a VMCALL exit. Its EAX is free: the ground truth records the
      // registers only for the exits listed at GT_VMEXIT_REGS (trace/events.def).
      Check(Basic == kVmcallReason, "not a VMCALL exit");
      break;
    case XT_EV_CrRead:
    case XT_EV_CrRead64:
    case XT_EV_CrWrite:
    case XT_EV_CrWrite64: {
      // Control-register accesses: bits 3:0 CR number, bits 5:4 type (0 to CR, 1 from),
      // bits 11:8 the general register. A MOV to CR's value (Xen 4.17's hvm_mov_to_cr
      // traces the register's whole value) is the register's at the exit when that is
      // RAX, RCX or RDX (GT_VMEXIT_REGS); from another register, and a MOV from CR's
      // value (the result), it is free.
      const uint64_t Type = R.Event == XT_EV_CrRead || R.Event == XT_EV_CrRead64 ? 1 : 0;
      if (Basic != kCrReason || R.NumWords < 1 || R.Words[0] != (E.Qual & 15) ||
          ((E.Qual >> 4) & 3) != Type)
        return Check(false, "CR number or access type differs from the exit qualification");
      const unsigned Gpr = unsigned(E.Qual >> 8) & 15;
      const bool Wide = R.Event == XT_EV_CrWrite64;
      const uint64_t Value = Wide && R.NumWords >= 3 ? word64(R, 1)
                             : R.NumWords >= 2       ? R.Words[1]
                                                     : 0;
      const uint64_t Reg = Wide ? E.Gpr[Gpr < 3 ? Gpr : 0] : uint32_t(E.Gpr[Gpr < 3 ? Gpr : 0]);
      Check(Type == 1 || Gpr >= 3 || !Regs || R.NumWords < (Wide ? 3u : 2u) || Value == Reg,
            "the value written differs from the register at the exit");
      break;
    }
    case XT_EV_Npf:
      // NPF {gpa, mfn, qualification, p2m type} (Xen 4.17's ept_handle_violation): the
      // guest-physical address (GT_VMEXIT_ADDR) and the exit qualification's low 32 bits
      // (SDM Vol. 3C, "Exit Qualification for EPT Violations"); the frame and the p2m type
      // are Xen's own (free).
      Check(Basic == kEptViolationReason && R.NumWords == 6 && word64(R, 0) == E.Gpa &&
                R.Words[4] == uint32_t(E.Qual),
            "not an EPT violation, or the guest-physical address or qualification differs");
      break;
    case XT_EV_IomemRead:
    case XT_EV_IomemWrite:
    case XT_EV_IomemRead64:
    case XT_EV_IomemWrite64: {
      // IOMEM_READ/WRITE {address, data} (Xen 4.17's hvmtrace_io_assist, 64-bit forms for
      // addresses above 4 GiB): an access Xen's emulator made to emulated MMIO, after an
      // EPT violation or misconfiguration. The exit's first such access is the one that
      // faulted: its address is the exit's guest-physical address. Later ones (a string
      // instruction's) and the data (a load's result; a store's source register, which
      // the ground truth does not record for these exits) are free.
      const bool Wide = R.Event == XT_EV_IomemRead64 || R.Event == XT_EV_IomemWrite64;
      const uint64_t Addr = Wide ? (R.NumWords >= 2 ? word64(R, 0) : ~uint64_t(0))
                                 : (R.NumWords >= 1 ? R.Words[0] : ~uint64_t(0));
      const bool First = Window[R.Cpu].Iomem++ == 0;
      Check((Basic == kEptViolationReason || Basic == kEptMisconfigReason) &&
                (!First || Addr == E.Gpa),
            "not after an EPT violation or misconfiguration, or the first access's address "
            "differs from the exit's guest-physical address");
      break;
    }
    case XT_EV_Intr:
      // INTR {vector} (Xen 4.17's vmx_do_extint): an external interrupt's vector, from the
      // VM-exit interruption information (GT_VMEXIT_EVENT; SDM Vol. 3C, "Information for
      // VM Exits Due to Vectored Events").
      Check(Basic == kExternalInterruptReason && R.NumWords == 1 &&
                (E.IntrInfo & kIntrValid) && R.Words[0] == (E.IntrInfo & 0xff),
            "not an external-interrupt exit, or the vector differs from the exit's");
      break;
    case XT_EV_Hlt:
      // HLT {pending} (Xen 4.17's hvm_hlt, after the vCPU blocked): after an HLT exit;
      // whether the vCPU is already runnable again is Xen's scheduler's state (free).
      Check(Basic == kHltReason, "not an HLT exit");
      break;
    case XT_EV_Clts:
    case XT_EV_Lmsw:
    case XT_EV_Lmsw64: {
      const uint64_t Type = R.Event == XT_EV_Clts ? 2 : 3;
      Check(Basic == kCrReason && ((E.Qual >> 4) & 3) == Type,
            "access type differs from the exit qualification");
      break;
    }
    case XT_EV_InjVirq:
    case XT_EV_IntrWindow:
      xenInjectionRecord(R);
      break;
    default:
      break;
    }
  }

  /// Without slot watching: Xen's INJ_VIRQ and INTR_WINDOW against the CPU's next VM
  /// entry, whose VM-entry interruption information (GT_VMENTRY; SDM Vol. 3C, "VM-Entry
  /// Controls for Event Injection": bits 7:0 vector, 10:8 type, 31 valid) is what Xen
  /// wrote to the VMCS before the record. Xen 4.17's vmx_intr_assist writes INJ_VIRQ
  /// {vector, fake 0} when it injects an external interrupt through that field (with
  /// virtual-interrupt delivery it writes none), and vmx_enable_intr_window INTR_WINDOW
  /// {vector waiting, its source, the vector already being injected or all ones} when it
  /// asks for an interrupt-window exit. Both are written on the way to a VM entry, inside
  /// an exit or before the vCPU's first entry on the CPU, so they are not required to
  /// follow an exit. The waiting vector and its source are Xen's own (free).
  void xenInjectionRecord(const TraceRecord &R) {
    const std::optional<GtEvent> Next = nextTransition(R.Cpu);
    if (!Res.Ok)
      return;
    const auto bad = [&](const std::string &Why) {
      fail(fmt::format("cpu{}: {} at offset {:#x}: {}", R.Cpu, formatRecord(R, 0), R.Offset,
                       Why));
    };
    if (!Next || Next->IsExit || Next->IsFail)
      return bad("no VM entry of the CPU follows it");
    const uint32_t Inj = Next->InjInfo;
    if (R.Event == XT_EV_InjVirq) {
      if (R.NumWords != 2 || R.Words[0] > 0xff || R.Words[1] != 0 ||
          (Inj & 0x800007ffu) != (kIntrValid | R.Words[0]))
        return bad(fmt::format("the next VM entry injects {:#x} (interruption information), "
                               "not external interrupt {:#x}",
                               Inj, R.Words[0]));
    } else {
      const uint32_t Queued = (Inj & kIntrValid) ? Inj & 0xff : 0xffffffffu;
      if (R.NumWords != 3 || R.Words[0] > 0xff || R.Words[2] != Queued)
        return bad(fmt::format("the next VM entry injects {:#x} (interruption information): "
                               "its vector, or all ones when none, must be the third word",
                               Inj));
    }
    ++cpu(R.Cpu).HandlerRecords;
  }

  void strictHandlerRecord(const TraceRecord &R) {
    CpuCheck &C = cpu(R.Cpu);
    const GtEvent &X = LastExit[R.Cpu]; // R.Cpu is known: nothing below resizes LastExit
    if (!X.IsExit)
      return fail(fmt::format("cpu{}: {} at offset {:#x} is not inside an exit", R.Cpu,
                              formatRecord(R, 0), R.Offset));
    const Ordinal Nth{"exit", C.Exits};
    if (R.HasTsc)
      return fail(versus(R, X, Nth + ": a handler record carries a TSC"));
    SlotArray S;
    const GtEvent *Entry = lookAhead(R.Cpu, &S);
    uint32_t Event = 0;
    WordList W;
    std::string Why;
    if (R.Event == XT_EV_InjExc || R.Event == XT_EV_InjVirq) {
      if (!injectionRecord(Entry, Event, W) || Window[R.Cpu].Inj)
        return fail(versus(R, X, Nth + ": " + findEvent(R.Event)->Name +
                                     ", and the entry injects no such event"));
      Window[R.Cpu].Inj = true;
      // The interrupt an earlier INTR_WINDOW said was waiting is the one injected now.
      if (Event == XT_EV_InjVirq && Promised[R.Cpu] >= 0) {
        if (W[0] != uint32_t(Promised[R.Cpu]))
          return fail(versus(R, X, fmt::format("{}: INJ_VIRQ of vector {:#x}; INTR_WINDOW "
                                               "said vector {:#x} was waiting",
                                               Nth, W[0], Promised[R.Cpu])));
        Promised[R.Cpu] = -1;
      }
    } else if (R.Event == XT_EV_IntrWindow) {
      // Written when the hypervisor opens the interrupt window: the pending vector and its
      // source are its own (trace/check.h); the third word is the event the entry injects
      // instead, or all ones. It comes before the injection record, once, and never when
      // the entry injects an external interrupt (that would have been the one waiting).
      const bool Injects = Entry && (Entry->InjInfo & kIntrValid);
      if (Window[R.Cpu].IntrWindow || Window[R.Cpu].Inj ||
          (Injects && ((Entry->InjInfo >> 8) & 7) == 0))
        return fail(versus(R, X, Nth + ": INTR_WINDOW where the interrupt window cannot be "
                                       "waiting"));
      Window[R.Cpu].IntrWindow = true;
      Event = XT_EV_IntrWindow;
      // The vector waiting must be the next external interrupt the CPU's entries inject
      // (checked there, and at the guest's end: none may be left waiting); a vector
      // already waiting must not change. The source is free (kFreeFields).
      const uint32_t Vector = R.NumWords > 0 ? R.Words[0] : 0;
      if (Vector > 0xff || (Promised[R.Cpu] >= 0 && Vector != uint32_t(Promised[R.Cpu])))
        return fail(versus(R, X, fmt::format("{}: INTR_WINDOW for vector {:#x}, and vector "
                                             "{:#x} is waiting",
                                             Nth, Vector, Promised[R.Cpu])));
      Promised[R.Cpu] = int(Vector);
      W = {Vector, R.NumWords > 1 ? R.Words[1] : 0,
           Injects ? (Entry->InjInfo & 0xff) : ~0u};
    } else {
      if (Window[R.Cpu].Handler || Window[R.Cpu].Inj || Window[R.Cpu].IntrWindow)
        return fail(versus(R, X, Nth + ": a second handler record, or one after INTR_WINDOW, "
                                       "INJ_EXC or INJ_VIRQ"));
      ++Window[R.Cpu].Handler;
      if (!expectedHandlerRecord(X, Entry, S, Event, W, Why))
        return fail(versus(R, X, Nth + ": the exit calls for no handler record"));
      if (!Why.empty())
        return fail(versus(R, X, Nth + ": " + Why));
    }
    if (R.Event != Event)
      return fail(versus(R, X, fmt::format("{}: the record should be {}", Nth,
                                           findEvent(Event) ? findEvent(Event)->Name : "?")));
    if (R.NumWords != W.size())
      return fail(versus(R, X, fmt::format("{}: {} words, the record has {}", Nth,
                                           R.NumWords, W.size())));
    for (unsigned I = 0; I < W.size(); ++I)
      if (R.Words[I] != W[I])
        return fail(versus(R, X, fmt::format("{}: word {} is {:#x}; the slots {} and the "
                                             "guest registers give {:#x}",
                                             Nth, I, R.Words[I], slotsText(S), W[I])));
    ++C.HandlerRecords;
  }

  void xen30Exit(const TraceRecord &R) {
    CpuCheck &C = cpu(R.Cpu);
    for (unsigned I = 0; I < XT30_ITEMS; ++I)
      if (R.Items[I])
        return fail(fmt::format("cpu{}: malformed {} at offset {:#x}: its items must be 0",
                                R.Cpu, formatRecord(R, 0), R.Offset));
    const GtEvent *P = pull(R.Cpu);
    if (!P)
      return fail(missing(R, "VM exit"));
    // Kept (takeTsc reads on): once the check fails, nothing reads it again.
    const GtEvent &E = LastExit[R.Cpu] = *P;
    const Ordinal Nth{"exit", C.Exits + 1};
    if (!E.IsExit)
      return fail(versus(R, E, Nth + " is a VM entry in the ground truth"));
    if (R.Tsc < E.Rec.Tsc)
      return fail(versus(R, E, Nth + ": the hypervisor's TSC is before the VM exit"));
    if (Strict && !takeTsc(R, Nth, false))
      return;
    C.ExitLag.add(R.Tsc - E.Rec.Tsc);
    ++C.Exits;
  }

  /// The slots of the exit before a xen-3.0 entry record against its ground truth.
  void xen30Slots(const TraceRecord &R, const GtEvent &Exit, CpuCheck &C) {
    const Ordinal Nth{"exit", C.Exits};
    const uint64_t *S = R.Items, Q = Exit.Qual;
    if (S[0] != Exit.Reason)
      return fail(versus(R, Exit, Nth + ": the exit reason in slot 0 differs"));
    bool Compared = true, Good = true;
    switch (Exit.Reason) {
    case kIoReason:
      // Exit qualification for I/O instructions: bits 2:0 size - 1, bit 3 direction (1 =
      // IN), bits 31:16 port.
      Good = S[1] == ((Q >> 16) & 0xffff) && S[2] == ((Q >> 3) & 1) && S[3] == (Q & 7) + 1;
      break;
    case kCrReason:
      // Control-register accesses: bits 3:0 CR number, 5:4 access type, 11:8 register.
      Good = S[1] == ((Q >> 4) & 3) && S[2] == (Q & 15) && S[3] == ((Q >> 8) & 15) &&
             S[4] == Q;
      break;
    case kExceptionReason:
      Good = S[4] == Q;
      break;
    default:
      Compared = Strict;
    }
    if (!Good)
      return fail(versus(R, Exit, Nth + ": slots 1-4 differ from the exit qualification"));
    if (Compared)
      ++C.HandlerRecords;
  }

  void xen30Entry(const TraceRecord &R) {
    if (Strict) {
      const Ordinal Nth{"entry", cpu(R.Cpu).Entries + 1};
      if (!takeTsc(R, Nth, true))
        return;
      // The record carries the slots as its RDTSC saw them.
      const SlotArray Have = slotsOf(R.Cpu);
      for (unsigned I = 0; I < kSlots; ++I)
        if (R.Items[I] != Have[I])
          return fail(fmt::format("cpu{}: {}: {} at offset {:#x}: item {} is {:#x}, the "
                                  "trace slots held {}",
                                  R.Cpu, Nth, formatRecord(R, 0), R.Offset, I, R.Items[I],
                                  slotsText(Have)));
      const GtEvent *Next = lookAhead(R.Cpu, nullptr);
      if (LastExit[R.Cpu].IsExit) {
        closeWindow(R, Next);
      } else if (Have != SlotArray{}) {
        return fail(fmt::format("cpu{}: {}: the launch's slots {} are not the boot value 0",
                                R.Cpu, Nth, slotsText(Have)));
      }
      if (!Res.Ok)
        return;
      expectReset(R);
      if (!Res.Ok)
        return;
    }
    const GtEvent *E = pairEntry(R);
    if (!E)
      return;
    if (LastExit[R.Cpu].IsExit) {
      xen30Slots(R, LastExit[R.Cpu], cpu(R.Cpu));
      if (!Res.Ok)
        return;
    }
    entryPaired(R, *E);
  }

  void xen30Record(const TraceRecord &R) {
    Xen30 = true;
    switch (R.Event) {
    case XT30_EV_VmxVmexit:
      return xen30Exit(R);
    case XT30_EV_VmxVmentry:
      return xen30Entry(R);
    case XT30_EV_LostRecords:
      return fail(fmt::format("cpu{}: the hypervisor lost {} records (LOST_RECORDS at "
                              "offset {:#x}); nothing after it can be paired",
                              R.Cpu, R.Items[0], R.Offset));
    default:
      if (Strict)
        return fail(fmt::format("cpu{}: {} at offset {:#x} is no record of this hypervisor's "
                                "exits", R.Cpu, formatRecord(R, 0), R.Offset));
      return; // an id the 2006 design did not write for VMX exits: nothing to pair
    }
  }

  void hypervisorRecord(const TraceRecord &R) {
    if (eventClass(R.Event) == XT_CLASS_GroundTruth)
      return wrongKind(fmt::format("the hypervisor's trace holds a ground-truth record ({} at "
                                   "offset {:#x}): it is vmxsim's ground truth, not a "
                                   "hypervisor's trace (the order is: trace check HV GT)",
                                   formatRecord(R, 0), R.Offset));
    // The ground truth says first whether it watched trace slots (GT_SLOT_LAYOUT, its
    // first record): read up to its first item before pairing anything.
    if (!GtPrimed) {
      GtPrimed = true;
      readGt(0); // GT_SLOT_LAYOUT is CPU 0's first record
      if (!Res.Ok)
        return;
    }
    cpu(R.Cpu);
    if (Strict && R.Cpu < Ended.size() && Ended[R.Cpu])
      return fail(fmt::format("cpu{}: {} at offset {:#x} follows the guest's end", R.Cpu,
                              formatRecord(R, 0), R.Offset));
    if (R.Flavour == TraceFlavour::Xen30)
      return xen30Record(R);
    switch (R.Event) {
    case XT_EV_VmxExit:
    case XT_EV_VmxExit64:
      if (R.NumWords != (R.Event == XT_EV_VmxExit64 ? 3 : 2) || !R.HasTsc)
        return fail(fmt::format("cpu{}: malformed {} at offset {:#x}", R.Cpu,
                                formatRecord(R, 0), R.Offset));
      if (Strict && LastExit[R.Cpu].IsExit)
        return fail(fmt::format("cpu{}: {} at offset {:#x}: exit {} has no entry record",
                                R.Cpu, formatRecord(R, 0), R.Offset, cpu(R.Cpu).Exits));
      return exitRecord(R, R.Event == XT_EV_VmxExit64);
    case XT_EV_VmEntry:
      if (!R.HasTsc)
        return fail(fmt::format("cpu{}: VMENTRY without TSC at offset {:#x}", R.Cpu,
                                R.Offset));
      return entryRecord(R);
    case XT_EV_LostRecords:
      return lostRecords(R);
    case XT_EV_RunstateRunnableToRunning:
    case XT_EV_RunstateRunningToOffline:
      if (Strict)
        return runstateRecord(R);
      return;
    default:
      if (Strict && eventClass(R.Event) != XT_CLASS_Hvm)
        return fail(fmt::format("cpu{}: {} at offset {:#x} is no record of this hypervisor's "
                                "exits", R.Cpu, formatRecord(R, 0), R.Offset));
      return handlerRecord(R);
    }
  }

  /// The CPU's next VM exit or entry attempt in the ground truth, not consumed (a copy:
  /// the queue may grow); none at the end.
  std::optional<GtEvent> nextTransition(uint16_t N) {
    for (size_t I = 0;; ++I) {
      while (I >= Pending[N].size())
        if (!readGt(N))
          return std::nullopt;
      if (Pending[N][I].Kind == GtKind::Transition)
        return Pending[N][I];
    }
  }

  /// LOST_RECORDS {count, who, first_tsc}: the hypervisor dropped records from first_tsc
  /// until this record's TSC. Records of VM exits are written inside exit windows (a VM
  /// exit's record after the exit, its handler records and the next entry's record
  /// before that entry), so the loss is harmless when it lies outside every window of the
  /// CPU: no exit is open (every exit so far has had its entry, the last one
  /// successful) and the CPU's next transition in the ground truth comes after this
  /// record. That is the case of a Xen traced from boot, whose buffers fill before its
  /// first HVM guest starts (docs/xen-trace.md). Anything else ends the check: nothing
  /// after it could be paired. With slot watching every record is accounted for, so
  /// there a loss always fails.
  void lostRecords(const TraceRecord &R) {
    auto lost = [&](const char *Why) {
      fail(fmt::format("cpu{}: the hypervisor lost {} records (LOST_RECORDS at offset "
                       "{:#x}){}; nothing after it can be paired",
                       R.Cpu, R.Words[0], R.Offset, Why));
    };
    if (Strict || !R.HasTsc || R.NumWords < 4)
      return lost("");
    if (LastExit[R.Cpu].IsExit || LastEntryFailed[R.Cpu])
      return lost(" inside an exit window");
    const uint64_t First = word64(R, 2);
    if (First > R.Tsc)
      return lost(" with its first loss after the record");
    const std::optional<GtEvent> Next = nextTransition(R.Cpu);
    if (Next && Next->Rec.Tsc <= R.Tsc)
      return lost(" after a VM transition it may hold");
    ++Res.LostOutsideExits;
    Res.LostRecords += R.Words[0];
  }

  /// Per CPU, the records seen inside its open exit (with slot watching).
  struct WindowState {
    unsigned Handler = 0;
    unsigned Iomem = 0; ///< IOMEM_* records so far (without slot watching)
    bool Inj = false;
    bool IntrWindow = false;
  };
  /// Per CPU, the vector the last INTR_WINDOW said was waiting, -1 when none is.
  std::vector<int> Promised;
  /// Per CPU, with slot watching: the guest's general registers as the ground truth's
  /// GT_VMEXIT_REGS, GT_VMENTRY_REGS and GT_GPR records left them so far, and the
  /// register of its open CR-access exit (harness/ground_truth_link.h keeps the same).
  struct GprFile {
    uint64_t Value[16] = {};
    uint16_t Known = 0; ///< bit n: register n was recorded
    int CrReg = -1;
    /// The RIP a GT_RESUME stands for, while it may come (right after an exit).
    uint64_t ResumeRip = 0;
    bool ResumeOpen = false;
    void set(unsigned Reg, uint64_t V) {
      Value[Reg] = V;
      Known = uint16_t(Known | 1u << Reg);
    }
  };
  std::vector<GprFile> Regs;

  TraceReader &Hv, &Gt;
  CheckResult Res;
  std::vector<CpuCheck> Cpus;
  std::vector<GtQueue> Pending;
  std::vector<GtEvent> LastExit;
  std::vector<bool> LastEntryFailed; ///< per CPU: its last entry attempt failed
  std::vector<WindowState> Window;
  std::vector<bool> Ended;
  /// Per owner CPU: its trace slots as the ground truth's stores left them so far.
  std::vector<SlotArray> Slots;
  /// The ground truth watched the hypervisor's trace slots (GT_SLOT_LAYOUT): every word
  /// is proven, not only the pairing.
  bool Strict = false;
  bool Xen30 = false; ///< the hypervisor's trace is a xen-3.0 one (slots reset to 9)
  bool GtPrimed = false; ///< the ground truth's first item has been read
};

std::string lagText(const LagStats &L) {
  if (!L.Count)
    return "-";
  return fmt::format("{}/{:.1f}/{}", L.Min, double(L.Total) / double(L.Count), L.Max);
}

/// The fields no check reads (FreeField): the one table of them. Every other bit of a
/// record is proven, by the pairing, the ground truth's slot stores and RDTSCs, or the
/// reader (headers, word counts, CPU windows).
constexpr FreeField kFreeFields[] = {
    {true, 0, 16, 4,
     "xen-3.0: the 32 bits after the event id (bytes 12-15 of Xen 3.0.3's struct t_rec "
     "on a 64-bit hypervisor: padding the compiler puts there to align data[0]). Xen "
     "never wrote them, so they hold whatever the ring held; the reader skips them"},
    {false, XT_EV_IntrWindow, 8, 4,
     "INTR_WINDOW's second word, the interrupt source: the hypervisor's own classification "
     "of where the waiting interrupt comes from (Xen's enum hvm_intsrc); no architectural "
     "state names it (the untimed record's words start at byte 4)"},
};

} // namespace

std::span<const FreeField> freeFields() { return kFreeFields; }

CheckResult checkAgainstGroundTruth(TraceReader &Hypervisor, TraceReader &GroundTruth) {
  return Checker(Hypervisor, GroundTruth).run();
}

void printCheck(const CheckResult &R, std::FILE *Out) {
  if (R.Ok) {
    uint64_t Exits = 0, Entries = 0;
    for (const CpuCheck &C : R.Cpus) {
      Exits += C.Exits;
      Entries += C.Entries;
    }
    fmt::print(Out, "match: {} exits and {} entries on {} CPU(s) agree with the ground "
                    "truth ({} hypervisor records, {} ground-truth records)\n",
               Exits, Entries, R.Cpus.size(), R.HypervisorRecords, R.GroundTruthRecords);
    if (R.LostOutsideExits)
      fmt::print(Out, "{} LOST_RECORDS ({} records) outside every exit window: nothing of "
                      "the exits lost\n",
                 R.LostOutsideExits, R.LostRecords);
  } else if (!R.ReadError && !R.WrongKind) {
    fmt::print(Out, "mismatch: {}\n", R.Problem);
  }
  for (const CpuCheck &C : R.Cpus)
    fmt::print(Out,
               "cpu{}: {} exits, {} entries, {} handler records checked; cycles from VM "
               "exit to VMX_EXIT min/mean/max {}; from VMENTRY to VM entry {}\n",
               C.Cpu, C.Exits, C.Entries, C.HandlerRecords, lagText(C.ExitLag),
               lagText(C.EntryLead));
}

} // namespace vmxsim::trace
