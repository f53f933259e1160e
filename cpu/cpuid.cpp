// The default processor model and CPUID (SDM Vol. 2A, CPUID—CPU Identification).
//
// The model is a modern Intel core (family 6, model 0x8F) that advertises only what
// vmxsim executes: MONITOR/MWAIT (cpu/monitor.h); integer ISA incl. CMPXCHG8B/16B,
// POPCNT, LZCNT, MOVBE, BMI1/BMI2, ADX;
// MMX; SSE through SSE4.2, PCLMULQDQ and AES-NI (legacy encodings; no AVX); FXSAVE; the
// x87 FPU (cpu/exec_x87.cpp; with CMOV, FCMOVcc and FCOMI too), whose FCS and FDS are
// deprecated (stored as 0) and whose FDP is updated by every memory-operand instruction
// (FDP_EXCPTN_ONLY clear); XSAVE, XSAVEOPT
// and XSAVEC for the x87 and SSE components (cpu/exec_xsave.cpp); VMX; PCID, INVPCID,
// SMEP, SMAP, UMIP, FSGSBASE, NX, 1 GiB pages, SYSCALL, SYSENTER, RDTSCP; RDRAND and
// RDSEED (deterministic streams: cpu/exec_random.cpp); x2APIC and the TSC-deadline APIC
// timer (harness/devices/local_apic.h); MCE and MCA with 10 machine-check banks that
// never log an error (cpu/msrs.def); the speculation-control MSRs, with
// IA32_ARCH_CAPABILITIES reporting no speculative-execution vulnerability (cpu/msrs.def).
#include "cpu/cpuid.h"
#include "cpu/vmx/vmx_features.h"

#include "cpu/cpu.h"
#include "cpu/cpu_model.h"
#include "cpu/msrs.h"
#include "cpu/perfmon.h"

#include <cstring>

namespace vmxsim {

namespace {

constexpr uint32_t kMaxBasicLeaf = 0xd;
constexpr uint32_t kMaxExtLeaf = 0x80000008;
constexpr bool kAdvertiseXsave = true;

// Brand string, 48 bytes over leaves 0x80000002..4.
constexpr char kBrand[48] = "vmxsim virtual Intel(R) 64 processor";

uint32_t brandWord(unsigned Index) {
  uint32_t W;
  std::memcpy(&W, kBrand + 4 * Index, 4);
  return W;
}

CpuModel makeDefault() {
  using namespace cpuidbit;
  CpuModel M;
  M.Name = "vmxsim-default";
  M.MaxPhysAddrBits = 46;
  M.MaxLinearAddrBits = 48;
  M.Vmx = &VmxProfile::full();
  uint32_t Ecx1 = (M.Vmx ? Vmx : 0) | Cx16 | Movbe | Popcnt | (M.Pcid ? Pcid : 0) |
                  (kAdvertiseXsave ? Xsave : 0) | Rdrand | X2apic | TscDeadline | Monitor;
  // SIMD extensions after SSE2 (cpu/insns_sse_ext.def).
  Ecx1 |= Sse3 | Ssse3 | Sse41 | Sse42 | Pclmulqdq | Aes;
  uint32_t Edx1 = Fpu | De | Pse | Tsc | Msr | Pae | Mce | Cx8 | Apic | Sep | Mtrr | Pge | Mca |
                  Cmov | Pat | Pse36 | Clfsh | Mmx | Fxsr | Sse | Sse2;
  uint32_t Ebx7 = Fsgsbase | Bmi1 | Bmi2 | Invpcid | Adx | Clflushopt | Rdseed |
                  FpuCsDsDeprecated | (M.Smep ? Smep : 0) | (M.Smap ? Smap : 0);
  uint32_t Ecx7 = Umip | (M.La57 ? La57 : 0);
  uint32_t Edx7 = IbrsIbpb | Stibp | L1dFlush | ArchCapabilities | Ssbd;
  M.Cpuid = {
      // Leaf 0: maximum basic leaf and "GenuineIntel" in EBX, EDX, ECX.
      {0, 0, false, kMaxBasicLeaf, 0x756e6547, 0x6c65746e, 0x49656e69},
      // Leaf 1: signature (family 6, model 0x8F, stepping 8); EBX: CLFLUSH line size 8
      // (x 8 bytes), one logical processor, APIC ID filled in at query time.
      {1, 0, false, 0x000806f8, 0x00010800, Ecx1, Edx1},
      // Leaf 2: no descriptors; leaf 4 describes the caches.
      {2, 0, false, 0x00feff01, 0, 0, 0},
      // Leaf 4: deterministic cache parameters (type, level, ways/partitions/line, sets).
      {4, 0, true, 0x00000121, (11u << 22) | 63, 63, 0},   // L1d 48 KiB 12-way
      {4, 1, true, 0x00000122, (7u << 22) | 63, 63, 0},    // L1i 32 KiB 8-way
      {4, 2, true, 0x00000143, (15u << 22) | 63, 2047, 0}, // L2 2 MiB 16-way
      {4, 3, true, 0x00000163, (15u << 22) | 63, 32767, 0x4}, // L3 32 MiB, inclusive
      {4, 4, true, 0, 0, 0, 0},
      // Leaf 5: MONITOR/MWAIT (cpu/monitor.h). EAX/EBX: smallest and largest monitor
      // line, 64 bytes; ECX: MWAIT extensions enumerated (0), interrupts as break events
      // even when masked (1); EDX: the number of MWAIT sub-states of C0 (bits 3:0), C1
      // (7:4), ...: C0 and C1 with one each. (Every hint waits as C1 on the virtual
      // clock, so deeper C-states would promise savings that do not exist.)
      {5, 0, false, 64, 64, 0x3, 0x11},
      // Leaf 6: always-running APIC timer.
      {6, 0, false, 0x4, 0, 0, 0},
      // Leaf 7: structured extended features (subleaf 0 only).
      {7, 0, true, 0, Ebx7, Ecx7, Edx7},
      // Leaf 0xA: architectural performance monitoring version 2 (cpu/perfmon.h).
      {0xa, 0, false, perfmon::kCpuidEax, perfmon::kUnavailableEvents, 0, perfmon::kCpuidEdx},
      // Leaf 0xB: x2APIC topology (SMT then core level); EDX = x2APIC ID at query time.
      {0xb, 0, true, 0, 1, 0x100, 0},
      {0xb, 1, true, 8, 1, 0x201, 0},
      {0xb, 2, true, 0, 0, 2, 0},
      // Leaf 0xD: XSAVE features x87|SSE; sizes 512 legacy area + 64 header.
      {0xd, 0, true, uint32_t(kSupportedXcr0), 576, 576, 0},
      // Subleaf 1: XSAVEOPT (bit 0) and XSAVEC (bit 1); EBX = compacted size for
      // XCR0 | IA32_XSS (no supervisor components, so 576).
      {0xd, 1, true, 0x3, 576, 0, 0},
      {0x80000000, 0, false, kMaxExtLeaf, 0, 0, 0},
      {0x80000001, 0, false, 0, 0, LahfLm | Abm,
       Syscall | (M.Nx ? Nx : 0) | (M.Page1G ? Page1Gb : 0) | Rdtscp | Lm},
      {0x80000002, 0, false, brandWord(0), brandWord(1), brandWord(2), brandWord(3)},
      {0x80000003, 0, false, brandWord(4), brandWord(5), brandWord(6), brandWord(7)},
      {0x80000004, 0, false, brandWord(8), brandWord(9), brandWord(10), brandWord(11)},
      // L2: 2048 KiB, 16-way (encoding 8), 64-byte lines.
      {0x80000006, 0, false, 0, 0, (2048u << 16) | (0x8u << 12) | 64, 0},
      // Invariant TSC.
      {0x80000007, 0, false, 0, 0, 0, 1u << 8},
      {0x80000008, 0, false, uint32_t(M.MaxPhysAddrBits) | (uint32_t(M.MaxLinearAddrBits) << 8),
       0, 0, 0},
  };
  return M;
}

const CpuidLeaf *findLeaf(const CpuModel &M, uint32_t Leaf, uint32_t Subleaf) {
  for (const CpuidLeaf &L : M.Cpuid)
    if (L.Leaf == Leaf && (!L.HasSubleaves || L.Subleaf == Subleaf))
      return &L;
  return nullptr;
}

uint32_t maxLeaf(const CpuModel &M, uint32_t Base) {
  const CpuidLeaf *L = findLeaf(M, Base, 0);
  return L ? L->Eax : 0;
}

} // namespace

const CpuModel &CpuModel::defaultModel() {
  static const CpuModel M = makeDefault();
  return M;
}

CpuidResult cpuidQuery(const Cpu &C, uint32_t Leaf, uint32_t Subleaf) {
  const CpuModel &M = C.Model;
  const uint64_t MiscEnable = (*C.Msrs)[MsrSlot::IA32_MISC_ENABLE];
  uint32_t MaxBasic = maxLeaf(M, 0);
  // IA32_MISC_ENABLE[22] (limit CPUID maxval) caps leaf 0 at 2 (SDM Vol. 4).
  if (MiscEnable & (1u << 22))
    MaxBasic = MaxBasic > 2 ? 2 : MaxBasic;
  // Out-of-range leaves return the highest basic leaf's data (SDM Vol. 2A, CPUID:
  // "If a value entered for CPUID.EAX is higher than the maximum input value ...").
  bool InRange = Leaf >= 0x80000000 ? Leaf <= maxLeaf(M, 0x80000000) : Leaf <= MaxBasic;
  if (!InRange) {
    Leaf = MaxBasic;
    Subleaf = 0;
  }
  CpuidResult R;
  if (const CpuidLeaf *L = findLeaf(M, Leaf, Subleaf))
    R = CpuidResult{L->Eax, L->Ebx, L->Ecx, L->Edx};
  else if (const CpuidLeaf *First = findLeaf(M, Leaf, 0); First && First->HasSubleaves)
    R = CpuidResult{0, 0, Leaf == 0xb ? Subleaf & 0xff : 0, 0}; // invalid subleaf
  switch (Leaf) {
  case 0:
    R.Eax = MaxBasic;
    break;
  case 1:
    R.Ebx = (R.Ebx & 0x00ffffff) | (uint32_t(C.Id) << 24);
    if (C.S.Cr4 & cr4::OSXSAVE)
      R.Ecx |= cpuidbit::Osxsave;
    // The APIC bit follows IA32_APIC_BASE.EN (SDM Vol. 3A, Local APIC Status and Location).
    if (!((*C.Msrs)[MsrSlot::IA32_APIC_BASE] & (1u << 11)))
      R.Edx &= ~cpuidbit::Apic;
    // IA32_MISC_ENABLE[18] = 0 ("ENABLE MONITOR FSM") clears MONITOR (SDM Vol. 4).
    if (!(MiscEnable & (1u << 18)))
      R.Ecx &= ~cpuidbit::Monitor;
    // A model without a VMX profile has no VMX (SDM Vol. 3C, Discovering Support for VMX).
    if (!M.Vmx)
      R.Ecx &= ~cpuidbit::Vmx;
    break;
  case 0xb:
    R.Edx = C.Id;
    break;
  case 0xd:
    if (Subleaf == 0) // size for the features enabled in XCR0: only x87|SSE exist
      R.Ebx = 576;
    break;
  case 0x80000001:
    if (MiscEnable & (1ull << 34)) // XD disable
      R.Edx &= ~cpuidbit::Nx;
    break;
  default:
    break;
  }
  return R;
}

bool modelHas(const Cpu &C, uint32_t Leaf, unsigned Reg, uint32_t Bit) {
  const CpuidLeaf *L = findLeaf(C.Model, Leaf, 0);
  if (!L)
    return false;
  uint32_t V = Reg == 0 ? L->Eax : Reg == 1 ? L->Ebx : Reg == 2 ? L->Ecx : L->Edx;
  return V & Bit;
}

} // namespace vmxsim
