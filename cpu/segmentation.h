// Segment descriptors and segment-register loads (SDM Vol. 3A, Protection; Segment
// Descriptors; Privilege Level Checking When Accessing Data Segments). Shared by the
// MOV/POP Sreg handlers, far transfers, IRET and event delivery.
#pragma once
#include "cpu/cpu.h"

#include <cstdint>

namespace vmxsim {

/// Raw 8-byte descriptor fields (SDM Vol. 3A, Segment Descriptors).
namespace desc {
inline uint32_t attr(uint64_t Lo) {
  return uint32_t((Lo >> 40) & 0xff) | (uint32_t((Lo >> 52) & 0xf) << 12);
}
inline uint64_t base(uint64_t Lo) { return ((Lo >> 16) & 0xffffff) | (((Lo >> 56) & 0xff) << 24); }
inline uint32_t rawLimit(uint64_t Lo) { return uint32_t((Lo & 0xffff) | ((Lo >> 32) & 0xf0000)); }
/// The byte limit after granularity scaling.
inline uint32_t limit(uint64_t Lo) {
  uint32_t L = rawLimit(Lo);
  return (Lo & (1ull << 55)) ? (L << 12) | 0xfff : L;
}
inline unsigned type(uint64_t Lo) { return unsigned(Lo >> 40) & 0xf; }
inline bool isSystem(uint64_t Lo) { return !(Lo & (1ull << 44)); }
inline unsigned dpl(uint64_t Lo) { return unsigned(Lo >> 45) & 3; }
inline bool present(uint64_t Lo) { return Lo & (1ull << 47); }
inline bool isCode(uint64_t Lo) { return !isSystem(Lo) && (type(Lo) & 8); }
inline bool isData(uint64_t Lo) { return !isSystem(Lo) && !(type(Lo) & 8); }
inline bool conforming(uint64_t Lo) { return isCode(Lo) && (type(Lo) & 4); }
inline bool readable(uint64_t Lo) { return isData(Lo) || (type(Lo) & 2); }
inline bool writableData(uint64_t Lo) { return isData(Lo) && (type(Lo) & 2); }
inline bool longCode(uint64_t Lo) { return Lo & (1ull << 53); }
inline bool defaultBig(uint64_t Lo) { return Lo & (1ull << 54); }

// System-descriptor and gate types (SDM Vol. 3A, System Descriptor Types).
inline constexpr unsigned Tss16Avail = 1, Ldt = 2, Tss16Busy = 3, CallGate16 = 4,
                          TaskGate = 5, IntGate16 = 6, TrapGate16 = 7, Tss32Avail = 9,
                          Tss32Busy = 11, CallGate32 = 12, IntGate32 = 14, TrapGate32 = 15;
} // namespace desc

/// Selector error code (SDM Vol. 3A, Error Code): index and TI with the EXT bit.
inline uint32_t selectorError(uint16_t Sel, uint32_t Ext = 0) { return (Sel & 0xfffc) | Ext; }

/// Builds the hidden part of a segment register from a descriptor.
Segment segmentFromDescriptor(uint16_t Sel, uint64_t Lo);

/// Reads the 8-byte descriptor Sel names in the GDT or LDT. A selector beyond the table
/// limit (or an LDT selector with no usable LDT) raises #GP(selector | Ext), or the given
/// vector (e.g. #TS for stack selectors taken from a TSS).
Status readDescriptor(Cpu &C, uint16_t Sel, uint64_t &Lo, uint32_t Ext = 0,
                      uint8_t Vec = vec::GP);
/// Whether Sel's descriptor lies within the GDT/LDT limit (LAR/LSL/VERR/VERW report
/// ZF=0 instead of faulting).
bool selectorInTable(const Cpu &C, uint16_t Sel, unsigned Bytes = 8);
/// Reads the high 8 bytes of a 16-byte system descriptor (long-mode gates, TSS, LDT).
Status readDescriptorHigh(Cpu &C, uint16_t Sel, uint64_t &Hi, uint32_t Ext = 0,
                          uint8_t Vec = vec::GP);
/// Sets the accessed bit of a code/data descriptor (SDM Vol. 3A, Segment Descriptors:
/// the processor sets it when it loads the selector into a segment register).
Status setAccessed(Cpu &C, uint16_t Sel, uint64_t &Lo);

/// MOV/POP/LDS..LGS to DS, ES, FS, GS or SS with every mode's checks; commits on success.
/// Loading SS does not set the interrupt shadow (the caller does).
Status loadSegment(Cpu &C, SegReg R, uint16_t Sel);
/// Checks a selector for SS at privilege Cpl (SDM Vol. 2B, MOV: SS rules) and returns the
/// descriptor; the null selector is allowed only when NullOk (64-bit mode, CPL < 3).
Status checkStackSegment(Cpu &C, uint16_t Sel, unsigned Cpl, uint64_t &Lo, uint8_t Vec,
                         uint32_t Ext, bool NullOk);
/// The null SS of 64-bit mode at a privilege level (RPL = Cpl), as interrupt delivery,
/// SYSCALL/SYSRET and far transfers leave it.
Segment nullStackSegment(uint16_t Sel, unsigned Cpl);
/// Hidden part for a real-mode / virtual-8086 selector load.
void loadRealSegment(Cpu &C, SegReg R, uint16_t Sel);
/// After a return to an outer privilege level: data segments not accessible at the new
/// CPL are made null (SDM Vol. 2A, RET / IRET: "FOR each SegReg in (ES, FS, GS, DS)").
void nullInaccessibleDataSegments(Cpu &C);

/// A flat (non-paged, in-limit) linear address for a stack access through a descriptor
/// other than the current SS (gates, IRET to another privilege level).
struct StackRef {
  Segment Ss;        ///< descriptor cache of the stack segment used
  unsigned AddrSize; ///< 2, 4 or 8
  uint64_t Sp;       ///< current stack pointer (already truncated to AddrSize)
  bool Supervisor;   ///< accesses at CPL < 3
  uint8_t FaultVec = vec::SS;
  uint32_t FaultErr = 0;
};
/// Pushes SizeBytes of V onto R (decrementing R.Sp); memory is written at once, registers
/// are committed by the caller, so a fault leaves the architectural state unchanged.
Status stackPush(Cpu &C, StackRef &R, uint64_t V, unsigned SizeBytes);
Status stackRead(Cpu &C, const StackRef &R, uint64_t Offset, uint64_t &V,
                 unsigned SizeBytes);

/// Reads a field of the current TSS (SDM Vol. 3A, Task-State Segment), raising
/// #TS(TR selector | Ext) if it is outside TR.limit.
Status readTss(Cpu &C, uint32_t Offset, unsigned SizeBytes, uint64_t &V, uint32_t Ext);

/// Commits a new CS with its RPL set to Cpl and updates the derived mode.
void loadCodeSegment(Cpu &C, uint16_t Sel, uint64_t Lo, unsigned Cpl);

} // namespace vmxsim
