// The snapshot file format and its serializer (harness/snapshot.h saves a whole machine
// with it). The lowest layer: it includes only the standard library, so mmu/, cpu/,
// trace/ and harness/ all may use it, and each stateful component writes its own fields
// next to its state (a `save(SnapshotWriter &) const` / `load(SnapshotReader &)` pair, or
// one `snapshotFields(Self, Archive)` template visited by both).
//
// File layout (all integers little-endian):
//
//   offset 0   8 bytes   magic "VMXSNAP\0"
//          8   u32       format version (kSnapshotFormatVersion)
//         12   u32       0 (reserved)
//         16   u64       body length B
//         24   B bytes   body: sections, each  tag (4 ASCII bytes), u64 length L, L bytes
//     24 + B   u32       CRC-32C (Castagnoli) of the 24 + B bytes before it
//
// A reader checks, in this order: the size (at least the header), the magic, the
// version (newer than this build: refused), the length (truncated or trailing bytes),
// and the checksum; then every section is read in the order it was written, and a
// section whose reader did not consume exactly its length is an error naming its tag.
// Every failure is one line, and reads after a failure return zeros (no exceptions:
// the core builds with -fno-exceptions), so a loader checks ok() once at its end.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace vmxsim {

namespace detail {
template <class T> struct IsStdArray : std::false_type {};
template <class T, size_t N> struct IsStdArray<std::array<T, N>> : std::true_type {};
} // namespace detail

inline constexpr char kSnapshotMagic[8] = {'V', 'M', 'X', 'S', 'N', 'A', 'P', '\0'};
/// Version 1: the first format. Version 2: the CPU record holds MONITOR's state and
/// IGNNE#. Version 3: the machine's stop latch keeps the name of an unimplemented
/// feature that stopped the run. Version 4: the ground truth's link keeps, per CPU, the
/// registers it last recorded (GT_GPR is written only for a register that changed).
/// Version 5: it also keeps, per CPU, the RIP a GT_RESUME would stand for.
/// Bump it with every change of any component's fields; older versions are refused.
inline constexpr uint32_t kSnapshotFormatVersion = 5;
inline constexpr size_t kSnapshotHeaderBytes = 24;

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as iSCSI and ext4 use it:
/// crc32c(0, "123456789", 9) == 0xE3069283.
uint32_t crc32c(uint32_t Crc, const void *Data, size_t Size);

class SnapshotWriter {
public:
  SnapshotWriter();
  /// Opens a section; sections do not nest.
  void begin(const char (&Tag)[5]);
  void end();

  void u8(uint8_t V) { Body.push_back(V); }
  void u16(uint16_t V) { raw(&V, 2); }
  void u32(uint32_t V) { raw(&V, 4); }
  void u64(uint64_t V) { raw(&V, 8); }
  void bytes(const void *P, size_t N) { raw(P, N); }
  /// A length-prefixed byte string.
  void blob(const void *P, size_t N) {
    u64(N);
    raw(P, N);
  }
  void str(const std::string &S) { blob(S.data(), S.size()); }

  /// The archive interface of snapshotFields templates: one value of any integral,
  /// bool or enum type, or an array of them.
  template <class T> void io(const T &V) {
    if constexpr (std::is_array_v<T> || detail::IsStdArray<T>::value) {
      for (const auto &E : V)
        io(E);
    } else if constexpr (std::is_enum_v<T>) {
      io(static_cast<std::underlying_type_t<T>>(V));
    } else if constexpr (std::is_same_v<T, bool>) {
      uint8_t B; // the byte as stored: a bool that was never written is not 0 or 1
      std::memcpy(&B, &V, 1);
      u8(B != 0);
    } else {
      static_assert(std::is_integral_v<T>, "snapshot fields are integers, bools or enums");
      const auto U = static_cast<std::make_unsigned_t<T>>(V);
      raw(&U, sizeof(T));
    }
  }
  template <class... T> void all(const T &...V) { (io(V), ...); }
  static constexpr bool Loading = false;

  /// The file: header, body and checksum.
  std::vector<uint8_t> finish();

private:
  void raw(const void *P, size_t N);
  std::vector<uint8_t> Body;
  size_t SectionStart = 0;
  bool InSection = false;
};

class SnapshotReader {
public:
  /// Checks File's header, length and checksum; on failure returns false and sets Why
  /// (one line, without the file's name).
  bool open(std::vector<uint8_t> File, std::string &Why);

  /// Enters the next section, which must carry Tag.
  bool begin(const char (&Tag)[5]);
  /// Leaves it: the section's bytes must all have been read.
  bool end();
  /// The tag of the next section ("" at the end of the body or after a failure).
  std::string peekTag() const;

  uint8_t u8() {
    uint8_t V = 0;
    raw(&V, 1);
    return V;
  }
  uint16_t u16() {
    uint16_t V = 0;
    raw(&V, 2);
    return V;
  }
  uint32_t u32() {
    uint32_t V = 0;
    raw(&V, 4);
    return V;
  }
  uint64_t u64() {
    uint64_t V = 0;
    raw(&V, 8);
    return V;
  }
  bool bytes(void *P, size_t N) { return raw(P, N); }
  /// A length-prefixed byte string of at most Max bytes.
  bool blob(std::vector<uint8_t> &Out, uint64_t Max = ~uint64_t(0));
  bool str(std::string &Out, uint64_t Max = 1u << 20);
  /// A pointer to the next N bytes of the section (and skips them), or null.
  const uint8_t *view(size_t N);

  template <class T> void io(T &V) {
    if constexpr (std::is_array_v<T> || detail::IsStdArray<T>::value) {
      for (auto &E : V)
        io(E);
    } else if constexpr (std::is_enum_v<T>) {
      std::underlying_type_t<T> U{};
      io(U);
      V = static_cast<T>(U);
    } else if constexpr (std::is_same_v<T, bool>) {
      const uint8_t B = u8();
      if (B > 1)
        fail("a boolean field holds " + std::to_string(B));
      V = B == 1;
    } else {
      static_assert(std::is_integral_v<T>, "snapshot fields are integers, bools or enums");
      std::make_unsigned_t<T> U = 0;
      raw(&U, sizeof(T));
      V = static_cast<T>(U);
    }
  }
  template <class... T> void all(T &...V) { (io(V), ...); }
  static constexpr bool Loading = true;

  /// Records the first failure (one line); later reads return zeros.
  void fail(const std::string &Why);
  bool ok() const { return Error.empty(); }
  const std::string &error() const { return Error; }
  /// The current section's tag, for messages.
  const std::string &section() const { return Section; }
  /// Bytes left in the current section.
  uint64_t remaining() const { return Limit - Pos; }
  uint32_t version() const { return Version; }

private:
  bool raw(void *P, size_t N);
  std::vector<uint8_t> Data;
  size_t Pos = 0, Limit = 0, BodyEnd = 0;
  std::string Section, Error;
  uint32_t Version = 0;
};

} // namespace vmxsim
