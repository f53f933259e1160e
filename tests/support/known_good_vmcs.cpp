#include "tests/support/known_good_vmcs.h"

#include "cpu/vmx/capabilities.h"

namespace vmxsim::test {

VmcsData knownGoodVmcs(const VmxProfile &P, const KnownGoodLayout &L) {
  using F = VmcsField;
  VmcsData V;
  auto set = [&](F Field, uint64_t Value) {
    if (fieldSupported(P, Field))
      V.set(Field, Value);
  };

  // Controls: the allowed-0 settings of the TRUE capability MSRs (SDM Vol. 3D, A.2-A.5),
  // plus the two bits a 64-bit host and a 64-bit guest require (SDM Vol. 3C, "Checks on
  // Host Control Registers, MSRs, and SSP": "host address-space size" must be 1 when the
  // processor is in IA-32e mode; "IA-32e mode guest" for a 64-bit guest).
  set(F::PinBasedVmExecutionControls, controlCaps(P, VmxControlWord::Pin).MustBe1);
  set(F::PrimaryProcessorBasedVmExecutionControls,
      controlCaps(P, VmxControlWord::Proc).MustBe1);
  set(F::PrimaryVmExitControls, controlCaps(P, VmxControlWord::Exit).MustBe1 |
                                    controlBit(VmxControl::HostAddressSpaceSize));
  set(F::VmEntryControls,
      controlCaps(P, VmxControlWord::Entry).MustBe1 | controlBit(VmxControl::Ia32eModeGuest));
  // "VMCS link pointer" must be all ones unless VMCS shadowing uses it (SDM Vol. 3C,
  // "Checks Related to VMCS Link Pointer").
  set(F::VmcsLinkPointer, ~uint64_t(0));

  // Host state (SDM Vol. 3C, "Host-State Area").
  set(F::HostCr0, kKnownGoodCr0);
  set(F::HostCr3, L.Cr3);
  set(F::HostCr4, kKnownGoodCr4);
  set(F::HostCsSelector, L.CodeSelector);
  for (F Sel : {F::HostSsSelector, F::HostDsSelector, F::HostEsSelector, F::HostFsSelector,
                F::HostGsSelector})
    set(Sel, L.DataSelector);
  set(F::HostTrSelector, L.TrSelector);
  set(F::HostTrBase, L.TrBase);
  set(F::HostGdtrBase, L.GdtBase);
  set(F::HostIdtrBase, L.IdtBase);
  set(F::HostRsp, L.HostRsp);
  set(F::HostRip, L.HostRip);
  set(F::HostIa32Efer, kKnownGoodEfer);
  set(F::HostIa32Pat, 0x0007040600070406ull);

  // Guest state (SDM Vol. 3C, "Guest-State Area").
  set(F::GuestCr0, kKnownGoodCr0);
  set(F::GuestCr3, L.Cr3);
  set(F::GuestCr4, kKnownGoodCr4);
  set(F::GuestDr7, 0x400);
  set(F::GuestRsp, L.GuestRsp);
  set(F::GuestRip, L.GuestRip);
  set(F::GuestRflags, 0x2);
  set(F::GuestCsSelector, L.CodeSelector);
  set(F::GuestCsLimit, 0xffffffff);
  set(F::GuestCsAccessRights, kArCode64);
  const F DataSegs[][4] = {
      {F::GuestSsSelector, F::GuestSsBase, F::GuestSsLimit, F::GuestSsAccessRights},
      {F::GuestDsSelector, F::GuestDsBase, F::GuestDsLimit, F::GuestDsAccessRights},
      {F::GuestEsSelector, F::GuestEsBase, F::GuestEsLimit, F::GuestEsAccessRights},
      {F::GuestFsSelector, F::GuestFsBase, F::GuestFsLimit, F::GuestFsAccessRights},
      {F::GuestGsSelector, F::GuestGsBase, F::GuestGsLimit, F::GuestGsAccessRights}};
  for (const auto &Seg : DataSegs) {
    set(Seg[0], L.DataSelector);
    set(Seg[1], 0);
    set(Seg[2], 0xffffffff);
    set(Seg[3], kArData);
  }
  set(F::GuestLdtrAccessRights, kArUnusable);
  set(F::GuestTrSelector, L.TrSelector);
  set(F::GuestTrBase, L.TrBase);
  set(F::GuestTrLimit, 0x67);
  set(F::GuestTrAccessRights, kArTss64Busy);
  set(F::GuestGdtrBase, L.GdtBase);
  set(F::GuestGdtrLimit, L.GdtLimit);
  set(F::GuestIdtrBase, L.IdtBase);
  set(F::GuestIdtrLimit, L.IdtLimit);
  set(F::GuestIa32Efer, kKnownGoodEfer);
  set(F::GuestIa32Pat, 0x0007040600070406ull);
  // Activity state active, no blocking, no pending debug exceptions: all zero.
  return V;
}

} // namespace vmxsim::test
