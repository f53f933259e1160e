// The cost of EPT (issue 4: "the EPT cost on TLB hits must be zero ..., and at most 2x
// slower on a workload touching many pages"): guest MIPS of the same 64-bit guest with
// EPT off and with an identity EPT of 2 MiB pages, on an integer loop (every access a
// TLB hit) and on a loop that touches a new 4 KiB page at every access (32 MiB, far more
// pages than the software TLB holds, so every access walks guest paging and EPT). Each
// benchmark iteration runs both configurations back to back and reports both MIPS and
// their ratio (EPT-off time / EPT-on time: 1.0 = free, 0.5 = twice as slow).
#include "tests/support/ept_builder.h"
#include "tests/support/vmx_test_machine.h"

#include "cpu/vmx/capabilities.h"

#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

using F = VmcsField;

constexpr uint64_t kEptPool = 0x400000, kPoolBytes = 0x40000;
constexpr uint32_t kIterations = 2'000'000;

// Assembled from:
//   0: mov ecx, N; 1: add rax, rcx; xor rdx, rax; imul rdx, rdx, 3; dec ecx; jnz 1b;
//      vmcall
//  16: mov ecx, N; mov ebx, 0x1000000; xor esi, esi;
//      2: add rax, [rbx + rsi]; mov [rbx + rsi + 8], rax; add rsi, 4160;
//      and rsi, 0x1ffffff; dec ecx; jnz 2b; vmcall
const uint8_t kGuest[] = {
    0xb9, 0x80, 0x84, 0x1e, 0x00, 0x48, 0x01, 0xc8, 0x48, 0x31, 0xc2, 0x48, 0x6b, 0xd2,
    0x03, 0xff, 0xc9, 0x75, 0xf2, 0x0f, 0x01, 0xc1, 0xb9, 0x80, 0x84, 0x1e, 0x00, 0xbb,
    0x00, 0x00, 0x00, 0x01, 0x31, 0xf6, 0x48, 0x03, 0x04, 0x33, 0x48, 0x89, 0x44, 0x33,
    0x08, 0x48, 0x81, 0xc6, 0x40, 0x10, 0x00, 0x00, 0x48, 0x81, 0xe6, 0xff, 0xff, 0xff,
    0x01, 0xff, 0xc9, 0x75, 0xe5, 0x0f, 0x01, 0xc1};
constexpr uint64_t kIntegerLoop = 0, kMemoryLoop = 0x16;
constexpr unsigned kCountOffsets[] = {1, 0x17};

/// A VmxTestMachine whose guest is kGuest, with or without an identity EPT (2 MiB pages
/// over the whole 64 MiB of RAM).
struct BenchMachine {
  explicit BenchMachine(bool Ept) : M(eptTestProfile()) {
    uint8_t Code[sizeof(kGuest)];
    std::copy(std::begin(kGuest), std::end(kGuest), Code);
    for (unsigned Off : kCountOffsets)
      for (unsigned B = 0; B < 4; ++B)
        Code[Off + B] = uint8_t(kIterations >> (8 * B));
    M.write(kGuestCode, Code, sizeof(Code));
    const uint8_t Host[] = {0xf4};
    M.write(kHostCode, Host, sizeof(Host));
    if (Ept) {
      Builder = std::make_unique<EptBuilder>(M, kEptPool, kPoolBytes);
      Builder->identity2M(64ull << 20);
      VmcsData &V = M.vmcs();
      V.set(F::PrimaryProcessorBasedVmExecutionControls,
            V.get(F::PrimaryProcessorBasedVmExecutionControls) |
                controlBit(VmxControl::ActivateSecondaryControls));
      V.set(F::SecondaryProcessorBasedVmExecutionControls, controlBit(VmxControl::EnableEpt));
      V.set(F::EptPointer, Builder->eptp());
    }
  }

  /// Runs the guest from Entry to its VMCALL, adding its instructions and host seconds
  /// to the totals; false when the guest did not end in its VMCALL exit.
  bool run(uint64_t Entry) {
    M.vmcs().set(F::GuestRip, kGuestCode + Entry);
    M.Cpu_.Activity = ActivityState::Active;
    uint64_t Retired0 = M.Cpu_.Retired;
    auto T0 = std::chrono::steady_clock::now();
    M.exec(Launched ? enc::Vmresume : enc::Vmlaunch, ~uint64_t(0) >> 1);
    Seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - T0).count();
    Launched = true;
    // VMLAUNCH/VMRESUME and the host's HLT are the only host instructions retired.
    Insns += M.Cpu_.Retired - Retired0 - 2;
    return M.vmcs().get(F::ExitReason) == 18 && !M.Cpu_.NonRoot;
  }
  double mips() const { return double(Insns) / Seconds / 1e6; }
  void resetTotals() { Insns = 0, Seconds = 0; }

  VmxTestMachine M;
  std::unique_ptr<EptBuilder> Builder;
  bool Launched = false;
  uint64_t Insns = 0;
  double Seconds = 0;
};

void eptCost(benchmark::State &St, uint64_t Entry) {
  BenchMachine NoEpt(false), WithEpt(true);
  // Warm up both (decode cache, TLB, host page commits).
  if (!NoEpt.run(Entry) || !WithEpt.run(Entry)) {
    St.SkipWithError("the guest did not reach its VMCALL");
    return;
  }
  NoEpt.resetTotals();
  WithEpt.resetTotals();
  bool EptFirst = false;
  for (auto _ : St) {
    // Alternate the order so that neither configuration always runs on a warmer host.
    BenchMachine &A = EptFirst ? WithEpt : NoEpt, &B = EptFirst ? NoEpt : WithEpt;
    if (!A.run(Entry) || !B.run(Entry)) {
      St.SkipWithError("the guest did not reach its VMCALL");
      return;
    }
    EptFirst = !EptFirst;
  }
  St.counters["MIPS_ept_off"] = NoEpt.mips();
  St.counters["MIPS_ept_on"] = WithEpt.mips();
  St.counters["speed_ratio_on_over_off"] = WithEpt.mips() / NoEpt.mips();
}

/// Every access hits the TLB: EPT must cost nothing.
void BM_EptIntegerLoop(benchmark::State &St) { eptCost(St, kIntegerLoop); }
/// Every access misses the TLB: guest walk plus EPT walks; must be at most 2x slower.
void BM_EptManyPages(benchmark::State &St) { eptCost(St, kMemoryLoop); }

BENCHMARK(BM_EptIntegerLoop)->Unit(benchmark::kMillisecond)->Iterations(4);
BENCHMARK(BM_EptManyPages)->Unit(benchmark::kMillisecond)->Iterations(4);

} // namespace

BENCHMARK_MAIN();
