// Debug-register breakpoints and debug traps (see debug.h for the cost model and the
// choices where the SDM leaves behaviour open).
#include "cpu/debug.h"

#include "cpu/cpu.h"
#include "cpu/vmx/vmx_state.h"

namespace vmxsim {

namespace {

// DR7 layout per breakpoint n (SDM Vol. 3B, "Debug Control Register (DR7)"): Ln/Gn in
// bits 2n and 2n+1, R/Wn in bits 17:16 + 4n, LENn in bits 19:18 + 4n.
enum class BreakKind : unsigned { Execute = 0, Write = 1, Io = 2, ReadWrite = 3 };

bool enabled(uint64_t Dr7, unsigned N) { return (Dr7 >> (2 * N)) & 3; }
BreakKind kind(uint64_t Dr7, unsigned N) { return BreakKind((Dr7 >> (16 + 4 * N)) & 3); }
// LENn: 00b 1 byte, 01b 2 bytes, 11b 4 bytes, 10b 8 bytes ("Breakpoint Field Recognition").
uint64_t lengthBytes(uint64_t Dr7, unsigned N) {
  static constexpr uint64_t Len[4] = {1, 2, 8, 4};
  return Len[(Dr7 >> (18 + 4 * N)) & 3];
}
// The breakpoint covers [A, A + Len) with A = DRn aligned down to the length: the
// processor ignores the address bits below the length ("Breakpoint Field Recognition").
uint64_t rangeStart(const Cpu &C, unsigned N) {
  return C.S.Dr[N] & ~(lengthBytes(C.S.Dr[7], N) - 1);
}
bool overlaps(uint64_t A, uint64_t Len, uint64_t La, uint64_t Size) {
  return La <= A + (Len - 1) && A <= La + (Size - 1);
}

} // namespace

void debugRegistersChanged(Cpu &C) {
  DebugState &D = C.Debug;
  const uint64_t Dr7 = C.S.Dr[7];
  const bool De = C.S.Cr4 & cr4::DE;
  bool NewPages = false;
  D.InsnArmed = D.DataArmed = D.IoArmed = false;
  // No breakpoint enabled (L0-L3 and G0-G3 clear, as after every VM exit: DR7 = 400H):
  // what the loop below computes then, without it.
  if (!(Dr7 & 0xff)) [[likely]] {
    for (uint64_t &Page : D.DataPage)
      Page = ~uint64_t(0);
    C.breakBlock();
    return;
  }
  for (unsigned N = 0; N < 4; ++N) {
    uint64_t Page = ~uint64_t(0);
    if (enabled(Dr7, N)) {
      switch (kind(Dr7, N)) {
      case BreakKind::Execute:
        D.InsnArmed = true;
        break;
      case BreakKind::Io:
        D.IoArmed |= De; // undefined without CR4.DE: vmxsim matches nothing
        break;
      case BreakKind::Write:
      case BreakKind::ReadWrite:
        D.DataArmed = true;
        Page = rangeStart(C, N) >> 12;
        break;
      }
    }
    NewPages |= Page != D.DataPage[N] && Page != ~uint64_t(0);
    D.DataPage[N] = Page;
  }
  // Entries filled before the page was armed would let accesses bypass the check; the
  // fill refusal (Mmu::translate) keeps new ones out.
  if (NewPages)
    C.Mmu.flushTlbAllContexts();
  C.breakBlock();
}

uint32_t instructionBreakpoints(const Cpu &C) {
  // Linear address of the first byte of the instruction (SDM Vol. 3B, "Instruction-
  // Breakpoint Exception Condition").
  uint64_t La = C.S.cs().Base + C.S.Rip;
  if (!C.S.in64BitMode())
    La &= 0xffffffffull;
  const uint64_t Dr7 = C.S.Dr[7];
  uint32_t Bits = 0;
  for (unsigned N = 0; N < 4; ++N)
    if (enabled(Dr7, N) && kind(Dr7, N) == BreakKind::Execute &&
        overlaps(rangeStart(C, N), lengthBytes(Dr7, N), La, 1))
      Bits |= 1u << N;
  return Bits;
}

bool dataBreakpointPage(const Cpu &C, uint64_t La) {
  const uint64_t Page = La >> 12;
  for (uint64_t P : C.Debug.DataPage)
    if (P == Page)
      return true;
  return false;
}

void dataBreakpointAccess(Cpu &C, uint64_t La, unsigned SizeBytes, bool Write) {
  // Data breakpoints trap after the access's instruction completes (SDM Vol. 3B, "Data
  // Memory and I/O Breakpoint Exception Conditions"): R/W = 01b on writes, 11b on reads
  // and writes.
  const uint64_t Dr7 = C.S.Dr[7];
  uint32_t Bits = 0;
  for (unsigned N = 0; N < 4; ++N) {
    if (!enabled(Dr7, N))
      continue;
    const BreakKind K = kind(Dr7, N);
    if (K != BreakKind::ReadWrite && !(K == BreakKind::Write && Write))
      continue;
    if (overlaps(rangeStart(C, N), lengthBytes(Dr7, N), La, SizeBytes))
      Bits |= 1u << N;
  }
  if (Bits) {
    C.Debug.Hits |= Bits;
    C.breakBlock(); // the trap is taken at the boundary after this instruction
  }
}

void ioBreakpointAccess(Cpu &C, uint16_t Port, unsigned SizeBytes) {
  // I/O breakpoints (R/W = 10b, CR4.DE = 1): DRn holds the port address.
  const uint64_t Dr7 = C.S.Dr[7];
  uint32_t Bits = 0;
  for (unsigned N = 0; N < 4; ++N)
    if (enabled(Dr7, N) && kind(Dr7, N) == BreakKind::Io &&
        overlaps(rangeStart(C, N), lengthBytes(Dr7, N), Port, SizeBytes))
      Bits |= 1u << N;
  if (Bits) {
    C.Debug.Hits |= Bits;
    C.breakBlock();
  }
}

void noteDebugTraps(Cpu &C, uint32_t Dr6Bits) {
  if (C.NonRoot) {
    // The pending-debug-exceptions field's layout is DR6's for B0-B3 and BS; bit 12
    // says that an enabled data or I/O breakpoint matched (SDM Vol. 3C, "Saving
    // Non-Register State").
    C.Vmx->PendingDebugExceptions |=
        Dr6Bits | ((Dr6Bits & dr6::B0toB3) ? kPendingDebugEnabledBreakpoint : 0);
  } else {
    C.Debug.Traps |= Dr6Bits;
  }
  C.breakBlock();
}

void commitDebugHits(Cpu &C) {
  if (uint32_t H = C.Debug.Hits) {
    C.Debug.Hits = 0;
    noteDebugTraps(C, H);
  }
}

bool takeRootDebugTraps(Cpu &C) {
  DebugState &D = C.Debug;
  if (!D.Traps || (C.Retired < C.ShadowUntil && C.ShadowIsMovSs))
    return false;
  C.Pending = PendingEvent{vec::DB, false, 0, D.Traps};
  D.Traps = 0;
  return true;
}

} // namespace vmxsim
