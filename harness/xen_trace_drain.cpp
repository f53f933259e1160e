// Xen 4.17's trace buffers drained from guest memory (harness/xen_trace_drain.h says what
// is read and why; docs/xen-trace.md, "vmxsim's own drain").
#include "harness/xen_trace_drain.h"

#include "harness/loader.h"
#include "harness/loader_internal.h"
#include "harness/machine.h"
#include "trace/writer.h"

#include <algorithm>
#include <elf.h>
#include <array>
#include <cstring>
#include <fmt/format.h>

namespace vmxsim {

namespace {

constexpr uint64_t kPage = 4096;
// SDM Vol. 3A 4.5 (4-level paging): the physical address in a paging-structure entry,
// bits 51:12 (MAXPHYADDR at most 52), bit 0 present, bit 7 PS in a PDPTE (1 GiB page) or
// a PDE (2 MiB page).
constexpr uint64_t kAddrMask = 0x000ffffffffff000ull;
constexpr uint64_t kPresent = 1, kPsBit = 0x80;
// xen/include/public/trace.h: struct t_buf { uint32_t cons; uint32_t prod; }, the records
// after it.
constexpr uint32_t kTBufBytes = 8;

// ELF (gABI): section types, symbol binding and type.
constexpr uint32_t kShtSymtab = 2;
constexpr uint8_t kSttFile = 4, kStbLocal = 0, kStbGlobal = 1;
// The source file whose statics the drain reads (xen-syms' FILE symbol for it).
constexpr std::string_view kTraceFile = "common/trace.c";

Error badSyms(const std::string &Path, const std::string &Why) {
  return Error(ErrorCode::BadSymbolFile, Why, Path);
}

/// The NUL-terminated string at Off of a string table [StrOff, StrOff + StrSize).
std::string_view strAt(std::span<const uint8_t> F, uint64_t StrOff, uint64_t StrSize,
                       uint64_t Off) {
  if (Off >= StrSize)
    return {};
  const char *S = reinterpret_cast<const char *>(F.data() + StrOff + Off);
  const void *End = std::memchr(S, 0, StrSize - Off);
  return End ? std::string_view(S, static_cast<const char *>(End) - S) : std::string_view();
}

} // namespace

std::string buildIdHex(const std::vector<uint8_t> &Note) {
  // A note: namesz, descsz, type (NT_GNU_BUILD_ID = 3), the name "GNU\0", the descriptor.
  if (Note.size() < 16)
    return {};
  uint32_t NameSz, DescSz;
  std::memcpy(&NameSz, Note.data(), 4);
  std::memcpy(&DescSz, Note.data() + 4, 4);
  const uint64_t Desc = 12 + ((uint64_t(NameSz) + 3) & ~uint64_t(3));
  if (Desc + DescSz > Note.size())
    return {};
  std::string Hex;
  for (uint64_t I = 0; I < DescSz; ++I)
    Hex += fmt::format("{:02x}", Note[Desc + I]);
  return Hex;
}

ErrorOr<XenTraceSymbols> readXenTraceSymbols(const std::string &Path) {
  using namespace loader;
  ImageFile File;
  if (Error E = ImageFile::open(Path, uint64_t(1) << 30, File))
    return badSyms(Path, "cannot read the Xen symbol file: " + E.Message);
  const std::span<const uint8_t> F = File.bytes();
  const uint64_t Size = F.size();
  if (!isElf(F) || Size < sizeof(Elf64_Ehdr) || F[EI_CLASS] != ELFCLASS64 ||
      F[EI_DATA] != ELFDATA2LSB)
    return badSyms(Path, "not a 64-bit little-endian ELF file (xen-syms of "
                         "xen-hypervisor-4.17-amd64-dbg is one)");
  // gABI "Sections": the section headers, the section-name string table.
  const uint64_t ShOff = le64(F, 40);
  const unsigned ShEntSize = le16(F, 58), ShNum = le16(F, 60), ShStrNdx = le16(F, 62);
  if (ShEntSize < sizeof(Elf64_Shdr) || !inFile(Size, ShOff, uint64_t(ShEntSize) * ShNum) ||
      ShStrNdx >= ShNum)
    return badSyms(Path, "its ELF section headers are missing or outside the file");
  auto sh = [&](unsigned I) { return ShOff + uint64_t(I) * ShEntSize; };
  const uint64_t NamesOff = le64(F, sh(ShStrNdx) + 24), NamesSize = le64(F, sh(ShStrNdx) + 32);
  if (!inFile(Size, NamesOff, NamesSize))
    return badSyms(Path, "its section-name table lies outside the file");

  XenTraceSymbols Syms;
  bool HaveNote = false, HaveSymtab = false;
  // Wanted symbols: name, whether a static of common/trace.c, where it goes, its size
  // (0: not checked).
  struct Want {
    std::string_view Name;
    bool TraceStatic;
    uint64_t *Value;
    uint64_t Size;
    bool Found = false;
    uint64_t FoundSize = 0;
  };
  std::array<Want, 6> Wants{{
      {"t_info", true, &Syms.TInfo, 8},
      {"t_info_pages", true, &Syms.TInfoPages, 4},
      {"data_size", true, &Syms.DataSize, 4},
      {"per_cpu__t_bufs", true, &Syms.TBufs, 8},
      {"__per_cpu_offset", false, &Syms.PerCpuOffset, 0},
      {"idle_pg_table", false, &Syms.IdlePgTable, 0},
  }};
  for (unsigned S = 0; S < ShNum; ++S) {
    const uint64_t Sh = sh(S);
    const std::string_view Name = strAt(F, NamesOff, NamesSize, le32(F, Sh));
    const uint64_t Off = le64(F, Sh + 24), Bytes = le64(F, Sh + 32);
    if (Name == ".note.gnu.build-id") {
      if (!inFile(Size, Off, Bytes) || Bytes < 16 || Bytes > 1024)
        return badSyms(Path, "its .note.gnu.build-id section is malformed");
      Syms.BuildIdVa = le64(F, Sh + 16);
      Syms.BuildIdNote.assign(F.begin() + Off, F.begin() + Off + Bytes);
      HaveNote = !buildIdHex(Syms.BuildIdNote).empty();
    }
    if (le32(F, Sh + 4) != kShtSymtab || HaveSymtab)
      continue;
    // gABI "Symbol Table": Elf64_Sym {st_name, st_info, st_other, st_shndx, st_value,
    // st_size}; the FILE symbol of a source file precedes its LOCAL symbols.
    HaveSymtab = true;
    const uint32_t Link = le32(F, Sh + 40);
    const uint64_t EntSize = le64(F, Sh + 56);
    if (Link >= ShNum || EntSize < sizeof(Elf64_Sym) || !inFile(Size, Off, Bytes))
      return badSyms(Path, "its symbol table is malformed");
    const uint64_t StrOff = le64(F, sh(Link) + 24), StrSize = le64(F, sh(Link) + 32);
    if (!inFile(Size, StrOff, StrSize))
      return badSyms(Path, "its symbol string table lies outside the file");
    std::string_view CurFile;
    for (uint64_t E = 0; E + EntSize <= Bytes; E += EntSize) {
      const uint64_t Sym = Off + E;
      const std::string_view SymName = strAt(F, StrOff, StrSize, le32(F, Sym));
      const uint8_t Info = F[Sym + 4];
      if ((Info & 0xf) == kSttFile) {
        CurFile = SymName;
        continue;
      }
      for (Want &W : Wants) {
        if (SymName != W.Name)
          continue;
        const bool Matches = W.TraceStatic ? (Info >> 4) == kStbLocal && CurFile == kTraceFile
                                           : (Info >> 4) == kStbGlobal;
        if (!Matches)
          continue;
        if (W.Found)
          return badSyms(Path, fmt::format("symbol {} appears twice", W.Name));
        W.Found = true;
        *W.Value = le64(F, Sym + 8);
        W.FoundSize = le64(F, Sym + 16);
      }
    }
  }
  if (!HaveSymtab)
    return badSyms(Path, "no symbol table (a stripped Xen? the symbol file is xen-syms of "
                         "xen-hypervisor-4.17-amd64-dbg)");
  for (const Want &W : Wants) {
    if (!W.Found)
      return badSyms(Path, fmt::format("no symbol {}{} (not Xen 4.17's xen-syms?)", W.Name,
                                       W.TraceStatic ? " of common/trace.c" : ""));
    if (W.Size && W.FoundSize != W.Size)
      return badSyms(Path, fmt::format("symbol {} is {} bytes, not the {} of Xen 4.17", W.Name,
                                       W.FoundSize, W.Size));
  }
  const uint64_t PerCpuBytes = Wants[4].FoundSize;
  if (PerCpuBytes == 0 || PerCpuBytes % 8 != 0 || PerCpuBytes > 8 * 65536)
    return badSyms(Path, fmt::format("__per_cpu_offset is {} bytes, not NR_CPUS longs",
                                     PerCpuBytes));
  Syms.NrCpus = unsigned(PerCpuBytes / 8);
  if (!HaveNote)
    return badSyms(Path, "no GNU build-id note (.note.gnu.build-id) to compare with the "
                         "running Xen's");
  return Syms;
}

XenTraceDrain::XenTraceDrain(Machine &M, XenTraceSymbols Syms, std::string SymsPath,
                             trace::TraceWriter &Writer)
    : M(M), Syms(std::move(Syms)), SymsPath(std::move(SymsPath)), Writer(Writer) {}

void XenTraceDrain::fail(std::string Why) {
  if (Failed.empty())
    Failed = std::move(Why);
}

std::optional<uint64_t> XenTraceDrain::walk(uint64_t Root, uint64_t Va) const {
  // SDM Vol. 3A 4.5, "4-Level Paging and 5-Level Paging": PML4E (VA bits 47:39), PDPTE
  // (38:30; PS maps 1 GiB), PDE (29:21; PS maps 2 MiB), PTE (20:12). Rights and the
  // accessed and dirty flags are neither checked nor set: this is not the CPU's access.
  uint64_t Table = Root & kAddrMask;
  for (int Level = 3; Level >= 0; --Level) {
    const unsigned Shift = 12 + 9 * unsigned(Level);
    uint64_t E = 0;
    if (!M.mem().copyOut(Hpa(Table + ((Va >> Shift) & 511) * 8), &E, 8) || !(E & kPresent))
      return std::nullopt;
    if (Level == 0 || ((Level == 1 || Level == 2) && (E & kPsBit))) {
      const uint64_t Within = (uint64_t(1) << Shift) - 1;
      return (E & kAddrMask & ~Within) | (Va & Within);
    }
    Table = E & kAddrMask;
  }
  return std::nullopt;
}

std::optional<uint64_t> XenTraceDrain::xenPa(uint64_t Va) const {
  if (IdleRoot)
    return walk(*IdleRoot, Va);
  // Before idle_pg_table is known: CPU 0's tables in VMX root operation. A PV guest's
  // tables hold Xen's mappings too (unless XPTI gives it a reduced copy: then Xen is not
  // found at this point, and is at a later one).
  Cpu &C = M.cpu(0);
  uint64_t Root;
  if (C.NonRoot) {
    const ErrorOr<uint64_t> Host = M.readVmcs(0, "HostCr3");
    if (!Host)
      return std::nullopt;
    Root = *Host;
  } else {
    if (!(C.S.Cr0 & cr0::PG) || !C.S.longMode() || (C.S.Cr4 & cr4::LA57))
      return std::nullopt;
    Root = C.S.Cr3;
  }
  return walk(Root, Va);
}

bool XenTraceDrain::readXen(uint64_t Va, void *Out, uint64_t Bytes) const {
  uint8_t *P = static_cast<uint8_t *>(Out);
  while (Bytes) {
    const uint64_t Chunk = std::min(Bytes, kPage - (Va & (kPage - 1)));
    const std::optional<uint64_t> Pa = xenPa(Va);
    if (!Pa || !M.mem().copyOut(Hpa(*Pa), P, Chunk))
      return false;
    Va += Chunk;
    P += Chunk;
    Bytes -= Chunk;
  }
  return true;
}

bool XenTraceDrain::attach() {
  std::vector<uint8_t> Note(Syms.BuildIdNote.size());
  if (!readXen(Syms.BuildIdVa, Note.data(), Note.size()))
    return false; // Xen is not (yet) in long mode with its image mapped
  if (Note != Syms.BuildIdNote) {
    const std::string Running = buildIdHex(Note);
    fail(fmt::format("{} is not the symbol file of the running Xen: build id {} in the file, "
                     "{} in memory at {:#x}",
                     SymsPath, buildIdHex(Syms.BuildIdNote),
                     Running.empty() ? std::string("no build-id note") : Running,
                     Syms.BuildIdVa));
    return false;
  }
  Attached = true;
  return true;
}

bool XenTraceDrain::findBuffers() {
  uint64_t TInfo = 0;
  if (!readXen(Syms.TInfo, &TInfo, 8) || TInfo == 0)
    return false; // not set up yet (alloc_trace_bufs), or not mapped at this point
  // alloc_trace_bufs ran (after Xen moved itself and built its page tables): from now
  // on the translation goes through Xen's own idle_pg_table, whatever CPU 0 runs.
  const std::optional<uint64_t> Idle = xenPa(Syms.IdlePgTable);
  if (!Idle)
    return false;
  IdleRoot = *Idle & kAddrMask;
  auto nonsense = [&](std::string Why) {
    fail("Xen's trace buffers: " + Why);
    return false;
  };
  uint32_t TInfoPages = 0, DataSz = 0;
  uint16_t TbufSize = 0;
  if (!readXen(Syms.TInfoPages, &TInfoPages, 4) || !readXen(Syms.DataSize, &DataSz, 4))
    return nonsense("t_info_pages or data_size is not mapped to RAM");
  if (!readXen(TInfo, &TbufSize, 2))
    return nonsense(fmt::format("t_info {:#x} is not mapped to RAM", TInfo));
  // alloc_trace_bufs: data_size = pages * PAGE_SIZE - sizeof(struct t_buf).
  if (TbufSize == 0 || DataSz != uint32_t(TbufSize) * kPage - kTBufBytes)
    return nonsense(fmt::format("t_info->tbuf_size ({} pages) and data_size ({}) disagree",
                                TbufSize, DataSz));
  const uint64_t Words = uint64_t(TInfoPages) * (kPage / 4);
  const unsigned N = std::min(M.numCpus(), Syms.NrCpus);
  Pages.assign(N, {});
  for (unsigned Cpu = 0; Cpu < N; ++Cpu) {
    uint16_t Offset = 0;
    if (!readXen(TInfo + 2 + 2 * uint64_t(Cpu), &Offset, 2))
      return nonsense(fmt::format("t_info->mfn_offset[{}] is not mapped to RAM", Cpu));
    if (Offset == 0)
      continue; // the CPU was not online when Xen allocated the buffers
    if (uint64_t(Offset) + TbufSize > Words)
      return nonsense(fmt::format("CPU {}'s MFN list (word {}, {} pages) lies outside "
                                  "t_info's {} pages",
                                  Cpu, Offset, TbufSize, TInfoPages));
    std::vector<uint64_t> &P = Pages[Cpu];
    for (unsigned I = 0; I < TbufSize; ++I) {
      uint32_t Mfn = 0;
      if (!readXen(TInfo + 4 * (uint64_t(Offset) + I), &Mfn, 4))
        return nonsense(fmt::format("CPU {}'s MFN list is not mapped to RAM", Cpu));
      if (!M.mem().isRam(Hpa(uint64_t(Mfn) * kPage), kPage))
        return nonsense(fmt::format("CPU {}'s trace page {} (MFN {:#x}) is not RAM", Cpu, I, Mfn));
      P.push_back(uint64_t(Mfn) * kPage);
    }
    // alloc_trace_bufs: per_cpu(t_bufs, cpu) = mfn_to_virt(the first MFN), the per-CPU
    // copy at &per_cpu__t_bufs + __per_cpu_offset[cpu] (asm/percpu.h).
    uint64_t PerCpuOffset = 0, BufVa = 0;
    std::optional<uint64_t> BufPa;
    if (readXen(Syms.PerCpuOffset + 8 * uint64_t(Cpu), &PerCpuOffset, 8) &&
        readXen(Syms.TBufs + PerCpuOffset, &BufVa, 8))
      BufPa = xenPa(BufVa);
    if (!BufPa || *BufPa != P[0])
      return nonsense(fmt::format("per_cpu(t_bufs, {}) ({:#x}) is not the first page of its "
                                  "MFN list ({:#x})",
                                  Cpu, BufVa, P[0]));
  }
  DataSize = DataSz;
  HaveBuffers = true;
  return true;
}

void XenTraceDrain::drainCpu(unsigned Cpu) {
  const std::vector<uint64_t> &P = Pages[Cpu];
  uint32_t Meta[2] = {}; // struct t_buf {cons, prod}
  if (!M.mem().copyOut(Hpa(P[0]), Meta, sizeof Meta))
    return fail(fmt::format("CPU {}'s trace buffer at {:#x} is no longer RAM", Cpu, P[0]));
  const uint32_t Cons = Meta[0], Prod = Meta[1];
  // Xen's bogus() (common/trace.c): both multiples of 4 below 2 * data_size.
  if ((Prod & 3) || Prod >= 2 * DataSize || (Cons & 3) || Cons >= 2 * DataSize)
    return fail(fmt::format("CPU {}'s trace buffer has cons {:#x} and prod {:#x}, not "
                            "multiples of 4 below 2 * data_size ({:#x})",
                            Cpu, Cons, Prod, 2 * DataSize));
  if (Cons == Prod)
    return;
  // As xentrace's main loop: the window [cons, prod) modulo 2 * data_size, starting at
  // cons % data_size and wrapping at data_size.
  const uint32_t Window = Prod > Cons ? Prod - Cons : Prod + 2 * DataSize - Cons;
  if (Window > DataSize)
    return fail(fmt::format("CPU {}'s trace buffer holds {} bytes (cons {:#x}, prod {:#x}), "
                            "more than its {}",
                            Cpu, Window, Cons, Prod, DataSize));
  Scratch.resize(Window);
  for (uint32_t Done = 0; Done < Window;) {
    const uint32_t At = (Cons % DataSize + Done) % DataSize;
    const uint64_t Byte = kTBufBytes + uint64_t(At);
    const uint32_t Chunk = uint32_t(std::min<uint64_t>(
        {Window - Done, DataSize - At, kPage - (Byte & (kPage - 1))}));
    if (!M.mem().copyOut(Hpa(P[Byte / kPage] + (Byte & (kPage - 1))), Scratch.data() + Done,
                         Chunk))
      return fail(fmt::format("CPU {}'s trace page {} is no longer RAM", Cpu, Byte / kPage));
    Done += Chunk;
  }
  Writer.writeWindow(Cpu, Scratch.data(), Window);
  // xentrace: "read buffer, then update cons" (meta[i]->cons = prod).
  (void)M.writePhysical(Hpa(P[0]), &Prod, sizeof Prod);
  Drained += Window;
  ++Windows;
}

void XenTraceDrain::drain() {
  if (!Failed.empty())
    return;
  if (!Attached && !attach())
    return;
  if (!HaveBuffers && !findBuffers())
    return;
  for (unsigned Cpu = 0; Cpu < Pages.size() && Failed.empty(); ++Cpu)
    if (!Pages[Cpu].empty())
      drainCpu(Cpu);
}

std::string XenTraceDrain::problem() const {
  if (!Failed.empty())
    return Failed;
  if (!Attached)
    return fmt::format("Xen's image never appeared at the address of {}'s build-id note "
                       "({:#x}): the kernel is not Xen, or the run ended before Xen turned "
                       "on long mode",
                       SymsPath, Syms.BuildIdVa);
  if (!HaveBuffers)
    return "Xen never set up its trace buffers (t_info stayed NULL: no tbuf_size= on Xen's "
           "command line?); the trace file holds no records";
  return {};
}

} // namespace vmxsim
