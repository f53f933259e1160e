// The port-I/O address space (64 Ki ports). Devices claim port ranges; unassigned ports
// read all-ones and ignore writes, as on a PC.
#pragma once
#include "state/snapshot_io.h"

#include <cstdint>
#include <vector>

namespace vmxsim {

class PortDevice {
public:
  virtual ~PortDevice() = default;
  /// Port is the absolute port number; SizeBytes is 1, 2 or 4.
  virtual uint32_t ioRead(uint16_t Port, unsigned SizeBytes) = 0;
  virtual void ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) = 0;
};

class IoBus {
public:
  /// Claims [First, First + Count). Later registrations win over earlier ones.
  void add(uint16_t First, uint32_t Count, PortDevice *Dev) {
    Ranges.push_back({First, Count, Dev});
  }
  uint32_t read(uint16_t Port, unsigned SizeBytes) const {
    if (PortDevice *D = find(Port))
      return D->ioRead(Port, SizeBytes);
    return SizeBytes == 4 ? 0xffffffffu : (1u << (8 * SizeBytes)) - 1;
  }
  void write(uint16_t Port, unsigned SizeBytes, uint32_t Value) {
    if (PortDevice *D = find(Port))
      D->ioWrite(Port, SizeBytes, Value);
  }

  /// A device (isa-debug-exit, a shutdown port) asks the machine to stop after the
  /// current instruction; the run loop checks it at block boundaries and I/O
  /// instructions end their block.
  void requestStop(int ExitStatus) {
    StopFlags |= kDeviceStop;
    Status = ExitStatus;
  }
  /// Whether the run loop must return at this instruction boundary: a device's stop or
  /// the harness's break (one test for both, the run loop's only one).
  bool stopRequested() const { return StopFlags != 0; }
  bool deviceStopRequested() const { return StopFlags & kDeviceStop; }
  int exitStatus() const { return Status; }
  void clearStop() { StopFlags &= uint8_t(~kDeviceStop); }
  /// The harness's run control (harness/run_control.h) asks the run loop to return at
  /// the next instruction boundary: a condition it waits for has happened. Not a device
  /// request; whoever raises it also ends the current block (Cpu::breakBlock).
  void requestBreak() { StopFlags |= kBreak; }
  bool breakRequested() const { return StopFlags & kBreak; }
  void clearBreak() { StopFlags &= uint8_t(~kBreak); }
  /// Snapshot: a pending stop request and its status (the devices are the machine's).
  void save(SnapshotWriter &W) const { W.all(StopFlags, Status); }
  void load(SnapshotReader &R) { R.all(StopFlags, Status); }

private:
  static constexpr uint8_t kDeviceStop = 1, kBreak = 2;
  uint8_t StopFlags = 0;
  int Status = 0;
  struct Range {
    uint16_t First;
    uint32_t Count;
    PortDevice *Dev;
  };
  PortDevice *find(uint16_t Port) const {
    for (auto It = Ranges.rbegin(); It != Ranges.rend(); ++It)
      if (Port >= It->First && uint32_t(Port - It->First) < It->Count)
        return It->Dev;
    return nullptr;
  }
  std::vector<Range> Ranges;
};

} // namespace vmxsim
