#include "cpu/vmx/capabilities.h"

#include "cpu/registers.h"
#include "cpu/vmx/vmcs.h"

#include <array>

namespace vmxsim {

namespace {

enum class Default : uint8_t { Default1, TrueDefault1, Flexible };

struct ControlRow {
  VmxControlWord Word;
  uint8_t Bit;
  Default Def;
  VmxFeature Feature;
  const char *Name;
  const char *SdmName;
};

constexpr ControlRow kControls[] = {
#define VMX_CONTROL(Word, Bit, Name, Def, Feature, SdmName)                               \
  {VmxControlWord::Word, Bit, Default::Def, VmxFeature::Feature, #Name, SdmName},
#include "cpu/vmx/vmx_controls.def"
#undef VMX_CONTROL
};

constexpr bool controlsAreConsistent() {
  for (unsigned I = 0; I < std::size(kControls); ++I) {
    if (kControls[I].Bit > 31)
      return false;
    for (unsigned J = I + 1; J < std::size(kControls); ++J)
      if (kControls[I].Word == kControls[J].Word && kControls[I].Bit == kControls[J].Bit)
        return false;
  }
  return true;
}
static_assert(controlsAreConsistent(), "vmx_controls.def: a bit is listed twice or > 31");

} // namespace

const VmxControlInfo &controlInfo(VmxControl C) {
  static const auto Infos = [] {
    std::array<VmxControlInfo, std::size(kControls)> A{};
    for (unsigned I = 0; I < std::size(kControls); ++I)
      A[I] = {kControls[I].Word, kControls[I].Bit, kControls[I].Name, kControls[I].SdmName,
              kControls[I].Feature};
    return A;
  }();
  return Infos[unsigned(C)];
}

namespace {
constexpr unsigned kNumWords = 6;
constexpr unsigned kNumFeatures = unsigned(VmxFeature::Count);

// The control table folded per control word, once: the default1 bits, the bits whose
// default1 the TRUE_ MSRs let software clear, and the flexible bits each feature
// allows. controlCaps is on the VM-entry path, so it must not walk the table.
struct WordMasks {
  uint32_t Default1 = 0, TrueDefault1 = 0;
  uint32_t ByFeature[kNumFeatures] = {};
};
constexpr std::array<WordMasks, kNumWords> foldControls() {
  std::array<WordMasks, kNumWords> W{};
  for (const ControlRow &R : kControls) {
    WordMasks &M = W[unsigned(R.Word)];
    uint32_t Bit = 1u << R.Bit;
    switch (R.Def) {
    case Default::Default1:
      M.Default1 |= Bit;
      break;
    case Default::TrueDefault1:
      M.TrueDefault1 |= Bit;
      break;
    case Default::Flexible:
      M.ByFeature[unsigned(R.Feature)] |= Bit;
      break;
    }
  }
  return W;
}
constexpr std::array<WordMasks, kNumWords> kWordMasks = foldControls();
} // namespace

namespace {
ControlCaps computeControlCaps(uint64_t Features, VmxControlWord W, bool True) {
  auto has = [&](VmxFeature F) { return (Features >> unsigned(F)) & 1; };
  // Without the "activate secondary/tertiary controls" capability the words do not
  // exist; report nothing allowed.
  if ((W == VmxControlWord::Proc2 && !has(VmxFeature::SecondaryControls)) ||
      (W == VmxControlWord::Proc3 && !has(VmxFeature::TertiaryControls)))
    return ControlCaps{0, 0};
  const WordMasks &M = kWordMasks[unsigned(W)];
  ControlCaps Caps{M.Default1 | (True ? 0 : M.TrueDefault1), M.Default1 | M.TrueDefault1};
  for (unsigned F = 0; F < kNumFeatures; ++F) {
    // Same rule as VmxProfile::has: Always and None always, Never never.
    VmxFeature Ft = VmxFeature(F);
    bool Allowed = Ft == VmxFeature::Always || Ft == VmxFeature::None ||
                   (Ft != VmxFeature::Never && has(Ft));
    if (Allowed)
      Caps.MayBe1 |= M.ByFeature[F];
  }
  return Caps;
}
} // namespace

ControlCaps controlCaps(const VmxProfile &P, VmxControlWord W, bool True) {
  // VM entry asks for these on every VMLAUNCH/VMRESUME; they depend only on the feature
  // set, so each thread keeps the last feature set's answers.
  thread_local bool Valid = false;
  thread_local uint64_t CachedFeatures = 0;
  thread_local ControlCaps Cached[kNumWords][2];
  if (!Valid || P.Features != CachedFeatures) {
    Valid = true;
    for (unsigned Wd = 0; Wd < kNumWords; ++Wd)
      for (unsigned T = 0; T < 2; ++T)
        Cached[Wd][T] = computeControlCaps(P.Features, VmxControlWord(Wd), T != 0);
    CachedFeatures = P.Features;
  }
  return Cached[unsigned(W)][True ? 1 : 0];
}

std::optional<uint64_t> vmxCapabilityMsr(const VmxProfile &P, uint32_t Msr,
                                         uint64_t Cr4Fixed1) {
  auto ctls = [&](VmxControlWord W, bool True) {
    ControlCaps C = controlCaps(P, W, True);
    return (uint64_t(C.MayBe1) << 32) | C.MustBe1;
  };
  switch (Msr) {
  case msr::IA32_VMX_BASIC:
    // SDM Vol. 3D, A.1 Basic VMX Information: revision [30:0], region size [44:32],
    // memory type WB (6) [53:50], INS/OUTS information reported [54], TRUE controls [55].
    return uint64_t(kVmcsRevisionId) | (uint64_t(4096) << 32) | (uint64_t(6) << 50) |
           (uint64_t(1) << 54) | (uint64_t(1) << 55);
  case msr::IA32_VMX_PINBASED_CTLS:
    return ctls(VmxControlWord::Pin, false);
  case msr::IA32_VMX_PROCBASED_CTLS:
    return ctls(VmxControlWord::Proc, false);
  case msr::IA32_VMX_EXIT_CTLS:
    return ctls(VmxControlWord::Exit, false);
  case msr::IA32_VMX_ENTRY_CTLS:
    return ctls(VmxControlWord::Entry, false);
  case msr::IA32_VMX_TRUE_PINBASED_CTLS:
    return ctls(VmxControlWord::Pin, true);
  case msr::IA32_VMX_TRUE_PROCBASED_CTLS:
    return ctls(VmxControlWord::Proc, true);
  case msr::IA32_VMX_TRUE_EXIT_CTLS:
    return ctls(VmxControlWord::Exit, true);
  case msr::IA32_VMX_TRUE_ENTRY_CTLS:
    return ctls(VmxControlWord::Entry, true);
  case msr::IA32_VMX_PROCBASED_CTLS2:
    if (!P.has(VmxFeature::SecondaryControls))
      return std::nullopt;
    return ctls(VmxControlWord::Proc2, true);
  case msr::IA32_VMX_PROCBASED_CTLS3:
    if (!P.has(VmxFeature::TertiaryControls))
      return std::nullopt;
    return 0; // no tertiary control is modelled
  case msr::IA32_VMX_MISC: {
    // SDM Vol. 3D, A.6 Miscellaneous Data: timer rate [4:0], EFER.LMA stored into the
    // "IA-32e mode guest" entry control on exit [5], activity states HLT, shutdown and
    // wait-for-SIPI [8:6], CR3-target count [24:16], MSR-list size [27:25], VMWRITE to
    // any field [29], injection with instruction length 0 [30].
    uint64_t V = (P.PreemptionTimerRate & 0x1f) | (1u << 5) | (7u << 6) |
                 (uint64_t(P.Cr3TargetCount) << 16) |
                 (uint64_t(P.MaxMsrListEntries & 7) << 25) |
                 (P.VmwriteAnyField ? (1u << 29) : 0) | (1u << 30);
    if (!P.has(VmxFeature::PreemptionTimer))
      V &= ~uint64_t(0x1f);
    return V;
  }
  case msr::IA32_VMX_CR0_FIXED0:
    // SDM Vol. 3D, A.7: PE, NE and PG must be 1 in VMX operation.
    return cr0::PE | cr0::NE | cr0::PG;
  case msr::IA32_VMX_CR0_FIXED1:
    return 0xffffffffull;
  case msr::IA32_VMX_CR4_FIXED0:
    // SDM Vol. 3D, A.8: CR4.VMXE must be 1.
    return cr4::VMXE;
  case msr::IA32_VMX_CR4_FIXED1:
    return Cr4Fixed1 | cr4::VMXE;
  case msr::IA32_VMX_VMCS_ENUM: {
    // SDM Vol. 3D, A.9: bits 9:1 hold the highest index of any supported field.
    unsigned Max = 0;
    for (const VmcsFieldInfo &F : kVmcsFields)
      if (P.has(F.Feature))
        Max = std::max(Max, (F.Encoding >> 1) & 0x1ff);
    return uint64_t(Max) << 1;
  }
  case msr::IA32_VMX_EPT_VPID_CAP: {
    if (!P.has(VmxFeature::Ept) && !P.has(VmxFeature::Vpid))
      return std::nullopt;
    uint64_t V = 0;
    if (P.has(VmxFeature::Ept)) {
      // SDM Vol. 3D, A.10 VPID and EPT Capabilities.
      V |= (P.EptExecuteOnly ? 1u : 0) | (1u << 6) | (P.Ept5Level ? (1u << 7) : 0) |
           (1u << 8) | (1u << 14) | (1u << 16) | (P.Ept1GPages ? (1u << 17) : 0) |
           (1u << 20) | (P.EptAccessedDirty ? (1u << 21) : 0) |
           (P.has(VmxFeature::AdvancedEptViolationInformation) ? (1u << 22) : 0) |
           (1u << 25) | (1u << 26);
    }
    if (P.has(VmxFeature::Vpid))
      V |= (uint64_t(1) << 32) | (uint64_t(1) << 40) | (uint64_t(1) << 41) |
           (uint64_t(1) << 42) | (uint64_t(1) << 43);
    return V;
  }
  case msr::IA32_VMX_VMFUNC:
    if (!P.has(VmxFeature::VmFunctions))
      return std::nullopt;
    return P.has(VmxFeature::EptpSwitching) ? 1 : 0;
  default:
    return std::nullopt;
  }
}

} // namespace vmxsim
