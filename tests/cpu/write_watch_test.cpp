// Write watches (PhysMem::watchWrites, cpu/mmu.cpp): every store by the processor that
// touches a watched range is reported with its RIP, whatever path it takes (a first store
// that fills the TLB, a repeated one that would hit a fast write entry, a read-modify-write
// operand, REP STOS), and no other store is; the watched page never gets a fast write TLB
// entry. The ground truth records the hypervisor's trace slots through them.
#include "cpu/observer.h"
#include "tests/support/test_machine.h"
#include "tests/support/watch_log.h"

#include <gtest/gtest.h>

#include <vector>

using namespace vmxsim;
using namespace vmxsim::test;

TEST(WriteWatch, EveryStoreIntoAWatchedRangeIsReportedWithItsRip) {
  TestMachine M;
  M.setupLongMode();
  WatchLog Log;
  M.Cpu_.Transitions = &Log;
  const uint64_t Slots = kDataBase + 0x100;
  M.Mem.watchWrites(Hpa(Slots), 40); // five 8-byte slots
  M.loadCode({
      0x48, 0xbf, 0x00, 0x01, 0x20, 0, 0, 0, 0, 0, // +0  mov rdi, 0x200100
      0x48, 0xb8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // +10 mov rax, imm64
      0x48, 0x89, 0x07,                   // +20 mov [rdi], rax   (fills the TLB)
      0x48, 0x89, 0x07,                   // +23 mov [rdi], rax   (a TLB hit elsewhere)
      0x48, 0x01, 0x47, 0x08,             // +26 add [rdi+8], rax (read-modify-write)
      0x48, 0x89, 0x87, 0x00, 0x02, 0, 0, // +30 mov [rdi+0x200], rax (same page, unwatched)
      0x48, 0x83, 0xc7, 0x10,             // +37 add rdi, 16
      0xb9, 0x02, 0, 0, 0,                // +41 mov ecx, 2
      0xf3, 0x48, 0xab,                   // +46 rep stosq (slots 2 and 3)
  });
  M.run(9);
  ASSERT_EQ(M.S.Rip, kCodeBase + 49);
  ASSERT_GE(Log.Stores.size(), 4u);
  const uint64_t Rips[3] = {20, 23, 26}, Addrs[3] = {Slots, Slots, Slots + 8};
  for (unsigned I = 0; I < 3; ++I) {
    EXPECT_EQ(Log.Stores[I].Rip, kCodeBase + Rips[I]) << I;
    EXPECT_EQ(Log.Stores[I].Addr, Addrs[I]) << I;
    EXPECT_EQ(Log.Stores[I].SizeBytes, 8u) << I;
    EXPECT_EQ(Log.Stores[I].Cpu, 0u);
  }
  EXPECT_LT(Log.Stores[0].Tsc, Log.Stores[1].Tsc);
  // REP STOSQ: slots 2 and 3, all from its RIP, nothing outside the range.
  uint64_t Covered = 0;
  for (size_t I = 3; I < Log.Stores.size(); ++I) {
    EXPECT_EQ(Log.Stores[I].Rip, kCodeBase + 46) << I;
    EXPECT_EQ(Log.Stores[I].Addr, Slots + 16 + Covered) << I;
    Covered += Log.Stores[I].SizeBytes;
  }
  EXPECT_EQ(Covered, 16u);
  EXPECT_EQ(M.read64(Slots), 0x1122334455667788ull);
  EXPECT_EQ(M.read64(Slots + 8), 0x1122334455667788ull);
  EXPECT_EQ(M.read64(Slots + 0x200), 0x1122334455667788ull);
  // The watched page has no fast write entry (its stores must take the slow path).
  EXPECT_EQ(M.Cpu_.Mmu.writeMappedFrame(Gla(Slots)), kTlbEmpty);
}

TEST(WriteWatch, NothingWatchedNothingReportedAndTheFastPathIsUsed) {
  TestMachine M;
  M.setupLongMode();
  WatchLog Log;
  M.Cpu_.Transitions = &Log;
  M.loadCode({
      0x48, 0xbf, 0x00, 0x01, 0x20, 0, 0, 0, 0, 0, // mov rdi, 0x200100
      0x48, 0x89, 0x07,                            // mov [rdi], rax
  });
  M.run(2);
  EXPECT_TRUE(Log.Stores.empty());
  EXPECT_EQ(M.Cpu_.Mmu.writeMappedFrame(Gla(kDataBase)), kDataBase >> 12);
}

namespace {

// One run of the script of WatchedPageStoresAreTheSlowPathsStores, with the MMU's
// watched-page stores (Mmu::writeWatchedPage) on or off.
struct ScriptRun {
  std::vector<WatchedStoreEvent> Stores;
  std::vector<uint8_t> Page; ///< the watched page (and the 8 bytes after it) at the end
  MonitorState::Phase MonitorAfterB = MonitorState::Phase::Idle;
  uint64_t FastStores = 0, FastAfterA = 0, FastAfterB = 0, FastAfterD = 0;
  uint64_t Rip = 0, Cycles = 0;
};

ScriptRun runWatchedPageScript(bool Fast) {
  TestMachine M;
  M.setupLongMode();
  M.Cpu_.Mmu.setWatchedPageStores(Fast);
  WatchLog Log;
  M.Cpu_.Transitions = &Log;
  const uint64_t Slots = kDataBase + 0x100;
  M.Mem.watchWrites(Hpa(Slots), 40); // five 8-byte slots
  ScriptRun Out;
  auto Step = [&](std::initializer_list<uint8_t> Code, unsigned Insns) {
    M.loadCode(Code);
    M.run(Insns);
  };
  // A: the first store fills the page's TlbWriteCode entry (the slow path); then stores
  // that the watched-page path takes: into a slot, beside the range (no report), 4 bytes
  // at the range's end, 8 bytes half in it; and one that crosses into the next page.
  Step({0x48, 0xbf, 0x00, 0x01, 0x20, 0, 0, 0, 0, 0, // mov rdi, 0x200100
        0x48, 0xb8, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // mov rax, imm64
        0x48, 0x89, 0x07,                   // +20 mov [rdi], rax
        0x48, 0x89, 0x47, 0x08,             // +23 mov [rdi+8], rax
        0x48, 0x89, 0x87, 0x00, 0x02, 0, 0, // +27 mov [rdi+0x200], rax
        0x89, 0x47, 0x24,                   // +34 mov [rdi+0x24], eax
        0x48, 0x89, 0x47, 0x26,             // +37 mov [rdi+0x26], rax
        0x48, 0x89, 0x87, 0xfc, 0x0e, 0, 0}, // +41 mov [rdi+0xefc], rax (crosses)
       8);
  Out.FastAfterA = M.Cpu_.Mmu.watchedPageStores();
  // B: a range added to the page while its entry stays (the watches' epoch moves), then
  // MONITOR on the slots' line (a third range) and a store that triggers it.
  M.Mem.watchWrites(Hpa(kDataBase + 0x300), 8);
  M.Cpu_.Mmu.dropWriteMappings(kDataBase >> 12);
  Step({0x48, 0x89, 0x87, 0x00, 0x02, 0, 0, // mov [rdi+0x200], rax (now watched)
        0x48, 0x89, 0xf8,                   // mov rax, rdi
        0x31, 0xc9, 0x31, 0xd2,             // xor ecx, ecx; xor edx, edx
        0x0f, 0x01, 0xc8,                   // monitor
        0x48, 0x89, 0x47, 0x10},            // mov [rdi+0x10], rax
       6);
  Out.MonitorAfterB = M.Cpu_.Monitor.State;
  Out.FastAfterB = M.Cpu_.Mmu.watchedPageStores();
  // D: a data breakpoint armed on another page: the store takes the slow path, which
  // checks the breakpoints.
  M.S.Dr[0] = kDataBase + 0x10000;
  M.S.Dr[7] = 0x400 | 1 | (1u << 16) | (3u << 18); // L0, write, 8 bytes
  debugRegistersChanged(M.Cpu_);
  Step({0x48, 0x89, 0x07}, 1); // mov [rdi], rax
  M.S.Dr[7] = 0x400;
  debugRegistersChanged(M.Cpu_);
  Out.FastAfterD = M.Cpu_.Mmu.watchedPageStores();
  // C: code in the watched page: a slot store from it, then a store over the next
  // instruction (self-modifying: 00 01 20 00 ..., add [rcx], al; and [rax], al, a
  // one-byte store into slot 0, runs instead of the slot store that was there).
  const uint8_t InPage[] = {0x48, 0x89, 0x47, 0x18,             // mov [rdi+0x18], rax
                            0x48, 0x89, 0x87, 0x0b, 0x07, 0, 0, // mov [rdi+0x70b], rax
                            0x48, 0x89, 0x47, 0x20};            // mov [rdi+0x20], rax
  M.write(kDataBase + 0x800, InPage, sizeof(InPage));
  Step({0x48, 0xb9, 0x00, 0x08, 0x20, 0, 0, 0, 0, 0, // mov rcx, 0x200800
        0xff, 0xe1},                                 // jmp rcx
       6);
  Out.Stores = Log.Stores;
  Out.Page.resize(kPageSize + 8);
  EXPECT_TRUE(M.Mem.copyOut(Hpa(kDataBase), Out.Page.data(), Out.Page.size()));
  Out.FastStores = M.Cpu_.Mmu.watchedPageStores();
  Out.Rip = M.S.Rip;
  Out.Cycles = M.Cpu_.Cycles;
  return Out;
}

} // namespace

// The MMU's path for stores into watched pages without code (Mmu::writeWatchedPage) does
// what the slow path (writeLinearSlow, writeCodePage, PhysMem::noteWrite) does: the same
// reports (address, size, RIP, TSC, agent), memory, MONITOR trigger and clock, through a
// script that changes what the path caches or must refuse: a range added to the page, an
// armed monitor, a page-crossing store, an armed data breakpoint, code in the page. It
// takes the stores it may and none of the others.
TEST(WriteWatch, WatchedPageStoresAreTheSlowPathsStores) {
  const ScriptRun Slow = runWatchedPageScript(false);
  const ScriptRun Fast = runWatchedPageScript(true);
  EXPECT_EQ(Slow.FastStores, 0u);
  // A: 4 of 6 (not the one that filled the entry, not the crossing one); B: both; D and
  // C: none.
  EXPECT_EQ(Fast.FastAfterA, 4u);
  EXPECT_EQ(Fast.FastAfterB, 6u);
  EXPECT_EQ(Fast.FastAfterD, 6u);
  EXPECT_EQ(Fast.FastStores, 6u);
  const uint64_t S = kDataBase + 0x100;
  const struct {
    uint64_t Addr;
    unsigned Size;
  } Want[] = {{S, 8},        {S + 8, 8}, {S + 0x24, 4}, {S + 0x26, 8}, {S + 0x200, 8},
              {S + 0x10, 8}, {S, 8},     {S + 0x18, 8}, {S, 1}};
  ASSERT_EQ(Fast.Stores.size(), std::size(Want));
  for (size_t I = 0; I < std::size(Want); ++I) {
    EXPECT_EQ(Fast.Stores[I].Addr, Want[I].Addr) << I;
    EXPECT_EQ(Fast.Stores[I].SizeBytes, Want[I].Size) << I;
    EXPECT_EQ(Fast.Stores[I].Agent, StoreAgent::Instruction) << I;
  }
  EXPECT_EQ(Fast.Stores[0].Rip, kCodeBase + 20);
  EXPECT_EQ(Fast.Stores[3].Rip, kCodeBase + 37);
  EXPECT_EQ(Fast.MonitorAfterB, MonitorState::Phase::Triggered);
  EXPECT_EQ(Fast.Rip, kDataBase + 0x80f); // after the two re-decoded instructions
  ASSERT_EQ(Slow.Stores.size(), Fast.Stores.size());
  for (size_t I = 0; I < Fast.Stores.size(); ++I) {
    const WatchedStoreEvent &A = Slow.Stores[I], &B = Fast.Stores[I];
    EXPECT_EQ(A.Cpu, B.Cpu) << I;
    EXPECT_EQ(A.Tsc, B.Tsc) << I;
    EXPECT_EQ(A.Rip, B.Rip) << I;
    EXPECT_EQ(A.Addr, B.Addr) << I;
    EXPECT_EQ(A.SizeBytes, B.SizeBytes) << I;
    EXPECT_EQ(A.Agent, B.Agent) << I;
  }
  EXPECT_TRUE(Slow.Page == Fast.Page);
  EXPECT_EQ(Slow.MonitorAfterB, Fast.MonitorAfterB);
  EXPECT_EQ(Slow.Rip, Fast.Rip);
  EXPECT_EQ(Slow.Cycles, Fast.Cycles);
}
