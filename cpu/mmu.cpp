// The processor's MMU: TLB fills and context generations, the decoded-block cache and
// the cross-CPU rule for pages that start holding code (the contract is in cpu/mmu.h).
#include "cpu/mmu.h"

#include "cpu/cpu.h"
#include "cpu/monitor.h"
#include "cpu/translation.h"
#include "cpu/vmx/apic_virtualization.h"
#include "cpu/watched_store.h"

#include <cstring>
#include <string>
#include <utility>

namespace vmxsim {

Mmu::Mmu(Cpu &Owner, PhysMem &Mem)
    : Owner(Owner), Mem(Mem),
      VpidGeneration(static_cast<uint64_t *>(std::calloc(65536, sizeof(uint64_t)))),
      Blocks(static_cast<Block *>(std::calloc(kBlockCacheEntries + 1, sizeof(Block)))),
      Peers(&Self), Self(&Owner) {
  if (!Blocks || !VpidGeneration) {
    // Host out of memory at construction: nothing sensible can run. This is a host
    // failure, not a guest-triggerable condition.
    std::abort();
  }
}

void Mmu::reset() {
  clearTlb();
  CurrentVpid = 0;
  TlbEptContext = false;
  flushTlb();
  flushDecodeCache();
}

// Each TLB array is direct-mapped (the fast paths look at one slot) with a victim slot,
// tlbVictimSlot(Slot), that only the miss paths consult (translate, and cachedBlock):
// the entry a fill displaces moves there and comes back on its next miss without a page
// walk. Two pages that share a slot then stop evicting each other — typically a guest's
// code page and its hypervisor's, the same page in two VPID contexts, at every VM entry
// and exit. Victim entries are ordinary entries: flushes, generations and
// dropWriteMappings cover them.
void Mmu::placeEntry(TlbEntry *Array, unsigned Slot, const TlbEntry &E) {
  TlbEntry &Primary = Array[Slot];
  if (Primary.Tag != kTlbEmpty && Primary.Tag != E.Tag)
    Array[tlbVictimSlot(Slot)] = Primary;
  Primary = E;
  if (Array == TlbFetch)
    bumpChainEpoch();
}

// Translates one page's worth of an access and installs the TLB entry when the page is
// plain RAM (never for MMIO). A write mapping of a page holding decoded code goes to
// TlbWriteCode, never to TlbWrite, whose hits store without telling PhysMem.
Status Mmu::translate(Gla Linear, Access Kind, bool Supervisor, Hpa &Out) {
  const uint64_t La = Linear.value();
  const unsigned Slot = (La >> 12) & (kTlbEntries - 1);
  TlbEntry *Array = Kind == Access::Read    ? TlbRead
                    : Kind == Access::Write ? TlbWrite
                                            : TlbFetch;
  if (TlbEntry &V = Array[tlbVictimSlot(Slot)]; V.Tag == tag(La, Supervisor)) {
    std::swap(Array[Slot], V);
    if (Array == TlbFetch)
      bumpFetchChanges();
    Out = Hpa((Array[Slot].Pfn << 12) | (La & 0xfff));
    return Status::Ok;
  }
  if (Log && Kind == Access::Write) [[unlikely]] {
    // Lockstep's interpreter pass (StoreLog): its TlbWrite hits miss on purpose; the
    // entry serves the store as a hit would have, without a walk.
    if (const TlbEntry &E = TlbWrite[Slot]; E.Tag == tag(La, Supervisor)) {
      Out = Hpa((E.Pfn << 12) | (La & 0xfff));
      return Status::Ok;
    }
  }
  const bool User = !Supervisor && UserTagBit;
  Translation T;
  VMX_TRY(translateLinear(Owner, Linear, Kind, User, T));
  Out = T.Pa;
  // No entry ever maps the APIC-access page: each access to it must reach the APIC
  // virtualization in cpu/memory.cpp's slow paths.
  if (Owner.NonRoot && apicv::onApicAccessPage(Owner, Out)) [[unlikely]]
    return Status::Ok;
  uint8_t *Host = Mem.ramPointer(Hpa(Out.value() & kPageMask));
  if (!Host)
    return Status::Ok;
  const uint64_t Pfn = Out.pageNumber();
  // With SMAP on, supervisor entries for user pages are not cached: RFLAGS.AC can change
  // without a TLB flush.
  if (!User && T.User && (Owner.S.Cr4 & cr4::SMAP))
    return Status::Ok;
  // A page holding an armed data breakpoint is never mapped for data: every access to
  // it takes the slow paths, which check the breakpoints (cpu/debug.h).
  if (Kind != Access::Fetch && Owner.Debug.DataArmed && dataBreakpointPage(Owner, La))
      [[unlikely]]
    return Status::Ok;
  // No entry maps a non-canonical page (SDM Vol. 3A, "Canonical Addressing"): the data
  // fast paths of cpu/memory.h rely on it to skip the canonical check on a hit. Every
  // caller has checked already; this keeps the rule local.
  const unsigned VaBits = (Owner.S.Cr4 & cr4::LA57) ? 57 : 48;
  if (uint64_t(int64_t(La << (64 - VaBits)) >> (64 - VaBits)) != La) [[unlikely]]
    return Status::Ok;
  const TlbEntry E{tag(La, Supervisor), reinterpret_cast<uintptr_t>(Host) - (La & kPageMask),
                   Pfn, 0};
  // A page holding a read-watched range gets no read entry (nor a write entry: RMW
  // operands are read through it), so that every read of it reaches readLinearSlow,
  // which reports it (PhysMem::watchReads).
  switch (Kind) {
  case Access::Read:
    if (!Mem.pageReadWatched(Pfn)) [[likely]]
      placeEntry(TlbRead, Slot, E);
    break;
  case Access::Write:
    if (!Mem.pageHoldsCode(Pfn) && !Mem.pageWatched(Pfn))
      placeEntry(TlbWrite, Slot, E);
    else
      TlbWriteCode[Slot] = E;
    // A page writable now is readable too; saves the read walk of a RMW.
    if (!Mem.pageReadWatched(Pfn)) [[likely]]
      placeEntry(TlbRead, Slot, E);
    break;
  case Access::Fetch:
    placeEntry(TlbFetch, Slot, E);
    break;
  }
  return Status::Ok;
}

uint8_t *Mmu::writeHostBesideCode(Gla Linear, unsigned Size, bool Supervisor) const {
  if (uint8_t *H = writeHost(Linear, Size, Supervisor))
    return H;
  // Lockstep's pass: a page holding code never gets a direct pointer (its frame may not
  // be in the log); the store takes writeLinearSlow, which refuses code lines.
  if (Log) [[unlikely]]
    return nullptr;
  const uint64_t La = Linear.value();
  const TlbEntry &K = TlbWriteCode[(La >> 12) & (kTlbEntries - 1)];
  if (K.Tag == tag(La, Supervisor) && (La & 0xfff) + Size <= kPageSize &&
      !(Mem.codeLines(K.Pfn) & PhysMem::lineMask(unsigned(La & 0xfff), Size)) &&
      !Mem.rangeWatched((K.Pfn << 12) | (La & 0xfff), Size) &&
      !Mem.rangeReadWatched((K.Pfn << 12) | (La & 0xfff), Size))
    return reinterpret_cast<uint8_t *>(La + K.Addend);
  return nullptr;
}

// A store to data that shares the page with code invalidates nothing; one into code
// lines invalidates their blocks, and the CPU leaves its current block so that the next
// instruction is fetched anew (SDM Vol. 3A, Self-Modifying Code).
bool Mmu::writeCodePage(Gla Linear, unsigned Size, const void *In, bool Supervisor) {
  const uint64_t La = Linear.value();
  TlbEntry &E = TlbWriteCode[(La >> 12) & (kTlbEntries - 1)];
  if (E.Tag != tag(La, Supervisor) || (La & 0xfff) + Size > kPageSize)
    return false;
  if (!Mem.pageHoldsCode(E.Pfn) && !Mem.pageWatched(E.Pfn)) [[unlikely]] {
    E.Tag = kTlbEmpty;
    return false;
  }
  std::memcpy(reinterpret_cast<void *>(La + E.Addend), In, Size);
  const Hpa Pa((E.Pfn << 12) | (La & 0xfff));
  if (Mem.noteWrite(Pa, Size, StoreAgent::Instruction)) [[unlikely]]
    Owner.breakBlock();
  return true;
}

// A store touched a watched range while this processor runs (it installed itself as the
// machine's write watcher, Cpu::run): cpu/watched_store.h, storeSeen.
void Mmu::watchedWrite(Hpa Pa, uint64_t SizeBytes, StoreAgent Agent) {
  storeSeen(Pa, SizeBytes, Agent);
}

// A read of data touched a read-watched range (PhysMem::watchReads): the instruction
// executing (or the event being delivered) made it.
bool Mmu::noteRead(Hpa Pa, uint64_t SizeBytes) {
  if (!Mem.rangeReadWatched(Pa.value(), SizeBytes))
    return false;
  if (VmxTransitionObserver *O = Owner.Transitions) {
    WatchedLoadEvent E;
    E.Cpu = Owner.Id;
    E.Tsc = Owner.Cycles;
    E.Rip = Owner.S.Rip;
    E.Addr = Pa.value();
    E.SizeBytes = unsigned(SizeBytes);
    O->watchedLoad(E);
  }
  return true;
}

void Mmu::dropWriteMappingsEverywhere(uint64_t Pfn) {
  for (unsigned K = 0; K < NumPeers; ++K)
    Peers[K]->Mmu.dropWriteMappings(Pfn);
}

void Mmu::blockDecoded(uint64_t Pfn, uint64_t Lines) {
  // No CPU may keep a fast write mapping of a page that now holds decoded code.
  if (Mem.markCodeLines(Pfn, Lines))
    dropWriteMappingsEverywhere(Pfn);
  ++BlocksDecoded;
}

void Mmu::flushDecodeCache() {
  bumpChainEpoch();
  BlockKeyBase += 1u << 8;
  if (BlockKeyBase == 0) {
    // The 24-bit epoch wrapped: stale blocks could look current again, so clear them.
    std::memset(static_cast<void *>(Blocks.get()), 0,
                (kBlockCacheEntries + 1) * sizeof(Block));
    BlockKeyBase = 1u << 8;
  }
}

void Mmu::clearTlb() {
  for (unsigned I = 0; I < kTlbEntries; ++I)
    TlbRead[I].Tag = TlbWrite[I].Tag = TlbFetch[I].Tag = TlbWriteCode[I].Tag = kTlbEmpty;
  bumpChainEpoch();
  // Generations restart below: cached guest-physical mappings must not match again.
  for (EptCacheEntry &E : EptCache)
    E.GpaPage = 0;
  ++TlbEpoch; // every context's generation is forgotten
  NextTlbGeneration = 1;
}

uint16_t Mmu::allocTlbGeneration() {
  // Generation 0x7ff is never handed out: a tag with it could equal kTlbEmpty.
  if (NextTlbGeneration >= 0x7ff)
    clearTlb();
  return NextTlbGeneration++;
}

uint16_t Mmu::contextGeneration(uint16_t Vpid) {
  uint64_t E = VpidGeneration.get()[Vpid];
  if ((E >> 16) == TlbEpoch)
    return uint16_t(E);
  uint16_t Gen = allocTlbGeneration();
  VpidGeneration.get()[Vpid] = (TlbEpoch << 16) | Gen;
  return Gen;
}

void Mmu::useGeneration(uint16_t Gen) {
  TlbGeneration = Gen;
  TagLowSupervisor = uint16_t(Gen << 1);
  TagLowUser = uint16_t(TagLowSupervisor | UserTagBit);
  TagLowUserWide = TagLowUser;
  syncWriteTags();
  bumpFetchChanges();
  Owner.breakBlock();
}

Mmu::EptTlbContext &Mmu::eptContextSlot(uint16_t Vpid, uint64_t Ep4ta) {
  uint64_t H = (Ep4ta ^ (uint64_t(Vpid) << 52)) * 0x9E3779B97F4A7C15ull;
  static_assert(kEptTlbContexts == 64, "the slot takes 6 hash bits");
  return EptContexts[H >> (64 - 6)];
}

uint16_t Mmu::eptContextGeneration(uint16_t Vpid, uint64_t Ep4ta) {
  EptTlbContext &X = eptContextSlot(Vpid, Ep4ta);
  if (X.Epoch == TlbEpoch && X.Vpid == Vpid && X.Ep4ta == Ep4ta)
    return X.Gen;
  uint16_t Gen = allocTlbGeneration();
  X = EptTlbContext{TlbEpoch, Ep4ta, Vpid, Gen};
  return Gen;
}

void Mmu::flushTlb() {
  uint16_t Gen = allocTlbGeneration();
  if (TlbEptContext)
    eptContextSlot(CurrentVpid, CurrentEp4ta) =
        EptTlbContext{TlbEpoch, CurrentEp4ta, CurrentVpid, Gen};
  else
    VpidGeneration.get()[CurrentVpid] = (TlbEpoch << 16) | Gen;
  useGeneration(Gen);
}

void Mmu::flushTlbVpid(uint16_t Vpid) {
  // A VPID's linear mappings and its combined mappings of every EP4TA (SDM Vol. 3C,
  // INVVPID).
  for (EptTlbContext &X : EptContexts)
    if (X.Vpid == Vpid)
      X.Epoch = 0;
  VpidGeneration.get()[Vpid] = 0; // epoch 0 is never current
  if (Vpid == CurrentVpid)
    flushTlb();
}

void Mmu::flushTlbEptp(uint64_t Eptp) {
  // Mappings derived from the EPT paging structures of one EP4TA, for every VPID (SDM
  // Vol. 3C, INVEPT single-context).
  const uint64_t Ep4ta = Eptp & 0x000ffffffffff000ull;
  for (EptTlbContext &X : EptContexts)
    if (X.Ep4ta == Ep4ta)
      X.Epoch = 0;
  if (TlbEptContext && CurrentEp4ta == Ep4ta)
    flushTlb();
}

void Mmu::flushTlbAllContexts() {
  clearTlb();
  useGeneration(TlbEptContext ? eptContextGeneration(CurrentVpid, CurrentEp4ta)
                              : contextGeneration(CurrentVpid));
}

void Mmu::switchTlbContext(uint16_t Vpid) {
  CurrentVpid = Vpid;
  TlbEptContext = false;
  useGeneration(contextGeneration(Vpid));
}

void Mmu::switchTlbContextEpt(uint16_t Vpid, uint64_t Eptp) {
  CurrentVpid = Vpid;
  TlbEptContext = true;
  CurrentEp4ta = Eptp & 0x000ffffffffff000ull;
  useGeneration(eptContextGeneration(Vpid, CurrentEp4ta));
}

void Mmu::flushTlbPage(Gla La) {
  // Large pages may cover many TLB slots; one slot per 4 KiB page is cached here, so a
  // full flush is the simple exact answer for INVLPG on any page size.
  (void)La;
  flushTlb();
}

void Mmu::dropPageMappings(uint64_t Pfn) {
  bumpChainEpoch();
  for (TlbEntry *Array : {TlbRead, TlbWrite, TlbFetch, TlbWriteCode})
    for (unsigned I = 0; I < kTlbEntries; ++I)
      if (Array[I].Tag != kTlbEmpty && Array[I].Pfn == Pfn)
        Array[I].Tag = kTlbEmpty;
}

void Mmu::dropWriteMappings(uint64_t Pfn) {
  for (TlbEntry &E : TlbWrite)
    if (E.Tag != kTlbEmpty && E.Pfn == Pfn)
      E.Tag = kTlbEmpty;
}

void Mmu::dropDataMappings(uint64_t Pfn) {
  dropWriteMappings(Pfn);
  for (TlbEntry &E : TlbRead)
    if (E.Tag != kTlbEmpty && E.Pfn == Pfn)
      E.Tag = kTlbEmpty;
}

} // namespace vmxsim

namespace vmxsim {

// The TLBs are saved, not flushed: they are architecturally visible. A guest that changes
// a paging entry without invalidating it keeps using the old translation until it does
// (SDM Vol. 3A, "Invalidation of TLBs and Paging-Structure Caches"), and Linux relies on
// that being harmless: a write through a stale read-only entry takes a spurious page
// fault that the kernel retries. A restore with empty TLBs would skip such faults, so
// the restored run would take another path. Entries are saved with their page frame, and
// their host pointers are rebuilt from it; the decoded blocks are flushed (they are
// derived from memory alone and decoded again on their next fetch).
namespace {
template <class Ar, class E> void eptCacheFields(Ar &A, E &X) {
  A.all(X.GpaPage, X.HpaPage, X.Generation, X.Rights, X.MemType, X.PageLevel, X.IgnorePat,
        X.AccessedDirty, X.DirtyDone);
}
} // namespace

void Mmu::save(SnapshotWriter &W) const {
  W.all(CurrentVpid, TlbEptContext, CurrentEp4ta, TlbGeneration, TagLowUser,
        TagLowSupervisor, UserTagBit, TlbEpoch, NextTlbGeneration);
  for (const TlbEntry *Array : {TlbRead, TlbWrite, TlbFetch, TlbWriteCode})
    for (unsigned I = 0; I < kTlbEntries; ++I) {
      const TlbEntry &E = Array[I];
      const uint8_t *Host = E.Tag == kTlbEmpty ? nullptr : Mem.ramPointer(Hpa(E.Pfn << 12));
      // The entry's page must be where its frame's RAM is; anything else is not saved
      // (an emptied entry is a legal TLB state, just not the one the run had).
      const bool Keep =
          Host && uintptr_t((E.Tag & ~uint64_t(0xfff)) + E.Addend) == uintptr_t(Host);
      W.u64(Keep ? E.Tag : kTlbEmpty);
      W.u64(Keep ? E.Pfn : 0);
    }
  for (const EptCacheEntry &E : EptCache) {
    // An empty entry's other fields were never written (clearTlb empties by GpaPage).
    const EptCacheEntry Empty{};
    eptCacheFields(W, E.GpaPage ? E : Empty);
  }
  for (const EptTlbContext &C : EptContexts)
    W.all(C.Epoch, C.Ep4ta, C.Vpid, C.Gen);
  uint32_t Used = 0;
  for (unsigned V = 0; V < 65536; ++V)
    Used += VpidGeneration.get()[V] != 0;
  W.u32(Used);
  for (unsigned V = 0; V < 65536; ++V)
    if (uint64_t G = VpidGeneration.get()[V]) {
      W.u16(uint16_t(V));
      W.u64(G);
    }
}

void Mmu::load(SnapshotReader &R) {
  R.all(CurrentVpid, TlbEptContext, CurrentEp4ta, TlbGeneration, TagLowUser,
        TagLowSupervisor, UserTagBit, TlbEpoch, NextTlbGeneration);
  TagLowUserWide = TagLowUser;
  syncWriteTags();
  bumpChainEpoch();
  bumpFetchChanges();
  for (TlbEntry *Array : {TlbRead, TlbWrite, TlbFetch, TlbWriteCode})
    for (unsigned I = 0; I < kTlbEntries; ++I) {
      TlbEntry &E = Array[I];
      E.Tag = R.u64();
      E.Pfn = R.u64();
      uint8_t *Host = E.Tag == kTlbEmpty ? nullptr : Mem.ramPointer(Hpa(E.Pfn << 12));
      if (!Host) { // empty, or a frame that is not RAM here: no entry
        E = TlbEntry{kTlbEmpty, 0, 0, 0};
        continue;
      }
      E.Addend = uintptr_t(Host) - uintptr_t(E.Tag & ~uint64_t(0xfff));
    }
  for (EptCacheEntry &E : EptCache)
    eptCacheFields(R, E);
  for (EptTlbContext &C : EptContexts)
    R.all(C.Epoch, C.Ep4ta, C.Vpid, C.Gen);
  std::memset(VpidGeneration.get(), 0, 65536 * sizeof(uint64_t));
  const uint32_t Used = R.u32();
  if (Used > 65536) {
    R.fail("the snapshot's TLB lists " + std::to_string(Used) + " VPID contexts");
    return;
  }
  for (uint32_t I = 0; I < Used && R.ok(); ++I) {
    const uint16_t V = R.u16();
    VpidGeneration.get()[V] = R.u64();
  }
  if (!R.ok() || TlbGeneration >= 0x7ff || NextTlbGeneration > 0x7ff) {
    R.fail("the snapshot's TLB state is inconsistent");
    reset();
    return;
  }
  flushDecodeCache();
}

} // namespace vmxsim
