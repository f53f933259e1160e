// The input log (harness/input_log.h; `vmxsim run --record-input/--replay-input`): a run
// fed from standard input through a pipe, recorded and replayed byte for byte; the
// parser against a table of garbage and a mutation fuzz; logs of other machines and runs
// that leave the log; a replay restored from a snapshot.
#include "harness/input_log.h"
#include "harness/testing/multiboot_images.h"
#include "tests/support/files.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sys/wait.h>
#include <unistd.h>

using namespace vmxsim;
using vmxsim::test::readFile;

namespace {

struct CmdResult {
  int Status;
  std::string Err;
};

std::string tempPath(const std::string &Name) {
  return vmxsim::test::tempPath("vmxsim_input_log_test", Name);
}
void writeFile(const std::string &Path, const std::string &S) {
  std::ofstream(Path, std::ios::binary) << S;
}
void writeFile(const std::string &Path, const std::vector<uint8_t> &B) {
  std::ofstream(Path, std::ios::binary).write(reinterpret_cast<const char *>(B.data()),
                                              std::streamsize(B.size()));
}

/// Runs "Stdin | vmxsim Args" (Stdin empty: </dev/null).
CmdResult runCmd(const std::string &Args, const std::string &Stdin = {}) {
  const std::string Err = tempPath("err");
  std::string Cmd = std::string(VMXSIM_BINARY_DIR) + "/vmxsim " + Args + " 2>" + Err;
  Cmd = Stdin.empty() ? Cmd + " </dev/null" : "printf '" + Stdin + "' | " + Cmd;
  const int St = std::system(Cmd.c_str());
  CmdResult R{WIFEXITED(St) ? WEXITSTATUS(St) : -1, readFile(Err)};
  std::remove(Err.c_str());
  return R;
}

/// The echo guest of cli_test.cpp: raises RTS, echoes every byte received on COM1 until
/// a newline, then exits with the newline (status 21).
std::vector<uint8_t> echoImage() {
  return vmxsim::testing::aoutImage({0x66, 0xba, 0xfc, 0x03, 0xb0, 0x02, 0xee, 0x66, 0xba, 0xfd,
                             0x03, 0xec, 0xa8, 0x01, 0x74, 0xf7, 0x66, 0xba, 0xf8, 0x03,
                             0xec, 0xee, 0x3c, 0x0a, 0x75, 0xed, 0xe6, 0xf4});
}

std::string loggedBytes(const InputLog &L) {
  std::string S;
  for (const InputEvent &E : L.Events)
    S += E.K == InputEvent::Kind::End ? std::string("<end>") : std::string(1, char(E.Value));
  return S;
}

class InputLogFiles : public ::testing::Test {
protected:
  void SetUp() override { writeFile(Image, echoImage()); }
  void TearDown() override {
    for (const std::string &F : {Image, Log, SerialA, SerialB})
      std::remove(F.c_str());
  }
  const std::string Image = tempPath("echo.elf"), Log = tempPath("in.log"),
                    SerialA = tempPath("serial-a.txt"), SerialB = tempPath("serial-b.txt");
};

} // namespace

TEST_F(InputLogFiles, PipedStandardInputIsRecordedAndReplayedByteForByte) {
  const std::string TraceA = tempPath("insns-a.txt"), TraceB = tempPath("insns-b.txt");
  const CmdResult A = runCmd("run --serial " + SerialA + " --trace-insns " + TraceA +
                                 " --serial-in - --record-input " + Log + " " + Image,
                             "hello\\nx");
  ASSERT_EQ(A.Status, (0x0a << 1) | 1) << A.Err;
  EXPECT_EQ(readFile(SerialA), "hello\n");
  InputLog L;
  ASSERT_FALSE(InputLog::read(Log, L)) << InputLog::read(Log, L).str();
  EXPECT_EQ(L.Ports, 1u);
  EXPECT_EQ(L.NumCpus, 1u);
  // The guest stops reading at the newline: 'x' was never consumed, so it is not logged.
  EXPECT_EQ(loggedBytes(L), "hello\n");
  for (size_t I = 1; I < L.Events.size(); ++I) {
    EXPECT_GT(L.Events[I].Poll, L.Events[I - 1].Poll);
    // The guest leaves the UART's reset format (5N1, divisor 12: 9600 baud): bytes come
    // at least one character time (729,167 cycles) apart.
    EXPECT_GE(L.Events[I].Cycle - L.Events[I - 1].Cycle, 729167u);
  }
  // No standard input at all: the log alone makes the same run (serial output, and the
  // summary line's instruction and cycle counts).
  const CmdResult B = runCmd("run --serial " + SerialB + " --trace-insns " + TraceB +
                             " --replay-input " + Log + " " + Image);
  EXPECT_EQ(B.Status, A.Status) << B.Err;
  EXPECT_EQ(B.Err, A.Err);
  EXPECT_EQ(readFile(SerialB), "hello\n");
  // Every instruction, with the registers it changed: the same, byte for byte.
  const std::string InsnsA = readFile(TraceA);
  EXPECT_GT(InsnsA.size(), 1000u);
  EXPECT_TRUE(InsnsA == readFile(TraceB));
  std::remove(TraceA.c_str());
  std::remove(TraceB.c_str());
  // Again: the replay is itself deterministic.
  const CmdResult C = runCmd("run --serial " + SerialB + " --replay-input " + Log + " " + Image);
  EXPECT_EQ(C.Err, A.Err);
}

TEST_F(InputLogFiles, TheEndOfStandardInputIsLoggedAndReplayed) {
  // No newline comes: the guest polls on after the input ended, up to the limit.
  const CmdResult A = runCmd("run --max-insns 3000000 --serial " + SerialA +
                                 " --serial-in - --record-input " + Log + " " + Image,
                             "ab");
  ASSERT_EQ(A.Status, 4) << A.Err;
  InputLog L;
  ASSERT_FALSE(InputLog::read(Log, L));
  EXPECT_EQ(loggedBytes(L), "ab<end>");
  const CmdResult B = runCmd("run --max-insns 3000000 --serial " + SerialB +
                             " --replay-input " + Log + " " + Image);
  EXPECT_EQ(B.Status, 4);
  EXPECT_EQ(B.Err, A.Err);
  EXPECT_EQ(readFile(SerialB), "ab");
}

TEST_F(InputLogFiles, ALogOfAnotherRunOrMachineIsOneLineAndStatus20) {
  ASSERT_EQ(runCmd("run -q --serial none --serial-in - --record-input " + Log + " " + Image,
                   "hi\\n")
                .Status,
            21);
  InputLog L;
  ASSERT_FALSE(InputLog::read(Log, L));
  ASSERT_EQ(L.Events.size(), 3u);
  // Another image: the machine line's CRC does not match.
  InputLog Other = L;
  Other.ImageCrc ^= 1;
  writeFile(Log, Other.text());
  CmdResult R = runCmd("run -q --serial none --replay-input " + Log + " " + Image);
  EXPECT_EQ(R.Status, 20);
  EXPECT_EQ(R.Err.find("vmxsim: error: " + Log + ": input log of another machine: image CRC-32C"),
            0u)
      << R.Err;
  EXPECT_EQ(std::count(R.Err.begin(), R.Err.end(), '\n'), 1);
  Other = L;
  Other.NumCpus = 2;
  writeFile(Log, Other.text());
  R = runCmd("run -q --serial none --replay-input " + Log + " " + Image);
  EXPECT_EQ(R.Status, 20);
  EXPECT_EQ(R.Err, "vmxsim: error: " + Log + ": input log of another machine: 2 CPUs, this "
                   "machine has 1\n");
  // A byte logged one cycle off: the run is not the recorded one; the input ends there,
  // the guest never sees its newline and runs to the limit; status 20, not 4.
  Other = L;
  Other.Events[1].Cycle += 1;
  writeFile(Log, Other.text());
  R = runCmd("run -q --max-insns 2000000 --serial " + SerialB + " --replay-input " + Log + " " +
             Image);
  EXPECT_EQ(R.Status, 20);
  EXPECT_EQ(readFile(SerialB), "h");
  EXPECT_EQ(R.Err, "vmxsim: instruction limit reached at RIP=0x100027 (CPU 0)\n"
                   "vmxsim: error: input log: COM1's poll " +
                       std::to_string(L.Events[1].Poll) + " came at cycle " +
                       std::to_string(L.Events[1].Cycle) + ", the log has '" +
                       formatInputEvent(Other.Events[1]) +
                       "': this run is not the recorded one; its input ended there\n");
  // Garbage: status 20, one line.
  writeFile(Log, "hello\n");
  R = runCmd("run -q --replay-input " + Log + " " + Image);
  EXPECT_EQ(R.Status, 20);
  EXPECT_EQ(R.Err, "vmxsim: error: " + Log +
                       ": not a vmxsim input log (the first line is not 'vmxsim-input-log 1')\n");
  R = runCmd("run -q --replay-input /nonexistent/vmxsim/log " + Image);
  EXPECT_EQ(R.Status, 20);
  EXPECT_EQ(R.Err, "vmxsim: error: /nonexistent/vmxsim/log: cannot open: No such file or "
                   "directory\n");
  // The command line.
  R = runCmd("run -q --record-input " + Log + " --replay-input " + Log + " " + Image);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: --record-input and --replay-input do not combine\n");
  // gdb's writes are recorded (gdb_stub_test.cpp); a replay is run without gdb.
  R = runCmd("run -q --gdb :0 --replay-input " + Log + " " + Image);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: --replay-input does not combine with --gdb: a replay is "
                   "the recorded run, which gdb's writes would leave (record the gdb session "
                   "with --record-input, then replay it without --gdb)\n");
}

TEST_F(InputLogFiles, AReplayContinuesFromASnapshotOfIt) {
  ASSERT_EQ(runCmd("run -q --serial none --serial-in - --record-input " + Log + " " + Image,
                   "abcdef\\n")
                .Status,
            21);
  const std::string Dir = tempPath("snaps");
  std::filesystem::create_directories(Dir);
  // The whole replay's instruction count (its summary line), and a snapshot half way.
  const CmdResult Count = runCmd("run --serial none --replay-input " + Log + " " + Image);
  const size_t Semi = Count.Err.find("; ");
  ASSERT_NE(Semi, std::string::npos) << Count.Err;
  const uint64_t Mid = std::stoull(Count.Err.substr(Semi + 2)) / 2;
  const CmdResult Whole = runCmd("run -q --serial " + SerialA + " --replay-input " + Log +
                                 " --snapshot-at " + std::to_string(Mid) + " --snapshot-dir " +
                                 Dir + " " + Image);
  ASSERT_EQ(Whole.Status, 21) << Whole.Err;
  ASSERT_EQ(readFile(SerialA), "abcdef\n");
  const std::string Snap = Dir + "/vmxsim-" + std::to_string(Mid) + ".snap";
  const CmdResult Rest = runCmd("run -q --serial " + SerialB + " --replay-input " + Log +
                                " --restore " + Snap + " " + Image);
  EXPECT_EQ(Rest.Status, 21) << Rest.Err;
  // What the restored run wrote is what the whole run wrote after the snapshot: some of
  // the bytes came before it, the others from the log after the restore.
  const std::string After = readFile(SerialB);
  ASSERT_LT(After.size(), 7u);
  ASSERT_GT(After.size(), 0u);
  EXPECT_EQ(After, std::string("abcdef\n").substr(7 - After.size()));
  // Without the log, the snapshot is refused (it would run on without its input).
  const CmdResult NoLog =
      runCmd("run -q --serial none --restore " + Snap + " " + Image);
  EXPECT_EQ(NoLog.Status, 16);
  EXPECT_EQ(NoLog.Err, "vmxsim: error: " + Snap +
                           ": snapshot of a run that replayed an input log: restore it with "
                           "--replay-input and that log\n");
  std::filesystem::remove_all(Dir);
}

// Every line of the format broken in turn: one line each, never a crash.
TEST(InputLogParse, GarbageIsOneLineNamingWhatIsWrong) {
  const std::string Head = "vmxsim-input-log 1\nmachine image-crc=0000abcd cpus=1\ninput com1\n";
  struct Case {
    std::string Text, Error;
  } Cases[] = {
      {"", "not a vmxsim input log (the file is empty)"},
      {"vmxsim-input-log 1", "truncated input log (the last line has no newline)"},
      {"VMXSNAP\n", "not a vmxsim input log (the first line is not 'vmxsim-input-log 1')"},
      {"vmxsim-input-log 2\n", "input log version '2' is not this vmxsim's (1)"},
      {"vmxsim-input-log 1\n", "truncated input log (no end line)"},
      {"vmxsim-input-log 1\nend events=0\n",
       "line 2: expected the machine line as line 2: 'end events=0'"},
      {"vmxsim-input-log 1\nmachine image-crc=abcd cpus=1\n",
       "line 2: expected 'machine image-crc=XXXXXXXX cpus=N' (N 1..64) as line 2: 'machine "
       "image-crc=abcd cpus=1'"},
      {"vmxsim-input-log 1\nmachine image-crc=0000abcd cpus=65\n",
       "line 2: expected 'machine image-crc=XXXXXXXX cpus=N' (N 1..64) as line 2: 'machine "
       "image-crc=0000abcd cpus=65'"},
      {Head + "input com3\n",
       "line 4: expected 'input com1' or 'input com2' before the events: 'input com3'"},
      {Head + "input com1\n", "line 4: the port is named twice: 'input com1'"},
      {Head + "serial com2 poll=1 cycle=5 byte=0x41\n",
       "line 4: an event of a port the log has no 'input' line for: 'serial com2 poll=1 "
       "cycle=5 byte=0x41'"},
      {Head + "serial com1 poll=1 cycle=5 byte=0x141\n",
       "line 4: expected 'byte=0xBB' (a byte) or 'end': 'serial com1 poll=1 cycle=5 "
       "byte=0x141'"},
      {Head + "serial com1 poll=-1 cycle=5 byte=0x41\n",
       "line 4: expected 'serial comN poll=P cycle=C byte=0xBB' or '... end': 'serial com1 "
       "poll=-1 cycle=5 byte=0x41'"},
      {Head + "serial com1 poll=99999999999999999999 cycle=5 end\n",
       "line 4: expected 'serial comN poll=P cycle=C byte=0xBB' or '... end': 'serial com1 "
       "poll=99999999999999999999 cycle=5 end'"},
      {Head + "serial com1 poll=3 cycle=5 byte=0x41\nserial com1 poll=3 cycle=6 byte=0x42\n",
       "line 5: poll numbers of a port must increase: 'serial com1 poll=3 cycle=6 byte=0x42'"},
      {Head + "serial com1 poll=3 cycle=5 end\nserial com1 poll=4 cycle=6 byte=0x42\n",
       "line 5: an event after the port's input ended: 'serial com1 poll=4 cycle=6 "
       "byte=0x42'"},
      {Head + "serial com1 poll=3 cycle=5 byte=0x41\ninput com2\n",
       "line 5: expected 'input com1' or 'input com2' before the events: 'input com2'"},
      {Head + "end events=1\n", "line 4: the end line counts 1 events, the log holds 0: 'end "
                                "events=1'"},
      {Head + "end events=0\nend events=0\n", "line 5: a line after the end line: 'end "
                                              "events=0'"},
      {Head + "\n", "line 4: an empty line: ''"},
      {Head + "keyboard 0x1c\n", "line 4: not a line of an input log: 'keyboard 0x1c'"},
      {Head + "serial com1 poll=3 cycle=5 byte=0x41\n",
       "truncated input log (no end line)"},
      {Head + std::string("\x01\xff\n", 3),
       "line 4: not a line of an input log: '?" "?'"},
      // gdb's writes.
      {Head + "gdb reg cpu=0 name=rax bytes=01\n",
       "line 4: a gdb write before any 'gdb stop' line: 'gdb reg cpu=0 name=rax bytes=01'"},
      {Head + "gdb stop insns=5 cycles=1,2\n",
       "line 4: 2 clocks for 1 CPUs: 'gdb stop insns=5 cycles=1,2'"},
      {Head + "gdb stop insns=5 cycles=1,\n",
       "line 4: expected 'gdb stop insns=N cycles=C0,C1,...': 'gdb stop insns=5 cycles=1,'"},
      {Head + "gdb stop insns=5 cycles=9\ngdb stop insns=6 cycles=8\n",
       "line 5: gdb stops must come in the order of the run, each after the last: 'gdb stop "
       "insns=6 cycles=8'"},
      {Head + "gdb stop insns=5 cycles=9\ngdb stop insns=5 cycles=9\n",
       "line 5: gdb stops must come in the order of the run, each after the last: 'gdb stop "
       "insns=5 cycles=9'"},
      {Head + "gdb stop insns=5 cycles=9\ngdb reg cpu=1 name=rax bytes=01\n",
       "line 5: no CPU 1 (the machine has 1): 'gdb reg cpu=1 name=rax bytes=01'"},
      {Head + "gdb stop insns=5 cycles=9\ngdb mem cpu=0 la=0x1000 bytes=0\n",
       "line 5: bytes= must be 1 to 16384 bytes in hex: 'gdb mem cpu=0 la=0x1000 bytes=0'"},
      {Head + "gdb stop insns=5 cycles=9\ngdb mem cpu=0 la=0xffffffffffffffff bytes=0102\n",
       "line 5: the memory range wraps around: 'gdb mem cpu=0 la=0xffffffffffffffff "
       "bytes=0102'"},
      {Head + "gdb stop insns=5 cycles=9\ngdb poke cpu=0\n",
       "line 5: expected 'gdb reg cpu=N name=REG bytes=HEX', 'gdb regs cpu=N bytes=HEX' or "
       "'gdb mem cpu=N la=ADDR bytes=HEX': 'gdb poke cpu=0'"},
      {Head + "gdb stop insns=5 cycles=9\ngdb regs cpu=0 bytes=00\nend events=1\n",
       "line 6: the end line counts 1 events, the log holds 2: 'end events=1'"},
  };
  for (const Case &C : Cases) {
    InputLog L;
    const Error E = InputLog::parse(C.Text, L);
    EXPECT_EQ(E.Code, ErrorCode::BadInputLog) << C.Text;
    EXPECT_EQ(E.Message, C.Error) << C.Text;
    EXPECT_EQ(E.Message.find('\n'), std::string::npos);
  }
}

TEST(InputLogParse, TextRoundTripsAndMutationsNeverCrash) {
  InputLog L;
  L.ImageCrc = 0x1234abcd;
  L.NumCpus = 4;
  L.Ports = 2;
  L.Events = {{2, 0, 86806, InputEvent::Kind::Byte, 0x61},
              {2, 7, 999999999999, InputEvent::Kind::Byte, 0xff},
              {2, 8, 1000086805, InputEvent::Kind::End, 0}};
  GdbStopPoint P;
  P.Retired = 5000;
  P.Cycles = {10, 20, 30, 40};
  P.Writes = {{GdbWrite::Kind::Register, 3, "rdi", 0, std::string("\x5a\0\0\0\0\0\0\0", 8)},
              {GdbWrite::Kind::Memory, 1, "", 0x10a2c0, "X"},
              {GdbWrite::Kind::AllRegisters, 0, "", 0, std::string(8, '\xff')}};
  L.Gdb = {P};
  const std::string Text = L.text();
  EXPECT_EQ(Text, "vmxsim-input-log 1\n"
                  "machine image-crc=1234abcd cpus=4\n"
                  "input com2\n"
                  "serial com2 poll=0 cycle=86806 byte=0x61\n"
                  "serial com2 poll=7 cycle=999999999999 byte=0xff\n"
                  "serial com2 poll=8 cycle=1000086805 end\n"
                  "gdb stop insns=5000 cycles=10,20,30,40\n"
                  "gdb reg cpu=3 name=rdi bytes=5a00000000000000\n"
                  "gdb mem cpu=1 la=0x10a2c0 bytes=58\n"
                  "gdb regs cpu=0 bytes=ffffffffffffffff\n"
                  "end events=7\n");
  InputLog Back;
  ASSERT_FALSE(InputLog::parse(Text, Back));
  EXPECT_EQ(Back.ImageCrc, L.ImageCrc);
  EXPECT_EQ(Back.NumCpus, L.NumCpus);
  EXPECT_EQ(Back.Ports, L.Ports);
  EXPECT_EQ(Back.Events, L.Events);
  EXPECT_EQ(Back.Gdb, L.Gdb);
  EXPECT_EQ(Back.Gdb.at(0).Writes.at(1).Line, 9u);
  // Deterministic mutations: byte flips, cuts, insertions. Each parses or is one line.
  std::mt19937_64 Rng(18);
  unsigned Good = 0, Bad = 0;
  for (int I = 0; I < 20000; ++I) {
    std::string M = Text;
    const unsigned Edits = 1 + unsigned(Rng() % 4);
    for (unsigned E = 0; E < Edits && !M.empty(); ++E) {
      const size_t At = Rng() % M.size();
      switch (Rng() % 3) {
      case 0:
        M[At] = char(Rng());
        break;
      case 1:
        M.erase(At, 1 + Rng() % 8);
        break;
      default:
        M.insert(At, 1, "0123456789 =\nxabcdefz"[Rng() % 21]);
      }
    }
    InputLog Out;
    const Error Err = InputLog::parse(M, Out);
    if (Err) {
      ++Bad;
      EXPECT_EQ(Err.Code, ErrorCode::BadInputLog);
      EXPECT_EQ(Err.Message.find('\n'), std::string::npos) << Err.Message;
    } else {
      ++Good;
      EXPECT_EQ(InputLog::parse(Out.text(), Out).Code, ErrorCode::None);
    }
  }
  EXPECT_GT(Bad, 0u);
  EXPECT_EQ(Good + Bad, 20000u);
}
