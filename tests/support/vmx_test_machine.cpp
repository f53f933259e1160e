#include "tests/support/vmx_test_machine.h"

#include "cpu/cpu_model.h"
#include "cpu/msrs.h"

#include <map>
#include <memory>

namespace vmxsim::test {

const CpuModel &modelWithVmx(const VmxProfile &P) {
  static std::map<const VmxProfile *, std::unique_ptr<CpuModel>> Models;
  auto &M = Models[&P];
  if (!M) {
    M = std::make_unique<CpuModel>(CpuModel::defaultModel());
    M->Vmx = &P;
  }
  return *M;
}


VmxTestMachine::VmxTestMachine(const VmxProfile &P, bool DoVmxon)
    : TestMachine(64ull << 20, modelWithVmx(P)), Profile(P) {
  setupLongMode();
  S.Cr4 |= cr4::VMXE;
  (*Cpu_.Msrs)[MsrSlot::IA32_FEATURE_CONTROL] = 0x5;
  Layout.GuestRip = kGuestCode;
  Layout.HostRip = kHostCode;
  for (uint64_t Region : {kVmxonRegion, kVmcsRegion, kVmcsRegion2}) {
    uint32_t Rev = kVmcsRevisionId;
    write(Region, &Rev, 4);
  }
  if (!DoVmxon)
    return;
  execWithPointer(enc::VmxonRax, kVmxonRegion);
  execWithPointer(enc::VmclearRax, kVmcsRegion);
  execWithPointer(enc::VmptrldRax, kVmcsRegion);
  vmcs() = knownGoodVmcs(P, Layout);
}

StepResult VmxTestMachine::exec(const std::vector<uint8_t> &Bytes, uint64_t MaxInsns) {
  loadCode(Bytes);
  if (!S.longMode() && (S.Cr0 & cr0::PE))
    S.Rip = kCodeBase;
  Cpu_.Mmu.flushDecodeCache();
  ExceptionRecorder Obs;
  Cpu_.Observer = &Obs;
  StepResult R;
  R.Why = run(MaxInsns);
  Cpu_.Observer = nullptr;
  if (Obs.Seen) {
    R.Faulted = true;
    R.Vector = Obs.Event.Vector;
    R.ErrorCode = Obs.Event.ErrorCode;
    Cpu_.Activity = ActivityState::Active;
  }
  return R;
}

StepResult VmxTestMachine::execWithPointer(const std::vector<uint8_t> &Bytes, uint64_t Value) {
  write(kPointerSlot, &Value, 8);
  S.Gpr[RAX] = kPointerSlot;
  return exec(Bytes);
}

} // namespace vmxsim::test
