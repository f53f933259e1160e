// Interpreter speed on hot paths (STYLE 2.4): decoded-block cache hits on a tight integer
// loop, memory accesses that hit the TLB, and stores into the page the loop executes from
// (data in a code page) against the same loop storing to another page. Reported as guest
// MIPS (items/s = retired instructions per second).
#include "tests/support/test_machine.h"

#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

/// Runs the loaded loop from Rip (kCodeBase: the start of the code in 64-bit mode) once
/// per benchmark iteration, with RCX = Iters (the loop counter) and RSI = Rsi, to its
/// final HLT; reports retired instructions as items processed.
void runLoop(benchmark::State &St, TestMachine &M, uint64_t Iters, uint64_t Rsi,
             uint64_t Rip = kCodeBase) {
  for (auto _ : St) {
    M.S.Rip = Rip;
    M.S.Gpr[RCX] = Iters;
    M.S.Gpr[RSI] = Rsi;
    M.Cpu_.Activity = ActivityState::Active;
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

// Data in the code page (issue 11): one loop, 6 instructions per iteration, that loads
// and stores through RSI; run with RSI in its own code page (0x800 bytes past the code,
// outside any decoded bytes) and with RSI in the next 4 KiB page. The ratio of the two
// is the cost of sharing a page with code.
//   loop: mov rax, [rsi]; add rax, rcx; mov [rsi+8], rax; xor rdx, rax; dec rcx; jnz loop
const std::vector<uint8_t> kDataLoop64 = {
    0x48, 0x8b, 0x06,       // mov rax, [rsi]
    0x48, 0x01, 0xc8,       // add rax, rcx
    0x48, 0x89, 0x46, 0x08, // mov [rsi+8], rax
    0x48, 0x31, 0xc2,       // xor rdx, rax
    0x48, 0xff, 0xc9,       // dec rcx
    0x75, 0xee,             // jnz loop
    0xf4};                  // hlt
void BM_StoreToOwnCodePage(benchmark::State &St) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode(kDataLoop64);
  runLoop(St, M, 1'000'000, kCodeBase + 0x800);
}
BENCHMARK(BM_StoreToOwnCodePage)->Unit(benchmark::kMillisecond);
void BM_StoreToOtherPage(benchmark::State &St) {
  TestMachine M;
  M.setupLongMode();
  M.loadCode(kDataLoop64);
  runLoop(St, M, 1'000'000, kCodeBase + 0x1800);
}
BENCHMARK(BM_StoreToOtherPage)->Unit(benchmark::kMillisecond);

// The same in real mode (the case: boot code and BIOS-like stubs keep their
// variables in the code segment), CS base = kCodeBase, code at CS:0; 6 instructions:
//   loop: mov ax, cs:[si]; add ax, cx; mov cs:[si+2], ax; xor dx, ax; dec ecx; jnz loop
const std::vector<uint8_t> kDataLoop16 = {
    0x2e, 0x8b, 0x04,       // mov ax, cs:[si]
    0x01, 0xc8,             // add ax, cx
    0x2e, 0x89, 0x44, 0x02, // mov cs:[si+2], ax
    0x31, 0xc2,             // xor dx, ax
    0x66, 0x49,             // dec ecx
    0x75, 0xf1,             // jnz loop
    0xf4};                  // hlt
void BM_RealModeStoreToOwnCodePage(benchmark::State &St) {
  TestMachine M;
  M.setupReal();
  M.loadCode(kDataLoop16);
  runLoop(St, M, 1'000'000, 0x800, 0);
}
BENCHMARK(BM_RealModeStoreToOwnCodePage)->Unit(benchmark::kMillisecond);
void BM_RealModeStoreToOtherPage(benchmark::State &St) {
  TestMachine M;
  M.setupReal();
  M.loadCode(kDataLoop16);
  runLoop(St, M, 1'000'000, 0x1800, 0);
}
BENCHMARK(BM_RealModeStoreToOtherPage)->Unit(benchmark::kMillisecond);

} // namespace

BENCHMARK_MAIN();
