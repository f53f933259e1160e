// Internals of the differential fuzzer shared by its two files: the guest layout
// (harness/kvm/fuzz.h describes it), the random source, and the stream generator
// (harness/kvm/fuzz_gen.cpp: the table of instruction forms and the flag bookkeeping).
#pragma once
#include "cpu/registers.h"
#include "harness/kvm/fuzz.h"
#include "harness/random.h"

#include <cstdint>
#include <memory>
#include <string>

namespace vmxsim::kvm::fuzzgen {

// --- guest layout (see fuzz.h) ----------------------------------------------------------
inline constexpr uint64_t kRamBytes = 8ull << 20;
inline constexpr uint64_t kGdt = 0x1000, kIdt = 0x2000, kTss = 0x3000, kPml4 = 0x10000,
                   kPdpt = 0x11000, kPd = 0x12000, kPt = 0x13000, kHandlers = 0x20000,
                   kCode = 0x30000, kD0 = 0x40000, kD1 = 0x41000, kUnmapped = 0x42000,
                   kReadOnly = 0x43000, kStackPage = 0x50000, kStackTop = 0x50800;
inline constexpr uint16_t kSelCode0 = 0x08, kSelData0 = 0x10, kSelData3 = 0x23, kSelCode3 = 0x2b,
                   kSelTss = 0x30;
/// Pages whose contents are randomised per stream and compared afterwards.
inline constexpr uint64_t kComparedPages[] = {kD0, kD1, kReadOnly, kStackPage};
inline constexpr unsigned kR15 = 15; ///< data pointer register, never an operand
/// CR0: PE MP ET NE WP AM PG. NE, AM, WP and PG are what PVM forces when it switches a
/// 64-bit vCPU to its paravirtual mode, so both sides start from that value.
inline constexpr uint64_t kCr0 = 0x80050033;
inline constexpr uint64_t kCr4 = 0x620;   // PAE OSFXSR OSXMMEXCPT
inline constexpr uint64_t kEfer = 0x501;  // SCE (PVM sets it) LME LMA
inline constexpr uint64_t kCr2Start = 0x5a5a000; // sentinel: a #PF changes it

using Rng = SplitMix64; ///< harness/random.h

/// A register value: mostly uniform, often an edge value of some operand size.
inline uint64_t operandValue(Rng &G) {
  static constexpr uint64_t Edge[] = {
      0, 1, 2, ~0ull, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x7fffffff, 0x80000000,
      0xffffffff, 0x7fffffffffffffff, 0x8000000000000000, 0x100, 0x10000, 0x100000000};
  switch (G.nextBelow(8)) {
  case 0: return Edge[G.nextBelow(sizeof(Edge) / 8)];
  case 1: return G.nextBelow(70);
  case 2: return G.next() >> G.nextBelow(64);
  default: return G.next();
  }
}

/// Random streams from the form table, and the undefined-flag bookkeeping (fuzz.h).
class Generator {
public:
  Generator();
  ~Generator();
  FuzzStream make(Rng &G, unsigned Cpl, unsigned MaxInsns);
  /// Flags left undefined after running Insns[0..Count) from a fully defined state (a
  /// Jcc's skipped instruction counts as either path).
  uint64_t undefinedAfter(const FuzzStream &St, size_t Count);

private:
  struct Impl;
  std::unique_ptr<Impl> P;
};

std::string lower(std::string S);

} // namespace vmxsim::kvm::fuzzgen
