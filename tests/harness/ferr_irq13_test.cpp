// The PC's legacy x87 error reporting (SDM Vol. 1, Appendix D, "MS-DOS Compatibility
// Sub-mode"; harness/devices/coprocessor_error.h, cpu/x87.h): a 32-bit guest clears
// CR0.NE, unmasks divide-by-zero and divides by zero; the next waiting instruction (FWAIT)
// asserts FERR# and freezes before executing; the chipset raises IRQ 13 (the slave 8259's
// IR5), whose handler, entered with the FWAIT's address as return address, writes port
// F0h (IRQ 13 lowered, IGNNE# asserted) and, in the first test, clears the exception
// (FNCLEX: FERR# and IGNNE# deasserted); the FWAIT then runs again and completes.
#include "harness/machine.h"
#include "tests/support/flat_guest.h"

#include <gtest/gtest.h>

using namespace vmxsim;

namespace {

constexpr uint32_t kBase = 0x10000, kHandler = 0x10080, kCw = 0x10100;
constexpr uint32_t kDone = 0x10200, kCount = 0x10204, kReturnEip = 0x10208, kFsw = 0x1020c;
constexpr uint8_t kSlaveBase = 0x28, kIrq13Vector = kSlaveBase + 5;
constexpr uint32_t kFwait = kBase + 23; ///< the FWAIT in kMain

// fninit; mov eax, cr0; and eax, ~CR0.NE; mov cr0, eax; fldcw [kCw] (ZE unmasked); fld1;
// fldz; fdivp (ZE: ES set); fwait; nop; fnstsw [kFsw]; fnclex; mov dword [kDone], 1; hlt
const std::vector<uint8_t> kMain = {
    0xdb, 0xe3,                                     // +0  fninit
    0x0f, 0x20, 0xc0,                               // +2  mov eax, cr0
    0x83, 0xe0, 0xdf,                               // +5  and eax, ~0x20
    0x0f, 0x22, 0xc0,                               // +8  mov cr0, eax
    0xd9, 0x2d, 0x00, 0x01, 0x01, 0x00,             // +11 fldcw [0x10100]
    0xd9, 0xe8,                                     // +17 fld1
    0xd9, 0xee,                                     // +19 fldz
    0xde, 0xf9,                                     // +21 fdivp st(1), st(0): 1/0
    0x9b,                                           // +23 fwait
    0x90,                                           // +24 nop
    0xdd, 0x3d, 0x0c, 0x02, 0x01, 0x00,             // +25 fnstsw [0x1020c]
    0xdb, 0xe2,                                     // +31 fnclex
    0xc7, 0x05, 0x00, 0x02, 0x01, 0x00, 1, 0, 0, 0, // +33 mov dword [0x10200], 1
    0xf4,                                           // +43 hlt
};

/// The IRQ 13 handler: out 0xf0, al; [fnclex]; EOI to the slave and the master; count;
/// record the return EIP; iret.
std::vector<uint8_t> handler(bool Fnclex) {
  std::vector<uint8_t> H = {0xe6, 0xf0}; // out 0xf0, al
  if (Fnclex)
    H.insert(H.end(), {0xdb, 0xe2});
  H.insert(H.end(), {
                        0xb0, 0x20, 0xe6, 0xa0, 0xe6, 0x20, // EOIs
                        0xff, 0x05, 0x04, 0x02, 0x01, 0x00, // inc dword [0x10204]
                        0x8b, 0x04, 0x24,                   // mov eax, [esp]
                        0xa3, 0x08, 0x02, 0x01, 0x00,       // mov [0x10208], eax
                        0xcf,                               // iret
                    });
  return H;
}

std::unique_ptr<Machine> ferrMachine(bool Fnclex) {
  MachineConfig Cfg;
  Cfg.Serial = OutputSpec::capture();
  Cfg.Debugcon = OutputSpec::capture();
  Cfg.KernelImage = kMain;
  Cfg.FlatAddr = kBase;
  Cfg.FlatMode = EntryMode::Prot32;
  Cfg.MaxInsns = 10000;
  Error Err;
  auto M = Machine::create(Cfg, Err);
  EXPECT_TRUE(M) << Err.str();
  if (!M)
    return M;
  const std::vector<uint8_t> H = handler(Fnclex);
  EXPECT_TRUE(M->mem().copyIn(Hpa(kHandler), H.data(), H.size()));
  const uint16_t Cw = 0x037b; // every exception masked but ZE
  EXPECT_TRUE(M->mem().copyIn(Hpa(kCw), &Cw, 2));
  EXPECT_TRUE(test::installInterruptGate(*M, kIrq13Vector, kHandler));
  test::initPic(*M, false, 0x20, 0xfb);           // master: only the cascade (IR2)
  test::initPic(*M, true, kSlaveBase, 0xdf);      // slave: only IR5, IRQ 13
  M->bsp().S.Rflags |= rflags::IF;
  return M;
}

uint32_t rd32(Machine &M, uint64_t Addr) { return uint32_t(M.mem().read(Hpa(Addr), 4)); }

} // namespace

TEST(LegacyX87Errors, WaitingInstructionFreezesAndIrq13ItsHandlerClearsTheError) {
  auto M = ferrMachine(/*Fnclex=*/true);
  ASSERT_TRUE(M);
  const RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::Halted) << R.describe();
  EXPECT_EQ(M->bsp().S.Rip, kBase + 44u);
  EXPECT_EQ(rd32(*M, kCount), 1u);          // IRQ 13 once
  EXPECT_EQ(rd32(*M, kReturnEip), kFwait);  // taken before the FWAIT executed
  EXPECT_EQ(rd32(*M, kDone), 1u);
  EXPECT_EQ(rd32(*M, kFsw) & 0x80, 0u);     // the handler's FNCLEX cleared ES
  EXPECT_FALSE(M->bsp().Ignne);             // ... and so IGNNE#
  // 13 instructions of the main line before the HLT (the frozen FWAIT once, when it ran),
  // 9 of the handler with its FNCLEX, and the HLT.
  EXPECT_EQ(R.Retired, 13u + 9u + 1u);
  // Deterministic: the same run again.
  auto M2 = ferrMachine(true);
  ASSERT_TRUE(M2);
  const RunResult R2 = M2->run();
  EXPECT_EQ(R2.Retired, R.Retired);
  EXPECT_EQ(M2->bsp().Cycles, M->bsp().Cycles);
}

TEST(LegacyX87Errors, PortF0AssertsIgnneSoTheWaitingInstructionRunsUntilEsClears) {
  auto M = ferrMachine(/*Fnclex=*/false);
  ASSERT_TRUE(M);
  const RunResult R = M->run();
  EXPECT_EQ(R.Reason, RunReason::Halted) << R.describe();
  EXPECT_EQ(M->bsp().S.Rip, kBase + 44u);
  EXPECT_EQ(rd32(*M, kCount), 1u); // IGNNE#: the FWAIT ran the second time, no new IRQ 13
  EXPECT_EQ(rd32(*M, kReturnEip), kFwait);
  EXPECT_EQ(rd32(*M, kFsw) & 0x80, 0x80u); // ES still set after the FWAIT
  EXPECT_FALSE(M->bsp().Ignne);            // the main line's FNCLEX deasserted it
  EXPECT_EQ(R.Retired, 13u + 8u + 1u);
}
