// `vmxsim xcheck IMAGE` (harness/kvm/xcheck.h): the same flat image under KVM and under
// vmxsim in each entry mode the back-end sets up, and its failure reports. Skipped with
// a visible message where /dev/kvm is not usable.
#include "harness/kvm/xcheck.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <unistd.h>

using namespace vmxsim::kvm;

namespace {

std::string writeImage(const std::string &Name, const std::vector<uint8_t> &Bytes) {
  std::string Path = "/tmp/vmxsim_xcheck_" + std::to_string(getpid()) + "_" + Name + ".bin";
  std::ofstream F(Path, std::ios::binary);
  F.write(reinterpret_cast<const char *>(Bytes.data()), std::streamsize(Bytes.size()));
  return Path;
}

XcheckResult check(const std::string &Name, XMode Mode, const std::vector<uint8_t> &Code,
                   RunLimits L = {}) {
  XcheckConfig Cfg;
  Cfg.Image = writeImage(Name, Code);
  Cfg.Mode = Mode;
  Cfg.Side.StopPort = 0xf4;
  Cfg.Limits = L;
  XcheckResult R = runXcheck(Cfg);
  std::remove(Cfg.Image.c_str());
  return R;
}

#define NEED_KVM()                                                                          \
  do {                                                                                      \
    std::string Why;                                                                        \
    if (!KvmVm::available(Why))                                                             \
      GTEST_SKIP() << "SKIPPED: no usable /dev/kvm here (" << Why << ")";                   \
  } while (0)

} // namespace

// SDM Vol. 3A, Real-Address Mode Operation: port I/O, a store and HLT.
TEST(KvmBackEnd, RealModeImageIdentical) {
  NEED_KVM();
  XcheckResult R = check("real", XMode::Real,
                         {0xb0, 0x42, 0xe6, 0x80,             // mov al,42h; out 80h,al
                          0xe4, 0x60,                         // in al,60h
                          0xb8, 0x34, 0x12, 0xa3, 0x00, 0x05, // mov ax,1234h; mov [500h],ax
                          0xf4});                             // hlt
  EXPECT_TRUE(R.Identical) << R.Report;
  EXPECT_FALSE(R.HostProblem);
  EXPECT_NE(R.Report.find("real mode, 2 exits, final hlt"), std::string::npos) << R.Report;
}

// 32-bit protected mode (the Multiboot state): a 4-byte OUT, RAM and MMIO stores.
TEST(KvmBackEnd, Protected32ImageIdentical) {
  NEED_KVM();
  XcheckResult R = check("prot32", XMode::Prot32,
                         {0xb8, 0x44, 0x33, 0x22, 0x11,             // mov eax,11223344h
                          0xe7, 0x80,                               // out 80h,eax
                          0xa3, 0x00, 0x00, 0x20, 0x00,             // mov [200000h],eax
                          0xa3, 0x00, 0x00, 0x00, 0xf0,             // mov [f0000000h],eax (MMIO)
                          0xf4});
  EXPECT_TRUE(R.Identical) << R.Report;
  EXPECT_NE(R.Report.find("prot32 mode, 2 exits, final hlt"), std::string::npos) << R.Report;
}

// 64-bit mode with identity paging: arithmetic, MMIO above RAM, the isa-debug-exit stop.
TEST(KvmBackEnd, LongModeImageIdentical) {
  NEED_KVM();
  XcheckResult R = check("long", XMode::Long,
                         {0x48, 0xb8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // mov rax,imm64
                          0x48, 0x01, 0xc0,                                            // add rax,rax
                          0x48, 0xa3, 0, 0, 0, 0x40, 0, 0, 0, 0,                       // mov [40000000h],rax
                          0xe6, 0xf4});                                                // out f4h,al: stop
  EXPECT_TRUE(R.Identical) << R.Report;
  EXPECT_NE(R.Report.find("long mode, 2 exits, final io"), std::string::npos) << R.Report;
}

// A guest that runs forever: each side stops at its bound and says so; not identical.
TEST(KvmBackEnd, GuestRunningForeverHitsBothBounds) {
  NEED_KVM();
  RunLimits L;
  L.MaxInsns = 100000;
  L.TimeoutMs = 300;
  XcheckResult R = check("forever", XMode::Long, {0xeb, 0xfe}, L); // jmp $
  EXPECT_FALSE(R.Identical);
  EXPECT_FALSE(R.HostProblem);
  EXPECT_NE(R.Report.find("both sides hit their bound"), std::string::npos) << R.Report;
  EXPECT_NE(R.Report.find("runs forever?"), std::string::npos) << R.Report;
}

// A difference is reported as the first differing item with both sides' state.
TEST(KvmBackEnd, DifferenceReportsBothSides) {
  NEED_KVM();
  // RDTSC differs between any two machines: EDX:EAX, then written to a port.
  XcheckResult R = check("rdtsc", XMode::Long, {0x0f, 0x31, 0xe7, 0x80, 0xf4});
  EXPECT_FALSE(R.Identical);
  EXPECT_NE(R.Report.find("exit 0: KVM out port 0x80"), std::string::npos) << R.Report;
  EXPECT_NE(R.Report.find("vmxsim:"), std::string::npos) << R.Report;
}

TEST(KvmBackEnd, MissingImageIsHostProblem) {
  // The image is looked at before /dev/kvm (issue 11): the same message with or without it.
  XcheckConfig Cfg;
  Cfg.Image = "/nonexistent/image.bin";
  XcheckResult R = runXcheck(Cfg);
  EXPECT_TRUE(R.HostProblem);
  EXPECT_EQ(R.Report, "/nonexistent/image.bin: cannot open: No such file or directory");
}

// Without a KVM device: one clear message, no run (runs even where /dev/kvm exists).
TEST(KvmBackEnd, MissingKvmDeviceIsReported) {
  // A usable image (the image is looked at first), then the missing device.
  const std::string Image = "/tmp/vmxsim_kvm_missing_" + std::to_string(getpid()) + ".bin";
  {
    std::FILE *F = std::fopen(Image.c_str(), "wb");
    ASSERT_NE(F, nullptr);
    std::fputc(0xf4, F); // hlt
    std::fclose(F);
  }
  setenv("VMXSIM_KVM_DEVICE", "/nonexistent/kvm", 1);
  XcheckConfig Cfg;
  Cfg.Image = Image;
  XcheckResult R = runXcheck(Cfg);
  unsetenv("VMXSIM_KVM_DEVICE");
  std::remove(Image.c_str());
  EXPECT_TRUE(R.HostProblem);
  EXPECT_EQ(R.Report, "xcheck needs /dev/kvm, which is not usable here (/nonexistent/kvm: No "
                      "such file or directory)");
}
