// The processor's memory-management unit: one object that owns every per-CPU cache of
// translations and of decoded code, and the rules that keep them coherent. Everything
// else in the processor reaches guest memory through it (cpu/memory.h builds the
// instruction-level accesses on its lookups); the walkers it calls on a miss are
// processor-free (mmu/paging.h, mmu/ept.h) and the machine's physical memory, shared by
// all CPUs, is PhysMem (mmu/phys_mem.h).
//
// # The coherence contract
//
// ## What each cache maps
// - TLBs, one direct-mapped array per access kind (read, write, fetch) of kTlbEntries
//   slots: a linear page to a host pointer and its machine frame. The tag is the page
//   address | the context generation << 1 | 1 for a CPL-3 access, so an entry serves only
//   the context (VPID, or VPID and EP4TA under EPT) and privilege it was filled for, as
//   the SDM lets a TLB (SDM Vol. 3A, "Caching Translation Information"; Vol. 3C,
//   "Information That May Be Cached"). Only plain RAM is mapped, never MMIO; a write
//   entry exists only when a write with the same privilege is allowed and the A/D bits
//   were set by the walk that filled it. No entry maps a non-canonical page (under the
//   CR4.LA57 of its fill; changing LA57 flushes), so a hit implies the canonical check. Under SMAP, supervisor entries of user pages are
//   not filled (RFLAGS.AC changes without a flush).
// - Victim slots: slot ^ kTlbEntries/2 of the same array holds the entry a fill
//   displaced; only miss paths look there. They are ordinary entries for every rule below.
// - The interpreter's store fast paths test TlbWrite entries against writeTag, which is
//   the tag except while lockstep logs the interpreter's stores (StoreLog): then no entry
//   matches, and every store reaches translate, which serves it from the entry without
//   a walk, and writeLinearSlow, which logs it.
// - TlbWriteCode: write entries of pages holding decoded code, which TlbWrite never holds;
//   only store slow paths use them, and they tell PhysMem which bytes were written.
// - The guest-physical mapping cache (EPT): a guest-physical page to a machine page with
//   its EPT rights and memory type, valid in the generation it was filled in; it never
//   serves an access that needs an EPT A/D update or that its rights refuse (those walk).
// - The decoded-block cache: straight-line code keyed by the machine-physical address
//   of its first byte and the decode mode, valid in the cache epoch it was decoded in and
//   while PhysMem's code generation of its page (or of its own 64-byte lines) is unchanged.
// - Context generations: each VPID context and each (VPID, EP4TA) context owns a TLB
//   generation; an epoch forgets all of them at once.
//
// ## What invalidates them, and why that is enough
// - A guest write to decoded code (this CPU or another, any path: TLB store, slow path,
//   string fast path, A/D update, a loader's copy): PhysMem bumps the code generation
//   of the lines written, so every CPU's blocks of those lines stop matching at their
//   next lookup. Fast TLB stores cannot tell PhysMem, hence: when a page first holds
//   decoded code, every CPU drops its TlbWrite entries of that frame (blockDecoded, the
//   peers of setPeers); later write fills of the page go to TlbWriteCode. A store that
//   changes code also ends the current block (the next instruction is fetched anew: SDM
//   Vol. 3A, "Self-Modifying Code", "Cross-Modifying Code").
// - INVLPG: the whole current context is flushed (flushTlbPage): one slot per 4 KiB
//   page is cached, a large page may cover many, and a full flush is always allowed.
//   INVPCID of any type: the same (the TLB keeps no PCID tags).
// - MOV to CR0 (PG, WP, PE, CD), CR3 (unless CR4.PCIDE and bit 63), CR4 (paging bits),
//   IA32_EFER.NXE: flushTlb() gives the current context a fresh generation (O(1)).
// - INVVPID: the VPID's context and every (VPID, EP4TA) context of it (flushTlbVpid;
//   all-context: flushTlbAllContexts). INVEPT: every context of the EP4TA
//   (flushTlbEptp; global: flushTlbAllContexts). The guest-physical cache is tagged with
//   the TLB generation, so it goes with its context.
// - VM entry and VM exit: switchTlbContext/switchTlbContextEpt select the generation of
//   the new context (VPID 0 for root operation); without VPID, VM entry and exit flush
//   VPID 0's context, as the SDM requires.
// - A mode change (CPL, CS, CR0.PE, RFLAGS.VM): setUserMode() recomputes the CPL bit of
//   the tags; the decode mode is part of each block's key.
// - RESET and INIT (reset()), generation wrap-around and the block-key epoch wrap: every
//   entry is emptied.
// - Block links (Block::Links; chainedBlock, used by Cpu::runBlocks in 64-bit mode instead
//   of cachedBlock): a link records what cachedBlock returned at a linear address right
//   after its block ran to its end, with the fetch TLB tag of that lookup and a stamp,
//   ChainEpoch + PhysMem::codeWriteCount(). It is followed only when (1) the address is
//   the same, (2) so is the tag, i.e. the TLB generation (context: VPID, EP4TA, every
//   flush) and the CPL bit, (3) the stamp is unchanged, and (4) the primary fetch TLB slot
//   still holds that tag. ChainEpoch moves at every fetch TLB fill (the only way an
//   entry with a once-seen tag can come back with another frame), clearTlb (generations
//   restart), dropPageMappings, every access to a block slot for decoding (blockAt,
//   scratchBlock: the block may be refilled) and flushDecodeCache; codeWriteCount moves at
//   every write into decoded code, on any CPU. Links need no move at a fetch victim swap
//   or a change of the tags' low bits ((2) and (4) catch them); the translator's chain
//   cells add FetchChanges to the stamp (chainStamp), which moves at every fetch victim
//   swap (cachedBlock, translate), new TLB generation (useGeneration: context switches,
//   flushes), CPL change (setUserMode) and snapshot load: a cell whose stamp is
//   unchanged since it passed the full test skips (2) and (4) (cpu/jit/translator.cpp
//   emitChain: with the same address, the same tag bits and no change to the fetch
//   TLB's slots, both still hold). So when a link is followed, cachedBlock would have found
//   the same entry in its primary slot (nothing to swap) and the same current block in
//   the same slot: the link returns what the lookup would, with the same (no) side
//   effects. A decode-mode change needs nothing either: links serve 64-bit code only, and
//   the block key's mode is then always 64-bit; every CR0/CR4/EFER change that can change
//   a translation flushes (a new generation fails (2)).
// - The platform's A20 gate (PhysMem::a20Mask, SDM Vol. 3A "A20M#"): translate() ANDs
//   the mask into the physical address it fills an entry with (and the page walk into
//   every entry address), so a hit costs nothing; whoever changes the gate calls
//   flushTlbAllContexts() and flushDecodeCache() on every CPU before any of them runs
//   again (the machine's A20 gate does, harness/machine.cpp), and ends the current block.
//   VMXON and VMXOFF change whether the mask applies: VMXON needs the gate on (#GP in
//   A20M mode), so the mask is all-ones both before and after it; VMXOFF with the gate
//   off flushes as a gate change does.
// - Data breakpoints (cpu/debug.h): a linear page holding an armed data breakpoint is
//   never given a read, write or write-code entry, so its accesses take the slow paths
//   that check the breakpoints; arming a new page flushes every context
//   (debugRegistersChanged), which drops the entries filled before.
// - Watched memory (PhysMem::watchWrites, watchReads): a frame holding a write- or
//   read-watched range is never given a TlbWrite entry (its write mappings go to
//   TlbWriteCode, whose users check the ranges), and one holding a read-watched range no
//   TlbRead entry either, so its stores and reads take the slow paths that report them;
//   whoever adds a range drops the entries filled before (dropWriteMappings,
//   dropDataMappings). One slow path is short (writeWatchedPage, cpu/watched_store.h: the
//   explicit stores' miss path tries it first): a store through a TlbWriteCode entry into
//   a page that holds no decoded code (CodeLines 0, tested at each store) and no armed
//   data breakpoint (DataArmed clear), where the page's write-watched ranges are those
//   PhysMem listed at the watches' current epoch (PhysMem::watchEpoch, which moves at
//   every change of the ranges), so that its report is the one noteWrite would make.
//   It adds no TLB rule: it stores only where writeCodePage would, and leaves every
//   entry as writeCodePage leaves it; it compares the entry with writeTag, so while a
//   store log is open it takes nothing (every store reaches writeLinearSlow).
// Why it is enough: a TLB entry is used only when its tag matches the current context
// and privilege, every architectural event that may change a translation of that
// context gives it a fresh generation, and code changes are seen through PhysMem's
// generations, which every write path bumps.
#pragma once
#include "cpu/decoded_insn.h"
#include "cpu/status.h"
#include "mmu/access.h"
#include "mmu/ept.h"
#include "mmu/phys_mem.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>

namespace vmxsim {

class Cpu;
struct InlineTransitionRecords;

/// Software TLB entry: a linear page mapped straight to host memory. Tag is the linear
/// page address | the TLB generation << 1 | 1 for a user-mode (CPL 3) access; an empty
/// entry holds kTlbEmpty (never a valid tag: generations stop below 0x7ff).
struct TlbEntry {
  uint64_t Tag;
  uintptr_t Addend; ///< host pointer = linear address + Addend
  uint64_t Pfn;     ///< physical page frame number (host-physical under EPT)
  /// Pads the entry to 32 bytes: translated code finds a slot's entry with one shift and
  /// one mask of the address (cpu/jit/translator.cpp, emitTlbHit).
  uint64_t Unused;
};
static_assert(sizeof(TlbEntry) == 32);
inline constexpr unsigned kTlbEntries = 256;
inline constexpr uint64_t kTlbEmpty = ~uint64_t(0);

/// The victim slot of a direct-mapped TLB slot: where a fill moves the entry it displaces.
constexpr unsigned tlbVictimSlot(unsigned Slot) { return Slot ^ (kTlbEntries / 2); }

/// Cached guest-physical -> host-physical translation of one 4 KiB page under EPT
/// ("guest-physical mappings", SDM Vol. 3C, "Information That May Be Cached"), valid in
/// the TLB context generation it was filled in. A TLB miss under EPT walks the guest
/// page tables, and each of their entries needs a guest-physical translation: this
/// cache makes those hits instead of full EPT walks.
struct EptCacheEntry {
  uint64_t GpaPage; ///< guest-physical page address | 1 (0 = empty)
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

/// Decoded-instruction cache, organised as blocks of straight-line code keyed by the
/// physical address of their first byte and the decode mode (STYLE 2.2).
inline constexpr unsigned kMaxBlockInsns = 32;
struct Block;
/// A block's known successor (block chaining): the block cachedBlock returned at linear
/// address La, with fetch TLB tag Tag, right after the owning block ran to its end; valid
/// under the conditions of the contract above ("Block links"). A zero-filled link never
/// matches (the stamp is at least 1).
struct BlockLink {
  uint64_t La;
  uint64_t Tag;
  Block *Next;
  uint64_t Stamp;
};
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
  /// The translation cache (cpu/jit/translator.h): the block's host code, valid while
  /// JitStamp equals the translator's stamp (null: refused); entries counted toward the
  /// threshold; whether the code calls handlers (memory forms). decodeBlock zeroes them
  /// when it fills the slot, so a dropped block's translation is never reached.
  uint8_t JitCalls;
  uint16_t JitRuns;
  uint32_t JitStamp;
  /// 1: the block is one 64-bit instruction that crosses the end of its page (decodeBlock),
  /// current while its second page is still mapped by the fetch TLB to CrossPfn and
  /// holds the same bytes (CrossGen, CrossLines: as Gen and Lines for the first page).
  /// A link to it is followed only while that still holds (Cpu::runBlocks tests it; a
  /// translator's chain cell, only while its stamp is unchanged: docs/TRANSLATOR.md,
  /// "Page-crossing instructions").
  uint8_t Crosses;
  const void *JitCode;
  BlockLink Links[2]; ///< the last two successors (a branch's taken and fall-through)
  uint64_t CrossPfn, CrossGen, CrossLines;
  DecodedInsn Insns[kMaxBlockInsns];
};
static_assert(std::is_trivially_copyable_v<Block>, "blocks live in calloc'd memory");
/// The decoded-block cache holds 2^kBlockCacheBits blocks per CPU (1,648 bytes each). A
/// real system's code outgrows 4,096: Xen with its PV dom0's kernel and tool stack
/// decoded one instruction in four again in its last phase (docs/PERFORMANCE.md,
/// "The decoded-block cache's size").
inline constexpr unsigned kBlockCacheBits = 15;
inline constexpr unsigned kBlockCacheEntries = 1u << kBlockCacheBits;
/// Direct-mapped slot of the block starting at physical address Pa.
inline unsigned blockSlot(uint64_t Pa) {
  return unsigned((Pa * 0x9E3779B97F4A7C15ull) >> (64 - kBlockCacheBits));
}

/// Why lockstep's interpreter pass stopped without a result to compare (StoreLog).
enum class StoreLogRefusal : uint8_t {
  None,
  Device,        ///< an access outside plain RAM: MMIO, unassigned, the APIC-access page
  CodeOrWatched, ///< a store into lines holding decoded code or a watched range, or a
                 ///< read of a read-watched range: their bookkeeping is not undone
  VmExit,        ///< the access would cause a VM exit (an EPT violation, ...)
  Full,          ///< more stores than the log holds, or a store too large for it
  Count
};

/// The interpreter's stores while lockstep runs a block both ways (ExecMode::Lockstep,
/// Translator::lockstep in cpu/jit/translator.cpp): each store of the interpreter's pass,
/// with the bytes it replaced, so that the stores can be undone before the translated
/// pass and their bytes compared after it. While a log is open (Mmu::beginStoreLog), the
/// interpreter's TlbWrite hits all miss (Mmu::writeTag), so every store takes
/// writeLinearSlow, which logs it (Mmu::logStore) before it writes. Mmu::translate still
/// serves a write from the entry TlbWrite holds, without a walk, as a hit would have (a
/// mapping cached but not yet invalidated is used as the processor would use it). What
/// cannot be undone stops the pass before it happens (Status::Frozen with Refused set):
/// a device access, a store into code or a watched range, a VM exit. What the page walks
/// write (accessed and dirty flags, a PML entry) is left: the translated pass then finds
/// it done, as a single run would have done it once.
struct StoreLog {
  static constexpr unsigned kStores = 64;
  static constexpr unsigned kMaxStoreBytes = 16;
  struct Store {
    uint8_t *Host;
    uint64_t Pa;
    uint8_t Size;
    uint8_t Insn; ///< the block's instruction that made it
    uint8_t Old[kMaxStoreBytes];
    uint8_t New[kMaxStoreBytes]; ///< the bytes when the pass ended (Translator::lockstep)
  };
  /// Copies N <= kMaxStoreBytes bytes: the usual sizes as single moves (a memcpy of a
  /// variable size is a loop).
  static void copy(uint8_t *To, const uint8_t *From, unsigned N) {
    switch (N) {
    case 8: std::memcpy(To, From, 8); return;
    case 4: std::memcpy(To, From, 4); return;
    case 2: std::memcpy(To, From, 2); return;
    case 1: *To = *From; return;
    default:
      for (unsigned K = 0; K < N; ++K)
        To[K] = From[K];
    }
  }
  unsigned NumStores = 0;
  uint8_t Insn = 0; ///< the instruction the pass runs (set by its loop)
  StoreLogRefusal Refused = StoreLogRefusal::None;
  Store Stores[kStores] = {};
};

class Mmu final : public WriteWatcher {
public:
  Mmu(Cpu &Owner, PhysMem &Mem);
  /// The machine's write watcher while the owner runs (Cpu::run installs it): reports a
  /// store into a watched range to the owner's transition observer (the ground truth,
  /// the run control's write stops) and to every processor's MONITOR (cpu/monitor.h).
  void watchedWrite(Hpa Pa, uint64_t SizeBytes, StoreAgent Agent) override;
  /// The owner read [Pa, Pa + SizeBytes) as data (cpu/memory.cpp, readLinearSlow): when
  /// that touches a read-watched range, tells the owner's transition observer
  /// (VmxTransitionObserver::watchedLoad). The caller tests PhysMem::readWatching first.
  /// True if it touched one (a read crossing a page is told once).
  bool noteRead(Hpa Pa, uint64_t SizeBytes);
  Mmu(const Mmu &) = delete;
  Mmu &operator=(const Mmu &) = delete;

  /// RESET/INIT: every cache empty, VPID 0's context current.
  void reset();
  /// Snapshot: the TLBs (each entry with its page frame; load() rebuilds the host
  /// pointer), the guest-physical mapping cache and the context generations, because a
  /// stale translation is architecturally visible until it is invalidated (mmu.cpp says
  /// how Linux sees it); load() flushes only the decoded blocks.
  void save(SnapshotWriter &W) const;
  void load(SnapshotReader &R);

  // --- hits: the hot paths (no allocation, no call) ---

  /// The TLB tag of La in the current context: explicit accesses carry the CPL bit,
  /// implicit supervisor accesses (descriptor tables, TSS, IDT) do not.
  uint64_t tag(uint64_t La, bool Supervisor) const {
    return (La & kPageMask) | (Supervisor ? TagLowSupervisor : TagLowUser);
  }
  /// The tag the interpreter's store fast paths compare with a TlbWrite entry: tag(),
  /// except while a store log is open (StoreLog), when no entry has it.
  uint64_t writeTag(uint64_t La, bool Supervisor) const {
    return (La & kPageMask) | (Supervisor ? WriteTagLowSupervisor : WriteTagLowUser);
  }
  /// The read and write TLB slots of La, for the instruction-level fast paths of
  /// cpu/memory.h: a hit is `slot.Tag == tag(La, Supervisor)` with the access inside the
  /// page, and the host address is La + slot.Addend. (They test the tag in their own
  /// branch, so that the compiler lays the hit out as the fall-through path.) TlbWrite
  /// never maps a page holding decoded code.
  const TlbEntry &readSlot(Gla La) const { return TlbRead[La.pageNumber() & (kTlbEntries - 1)]; }
  const TlbEntry &writeSlot(Gla La) const {
    return TlbWrite[La.pageNumber() & (kTlbEntries - 1)];
  }
  /// Host pointer of [La, La+Size) for a read when one TLB entry maps it, else null.
  uint8_t *readHost(Gla La, unsigned Size, bool Supervisor) const {
    return hostIn(readSlot(La), La.value(), Size, Supervisor);
  }
  /// Host pointer of [La, La+Size) for a write when one TlbWrite entry maps it, else null
  /// (never for a page holding decoded code; never while a store log is open).
  uint8_t *writeHost(Gla La, unsigned Size, bool Supervisor) const {
    const TlbEntry &E = writeSlot(La);
    if (E.Tag == writeTag(La.value(), Supervisor) && La.pageOffset() <= kPageSize - Size)
      return reinterpret_cast<uint8_t *>(La.value() + E.Addend);
    return nullptr;
  }
  /// writeHost, or else a pointer into a page holding decoded code when its TlbWriteCode
  /// entry maps La and the 64-byte lines of [La, La+Size) hold none: a store there needs
  /// no invalidation as long as nothing decodes before it (one instruction, one chunk).
  uint8_t *writeHostBesideCode(Gla La, unsigned Size, bool Supervisor) const;
  /// The cached decoded block at linear La (64-bit code: CS base 0, no limit), through
  /// the fetch TLB and its victim slot; null when the caller must fetch and decode.
  Block *cachedBlock(Gla Linear, uint8_t Mode) {
    const uint64_t La = Linear.value();
    const unsigned Slot = (La >> 12) & (kTlbEntries - 1);
    TlbEntry &E = TlbFetch[Slot];
    const uint64_t Tag = tag(La, false);
    // The displaced entry comes back without a walk or a decode: a guest and its
    // hypervisor sharing a code page alternate at every exit.
    if (E.Tag != Tag) [[unlikely]] {
      TlbEntry &V = TlbFetch[tlbVictimSlot(Slot)];
      if (V.Tag != Tag)
        return nullptr;
      std::swap(E, V);
      bumpFetchChanges();
    }
    const uint64_t Pa = (E.Pfn << 12) | (La & 0xfff);
    Block &Cand = Blocks.get()[blockSlot(Pa)];
    if (Cand.Pa == Pa && Cand.Key == blockKey(Mode) && Cand.Gen == Mem.codeGeneration(E.Pfn))
      return !Cand.Crosses || crossingMapped(Cand, La) ? &Cand : nullptr;
    return nullptr;
  }
  /// Page-crossing block B at La (Block::Crosses): its second page is mapped by the fetch
  /// TLB's slot to the frame it was decoded from, with those bytes unchanged. A miss in
  /// the TLB says no: the decoder then fetches the page again, with its faults.
  bool crossingMapped(const Block &B, uint64_t La) const {
    const uint64_t La2 = (La | 0xfff) + 1;
    const TlbEntry &E = TlbFetch[(La2 >> 12) & (kTlbEntries - 1)];
    return E.Tag == tag(La2, false) && E.Pfn == B.CrossPfn &&
           B.CrossGen == Mem.codeGeneration(B.CrossPfn);
  }
  /// Marks the lines of frame Pfn that hold the tail of a page-crossing instruction as
  /// code (blockDecoded does it for a block's own page).
  void crossingDecoded(uint64_t Pfn, uint64_t Lines) {
    if (Mem.markCodeLines(Pfn, Lines))
      dropWriteMappingsEverywhere(Pfn);
  }

  // --- misses ---

  /// Translates the page of La for an access (paging, then EPT in VMX non-root
  /// operation; a fault is raised in the owner: #PF pending, or the VM exit done) and
  /// fills the TLB when the page is plain RAM. Pa receives the machine-physical address.
  Status translate(Gla La, Access Kind, bool Supervisor, Hpa &Pa);
  /// Fetch through the fetch TLB: the host pointer and machine-physical address of La
  /// when it hits, else null.
  const uint8_t *fetchHost(Gla La, Hpa &Pa) const {
    const TlbEntry &E = TlbFetch[La.pageNumber() & (kTlbEntries - 1)];
    if (E.Tag != tag(La.value(), false))
      return nullptr;
    Pa = Hpa((E.Pfn << 12) | La.pageOffset());
    return reinterpret_cast<const uint8_t *>(La.value() + E.Addend);
  }
  /// A store into a page holding decoded code through its TlbWriteCode entry: copies
  /// [In, In+Size) to La and tells PhysMem which bytes changed (ending the owner's block
  /// when they were code). False when there is no such entry, the store leaves the page,
  /// or the page holds no code any more (the caller then translates and fills).
  bool writeCodePage(Gla La, unsigned Size, const void *In, bool Supervisor);
  /// A store that missed TlbWrite, into a page that holds no decoded code but watched
  /// ranges (a traced hypervisor's trace slots, several stores per VM exit), through the
  /// page's TlbWriteCode entry: copies [In, In+Size) to La and reports the store when it
  /// touches a write-watched range, exactly as writeCodePage and PhysMem::noteWrite do,
  /// with the page's ranges looked up once per change of the watches (PhysMem::
  /// watchEpoch) instead of at every store, and the watcher called directly when it is
  /// this MMU. False, with nothing done, for anything else (no such entry, a store
  /// leaving the page, code in the page, an armed data breakpoint, more ranges than it
  /// keeps, the path turned off): the caller takes writeLinearSlow. cpu/watched_store.cpp.
  bool writeWatchedPage(Gla La, unsigned Size, const void *In, bool Supervisor);
  /// Off: writeWatchedPage always declines, so every such store takes writeCodePage
  /// (tests compare the two paths' results).
  void setWatchedPageStores(bool On) { WatchedPageOn = On; }
  /// Stores writeWatchedPage and writeSlotInPlace made (tests, statistics).
  uint64_t watchedPageStores() const { return WatchedPageStores + SlotStoresAhead; }
  /// Of those, the slot stores writeSlotInPlace made, ahead of the watched-page lookup.
  uint64_t slotStoresAhead() const { return SlotStoresAhead; }

  // --- the decoded-block cache ---

  uint32_t blockKey(uint8_t Mode) const { return BlockKeyBase | Mode; }
  /// The slot of the block at Pa, for the decoder (which may refill it: links break).
  Block &blockAt(uint64_t Pa) {
    bumpChainEpoch();
    return Blocks.get()[blockSlot(Pa)];
  }
  /// An uncached block for code outside RAM and page-crossing instructions.
  Block &scratchBlock() {
    bumpChainEpoch();
    return Blocks.get()[kBlockCacheEntries];
  }
  /// What a current link of From says cachedBlock(Linear, 64-bit mode) would return (the
  /// contract above, "Block links"), else null: then the caller looks the block up.
  Block *chainedBlock(const Block &From, Gla Linear) const {
    const uint64_t La = Linear.value(), Tag = tag(La, false);
    const uint64_t Stamp = ChainEpoch + Mem.codeWriteCount();
    for (const BlockLink &L : From.Links)
      if (L.La == La && L.Tag == Tag && L.Stamp == Stamp)
        return TlbFetch[(La >> 12) & (kTlbEntries - 1)].Tag == Tag ? L.Next : nullptr;
    return nullptr;
  }
  /// Links From to To, which cachedBlock(Linear, 64-bit mode) has just returned right
  /// after From ran to its end. The older of From's two links goes.
  void linkBlocks(Block &From, Gla Linear, Block &To) {
    const uint64_t La = Linear.value();
    From.Links[1] = From.Links[0];
    From.Links[0] = BlockLink{La, tag(La, false), &To, ChainEpoch + Mem.codeWriteCount()};
  }
  /// Where the inputs of cachedBlock's test and of the block links' stamp live, for the
  /// translator, which emits them in host code between two translated blocks
  /// (cpu/jit/translator.cpp): the low tag bits of a fetch (tag(La, false)), the fetch
  /// TLB, the block key's epoch, PhysMem's code generations, ChainEpoch and PhysMem's
  /// code write count.
  struct LinkInputs {
    const uint64_t *FetchTagLow; ///< zero-extended: translated code ORs it in whole
    const TlbEntry *FetchTlb;
    const uint32_t *BlockKeyBase;
    uint64_t *const *CodeGenerations;
    const uint64_t *CodeWrites;
    const uint64_t *ChainSum; ///< ChainEpoch + FetchChanges (chainStamp less CodeWrites)
  };
  LinkInputs linkInputs() const {
    return {&TagLowUserWide, TlbFetch, &BlockKeyBase, Mem.codeGenerationsAddress(),
            Mem.codeWriteCountAddress(), &ChainSum};
  }
  /// The stamp linkBlocks records now.
  uint64_t linkStamp() const { return ChainEpoch + Mem.codeWriteCount(); }
  /// The translator's chain cells' stamp: linkStamp, and also FetchChanges.
  uint64_t chainStamp() const { return ChainSum + Mem.codeWriteCount(); }
  /// The primary fetch TLB entry of La's slot.
  const TlbEntry &fetchEntry(Gla La) const { return TlbFetch[La.pageNumber() & (kTlbEntries - 1)]; }
  /// A block of frame Pfn was decoded with instruction bytes in Lines: PhysMem tracks
  /// them, and when the page first holds code every CPU drops its fast write mappings.
  void blockDecoded(uint64_t Pfn, uint64_t Lines);
  /// Blocks decoded (not reused from the cache): tests and benchmarks read it to see how
  /// often the cache misses or is invalidated.
  uint64_t blocksDecoded() const { return BlocksDecoded; }
  /// Drops every TLB entry (read, write, fetch, write-to-code, victims) that maps frame
  /// Pfn, in every context: the APIC-access page must never be reached through one.
  void dropPageMappings(uint64_t Pfn);
  /// Forgets every decoded block of this CPU (one increment).
  void flushDecodeCache();

  // --- the guest-physical mapping cache (EPT) ---

  /// The cached mapping of the guest-physical page of Gpa in the current context, if any.
  const EptCacheEntry *guestPhysical(Gpa Address) const {
    const EptCacheEntry &E = EptCache[Address.pageNumber() & (kEptCacheEntries - 1)];
    if (E.GpaPage == ((Address.value() & kPageMask) | 1) && E.Generation == TlbGeneration)
      return &E;
    return nullptr;
  }
  /// Remembers a successful walk W of Gpa in the current context.
  void rememberGuestPhysical(Gpa Address, const EptWalk &W, bool AccessedDirty,
                             bool DirtyDone) {
    EptCache[Address.pageNumber() & (kEptCacheEntries - 1)] = EptCacheEntry{
        (Address.value() & kPageMask) | 1, W.Address.value() & kPageMask, TlbGeneration,
        W.Rights, W.MemType, W.PageLevel, W.IgnorePat, AccessedDirty, DirtyDone};
  }

  // --- contexts and invalidation (the contract above) ---

  /// The CPL bit of explicit accesses' tags (CPL 3); the owner's modeChanged() sets it.
  void setUserMode(bool Cpl3) {
    UserTagBit = Cpl3;
    TagLowUser = uint16_t(TagLowSupervisor | UserTagBit);
    TagLowUserWide = TagLowUser;
    syncWriteTags();
    bumpFetchChanges();
  }
  bool userMode() const { return UserTagBit; }
  /// Invalidates the cached translations of the current context.
  void flushTlb();
  /// INVLPG: invalidates the translations of La's page (the whole current context).
  void flushTlbPage(Gla La);
  /// Invalidates the cached translations of one VPID context (INVVPID).
  void flushTlbVpid(uint16_t Vpid);
  /// Invalidates the cached translations of every context (INVEPT, INVVPID all-context).
  void flushTlbAllContexts();
  /// Invalidates every context derived from the EP4TA of Eptp (INVEPT single-context).
  void flushTlbEptp(uint64_t Eptp);
  /// Makes Vpid the current context (VM entry with "enable VPID", VM exit to VPID 0).
  void switchTlbContext(uint16_t Vpid);
  /// Makes (Vpid, EP4TA of Eptp) the current context (VM entry with "enable EPT"). With
  /// EPT, a guest's translations are combined mappings tagged by (VPID, EP4TA) (SDM Vol.
  /// 3C, "Information That May Be Cached"), so each such pair owns a generation of its
  /// own, distinct from the VPID's linear-mapping context.
  void switchTlbContextEpt(uint16_t Vpid, uint64_t Eptp);
  uint16_t currentVpid() const { return CurrentVpid; }
  /// The current context is an EPT (VPID, EP4TA) one.
  bool inEptContext() const { return TlbEptContext; }
  /// Drops fast write mappings (TlbWrite) of a physical page that now holds decoded code.
  void dropWriteMappings(uint64_t Pfn);
  /// Drops the read and write mappings (TlbRead, TlbWrite, victims included, in every
  /// context) of a physical page that now holds a read-watched range
  /// (PhysMem::watchReads); fetch entries stay.
  void dropDataMappings(uint64_t Pfn);
  /// dropWriteMappings on every processor of the machine (a page that starts holding a
  /// watched range, PhysMem::watchWrites).
  void dropWriteMappingsEverywhere(uint64_t Pfn);
  /// All CPUs of the machine (including the owner), for blockDecoded's cross-CPU drop of
  /// write mappings. Defaults to the owner alone.
  void setPeers(Cpu *const *All, unsigned N) {
    Peers = All;
    NumPeers = N;
  }

  // --- lockstep's store log (StoreLog) ---

  /// Opens L for the interpreter's pass of one block: its TlbWrite hits miss from now on.
  void beginStoreLog(StoreLog &L) {
    L.NumStores = 0;
    L.Refused = StoreLogRefusal::None;
    Log = &L;
    syncWriteTags();
  }
  /// Closes the log.
  void endStoreLog() {
    Log = nullptr;
    syncWriteTags();
  }
  /// Logs a store of Size bytes at Pa (host address Host), which the caller makes next.
  Status logStore(Hpa Pa, uint8_t *Host, unsigned Size) {
    StoreLog &L = *Log;
    if (L.NumStores == StoreLog::kStores || Size > StoreLog::kMaxStoreBytes)
      return refuseLogged(StoreLogRefusal::Full);
    StoreLog::Store &S = L.Stores[L.NumStores++];
    S.Host = Host;
    S.Pa = Pa.value();
    S.Size = uint8_t(Size);
    S.Insn = L.Insn;
    StoreLog::copy(S.Old, Host, Size);
    return Status::Ok;
  }
  bool storeLogging() const { return Log != nullptr; }
  /// Stops the pass before an access it cannot undo: records why, returns Status::Frozen
  /// (the instruction unwinds without touching more state; the pass is discarded).
  Status refuseLogged(StoreLogRefusal Why) {
    if (Log->Refused == StoreLogRefusal::None)
      Log->Refused = Why;
    return Status::Frozen;
  }

  /// The machine frame a TlbWrite entry maps La's page to for an explicit access in the
  /// current context, or kTlbEmpty when there is none (tests).
  uint64_t writeMappedFrame(Gla La) const {
    const TlbEntry &E = TlbWrite[La.pageNumber() & (kTlbEntries - 1)];
    return E.Tag == tag(La.value(), false) ? E.Pfn : kTlbEmpty;
  }

private:
  uint8_t *hostIn(const TlbEntry &E, uint64_t La, unsigned Size, bool Supervisor) const {
    if (E.Tag == tag(La, Supervisor) && (La & 0xfff) <= kPageSize - Size)
      return reinterpret_cast<uint8_t *>(La + E.Addend);
    return nullptr;
  }
  void placeEntry(TlbEntry *Array, unsigned Slot, const TlbEntry &E);
  /// Empties every TLB entry and forgets every context's generation (construction,
  /// RESET, generation wrap-around).
  void clearTlb();
  uint16_t allocTlbGeneration();
  uint16_t contextGeneration(uint16_t Vpid);
  void useGeneration(uint16_t Gen);

  Cpu &Owner;
  PhysMem &Mem;

  TlbEntry TlbRead[kTlbEntries], TlbWrite[kTlbEntries], TlbFetch[kTlbEntries];
  TlbEntry TlbWriteCode[kTlbEntries];
  EptCacheEntry EptCache[kEptCacheEntries];

  /// TLB generation in tag bits 11:1. Each VPID context (VPID 0 = VMX root operation and
  /// non-root without VPID) owns one generation; flushing a context gives it a fresh one
  /// and switching context (VM entry/exit with VPID) selects its generation, both O(1).
  /// Entries of other contexts simply stop matching (SDM Vol. 3C, "Virtual-Processor
  /// Identifiers (VPIDs)": cached translations are associated with a VPID).
  /// TagLowUser/TagLowSupervisor are the low tag bits of an explicit (CPL-dependent)
  /// and an implicit supervisor access in the current context.
  uint16_t TlbGeneration = 1;
  uint16_t TagLowUser = 1u << 1, TagLowSupervisor = 1u << 1;
  /// writeTag's low bits: TagLowUser and TagLowSupervisor, or while a store log is open
  /// generation 0x7ff's, which no entry has (allocTlbGeneration never hands it out) and
  /// which differ from kTlbEmpty's.
  uint16_t WriteTagLowUser = 1u << 1, WriteTagLowSupervisor = 1u << 1;
  static constexpr uint16_t kNoWriteTagLow = 0x7ff << 1;
  /// Lockstep's open store log, else null (one untaken branch on translate's miss path).
  StoreLog *Log = nullptr;
  void syncWriteTags() {
    WriteTagLowUser = Log ? kNoWriteTagLow : TagLowUser;
    WriteTagLowSupervisor = Log ? kNoWriteTagLow : TagLowSupervisor;
  }
  uint64_t TagLowUserWide = 1u << 1; ///< TagLowUser, for translated code (linkInputs)
  uint8_t UserTagBit = 0;
  uint16_t CurrentVpid = 0;
  bool TlbEptContext = false;
  uint64_t CurrentEp4ta = 0; ///< EPTP bits 51:12 of the current EPT context

  struct FreeDeleter {
    void operator()(void *P) const { std::free(P); }
  };
  /// Per-VPID generation: (epoch << 16) | generation, valid only in the current epoch.
  /// 64 K entries in zero-filled memory the host commits only for VPIDs in use.
  std::unique_ptr<uint64_t, FreeDeleter> VpidGeneration;
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

  /// kBlockCacheEntries blocks plus one uncached scratch block, in zero-filled memory
  /// that the host commits only as blocks are used (a 64-CPU machine must not cost
  /// 64 x 51 MiB up front).
  std::unique_ptr<Block, FreeDeleter> Blocks;
  uint32_t BlockKeyBase = 1u << 8; ///< current epoch << 8
  uint64_t BlocksDecoded = 0;
  uint64_t ChainEpoch = 1; ///< part of every block link's stamp (never 0)
  /// Fetch TLB victim swaps, tag-bit changes (TLB generation, CPL), snapshot loads:
  /// part of chainStamp.
  uint64_t FetchChanges = 0;
  /// ChainEpoch + FetchChanges, kept by the two below: the translated chain reads one
  /// word for both.
  uint64_t ChainSum = 1;
  void bumpChainEpoch() {
    ++ChainEpoch;
    ++ChainSum;
  }
  void bumpFetchChanges() {
    ++FetchChanges;
    ++ChainSum;
  }

  Cpu *const *Peers;
  unsigned NumPeers = 1;
  Cpu *Self;

  /// What writeWatchedPage knows of frame Pfn, valid while PhysMem::watchEpoch() is
  /// Epoch (0: never): its write-watched ranges clipped to it (PhysMem::
  /// watchedRangesInPage), and whether a store into it may take the path at all (it
  /// holds a watched range, so writeCodePage keeps its entry; the ranges fit in Ranges).
  struct WatchedPage {
    uint64_t Pfn = 0;
    uint64_t Epoch = 0;
    bool Usable = false;
    uint8_t NumRanges = 0;
    PhysMem::PageRange Ranges[4] = {};
  };
  WatchedPage Watched;
  bool WatchedPageOn = true;
  uint64_t WatchedPageStores = 0, SlotStoresAhead = 0;
  void lookUpWatchedPage(uint64_t Pfn);
  /// writeSlotInPlace's monitor test, kept per change of the watches (T's
  /// SlotQuietEpoch): looks every peer's monitor up for T's slot array; true, and the
  /// answer kept, when no armed one covers any of its bytes.
  bool noteSlotArrayQuiet(InlineTransitionRecords &T);
public:
  /// An 8-byte store of Value at Linear (in the fast access mode, user stores as
  /// writeWatchedPage's caller) when it is a slot store the processor records in place
  /// (cpu/watched_store.h): done, true; else nothing done, false.
  bool writeSlotInPlace(Gla Linear, uint64_t Value);

private:
  /// What watchedWrite does (cpu/watched_store.h); Bytes, when not null, are the
  /// SizeBytes the instruction stored (the short path has them at hand).
  void storeSeen(Hpa Pa, uint64_t SizeBytes, StoreAgent Agent, const void *Bytes = nullptr);
};

} // namespace vmxsim
