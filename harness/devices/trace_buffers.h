// The consumer side of a hypervisor's per-CPU trace buffers (trace/tbuf.h has the
// layout and the protocol): what Xen's xentrace daemon does, inside the machine. A
// hypervisor announces each CPU's ring with an OUT to XT_TBUF_PORT_REGISTER; when a
// ring passes half full it OUTs the CPU number to XT_TBUF_PORT_NOTIFY, and the ring's
// new bytes are appended to the trace file as one TRACE_CPU_CHANGE window before the OUT
// completes; every registered ring is drained once more when the run ends. The copy
// happens at an instruction boundary of the guest, so the file's contents and the
// guest-visible consumer index depend only on the guest: runs are byte-identical.
//
// A ring's format (trace/tbuf.h) says which flavour its records are
// (docs/trace-flavours.md): modern rings become windows, xen-3.0 rings become records each
// behind its CPU number. The first ring drained decides the file's flavour; a ring of
// the other flavour is given up, so a file never mixes them.
//
// Guest nonsense (a buffer that is not RAM, a wrong magic, an unknown format, a size that
// is not a multiple of 4 (of a xen-3.0 record for that format) or is out of range, a producer index behind the consumer index or more than the
// size ahead of it, a CPU number the machine does not have) is not an architectural
// event: that ring is left alone from then on and problems() says why, so the command
// can warn; the machine keeps running.
#pragma once
#include "mmu/io_bus.h"
#include "mmu/phys_mem.h"
#include "state/snapshot_io.h"
#include "trace/tbuf.h"

#include <cstdint>
#include <string>
#include <vector>

namespace vmxsim {
namespace trace {
class TraceWriter;
}

class TraceBufferDrain : public PortDevice {
public:
  static constexpr uint16_t kPort = 0x0f10, kSize = 8;
  TraceBufferDrain(PhysMem &Mem, trace::TraceWriter &Writer);

  /// A 32-bit IN from XT_TBUF_PORT_REGISTER says the drain is there (XT_TBUF_DRAIN_ID:
  /// a hypervisor that could stream its rings itself need not, trace/tbuf.h); anything
  /// else reads all ones, as an unassigned port.
  uint32_t ioRead(uint16_t Port, unsigned SizeBytes) override {
    if (Port == XT_TBUF_PORT_REGISTER && SizeBytes == 4)
      return XT_TBUF_DRAIN_ID;
    return SizeBytes == 4 ? 0xffffffffu : (1u << (8 * SizeBytes)) - 1;
  }
  void ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) override;

  /// Copies out every registered ring (the end of a run).
  void drainAll();
  /// Appends to Out what drainAll would write now (modern windows, or xen-3.0 records
  /// behind their CPU numbers) without consuming anything: the guest sees no change.
  /// Rings whose header is no longer consistent are skipped (drain gives them up).
  void peek(std::vector<uint8_t> &Out) const;
  /// Bytes copied into the trace so far.
  uint64_t bytesDrained() const { return Drained; }
  /// One line per ring given up ("trace buffer at 0x...: ...").
  const std::vector<std::string> &problems() const { return Problems; }
  /// Snapshot: the registered rings, the file's flavour and what was drained (the
  /// records are in guest memory; the writer saves its own state).
  void save(SnapshotWriter &W) const;
  void load(SnapshotReader &R);

private:
  struct Ring {
    uint64_t Addr = 0; ///< guest-physical address of the header; 0 = none
    uint32_t Size = 0;
    uint32_t Format = XT_TBUF_FORMAT_MODERN;
  };
  void registerRing(uint64_t Addr);
  void drain(unsigned Cpu);
  void giveUp(unsigned Cpu, uint64_t Addr, const std::string &Why);

  PhysMem &Mem;
  trace::TraceWriter &Writer;
  std::vector<Ring> Rings; ///< by CPU number
  std::vector<uint8_t> Scratch;
  std::vector<std::string> Problems;
  uint64_t Drained = 0;
  bool WroteAny = false;
  uint32_t FileFormat = XT_TBUF_FORMAT_MODERN; ///< once WroteAny
};

} // namespace vmxsim
