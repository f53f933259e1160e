// SDM Vol. 3C, "VM Exits" (the transition parts): a VM entry with the known-good VMCS,
// a VMCALL exit with exact exit information and host state, VMRESUME after the host
// advances guest RIP, VMX-instruction exits with instruction information, VM-entry
// failure due to MSR loading, and VMX abort on a failing VM-exit MSR load; the MSR-list
// limit of IA32_VMX_MISC[27:25].
#include "tests/support/vmx_test_machine.h"

#include "cpu/cost_model.h"
#include "cpu/msrs.h"
#include "cpu/observer.h"
#include "cpu/vmx/capabilities.h"
#include "cpu/vmx/vm_exit.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace vmxsim::test {
namespace {

using F = VmcsField;

/// Guest: VMCALL at kGuestCode; host (at kHostCode): HLT.
void loadGuestAndHost(VmxTestMachine &M, const std::vector<uint8_t> &Guest,
                      const std::vector<uint8_t> &Host) {
  M.write(kGuestCode, Guest.data(), Guest.size());
  M.write(kHostCode, Host.data(), Host.size());
}

TEST(VmExits, VmcallExitSavesGuestRipAndLoadsHostState) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
  M.S.Rflags |= rflags::Arith;
  M.S.seg(SegReg::FS).Base = 0x1234;
  M.vmcs().set(F::HostFsBase, 0x777000);
  M.vmcs().set(F::GuestRflags, 0x2 | rflags::CF);
  uint64_t Cycles0 = M.Cpu_.Cycles;
  StepResult R = M.exec(enc::Vmlaunch, 10);
  EXPECT_FALSE(R.Faulted);
  EXPECT_EQ(R.Why, StopReason::Halted);
  VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), 18u);
  EXPECT_EQ(V.get(F::ExitQualification), 0u);
  EXPECT_EQ(V.get(F::VmExitInstructionLength), 3u);
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode);
  EXPECT_EQ(V.get(F::GuestRsp), M.Layout.GuestRsp);
  EXPECT_EQ(V.get(F::GuestRflags), 0x2u | rflags::CF);
  EXPECT_EQ(V.get(F::GuestCsAccessRights), 0xa09bu);
  EXPECT_EQ(V.get(F::GuestLdtrAccessRights), 0x10000u);
  EXPECT_EQ(V.get(F::GuestTrAccessRights), 0x8bu);
  EXPECT_EQ(V.get(F::GuestInterruptibilityState), 0u);
  EXPECT_EQ(V.get(F::GuestActivityState), 0u);
  EXPECT_EQ(M.vmx().CurrentLaunch, LaunchState::Launched);
  EXPECT_EQ(M.read64(kVmcsRegion + vmcs_layout::LaunchStateOffset) & 0xffffffff, 1u);
  // Host state (SDM Vol. 3C, "Loading Host State"); RIP is past the host's HLT.
  EXPECT_FALSE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.S.Rip, kHostCode + 1);
  EXPECT_EQ(M.S.Gpr[RSP], M.Layout.HostRsp);
  EXPECT_EQ(M.S.Rflags, 0x2u);
  EXPECT_EQ(M.S.Cr0, kKnownGoodCr0);
  EXPECT_EQ(M.S.Cr3, M.Layout.Cr3);
  EXPECT_EQ(M.S.Cr4, kKnownGoodCr4);
  EXPECT_EQ(M.S.Dr[7], 0x400u);
  EXPECT_EQ(M.S.Efer & (efer::LMA | efer::LME), efer::LMA | efer::LME);
  EXPECT_EQ(M.S.cs().Selector, kSelCode64);
  EXPECT_EQ(M.S.cs().Attr, 0xa09bu);
  EXPECT_EQ(M.S.cs().Limit, 0xffffffffu);
  EXPECT_EQ(M.S.ss().Selector, kSelData);
  EXPECT_EQ(M.S.ss().Attr, 0xc093u);
  EXPECT_EQ(M.S.seg(SegReg::FS).Base, 0x777000u);
  EXPECT_EQ(M.S.Tr.Selector, kSelTss);
  EXPECT_EQ(M.S.Tr.Base, M.Layout.TrBase);
  EXPECT_EQ(M.S.Tr.Limit, 0x67u);
  EXPECT_EQ(M.S.Tr.Attr, 0x8bu);
  EXPECT_EQ(M.S.Ldtr.Attr, uint32_t(Segment::Unusable));
  EXPECT_EQ(M.S.Gdtr.Base, M.Layout.GdtBase);
  EXPECT_EQ(M.S.Gdtr.Limit, 0xffff);
  EXPECT_EQ(M.S.Idtr.Limit, 0xffff);
  // Entry and exit each cost one VM transition; VMLAUNCH itself and HLT retire.
  EXPECT_GE(M.Cpu_.Cycles - Cycles0, 2u * costOf(CostClass::VmTransition));
}

TEST(VmExits, VmresumeContinuesAfterHostAdvancesGuestRip) {
  VmxTestMachine M;
  // Guest: VMCALL; mov ecx, 0x1234; VMCALL.
  // Host: HLT; mov rax, 0x681e; vmread rbx, rax; add rbx, 3; vmwrite rax, rbx; vmresume.
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1, 0xb9, 0x34, 0x12, 0x00, 0x00, 0x0f, 0x01, 0xc1},
                   {0xf4, 0x48, 0xc7, 0xc0, 0x1e, 0x68, 0x00, 0x00, 0x0f, 0x78, 0xc3, 0x48,
                    0x83, 0xc3, 0x03, 0x0f, 0x79, 0xc3, 0x0f, 0x01, 0xc3});
  M.exec(enc::Vmlaunch, 10);
  ASSERT_EQ(M.vmcs().get(F::GuestRip), kGuestCode);
  M.Cpu_.Activity = ActivityState::Active;
  StopReason Why = M.run(20);
  EXPECT_EQ(Why, StopReason::Halted);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), 18u);
  EXPECT_EQ(M.vmcs().get(F::GuestRip), kGuestCode + 8);
  EXPECT_EQ(M.S.Gpr[RCX], 0x1234u);
  EXPECT_EQ(M.S.Rip, kHostCode + 1);
  EXPECT_FALSE(M.Cpu_.NonRoot);
}

TEST(VmExits, VmxInstructionInGuestExitsWithInstructionInformation) {
  VmxTestMachine M;
  // Guest: vmptrld [rax + 0x10] (0F C7 70 10).
  loadGuestAndHost(M, {0x0f, 0xc7, 0x70, 0x10}, {0xf4});
  M.exec(enc::Vmlaunch, 10);
  VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), 21u);
  EXPECT_EQ(V.get(F::ExitQualification), 0x10u);
  EXPECT_EQ(V.get(F::VmExitInstructionLength), 4u);
  // Scaling 0, address size 64 (2 << 7), segment DS (3 << 15), index invalid (1 << 22),
  // base RAX (0 << 23).
  EXPECT_EQ(V.get(F::VmExitInstructionInformation), (2u << 7) | (3u << 15) | (1u << 22));
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode);
}

TEST(VmExits, VmreadInGuestExitsWithRegisterInstructionInformation) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x78, 0xc3}, {0xf4}); // vmread rbx, rax
  M.exec(enc::Vmlaunch, 10);
  VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), 23u);
  EXPECT_EQ(V.get(F::ExitQualification), 0u);
  // Reg1 = RBX (3 << 3), address size 64, register operand (1 << 10), Reg2 = RAX.
  EXPECT_EQ(V.get(F::VmExitInstructionInformation), (3u << 3) | (2u << 7) | (1u << 10));
}

TEST(VmExits, VmEntryMsrLoadFailureExitsWithReason34AndEntryIndex) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
  // Entry 1 loads IA32_SYSENTER_CS; entry 2 names an MSR that does not exist.
  uint64_t Area[4] = {0x174, 0x10, 0x12345678, 0};
  M.write(0x304000, Area, sizeof(Area));
  M.vmcs().set(F::VmEntryMsrLoadAddress, 0x304000);
  M.vmcs().set(F::VmEntryMsrLoadCount, 2);
  M.exec(enc::Vmlaunch, 10);
  VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), 0x80000000u | 34u);
  EXPECT_EQ(V.get(F::ExitQualification), 2u);
  EXPECT_EQ(M.vmx().CurrentLaunch, LaunchState::Clear);
  EXPECT_FALSE(M.Cpu_.NonRoot);
  EXPECT_EQ(M.S.Rip, kHostCode + 1);
  // Guest state is not saved by a VM-entry failure.
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode);
}

TEST(VmExits, VmExitMsrStoreAndLoadAreasAreProcessed) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
  M.vmcs().set(F::GuestIa32SysenterCs, 0x55);
  uint64_t Store[2] = {0x174, 0};
  M.write(0x304000, Store, sizeof(Store));
  uint64_t Load[2] = {0x175, 0xabc000};
  M.write(0x305000, Load, sizeof(Load));
  M.vmcs().set(F::VmExitMsrStoreAddress, 0x304000);
  M.vmcs().set(F::VmExitMsrStoreCount, 1);
  M.vmcs().set(F::VmExitMsrLoadAddress, 0x305000);
  M.vmcs().set(F::VmExitMsrLoadCount, 1);
  M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), 18u);
  EXPECT_EQ(M.read64(0x304008), 0x55u);
  EXPECT_EQ((*M.Cpu_.Msrs)[MsrSlot::IA32_SYSENTER_ESP], 0xabc000u);
}

TEST(VmExits, VmExitMsrLoadFailureCausesVmxAbort) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
  uint64_t Load[2] = {0xc0000100, 0}; // FS base may not be loaded from an MSR area
  M.write(0x305000, Load, sizeof(Load));
  M.vmcs().set(F::VmExitMsrLoadAddress, 0x305000);
  M.vmcs().set(F::VmExitMsrLoadCount, 1);
  StepResult R = M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(R.Why, StopReason::Shutdown);
  EXPECT_EQ(M.read64(kVmcsRegion) >> 32, 4u); // VMX-abort indicator at offset 4
}

// An MSR-load entry whose value vmxsim does not model (an enabled event select for an
// event it cannot count: cpu/perfmon.h) stops the run with status 10 naming it, at VM
// entry and at VM exit, rather than fail as an MSR the processor cannot load.
TEST(VmExits, MsrLoadOfAnUnmodelledValueStopsTheRun) {
  for (bool AtExit : {false, true}) {
    SCOPED_TRACE(AtExit);
    VmxTestMachine M;
    loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
    uint64_t Load[2] = {0x186, 0x4300c4}; // IA32_PERFEVTSEL0: branch instructions, EN
    M.write(0x305000, Load, sizeof(Load));
    M.vmcs().set(AtExit ? F::VmExitMsrLoadAddress : F::VmEntryMsrLoadAddress, 0x305000);
    M.vmcs().set(AtExit ? F::VmExitMsrLoadCount : F::VmEntryMsrLoadCount, 1);
    StepResult R = M.exec(enc::Vmlaunch, 10);
    EXPECT_EQ(R.Why, StopReason::Unimplemented);
    EXPECT_STREQ(M.Cpu_.StopWhat,
                 "performance-monitoring event select 0x4300c4 (IA32_PERFEVTSEL0)");
  }
}

/// An MSR list of Count entries at Area, entry I naming Msr with data Base + I.
void writeMsrList(VmxTestMachine &M, uint64_t Area, uint32_t Count, uint32_t Msr,
                  uint64_t Base) {
  std::vector<uint64_t> List;
  for (uint32_t I = 0; I < Count; ++I) {
    List.push_back(Msr);
    List.push_back(Base + I);
  }
  M.write(Area, List.data(), List.size() * 8);
}

// The MSR-list limit: 512 * (IA32_VMX_MISC[27:25] + 1) entries per list (SDM Vol. 3D,
// A.6 "Miscellaneous Data"), beyond which the SDM leaves the outcome undefined; vmxsim's
// defined outcome is that of an entry that cannot be processed (vm_exit.h,
// msrListLimit). The full profile reports N = 0: 512 entries.
TEST(VmExits, MsrListLimitIsWhatIa32VmxMiscReports) {
  VmxTestMachine M;
  uint64_t Misc = 0;
  ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_VMX_MISC, Misc), Status::Ok);
  EXPECT_EQ((Misc >> 25) & 7, 0u);
  EXPECT_EQ(msrListLimit(M.Cpu_), 512u);
}

TEST(VmExits, VmEntryMsrLoadListOfExactlyTheLimitIsLoaded) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
  writeMsrList(M, 0x400000, 512, 0x175, 0x1000); // IA32_SYSENTER_ESP
  M.vmcs().set(F::VmEntryMsrLoadAddress, 0x400000);
  M.vmcs().set(F::VmEntryMsrLoadCount, 512);
  M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), 18u);
  // The VMCALL exit saved the guest's value, which the last entry loaded.
  EXPECT_EQ(M.vmcs().get(F::GuestIa32SysenterEsp), 0x1000u + 511);
}

TEST(VmExits, VmEntryMsrLoadListBeyondTheLimitFailsAtEntryLimitPlusOne) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
  writeMsrList(M, 0x400000, 513, 0xc0000102, 0x1000); // IA32_KERNEL_GS_BASE
  M.vmcs().set(F::VmEntryMsrLoadAddress, 0x400000);
  M.vmcs().set(F::VmEntryMsrLoadCount, 513);
  M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), 0x80000000u | 34u);
  EXPECT_EQ(M.vmcs().get(F::ExitQualification), 513u);
  EXPECT_EQ(M.S.Rip, kHostCode + 1);
  // The first 512 entries were loaded: the failure's loading of host state does not
  // touch this MSR (SDM Vol. 3C, "VM-Entry Failures During or After Loading Guest State").
  EXPECT_EQ((*M.Cpu_.Msrs)[MsrSlot::IA32_KERNEL_GS_BASE], 0x1000u + 511);
  EXPECT_EQ(M.vmx().CurrentLaunch, LaunchState::Clear);
}

TEST(VmExits, VmEntryMsrLoadCountOfFourBillionFailsAtTheLimitInsteadOfLoopingOn) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
  writeMsrList(M, 0x400000, 513, 0x175, 0x1000);
  M.vmcs().set(F::VmEntryMsrLoadAddress, 0x400000);
  M.vmcs().set(F::VmEntryMsrLoadCount, 0xffffffffu);
  M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), 0x80000000u | 34u);
  EXPECT_EQ(M.vmcs().get(F::ExitQualification), 513u);
}

TEST(VmExits, VmExitMsrStoreListBeyondTheLimitCausesVmxAbortOne) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
  M.vmcs().set(F::GuestIa32SysenterCs, 0x55);
  writeMsrList(M, 0x400000, 513, 0x174, 0); // IA32_SYSENTER_CS, data 0 + I
  M.vmcs().set(F::VmExitMsrStoreAddress, 0x400000);
  M.vmcs().set(F::VmExitMsrStoreCount, 513);
  StepResult R = M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(R.Why, StopReason::Shutdown);
  EXPECT_EQ(M.read64(kVmcsRegion) >> 32, 1u); // VMX-abort indicator: saving guest MSRs
  EXPECT_EQ(M.read64(0x400000 + 16 * 511 + 8), 0x55u); // entry 512 stored
  EXPECT_EQ(M.read64(0x400000 + 16 * 512 + 8), 512u);  // entry 513 untouched
}

TEST(VmExits, VmExitMsrStoreListOfExactlyTheLimitIsStored) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
  M.vmcs().set(F::GuestIa32SysenterCs, 0x55);
  writeMsrList(M, 0x400000, 512, 0x174, 0);
  M.vmcs().set(F::VmExitMsrStoreAddress, 0x400000);
  M.vmcs().set(F::VmExitMsrStoreCount, 512);
  StepResult R = M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_EQ(M.vmcs().get(F::ExitReason), 18u);
  EXPECT_EQ(M.read64(0x400000 + 16 * 511 + 8), 0x55u);
}

TEST(VmExits, VmExitMsrLoadListBeyondTheLimitCausesVmxAbortFour) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
  writeMsrList(M, 0x400000, 513, 0x175, 0x2000);
  M.vmcs().set(F::VmExitMsrLoadAddress, 0x400000);
  M.vmcs().set(F::VmExitMsrLoadCount, 513);
  StepResult R = M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(R.Why, StopReason::Shutdown);
  EXPECT_EQ(M.read64(kVmcsRegion) >> 32, 4u); // VMX-abort indicator: loading host MSRs
  EXPECT_EQ((*M.Cpu_.Msrs)[MsrSlot::IA32_SYSENTER_ESP], 0x2000u + 511);
}

TEST(VmExits, InjectedSoftwareInterruptIsDeliveredThroughGuestIdt) {
  VmxTestMachine M;
  // Guest IDT at 0x2000 with vector 0x30 -> handler at kGuestCode + 0x100 (VMCALL).
  const uint64_t Handler = kGuestCode + 0x100;
  uint64_t Lo = (Handler & 0xffff) | (uint64_t(kSelCode64) << 16) | (uint64_t(0x8e) << 40) |
                (((Handler >> 16) & 0xffff) << 48);
  uint64_t Hi = Handler >> 32;
  M.write(kIdtBase + 16 * 0x30, &Lo, 8);
  M.write(kIdtBase + 16 * 0x30 + 8, &Hi, 8);
  M.write(Handler, std::vector<uint8_t>{0x0f, 0x01, 0xc1}.data(), 3);
  loadGuestAndHost(M, {0xcd, 0x30}, {0xf4});
  M.vmcs().set(F::GuestIdtrLimit, 0xfff);
  M.vmcs().set(F::VmEntryInterruptionInformation, 0x80000000u | (4u << 8) | 0x30);
  M.vmcs().set(F::VmEntryInstructionLength, 2);
  M.exec(enc::Vmlaunch, 10);
  VmcsData &V = M.vmcs();
  EXPECT_EQ(V.get(F::ExitReason), 18u);
  EXPECT_EQ(V.get(F::GuestRip), Handler);
  EXPECT_EQ(V.get(F::VmEntryInterruptionInformation), (4u << 8) | 0x30u);
  // The return RIP pushed is guest RIP + the VM-entry instruction length.
  EXPECT_EQ(M.read64(V.get(F::GuestRsp)), kGuestCode + 2);
}

// IA32_DEBUGCTL is loaded from and saved to the VMCS with the debug controls (SDM Vol.
// 3C, "Loading Guest Control Registers, Debug Registers, and MSRs", "Saving Control
// Registers, Debug Registers, and MSRs") and cleared on VM exit; a branch-trace bit,
// which vmxsim does not model, stops the entry (LBR and BTF: tests/vmx/vmx_debug_test.cpp).
TEST(VmExits, DebugctlIsLoadedSavedAndClearedByTheDebugControls) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x0f, 0x01, 0xc1}, {0xf4});
  VmcsData &V = M.vmcs();
  V.set(F::VmEntryControls, V.get(F::VmEntryControls) | controlBit(VmxControl::LoadDebugControls));
  V.set(F::PrimaryVmExitControls,
        V.get(F::PrimaryVmExitControls) | controlBit(VmxControl::SaveDebugControls));
  V.set(F::GuestIa32Debugctl, 0);
  StepResult R = M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_EQ(V.get(F::ExitReason), 18u);
  EXPECT_EQ(V.get(F::GuestIa32Debugctl), 0u);
  EXPECT_EQ((*M.Cpu_.Msrs)[MsrSlot::IA32_DEBUGCTL], 0u);

  VmxTestMachine N;
  loadGuestAndHost(N, {0x0f, 0x01, 0xc1}, {0xf4});
  VmcsData &W = N.vmcs();
  W.set(F::VmEntryControls, W.get(F::VmEntryControls) | controlBit(VmxControl::LoadDebugControls));
  W.set(F::GuestIa32Debugctl, 1u << 6); // TR
  R = N.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(R.Why, StopReason::Unimplemented);
  EXPECT_STREQ(N.Cpu_.StopWhat, kDebugctlUnimplemented);
  EXPECT_FALSE(N.Cpu_.NonRoot);
}

// SDM Vol. 3C, "Loading Guest Control Registers, Debug Registers, and MSRs" and "Loading
// Host Control Registers, Debug Registers, MSRs": with the "load IA32_PERF_GLOBAL_CTRL"
// controls VM entry loads the guest field and VM exit the host field, and the counters
// follow (cpu/perfmon.h). Nothing counts before VMLAUNCH (IA32_PERF_GLOBAL_CTRL = 0); the
// guest's fixed counter 0 sees the VMLAUNCH, which completes in the guest, and its three
// NOPs (the VMCALL that exits does not retire); after the exit the host's PMC0 sees its
// HLT.
TEST(VmExits, PerfGlobalCtrlIsLoadedAtEntryAndAtExit) {
  VmxTestMachine M;
  loadGuestAndHost(M, {0x90, 0x90, 0x90, 0x0f, 0x01, 0xc1}, {0xf4});
  ASSERT_EQ(writeMsr(M.Cpu_, msr::IA32_FIXED_CTR_CTRL, 0x3), Status::Ok);
  ASSERT_EQ(writeMsr(M.Cpu_, msr::IA32_PERFEVTSEL0, 0x4300c0), Status::Ok);
  ASSERT_EQ(writeMsr(M.Cpu_, msr::IA32_PERF_GLOBAL_CTRL, 0), Status::Ok);
  VmcsData &V = M.vmcs();
  V.set(F::VmEntryControls,
        V.get(F::VmEntryControls) | controlBit(VmxControl::LoadIa32PerfGlobalCtrlOnEntry));
  V.set(F::PrimaryVmExitControls, V.get(F::PrimaryVmExitControls) |
                                      controlBit(VmxControl::LoadIa32PerfGlobalCtrlOnExit));
  V.set(F::GuestIa32PerfGlobalCtrl, uint64_t(1) << 32);
  V.set(F::HostIa32PerfGlobalCtrl, 0x1);
  StepResult R = M.exec(enc::Vmlaunch, 10);
  EXPECT_EQ(R.Why, StopReason::Halted);
  EXPECT_EQ(V.get(F::ExitReason), 18u);
  uint64_t Value = 0;
  ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_PERF_GLOBAL_CTRL, Value), Status::Ok);
  EXPECT_EQ(Value, 0x1u);
  ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_FIXED_CTR0, Value), Status::Ok);
  EXPECT_EQ(Value, 4u);
  ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_PMC0, Value), Status::Ok);
  EXPECT_EQ(Value, 1u);
}

// --- VM entry's memo of passed checks (cpu/vmx/vm_entry_checks.h) seen from software:
// VMWRITE, VM exits, VMCLEAR and VMPTRLD change the checked VMCS data, and the next
// VMLAUNCH/VMRESUME fails with exactly the check the state breaks.

/// Records the ID of the check that failed a VM entry.
struct EntryFailureRecorder : VmxTransitionObserver {
  void vmExit(const VmExitEvent &) override {}
  void vmEntry(const VmEntryEvent &) override { ++Entries; }
  void vmEntryFailure(const VmEntryFailureEvent &E) override { Failed = E.CheckId; }
  uint32_t Failed = kNoVmEntryCheck;
  unsigned Entries = 0;
};

/// A machine whose guest is VMCALL and whose host is HLT, launched once.
struct LaunchedMachine {
  explicit LaunchedMachine(const std::vector<uint8_t> &Guest = {0x0f, 0x01, 0xc1}) {
    loadGuestAndHost(M, Guest, {0xf4});
    M.Cpu_.Transitions = &Obs;
    launchOrResume(enc::Vmlaunch);
  }
  /// VMLAUNCH or VMRESUME in the host; true when the guest ran and exited with VMCALL.
  bool launchOrResume(const std::vector<uint8_t> &Insn) {
    Obs.Failed = kNoVmEntryCheck;
    const unsigned Entries = Obs.Entries;
    M.Cpu_.Activity = ActivityState::Active;
    // A HLT after it stops the host after a VMfail.
    std::vector<uint8_t> Code = Insn;
    Code.push_back(0xf4);
    M.exec(Code, 10);
    return Obs.Entries == Entries + 1 && Obs.Failed == kNoVmEntryCheck &&
           M.vmcs().get(F::ExitReason) == 18;
  }
  void vmwrite(F Field, uint64_t Value) {
    M.Cpu_.Activity = ActivityState::Active;
    M.S.Gpr[RAX] = encodingOf(Field);
    M.S.Gpr[RBX] = Value;
    M.exec(enc::VmwriteRaxRbx);
    ASSERT_EQ(M.vmcs().get(Field), Value);
  }
  void pointerInsn(const std::vector<uint8_t> &Insn, uint64_t Region) {
    M.Cpu_.Activity = ActivityState::Active;
    M.execWithPointer(Insn, Region);
    ASSERT_EQ(M.arith(), 0u);
  }
  VmxTestMachine M;
  EntryFailureRecorder Obs;
};

uint32_t checkNumber(VmEntryCheckId Id) { return uint32_t(Id); }

TEST(VmEntryMemo, VmwriteOfACheckedFieldFailsTheNextVmresume) {
  LaunchedMachine L;
  ASSERT_EQ(L.M.vmcs().get(F::ExitReason), 18u);
  ASSERT_TRUE(L.launchOrResume(enc::Vmresume));
  const uint64_t Skipped = L.M.vmx().EntryCheckMemo.GroupsSkipped;
  ASSERT_TRUE(L.launchOrResume(enc::Vmresume));
  EXPECT_GT(L.M.vmx().EntryCheckMemo.GroupsSkipped, Skipped); // the memo is in use
  // One field of each kind of group: controls, host state, guest state.
  const struct {
    F Field;
    uint64_t Bad;
    VmEntryCheckId Fails;
  } Rows[] = {
      {F::Cr3TargetCount, 100, VmEntryCheckId::Cr3TargetCount},
      {F::VmEntryMsrLoadAddress, 0x1008, VmEntryCheckId::EntryMsrLoadAlignment},
      {F::HostCsSelector, 0, VmEntryCheckId::HostCsSelectorZero},
      {F::HostGdtrBase, 0x0000800000000000, VmEntryCheckId::HostGdtrBaseCanonical},
      {F::GuestCr4, 0, VmEntryCheckId::GuestCr4Fixed},
      {F::GuestCsAccessRights, 0xa093, VmEntryCheckId::GuestCsType},
      {F::GuestIdtrLimit, 0x10000, VmEntryCheckId::GuestIdtrLimit},
      {F::GuestRip, 0x0000800000000000, VmEntryCheckId::GuestRipCanonical},
      {F::GuestActivityState, 7, VmEntryCheckId::GuestActivityState},
  };
  for (const auto &R : Rows) {
    SCOPED_TRACE(vmEntryCheckInfo(R.Fails).Name);
    if (R.Field == F::VmEntryMsrLoadAddress)
      L.vmwrite(F::VmEntryMsrLoadCount, 1);
    const uint64_t Good = L.M.vmcs().get(R.Field);
    L.vmwrite(R.Field, R.Bad);
    EXPECT_FALSE(L.launchOrResume(enc::Vmresume));
    EXPECT_EQ(L.Obs.Failed, checkNumber(R.Fails));
    // VMfailValid leaves the processor in the host; an entry failure exits to it.
    L.vmwrite(R.Field, Good);
    if (R.Field == F::VmEntryMsrLoadAddress)
      L.vmwrite(F::VmEntryMsrLoadCount, 0);
    EXPECT_TRUE(L.launchOrResume(enc::Vmresume));
  }
}

TEST(VmEntryMemo, VmExitMarksTheFieldsItChanges) {
  // Guest: xor eax, eax; VMCALL.
  LaunchedMachine L({0x31, 0xc0, 0x0f, 0x01, 0xc1});
  VmcsData &V = L.M.vmcs();
  ASSERT_EQ(V.get(F::GuestRip), kGuestCode + 2);
  // Run the guest from its XOR again, with CF set: the entry consumes these marks.
  V.set(F::GuestRip, kGuestCode);
  V.set(F::GuestRflags, 0x2 | rflags::CF);
  ASSERT_TRUE(L.launchOrResume(enc::Vmresume));
  auto marked = [&](F Field) {
    const unsigned I = unsigned(Field);
    return (V.Written[I / 64] >> (I % 64)) & 1;
  };
  // The exit saved a new RIP and the XOR's flags over what the entry loaded: marked; the
  // segment registers did not change: not marked.
  EXPECT_EQ(V.get(F::GuestRip), kGuestCode + 2);
  EXPECT_TRUE(marked(F::GuestRip));
  EXPECT_EQ(V.get(F::GuestRflags), 0x2u | rflags::ZF | rflags::PF);
  EXPECT_TRUE(marked(F::GuestRflags));
  EXPECT_FALSE(marked(F::GuestCsAccessRights));
  EXPECT_FALSE(marked(F::GuestCr0));
}

TEST(VmEntryMemo, VmclearAndVmptrldReloadTheCheckedData) {
  LaunchedMachine L;
  ASSERT_TRUE(L.launchOrResume(enc::Vmresume));
  // VMCLEAR writes the data back; software changes the region (the SDM forbids it for an
  // active VMCS, not for a clear one); VMPTRLD loads it again.
  L.pointerInsn(enc::VmclearRax, kVmcsRegion);
  const uint64_t BadAr = 0xa093;
  L.M.write(kVmcsRegion + vmcs_layout::fieldOffset(F::GuestCsAccessRights), &BadAr, 8);
  L.pointerInsn(enc::VmptrldRax, kVmcsRegion);
  EXPECT_FALSE(L.launchOrResume(enc::Vmlaunch));
  EXPECT_EQ(L.Obs.Failed, checkNumber(VmEntryCheckId::GuestCsType));
}

TEST(VmEntryMemo, VmptrldOfAnotherVmcsChecksItsData) {
  LaunchedMachine L;
  ASSERT_TRUE(L.launchOrResume(enc::Vmresume));
  // A copy of the current VMCS in the second region, with one bad host field.
  L.pointerInsn(enc::VmclearRax, kVmcsRegion);
  for (unsigned K = 0; K < kNumVmcsFields; ++K) {
    uint64_t Value = L.M.read64(kVmcsRegion + vmcs_layout::fieldOffset(VmcsField(K)));
    if (VmcsField(K) == F::HostTrSelector)
      Value = 0;
    L.M.write(kVmcsRegion2 + vmcs_layout::fieldOffset(VmcsField(K)), &Value, 8);
  }
  const uint32_t Clear = 0;
  L.M.write(kVmcsRegion2 + vmcs_layout::LaunchStateOffset, &Clear, 4);
  L.pointerInsn(enc::VmptrldRax, kVmcsRegion2);
  EXPECT_FALSE(L.launchOrResume(enc::Vmlaunch));
  EXPECT_EQ(L.Obs.Failed, checkNumber(VmEntryCheckId::HostTrSelectorZero));
  // Back to the first VMCS (clear after VMCLEAR): it launches.
  L.pointerInsn(enc::VmptrldRax, kVmcsRegion);
  EXPECT_TRUE(L.launchOrResume(enc::Vmlaunch));
}

} // namespace
} // namespace vmxsim::test
