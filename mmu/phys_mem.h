// The machine's physical address space (machine-physical addresses, Hpa: where EPT
// translations land; without EPT the guest-physical addresses are these): sparse RAM,
// MMIO regions.
//
// RAM is one anonymous MAP_NORESERVE mapping per region, so a 64 GiB machine commits host
// memory only for pages the guest touches, and a RAM hit is one add. Layout follows a PC
// with QEMU's defaults: RAM from 0 up to the low-memory limit, the 32-bit PCI/MMIO hole
// below 4 GiB, and the rest of RAM from 4 GiB up. The legacy VGA/BIOS window
// (0xA0000-0xFFFFF) is RAM here but reported reserved in the firmware memory map; the
// firmware makes its BIOS area (0xE0000-0xFFFFF) read-only with setReadOnly, as a PC's
// chipset write-protects the shadowed BIOS ROM.
#pragma once
#include "mmu/address.h"
#include "state/snapshot_io.h"
#include <cstddef>
#include <cstdint>
#include <vector>

namespace vmxsim {

/// A device that claims a range of guest-physical addresses. Accesses are 1, 2, 4 or 8
/// bytes, naturally split by the caller if they cross the region's end.
class MmioDevice {
public:
  virtual ~MmioDevice() = default;
  virtual uint64_t mmioRead(uint64_t Offset, unsigned SizeBytes) = 0;
  virtual void mmioWrite(uint64_t Offset, unsigned SizeBytes, uint64_t Value) = 0;
};

/// Who made a store into RAM, as write watches report it (PhysMem::watchWrites): an
/// instruction's explicit store, a store the processor makes on its own (accessed/dirty
/// flags of paging and EPT structures, the page-modification log, posted-interrupt
/// descriptors, the virtual-APIC page, VMCS and MSR-store areas), or anything else (a
/// device, a loader, a debugger).
enum class StoreAgent : uint8_t { Instruction, Processor, Device };

/// Told of every store into a watched range, whatever made it (one per PhysMem: the
/// processor that runs installs itself, Cpu::run). Only called while something is
/// watched.
class WriteWatcher {
public:
  virtual ~WriteWatcher() = default;
  virtual void watchedWrite(Hpa Addr, uint64_t SizeBytes, StoreAgent Agent) = 0;
};

class PhysMem {
public:
  /// Lowest address of the 32-bit hole; RAM above it moves to 4 GiB (QEMU pc: 3 GiB when
  /// RAM exceeds 3.5 GiB, else all RAM is low).
  static constexpr uint64_t kHighRamBase = 4ull << 30;

  explicit PhysMem(uint64_t RamSizeBytes);
  ~PhysMem();
  PhysMem(const PhysMem &) = delete;
  PhysMem &operator=(const PhysMem &) = delete;

  /// False if the host refused the mapping (reported by the machine as a one-line error).
  bool ok() const { return Low != nullptr; }
  uint64_t ramSizeBytes() const { return RamSize; }
  uint64_t lowRamBytes() const { return LowSize; }
  uint64_t highRamBytes() const { return HighSize; }

  /// Host pointer for guest-physical RAM at Addr, valid for the rest of its 4 KiB page, or
  /// nullptr if Addr is not RAM or is covered by an MMIO region.
  uint8_t *ramPointer(Hpa Addr) const {
    uint64_t A = Addr.value();
    if (A < LowSize) {
      if (A >= MmioLowWater && mmioAt(A))
        return nullptr;
      return Low + A;
    }
    if (A >= kHighRamBase && A - kHighRamBase < HighSize)
      return High + (A - kHighRamBase);
    return nullptr;
  }

  /// Registers an MMIO region. Regions must not overlap each other.
  void addMmio(Hpa Base, uint64_t SizeBytes, MmioDevice *Dev);

  /// Makes the low RAM [Base, Base + SizeBytes) read-only, as a PC's shadowed BIOS ROM
  /// after the firmware write-protects it: reads return its bytes, writes of any kind
  /// (processors, read, write, copyIn, zeroRam) are ignored or refused. It becomes an
  /// MMIO region whose device reads the RAM beneath it, so ramPointer returns null there:
  /// processors reach it through the slow path (no TLB host pointer; code in it is
  /// decoded one instruction at a time, never cached), and isRam is false for it (a
  /// loader cannot place an image there). copyOut still reads it. Write its contents
  /// before calling this. False (nothing changed) unless the range is page-aligned low
  /// RAM outside every MMIO region; at most one range per PhysMem.
  bool setReadOnly(Hpa Base, uint64_t SizeBytes);
  MmioDevice *mmioAt(uint64_t A, uint64_t *OffsetOut = nullptr) const;
  /// MMIO regions registered so far (addMmio, setReadOnly): regions are only ever added,
  /// so ramPointer answers as it did while this is unchanged.
  size_t mmioRegionCount() const { return Mmio.size(); }

  /// Slow-path accessors used for MMIO, page-crossing and loader access. Unassigned
  /// addresses read all-ones and ignore writes, as on a PC.
  uint64_t read(Hpa Addr, unsigned SizeBytes) const;
  void write(Hpa Addr, unsigned SizeBytes, uint64_t Value,
             StoreAgent Agent = StoreAgent::Device);

  /// Bulk copies for loaders and tests; return false if any byte is not RAM (copyOut
  /// also reads the read-only range).
  bool copyIn(Hpa Addr, const void *Src, uint64_t SizeBytes,
              StoreAgent Agent = StoreAgent::Device);
  bool copyOut(Hpa Addr, void *Dst, uint64_t SizeBytes) const;
  bool isRam(Hpa Addr, uint64_t SizeBytes) const;
  /// Makes RAM in [Addr, Addr + SizeBytes) read as zero (false if any byte is not RAM).
  /// Whole pages are given back to the host (sparse RAM reads zero until written), so the
  /// cost follows the pages that were written, not the size: a loader can clear a BSS of
  /// many GiB for nothing. Decoded code of the cleared pages is invalidated.
  bool zeroRam(Hpa Addr, uint64_t SizeBytes);

  // --- Decoded code and the writes that invalidate it (STYLE 2.2) ---
  //
  // SDM Vol. 3A, "Self-Modifying Code" and "Cross-Modifying Code": a store into the bytes
  // of an instruction is seen by the next fetch of those bytes, on the storing processor
  // (the instruction after the store) and on every other one. The decoded-block caches
  // (one per Cpu) keep that rule through the bookkeeping below; PhysMem is shared by
  // all CPUs, so it lives here.
  //
  // Each 4 KiB RAM page has
  //   CodeLines  a mask of its 64 lines of 64 bytes: line L is set when a block with an
  //              instruction byte in L is decoded (for an undecodable instruction, with
  //              a byte the decoder examined in L) and cleared by a write touching L;
  //   CodeGen    a generation, incremented by every write that touches a set line;
  //   LineGen[L] the generation that the last such write to line L produced.
  // A block records its lines (Block::Lines) and the page's generation when it was
  // decoded or last found current (Block::Gen).
  //
  // What a write invalidates: exactly the blocks, on every CPU, that have a byte in a line
  // the write touches, and nothing if it touches no set line: a write to data that only
  // shares the page with code changes no state at all. A write that does touch set lines
  // clears them, stamps them with the new generation and so changes the page's
  // generation. A block whose Gen is no longer the page's is checked line by line at its
  // next lookup (linesUnwrittenSince): if none of its lines has a stamp above its Gen it
  // is current and takes the page's generation, else it is decoded again. (So the other
  // blocks of a page cost one check each after a write into code, never a decode.)
  //
  // Why this is exact: a block's meaning is a function of its instruction bytes (and of
  // the decode mode in its key), which all lie in its lines on one page (blocks never
  // cross a page; page-crossing instructions are never cached). A write that changes any
  // of those bytes touches one of those lines after the block was decoded, so the line's
  // stamp exceeds the block's Gen and the block is dropped; a write that touches none of
  // them leaves the bytes, hence the decode, unchanged, and leaves the block's lines set
  // for the next write. Line granularity only costs precision: a block sharing a line
  // with written data is decoded again although its bytes did not change; it is never
  // kept stale. Generations are 64-bit: they never wrap.
  //
  // Who calls noteWrite: every store into RAM, with the bytes it wrote (and who made
  // it, for the write watches below): the CPU's store slow path (cpu/memory.cpp), paging
  // and EPT A/D updates, the slow accessors and the loaders. The stores that do not are
  // those that cannot touch a line of code or a watched range: through TlbWrite, which
  // never maps a page with code or a watch (markCodeLines reports the first line of a
  // page, and the decoder then drops every CPU's TlbWrite entries for it), and through
  // a Cpu::TlbWriteCode pointer checked against CodeLines just before (REP string chunks,
  // read-modify-write operands), and through Mmu::writeWatchedPage (cpu/watched_store.h),
  // which stores only into a page without code lines and reports a watched store itself,
  // from the page's ranges as of watchEpoch. The storing CPU leaves its block after a
  // store that invalidated code, so its next instruction is fetched anew; every CPU
  // compares generations at each block lookup, and a CPU's run slice always ends at a
  // block boundary, so another CPU sees the store at its next block.
  bool pageHoldsCode(uint64_t Pfn) const { return Pfn < NumPfns && CodeLines[Pfn]; }
  uint64_t codeGeneration(uint64_t Pfn) const { return Pfn < NumPfns ? CodeGen[Pfn] : 0; }
  uint64_t codeLines(uint64_t Pfn) const { return Pfn < NumPfns ? CodeLines[Pfn] : 0; }
  /// The mask of the 64-byte lines that bytes [Offset, Offset + SizeBytes) of one page
  /// touch; SizeBytes >= 1 and Offset + SizeBytes <= 4096.
  static uint64_t lineMask(unsigned Offset, unsigned SizeBytes) {
    const unsigned First = Offset >> 6, Last = (Offset + SizeBytes - 1) >> 6;
    return (~uint64_t(0) >> (63 - Last)) & (~uint64_t(0) << First);
  }
  /// Records that a block with bytes in Lines of page Pfn was decoded. Returns true if
  /// the page held no code before: the caller must then take away every CPU's fast
  /// write mapping of it (Cpu::dropWriteMappings).
  bool markCodeLines(uint64_t Pfn, uint64_t Lines) {
    if (Pfn >= NumPfns)
      return false;
    const bool First = CodeLines[Pfn] == 0;
    CodeLines[Pfn] |= Lines;
    CodePages += First && Lines;
    return First;
  }
  /// True if no write touched any of Lines of page Pfn after generation Gen: a block with
  /// those lines, current at Gen, is current now.
  bool linesUnwrittenSince(uint64_t Pfn, uint64_t Lines, uint64_t Gen) const;
  /// Called for every write into RAM (see above): reports it to the write watcher when
  /// it touches a watched range, and invalidates the decoded code in the lines of
  /// [Addr, Addr + SizeBytes). Returns true if it invalidated any.
  bool noteWrite(Hpa Addr, uint64_t SizeBytes, StoreAgent Agent = StoreAgent::Device) {
    if (!Watches.empty()) [[unlikely]]
      reportWatched(Addr, SizeBytes, Agent);
    return noteCodeWrite(Addr, SizeBytes);
  }
  /// The decoded-code half of noteWrite.
  bool noteCodeWrite(Hpa Addr, uint64_t SizeBytes) {
    const uint64_t A = Addr.value(), Pfn = A >> 12;
    if ((A & 0xfff) + SizeBytes <= kPageSize && SizeBytes) [[likely]] {
      if (Pfn >= NumPfns)
        return false;
      const uint64_t Hit = CodeLines[Pfn] & lineMask(unsigned(A & 0xfff), unsigned(SizeBytes));
      if (!Hit) [[likely]]
        return false;
      invalidateLines(Pfn, Hit);
      return true;
    }
    return noteWriteAcrossPages(Addr, SizeBytes);
  }
  /// Counts writes that invalidated code (each noteWrite that returned true, per page).
  uint64_t codeWriteCount() const { return GlobalCodeWrites; }
  /// Where the code generations (codeGeneration, indexed by frame) live, for code that
  /// reads them without a call (the translator's chained jumps, cpu/jit/translator.cpp).
  uint64_t *const *codeGenerationsAddress() const { return &CodeGen; }
  /// Where codeWriteCount lives (the same use).
  const uint64_t *codeWriteCountAddress() const { return &GlobalCodeWrites; }

  // --- Write watches (the ground truth of a hypervisor's trace slots, the run control's
  // write stops, MONITOR) ---
  //
  // Every store into a watched range is reported to the WriteWatcher (setWriteWatcher)
  // with its StoreAgent: noteWrite, which every store into RAM passes, reports it. The
  // processors turn that into VmxTransitionObserver::watchedStore with the storing CPU
  // (for a device's store, the CPU whose instruction made the device store), its TSC and
  // RIP, and into MONITOR's triggers (cpu/monitor.h). How: no processor keeps a fast
  // write mapping (TlbWrite) of a page holding a watched range, exactly as for a page
  // holding decoded code, so every store into such a page takes a slow path (the
  // TlbWriteCode entry or the full translation in cpu/memory.cpp), which compares it
  // with the ranges. The TLB hit path is unchanged. Whoever adds a range must drop every
  // CPU's TlbWrite entries of its pages (Mmu::dropWriteMappings) before they run on.
  // Ranges are few (one table and one slot array per CPU, and the write conditions of
  // harness/run_control.h while a run waits for them).
  void watchWrites(Hpa Base, uint64_t SizeBytes);
  /// Removes one range added with the same Base and SizeBytes (false if there is none).
  /// The pages' write mappings stay on the slow path until re-filled, which is harmless.
  bool unwatchWrites(Hpa Base, uint64_t SizeBytes);
  bool watching() const { return !Watches.empty(); }
  void setWriteWatcher(WriteWatcher *W) { Watcher = W; }
  /// Who noteWrite reports a watched store to (null: nobody).
  WriteWatcher *writeWatcher() const { return Watcher; }
  /// Moves at every change of the watched ranges, of writes or of reads (watchWrites,
  /// unwatchWrites, watchReads, unwatchReads, load): what a processor learned of a page's
  /// ranges (watchedRangesInPage, pageWatched) stays true while it is unchanged. Never 0.
  uint64_t watchEpoch() const { return WatchEpoch; }
  /// A write-watched range clipped to one page: page offsets [Begin, End).
  struct PageRange {
    uint16_t Begin, End;
  };
  /// The write-watched ranges that touch page Pfn, clipped to it: the first Max are
  /// stored in Out; returns how many there are (more than Max: some were left out). A
  /// store inside the page touches a watched range (rangeWatched) exactly when it
  /// touches one of them.
  unsigned watchedRangesInPage(uint64_t Pfn, PageRange *Out, unsigned Max) const;
  /// True if page Pfn holds a byte of a watched range, of writes or of reads (a page
  /// holding a read watch has no fast write mapping either: a read-modify-write operand
  /// is read through it).
  bool pageWatched(uint64_t Pfn) const {
    if (Watches.empty() && ReadWatches.empty()) [[likely]]
      return false;
    return pageIn(Watches, Pfn) || pageIn(ReadWatches, Pfn);
  }
  /// True if [Addr, Addr + SizeBytes) overlaps a watched range (of writes).
  bool rangeWatched(uint64_t Addr, uint64_t SizeBytes) const {
    return rangeIn(Watches, Addr, SizeBytes);
  }

  // --- Read watches (the run control's read and access stops) ---
  //
  // A processor reports each read of data through a linear address that touches a
  // read-watched range to its transition observer (VmxTransitionObserver::watchedLoad):
  // the reads of cpu/memory.cpp's readLinearSlow, which every such read takes for a page
  // holding a read watch. How: no processor keeps a fast read mapping (TlbRead) of such a
  // page, nor a fast write mapping (TlbWrite: read-modify-write operands are read
  // through it); Mmu::translate refuses both, so the hit paths of
  // cpu/memory.h, the string fast paths and the translator's inline loads
  // (cpu/jit/translator.cpp, emitTlbHitMov) all miss there and take the slow path, which
  // compares the access with the ranges. Nothing else changes: the TLB hit path costs
  // what it did, and a miss pays one test of readWatching(). Whoever adds a range must
  // drop every CPU's read and write entries of its pages (Mmu::dropDataMappings) before
  // they run on. What is not reported (README.md, "Watchpoints"): the processor's own
  // reads by physical address (paging-structure and EPT entries of a walk, the VMCS and
  // VMX's MSR areas, the virtual-APIC page, posted-interrupt descriptors), instruction
  // fetch, and reads by devices (DMA) and by the debugger. Read watches are not saved in
  // snapshots: they live for one Machine::runUntil.
  void watchReads(Hpa Base, uint64_t SizeBytes);
  /// Removes one range added with the same Base and SizeBytes (false if there is none).
  bool unwatchReads(Hpa Base, uint64_t SizeBytes);
  bool readWatching() const { return !ReadWatches.empty(); }
  /// True if page Pfn holds a byte of a read-watched range.
  bool pageReadWatched(uint64_t Pfn) const {
    if (ReadWatches.empty()) [[likely]]
      return false;
    return pageIn(ReadWatches, Pfn);
  }
  /// True if [Addr, Addr + SizeBytes) overlaps a read-watched range.
  bool rangeReadWatched(uint64_t Addr, uint64_t SizeBytes) const {
    return rangeIn(ReadWatches, Addr, SizeBytes);
  }

  // --- The A20 gate (the platform's A20M# input of every processor) ---
  //
  // SDM Vol. 3A, "Address Translation" / "A20M#" (and Vol. 3A, "Real-Address Mode
  // Operation"): while the PC's A20 gate is off the chipset asserts A20M#, and the
  // processor forces physical address bit 20 to 0 for every memory access (fetch, data,
  // page-structure reads) — the 8086's 1 MiB wrap. The gate is machine-wide (port 0x92
  // bit 1 OR the i8042 output port bit 1, harness/devices/a20_gate.h), so its mask lives
  // here, beside the memory every CPU shares. The processor ANDs it into the physical
  // address when it translates (cpu/translation.cpp), outside VMX operation only (VMXON
  // "blocks and disables A20M"); whoever changes it must flush every CPU's TLBs and
  // decoded blocks (the rule is in cpu/mmu.h). Addresses handed to PhysMem are never
  // masked again here: loaders and devices see the real address space.
  uint64_t a20Mask() const { return A20Mask; }
  bool a20Enabled() const { return A20Mask == ~uint64_t(0); }
  void setA20(bool Enabled) { A20Mask = Enabled ? ~uint64_t(0) : ~(uint64_t(1) << 20); }

  // --- Snapshot (harness/snapshot.h) ---
  //
  // RAM is saved page by page, only the pages that are not all zero (each behind its
  // frame number): a page the guest never wrote reads as zero and costs nothing, so a
  // snapshot holds what the loaders and the guest put there. The A20 mask and the write
  // watches and the lines that hold decoded code (CodeLines) are saved too. load()
  // makes RAM equal to the snapshot (pages it does not hold are zeroed); every
  // processor's decoded blocks must be flushed with it (Cpu::load does). The MMIO and read-only
  // regions are the machine's configuration and are not saved.
  void save(SnapshotWriter &W) const;
  void load(SnapshotReader &R);

private:
  struct Region {
    uint64_t Base, Size;
    MmioDevice *Dev;
  };
  /// The read-only range (setReadOnly): reads the RAM beneath it, ignores writes.
  class ReadOnlyRam final : public MmioDevice {
  public:
    uint64_t mmioRead(uint64_t Offset, unsigned SizeBytes) override;
    void mmioWrite(uint64_t, unsigned, uint64_t) override {}
    const uint8_t *Bytes = nullptr;
    uint64_t Size = 0;
  };
  ReadOnlyRam Rom;
  uint64_t RomBase = 0;
  uint64_t RamSize, LowSize, HighSize;
  uint8_t *Low = nullptr, *High = nullptr;
  std::vector<Region> Mmio;     // sorted by base; few entries
  uint64_t MmioLowWater = ~0ull; // lowest MMIO base, to keep RAM hits to one compare
  // Indexed by page frame number up to the end of RAM; mapped NORESERVE so untouched
  // entries cost no host memory (LineGen, 512 bytes a page, is written only when code
  // is overwritten).
  uint64_t NumPfns = 0;
  uint64_t *CodeLines = nullptr;
  uint64_t *CodeGen = nullptr;
  uint64_t *LineGen = nullptr; ///< 64 per page
  uint64_t GlobalCodeWrites = 0;
  uint64_t A20Mask = ~uint64_t(0); ///< enabled at start-up, as SeaBIOS leaves it
  uint64_t WatchEpoch = 1;         ///< watchEpoch()
  uint64_t CodePages = 0; ///< pages whose CodeLines are not 0 (zeroRam's scan skips at 0)
  struct WatchRange {
    uint64_t Base, Size;
    uint32_t Refs; ///< watchWrites calls not yet undone by unwatchWrites
  };
  std::vector<WatchRange> Watches;
  std::vector<WatchRange> ReadWatches;
  WriteWatcher *Watcher = nullptr;
  static bool pageIn(const std::vector<WatchRange> &Ranges, uint64_t Pfn) {
    for (const WatchRange &W : Ranges)
      if (Pfn >= W.Base >> 12 && Pfn <= (W.Base + W.Size - 1) >> 12)
        return true;
    return false;
  }
  static bool rangeIn(const std::vector<WatchRange> &Ranges, uint64_t Addr, uint64_t SizeBytes) {
    for (const WatchRange &W : Ranges)
      if (Addr < W.Base + W.Size && W.Base < Addr + SizeBytes)
        return true;
    return false;
  }
  static void addRange(std::vector<WatchRange> &Ranges, Hpa Base, uint64_t SizeBytes);
  static bool removeRange(std::vector<WatchRange> &Ranges, Hpa Base, uint64_t SizeBytes);
  void reportWatched(Hpa Addr, uint64_t SizeBytes, StoreAgent Agent) {
    if (Watcher && rangeWatched(Addr.value(), SizeBytes))
      Watcher->watchedWrite(Addr, SizeBytes, Agent);
  }
  void invalidateLines(uint64_t Pfn, uint64_t Lines);
  bool noteWriteAcrossPages(Hpa Addr, uint64_t SizeBytes);
};

} // namespace vmxsim
