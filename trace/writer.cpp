#include "trace/writer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace vmxsim::trace {

FileOutput::~FileOutput() { close(); }

bool FileOutput::open(const std::string &Path, std::string &Error) {
  close();
  this->Path = Path;
  Failure.clear();
  F = std::fopen(Path.c_str(), "wb");
  if (!F) {
    Error = "cannot create trace file '" + Path + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

bool FileOutput::fail() {
  if (Failure.empty())
    Failure = Path + ": cannot write: " + std::strerror(errno ? errno : EIO);
  return false;
}

bool FileOutput::write(const void *Data, size_t Bytes) {
  if (!F)
    return false;
  errno = 0;
  return std::fwrite(Data, 1, Bytes, F) == Bytes || fail();
}

bool FileOutput::flush() {
  if (!F)
    return false;
  errno = 0;
  return std::fflush(F) == 0 || fail();
}

bool FileOutput::close() {
  if (!F)
    return Failure.empty();
  errno = 0;
  const bool Ok = std::fclose(F) == 0;
  F = nullptr;
  return (Ok || fail()) && Failure.empty();
}

bool MemoryOutput::write(const void *Data, size_t Bytes) {
  const uint8_t *P = static_cast<const uint8_t *>(Data);
  this->Bytes.insert(this->Bytes.end(), P, P + Bytes);
  return true;
}

// Room for the largest record plus the LOST_RECORDS record that may precede it.
static constexpr uint32_t kMinCapWords = 2 * XT_MAX_RECORD_WORDS;

TraceWriter::TraceWriter(TraceOutput &Out, unsigned NumCpus, size_t BufferBytes,
                         FullPolicy Policy)
    : Out(Out), NumCpus(std::clamp(NumCpus, 1u, XT_MAX_CPUS)),
      CapWords(uint32_t(std::clamp<size_t>(BufferBytes / 4, kMinCapWords, 1u << 28))),
      Policy(Policy), Cpus(new CpuBuffer[this->NumCpus]) {
  for (unsigned I = 0; I < this->NumCpus; ++I) {
    Cpus[I].Words.reset(new uint32_t[CapWords]);
    Cpus[I].Limit = CapWords;
  }
}

TraceWriter::~TraceWriter() {
  flush();
  Out.flush();
}

void TraceWriter::setCurrent(unsigned Cpu, uint16_t Domain, uint16_t Vcpu) {
  if (Cpu < NumCpus)
    Cpus[Cpu].Who = uint32_t(Domain) | uint32_t(Vcpu) << 16;
}

uint64_t TraceWriter::lostRecords(unsigned Cpu) const {
  return Cpu < NumCpus ? Cpus[Cpu].Lost : 0;
}

void TraceWriter::emit(const void *Data, size_t Bytes) {
  Written += Bytes;
  if (Ok && !Out.write(Data, Bytes))
    Ok = false;
}

void TraceWriter::flushCpu(unsigned Cpu) {
  if (Cpu >= NumCpus || Cpus[Cpu].Used == 0)
    return;
  CpuBuffer &B = Cpus[Cpu];
  // The window header: TRACE_CPU_CHANGE {cpu, byte count}, never stamped (section 4).
  const uint32_t Head[3] = {xt_header(XT_EV_TraceCpuChange, 2, 0), Cpu, B.Used * 4};
  // As emit, for the two pieces at once: the output may take the buffer (and leave
  // another of the same size in its place) instead of copying it.
  Written += sizeof(Head) + size_t(B.Used) * 4;
  if (Ok && !Out.writeBuffer(Head, sizeof(Head), B.Words, CapWords, size_t(B.Used) * 4))
    Ok = false;
  B.Used = 0;
}

void TraceWriter::peekPending(std::vector<uint8_t> &Out) const {
  for (unsigned Cpu = 0; Cpu < NumCpus; ++Cpu) {
    const CpuBuffer &B = Cpus[Cpu];
    if (B.Used == 0)
      continue;
    const uint32_t Head[3] = {xt_header(XT_EV_TraceCpuChange, 2, 0), Cpu, B.Used * 4};
    const uint8_t *H = reinterpret_cast<const uint8_t *>(Head);
    Out.insert(Out.end(), H, H + sizeof(Head));
    const uint8_t *W = reinterpret_cast<const uint8_t *>(B.Words.get());
    Out.insert(Out.end(), W, W + size_t(B.Used) * 4);
  }
}

void TraceWriter::flush() {
  for (unsigned I = 0; I < NumCpus; ++I)
    flushCpu(I);
  if (Ok && !Out.flush())
    Ok = false;
}

void TraceWriter::writeWindow(unsigned Cpu, const void *Data, uint32_t Bytes) {
  if (Cpu >= NumCpus || Bytes == 0)
    return;
  flushCpu(Cpu);
  const uint32_t Head[3] = {xt_header(XT_EV_TraceCpuChange, 2, 0), Cpu, Bytes};
  emit(Head, sizeof(Head));
  emit(Data, Bytes);
}

void TraceWriter::writeXen30Records(unsigned Cpu, const void *Data, uint32_t Bytes) {
  if (Cpu >= NumCpus)
    return;
  const uint8_t *P = static_cast<const uint8_t *>(Data);
  const uint32_t CpuWord = Cpu;
  for (uint32_t Off = 0; Off + XT30_RECORD_BYTES <= Bytes; Off += XT30_RECORD_BYTES) {
    emit(&CpuWord, sizeof(CpuWord));
    emit(P + Off, XT30_RECORD_BYTES);
  }
}

bool TraceWriter::makeRoom(unsigned Cpu, unsigned Need, uint64_t Tsc) {
  CpuBuffer &B = Cpus[Cpu];
  const unsigned LostWords = 1 + 2 + 4;
  if (Policy == FullPolicy::Flush) {
    if (B.Used + Need > CapWords)
      flushCpu(Cpu);
    return true;
  }
  // Drop: the ring of a hypervisor that nobody drains. A record that does not fit is
  // counted; once room exists again, LOST_RECORDS {count, who, first-lost TSC} goes
  // before the next record (section 4), stamped with that record's time.
  if (B.Used + (B.LostPending ? LostWords : 0) + Need > CapWords) {
    if (B.LostPending++ == 0)
      B.FirstLostTsc = Tsc;
    B.Limit = 0;
    ++B.Lost;
    return false;
  }
  if (B.LostPending) {
    const uint32_t W[4] = {uint32_t(std::min<uint64_t>(B.LostPending, 0xffffffff)), B.Who,
                           uint32_t(B.FirstLostTsc), uint32_t(B.FirstLostTsc >> 32)};
    B.Used = uint32_t(xt_put(&B.Words[B.Used], XT_EV_LostRecords, 1, Tsc, W, 4) - B.Words.get());
    B.LastTsc = Tsc;
    B.LostPending = 0;
    B.Limit = CapWords;
  }
  return true;
}

void TraceWriter::save(SnapshotWriter &W) const {
  W.all(NumCpus, CapWords, Written);
  for (unsigned I = 0; I < NumCpus; ++I) {
    const CpuBuffer &B = Cpus[I];
    W.all(B.Used, B.LastTsc, B.Lost, B.LostPending, B.FirstLostTsc, B.Who);
    W.bytes(B.Words.get(), size_t(B.Used) * 4);
  }
}

void TraceWriter::load(SnapshotReader &R) {
  unsigned N = 0;
  uint32_t Cap = 0;
  uint64_t Bytes = 0;
  R.all(N, Cap, Bytes);
  if (R.ok() && (N != NumCpus || Cap != CapWords)) {
    R.fail("the snapshot's trace writer has " + std::to_string(N) + " CPUs of " +
           std::to_string(Cap) + " words, this one " + std::to_string(NumCpus) + " of " +
           std::to_string(CapWords));
    return;
  }
  for (unsigned I = 0; I < NumCpus && R.ok(); ++I) {
    CpuBuffer &B = Cpus[I];
    R.all(B.Used, B.LastTsc, B.Lost, B.LostPending, B.FirstLostTsc, B.Who);
    B.Limit = B.LostPending ? 0 : CapWords;
    if (B.Used > CapWords) {
      R.fail("a trace buffer holds more than it can");
      B.Used = 0;
      return;
    }
    R.bytes(B.Words.get(), size_t(B.Used) * 4);
  }
  Written = Bytes;
}

} // namespace vmxsim::trace
