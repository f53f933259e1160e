// Read watches (PhysMem::watchReads, cpu/mmu.cpp, cpu/memory.cpp): every read of data
// through a linear address that touches a read-watched range is reported with its RIP,
// whatever path it takes (a first read, a repeated one that would hit a fast read entry,
// a read-modify-write operand, PUSH from memory, POP, REP MOVS's source, a descriptor
// load, a VMX instruction's memory operand, an event delivery's IDT gate); no write, no
// read of neighbouring bytes, no page-walk read of a paging entry, no instruction fetch
// and no read of a VMCS region by VMCLEAR/VMPTRLD is; the watched page never gets a fast
// read or write TLB entry, and a page watched after its entries were filled loses them.
#include "tests/support/test_machine.h"
#include "tests/support/vmx_test_machine.h"
#include "tests/support/watch_log.h"

#include <gtest/gtest.h>

#include <vector>

using namespace vmxsim;
using namespace vmxsim::test;

namespace {

struct Want {
  uint64_t Rip, Addr;
  unsigned Size;
};

void expectLoads(const WatchLog &Log, const std::vector<Want> &Wants) {
  ASSERT_EQ(Log.Loads.size(), Wants.size());
  for (size_t I = 0; I < Wants.size(); ++I) {
    EXPECT_EQ(Log.Loads[I].Rip, kCodeBase + Wants[I].Rip) << I;
    EXPECT_EQ(Log.Loads[I].Addr, Wants[I].Addr) << I;
    EXPECT_EQ(Log.Loads[I].SizeBytes, Wants[I].Size) << I;
    EXPECT_EQ(Log.Loads[I].Cpu, 0u) << I;
  }
}

constexpr uint64_t kWatched = kDataBase + 0x100;

// The program of the first two tests (RBX = kWatched, the stack at kStackTop).
const std::vector<uint8_t> kReads = {
    0x48, 0x8b, 0x03,                         // +0  mov rax, [rbx]
    0x48, 0x8b, 0x03,                         // +3  mov rax, [rbx]    (again)
    0x48, 0x8b, 0x4b, 0x08,                   // +6  mov rcx, [rbx+8]  (the bytes after)
    0x8a, 0x53, 0xff,                         // +10 mov dl, [rbx-1]   (the byte before)
    0x48, 0x89, 0x03,                         // +13 mov [rbx], rax    (a write)
    0x48, 0x01, 0x03,                         // +16 add [rbx], rax    (read-modify-write)
    0xff, 0x33,                               // +19 push qword [rbx]
    0x59,                                     // +21 pop rcx
    0x48, 0x89, 0xde,                         // +22 mov rsi, rbx
    0x48, 0x8d, 0xbb, 0x00, 0x02, 0x00, 0x00, // +25 lea rdi, [rbx+0x200]
    0xb9, 0x10, 0x00, 0x00, 0x00,             // +32 mov ecx, 16
    0xf3, 0xa4,                               // +37 rep movsb (16 bytes from kWatched)
    0x66, 0xb8, 0x10, 0x00,                   // +39 mov ax, 0x10
    0x8e, 0xd8,                               // +43 mov ds, ax (reads GDT entry 2)
    0xf4,                                     // +45 hlt
};

/// A long-mode machine whose transition observer logs the watched reads, RBX = kWatched.
class ReadWatch : public ::testing::Test {
protected:
  void SetUp() override {
    M.setupLongMode();
    M.Cpu_.Transitions = &Log;
    M.S.Gpr[RBX] = kWatched;
  }
  TestMachine M;
  WatchLog Log;
};

} // namespace

TEST_F(ReadWatch, EveryReadOfAWatchedRangeIsReportedWithItsRipAndNothingElse) {
  M.loadCode(kReads);
  M.Mem.watchReads(Hpa(kWatched), 8);
  M.Mem.watchReads(Hpa(kStackTop - 8), 8);      // the slot PUSH writes and POP reads
  M.Mem.watchReads(Hpa(kGdtBase + 0x10), 8);    // the data descriptor MOV DS loads
  // What is not reported: the page walks' reads of the PDEs mapping the code and the
  // data (2 MiB pages 0 and 1), and the fetch of the first instruction's bytes.
  M.Mem.watchReads(Hpa(kPml4Base + 0x2000), 16);
  M.Mem.watchReads(Hpa(kCodeBase), 3);
  ASSERT_EQ(M.run(100), StopReason::Halted);
  ASSERT_EQ(M.S.Rip, kCodeBase + 46);
  std::vector<Want> Wants = {
      {0, kWatched, 8},            // mov rax, [rbx]
      {3, kWatched, 8},            // the same again (no TLB entry was filled)
      {16, kWatched, 8},           // add [rbx], rax reads it
      {19, kWatched, 8},           // push qword [rbx] reads it
      {21, kStackTop - 8, 8},      // pop rcx reads what the push wrote
  };
  for (unsigned K = 0; K < 8; ++K) // rep movsb: each byte of the range once, from its RIP
    Wants.push_back({37, kWatched + K, 1});
  Wants.push_back({43, kGdtBase + 0x10, 8}); // the descriptor MOV DS loads
  expectLoads(Log, Wants);
  // The watched pages have no fast read or write entry (NothingWatched... below: they
  // have one without the watches).
  EXPECT_EQ(M.Cpu_.Mmu.readHost(Gla(kWatched), 8, false), nullptr);
  EXPECT_EQ(M.Cpu_.Mmu.writeMappedFrame(Gla(kWatched)), kTlbEmpty);
  EXPECT_EQ(M.Cpu_.Mmu.readHost(Gla(kStackTop - 8), 8, false), nullptr);
  // The copy is exact: the reads through the slow path read what the fast path would.
  EXPECT_EQ(M.read64(kWatched + 0x200), M.read64(kWatched));
}

TEST_F(ReadWatch, NothingWatchedNothingReportedAndTheFastPathIsUsed) {
  M.loadCode(kReads);
  ASSERT_EQ(M.run(100), StopReason::Halted);
  EXPECT_TRUE(Log.Loads.empty());
  EXPECT_NE(M.Cpu_.Mmu.readHost(Gla(kWatched), 8, false), nullptr);
  EXPECT_NE(M.Cpu_.Mmu.readHost(Gla(kStackTop - 8), 8, false), nullptr);
  EXPECT_FALSE(M.Mem.readWatching());
}

TEST_F(ReadWatch, APageWatchedAfterItsEntriesWereFilledLosesThemAndUnwatchingStopsReports) {
  M.loadCode({
      0x48, 0x8b, 0x03, // +0 mov rax, [rbx]  (fills the read entry)
      0x48, 0x01, 0x03, // +3 add [rbx], rax  (fills the write entry)
      0x48, 0x8b, 0x03, // +6 mov rax, [rbx]  (watched now)
      0x48, 0x01, 0x03, // +9 add [rbx], rax
      0x48, 0x8b, 0x03, // +12 mov rax, [rbx] (unwatched again)
      0xf4,             // +15 hlt
  });
  ASSERT_EQ(M.run(2), StopReason::InsnLimit);
  ASSERT_NE(M.Cpu_.Mmu.readHost(Gla(kWatched), 8, false), nullptr);
  ASSERT_NE(M.Cpu_.Mmu.writeMappedFrame(Gla(kWatched)), kTlbEmpty);
  M.Mem.watchReads(Hpa(kWatched), 1);
  M.Cpu_.Mmu.dropDataMappings(kWatched >> 12);
  EXPECT_EQ(M.Cpu_.Mmu.readHost(Gla(kWatched), 8, false), nullptr);
  EXPECT_EQ(M.Cpu_.Mmu.writeMappedFrame(Gla(kWatched)), kTlbEmpty);
  ASSERT_EQ(M.run(2), StopReason::InsnLimit);
  ASSERT_TRUE(M.Mem.unwatchReads(Hpa(kWatched), 1));
  EXPECT_FALSE(M.Mem.unwatchReads(Hpa(kWatched), 1));
  ASSERT_EQ(M.run(10), StopReason::Halted);
  expectLoads(Log, {{6, kWatched, 8}, {9, kWatched, 8}});
}

// The processor's reads by physical address are not reported: VMCLEAR and VMPTRLD read
// their 64-bit operand through its linear address (reported), and the VMCS region's
// revision identifier and contents by physical address (not reported).
TEST(ReadWatchVmx, VmxInstructionsOperandsCountTheirVmcsRegionsReadsDoNot) {
  VmxTestMachine M;
  WatchLog Log;
  M.Cpu_.Transitions = &Log;
  for (uint64_t Pa : {kPointerSlot, kVmcsRegion2}) {
    M.Mem.watchReads(Hpa(Pa), 8);
    M.Cpu_.Mmu.dropDataMappings(Pa >> 12);
  }
  ASSERT_FALSE(M.execWithPointer(enc::VmclearRax, kVmcsRegion2).Faulted);
  ASSERT_FALSE(M.execWithPointer(enc::VmptrldRax, kVmcsRegion2).Faulted);
  ASSERT_EQ(M.vmx().CurrentVmcsPointer, kVmcsRegion2);
  expectLoads(Log, {{0, kPointerSlot, 8}, {0, kPointerSlot, 8}});
}

// An event's delivery reads its IDT gate through the IDT's linear address (reported,
// with the RIP of the instruction that raised it); the handler's first instruction has
// not run.
TEST_F(ReadWatch, AnEventsDeliveryReportsItsIdtGateRead) {
  // IDT gate 3: a 64-bit interrupt gate to kCodeBase + 0x10 (hlt), CS = kSelCode64.
  const uint64_t Handler = kCodeBase + 0x10;
  const uint64_t Gate[2] = {(Handler & 0xffff) | uint64_t(kSelCode64) << 16 |
                                uint64_t(0x8e) << 40 | ((Handler >> 16) & 0xffff) << 48,
                            Handler >> 32};
  M.write(kIdtBase + 3 * 16, Gate, 16);
  M.S.Idtr = TableReg{kIdtBase, 4 * 16 - 1};
  std::vector<uint8_t> Code(0x11, 0x90);
  Code[0] = 0xcc; // int3
  Code[0x10] = 0xf4;
  M.loadCode(Code);
  M.Mem.watchReads(Hpa(kIdtBase + 3 * 16), 16);
  ASSERT_EQ(M.run(10), StopReason::Halted);
  ASSERT_EQ(M.S.Rip, Handler + 1);
  expectLoads(Log, {{0, kIdtBase + 48, 8}, {0, kIdtBase + 56, 8}});
}
