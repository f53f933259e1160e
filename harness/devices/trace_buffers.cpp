#include "harness/devices/trace_buffers.h"

#include "trace/tbuf.h"
#include "trace/writer.h"

#include <fmt/format.h>

namespace vmxsim {

TraceBufferDrain::TraceBufferDrain(PhysMem &Mem, trace::TraceWriter &Writer)
    : Mem(Mem), Writer(Writer), Rings(Writer.numCpus()) {}

void TraceBufferDrain::ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t Value) {
  // Only 32-bit writes carry an address or a CPU number; narrower ones are ignored, as
  // a device decoding a dword register would.
  if (SizeBytes != 4)
    return;
  if (Port == XT_TBUF_PORT_REGISTER)
    registerRing(Value);
  else if (Port == XT_TBUF_PORT_NOTIFY && Value < Rings.size())
    drain(Value);
}

void TraceBufferDrain::giveUp(unsigned Cpu, uint64_t Addr, const std::string &Why) {
  Problems.push_back(fmt::format("trace buffer at {:#x}: {}", Addr, Why));
  if (Cpu < Rings.size() && Rings[Cpu].Addr == Addr)
    Rings[Cpu] = Ring{};
}

void TraceBufferDrain::registerRing(uint64_t Addr) {
  xt_tbuf H;
  if (Addr == 0 || (Addr & 63) || !Mem.copyOut(Hpa(Addr), &H, sizeof(H)))
    return giveUp(~0u, Addr, "not 64-byte aligned RAM");
  if (H.magic != XT_TBUF_MAGIC)
    return giveUp(~0u, Addr, fmt::format("magic {:#x}, not {:#x}", H.magic, XT_TBUF_MAGIC));
  if (H.cpu >= Rings.size())
    return giveUp(~0u, Addr, fmt::format("cpu {} but the machine has {}", H.cpu, Rings.size()));
  if (H.format != XT_TBUF_FORMAT_MODERN && H.format != XT_TBUF_FORMAT_XEN30)
    return giveUp(~0u, Addr, fmt::format("format {} is neither {} (modern) nor {} (xen-3.0)",
                                         H.format, XT_TBUF_FORMAT_MODERN, XT_TBUF_FORMAT_XEN30));
  if (H.format == XT_TBUF_FORMAT_XEN30 && H.size % XT30_RECORD_BYTES)
    return giveUp(~0u, Addr, fmt::format("xen-3.0 data area of {} bytes is not a whole number "
                                         "of {}-byte records", H.size, XT30_RECORD_BYTES));
  if (H.size < 64 || H.size > XT_TBUF_MAX_SIZE || (H.size & 3) ||
      !Mem.isRam(Hpa(Addr + XT_TBUF_DATA_OFFSET), H.size))
    return giveUp(~0u, Addr, fmt::format("data area of {} bytes is not 64..{} bytes of RAM "
                                         "in whole words", H.size, XT_TBUF_MAX_SIZE));
  // A CPU that registers a new ring: what the old one still holds is kept.
  if (Rings[H.cpu].Addr && Rings[H.cpu].Addr != Addr)
    drain(H.cpu);
  Rings[H.cpu] = Ring{Addr, H.size, H.format};
  if (Scratch.size() < H.size)
    Scratch.resize(H.size);
}

void TraceBufferDrain::drain(unsigned Cpu) {
  const Ring R = Rings[Cpu];
  if (!R.Addr)
    return;
  xt_tbuf H;
  if (!Mem.copyOut(Hpa(R.Addr), &H, sizeof(H)))
    return giveUp(Cpu, R.Addr, "header is no longer RAM");
  // The header is the guest's memory: check everything again before trusting it.
  if (H.magic != XT_TBUF_MAGIC || H.cpu != Cpu || H.size != R.Size || H.format != R.Format)
    return giveUp(Cpu, R.Addr, "magic, cpu, size or format changed after registration");
  if (H.prod < H.cons || H.prod - H.cons > R.Size)
    return giveUp(Cpu, R.Addr, fmt::format("prod {:#x} and cons {:#x} are more than the "
                                           "size {:#x} apart", H.prod, H.cons, R.Size));
  const uint32_t Bytes = uint32_t(H.prod - H.cons);
  if (Bytes == 0)
    return;
  if (Bytes & 3)
    return giveUp(Cpu, R.Addr, fmt::format("{} bytes pending, not whole words", Bytes));
  if (R.Format == XT_TBUF_FORMAT_XEN30 && Bytes % XT30_RECORD_BYTES)
    return giveUp(Cpu, R.Addr, fmt::format("{} bytes pending, not whole xen-3.0 records", Bytes));
  if (WroteAny && R.Format != FileFormat)
    return giveUp(Cpu, R.Addr, fmt::format("ring of format {} in a trace file of format {}: "
                                           "one file holds one flavour",
                                           R.Format, FileFormat));
  const uint32_t Start = uint32_t(H.cons % R.Size);
  const uint32_t First = std::min(Bytes, R.Size - Start);
  const uint64_t Data = R.Addr + XT_TBUF_DATA_OFFSET;
  if (!Mem.copyOut(Hpa(Data + Start), Scratch.data(), First) ||
      !Mem.copyOut(Hpa(Data), Scratch.data() + First, Bytes - First))
    return giveUp(Cpu, R.Addr, "data area is no longer RAM");
  if (R.Format == XT_TBUF_FORMAT_XEN30)
    Writer.writeXen30Records(Cpu, Scratch.data(), Bytes);
  else
    Writer.writeWindow(Cpu, Scratch.data(), Bytes);
  WroteAny = true;
  FileFormat = R.Format;
  Drained += Bytes;
  Mem.write(Hpa(R.Addr + XT_TBUF_OFF_CONS), 8, H.prod);
}

void TraceBufferDrain::peek(std::vector<uint8_t> &Out) const {
  for (unsigned Cpu = 0; Cpu < Rings.size(); ++Cpu) {
    const Ring R = Rings[Cpu];
    xt_tbuf H;
    if (!R.Addr || !Mem.copyOut(Hpa(R.Addr), &H, sizeof(H)) || H.magic != XT_TBUF_MAGIC ||
        H.cpu != Cpu || H.size != R.Size || H.format != R.Format || H.prod < H.cons ||
        H.prod - H.cons > R.Size || ((H.prod - H.cons) & 3))
      continue;
    const uint32_t Bytes = uint32_t(H.prod - H.cons);
    if (Bytes == 0 || (R.Format == XT_TBUF_FORMAT_XEN30 && Bytes % XT30_RECORD_BYTES))
      continue;
    std::vector<uint8_t> Data(Bytes);
    const uint32_t Start = uint32_t(H.cons % R.Size);
    const uint32_t First = std::min(Bytes, R.Size - Start);
    const uint64_t Base = R.Addr + XT_TBUF_DATA_OFFSET;
    if (!Mem.copyOut(Hpa(Base + Start), Data.data(), First) ||
        !Mem.copyOut(Hpa(Base), Data.data() + First, Bytes - First))
      continue;
    auto put32 = [&Out](uint32_t V) {
      const uint8_t *P = reinterpret_cast<const uint8_t *>(&V);
      Out.insert(Out.end(), P, P + 4);
    };
    if (R.Format == XT_TBUF_FORMAT_XEN30) {
      for (uint32_t Off = 0; Off < Bytes; Off += XT30_RECORD_BYTES) {
        put32(Cpu);
        Out.insert(Out.end(), Data.begin() + Off, Data.begin() + Off + XT30_RECORD_BYTES);
      }
    } else {
      put32(xt_header(XT_EV_TraceCpuChange, 2, 0));
      put32(Cpu);
      put32(Bytes);
      Out.insert(Out.end(), Data.begin(), Data.end());
    }
  }
}

void TraceBufferDrain::drainAll() {
  for (unsigned Cpu = 0; Cpu < Rings.size(); ++Cpu)
    drain(Cpu);
  Writer.flush();
}

void TraceBufferDrain::save(SnapshotWriter &W) const {
  W.u64(Rings.size());
  for (const Ring &G : Rings)
    W.all(G.Addr, G.Size, G.Format);
  W.u64(Problems.size());
  for (const std::string &P : Problems)
    W.str(P);
  W.all(Drained, WroteAny, FileFormat);
}

void TraceBufferDrain::load(SnapshotReader &R) {
  const uint64_t N = R.u64();
  if (R.ok() && N != Rings.size()) {
    R.fail("the snapshot's trace drain lists " + std::to_string(N) + " rings");
    return;
  }
  Rings.assign(N, Ring{});
  for (Ring &G : Rings) {
    R.all(G.Addr, G.Size, G.Format);
    if (G.Size > XT_TBUF_MAX_SIZE) {
      R.fail("the snapshot's trace drain has a ring of " + std::to_string(G.Size) + " bytes");
      G = Ring{};
      return;
    }
    if (Scratch.size() < G.Size) // the copy buffer registerRing would have sized
      Scratch.resize(G.Size);
  }
  const uint64_t P = R.u64();
  if (R.ok() && P > 1024) {
    R.fail("the snapshot's trace drain lists " + std::to_string(P) + " problems");
    return;
  }
  Problems.assign(P, {});
  for (std::string &S : Problems)
    R.str(S);
  R.all(Drained, WroteAny, FileFormat);
}

} // namespace vmxsim
