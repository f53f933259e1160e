#include "trace/xen_console_import.h"

#include "trace/ftrace_import.h"
#include "trace/import_files.h"
#include "trace/writer.h"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

namespace vmxsim::trace {
namespace {

constexpr std::string_view kBegin = "vmxsim-xentrace: begin ";
constexpr std::string_view kEnd = "vmxsim-xentrace: end";
constexpr size_t kLineChars = 76; // busybox base64's line width

/// The value of a base64 character, or -1 ('=' is handled by the caller).
int base64Value(char C) {
  if (C >= 'A' && C <= 'Z')
    return C - 'A';
  if (C >= 'a' && C <= 'z')
    return C - 'a' + 26;
  if (C >= '0' && C <= '9')
    return C - '0' + 52;
  if (C == '+')
    return 62;
  if (C == '/')
    return 63;
  return -1;
}

std::string hex(const std::array<uint8_t, 32> &H) {
  std::string S;
  for (uint8_t B : H)
    S += fmt::format("{:02x}", B);
  return S;
}

uint32_t rotr(uint32_t X, unsigned N) { return (X >> N) | (X << (32 - N)); }

} // namespace

// FIPS 180-4, sections 4.2.2 (constants), 5.1.1 (padding), 6.2.2 (the computation).
std::array<uint8_t, 32> sha256(const uint8_t *Data, size_t Size) {
  static constexpr uint32_t K[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  uint32_t H[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  // The message padded: a 1 bit, zeros, the bit length (64 bits, big-endian).
  const uint64_t Blocks = (Size + 9 + 63) / 64;
  const uint64_t Bits = uint64_t(Size) * 8;
  for (uint64_t Blk = 0; Blk < Blocks; ++Blk) {
    uint8_t Block[64];
    for (unsigned I = 0; I < 64; ++I) {
      const uint64_t At = Blk * 64 + I;
      if (At < Size)
        Block[I] = Data[At];
      else if (At == Size)
        Block[I] = 0x80;
      else if (At >= Blocks * 64 - 8)
        Block[I] = uint8_t(Bits >> (8 * (Blocks * 64 - 1 - At)));
      else
        Block[I] = 0;
    }
    uint32_t W[64];
    for (unsigned T = 0; T < 16; ++T)
      W[T] = uint32_t(Block[4 * T]) << 24 | uint32_t(Block[4 * T + 1]) << 16 |
             uint32_t(Block[4 * T + 2]) << 8 | Block[4 * T + 3];
    for (unsigned T = 16; T < 64; ++T) {
      const uint32_t S0 = rotr(W[T - 15], 7) ^ rotr(W[T - 15], 18) ^ (W[T - 15] >> 3);
      const uint32_t S1 = rotr(W[T - 2], 17) ^ rotr(W[T - 2], 19) ^ (W[T - 2] >> 10);
      W[T] = W[T - 16] + S0 + W[T - 7] + S1;
    }
    uint32_t A = H[0], B = H[1], C = H[2], D = H[3], E = H[4], F = H[5], G = H[6], Hh = H[7];
    for (unsigned T = 0; T < 64; ++T) {
      const uint32_t T1 = Hh + (rotr(E, 6) ^ rotr(E, 11) ^ rotr(E, 25)) + ((E & F) ^ (~E & G)) +
                          K[T] + W[T];
      const uint32_t T2 = (rotr(A, 2) ^ rotr(A, 13) ^ rotr(A, 22)) + ((A & B) ^ (A & C) ^ (B & C));
      Hh = G;
      G = F;
      F = E;
      E = D + T1;
      D = C;
      C = B;
      B = A;
      A = T1 + T2;
    }
    H[0] += A;
    H[1] += B;
    H[2] += C;
    H[3] += D;
    H[4] += E;
    H[5] += F;
    H[6] += G;
    H[7] += Hh;
  }
  std::array<uint8_t, 32> Out;
  for (unsigned I = 0; I < 8; ++I)
    for (unsigned J = 0; J < 4; ++J)
      Out[4 * I + J] = uint8_t(H[I] >> (24 - 8 * J));
  return Out;
}

XenConsoleImport importXenConsole(std::string_view Text, const std::string &Name) {
  XenConsoleImport R;
  auto fail = [&](uint64_t Line, std::string Why) {
    R.Status = kImportBadInput;
    R.Problem = Line ? fmt::format("{}:{}: {}", Name, Line, Why) : fmt::format("{}: {}", Name, Why);
    R.Bytes.clear();
    return R;
  };
  uint64_t LineNo = 0;
  size_t Pos = 0;
  bool InTrace = false, SawShort = false;
  uint64_t Expected = 0;
  std::string Sum;
  uint32_t Acc = 0;
  unsigned AccBits = 0;
  while (Pos < Text.size()) {
    size_t Nl = Text.find('\n', Pos);
    if (Nl == std::string_view::npos)
      Nl = Text.size();
    std::string_view L = Text.substr(Pos, Nl - Pos);
    Pos = Nl + 1;
    ++LineNo;
    while (!L.empty() && L.back() == '\r') // the tty's CR, and Xen's console's
      L.remove_suffix(1);
    if (!InTrace) {
      // The begin line may follow other console text on its line only at its start.
      if (L.substr(0, kBegin.size()) != kBegin)
        continue;
      std::string_view Args = L.substr(kBegin.size());
      const size_t Sp = Args.find(' ');
      if (Sp == std::string_view::npos || Sp == 0 || Args.size() - Sp - 1 != 64)
        return fail(LineNo, fmt::format("malformed begin line '{}'", L));
      Expected = 0;
      for (char C : Args.substr(0, Sp)) {
        if (C < '0' || C > '9' || Expected > (uint64_t(1) << 40))
          return fail(LineNo, fmt::format("malformed byte count in '{}'", L));
        Expected = Expected * 10 + uint64_t(C - '0');
      }
      Sum = std::string(Args.substr(Sp + 1));
      for (char C : Sum)
        if (!((C >= '0' && C <= '9') || (C >= 'a' && C <= 'f')))
          return fail(LineNo, fmt::format("malformed SHA-256 in '{}'", L));
      InTrace = true;
      R.Bytes.reserve(Expected);
      continue;
    }
    if (L == kEnd) {
      if (AccBits >= 8 || (Acc & ((1u << AccBits) - 1)) != 0)
        return fail(LineNo, "the base64 text ends inside a byte");
      if (R.Bytes.size() != Expected)
        return fail(LineNo, fmt::format("{} bytes decoded, the begin line says {}",
                                        R.Bytes.size(), Expected));
      if (hex(sha256(R.Bytes.data(), R.Bytes.size())) != Sum)
        return fail(LineNo, "the decoded bytes do not have the SHA-256 of the begin line");
      return R;
    }
    // A base64 line: full width but the last, which may end in one or two '=' (padding).
    if (SawShort || L.empty() || L.size() > kLineChars || L.size() % 4 != 0)
      return fail(LineNo, fmt::format("not a base64 line of the trace: '{}'", L.substr(0, 80)));
    ++R.Lines;
    size_t Pad = 0;
    while (Pad < 2 && L[L.size() - 1 - Pad] == '=')
      ++Pad;
    SawShort = L.size() < kLineChars || Pad > 0;
    for (char C : L.substr(0, L.size() - Pad)) {
      const int V = base64Value(C);
      if (V < 0)
        return fail(LineNo, fmt::format("not a base64 line of the trace: '{}'", L.substr(0, 80)));
      Acc = (Acc << 6) | unsigned(V);
      AccBits += 6;
      if (AccBits >= 8) {
        AccBits -= 8;
        R.Bytes.push_back(uint8_t(Acc >> AccBits));
        Acc &= (1u << AccBits) - 1;
      }
    }
    if (R.Bytes.size() > Expected)
      return fail(LineNo, fmt::format("more bytes than the begin line's {}", Expected));
  }
  return fail(0, InTrace ? "no 'vmxsim-xentrace: end' line (the console output was cut)"
                         : "no 'vmxsim-xentrace: begin' line (no Xen trace in this output)");
}

int traceImportXenConsoleCommand(const std::string &In, const std::string &OutPath,
                                 std::FILE *Out, std::FILE *Err) {
  const std::optional<std::string> Text = readImportInput(In, Err);
  if (!Text)
    return kImportBadInput;
  const XenConsoleImport R = importXenConsole(*Text, In);
  if (R.Status) {
    fmt::print(Err, "vmxsim: error: {}\n", R.Problem);
    return R.Status;
  }
  if (!writeImportOutput(OutPath, R.Bytes.data(), R.Bytes.size(), Err))
    return kImportBadInput;
  fmt::print(Out, "imported {} bytes of Xen's trace from {} base64 lines (SHA-256 checked)\n",
             R.Bytes.size(), R.Lines);
  return 0;
}

} // namespace vmxsim::trace
