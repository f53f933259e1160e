// `vmxsim trace import --xen-console` (trace/xen_console_import.h): Xen's trace file taken
// back out of the console text the Xen kit's /init wrote it to in base64 (docs/xen-trace.md),
// on texts built here: the bytes come back exactly; a cut, garbled or mislabelled payload
// is refused with one line naming the line at fault.
#include "trace/ftrace_import.h"
#include "trace/xen_console_import.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace vmxsim::trace;

namespace {

std::string hexOf(const std::array<uint8_t, 32> &H) {
  std::string S;
  for (uint8_t B : H)
    S += fmt::format("{:02x}", B);
  return S;
}

/// Base64 (RFC 4648), 76 characters a line, as busybox base64 writes it.
std::string base64Lines(const std::vector<uint8_t> &D) {
  static const char *A = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string S;
  for (size_t I = 0; I < D.size(); I += 3) {
    const uint32_t V = uint32_t(D[I]) << 16 | (I + 1 < D.size() ? uint32_t(D[I + 1]) << 8 : 0) |
                       (I + 2 < D.size() ? D[I + 2] : 0);
    S += A[V >> 18];
    S += A[(V >> 12) & 63];
    S += I + 1 < D.size() ? A[(V >> 6) & 63] : '=';
    S += I + 2 < D.size() ? A[V & 63] : '=';
  }
  std::string Out;
  for (size_t I = 0; I < S.size(); I += 76)
    Out += S.substr(I, 76) + "\r\n";
  return Out;
}

std::vector<uint8_t> payload(size_t N) {
  std::vector<uint8_t> D(N);
  for (size_t I = 0; I < N; ++I)
    D[I] = uint8_t(I * 37 + (I >> 8));
  return D;
}

std::string console(const std::vector<uint8_t> &D) {
  return "(XEN) some console text\r\nvmxsim-xen: xentrace: " + std::to_string(D.size()) +
         " bytes\r\n" +
         fmt::format("vmxsim-xentrace: begin {} {}\r\n", D.size(), hexOf(sha256(D.data(), D.size()))) +
         base64Lines(D) + "vmxsim-xentrace: end\r\nvmxsim-xen: done\r\n(XEN) Entering ACPI S5 state.\r\n";
}

} // namespace

// FIPS 180-2's examples: "abc", the two-block message, and the empty message.
TEST(XenConsoleImport, Sha256OfTheStandardsExamples) {
  const std::string Abc = "abc";
  EXPECT_EQ(hexOf(sha256(reinterpret_cast<const uint8_t *>(Abc.data()), Abc.size())),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string Two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(hexOf(sha256(reinterpret_cast<const uint8_t *>(Two.data()), Two.size())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hexOf(sha256(nullptr, 0)),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

// Every length modulo 3 (no padding, "==", "="), one line and several.
TEST(XenConsoleImport, TheBytesComeBackExactly) {
  for (size_t N : {0u, 1u, 2u, 3u, 56u, 57u, 58u, 1000u, 65616u}) {
    const std::vector<uint8_t> D = payload(N);
    const XenConsoleImport R = importXenConsole(console(D), "serial.txt");
    ASSERT_EQ(R.Status, 0) << N << ": " << R.Problem;
    EXPECT_EQ(R.Bytes, D) << N;
    EXPECT_EQ(R.Lines, (N + 56) / 57) << N;
  }
  // As the Xen kit's console output has them: CR CR LF (dom0's tty, then Xen's console).
  std::string Text = console(payload(100));
  for (size_t At = Text.find("\r\n"); At != std::string::npos; At = Text.find("\r\n", At + 3))
    Text.insert(At, "\r");
  const XenConsoleImport R = importXenConsole(Text, "serial.txt");
  ASSERT_EQ(R.Status, 0) << R.Problem;
  EXPECT_EQ(R.Bytes, payload(100));
}

TEST(XenConsoleImport, ACutGarbledOrMislabelledPayloadIsRefusedWithOneLine) {
  const std::vector<uint8_t> D = payload(200);
  const std::string Good = console(D);
  auto problem = [](const std::string &Text) {
    const XenConsoleImport R = importXenConsole(Text, "serial.txt");
    EXPECT_EQ(R.Status, kImportBadInput);
    EXPECT_TRUE(R.Bytes.empty());
    EXPECT_EQ(R.Problem.find('\n'), std::string::npos) << R.Problem;
    return R.Problem;
  };
  EXPECT_EQ(problem("(XEN) no trace here\r\n"),
            "serial.txt: no 'vmxsim-xentrace: begin' line (no Xen trace in this output)");
  EXPECT_EQ(problem(Good.substr(0, Good.find("vmxsim-xentrace: end"))),
            "serial.txt: no 'vmxsim-xentrace: end' line (the console output was cut)");
  // A console message inside the payload.
  std::string Inside = Good;
  const size_t First = Inside.find("\r\n", Inside.find("vmxsim-xentrace: begin")) + 2;
  Inside.insert(Inside.find("\r\n", First) + 2, "[   16.1] a kernel message\r\n");
  EXPECT_EQ(problem(Inside), "serial.txt:5: not a base64 line of the trace: '[   16.1] a kernel message'");
  // One character changed: the sum no longer matches.
  std::string Flipped = Good;
  Flipped[First + 10] = Flipped[First + 10] == 'A' ? 'B' : 'A';
  EXPECT_EQ(problem(Flipped),
            "serial.txt:8: the decoded bytes do not have the SHA-256 of the begin line");
  // A line dropped: the count no longer matches.
  std::string Dropped = Good;
  Dropped.erase(First, Dropped.find("\r\n", First) + 2 - First);
  EXPECT_EQ(problem(Dropped), "serial.txt:7: 143 bytes decoded, the begin line says 200");
  // A malformed begin line.
  std::string Begin = Good;
  Begin.replace(Begin.find("begin 200"), 9, "begin 2x0");
  EXPECT_EQ(problem(Begin).substr(0, 36), "serial.txt:3: malformed byte count i");
}
