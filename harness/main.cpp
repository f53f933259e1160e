// The vmxsim command: a thin client of libvmxsim (harness/machine.h).
//
//   vmxsim run [--kernel] IMAGE [--initrd "M1 args,M2"] [--append STR] [-m SIZE]
//              [--smp N] [--max-insns N] [--serial SPEC] [--debugcon SPEC]
//              [--trace-insns FILE] [--flat ADDR [--entry-mode real|prot32|long]] [-q]
//
// Option names follow QEMU's where QEMU has one, so scripts port by changing the program
// name. Exit status: the guest's isa-debug-exit status ((V << 1) | 1, odd), 0 for the
// power-off port or a reset request, 2 for a bad command line / bad image / host failure,
// 4 instruction limit, 6 all CPUs halted, 8 triple fault, 10 unimplemented feature.
// Subcommands are the extension point: "trace" and "xcheck" will join "run".
#include "harness/machine.h"
#include "trace/dump.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fmt/format.h>
#include <string>
#include <vector>

namespace {

using namespace vmxsim;

[[noreturn]] void fail(const std::string &Msg) {
  std::fprintf(stderr, "vmxsim: error: %s\n", Msg.c_str());
  std::fflush(stdout);
  std::exit(kExitUsage);
}

/// QEMU's -m syntax: "[size=]N[suffix]", suffix B/K/M/G/T (case-insensitive, optional
/// trailing "B"/"iB"), no suffix = MiB.
bool parseSize(std::string S, uint64_t &Out) {
  if (S.rfind("size=", 0) == 0)
    S = S.substr(5);
  size_t I = 0;
  uint64_t V = 0;
  while (I < S.size() && S[I] >= '0' && S[I] <= '9') {
    if (V > (~uint64_t(0) - 9) / 10)
      return false;
    V = V * 10 + uint64_t(S[I++] - '0');
  }
  if (I == 0)
    return false;
  std::string Suffix = S.substr(I);
  for (char &C : Suffix)
    C = char(std::toupper(static_cast<unsigned char>(C)));
  unsigned Shift;
  if (Suffix.empty() || Suffix == "M" || Suffix == "MB" || Suffix == "MIB")
    Shift = 20;
  else if (Suffix == "B")
    Shift = 0;
  else if (Suffix == "K" || Suffix == "KB" || Suffix == "KIB")
    Shift = 10;
  else if (Suffix == "G" || Suffix == "GB" || Suffix == "GIB")
    Shift = 30;
  else if (Suffix == "T" || Suffix == "TB" || Suffix == "TIB")
    Shift = 40;
  else
    return false;
  if (Shift && V > (~uint64_t(0) >> Shift))
    return false;
  Out = V << Shift;
  return true;
}

/// "stdio", "none"/"null", "file:PATH", or a bare PATH.
OutputSpec parseOutput(const std::string &S) {
  if (S == "stdio" || S == "-")
    return OutputSpec::stdoutSpec();
  if (S == "none" || S == "null")
    return OutputSpec::discard();
  if (S.rfind("file:", 0) == 0)
    return OutputSpec::file(S.substr(5));
  return OutputSpec::file(S);
}

/// QEMU's -initrd list: comma-separated, ",," is a literal comma.
std::vector<std::string> splitModules(const std::string &S) {
  std::vector<std::string> Out;
  std::string Cur;
  for (size_t I = 0; I < S.size(); ++I) {
    if (S[I] == ',') {
      if (I + 1 < S.size() && S[I + 1] == ',') {
        Cur += ',';
        ++I;
        continue;
      }
      Out.push_back(Cur);
      Cur.clear();
      continue;
    }
    Cur += S[I];
  }
  Out.push_back(Cur);
  return Out;
}

struct RunOptions {
  std::string Image, Kernel, Initrd, Append, Mem = "256", Serial = "stdio",
                                              Debugcon = "stdio", TraceInsns, Flat,
                                              EntryMode = "prot32", VmxProfile = "full";
  unsigned Smp = 1;
  uint64_t MaxInsns = ~uint64_t(0);
  bool Quiet = false;
  std::string GroundTruth;
  bool GroundTruthInsns = false;
};

int runCommand(const RunOptions &O) {
  MachineConfig Cfg;
  if (!O.Image.empty() && !O.Kernel.empty())
    fail("give the image either as IMAGE or with --kernel, not both");
  Cfg.Kernel = O.Image.empty() ? O.Kernel : O.Image;
  if (Cfg.Kernel.empty())
    fail("run: no image (give IMAGE or --kernel FILE)");
  if (!parseSize(O.Mem, Cfg.RamBytes))
    fail(fmt::format("-m: invalid size '{}'", O.Mem));
  Cfg.NumCpus = O.Smp;
  Cfg.Vmx = VmxProfile::byName(O.VmxProfile);
  if (!Cfg.Vmx)
    fail(fmt::format("--vmx-profile: unknown profile '{}' (full, kvm-nested, minimal)",
                     O.VmxProfile));
  Cfg.MaxInsns = O.MaxInsns;
  Cfg.Append = O.Append;
  if (!O.Initrd.empty())
    Cfg.Modules = splitModules(O.Initrd);
  Cfg.Serial = parseOutput(O.Serial);
  Cfg.Debugcon = parseOutput(O.Debugcon);
  if (!O.TraceInsns.empty())
    Cfg.TraceInsns = O.TraceInsns == "-" ? OutputSpec::stdoutSpec() : OutputSpec::file(O.TraceInsns);
  Cfg.GroundTruthFile = O.GroundTruth;
  Cfg.GroundTruthInsns = O.GroundTruthInsns;
  if (Cfg.GroundTruthInsns && Cfg.GroundTruthFile.empty())
    fail("--trace-ground-truth-insns needs --trace-ground-truth FILE");
  if (!O.Flat.empty()) {
    char *End = nullptr;
    errno = 0;
    unsigned long long A = std::strtoull(O.Flat.c_str(), &End, 0);
    if (errno || End == O.Flat.c_str() || *End)
      fail(fmt::format("--flat: invalid address '{}'", O.Flat));
    Cfg.FlatAddr = A;
    Cfg.FlatMode = O.EntryMode == "real"   ? EntryMode::Real
                   : O.EntryMode == "long" ? EntryMode::Long
                                           : EntryMode::Prot32;
  }

  Error Err;
  std::unique_ptr<Machine> M = Machine::create(Cfg, Err);
  if (!M)
    fail(Err.str());
  RunResult R = M->run();
  std::fflush(stdout);
  switch (R.Reason) {
  case RunReason::TripleFault:
  case RunReason::Unimplemented:
    std::fprintf(stderr, "vmxsim: %s\n%s\n", R.describe().c_str(),
                 formatCpuState(M->cpu(R.CpuId).S).c_str());
    break;
  case RunReason::InsnLimit:
  case RunReason::Halted:
    std::fprintf(stderr, "vmxsim: %s\n", R.describe().c_str());
    break;
  case RunReason::GuestExit:
  case RunReason::PowerOff:
  case RunReason::Reset:
    break;
  }
  if (!O.Quiet)
    std::fprintf(stderr, "%s\n", R.summary().c_str());
  return R.ExitStatus;
}

struct TraceDumpOptions {
  std::string File;
  bool FileOrder = false;
};

/// `vmxsim trace dump FILE`: every record, one line each (trace/dump.h). A corrupt or
/// truncated file prints the records before the problem, then the error; status 2.
int traceDumpCommand(const TraceDumpOptions &O) {
  trace::TraceReader Reader(O.FileOrder ? trace::ReadOrder::File : trace::ReadOrder::Merged);
  std::string Why;
  if (!Reader.open(O.File, Why))
    fail(Why);
  const bool Clean = trace::dumpTrace(Reader, stdout);
  std::fflush(stdout);
  if (!Clean)
    fail(fmt::format("{}: {}", O.File, Reader.error().str()));
  return 0;
}

} // namespace

int main(int Argc, char **Argv) {
  CLI::App App{"vmxsim: a deterministic x86-64 emulator with Intel VMX in software", "vmxsim"};
  App.set_version_flag("--version", std::string("vmxsim ") + VMXSIM_VERSION);
  App.require_subcommand(1);

  RunOptions O;
  CLI::App *Run = App.add_subcommand("run", "boot an image and run it to completion");
  Run->add_option("IMAGE", O.Image, "Multiboot kernel (ELF32, ELF64, a.out kludge) or flat binary");
  Run->add_option("--kernel", O.Kernel, "the image (same as IMAGE)");
  Run->add_option("--initrd", O.Initrd,
                  "Multiboot modules: \"file1 args,file2\" (',,' is a literal comma)");
  Run->add_option("--append", O.Append, "kernel command line (after the image name)");
  Run->add_option("-m,--mem", O.Mem, "RAM size: N[K|M|G|T], plain N = MiB (default 256)");
  Run->add_option("--smp,--cpus", O.Smp, "number of CPUs, 1..64 (APs start on INIT-SIPI-SIPI)")
      ->check(CLI::Range(1u, kMaxCpus));
  Run->add_option("--vmx-profile", O.VmxProfile,
                  "VMX features: full (default), kvm-nested (what KVM offers an L1), minimal "
                  "(first-generation VT-x: no EPT, VPID or unrestricted guest)");
  Run->add_option("--max-insns", O.MaxInsns, "stop after N retired instructions (status 4)");
  Run->add_option("--serial", O.Serial, "COM1 output: stdio, none, file:PATH or PATH");
  Run->add_option("--debugcon", O.Debugcon, "port 0xe9 output: stdio, none, file:PATH or PATH");
  Run->add_option("--trace-insns", O.TraceInsns, "write an instruction trace to FILE ('-': stdout)");
  Run->add_option("--trace-ground-truth", O.GroundTruth,
                  "record every VM exit and VM entry (XenTrace, vmxsim's ground-truth class) to FILE");
  Run->add_flag("--trace-ground-truth-insns", O.GroundTruthInsns,
                "also record every instruction into the ground truth");
  CLI::Option *Flat =
      Run->add_option("--flat", O.Flat, "load IMAGE as a flat binary at guest-physical ADDR");
  Run->add_option("--entry-mode", O.EntryMode, "flat entry mode: real, prot32 or long")
      ->check(CLI::IsMember({"real", "prot32", "long"}))
      ->needs(Flat);
  Run->add_flag("-q,--quiet", O.Quiet, "no run summary on stderr");

  TraceDumpOptions DumpO;
  CLI::App *Trace = App.add_subcommand("trace", "read XenTrace files");
  Trace->require_subcommand(1);
  CLI::App *Dump = Trace->add_subcommand("dump", "print every record of a XenTrace file");
  Dump->add_option("FILE", DumpO.File, "the trace file")->required();
  Dump->add_flag("--file-order", DumpO.FileOrder,
                 "file order with the window headers (default: CPUs merged by TSC)");

  try {
    App.parse(Argc, Argv);
  } catch (const CLI::ParseError &E) {
    if (E.get_exit_code() == 0) // --help, --version
      return App.exit(E);
    std::string Msg = E.what();
    for (char &C : Msg)
      if (C == '\n')
        C = ' ';
    fail(Msg);
  }
  if (Run->parsed())
    return runCommand(O);
  if (Dump->parsed())
    return traceDumpCommand(DumpO);
  return kExitUsage;
}
