// Xen's own trace buffers on vmxsim (docs/xen-trace.md): Debian 12's Xen 4.17, traced from
// boot (tbuf_size=16), boots Linux 6.1 as its PV dom0 from the Xen kit that
// scripts/fetch-guests.sh builds (initramfs-xen.cpio.gz). Its /init starts Debian's tool
// stack (xenstored, xen-init-dom0, xenconsoled), runs xentrace, and starts pvh-hello
// (scripts/guests/pvh-hello.S) as a PVH domU with `xl create -F`. The domU's VM exits are
// handled by Xen's own vmx_vmexit_handler, which records them (TRC_HVM_VMEXIT, handler
// records, TRC_HVM_VMENTRY); xentrace's file comes out on the console in base64. Skipped
// when the cache lacks the kit.
//
// Asserted: the tool stack's markers and the domU's lines (printed by Xen from port 0xe9),
// the trace imported (`trace import --xen-console`), checked against vmxsim's ground truth
// of the same run (`trace check`: every exit, entry and handler record paired, the boot's
// lost records outside every exit window), and its exits per reason (`trace summary`)
// against the golden counts, which are the ground truth's too.
#include "harness/machine.h"
#include "tests/support/files.h"
#include "trace/check.h"
#include "trace/reader.h"
#include "trace/summary.h"
#include "trace/xen_console_import.h"

#include <filesystem>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <map>
#include <unistd.h>

using namespace vmxsim;
using vmxsim::test::guestCache;
using vmxsim::test::readFile;

namespace {

std::map<uint32_t, uint64_t> exitsPerReason(const trace::ScopeSummary &S) {
  std::map<uint32_t, uint64_t> Exits;
  for (const trace::ReasonRow &Row : S.Reasons)
    Exits[Row.Reason] = Row.Exits;
  return Exits;
}

} // namespace

TEST(XenKit, XenTracesAPvhDomUsExitsThroughDom0sToolStackAndTheTraceChecksOut) {
  const std::string Cache = guestCache();
  const std::string Xen = Cache + "/xen-4.17-amd64", Kernel = Cache + "/vmlinuz",
                    Initrd = Cache + "/initramfs-xen.cpio.gz";
  if (Cache.empty() || !std::filesystem::exists(Xen) || !std::filesystem::exists(Kernel) ||
      !std::filesystem::exists(Initrd))
    GTEST_SKIP() << "no Xen, Debian kernel and Xen kit (initramfs-xen.cpio.gz) in the guest "
                    "cache '" << Cache << "': run scripts/fetch-guests.sh";
  const std::string Serial = std::filesystem::temp_directory_path() /
                             fmt::format("vmxsim_xen_trace_test_{}", ::getpid());
  const std::string GroundTruth = Serial + ".gt.xt";
  MachineConfig Cfg;
  Cfg.Kernel = Xen;
  Cfg.Modules = {Kernel + " console=hvc0 earlyprintk=xen", Initrd};
  Cfg.Append = "console=com1 com1=115200,8n1 loglvl=all guest_loglvl=all dom0_mem=256M "
               "tbuf_size=16";
  Cfg.RamBytes = 1024ull << 20;
  Cfg.NumCpus = 1;
  Cfg.MaxInsns = 16'000'000'000; // the whole run is 8,870,360,288
  Cfg.Serial = OutputSpec::file(Serial);
  Cfg.GroundTruthFile = GroundTruth;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_NE(M, nullptr) << Err.str();
  const RunResult R = M->run();
  M.reset(); // closes the files
  const std::string Out = readFile(Serial);
  const std::string GtBytes = readFile(GroundTruth);
  std::filesystem::remove(Serial);
  std::filesystem::remove(GroundTruth);

  ASSERT_EQ(R.Reason, RunReason::PowerOff) << R.describe() << "\nserial output:\n" << Out;
  EXPECT_EQ(R.ExitValue, 0x604u);
  // In this order: the tool stack, the domU's own lines (Xen prints port 0xe9 output of
  // domain 1 as "(d1) ..."), xl's report of its end, the trace written out.
  const char *Lines[] = {
      "(XEN) xentrace: initialised",
      "\nvmxsim-xen: insmod xen-evtchn: ok\r",
      "\nvmxsim-xen: insmod xen-privcmd: ok\r",
      "\nvmxsim-xen: insmod xenfs: ok\r",
      "\nvmxsim-xen: xenfs: control_d\r",
      "\nvmxsim-xen: xenstored: started\r",
      "\nvmxsim-xen: xen-init-dom0: ok\r",
      "\nvmxsim-xen: xenconsoled: started\r",
      "\nvmxsim-xen: xentrace: started\r",
      "(d1) pvh-hello: start\r",
      "(d1) pvh-hello: cpuid XenVMMXenVMM\r",
      "(d1) pvh-hello: in 0x510 ff\r",
      "(d1) pvh-hello: rdmsr 0x2ff 00000806\r",
      "(d1) pvh-hello: xen_version 00040011\r",
      "(d1) pvh-hello: poweroff\r",
      "\nvmxsim-xen: xl create: exit status 0\r",
      "\nvmxsim-xen: xl: Domain 1 has shut down, reason code 0 0x0\r",
      "\nvmxsim-xen: xentrace: exit status 0\r",
      "\nvmxsim-xentrace: begin ",
      "\nvmxsim-xentrace: end\r",
      "\nvmxsim-xen: done\r",
      "(XEN) Entering ACPI S5 state.",
  };
  size_t At = 0;
  for (const char *Line : Lines) {
    const size_t Found = Out.find(Line, At);
    ASSERT_NE(Found, std::string::npos) << "missing (in order): " << Line << "\n" << Out;
    At = Found + 1;
  }
  EXPECT_EQ(Out.find("Panic"), std::string::npos) << Out;

  // Xen's trace, out of the console.
  const trace::XenConsoleImport I = trace::importXenConsole(Out, "serial");
  ASSERT_EQ(I.Status, 0) << I.Problem;
  ASSERT_FALSE(I.Bytes.empty());

  // Checked against the ground truth: 163 exits, 163 entries (the launch's and 162
  // resumes: the last exit, SCHEDOP_shutdown, has none) and 163 handler records.
  trace::TraceReader H, G;
  H.openMemory(I.Bytes.data(), I.Bytes.size());
  G.openMemory(GtBytes.data(), GtBytes.size());
  const trace::CheckResult C = trace::checkAgainstGroundTruth(H, G);
  ASSERT_TRUE(C.Ok) << C.Problem;
  ASSERT_EQ(C.Cpus.size(), 1u);
  EXPECT_EQ(C.Cpus[0].Exits, 163u);
  EXPECT_EQ(C.Cpus[0].Entries, 163u);
  EXPECT_EQ(C.Cpus[0].HandlerRecords, 163u);
  // Xen traced from boot: its 16 pages filled long before the domU (one LOST_RECORDS).
  EXPECT_EQ(C.LostOutsideExits, 1u);

  // The golden exits per basic reason (SDM Vol. 3D, Appendix C), the same in Xen's trace
  // (CPU 0, vCPU d1v0 by the scheduler's records) and in the ground truth.
  const std::map<uint32_t, uint64_t> Golden = {
      {10, 2},   // CPUID: leaves 0 and 0x40000000
      {18, 2},   // VMCALL: xen_version, SCHEDOP_shutdown
      {30, 156}, // I/O: 154 bytes out to 0xe9, IN and OUT of 0x510
      {31, 2},   // RDMSR: 0xfe, 0x2ff
      {32, 1},   // WRMSR: 0x2ff
  };
  trace::TraceReader S;
  S.openMemory(I.Bytes.data(), I.Bytes.size());
  const trace::TraceSummary Sum = trace::summarizeTrace(S);
  ASSERT_EQ(Sum.Cpus.size(), 1u);
  EXPECT_EQ(exitsPerReason(Sum.Cpus[0]), Golden);
  ASSERT_EQ(Sum.Vcpus.size(), 1u);
  EXPECT_EQ(Sum.Vcpus[0].Name, "d1v0");
  trace::TraceReader GS;
  GS.openMemory(GtBytes.data(), GtBytes.size());
  const trace::TraceSummary GtSum = trace::summarizeTrace(GS);
  ASSERT_EQ(GtSum.Cpus.size(), 1u);
  EXPECT_EQ(exitsPerReason(GtSum.Cpus[0]), Golden);
}
