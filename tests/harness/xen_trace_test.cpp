// Xen's own trace buffers on vmxsim (docs/xen-trace.md): Debian 12's Xen 4.17, traced from
// boot (tbuf_size=16), boots Linux 6.1 as its PV dom0 from the Xen kit that
// scripts/fetch-guests.sh builds (initramfs-xen.cpio.gz). Its /init starts Debian's tool
// stack (xenstored, xen-init-dom0, xenconsoled), runs xentrace, and starts pvh-hello
// (scripts/guests/pvh-hello.S, 32-bit) and then pvh-long (pvh-long.S: long mode, MMIO,
// its APIC timer during a spin and to wake it from HLT) as PVH domUs with `xl create -F`.
// The domUs' VM exits are handled by Xen's own vmx_vmexit_handler, which records them
// (TRC_HVM_VMEXIT/VMEXIT64, handler records, TRC_HVM_VMENTRY); xentrace's file comes out
// on the console in base64. On one CPU and on two. Skipped when the cache lacks the kit.
//
// Asserted: the tool stack's markers and the domU's lines (printed by Xen from port 0xe9),
// the trace imported (`trace import --xen-console`), checked against vmxsim's ground truth
// of the same run (`trace check`: every exit, entry and handler record paired, the boot's
// lost records outside every exit window), and its exits per reason (`trace summary`)
// against the golden counts, which are the ground truth's too.
#include "harness/machine.h"
#include "harness/xen_trace_drain.h"
#include "tests/support/files.h"
#include "trace/check.h"
#include "trace/reader.h"
#include "trace/summary.h"
#include "trace/xen_console_import.h"

#include <array>
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

/// Xen's trace (imported from the console) checked against the run's ground truth.
trace::CheckResult checkKit(const std::vector<uint8_t> &Xen, const std::string &GroundTruth) {
  trace::TraceReader H, G;
  H.openMemory(Xen.data(), Xen.size());
  G.openMemory(GroundTruth.data(), GroundTruth.size());
  return trace::checkAgainstGroundTruth(H, G);
}

/// One run of the Xen kit on NumCpus: the console and the ground truth. False (nothing
/// run) when the cache lacks the kit.
/// With VmxsimDrain, the kit without xentrace (initramfs-xen-drain.cpio.gz) runs, Xen's
/// event mask is xentrace's from boot (tevt_mask=0x000af000), and vmxsim drains Xen's
/// buffers itself (--xen-trace with the cache's xen-syms, translated) into XenTrace.
struct KitRun {
  RunResult Result;
  std::string Serial, GroundTruth, XenTrace, XenTraceProblem;
};
bool runXenKit(unsigned NumCpus, KitRun &K, const std::string &XenOptions = "",
               bool VmxsimDrain = false) {
  const std::string Cache = guestCache();
  const std::string Xen = Cache + "/xen-4.17-amd64", Kernel = Cache + "/vmlinuz",
                    Initrd = Cache + (VmxsimDrain ? "/initramfs-xen-drain.cpio.gz"
                                                  : "/initramfs-xen.cpio.gz"),
                    Syms = Cache + "/xen-syms-4.17-amd64";
  if (Cache.empty() || !std::filesystem::exists(Xen) || !std::filesystem::exists(Kernel) ||
      !std::filesystem::exists(Initrd) || (VmxsimDrain && !std::filesystem::exists(Syms)))
    return false;
  const std::string Serial = std::filesystem::temp_directory_path() /
                             fmt::format("vmxsim_xen_trace_test_{}", ::getpid());
  const std::string GroundTruth = Serial + ".gt.xt";
  MachineConfig Cfg;
  Cfg.Kernel = Xen;
  Cfg.Modules = {Kernel + " console=hvc0 earlyprintk=xen", Initrd};
  Cfg.Append = "console=com1 com1=115200,8n1 loglvl=all guest_loglvl=all dom0_mem=256M "
               "tbuf_size=16" + XenOptions + (VmxsimDrain ? " tevt_mask=0x000af000" : "");
  const std::string XenTrace = Serial + ".xen.xt";
  if (VmxsimDrain) {
    Cfg.XenTraceFile = XenTrace;
    Cfg.XenSymsFile = Syms;
    Cfg.Exec = ExecMode::Translate;
  }
  Cfg.RamBytes = 1024ull << 20;
  Cfg.NumCpus = NumCpus;
  Cfg.MaxInsns = 20'000'000'000; // the run is 8,913,511,135 on 1 CPU (before MWAIT), 9,493,197,085 on 2
  Cfg.Serial = OutputSpec::file(Serial);
  Cfg.GroundTruthFile = GroundTruth;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_NE(M, nullptr) << Err.str();
  if (M) {
    K.Result = M->run();
    if (VmxsimDrain)
      K.XenTraceProblem = M->xenTraceDrain()->problem();
    M.reset(); // closes the files
  }
  K.Serial = readFile(Serial);
  K.GroundTruth = readFile(GroundTruth);
  K.XenTrace = readFile(XenTrace);
  std::filesystem::remove(Serial);
  std::filesystem::remove(GroundTruth);
  std::filesystem::remove(XenTrace);
  return true;
}

/// The kit's console lines, in this order: the tool stack, the domUs' own lines (Xen
/// prints port 0xe9 output of domain N as "(dN) ..."), xl's report of each end, the trace
/// written out.
void expectKitLines(const std::string &Out) {
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
      "\nvmxsim-xen: xl create pvh-hello: exit status 0\r",
      "\nvmxsim-xen: xl: Domain 1 has shut down, reason code 0 0x0\r",
      // pvh-long: into long mode, an MMIO load and store where it has no memory (Xen's
      // null handler: all ones), its local APIC's timer interrupt during a spin and as
      // the wake-up from HLT.
      "(d2) pvh-long: start\r",
      "(d2) pvh-long: long mode\r",
      "(d2) pvh-long: mmio load ffffffff\r",
      "(d2) pvh-long: spin: ticks 01\r",
      "(d2) pvh-long: hlt: woken, ticks 02\r",
      "(d2) pvh-long: poweroff\r",
      "\nvmxsim-xen: xl create pvh-long: exit status 0\r",
      "\nvmxsim-xen: xl: Domain 2 has shut down, reason code 0 0x0\r",
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
}

/// The kit on one CPU: Xen's trace checked against the ground truth GtBytes, with Lost
/// LOST_RECORDS outside every exit window and Timer external-interrupt exits (Xen's timer
/// arriving during pvh-long's spin: twice with xentrace in dom0, once without it; the
/// count follows the kit's timing, which the cache's path changes too, as it is in the
/// module strings Xen is given): 321 + Timer exits and as many entries (each domU's
/// launch and resumes; the last exit of each, SCHEDOP_shutdown, has none, and neither has
/// the HLT that blocks the vCPU: Xen resumes it later), 320 + Timer handler records (none
/// for the interrupt window and the two EOI-induced exits; NPF and IOMEM for each EPT
/// violation). And the golden exits per basic reason (SDM Vol. 3D, Appendix C), the same
/// in Xen's trace (CPU 0; vCPUs d1v0 and d2v0 by the scheduler's records) and in the
/// ground truth.
void expectOneCpuKitTrace(const std::vector<uint8_t> &Xen, const std::string &GtBytes,
                          uint64_t Lost, uint64_t Timer) {
  const trace::CheckResult C = checkKit(Xen, GtBytes);
  ASSERT_TRUE(C.Ok) << C.Problem;
  ASSERT_EQ(C.Cpus.size(), 1u);
  EXPECT_EQ(C.Cpus[0].Exits, 321 + Timer);
  EXPECT_EQ(C.Cpus[0].Entries, 321 + Timer);
  EXPECT_EQ(C.Cpus[0].HandlerRecords, 320 + Timer);
  EXPECT_EQ(C.LostOutsideExits, Lost);
  const std::map<uint32_t, uint64_t> Golden = {
      {1, Timer}, // external interrupt: Xen's timer during pvh-long's spin
      {7, 1},    // interrupt window: pvh-long's STI
      {10, 3},   // CPUID: pvh-hello's leaves 0 and 0x40000000, pvh-long's leaf 1
      {12, 1},   // HLT: pvh-long, woken by its APIC timer
      {18, 3},   // VMCALL: xen_version, SCHEDOP_shutdown twice
      {28, 2},   // MOV to CR4 and CR0: pvh-long into long mode
      {30, 296}, // I/O: 154 + 140 bytes out to 0xe9, IN and OUT of 0x510
      {31, 3},   // RDMSR: 0xfe, 0x2ff, IA32_APIC_BASE
      {32, 8},   // WRMSR: 0x2ff, IA32_EFER, IA32_APIC_BASE and four x2APIC registers
      {45, 2},   // EOI-induced: pvh-long's timer handler, twice
      {48, 2},   // EPT violation: pvh-long's MMIO load and store
  };
  trace::TraceReader S;
  S.openMemory(Xen.data(), Xen.size());
  const trace::TraceSummary Sum = trace::summarizeTrace(S);
  ASSERT_EQ(Sum.Cpus.size(), 1u);
  EXPECT_EQ(exitsPerReason(Sum.Cpus[0]), Golden);
  ASSERT_EQ(Sum.Vcpus.size(), 2u);
  EXPECT_EQ(Sum.Vcpus[0].Name, "d1v0");
  EXPECT_EQ(Sum.Vcpus[0].Exits, 163u);
  EXPECT_EQ(Sum.Vcpus[1].Name, "d2v0");
  EXPECT_EQ(Sum.Vcpus[1].Exits, 158 + Timer);
  trace::TraceReader GS;
  GS.openMemory(GtBytes.data(), GtBytes.size());
  const trace::TraceSummary GtSum = trace::summarizeTrace(GS);
  ASSERT_EQ(GtSum.Cpus.size(), 1u);
  EXPECT_EQ(exitsPerReason(GtSum.Cpus[0]), Golden);
}

} // namespace

TEST(XenKit, XenTracesAPvhDomUsExitsThroughDom0sToolStackAndTheTraceChecksOut) {
  KitRun K;
  if (!runXenKit(1, K))
    GTEST_SKIP() << "no Xen, Debian kernel and Xen kit (initramfs-xen.cpio.gz) in the guest "
                    "cache '" << guestCache() << "': run scripts/fetch-guests.sh";
  const RunResult &R = K.Result;
  const std::string &Out = K.Serial;
  const std::string &GtBytes = K.GroundTruth;
  ASSERT_EQ(R.Reason, RunReason::PowerOff) << R.describe() << "\nserial output:\n" << Out;
  EXPECT_EQ(R.ExitValue, 0x604u);
  expectKitLines(Out);

  // Xen's trace, out of the console.
  const trace::XenConsoleImport I = trace::importXenConsole(Out, "serial");
  ASSERT_EQ(I.Status, 0) << I.Problem;
  ASSERT_FALSE(I.Bytes.empty());

  // Xen traced from boot: its 16 pages filled long before the domUs (one LOST_RECORDS).
  expectOneCpuKitTrace(I.Bytes, GtBytes, 1, 2);
}

// The same kit on two CPUs: Xen brings up both (two pCPUs, dom0 with two vCPUs), the
// domU's vCPU runs where Xen's scheduler puts it, and its exits are paired CPU by CPU.
// Twice, with byte-identical console output (the trace included: it is on the console)
// and equal instruction and cycle counts.
TEST(XenKit, OnTwoCpusTheKitRunsIdenticallyTwiceAndItsTraceChecksOut) {
  KitRun First, Second;
  if (!runXenKit(2, First))
    GTEST_SKIP() << "no Xen, Debian kernel and Xen kit (initramfs-xen.cpio.gz) in the guest "
                    "cache '" << guestCache() << "': run scripts/fetch-guests.sh";
  const std::string &Out = First.Serial;
  ASSERT_EQ(First.Result.Reason, RunReason::PowerOff) << First.Result.describe() << "\n" << Out;
  EXPECT_EQ(First.Result.ExitValue, 0x604u);
  for (const char *Line : {"(XEN) Brought up 2 CPUs", "(XEN) Dom0 has maximum 2 VCPUs",
                           "smp: Brought up 1 node, 2 CPUs"})
    EXPECT_NE(Out.find(Line), std::string::npos) << Line << "\n" << Out;
  expectKitLines(Out);

  const trace::XenConsoleImport I = trace::importXenConsole(Out, "serial");
  ASSERT_EQ(I.Status, 0) << I.Problem;
  const trace::CheckResult C = checkKit(I.Bytes, First.GroundTruth);
  ASSERT_TRUE(C.Ok) << C.Problem;
  // Per CPU: {exits, entries, handler records}.
  std::map<unsigned, std::array<uint64_t, 3>> PerCpu;
  for (const trace::CpuCheck &Cpu : C.Cpus)
    if (Cpu.Exits || Cpu.Entries || Cpu.HandlerRecords)
      PerCpu[Cpu.Cpu] = {Cpu.Exits, Cpu.Entries, Cpu.HandlerRecords};
  // pvh-hello ran on CPU 1. pvh-long started on CPU 0 and, after its HLT, Xen's scheduler
  // woke its vCPU on CPU 1 (RUNSTATE records: running on CPU 0, blocked, then running on
  // CPU 1 to the end): a vCPU that moves between pCPUs, its exits paired on each CPU.
  // Since Linux idles in MWAIT, dom0's timing puts the wake-up there. (Its exits without
  // a handler record: the interrupt window and the EOI-induced exits; its two EPT
  // violations have two records each, NPF and IOMEM.)
  EXPECT_EQ(PerCpu, (std::map<unsigned, std::array<uint64_t, 3>>{{0, {107, 107, 107}},
                                                                 {1, {215, 215, 214}}}));
  // Both CPUs' buffers filled during dom0's boot (one LOST_RECORDS each).
  EXPECT_EQ(C.LostOutsideExits, 2u);

  // The golden exits per basic reason and CPU, the same in Xen's trace and the ground
  // truth.
  auto exitsPerCpuAndReason = [](const std::string &Bytes) {
    trace::TraceReader S;
    S.openMemory(Bytes.data(), Bytes.size());
    std::map<std::pair<unsigned, uint32_t>, uint64_t> Exits;
    for (const trace::ScopeSummary &Cpu : trace::summarizeTrace(S).Cpus)
      for (const trace::ReasonRow &Row : Cpu.Reasons)
        Exits[{Cpu.Cpu, Row.Reason}] = Row.Exits;
    return Exits;
  };
  const std::map<std::pair<unsigned, uint32_t>, uint64_t> Golden = {
      // pvh-long on CPU 0, up to its HLT
      {{0, 1}, 1},   // external interrupt: Xen's timer (vector 0xfa) during the spin
      {{0, 7}, 1},   // interrupt window, opened by the spin's STI
      {{0, 10}, 1},  // CPUID leaf 1
      {{0, 12}, 1},  // HLT, woken by the timer
      {{0, 28}, 2},  // MOV to CR4 (PAE), MOV to CR0 (PG)
      {{0, 30}, 90}, // bytes out to 0xe9
      {{0, 31}, 1},  // RDMSR IA32_APIC_BASE
      {{0, 32}, 7},  // WRMSR IA32_EFER, IA32_APIC_BASE, SVR, TDCR, LVTT, TMICT twice
      {{0, 45}, 1},  // EOI-induced: the handler's first EOI (vector 0x40 in Xen's bitmap)
      {{0, 48}, 2},  // EPT violations: the MMIO load and store at 0x20000000
      // pvh-hello on CPU 1, and pvh-long after its wake-up there
      {{1, 10}, 2},  // pvh-hello's CPUIDs
      {{1, 18}, 3},  // SCHEDOP_shutdown: pvh-hello's two VMCALLs, pvh-long's one
      {{1, 30}, 206}, // bytes out to 0xe9: pvh-hello's 156, pvh-long's last 50
      {{1, 31}, 2},
      {{1, 32}, 1},
      {{1, 45}, 1},  // pvh-long's second EOI
  };
  EXPECT_EQ(exitsPerCpuAndReason(std::string(I.Bytes.begin(), I.Bytes.end())), Golden);
  EXPECT_EQ(exitsPerCpuAndReason(First.GroundTruth), Golden);

  ASSERT_TRUE(runXenKit(2, Second));
  EXPECT_EQ(Second.Result.Retired, First.Result.Retired);
  EXPECT_EQ(Second.Result.Cycles, First.Result.Cycles);
  EXPECT_TRUE(Second.Serial == First.Serial) << "the console output differs between two runs";
  EXPECT_TRUE(Second.GroundTruth == First.GroundTruth)
      << "the ground truth differs between two runs";
}

// The kit on one CPU with Xen's `apicv=0`: Xen uses neither APIC-register virtualization
// nor virtual-interrupt delivery, so it delivers pvh-long's timer interrupt (vector 0x40)
// through the VM-entry interruption-information field and writes INJ_VIRQ for it, which
// the check pairs with the next VM entry's injection (trace/check.h). The EOI is an
// intercepted x2APIC WRMSR then, not an EOI-induced exit.
TEST(XenKit, WithoutApicvXenInjectsThroughTheEntryFieldAndItsInjVirqChecksOut) {
  KitRun K;
  if (!runXenKit(1, K, " apicv=0"))
    GTEST_SKIP() << "no Xen, Debian kernel and Xen kit (initramfs-xen.cpio.gz) in the guest "
                    "cache '" << guestCache() << "': run scripts/fetch-guests.sh";
  ASSERT_EQ(K.Result.Reason, RunReason::PowerOff) << K.Result.describe() << "\n" << K.Serial;
  expectKitLines(K.Serial);
  EXPECT_NE(K.Serial.find("(XEN)  - APIC TPR shadow\r"), std::string::npos);
  EXPECT_EQ(K.Serial.find("(XEN)  - Virtual Interrupt Delivery"), std::string::npos);

  const trace::XenConsoleImport I = trace::importXenConsole(K.Serial, "serial");
  ASSERT_EQ(I.Status, 0) << I.Problem;
  // Xen's INJ_VIRQ records: vector 0x40, not fake, once for the spin's tick and once for
  // the wake-up from HLT. No INTR_WINDOW: each time the interrupt arrives IF is 1.
  std::vector<std::array<uint32_t, 2>> Inj;
  unsigned Windows = 0;
  {
    trace::TraceReader H;
    H.openMemory(I.Bytes.data(), I.Bytes.size());
    trace::TraceRecord Rec;
    while (H.next(Rec)) {
      if (Rec.Event == XT_EV_InjVirq)
        Inj.push_back({Rec.Words[0], Rec.Words[1]});
      Windows += Rec.Event == XT_EV_IntrWindow;
    }
  }
  EXPECT_EQ(Inj, (std::vector<std::array<uint32_t, 2>>{{0x40, 0}, {0x40, 0}}));
  EXPECT_EQ(Windows, 0u);

  const trace::CheckResult C = checkKit(I.Bytes, K.GroundTruth);
  ASSERT_TRUE(C.Ok) << C.Problem;
  ASSERT_EQ(C.Cpus.size(), 1u);
  EXPECT_EQ(C.Cpus[0].Exits, 323u);
  EXPECT_EQ(C.Cpus[0].Entries, 323u);
  // 322 as with APICv (the EOI-induced exits' none replaced by the two EOI WRMSRs'
  // MSR_WRITE) and the two INJ_VIRQ.
  EXPECT_EQ(C.Cpus[0].HandlerRecords, 326u);

  const std::map<uint32_t, uint64_t> Golden = {
      {1, 2}, {7, 1}, {10, 3}, {12, 1}, {18, 3}, {28, 2}, {30, 296}, {31, 3},
      {32, 10}, // the eight with APICv and the timer handler's two EOI writes (x2APIC 0x80b)
      {48, 2},
  };
  trace::TraceReader S;
  S.openMemory(I.Bytes.data(), I.Bytes.size());
  const trace::TraceSummary Sum = trace::summarizeTrace(S);
  ASSERT_EQ(Sum.Cpus.size(), 1u);
  EXPECT_EQ(exitsPerReason(Sum.Cpus[0]), Golden);
  trace::TraceReader GS;
  GS.openMemory(K.GroundTruth.data(), K.GroundTruth.size());
  EXPECT_EQ(exitsPerReason(trace::summarizeTrace(GS).Cpus.at(0)), Golden);
}

// The kit without xentrace (initramfs-xen-drain.cpio.gz): vmxsim drains Xen's buffers from guest memory with xen-syms
// (harness/xen_trace_drain.h), from boot with xentrace's event mask (tevt_mask=0x000af000)
// and at every 1e6 instructions, so nothing is lost; its file checks out against the
// ground truth exactly as xentrace's does, with the same golden exits, and without the
// boot's LOST_RECORDS. Translated (about 35 s).
TEST(XenKit, VmxsimDrainsXenWithoutXentraceAndItsTraceChecksOut) {
  KitRun K;
  if (!runXenKit(1, K, "", true))
    GTEST_SKIP() << "no Xen, xen-syms, Debian kernel and Xen kit in the guest cache '"
                 << guestCache() << "': run scripts/fetch-guests.sh";
  ASSERT_EQ(K.Result.Reason, RunReason::PowerOff) << K.Result.describe() << "\n" << K.Serial;
  EXPECT_EQ(K.XenTraceProblem, "");
  for (const char *Line : {"\nvmxsim-xen: xentrace: not started (vmxsim drains Xen's buffers)\r",
                           "(d2) pvh-long: poweroff\r", "\nvmxsim-xen: done\r"})
    EXPECT_NE(K.Serial.find(Line), std::string::npos) << Line << "\n" << K.Serial;
  EXPECT_EQ(K.Serial.find("vmxsim-xentrace: begin"), std::string::npos);
  expectOneCpuKitTrace(std::vector<uint8_t>(K.XenTrace.begin(), K.XenTrace.end()),
                       K.GroundTruth, 0, 1);
}
