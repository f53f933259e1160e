// The byte layer of the GDB remote serial protocol ("Remote Protocol" > "Overview" in
// the GDB manual): packets "$payload#cs" with a two-digit hex checksum (the sum of the
// payload's bytes modulo 256), '}' escaping of '$', '#', '}' and '*' (the byte XOR 0x20),
// the acknowledgements '+' and '-', and the interrupt byte 0x03 sent while the target
// runs. No sockets here: GdbPacketReader is fed bytes and hands back events, so that the
// layer is tested (and fuzzed) on its own (tests/harness/gdb_stub_test.cpp,
// harness/fuzz/gdb_packet_fuzzer.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vmxsim::gdb {

/// The largest packet payload the stub accepts and says it accepts (qSupported's
/// PacketSize, in hex 0x4000). A longer one is discarded whole and answered with an
/// error (GdbPacketEvent::Overlong), never buffered without bound.
inline constexpr size_t kMaxPacketBytes = 0x4000;

struct GdbPacketEvent {
  enum class Kind : uint8_t {
    Packet,      ///< a whole packet with a good checksum; Payload is unescaped
    BadChecksum, ///< a whole packet whose checksum is wrong or not hex: answer '-'
    Overlong,    ///< a packet longer than kMaxPacketBytes (checksum not checked)
    Ack,         ///< '+'
    Nack,        ///< '-': send the last packet again
    Interrupt,   ///< 0x03 outside a packet
  };
  Kind K = Kind::Packet;
  std::string Payload;
};

/// Splits a byte stream into events. Bytes outside a packet other than '+', '-', 0x03
/// and '$' are ignored (gdb sends none; line noise is dropped). A '$' inside a packet
/// starts a new one (the torn packet is dropped), as a resynchronisation.
class GdbPacketReader {
public:
  /// One byte in; an event when it completes one.
  std::optional<GdbPacketEvent> feed(uint8_t Byte);
  /// Whether a packet has started and not ended (a disconnect now cuts it).
  bool inPacket() const { return St != State::Idle; }

private:
  enum class State : uint8_t { Idle, Body, Check1, Check2 };
  State St = State::Idle;
  std::string Body; ///< the payload, still escaped
  bool TooLong = false;
  uint8_t Sum = 0;
  int Check = 0; ///< the first checksum digit's value, or -1 when it was not hex
};

/// "$" + escaped payload + "#" + checksum.
std::string framePacket(std::string_view Payload);
/// The payload with '}' escapes undone (a trailing lone '}' is dropped).
std::string unescape(std::string_view Escaped);

/// Lower-case hex of bytes, and back. fromHex fails on an odd length or a non-hex digit.
std::string toHex(std::string_view Bytes);
std::optional<std::string> fromHex(std::string_view Hex);
/// A hex number of 1..16 digits (no prefix, no sign).
std::optional<uint64_t> parseHexNumber(std::string_view Hex);
/// A value as its little-endian bytes in hex (the register encoding of 'g' and 'p').
std::string hexLittleEndian(uint64_t Value, unsigned SizeBytes);

} // namespace vmxsim::gdb
