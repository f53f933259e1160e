// A TestMachine in 64-bit mode that has executed VMXON, VMCLEAR and VMPTRLD and holds the
// known-good VMCS (tests/support/known_good_vmcs.h) as its current VMCS, plus helpers to
// execute one instruction and observe its fault or VMX outcome.
#pragma once
#include "cpu/vmx/vmx_state.h"
#include "tests/support/known_good_vmcs.h"
#include "tests/support/test_machine.h"

#include <cstdint>
#include <vector>

namespace vmxsim::test {

/// Physical layout used by VmxTestMachine (all inside TestMachine's identity map).
inline constexpr uint64_t kVmxonRegion = 0x300000; ///< VMXON region
inline constexpr uint64_t kVmcsRegion = 0x301000;  ///< the known-good VMCS
inline constexpr uint64_t kVmcsRegion2 = 0x302000; ///< a second VMCS region
inline constexpr uint64_t kPointerSlot = 0x303000; ///< scratch for memory operands
inline constexpr uint64_t kGuestCode = 0x140000;   ///< guest RIP of the known-good VMCS
inline constexpr uint64_t kHostCode = 0x180000;    ///< host RIP of the known-good VMCS

/// The CPU model of the default model with the given VMX profile (static storage).
const CpuModel &modelWithVmx(const VmxProfile &P);

/// Puts processor C (on memory Mem, which holds writeFlatGdt's GDT; e.g. one of a
/// Machine's CPUs) in 64-bit mode with CR4.VMXE and IA32_FEATURE_CONTROL locked with
/// VMXON enabled, executes VMXON, VMCLEAR and VMPTRLD with the regions at VmxonRegion and
/// VmcsRegion (each gets the revision identifier), using Scratch (64 bytes of code and
/// an 8-byte pointer slot) as its code, and installs knownGoodVmcs(P, L) as the current
/// VMCS's data. False if an instruction failed. C's model must offer profile P.
bool enterVmxRootOperation(Cpu &C, PhysMem &Mem, const VmxProfile &P, const KnownGoodLayout &L,
                           uint64_t VmxonRegion, uint64_t VmcsRegion, uint64_t Scratch);

/// What one executed instruction did.
struct StepResult {
  StopReason Why = StopReason::InsnLimit;
  bool Faulted = false;
  uint8_t Vector = 0;
  uint32_t ErrorCode = 0;
};

/// Records the first exception raised, before it is delivered.
class ExceptionRecorder : public CpuObserver {
public:
  void onException(const Cpu &, const PendingEvent &E) override {
    if (!Seen) {
      Seen = true;
      Event = E;
    }
  }
  bool Seen = false;
  PendingEvent Event;
};

class VmxTestMachine : public TestMachine {
public:
  /// Long mode, CR4.VMXE = 1, IA32_FEATURE_CONTROL = lock | VMXON outside SMX, regions
  /// with the revision identifier; with DoVmxon, VMXON + VMCLEAR + VMPTRLD are executed
  /// and the known-good VMCS is installed as the current VMCS's data.
  explicit VmxTestMachine(const VmxProfile &P = VmxProfile::full(), bool DoVmxon = true);

  /// Executes Bytes (one instruction unless told) at kCodeBase in the current mode.
  StepResult exec(const std::vector<uint8_t> &Bytes, uint64_t MaxInsns = 1);
  /// Executes an instruction with a memory operand [rax], where rax -> kPointerSlot
  /// holding Value.
  StepResult execWithPointer(const std::vector<uint8_t> &Bytes, uint64_t Value);

  VmxState &vmx() { return *Cpu_.Vmx; }
  VmcsData &vmcs() { return Cpu_.Vmx->Vmcs; }
  uint64_t arith() const { return S.Rflags & rflags::Arith; }

  const VmxProfile &Profile;
  KnownGoodLayout Layout;
};

/// Instruction encodings (64-bit mode), memory operands [rax].
namespace enc {
inline const std::vector<uint8_t> VmxonRax{0xf3, 0x0f, 0xc7, 0x30};
inline const std::vector<uint8_t> VmclearRax{0x66, 0x0f, 0xc7, 0x30};
inline const std::vector<uint8_t> VmptrldRax{0x0f, 0xc7, 0x30};
inline const std::vector<uint8_t> VmptrstRax{0x0f, 0xc7, 0x38};
inline const std::vector<uint8_t> VmreadRbxRax{0x0f, 0x78, 0xc3};  ///< rbx <- field rax
inline const std::vector<uint8_t> VmwriteRaxRbx{0x0f, 0x79, 0xc3}; ///< field rax <- rbx
inline const std::vector<uint8_t> VmreadMemRbx{0x0f, 0x78, 0x18};  ///< [rax] <- field rbx
inline const std::vector<uint8_t> VmwriteRbxMem{0x0f, 0x79, 0x18}; ///< field rbx <- [rax]
inline const std::vector<uint8_t> Vmlaunch{0x0f, 0x01, 0xc2};
inline const std::vector<uint8_t> Vmresume{0x0f, 0x01, 0xc3};
inline const std::vector<uint8_t> Vmcall{0x0f, 0x01, 0xc1};
inline const std::vector<uint8_t> Vmxoff{0x0f, 0x01, 0xc4};
inline const std::vector<uint8_t> Vmfunc{0x0f, 0x01, 0xd4};
inline const std::vector<uint8_t> InveptRbxRax{0x66, 0x0f, 0x38, 0x80, 0x18};
inline const std::vector<uint8_t> InvvpidRbxRax{0x66, 0x0f, 0x38, 0x81, 0x18};
} // namespace enc

} // namespace vmxsim::test
