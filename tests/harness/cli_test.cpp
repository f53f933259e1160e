// The vmxsim command: exit statuses and one-line errors.
#include "harness/testing/linux_images.h"
#include "harness/testing/multiboot_images.h"
#include "tests/support/files.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace vmxsim::testing;

using vmxsim::test::readFile;

namespace {

struct CmdResult {
  int Status;
  std::string Out, Err;
};

std::string tempPath(const std::string &Name) {
  return (std::filesystem::temp_directory_path() /
          ("vmxsim_cli_test_" + std::to_string(::getpid()) + "_" + Name))
      .string();
}
void writeFile(const std::string &Path, const std::vector<uint8_t> &B) {
  std::ofstream(Path, std::ios::binary).write(reinterpret_cast<const char *>(B.data()),
                                              std::streamsize(B.size()));
}

CmdResult runVmxsim(const std::string &Args) {
  const std::string Out = tempPath("out"), Err = tempPath("err");
  std::string Cmd = std::string(VMXSIM_BINARY_DIR) + "/vmxsim " + Args + " >" + Out + " 2>" + Err +
                    " </dev/null";
  int St = std::system(Cmd.c_str());
  CmdResult R{WIFEXITED(St) ? WEXITSTATUS(St) : -1, readFile(Out), readFile(Err)};
  std::remove(Out.c_str());
  std::remove(Err.c_str());
  return R;
}

size_t lines(const std::string &S) { return size_t(std::count(S.begin(), S.end(), '\n')); }

} // namespace

TEST(CommandLine, UnknownOptionIsOneLineAndStatus2) {
  CmdResult R = runVmxsim("run --bogus x.elf");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(lines(R.Err), 1u);
  EXPECT_EQ(R.Err.rfind("vmxsim: error: ", 0), 0u) << R.Err;
}

TEST(CommandLine, SmpOutOfRangeIsStatus2) {
  CmdResult R = runVmxsim("run --smp 65 x.elf");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(lines(R.Err), 1u) << R.Err;
}

TEST(CommandLine, CpusIsTheSameOptionAsSmp) {
  // Issue 5 names it --cpus; QEMU's name --smp stays for ported run scripts.
  CmdResult R = runVmxsim("run --cpus 0 x.elf");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(lines(R.Err), 1u) << R.Err;
  EXPECT_EQ(runVmxsim("run --cpus 65 x.elf").Status, 2);
}

TEST(CommandLine, BadMemorySizeIsStatus2) {
  CmdResult R = runVmxsim("run -m 12Q x.elf");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: -m: invalid size '12Q'\n");
  R = runVmxsim("run -m 128G x.elf");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: memory size 137438953472 bytes is outside 2 MiB..64 GiB\n");
}

TEST(CommandLine, MissingSubcommandOrImageIsStatus2) {
  EXPECT_EQ(runVmxsim("").Status, 2);
  CmdResult R = runVmxsim("run");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: run: no image (give IMAGE or --kernel FILE)\n");
}

TEST(CommandLine, EntryModeNeedsFlat) {
  CmdResult R = runVmxsim("run --entry-mode long x.bin");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(lines(R.Err), 1u) << R.Err;
}

TEST(CommandLine, MissingImageIsOneLineAndStatus2) {
  CmdResult R = runVmxsim("run /nonexistent/vmxsim/k.elf");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: /nonexistent/vmxsim/k.elf: cannot open: No such file or "
                   "directory\n");
}

TEST(CommandLine, BadImageIsOneLineAndStatus2) {
  const std::string P = tempPath("bad.bin");
  writeFile(P, std::vector<uint8_t>(64, 0x90));
  CmdResult R = runVmxsim("run --kernel " + P);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: " + P +
                       ": not an ELF file and no Multiboot header in the first 8192 bytes\n");
  std::remove(P.c_str());
}

TEST(CommandLine, LinuxKernelWithInitrdAndAppendRuns) {
  const std::string K = tempPath("bzImage"), I = tempPath("initrd"), D = tempPath("debugcon");
  writeFile(K, bzImage(echoCmdlineExitWithInitrd()));
  writeFile(I, {'A', 'B', 'C', 'D'});
  CmdResult R = runVmxsim("run --kernel " + K + " --initrd " + I +
                          " --append 'console=ttyS0 x' -q --debugcon " + D);
  // Exit value "ABCD" = 0x44434241: status ((V << 1) | 1) & 0xff = 0x83.
  EXPECT_EQ(R.Status, 0x83) << R.Err;
  EXPECT_EQ(readFile(D), "console=ttyS0 x");
  std::remove(K.c_str());
  std::remove(I.c_str());
  std::remove(D.c_str());
}

TEST(CommandLine, BadLinuxKernelOrInitrdIsOneLineAndStatus2) {
  const std::string K = tempPath("trunc-bzImage");
  std::vector<uint8_t> Image = bzImage(std::vector<uint8_t>(64, 0x90));
  Image.resize(Image.size() - 32);
  writeFile(K, Image);
  CmdResult R = runVmxsim("run --kernel " + K);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: " + K +
                       ": truncated bzImage: syssize says 0x40 bytes of protected-mode kernel, "
                       "the file has 0x20 after the setup code\n");
  writeFile(K, bzImage({0xf4}));
  R = runVmxsim("run --kernel " + K + " --initrd /nonexistent/vmxsim/initrd");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: /nonexistent/vmxsim/initrd: cannot open: No such file or "
                   "directory\n");
  std::remove(K.c_str());
}

TEST(CommandLine, GuestExitStatusAndSummary) {
  const std::string P = tempPath("ok.elf");
  writeFile(P, aoutImage({0xb8, 0x21, 0, 0, 0, 0xe7, 0xf4}));
  CmdResult R = runVmxsim("run " + P + " -m 64M --smp 2");
  EXPECT_EQ(R.Status, 0x43);
  // The cycle count comes from the cost model (cpu/cost_model.def).
  EXPECT_EQ(R.Err.rfind("vmxsim: guest exit 0x21 (status 67); 2 instructions, ", 0), 0u) << R.Err;
  EXPECT_EQ(lines(R.Err), 1u);
  R = runVmxsim("run -q " + P);
  EXPECT_EQ(R.Status, 0x43);
  EXPECT_EQ(R.Err, "");
  std::remove(P.c_str());
}

TEST(CommandLine, SerialOutputGoesToFile) {
  const std::string P = tempPath("uart.elf"), S = tempPath("serial.txt");
  // mov dx, 0x3f8; mov al, 'A'; out dx, al; mov al, '\n'; out dx, al; out 0xf4, al
  writeFile(P, aoutImage({0x66, 0xba, 0xf8, 0x03, 0xb0, 'A', 0xee, 0xb0, '\n', 0xee, 0xe6,
                          0xf4}));
  CmdResult R = runVmxsim("run -q --serial file:" + S + " " + P);
  EXPECT_EQ(R.Status, ((0x0a << 1) | 1));
  EXPECT_EQ(readFile(S), "A\n");
  EXPECT_EQ(R.Out, "");
  std::remove(P.c_str());
  std::remove(S.c_str());
}

TEST(CommandLine, InstructionLimitAndHaltStatuses) {
  const std::string P = tempPath("spin.bin");
  writeFile(P, {0xeb, 0xfe});
  CmdResult R = runVmxsim("run -q --flat 0x100000 --max-insns 50 " + P);
  EXPECT_EQ(R.Status, 4);
  EXPECT_EQ(R.Err, "vmxsim: instruction limit reached at RIP=0x100000 (CPU 0)\n");
  writeFile(P, {0xf4});
  R = runVmxsim("run -q --flat 0x7c00 --entry-mode real " + P);
  EXPECT_EQ(R.Status, 6);
  EXPECT_EQ(lines(R.Err), 1u) << R.Err;
  std::remove(P.c_str());
}

TEST(CommandLine, VersionAndHelpSucceed) {
  CmdResult R = runVmxsim("--version");
  EXPECT_EQ(R.Status, 0);
  EXPECT_EQ(R.Out, "vmxsim 0.1\n");
  EXPECT_EQ(runVmxsim("--help").Status, 0);
  EXPECT_EQ(runVmxsim("run --help").Status, 0);
}

// `vmxsim run --xentrace` and `vmxsim trace check`: agreement is status 0 with the match
// line; a truncated hypervisor trace is status 2 with the offset of the problem; a missing
// file is status 2 in one line.
TEST(CommandLine, TraceCheckStatuses) {
  const std::string Image = std::string(VMXSIM_IMAGE_DIR) + "/vmx_e2e.elf";
  const std::string Hv = tempPath("hv.xt"), Gt = tempPath("gt.xt"), Cut = tempPath("cut.xt");
  CmdResult Run = runVmxsim("run -q --serial none --xentrace " + Hv +
                            " --trace-ground-truth " + Gt + " " + Image);
  ASSERT_EQ(Run.Status, 1) << Run.Err; // the image's PASS exit
  CmdResult Ok = runVmxsim("trace check " + Hv + " " + Gt);
  EXPECT_EQ(Ok.Status, 0) << Ok.Out;
  EXPECT_EQ(Ok.Out.rfind("match: 40 exits and 40 entries on 1 CPU(s)", 0), 0u) << Ok.Out;
  const std::string Bytes = readFile(Hv);
  writeFile(Cut, std::vector<uint8_t>(Bytes.begin(), Bytes.begin() + 100));
  CmdResult Bad = runVmxsim("trace check " + Cut + " " + Gt);
  EXPECT_EQ(Bad.Status, 2);
  // A corrupt file is an error on stderr, not a "mismatch" (issue 11).
  EXPECT_EQ(Bad.Out.find("mismatch"), std::string::npos) << Bad.Out;
  EXPECT_EQ(Bad.Err.rfind("vmxsim: error: hypervisor trace: offset 0x5c: ", 0), 0u) << Bad.Err;
  CmdResult Missing = runVmxsim("trace check " + tempPath("none.xt") + " " + Gt);
  EXPECT_EQ(Missing.Status, 2);
  EXPECT_EQ(lines(Missing.Err), 1u) << Missing.Err;
  for (const std::string &P : {Hv, Gt, Cut})
    std::remove(P.c_str());
}

TEST(CommandLine, BadRtcBaseIsOneLineAndStatus2) {
  for (const char *Bad : {"2026-02-30T00:00:00", "yesterday", "-5", "2026-01-01T00:00",
                          "'2026-01-01\\n00:00:00'", "253402300800"}) {
    CmdResult R = runVmxsim(std::string("run --rtc-base ") + Bad + " x.elf");
    EXPECT_EQ(R.Status, 2) << Bad;
    EXPECT_EQ(lines(R.Err), 1u) << R.Err;
    EXPECT_EQ(R.Err.rfind("vmxsim: error: --rtc-base: invalid value ", 0), 0u) << R.Err;
  }
  // A good value gets past the option: the missing image is the error.
  CmdResult R = runVmxsim("run --rtc-base 2030-06-15T12:00:00 /nonexistent/x.elf");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err.find("--rtc-base"), std::string::npos) << R.Err;
}

TEST(CommandLine, SerialInputIsEchoedTheSameWayEveryRun) {
  const std::string P = tempPath("echo.elf"), In = tempPath("serial-in.txt"),
                    S = tempPath("echo-serial.txt");
  // mov dx, 0x3fc; mov al, 2; out dx, al (RTS: the terminal may send)
  // poll: mov dx, 0x3fd; in al, dx; test al, 1; jz poll
  //       mov dx, 0x3f8; in al, dx; out dx, al; cmp al, '\n'; jne poll
  // out 0xf4, al
  writeFile(P, aoutImage({0x66, 0xba, 0xfc, 0x03, 0xb0, 0x02, 0xee, 0x66, 0xba, 0xfd,
                          0x03, 0xec, 0xa8, 0x01, 0x74, 0xf7, 0x66, 0xba, 0xf8, 0x03,
                          0xec, 0xee, 0x3c, 0x0a, 0x75, 0xed, 0xe6, 0xf4}));
  writeFile(In, {'h', 'e', 'l', 'l', 'o', '\n', 'x'});
  CmdResult A = runVmxsim("run --serial " + S + " --serial-in " + In + " " + P);
  EXPECT_EQ(A.Status, ((0x0a << 1) | 1)) << A.Err;
  EXPECT_EQ(readFile(S), "hello\n");
  CmdResult B = runVmxsim("run --serial " + S + " --serial-in " + In + " " + P);
  EXPECT_EQ(B.Status, A.Status);
  EXPECT_EQ(B.Err, A.Err); // the same instruction and cycle counts
  EXPECT_EQ(readFile(S), "hello\n");
  for (const std::string &F : {P, In, S})
    std::remove(F.c_str());
}

TEST(CommandLine, Serial2OutputGoesToItsOwnFile) {
  const std::string P = tempPath("com2.elf"), S = tempPath("serial1.txt"),
                    S2 = tempPath("serial2.txt");
  // mov dx, 0x2f8; mov al, 'B'; out dx, al; mov al, '\n'; out dx, al; out 0xf4, al
  writeFile(P, aoutImage({0x66, 0xba, 0xf8, 0x02, 0xb0, 'B', 0xee, 0xb0, '\n', 0xee, 0xe6,
                          0xf4}));
  CmdResult R = runVmxsim("run -q --serial " + S + " --serial2 file:" + S2 + " " + P);
  EXPECT_EQ(R.Status, ((0x0a << 1) | 1));
  EXPECT_EQ(readFile(S), "");
  EXPECT_EQ(readFile(S2), "B\n");
  // By default COM2's output goes nowhere.
  R = runVmxsim("run -q " + P);
  EXPECT_EQ(R.Status, ((0x0a << 1) | 1));
  EXPECT_EQ(R.Out, "");
  for (const std::string &F : {P, S, S2})
    std::remove(F.c_str());
}

TEST(CommandLine, BadSerialInputIsOneLineAndStatus2) {
  const std::string P = tempPath("ok-com.elf");
  writeFile(P, aoutImage({0xb0, 0x00, 0xe6, 0xf4})); // mov al, 0; out 0xf4, al
  CmdResult R = runVmxsim("run --serial-in /nonexistent/vmxsim/in " + P);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: /nonexistent/vmxsim/in: cannot open: No such file or "
                   "directory\n");
  R = runVmxsim("run --serial2-in / " + P);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: /: is a directory, not a regular file\n");
  R = runVmxsim("run --serial-in - --serial2-in - " + P);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err,
            "vmxsim: error: only one serial port can take its input from standard input\n");
  // Standard input at its end (</dev/null): nothing is received, the guest runs as usual.
  R = runVmxsim("run -q --serial-in - " + P);
  EXPECT_EQ(R.Status, 1) << R.Err;
  std::remove(P.c_str());
}

// RDRAND's values come from --seed (cpu/exec_random.cpp): the same seed gives the same
// value every run, another seed another value; a seed that is not a whole number is a
// command-line error.
TEST(CommandLine, SeedChoosesTheRdrandStream) {
  const std::string P = tempPath("rdrand.elf"), D = tempPath("rdrand-debugcon.bin");
  // rdrand eax; then four times: out 0xe9, al; shr eax, 8; and finally out 0xf4, al
  std::vector<uint8_t> Code = {0x0f, 0xc7, 0xf0};
  for (int I = 0; I < 4; ++I)
    Code.insert(Code.end(), {0xe6, 0xe9, 0xc1, 0xe8, 0x08});
  Code.insert(Code.end(), {0xe6, 0xf4});
  writeFile(P, aoutImage(Code));
  auto value = [&](const std::string &Seed) {
    CmdResult R = runVmxsim("run -q " + Seed + " --debugcon " + D + " " + P);
    EXPECT_EQ(R.Status, 1) << R.Err; // EAX is 0 after four shifts: exit code 0
    std::string B = readFile(D);
    EXPECT_EQ(B.size(), 4u);
    uint32_t V = 0;
    for (size_t I = 0; I < B.size() && I < 4; ++I)
      V |= uint32_t(uint8_t(B[I])) << (8 * I);
    return V;
  };
  const uint32_t Default = value(""), Five = value("--seed 5");
  EXPECT_EQ(value("--seed 5"), Five);
  EXPECT_EQ(value("--seed 0x766d7873696d0001"), Default);
  EXPECT_EQ(Default, 0x85b7c7a2u);
  EXPECT_EQ(Five, 0xa389c35au);
  CmdResult Bad = runVmxsim("run --seed twelve " + P);
  EXPECT_EQ(Bad.Status, 2);
  EXPECT_EQ(lines(Bad.Err), 1u) << Bad.Err;
  for (const std::string &F : {P, D})
    std::remove(F.c_str());
}

// `trace import --xen-console` (docs/xen-trace.md): a console output without the Xen
// kit's payload, or with it cut short, is one line and status 2, and no file is written;
// neither --ftrace nor --xen-console is the same.
TEST(CommandLine, XenConsoleImportOfAMissingOrCutPayloadIsOneLineAndStatus2) {
  const std::string In = tempPath("console.txt"), Out = tempPath("xen.xt");
  auto text = [&](const std::string &T) {
    writeFile(In, std::vector<uint8_t>(T.begin(), T.end()));
  };
  text("(XEN) Entering ACPI S5 state.\r\n");
  CmdResult R = runVmxsim("trace import --xen-console " + In + " -o " + Out);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(lines(R.Err), 1u);
  EXPECT_EQ(R.Err, "vmxsim: error: " + In +
                       ": no 'vmxsim-xentrace: begin' line (no Xen trace in this output)\n");
  EXPECT_FALSE(std::filesystem::exists(Out));
  // "abc", its SHA-256, and no end line.
  text("vmxsim-xentrace: begin 3 "
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\r\r\nYWJj\r\r\n");
  R = runVmxsim("trace import --xen-console " + In + " -o " + Out);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: " + In +
                       ": no 'vmxsim-xentrace: end' line (the console output was cut)\n");
  EXPECT_FALSE(std::filesystem::exists(Out));
  // Whole: the three bytes come back.
  text("vmxsim-xentrace: begin 3 "
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\r\r\nYWJj\r\r\n"
       "vmxsim-xentrace: end\r\r\n");
  R = runVmxsim("trace import --xen-console " + In + " -o " + Out);
  EXPECT_EQ(R.Status, 0) << R.Err;
  EXPECT_EQ(R.Out, "imported 3 bytes of Xen's trace from 1 base64 lines (SHA-256 checked)\n");
  EXPECT_EQ(readFile(Out), "abc");
  R = runVmxsim("trace import -o " + Out);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: trace import: give one of CAPTURE, --ftrace FILE or "
                   "--xen-console FILE\n");
  std::remove(In.c_str());
  std::remove(Out.c_str());
}

TEST(CommandLine, BadGdbAddressIsOneLineAndStatus2) {
  for (const char *Bad : {"1234x", "localhost:", ":65536", ":-1", "nohost", ":123456"}) {
    CmdResult R = runVmxsim(std::string("run --gdb ") + Bad + " /nonexistent/x.elf");
    EXPECT_EQ(R.Status, 2) << Bad;
    EXPECT_EQ(lines(R.Err), 1u) << R.Err;
    EXPECT_EQ(R.Err, std::string("vmxsim: error: --gdb: '") + Bad +
                         "' is not [HOST]:PORT with a port of 0..65535\n");
  }
  CmdResult R = runVmxsim("run --gdb-wait /nonexistent/x.elf");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: --gdb-wait needs --gdb [HOST]:PORT\n");
  R = runVmxsim("run --gdb :0 --snapshot-every 1000 /nonexistent/x.elf");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(R.Err, "vmxsim: error: --snapshot-at and --snapshot-every do not combine with "
                   "--gdb: under gdb, 'monitor snapshot save FILE' takes one\n");
  // An address of no interface of this host (TEST-NET-1): the listen fails, one line.
  R = runVmxsim(std::string("run --gdb 192.0.2.1:1 ") + VMXSIM_IMAGE_DIR + "/vmx_e2e.elf");
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(lines(R.Err), 1u) << R.Err;
  EXPECT_EQ(R.Err.rfind("vmxsim: error: --gdb: cannot listen on 192.0.2.1:1: ", 0), 0u) << R.Err;
}

// `--xen-trace` (harness/xen_trace_drain.h): each bad symbol file is one line and status
// 22, before the run; a run whose kernel is not Xen ends with one line and status 22.
TEST(CommandLine, XenTraceBadSymbolFilesAreOneLineAndStatus22) {
  const std::string Image = tempPath("hlt.bin"), Xt = tempPath("xen.xt");
  writeFile(Image, {0xf4}); // HLT
  const std::string Run = "run -q --flat 0x100000 --xen-trace " + Xt + " ";
  CmdResult R = runVmxsim(Run + Image);
  EXPECT_EQ(R.Status, 22);
  EXPECT_EQ(R.Err, "vmxsim: error: --xen-syms: draining Xen's trace (--xen-trace) needs Xen's "
                   "symbol file (--xen-syms xen-syms, from xen-hypervisor-4.17-amd64-dbg)\n");
  R = runVmxsim(Run + "--xen-syms /nonexistent/xen-syms " + Image);
  EXPECT_EQ(R.Status, 22);
  EXPECT_EQ(R.Err, "vmxsim: error: --xen-syms: /nonexistent/xen-syms: cannot read the Xen "
                   "symbol file: cannot open: No such file or directory\n");
  R = runVmxsim(Run + "--xen-syms " + Image + " " + Image);
  EXPECT_EQ(R.Status, 22);
  EXPECT_EQ(R.Err, "vmxsim: error: --xen-syms: " + Image + ": not a 64-bit little-endian ELF "
                   "file (xen-syms of xen-hypervisor-4.17-amd64-dbg is one)\n");
  // An ELF with symbols, but not Xen's: vmxsim itself.
  const std::string Vmxsim = std::string(VMXSIM_BINARY_DIR) + "/vmxsim";
  R = runVmxsim(Run + "--xen-syms " + Vmxsim + " " + Image);
  EXPECT_EQ(R.Status, 22);
  EXPECT_EQ(R.Err, "vmxsim: error: --xen-syms: " + Vmxsim + ": no symbol t_info of "
                   "common/trace.c (not Xen 4.17's xen-syms?)\n");
  // A symbol file without --xen-trace is a usage error (status 2).
  R = runVmxsim("run -q --flat 0x100000 --xen-syms " + Vmxsim + " " + Image);
  EXPECT_EQ(R.Status, 2);
  EXPECT_EQ(lines(R.Err), 1u) << R.Err;
  std::remove(Image.c_str());
  std::remove(Xt.c_str());
}
