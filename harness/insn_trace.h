// Human-readable instruction trace (vmxsim run --trace-insns FILE), a CpuObserver. One
// line per retired instruction:
//
//   <retired> <CS>:<RIP> <bytes> <disassembly> [<register>=<new value> ...]
//
// e.g. "         1 0010:00100000 b8 07 00 00 00  mov eax, 7  rax=0x7"
// Disassembly is Capstone's (Intel syntax), independent of the Zydis decoder that
// executes. The register list holds what the instruction changed: GPRs, RFLAGS, segment
// selectors, CR0/CR2/CR3/CR4, EFER (RIP is implied by the next line). An instruction that
// faults gets a line "<retired> <CS>:<RIP> <bytes> <disassembly> -> #GP(0x0)" (a fault
// while fetching: "<retired> <CS>:<RIP> (instruction fetch) -> #PF(0x10) cr2=...").
// Instruction bytes are read through the guest's page tables without side effects
// (no A/D updates); bytes that cannot be read print as "??". When no tracer is attached
// the CPU's Observer is null and tracing costs one branch per block.
#pragma once
#include "cpu/cpu.h"
#include "harness/output.h"

#include <cstddef>

namespace vmxsim {

class InsnTracer : public CpuObserver {
public:
  explicit InsnTracer(OutputSink &Out);
  ~InsnTracer() override;
  void beforeInsn(const Cpu &C, const DecodedInsn &I) override;
  void afterInsn(const Cpu &C, const DecodedInsn &I) override;
  void onException(const Cpu &C, const PendingEvent &E) override;

private:
  void write(const std::string &S);
  std::string describeInsn() const;

  OutputSink &Out;
  size_t Handles[3] = {0, 0, 0}; ///< Capstone handles for 16-, 32- and 64-bit code
  bool HandleOk[3] = {false, false, false};
  // Snapshot taken before the instruction.
  CpuState Before;
  uint8_t Bytes[16] = {};
  unsigned NumBytes = 0, Readable = 0;
  uint8_t Mode = 0;
  uint64_t SnapshotRetired = ~uint64_t(0);
};

/// Reads guest-linear memory through the current paging structures without setting
/// accessed/dirty bits and without raising faults; returns the number of bytes read.
unsigned peekLinear(const Cpu &C, uint64_t La, uint8_t *Out, unsigned Len);

} // namespace vmxsim
