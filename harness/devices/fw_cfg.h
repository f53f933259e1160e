// QEMU firmware configuration device, traditional I/O interface (QEMU docs/specs/fw_cfg:
// "Selector (Control) Register" at 0x510, 16-bit little-endian, write-only; "Data
// Register" at 0x511, one byte per read, the offset advancing on each read and reset by a
// selector write). Items present:
//   0x0000 FW_CFG_SIGNATURE  "QEMU"
//   0x0001 FW_CFG_ID         u32 LE = 1 (traditional interface only; no DMA)
//   0x0002 FW_CFG_UUID       16 zero bytes
//   0x0003 FW_CFG_RAM_SIZE   u64 LE, guest RAM in bytes
//   0x0005 FW_CFG_NB_CPUS    u16 LE, the --smp count
//   0x000f FW_CFG_MAX_CPUS   u16 LE, the --smp count
//   0x0019 FW_CFG_FILE_DIR   u32 BE file count = 0 (the directory is big-endian)
// Unknown keys, and reads past an item's end, return 0. Data writes are ignored (as in
// QEMU >= 2.4 for the I/O interface); byte writes to the selector are ignored (QEMU
// accepts only 16-bit selector accesses); reading the selector port returns 0.
#pragma once
#include "mmu/io_bus.h"
#include "state/snapshot_io.h"

#include <cstdint>
#include <map>
#include <vector>

namespace vmxsim {

class FwCfg : public PortDevice {
public:
  static constexpr uint16_t kSelectorPort = 0x510, kDataPort = 0x511;
  enum Key : uint16_t { Signature = 0x00, Id = 0x01, Uuid = 0x02, RamSize = 0x03,
                        NbCpus = 0x05, MaxCpus = 0x0f, FileDir = 0x19 };

  FwCfg(uint64_t RamBytes, unsigned NumCpus);
  uint32_t ioRead(uint16_t Port, unsigned SizeBytes) override;
  void ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) override;

private:
  uint8_t readData();
  // std::map: ordered, so nothing guest-visible depends on hash order.
  std::map<uint16_t, std::vector<uint8_t>> Items;
  uint16_t Selector = 0;
  uint32_t Offset = 0;

public:
  /// Snapshot: the selection (the items are the machine's configuration).
  void save(SnapshotWriter &W) const { W.all(Selector, Offset); }
  void load(SnapshotReader &R) { R.all(Selector, Offset); }
};

} // namespace vmxsim
