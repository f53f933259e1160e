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

bool enterVmxRootOperation(Cpu &C, PhysMem &Mem, const VmxProfile &P, const KnownGoodLayout &L,
                           uint64_t VmxonRegion, uint64_t VmcsRegion, uint64_t Scratch) {
  setupLongMode(C, Mem);
  C.S.Cr4 |= cr4::VMXE;
  (*C.Msrs)[MsrSlot::IA32_FEATURE_CONTROL] = 0x5;
  for (uint64_t Region : {VmxonRegion, VmcsRegion}) {
    const uint32_t Rev = kVmcsRevisionId;
    Mem.copyIn(Hpa(Region), &Rev, 4);
  }
  // mov rax, Scratch + 56; vmxon [rax]; mov rax, Scratch + 48; vmclear [rax];
  // vmptrld [rax]: each leaves RFLAGS.CF and ZF clear on success.
  const uint64_t Ptrs[2] = {VmcsRegion, VmxonRegion};
  Mem.copyIn(Hpa(Scratch + 48), Ptrs, 16);
  std::vector<uint8_t> Code = {0x48, 0xb8};
  auto imm64 = [&](uint64_t V) {
    for (unsigned I = 0; I < 8; ++I)
      Code.push_back(uint8_t(V >> (8 * I)));
  };
  imm64(Scratch + 56);
  Code.insert(Code.end(), enc::VmxonRax.begin(), enc::VmxonRax.end());
  Code.insert(Code.end(), {0x48, 0xb8});
  imm64(Scratch + 48);
  Code.insert(Code.end(), enc::VmclearRax.begin(), enc::VmclearRax.end());
  Code.insert(Code.end(), enc::VmptrldRax.begin(), enc::VmptrldRax.end());
  Mem.copyIn(Hpa(Scratch), Code.data(), Code.size());
  C.S.Rip = Scratch;
  C.Activity = ActivityState::Active; // an AP waits for a SIPI
  C.Mmu.flushDecodeCache();
  C.run(5);
  if (C.Retired == 0 || C.S.Rip != Scratch + Code.size() ||
      (C.S.Rflags & (rflags::CF | rflags::ZF)) || !C.Vmx->haveCurrentVmcs())
    return false;
  C.Vmx->Vmcs = knownGoodVmcs(P, L);
  return true;
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
