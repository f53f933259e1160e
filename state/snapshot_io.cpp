#include "state/snapshot_io.h"

#include <array>
#include <cstring>

namespace vmxsim {

namespace {
// Slicing-by-8 tables of the reflected CRC-32C polynomial.
struct Crc32cTables {
  uint32_t T[8][256];
  constexpr Crc32cTables() : T{} {
    for (uint32_t I = 0; I < 256; ++I) {
      uint32_t C = I;
      for (int K = 0; K < 8; ++K)
        C = (C >> 1) ^ (0x82F63B78u & (0u - (C & 1)));
      T[0][I] = C;
    }
    for (uint32_t I = 0; I < 256; ++I)
      for (int S = 1; S < 8; ++S)
        T[S][I] = (T[S - 1][I] >> 8) ^ T[0][T[S - 1][I] & 0xff];
  }
};
constexpr Crc32cTables kCrcTables;

void putLe(std::vector<uint8_t> &Out, uint64_t V, unsigned N) {
  for (unsigned I = 0; I < N; ++I)
    Out.push_back(uint8_t(V >> (8 * I)));
}
uint64_t getLe(const uint8_t *P, unsigned N) {
  uint64_t V = 0;
  for (unsigned I = 0; I < N; ++I)
    V |= uint64_t(P[I]) << (8 * I);
  return V;
}
} // namespace

uint32_t crc32c(uint32_t Crc, const void *Data, size_t Size) {
  const uint8_t *P = static_cast<const uint8_t *>(Data);
  const auto &T = kCrcTables.T;
  Crc = ~Crc;
  while (Size >= 8) {
    const uint32_t Lo = Crc ^ uint32_t(getLe(P, 4));
    const uint32_t Hi = uint32_t(getLe(P + 4, 4));
    Crc = T[7][Lo & 0xff] ^ T[6][(Lo >> 8) & 0xff] ^ T[5][(Lo >> 16) & 0xff] ^
          T[4][Lo >> 24] ^ T[3][Hi & 0xff] ^ T[2][(Hi >> 8) & 0xff] ^
          T[1][(Hi >> 16) & 0xff] ^ T[0][Hi >> 24];
    P += 8;
    Size -= 8;
  }
  while (Size--)
    Crc = (Crc >> 8) ^ T[0][(Crc ^ *P++) & 0xff];
  return ~Crc;
}

SnapshotWriter::SnapshotWriter() { Body.reserve(1 << 16); }

void SnapshotWriter::raw(const void *P, size_t N) {
  // Little-endian hosts only (the emulator's own layout assumptions are the same).
  const uint8_t *B = static_cast<const uint8_t *>(P);
  Body.insert(Body.end(), B, B + N);
}

void SnapshotWriter::begin(const char (&Tag)[5]) {
  Body.insert(Body.end(), Tag, Tag + 4);
  SectionStart = Body.size();
  u64(0); // patched by end()
  InSection = true;
}

void SnapshotWriter::end() {
  const uint64_t Len = Body.size() - SectionStart - 8;
  std::memcpy(Body.data() + SectionStart, &Len, 8);
  InSection = false;
}

std::vector<uint8_t> SnapshotWriter::finish() {
  std::vector<uint8_t> Out;
  Out.reserve(kSnapshotHeaderBytes + Body.size() + 4);
  for (char C : kSnapshotMagic)
    Out.push_back(uint8_t(C));
  putLe(Out, kSnapshotFormatVersion, 4);
  putLe(Out, 0, 4);
  putLe(Out, Body.size(), 8);
  Out.insert(Out.end(), Body.begin(), Body.end());
  putLe(Out, crc32c(0, Out.data(), Out.size()), 4);
  return Out;
}

bool SnapshotReader::open(std::vector<uint8_t> File, std::string &Why) {
  Data = std::move(File);
  if (Data.size() < 8 || std::memcmp(Data.data(), kSnapshotMagic, 8) != 0) {
    // (an empty file is a truncated snapshot too; memcmp is not given its null data)
    Why = Data.size() < 8 &&
                  (Data.empty() || std::memcmp(Data.data(), kSnapshotMagic, Data.size()) == 0)
              ? "truncated snapshot (" + std::to_string(Data.size()) + " bytes, no header)"
              : "not a vmxsim snapshot (wrong magic)";
    return false;
  }
  if (Data.size() < kSnapshotHeaderBytes) {
    Why = "truncated snapshot (" + std::to_string(Data.size()) + " bytes, no header)";
    return false;
  }
  Version = uint32_t(getLe(Data.data() + 8, 4));
  if (Version > kSnapshotFormatVersion) {
    Why = "snapshot format version " + std::to_string(Version) +
          " is newer than this vmxsim's (" + std::to_string(kSnapshotFormatVersion) + ")";
    return false;
  }
  if (Version < 1) {
    Why = "snapshot format version 0 does not exist";
    return false;
  }
  if (Version < kSnapshotFormatVersion) {
    Why = "snapshot format version " + std::to_string(Version) + " is older than this vmxsim's (" +
          std::to_string(kSnapshotFormatVersion) + ")";
    return false;
  }
  const uint64_t BodyLen = getLe(Data.data() + 16, 8);
  const uint64_t Expect = kSnapshotHeaderBytes + 4 + BodyLen;
  if (BodyLen > Data.size() || Data.size() != Expect) {
    Why = Data.size() < Expect || BodyLen > Data.size()
              ? "truncated snapshot (" + std::to_string(Data.size()) + " of " +
                    std::to_string(Expect) + " bytes)"
              : "snapshot has " + std::to_string(Data.size() - Expect) +
                    " trailing bytes after its checksum";
    return false;
  }
  const uint32_t Stored = uint32_t(getLe(Data.data() + Data.size() - 4, 4));
  if (crc32c(0, Data.data(), Data.size() - 4) != Stored) {
    Why = "snapshot checksum mismatch (the file is corrupt)";
    return false;
  }
  Pos = Limit = kSnapshotHeaderBytes;
  BodyEnd = kSnapshotHeaderBytes + BodyLen;
  return true;
}

std::string SnapshotReader::peekTag() const {
  if (!ok() || Pos + 12 > BodyEnd)
    return "";
  return std::string(reinterpret_cast<const char *>(Data.data() + Pos), 4);
}

bool SnapshotReader::begin(const char (&Tag)[5]) {
  if (!ok())
    return false;
  if (Pos != Limit) {
    fail("section " + Section + " is not read to its end");
    return false;
  }
  if (Pos + 12 > BodyEnd) {
    fail(std::string("section ") + Tag + " is missing");
    return false;
  }
  if (std::memcmp(Data.data() + Pos, Tag, 4) != 0) {
    fail(std::string("expected section ") + Tag + ", found " +
         std::string(reinterpret_cast<const char *>(Data.data() + Pos), 4));
    return false;
  }
  const uint64_t Len = getLe(Data.data() + Pos + 4, 8);
  if (Len > BodyEnd - Pos - 12) {
    fail(std::string("section ") + Tag + " reaches past the end of the snapshot");
    return false;
  }
  Section = Tag;
  Pos += 12;
  Limit = Pos + Len;
  return true;
}

bool SnapshotReader::end() {
  if (!ok())
    return false;
  if (Pos != Limit) {
    fail("section " + Section + " has " + std::to_string(Limit - Pos) +
         " bytes this vmxsim does not read");
    return false;
  }
  return true;
}

bool SnapshotReader::raw(void *P, size_t N) {
  if (!ok() || N > Limit - Pos) {
    if (ok())
      fail("section " + Section + " ends early");
    std::memset(P, 0, N);
    return false;
  }
  if (N)
    std::memcpy(P, Data.data() + Pos, N);
  Pos += N;
  return true;
}

const uint8_t *SnapshotReader::view(size_t N) {
  if (!ok() || N > Limit - Pos) {
    if (ok())
      fail("section " + Section + " ends early");
    return nullptr;
  }
  const uint8_t *P = Data.data() + Pos;
  Pos += N;
  return P;
}

bool SnapshotReader::blob(std::vector<uint8_t> &Out, uint64_t Max) {
  const uint64_t N = u64();
  if (!ok())
    return false;
  if (N > Max || N > Limit - Pos) {
    fail("section " + Section + " holds a string of " + std::to_string(N) +
         " bytes, more than it can");
    return false;
  }
  Out.assign(Data.data() + Pos, Data.data() + Pos + N);
  Pos += N;
  return true;
}

bool SnapshotReader::str(std::string &Out, uint64_t Max) {
  std::vector<uint8_t> B;
  if (!blob(B, Max))
    return false;
  Out.assign(B.begin(), B.end());
  return true;
}

void SnapshotReader::fail(const std::string &Why) {
  if (Error.empty())
    Error = Why;
}

} // namespace vmxsim
