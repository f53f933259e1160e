// SDM Vol. 3C, "VMX Non-Root Operation": which instructions exit and under which
// controls, with the exact exit information each exit records (exit reason, exit
// qualification, VM-exit instruction length and information, guest-linear address,
// guest RIP) and the host state after it; and the instructions that do not exit
// behaving as "Changes to Instruction Behavior in VMX Non-Root Operation" says.
//
// Every test launches the known-good VMCS (tests/support/known_good_vmcs.h) with the
// guest code at kGuestCode and a host that executes HLT at kHostCode.
#include "tests/support/vmx_test_machine.h"

#include "cpu/msrs.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/exit_qualification.h"
#include "cpu/vmx/instruction_info.h"
#include "cpu/vmx/vm_exit.h"

#include <gtest/gtest.h>

#include <vector>

namespace vmxsim::test {
namespace {

using F = VmcsField;
using Bytes = std::vector<uint8_t>;

constexpr uint64_t kMsrBitmap = 0x310000;
constexpr uint64_t kIoBitmapA = 0x311000, kIoBitmapB = 0x312000;
constexpr uint64_t kVirtualApic = 0x313000;

/// Sets a VM-execution control in its word; a secondary control also sets "activate
/// secondary controls".
void enable(VmxTestMachine &M, VmxControl Ctl) {
  VmcsData &V = M.vmcs();
  auto Or = [&](F Field, uint32_t Bit) { V.set(Field, V.get(Field) | Bit); };
  switch (controlInfo(Ctl).Word) {
  case VmxControlWord::Pin:
    Or(F::PinBasedVmExecutionControls, controlBit(Ctl));
    break;
  case VmxControlWord::Proc:
    Or(F::PrimaryProcessorBasedVmExecutionControls, controlBit(Ctl));
    break;
  case VmxControlWord::Proc2:
    Or(F::PrimaryProcessorBasedVmExecutionControls,
       controlBit(VmxControl::ActivateSecondaryControls));
    Or(F::SecondaryProcessorBasedVmExecutionControls, controlBit(Ctl));
    break;
  case VmxControlWord::Entry:
    Or(F::VmEntryControls, controlBit(Ctl));
    break;
  default:
    FAIL() << "control word not used by these tests";
  }
}

/// Writes the guest code and a host that halts, then runs VMLAUNCH and up to MaxInsns
/// instructions after it.
StepResult launch(VmxTestMachine &M, const Bytes &Guest, uint64_t MaxInsns = 10) {
  const uint8_t Hlt = 0xf4;
  M.write(kGuestCode, Guest.data(), Guest.size());
  M.write(kHostCode, &Hlt, 1);
  return M.exec(enc::Vmlaunch, MaxInsns);
}

/// The exit information and the host state every instruction exit must leave: the
/// basic exit reason, the qualification, the instruction length and information, guest
/// RIP at the exiting instruction, and the host (at its HLT, in VMX root operation).
void expectExit(VmxTestMachine &M, const StepResult &R, ExitReason Reason, uint64_t Qual,
                uint32_t Length, uint32_t Info = 0, uint64_t GuestRip = kGuestCode) {
  const VmcsData &V = M.vmcs();
  EXPECT_FALSE(R.Faulted) << "vector " << unsigned(R.Vector);
  EXPECT_EQ(V.get(F::ExitReason), uint64_t(Reason));
  EXPECT_EQ(V.get(F::ExitQualification), Qual);
  EXPECT_EQ(V.get(F::VmExitInstructionLength), Length);
  EXPECT_EQ(V.get(F::VmExitInstructionInformation), Info);
  EXPECT_EQ(V.get(F::GuestRip), GuestRip);
  EXPECT_FALSE(M.Cpu_.NonRoot);
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_EQ(M.S.Rip, kHostCode + 1);
  EXPECT_EQ(M.S.Gpr[RSP], M.Layout.HostRsp);
  EXPECT_EQ(M.S.Cr3, M.Layout.Cr3);
}

/// Guest ran to its own HLT (no exit): still in non-root operation, past the HLT.
void expectGuestHalted(VmxTestMachine &M, const StepResult &R, uint64_t HltOffset) {
  EXPECT_FALSE(R.Faulted) << "vector " << unsigned(R.Vector);
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.S.Rip, kGuestCode + HltOffset + 1);
}

void setBit(VmxTestMachine &M, uint64_t Base, uint32_t Bit) {
  uint8_t B = uint8_t(M.Mem.read(Hpa(Base + Bit / 8), 1)) | uint8_t(1u << (Bit % 8));
  M.write(Base + Bit / 8, &B, 1);
}

uint64_t edxEax(const VmxTestMachine &M) {
  return (uint64_t(uint32_t(M.S.Gpr[RDX])) << 32) | uint32_t(M.S.Gpr[RAX]);
}

// --- Instructions that cause VM exits unconditionally --------------------------------

TEST(VmxNonRootOperation, CpuidExitsUnconditionally) {
  VmxTestMachine M;
  StepResult R = launch(M, {0x0f, 0xa2});
  expectExit(M, R, ExitReason::Cpuid, 0, 2);
}

TEST(VmxNonRootOperation, InvdExitsUnconditionally) {
  VmxTestMachine M;
  StepResult R = launch(M, {0x0f, 0x08});
  expectExit(M, R, ExitReason::Invd, 0, 2);
}

TEST(VmxNonRootOperation, XsetbvExitsUnconditionallyWithOsxsave) {
  VmxTestMachine M;
  M.vmcs().set(F::GuestCr4, M.vmcs().get(F::GuestCr4) | cr4::OSXSAVE);
  M.S.Gpr[RCX] = 5; // an invalid XCR: the exit has priority over that #GP
  StepResult R = launch(M, {0x0f, 0x01, 0xd1});
  expectExit(M, R, ExitReason::Xsetbv, 0, 3);
}

TEST(VmxNonRootOperation, XsetbvWithoutOsxsaveIsUndefinedOpcodeNotExit) {
  VmxTestMachine M;
  StepResult R = launch(M, {0x0f, 0x01, 0xd1});
  EXPECT_TRUE(R.Faulted);
  EXPECT_EQ(R.Vector, vec::UD);
}

TEST(VmxNonRootOperation, GetsecIsUndefinedOpcodeWithoutSmx) {
  VmxTestMachine M;
  StepResult R = launch(M, {0x0f, 0x37});
  EXPECT_TRUE(R.Faulted);
  EXPECT_EQ(R.Vector, vec::UD);
}

TEST(VmxNonRootOperation, XsavesIsUndefinedOpcodeOnThisModel) {
  // CPUID.(EAX=0DH,ECX=1):EAX.XSAVES[3] = 0: XSAVES and XRSTORS do not exist, so no
  // profile advertises "enable XSAVES/XRSTORS" and the guest's XSAVES is #UD.
  VmxTestMachine M;
  M.vmcs().set(F::GuestCr4, M.vmcs().get(F::GuestCr4) | cr4::OSXSAVE);
  M.S.Gpr[RAX] = kPointerSlot;
  StepResult R = launch(M, {0x0f, 0xc7, 0x28}); // xsaves [rax]
  EXPECT_TRUE(R.Faulted);
  EXPECT_EQ(R.Vector, vec::UD);
}

TEST(VmxNonRootOperation, EnableXsavesControlIsRefusedAtVmEntry) {
  // A model that does not advertise a control refuses its 1-setting at VM entry:
  // VMfailValid(7) (SDM Vol. 3C, Checks on VM-Execution Control Fields).
  VmxTestMachine M;
  enable(M, VmxControl::EnableXsavesXrstors);
  launch(M, {0xf4}, /*MaxInsns=*/1); // just the VMLAUNCH
  EXPECT_FALSE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.vmcs().get(F::VmInstructionError), 7u);
  EXPECT_EQ(M.S.Rflags & rflags::Arith, rflags::ZF);
}

/// Guest at CPL 3: user code and stack segments from TestMachine's GDT.
void makeGuestCpl3(VmxTestMachine &M) {
  VmcsData &V = M.vmcs();
  V.set(F::GuestCsSelector, kSelUserCode64);
  V.set(F::GuestCsAccessRights, 0xa0fb);
  V.set(F::GuestSsSelector, kSelUserData);
  V.set(F::GuestSsAccessRights, 0xc0f3);
  for (F Sel : {F::GuestDsSelector, F::GuestEsSelector})
    V.set(Sel, kSelUserData);
  for (F Ar : {F::GuestDsAccessRights, F::GuestEsAccessRights})
    V.set(Ar, 0xc0f3);
}

TEST(VmxNonRootOperation, PrivilegeFaultsHavePriorityOverExits) {
  // SDM Vol. 3C, "Relative Priority of Faults and VM Exits": "execution of RDMSR with
  // CPL = 3 generates a general-protection exception and not a VM exit"; likewise HLT.
  for (const Bytes &Code : {Bytes{0xf4}, Bytes{0x0f, 0x32}}) {
    VmxTestMachine M;
    enable(M, VmxControl::HltExiting);
    makeGuestCpl3(M);
    StepResult R = launch(M, Code);
    EXPECT_TRUE(R.Faulted);
    EXPECT_EQ(R.Vector, vec::GP);
    EXPECT_EQ(R.ErrorCode, 0u);
  }
}

TEST(VmxNonRootOperation, CpuidExitsAtCpl3) {
  VmxTestMachine M;
  makeGuestCpl3(M);
  StepResult R = launch(M, {0x0f, 0xa2});
  expectExit(M, R, ExitReason::Cpuid, 0, 2);
  EXPECT_EQ(M.vmcs().get(F::GuestCsSelector), kSelUserCode64);
}

// --- HLT, INVLPG, INVPCID, RDPMC, WBINVD, MWAIT/MONITOR, PAUSE ------------------------

TEST(VmxNonRootOperation, HltExitsWithHltExiting) {
  VmxTestMachine M;
  enable(M, VmxControl::HltExiting);
  StepResult R = launch(M, {0xf4});
  expectExit(M, R, ExitReason::Hlt, 0, 1);
}

TEST(VmxNonRootOperation, HltWithoutHltExitingHaltsTheGuest) {
  VmxTestMachine M;
  StepResult R = launch(M, {0xf4});
  expectGuestHalted(M, R, 0);
}

TEST(VmxNonRootOperation, InvlpgExitsWithLinearAddressQualification) {
  VmxTestMachine M;
  enable(M, VmxControl::InvlpgExiting);
  M.S.Gpr[RAX] = 0x5000;
  StepResult R = launch(M, {0x0f, 0x01, 0x78, 0x10}); // invlpg [rax + 0x10]
  expectExit(M, R, ExitReason::Invlpg, 0x5010, 4);
}

TEST(VmxNonRootOperation, InvlpgQualificationIncludesFsBase) {
  VmxTestMachine M;
  enable(M, VmxControl::InvlpgExiting);
  M.vmcs().set(F::GuestFsBase, 0x7000000);
  M.S.Gpr[RAX] = 0x123;
  StepResult R = launch(M, {0x64, 0x0f, 0x01, 0x38}); // invlpg fs:[rax]
  expectExit(M, R, ExitReason::Invlpg, 0x7000123, 4);
}

TEST(VmxNonRootOperation, InvpcidExitsWithDisplacementAndInstructionInformation) {
  VmxTestMachine M;
  enable(M, VmxControl::InvlpgExiting);
  enable(M, VmxControl::EnableInvpcid);
  M.S.Gpr[RAX] = kPointerSlot;
  StepResult R = launch(M, {0x66, 0x0f, 0x38, 0x82, 0x48, 0x08}); // invpcid rcx, [rax+8]
  // Address size 64 (2 << 7), DS (3 << 15), no index (1 << 22), base RAX, Reg2 = RCX.
  expectExit(M, R, ExitReason::Invpcid, 8, 6,
             (2u << 7) | (3u << 15) | (1u << 22) | (0u << 23) | (1u << 28));
}

TEST(VmxNonRootOperation, InvpcidWithoutEnableInvpcidIsUndefinedOpcode) {
  VmxTestMachine M;
  enable(M, VmxControl::InvlpgExiting);
  M.S.Gpr[RAX] = kPointerSlot;
  StepResult R = launch(M, {0x66, 0x0f, 0x38, 0x82, 0x48, 0x08});
  EXPECT_TRUE(R.Faulted);
  EXPECT_EQ(R.Vector, vec::UD);
}

TEST(VmxNonRootOperation, RdpmcExitsWithRdpmcExiting) {
  VmxTestMachine M;
  enable(M, VmxControl::RdpmcExiting);
  M.S.Gpr[RCX] = 0x12345; // no such counter: the exit has priority over that #GP
  StepResult R = launch(M, {0x0f, 0x33});
  expectExit(M, R, ExitReason::Rdpmc, 0, 2);
}

TEST(VmxNonRootOperation, WbinvdExitsWithWbinvdExiting) {
  VmxTestMachine M;
  enable(M, VmxControl::WbinvdExiting);
  StepResult R = launch(M, {0x0f, 0x09});
  expectExit(M, R, ExitReason::WbinvdOrWbnoinvd, 0, 2);
}

TEST(VmxNonRootOperation, WbinvdWithoutActivatedSecondaryControlsDoesNotExit) {
  VmxTestMachine M;
  VmcsData &V = M.vmcs();
  V.set(F::SecondaryProcessorBasedVmExecutionControls,
        controlBit(VmxControl::WbinvdExiting)); // ignored: secondary controls inactive
  StepResult R = launch(M, {0x0f, 0x09, 0xf4});
  expectGuestHalted(M, R, 2);
}

TEST(VmxNonRootOperation, MonitorExitsWithMonitorExitingBeforeItsGp) {
  VmxTestMachine M;
  enable(M, VmxControl::MonitorExiting);
  M.S.Gpr[RAX] = kGuestCode;
  M.S.Gpr[RCX] = 1; // an extension: #GP without the control; the exit comes first
  StepResult R = launch(M, {0x0f, 0x01, 0xc8});
  expectExit(M, R, ExitReason::Monitor, 0, 3);
}

TEST(VmxNonRootOperation, MwaitExitQualificationSaysWhetherTheMonitorIsArmed) {
  {
    VmxTestMachine M;
    enable(M, VmxControl::MwaitExiting);
    M.S.Gpr[RCX] = 2; // reserved: #GP without the control; the exit comes first
    StepResult R = launch(M, {0x0f, 0x01, 0xc9});
    expectExit(M, R, ExitReason::Mwait, 0, 3);
  }
  VmxTestMachine M;
  enable(M, VmxControl::MwaitExiting);
  M.S.Gpr[RAX] = kGuestCode;
  M.S.Gpr[RCX] = 0;
  StepResult R = launch(M, {0x0f, 0x01, 0xc8, 0x0f, 0x01, 0xc9}); // monitor; mwait
  expectExit(M, R, ExitReason::Mwait, exitqual::mwait::MonitorArmed.set(0, 1), 3, 0,
             kGuestCode + 3);
}

TEST(VmxNonRootOperation, MwaitWithoutMwaitExitingWaitsInTheGuest) {
  VmxTestMachine M;
  M.S.Gpr[RAX] = kGuestCode;
  M.S.Gpr[RCX] = 0;
  StepResult R = launch(M, {0x0f, 0x01, 0xc8, 0x0f, 0x01, 0xc9, 0xf4});
  EXPECT_FALSE(R.Faulted) << "vector " << unsigned(R.Vector);
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.S.Rip, kGuestCode + 6); // waiting after MWAIT
  EXPECT_TRUE(mwaitWaiting(M.Cpu_));
}

TEST(VmxNonRootOperation, PauseExitsWithPauseExiting) {
  VmxTestMachine M;
  enable(M, VmxControl::PauseExiting);
  StepResult R = launch(M, {0xf3, 0x90});
  expectExit(M, R, ExitReason::Pause, 0, 2);
}

// Guest loop: pause; inc rcx; jmp pause — 3 virtual cycles per iteration (one each).
const Bytes kPauseLoop{0xf3, 0x90, 0x48, 0xff, 0xc1, 0xeb, 0xf9};

TEST(VmxNonRootOperation, PauseLoopExitingExitsWhenTheLoopExceedsPleWindow) {
  VmxTestMachine M;
  enable(M, VmxControl::PauseLoopExiting);
  M.vmcs().set(F::PleGap, 3);     // 3 cycles between PAUSEs do not exceed the gap
  M.vmcs().set(F::PleWindow, 30); // PAUSE k is 3k cycles into the loop: k = 11 exits
  M.S.Gpr[RCX] = 0;
  StepResult R = launch(M, kPauseLoop, 1000);
  expectExit(M, R, ExitReason::Pause, 0, 2);
  EXPECT_EQ(M.S.Gpr[RCX], 11u);
}

TEST(VmxNonRootOperation, PauseLoopExitingNeverExitsWhenEveryPauseExceedsPleGap) {
  VmxTestMachine M;
  enable(M, VmxControl::PauseLoopExiting);
  M.vmcs().set(F::PleGap, 2); // 3 > 2: each PAUSE is the first of a new loop
  M.vmcs().set(F::PleWindow, 0);
  StepResult R = launch(M, kPauseLoop, 301);
  EXPECT_FALSE(R.Faulted);
  EXPECT_EQ(R.Why, StopReason::InsnLimit);
  EXPECT_TRUE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.S.Gpr[RCX], 100u);
}

TEST(VmxNonRootOperation, PauseLoopStartsAgainAfterVmEntry) {
  VmxTestMachine M;
  enable(M, VmxControl::PauseLoopExiting);
  M.vmcs().set(F::PleGap, 100000); // larger than the exit and entry: only VM entry resets
  M.vmcs().set(F::PleWindow, 30);
  M.S.Gpr[RCX] = 0;
  M.S.Gpr[RBX] = 0;
  // Host: inc rbx; cmp rbx, 2; je hlt; vmresume; hlt
  const Bytes Host{0x48, 0xff, 0xc3, 0x48, 0x83, 0xfb, 0x02, 0x74, 0x03, 0x0f, 0x01, 0xc3, 0xf4};
  M.write(kHostCode, Host.data(), Host.size());
  M.write(kGuestCode, kPauseLoop.data(), kPauseLoop.size());
  StepResult R = M.exec(enc::Vmlaunch, 1000);
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Pause));
  EXPECT_EQ(M.S.Gpr[RBX], 2u);
  EXPECT_EQ(M.S.Gpr[RCX], 22u); // 11 iterations in each of the two entries
}

// --- RDTSC, RDTSCP, TSC offsetting and scaling ----------------------------------------

TEST(VmxNonRootOperation, RdtscExitsWithRdtscExiting) {
  VmxTestMachine M;
  enable(M, VmxControl::RdtscExiting);
  StepResult R = launch(M, {0x0f, 0x31});
  expectExit(M, R, ExitReason::Rdtsc, 0, 2);
}

TEST(VmxNonRootOperation, RdtscpExitsWithRdtscExitingAndEnableRdtscp) {
  VmxTestMachine M;
  enable(M, VmxControl::RdtscExiting);
  enable(M, VmxControl::EnableRdtscp);
  StepResult R = launch(M, {0x0f, 0x01, 0xf9});
  expectExit(M, R, ExitReason::Rdtscp, 0, 3);
}

TEST(VmxNonRootOperation, RdtscpWithoutEnableRdtscpIsUndefinedOpcode) {
  VmxTestMachine M;
  enable(M, VmxControl::RdtscExiting);
  StepResult R = launch(M, {0x0f, 0x01, 0xf9});
  EXPECT_TRUE(R.Faulted);
  EXPECT_EQ(R.Vector, vec::UD);
}

/// Runs "rdtsc; cpuid" (or "rdmsr IA32_TSC; cpuid") in the guest of a fresh machine
/// configured by Setup, and returns EDX:EAX as the host sees it after the CPUID exit.
template <typename SetupFn> uint64_t guestTscRead(const Bytes &Read, SetupFn Setup) {
  VmxTestMachine M;
  Setup(M);
  M.S.Gpr[RCX] = msr::IA32_TIME_STAMP_COUNTER;
  Bytes Code = Read;
  Code.insert(Code.end(), {0x0f, 0xa2});
  StepResult R = launch(M, Code);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), uint64_t(ExitReason::Cpuid));
  EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode + Read.size());
  EXPECT_FALSE(R.Faulted);
  return edxEax(M);
}

TEST(VmxNonRootOperation, RdtscWithoutExitingReturnsOffsetTsc) {
  const Bytes Rdtsc{0x0f, 0x31};
  // The machines are deterministic: both read the TSC at the same virtual cycle.
  uint64_t Plain = guestTscRead(Rdtsc, [](VmxTestMachine &) {});
  uint64_t Offset = guestTscRead(Rdtsc, [](VmxTestMachine &M) {
    enable(M, VmxControl::UseTscOffsetting);
    M.vmcs().set(F::TscOffset, 0x123456789ull);
  });
  EXPECT_EQ(Offset, Plain + 0x123456789ull);
  // A negative offset (two's complement) moves the TSC back.
  uint64_t Back = guestTscRead(Rdtsc, [&](VmxTestMachine &M) {
    enable(M, VmxControl::UseTscOffsetting);
    M.vmcs().set(F::TscOffset, uint64_t(-int64_t(Plain - 5)));
  });
  EXPECT_EQ(Back, 5u);
}

TEST(VmxNonRootOperation, RdtscWithTscScalingReturnsScaledPlusOffset) {
  const Bytes Rdtsc{0x0f, 0x31};
  constexpr uint64_t Mult = 0x0001800000000000ull; // 1.5 in 16.48 fixed point
  uint64_t Plain = guestTscRead(Rdtsc, [](VmxTestMachine &) {});
  uint64_t Scaled = guestTscRead(Rdtsc, [](VmxTestMachine &M) {
    enable(M, VmxControl::UseTscOffsetting);
    enable(M, VmxControl::UseTscScaling);
    M.vmcs().set(F::TscMultiplier, Mult);
    M.vmcs().set(F::TscOffset, 1000);
  });
  EXPECT_EQ(Scaled, uint64_t((unsigned __int128)Plain * Mult >> 48) + 1000);
  EXPECT_EQ(Scaled, Plain + Plain / 2 + 1000);
  // Scaling without offsetting is not applied ("use TSC offsetting" = 0: RDTSC
  // operates normally).
  uint64_t Unscaled = guestTscRead(Rdtsc, [](VmxTestMachine &M) {
    enable(M, VmxControl::UseTscScaling);
    M.vmcs().set(F::TscMultiplier, Mult);
  });
  EXPECT_EQ(Unscaled, Plain);
}

TEST(VmxNonRootOperation, RdmsrOfTscWithoutExitReturnsOffsetTsc) {
  const Bytes Rdmsr{0x0f, 0x32};
  auto Bitmaps = [](VmxTestMachine &M) {
    enable(M, VmxControl::UseMsrBitmaps);
    M.vmcs().set(F::MsrBitmapsAddress, kMsrBitmap); // all clear: nothing exits
  };
  uint64_t Plain = guestTscRead(Rdmsr, Bitmaps);
  uint64_t Offset = guestTscRead(Rdmsr, [&](VmxTestMachine &M) {
    Bitmaps(M);
    enable(M, VmxControl::UseTscOffsetting);
    M.vmcs().set(F::TscOffset, 0x10000);
  });
  EXPECT_EQ(Offset, Plain + 0x10000);
}

// --- RDMSR, WRMSR and the MSR bitmaps ----------------------------------------------

TEST(VmxNonRootOperation, RdmsrExitsWithoutMsrBitmaps) {
  VmxTestMachine M;
  M.S.Gpr[RCX] = msr::IA32_TIME_STAMP_COUNTER;
  StepResult R = launch(M, {0x0f, 0x32});
  expectExit(M, R, ExitReason::Rdmsr, 0, 2);
}

TEST(VmxNonRootOperation, RdmsrOfNonexistentMsrExitsInsteadOfGeneralProtection) {
  VmxTestMachine M;
  enable(M, VmxControl::UseMsrBitmaps);
  M.vmcs().set(F::MsrBitmapsAddress, kMsrBitmap);
  M.S.Gpr[RCX] = 0x40000000; // outside both bitmap ranges: always exits
  StepResult R = launch(M, {0x0f, 0x32});
  expectExit(M, R, ExitReason::Rdmsr, 0, 2);
}

TEST(VmxNonRootOperation, RdmsrWithBitmapBitClearExecutes) {
  VmxTestMachine M;
  enable(M, VmxControl::UseMsrBitmaps);
  M.vmcs().set(F::MsrBitmapsAddress, kMsrBitmap);
  (*M.Cpu_.Msrs)[MsrSlot::IA32_TSC_AUX] = 0xabcd;
  setBit(M, kMsrBitmap + 2048 + 1024, 0x103); // the WRITE bit: reads are unaffected
  M.S.Gpr[RCX] = msr::IA32_TSC_AUX;
  StepResult R = launch(M, {0x0f, 0x32, 0xf4});
  expectGuestHalted(M, R, 2);
  EXPECT_EQ(M.S.Gpr[RAX], 0xabcdu);
  EXPECT_EQ(M.S.Gpr[RDX], 0u);
}

TEST(VmxNonRootOperation, RdmsrWithHighReadBitmapBitSetExits) {
  VmxTestMachine M;
  enable(M, VmxControl::UseMsrBitmaps);
  M.vmcs().set(F::MsrBitmapsAddress, kMsrBitmap);
  setBit(M, kMsrBitmap + 1024, 0x103); // read bitmap for high MSRs
  M.S.Gpr[RCX] = msr::IA32_TSC_AUX;
  StepResult R = launch(M, {0x0f, 0x32});
  expectExit(M, R, ExitReason::Rdmsr, 0, 2);
}

TEST(VmxNonRootOperation, WrmsrWithLowWriteBitmapBitSetExitsBeforeValueChecks) {
  VmxTestMachine M;
  enable(M, VmxControl::UseMsrBitmaps);
  M.vmcs().set(F::MsrBitmapsAddress, kMsrBitmap);
  setBit(M, kMsrBitmap + 2048, msr::IA32_PAT);
  M.S.Gpr[RCX] = msr::IA32_PAT;
  M.S.Gpr[RAX] = 0x02020202; // an invalid PAT type: the exit comes before the #GP
  M.S.Gpr[RDX] = 0;
  StepResult R = launch(M, {0x0f, 0x30});
  expectExit(M, R, ExitReason::Wrmsr, 0, 2);
}

TEST(VmxNonRootOperation, WrmsrWithWriteBitmapBitClearExecutes) {
  VmxTestMachine M;
  enable(M, VmxControl::UseMsrBitmaps);
  M.vmcs().set(F::MsrBitmapsAddress, kMsrBitmap);
  setBit(M, kMsrBitmap + 1024, 0x103); // the READ bit: writes are unaffected
  M.S.Gpr[RCX] = msr::IA32_TSC_AUX;
  M.S.Gpr[RAX] = 0x77;
  M.S.Gpr[RDX] = 0;
  StepResult R = launch(M, {0x0f, 0x30, 0xf4});
  expectGuestHalted(M, R, 2);
  EXPECT_EQ((*M.Cpu_.Msrs)[MsrSlot::IA32_TSC_AUX], 0x77u);
}

// --- RDRAND, RDSEED ----------------------------------------------------------------

TEST(VmxNonRootOperation, RdrandExitsWithDestinationAndOperandSize) {
  VmxTestMachine M;
  enable(M, VmxControl::RdrandExiting);
  StepResult R = launch(M, {0x0f, 0xc7, 0xf0}); // rdrand eax
  expectExit(M, R, ExitReason::Rdrand, 0, 3, (0u << 3) | (1u << 11));
  VmxTestMachine M64;
  enable(M64, VmxControl::RdrandExiting);
  R = launch(M64, {0x49, 0x0f, 0xc7, 0xf1}); // rdrand r9
  expectExit(M64, R, ExitReason::Rdrand, 0, 4, (9u << 3) | (2u << 11));
}

TEST(VmxNonRootOperation, RdseedExitsWithRdseedExiting) {
  VmxTestMachine M;
  enable(M, VmxControl::RdseedExiting);
  enable(M, VmxControl::RdrandExiting);
  StepResult R = launch(M, {0x66, 0x0f, 0xc7, 0xfb}); // rdseed bx
  expectExit(M, R, ExitReason::Rdseed, 0, 4, (3u << 3) | (0u << 11));
}

TEST(VmxNonRootOperation, RdrandWithoutExitingReturnsDeterministicValueAndSetsCf) {
  uint64_t Values[2];
  for (uint64_t &V : Values) {
    VmxTestMachine M;
    M.vmcs().set(F::GuestRflags, 0x2 | rflags::ZF | rflags::OF);
    StepResult R = launch(M, {0x48, 0x0f, 0xc7, 0xf0, 0xf4}); // rdrand rax; hlt
    expectGuestHalted(M, R, 4);
    V = M.S.Gpr[RAX];
    EXPECT_EQ(M.S.Rflags & rflags::Arith, rflags::CF);
  }
  EXPECT_EQ(Values[0], Values[1]);
  EXPECT_NE(Values[0], 0u);
}

// --- Descriptor-table exiting ------------------------------------------------------

TEST(VmxNonRootOperation, SgdtExitsWithDisplacementAndInstructionInformation) {
  VmxTestMachine M;
  enable(M, VmxControl::DescriptorTableExiting);
  M.S.Gpr[RAX] = kPointerSlot;
  StepResult R = launch(M, {0x0f, 0x01, 0x40, 0x20}); // sgdt [rax + 0x20]
  // Address size 64, operand size 32 (bit 11), DS, no index, base RAX, identity SGDT.
  expectExit(M, R, ExitReason::AccessToGdtrOrIdtr, 0x20, 4,
             (2u << 7) | (1u << 11) | (3u << 15) | (1u << 22) | (0u << 23) | (0u << 28));
}

TEST(VmxNonRootOperation, LidtExitsWithScaledIndexInstructionInformation) {
  VmxTestMachine M;
  enable(M, VmxControl::DescriptorTableExiting);
  M.S.Gpr[RBX] = kPointerSlot;
  M.S.Gpr[RSI] = 0;
  // lidt [rbx + rsi*4 + 0x100]
  StepResult R = launch(M, {0x0f, 0x01, 0x9c, 0xb3, 0x00, 0x01, 0x00, 0x00});
  expectExit(M, R, ExitReason::AccessToGdtrOrIdtr, 0x100, 8,
             2u | (2u << 7) | (1u << 11) | (3u << 15) | (6u << 18) | (3u << 23) |
                 (3u << 28));
  EXPECT_EQ(M.vmcs().get(F::GuestIdtrBase), M.Layout.IdtBase); // not loaded
}

TEST(VmxNonRootOperation, LgdtRipRelativeQualificationIsTheOperandAddress) {
  VmxTestMachine M;
  enable(M, VmxControl::DescriptorTableExiting);
  StepResult R = launch(M, {0x0f, 0x01, 0x15, 0x40, 0x00, 0x00, 0x00}); // lgdt [rip+0x40]
  expectExit(M, R, ExitReason::AccessToGdtrOrIdtr, kGuestCode + 7 + 0x40, 7,
             (2u << 7) | (1u << 11) | (3u << 15) | (1u << 22) | (1u << 27) | (2u << 28));
}

TEST(VmxNonRootOperation, LldtRegisterFormExitsWithReg1) {
  VmxTestMachine M;
  enable(M, VmxControl::DescriptorTableExiting);
  StepResult R = launch(M, {0x0f, 0x00, 0xd0}); // lldt ax
  expectExit(M, R, ExitReason::AccessToLdtrOrTr, 0, 3, (0u << 3) | (1u << 10) | (2u << 28));
}

TEST(VmxNonRootOperation, LtrAndStrAndSldtExitWithTheirIdentities) {
  {
    VmxTestMachine M;
    enable(M, VmxControl::DescriptorTableExiting);
    StepResult R = launch(M, {0x0f, 0x00, 0xd9}); // ltr cx
    expectExit(M, R, ExitReason::AccessToLdtrOrTr, 0, 3, (1u << 3) | (1u << 10) | (3u << 28));
  }
  {
    VmxTestMachine M;
    enable(M, VmxControl::DescriptorTableExiting);
    M.S.Gpr[RAX] = kPointerSlot;
    StepResult R = launch(M, {0x0f, 0x00, 0x08}); // str [rax]
    expectExit(M, R, ExitReason::AccessToLdtrOrTr, 0, 3,
               (2u << 7) | (3u << 15) | (1u << 22) | (0u << 23) | (1u << 28));
  }
  {
    VmxTestMachine M;
    enable(M, VmxControl::DescriptorTableExiting);
    M.S.Gpr[RBP] = kPointerSlot;
    StepResult R = launch(M, {0x0f, 0x00, 0x45, 0xf8}); // sldt [rbp - 8]
    // Displacement -8 sign-extended; SS is the default segment of an RBP base.
    expectExit(M, R, ExitReason::AccessToLdtrOrTr, ~uint64_t(7), 4,
               (2u << 7) | (2u << 15) | (1u << 22) | (5u << 23) | (0u << 28));
  }
}

TEST(VmxNonRootOperation, SgdtWithoutDescriptorTableExitingStoresGdtr) {
  VmxTestMachine M;
  M.S.Gpr[RAX] = kPointerSlot;
  StepResult R = launch(M, {0x0f, 0x01, 0x00, 0xf4}); // sgdt [rax]; hlt
  expectGuestHalted(M, R, 3);
  EXPECT_EQ(M.read64(kPointerSlot) & 0xffff, M.Layout.GdtLimit);
  EXPECT_EQ(M.read64(kPointerSlot + 2), M.Layout.GdtBase);
}

// --- Control-register accesses -------------------------------------------------------

using exitqual::CrAccessType;
uint64_t crQual(unsigned Cr, CrAccessType Type, unsigned Gpr) {
  return Cr | (uint64_t(Type) << 4) | (uint64_t(Gpr) << 8);
}

TEST(VmxNonRootOperation, MovToCr0ExitsWhenAMaskedBitDiffersFromTheShadow) {
  VmxTestMachine M;
  M.vmcs().set(F::Cr0GuestHostMask, cr0::MP);
  M.vmcs().set(F::Cr0ReadShadow, 0);
  M.S.Gpr[RBX] = kKnownGoodCr0 | cr0::MP; // the shadow says MP = 0
  StepResult R = launch(M, {0x0f, 0x22, 0xc3}); // mov cr0, rbx
  expectExit(M, R, ExitReason::ControlRegisterAccesses, crQual(0, CrAccessType::MovToCr, RBX),
             3);
  EXPECT_EQ(M.vmcs().get(F::GuestCr0), kKnownGoodCr0);
}

TEST(VmxNonRootOperation, MovToCr0MatchingTheShadowChangesOnlyGuestOwnedBits) {
  VmxTestMachine M;
  VmcsData &V = M.vmcs();
  V.set(F::GuestCr0, kKnownGoodCr0 & ~cr0::MP); // real MP = 0
  V.set(F::Cr0GuestHostMask, cr0::MP);
  V.set(F::Cr0ReadShadow, cr0::MP); // the guest believes MP = 1
  M.S.Gpr[RBX] = kKnownGoodCr0 | cr0::MP | cr0::TS;
  // mov cr0, rbx; mov rax, cr0; cpuid
  StepResult R = launch(M, {0x0f, 0x22, 0xc3, 0x0f, 0x20, 0xc0, 0x0f, 0xa2});
  expectExit(M, R, ExitReason::Cpuid, 0, 2, 0, kGuestCode + 6);
  EXPECT_EQ(V.get(F::GuestCr0), (kKnownGoodCr0 & ~cr0::MP) | cr0::TS); // MP is the host's
  EXPECT_EQ(M.S.Gpr[RAX], kKnownGoodCr0 | cr0::MP | cr0::TS);          // read via shadow
}

TEST(VmxNonRootOperation, MovToCr0ClearingAVmxFixedBitIsGeneralProtection) {
  VmxTestMachine M;
  M.S.Gpr[RBX] = kKnownGoodCr0 & ~cr0::NE; // not masked, but fixed to 1 in VMX operation
  StepResult R = launch(M, {0x0f, 0x22, 0xc3});
  EXPECT_TRUE(R.Faulted);
  EXPECT_EQ(R.Vector, vec::GP);
  EXPECT_EQ(R.ErrorCode, 0u);
}

TEST(VmxNonRootOperation, MovToCr4HidesVmxeThroughMaskAndShadow) {
  VmxTestMachine M;
  VmcsData &V = M.vmcs();
  V.set(F::Cr4GuestHostMask, cr4::VMXE);
  V.set(F::Cr4ReadShadow, 0);
  M.S.Gpr[RBX] = (kKnownGoodCr4 & ~cr4::VMXE) | cr4::PGE;
  // mov cr4, rbx; mov rax, cr4; cpuid
  StepResult R = launch(M, {0x0f, 0x22, 0xe3, 0x0f, 0x20, 0xe0, 0x0f, 0xa2});
  expectExit(M, R, ExitReason::Cpuid, 0, 2, 0, kGuestCode + 6);
  EXPECT_EQ(V.get(F::GuestCr4), kKnownGoodCr4 | cr4::PGE);
  EXPECT_EQ(M.S.Gpr[RAX], (kKnownGoodCr4 & ~cr4::VMXE) | cr4::PGE);
}

TEST(VmxNonRootOperation, MovToCr4SettingAShadowedBitExits) {
  VmxTestMachine M;
  M.vmcs().set(F::Cr4GuestHostMask, cr4::VMXE);
  M.vmcs().set(F::Cr4ReadShadow, 0);
  M.S.Gpr[RBX] = kKnownGoodCr4;
  StepResult R = launch(M, {0x0f, 0x22, 0xe3}); // mov cr4, rbx
  expectExit(M, R, ExitReason::ControlRegisterAccesses, crQual(4, CrAccessType::MovToCr, RBX),
             3);
}

TEST(VmxNonRootOperation, MovToCr3ExitsWithCr3LoadExitingUnlessTheValueIsATarget) {
  VmxTestMachine M;
  VmcsData &V = M.vmcs();
  V.set(F::PrimaryProcessorBasedVmExecutionControls,
        V.get(F::PrimaryProcessorBasedVmExecutionControls) |
            controlBit(VmxControl::Cr3LoadExiting));
  V.set(F::Cr3TargetCount, 2);
  V.set(F::Cr3TargetValue0, 0x50000);
  V.set(F::Cr3TargetValue1, M.Layout.Cr3);
  V.set(F::Cr3TargetValue2, 0x60000); // beyond the count: not a target
  M.S.Gpr[RDX] = M.Layout.Cr3;
  M.S.Gpr[RSI] = 0x60000;
  // mov cr3, rdx (a target: executes); mov cr3, rsi (exits)
  StepResult R = launch(M, {0x0f, 0x22, 0xda, 0x0f, 0x22, 0xde});
  expectExit(M, R, ExitReason::ControlRegisterAccesses, crQual(3, CrAccessType::MovToCr, RSI),
             3, 0, kGuestCode + 3);
  EXPECT_EQ(V.get(F::GuestCr3), M.Layout.Cr3);
}

TEST(VmxNonRootOperation, MovFromCr3ExitsWithCr3StoreExiting) {
  VmxTestMachine M;
  enable(M, VmxControl::Cr3StoreExiting);
  StepResult R = launch(M, {0x0f, 0x20, 0xde}); // mov rsi, cr3
  expectExit(M, R, ExitReason::ControlRegisterAccesses,
             crQual(3, CrAccessType::MovFromCr, RSI), 3);
}

TEST(VmxNonRootOperation, MovCr8ExitsWithCr8LoadAndStoreExiting) {
  {
    VmxTestMachine M;
    enable(M, VmxControl::Cr8LoadExiting);
    StepResult R = launch(M, {0x44, 0x0f, 0x22, 0xc0}); // mov cr8, rax
    expectExit(M, R, ExitReason::ControlRegisterAccesses,
               crQual(8, CrAccessType::MovToCr, RAX), 4);
  }
  {
    VmxTestMachine M;
    enable(M, VmxControl::Cr8StoreExiting);
    StepResult R = launch(M, {0x4c, 0x0f, 0x20, 0xc1}); // mov rcx, cr8 (REX.R: CR8)
    expectExit(M, R, ExitReason::ControlRegisterAccesses,
               crQual(8, CrAccessType::MovFromCr, RCX), 4);
  }
}

void setUpTprShadow(VmxTestMachine &M, uint32_t Vtpr, uint32_t Threshold) {
  enable(M, VmxControl::UseTprShadow);
  M.vmcs().set(F::VirtualApicAddress, kVirtualApic);
  M.vmcs().set(F::TprThreshold, Threshold);
  M.write(kVirtualApic + 0x80, &Vtpr, 4);
}

TEST(VmxNonRootOperation, TprShadowVirtualizesMovFromAndToCr8) {
  VmxTestMachine M;
  setUpTprShadow(M, 0x5c, 0);
  M.S.Cr8 = 0xf;
  M.S.Gpr[RCX] = 0x9;
  // mov rax, cr8; mov cr8, rcx; hlt
  StepResult R = launch(M, {0x44, 0x0f, 0x20, 0xc0, 0x44, 0x0f, 0x22, 0xc1, 0xf4});
  expectGuestHalted(M, R, 8);
  EXPECT_EQ(M.S.Gpr[RAX], 0x5u);
  EXPECT_EQ(M.Mem.read(Hpa(kVirtualApic + 0x80), 4), 0x90u);
  EXPECT_EQ(M.S.Cr8, 0xfu); // the real TPR is untouched
}

TEST(VmxNonRootOperation, MovToCr8BelowTprThresholdCausesTrapLikeExit) {
  VmxTestMachine M;
  setUpTprShadow(M, 0x50, 4);
  M.S.Gpr[RCX] = 3;
  StepResult R = launch(M, {0x44, 0x0f, 0x22, 0xc1, 0xf4}); // mov cr8, rcx
  // Trap-like: guest RIP is past the instruction; no qualification or length.
  expectExit(M, R, ExitReason::TprBelowThreshold, 0, 0, 0, kGuestCode + 4);
  EXPECT_EQ(M.Mem.read(Hpa(kVirtualApic + 0x80), 4), 0x30u);
}

TEST(VmxNonRootOperation, MovToCr8AtTprThresholdDoesNotExit) {
  VmxTestMachine M;
  setUpTprShadow(M, 0x50, 4);
  M.S.Gpr[RCX] = 4;
  StepResult R = launch(M, {0x44, 0x0f, 0x22, 0xc1, 0xf4});
  expectGuestHalted(M, R, 4);
  EXPECT_EQ(M.Mem.read(Hpa(kVirtualApic + 0x80), 4), 0x40u);
}

TEST(VmxNonRootOperation, CltsExitsWhenTsIsHostOwnedAndShadowTsIsSet) {
  VmxTestMachine M;
  M.vmcs().set(F::Cr0GuestHostMask, cr0::TS);
  M.vmcs().set(F::Cr0ReadShadow, cr0::TS);
  StepResult R = launch(M, {0x0f, 0x06});
  expectExit(M, R, ExitReason::ControlRegisterAccesses, crQual(0, CrAccessType::Clts, 0), 2);
}

TEST(VmxNonRootOperation, CltsLeavesHostOwnedTsWhenShadowTsIsClear) {
  VmxTestMachine M;
  VmcsData &V = M.vmcs();
  V.set(F::GuestCr0, kKnownGoodCr0 | cr0::TS);
  V.set(F::Cr0GuestHostMask, cr0::TS);
  V.set(F::Cr0ReadShadow, 0);
  StepResult R = launch(M, {0x0f, 0x06, 0x0f, 0xa2}); // clts; cpuid
  expectExit(M, R, ExitReason::Cpuid, 0, 2, 0, kGuestCode + 2);
  EXPECT_EQ(V.get(F::GuestCr0), kKnownGoodCr0 | cr0::TS);
}

TEST(VmxNonRootOperation, CltsWithGuestOwnedTsClearsIt) {
  VmxTestMachine M;
  VmcsData &V = M.vmcs();
  V.set(F::GuestCr0, kKnownGoodCr0 | cr0::TS);
  StepResult R = launch(M, {0x0f, 0x06, 0x0f, 0xa2});
  expectExit(M, R, ExitReason::Cpuid, 0, 2, 0, kGuestCode + 2);
  EXPECT_EQ(V.get(F::GuestCr0), kKnownGoodCr0);
}

TEST(VmxNonRootOperation, LmswRegisterExitsWithSourceData) {
  VmxTestMachine M;
  M.vmcs().set(F::Cr0GuestHostMask, cr0::MP);
  M.vmcs().set(F::Cr0ReadShadow, cr0::MP);
  M.S.Gpr[RAX] = 0xfff1; // MP = 0 differs from the shadow
  StepResult R = launch(M, {0x0f, 0x01, 0xf0}); // lmsw ax
  expectExit(M, R, ExitReason::ControlRegisterAccesses,
             (3u << 4) | (0u << 6) | (0xfff1ull << 16), 3);
}

TEST(VmxNonRootOperation, LmswMemoryExitsWithGuestLinearAddress) {
  VmxTestMachine M;
  M.vmcs().set(F::Cr0GuestHostMask, cr0::TS);
  M.vmcs().set(F::Cr0ReadShadow, 0);
  uint16_t Src = 0x000b; // PE MP TS
  M.write(kPointerSlot + 6, &Src, 2);
  M.S.Gpr[RAX] = kPointerSlot;
  StepResult R = launch(M, {0x0f, 0x01, 0x70, 0x06}); // lmsw [rax + 6]
  expectExit(M, R, ExitReason::ControlRegisterAccesses,
             (3u << 4) | (1u << 6) | (0xbull << 16), 4);
  EXPECT_EQ(M.vmcs().get(F::GuestLinearAddress), kPointerSlot + 6);
}

TEST(VmxNonRootOperation, LmswSettingMaskedPeOnlyWhenShadowPeIsClearExits) {
  // PE set in mask and source but also in the shadow: no exit, CR0 unchanged there.
  VmxTestMachine M;
  VmcsData &V = M.vmcs();
  V.set(F::Cr0GuestHostMask, cr0::PE | cr0::TS);
  V.set(F::Cr0ReadShadow, cr0::PE);
  M.S.Gpr[RAX] = 0x3; // PE MP, TS = 0 matches the shadow
  StepResult R = launch(M, {0x0f, 0x01, 0xf0, 0x0f, 0xa2}); // lmsw ax; cpuid
  expectExit(M, R, ExitReason::Cpuid, 0, 2, 0, kGuestCode + 3);
  EXPECT_EQ(V.get(F::GuestCr0), kKnownGoodCr0);
}

TEST(VmxNonRootOperation, SmswReadsCr0ThroughTheShadow) {
  VmxTestMachine M;
  M.vmcs().set(F::Cr0GuestHostMask, cr0::TS | cr0::MP);
  M.vmcs().set(F::Cr0ReadShadow, cr0::TS);
  StepResult R = launch(M, {0x48, 0x0f, 0x01, 0xe0, 0xf4}); // smsw rax; hlt
  expectGuestHalted(M, R, 4);
  EXPECT_EQ(M.S.Gpr[RAX], (kKnownGoodCr0 & ~cr0::MP) | cr0::TS);
}

// --- MOV DR ------------------------------------------------------------------------

TEST(VmxNonRootOperation, MovDrExitsWithDirectionAndRegister) {
  {
    VmxTestMachine M;
    enable(M, VmxControl::MovDrExiting);
    StepResult R = launch(M, {0x0f, 0x23, 0xf8}); // mov dr7, rax
    expectExit(M, R, ExitReason::MovDr, 7 | (0u << 4) | (0u << 8), 3);
  }
  {
    VmxTestMachine M;
    enable(M, VmxControl::MovDrExiting);
    StepResult R = launch(M, {0x0f, 0x21, 0xf1}); // mov rcx, dr6
    expectExit(M, R, ExitReason::MovDr, 6 | (1u << 4) | (1u << 8), 3);
  }
}

TEST(VmxNonRootOperation, MovDrExitHasPriorityOverGeneralDetectAndDr4UndefinedOpcode) {
  {
    VmxTestMachine M;
    enable(M, VmxControl::MovDrExiting);
    enable(M, VmxControl::LoadDebugControls);
    M.vmcs().set(F::GuestDr7, 0x2400); // DR7.GD
    StepResult R = launch(M, {0x0f, 0x21, 0xf1});
    expectExit(M, R, ExitReason::MovDr, 6 | (1u << 4) | (1u << 8), 3);
  }
  {
    VmxTestMachine M;
    enable(M, VmxControl::MovDrExiting);
    M.vmcs().set(F::GuestCr4, M.vmcs().get(F::GuestCr4) | cr4::DE);
    StepResult R = launch(M, {0x0f, 0x21, 0xe0}); // mov rax, dr4
    expectExit(M, R, ExitReason::MovDr, 4 | (1u << 4) | (0u << 8), 3);
  }
}

// --- I/O instructions ---------------------------------------------------------------

class RecordingPort : public PortDevice {
public:
  uint32_t ioRead(uint16_t Port, unsigned SizeBytes) override {
    Log.push_back({Port, SizeBytes, false});
    return 0x5a;
  }
  void ioWrite(uint16_t Port, unsigned SizeBytes, uint32_t) override {
    Log.push_back({Port, SizeBytes, true});
  }
  struct Access {
    uint16_t Port;
    unsigned SizeBytes;
    bool Write;
  };
  std::vector<Access> Log;
};

TEST(VmxNonRootOperation, OutImmediateExitsWithUnconditionalIoExiting) {
  VmxTestMachine M;
  enable(M, VmxControl::UnconditionalIoExiting);
  StepResult R = launch(M, {0xe6, 0x80}); // out 0x80, al
  expectExit(M, R, ExitReason::IoInstruction, (0u << 0) | (0u << 3) | (1u << 6) | (0x80ull << 16),
             2);
}

TEST(VmxNonRootOperation, InDxExitsWithSizeDirectionAndPort) {
  VmxTestMachine M;
  enable(M, VmxControl::UnconditionalIoExiting);
  M.S.Gpr[RDX] = 0x3f8;
  StepResult R = launch(M, {0x66, 0xed}); // in ax, dx
  expectExit(M, R, ExitReason::IoInstruction, 1u | (1u << 3) | (0x3f8ull << 16), 2);
  EXPECT_EQ(M.vmcs().get(F::GuestLinearAddress), 0u);
}

TEST(VmxNonRootOperation, RepOutsbExitsWithLinearAddressAndInstructionInformation) {
  VmxTestMachine M;
  enable(M, VmxControl::UnconditionalIoExiting);
  M.S.Gpr[RDX] = 0xe9;
  M.S.Gpr[RSI] = 0x4000;
  M.S.Gpr[RCX] = 3;
  M.vmcs().set(F::GuestFsBase, 0x1000000);
  StepResult R = launch(M, {0x64, 0xf3, 0x6e}); // rep outsb fs:[rsi]
  expectExit(M, R, ExitReason::IoInstruction,
             0u | (0u << 3) | (1u << 4) | (1u << 5) | (0xe9ull << 16), 3,
             (2u << 7) | (4u << 15));
  EXPECT_EQ(M.vmcs().get(F::GuestLinearAddress), 0x1004000u);
  EXPECT_EQ(M.S.Gpr[RCX], 3u); // nothing was transferred
}

TEST(VmxNonRootOperation, InsdExitsWithEsDiLinearAddress) {
  VmxTestMachine M;
  enable(M, VmxControl::UnconditionalIoExiting);
  M.S.Gpr[RDX] = 0x60;
  M.S.Gpr[RDI] = 0x8000;
  StepResult R = launch(M, {0x67, 0x6d}); // insd with 32-bit addressing
  expectExit(M, R, ExitReason::IoInstruction, 3u | (1u << 3) | (1u << 4) | (0x60ull << 16), 2,
             (1u << 7) | (0u << 15));
  EXPECT_EQ(M.vmcs().get(F::GuestLinearAddress), 0x8000u);
}

TEST(VmxNonRootOperation, IoBitmapBitClearLetsTheDeviceSeeTheAccess) {
  VmxTestMachine M;
  RecordingPort Dev;
  M.Io.add(0x70, 2, &Dev);
  enable(M, VmxControl::UseIoBitmaps);
  enable(M, VmxControl::UnconditionalIoExiting); // ignored with I/O bitmaps
  M.vmcs().set(F::IoBitmapAAddress, kIoBitmapA);
  M.vmcs().set(F::IoBitmapBAddress, kIoBitmapB);
  setBit(M, kIoBitmapA, 0x71);
  // in al, 0x70 (allowed); in al, 0x71 (exits)
  StepResult R = launch(M, {0xe4, 0x70, 0xe4, 0x71});
  expectExit(M, R, ExitReason::IoInstruction, (1u << 3) | (1u << 6) | (0x71ull << 16), 2, 0,
             kGuestCode + 2);
  ASSERT_EQ(Dev.Log.size(), 1u);
  EXPECT_EQ(Dev.Log[0].Port, 0x70);
  EXPECT_FALSE(Dev.Log[0].Write);
  EXPECT_EQ(M.S.Gpr[RAX] & 0xff, 0x5au);
}

TEST(VmxNonRootOperation, MultiByteIoChecksEveryPortAcrossBitmapsAAndB) {
  VmxTestMachine M;
  enable(M, VmxControl::UseIoBitmaps);
  M.vmcs().set(F::IoBitmapAAddress, kIoBitmapA);
  M.vmcs().set(F::IoBitmapBAddress, kIoBitmapB);
  setBit(M, kIoBitmapB, 0x8001 - 0x8000);
  M.S.Gpr[RDX] = 0x7fff;
  StepResult R = launch(M, {0xed}); // in eax, dx: ports 7FFFH-8002H
  expectExit(M, R, ExitReason::IoInstruction, 3u | (1u << 3) | (0x7fffull << 16), 1);
}

TEST(VmxNonRootOperation, IoWrappingPastPortFfffExitsWithIoBitmaps) {
  VmxTestMachine M;
  enable(M, VmxControl::UseIoBitmaps);
  M.vmcs().set(F::IoBitmapAAddress, kIoBitmapA);
  M.vmcs().set(F::IoBitmapBAddress, kIoBitmapB);
  M.S.Gpr[RDX] = 0xffff;
  StepResult R = launch(M, {0x66, 0xef}); // out dx, ax: ports FFFFH and 0000H
  expectExit(M, R, ExitReason::IoInstruction, 1u | (0u << 3) | (0xffffull << 16), 2);
}

TEST(VmxNonRootOperation, IoWithoutIoExitingControlsReachesTheDevice) {
  VmxTestMachine M;
  RecordingPort Dev;
  M.Io.add(0x70, 2, &Dev);
  M.S.Gpr[RAX] = 0x11;
  StepResult R = launch(M, {0xe6, 0x71, 0xf4}); // out 0x71, al; hlt
  expectGuestHalted(M, R, 2);
  ASSERT_EQ(Dev.Log.size(), 1u);
  EXPECT_EQ(Dev.Log[0].Port, 0x71);
  EXPECT_TRUE(Dev.Log[0].Write);
}

// --- Bit-layout tables --------------------------------------------------------------

TEST(VmxNonRootOperation, BitLayoutTablesMatchTheSdmPositions) {
  EXPECT_EQ(exitqual::cr_access::LmswSourceData.mask(), 0xffff0000u);
  EXPECT_EQ(exitqual::io::PortNumber.set(0, 0x1f0), 0x1f00000u);
  EXPECT_EQ(exitqual::mov_dr::GeneralPurposeRegister.get(0xf00), 15u);
  EXPECT_EQ(insninfo::memory_operand::BaseRegInvalid.mask(), 1u << 27);
  EXPECT_EQ(insninfo::ldtr_tr::InstructionIdentity.set(0, 3), 3u << 28);
  EXPECT_EQ(insninfo::invalidation::Reg2.mask(), 0xf0000000u);
}

} // namespace
} // namespace vmxsim::test
