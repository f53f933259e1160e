// SDM Vol. 4, Model-Specific Registers (MSRs): every row of cpu/msrs.def is checked for
// its reset value and its reserved bits; write behaviours with rules of their own are
// tested one by one.
#include "tests/cpu/system_test_support.h"

#include "cpu/cpuid.h"
#include "cpu/msrs.h"

#include <gtest/gtest.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

class MsrRow : public testing::TestWithParam<unsigned> {
protected:
  const MsrInfo &row() const { return kMsrTable[GetParam()]; }
};

std::string rowName(const testing::TestParamInfo<unsigned> &P) {
  std::string N;
  for (const char *C = kMsrTable[P.param].Name; *C; ++C)
    if (*C != '_')
      N += *C;
  return N;
}

bool physAddressKind(MsrWrite W) {
  return W == MsrWrite::ApicBase || W == MsrWrite::MtrrPhysBase || W == MsrWrite::MtrrPhysMask;
}
/// The x2APIC register rows raise #GP outside x2APIC mode, which needs a local APIC
/// (tests/harness/x2apic_test.cpp checks them register by register).
bool x2apicRow(const MsrInfo &R) { return R.Address >= 0x800 && R.Address <= 0x8ff; }
bool canonicalKind(MsrWrite W) {
  return W == MsrWrite::Canonical || W == MsrWrite::FsBase || W == MsrWrite::GsBase;
}

} // namespace

TEST_P(MsrRow, ReadsResetValueAfterReset) {
  TestMachine M;
  uint64_t V = ~uint64_t(0);
  // The VMX capability MSRs report the VMX profile, not a reset value (and raise #GP
  // where the profile lacks them): tests/vmx/vmx_capabilities_test.cpp checks them
  // constant by constant.
  if (row().Write == MsrWrite::VmxCapability || x2apicRow(row()))
    return;
  if (row().Write == MsrWrite::Command) { // write-only
    EXPECT_EQ(readMsr(M.Cpu_, row().Address, V), Status::Fault);
    EXPECT_EQ(M.Cpu_.Pending.Vector, vec::GP);
    return;
  }
  ASSERT_EQ(readMsr(M.Cpu_, row().Address, V), Status::Ok);
  EXPECT_EQ(V, row().Reset);
}

TEST_P(MsrRow, EveryReservedBitRaisesGp) {
  TestMachine M;
  const MsrInfo &R = row();
  uint64_t Reserved = R.Reserved;
  if (physAddressKind(R.Write))
    Reserved |= ~((uint64_t(1) << M.Cpu_.Model.MaxPhysAddrBits) - 1);
  for (unsigned Bit = 0; Bit < 64; ++Bit) {
    if (!(Reserved & (uint64_t(1) << Bit)))
      continue;
    M.Cpu_.Pending = PendingEvent{};
    EXPECT_EQ(writeMsr(M.Cpu_, R.Address, R.Reset | (uint64_t(1) << Bit)), Status::Fault)
        << R.Name << " bit " << Bit;
    EXPECT_EQ(M.Cpu_.Pending.Vector, vec::GP);
    EXPECT_EQ(M.Cpu_.Pending.ErrorCode, 0u);
  }
}

TEST_P(MsrRow, WritingResetValueRoundTripsUnlessReadOnly) {
  TestMachine M;
  const MsrInfo &R = row();
  if (x2apicRow(R))
    return;
  Status St = writeMsr(M.Cpu_, R.Address, R.Reset);
  // IA32_PERF_GLOBAL_STATUS is the read-only one of the performance-monitoring rows.
  if (R.Write == MsrWrite::ReadOnly || R.Write == MsrWrite::VmxCapability ||
      R.Address == msr::IA32_PERF_GLOBAL_STATUS) {
    EXPECT_EQ(St, Status::Fault);
    return;
  }
  ASSERT_EQ(St, Status::Ok);
  if (R.Write == MsrWrite::Command)
    return; // write-only: ReadsResetValueAfterReset checks the read's #GP
  uint64_t V = ~uint64_t(0);
  ASSERT_EQ(readMsr(M.Cpu_, R.Address, V), Status::Ok);
  EXPECT_EQ(V, R.Reset);
}

INSTANTIATE_TEST_SUITE_P(ModelSpecificRegisters, MsrRow, testing::Range(0u, kNumMsrs),
                         rowName);

TEST(ModelSpecificRegisters, AddressMsrsRejectNonCanonicalValues) {
  unsigned Checked = 0;
  for (const MsrInfo &R : kMsrTable) {
    if (!canonicalKind(R.Write))
      continue;
    TestMachine M;
    EXPECT_EQ(writeMsr(M.Cpu_, R.Address, 0x0000800000000000ull), Status::Fault) << R.Name;
    EXPECT_EQ(writeMsr(M.Cpu_, R.Address, 0xffff800000000000ull), Status::Ok) << R.Name;
    ++Checked;
  }
  EXPECT_EQ(Checked, 7u); // SYSENTER_ESP/EIP, LSTAR, CSTAR, FS/GS base, KERNEL_GS_BASE
}

TEST(ModelSpecificRegisters, UnknownMsrRaisesGpOnReadAndWrite) {
  TestMachine M;
  uint64_t V;
  // 0x493 is IA32_VMX_EXIT_CTLS2 on newer processors: not modelled.
  for (uint32_t A : {0x12345678u, 0x493u, 0xc0000104u}) {
    EXPECT_EQ(readMsr(M.Cpu_, A, V), Status::Fault);
    EXPECT_EQ(M.Cpu_.Pending.Vector, vec::GP);
    EXPECT_EQ(writeMsr(M.Cpu_, A, 0), Status::Fault);
  }
}

// SDM Vol. 3B, 15.3.1.1: MCG_CAP.Count banks exist at 0x400 + 4i and no more; CPUID
// advertises MCE and MCA with them.
TEST(ModelSpecificRegisters, MachineCheckBanksAreTheOnesMcgCapCounts) {
  TestMachine M;
  uint64_t Cap = 0;
  ASSERT_EQ(readMsr(M.Cpu_, 0x179, Cap), Status::Ok);
  EXPECT_EQ(Cap, 0x10au); // 10 banks, MCG_CTL_P
  uint64_t V = 1;
  for (uint32_t A = 0x400; A < 0x400 + 4 * 10; ++A) {
    EXPECT_EQ(readMsr(M.Cpu_, A, V), Status::Ok) << std::hex << A;
    EXPECT_EQ(V, (A & 3) == 0 ? ~uint64_t(0) : 0u) << std::hex << A;
    EXPECT_EQ(writeMsr(M.Cpu_, A, 0), Status::Ok) << std::hex << A;
  }
  EXPECT_EQ(readMsr(M.Cpu_, 0x428, V), Status::Fault); // MC10_CTL: no 11th bank
  EXPECT_EQ(M.Cpu_.Pending.Vector, vec::GP);
  CpuidResult R = cpuidQuery(M.Cpu_, 1, 0);
  EXPECT_EQ(R.Edx & ((1u << 7) | (1u << 14)), (1u << 7) | (1u << 14));
}

TEST(ModelSpecificRegisters, FeatureControlLockedRejectsWrites) {
  TestMachine M;
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_FEATURE_CONTROL, 0x5), Status::Ok);
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_FEATURE_CONTROL, 0x5), Status::Fault);
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_FEATURE_CONTROL, 0x0), Status::Fault);
  uint64_t V;
  ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_FEATURE_CONTROL, V), Status::Ok);
  EXPECT_EQ(V, 0x5u);
}

TEST(ModelSpecificRegisters, EferLmeChangeWhilePagingRaisesGpAndLmaIsReadOnly) {
  TestMachine M;
  M.setupLongMode();
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_EFER, efer::NXE | efer::SCE), Status::Fault);
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_EFER, efer::LME | efer::NXE), Status::Ok);
  EXPECT_EQ(M.S.Efer, efer::LME | efer::LMA | efer::NXE); // LMA kept though written 0
}

TEST(ModelSpecificRegisters, PatRejectsReservedMemoryTypes) {
  TestMachine M;
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_PAT, 0x0007040600070402ull), Status::Fault); // 2
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_PAT, 0x0007040600070403ull), Status::Fault); // 3
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_PAT, 0x0707070707070707ull), Status::Ok);
}

TEST(ModelSpecificRegisters, MtrrRejectsInvalidTypes) {
  TestMachine M;
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_MTRR_FIX64K_00000, 0x0606060606060607ull),
            Status::Fault);
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_MTRR_DEF_TYPE, 0xc02), Status::Fault);
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_MTRR_DEF_TYPE, 0xc06), Status::Ok);
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_MTRR_PHYSBASE0, 0x80000003), Status::Fault);
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_MTRR_PHYSBASE0, 0x80000006), Status::Ok);
}

TEST(ModelSpecificRegisters, TscWriteMovesTscAdjustByTheSameAmount) {
  TestMachine M;
  M.Cpu_.Cycles = 1000;
  uint64_t V;
  ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_TIME_STAMP_COUNTER, V), Status::Ok);
  EXPECT_EQ(V, 1000u);
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_TIME_STAMP_COUNTER, 5000), Status::Ok);
  M.Cpu_.Cycles = 1100;
  ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_TIME_STAMP_COUNTER, V), Status::Ok);
  EXPECT_EQ(V, 5100u);
  ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_TSC_ADJUST, V), Status::Ok);
  EXPECT_EQ(V, 4000u);
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_TSC_ADJUST, 3000), Status::Ok);
  ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_TIME_STAMP_COUNTER, V), Status::Ok);
  EXPECT_EQ(V, 4100u);
}

TEST(ModelSpecificRegisters, FsBaseMsrIsTheFsSegmentBase) {
  TestMachine M;
  M.setupLongMode();
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_FS_BASE, 0xffff800012345000ull), Status::Ok);
  EXPECT_EQ(M.S.seg(SegReg::FS).Base, 0xffff800012345000ull);
}

TEST(ModelSpecificRegisters, MiscEnableReadOnlyBitsKeepTheirValue) {
  TestMachine M;
  EXPECT_EQ(writeMsr(M.Cpu_, msr::IA32_MISC_ENABLE, 0x1), Status::Ok);
  uint64_t V;
  ASSERT_EQ(readMsr(M.Cpu_, msr::IA32_MISC_ENABLE, V), Status::Ok);
  EXPECT_EQ(V, 0x1881u); // fast strings written; perfmon available, no BTS, no PEBS
}

TEST(ModelSpecificRegisters, ApBaseHasNoBspBit) {
  PhysMem Mem(1 << 20);
  IoBus Io;
  Cpu Ap(Mem, Io, CpuModel::defaultModel(), 1);
  uint64_t V;
  ASSERT_EQ(readMsr(Ap, msr::IA32_APIC_BASE, V), Status::Ok);
  EXPECT_EQ(V, 0xfee00800u);
}

TEST(ModelSpecificRegisters, RdmsrWrmsrInstructionsMoveEdxEax) {
  TestMachine M;
  M.setupLongMode();
  M.S.Gpr[RCX] = msr::IA32_LSTAR;
  M.S.Gpr[RDX] = 0xffff8000;
  M.S.Gpr[RAX] = 0x00401000;
  // wrmsr ; xor eax, eax ; xor edx, edx ; rdmsr ; hlt
  M.loadCode({0x0f, 0x30, 0x31, 0xc0, 0x31, 0xd2, 0x0f, 0x32, 0xf4});
  EXPECT_EQ(M.run(), StopReason::Halted);
  EXPECT_EQ((*M.Cpu_.Msrs)[MsrSlot::IA32_LSTAR], 0xffff800000401000ull);
  EXPECT_EQ(M.S.Gpr[RAX], 0x00401000u);
  EXPECT_EQ(M.S.Gpr[RDX], 0xffff8000u);
}

TEST(ModelSpecificRegisters, RdmsrAtCpl3RaisesGp) {
  TestMachine M;
  M.setupLongMode();
  M.S.Idtr = TableReg{kIdtBase, 0};
  M.loadCode({0x0f, 0x32});
  M.S.seg(SegReg::CS) = Segment{kSelUserCode64, 0, 0xffffffff, 0xfb | Segment::L | Segment::G};
  M.S.seg(SegReg::SS) = Segment{kSelUserData, 0, 0xffffffff, 0xf3 | Segment::DB | Segment::G};
  M.Cpu_.modeChanged();
  M.S.Gpr[RCX] = msr::IA32_EFER;
  EXPECT_EQ(M.run(), StopReason::Shutdown); // #GP with an empty IDT
  EXPECT_EQ(M.S.Rip, kCodeBase);
}

// IA32_DEBUGCTL (SDM Vol. 3B, "IA32_DEBUGCTL MSR") is a row of msrs.def: LBR (stored)
// and BTF (single-step on branches, tests/cpu/debug_features_test.cpp) read back; the
// branch-trace bits 10:6 and the uncore PMI (13) are not modelled, so setting one stops
// the run naming it (never a silent no-op); bits 5:2 are reserved, and so are the freeze
// bits 11, 12 and 14, which need CPUID.01H:ECX.PDCM or IA32_PERF_CAPABILITIES[12], and
// RTM_DEBUG (15), which needs CPUID.(EAX=07H,ECX=0):EBX.RTM: this model reports none.
TEST(ModelSpecificRegisters, DebugctlStoresLbrAndBtfAndReportsTheRestUnimplemented) {
  for (unsigned Bit : {6u, 7u, 8u, 9u, 10u, 13u}) {
    TestMachine M;
    EXPECT_EQ(writeMsr(M.Cpu_, 0x1d9, uint64_t(1) << Bit), Status::Unimplemented) << Bit;
    EXPECT_STREQ(M.Cpu_.StopWhat,
                 "IA32_DEBUGCTL features (branch trace, uncore PMI)");
  }
  for (unsigned Bit : {11u, 12u, 14u, 15u}) {
    TestMachine M;
    EXPECT_EQ(writeMsr(M.Cpu_, 0x1d9, uint64_t(1) << Bit), Status::Fault) << Bit;
    EXPECT_EQ(M.Cpu_.Pending.Vector, vec::GP);
  }
  TestMachine M;
  uint64_t V = 1;
  ASSERT_EQ(readMsr(M.Cpu_, 0x1d9, V), Status::Ok);
  EXPECT_EQ(V, 0u); // reset value
  EXPECT_EQ(writeMsr(M.Cpu_, 0x1d9, 3), Status::Ok);
  ASSERT_EQ(readMsr(M.Cpu_, 0x1d9, V), Status::Ok);
  EXPECT_EQ(V, 3u);
  EXPECT_EQ(writeMsr(M.Cpu_, 0x1d9, 1u << 2), Status::Fault); // reserved
  EXPECT_EQ(M.Cpu_.Pending.Vector, vec::GP);
  ASSERT_EQ(readMsr(M.Cpu_, 0x1d9, V), Status::Ok);
  EXPECT_EQ(V, 3u);
}

// SDM Vol. 4, Table "IA-32 Architectural MSRs" (0x48, 0x49, 0x10a, 0x10b) and Vol. 2A,
// CPUID leaf 7 EDX: the speculation controls exist exactly as CPUID advertises them.
TEST(ModelSpecificRegisters, SpeculationControlsAreTheOnesCpuidAdvertises) {
  TestMachine M;
  CpuidResult R = cpuidQuery(M.Cpu_, 7, 0);
  EXPECT_EQ(R.Edx, (1u << 26) | (1u << 27) | (1u << 28) | (1u << 29) | (1u << 31));
  // IA32_SPEC_CTRL: IBRS, STIBP and SSBD read back; bit 3 and up are reserved.
  uint64_t V = 0;
  EXPECT_EQ(writeMsr(M.Cpu_, 0x48, 0x7), Status::Ok);
  ASSERT_EQ(readMsr(M.Cpu_, 0x48, V), Status::Ok);
  EXPECT_EQ(V, 0x7u);
  EXPECT_EQ(writeMsr(M.Cpu_, 0x48, 0x8), Status::Fault);
  // IA32_PRED_CMD (IBPB) and IA32_FLUSH_CMD (L1D_FLUSH): bit 0 is the command; reading
  // either raises #GP(0).
  for (uint32_t A : {0x49u, 0x10bu}) {
    M.Cpu_.Pending = PendingEvent{};
    EXPECT_EQ(writeMsr(M.Cpu_, A, 1), Status::Ok) << std::hex << A;
    EXPECT_EQ(writeMsr(M.Cpu_, A, 2), Status::Fault) << std::hex << A;
    EXPECT_EQ(readMsr(M.Cpu_, A, V), Status::Fault) << std::hex << A;
    EXPECT_EQ(M.Cpu_.Pending.Vector, vec::GP);
  }
  // IA32_ARCH_CAPABILITIES: read-only; RDCL_NO, IBRS_ALL, SKIP_L1DFL_VMENTRY, SSB_NO,
  // MDS_NO, IF_PSCHANGE_MC_NO, TAA_NO, SBDR_SSDP_NO, FBSDP_NO, PSDP_NO, BHI_NO, PBRSB_NO,
  // GDS_NO, RFDS_NO; not TSX_CTRL (7), RSBA (2), FB_CLEAR (17) or RRSBA (19).
  ASSERT_EQ(readMsr(M.Cpu_, 0x10a, V), Status::Ok);
  EXPECT_EQ(V, 0xd10e17bu);
  EXPECT_EQ(writeMsr(M.Cpu_, 0x10a, V), Status::Fault);
}
