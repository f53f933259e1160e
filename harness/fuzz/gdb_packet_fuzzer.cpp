// libFuzzer entry point for the gdb stub's parsing: any bytes through the packet layer
// (harness/gdb_packet.h), and every packet it completes into the stub's handler
// (harness/gdb_stub.h) on a machine with no image. Packets that would run the machine
// (c, s, C, S, vCont, qRcmd) are left out: the fuzz is about parsing, and a run of an
// empty machine is not. No input may crash, hang or trip a sanitizer.
#include "harness/gdb_stub.h"

#include <cstddef>
#include <cstdint>

using namespace vmxsim;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *Data, size_t Size) {
  static std::unique_ptr<Machine> M = [] {
    MachineConfig Cfg;
    Cfg.RamBytes = 8ull << 20;
    Cfg.Serial = OutputSpec::discard();
    Cfg.Debugcon = OutputSpec::discard();
    Error Err;
    return Machine::create(Cfg, Err);
  }();
  if (!M)
    return 0;
  GdbStub Stub(*M);
  Stub.attached(0);
  gdb::GdbPacketReader Reader;
  for (size_t I = 0; I < Size; ++I) {
    auto E = Reader.feed(Data[I]);
    if (!E || E->K != gdb::GdbPacketEvent::Kind::Packet)
      continue;
    const std::string &P = E->Payload;
    if (!P.empty() && (P[0] == 'c' || P[0] == 's' || P[0] == 'C' || P[0] == 'S' ||
                       P.rfind("vCont;", 0) == 0 || P.rfind("qRcmd", 0) == 0))
      continue;
    (void)Stub.handle(P);
  }
  return 0;
}
