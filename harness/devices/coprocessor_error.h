// The PC chipset's legacy x87 error logic (the "MS-DOS compatibility sub-mode" of SDM
// Vol. 1, Appendix D, "Guidelines for Writing x87 FPU Exception Handlers"; the PIIX3's
// coprocessor error function, as QEMU's `pc` machine models it):
// - a processor's FERR# (Cpu::Ferr: with CR0.NE = 0, a waiting x87 instruction found an
//   unmasked exception pending, cpu/x87.h) raises ISA IRQ 13: the slave 8259's IR5 and
//   the I/O APIC's pin 13; it stays raised until
// - a write of any value to port 0xf0 ("clear coprocessor error"): IRQ 13 is lowered and
//   the chipset asserts IGNNE# (Cpu::Ignne) on the processors, so that a waiting x87
//   instruction ignores the pending exception until FERR# is deasserted (FSW.ES clears:
//   FNCLEX, FNINIT, an environment load), which deasserts IGNNE# too (the processor
//   does that itself, cpu/x87.h: x87::esMayHaveCleared). IGNNE# is one board signal:
//   every processor sees it.
// Reads of port 0xf0 return all ones (nothing drives the bus).
#pragma once
#include "cpu/cpu.h"
#include "harness/devices/system_ports.h"
#include "mmu/io_bus.h"
#include "state/snapshot_io.h"

#include <functional>
#include <vector>

namespace vmxsim {

class CoprocessorError final : public PortDevice, public FerrLine {
public:
  static constexpr uint16_t kPort = 0xf0;
  static constexpr unsigned kIrq = 13;

  /// ISA IRQ 13's level (the machine routes it to the 8259 pair and the I/O APIC).
  std::function<void(bool)> Irq;
  /// The processors whose IGNNE# the chipset drives.
  std::vector<Cpu *> Cpus;

  void assertFerr(Cpu &) override {
    if (Raised)
      return;
    Raised = true;
    if (Irq)
      Irq(true);
  }
  uint32_t ioRead(uint16_t, unsigned SizeBytes) override { return unclaimedBytes(SizeBytes); }
  void ioWrite(uint16_t, unsigned, uint32_t) override {
    if (Raised && Irq)
      Irq(false);
    Raised = false;
    for (Cpu *C : Cpus)
      C->Ignne = true;
  }
  bool irqRaised() const { return Raised; }

  /// Snapshot: IRQ 13's latch (IGNNE# is saved with each processor).
  void save(SnapshotWriter &W) const { W.all(Raised); }
  void load(SnapshotReader &R) { R.all(Raised); }

private:
  bool Raised = false;
};

} // namespace vmxsim
