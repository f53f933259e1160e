#include "harness/devices/fw_cfg.h"

namespace vmxsim {

namespace {
void putLe(std::vector<uint8_t> &V, uint64_t X, unsigned Bytes) {
  for (unsigned I = 0; I < Bytes; ++I)
    V.push_back(uint8_t(X >> (8 * I)));
}
} // namespace

FwCfg::FwCfg(uint64_t RamBytes, unsigned NumCpus) {
  Items[Signature] = {'Q', 'E', 'M', 'U'};
  putLe(Items[Id], 1, 4);
  Items[Uuid] = std::vector<uint8_t>(16, 0);
  putLe(Items[RamSize], RamBytes, 8);
  putLe(Items[NbCpus], NumCpus, 2);
  putLe(Items[MaxCpus], NumCpus, 2);
  Items[FileDir] = {0, 0, 0, 0};
}

uint8_t FwCfg::readData() {
  // Bit 14 (write channel) and bit 15 (architecture-local) are part of the key: an
  // x86-local key we do not provide reads as an unknown key.
  auto It = Items.find(Selector);
  if (It == Items.end() || Offset >= It->second.size())
    return 0;
  return It->second[Offset++];
}

uint32_t FwCfg::ioRead(uint16_t Port, unsigned SizeBytes) {
  if (Port != kDataPort)
    return 0;
  uint32_t V = 0;
  for (unsigned I = 0; I < SizeBytes; ++I)
    V |= uint32_t(readData()) << (8 * I);
  return V;
}

void FwCfg::ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) {
  // The selector is a 16-bit register; QEMU accepts only 16-bit accesses to it, so byte
  // writes are ignored. Data-port writes are ignored too.
  if (Port != kSelectorPort || SizeBytes < 2)
    return;
  Selector = uint16_t(Value);
  Offset = 0;
}

} // namespace vmxsim
