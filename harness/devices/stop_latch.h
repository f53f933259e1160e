// Records why a device asked the machine to stop, then raises IoBus::requestStop. The first
// request wins: a guest that writes isa-debug-exit and then the Bochs shutdown port (as
// hvm/lib/exit.c does, to run on both) ends with the isa-debug-exit status.
#pragma once
#include "mmu/io_bus.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <string>

namespace vmxsim {

enum class StopCause : uint8_t {
  None,
  DebugExit, ///< isa-debug-exit (port 0xf4): status (value << 1) | 1
  PowerOff,  ///< "Shutdown" written to the Bochs/QEMU power-off port 0x8900
  /// CPU reset: port 0x92 bit 0, the PIIX3 reset control register 0xcf9, or the i8042's
  /// pulse of its reset line (0xfe); the value is the port written (0x92, 0xcf9, 0x64).
  Reset,
  /// A device was asked for something vmxsim does not model (an SMI, a reserved LVT
  /// delivery mode): the run ends with status 10 naming it (what()).
  Unimplemented,
};

class StopLatch {
public:
  explicit StopLatch(IoBus &Io) : Io(Io) {}
  void request(StopCause C, uint32_t Value, int ExitStatus) {
    if (Cause != StopCause::None || Io.deviceStopRequested())
      return;
    Cause = C;
    Val = Value;
    Io.requestStop(ExitStatus);
  }
  /// Stops the run as unimplemented, naming What (a string literal); the machine gives
  /// it status 10 (kExitUnimplemented).
  void requestUnimplemented(const char *What) {
    if (Cause != StopCause::None || Io.deviceStopRequested())
      return;
    Cause = StopCause::Unimplemented;
    Missing = What;
    Io.requestStop(0);
  }
  StopCause cause() const { return Cause; }
  const char *what() const { return Missing; }
  uint32_t value() const { return Val; }
  /// Lets a stopped machine run on (tests that continue after an exit request).
  void clear() {
    Cause = StopCause::None;
    Val = 0;
    Missing = nullptr;
    Io.clearStop();
  }

  /// Snapshot: the cause, value and, for an unimplemented stop, its name (the bus's own
  /// flags are IoBus's). A machine saved after such a stop and restored still names
  /// what stopped it.
  void save(SnapshotWriter &W) const {
    W.all(Cause, Val);
    W.str(Missing ? Missing : "");
  }
  void load(SnapshotReader &R) {
    R.all(Cause, Val);
    R.str(Restored, 4096);
    Missing = Restored.empty() ? nullptr : Restored.c_str();
  }

private:
  IoBus &Io;
  StopCause Cause = StopCause::None;
  uint32_t Val = 0;
  const char *Missing = nullptr;
  std::string Restored; ///< What Missing points at after a restore.
};

} // namespace vmxsim
