// The translation cache (issue 17; design and rules in docs/TRANSLATOR.md): hot decoded
// blocks of 64-bit code become x86-64 host code that does exactly what the interpreter
// does with them, instruction for instruction. One Translator per CPU, created only when
// the CPU's ExecMode is not Interp.
#pragma once
#include "cpu/cpu.h"
#include "cpu/jit/exec_mode.h"
#include "cpu/jit/jit_form.h"
#include "cpu/status.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>

namespace vmxsim {

class Cpu;
struct Block;
struct DecodedInsn;
struct JitForm;

/// Why a block was not translated (one counter each; `vmxsim run --jit-stats`).
enum class JitRefusal : uint8_t {
  UnsupportedInsn, ///< an instruction outside the supported set (docs/TRANSLATOR.md)
  UnsupportedForm, ///< a supported instruction in a form the emitter does not take
  CodeTooLarge,    ///< the block's host code did not fit the emitter's buffer
  Count
};

/// Why lockstep ran a block translated only, without the interpreter's pass to compare
/// with (JitStats::LockstepUncompared; docs/TRANSLATOR.md, "Lockstep").
enum class LockstepSkip : uint8_t {
  VmxInsn,        ///< VMREAD or VMWRITE: their effects on a VMCS are not undone
  DataBreakpoint, ///< a data breakpoint is armed (the accesses report to DR6)
  Device,         ///< the pass reached memory outside plain RAM (StoreLogRefusal)
  CodeOrWatched,  ///< a store into code or a watched range, a read of a read-watched one
  VmExit,         ///< an access would have caused a VM exit
  Full,           ///< more stores than the log holds, or one too large for it
  Other,          ///< the pass ended in another status (shutdown, an emulator gap)
  Count
};

/// Block::JitCalls: the translation calls handlers (memory forms, handler-run
/// instructions); it runs VMREAD or VMWRITE (LockstepSkip::VmxInsn).
namespace jitcalls {
inline constexpr uint8_t Handlers = 1, Vmx = 2;
}

struct JitStats {
  uint64_t Translated = 0;   ///< blocks translated
  uint64_t Refused[size_t(JitRefusal::Count)] = {};
  uint64_t Flushes = 0;      ///< code cache flushed whole because it was full
  uint64_t Runs = 0;         ///< translated block entries
  uint64_t InsnsTranslated = 0; ///< instructions retired while translated code ran
  uint64_t Bailouts = 0;     ///< entries that handed the rest of the block to the interpreter
  uint64_t LockstepCompared = 0; ///< blocks run both ways and compared (Lockstep)
  /// Of those, blocks whose interpreter pass stored into memory: the bytes it stored
  /// were compared too.
  uint64_t LockstepComparedStores = 0;
  /// Of those, blocks that faulted, compared up to the fault (the exception too).
  uint64_t LockstepComparedFaults = 0;
  /// Of those, blocks whose translation handed the rest to the interpreter (bail-outs),
  /// continued by the interpreter before the comparison, as the run loop continues them.
  uint64_t LockstepContinued = 0;
  /// Blocks run translated only, by reason.
  uint64_t LockstepUncompared[size_t(LockstepSkip::Count)] = {};
  /// Blocks re-decoded (after their cache slot was reused, or a write elsewhere in their
  /// page) whose bytes had not changed: their translation was kept, not made again.
  uint64_t Kept = 0;
  /// Jumps from one translated block straight into the next (no return to the run loop).
  uint64_t Chained = 0;
  /// Exits of a translated block linked to the translation of their successor.
  uint64_t Links = 0;
  /// Chained jumps through the table of targets (an exit whose own cells did not hold).
  uint64_t TargetChained = 0;
  /// Translated loops of one block that keep guest registers in host registers.
  uint64_t HeldLoops = 0;
  /// Of those, loops whose closing JCC branches on the host's flags (docs/TRANSLATOR.md).
  uint64_t FusedLoops = 0;
  /// Unsupported instructions by the decoder's mnemonic number (the first of each block
  /// that was refused for one).
  static constexpr unsigned kMnemonics = 2048;
  uint32_t UnsupportedMnemonic[kMnemonics] = {};
};

/// What Translator::run did with a block.
struct JitRun {
  bool Ran = false;    ///< false: the block has no translation (yet); interpret it
  bool Mismatch = false; ///< Lockstep found a difference (Cpu::StopWhat names it)
  Status St = Status::Ok; ///< the status of the instruction at Done when not Ok
  uint8_t Done = 0;    ///< instructions of Last completed
  /// The block the run ended in: the block given to run(), or one that translated code
  /// jumped to (chained) from it.
  Block *Last = nullptr;
};

class Translator {
public:
  /// Blocks are translated after they have been entered this many times through the
  /// block cache (docs/TRANSLATOR.md, "When a block is translated").
  static constexpr uint16_t kDefaultThreshold = 16;
  /// Host code bytes per CPU (reserved with mmap, committed as used).
  static constexpr size_t kCodeBytes = 16u << 20;
  /// Entries of the table of kept translations, direct-mapped by physical address
  /// (docs/TRANSLATOR.md, "Translations that outlive their decoded block").
  static constexpr size_t kKeptEntries = 1u << 16;
  /// The host's page size, the unit of mprotect (x86-64 Linux: 4 KiB; the constructor
  /// leaves the cache off on a host that says otherwise).
  static constexpr size_t kHostPage = 4096;

  Translator(Cpu &C, ExecMode Mode);
  ~Translator();
  Translator(const Translator &) = delete;
  Translator &operator=(const Translator &) = delete;

  /// Runs cached block B from its first instruction if it has a translation (making one
  /// when it has become hot). The caller has checked that the interpreter's fast loop
  /// would run the whole block: no stepping, breakpoints or observers, the instruction
  /// budget and the event window beyond its end. Prev: the block that ran to its end
  /// just before, when B is what the block cache's lookup returned right after it
  /// (Mmu::cachedBlock or a current link), else null; the exit of Prev's translation
  /// that led here is then linked to B's (docs/TRANSLATOR.md, "Chaining").
  JitRun run(Block &B, const Block *Prev) {
    if (B.JitStamp == Stamp && Mode == ExecMode::Translate) [[likely]] {
      if (!B.JitCode) { // refused in this generation: the interpreter runs it
        PendingCell = nullptr;
        return {};
      }
      if (PendingCell)
        link(B, Prev);
      return enter(B, reinterpret_cast<Entry>(const_cast<void *>(B.JitCode)));
    }
    return runSlow(B, Prev);
  }

  ExecMode mode() const { return Mode; }
  const JitStats &stats() const { return Stats; }
  uint16_t Threshold = kDefaultThreshold;
  /// The host executes LAHF in 64-bit mode (set from CPUID.80000001H:ECX[0]); false: the
  /// host's flags are taken with PUSHF (a test sets it to run that way on any host).
  bool HostLahf = false;
  /// False when the host refused the code cache (mmap/mprotect failed): nothing is
  /// translated and everything is interpreted.
  bool usable() const { return Code != nullptr; }
  /// True when the cache is one memory object mapped twice (writable, executable), so
  /// installing a block needs no system call; false on the mprotect fallback.
  bool dualMapped() const { return CodeRw != nullptr; }
  /// A one-line text of the counters (for `--jit-stats`).
  void describe(char *Out, size_t Size) const;
  /// jitFormOf(I), through the cache below.
  const JitForm &formOf(const DecodedInsn &I);
  /// When set (`vmxsim run --jit-perf-map`), every translation is named in it as a line
  /// `START SIZE vmxsim_cpuN_rip_RIP_pa_PA_nK` (hex), the format of Linux perf's
  /// /tmp/perf-PID.map, so that `perf report` names the guest code the host time went to.
  /// Nothing guest-visible depends on it.
  std::FILE *PerfMap = nullptr;

private:
  using Entry = uint64_t (*)(Cpu *, uint64_t EntryRip);
  /// Translates B into the code cache; null when refused (counted).
  Entry translate(Block &B);
  bool emitBlock(Block &B, void *Emitter);
  /// Emits an exit's chained jump (RSI = its cell); falls through, or jumps to label
  /// Fail, when the link does not hold (Valid: its own label). RaxIsRip: RAX already
  /// holds the RIP stored (a direct branch's exit).
  /// Installs the full test of a chain cell (emitChain's slow half), shared by every
  /// exit of the cache's generation, at the start of the generation.
  bool emitChainTest();
  size_t ChainTestAt = 0;    ///< its offset in the cache
  bool ChainTestReady = false; ///< installed in this generation
  void emitChain(void *Emitter, unsigned Fail, unsigned Valid, bool Target = false,
                 bool RaxIsRip = false);
  /// Emits the inline TLB test of an access of Size bytes at the linear address in RAX,
  /// leaving its host address in RAX (Write: through the write TLB); jumps to label Miss
  /// when the access is not a hit, to the bail-out before instruction K when RFLAGS.AC
  /// is set.
  void emitTlbHit(void *BlockEmitter, unsigned Size, bool Write, unsigned Miss, unsigned K);
  /// Emits memory form F of I's TLB-hit path (the instruction at Off, the next at Next,
  /// both relative to the entry RIP); jumps to label Miss for anything else. False for
  /// a form not taken.
  bool emitMemHit(void *BlockEmitter, const DecodedInsn &I, const JitForm &F, int32_t Off,
                  int32_t Next, unsigned Miss);
  JitRun runSlow(Block &B, const Block *Prev);
  JitRun enter(Block &B, Entry Fn) {
    const uint64_t Before = C.Retired;
    Chain.Current = &B;
    Chain.LastCell = nullptr;
    const uint64_t R = Fn(&C, C.S.Rip);
    JitRun Out;
    Out.Ran = true;
    Out.Done = uint8_t(R);
    Out.St = Status(uint8_t(R >> 8));
    Out.Last = Chain.Current;
    ++Stats.Runs;
    Stats.Chained = Chain.Chained;
    Stats.TargetChained = Chain.TargetChained;
    Stats.InsnsTranslated += C.Retired - Before;
    if (Out.Done != Out.Last->NumInsns || Out.St != Status::Ok) {
      ++Stats.Bailouts;
      PendingCell = nullptr;
    } else {
      // Ran to its end through an exit whose link did not hold: link it to the block
      // the run loop finds next (run(), link()).
      PendingCell = Chain.LastCell;
      PendingFrom = Out.Last;
      PendingStamp = Stamp;
    }
    return Out;
  }
  /// Links the pending exit (PendingCell) to B's translation when the block that took it
  /// is Prev and the cache has not been flushed since.
  void link(const Block &B, const Block *Prev);

  JitRun lockstep(Block &B, Entry Fn);
  /// Gives B, just decoded, the translation made for the same bytes at the same physical
  /// address (and so in the same cache slot) if the code cache still holds it.
  bool reattach(Block &B);
  /// The block's instruction bytes in guest memory (null outside RAM) and their count.
  const uint8_t *guestBytes(const Block &B, size_t &Len);
  uint8_t CrossBytes[16] = {}; ///< guestBytes' copy of a page-crossing instruction
  /// Copies Len bytes to the code cache at Off (the writable view, or the mprotect path).
  bool install(size_t Off, const uint8_t *Src, size_t Len);

  /// The data of one exit of a translated block (docs/TRANSLATOR.md, "Chaining"): the
  /// exit jumps to Body when the run loop's lookup at the RIP it leaves with would
  /// return Next (Mmu::cachedBlock's test on La, Tag, the fetch TLB entry's frame Pfn and
  /// the block slot, which must hold Pa, current, with this translation) and the run
  /// loop would run Next whole (NextCost, NextInsns). Read by the emitted code at these
  /// offsets.
  struct ChainCell {
    uint64_t La, Tag, Pfn;
    const void *Body;
    Block *Next; ///< null: never filled
    uint64_t NextCost, NextInsns;
    /// The first cell of a block: 1 when the two cells serve one exit (link()); the
    /// second of such a pair: which of the two link() refills next.
    uint64_t Pad;
    uint64_t Pa;
    /// The chain stamp (Mmu::chainStamp) when the cell was filled or last found
    /// valid by the full test (0: never).
    uint64_t Stamp;
    uint64_t Unused[2];
  };
  /// What the emitted code reads and writes besides the Cpu (R13 holds its address): the
  /// exit taken last, the block a run ended in, the counts of chained jumps.
  struct ChainState {
    ChainCell *LastCell;
    Block *Current; ///< the block the run ended in (stored by the exit that leaves it)
    uint64_t Chained;
    uint64_t TargetChained; ///< of those, through the table of targets
  };
  ChainState Chain = {};
  /// Two cells per translated block (Translate mode), allocated with the code and
  /// dropped with it at a flush.
  static constexpr size_t kCells = 1u << 17;
  ChainCell *Cells = nullptr;
  size_t CellsUsed = 0;
  /// The table of targets: after the cells of an exit without a direct branch (RET, an
  /// indirect JMP or CALL) the emitted code tries the cell at the slot of the RIP it
  /// leaves with, which link() fills from every such exit (docs/TRANSLATOR.md,
  /// "Chaining"). After the cells, in their mapping; emptied at a flush.
  static constexpr size_t kTargets = 4096;
  static constexpr unsigned kTargetShift = 10;
  ChainCell *Targets = nullptr;
  static size_t targetSlot(uint64_t Rip) {
    return (uint32_t(Rip) >> kTargetShift ^ uint32_t(Rip)) & (kTargets - 1);
  }
  ChainCell *PendingCell = nullptr;
  const Block *PendingFrom = nullptr;
  uint32_t PendingStamp = 0;
  /// Bytes of the prologue: a chained jump enters a block's code this far in.
  static constexpr size_t kPrologueBytes = 25;

  /// A translation, found again by the physical address of its block: where its code and
  /// a copy of the guest bytes it was made from are in the cache.
  struct KeptEntry {
    uint64_t Pa;
    uint32_t Stamp; ///< the cache generation (0: empty)
    uint32_t CodeOff, BytesOff;
    uint16_t Bytes;
    uint8_t NumInsns, Calls;
  };

  Cpu &C;
  ExecMode Mode;
  JitStats Stats;
  /// kCodeBytes of host code, read+execute (on the mprotect fallback: except while a
  /// block is written).
  uint8_t *Code = nullptr;
  /// The writable view of the same memory (dual mapping), else null.
  uint8_t *CodeRw = nullptr;
  size_t Used = 0;
  std::unique_ptr<KeptEntry[]> Kept;
  /// Bumped by every flush of the code cache: a block's translation is valid only while
  /// its stamp equals it (Block::JitStamp), so a flush is O(1).
  uint32_t Stamp = 1;
  /// Scratch for one block's code, copied into the cache when complete.
  static constexpr size_t kScratchBytes = 16384;
  uint8_t *Scratch = nullptr;
  char Message[256] = {};
  /// Lockstep's log of the interpreter's stores; allocated only in ExecMode::Lockstep.
  std::unique_ptr<StoreLog> Log;
  /// The form of each instruction of the block being translated (translate fills it
  /// from formOf; emitBlock reads it).
  JitForm Forms[kMaxBlockInsns] = {};
  /// jitFormOf's answers by handler: it compares the handler with each family's
  /// instantiations (hundreds of compares), and a form depends on the handler alone.
  struct FormSlot {
    Handler Fn = nullptr;
    JitForm F;
  };
  static constexpr size_t kFormSlots = 1024;
  FormSlot FormCache[kFormSlots] = {};
  /// callsHandler's answers by mnemonic (0: not asked yet, 1: no, 2: yes, 3: yes, and it
  /// is VMREAD or VMWRITE).
  uint8_t CallsByMnemonic[JitStats::kMnemonics] = {};
  bool HeldRegisters = false; ///< the block emitBlock made last holds registers
  bool FusedBranch = false;   ///< and its JCC branches on the host's flags
  // Offsets in the Cpu of what the emitted code reads and writes.
  int32_t OffGpr = 0, OffRip = 0, OffRflags = 0, OffCycles = 0, OffRetired = 0,
          OffBlockStop = 0, OffWindowDue = 0, OffInsnEnd = 0, OffFetchTagLow = 0,
          OffFetchTlb = 0, OffBlockKeyBase = 0, OffTlbRead = 0, OffTlbWrite = 0,
          OffChainSum = 0;
  const uint64_t *CodeWrites = nullptr; ///< PhysMem's code write count
  uint64_t *const *CodeGens = nullptr; ///< where PhysMem keeps its code generations
};

} // namespace vmxsim
