// One logical processor: architectural state, software TLB, decoded-block cache, virtual
// clock and the run loop. Instruction semantics live in free functions in cpu/exec_*.cpp.
#pragma once
#include "cpu/decoded_insn.h"
#include "cpu/observer.h"
#include "cpu/registers.h"
#include "cpu/status.h"
#include "mmu/access.h"
#include "mmu/io_bus.h"
#include "mmu/phys_mem.h"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <type_traits>

namespace vmxsim {

struct CpuModel;
struct MsrState;
struct VmxState;
class InterruptSource;


/// An exception waiting to be delivered (or turned into a VM exit by the VMX layer).
struct PendingEvent {
  uint8_t Vector = 0;
  bool HasErrorCode = false;
  uint32_t ErrorCode = 0;
  uint64_t FaultAddr = 0; ///< #PF linear address, loaded into CR2 at delivery
};

/// Why Cpu::run returned.
enum class StopReason : uint8_t {
  InsnLimit,     ///< the retired-instruction budget ran out
  Deadline,      ///< the cycle deadline of this run call passed
  Halted,        ///< HLT (or shutdown state) with no event that can wake it
  Shutdown,      ///< triple fault: the processor entered shutdown
  StopRequested, ///< a device (isa-debug-exit, shutdown port) asked the machine to stop
  Unimplemented, ///< the guest executed something vmxsim does not implement
};

/// An interrupt controller as the processor sees it: the INTR line and the INTA cycle.
class InterruptSource {
public:
  virtual ~InterruptSource() = default;
  virtual bool intrPending() = 0;
  /// The interrupt acknowledge cycle: returns the vector and updates the controller.
  virtual uint8_t acknowledge() = 0;
};

/// The local APIC's MSR side (x2APIC registers 0x800-0x8ff and IA32_TSC_DEADLINE), for
/// rows of cpu/msrs.def whose Write kind is Apic. Implemented by the machine's local APIC
/// (harness/devices/local_apic.h); a CPU without one (a bare test CPU) treats those rows
/// as plain storage.
class ApicHook {
public:
  virtual ~ApicHook() = default;
  virtual Status readMsr(Cpu &C, uint32_t Index, uint64_t &Value) = 0;
  virtual Status writeMsr(Cpu &C, uint32_t Index, uint64_t Value) = 0;
};

/// Software TLB entry: a linear page mapped straight to host memory. Tag is the linear
/// page address | the TLB generation << 1 | 1 for a user-mode (CPL 3) access; an empty
/// entry holds kTlbEmpty (never a valid tag: generations stop below 0x7ff).
struct TlbEntry {
  uint64_t Tag;
  uintptr_t Addend; ///< host pointer = linear address + Addend
  uint64_t Pfn;     ///< physical page frame number (host-physical under EPT)
};
inline constexpr unsigned kTlbEntries = 256;

/// Cached guest-physical -> host-physical translation of one 4 KiB page under EPT
/// ("guest-physical mappings", SDM Vol. 3C, "Information That May Be Cached"), valid in
/// the TLB context generation it was filled in. A TLB miss under EPT walks the guest
/// page tables, and each of their entries needs a guest-physical translation: this
/// cache makes those hits instead of full EPT walks.
struct EptCacheEntry {
  uint64_t GpaPage;  ///< guest-physical page address | 1 (0 = empty)
  uint64_t HpaPage;
  uint16_t Generation;
  uint8_t Rights;
  uint8_t MemType;
  uint8_t PageLevel;
  bool IgnorePat;
  bool AccessedDirty; ///< EPTP[6] when filled
  bool DirtyDone;     ///< the leaf's dirty flag is set (or A/D is off)
};
inline constexpr unsigned kEptCacheEntries = 512;
inline constexpr uint64_t kTlbEmpty = ~uint64_t(0);

/// Decoded-instruction cache, organised as blocks of straight-line code keyed by the
/// physical address of their first byte and the decode mode (STYLE 2.2).
inline constexpr unsigned kMaxBlockInsns = 32;
struct Block {
  uint64_t Pa;
  /// PhysMem code generation of the page when decoded or last revalidated; the block is
  /// current while it equals the page's, else while none of its Lines was written since
  /// (mmu/phys_mem.h, "Decoded code and the writes that invalidate it").
  uint64_t Gen;
  uint64_t Lines; ///< the page's 64-byte lines holding the block's instruction bytes
  /// (cache epoch << 8) | CodeMode: a block is valid only in the epoch it was decoded in,
  /// so flushing the cache is one increment, and a zero-filled block is never valid.
  uint32_t Key;
  uint8_t NumInsns;
  DecodedInsn Insns[kMaxBlockInsns];
};
static_assert(std::is_trivially_copyable_v<Block>, "blocks live in calloc'd memory");
inline constexpr unsigned kBlockCacheEntries = 4096;
/// Direct-mapped slot of the block starting at physical address Pa.
inline unsigned blockSlot(uint64_t Pa) {
  return unsigned((Pa * 0x9E3779B97F4A7C15ull) >> (64 - 12)) & (kBlockCacheEntries - 1);
}


class Cpu {
public:
  Cpu(PhysMem &Mem, IoBus &Io, const CpuModel &Model, unsigned Id = 0);
  ~Cpu();
  Cpu(const Cpu &) = delete;
  Cpu &operator=(const Cpu &) = delete;

  /// Power-on/RESET state (SDM Vol. 3A, Processor State After Reset).
  void reset();
  /// INIT (SDM Vol. 3A, table "IA-32 and Intel 64 Processor States Following Power-up,
  /// Reset, or INIT"): RESET's register state, but the x87/SSE state, the MSRs (and so
  /// the TSC, MTRRs and IA32_APIC_BASE) keep their values. The caller (the machine's
  /// local APIC) then puts the processor in wait-for-SIPI unless it is the BSP.
  void init();
  /// Executes until an instruction budget or virtual-cycle deadline is reached, or the
  /// processor stops for another StopReason.
  StopReason run(uint64_t MaxInsns, uint64_t UntilCycle = ~uint64_t(0));

  // --- state (public: plain data, as in Blink/Bochs; functions keep the invariants) ---
  CpuState S;
  PhysMem &Mem;
  IoBus &Io;
  const CpuModel &Model;
  std::unique_ptr<MsrState> Msrs;
  /// VMX operation (cpu/vmx/vmx_state.h): VMXON/current-VMCS pointers, cached VMCS.
  std::unique_ptr<VmxState> Vmx;
  /// In VMX non-root operation (hot-path copy; SDM Vol. 3C, "VMX Operation").
  bool NonRoot = false;
  InterruptSource *Intr = nullptr;
  /// The local APIC's MSR interface; null on a CPU without a local APIC.
  ApicHook *Apic = nullptr;
  CpuObserver *Observer = nullptr;
  /// Told of every VM exit, VM entry and VM-entry failure (cpu/observer.h): the
  /// ground truth listens here; null (one predictable branch) when nobody does.
  VmxTransitionObserver *Transitions = nullptr;
  /// Test-only injected bugs, so that a differential test can prove it catches a wrong
  /// result (harness/kvm/fuzz.h, FuzzOptions::InjectBtCarryBug). All off outside it.
  struct InjectedBugs {
    bool FlipBtCarry = false; ///< BT/BTS/BTR/BTC store the complement of CF
  } TestBugs;
  unsigned Id;
  /// All CPUs of the machine (including this one), for cross-CPU TLB shootdown of write
  /// mappings when a page starts holding code. Defaults to just this CPU.
  Cpu **Peers = &Self;
  unsigned NumPeers = 1;
  Cpu *Self = this;

  uint64_t Cycles = 0;  ///< virtual clock: the TSC before offsetting/scaling
  uint64_t Retired = 0; ///< retired instructions
  uint64_t RandomDraws = 0; ///< RDRAND/RDSEED values drawn (cpu/exec_random.cpp)
  /// Blocks decoded into the block cache (not reused from it): tests and benchmarks read
  /// it to see how often the cache misses or is invalidated.
  uint64_t BlocksDecoded = 0;
  /// The run loop leaves the current block when Cycles >= Deadline; anything that must
  /// be noticed at the next instruction boundary sets it to 0 (see breakBlock()).
  uint64_t Deadline = 0;
  PendingEvent Pending;
  bool Halted = false;
  bool InShutdown = false;
  /// STI / MOV SS blocking for one instruction (SDM Vol. 3A, Masking Maskable Hardware
  /// Interrupts): the Retired count at which the shadow ends.
  uint64_t ShadowUntil = 0;
  /// The shadow above was set by MOV SS/POP SS rather than STI ("blocking by MOV SS"
  /// vs "blocking by STI", SDM Vol. 3C, Interruptibility State; VMLAUNCH fails with
  /// error 26 under MOV SS blocking). Set by the MOV SS/POP SS and STI handlers.
  bool ShadowIsMovSs = false;
  bool NmiBlocked = false;
  bool NmiPending = false;
  /// Set by a nested fault while delivering an event, to detect #DF and triple faults.
  uint8_t DeliveryDepth = 0;
  StopReason LastStop = StopReason::InsnLimit;

  // --- TLB (per access type) ---
  TlbEntry TlbRead[kTlbEntries], TlbWrite[kTlbEntries], TlbFetch[kTlbEntries];
  /// Write mappings of pages holding decoded code, which TlbWrite never holds: only the
  /// store slow path (writeLinearSlow, mapRmwSlow) consults them, and it checks the bytes
  /// written against the page's code lines, so a store to data that shares a page with
  /// code costs a second lookup, not a page walk. Tagged and flushed like TlbWrite.
  TlbEntry TlbWriteCode[kTlbEntries];
  EptCacheEntry EptCache[kEptCacheEntries];
  void flushTlbPage(uint64_t La);
  /// Drops fast write mappings (TlbWrite) of a physical page that now holds decoded code.
  void dropWriteMappings(uint64_t Pfn);

  /// kBlockCacheEntries blocks plus one uncached scratch block, in zero-filled memory
  /// that the host commits only as blocks are used (a 64-CPU machine must not cost
  /// 64 x 6 MiB up front).
  struct FreeDeleter {
    void operator()(Block *P) const { std::free(P); }
  };
  struct FreeDeleter64 {
    void operator()(uint64_t *P) const { std::free(P); }
  };
  std::unique_ptr<Block, FreeDeleter> Blocks;
  uint32_t BlockKeyBase = 1u << 8; ///< current epoch << 8
  uint32_t blockKey() const { return BlockKeyBase | DecodeMode; }
  void flushDecodeCache();

  /// Ends the current block after this instruction (mode change, self-modifying code,
  /// new interrupt, device stop request).
  void breakBlock() { Deadline = 0; }

  /// Raises an exception: records it and returns Status::Fault.
  Status raise(uint8_t Vector) {
    Pending = PendingEvent{Vector, false, 0, 0};
    return Status::Fault;
  }
  Status raise(uint8_t Vector, uint32_t ErrorCode) {
    Pending = PendingEvent{Vector, true, ErrorCode, 0};
    return Status::Fault;
  }
  Status raiseGp(uint32_t ErrorCode = 0) { return raise(vec::GP, ErrorCode); }
  Status raiseUd() { return raise(vec::UD); }

  /// Mask of valid RIP bits in the current code size (IP/EIP wrap).
  uint64_t RipMask = 0xffff;
  /// Recomputes cached mode-derived values (RipMask, decode mode, TLB user bit) after a
  /// change to CR0, EFER, CS or RFLAGS.VM; ends the current block.
  void modeChanged();
  uint8_t DecodeMode = 0; ///< CodeMode of the current CS
  /// 1 when CPL is 3: the low bit of TLB tags for explicit accesses. Cached because every
  /// memory access needs it; modeChanged() recomputes it, so code that changes CS, SS,
  /// CR0.PE or RFLAGS.VM must call modeChanged().
  uint8_t UserTagBit = 0;
  /// TLB generation in tag bits 11:1. Each VPID context (VPID 0 = VMX root operation and
  /// non-root without VPID) owns one generation; flushing a context gives it a fresh one
  /// and switching context (VM entry/exit with VPID) selects its generation, both O(1).
  /// Entries of other contexts simply stop matching (SDM Vol. 3C, "Virtual-Processor
  /// Identifiers (VPIDs)": cached translations are associated with a VPID).
  /// TagLowUser/TagLowSupervisor are the low tag bits of an explicit (CPL-dependent)
  /// and an implicit supervisor access in the current context.
  uint16_t TlbGeneration = 1;
  uint16_t TagLowUser = 1u << 1, TagLowSupervisor = 1u << 1;
  uint16_t CurrentVpid = 0;
  /// Invalidates the cached translations of the current VPID context.
  void flushTlb();
  /// Invalidates the cached translations of one VPID context (INVVPID).
  void flushTlbVpid(uint16_t Vpid);
  /// Invalidates the cached translations of every context (INVEPT, INVVPID all-context).
  void flushTlbAllContexts();
  /// Makes Vpid the current context (VM entry with "enable VPID", VM exit to VPID 0).
  void switchTlbContext(uint16_t Vpid);
  /// EPT contexts: with EPT, a guest's translations are combined mappings tagged by
  /// (VPID, EP4TA) (SDM Vol. 3C, "Information That May Be Cached"), so each such pair
  /// owns a generation of its own, distinct from the VPID's linear-mapping context.
  /// TlbEptContext says the current context is one (CurrentEp4ta = EPTP bits 51:12).
  bool TlbEptContext = false;
  uint64_t CurrentEp4ta = 0;
  /// Makes (Vpid, EP4TA of Eptp) the current context (VM entry with "enable EPT").
  void switchTlbContextEpt(uint16_t Vpid, uint64_t Eptp);
  /// Invalidates every context derived from the EP4TA of Eptp (INVEPT single-context).
  void flushTlbEptp(uint64_t Eptp);

  /// What the guest executed that vmxsim does not implement (StopReason::Unimplemented).
  const char *UnimplementedWhat = nullptr;
  uint64_t UnimplementedRip = 0;
  Status unimplemented(const char *What) {
    UnimplementedWhat = What;
    UnimplementedRip = S.Rip;
    return Status::Unimplemented;
  }

private:
  /// Empties every TLB entry and forgets every context's generation (construction,
  /// RESET, generation wrap-around).
  void clearTlb();
  uint16_t allocTlbGeneration();
  uint16_t contextGeneration(uint16_t Vpid);
  void useGeneration(uint16_t Gen);
  /// Per-VPID generation: (epoch << 16) | generation, valid only in the current epoch.
  /// 64 K entries in zero-filled memory the host commits only for VPIDs in use.
  std::unique_ptr<uint64_t, FreeDeleter64> VpidGeneration;
  /// Generations of EPT contexts: a small direct-mapped table keyed by (VPID, EP4TA);
  /// losing a context to a collision only flushes it. Epoch 0 is never current.
  struct EptTlbContext {
    uint64_t Epoch;
    uint64_t Ep4ta;
    uint16_t Vpid;
    uint16_t Gen;
  };
  static constexpr unsigned kEptTlbContexts = 64;
  EptTlbContext EptContexts[kEptTlbContexts] = {};
  uint16_t eptContextGeneration(uint16_t Vpid, uint64_t Ep4ta);
  EptTlbContext &eptContextSlot(uint16_t Vpid, uint64_t Ep4ta);
  uint64_t TlbEpoch = 1;
  uint16_t NextTlbGeneration = 2;
  /// Executes blocks until the deadline, the instruction budget, or an event; true when
  /// the run must stop (Why says why).
  bool runBlocks(uint64_t InsnEnd, StopReason &Why);
  bool runBlockSlow(const DecodedInsn *I, const DecodedInsn *End, StopReason &Why);
  bool handleStatus(Status St, StopReason &Why);
};

/// Advances RIP past the instruction (the common tail of non-branch handlers).
inline Status next(Cpu &C, const DecodedInsn &I) {
  C.S.Rip = (C.S.Rip + I.Len) & C.RipMask;
  return Status::Ok;
}

} // namespace vmxsim
