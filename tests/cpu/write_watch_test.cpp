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
