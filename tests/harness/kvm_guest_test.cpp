// KVM inside Linux on vmxsim: Debian 12's Linux 6.1 boots the kvm initramfs that
// scripts/fetch-guests.sh builds (initramfs-kvm.cpio.gz), whose /init loads Linux's own
// KVM modules (irqbypass, kvm, kvm-intel) as the hypervisor on vmxsim's VMX, and runs
// kvm-hello (scripts/guests/kvm-hello.c): one VM, one vCPU, one page of memory, real-mode
// code doing OUT 0x3f8 then HLT. Skipped when the cache lacks the kvm initramfs.
//
// What works today, asserted below: kvm_intel accepts the `full` VMX profile's capability
// MSRs (setup_vmcs_config finds every control it requires), /dev/kvm appears, KVM_CREATE_VM
// enables VMX (VMXON on the boot CPU), and the vCPU's VM entries with EPT and unrestricted
// guest run the real-mode code to the exits KVM reports to user space: KVM_EXIT_IO, then
// KVM_EXIT_HLT.
//
// Expected next (project issue 16): a protected- and long-mode guest under KVM (paging
// through EPT, interrupts injected by KVM's in-kernel LAPIC), more than one vCPU on more
// than one host CPU, and then a whole Linux guest under kvm_intel.
#include "cpu/vmx/vmx_features.h"
#include "harness/machine.h"
#include "tests/support/files.h"

#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <unistd.h>

using namespace vmxsim;
using vmxsim::test::guestCache;
using vmxsim::test::readFile;

TEST(LinuxKvm, KvmIntelLoadsAndRunsARealModeVcpuToItsIoAndHltExits) {
  const std::string Cache = guestCache();
  const std::string Kernel = Cache + "/vmlinuz", Initrd = Cache + "/initramfs-kvm.cpio.gz";
  if (Cache.empty() || !std::filesystem::exists(Kernel) || !std::filesystem::exists(Initrd))
    GTEST_SKIP() << "no Debian kernel and kvm initramfs in the guest cache '" << Cache
                 << "': run scripts/fetch-guests.sh";
  const std::string Serial = std::filesystem::temp_directory_path() /
                             fmt::format("vmxsim_kvm_guest_test_{}", ::getpid());
  MachineConfig Cfg;
  Cfg.Vmx = &VmxProfile::full(); // the default CPU model's profile, named: the lines depend on it
  Cfg.Kernel = Kernel;
  Cfg.Modules = {Initrd};
  Cfg.RamBytes = 512ull << 20;
  Cfg.Append = "console=ttyS0";
  Cfg.MaxInsns = 12'000'000'000; // the whole boot is about 6.7e9
  Cfg.Serial = OutputSpec::file(Serial);
  Error Err;
  auto M = Machine::create(Cfg, Err);
  ASSERT_NE(M, nullptr) << Err.str();
  const RunResult R = M->run();
  M.reset(); // closes the serial file
  const std::string Out = readFile(Serial);
  std::filesystem::remove(Serial);

  ASSERT_EQ(R.Reason, RunReason::PowerOff) << R.describe() << "\nserial output:\n" << Out;
  EXPECT_EQ(R.ExitValue, 0x604u); // PM1a_CNT: SLP_EN with \_S5's SLP_TYP
  // The /init's markers and kvm-hello's lines as user space wrote them to the tty (at the
  // start of a line, ended by the tty's CR LF), in this order.
  const char *Lines[] = {
      "\nvmxsim-kvm: start\r\n",
      "\nvmxsim-kvm: insmod irqbypass: ok\r\n",
      "\nvmxsim-kvm: insmod kvm: ok\r\n",
      "\nvmxsim-kvm: insmod kvm-intel: ok\r\n",
      "\nvmxsim-kvm: /dev/kvm: present\r\n",
      // What kvm_intel chose from the full profile's capability MSRs: EPT, unrestricted
      // guest, VPID, the preemption timer and nested VMX; no APIC virtualization (so no
      // flexpriority or APICv), no VMCS shadowing, no PML (vmxsim does not model them).
      "\nvmxsim-kvm: kvm_intel: ept=Y unrestricted_guest=Y vpid=Y flexpriority=N "
      "enable_apicv=N enable_shadow_vmcs=N pml=N preemption_timer=Y nested=Y\r\n",
      "\nkvm-hello: KVM_GET_API_VERSION 12\r\n",
      "\nkvm-hello: exit io port 0x3f8 size 1 out data 0x41\r\n",
      "\nkvm-hello: exit hlt\r\n",
      "\nvmxsim-kvm: kvm-hello: exit status 0\r\n",
      "\nvmxsim-kvm: done\r\n",
  };
  size_t At = 0;
  for (const char *Line : Lines) {
    const size_t Found = Out.find(Line, At);
    ASSERT_NE(Found, std::string::npos) << "missing (in order): " << Line << "\n" << Out;
    At = Found + 1;
  }
  // kvm and kvm_intel load without a word when the CPU satisfies them: any KVM line in
  // the kernel log before power-off (the /init prints them as "vmxsim-kvm: dmesg: ...")
  // would be a complaint or a refusal.
  EXPECT_EQ(Out.find("vmxsim-kvm: dmesg:"), std::string::npos) << Out;
  EXPECT_EQ(Out.find("Kernel panic"), std::string::npos) << Out;
  EXPECT_EQ(Out.find("WARNING:"), std::string::npos) << Out;
}
