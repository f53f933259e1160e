// The translation cache (issue 17; design and rules in docs/TRANSLATOR.md): hot decoded
// blocks of 64-bit code become x86-64 host code that does exactly what the interpreter
// does with them, instruction for instruction. One Translator per CPU, created only when
// the CPU's ExecMode is not Interp.
#pragma once
#include "cpu/cpu.h"
#include "cpu/jit/exec_mode.h"
#include "cpu/status.h"

#include <cstddef>
#include <cstdint>

namespace vmxsim {

class Cpu;
struct Block;
struct DecodedInsn;

/// Why a block was not translated (one counter each; `vmxsim run --jit-stats`).
enum class JitRefusal : uint8_t {
  UnsupportedInsn, ///< an instruction outside the supported set (docs/TRANSLATOR.md)
  UnsupportedForm, ///< a supported instruction in a form the emitter does not take
  CodeTooLarge,    ///< the block's host code did not fit the emitter's buffer
  Count
};

struct JitStats {
  uint64_t Translated = 0;   ///< blocks translated
  uint64_t Refused[size_t(JitRefusal::Count)] = {};
  uint64_t Flushes = 0;      ///< code cache flushed whole because it was full
  uint64_t Runs = 0;         ///< translated block entries
  uint64_t InsnsTranslated = 0; ///< instructions retired while translated code ran
  uint64_t Bailouts = 0;     ///< entries that handed the rest of the block to the interpreter
  uint64_t LockstepCompared = 0; ///< blocks run both ways and compared (Lockstep)
  uint64_t LockstepUncompared = 0; ///< blocks with memory forms, run translated only
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
  uint8_t Done = 0;    ///< instructions of the block completed
};

class Translator {
public:
  /// Blocks are translated after they have been entered this many times through the
  /// block cache (docs/TRANSLATOR.md, "When a block is translated").
  static constexpr uint16_t kDefaultThreshold = 16;
  /// Host code bytes per CPU (reserved with mmap, committed as used).
  static constexpr size_t kCodeBytes = 4u << 20;
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
  /// budget and the event window beyond its end.
  JitRun run(Block &B) {
    if (B.JitStamp == Stamp && B.JitCode && Mode == ExecMode::Translate) [[likely]]
      return enter(B, reinterpret_cast<Entry>(const_cast<void *>(B.JitCode)));
    return runSlow(B);
  }

  ExecMode mode() const { return Mode; }
  const JitStats &stats() const { return Stats; }
  uint16_t Threshold = kDefaultThreshold;
  /// False when the host refused the code cache (mmap/mprotect failed): nothing is
  /// translated and everything is interpreted.
  bool usable() const { return Code != nullptr; }
  /// A one-line text of the counters (for `--jit-stats`).
  void describe(char *Out, size_t Size) const;

private:
  using Entry = uint64_t (*)(Cpu *, uint64_t EntryRip);
  /// Translates B into the code cache; null when refused (counted).
  Entry translate(Block &B);
  bool emitBlock(Block &B, void *Emitter);
  JitRun runSlow(Block &B);
  JitRun enter(Block &B, Entry Fn) {
    const uint64_t Before = C.Retired;
    const uint64_t R = Fn(&C, C.S.Rip);
    JitRun Out;
    Out.Ran = true;
    Out.Done = uint8_t(R);
    Out.St = Status(uint8_t(R >> 8));
    ++Stats.Runs;
    Stats.InsnsTranslated += C.Retired - Before;
    if (Out.Done != B.NumInsns || Out.St != Status::Ok)
      ++Stats.Bailouts;
    return Out;
  }

  JitRun lockstep(Block &B, Entry Fn);

  Cpu &C;
  ExecMode Mode;
  JitStats Stats;
  uint8_t *Code = nullptr; ///< kCodeBytes of host code, read+execute except while writing
  size_t Used = 0;
  /// Bumped by every flush of the code cache: a block's translation is valid only while
  /// its stamp equals it (Block::JitStamp), so a flush is O(1).
  uint32_t Stamp = 1;
  /// Scratch for one block's code, copied into the cache when complete.
  static constexpr size_t kScratchBytes = 16384;
  uint8_t *Scratch = nullptr;
  char Message[192] = {};
  // Offsets in the Cpu of what the emitted code reads and writes.
  int32_t OffGpr = 0, OffRip = 0, OffRflags = 0, OffCycles = 0, OffRetired = 0,
          OffBlockStop = 0, OffWindowDue = 0, OffInsnEnd = 0;
};

} // namespace vmxsim
