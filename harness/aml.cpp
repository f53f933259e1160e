#include "harness/aml.h"

#include <cassert>

namespace vmxsim::aml {

namespace {
// ACPI 6.5, "ACPI Machine Language (AML) Specification" > "AML Grammar Definition".
constexpr uint8_t ZeroOp = 0x00, OneOp = 0x01, NameOp = 0x08, BytePrefix = 0x0a,
                  WordPrefix = 0x0b, DWordPrefix = 0x0c, StringPrefix = 0x0d,
                  QWordPrefix = 0x0e, ScopeOp = 0x10, BufferOp = 0x11, PackageOp = 0x12,
                  DualNamePrefix = 0x2e, MultiNamePrefix = 0x2f, ExtOpPrefix = 0x5b,
                  DeviceOp = 0x82, RootChar = 0x5c;

void put16(std::vector<uint8_t> &B, uint16_t V) {
  B.push_back(uint8_t(V));
  B.push_back(uint8_t(V >> 8));
}
void put32(std::vector<uint8_t> &B, uint32_t V) {
  put16(B, uint16_t(V));
  put16(B, uint16_t(V >> 16));
}
} // namespace

std::vector<uint8_t> pkgLength(uint64_t BodyBytes) {
  // One byte holds lengths up to 63 (bits 5:0); with N following bytes the lead byte
  // keeps bits 3:0 and the others hold 8 bits each.
  if (BodyBytes + 1 <= 0x3f)
    return {uint8_t(BodyBytes + 1)};
  for (unsigned N = 1; N <= 3; ++N) {
    const uint64_t Total = BodyBytes + 1 + N;
    if (Total < (1ull << (4 + 8 * N))) {
      std::vector<uint8_t> B{uint8_t((N << 6) | (Total & 0xf))};
      for (unsigned I = 0; I < N; ++I)
        B.push_back(uint8_t(Total >> (4 + 8 * I)));
      return B;
    }
  }
  assert(false && "AML package longer than 2^28 bytes");
  return {};
}

uint32_t eisaId(std::string_view Id) {
  assert(Id.size() == 7);
  auto Hex = [](char C) -> uint32_t {
    return C <= '9' ? uint32_t(C - '0') : uint32_t((C | 0x20) - 'a' + 10);
  };
  const uint32_t Big = (uint32_t(Id[0] & 0x1f) << 26) | (uint32_t(Id[1] & 0x1f) << 21) |
                       (uint32_t(Id[2] & 0x1f) << 16) | (Hex(Id[3]) << 12) | (Hex(Id[4]) << 8) |
                       (Hex(Id[5]) << 4) | Hex(Id[6]);
  return __builtin_bswap32(Big);
}

// ACPI 6.5, "Small Resource Data Type" > "I/O Port Descriptor": tag 0x47 (type 8,
// length 7), information (bit 0: 16-bit decode), min, max, alignment, length.
Resources &Resources::io(uint16_t Base, uint8_t Length, uint8_t Align) {
  B.push_back(0x47);
  B.push_back(0x01);
  put16(B, Base);
  put16(B, Base);
  B.push_back(Align);
  B.push_back(Length);
  return *this;
}

// "IRQ Descriptor": tag 0x22 (type 4, length 2), a 16-bit mask of IRQs. Without the
// optional information byte the IRQ is "high true, edge sensitive, non-shareable".
Resources &Resources::irq(unsigned Irq) {
  B.push_back(0x22);
  put16(B, uint16_t(1u << Irq));
  return *this;
}

// "Large Resource Data Type" > "32-Bit Fixed Memory Range Descriptor": tag 0x86, length
// 9, information (bit 0: writable), base, length.
Resources &Resources::memory32Fixed(uint32_t Base, uint32_t Length, bool Writable) {
  B.push_back(0x86);
  put16(B, 9);
  B.push_back(Writable ? 1 : 0);
  put32(B, Base);
  put32(B, Length);
  return *this;
}

// "Word Address Space Descriptor": tag 0x88, length 13, resource type (1 I/O, 2 bus
// number), general flags (bit 3 _MAF, bit 2 _MIF fixed; bit 0 = 0: the device produces
// the range for its children), type-specific flags, granularity, min, max, translation
// offset, length.
Resources &Resources::wordAddressSpace(uint8_t Type, uint8_t TypeFlags, uint16_t Min,
                                       uint16_t Max) {
  B.push_back(0x88);
  put16(B, 13);
  B.push_back(Type);
  B.push_back(0x0c);
  B.push_back(TypeFlags);
  put16(B, 0);
  put16(B, Min);
  put16(B, Max);
  put16(B, 0);
  put16(B, uint16_t(Max - Min + 1));
  return *this;
}

Resources &Resources::wordBusNumber(uint16_t Min, uint16_t Max) {
  return wordAddressSpace(2, 0, Min, Max);
}

Resources &Resources::wordIo(uint16_t Min, uint16_t Max) {
  // I/O type-specific flags: _RNG = 3, ISA and non-ISA ranges.
  return wordAddressSpace(1, 3, Min, Max);
}

// "DWord Address Space Descriptor": tag 0x87, length 23, resource type 0 (memory),
// general flags as above, type-specific flags (bit 0 _RW = read-write, bits 2:1 _MEM = 0
// non-cacheable), then granularity, min, max, translation, length (4 bytes each).
Resources &Resources::dwordMemory(uint32_t Min, uint32_t Max) {
  B.push_back(0x87);
  put16(B, 23);
  B.push_back(0);
  B.push_back(0x0c);
  B.push_back(0x01);
  put32(B, 0);
  put32(B, Min);
  put32(B, Max);
  put32(B, 0);
  put32(B, Max - Min + 1);
  return *this;
}

// "End Tag": 0x79, checksum.
std::vector<uint8_t> Resources::end() {
  B.push_back(0x79);
  B.push_back(0);
  return std::move(B);
}

// NameString := <RootChar NamePath> | <PrefixPath NamePath>; NamePath := NameSeg |
// DualNamePath | MultiNamePath; a NameSeg is four characters, padded with '_'.
void Builder::nameStringBytes(std::string_view Name) {
  if (!Name.empty() && Name[0] == '\\') {
    Out.push_back(RootChar);
    Name.remove_prefix(1);
  }
  std::vector<std::string_view> Segs;
  while (!Name.empty()) {
    const size_t Dot = Name.find('.');
    Segs.push_back(Name.substr(0, Dot));
    Name.remove_prefix(Dot == std::string_view::npos ? Name.size() : Dot + 1);
  }
  if (Segs.size() == 2)
    Out.push_back(DualNamePrefix);
  else if (Segs.size() > 2) {
    Out.push_back(MultiNamePrefix);
    Out.push_back(uint8_t(Segs.size()));
  }
  if (Segs.empty())
    Out.push_back(0); // NullName
  for (std::string_view S : Segs) {
    assert(!S.empty() && S.size() <= 4);
    for (size_t I = 0; I < 4; ++I)
      Out.push_back(uint8_t(I < S.size() ? S[I] : '_'));
  }
}

void Builder::integer(uint64_t V) {
  // ComputationalData: ZeroOp, OneOp, or the smallest prefix that holds V.
  if (V == 0 || V == 1) {
    Out.push_back(V ? OneOp : ZeroOp);
    return;
  }
  const unsigned Bytes = V <= 0xff ? 1 : V <= 0xffff ? 2 : V <= 0xffffffff ? 4 : 8;
  Out.push_back(Bytes == 1   ? BytePrefix
                : Bytes == 2 ? WordPrefix
                : Bytes == 4 ? DWordPrefix
                             : QWordPrefix);
  for (unsigned I = 0; I < Bytes; ++I)
    Out.push_back(uint8_t(V >> (8 * I)));
}

void Builder::wrapped(std::initializer_list<uint8_t> Op, std::string_view Name,
                      const Body &Terms) {
  Builder Inner;
  Inner.nameStringBytes(Name);
  Terms(Inner);
  Out.insert(Out.end(), Op);
  const std::vector<uint8_t> Len = pkgLength(Inner.Out.size());
  Out.insert(Out.end(), Len.begin(), Len.end());
  Out.insert(Out.end(), Inner.Out.begin(), Inner.Out.end());
}

Builder &Builder::scope(std::string_view Name, const Body &Terms) {
  wrapped({ScopeOp}, Name, Terms);
  return *this;
}

Builder &Builder::device(std::string_view Name, const Body &Terms) {
  wrapped({ExtOpPrefix, DeviceOp}, Name, Terms);
  return *this;
}

Builder &Builder::nameInteger(std::string_view Name, uint64_t Value) {
  Out.push_back(NameOp);
  nameStringBytes(Name);
  integer(Value);
  return *this;
}

Builder &Builder::nameString(std::string_view Name, std::string_view Value) {
  Out.push_back(NameOp);
  nameStringBytes(Name);
  Out.push_back(StringPrefix);
  Out.insert(Out.end(), Value.begin(), Value.end());
  Out.push_back(0);
  return *this;
}

Builder &Builder::nameEisaId(std::string_view Name, std::string_view Id) {
  Out.push_back(NameOp);
  nameStringBytes(Name);
  Out.push_back(DWordPrefix);
  put32(Out, eisaId(Id));
  return *this;
}

Builder &Builder::nameBuffer(std::string_view Name, const std::vector<uint8_t> &Bytes) {
  Out.push_back(NameOp);
  nameStringBytes(Name);
  Builder Inner;
  Inner.integer(Bytes.size());
  Inner.Out.insert(Inner.Out.end(), Bytes.begin(), Bytes.end());
  Out.push_back(BufferOp);
  const std::vector<uint8_t> Len = pkgLength(Inner.Out.size());
  Out.insert(Out.end(), Len.begin(), Len.end());
  Out.insert(Out.end(), Inner.Out.begin(), Inner.Out.end());
  return *this;
}

Builder &Builder::namePackage(std::string_view Name, const std::vector<uint64_t> &Elements) {
  assert(Elements.size() <= 255);
  Out.push_back(NameOp);
  nameStringBytes(Name);
  Builder Inner;
  Inner.Out.push_back(uint8_t(Elements.size()));
  for (uint64_t E : Elements)
    Inner.integer(E);
  Out.push_back(PackageOp);
  const std::vector<uint8_t> Len = pkgLength(Inner.Out.size());
  Out.insert(Out.end(), Len.begin(), Len.end());
  Out.insert(Out.end(), Inner.Out.begin(), Inner.Out.end());
  return *this;
}

} // namespace vmxsim::aml
