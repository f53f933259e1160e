#include "mmu/phys_mem.h"

#include <algorithm>
#include <cstring>
#include <sys/mman.h>

namespace vmxsim {

namespace {
void *mapZeroed(uint64_t SizeBytes) {
  if (SizeBytes == 0)
    return nullptr;
  void *P = mmap(nullptr, SizeBytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return P == MAP_FAILED ? nullptr : P;
}
void unmap(void *P, uint64_t SizeBytes) {
  if (P)
    munmap(P, SizeBytes);
}
} // namespace

PhysMem::PhysMem(uint64_t RamSizeBytes) : RamSize(RamSizeBytes) {
  // QEMU's pc machine: all RAM low if it fits below 3.5 GiB, else 3 GiB low + rest high.
  const uint64_t Limit = 0xe0000000ull, LowWhenSplit = 0xc0000000ull;
  LowSize = RamSize <= Limit ? RamSize : LowWhenSplit;
  HighSize = RamSize - LowSize;
  Low = static_cast<uint8_t *>(mapZeroed(std::max<uint64_t>(LowSize, kPageSize)));
  if (HighSize) {
    High = static_cast<uint8_t *>(mapZeroed(HighSize));
    if (!High) {
      unmap(Low, std::max<uint64_t>(LowSize, kPageSize));
      Low = nullptr;
      return;
    }
  }
  NumPfns = (HighSize ? kHighRamBase + HighSize : LowSize) >> 12;
  CodeLines = static_cast<uint64_t *>(mapZeroed(NumPfns * sizeof(uint64_t)));
  CodeGen = static_cast<uint64_t *>(mapZeroed(NumPfns * sizeof(uint64_t)));
  LineGen = static_cast<uint64_t *>(mapZeroed(NumPfns * 64 * sizeof(uint64_t)));
  if (!CodeLines || !CodeGen || !LineGen) {
    unmap(Low, std::max<uint64_t>(LowSize, kPageSize));
    unmap(High, HighSize);
    Low = High = nullptr;
  }
}

PhysMem::~PhysMem() {
  unmap(Low, std::max<uint64_t>(LowSize, kPageSize));
  unmap(High, HighSize);
  unmap(CodeLines, NumPfns * sizeof(uint64_t));
  unmap(CodeGen, NumPfns * sizeof(uint64_t));
  unmap(LineGen, NumPfns * 64 * sizeof(uint64_t));
}

void PhysMem::addMmio(Hpa Base, uint64_t SizeBytes, MmioDevice *Dev) {
  Mmio.push_back({Base.value(), SizeBytes, Dev});
  std::sort(Mmio.begin(), Mmio.end(),
            [](const Region &A, const Region &B) { return A.Base < B.Base; });
  MmioLowWater = Mmio.front().Base & kPageMask;
}

bool PhysMem::setReadOnly(Hpa Base, uint64_t SizeBytes) {
  const uint64_t B = Base.value();
  if (Rom.Bytes || !SizeBytes || (B | SizeBytes) & (kPageSize - 1) || B + SizeBytes > LowSize ||
      !isRam(Base, SizeBytes))
    return false;
  Rom.Bytes = Low + B;
  Rom.Size = SizeBytes;
  RomBase = B;
  addMmio(Base, SizeBytes, &Rom);
  return true;
}

uint64_t PhysMem::ReadOnlyRam::mmioRead(uint64_t Offset, unsigned SizeBytes) {
  // An access crossing the end was split by the caller; bytes past it read all-ones.
  uint64_t V = 0;
  for (unsigned I = 0; I < SizeBytes; ++I)
    V |= uint64_t(Offset + I < Size ? Bytes[Offset + I] : 0xff) << (8 * I);
  return V;
}

MmioDevice *PhysMem::mmioAt(uint64_t A, uint64_t *OffsetOut) const {
  // Sorted by base: once a region starts above A none of the rest can hold it (keeps
  // ramPointer at a compare or two for RAM above a low region such as the BIOS area).
  for (const Region &R : Mmio) {
    if (R.Base > A)
      break;
    if (A - R.Base < R.Size) {
      if (OffsetOut)
        *OffsetOut = A - R.Base;
      return R.Dev;
    }
  }
  return nullptr;
}

uint64_t PhysMem::read(Hpa Addr, unsigned SizeBytes) const {
  uint64_t Off;
  if (MmioDevice *D = mmioAt(Addr.value(), &Off))
    return D->mmioRead(Off, SizeBytes);
  uint64_t V = 0;
  for (unsigned I = 0; I < SizeBytes; ++I) {
    const uint8_t *P = ramPointer(Addr + I);
    V |= uint64_t(P ? *P : 0xff) << (8 * I);
  }
  return V;
}

void PhysMem::write(Hpa Addr, unsigned SizeBytes, uint64_t Value, StoreAgent Agent) {
  uint64_t Off;
  if (MmioDevice *D = mmioAt(Addr.value(), &Off)) {
    D->mmioWrite(Off, SizeBytes, Value);
    return;
  }
  // Byte by byte (the bytes may straddle RAM and a hole); one report of the whole store
  // when it is all RAM, as a processor's store would be.
  const bool AllRam = isRam(Addr, SizeBytes);
  for (unsigned I = 0; I < SizeBytes; ++I) {
    Hpa A = Addr + I;
    if (uint8_t *P = ramPointer(A)) {
      *P = uint8_t(Value >> (8 * I));
      if (AllRam)
        noteCodeWrite(A, 1);
      else
        noteWrite(A, 1, Agent);
    }
  }
  if (AllRam && !Watches.empty()) [[unlikely]]
    reportWatched(Addr, SizeBytes, Agent);
}

void PhysMem::invalidateLines(uint64_t Pfn, uint64_t Lines) {
  // The lines hold no decoded code from now on: every block with a byte in them is
  // stale (its Gen is below their new stamp) until decoded again, which sets them again.
  CodeLines[Pfn] &= ~Lines;
  CodePages -= CodeLines[Pfn] == 0;
  const uint64_t Gen = ++CodeGen[Pfn];
  uint64_t *Stamps = LineGen + Pfn * 64;
  for (; Lines; Lines &= Lines - 1)
    Stamps[__builtin_ctzll(Lines)] = Gen;
  ++GlobalCodeWrites;
}

bool PhysMem::linesUnwrittenSince(uint64_t Pfn, uint64_t Lines, uint64_t Gen) const {
  if (Pfn >= NumPfns)
    return false;
  const uint64_t *Stamps = LineGen + Pfn * 64;
  for (; Lines; Lines &= Lines - 1)
    if (Stamps[__builtin_ctzll(Lines)] > Gen)
      return false;
  return true;
}

bool PhysMem::noteWriteAcrossPages(Hpa Addr, uint64_t SizeBytes) {
  bool Any = false;
  uint64_t A = Addr.value();
  while (SizeBytes) {
    const uint64_t Chunk = std::min<uint64_t>(SizeBytes, kPageSize - (A & 0xfff));
    Any |= noteCodeWrite(Hpa(A), Chunk);
    A += Chunk, SizeBytes -= Chunk;
  }
  return Any;
}

void PhysMem::addRange(std::vector<WatchRange> &Ranges, Hpa Base, uint64_t SizeBytes) {
  if (!SizeBytes || Base.value() + SizeBytes < Base.value())
    return;
  for (WatchRange &W : Ranges)
    if (W.Base == Base.value() && W.Size == SizeBytes) {
      ++W.Refs; // counted, so that one watcher's unwatch leaves the other's
      return;
    }
  Ranges.push_back({Base.value(), SizeBytes, 1});
}

bool PhysMem::removeRange(std::vector<WatchRange> &Ranges, Hpa Base, uint64_t SizeBytes) {
  for (size_t I = 0; I < Ranges.size(); ++I)
    if (Ranges[I].Base == Base.value() && Ranges[I].Size == SizeBytes) {
      if (--Ranges[I].Refs == 0)
        Ranges.erase(Ranges.begin() + I);
      return true;
    }
  return false;
}

void PhysMem::watchWrites(Hpa Base, uint64_t SizeBytes) {
  ++WatchEpoch;
  addRange(Watches, Base, SizeBytes);
}
bool PhysMem::unwatchWrites(Hpa Base, uint64_t SizeBytes) {
  ++WatchEpoch;
  return removeRange(Watches, Base, SizeBytes);
}
void PhysMem::watchReads(Hpa Base, uint64_t SizeBytes) {
  ++WatchEpoch;
  addRange(ReadWatches, Base, SizeBytes);
}
bool PhysMem::unwatchReads(Hpa Base, uint64_t SizeBytes) {
  ++WatchEpoch;
  return removeRange(ReadWatches, Base, SizeBytes);
}

unsigned PhysMem::watchedRangesInPage(uint64_t Pfn, PageRange *Out, unsigned Max) const {
  const uint64_t Page = Pfn << 12;
  unsigned N = 0;
  for (const WatchRange &W : Watches) {
    // Overlap of [W.Base, W.Base + W.Size) with the page, as rangeIn compares.
    if (!(Page < W.Base + W.Size && W.Base < Page + kPageSize))
      continue;
    if (N < Max)
      Out[N] = {uint16_t(W.Base > Page ? W.Base - Page : 0),
                uint16_t(std::min<uint64_t>(W.Base + W.Size - Page, kPageSize))};
    ++N;
  }
  return N;
}

bool PhysMem::isRam(Hpa Addr, uint64_t SizeBytes) const {
  if (SizeBytes == 0)
    return true;
  const uint64_t A = Addr.value(), End = A + SizeBytes;
  if (End < A)
    return false;
  // Inside one RAM block (low RAM and high RAM are never adjacent: the hole lies
  // between them) and clear of every MMIO region: a few compares, whatever the size.
  const bool InLow = End <= LowSize;
  const bool InHigh = A >= kHighRamBase && End - kHighRamBase <= HighSize;
  if (!InLow && !InHigh)
    return false;
  for (const Region &R : Mmio)
    if (A < R.Base + R.Size && R.Base < End)
      return false;
  return true;
}

bool PhysMem::copyIn(Hpa Addr, const void *Src, uint64_t SizeBytes, StoreAgent Agent) {
  if (!isRam(Addr, SizeBytes))
    return false;
  const uint8_t *S = static_cast<const uint8_t *>(Src);
  uint64_t A = Addr.value();
  while (SizeBytes) {
    uint64_t Chunk = std::min<uint64_t>(SizeBytes, kPageSize - (A & 0xfff));
    std::memcpy(ramPointer(Hpa(A)), S, Chunk);
    noteWrite(Hpa(A), Chunk, Agent);
    A += Chunk, S += Chunk, SizeBytes -= Chunk;
  }
  return true;
}

bool PhysMem::zeroRam(Hpa Addr, uint64_t SizeBytes) {
  if (!isRam(Addr, SizeBytes))
    return false;
  uint64_t A = Addr.value();
  const uint64_t End = A + SizeBytes;
  // A partial page: cleared in place, and only if it is not zero already (reading an
  // untouched page commits nothing).
  auto Partial = [&](uint64_t From, uint64_t To) {
    uint8_t *P = ramPointer(Hpa(From));
    for (uint64_t I = 0; I < To - From; ++I)
      if (P[I]) {
        std::memset(P, 0, To - From);
        noteCodeWrite(Hpa(From), To - From);
        break;
      }
    if (!Watches.empty()) [[unlikely]]
      reportWatched(Hpa(From), To - From, StoreAgent::Device); // a store, zeros or not
  };
  if ((A & 0xfff) || End - A < kPageSize) {
    const uint64_t To = std::min(End, (A & kPageMask) + kPageSize);
    Partial(A, To);
    A = To;
  }
  const uint64_t WholeEnd = End & kPageMask;
  if (A < WholeEnd) {
    // Whole pages: MADV_DONTNEED on the private anonymous mapping turns them back into
    // zero-fill-on-demand pages; the kernel skips what was never touched. The range may
    // span the low and high RAM blocks but no hole (isRam above), so at most two calls.
    for (uint64_t P = A; P < WholeEnd;) {
      uint8_t *Host = ramPointer(Hpa(P));
      const uint64_t BlockEnd =
          P < LowSize ? std::min(WholeEnd, LowSize) : std::min(WholeEnd, kHighRamBase + HighSize);
      ::madvise(Host, BlockEnd - P, MADV_DONTNEED);
      P = BlockEnd;
    }
    // Decoded code in the cleared pages is stale; with no code page anywhere (a loader
    // at load time) there is nothing to look at.
    for (uint64_t P = A; CodePages && P < WholeEnd; P += kPageSize)
      noteCodeWrite(Hpa(P), kPageSize);
    if (!Watches.empty()) [[unlikely]]
      reportWatched(Hpa(A), WholeEnd - A, StoreAgent::Device);
    A = WholeEnd;
  }
  if (A < End)
    Partial(A, End);
  return true;
}

bool PhysMem::copyOut(Hpa Addr, void *Dst, uint64_t SizeBytes) const {
  // RAM or the read-only range (whole pages, so each chunk is one or the other).
  auto Source = [&](uint64_t A) -> const uint8_t * {
    if (Rom.Bytes && A >= RomBase && A - RomBase < Rom.Size)
      return Rom.Bytes + (A - RomBase);
    return ramPointer(Hpa(A));
  };
  const uint64_t End = Addr.value() + SizeBytes;
  if (End < Addr.value())
    return false;
  if (!isRam(Addr, SizeBytes)) // the common case is checked in a few compares
    for (uint64_t A = Addr.value(); A < End; A = (A & kPageMask) + kPageSize)
      if (!Source(A))
        return false;
  uint8_t *D = static_cast<uint8_t *>(Dst);
  uint64_t A = Addr.value();
  while (SizeBytes) {
    uint64_t Chunk = std::min<uint64_t>(SizeBytes, kPageSize - (A & 0xfff));
    std::memcpy(D, Source(A), Chunk);
    A += Chunk, D += Chunk, SizeBytes -= Chunk;
  }
  return true;
}

} // namespace vmxsim

namespace vmxsim {

namespace {
bool pageIsZero(const uint8_t *P) {
  uint64_t Or = 0;
  for (unsigned I = 0; I < kPageSize; I += 8) {
    uint64_t W;
    std::memcpy(&W, P + I, 8);
    Or |= W;
  }
  return Or == 0;
}
} // namespace

void PhysMem::save(SnapshotWriter &W) const {
  W.all(RamSize, A20Mask);
  W.u64(Watches.size());
  for (const WatchRange &R : Watches)
    W.all(R.Base, R.Size, R.Refs);
  // The pages: frame number and 4 KiB each, ended by ~0.
  auto Blocks = {std::pair{Low, LowSize}, std::pair{High, HighSize}};
  uint64_t Base = 0;
  for (auto [Ptr, Size] : Blocks) {
    for (uint64_t Off = 0; Ptr && Off < Size; Off += kPageSize)
      if (!pageIsZero(Ptr + Off)) {
        W.u64((Base + Off) >> 12);
        W.bytes(Ptr + Off, kPageSize);
      }
    Base = kHighRamBase;
  }
  W.u64(~uint64_t(0));
  // Which lines hold decoded code: the processors' blocks are flushed on load, but a
  // store into such a line still ends the storing processor's block (noteWrite), which
  // is where its next event window opens; without the marks a restored run would open
  // it elsewhere.
  for (uint64_t Pfn = 0; CodePages && Pfn < NumPfns; ++Pfn)
    if (CodeLines[Pfn]) {
      W.u64(Pfn);
      W.u64(CodeLines[Pfn]);
    }
  W.u64(~uint64_t(0));
}

void PhysMem::load(SnapshotReader &R) {
  uint64_t Size = 0, Mask = 0;
  R.all(Size, Mask);
  if (R.ok() && Size != RamSize) {
    R.fail("the snapshot's memory size is " + std::to_string(Size) + " bytes, this machine's " +
           std::to_string(RamSize));
    return;
  }
  if (R.ok() && Mask != ~uint64_t(0) && Mask != ~(uint64_t(1) << 20)) {
    R.fail("the snapshot's A20 mask is not one the gate makes");
    return;
  }
  const uint64_t NumWatches = R.u64();
  if (NumWatches > 4096) {
    R.fail("the snapshot lists " + std::to_string(NumWatches) + " write watches");
    return;
  }
  std::vector<WatchRange> NewWatches;
  for (uint64_t I = 0; I < NumWatches && R.ok(); ++I) {
    WatchRange W{};
    R.all(W.Base, W.Size, W.Refs);
    NewWatches.push_back(W);
  }
  // Every page in address order: the snapshot's, or zero. The runs of pages the
  // snapshot does not hold become zero-fill-on-demand again (MADV_DONTNEED on the
  // private anonymous mapping), without reading them.
  uint64_t Next = R.u64();
  auto Blocks = {std::pair{Low, LowSize}, std::pair{High, HighSize}};
  uint64_t Base = 0;
  for (auto [Ptr, BlockSize] : Blocks) {
    uint64_t Off = 0;
    while (Ptr && Off < BlockSize && R.ok()) {
      const uint64_t Pfn = (Base + Off) >> 12;
      if (Next != ~uint64_t(0) && Next < Pfn) {
        R.fail("the snapshot's memory pages are out of order or outside RAM");
        return;
      }
      if (Next == Pfn) {
        R.bytes(Ptr + Off, kPageSize);
        Next = R.u64();
        Off += kPageSize;
        continue;
      }
      const uint64_t RunEnd = Next == ~uint64_t(0) || Next >= (Base + BlockSize) >> 12
                                  ? BlockSize
                                  : (Next << 12) - Base;
      if (::madvise(Ptr + Off, RunEnd - Off, MADV_DONTNEED) != 0)
        std::memset(Ptr + Off, 0, RunEnd - Off);
      Off = RunEnd;
    }
    Base = kHighRamBase;
  }
  if (R.ok() && Next != ~uint64_t(0)) {
    R.fail("the snapshot holds a memory page outside RAM");
    return;
  }
  if (!R.ok())
    return;
  A20Mask = Mask;
  Watches = std::move(NewWatches);
  ++WatchEpoch;
  for (uint64_t Pfn = 0; CodePages && Pfn < NumPfns; ++Pfn)
    if (CodeLines[Pfn]) {
      CodeLines[Pfn] = 0;
      --CodePages;
    }
  for (uint64_t Pfn = R.u64(); R.ok() && Pfn != ~uint64_t(0); Pfn = R.u64()) {
    const uint64_t Lines = R.u64();
    if (Pfn >= NumPfns) {
      R.fail("the snapshot marks code outside RAM");
      return;
    }
    CodePages += CodeLines[Pfn] == 0 && Lines;
    CodeLines[Pfn] = Lines;
  }
}

} // namespace vmxsim
