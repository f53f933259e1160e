// The PC's A20 gate: the chipset asserts the processors' A20M# while both of its inputs
// are off (Intel 82371SB PIIX3 data sheet, "Port 92h" ALT_A20 and the A20GATE input from
// the keyboard controller, combined as an OR): port 0x92 bit 1 (SystemControlA) and the
// i8042 output port bit 1 (I8042). Start-up: enabled, as SeaBIOS leaves it (SeaBIOS
// enables A20 through port 0x92): port 0x92 bit 1 on, the keyboard controller's output
// off, so turning either input off alone does not disable A20 unless the other is off
// too — as on a PIIX3 board, and unlike QEMU, whose two inputs drive one line (the last
// write wins).
//
// What the gate does to memory is PhysMem's A20 mask (mmu/phys_mem.h); Changed is called
// with the new state whenever the combined gate changes, and must set the mask and flush
// every CPU's translations and decoded blocks (the rule in cpu/mmu.h); the machine does.
#pragma once
#include "state/snapshot_io.h"
#include <functional>

namespace vmxsim {

class A20Gate {
public:
  enum class Input { Port92, Keyboard };
  std::function<void(bool Enabled)> Changed;

  void set(Input I, bool On) {
    const bool Before = enabled();
    (I == Input::Port92 ? Port92 : Keyboard) = On;
    if (enabled() != Before && Changed)
      Changed(enabled());
  }
  bool input(Input I) const { return I == Input::Port92 ? Port92 : Keyboard; }
  bool enabled() const { return Port92 || Keyboard; }

private:
  bool Port92 = true, Keyboard = false;
public:
  /// Snapshot (harness/snapshot.h): every field of the device's state; the wiring
  /// (callbacks, the bus, the sinks) is the machine's and is not saved.
  void save(SnapshotWriter &W) const { snapshotFields(W, *this); }
  void load(SnapshotReader &R) { snapshotFields(R, *this); }

private:
  template <class Ar, class Self> static void snapshotFields(Ar &A, Self &S) {
    A.all(S.Port92, S.Keyboard); // PhysMem saves the mask these make
  }
};

} // namespace vmxsim
