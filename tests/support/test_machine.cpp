#include "tests/support/test_machine.h"

#include <cstring>

namespace vmxsim::test {

namespace {
// Builds a code/data descriptor (SDM Vol. 3A, Segment Descriptors).
uint64_t descriptor(uint32_t Base, uint32_t Limit, uint8_t Access, uint8_t Flags) {
  return (uint64_t(Limit & 0xffff)) | (uint64_t(Base & 0xffffff) << 16) |
         (uint64_t(Access) << 40) | (uint64_t((Limit >> 16) & 0xf) << 48) |
         (uint64_t(Flags & 0xf) << 52) | (uint64_t(Base >> 24) << 56);
}
Segment cached(uint16_t Sel, uint64_t Base, uint32_t Limit, uint32_t Attr) {
  return Segment{Sel, Base, Limit, Attr};
}
/// The flat protected-mode set-up shared by setupLongMode and setupProtected32, called
/// after they set the control registers: the GDT and an empty IDT, CS = CodeSel with
/// CodeAttr, every data segment flat over 4 GiB, a busy-TSS placeholder in TR, RFLAGS at its
/// reset value, the stack at kStackTop; then the TLB is flushed and the decode mode
/// recomputed.
void enterFlat(Cpu &C, uint16_t CodeSel, uint32_t CodeAttr) {
  CpuState &S = C.S;
  S.Gdtr = TableReg{kGdtBase, 10 * 8 - 1};
  S.Idtr = TableReg{kIdtBase, 0};
  S.seg(SegReg::CS) = cached(CodeSel, 0, 0xffffffff, CodeAttr);
  for (SegReg R : {SegReg::DS, SegReg::ES, SegReg::SS, SegReg::FS, SegReg::GS})
    S.seg(R) = cached(kSelData, 0, 0xffffffff, 0x93 | Segment::DB | Segment::G);
  S.Tr = cached(0, 0, 0x67, 0x8b);
  S.Rflags = rflags::Fixed1;
  S.Gpr[RSP] = kStackTop;
  C.Mmu.flushTlb();
  C.modeChanged();
}
} // namespace

void writeFlatGdt(PhysMem &Mem) {
  const uint64_t Gdt[10] = {
      0,
      descriptor(0, 0xfffff, 0x9b, 0xa), // 0x08 64-bit code, DPL0
      descriptor(0, 0xfffff, 0x93, 0xc), // 0x10 data, DPL0
      descriptor(0, 0xfffff, 0x9b, 0xc), // 0x18 32-bit code
      descriptor(0, 0xffff, 0x9b, 0x0),  // 0x20 16-bit code
      descriptor(0, 0xfffff, 0xfb, 0xa), // 0x28 64-bit code, DPL3
      descriptor(0, 0xfffff, 0xf3, 0xc), // 0x30 data, DPL3
      descriptor(0, 0xfffff, 0xfb, 0xc), // 0x38 32-bit code, DPL3
      0, 0,                              // 0x40 TSS (16 bytes in long mode), left empty
  };
  Mem.copyIn(Hpa(kGdtBase), Gdt, sizeof(Gdt));
}

void setupLongMode(Cpu &C, PhysMem &Mem) {
  // PML4[0] -> PDPT; PDPT[0..3] -> 4 PDs of 512 x 2 MiB pages: identity 0..4 GiB.
  const uint64_t Pdpt = kPml4Base + 0x1000, Pd = kPml4Base + 0x2000;
  auto put = [&](uint64_t Addr, uint64_t V) { Mem.copyIn(Hpa(Addr), &V, 8); };
  put(kPml4Base, Pdpt | 0x7);
  for (uint64_t I = 0; I < 4; ++I) {
    put(Pdpt + I * 8, (Pd + I * 0x1000) | 0x7);
    for (uint64_t J = 0; J < 512; ++J)
      put(Pd + I * 0x1000 + J * 8, ((I * 512 + J) << 21) | 0x87); // P RW US PS
  }
  CpuState &S = C.S;
  S.Cr0 = cr0::PE | cr0::MP | cr0::ET | cr0::NE | cr0::WP | cr0::PG;
  S.Cr4 = cr4::PAE | cr4::OSFXSR | cr4::OSXMMEXCPT;
  S.Cr3 = kPml4Base;
  S.Efer = efer::LME | efer::LMA | efer::NXE | efer::SCE;
  enterFlat(C, kSelCode64, 0x9b | Segment::L | Segment::G);
}

TestMachine::TestMachine(uint64_t RamBytes, const CpuModel &Model)
    : Mem(RamBytes), Cpu_(Mem, Io, Model), S(Cpu_.S) {
  writeFlatGdt(Mem);
}

void TestMachine::write(uint64_t Gpa_, const void *Src, uint64_t Size) {
  Mem.copyIn(Hpa(Gpa_), Src, Size);
}

uint64_t TestMachine::read64(uint64_t Gpa_) {
  uint64_t V = 0;
  Mem.copyOut(Hpa(Gpa_), &V, 8);
  return V;
}

void TestMachine::setupLongMode() { test::setupLongMode(Cpu_, Mem); }

void TestMachine::setupProtected32() {
  S.Cr0 = cr0::PE | cr0::MP | cr0::ET | cr0::NE;
  S.Cr4 = cr4::OSFXSR | cr4::OSXMMEXCPT;
  S.Efer = 0;
  enterFlat(Cpu_, kSelCode32, 0x9b | Segment::DB | Segment::G);
}

void TestMachine::setupReal() {
  Cpu_.reset();
  const uint16_t Sel = uint16_t(kCodeBase >> 4);
  S.seg(SegReg::CS) = cached(Sel, kCodeBase, 0xffff, 0x9b);
  for (SegReg R : {SegReg::DS, SegReg::ES, SegReg::SS, SegReg::FS, SegReg::GS})
    S.seg(R) = cached(0, 0, 0xffff, 0x93);
  S.Idtr = TableReg{0, 0x3ff};
  S.Gpr[RSP] = kStackTop & 0xffff;
  Cpu_.modeChanged();
}

void TestMachine::loadCode(const std::vector<uint8_t> &Bytes) {
  write(kCodeBase, Bytes.data(), Bytes.size());
  S.Rip = (S.Cr0 & cr0::PE) ? kCodeBase : 0;
  Cpu_.modeChanged();
}

} // namespace vmxsim::test
