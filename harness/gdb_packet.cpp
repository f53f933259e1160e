// The GDB remote protocol's byte layer (harness/gdb_packet.h).
#include "harness/gdb_packet.h"

namespace vmxsim::gdb {

namespace {

int hexDigit(uint8_t C) {
  if (C >= '0' && C <= '9')
    return C - '0';
  if (C >= 'a' && C <= 'f')
    return C - 'a' + 10;
  if (C >= 'A' && C <= 'F')
    return C - 'A' + 10;
  return -1;
}

constexpr char kHexDigits[] = "0123456789abcdef";

} // namespace

std::optional<GdbPacketEvent> GdbPacketReader::feed(uint8_t Byte) {
  using K = GdbPacketEvent::Kind;
  switch (St) {
  case State::Idle:
    switch (Byte) {
    case '+':
      return GdbPacketEvent{K::Ack, {}};
    case '-':
      return GdbPacketEvent{K::Nack, {}};
    case 0x03:
      return GdbPacketEvent{K::Interrupt, {}};
    case '$':
      St = State::Body;
      Body.clear();
      TooLong = false;
      Sum = 0;
      return std::nullopt;
    default:
      return std::nullopt;
    }
  case State::Body:
    if (Byte == '#') {
      St = State::Check1;
      return std::nullopt;
    }
    if (Byte == '$') { // a new packet: the torn one is dropped
      Body.clear();
      TooLong = false;
      Sum = 0;
      return std::nullopt;
    }
    Sum = uint8_t(Sum + Byte);
    if (Body.size() >= 2 * kMaxPacketBytes) // escaped: up to two bytes a payload byte
      TooLong = true;
    else
      Body.push_back(char(Byte));
    return std::nullopt;
  case State::Check1:
    Check = hexDigit(Byte);
    St = State::Check2;
    return std::nullopt;
  case State::Check2: {
    St = State::Idle;
    const int Low = hexDigit(Byte);
    GdbPacketEvent E;
    if (Check < 0 || Low < 0 || uint8_t(Check * 16 + Low) != Sum) {
      E.K = TooLong ? K::Overlong : K::BadChecksum;
      Body.clear();
      return E;
    }
    if (!TooLong)
      E.Payload = unescape(Body);
    if (TooLong || E.Payload.size() > kMaxPacketBytes) {
      E.K = K::Overlong;
      E.Payload.clear();
    }
    Body.clear();
    return E;
  }
  }
  return std::nullopt;
}

std::string unescape(std::string_view Escaped) {
  std::string Out;
  Out.reserve(Escaped.size());
  for (size_t I = 0; I < Escaped.size(); ++I) {
    if (Escaped[I] == '}') {
      if (++I < Escaped.size())
        Out.push_back(char(Escaped[I] ^ 0x20));
      continue;
    }
    Out.push_back(Escaped[I]);
  }
  return Out;
}

std::string framePacket(std::string_view Payload) {
  std::string Out = "$";
  uint8_t Sum = 0;
  auto Put = [&](char C) {
    Out.push_back(C);
    Sum = uint8_t(Sum + uint8_t(C));
  };
  for (char C : Payload) {
    if (C == '$' || C == '#' || C == '}' || C == '*') {
      Put('}');
      Put(char(C ^ 0x20));
    } else {
      Put(C);
    }
  }
  Out.push_back('#');
  Out.push_back(kHexDigits[Sum >> 4]);
  Out.push_back(kHexDigits[Sum & 15]);
  return Out;
}

std::string toHex(std::string_view Bytes) {
  std::string Out;
  Out.reserve(Bytes.size() * 2);
  for (char C : Bytes) {
    Out.push_back(kHexDigits[uint8_t(C) >> 4]);
    Out.push_back(kHexDigits[uint8_t(C) & 15]);
  }
  return Out;
}

std::optional<std::string> fromHex(std::string_view Hex) {
  if (Hex.size() % 2)
    return std::nullopt;
  std::string Out;
  Out.reserve(Hex.size() / 2);
  for (size_t I = 0; I < Hex.size(); I += 2) {
    const int Hi = hexDigit(uint8_t(Hex[I])), Lo = hexDigit(uint8_t(Hex[I + 1]));
    if (Hi < 0 || Lo < 0)
      return std::nullopt;
    Out.push_back(char(Hi * 16 + Lo));
  }
  return Out;
}

std::optional<uint64_t> parseHexNumber(std::string_view Hex) {
  if (Hex.empty() || Hex.size() > 16)
    return std::nullopt;
  uint64_t V = 0;
  for (char C : Hex) {
    const int D = hexDigit(uint8_t(C));
    if (D < 0)
      return std::nullopt;
    V = V << 4 | uint64_t(D);
  }
  return V;
}

std::string hexLittleEndian(uint64_t Value, unsigned SizeBytes) {
  std::string Out;
  for (unsigned I = 0; I < SizeBytes; ++I) {
    const uint8_t B = I < 8 ? uint8_t(Value >> (8 * I)) : 0;
    Out.push_back(kHexDigits[B >> 4]);
    Out.push_back(kHexDigits[B & 15]);
  }
  return Out;
}

} // namespace vmxsim::gdb
