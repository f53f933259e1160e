// Interpreter speed on hot paths (STYLE 2.4): decoded-block cache hits on a tight integer
// loop, and memory accesses that hit the TLB. Reported as guest MIPS (items/s = retired
// instructions per second).
#include "tests/support/test_machine.h"

#include <benchmark/benchmark.h>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

/// Runs the loaded loop from kCodeBase once per benchmark iteration, with RCX = Iters
/// (the loop counter) and RSI = Rsi, to its final HLT; reports retired instructions as
/// items processed.
void runLoop(benchmark::State &St, TestMachine &M, uint64_t Iters, uint64_t Rsi) {
  for (auto _ : St) {
    M.S.Rip = kCodeBase;
    M.S.Gpr[RCX] = Iters;
    M.S.Gpr[RSI] = Rsi;
    M.Cpu_.Halted = false;
    uint64_t Before = M.Cpu_.Retired;
    StopReason R = M.run(~uint64_t(0) >> 1);
    if (R != StopReason::Halted)
      St.SkipWithError("loop did not end in HLT");
    St.SetItemsProcessed(St.items_processed() + int64_t(M.Cpu_.Retired - Before));
  }
}

// A tight register loop, 5 instructions per iteration:
//   loop: add rax, rcx; xor rdx, rax; add rbx, 3; dec rcx; jnz loop
void BM_IntegerLoop(benchmark::State &St) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode({0x48, 0x01, 0xc8, 0x48, 0x31, 0xc2, 0x48, 0x83, 0xc3, 0x03, 0x48, 0xff, 0xc9,
              0x75, 0xf2, 0xf4});
  runLoop(St, M, 2'000'000, 0); // the loop does not use RSI
}
BENCHMARK(BM_IntegerLoop)->Unit(benchmark::kMillisecond);

// Loads and stores that hit the TLB: 6 instructions per iteration.
//   loop: mov rax, [rsi]; add rax, rcx; mov [rsi+8], rax; add rsi, 16; and rsi, 0xfff0
//         ... keeps rsi inside one 64 KiB window; dec rcx; jnz loop
void BM_MemoryLoop(benchmark::State &St) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode({0x48, 0x8b, 0x06,             // mov rax, [rsi]
              0x48, 0x01, 0xc8,             // add rax, rcx
              0x48, 0x89, 0x46, 0x08,       // mov [rsi+8], rax
              0x48, 0x83, 0xc6, 0x10,       // add rsi, 16
              0x81, 0xe6, 0xf0, 0xff, 0, 0, // and esi, 0xfff0
              0x48, 0x81, 0xce, 0, 0, 0x20, 0, // or rsi, 0x200000
              0x48, 0xff, 0xc9,             // dec rcx
              0x75, 0xe3,                   // jnz loop
              0xf4});
  runLoop(St, M, 1'000'000, kDataBase);
}
BENCHMARK(BM_MemoryLoop)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
