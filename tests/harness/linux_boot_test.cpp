// Boots Debian 12's Linux 6.1 (fetched by scripts/fetch-guests.sh into the guest cache)
// with its busybox initramfs, up to a fixed point: the kernel has decompressed itself,
// printed its banner, the command line, the E820 map and the initrd it was given, exactly
// as the loader placed them; the whole boot to user space and ACPI power-off on 1 and on
// 4 CPUs, the latter twice, byte- and cycle-identical; Debian's Xen 4.17 to its no-dom0
// panic. Skipped when the cache is absent.
#include "harness/loader.h"
#include "harness/machine.h"
#include "tests/support/files.h"

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

using namespace vmxsim;
using vmxsim::test::guestCache;
using vmxsim::test::readFile;

namespace {

/// A machine booting the cached Debian kernel and initramfs with 512 MiB, its serial output
/// going to Serial; false (nothing set) when the cache lacks them.
bool debianLinux(MachineConfig &Cfg, const std::string &Serial) {
  const std::string Cache = guestCache();
  const std::string Kernel = Cache + "/vmlinuz", Initrd = Cache + "/initramfs.cpio.gz";
  if (Cache.empty() || !std::filesystem::exists(Kernel) || !std::filesystem::exists(Initrd))
    return false;
  Cfg.Kernel = Kernel;
  Cfg.Modules = {Initrd};
  Cfg.RamBytes = 512ull << 20;
  Cfg.Serial = OutputSpec::file(Serial);
  return true;
}

} // namespace

TEST(LinuxBoot, DebianKernelSeesTheBootParametersItWasGiven) {
  const std::string Serial = std::filesystem::temp_directory_path() /
                             ("vmxsim_linux_boot_test_" + std::to_string(::getpid()));
  MachineConfig Cfg;
  if (!debianLinux(Cfg, Serial))
    GTEST_SKIP() << "no Debian kernel in the guest cache '" << guestCache()
                 << "': run scripts/fetch-guests.sh";
  Cfg.Append = "console=ttyS0 earlyprintk=serial,ttyS0,115200";
  Cfg.Debugcon = OutputSpec::capture();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_NE(M, nullptr) << Err.str();
  const BootLayout L = M->layout();
  ASSERT_TRUE(L.LinuxBzImage);

  // Run in slices until the kernel has printed its command line (decompression of the
  // xz payload alone is about 2e9 instructions), with a cap well above that.
  constexpr uint64_t kSlice = 250'000'000, kCap = 12'000'000'000;
  std::string Out;
  RunResult R;
  for (uint64_t N = kSlice; N <= kCap; N += kSlice) {
    M->setMaxInsns(N);
    R = M->run();
    Out = readFile(Serial);
    if (R.Reason != RunReason::InsnLimit || Out.find("Kernel command line:") != std::string::npos)
      break;
  }
  std::filesystem::remove(Serial);
  ASSERT_NE(Out.find("Kernel command line:"), std::string::npos)
      << R.summary() << "\nserial output:\n" << Out;

  EXPECT_NE(Out.find("Linux version 6.1.0-"), std::string::npos);
  // The serial consoles end lines with CR LF.
  EXPECT_NE(Out.find("Command line: " + Cfg.Append + "\r\n"), std::string::npos);
  // The E820 table the loader wrote (the firmware's e820Map of 512 MiB), as the kernel prints it.
  for (const char *Line : {"BIOS-e820: [mem 0x0000000000000000-0x000000000009fbff] usable",
                           "BIOS-e820: [mem 0x000000000009fc00-0x00000000000fffff] reserved",
                           "BIOS-e820: [mem 0x0000000000100000-0x000000001fffffff] usable"})
    EXPECT_NE(Out.find(Line), std::string::npos) << Line;
  // The initrd where the loader put it (the kernel prints whole pages).
  const uint64_t InitrdEnd = (L.RamdiskAddr + L.RamdiskBytes + 0xfff) & ~0xfffull;
  const std::string Ramdisk = fmt::format("RAMDISK: [mem {:#010x}-{:#010x}]", L.RamdiskAddr, InitrdEnd - 1);
  EXPECT_NE(Out.find(Ramdisk), std::string::npos) << Ramdisk << "\n" << Out;
}

namespace {

/// One whole boot to ACPI power-off: the run's result and its serial output.
struct Boot {
  RunResult Result;
  std::string Serial;
};

/// Boots the cached kernel and initramfs on NumCpus with "console=ttyS0" and no workaround
/// on the command line, the line "hello vmxsim" waiting on the scripted serial input
/// (MachineConfig::SerialIn); false (nothing run) when the cache is absent.
bool bootToPowerOff(unsigned NumCpus, Boot &B) {
  const std::string Serial =
      std::filesystem::temp_directory_path() /
      fmt::format("vmxsim_linux_boot_test_{}_{}cpu", ::getpid(), NumCpus);
  const std::string Input = Serial + ".in";
  MachineConfig Cfg;
  if (!debianLinux(Cfg, Serial))
    return false;
  Cfg.Append = "console=ttyS0";
  Cfg.NumCpus = NumCpus;
  Cfg.MaxInsns = 12'000'000'000;
  std::ofstream(Input) << "hello vmxsim\n";
  Cfg.SerialIn = Input;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  std::filesystem::remove(Input);
  EXPECT_NE(M, nullptr) << Err.str();
  if (M)
    B.Result = M->run();
  M.reset(); // closes the serial file
  B.Serial = readFile(Serial);
  std::filesystem::remove(Serial);
  return true;
}

/// What every boot to power-off must show: the kernel brought up every CPU, found both
/// UARTs (16550A, IRQ 4 and 3), ran the initramfs's /init, which writes its markers to the
/// console (the tty on ttyS0, which the 8250 driver transmits from the UART's THR-empty
/// interrupt) and to /dev/kmsg, reads a line from the console, and powered off through
/// ACPI S5 (harness/devices/acpi_pm.h); /proc/cpuinfo's flags line shows what CPUID
/// advertises, VMX among it.
void expectPoweredOffFromUserSpace(const Boot &B, unsigned NumCpus) {
  const std::string &Out = B.Serial;
  ASSERT_EQ(B.Result.Reason, RunReason::PowerOff) << B.Result.describe() << "\nserial output:\n"
                                                  << Out;
  EXPECT_EQ(B.Result.ExitValue, 0x604u); // PM1a_CNT: SLP_EN with \_S5's SLP_TYP
  EXPECT_EQ(B.Result.ExitStatus, 0);
  const std::string Cpus = fmt::format("smpboot: Total of {} processors activated", NumCpus);
  for (const std::string &Line :
       {Cpus, std::string("vmxsim-init: start"), fmt::format("vmxsim-init: cpus: {}", NumCpus),
        std::string("vmxsim-init: done"),
        std::string("ACPI: PM: Preparing to enter system sleep state S5"),
        std::string("ttyS0 at I/O 0x3f8 (irq = 4, base_baud = 115200) is a 16550A"),
        std::string("ttyS1 at I/O 0x2f8 (irq = 3, base_baud = 115200) is a 16550A")})
    EXPECT_NE(Out.find(Line), std::string::npos) << Line;
  // User space through the tty: the markers at the start of a line (the kernel's log
  // copies carry a timestamp), with the tty's CR LF, and the line the console read.
  for (const std::string &Line :
       {std::string("\nvmxsim-init: start\r\n"),
        fmt::format("\nvmxsim-init: cpus: {}\r\n", NumCpus),
        std::string("\nvmxsim-init: console: got hello vmxsim\r\n"),
        std::string("\nvmxsim-init: done\r\n")})
    EXPECT_NE(Out.find(Line), std::string::npos)
        << Line << "(a guest cache from before /init read the console? run "
                   "scripts/fetch-guests.sh)\n" << Out;
  const size_t Flags = Out.find("vmxsim-init: flags");
  ASSERT_NE(Flags, std::string::npos);
  const std::string FlagsLine = Out.substr(Flags, Out.find('\n', Flags) - Flags);
  EXPECT_NE(FlagsLine.find(" vmx "), std::string::npos) << FlagsLine;
  EXPECT_EQ(Out.find("Kernel panic"), std::string::npos);
}

} // namespace

TEST(LinuxBoot, DebianKernelRunsInitOnOneCpuAndPowersOffThroughAcpi) {
  Boot B;
  if (!bootToPowerOff(1, B))
    GTEST_SKIP() << "no Debian kernel in the guest cache '" << guestCache()
                 << "': run scripts/fetch-guests.sh";
  expectPoweredOffFromUserSpace(B, 1);
}

// The whole boot on 4 CPUs, twice: the second run repeats the first byte for byte on the
// serial line and instruction for instruction, cycle for cycle (DESIGN.md, determinism:
// the APs' interleaving is the scheduler's, never the host's).
TEST(LinuxBoot, DebianKernelOnFourCpusBootsToInitAndPowersOffIdenticallyTwice) {
  Boot First, Second;
  if (!bootToPowerOff(4, First))
    GTEST_SKIP() << "no Debian kernel in the guest cache '" << guestCache()
                 << "': run scripts/fetch-guests.sh";
  expectPoweredOffFromUserSpace(First, 4);
  ASSERT_TRUE(bootToPowerOff(4, Second));
  EXPECT_EQ(Second.Result.Reason, First.Result.Reason);
  EXPECT_EQ(Second.Result.Retired, First.Result.Retired);
  EXPECT_EQ(Second.Result.Cycles, First.Result.Cycles);
  EXPECT_TRUE(Second.Serial == First.Serial) << "the serial output differs between two runs";
}

// Debian 12's Xen 4.17 hypervisor, unmodified, given no dom0: it prints its boot log to
// COM1 and panics "dom0 kernel not specified" (Xen checks its modules before it sets up
// HVM, so VMX detection is not printed on this path), then resets through the i8042,
// which ends the run.
TEST(XenBoot, XenWithoutDom0PrintsItsBootLogAndPanics) {
  const std::string Cache = guestCache();
  const std::string Xen = Cache + "/xen-4.17-amd64";
  if (Cache.empty() || !std::filesystem::exists(Xen))
    GTEST_SKIP() << "no Xen in the guest cache '" << Cache << "': run scripts/fetch-guests.sh";
  MachineConfig Cfg;
  Cfg.Kernel = Xen;
  Cfg.Append = "console=com1 com1=115200,8n1";
  Cfg.RamBytes = 1024ull << 20;
  Cfg.MaxInsns = 100'000'000;
  Cfg.Serial = OutputSpec::capture();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_NE(M, nullptr) << Err.str();
  const RunResult R = M->run();
  const std::string Out = M->serialOutput();
  EXPECT_EQ(R.Reason, RunReason::Reset) << R.describe() << "\n" << Out;
  EXPECT_EQ(R.ExitValue, 0x64u); // the i8042's reset line
  for (const char *Line : {"(XEN) Xen version 4.17", "(XEN) Bootloader: vmxsim",
                           "(XEN) Command line: console=com1 com1=115200,8n1",
                           "(XEN) Panic on CPU 0:",
                           "(XEN) dom0 kernel not specified. Check bootloader configuration"})
    EXPECT_NE(Out.find(Line), std::string::npos) << Line << "\n" << Out;
}

namespace {

/// Debian 12's Xen 4.17 with Debian's Linux 6.1 as its PV dom0 (Multiboot modules: the
/// kernel with its command line, then the initramfs), on NumCpus, run to its end; false
/// (nothing run) when the cache lacks them.
bool xenWithDom0(unsigned NumCpus, Boot &B) {
  const std::string Cache = guestCache();
  const std::string Xen = Cache + "/xen-4.17-amd64", Kernel = Cache + "/vmlinuz",
                    Initrd = Cache + "/initramfs.cpio.gz";
  if (Cache.empty() || !std::filesystem::exists(Xen) || !std::filesystem::exists(Kernel) ||
      !std::filesystem::exists(Initrd))
    return false;
  MachineConfig Cfg;
  Cfg.Kernel = Xen;
  Cfg.Modules = {Kernel + " console=hvc0 earlyprintk=xen", Initrd};
  Cfg.Append = "console=com1 com1=115200,8n1 loglvl=all guest_loglvl=all dom0_mem=256M";
  Cfg.RamBytes = 1024ull << 20;
  Cfg.NumCpus = NumCpus;
  Cfg.MaxInsns = 20'000'000'000;
  Cfg.Serial = OutputSpec::capture();
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_NE(M, nullptr) << Err.str();
  if (M) {
    B.Result = M->run();
    B.Serial = M->serialOutput();
  }
  return true;
}

} // namespace

// The whole Xen boot with a dom0: Xen detects VMX, builds the PV dom0, whose kernel runs
// the initramfs's /init on Xen's console (hvc0, which Xen writes to COM1); /init powers
// dom0 off, and Xen then enters ACPI S5 (PM1a_CNT), which ends the run. Twice, with
// byte-identical console output and equal instruction and cycle counts.
TEST(XenBoot, XenBootsLinuxAsItsPvDom0AndPowersOffIdenticallyTwice) {
  Boot First, Second;
  if (!xenWithDom0(2, First))
    GTEST_SKIP() << "no Xen and Debian kernel in the guest cache '" << guestCache()
                 << "': run scripts/fetch-guests.sh";
  const std::string &Out = First.Serial;
  ASSERT_EQ(First.Result.Reason, RunReason::PowerOff) << First.Result.describe() << "\n" << Out;
  EXPECT_EQ(First.Result.ExitValue, 0x604u);
  for (const char *Line :
       {"(XEN) HVM: VMX enabled", "(XEN) HVM: Hardware Assisted Paging (HAP) detected",
        "(XEN) *** Building a PV Dom0 ***", "Hypervisor detected: Xen PV",
        "\nvmxsim-init: start", "\nvmxsim-init: cpus: 2", "\nvmxsim-init: done",
        "(XEN) Entering ACPI S5 state."})
    EXPECT_NE(Out.find(Line), std::string::npos) << Line << "\n" << Out;
  EXPECT_EQ(Out.find("Panic"), std::string::npos) << Out;
  ASSERT_TRUE(xenWithDom0(2, Second));
  EXPECT_EQ(Second.Result.Retired, First.Result.Retired);
  EXPECT_EQ(Second.Result.Cycles, First.Result.Cycles);
  EXPECT_TRUE(Second.Serial == First.Serial) << "the console output differs between two runs";
}
